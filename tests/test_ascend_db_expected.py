"""The SQLite reader's tables on the real .db fixtures, value for value, as the reader gave them
before it was made fast on big exports (issue 10): perfgate at cde6c4f wrote
tests/data/ascend_db/expected_tables.json (the internal tables handed to ``assemble``, with
their provenance, and the profile's tables, notes and metadata). Floats are compared exactly.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from perfgate.ingest import ascend_db
from perfgate.ingest.assemble import Part, assemble
from perfgate.model import SOURCE_COLUMN

DATA = Path(__file__).parent / "data"
EXPECTED = json.loads((DATA / "ascend_db/expected_tables.json").read_text(encoding="utf-8"))


def _cell(value: Any) -> Any:
    if value is None:
        return None
    if value is pd.NA:
        return {"NA": True}
    if isinstance(value, float) and not math.isfinite(value):
        return {"float": repr(value)}
    return value.item() if hasattr(value, "item") else value


def _table(frame: pd.DataFrame) -> dict[str, Any]:
    columns = {
        column: [s.row for s in frame[column]]
        if column == SOURCE_COLUMN
        else [_cell(v) for v in frame[column].astype(object)]
        for column in frame.columns
    }
    return {"dtypes": {c: str(t) for c, t in frame.dtypes.items()}, "columns": columns}


def _with_later_rules(table: dict[str, Any]) -> dict[str, Any]:
    """The expected table with the rules changed since cde6c4f applied: DSA_SQE tasks are
    compute (2026-12-06; the profiler's Computing counts them, see test_ingest_ascend_db)."""
    columns = table["columns"]
    if "category" not in columns or "core" not in columns:
        return table
    category = [
        "compute" if core == "DSA_SQE" else cat
        for core, cat in zip(columns["core"], columns["category"])
    ]
    return {**table, "columns": {**columns, "category": category}}


@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_tables_are_those_of_the_reader_before_issue_10(
    case: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    parts: list[Part] = []
    real = assemble

    def spy(path: Path, source: str, given: list[Part], **kwargs: Any) -> Any:
        parts.extend(given)
        return real(path, source, given, **kwargs)

    monkeypatch.setattr(ascend_db, "assemble", spy)
    profile = ascend_db.read(DATA / case)
    (part,) = parts
    expected = EXPECTED[case]
    for label, frame in (
        ("tasks", part.tasks),
        ("steps", part.steps),
        ("profile_tasks", profile.tasks),
        ("profile_steps", profile.steps),
    ):
        got = _table(frame)
        wanted = _with_later_rules(expected[label])
        assert got["dtypes"] == wanted["dtypes"], label
        for column, values in wanted["columns"].items():
            assert got["columns"][column] == values, f"{label}.{column}"
    assert profile.notes == expected["notes"]
    assert profile.metadata == expected["metadata"]


def test_a_few_figures_by_hand() -> None:
    """Spot checks of the saved expectation itself (from the sqlite3 shell on the fixture)."""
    torch = EXPECTED["ascend_db/pytorch_db_level1_rank0_ascend_pt"]
    assert len(torch["tasks"]["columns"]["name"]) == 243
    assert torch["profile_steps"]["columns"]["step"] == [50]
    msprof = EXPECTED["ascend_db/msprof_full_db"]
    assert len(msprof["tasks"]["columns"]["name"]) == 24
    assert msprof["metadata"]["ranks"] == [2]

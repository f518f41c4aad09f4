"""``perfgate inspect --format json`` writes its document faster than ``json.dumps(indent=2)``
but must write the very same text."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfgate.analysis.metrics import analyze
from perfgate.ingest import load_profile
from perfgate.report.inspect import _Columns, dumps_indented, inspect_document, inspect_json

DATA = Path(__file__).parent / "data"
PROFILES = [
    "torch_npu/ascend-msinsight/pytorch_text_level1_rank0_ascend_pt",
    "msprof/ascend-msprof-skill/PROF_000001_20260605161708478_FRJKORBPFMHQMGLA",
    "ascend_db/msprof_full_db",
    "ascend_timeline/trace_view.json",
    "kineto/sampled_rank-0.json.gz",
    "kineto/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz",
]


@pytest.mark.parametrize("relative", PROFILES)
@pytest.mark.parametrize("top", [None, 3])
def test_inspect_json_is_json_dumps_of_the_document(relative: str, top: int | None) -> None:
    profile = load_profile(DATA / relative)
    analysis = analyze(profile)
    expected = json.dumps(inspect_document(profile, analysis, top=top), indent=2) + "\n"
    assert inspect_json(profile, analysis, top=top) == expected


_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(alphabet=st.characters(codec="utf-8"), max_size=12),
    st.sampled_from(['", "', "}, {", "\\", '"', ", ", "\n", "é", "\x00", "NaN", "null"]),
)


@st.composite
def documents(draw: Any) -> dict[str, Any]:
    keys = draw(st.lists(st.text(max_size=6), min_size=1, max_size=5, unique=True))
    n = draw(st.integers(0, 6))
    # Columns of one kind (numbers or strings, as a DataFrame's), sometimes mixed on purpose.
    rows = [{k: draw(_SCALARS) for k in keys} for _ in range(n)]
    if draw(st.booleans()) and rows:
        rows[-1] = {**rows[-1], "extra": 1}  # rows that differ: the plain encoder's job
    if draw(st.booleans()) and rows:
        rows[0] = {keys[0]: [1, 2], **{k: v for k, v in rows[0].items() if k != keys[0]}}
    return {
        "schema": "perfgate.inspect",
        "per_step": rows,
        "operators": rows[:2],
        "empty": [],
        "nested": {"a": [1, 2.5, None], "b": {}},
        "notes": ["x", "y"],
    }


@settings(max_examples=300, deadline=None)
@given(documents())
def test_dumps_indented_is_json_dumps_indent_2(document: dict[str, Any]) -> None:
    assert dumps_indented(document) == json.dumps(document, indent=2, allow_nan=False)


def test_columns_of_numbers_keep_every_digit() -> None:
    rows = [
        {"step": 1, "t": 0.1 + 0.2, "r": 1.5, "b": True, "s": "tasks"},
        {"step": 2, "t": 1e300, "r": -2.5e-10, "b": False, "s": None},
        {"step": 3, "t": -0.0, "r": 5e-324, "b": None, "s": 'a", "b'},
    ]
    document = {"per_step": rows}
    assert dumps_indented(document) == json.dumps(document, indent=2)


@pytest.mark.parametrize("special", [math.nan, math.inf, -math.inf])
def test_a_non_finite_number_is_refused_never_written_as_invalid_json(special: float) -> None:
    # The document builder turns them into null first; one reaching the writer is a bug.
    rows = [{"step": 1, "r": 1.0}, {"step": 2, "r": special}]
    with pytest.raises(ValueError, match="not JSON compliant"):
        dumps_indented({"per_step": rows})


# Numbers as measurements are: the range where orjson (the fast extra) writes the column.
_MEASURED = st.one_of(
    st.floats(min_value=1e-4, max_value=1e16, exclude_max=True),
    st.floats(min_value=-1e16, max_value=-1e-4, exclude_min=True),
    st.sampled_from([0.0, -0.0, 1e-4, 0.1 + 0.2, 9999999999999998.0, 5e-05, 1e16]),
    st.integers(-(2**63), 2**64 - 1),
    st.none(),
    st.booleans(),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(_MEASURED, _MEASURED), min_size=1, max_size=40))
def test_columns_of_measured_numbers_are_written_as_json_writes_them(
    pairs: list[tuple[Any, Any]],
) -> None:
    document = {"per_step": [{"a": a, "b": b} for a, b in pairs]}
    assert dumps_indented(document) == json.dumps(document, indent=2, allow_nan=False)


def test_without_orjson_the_text_is_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    profile = load_profile(DATA / PROFILES[1])
    analysis = analyze(profile)
    with_orjson = inspect_json(profile, analysis)
    monkeypatch.setattr("perfgate.report.inspect._orjson_dumps", None)
    assert inspect_json(profile, analysis) == with_orjson
    assert with_orjson == json.dumps(inspect_document(profile, analysis), indent=2) + "\n"


def test_numbers_of_every_magnitude_are_written_as_json_writes_them() -> None:
    # One column per power of ten: each is written fast or given back to json on its own.
    magnitudes = range(-324, 308)
    rows = [
        {f"e{k}": sign * mantissa * 10.0**k for k in magnitudes}
        for sign in (1, -1)
        for mantissa in (1.0, 1.5, 9.999999999999999)
    ]
    document = {"per_step": rows}
    assert dumps_indented(document) == json.dumps(document, indent=2, allow_nan=False)


@settings(max_examples=200, deadline=None)
@given(documents())
def test_tables_kept_as_columns_are_written_as_their_rows(document: dict[str, Any]) -> None:
    rows = document["per_step"]
    if not rows or any(list(row) != list(rows[0]) for row in rows):
        return  # columns are made of frames: rows of one set of keys
    keys = list(rows[0])
    columns = _Columns(keys, [[row[k] for row in rows] for k in keys])
    expected = json.dumps(document, indent=2, allow_nan=False)
    assert dumps_indented({**document, "per_step": columns}) == expected


def test_keys_with_format_characters_are_written_as_they_are() -> None:
    rows = [{"%s": 1.5, "%%": "a%sb", "%(x)d": None}, {"%s": 2.0, "%%": "%", "%(x)d": 3}]
    document = {"per_step": rows, "steps": {"ids": [1, 2, 3], "names": ["%s", "%"]}}
    assert dumps_indented(document) == json.dumps(document, indent=2)

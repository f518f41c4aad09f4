"""tasks_not_in (one task seen by two sources is counted once) against the rule written out
row by row, on random tables shaped like op_summary + task_time: streams with reused task
ids, names, cores, missing ids, ids as text, numbers, nullable integers or categoricals on
either side."""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from perfgate.ingest.common import _combined_codes, concat_frames, tasks_not_in

KEYS = (("stream", "task_id"), ("stream", "name"), ("stream", "core"), ("name",))


def _known(value: object) -> bool:
    return (
        value is not None
        and value is not pd.NA
        and not (isinstance(value, float) and math.isnan(value))
    )


def _text(value: object) -> object:
    """An id as text; a whole float (an integer column with a missing cell) as its integer."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value) if _known(value) else None


def _reference(candidates: pd.DataFrame, seen: pd.DataFrame) -> list[int]:
    """Positions of the candidates that are no seen task: per key, the seen rows of the same
    rank and key that start last at or before the candidate and first at or after it."""
    mine_rows: list[dict[str, Any]] = candidates.to_dict("records")  # type: ignore[assignment]
    seen_rows: list[dict[str, Any]] = seen.to_dict("records")  # type: ignore[assignment]

    def same(a: dict[str, Any], b: dict[str, Any], column: str) -> bool:
        if column in ("stream", "task_id"):  # ids are compared as text
            return bool(_text(a[column]) == _text(b[column]))
        return bool(a[column] == b[column])

    duplicate = [False] * len(mine_rows)
    for keys in KEYS:
        for i, mine in enumerate(mine_rows):
            if duplicate[i] or not all(_known(mine[k]) for k in keys):
                continue
            same_key = [
                theirs
                for theirs in seen_rows
                if theirs["rank"] == mine["rank"]
                and all(_known(theirs[k]) and same(mine, theirs, k) for k in keys)
            ]
            before = [t for t in same_key if t["start_us"] <= mine["start_us"]]
            after = [t for t in same_key if t["start_us"] >= mine["start_us"]]
            nearest = []
            if before:  # the last of the latest start
                latest = max(t["start_us"] for t in before)
                nearest.append([t for t in before if t["start_us"] == latest][-1])
            if after:  # the first of the earliest start
                earliest = min(t["start_us"] for t in after)
                nearest.append(next(t for t in after if t["start_us"] == earliest))
            for theirs in nearest:
                overlap = (
                    theirs["start_us"] <= mine["start_us"] + mine["dur_us"]
                    and mine["start_us"] <= theirs["start_us"] + theirs["dur_us"]
                )
                ids_agree = all(
                    not (_known(mine[c]) and _known(theirs[c])) or same(mine, theirs, c)
                    for c in ("stream", "task_id")
                    if c not in keys
                )
                if overlap and ids_agree:
                    duplicate[i] = True
    return [i for i, d in enumerate(duplicate) if not d]


def _tasks(draw: st.DrawFn, n: int, ids: str) -> pd.DataFrame:
    """``ids``: "text" (as CSV readers give them), "numbers" (a float column where one is
    missing), "Int64" (integer ids with missing ones, as the .db readers give them), or
    "categorical" (ids as text, and names and cores too, as categoricals: the CSV readers
    of task tables)."""

    def ident(limit: int) -> object:
        value = draw(st.one_of(st.none(), st.integers(0, limit)))
        return str(value) if ids in ("text", "categorical") and value is not None else value

    rows = [
        {
            "rank": draw(st.integers(0, 1)),
            "stream": ident(2),
            "task_id": ident(3),
            "name": draw(st.one_of(st.none(), st.sampled_from(["matmul", "add", "copy"]))),
            "core": draw(st.sampled_from(["AI_CORE", "MEMCPY_ASYNC"])),
            # A coarse grid: equal starts (ties) and touching intervals happen often.
            "start_us": draw(st.integers(0, 12)) * 0.5,
            "dur_us": draw(st.sampled_from([0.0, 0.5, 1.0, 2.0])),
        }
        for _ in range(n)
    ]
    tasks = pd.DataFrame(
        rows, columns=["rank", "stream", "task_id", "name", "core", "start_us", "dur_us"]
    )
    if ids == "Int64":
        tasks = tasks.astype({"stream": "Int64", "task_id": "Int64"})
    if ids == "categorical":
        tasks = tasks.astype({c: "category" for c in ("stream", "task_id", "name", "core")})
    return tasks


ID_KINDS = ("text", "numbers", "Int64", "categorical")


@st.composite
def two_sources(draw: st.DrawFn) -> tuple[pd.DataFrame, pd.DataFrame]:
    candidates = _tasks(draw, draw(st.integers(1, 14)), ids=draw(st.sampled_from(ID_KINDS)))
    seen = _tasks(draw, draw(st.integers(1, 14)), ids=draw(st.sampled_from(ID_KINDS)))
    return candidates, seen


@settings(max_examples=300, deadline=None)
@given(two_sources())
def test_each_candidate_is_kept_or_dropped_as_the_rule_says(
    sources: tuple[pd.DataFrame, pd.DataFrame],
) -> None:
    candidates, seen = sources
    kept = tasks_not_in(candidates, seen)
    assert kept.index.tolist() == _reference(candidates, seen)


def test_a_task_listed_by_both_files_a_few_microseconds_apart_is_dropped_once() -> None:
    # op_summary and task_time of the real msprof fixture: task 0 of stream 1756 starts at
    # …313289.000 in one and …313287.420 in the other; task 1 follows 94 ms later.
    seen = pd.DataFrame(
        {
            "rank": [0, 0],
            "stream": ["1756", "1756"],
            "task_id": ["0", "1"],
            "name": ["main_kernel"] * 2,
            "core": ["MIX_AIC"] * 2,
            "start_us": [289.000, 94387.120],
            "dur_us": [87139.380, 86808.420],
        }
    )
    candidates = seen.assign(
        start_us=[287.420, 94386.260, 180754.540][:2], dur_us=[87141.960, 86810.080]
    )
    copy = pd.DataFrame(
        {
            "rank": [0],
            "stream": ["1754"],
            "task_id": ["7"],
            "name": [np.nan],
            "core": ["MEMCPY_ASYNC"],
            "start_us": [300.0],
            "dur_us": [2.0],
        }
    )
    both = pd.concat([candidates, copy], ignore_index=True)
    assert tasks_not_in(both, seen)["task_id"].tolist() == ["7"]
    # A known task id that differs tells two overlapping tasks of one stream apart.
    other = candidates.assign(task_id=["5", "6"])
    assert len(tasks_not_in(other, seen)) == 2


def test_categorical_columns_stay_categorical_when_concatenated() -> None:
    """Name columns of the CSV readers are categoricals with each file's own categories (of
    object or, when pandas made them, ``str`` dtype, or none at all); concatenated they stay
    categorical, each row keeping its value."""
    ops = pd.DataFrame(
        {"name": pd.Categorical.from_codes([0, -1, 1], pd.Index(["mm", "add"], dtype=object))}
    )
    empty = pd.DataFrame({"name": pd.Categorical.from_codes([-1], pd.Index([], dtype="float64"))})
    copies = pd.DataFrame({"name": pd.Categorical(["MEMCPY_ASYNC", "add"])})
    both = concat_frames([ops, empty, copies])
    assert isinstance(both["name"].dtype, pd.CategoricalDtype)
    assert both["name"].astype(object).where(both["name"].notna(), None).tolist() == [
        "mm",
        None,
        "add",
        None,
        "MEMCPY_ASYNC",
        "add",
    ]


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.tuples(*(st.sampled_from([0, 1, 2**20 - 1, 2**30, 2**31 - 1]) for _ in range(3))),
        min_size=1,
        max_size=20,
    )
)
def test_combined_codes_are_equal_exactly_where_the_rows_are(rows: list[tuple[int, ...]]) -> None:
    # Digits this wide pass 2**31 together: the combination is factorized on the way.
    columns = [np.array(column, dtype=np.int64) for column in zip(*rows)]
    combined = _combined_codes(columns)
    assert int(combined.max()) < 2**31
    for i, j in itertools.combinations(range(len(rows)), 2):
        assert (combined[i] == combined[j]) == (rows[i] == rows[j])


_LABELS = st.sampled_from(["aten::add", "MEMCPY_ASYNC", "N/A", "b", None])


@st.composite
def _frames_with_categoricals(draw: Any) -> list[pd.DataFrame]:
    """Frames as the readers give them: name columns categorical (missing values, categories
    in any order, unused ones), a number column, columns that some frames lack, empty frames."""
    frames = []
    for _ in range(draw(st.integers(1, 4))):
        rows = draw(st.integers(0, 6))
        columns: dict[str, Any] = {"dur_us": [float(i) for i in range(rows)]}
        for name in ("op_type", "core", "extra"):
            if name != "op_type" and draw(st.booleans()):
                continue
            values = draw(st.lists(_LABELS, min_size=rows, max_size=rows))
            unused = draw(st.lists(st.sampled_from(["x", "y"]), unique=True))
            categories = list(dict.fromkeys([v for v in values if v is not None] + unused))
            order = draw(st.permutations(categories))
            columns[name] = pd.Categorical(values, categories=order)
        frames.append(pd.DataFrame(columns))
    return frames


@settings(max_examples=300, deadline=None)
@given(frames=_frames_with_categoricals())
def test_concatenated_categoricals_hold_what_pandas_concatenates(
    frames: list[pd.DataFrame],
) -> None:
    """concat_frames unites the categories by hand; as plain values the table is pandas' own
    concatenation, and a column categorical in every non-empty frame that has it stays
    categorical (pandas 2.2 warned, and typed it otherwise than pandas 3, where a frame held
    it all missing and another lacked it)."""
    kept = [f for f in frames if len(f)]
    table = concat_frames(frames)
    if not kept:
        assert table.empty
        return
    as_objects = [f.astype({c: object for c in f.columns if c != "dur_us"}) for f in kept]
    expected = pd.concat(as_objects, ignore_index=True)
    plain = table.astype({c: object for c in table.columns if c != "dur_us"})
    pd.testing.assert_frame_equal(plain, expected)
    for column in table.columns:
        everywhere = all(
            isinstance(f[column].dtype, pd.CategoricalDtype) for f in kept if column in f.columns
        )
        if everywhere:
            assert isinstance(table[column].dtype, pd.CategoricalDtype), column

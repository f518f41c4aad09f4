"""The per-step sums of the SQLite reader, done for every step at once (issue 10), against the
per-step loops they replace, kept here as the oracle: OVERLAP_ANALYSIS clipped to each step
(:func:`ascend_db._overlap_breakdown`) and the union of the tasks inside each step
(:func:`ascend_db._union_per_step`), on the real .db fixtures and on many synthetic steps
(steps with no rows, overlapping, nested, empty and reversed windows, overlapping rows of one
type). Floats are compared exactly.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd
import pytest

from perfgate.ingest import ascend_db
from perfgate.intervals import FloatArray, clip, merge
from perfgate.model import NS_PER_US, TimeBase

DATA = Path(__file__).parent / "data" / "ascend_db"
FIXTURES = {
    "torch_npu": DATA
    / "pytorch_db_level1_rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler_0.db",
    "msprof": DATA / "msprof_full_db/msprof_0.db",
}
IntArray = npt.NDArray[np.int64]

# --------------------------------------------------------------------------- the old loops


def old_finite_rows(table: pd.DataFrame) -> pd.DataFrame:
    numbers = table.apply(  # Series.map: DataFrame.map is pandas 2.1's
        lambda column: pd.to_numeric(column.map(ascend_db._number_or_none), errors="coerce")
    )
    keep = (numbers.abs() <= ascend_db._MAX_NS).all(axis=1)
    return numbers.loc[keep]


def old_windows(steps: pd.DataFrame) -> Iterator[tuple[int, int, int, int]]:
    columns = [steps[c].to_numpy(dtype=np.int64) for c in ("rank", "step", "start_ns", "end_ns")]
    for rank, step, lo, hi in zip(*columns):
        yield int(rank), int(step), int(lo), int(hi)


def old_relative(ns: IntArray, origin_ns: int) -> FloatArray:
    return (ns - np.int64(origin_ns)).astype(np.float64)


def old_covered_us(
    kinds: npt.NDArray[Any], starts: FloatArray, ends: FloatArray, code: int, lo: float, hi: float
) -> float:
    of_type = kinds == code
    clipped_starts, clipped_ends = clip(starts[of_type], ends[of_type], lo, hi)
    return float(np.sum(clipped_ends - clipped_starts)) / NS_PER_US


def old_overlap_breakdown(
    conn: sqlite3.Connection, db: Path, steps: pd.DataFrame, rank_of: dict[int, int]
) -> pd.DataFrame | None:
    sql = "SELECT deviceId, startNs, endNs, type FROM OVERLAP_ANALYSIS"
    table = ascend_db._query(conn, db, sql, "OVERLAP_ANALYSIS")
    table = old_finite_rows(table)
    if not table["type"].isin([0, 1, 2, 3]).all():
        return None
    rank = table["deviceId"].map(lambda d: rank_of.get(int(d), int(d))).to_numpy()
    kind = table["type"].to_numpy()
    start_ns = table["startNs"].to_numpy(dtype=np.int64)
    end_ns = table["endNs"].to_numpy(dtype=np.int64)
    rows: list[dict[str, Any]] = []
    for step_rank, step, lo_ns, hi_ns in old_windows(steps):
        mine = rank == step_rank
        starts, ends = old_relative(start_ns[mine], lo_ns), old_relative(end_ns[mine], lo_ns)
        hi = float(hi_ns - lo_ns)
        busy = np.isin(kind[mine], [0, 1])
        busy_starts, _ = clip(starts[busy], ends[busy], 0.0, hi)
        first = float(busy_starts.min()) if busy_starts.size else hi
        kinds = kind[mine]
        rows.append(
            {
                "rank": step_rank,
                "step": step,
                "computing_us": old_covered_us(kinds, starts, ends, 0, first, hi),
                "communication_us": old_covered_us(kinds, starts, ends, 1, first, hi),
                "comm_not_overlapped_us": old_covered_us(kinds, starts, ends, 2, first, hi),
                "preparing_us": first / NS_PER_US if busy_starts.size else 0.0,
                "free_us": old_covered_us(kinds, starts, ends, 3, first, hi),
            }
        )
    return pd.DataFrame(rows)


def old_union_per_step(
    steps: pd.DataFrame, device: IntArray, start: IntArray, end: IntArray, rank_of: dict[int, int]
) -> pd.Series:
    rank = ascend_db._ranks(device, rank_of)
    covered = []
    for step_rank, _, lo_ns, hi_ns in old_windows(steps):
        mine = rank == step_rank
        s, e = clip(
            old_relative(start[mine], lo_ns),
            old_relative(end[mine], lo_ns),
            0.0,
            float(hi_ns - lo_ns),
        )
        merged_starts, merged_ends = merge(s, e)
        covered.append(float(np.sum(merged_ends - merged_starts)) / NS_PER_US)
    return pd.Series(covered, index=steps.index, dtype="float64")


# --------------------------------------------------------------------------- helpers


def steps_table(ranks: IntArray, lo: IntArray, hi: IntArray) -> pd.DataFrame:
    """The reader's internal steps table (what the per-step functions read of it)."""
    return pd.DataFrame(
        {
            "rank": ranks.astype(np.int64),
            "step": np.arange(1, len(lo) + 1, dtype=np.int64),
            "start_ns": lo.astype(np.int64),
            "end_ns": hi.astype(np.int64),
        }
    )


def random_windows(
    rng: np.random.Generator, lo: int, hi: int, n: int, ranks: list[int]
) -> pd.DataFrame:
    """``n`` windows over ``[lo, hi)`` and a margin: back to back (most), overlapping, nested,
    empty, reversed, outside every row; on ``ranks`` (some with no rows)."""
    span = max(hi - lo, 1)
    edges = np.sort(rng.integers(lo - span // 10, hi + span // 10, size=n + 1))
    starts, ends = edges[:-1].copy(), edges[1:].copy()
    kind = rng.integers(0, 10, size=n)
    long = kind == 0  # reaches over the next few windows
    ends[long] += rng.integers(0, span // 4 + 1, size=int(long.sum()))
    empty = kind == 1
    ends[empty] = starts[empty]
    reversed_ = kind == 2
    ends[reversed_] = starts[reversed_] - rng.integers(1, span // 50 + 2, size=int(reversed_.sum()))
    order = rng.permutation(n)  # not in time order
    return steps_table(rng.choice(ranks, size=n), starts[order], ends[order])


def assert_breakdowns_equal(
    conn: sqlite3.Connection, db: Path, steps: pd.DataFrame, rank_of: dict[int, int]
) -> None:
    schema = ascend_db._Schema(conn, db)
    new = ascend_db._overlap_breakdown(conn, schema, steps, rank_of)
    old = old_overlap_breakdown(conn, db, steps, rank_of)
    assert new is not None and old is not None
    pd.testing.assert_frame_equal(new, old, check_exact=True)


def assert_unions_equal(
    steps: pd.DataFrame, intervals: tuple[IntArray, IntArray, IntArray], rank_of: dict[int, int]
) -> None:
    new = ascend_db._union_per_step(steps, *intervals, rank_of)
    old = old_union_per_step(steps, *intervals, rank_of)
    pd.testing.assert_series_equal(new, old, check_exact=True)


# --------------------------------------------------------------------------- real fixtures


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_real_fixture_steps_and_many_windows_give_what_the_loops_gave(name: str) -> None:
    db = FIXTURES[name]
    with ascend_db._connect(db) as conn:
        schema = ascend_db._Schema(conn, db)
        raw, strings = ascend_db._read_task_rows(conn, schema)
        comm_ops = ascend_db._read_comm_ops(conn, schema)
        rank_of = ascend_db._rank_map(conn, schema)
        clock = TimeBase()
        tasks, busy, _ = ascend_db._build_tasks(db, raw, strings, comm_ops, rank_of, clock)
        ranks = sorted(int(r) for r in pd.unique(tasks["rank"]))
        steps, _ = ascend_db._read_steps(conn, schema, ranks, clock)
        overlap = pd.read_sql_query("SELECT startNs, endNs FROM OVERLAP_ANALYSIS", conn)
        assert len(overlap) and (name == "msprof" or not steps.empty)
        if not steps.empty:  # the msprof fixture's MSTX ranges name no step
            assert_breakdowns_equal(conn, db, steps, rank_of)
            for intervals in (busy.computing, busy.communication):
                assert_unions_equal(steps, intervals, rank_of)
        # Many windows over the fixture's rows, on its ranks and on one with no rows.
        lo = int(min(overlap["startNs"].min(), busy.computing[1].min()))
        hi = int(max(overlap["endNs"].max(), busy.computing[2].max()))
        rng = np.random.default_rng(len(name))
        for n in (1, 7, 400):
            windows = random_windows(rng, lo, hi, n, [*ranks, max(ranks) + 1])
            assert_breakdowns_equal(conn, db, windows, rank_of)
            for intervals in (busy.computing, busy.communication):
                assert_unions_equal(windows, intervals, rank_of)


# --------------------------------------------------------------------------- synthetic


def overlap_rows(rng: np.random.Generator, n_steps: int, step_ns: int) -> pd.DataFrame:
    """Insight-like rows per step (back to back Computing / Free, Communication inside them)
    and noise: rows of one type that overlap, zero-length and reversed rows, devices 0 to 2."""
    base = 1_736_408_883_704_643_212
    per_step = 12
    n = n_steps * per_step
    step = np.repeat(np.arange(n_steps), per_step)
    offset = np.sort(rng.integers(0, step_ns, size=(n_steps, per_step)), axis=1).reshape(-1)
    start = base + step * step_ns + offset
    end = start + rng.integers(0, step_ns // 4, size=n)
    end[rng.random(n) < 0.03] -= step_ns // 2  # reversed
    kind = rng.integers(0, 4, size=n)
    device = rng.choice([0, 0, 0, 1, 2], size=n)
    return pd.DataFrame({"deviceId": device, "startNs": start, "endNs": end, "type": kind})


def write_overlap_db(path: Path, rows: pd.DataFrame, extra: list[tuple[Any, ...]]) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute(
            "CREATE TABLE OVERLAP_ANALYSIS (id INTEGER PRIMARY KEY AUTOINCREMENT, "
            "deviceId integer, startNs integer, endNs integer, type integer)"
        )
        conn.executemany(
            "INSERT INTO OVERLAP_ANALYSIS (deviceId, startNs, endNs, type) VALUES (?,?,?,?)",
            [tuple(int(v) for v in row) for row in rows.itertuples(index=False)] + extra,
        )
    conn.close()


@pytest.mark.parametrize("rows_reader", ["adbc", "chunks"])
@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_many_synthetic_steps_give_what_the_loops_gave(
    seed: int, rows_reader: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Where every cell is an integer (seeds 2, 3) the rows are read as Arrow columns (the
    # fast extra) or a few rows at a time.
    if rows_reader == "adbc":
        pytest.importorskip("adbc_driver_sqlite", reason="the fast extra is not installed")
    else:
        monkeypatch.setattr(ascend_db, "_arrow_integer_rows", lambda db, sql: None)
    monkeypatch.setattr(ascend_db, "_OVERLAP_CHUNK_ROWS", 997)
    rng = np.random.default_rng(seed)
    n_steps, step_ns = 600, 50_000_000
    rows = overlap_rows(rng, n_steps, step_ns)
    db = tmp_path / "overlap.db"
    # Cells the table's reading drops or parses: text numbers, a blob, NULL, a float.
    t0 = int(rows["startNs"].min())
    extra: list[tuple[Any, ...]] = [
        ("0", str(t0 + 5), str(t0 + 900), "3"),
        (0, b"\x00\x01", t0 + 50, 0),
        (0, None, t0 + 50, 0),
        (1, float(t0 + 7_000), float(t0 + 9_000), 1.0),
    ]
    if seed >= 2:  # integers only, one beyond the clock (dropped)
        extra = [(0, -(2**62) - 1, t0 + 50, 0), (1, t0 + 11_000, t0 + 12_000, 2)]
    write_overlap_db(db, rows, extra)
    rank_of = {1: 5} if seed % 2 else {}
    ranks = sorted({ascend_db._ranks(np.array([d]), rank_of)[0].item() for d in (0, 1, 2)})
    lo = t0 + np.arange(n_steps, dtype=np.int64) * step_ns
    hi = lo + step_ns - rng.integers(0, step_ns // 3, size=n_steps)
    back_to_back = steps_table(np.zeros(n_steps, dtype=np.int64), lo, hi)
    # Every rank gets the same windows (as the reader gives them), then a rank with no rows.
    per_rank = pd.concat([back_to_back.assign(rank=r) for r in [*ranks, 99]], ignore_index=True)
    mixed = random_windows(rng, t0, t0 + n_steps * step_ns, 900, [*ranks, 99])
    intervals = (
        rows["deviceId"].to_numpy(dtype=np.int64),
        rows["startNs"].to_numpy(dtype=np.int64),
        rows["endNs"].to_numpy(dtype=np.int64),
    )
    with ascend_db._connect(db) as conn:
        for steps in (back_to_back, per_rank, mixed):
            assert_breakdowns_equal(conn, db, steps, rank_of)
            assert_unions_equal(steps, intervals, rank_of)


def test_no_rows_and_no_windows() -> None:
    none = np.array([], dtype=np.int64)
    assert ascend_db._overlap_sums(none, none, np.array([0, 5]), np.array([3, 9])).tolist() == [
        0,
        0,
    ]
    assert ascend_db._overlap_sums(np.array([1]), np.array([4]), none, none).tolist() == []
    found, first = ascend_db._first_inside(none, none, np.array([0, 5]), np.array([3, 4]))
    assert found.tolist() == [False, False]
    assert first.tolist() == [3, -1]


@pytest.mark.parametrize("seed", range(6))
def test_overlap_sums_is_the_sum_of_clipped_lengths(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Any intervals and windows, the pairs made a few at a time."""
    monkeypatch.setattr(ascend_db, "_PAIRS_PER_CHUNK", 1 + seed * 7)
    rng = np.random.default_rng(seed)
    n, m = int(rng.integers(0, 80)), int(rng.integers(0, 60))
    starts = rng.integers(-1000, 1000, size=n)
    ends = starts + rng.integers(-100, 400, size=n)
    lo = rng.integers(-1200, 1200, size=m)
    hi = lo + rng.integers(-100, 600, size=m)
    got = ascend_db._overlap_sums(starts, ends, lo, hi)
    clipped = np.minimum(ends[None, :], hi[:, None]) - np.maximum(starts[None, :], lo[:, None])
    ok = (ends > starts)[None, :]
    assert got.tolist() == np.where(ok, np.maximum(clipped, 0), 0).sum(axis=1).tolist()
    found, first = ascend_db._first_inside(starts, ends, lo, hi)
    for i in range(m):
        inside = ok[0] & (clipped[i] > 0)
        assert found[i] == inside.any()
        expected = (
            max(int(starts[inside].min()), int(lo[i])) - lo[i] if inside.any() else hi[i] - lo[i]
        )
        assert first[i] == expected

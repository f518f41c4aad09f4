"""The vectorised per-step metrics against the definition, window by window.

:func:`perfgate.analysis.metrics.step_metrics` works on all windows at once. The reference
below is the plain per-window implementation it replaced (one window at a time, unions by
:mod:`perfgate.intervals`); on random tasks (overlaps, several ranks, steps without tasks,
tasks without a window, windows without a wall span, profiler breakdowns with gaps) the two
must agree to the last bit.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from perfgate.analysis.metrics import (
    RATIO_METRICS,
    STEP_METRIC_COLUMNS,
    _segment_sums,
    step_metrics,
)
from perfgate.intervals import clip, union_length
from perfgate.model import BREAKDOWN_COLUMNS, CATEGORIES, Category

_RESIDUAL_NOTE_SHARE = 0.01


def reference_step_metrics(
    tasks: pd.DataFrame, windows: pd.DataFrame, notes: list[str] | None = None
) -> pd.DataFrame:
    """Per (rank, step) metrics.

    Args:
        tasks: canonical tasks, ``step`` filled in (see :func:`assign_steps`).
        windows: canonical steps (``rank, step, start_us, end_us``; optional breakdown).
        notes: receives one line when the profiler's breakdown disagrees with the wall span.

    Returns:
        One row per window with :data:`STEP_METRIC_COLUMNS`; times in µs, ratios in 0..1.
        ``breakdown_from`` is ``profiler`` when the source computed the breakdown itself,
        ``tasks`` when perfgate computed it from task intervals. Ratios are NaN when the
        step has neither a breakdown nor tasks to compute one.
    """
    notes = notes if notes is not None else []
    has_breakdown = all(c in windows.columns for c in BREAKDOWN_COLUMNS)
    groups = {key: g for key, g in tasks.groupby(["rank", "step"], sort=False)}
    ranks_with_tasks = set(tasks["rank"].unique().tolist())
    rows: list[dict[str, Any]] = []
    worst_residual = 0.0
    unseen: set[int] = set()
    for window in windows.to_dict("records"):
        rank, step = int(window["rank"]), int(window["step"])
        step_tasks = groups.get((rank, step), tasks.iloc[0:0])
        start, end = float(window["start_us"]), float(window["end_us"])
        span_known = not (np.isnan(start) or np.isnan(end))
        if not span_known and not step_tasks.empty:
            # Without a wall span, clip nothing: the source tagged these tasks with the step.
            start = float(step_tasks["start_us"].min())
            end = float((step_tasks["start_us"] + step_tasks["dur_us"]).max())
        derived = reference_breakdown(step_tasks, start, end)
        given = {c: float(window[c]) for c in BREAKDOWN_COLUMNS} if has_breakdown else {}
        if given and not any(np.isnan(v) for v in given.values()):
            breakdown = given
            total = sum(given.values())
            step_time = end - start if span_known else total
            residual = step_time - total
            # (a window of no length has no share: no ZeroDivisionError)
            if span_known and step_time > 0 and abs(residual) > _RESIDUAL_NOTE_SHARE * step_time:
                worst_residual = max(worst_residual, abs(residual) / step_time)
            # The wall span wins; Free absorbs what the profiler's breakdown did not cover.
            breakdown["free_us"] = max(given["free_us"] + residual, 0.0)
            source = "profiler"
        elif step_tasks.empty and not span_known:
            breakdown = {c: float("nan") for c in BREAKDOWN_COLUMNS}
            step_time = float("nan")
            source = "none"
        elif rank not in ranks_with_tasks:
            # A rank the source gave no task of was not seen, not idle: its step time alone.
            breakdown = {c: float("nan") for c in BREAKDOWN_COLUMNS}
            step_time = end - start
            source = "none"
            unseen.add(rank)
        else:
            breakdown = {c: derived[c] for c in BREAKDOWN_COLUMNS}
            step_time = end - start
            source = "tasks"
        # Copy time comes only from tasks: unknown (NaN) for a rank the source gave none.
        copy_us = derived["copy_us"] if rank in ranks_with_tasks else float("nan")
        row: dict[str, Any] = {
            "rank": rank,
            "step": step,
            "start_us": float(window["start_us"]),
            "end_us": float(window["end_us"]),
            "step_time_us": step_time,
            **breakdown,
            "copy_us": copy_us,
            "breakdown_from": source,
        }
        rows.append(row)
    if worst_residual:
        notes.append(
            "the profiler's breakdown differs from the step's wall span by up to "
            f"{worst_residual:.1%}; Free absorbs the difference"
        )
    if unseen:
        notes.append(
            f"no device tasks for rank(s) {', '.join(str(r) for r in sorted(unseen))}: only "
            "their step time is measured; utilization, the breakdown and copy_ratio are unknown"
        )
    frame = pd.DataFrame(rows, columns=[c for c in STEP_METRIC_COLUMNS if c not in RATIO_METRICS])
    step_time = frame["step_time_us"].where(frame["step_time_us"] > 0)
    frame["utilization"] = frame["computing_us"] / step_time
    frame["copy_ratio"] = frame["copy_us"] / step_time
    frame["comm_ratio"] = frame["comm_not_overlapped_us"] / step_time
    frame["free_ratio"] = frame["free_us"] / step_time
    frame = frame.astype({"rank": "int64", "step": "int64"})
    return frame[list(STEP_METRIC_COLUMNS)]


def reference_breakdown(step_tasks: pd.DataFrame, start: float, end: float) -> dict[str, float]:
    """Breakdown of one step window from its task intervals (unions, clipped to the window)."""
    if step_tasks.empty or not end > start:
        span = max(end - start, 0.0) if not np.isnan(end - start) else 0.0
        return {
            "computing_us": 0.0,
            "comm_not_overlapped_us": 0.0,
            "free_us": span,
            "preparing_us": 0.0,
            "copy_us": 0.0,
        }
    starts = step_tasks["start_us"].to_numpy(dtype=np.float64)
    ends = starts + step_tasks["dur_us"].to_numpy(dtype=np.float64)
    category = step_tasks["category"].to_numpy()

    def of(kind: Category) -> tuple[np.ndarray, np.ndarray]:
        mask = category == kind.value
        return clip(starts[mask], ends[mask], start, end)

    comp_s, comp_e = of(Category.COMPUTE)
    comm_s, comm_e = of(Category.COMM)
    copy_s, copy_e = of(Category.COPY)
    computing = union_length(comp_s, comp_e)
    busy = union_length(np.concatenate([comp_s, comm_s]), np.concatenate([comp_e, comm_e]))
    work_starts = np.concatenate([comp_s, comm_s])
    preparing = float(work_starts.min() - start) if work_starts.size else 0.0
    span = end - start
    free = span - busy - preparing
    return {
        "computing_us": computing,
        "comm_not_overlapped_us": busy - computing,
        "free_us": max(free, 0.0),
        "preparing_us": preparing,
        "copy_us": union_length(copy_s, copy_e),
    }


# ------------------------------------------------------------------------------- strategies

_TIMES = st.one_of(
    st.integers(-50, 400).map(float),  # ties and touching intervals
    st.floats(-50.0, 400.0, allow_nan=False),
    # epoch-sized values relative to a time origin: large, with few fraction bits
    st.floats(1e9, 1e9 + 400.0, allow_nan=False),
)


@st.composite
def profiles(draw: Any) -> tuple[pd.DataFrame, pd.DataFrame]:
    ranks = draw(st.lists(st.integers(0, 3), min_size=1, max_size=3, unique=True))
    keys = draw(
        st.lists(st.tuples(st.sampled_from(ranks), st.integers(-1, 6)), max_size=8, unique=True)
    )
    with_breakdown = draw(st.booleans())
    window_rows = []
    for rank, step in keys:
        if draw(st.integers(0, 4)) == 0:
            start = end = math.nan  # no wall span (step_trace_time.csv)
        else:
            start = draw(_TIMES)
            end = start + draw(st.one_of(st.just(0.0), st.floats(-5.0, 300.0)))
        row: dict[str, Any] = {"rank": rank, "step": step, "start_us": start, "end_us": end}
        if with_breakdown:
            for column in BREAKDOWN_COLUMNS:
                row[column] = draw(
                    st.one_of(st.just(math.nan), st.floats(0.0, 200.0), st.just(0.0))
                )
        window_rows.append(row)
    columns = ["rank", "step", "start_us", "end_us"] + (
        list(BREAKDOWN_COLUMNS) if with_breakdown else []
    )
    windows = pd.DataFrame(window_rows, columns=columns).astype(
        {"rank": "int64", "step": "Int64", "start_us": "float64", "end_us": "float64"}
    )
    steps = [k[1] for k in keys] + [None, 7]  # <NA> and a step without a window
    task_rows = draw(
        st.lists(
            st.tuples(
                st.sampled_from([*ranks, 9]),  # a rank without windows too
                st.sampled_from(steps),
                st.sampled_from(CATEGORIES),
                _TIMES,
                st.one_of(st.just(0.0), st.floats(0.0, 120.0)),
            ),
            max_size=40,
        )
    )
    tasks = pd.DataFrame(
        {
            "rank": pd.Series([t[0] for t in task_rows], dtype="int64"),
            "step": pd.array([t[1] for t in task_rows], dtype="Int64"),
            "name": pd.Series(["k"] * len(task_rows), dtype=object),
            "op_type": pd.Series(["k"] * len(task_rows), dtype=object),
            "core": pd.Series(["AI_CORE"] * len(task_rows), dtype=object),
            "category": pd.Series([t[2] for t in task_rows], dtype=object),
            "start_us": pd.Series([t[3] for t in task_rows], dtype="float64"),
            "dur_us": pd.Series([t[4] for t in task_rows], dtype="float64"),
        }
    )
    return tasks, windows


def assert_same(tasks: pd.DataFrame, windows: pd.DataFrame) -> None:
    notes: list[str] = []
    expected_notes: list[str] = []
    out = step_metrics(tasks, windows, notes)
    expected = reference_step_metrics(tasks, windows, expected_notes)
    assert list(out.columns) == list(STEP_METRIC_COLUMNS)
    assert notes == expected_notes
    if windows.empty:
        assert out.empty
        return
    pd.testing.assert_frame_equal(out, expected, check_exact=True)
    # assert_frame_equal takes -0.0 == 0.0: compare the bits too.
    for column in STEP_METRIC_COLUMNS[2:-1]:
        np.testing.assert_array_equal(
            np.signbit(out[column].to_numpy(dtype=np.float64)),
            np.signbit(expected[column].to_numpy(dtype=np.float64)),
        )


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(profiles())
def test_vectorised_step_metrics_equal_the_per_window_definition(
    profile: tuple[pd.DataFrame, pd.DataFrame],
) -> None:
    tasks, windows = profile
    assert_same(tasks, windows)


@pytest.mark.parametrize("seed", range(6))
def test_many_windows_with_many_merged_intervals_sum_like_numpy(seed: int) -> None:
    """Windows with up to ~300 disjoint pieces: their totals go through numpy's pairwise
    summation, which the vectorised sum must reproduce."""
    rng = np.random.default_rng(seed)
    n_windows = 300
    sizes = rng.integers(0, 320 if seed % 2 else 40, size=n_windows)
    rows = []
    for w, size in enumerate(sizes):
        base = w * 10_000.0
        starts = base + np.sort(rng.uniform(-100.0, 9_000.0, size=size))
        durs = rng.exponential(20.0, size=size) * rng.uniform(0.1, 10.0)
        cats = rng.choice([c.value for c in Category], size=size, p=[0.6, 0.15, 0.15, 0.1])
        rank = w % 3
        rows += [(rank, w, c, s, d) for c, s, d in zip(cats, starts, durs)]
    tasks = pd.DataFrame(
        {
            "rank": pd.Series([r[0] for r in rows], dtype="int64"),
            "step": pd.array([r[1] for r in rows], dtype="Int64"),
            "name": "k",
            "op_type": "k",
            "core": "AI_CORE",
            "category": [r[2] for r in rows],
            "start_us": [r[3] for r in rows],
            "dur_us": [r[4] for r in rows],
        }
    ).sample(frac=1.0, random_state=seed)  # task order must not matter
    windows = pd.DataFrame(
        {
            "rank": np.arange(n_windows) % 3,
            "step": pd.array(np.arange(n_windows), dtype="Int64"),
            "start_us": np.arange(n_windows) * 10_000.0,
            "end_us": np.arange(n_windows) * 10_000.0 + rng.uniform(5_000, 9_500, n_windows),
        }
    )
    if seed >= 3:  # some windows without a wall span: they span their tasks
        windows.loc[windows.index % 4 == 0, ["start_us", "end_us"]] = np.nan
    assert_same(tasks, windows)


def test_segment_sums_are_numpys_sums() -> None:
    rng = np.random.default_rng(0)
    sizes = np.concatenate(
        [rng.integers(1, 20, 500), rng.integers(100, 140, 200), rng.integers(200, 1500, 40)]
    )
    rng.shuffle(sizes)
    values = rng.exponential(1.0, sizes.sum()) * 10.0 ** rng.integers(-3, 8, sizes.sum())
    starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    expected = [np.sum(values[a : a + k]) for a, k in zip(starts, sizes)]
    np.testing.assert_array_equal(_segment_sums(values, starts, sizes), expected)


def test_windows_listed_twice_each_get_their_tasks() -> None:
    tasks = pd.DataFrame(
        {
            "rank": [0, 0],
            "step": pd.array([1, 1], dtype="Int64"),
            "name": "k",
            "op_type": "k",
            "core": "AI_CORE",
            "category": ["compute", "copy"],
            "start_us": [0.0, 5.0],
            "dur_us": [10.0, 2.0],
        }
    )
    windows = pd.DataFrame(
        {
            "rank": [0, 0],
            "step": pd.array([1, 1], dtype="Int64"),
            "start_us": [0.0, 4.0],
            "end_us": [20.0, 8.0],
        }
    )
    assert_same(tasks, windows)


def test_no_ratio_is_computed_from_a_non_positive_step_time() -> None:
    out = step_metrics(
        pd.DataFrame(
            {
                "rank": [0],
                "step": pd.array([1], dtype="Int64"),
                "name": "k",
                "op_type": "k",
                "core": "AI_CORE",
                "category": ["compute"],
                "start_us": [5.0],
                "dur_us": [1.0],
            }
        ),
        pd.DataFrame(
            {"rank": [0], "step": pd.array([1], dtype="Int64"), "start_us": [5.0], "end_us": [5.0]}
        ),
    )
    assert out[list(RATIO_METRICS)].isna().all(axis=None)

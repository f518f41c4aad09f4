"""The metric definitions (docs/metrics.md) on small hand-built tables.

Readers are tested against real profiler output in tests/test_ingest_*.py; here each table is
small enough that every expected number can be checked by eye.
"""

from __future__ import annotations

import math

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfgate.analysis.metrics import (
    OPERATOR_COLUMNS,
    analyze,
    assign_steps,
    operator_step_samples,
    operator_table,
    step_metrics,
)
from perfgate.intervals import merge, union_length
from perfgate.model import Profile, empty_steps


def tasks_frame(rows: list[tuple[int, int | None, str, str, str, float, float]]) -> pd.DataFrame:
    """rows: (rank, step, op_type, core, category, start_us, dur_us)."""
    return pd.DataFrame(
        {
            "rank": [r[0] for r in rows],
            "step": pd.array([r[1] for r in rows], dtype="Int64"),
            "name": [r[2] + "_0" for r in rows],
            "op_type": [r[2] for r in rows],
            "core": [r[3] for r in rows],
            "category": [r[4] for r in rows],
            "start_us": [r[5] for r in rows],
            "dur_us": [r[6] for r in rows],
        }
    )


def steps_frame(rows: list[tuple[int, int, float, float]]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "rank": [r[0] for r in rows],
            "step": pd.array([r[1] for r in rows], dtype="Int64"),
            "start_us": [r[2] for r in rows],
            "end_us": [r[3] for r in rows],
        }
    )


def test_union_counts_overlapping_time_once() -> None:
    # [0,10) ∪ [5,20) ∪ [20,25) ∪ [30,31) = [0,25) + [30,31) = 26
    starts, ends = merge([5, 0, 20, 30], [20, 10, 25, 31])
    assert starts.tolist() == [0, 30]
    assert ends.tolist() == [25, 31]
    assert union_length([5, 0, 20, 30], [20, 10, 25, 31]) == 26
    assert union_length([], []) == 0


def test_breakdown_from_tasks_sums_to_step_time() -> None:
    # Step [100, 200): preparing 100→110; compute [110,150) and [140,160) on two streams
    # = 50 µs; comm [155,175) of which 5 µs under compute → 15 not overlapped;
    # copy [180,190) is free time (as msprof-analyze counts SDMA); free = 100-50-15-10 = 25.
    tasks = tasks_frame(
        [
            (0, 1, "MatMul", "AI_CORE", "compute", 110, 40),
            (0, 1, "Add", "AI_VECTOR_CORE", "compute", 140, 20),
            (0, 1, "hcom_allReduce", "HCCL", "comm", 155, 20),
            (0, 1, "MemCopy", "SDMA_SQE", "copy", 180, 10),
        ]
    )
    row = step_metrics(tasks, steps_frame([(0, 1, 100, 200)])).iloc[0]
    assert row["step_time_us"] == 100
    assert row["computing_us"] == 50
    assert row["comm_not_overlapped_us"] == 15
    assert row["preparing_us"] == 10
    assert row["free_us"] == 25
    assert row["computing_us"] + row["comm_not_overlapped_us"] + row["free_us"] + row[
        "preparing_us"
    ] == pytest.approx(row["step_time_us"])
    assert row["utilization"] == pytest.approx(0.5)
    assert row["copy_ratio"] == pytest.approx(0.1)
    assert row["comm_ratio"] == pytest.approx(0.15)
    assert row["free_ratio"] == pytest.approx(0.25)
    assert row["breakdown_from"] == "tasks"


def test_tasks_are_clipped_to_their_step_window() -> None:
    # A kernel launched at 190 runs past the step end (200) by 30 µs: only 10 µs count.
    tasks = tasks_frame([(0, 1, "MatMul", "AI_CORE", "compute", 190, 40)])
    row = step_metrics(tasks, steps_frame([(0, 1, 100, 200)])).iloc[0]
    assert row["computing_us"] == 10
    assert row["preparing_us"] == 90


def test_profiler_breakdown_is_used_and_free_absorbs_the_wall_span_residual() -> None:
    steps = steps_frame([(0, 7, 0, 1000)])
    steps["computing_us"] = [400.0]
    steps["comm_not_overlapped_us"] = [100.0]
    steps["free_us"] = [300.0]
    steps["preparing_us"] = [150.0]  # sums to 950: 50 µs short of the wall span
    notes: list[str] = []
    row = step_metrics(tasks_frame([]), steps, notes).iloc[0]
    assert row["step_time_us"] == 1000
    assert row["free_us"] == 350
    assert row["breakdown_from"] == "profiler"
    assert math.isnan(row["copy_ratio"])  # no tasks: copy time unknown, not zero
    assert notes == [
        "the profiler's breakdown differs from the step's wall span by up to 5.0%; "
        "Free absorbs the difference"
    ]


def test_without_a_wall_span_the_profiler_breakdown_sums_to_step_time() -> None:
    steps = steps_frame([(0, 50, math.nan, math.nan)])
    steps["computing_us"] = [8873.756]
    steps["comm_not_overlapped_us"] = [101963.203]
    steps["free_us"] = [25744.05]
    steps["preparing_us"] = [17902.5]
    row = step_metrics(tasks_frame([]), steps).iloc[0]
    assert row["step_time_us"] == pytest.approx(154483.509)
    assert row["utilization"] == pytest.approx(8873.756 / 154483.509)


def test_tasks_without_step_are_assigned_by_their_start() -> None:
    tasks = tasks_frame(
        [
            (0, None, "A", "AI_CORE", "compute", 5, 1),
            (0, None, "A", "AI_CORE", "compute", 10, 1),  # window ends are exclusive
            (0, None, "A", "AI_CORE", "compute", 25, 1),  # between windows
            (1, None, "A", "AI_CORE", "compute", 5, 1),  # rank 1 has no windows
        ]
    )
    out = assign_steps(tasks, steps_frame([(0, 1, 0, 10), (0, 2, 10, 20)]))
    assert out["step"].tolist() == [1, 2, pd.NA, pd.NA]


def test_no_step_marks_gives_one_window_and_says_so() -> None:
    tasks = tasks_frame(
        [
            (0, None, "A", "AI_CORE", "compute", 10, 10),
            (0, None, "B", "MEMCPY_ASYNC", "copy", 30, 10),
        ]
    )
    analysis = analyze(Profile("test", "mem", tasks, empty_steps()))
    assert "no step marks: analysed as one window" in analysis.notes
    row = analysis.per_step.iloc[0]
    assert row["step_time_us"] == 30  # 10 → 40
    assert row["utilization"] == pytest.approx(1 / 3)
    assert row["copy_ratio"] == pytest.approx(1 / 3)


def test_several_ranks_take_the_slowest_rank_per_step() -> None:
    tasks = tasks_frame(
        [
            (0, 1, "A", "AI_CORE", "compute", 0, 50),
            (1, 1, "A", "AI_CORE", "compute", 0, 90),
            (2, 1, "A", "AI_CORE", "compute", 0, 60),
        ]
    )
    steps = steps_frame([(0, 1, 0, 100), (1, 1, 0, 120), (2, 1, 0, 100)])
    analysis = analyze(Profile("test", "mem", tasks, steps))
    row = analysis.per_step.iloc[0]
    assert row["slowest_rank"] == 1
    assert row["ranks"] == 3
    assert row["step_time_us"] == 120
    assert row["utilization"] == pytest.approx(90 / 120)
    assert row["imbalance"] == pytest.approx(120 / 100 - 1)


def test_operator_table_averages_over_rank_steps() -> None:
    tasks = tasks_frame(
        [
            (0, 1, "MatMul", "AI_CORE", "compute", 0, 30),
            (0, 1, "MatMul", "AI_CORE", "compute", 40, 30),
            (0, 2, "MatMul", "AI_CORE", "compute", 100, 30),
            (0, 2, "Add", "AI_VECTOR_CORE", "compute", 140, 10),
        ]
    )
    per_rank = step_metrics(tasks, steps_frame([(0, 1, 0, 100), (0, 2, 100, 200)]))
    ops = operator_table(tasks, per_rank)
    assert ops["op_type"].tolist() == ["MatMul", "Add"]
    matmul = ops.iloc[0]
    assert matmul["calls_per_step"] == 1.5
    assert matmul["time_per_step_us"] == 45
    assert matmul["share"] == pytest.approx(90 / 200)


def test_warmup_steps_marked_by_the_source_are_excluded() -> None:
    tasks = tasks_frame(
        [
            (0, 0, "A", "AI_CORE", "compute", 0, 500),
            (0, 1, "A", "AI_CORE", "compute", 1000, 50),
        ]
    )
    steps = steps_frame([(0, 0, 0, 1000), (0, 1, 1000, 1100)])
    steps["warmup"] = [True, False]
    analysis = analyze(Profile("test", "mem", tasks, steps))
    assert analysis.per_step["step"].tolist() == [1]
    assert analysis.summary["step_time_us"]["median"] == 100
    assert analysis.operators.iloc[0]["calls_per_step"] == 1
    assert "1 warm-up step(s) marked by the source are excluded" in analysis.notes


def test_one_window_spans_the_work_not_bookkeeping_tasks() -> None:
    # msprof writes TASK_TIMEOUT_SET seconds before the first kernel: not part of the run.
    tasks = tasks_frame(
        [
            (0, None, "TASK_TIMEOUT_SET", "TASK_TIMEOUT_SET", "other", 0, 1),
            (0, None, "MatMul", "AI_CORE", "compute", 1_000_000, 50),
            (0, None, "MatMul", "AI_CORE", "compute", 1_000_060, 40),
        ]
    )
    analysis = analyze(Profile("test", "mem", tasks, empty_steps()))
    row = analysis.per_step.iloc[0]
    assert row["step_time_us"] == 100
    assert row["utilization"] == pytest.approx(0.9)


def test_unknown_copy_visibility_reports_copy_ratio_as_unknown() -> None:
    tasks = tasks_frame([(0, 1, "MatMul", "AI_CORE", "compute", 0, 50)])
    profile = Profile(
        "test", "mem", tasks, steps_frame([(0, 1, 0, 100)]), metadata={"copy_visible": False}
    )
    analysis = analyze(profile)
    assert math.isnan(analysis.per_step.iloc[0]["copy_ratio"])
    assert analysis.summary["copy_ratio"]["n"] == 0
    assert analysis.summary["utilization"]["median"] == pytest.approx(0.5)
    assert (
        "copy tasks are not recorded in this export (kernels only): copy_ratio is unknown"
        in analysis.notes
    )


def test_warmup_work_is_excluded_without_being_called_outside_every_window() -> None:
    tasks = tasks_frame(
        [
            (0, None, "A", "AI_CORE", "compute", 10, 100),  # in warm-up step 0
            (0, None, "A", "AI_CORE", "compute", 1010, 50),  # in step 1
        ]
    )
    steps = steps_frame([(0, 0, 0, 1000), (0, 1, 1000, 1100)])
    steps["warmup"] = [True, False]
    analysis = analyze(Profile("test", "mem", tasks, steps))
    assert analysis.operators.iloc[0]["calls_per_step"] == 1
    assert not any("outside every step window" in note for note in analysis.notes)


def test_a_rank_without_tasks_is_unseen_not_idle() -> None:
    # Rank 1 has step windows but the source gave no task of it (an export whose task tables
    # are empty): its step time is known, its breakdown is not; rank 0's is.
    tasks = tasks_frame([(0, 1, "A", "AI_CORE", "compute", 0, 60)])
    steps = steps_frame([(0, 1, 0, 100), (1, 1, 0, 120)])
    analysis = analyze(Profile("test", "mem", tasks, steps))
    by_rank = analysis.per_rank.set_index("rank")
    assert by_rank.loc[0, "utilization"] == pytest.approx(0.6)
    assert by_rank.loc[0, "breakdown_from"] == "tasks"
    assert by_rank.loc[1, "step_time_us"] == 120
    assert by_rank.loc[1, "breakdown_from"] == "none"
    for column in ("computing_us", "free_us", "utilization", "free_ratio", "copy_ratio"):
        assert math.isnan(by_rank.loc[1, column]), column
    assert (
        "no device tasks for rank(s) 1: only their step time is measured; utilization, "
        "the breakdown and copy_ratio are unknown"
    ) in analysis.notes


_NAMES = st.sampled_from(["MatMul", "Add", "add", "Äquator", "", "N/A", None, math.nan])


@st.composite
def named_tasks(draw: st.DrawFn) -> pd.DataFrame:
    n = draw(st.integers(1, 40))
    rows = [
        (
            draw(st.sampled_from([0, 1])),
            draw(st.sampled_from([1, 2, 3, None])),
            draw(_NAMES),
            draw(_NAMES),
            draw(st.sampled_from(["compute", "copy", "comm", None])),
            float(draw(st.integers(0, 300))),
            # Equal durations make ties in the sort by time per step.
            draw(st.sampled_from([1.0, 2.5, 0.1, 1e-3, 7.0])),
        )
        for _ in range(n)
    ]
    return pd.DataFrame(
        {
            "rank": [r[0] for r in rows],
            "step": pd.array([r[1] for r in rows], dtype="Int64"),
            "op_type": pd.array([r[2] for r in rows], dtype=object),
            "core": pd.array([r[3] for r in rows], dtype=object),
            "category": pd.array([r[4] for r in rows], dtype=object),
            "start_us": [r[5] for r in rows],
            "dur_us": [r[6] for r in rows],
        }
    )


@settings(max_examples=100, deadline=None)
@given(named_tasks())
def test_operator_tables_grouped_by_codes_are_the_tables_grouped_by_names(
    tasks: pd.DataFrame,
) -> None:
    # The group-bys on the name columns the operator tables were first written as.
    per_rank = step_metrics(
        tasks, steps_frame([(0, 1, 0, 100), (1, 2, 100, 200), (0, 3, 200, 300)])
    )
    grouped = tasks.groupby(["op_type", "core", "category"], dropna=False, sort=False)
    table = grouped.agg(calls=("dur_us", "size"), total_us=("dur_us", "sum")).reset_index()
    table["calls_per_step"] = table["calls"] / len(per_rank)
    table["time_per_step_us"] = table["total_us"] / len(per_rank)
    table["share"] = table["total_us"] / float(per_rank["step_time_us"].sum())
    table = table.sort_values(["time_per_step_us", "op_type"], ascending=[False, True])
    expected = table[list(OPERATOR_COLUMNS)].reset_index(drop=True)
    for name in ("op_type", "core", "category"):
        if expected[name].isna().all():  # a name column holds objects, not pandas' float NaN
            expected[name] = expected[name].astype(object)
    pd.testing.assert_frame_equal(operator_table(tasks, per_rank), expected, check_exact=True)

    steps = sorted(per_rank["step"].unique().tolist())
    summed = tasks.groupby(["op_type", "core", "step"])["dur_us"].sum().unstack("step")
    summed = summed.reindex(columns=steps).fillna(0.0)
    ranks = per_rank.groupby("step")["rank"].nunique().reindex(steps).to_numpy()
    # The same rows; their order is now that of the sorted names (unstack's was not always).
    pd.testing.assert_frame_equal(
        operator_step_samples(tasks, per_rank),
        summed.div(ranks, axis="columns"),
        check_exact=True,
        check_like=True,
        check_index_type=not summed.empty,  # (no operator at all: index of no names)
    )


def test_operator_samples_are_computed_when_asked_and_average_to_the_operator_table(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A real trace (two steps, 199 operators): ``inspect`` never asks for the per-step
    samples, so analyze leaves them to the first access; each operator's samples average to
    its time per step in the operator table."""
    from pathlib import Path

    from perfgate.analysis import metrics
    from perfgate.ingest import load_profile

    profile = load_profile(Path(__file__).parent / "data/kineto/sampled_rank-0.json.gz")
    real = metrics.operator_step_samples
    calls: list[int] = []

    def counted(*args: object, **kwargs: object) -> pd.DataFrame:
        calls.append(1)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(metrics, "operator_step_samples", counted)
    analysis = analyze(profile)
    assert calls == []
    samples = analysis.operator_samples
    assert analysis.operator_samples is samples and calls == [1]  # computed once
    assert list(samples.columns) == sorted(analysis.per_step["step"])
    per_step = analysis.operators.set_index(["op_type", "core"])["time_per_step_us"]
    assert len(samples) == len(per_step) > 100
    pd.testing.assert_series_equal(
        samples.mean(axis=1), per_step.loc[samples.index], check_names=False, rtol=1e-12
    )

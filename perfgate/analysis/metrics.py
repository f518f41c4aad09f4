"""Profile tables → per-step metrics, per-operator table and their summary (docs/metrics.md).

Pure functions over DataFrames: no file system, git, pytest or printing.

Definitions (public; ``docs/metrics.md`` says the same for users):

* ``step_time_us`` — the step's wall span as the framework marks it (``ProfilerStep#N``,
  perfgate step marks, STEP_TIME); with only a profiler-computed breakdown
  (``step_trace_time.csv``) the sum Preparing + Computing + Communication(Not Overlapped) + Free.
* ``computing_us`` — the union of compute-task intervals inside the step (or the profiler's own
  Computing when it gives one); ``comm_not_overlapped_us`` — communication time not covered by
  compute; ``preparing_us`` — from the step start to the first compute or communication task;
  ``free_us`` — the rest, so the four always sum to ``step_time_us``.
* ``utilization`` = computing / step time; ``copy_ratio`` = union of copy-task intervals inside
  the step / step time; ``comm_ratio`` = comm_not_overlapped / step time;
  ``free_ratio`` = free / step time.
* Several ranks: a step takes the slowest rank's row (synchronous data parallel: the step is
  as slow as its slowest rank); ``imbalance`` = slowest / median rank step time − 1.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from perfgate.intervals import clip, union_length
from perfgate.model import BREAKDOWN_COLUMNS, NO_STEP_MARKS_NOTE, Category, Profile

METRIC_NAMES = ("step_time_us", "utilization", "copy_ratio", "comm_ratio", "free_ratio")
RATIO_METRICS = ("utilization", "copy_ratio", "comm_ratio", "free_ratio")
STEP_METRIC_COLUMNS = (
    "rank",
    "step",
    "start_us",
    "end_us",
    "step_time_us",
    *BREAKDOWN_COLUMNS,
    "copy_us",
    *RATIO_METRICS,
    "breakdown_from",
)
OPERATOR_COLUMNS = (
    "op_type",
    "core",
    "category",
    "calls_per_step",
    "time_per_step_us",
    "share",
    "calls",
    "total_us",
)
# Above this share of the step, a disagreement between the profiler's breakdown and the
# step's wall span is worth telling the user about.
_RESIDUAL_NOTE_SHARE = 0.01
NO_STEP = -1


@dataclass
class RunAnalysis:
    """Everything one profile says, ready for reports and for the gate.

    Attributes:
        per_rank: one row per (rank, step) with :data:`STEP_METRIC_COLUMNS`.
        per_step: one row per step (the slowest rank's row) plus ``slowest_rank``,
            ``ranks`` and ``imbalance``.
        operators: :data:`OPERATOR_COLUMNS`, sorted by time per step, descending.
        summary: ``{metric: {median, mean, min, max, std, n}}`` over ``per_step``, for
            :data:`METRIC_NAMES` and the breakdown columns.
        notes: how the numbers were obtained, one line each.
        operator_samples: device time per step (µs, averaged over ranks) of each operator:
            index ``(op_type, core)``, one column per step of ``per_step``.
    """

    per_rank: pd.DataFrame
    per_step: pd.DataFrame
    operators: pd.DataFrame
    summary: dict[str, dict[str, float]]
    notes: list[str] = field(default_factory=list)
    operator_samples: pd.DataFrame = field(default_factory=pd.DataFrame)


def analyze(profile: Profile) -> RunAnalysis:
    """Compute step metrics, the operator table and the summary of one profile."""
    notes = list(profile.notes)
    tasks, windows = _analysis_windows(profile.tasks, profile.steps, notes)
    per_rank = step_metrics(tasks, windows, notes)
    if not profile.metadata.get("copy_visible", True):
        # The source lists kernels only: no copy task could have been seen.
        per_rank["copy_us"] = float("nan")
        per_rank["copy_ratio"] = float("nan")
        notes.append(
            "copy tasks are not recorded in this export (kernels only): copy_ratio is unknown"
        )
    per_step = aggregate_ranks(per_rank)
    operators = operator_table(tasks, per_rank)
    if operators.empty and profile.op_statistic is not None:
        operators = operators_from_statistic(profile.op_statistic, per_rank)
    return RunAnalysis(
        per_rank=per_rank,
        per_step=per_step,
        operators=operators,
        summary=summarize(per_step),
        notes=_unique(notes),
        operator_samples=operator_step_samples(tasks, per_rank),
    )


def operator_step_samples(tasks: pd.DataFrame, per_rank: pd.DataFrame) -> pd.DataFrame:
    """Device time of each ``(op_type, core)`` in each step, averaged over ranks (µs).

    Index ``(op_type, core)``; one column per analysed step, 0 where the operator did not run.
    These are the per-step samples an operator-level significance test needs.
    """
    steps = sorted(per_rank["step"].unique().tolist())
    if tasks.empty or not steps:
        return pd.DataFrame(columns=steps)
    ranks_per_step = per_rank.groupby("step")["rank"].nunique()
    summed = tasks.groupby(["op_type", "core", "step"])["dur_us"].sum().unstack("step")
    summed = summed.reindex(columns=steps).fillna(0.0)
    return summed.div(ranks_per_step.reindex(steps).to_numpy(), axis="columns")


def assign_steps(tasks: pd.DataFrame, steps: pd.DataFrame) -> pd.DataFrame:
    """Fill ``tasks.step`` where it is <NA> from the step windows of the same rank.

    A task belongs to the step whose ``[start_us, end_us)`` contains the task's start
    (torch_npu's rule for ``kernel_details.csv``). Tasks outside every window keep <NA>.
    """
    tasks = tasks.copy()
    known = steps.dropna(subset=["start_us", "end_us"])
    if known.empty or not tasks["step"].isna().any():
        return tasks
    for rank, rank_steps in known.groupby("rank"):
        ordered = rank_steps.sort_values("start_us")
        starts = ordered["start_us"].to_numpy()
        ends = ordered["end_us"].to_numpy()
        step_ids = ordered["step"].to_numpy()
        todo = (tasks["rank"] == rank) & tasks["step"].isna()
        task_starts = tasks.loc[todo, "start_us"].to_numpy()
        idx = np.searchsorted(starts, task_starts, side="right") - 1
        inside = (idx >= 0) & (task_starts < ends[np.clip(idx, 0, None)])
        assigned = pd.array(step_ids[np.clip(idx, 0, None)], dtype="Int64")
        assigned[~inside] = pd.NA
        tasks.loc[todo, "step"] = assigned
    return tasks


def _analysis_windows(
    tasks: pd.DataFrame, steps: pd.DataFrame, notes: list[str]
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The (rank, step) windows to analyse, and the tasks with their step filled in.

    * No step marks at all: one window per rank spanning all its tasks (step ``-1``).
    * Steps without a wall span (e.g. ``step_trace_time.csv``) keep NaN windows; their
      tasks are those the source tagged with the step.
    """
    all_steps = steps
    if "warmup" in steps.columns and steps["warmup"].any():
        excluded = int(steps["warmup"].sum())
        notes.append(f"{excluded} warm-up step(s) marked by the source are excluded")
        steps = steps.loc[~steps["warmup"]]
    if steps.empty:
        if tasks.empty:
            return tasks, steps
        tasks = tasks.copy()
        if tasks["step"].notna().all():
            # The source tagged each task with its step (kernel_details.csv Step Id) but
            # gave no step table: each step spans its own work.
            if NO_STEP_MARKS_NOTE in notes:
                notes.remove(NO_STEP_MARKS_NOTE)
            notes.append("no step windows: each step spans its tasks, first start to last end")
        else:
            notes.append(NO_STEP_MARKS_NOTE)
            tasks["step"] = pd.array([NO_STEP] * len(tasks), dtype="Int64")
        # The window spans the work (compute, copy, comm): bookkeeping tasks such as
        # msprof's TASK_TIMEOUT_SET can sit seconds before the first kernel.
        work = tasks.loc[tasks["category"] != Category.OTHER.value]
        if work.empty:
            work = tasks
        spans = (
            work.assign(end_us=work["start_us"] + work["dur_us"])
            .groupby(["rank", "step"], as_index=False)
            .agg(start_us=("start_us", "min"), end_us=("end_us", "max"))
        )
        return tasks, spans[["rank", "step", "start_us", "end_us"]]
    # Assign against every window, warm-up included, so warm-up work is not "outside".
    tasks = assign_steps(tasks, all_steps)
    unassigned = int(tasks["step"].isna().sum())
    if unassigned:
        notes.append(f"{unassigned} task(s) outside every step window are not counted")
    analysed = set(zip(steps["rank"].tolist(), steps["step"].tolist()))
    keep = [(r, s) in analysed for r, s in zip(tasks["rank"].tolist(), tasks["step"].tolist())]
    return tasks.loc[keep], steps


def step_metrics(
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
    for window in windows.to_dict("records"):
        rank, step = int(window["rank"]), int(window["step"])
        step_tasks = groups.get((rank, step), tasks.iloc[0:0])
        start, end = float(window["start_us"]), float(window["end_us"])
        span_known = not (np.isnan(start) or np.isnan(end))
        if not span_known and not step_tasks.empty:
            # Without a wall span, clip nothing: the source tagged these tasks with the step.
            start = float(step_tasks["start_us"].min())
            end = float((step_tasks["start_us"] + step_tasks["dur_us"]).max())
        derived = _breakdown_from_tasks(step_tasks, start, end)
        given = {c: float(window[c]) for c in BREAKDOWN_COLUMNS} if has_breakdown else {}
        if given and not any(np.isnan(v) for v in given.values()):
            breakdown = given
            total = sum(given.values())
            step_time = end - start if span_known else total
            residual = step_time - total
            if span_known and abs(residual) > _RESIDUAL_NOTE_SHARE * step_time:
                worst_residual = max(worst_residual, abs(residual) / step_time)
            # The wall span wins; Free absorbs what the profiler's breakdown did not cover.
            breakdown["free_us"] = max(given["free_us"] + residual, 0.0)
            source = "profiler"
        elif step_tasks.empty and not span_known:
            breakdown = {c: float("nan") for c in BREAKDOWN_COLUMNS}
            step_time = float("nan")
            source = "none"
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
    frame = pd.DataFrame(rows, columns=[c for c in STEP_METRIC_COLUMNS if c not in RATIO_METRICS])
    step_time = frame["step_time_us"].where(frame["step_time_us"] > 0)
    frame["utilization"] = frame["computing_us"] / step_time
    frame["copy_ratio"] = frame["copy_us"] / step_time
    frame["comm_ratio"] = frame["comm_not_overlapped_us"] / step_time
    frame["free_ratio"] = frame["free_us"] / step_time
    frame = frame.astype({"rank": "int64", "step": "int64"})
    return frame[list(STEP_METRIC_COLUMNS)]


def _breakdown_from_tasks(step_tasks: pd.DataFrame, start: float, end: float) -> dict[str, float]:
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


def aggregate_ranks(per_rank: pd.DataFrame) -> pd.DataFrame:
    """One row per step: the slowest rank's row, with ``slowest_rank``, ``ranks``, ``imbalance``.

    ``imbalance`` = slowest rank's step time / median rank's step time − 1 (0 for one rank).
    """
    if per_rank.empty:
        out = per_rank.copy()
        for column in ("slowest_rank", "ranks", "imbalance"):
            out[column] = pd.Series(dtype="float64")
        return out
    ordered = per_rank.sort_values(["step", "step_time_us", "rank"], ascending=[True, False, True])
    slowest = ordered.groupby("step", sort=True).head(1).set_index("step")
    grouped = per_rank.groupby("step")["step_time_us"]
    median = grouped.median()
    out = slowest.copy()
    out["slowest_rank"] = out["rank"]
    out["ranks"] = grouped.size()
    out["imbalance"] = (out["step_time_us"] / median - 1.0).fillna(0.0)
    return out.reset_index().drop(columns=["rank"])


def operator_table(tasks: pd.DataFrame, per_rank: pd.DataFrame) -> pd.DataFrame:
    """Per operator ``(op_type, core)``: calls and device time per step, share of step time.

    Averages are over every analysed (rank, step): ``calls_per_step`` = calls / steps,
    ``time_per_step_us`` = summed task duration / steps, ``share`` = summed task duration /
    summed step time. Durations are summed, not unioned: an operator's own device time.
    """
    rank_steps = len(per_rank)
    total_step_time = float(per_rank["step_time_us"].sum(min_count=1))
    if tasks.empty or rank_steps == 0:
        return pd.DataFrame({c: pd.Series(dtype="float64") for c in OPERATOR_COLUMNS}).astype(
            {"op_type": "object", "core": "object", "category": "object", "calls": "int64"}
        )
    grouped = tasks.groupby(["op_type", "core", "category"], dropna=False, sort=False)
    table = grouped.agg(calls=("dur_us", "size"), total_us=("dur_us", "sum")).reset_index()
    table["calls_per_step"] = table["calls"] / rank_steps
    table["time_per_step_us"] = table["total_us"] / rank_steps
    table["share"] = table["total_us"] / total_step_time if total_step_time > 0 else float("nan")
    table = table.sort_values(["time_per_step_us", "op_type"], ascending=[False, True])
    return table[list(OPERATOR_COLUMNS)].reset_index(drop=True)


def operators_from_statistic(statistic: pd.DataFrame, per_rank: pd.DataFrame) -> pd.DataFrame:
    """Operator table from an aggregate ``op_statistic`` (op_type, core, category, count,
    total_us).

    Used when a profile has no per-task data (e.g. a torch_npu export without
    ``kernel_details.csv``); the reader gave each row its category.
    """
    tasks_like = statistic.rename(columns={"count": "calls"}).copy()
    rank_steps = max(len(per_rank), 1)
    total_step_time = float(per_rank["step_time_us"].sum(min_count=1))
    tasks_like["calls_per_step"] = tasks_like["calls"] / rank_steps
    tasks_like["time_per_step_us"] = tasks_like["total_us"] / rank_steps
    tasks_like["share"] = tasks_like["total_us"] / total_step_time
    table = tasks_like.sort_values(["time_per_step_us", "op_type"], ascending=[False, True])
    return table[list(OPERATOR_COLUMNS)].reset_index(drop=True)


def summarize(per_step: pd.DataFrame) -> dict[str, dict[str, float]]:
    """``{name: {median, mean, min, max, std, n}}`` for the metrics and breakdown columns.

    NaN samples (a metric the profile cannot give) are left out of ``n``; a metric with
    no sample at all has ``n == 0`` and NaN statistics.
    """
    summary: dict[str, dict[str, float]] = {}
    for name in (*METRIC_NAMES, *BREAKDOWN_COLUMNS, "copy_us"):
        values = (
            per_step[name].dropna().to_numpy(dtype=np.float64)
            if name in per_step
            else np.empty(0, dtype=np.float64)
        )
        n = len(values)
        summary[name] = {
            "median": float(np.median(values)) if n else float("nan"),
            "mean": float(np.mean(values)) if n else float("nan"),
            "min": float(np.min(values)) if n else float("nan"),
            "max": float(np.max(values)) if n else float("nan"),
            "std": float(np.std(values, ddof=1)) if n > 1 else float("nan"),
            "n": n,
        }
    return summary


def _unique(lines: list[str]) -> list[str]:
    return list(dict.fromkeys(lines))


__all__ = [
    "METRIC_NAMES",
    "OPERATOR_COLUMNS",
    "STEP_METRIC_COLUMNS",
    "RunAnalysis",
    "aggregate_ranks",
    "analyze",
    "assign_steps",
    "operator_table",
    "step_metrics",
    "summarize",
]

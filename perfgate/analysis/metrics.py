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

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import numpy.typing as npt
import pandas as pd

from perfgate.intervals import FloatArray, merged_lengths_by_group
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
            index ``(op_type, core)``, one column per step of ``per_step``; computed when
            first asked for (by ``samples_of``): a record needs them, ``inspect`` does not.
    """

    per_rank: pd.DataFrame
    per_step: pd.DataFrame
    operators: pd.DataFrame
    summary: dict[str, dict[str, float]]
    notes: list[str] = field(default_factory=list)
    samples_of: Callable[[], pd.DataFrame] = field(default=pd.DataFrame, repr=False)

    @cached_property
    def operator_samples(self) -> pd.DataFrame:
        return self.samples_of()


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
    names = OperatorCodes.of(tasks)  # the names coded once, for both tables below
    operators = operator_table(tasks, per_rank, names)
    if operators.empty and profile.op_statistic is not None:
        operators = operators_from_statistic(profile.op_statistic, per_rank)
    return RunAnalysis(
        per_rank=per_rank,
        per_step=per_step,
        operators=operators,
        summary=summarize(per_step),
        notes=_unique(notes),
        samples_of=lambda: operator_step_samples(tasks, per_rank, names),
    )


@dataclass(frozen=True)
class OperatorCodes:
    """The ``op_type``, ``core`` and ``category`` of every task as integer codes: codes in the
    order of the sorted distinct names (a missing name: the code after the last), so that
    grouping and sorting by codes is grouping and sorting by names, without hashing a string
    per task."""

    codes: dict[str, npt.NDArray[np.int64]]
    names: dict[str, npt.NDArray[np.object_]]  # per column: the name of each code

    @classmethod
    def of(cls, tasks: pd.DataFrame) -> OperatorCodes:
        codes, names = {}, {}
        for column in ("op_type", "core", "category"):
            found, distinct = pd.factorize(tasks[column].to_numpy(dtype=object), sort=True)
            missing = found < 0
            found = found.astype(np.int64)
            found[missing] = len(distinct)
            codes[column] = found
            names[column] = np.append(np.asarray(distinct, dtype=object), np.nan)
        return cls(codes, names)

    def missing(self, column: str) -> npt.NDArray[np.bool_]:
        return np.asarray(self.codes[column] == len(self.names[column]) - 1)


def operator_step_samples(
    tasks: pd.DataFrame, per_rank: pd.DataFrame, names: OperatorCodes | None = None
) -> pd.DataFrame:
    """Device time of each ``(op_type, core)`` in each step, averaged over ranks (µs).

    Index ``(op_type, core)``; one column per analysed step, 0 where the operator did not run.
    These are the per-step samples an operator-level significance test needs.
    """
    steps = sorted(per_rank["step"].unique().tolist())
    if tasks.empty or not steps:
        return pd.DataFrame(columns=steps)
    ranks_per_step = per_rank.groupby("step")["rank"].nunique()
    names = names if names is not None else OperatorCodes.of(tasks)
    # Grouped by (operator code, step), tasks without an op_type, core or step left out.
    keep = ~(names.missing("op_type") | names.missing("core")) & tasks["step"].notna().to_numpy()
    cores = len(names.names["core"])
    operator = (names.codes["op_type"] * cores + names.codes["core"])[keep]
    step = tasks["step"].to_numpy(dtype=np.int64, na_value=0)[keep]
    summed = tasks["dur_us"][keep].groupby([operator, step]).sum().unstack()
    summed.index = pd.MultiIndex.from_arrays(
        [
            names.names["op_type"][summed.index // cores],
            names.names["core"][summed.index % cores],
        ],
        names=["op_type", "core"],
    )
    summed = summed.reindex(columns=steps).fillna(0.0)
    summed.columns.name = "step"
    return summed.div(ranks_per_step.reindex(steps).to_numpy(), axis="columns")


def assign_steps(tasks: pd.DataFrame, steps: pd.DataFrame) -> pd.DataFrame:
    """Fill ``tasks.step`` where it is <NA> from the step windows of the same rank.

    A task belongs to the step whose ``[start_us, end_us)`` contains the task's start
    (torch_npu's rule for ``kernel_details.csv``). Tasks outside every window keep <NA>.
    """
    # A new step column in a shallow copy: the other columns are shared, never written.
    out = tasks.copy(deep=False)
    known = steps.dropna(subset=["start_us", "end_us"])
    unknown = tasks["step"].isna().to_numpy()
    if known.empty or not unknown.any():
        return out
    step = tasks["step"].astype("Int64").array.copy()
    rank = tasks["rank"].to_numpy()
    start = tasks["start_us"].to_numpy()
    for rank_id, rank_steps in known.groupby("rank"):
        ordered = rank_steps.sort_values("start_us")
        starts = ordered["start_us"].to_numpy()
        ends = ordered["end_us"].to_numpy()
        step_ids = ordered["step"].to_numpy()
        todo = np.flatnonzero((rank == rank_id) & unknown)
        task_starts = start[todo]
        idx = np.searchsorted(starts, task_starts, side="right") - 1
        inside = (idx >= 0) & (task_starts < ends[np.clip(idx, 0, None)])
        assigned = pd.array(step_ids[np.clip(idx, 0, None)], dtype="Int64")
        assigned[~inside] = pd.NA
        step[todo] = assigned
    out["step"] = step
    return out


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
        # Those bookkeeping tasks lie outside the window: not counted, as outside a step.
        bounds = tasks[["rank", "step"]].merge(spans, on=["rank", "step"], how="left")
        start = tasks["start_us"].to_numpy(dtype=np.float64)
        end = start + tasks["dur_us"].to_numpy(dtype=np.float64)
        inside = (end >= bounds["start_us"].to_numpy(dtype=np.float64)) & (
            start <= bounds["end_us"].to_numpy(dtype=np.float64)
        )
        if not inside.all():
            notes.append(
                f"{int((~inside).sum())} task(s) outside the span of the work (first to last "
                "compute, copy or communication task) are not counted"
            )
            tasks = tasks.loc[inside]
        return tasks, spans[["rank", "step", "start_us", "end_us"]]
    # Assign against every window, warm-up included, so warm-up work is not "outside".
    tasks = assign_steps(tasks, all_steps)
    unassigned = int(tasks["step"].isna().sum())
    if unassigned:
        notes.append(f"{unassigned} task(s) outside every step window are not counted")
    analysed = pd.MultiIndex.from_arrays([steps["rank"], steps["step"]])
    keep = tasks["step"].notna().to_numpy() & pd.MultiIndex.from_arrays(
        [tasks["rank"], tasks["step"]]
    ).isin(analysed)
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
        ``tasks`` when perfgate computed it from task intervals, ``none`` when neither could
        be: the step has no breakdown and its rank no tasks (its ratios are then NaN).

    A window's tasks are those with its ``(rank, step)``. Without a wall span (NaN
    ``start_us``/``end_us``) the window spans its tasks, first start to last end. The work is
    column-wise over all windows at once (cost linear in tasks, flat in the number of steps);
    every number is the one the per-window definition gives, to the last bit.
    """
    notes = notes if notes is not None else []
    n = len(windows)
    w_rank = windows["rank"].to_numpy(dtype=np.int64)
    w_step = windows["step"].to_numpy(dtype=np.int64)
    w_start = windows["start_us"].to_numpy(dtype=np.float64)
    w_end = windows["end_us"].to_numpy(dtype=np.float64)
    span_known = ~(np.isnan(w_start) | np.isnan(w_end))
    derived = _derived_breakdown(tasks, w_rank, w_step, w_start, w_end, span_known)
    lo, hi = derived.start, derived.end

    step_time = hi - lo
    breakdown = {
        "computing_us": derived.computing,
        "comm_not_overlapped_us": derived.comm_not_overlapped,
        "free_us": derived.free,
        "preparing_us": derived.preparing,
    }
    source = np.full(n, "tasks", dtype=object)
    # Neither a breakdown nor tasks to compute one: nothing is known.
    unknown = ~span_known & ~derived.has_tasks
    source[unknown] = "none"
    step_time[unknown] = np.nan
    for values in breakdown.values():
        values[unknown] = np.nan

    worst_residual = 0.0
    if all(c in windows.columns for c in BREAKDOWN_COLUMNS):
        given = {c: windows[c].to_numpy(dtype=np.float64) for c in BREAKDOWN_COLUMNS}
        use = ~np.logical_or.reduce([np.isnan(v) for v in given.values()])
        total = 0.0 + given["computing_us"]
        for column in BREAKDOWN_COLUMNS[1:]:
            total = total + given[column]
        wall = np.where(span_known, w_end - w_start, total)
        residual = wall - total
        # (A window of no length has no share to speak of.)
        notable = use & span_known & (wall > 0) & (np.abs(residual) > _RESIDUAL_NOTE_SHARE * wall)
        if notable.any():
            worst_residual = float((np.abs(residual[notable]) / wall[notable]).max())
        # The wall span wins; Free absorbs what the profiler's breakdown did not cover.
        free = given["free_us"] + residual
        given["free_us"] = np.where(free < 0.0, 0.0, free)
        for column in BREAKDOWN_COLUMNS:
            breakdown[column] = np.where(use, given[column], breakdown[column])
        step_time = np.where(use, wall, step_time)
        source[use] = "profiler"
    if worst_residual:
        notes.append(
            "the profiler's breakdown differs from the step's wall span by up to "
            f"{worst_residual:.1%}; Free absorbs the difference"
        )
    # Copy time comes only from tasks: unknown (NaN) for a rank the source gave none. So is a
    # breakdown perfgate would derive from them: a rank without tasks (an export whose task
    # tables are empty) did not idle, it was not seen; its step time alone is known.
    ranks_with_tasks = tasks["rank"].dropna().unique()
    seen = np.isin(w_rank, np.asarray(ranks_with_tasks, dtype=np.int64))
    copy_us = np.where(seen, derived.copy, np.nan)
    unseen = ~seen & (source == "tasks")
    if unseen.any():
        source[unseen] = "none"
        for values in breakdown.values():
            values[unseen] = np.nan
        notes.append(
            "no device tasks for rank(s) "
            f"{', '.join(str(r) for r in sorted(set(w_rank[unseen].tolist())))}: only their step "
            "time is measured; utilization, the breakdown and copy_ratio are unknown"
        )
    frame = pd.DataFrame(
        {
            "rank": w_rank,
            "step": w_step,
            "start_us": w_start,
            "end_us": w_end,
            "step_time_us": step_time,
            **breakdown,
            "copy_us": copy_us,
            "breakdown_from": source,
        }
    )
    positive = frame["step_time_us"].where(frame["step_time_us"] > 0)
    frame["utilization"] = frame["computing_us"] / positive
    frame["copy_ratio"] = frame["copy_us"] / positive
    frame["comm_ratio"] = frame["comm_not_overlapped_us"] / positive
    frame["free_ratio"] = frame["free_us"] / positive
    return frame[list(STEP_METRIC_COLUMNS)]


@dataclass
class _Derived:
    """The breakdown of each window from its task intervals (arrays, one value per window).

    ``start``/``end`` are the bounds used: the window's, or its tasks' span when the window
    has none. ``has_tasks`` says whether the window has any task.
    """

    start: FloatArray
    end: FloatArray
    has_tasks: npt.NDArray[np.bool_]
    computing: FloatArray
    comm_not_overlapped: FloatArray
    free: FloatArray
    preparing: FloatArray
    copy: FloatArray


def _derived_breakdown(
    tasks: pd.DataFrame,
    w_rank: npt.NDArray[np.int64],
    w_step: npt.NDArray[np.int64],
    w_start: FloatArray,
    w_end: FloatArray,
    span_known: npt.NDArray[np.bool_],
) -> _Derived:
    """Unions of the compute, compute + comm and copy intervals of every window at once.

    The tasks of all windows are sorted by (window, start) once; each union is then a
    segmented running maximum of the ends (a new merged interval starts where a start lies
    beyond every earlier end of its window), and each window's total is the sum of its merged
    lengths, added in the order :func:`numpy.sum` adds them (:func:`_segment_sums`).
    """
    n = len(w_rank)
    task_of, window_of = _task_windows(tasks, w_rank, w_step)
    starts = tasks["start_us"].to_numpy(dtype=np.float64)[task_of]
    ends = starts + tasks["dur_us"].to_numpy(dtype=np.float64)[task_of]
    codes, labels = pd.factorize(tasks["category"])
    category = codes[task_of]
    code_of = {str(label): i for i, label in enumerate(labels)}
    compute_code, comm_code, copy_code = (
        code_of.get(c.value, -2) for c in (Category.COMPUTE, Category.COMM, Category.COPY)
    )
    order = np.lexsort((starts, window_of))
    window_of, starts, ends, category = (
        window_of[order],
        starts[order],
        ends[order],
        category[order],
    )
    count = np.bincount(window_of, minlength=n)
    has_tasks = count > 0
    first = np.concatenate(([0], np.cumsum(count)[:-1]))
    # Without a wall span the window spans its tasks, first start to last end.
    lo, hi = w_start.copy(), w_end.copy()
    from_tasks = ~span_known & has_tasks
    if from_tasks.any():
        lo[from_tasks] = starts[first[from_tasks]]
        hi[from_tasks] = np.maximum.reduceat(ends, first[has_tasks])[from_tasks[has_tasks]]
    span = hi - lo
    computing = np.zeros(n)
    busy = np.zeros(n)
    copy = np.zeros(n)
    preparing = np.zeros(n)
    with np.errstate(invalid="ignore"):
        valid = has_tasks & (hi > lo)
    if valid.any():
        take = valid[window_of]
        win, bounds_lo, bounds_hi = window_of[take], lo[window_of[take]], hi[window_of[take]]
        clipped_s = np.minimum(np.maximum(starts[take], bounds_lo), bounds_hi)
        clipped_e = np.minimum(np.maximum(ends[take], bounds_lo), bounds_hi)
        keep = clipped_e > clipped_s
        kind = category[take]
        is_compute = keep & (kind == compute_code)
        is_work = is_compute | (keep & (kind == comm_code))
        is_copy = keep & (kind == copy_code)
        computing = _union_per_window(win, clipped_s, clipped_e, is_compute, n)
        busy = _union_per_window(win, clipped_s, clipped_e, is_work, n)
        copy = _union_per_window(win, clipped_s, clipped_e, is_copy, n)
        # Sorted by start within each window: a window's first work task starts first.
        work_win = win[is_work]
        if work_win.size:
            leads = np.flatnonzero(np.diff(work_win, prepend=-1) != 0)
            preparing[work_win[leads]] = clipped_s[is_work][leads] - lo[work_win[leads]]
    free = span - busy - preparing
    free = np.where(free < 0.0, 0.0, free)
    # A window without tasks (or without a positive span) is all free.
    idle = ~valid
    with np.errstate(invalid="ignore"):
        idle_free = np.where(np.isnan(span), 0.0, np.where(span < 0.0, 0.0, span))
    free[idle] = idle_free[idle]
    return _Derived(
        start=lo,
        end=hi,
        has_tasks=has_tasks,
        computing=computing,
        comm_not_overlapped=busy - computing,
        free=free,
        preparing=preparing,
        copy=copy,
    )


def _task_windows(
    tasks: pd.DataFrame, w_rank: npt.NDArray[np.int64], w_step: npt.NDArray[np.int64]
) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp]]:
    """(task row, window position) pairs: each task with every window of its (rank, step).

    Tasks whose step is <NA> belong to no window.
    """
    empty = np.empty(0, dtype=np.intp)
    if tasks.empty or len(w_rank) == 0:
        return empty, empty
    rows = np.flatnonzero(tasks["step"].notna().to_numpy())
    t_rank = tasks["rank"].to_numpy()[rows].astype(np.int64)
    t_step = tasks["step"].to_numpy(dtype=np.int64, na_value=0)[rows]
    keys = pd.MultiIndex.from_arrays([w_rank, w_step])
    if keys.is_unique:
        position = keys.get_indexer(pd.MultiIndex.from_arrays([t_rank, t_step]))
        found = position >= 0
        return rows[found], position[found].astype(np.intp)
    pairs = pd.DataFrame({"rank": t_rank, "step": t_step, "task": rows}).merge(
        pd.DataFrame({"rank": w_rank, "step": w_step, "window": np.arange(len(w_rank))}),
        on=["rank", "step"],
    )
    return pairs["task"].to_numpy(dtype=np.intp), pairs["window"].to_numpy(dtype=np.intp)


def _union_per_window(
    window: npt.NDArray[np.intp],
    starts: FloatArray,
    ends: FloatArray,
    mask: npt.NDArray[np.bool_],
    n: int,
) -> FloatArray:
    """Length of the union of the masked intervals of each of ``n`` windows.

    The intervals are sorted by (window, start)
    (:func:`perfgate.intervals.merged_lengths_by_group`); each window's lengths are summed as
    numpy sums them (:func:`_segment_sums`).
    """
    out = np.zeros(n)
    win, s, e = window[mask], starts[mask], ends[mask]
    if s.size == 0:
        return out
    block_win, lengths = merged_lengths_by_group(win, s, e)
    lead = np.flatnonzero(np.diff(block_win, prepend=-1) != 0)
    sizes = np.diff(np.append(lead, block_win.size))
    out[block_win[lead]] = _segment_sums(lengths, lead, sizes)
    return out


def _segment_sums(
    values: FloatArray, starts: npt.NDArray[np.intp], sizes: npt.NDArray[np.intp]
) -> FloatArray:
    """``np.sum(values[a:a + k])`` for each segment ``(a, k)``, bit for bit, without a loop
    over segments.

    numpy adds a float64 array pairwise (``pairwise_sum`` in its C loops): fewer than 8
    values one after another; up to 128 in 8 running partial sums combined as a tree, then the
    rest one by one; more in two halves. Segments of one size follow the same sequence of
    additions, so they are added together, one column of a (segments × size) matrix at a
    time. Sizes with few segments are summed by numpy itself.
    """
    out = np.empty(len(sizes))
    for size in np.unique(sizes):
        which = np.flatnonzero(sizes == size)
        if which.size * 8 < size:  # few long segments: numpy is quicker, and exact by definition
            for i in which:
                out[i] = np.sum(values[starts[i] : starts[i] + size])
            continue
        matrix = values[starts[which][:, None] + np.arange(size)]
        out[which] = _pairwise_rows(matrix)
    return out


_PAIRWISE_BLOCK = 128  # numpy's PW_BLOCKSIZE


def _pairwise_rows(matrix: FloatArray) -> FloatArray:
    """numpy's pairwise sum of each row of ``matrix`` (all rows of one length)."""
    size = matrix.shape[1]
    if size < 8:
        total = np.zeros(matrix.shape[0])
        for j in range(size):
            total = total + matrix[:, j]
        return total
    if size <= _PAIRWISE_BLOCK:
        partial = matrix[:, :8].copy()
        i = 8
        while i < size - size % 8:
            partial += matrix[:, i : i + 8]
            i += 8
        p = partial
        total = ((p[:, 0] + p[:, 1]) + (p[:, 2] + p[:, 3])) + (
            (p[:, 4] + p[:, 5]) + (p[:, 6] + p[:, 7])
        )
        for j in range(i, size):
            total = total + matrix[:, j]
        return total
    half = size // 2
    half -= half % 8
    return _pairwise_rows(matrix[:, :half]) + _pairwise_rows(matrix[:, half:])


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


def operator_table(
    tasks: pd.DataFrame, per_rank: pd.DataFrame, names: OperatorCodes | None = None
) -> pd.DataFrame:
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
    names = names if names is not None else OperatorCodes.of(tasks)
    # One group per (op_type, core, category), missing names included, in order of first
    # appearance: what grouping by the three columns gives (sort=False, dropna=False).
    key = np.zeros(len(tasks), dtype=np.int64)
    for column in ("op_type", "core", "category"):
        key = key * len(names.names[column]) + names.codes[column]
    group = pd.factorize(key)[0]  # 0, 1, … in order of first appearance
    first = np.unique(group, return_index=True)[1]  # each group's first task
    table = pd.DataFrame(
        {c: names.names[c][names.codes[c][first]] for c in ("op_type", "core", "category")}
    )
    grouped = tasks["dur_us"].groupby(group)
    table["calls"] = grouped.size().to_numpy()
    table["total_us"] = grouped.sum().to_numpy()
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

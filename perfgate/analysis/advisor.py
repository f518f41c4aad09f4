"""The advisor: why is the device idle? Rules over one analysed profile, each a hint that
keeps the figures that fired it. Pure: no file system, no printing; the words are
:mod:`perfgate.report.advice`'s.

The rules and their default thresholds are the field reports' (docs/advisor.md), configurable
under ``advisor:`` in perfgate.yaml (:class:`~perfgate.rules.AdvisorSettings`):

* ``idle_gaps`` — device free time over 15% of the step (median over steps), or a large gap
  recurring every k steps; names the largest gaps and the task before each;
* ``host_copies`` — host↔device copies over 25% of the step; names the copy operators;
* ``small_kernels`` — runs of 8 or more consecutive kernels each under 50 µs with launch
  gaps between them: fusion candidates, by operator sequence;
* ``sync_waits`` — synchronisation on the critical path over 5% of the step: wait tasks not
  hidden under compute, and device idle time right after a device→host copy (the host
  waited for a result: ``.item()``, ``.cpu()``, a stream synchronise);
* ``communication`` — communication not overlapped with compute over 30% of the step;
* ``rank_imbalance`` — the slowest rank more than 5% over the median rank;
* ``ai_cpu`` — operators that ran on the AI CPU instead of the AI Cores;
* ``low_utilization`` — computing under 60% of the step.

Every hint carries ``impact``: the share of the step its finding accounts for (idle gaps:
the free time that is not copy time, which the copy hint accounts for; ``low_utilization``:
how far utilization is under the limit). Hints are ordered by it, ``low_utilization`` last:
it sums the others up.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from perfgate.analysis.metrics import RunAnalysis, assign_steps
from perfgate.intervals import clip, merge, union_length
from perfgate.model import CPU_OPS, Category, Profile
from perfgate.records import MAX_ITEM_TEXT
from perfgate.rules import AdvisorSettings

# What a hint keeps, so that a record stays small: items (ops, gaps, sequences) and steps.
MAX_ITEMS = 5
MAX_STEPS = 10
MAX_NAME = 80
# A gap or a wait shorter than this share of the step is not worth naming.
_MIN_GAP_SHARE = 0.001
# A step whose largest gap is this many times the median step's largest gap is a spike.
_SPIKE_FACTOR = 2.0
_MIN_RECURRING_STEPS = 6
# A recurring gap is seen this many times, evenly spaced (two would be a coincidence).
_MIN_RECURRENCES = 3

FloatArray = npt.NDArray[np.float64]

# Device-side waits (Ascend task types, runtime and framework sync calls in CPU-op profiles).
_WAIT_CORE = re.compile(r"WAIT", re.IGNORECASE)
_SYNC_NAME = re.compile(
    r"(?:synchroni[sz]e|aten::item$|aten::_local_scalar_dense|event_?wait|stream_?wait"
    r"|notify_?wait)",
    re.IGNORECASE,
)
_D2H_NAME = re.compile(r"(?:DtoH|D2H|device[ _]to[ _]host)", re.IGNORECASE)


@dataclass(frozen=True)
class Hint:
    """One finding: which rule fired, the figures that fired it, and what is involved.

    Attributes:
        rule: one of :data:`~perfgate.rules.ADVISOR_RULES`.
        impact: the share of the step the finding accounts for (0..1), to order hints.
        figures: the numbers, named (ratios 0..1, times in µs, counts); ``limit`` is the
            threshold that was crossed.
        steps: the steps involved (at most :data:`MAX_STEPS`).
        items: the operators, gaps or kernel sequences involved, largest first (at most
            :data:`MAX_ITEMS`), each a small mapping of names to numbers and text.
    """

    rule: str
    impact: float
    figures: dict[str, float]
    steps: list[int] = field(default_factory=list)
    items: list[dict[str, Any]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """The hint as a record's ``advice`` entry (finite numbers, rounded)."""
        return {
            "rule": self.rule,
            "impact": _round(self.impact),
            "figures": {k: _round(v) for k, v in self.figures.items()},
            "steps": [int(s) for s in self.steps[:MAX_STEPS]],
            "items": [
                {k: _round(v) if isinstance(v, float) else v for k, v in item.items()}
                for item in self.items[:MAX_ITEMS]
            ],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Hint:
        return cls(
            rule=str(data["rule"]),
            impact=float(data.get("impact") or 0.0),
            figures={k: float(v) for k, v in (data.get("figures") or {}).items() if v is not None},
            steps=[int(s) for s in data.get("steps") or []],
            items=[dict(i) for i in data.get("items") or []],
        )


def _round(value: float) -> float:
    number = float(value)
    if not np.isfinite(number):
        return 0.0
    return round(number, 6)


_OPENING = {">": "<", ")": "("}


def short_name(name: object) -> str:
    """An operator or kernel name short enough to read: a C++ kernel signature loses its
    ``void``, template and call arguments and its namespaces (``void at::native::
    elementwise_kernel<128, 2, …>(…)`` → ``elementwise_kernel``)."""
    text = str(name).strip()
    if text.startswith("void "):
        text = text[5:]
    open_brackets: list[str] = []
    kept = []
    for char in text:  # drop everything inside <…> and (…), each closed by its own bracket
        if char in "<(":
            open_brackets.append(char)
        elif open_brackets and _OPENING.get(char) == open_brackets[-1]:
            open_brackets.pop()
        elif not open_brackets:
            kept.append(char)
    short = "".join(kept).strip() or text
    if "::" in short and not short.startswith("aten::"):
        short = short.rsplit("::", 1)[-1] or short
    if len(short) <= MAX_NAME:
        return short
    # Cut in the middle, as the tables do: generated kernels that differ only at the end
    # (…_fused_0, …_fused_1) must not read the same.
    head = (MAX_NAME - 1) * 2 // 3
    return short[:head] + "…" + short[-(MAX_NAME - 1 - head) :]


# --------------------------------------------------------------------------- windows


@dataclass
class _Window:
    rank: int
    step: int
    start: float
    end: float
    tasks: pd.DataFrame  # sorted by start

    @property
    def length(self) -> float:
        return self.end - self.start

    def intervals(self, *categories: Category) -> tuple[FloatArray, FloatArray]:
        mask = self.tasks["category"].isin([c.value for c in categories]).to_numpy()
        starts = self.tasks["start_us"].to_numpy(dtype=np.float64)[mask]
        ends = starts + self.tasks["dur_us"].to_numpy(dtype=np.float64)[mask]
        return clip(starts, ends, self.start, self.end)


def _windows(profile: Profile, analysis: RunAnalysis) -> Iterator[_Window]:
    """The analysed (rank, step) windows with their tasks (none for a breakdown-only
    profile)."""
    per_rank = analysis.per_rank
    if profile.tasks.empty or per_rank.empty:
        return
    known = per_rank.dropna(subset=["start_us", "end_us"])[["rank", "step", "start_us", "end_us"]]
    tasks = assign_steps(profile.tasks, known)
    # Names are matched once per distinct value, not once per task.
    short = {op: short_name(op) for op in tasks["op_type"].unique()}
    tasks["short_op"] = tasks["op_type"].map(short)
    labels = tasks["core"].astype(str) + "\0" + tasks["op_type"].astype(str) + " " + tasks["name"]
    waits = {label: _is_wait(label) for label in labels.unique()}
    tasks["is_wait"] = labels.map(waits).astype(bool)
    tasks = tasks.loc[tasks["step"].notna()].sort_values("start_us", kind="stable")
    groups = {key: g for key, g in tasks.groupby(["rank", "step"], sort=False)}
    for row in per_rank.to_dict("records"):
        key = (int(row["rank"]), int(row["step"]))
        step_tasks = groups.get(key)
        if step_tasks is None or step_tasks.empty:
            continue
        start, end = float(row["start_us"]), float(row["end_us"])
        if np.isnan(start) or np.isnan(end):
            start = float(step_tasks["start_us"].min())
            end = float((step_tasks["start_us"] + step_tasks["dur_us"]).max())
        if end > start:
            yield _Window(key[0], key[1], start, end, step_tasks)


def _is_wait(label: str) -> bool:
    """Whether a task (``core NUL op_type name``) is a synchronisation wait."""
    core, _, names = label.partition("\0")
    return bool(_WAIT_CORE.search(core) or _SYNC_NAME.search(names))


def _median(series: pd.Series) -> float:
    values = series.dropna()
    return float(values.median()) if not values.empty else float("nan")


# --------------------------------------------------------------------------- rules


def _gaps(window: _Window, keep: int = 3) -> tuple[float, list[dict[str, Any]]]:
    """The device's idle gaps inside a window after its first work (between busy — compute or
    communication — intervals, and from the last one to the window's end): the largest
    one's length, and the ``keep`` largest with the task that ended last before the device
    went back to work (a copy or a wait inside the gap is the likelier cause than the
    kernel before it) and the task that ends the gap."""
    busy_s, busy_e = merge(*window.intervals(Category.COMPUTE, Category.COMM))
    if busy_s.size == 0:
        return 0.0, []
    gap_starts = busy_e
    gap_ends = np.append(busy_s[1:], window.end)
    lengths = gap_ends - gap_starts
    largest = float(lengths.max()) if lengths.size else 0.0
    order = np.argsort(-lengths, kind="stable")[:keep]
    order = order[lengths[order] > _MIN_GAP_SHARE * window.length]
    tasks = window.tasks
    starts = tasks["start_us"].to_numpy(dtype=np.float64)
    ends = starts + tasks["dur_us"].to_numpy(dtype=np.float64)
    by_end = np.argsort(ends, kind="stable")
    sorted_ends = ends[by_end]
    out = []
    for index in order:
        gap_start, gap_end = float(gap_starts[index]), float(gap_ends[index])
        before_at = int(np.searchsorted(sorted_ends, gap_end, side="right")) - 1
        before = tasks.iloc[by_end[before_at]] if before_at >= 0 else None
        at_end = gap_end >= window.end
        after_at = int(np.searchsorted(starts, gap_end, side="left"))
        after = tasks.iloc[after_at] if not at_end and after_at < len(tasks) else None
        out.append(
            {
                "gap_us": gap_end - gap_start,
                "step": window.step,
                "rank": window.rank,
                "at_us": gap_start - window.start,
                "before": str(before["short_op"]) if before is not None else "",
                "before_category": str(before["category"]) if before is not None else "",
                "after": str(after["short_op"]) if after is not None else "",
                "at_end": bool(at_end),
            }
        )
    return largest, out


def _idle_gaps(
    windows: list[_Window], analysis: RunAnalysis, settings: AdvisorSettings
) -> Hint | None:
    per_step = analysis.per_step
    free = _median(per_step["free_ratio"])
    if np.isnan(free):
        return None
    largest_by_step: dict[int, float] = {}
    gaps: list[dict[str, Any]] = []
    for window in windows:
        largest, found = _gaps(window)
        largest_by_step[window.step] = max(largest_by_step.get(window.step, 0.0), largest)
        gaps.extend(found)
    recurring = _recurring_gaps(largest_by_step, per_step, settings)
    if free <= settings.free_ratio and recurring is None:
        return None
    over = per_step.loc[per_step["free_ratio"] > settings.free_ratio, "step"]
    figures: dict[str, float] = {
        "free_ratio": free,
        "free_us": _median(per_step["free_us"]),
        "step_time_us": _median(per_step["step_time_us"]),
        "limit": settings.free_ratio,
        "steps_over": float(len(over)),
        "steps": float(len(per_step)),
    }
    # Copy time is free time too (docs/metrics.md); the host_copies hint accounts for it.
    copy = _median(per_step["copy_ratio"])
    impact = max(free - (0.0 if np.isnan(copy) else copy), 0.0)
    steps = [int(s) for s in over]
    if recurring is not None:
        figures.update(recurring[0])
        steps = recurring[1]
        impact = max(impact, figures["recurring_gap_us"] / figures["step_time_us"])
    top_gaps = sorted(gaps, key=lambda g: -g["gap_us"])[:3]
    return Hint("idle_gaps", impact, figures, steps, top_gaps)


def _recurring_gaps(
    largest: dict[int, float], per_step: pd.DataFrame, settings: AdvisorSettings
) -> tuple[dict[str, float], list[int]] | None:
    """A large gap every k steps (k ≥ 2): the steps whose largest gap is a spike, evenly
    spaced, each gap alone over the free-time limit of its step."""
    if len(per_step) < _MIN_RECURRING_STEPS or not largest:
        return None
    steps = sorted(int(s) for s in per_step["step"])
    sizes = np.asarray([largest.get(s, 0.0) for s in steps])
    typical = float(np.median(sizes))
    step_time = per_step.set_index("step")["step_time_us"]
    spikes = [
        s
        for s, size in zip(steps, sizes)
        if size > _SPIKE_FACTOR * typical and size > settings.free_ratio * float(step_time[s])
    ]
    if len(spikes) < _MIN_RECURRENCES or len(spikes) > len(steps) // 2:
        return None
    periods = set(np.diff(spikes).tolist())
    if len(periods) != 1 or (period := int(periods.pop())) < 2:
        return None
    if spikes[0] - steps[0] >= period or steps[-1] - spikes[-1] >= period:
        return None  # the pattern must hold over the whole profile, not one stretch of it
    spike_sizes = [largest[s] for s in spikes]
    return {"period": float(period), "recurring_gap_us": float(np.median(spike_sizes))}, spikes


def _host_copies(analysis: RunAnalysis, profile: Profile, settings: AdvisorSettings) -> Hint | None:
    per_step = analysis.per_step
    ratio = _median(per_step["copy_ratio"])
    if np.isnan(ratio) or ratio <= settings.copy_ratio:
        return None
    ops = analysis.operators
    copies = ops.loc[ops["category"] == Category.COPY.value].head(MAX_ITEMS)
    directions = _copy_directions(profile)
    items = [
        {
            "op": short_name(row["op_type"]),
            "direction": directions.get(str(row["op_type"]), ""),
            "time_per_step_us": float(row["time_per_step_us"]),
            "calls_per_step": float(row["calls_per_step"]),
            "share": float(row["share"]),
        }
        for row in copies.to_dict("records")
    ]
    over = per_step.loc[per_step["copy_ratio"] > settings.copy_ratio, "step"]
    figures = {
        "copy_ratio": ratio,
        "copy_us": _median(per_step["copy_us"]),
        "step_time_us": _median(per_step["step_time_us"]),
        "limit": settings.copy_ratio,
    }
    return Hint("host_copies", ratio, figures, [int(s) for s in over], items)


def _copy_directions(profile: Profile) -> dict[str, str]:
    """The direction(s) of each copy operator, where the source says (``h2d``, ``d2h`` …)."""
    tasks = profile.tasks
    if "direction" not in tasks.columns:
        return {}
    copies = tasks.loc[(tasks["category"] == Category.COPY.value) & tasks["direction"].notna()]
    return {
        str(op): "/".join(sorted(set(group["direction"].astype(str))))
        for op, group in copies.groupby("op_type")
    }


def _small_kernels(
    windows: list[_Window], analysis: RunAnalysis, profile: Profile, settings: AdvisorSettings
) -> Hint | None:
    sequences: dict[tuple[str, ...], dict[str, float]] = {}
    kernels = runs = 0
    span_total = gap_total = 0.0
    steps: set[int] = set()
    for window in windows:
        for run in _small_runs(window, settings):
            names = tuple(str(n) for n in run["ops"])
            entry = sequences.setdefault(names, {"runs": 0.0, "span_us": 0.0, "gap_us": 0.0})
            entry["runs"] += 1
            entry["span_us"] += run["span_us"]
            entry["gap_us"] += run["gap_us"]
            kernels += len(names)
            runs += 1
            span_total += run["span_us"]
            gap_total += run["gap_us"]
            steps.add(window.step)
    if not runs:
        return None
    rank_steps = max(len(analysis.per_rank), 1)
    # Share of all the steps' time (means on both sides): a stall inside a run on a busy
    # runner made the mean span over the median step 204% "of the step".
    all_steps_us = float(analysis.per_rank["step_time_us"].sum())
    span_per_step = span_total / rank_steps
    ranked = sorted(sequences.items(), key=lambda kv: -kv[1]["span_us"])
    items = [
        {
            "sequence": _sequence_text(names),
            "kernels": float(len(names)),
            "runs_per_step": entry["runs"] / rank_steps,
            "span_us": entry["span_us"] / entry["runs"],
            "launch_gap_us": entry["gap_us"] / entry["runs"],
        }
        for names, entry in ranked[:3]
    ]
    figures = {
        "runs_per_step": runs / rank_steps,
        "kernels_per_step": kernels / rank_steps,
        "span_us": span_per_step,
        "launch_gap_us": gap_total / rank_steps,
        "span_ratio": span_total / all_steps_us if all_steps_us > 0 else 0.0,
        "limit_us": settings.small_kernel_us,
        "min_run": float(settings.small_kernel_run),
        "cpu_ops": 1.0 if profile.metadata.get("task_basis") == CPU_OPS else 0.0,
    }
    return Hint("small_kernels", figures["span_ratio"], figures, sorted(steps), items)


def _small_runs(window: _Window, settings: AdvisorSettings) -> Iterator[dict[str, Any]]:
    """Maximal runs of consecutive compute tasks, each shorter than the limit, each starting
    after everything before it ended (a launch gap), at least ``small_kernel_run`` long. A
    run's launch gaps are the time between its tasks when the device did nothing: a copy or
    a collective in a gap is work, not launch overhead. A copy in a gap is no part of the
    run's span either: the copies hint counts it (128 per-sample ``.cpu()`` copies between
    small ops made a "small-kernel run" of 41% of the step, above the copies' own 27%)."""
    category = window.tasks["category"]
    other = window.tasks.loc[category.isin((Category.COPY.value, Category.COMM.value))]
    other_start = other["start_us"].to_numpy(dtype=np.float64)
    busy = _CoveredTime(*merge(other_start, other_start + other["dur_us"].to_numpy(np.float64)))
    copying = _CoveredTime(*merge(*window.intervals(Category.COPY)))
    tasks = window.tasks.loc[category == Category.COMPUTE.value]
    if len(tasks) < settings.small_kernel_run:
        return
    starts = tasks["start_us"].to_numpy(dtype=np.float64)
    durations = tasks["dur_us"].to_numpy(dtype=np.float64)
    ends = starts + durations
    ops = tasks["short_op"].to_numpy()
    small = durations < settings.small_kernel_us
    running_end = np.maximum.accumulate(ends)
    gaps = np.empty_like(starts)
    gaps[0] = 0.0
    gaps[1:] = starts[1:] - running_end[:-1]
    idle = np.zeros_like(starts)
    idle[1:] = np.maximum(gaps[1:] - (busy.before(starts[1:]) - busy.before(running_end[:-1])), 0.0)
    copied = np.zeros_like(starts)  # copy time in each gap (a collective may run beside a run)
    copied[1:] = np.clip(copying.before(starts[1:]) - copying.before(running_end[:-1]), 0.0, None)
    # i continues the run of i-1: both small, and i started after everything before ended.
    joins = np.zeros(len(starts), dtype=bool)
    joins[1:] = small[1:] & small[:-1] & (gaps[1:] > 0)
    first = 0
    for index in range(1, len(starts) + 1):
        if index < len(starts) and joins[index]:
            continue
        length = index - first
        if small[first] and length >= settings.small_kernel_run:
            span = float(running_end[index - 1] - starts[first] - copied[first + 1 : index].sum())
            yield {
                "ops": list(ops[first:index]),
                "span_us": span,
                "gap_us": float(idle[first + 1 : index].sum()),
            }
        first = index


@dataclass(frozen=True)
class _CoveredTime:
    """Disjoint sorted intervals, asked how much of them lies before a time."""

    starts: npt.NDArray[np.float64]
    ends: npt.NDArray[np.float64]

    def before(self, at: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        """The covered time before each of ``at``."""
        if not self.starts.size:
            return np.zeros_like(at)
        lengths = self.ends - self.starts
        done = np.concatenate([[0.0], np.cumsum(lengths)])
        last = np.searchsorted(self.starts, at, side="right")  # intervals starting ≤ at
        inside = np.clip(at - self.starts[np.maximum(last - 1, 0)], 0.0, None)
        partial = np.where(last > 0, np.minimum(inside, lengths[np.maximum(last - 1, 0)]), 0.0)
        return np.asarray(done[np.maximum(last - 1, 0)] + partial, dtype=np.float64)


def _sequence_text(names: tuple[str, ...], limit: int = 6) -> str:
    """``Cast → Mul ×3 → Add … (+4)``: repeats collapsed, the first few kinds named, as many
    as fit a record's item text (:data:`~perfgate.records.MAX_ITEM_TEXT`: rocBLAS kernel
    names run to 80 characters even without templates)."""
    collapsed: list[tuple[str, int]] = []
    for name in names:
        if collapsed and collapsed[-1][0] == name:
            collapsed[-1] = (name, collapsed[-1][1] + 1)
        else:
            collapsed.append((name, 1))
    parts = [f"{name} ×{count}" if count > 1 else name for name, count in collapsed]
    shown = min(limit, len(parts))
    while True:
        more = len(parts) - shown
        text = " → ".join(parts[:shown]) + (f" … (+{more})" if more > 0 else "")
        if len(text) <= MAX_ITEM_TEXT or shown == 1:
            return text if len(text) <= MAX_ITEM_TEXT else text[: MAX_ITEM_TEXT - 1] + "…"
        shown -= 1


def _sync_waits(
    windows: list[_Window], analysis: RunAnalysis, settings: AdvisorSettings
) -> Hint | None:
    shares: list[float] = []
    per_op: dict[tuple[str, str], list[float]] = {}
    steps: list[int] = []
    for window in windows:
        tasks = window.tasks
        waits = tasks["is_wait"]
        busy_s, busy_e = window.intervals(Category.COMPUTE, Category.COMM)
        busy = union_length(busy_s, busy_e)
        total = 0.0
        if waits.any():
            starts = tasks["start_us"].to_numpy(dtype=np.float64)
            ends = starts + tasks["dur_us"].to_numpy(dtype=np.float64)
            ops = tasks["short_op"].to_numpy()
            mask = waits.to_numpy()
            # The part of the waits the device spends idle: not hidden under work.
            all_s, all_e = clip(starts[mask], ends[mask], window.start, window.end)
            total = union_length(np.append(busy_s, all_s), np.append(busy_e, all_e)) - busy
            for op in sorted(set(ops[mask])):
                of_op = mask & (ops == op)
                w_s, w_e = clip(starts[of_op], ends[of_op], window.start, window.end)
                exposed = union_length(np.append(busy_s, w_s), np.append(busy_e, w_e)) - busy
                if exposed > 0:
                    per_op.setdefault((op, "wait"), []).append(exposed)
        for op, exposed in _idle_after_d2h(window, tasks, busy_s, busy_e):
            total += exposed
            per_op.setdefault((op, "idle after device→host copy"), []).append(exposed)
        share = total / window.length
        shares.append(share)
        if share > settings.sync_ratio:
            steps.append(window.step)
    if not shares:
        return None
    median = float(np.median(shares))
    if median <= settings.sync_ratio:
        return None
    rank_steps = max(len(windows), 1)
    ranked = sorted(per_op.items(), key=lambda kv: -sum(kv[1]))
    items = [
        {
            "op": op,
            "kind": kind,
            "time_per_step_us": sum(values) / rank_steps,
            "calls_per_step": len(values) / rank_steps,
        }
        for (op, kind), values in ranked
    ]
    figures = {
        "sync_ratio": median,
        "sync_us": median * _median(analysis.per_step["step_time_us"]),
        "limit": settings.sync_ratio,
    }
    return Hint("sync_waits", median, figures, sorted(set(steps)), items)


def _idle_after_d2h(
    window: _Window, tasks: pd.DataFrame, busy_s: FloatArray, busy_e: FloatArray
) -> Iterator[tuple[str, float]]:
    """For each device→host copy that ends while the device is idle: the idle time from its
    end to the next work (the host waited for the copied value before launching more)."""
    if tasks.empty:
        return
    copies = tasks["category"] == Category.COPY.value
    if "direction" in tasks.columns:
        d2h = copies & (tasks["direction"].astype(str) == "d2h")
    else:
        d2h = copies & False
    d2h = d2h | (copies & tasks["short_op"].str.contains(_D2H_NAME))
    if not d2h.any():
        return
    merged_s, merged_e = merge(busy_s, busy_e)
    for row in tasks.loc[d2h].to_dict("records"):
        end = float(row["start_us"] + row["dur_us"])
        if not window.start <= end < window.end:
            continue
        inside = np.searchsorted(merged_s, end, side="right") - 1
        if inside >= 0 and merged_e[inside] > end:
            continue  # the device was busy anyway
        following = merged_s[merged_s > end]
        resume = float(following[0]) if following.size else window.end
        if resume > end:
            yield str(row["short_op"]), resume - end


def _communication(
    windows: list[_Window], analysis: RunAnalysis, settings: AdvisorSettings
) -> Hint | None:
    per_step = analysis.per_step
    ratio = _median(per_step["comm_ratio"])
    if np.isnan(ratio) or ratio <= settings.comm_ratio:
        return None
    ops = analysis.operators
    comm = ops.loc[ops["category"] == Category.COMM.value].head(MAX_ITEMS)
    items = [
        {
            "op": short_name(row["op_type"]),
            "time_per_step_us": float(row["time_per_step_us"]),
            "calls_per_step": float(row["calls_per_step"]),
            "share": float(row["share"]),
        }
        for row in comm.to_dict("records")
    ]
    figures = {
        "comm_ratio": ratio,
        "comm_not_overlapped_us": _median(per_step["comm_not_overlapped_us"]),
        "step_time_us": _median(per_step["step_time_us"]),
        "limit": settings.comm_ratio,
    }
    unions = [union_length(*w.intervals(Category.COMM)) for w in windows]
    if unions and sum(unions) > 0:
        comm_us = float(np.median(unions))
        figures["comm_us"] = comm_us
        figures["overlapped"] = max(0.0, 1 - figures["comm_not_overlapped_us"] / comm_us)
    over = per_step.loc[per_step["comm_ratio"] > settings.comm_ratio, "step"]
    return Hint("communication", ratio, figures, [int(s) for s in over], items)


def _rank_imbalance(analysis: RunAnalysis, settings: AdvisorSettings) -> Hint | None:
    per_step = analysis.per_step
    if per_step.empty or int(per_step["ranks"].max()) < 2:
        return None
    imbalance = _median(per_step["imbalance"])
    if np.isnan(imbalance) or imbalance <= settings.imbalance:
        return None
    median_rank = analysis.per_rank.groupby("step")["step_time_us"].median()
    worst = per_step.sort_values("imbalance", ascending=False)
    items = [
        {
            "step": int(row["step"]),
            "slowest_rank": int(row["slowest_rank"]),
            "slowest_us": float(row["step_time_us"]),
            "median_us": float(median_rank[row["step"]]),
        }
        for row in worst.head(3).to_dict("records")
    ]
    slowest = per_step["slowest_rank"].mode()
    figures = {
        "imbalance": imbalance,
        "max_imbalance": float(per_step["imbalance"].max()),
        "ranks": float(per_step["ranks"].max()),
        "slowest_rank": float(slowest.iloc[0]) if not slowest.empty else -1.0,
        "limit": settings.imbalance,
    }
    over = per_step.loc[per_step["imbalance"] > settings.imbalance, "step"]
    steps = [int(s) for s in over]
    return Hint("rank_imbalance", imbalance / (1 + imbalance), figures, steps, items)


def _ai_cpu(analysis: RunAnalysis, settings: AdvisorSettings) -> Hint | None:
    ops = analysis.operators
    ai_cpu = ops.loc[ops["core"].astype(str).str.upper() == "AI_CPU"]
    if ai_cpu.empty:
        return None
    share = float(ai_cpu["share"].fillna(0.0).sum())
    if settings.ai_cpu_share > 0 and share <= settings.ai_cpu_share:
        return None  # with the default limit 0, any AI_CPU operator is worth a hint
    items = [
        {
            "op": short_name(row["op_type"]),
            "time_per_step_us": float(row["time_per_step_us"]),
            "calls_per_step": float(row["calls_per_step"]),
            "share": float(row["share"]),
        }
        for row in ai_cpu.head(MAX_ITEMS).to_dict("records")
    ]
    figures = {
        "share": share,
        "time_per_step_us": float(ai_cpu["time_per_step_us"].sum()),
        "operators": float(len(ai_cpu)),
        "limit": settings.ai_cpu_share,
    }
    return Hint("ai_cpu", share, figures, [], items)


def _low_utilization(analysis: RunAnalysis, settings: AdvisorSettings) -> Hint | None:
    per_step = analysis.per_step
    utilization = _median(per_step["utilization"])
    if np.isnan(utilization) or utilization >= settings.utilization:
        return None
    step_time = _median(per_step["step_time_us"])
    figures = {
        "utilization": utilization,
        "comm_ratio": _median(per_step["comm_ratio"]),
        "free_ratio": _median(per_step["free_ratio"]),
        "preparing_ratio": _median(per_step["preparing_us"]) / step_time if step_time else 0.0,
        "limit": settings.utilization,
    }
    under = per_step.loc[per_step["utilization"] < settings.utilization, "step"]
    return Hint(
        "low_utilization", settings.utilization - utilization, figures, [int(s) for s in under]
    )


def advise(
    profile: Profile, analysis: RunAnalysis, settings: AdvisorSettings | None = None
) -> list[Hint]:
    """Every rule's hint for one analysed profile, the largest impact first."""
    settings = settings or AdvisorSettings()
    if analysis.per_step.empty:
        return []
    windows = list(_windows(profile, analysis))
    found: dict[str, Callable[[], Hint | None]] = {
        "idle_gaps": lambda: _idle_gaps(windows, analysis, settings),
        "host_copies": lambda: _host_copies(analysis, profile, settings),
        "small_kernels": lambda: _small_kernels(windows, analysis, profile, settings),
        "sync_waits": lambda: _sync_waits(windows, analysis, settings),
        "communication": lambda: _communication(windows, analysis, settings),
        "rank_imbalance": lambda: _rank_imbalance(analysis, settings),
        "ai_cpu": lambda: _ai_cpu(analysis, settings),
        "low_utilization": lambda: _low_utilization(analysis, settings),
    }
    hints = [
        hint
        for rule, check in found.items()
        if rule not in settings.disable and (hint := check()) is not None
    ]
    # Low utilization sums the others up: it comes after the causes.
    return sorted(hints, key=lambda h: (h.rule == "low_utilization", -h.impact))


__all__ = ["MAX_ITEMS", "Hint", "advise", "short_name"]

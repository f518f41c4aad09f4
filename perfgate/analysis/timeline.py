"""A compact timeline strip of one representative step, kept in the run record so a report
can draw it without the profile: per lane (compute, communication, copy) the busy intervals
of that step, relative to its start, merged and bounded.

The representative step is the one whose step time is nearest the median (the earliest of
equals), on its slowest rank: the step a reader would pick to look at. Free time is what no
compute or communication covers; the report derives it. A lane keeps at most
:data:`MAX_SEGMENTS` intervals: beyond that, gaps shorter than a resolution that doubles from
1/2000 of the step are closed until it fits, so a strip stays a few KB whatever the profile.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from perfgate.analysis.metrics import RunAnalysis, assign_steps
from perfgate.intervals import clip, merge
from perfgate.model import Category, Profile

LANES = (Category.COMPUTE.value, Category.COMM.value, Category.COPY.value)
MAX_SEGMENTS = 100
_FIRST_RESOLUTION = 1 / 2000
_DIGITS = 3

FloatArray = npt.NDArray[np.float64]


def representative_step(analysis: RunAnalysis) -> tuple[int, int] | None:
    """(rank, step) of the step nearest the median step time, on its slowest rank."""
    per_step = analysis.per_step.dropna(subset=["step_time_us"])
    if per_step.empty:
        return None
    times = per_step["step_time_us"].to_numpy(dtype=np.float64)
    index = int(np.argmin(np.abs(times - np.median(times))))
    row = per_step.iloc[index]
    return int(row["slowest_rank"]), int(row["step"])


def coarsen(
    starts: FloatArray, ends: FloatArray, resolution: float, limit: int = MAX_SEGMENTS
) -> tuple[FloatArray, FloatArray]:
    """Merged intervals, with gaps below a doubling resolution closed until at most
    ``limit`` remain."""
    starts, ends = merge(starts, ends)
    while starts.size > limit and resolution > 0:
        close = np.empty(starts.size, dtype=bool)
        close[0] = False
        close[1:] = starts[1:] - ends[:-1] < resolution
        keep = ~close
        block_end = np.maximum.reduceat(ends, np.flatnonzero(keep))
        starts, ends = starts[keep], block_end
        resolution *= 2
    return starts, ends


def timeline_strip(profile: Profile, analysis: RunAnalysis) -> dict[str, Any] | None:
    """The strip of the representative step: ``{"step", "rank", "step_time_us", "lanes":
    {"compute": [[start, end], …], "comm": […], "copy": […]}}``, times in µs from the step's
    start (3 decimals); None when the profile has no tasks or no step window."""
    chosen = representative_step(analysis)
    if chosen is None or profile.tasks.empty:
        return None
    rank, step = chosen
    window = analysis.per_rank.loc[
        (analysis.per_rank["rank"] == rank) & (analysis.per_rank["step"] == step)
    ]
    if window.empty:
        return None
    start = float(window["start_us"].iloc[0])
    end = float(window["end_us"].iloc[0])
    tasks = profile.tasks.loc[profile.tasks["rank"] == rank]
    if np.isnan(start) or np.isnan(end):
        # No wall span (step_trace_time.csv): the profiler's breakdown places the step's
        # first work ``preparing_us`` after its start, and the step lasts step_time_us.
        tasks = tasks.loc[tasks["step"] == step]
        work = tasks.loc[tasks["category"].isin([Category.COMPUTE.value, Category.COMM.value])]
        if work.empty:
            return None
        preparing = float(window["preparing_us"].iloc[0])
        start = float(work["start_us"].min()) - (0.0 if np.isnan(preparing) else preparing)
        step_time = float(window["step_time_us"].iloc[0])
        last = float((tasks["start_us"] + tasks["dur_us"]).max())
        end = start + step_time if step_time > 0 else last
    else:
        windows = analysis.per_rank[["rank", "step", "start_us", "end_us"]]
        tasks = assign_steps(tasks, windows.loc[windows["rank"] == rank])
        tasks = tasks.loc[tasks["step"] == step]
    length = end - start
    if tasks.empty or not length > 0:
        return None
    lanes: dict[str, list[list[float]]] = {}
    for lane in LANES:
        of_lane = tasks.loc[tasks["category"] == lane]
        s = of_lane["start_us"].to_numpy(dtype=np.float64)
        e = s + of_lane["dur_us"].to_numpy(dtype=np.float64)
        s, e = clip(s, e, start, end)
        s, e = coarsen(s - start, e - start, _FIRST_RESOLUTION * length)
        lanes[lane] = [[round(float(a), _DIGITS), round(float(b), _DIGITS)] for a, b in zip(s, e)]
    return {"step": step, "rank": rank, "step_time_us": round(length, _DIGITS), "lanes": lanes}


def free_segments(strip: dict[str, Any]) -> list[tuple[float, float]]:
    """The strip's idle time: what neither compute nor communication covers, from the first
    busy interval on (before it is the step's preparing time)."""
    lanes = strip.get("lanes") or {}
    work = (Category.COMPUTE.value, Category.COMM.value)
    busy = [segment for lane in work for segment in lanes.get(lane, [])]
    if not busy:
        return [(0.0, float(strip["step_time_us"]))]
    starts, ends = merge([b[0] for b in busy], [b[1] for b in busy])
    gaps = [(float(a), float(b)) for a, b in zip(ends[:-1], starts[1:]) if b > a]
    if ends[-1] < strip["step_time_us"]:
        gaps.append((float(ends[-1]), float(strip["step_time_us"])))
    return gaps


def preparing_segment(strip: dict[str, Any]) -> tuple[float, float] | None:
    """The strip's preparing time: from the step's start to its first busy interval."""
    lanes = strip.get("lanes") or {}
    firsts = [
        lane_segments[0][0]
        for lane in (Category.COMPUTE.value, Category.COMM.value)
        if (lane_segments := lanes.get(lane))
    ]
    first = min(firsts, default=None)
    return (0.0, float(first)) if first else None


__all__ = ["LANES", "MAX_SEGMENTS", "free_segments", "representative_step", "timeline_strip"]

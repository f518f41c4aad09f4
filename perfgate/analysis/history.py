"""A benchmark's metric along the main line, and where it changed: change points from PELT
(``ruptures``) over the per-commit centres, and slow creep — several changes in the bad
direction, each under the threshold, that add up past it.

Pure: the caller reads the baselines (:mod:`perfgate.store`) and hands over the records,
oldest first. Why PELT, and how its penalty is set: docs/history.md.

* Each commit's value is its baseline's centre on the decision scale
  (:func:`~perfgate.analysis.compare.side_rounds`: the log of the step time, the plain value
  of a ratio), with the spread of its rounds.
* The series is scaled by its noise — a robust estimate from the differences between
  neighbouring commits (1.4826 × MAD / √2), which steps barely move — and PELT with the
  ``l2`` cost, segments of at least :data:`MIN_SIZE` commits, and a penalty of
  :data:`PENALTY` × ln(n) per change finds the segments. On simulated series of 30
  commits this gives about one false change point in a hundred flat series and finds every
  8% step (docs/history.md).
* A change point is where a segment starts; it entered main in the commits after the last
  baseline of the previous segment, up to the first baseline of the new one.
* Slow creep: two or more consecutive change points in the bad direction whose sum passes
  the threshold while no step between neighbouring baselines in their range did — each
  commit passed its gate, the sum would not have.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from perfgate.analysis.compare import side_rounds
from perfgate.records import RunRecord
from perfgate.rules import MetricRule

MIN_SIZE = 2  # commits per segment: one odd run is noise, not a change
PENALTY = 6.0  # per change point, × ln(n), in units of the noise variance
MIN_POINTS = 2 * MIN_SIZE
NOISE_FLOOR = 1e-4  # a series with no noise at all (synthetic) still has a scale
RECENT = 3  # a change whose first commit is among the newest this many baselines is new
METHOD = "PELT (ruptures, l2 cost)"


@dataclass(frozen=True)
class Point:
    """One commit's baseline: its centre and the range of its round values (metric unit)."""

    commit: str
    date: str | None
    back: int  # first-parent hops from the newest commit of the walk
    centre: float
    low: float
    high: float
    rounds: int
    scaled: float  # the centre on the decision scale (log for step time)


@dataclass(frozen=True)
class Segment:
    first: int  # point indexes, inclusive
    last: int
    level: float  # metric unit


@dataclass(frozen=True)
class ChangePoint:
    """A step between two segments: it entered main after ``before`` up to ``after``."""

    index: int  # the first point of the new segment
    before: str
    after: str
    commits: int  # commits in the range (before, after]
    level_before: float
    level_after: float
    change: float  # in the threshold's unit (a fraction for % and pt)
    bad: bool  # in the metric's bad direction
    exceeds: bool  # beyond the threshold in the bad direction
    recent: bool


@dataclass(frozen=True)
class Creep:
    """Consecutive changes in the bad direction adding up past the threshold while every
    step between neighbouring baselines stayed within it: what a per-commit gate lets
    through."""

    first: str  # the commit before the first change
    last: str  # the first commit of the last change's segment
    change: float  # threshold unit, from the level before to the level after
    changes: int
    commits: int
    largest_step: float  # the largest change between neighbouring baselines in the range


@dataclass
class History:
    benchmark: str
    env: str
    metric: str
    label: str
    unit: str  # the threshold's unit: % | pt | us
    threshold: str
    points: list[Point]
    segments: list[Segment] = field(default_factory=list)
    change_points: list[ChangePoint] = field(default_factory=list)
    creep: list[Creep] = field(default_factory=list)
    noise: float | None = None  # per-commit noise on the decision scale
    method: str = METHOD
    note: str | None = None


def point_of(record: RunRecord, metric: str, commit: str, back: int) -> Point | None:
    """A baseline record as a point of the series (None when it has no value of
    ``metric``)."""
    rounds = side_rounds(record, metric)
    if rounds.rounds == 0:
        return None
    log = metric == "step_time_us"
    values = np.exp(rounds.values) if log else rounds.values
    scaled = rounds.centre()
    date = record.get("commit_time") or record.get("created")
    return Point(
        commit=commit,
        date=str(date) if date else None,
        back=back,
        centre=float(math.exp(scaled) if log else scaled),
        low=float(values.min()),
        high=float(values.max()),
        rounds=rounds.rounds,
        scaled=float(scaled),
    )


def series_noise(values: np.ndarray) -> float:
    """A robust standard deviation of one commit's value, from neighbour differences."""
    if values.size < 3:
        return NOISE_FLOOR
    diffs = np.diff(values)
    mad = float(np.median(np.abs(diffs - np.median(diffs))))
    return max(1.4826 * mad / math.sqrt(2), NOISE_FLOOR)


def _without_lone_outliers(values: np.ndarray) -> np.ndarray:
    """``values`` with each inner point replaced by the median of it and its two neighbours:
    one odd commit (a spike, a damaged run) is gone, a step of two or more commits stays
    where it is. Without it a spike made two change points (up, then down), the first
    blamed on the commit before it, at a level no commit measured."""
    if values.size < 3:
        return values
    smoothed = values.copy()
    smoothed[1:-1] = np.median(np.stack([values[:-2], values[1:-1], values[2:]]), axis=0)
    return smoothed


def change_indexes(values: np.ndarray, noise: float) -> list[int]:
    """Where new segments start (point indexes), by PELT on the noise-scaled series."""
    import ruptures

    if values.size < MIN_POINTS:
        return []
    signal = (_without_lone_outliers(values) / noise).reshape(-1, 1)
    algorithm = ruptures.Pelt(model="l2", min_size=MIN_SIZE, jump=1).fit(signal)
    ends = algorithm.predict(pen=PENALTY * math.log(values.size))
    return [int(e) for e in ends[:-1]]


def analyse(
    points: Sequence[Point],
    rule: MetricRule,
    *,
    benchmark: str,
    env: str,
    looked_at: str = "on the main line",
) -> History:
    """Segments, change points and creep of ``points`` (oldest first) under ``rule``;
    ``looked_at``: where the baselines were looked for, for the note when there are none."""
    threshold = rule.threshold
    history = History(
        benchmark=benchmark,
        env=env,
        metric=rule.metric,
        label=rule.label,
        unit=threshold.unit.value,
        threshold=("+" if rule.bad_sign > 0 else "-") + threshold.text.lstrip("+-"),
        points=list(points),
    )
    if not points:
        history.note = f"no baselines {looked_at}"
        return history
    values = np.asarray([p.scaled for p in points], dtype=np.float64)
    noise = series_noise(values)
    history.noise = noise
    starts = change_indexes(values, noise)
    if len(points) < MIN_POINTS:
        history.note = f"{len(points)} baseline(s): change points need {MIN_POINTS} or more"
    bounds = [0, *starts, len(points)]
    log = rule.metric == "step_time_us"
    for first, end in itertools.pairwise(bounds):
        level = float(np.median(values[first:end]))
        history.segments.append(
            Segment(first=first, last=end - 1, level=math.exp(level) if log else level)
        )
    for previous, segment in zip(history.segments[:-1], history.segments[1:]):
        before, after = points[segment.first - 1], points[segment.first]
        change = threshold.change(previous.level, segment.level)
        bad = change * rule.bad_sign > 0
        history.change_points.append(
            ChangePoint(
                index=segment.first,
                before=before.commit,
                after=after.commit,
                commits=before.back - after.back,
                level_before=previous.level,
                level_after=segment.level,
                change=change,
                bad=bad,
                exceeds=threshold.exceeded_by(previous.level, segment.level, rule.bad_sign),
                recent=segment.first >= len(points) - RECENT,
            )
        )
    history.creep = _creep(history, rule)
    return history


def _creep(history: History, rule: MetricRule) -> list[Creep]:
    """Runs of two or more consecutive changes in the bad direction that add up past the
    threshold while no single step between neighbouring baselines in them did: each commit
    passed the gate, the sum would not have."""
    threshold = rule.threshold
    points = history.points
    found = []
    run: list[ChangePoint] = []
    for change in [*history.change_points, None]:
        if change is not None and change.bad:
            run.append(change)
            continue
        if len(run) >= 2:
            total = threshold.change(run[0].level_before, run[-1].level_after)
            first, last = run[0].index - 1, run[-1].index
            steps = [
                threshold.change(points[i].centre, points[i + 1].centre) * rule.bad_sign
                for i in range(first, last)
            ]
            largest = max(steps)
            if total * rule.bad_sign > threshold.value and largest <= threshold.value:
                found.append(
                    Creep(
                        first=points[first].commit,
                        last=points[last].commit,
                        change=total,
                        changes=len(run),
                        commits=points[first].back - points[last].back,
                        largest_step=largest * rule.bad_sign,
                    )
                )
        run = [change] if change is not None and change.bad else []
    return found


def history_dict(history: History) -> dict[str, Any]:
    """The ``perfgate history --format json`` document body of one benchmark and env."""

    def rounded(value: float | None) -> float | None:
        return None if value is None or not math.isfinite(value) else round(value, 6)

    return {
        "benchmark": history.benchmark,
        "env": history.env,
        "metric": history.metric,
        "threshold": history.threshold,
        "unit": history.unit,
        "method": history.method,
        "noise": rounded(history.noise),
        "points": [
            {
                "commit": p.commit,
                "date": p.date,
                "back": p.back,
                "centre": rounded(p.centre),
                "low": rounded(p.low),
                "high": rounded(p.high),
                "rounds": p.rounds,
            }
            for p in history.points
        ],
        "segments": [
            {"first": s.first, "last": s.last, "level": rounded(s.level)} for s in history.segments
        ],
        "change_points": [
            {
                "index": c.index,
                "before": c.before,
                "after": c.after,
                "commits": c.commits,
                "level_before": rounded(c.level_before),
                "level_after": rounded(c.level_after),
                "change": rounded(c.change),
                "bad": c.bad,
                "exceeds": c.exceeds,
                "recent": c.recent,
            }
            for c in history.change_points
        ],
        "creep": [
            {
                "first": c.first,
                "last": c.last,
                "change": rounded(c.change),
                "changes": c.changes,
                "commits": c.commits,
                "largest_step": rounded(c.largest_step),
            }
            for c in history.creep
        ],
        "note": history.note,
    }


__all__ = [
    "METHOD",
    "ChangePoint",
    "Creep",
    "History",
    "Point",
    "Segment",
    "analyse",
    "change_indexes",
    "history_dict",
    "point_of",
]

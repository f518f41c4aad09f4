"""Compact summaries of a run record for reports drawn later: the step-time distribution of
each round as box statistics, the median breakdown, the timeline strip and the fingerprint.

A comparison keeps the baseline side's summary (:attr:`Comparison.baseline_summary`), so a
results file can draw baseline against current without the baseline file: a few KB at most
(:data:`MAX_ROUNDS` rounds of seven numbers, one strip).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from perfgate.records import RunRecord

MAX_ROUNDS = 100
BREAKDOWN_KEYS = (
    "step_time_us",
    "computing_us",
    "comm_not_overlapped_us",
    "free_us",
    "preparing_us",
    "copy_us",
)
_DIGITS = 3


def _values(column: list[Any] | None) -> np.ndarray:
    return np.asarray([np.nan if v is None else v for v in column or []], dtype=np.float64)


def round_boxes(record: RunRecord) -> list[dict[str, float]]:
    """Box statistics of each timed round's step times (µs): ``process``, ``round``, ``n``,
    ``min``, ``p5``, ``q1``, ``median``, ``q3``, ``p95``, ``max``, in process then round
    order. A record without rounds (a plain profile) gives its profiled steps as one round.
    At most :data:`MAX_ROUNDS` (the last ones)."""
    timing = record.get("timing")
    if timing and timing.get("step_time_us"):
        values = _values(timing["step_time_us"])
        rounds = _values(timing.get("round") or [0.0] * values.size)
        processes = _values(timing.get("process") or [0.0] * values.size)
    else:
        values = _values(record["samples"].get("step_time_us"))
        rounds = np.zeros(values.size)
        processes = np.zeros(values.size)
    keep = ~np.isnan(values)
    values, rounds, processes = values[keep], rounds[keep], processes[keep]
    boxes = []
    for process, round_id in sorted(set(zip(processes.tolist(), rounds.tolist()))):
        of_round = values[(processes == process) & (rounds == round_id)]
        p5, q1, median, q3, p95 = np.percentile(of_round, [5, 25, 50, 75, 95])
        boxes.append(
            {
                "process": int(process),
                "round": int(round_id),
                "n": int(of_round.size),
                "min": round(float(of_round.min()), _DIGITS),
                "p5": round(float(p5), _DIGITS),
                "q1": round(float(q1), _DIGITS),
                "median": round(float(median), _DIGITS),
                "q3": round(float(q3), _DIGITS),
                "p95": round(float(p95), _DIGITS),
                "max": round(float(of_round.max()), _DIGITS),
            }
        )
    return boxes[-MAX_ROUNDS:]


def breakdown_medians(record: RunRecord) -> dict[str, float]:
    """Median per profiled step of the step time and its breakdown (µs), where known."""
    samples = record.get("samples") or {}
    out = {}
    for key in BREAKDOWN_KEYS:
        values = _values(samples.get(key))
        values = values[~np.isnan(values)]
        if values.size:
            out[key] = round(float(np.median(values)), _DIGITS)
    return out


def side_summary(record: RunRecord) -> dict[str, Any]:
    """What a report needs of one side without its record: rounds, breakdown, strip,
    fingerprint and commit."""
    return {
        "commit": record.get("commit"),
        "rounds": round_boxes(record),
        "breakdown": breakdown_medians(record),
        "timeline": record.get("timeline"),
        "fingerprint": dict(record.get("fingerprint") or {}),
    }


__all__ = ["MAX_ROUNDS", "breakdown_medians", "round_boxes", "side_summary"]

"""Render one stored baseline for `perfgate baseline show`."""

from __future__ import annotations

import numpy as np
from tabulate import tabulate

from perfgate.analysis.metrics import METRIC_NAMES
from perfgate.records import BaselineRecord
from perfgate.report.format import (
    format_calls,
    format_ratio,
    format_time,
    format_value,
    named_table,
)


def _plain(value: object) -> object:
    """A fingerprint value as written: a count read back from JSON as 1.0 is 1."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


def _metric_rows(record: BaselineRecord) -> list[list[str]]:
    """One row per metric: the value a comparison takes of this baseline (gated_value) and
    the spread of its steps; step time twice, timed (what is gated) and profiled."""
    from perfgate.analysis.compare import gated_value

    timing = record.get("timing") or {}
    samples = record.get("samples", {})
    series: list[tuple[str, str, list[float | None], float | None]] = []
    for name in METRIC_NAMES:
        gated = gated_value(record, name)
        if name == "step_time_us" and timing:
            series.append(("step_time (timed)", name, list(timing["step_time_us"]), gated))
            series.append(("step_time (profiled)", name, list(samples.get(name, [])), None))
        else:
            label = name.removesuffix("_us")
            series.append((label, name, list(samples.get(name, [])), gated))
    rows = []
    for label, name, steps, gated in series:
        values = np.asarray([v for v in steps if v is not None], dtype=float)
        shown = format_value(name, gated) if gated is not None else "—"
        if values.size:
            rows.append(
                [
                    label,
                    shown,
                    format_value(name, float(np.median(values))),
                    format_value(name, float(values.min())),
                    format_value(name, float(values.max())),
                    str(values.size),
                ]
            )
        else:
            rows.append([label, shown, "n/a", "n/a", "n/a", "0"])
    return rows


def render_baseline(record: BaselineRecord, top: int = 10) -> str:
    lines = [
        f"baseline: {record['benchmark']} on {record['env']}",
        f"commit:   {record['commit']}"
        + (f" ({record['branch']})" if record.get("branch") else "")
        + (" DIRTY" if record.get("dirty") else ""),
        f"created:  {record.get('created', 'unknown')}",
    ]
    fingerprint = {k: v for k, v in (record.get("fingerprint") or {}).items() if v is not None}
    if fingerprint:
        lines.append(
            "environment: " + ", ".join(f"{k}={_plain(v)}" for k, v in fingerprint.items())
        )
    lines.append("")
    lines.append(
        tabulate(
            _metric_rows(record),
            headers=["metric", "gated", "median", "min", "max", "steps"],
            disable_numparse=True,
            colalign=("left", "right", "right", "right", "right", "right"),
        )
    )
    timing = record.get("timing")
    if timing:
        rounds = len(set(zip(timing.get("process") or [], timing.get("round") or [], strict=False)))
        lines.append(
            f"gated: what a comparison takes (step time: the centre of {rounds} timed rounds; "
            "the profiled steps run under the profiler, slower by its cost)"
        )
    operators = record.get("operators", [])[:top]
    if operators:
        lines.append("")
        lines.append(
            named_table(
                [o["op_type"] for o in operators],
                [
                    [
                        o["core"],
                        format_calls(o["calls_per_step"]),
                        format_time(o["time_per_step_us"]),
                        format_ratio(o["share"]),
                    ]
                    for o in operators
                ],
                ["op_type", "core", "calls/step", "time/step", "share"],
                right=("calls/step", "time/step", "share"),
            )
        )
    return "\n".join(lines) + "\n"

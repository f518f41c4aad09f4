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


def render_baseline(record: BaselineRecord, top: int = 10) -> str:
    lines = [
        f"baseline: {record['benchmark']} on {record['env']}",
        f"commit:   {record['commit']}"
        + (f" ({record['branch']})" if record.get("branch") else "")
        + (" DIRTY" if record.get("dirty") else ""),
        f"created:  {record.get('created', 'unknown')}",
    ]
    fingerprint = record.get("fingerprint") or {}
    if fingerprint:
        lines.append("environment: " + ", ".join(f"{k}={v}" for k, v in fingerprint.items()))
    samples = record.get("samples", {})
    rows = []
    for name in METRIC_NAMES:
        values = np.asarray([v for v in samples.get(name, []) if v is not None], dtype=float)
        if values.size:
            rows.append(
                [
                    name,
                    format_value(name, float(np.median(values))),
                    format_value(name, float(values.min())),
                    format_value(name, float(values.max())),
                    values.size,
                ]
            )
        else:
            rows.append([name, "n/a", "n/a", "n/a", 0])
    lines.append("")
    lines.append(tabulate(rows, headers=["metric", "median", "min", "max", "n"]))
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

"""Render one stored baseline for `perfgate baseline show`."""

from __future__ import annotations

from typing import Any

import numpy as np
from tabulate import tabulate

from perfgate.analysis.compare import format_value
from perfgate.analysis.metrics import METRIC_NAMES


def render_baseline(record: dict[str, Any], top: int = 10) -> str:
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
            tabulate(
                [
                    [
                        o["op_type"],
                        o["core"],
                        o["calls_per_step"],
                        format_value("time_per_step_us", o["time_per_step_us"]),
                        format_value("share", o["share"]),
                    ]
                    for o in operators
                ],
                headers=["op_type", "core", "calls/step", "time/step", "share"],
            )
        )
    return "\n".join(lines) + "\n"

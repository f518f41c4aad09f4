"""Render one analysed profile: terminal table, Markdown, and the versioned JSON document.

The JSON document is a public contract (``docs/json.md``): scripts read
``metrics.<name>.median`` and ``operators[].time_per_step_us``. Bump
:data:`INSPECT_SCHEMA_VERSION` on any incompatible change.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from tabulate import tabulate

from perfgate.analysis.advisor import Hint
from perfgate.analysis.metrics import METRIC_NAMES, RATIO_METRICS, RunAnalysis
from perfgate.model import BREAKDOWN_COLUMNS, Profile
from perfgate.records import json_number
from perfgate.report.advice import advice_block, advice_dict, advice_lines
from perfgate.report.format import (
    format_calls,
    format_ratio,
    format_time,
    name_width,
    short_name,
)

# History: 1 — first version (metrics, breakdown, per_step, operators, profile, notes).
INSPECT_SCHEMA = "perfgate.inspect"
INSPECT_SCHEMA_VERSION = 1

_BREAKDOWN_LABELS = {
    "computing_us": "computing",
    "comm_not_overlapped_us": "communication (not overlapped)",
    "free_us": "free",
    "preparing_us": "preparing",
}


def inspect_document(
    profile: Profile, analysis: RunAnalysis, top: int | None = None, hints: Sequence[Hint] = ()
) -> dict[str, Any]:
    """The ``perfgate inspect --format json`` document (``hints``: the advisor's)."""
    operators = analysis.operators if top is None else analysis.operators.head(top)
    metadata = {
        k: v for k, v in profile.metadata.items() if isinstance(v, (str, int, float, bool, list))
    }
    return {
        "schema": INSPECT_SCHEMA,
        "schema_version": INSPECT_SCHEMA_VERSION,
        "profile": {"path": profile.path, "format": profile.source, "metadata": metadata},
        "steps": {
            "analysed": len(analysis.per_step),
            "ranks": sorted(int(r) for r in analysis.per_rank["rank"].unique()),
            "ids": [int(s) for s in analysis.per_step["step"]],
        },
        "metrics": {
            name: {k: json_number(v) for k, v in analysis.summary[name].items()}
            for name in METRIC_NAMES
        },
        "breakdown": {
            name: {k: json_number(v) for k, v in analysis.summary[name].items()}
            for name in (*BREAKDOWN_COLUMNS, "copy_us")
        },
        "per_step": [
            {k: json_number(v) if isinstance(v, float) else v for k, v in row.items()}
            for row in analysis.per_step.drop(columns=["start_us", "end_us"])
            .astype({"step": "int64"})
            .to_dict("records")
        ],
        "operators": [
            {k: json_number(v) if isinstance(v, float) else v for k, v in row.items()}
            for row in operators.to_dict("records")
        ],
        "operators_total": len(analysis.operators),
        "advice": [advice_dict(h) for h in hints],
        "notes": analysis.notes,
    }


def _format_metric(name: str, value: float) -> str:
    return format_ratio(value) if name in RATIO_METRICS else format_time(value)


def _header_lines(profile: Profile, analysis: RunAnalysis) -> list[str]:
    meta = profile.metadata
    details = [
        str(meta[key])
        for key in ("profiler_level", "aic_metrics", "device")
        if meta.get(key) not in (None, "")
    ]
    versions = [
        f"{label} {meta[key]}"
        for key, label in (
            ("cann_version", "CANN"),
            ("torch_npu_version", "torch_npu"),
            ("torch_version", "torch"),
        )
        if meta.get(key)
    ]
    fmt = profile.source + (f" ({', '.join(details)})" if details else "")
    ranks = sorted(int(r) for r in analysis.per_rank["rank"].unique())
    step_time = analysis.summary["step_time_us"]
    lines = [
        f"profile: {profile.path}",
        f"format:  {fmt}" + (f"; {', '.join(versions)}" if versions else ""),
        f"ranks:   {len(ranks)} {ranks if len(ranks) > 1 else ''}".rstrip()
        + f" · steps analysed: {len(analysis.per_step)}"
        + (" · tasks are top-level CPU ops" if meta.get("task_basis") == "cpu" else ""),
        f"step time: median {format_time(step_time['median'])} "
        f"(min {format_time(step_time['min'])}, max {format_time(step_time['max'])}, "
        f"n={step_time['n']})",
    ]
    return lines


def _metric_rows(analysis: RunAnalysis) -> list[list[str]]:
    rows = []
    for name in METRIC_NAMES:
        stats = analysis.summary[name]
        cells = [_format_metric(name, stats[k]) for k in ("median", "mean", "min", "max")]
        rows.append([name, *cells, str(stats["n"])])
    return rows


def _breakdown_rows(analysis: RunAnalysis) -> list[list[str]]:
    step = analysis.summary["step_time_us"]["median"]
    rows = []
    for column, label in _BREAKDOWN_LABELS.items():
        median = analysis.summary[column]["median"]
        share = median / step if step and not math.isnan(step) else float("nan")
        rows.append([label, format_time(median), format_ratio(share)])
    copy = analysis.summary["copy_us"]["median"]
    rows.append(
        [
            "copy (overlaps the above)",
            format_time(copy),
            format_ratio(copy / step) if step and not math.isnan(step) else "n/a",
        ]
    )
    return rows


def _operator_rows(analysis: RunAnalysis, top: int, *, markdown: bool = False) -> list[list[str]]:
    width = name_width(60, markdown=markdown)
    return [
        [
            short_name(row["op_type"], width),
            row["core"],
            row["category"],
            format_calls(row["calls_per_step"]),
            format_time(row["time_per_step_us"]),
            format_ratio(row["share"]),
        ]
        for row in analysis.operators.head(top).to_dict("records")
    ]


_METRIC_HEADERS = ["metric", "median", "mean", "min", "max", "n"]
_BREAKDOWN_HEADERS = ["breakdown (median)", "time", "of step"]
_OPERATOR_HEADERS = ["op_type", "core", "category", "calls/step", "time/step", "share"]


def render_table(
    profile: Profile, analysis: RunAnalysis, top: int = 10, hints: Sequence[Hint] = ()
) -> str:
    """The terminal report of ``perfgate inspect`` (``hints``: the advisor's)."""
    parts = ["\n".join(_header_lines(profile, analysis)), ""]
    parts.append(
        tabulate(
            _metric_rows(analysis),
            headers=_METRIC_HEADERS,
            tablefmt="simple",
            colalign=("left",) + ("right",) * 5,
        )
    )
    parts.append("")
    parts.append(
        tabulate(
            _breakdown_rows(analysis),
            headers=_BREAKDOWN_HEADERS,
            tablefmt="simple",
            colalign=("left", "right", "right"),
        )
    )
    parts.append("")
    total = len(analysis.operators)
    if total:
        parts.append(f"top operators ({min(top, total)} of {total}, by device time per step)")
        parts.append(
            tabulate(
                _operator_rows(analysis, top),
                headers=_OPERATOR_HEADERS,
                tablefmt="simple",
                colalign=("left", "left", "left", "right", "right", "right"),
            )
        )
    else:
        parts.append("operators: none in this profile")
    if hints:
        parts.append("")
        parts.append(f"advisor ({len(hints)} hint(s), largest impact first)")
        parts.extend(advice_block(hints))
    if analysis.notes:
        parts.append("")
        parts.extend(f"note: {line}" for line in analysis.notes)
    return "\n".join(parts) + "\n"


def render_markdown(
    profile: Profile, analysis: RunAnalysis, top: int = 10, hints: Sequence[Hint] = ()
) -> str:
    """Markdown for a GitHub job summary or a PR comment (``hints``: the advisor's)."""
    header = _header_lines(profile, analysis)
    parts = [f"### perfgate inspect: `{profile.path}`", ""]
    parts.extend(f"- {line}" for line in header[1:])
    parts.append("")
    parts.append(tabulate(_metric_rows(analysis), headers=_METRIC_HEADERS, tablefmt="github"))
    parts.append("")
    parts.append(tabulate(_breakdown_rows(analysis), headers=_BREAKDOWN_HEADERS, tablefmt="github"))
    parts.append("")
    if len(analysis.operators):
        parts.append(
            f"**Top operators** ({min(top, len(analysis.operators))} of "
            f"{len(analysis.operators)}, by device time per step)"
        )
        parts.append("")
        parts.append(
            tabulate(
                _operator_rows(analysis, top, markdown=True),
                headers=_OPERATOR_HEADERS,
                tablefmt="github",
            )
        )
    if hints:
        parts.append("")
        parts.append(f"**Advisor** ({len(hints)} hint(s), largest impact first)")
        parts.append("")
        parts.extend(f"- {line}" for line in advice_lines(hints))
    if analysis.notes:
        parts.append("")
        parts.extend(f"> {line}" for line in analysis.notes)
    return "\n".join(parts) + "\n"

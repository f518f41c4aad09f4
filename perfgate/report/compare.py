"""Render comparisons: terminal table, Markdown (job summary / PR comment), versioned JSON.

The JSON document is a public contract (``docs/json.md``); bump
:data:`COMPARE_SCHEMA_VERSION` on any incompatible change.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tabulate import tabulate

from perfgate.analysis.compare import (
    ERROR,
    IMPROVEMENT,
    INCOMPARABLE,
    NO_BASELINE,
    PASS,
    REGRESSION,
    UNSTABLE,
    Comparison,
    MetricJudgement,
    format_change,
    format_value,
)

# History: 1 — first version.
COMPARE_SCHEMA = "perfgate.compare"
COMPARE_SCHEMA_VERSION = 1
# Worst first: the overall verdict of several benchmarks is the worst of theirs.
_SEVERITY = (ERROR, REGRESSION, UNSTABLE, INCOMPARABLE, NO_BASELINE, IMPROVEMENT, PASS)


def overall_verdict(comparisons: Sequence[Comparison]) -> str:
    if not comparisons:
        return NO_BASELINE
    return min((c.verdict for c in comparisons), key=_SEVERITY.index)


def compare_document(
    comparisons: Sequence[Comparison], top_operators: int | None = None
) -> dict[str, Any]:
    """The ``perfgate compare --format json`` document."""
    benchmarks = [c.as_dict(top_operators) for c in comparisons]
    return {
        "schema": COMPARE_SCHEMA,
        "schema_version": COMPARE_SCHEMA_VERSION,
        "verdict": overall_verdict(comparisons),
        "benchmarks": benchmarks,
        "metrics": [{"benchmark": b["benchmark"], **m} for b in benchmarks for m in b["metrics"]],
        "operators": [
            {"benchmark": b["benchmark"], **o} for b in benchmarks for o in b["operators"]
        ],
        "summary": [line for c in comparisons for line in c.summary_lines()],
    }


def _p(m: MetricJudgement) -> str:
    if m.p_value is None:
        return "n/a" if m.test == "none" else "—"
    return f"{m.p_value:.2g}"


def _metric_rows(c: Comparison) -> list[list[str]]:
    return [
        [
            m.name,
            format_value(m.metric, m.baseline),
            format_value(m.metric, m.current),
            format_change(m),
            m.threshold if m.gated else f"({m.threshold})",
            _p(m),
            m.status.upper() if m.status in (REGRESSION, UNSTABLE) else m.status,
        ]
        for m in c.metrics
    ]


def _operator_rows(c: Comparison, top: int) -> list[list[str]]:
    rows = []
    for o in _changed_operators(c, top):
        explained = f"{o.share_of_step_delta:.0%}" if o.share_of_step_delta is not None else "—"
        rows.append(
            [
                o.op_type,
                o.core,
                f"{o.baseline_time_per_step_us / 1e3:.3f}",
                f"{o.current_time_per_step_us / 1e3:.3f}",
                f"{o.delta_us / 1e3:+.3f}",
                explained,
                f"{o.baseline_calls_per_step:g} → {o.current_calls_per_step:g}",
                o.status + (" REGRESSION" if o.regression else ""),
            ]
        )
    return rows


_METRIC_HEADERS = ["metric", "baseline", "current", "change", "limit", "p", "status"]
_OPERATOR_HEADERS = [
    "op_type",
    "core",
    "baseline ms/step",
    "current ms/step",
    "Δ ms/step",
    "of Δstep",
    "calls/step",
    "status",
]


def _measured_line(c: Comparison) -> str | None:
    """For a run without a baseline: what it measured, so the report is never empty."""
    values = c.current.get("measured")
    if not isinstance(values, dict):
        return None
    parts = [
        f"{label} {format_value(metric, values.get(metric))}"
        for metric, label in (
            ("step_time_us", "step time"),
            ("utilization", "utilization"),
            ("copy_ratio", "copy ratio"),
            ("comm_ratio", "comm ratio"),
            ("free_ratio", "free"),
        )
    ]
    return f"measured (median of {values.get('steps', 0)} steps): " + " · ".join(parts)


def _baseline_line(c: Comparison) -> str:
    info = c.baseline
    if c.verdict == NO_BASELINE:
        measured = _measured_line(c)
        return "baseline: none found" + (f"\n{measured}" if measured else "")
    parts = [f"baseline: {c.baseline_label()}"]
    if info.get("commit") and info.get("path"):
        parts.append(str(info["path"]))
    return " · ".join(parts)


def _reason_lines(c: Comparison) -> list[str]:
    """Each distinct reason once, with the gated metrics it applies to."""
    by_reason: dict[str, list[str]] = {}
    for m in c.metrics:
        if m.gated:
            for reason in m.reasons:
                by_reason.setdefault(reason, []).append(m.name)
    return [f"{reason} ({', '.join(names)})" for reason, names in by_reason.items()]


def _changed_operators(c: Comparison, top: int) -> list[Any]:
    return [o for o in c.operators if o.status != "unchanged"][:top]


def render_table(comparisons: Sequence[Comparison], top: int = 5) -> str:
    verdict = overall_verdict(comparisons)
    out = [f"perfgate compare: {len(comparisons)} benchmark(s) · verdict: {verdict.upper()}"]
    for c in comparisons:
        out.append("")
        out.append(f"[{c.verdict.upper()}] {c.benchmark}")
        out.append(_baseline_line(c))
        if c.metrics:
            out.append(
                tabulate(
                    _metric_rows(c),
                    headers=_METRIC_HEADERS,
                    tablefmt="simple",
                    disable_numparse=True,
                )
            )
        rows = _operator_rows(c, top)
        if rows:
            out.append("")
            out.append(f"operators that changed most ({len(rows)} of {len(c.operators)}):")
            out.append(
                tabulate(rows, headers=_OPERATOR_HEADERS, tablefmt="simple", disable_numparse=True)
            )
        for line in c.summary_lines():
            out.append(f"! {line}")
        out.extend(f"  {line}" for line in _reason_lines(c))
        out.extend(f"warning: {w}" for w in c.warnings)
        out.extend(f"note: {n}" for n in c.notes)
    return "\n".join(out) + "\n"


_ICON = {
    PASS: "✅",
    IMPROVEMENT: "🚀",
    REGRESSION: "❌",
    UNSTABLE: "⚠️",
    INCOMPARABLE: "⚠️",
    NO_BASELINE: "ℹ️",
    ERROR: "💥",
}


def render_markdown(comparisons: Sequence[Comparison], top: int = 5) -> str:
    verdict = overall_verdict(comparisons)
    out = [f"### perfgate: {_ICON.get(verdict, '')} {verdict}", ""]
    summary = [line for c in comparisons for line in c.summary_lines()]
    out.extend(f"- **{line}**" for line in summary)
    if summary:
        out.append("")
    for c in comparisons:
        out.append(f"#### {_ICON.get(c.verdict, '')} `{c.benchmark}`: {c.verdict}")
        out.append("")
        out.append(_baseline_line(c).replace("\n", "  \n"))
        out.append("")
        if c.metrics:
            out.append(
                tabulate(
                    _metric_rows(c),
                    headers=_METRIC_HEADERS,
                    tablefmt="github",
                    disable_numparse=True,
                )
            )
            out.append("")
        rows = _operator_rows(c, top)
        if rows:
            out.append("<details><summary>Operators that changed most</summary>")
            out.append("")
            out.append(
                tabulate(rows, headers=_OPERATOR_HEADERS, tablefmt="github", disable_numparse=True)
            )
            out.append("")
            out.append("</details>")
            out.append("")
        notes = _reason_lines(c) + c.warnings + c.notes
        out.extend(f"> {n}  " for n in notes)
        if notes:
            out.append("")
    return "\n".join(out).rstrip() + "\n"

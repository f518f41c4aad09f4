"""Render comparisons: terminal table, Markdown (job summary / PR comment), versioned JSON.

The JSON document is a public contract (``docs/json.md``); bump
:data:`COMPARE_SCHEMA_VERSION` on any incompatible change.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import fields
from typing import Any

from pydantic import TypeAdapter
from tabulate import tabulate

from perfgate.analysis.advisor import Hint
from perfgate.analysis.compare import Comparison, MetricJudgement, OperatorDelta
from perfgate.config import parse_threshold
from perfgate.errors import ConfigError, PerfgateError
from perfgate.records import COMPARISON, json_number, validated
from perfgate.report import markdown as md
from perfgate.report.advice import advice_block, advice_dict, advice_lines, hints_from
from perfgate.report.explain import (
    baseline_label,
    compared_baseline,
    metric_reasons,
    reason_lines,
    summary_lines,
)
from perfgate.report.format import (
    MARKDOWN_NAME_WIDTH,
    format_calls,
    format_change,
    format_ms,
    format_p,
    format_share,
    format_value,
    named_table,
    short_names,
)
from perfgate.rules import Unit
from perfgate.verdict import MetricStatus, Verdict, worst

# History: 1 — first version.
COMPARE_SCHEMA = "perfgate.compare"
# Advisor hints shown per benchmark in the table and Markdown reports (the JSON has all).
ADVICE_TOP = 3
COMPARE_SCHEMA_VERSION = 1


def overall_verdict(comparisons: Sequence[Comparison]) -> Verdict:
    return worst(c.verdict for c in comparisons)


def metric_dict(m: MetricJudgement) -> dict[str, Any]:
    """One metric's judgement as JSON (``docs/json.md``): the facts and the reasons."""
    facts = {
        f.name: json_number(v) if isinstance(v, float) else v
        for f in fields(m)
        if (v := getattr(m, f.name)) is not None or f.name in _NULLABLE
    }
    if m.copy_calls is not None:
        facts["copy_calls"] = list(m.copy_calls)
    facts["status"] = m.status.value
    facts["reasons"] = metric_reasons(m)
    return facts


# Facts that stay in the JSON as null (a reader can count on the key).
_NULLABLE = ("significant", "p_value", "effect", "reference", "noise", "detectable")


def operator_dict(o: OperatorDelta) -> dict[str, Any]:
    return {k: json_number(v) if isinstance(v, float) else v for k, v in vars(o).items()}


def comparison_dict(c: Comparison, top_operators: int | None = None) -> dict[str, Any]:
    """One benchmark's comparison as JSON (``docs/json.md``)."""
    operators = c.operators if top_operators is None else _top_operators(c, top_operators)
    return {
        "benchmark": c.benchmark,
        "verdict": c.verdict.value,
        "baseline": c.baseline,
        "current": c.current,
        "metrics": [metric_dict(m) for m in c.metrics],
        "operators": [operator_dict(o) for o in operators],
        "warnings": c.warnings,
        "notes": c.notes,
        "breakdown_delta_us": c.breakdown_delta_us,
        "step_delta_us": json_number(c.step_delta_us),
        "summary": summary_lines(c),
        "advice": [advice_dict(h) for h in hints_from(c.advice)],
        "baseline_summary": c.baseline_summary,
    }


# The facts a report reads, typed as the dataclasses declare them: a results file is input.
_METRIC = TypeAdapter(MetricJudgement)
_OPERATOR = TypeAdapter(OperatorDelta)


def metric_from_dict(
    m: dict[str, Any], where: str = "comparison", key: str = ""
) -> MetricJudgement:
    """The inverse of :func:`metric_dict` (unknown keys are ignored, missing ones default,
    null numbers are NaN); a fact of the wrong type is one :class:`PerfgateError` naming
    ``where`` and ``key``."""
    known = {f.name for f in fields(MetricJudgement)}
    values = {k: v for k, v in m.items() if k in known}
    for name in ("baseline", "current", "change"):
        if values.get(name) is None:
            values[name] = float("nan")
    values.setdefault("bad_sign", 1 if str(m.get("threshold", "+")).startswith("+") else -1)
    for name in ("significant", "p_value", "test", "n_baseline", "n_current"):
        values.setdefault(name, None if name in ("significant", "p_value") else 0)
    values["test"] = values["test"] or "none"
    if values.get("copy_calls") is None:
        values.pop("copy_calls", None)
    judgement: MetricJudgement = validated(_METRIC, values, where, key)
    if judgement.unit not in {u.value for u in Unit}:
        # The renderers format every change by its unit: one they do not know is damage.
        raise PerfgateError(
            f"{where}: key '{key}unit' is {judgement.unit!r} (expected "
            f"{', '.join(repr(u.value) for u in Unit)})"
        )
    p_value = judgement.p_value
    if p_value is not None and not 0 <= p_value <= 1:  # no test gives one outside [0, 1]
        raise PerfgateError(
            f"{where}: key '{key}p_value' is {p_value!r} (expected a probability, 0 to 1)"
        )
    _check_threshold(judgement, where, key)
    return judgement


def _check_threshold(judgement: MetricJudgement, where: str, key: str) -> None:
    """The limit a report prints beside the change: the bad direction's sign and a threshold
    in the metric's unit (``+5%``, ``-3pt``), as perfgate writes it; a hand-edited "banana"
    was printed as the limit."""
    text = judgement.threshold
    sign = "+" if judgement.bad_sign > 0 else "-"
    example = {Unit.RELATIVE.value: "5%", Unit.POINTS.value: "3pt"}.get(judgement.unit, "2ms")
    expected = f"the bad direction's sign and a limit in {judgement.unit}, e.g. {sign}{example}"
    try:
        limit = parse_threshold(
            text[1:] if text.startswith(sign) else "-",
            key=f"{key}threshold",
            allowed=tuple(Unit),
        )
    except ConfigError:
        limit = None
    if limit is None or limit.unit.value != judgement.unit:
        raise PerfgateError(f"{where}: key '{key}threshold' is {text!r} (expected {expected})")


def _operator_from_dict(o: dict[str, Any], where: str, key: str) -> OperatorDelta:
    known = {f.name for f in fields(OperatorDelta)}
    values = {k: v for k, v in o.items() if k in known}
    values.setdefault("category", "")
    for name in (
        "baseline_time_per_step_us",
        "current_time_per_step_us",
        "delta_us",
        "baseline_calls_per_step",
        "current_calls_per_step",
        "current_share",
    ):
        if values.get(name) is None:
            values[name] = float("nan")
    values.setdefault("share_of_step_delta", None)
    delta: OperatorDelta = validated(_OPERATOR, values, where, key)
    return delta


def comparison_from_dict(
    data: dict[str, Any], where: str = "comparison", prefix: str = ""
) -> Comparison:
    """Rebuild a :class:`Comparison` from :func:`comparison_dict` (xdist workers hand their
    results to the controller as JSON; ``perfgate report`` renders a results file again).
    A damaged fact is one :class:`PerfgateError` naming ``where`` and the key (``prefix`` +
    its path in ``data``)."""
    checked = validated(COMPARISON, data, where, prefix)
    metrics = [
        metric_from_dict(m, where, f"{prefix}metrics.{i}.")
        for i, m in enumerate(data.get("metrics", []))
    ]
    operators = [
        _operator_from_dict(o, where, f"{prefix}operators.{i}.")
        for i, o in enumerate(data.get("operators", []))
    ]
    return Comparison(
        benchmark=checked["benchmark"],
        verdict=Verdict(checked["verdict"]),
        baseline=dict(data.get("baseline") or {}),
        current=dict(data.get("current") or {}),
        metrics=metrics,
        operators=operators,
        warnings=list(data.get("warnings") or []),
        notes=list(data.get("notes") or []),
        breakdown_delta_us=dict(data.get("breakdown_delta_us") or {}),
        step_delta_us=data.get("step_delta_us"),
        advice=[Hint.from_dict(a).as_dict() for a in data.get("advice") or []],
        baseline_summary=dict(data.get("baseline_summary") or {}),
    )


def compare_document(
    comparisons: Sequence[Comparison], top_operators: int | None = None
) -> dict[str, Any]:
    """The ``perfgate compare --format json`` document."""
    benchmarks = [comparison_dict(c, top_operators) for c in comparisons]
    return {
        "schema": COMPARE_SCHEMA,
        "schema_version": COMPARE_SCHEMA_VERSION,
        "verdict": overall_verdict(comparisons).value,
        "benchmarks": benchmarks,
        "metrics": [{"benchmark": b["benchmark"], **m} for b in benchmarks for m in b["metrics"]],
        "operators": [
            {"benchmark": b["benchmark"], **o} for b in benchmarks for o in b["operators"]
        ],
        "summary": [line for c in comparisons for line in summary_lines(c)],
    }


def _p(m: MetricJudgement) -> str:
    if m.p_value is None:
        return "n/a" if m.test == "none" else "—"
    return format_p(m.p_value)


def _shown_status(status: MetricStatus, judged: bool = True) -> str:
    """A metric's status cell: loud where it fails; in parentheses where it fails nothing:
    the runs were not judged (two environments), or the metric is not gated (its limit in
    parentheses too): the status is what the figures would say, not a verdict."""
    if not judged:
        return f"({status.value})"
    loud = (MetricStatus.REGRESSION, MetricStatus.UNSTABLE)
    return status.value.upper() if status in loud else status.value


def _metric_rows(c: Comparison) -> list[list[str]]:
    return [
        [
            m.name,
            format_value(m.metric, compared_baseline(m)),
            format_value(m.metric, m.current),
            format_change(m.change, m.unit),
            m.threshold if m.gated else f"({m.threshold})",
            _p(m),
            _shown_status(m.status, c.judged and m.gated),
        ]
        for m in c.metrics
    ]


def _operator_cells(c: Comparison, top: int) -> tuple[list[str], list[list[str]]]:
    """The names (in full) and the other cells of the operators a table lists."""
    operators = _changed_operators(c, top)
    flag = " REGRESSION" if c.judged else " (regression)"
    cells = [
        [
            o.core,
            format_ms(o.baseline_time_per_step_us),
            format_ms(o.current_time_per_step_us),
            format_ms(o.delta_us, signed=True),
            format_share(o.share_of_step_delta),
            f"{format_calls(o.baseline_calls_per_step)} → {format_calls(o.current_calls_per_step)}",
            o.status + (flag if o.regression else ""),
        ]
        for o in operators
    ]
    return [o.op_type for o in operators], cells


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


# In a terminal the long headers take two lines, and on a narrow one these columns go first.
def _two_lines(header: str) -> str:
    return header.replace(" ", "\n", 1)


_OPERATOR_TERMINAL_HEADERS = [_two_lines(h) for h in _OPERATOR_HEADERS]
_OPERATOR_OPTIONAL = tuple(_two_lines(h) for h in ("of Δstep", "baseline ms/step", "core"))


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
    steps = f"{values.get('steps', 0)} profiled steps"
    if values.get("timed_steps"):
        steps = f"step time from {values['timed_steps']} timed steps, the rest from {steps}"
    return f"measured ({steps}): " + " · ".join(parts)


def _baseline_line(c: Comparison) -> str:
    info = c.baseline
    if c.verdict is Verdict.NO_BASELINE:
        measured = _measured_line(c)
        return "baseline: none found" + (f"\n{measured}" if measured else "")
    if not info.get("commit") and not info.get("path"):
        return "baseline: not compared"  # the run itself failed (its note says how)
    parts = [f"baseline: {baseline_label(c)}"]
    if info.get("commit") and info.get("path"):
        parts.append(str(info["path"]))
    return " · ".join(parts)


def _changed_operators(c: Comparison, top: int) -> list[Any]:
    return [o for o in c.operators if o.status != "unchanged"][:top]


def _top_operators(c: Comparison, top: int) -> list[OperatorDelta]:
    """The ``top`` operators a JSON document keeps: those the tables list (the largest
    changes beyond noise), filled up with the largest unchanged ones; in |Δ| order. A row
    of the terminal or PR-comment table is always found in the JSON (with its full name)."""
    changed = {id(o) for o in _changed_operators(c, top)}
    spare = top - len(changed)
    kept = []
    for o in c.operators:
        if id(o) in changed:
            kept.append(o)
        elif o.status == "unchanged" and spare > 0:
            kept.append(o)
            spare -= 1
    return kept


def render_table(comparisons: Sequence[Comparison], top: int = 5) -> str:
    verdict = overall_verdict(comparisons)
    out = [f"perfgate compare: {len(comparisons)} benchmark(s) · verdict: {verdict.value.upper()}"]
    for c in comparisons:
        out.append("")
        out.append(f"[{c.verdict.value.upper()}] {c.benchmark}")
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
        names, cells = _operator_cells(c, top)
        if names:
            out.append("")
            out.append(f"operators that changed most ({len(names)} of {len(c.operators)}):")
            out.append(
                named_table(names, cells, _OPERATOR_TERMINAL_HEADERS, optional=_OPERATOR_OPTIONAL)
            )
        for line in summary_lines(c):
            out.append(f"! {line}")
        out.extend(f"  {line}" for line in reason_lines(c))
        hints = hints_from(c.advice)
        if hints:
            shown = min(len(hints), ADVICE_TOP)
            out.append(f"advisor ({shown} of {len(hints)} hint(s) on the current run):")
            out.extend(advice_block(hints, top=ADVICE_TOP))
        out.extend(f"warning: {w}" for w in c.warnings)
        out.extend(f"note: {n}" for n in c.notes)
    return "\n".join(out) + "\n"


_ICON = {
    Verdict.PASS: "✅",
    Verdict.IMPROVEMENT: "🚀",
    Verdict.REGRESSION: "❌",
    Verdict.UNSTABLE: "⚠️",
    Verdict.INCOMPARABLE: "⚠️",
    Verdict.NO_BASELINE: "ℹ️",
    Verdict.ERROR: "💥",
    Verdict.RECORDED: "📌",
}


def _md_cells(rows: list[list[str]]) -> list[list[str]]:
    # Operator names come from profiles: '|', backticks, HTML and @mentions stay text.
    return [[md.escape(cell) for cell in row] for row in rows]


def render_markdown(comparisons: Sequence[Comparison], top: int = 5) -> str:
    verdict = overall_verdict(comparisons)
    out = [f"### perfgate: {_ICON.get(verdict, '')} {verdict.value}", ""]
    summary = [line for c in comparisons for line in summary_lines(c)]
    out.extend(f"- **{md.escape(line)}**" for line in summary)
    if summary:
        out.append("")
    for c in comparisons:
        out.append(f"#### {_ICON.get(c.verdict, '')} {md.code(c.benchmark)}: {c.verdict.value}")
        out.append("")
        out.append("  \n".join(md.escape(line) for line in _baseline_line(c).splitlines()))
        out.append("")
        if c.metrics:
            out.append(
                tabulate(
                    _md_cells(_metric_rows(c)),
                    headers=_METRIC_HEADERS,
                    tablefmt="github",
                    disable_numparse=True,
                )
            )
            out.append("")
        names, cells = _operator_cells(c, top)
        rows = [
            [name, *row]
            for name, row in zip(short_names(names, MARKDOWN_NAME_WIDTH), cells, strict=True)
        ]
        if rows:
            out.append("<details><summary>Operators that changed most</summary>")
            out.append("")
            out.append(
                tabulate(
                    _md_cells(rows),
                    headers=_OPERATOR_HEADERS,
                    tablefmt="github",
                    disable_numparse=True,
                )
            )
            out.append("")
            out.append("</details>")
            out.append("")
        notes = reason_lines(c) + c.warnings + c.notes
        out.extend(f"> {md.escape(n)}  " for n in notes)
        if notes:
            out.append("")
        hints = advice_lines(hints_from(c.advice), top=ADVICE_TOP)
        if hints:
            out.append(f"**Advisor** ({len(hints)} of {len(c.advice)} hint(s) on the current run)")
            out.append("")
            out.extend(f"- {md.escape(line)}" for line in hints)
            out.append("")
    return "\n".join(out).rstrip() + "\n"

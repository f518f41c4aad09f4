"""The HTML report: one self-contained file (styles, script and charts inline; nothing
fetched), rendered from Jinja2 templates in ``perfgate/report/templates``.

Per benchmark: the verdict and the metrics with their reasons, the step time per round
baseline vs current, the step breakdown, a timeline strip of one representative step, the
operator deltas (a sortable table), the advisor's hints and the environment fingerprints.
Everything comes from a results file (``perfgate.results``): the current run's record and
its comparison, which keeps a compact summary of the baseline side (docs/report.md).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from perfgate import __version__
from perfgate.analysis.summary import breakdown_medians, round_boxes
from perfgate.records import ResultsDocument, RunRecord
from perfgate.report.advice import advice_dict, hints_from
from perfgate.report.compare import comparison_from_dict
from perfgate.report.explain import (
    baseline_label,
    compared_baseline,
    metric_reasons,
    summary_lines,
    verdict_reason,
)
from perfgate.report.format import (
    format_calls,
    format_change,
    format_ms,
    format_p,
    format_share,
    format_value,
    short_names,
)
from perfgate.verdict import MetricStatus, Verdict, worst

_VERDICT_CLASS = {
    Verdict.PASS: "pass",
    Verdict.IMPROVEMENT: "pass",
    Verdict.RECORDED: "info",
    Verdict.NO_BASELINE: "info",
    Verdict.INCOMPARABLE: "warn",
    Verdict.UNSTABLE: "warn",
    Verdict.REGRESSION: "fail",
    Verdict.ERROR: "fail",
}


def _environment() -> Any:
    from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
    from markupsafe import Markup

    from perfgate.report.format import visible

    def shown(value: Any) -> Any:
        # Text from profiles: a right-to-left override would turn the numbers after it
        # around, a control character hide what follows. Markup (the charts) is perfgate's.
        if isinstance(value, str) and not isinstance(value, Markup):
            return visible(value, lines=True)
        return value

    return Environment(
        loader=PackageLoader("perfgate.report", "templates"),
        autoescape=select_autoescape(["html", "j2"]),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        finalize=shown,
    )


def render_template(name: str, **context: Any) -> str:
    """Render one of the package's templates (autoescaped; charts are passed as Markup)."""
    return str(_environment().get_template(name).render(version=__version__, **context))


def _markup(svg: str | None) -> Any:
    from markupsafe import Markup

    return Markup(svg) if svg else None


def _metric_rows(comparison: Any) -> list[dict[str, Any]]:
    judged = comparison.judged  # runs of two environments: no metric of theirs is failing
    rows = []
    for m in comparison.metrics:
        rows.append(
            {
                "name": m.name,
                "baseline": format_value(m.metric, compared_baseline(m)),
                "current": format_value(m.metric, m.current),
                "change": format_change(m.change, m.unit),
                "limit": m.threshold if m.gated else f"({m.threshold}, not gated)",
                "p": "—" if m.p_value is None else format_p(m.p_value),
                "status": m.status.value if judged else f"({m.status.value}, not judged)",
                "failing": judged
                and m.gated
                and m.status in (MetricStatus.REGRESSION, MetricStatus.UNSTABLE),
                "reasons": metric_reasons(m),
            }
        )
    return rows


def _number(value: float | None) -> float | str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return value


def _operator_rows(comparison: Any) -> list[dict[str, Any]]:
    rows = []
    names = short_names([o.op_type for o in comparison.operators], 60)
    for o, name in zip(comparison.operators, names, strict=True):
        share = o.share_of_step_delta
        rows.append(
            {
                "op": name,
                "full": o.op_type,
                "core": o.core,
                "baseline": format_ms(o.baseline_time_per_step_us),
                "baseline_sort": _number(o.baseline_time_per_step_us),
                "current": format_ms(o.current_time_per_step_us),
                "current_sort": _number(o.current_time_per_step_us),
                "delta": format_ms(o.delta_us, signed=True),
                "delta_sort": _number(o.delta_us),
                "share": format_share(share),
                "share_sort": _number(share),
                "calls": f"{format_calls(o.baseline_calls_per_step)} → "
                f"{format_calls(o.current_calls_per_step)}",
                "status": o.status + (" (regression)" if o.regression else ""),
            }
        )
    return rows


def _shown(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _fingerprint_rows(
    baseline: Mapping[str, Any] | None, current: Mapping[str, Any]
) -> list[dict[str, Any]]:
    baseline = baseline or {}
    rows = []
    for key in sorted(set(baseline) | set(current)):
        b, c = baseline.get(key), current.get(key)
        if b in (None, "") and c in (None, ""):
            continue
        rows.append(
            {
                "key": key,
                "baseline": _shown(b),
                "current": _shown(c),
                "differs": b is not None and c is not None and b != c,
            }
        )
    return rows


def _slug(name: str, index: int) -> str:
    safe = "".join(ch if ch.isalnum() or ch in "-_" else "-" for ch in name)
    return f"b{index}-{safe}"


def benchmark_section(run: Mapping[str, Any], index: int) -> dict[str, Any]:
    """What the template shows of one run of a results file."""
    from perfgate.report.charts import breakdown_chart, distribution_chart, timeline_chart

    record: RunRecord = run  # type: ignore[assignment]
    name = str(run["benchmark"])
    salt = _slug(name, index)
    data = run.get("comparison")
    comparison = comparison_from_dict(data) if isinstance(data, dict) else None
    verdict = Verdict(run.get("verdict") or (comparison.verdict.value if comparison else "error"))
    base = comparison.baseline_summary if comparison is not None else {}
    current_rounds = round_boxes(record)
    current_breakdown = breakdown_medians(record)
    sides_breakdown = [("baseline", base.get("breakdown") or {}), ("current", current_breakdown)]
    strips = [("baseline", base.get("timeline")), ("current", run.get("timeline"))]
    advice = hints_from(comparison.advice if comparison is not None else run.get("advice"))
    if not advice:
        advice = hints_from(run.get("advice"))
    return {
        "name": name,
        "anchor": salt,
        "verdict": verdict.value,
        "verdict_class": _VERDICT_CLASS.get(verdict, "info"),
        "reason": verdict_reason(comparison) if comparison is not None else None,
        "baseline": baseline_label(comparison)
        if comparison and comparison.baseline.get("commit")
        else None,
        "recorded": run.get("baseline_path"),
        "summary": summary_lines(comparison) if comparison is not None else [],
        "metrics": _metric_rows(comparison) if comparison is not None else [],
        "charts": {
            "distribution": _markup(
                distribution_chart(base.get("rounds") or [], current_rounds, salt)
            ),
            "breakdown": _markup(breakdown_chart(sides_breakdown, salt)),
            "timeline": _markup(timeline_chart(strips, salt)),
        },
        "rounds": {"baseline": len(base.get("rounds") or []), "current": len(current_rounds)},
        "operators": _operator_rows(comparison) if comparison is not None else [],
        "advice": [advice_dict(h) for h in advice],
        "fingerprint": _fingerprint_rows(base.get("fingerprint"), run.get("fingerprint") or {}),
        "warnings": comparison.warnings if comparison is not None else [],
        "notes": (comparison.notes if comparison is not None else [])
        + list(run.get("notes") or []),
    }


def render_results_html(document: ResultsDocument, *, title: str | None = None) -> str:
    """The HTML report of a results file (``perfgate report RESULTS --format html``)."""
    runs: Sequence[Mapping[str, Any]] = document["runs"]
    sections = [benchmark_section(run, index) for index, run in enumerate(runs)]
    verdicts = [Verdict(s["verdict"]) for s in sections]
    overall = worst(verdicts) if verdicts else Verdict.PASS
    commit = document.get("commit")
    return render_template(
        "results.html.j2",
        title=title or "perfgate report",
        overall=overall.value,
        overall_class=_VERDICT_CLASS.get(overall, "info"),
        commit=commit or "",
        branch=document.get("branch") or "",
        created=document.get("created") or "",
        dirty=bool(document.get("dirty")),
        benchmarks=sections,
    )


__all__ = ["benchmark_section", "render_results_html", "render_template"]

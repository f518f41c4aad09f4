"""Render a benchmark's history along the main line: terminal table, Markdown (job summary),
versioned JSON, a self-contained HTML page and a PNG chart."""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any

from tabulate import tabulate

from perfgate.analysis.history import ChangePoint, Creep, History, history_dict
from perfgate.report import markdown as md
from perfgate.report.format import format_change, format_value, is_time

# History: 1 — first version.
HISTORY_SCHEMA = "perfgate.history"
HISTORY_SCHEMA_VERSION = 1


def _value(history: History, value: float) -> str:
    return format_value(history.metric, value)


def change_line(history: History, change: ChangePoint) -> str:
    """``+8.0% (100.000 ms → 108.000 ms) entered main after 1234567890ab, within 3 commits
    up to abcdef012345; beyond the +5% limit``."""
    text = (
        f"{format_change(change.change, history.unit)} "
        f"({_value(history, change.level_before)} → {_value(history, change.level_after)}) "
        f"entered main after {change.before[:12]}, within {change.commits} commit(s) up to "
        f"{change.after[:12]}"
    )
    if change.exceeds:
        text += f"; beyond the {history.threshold} limit"
    elif change.bad:
        text += f"; within the {history.threshold} limit"
    else:
        text += "; an improvement"
    return text + (" (new)" if change.recent else "")


def creep_line(history: History, creep: Creep) -> str:
    return (
        f"slow creep: {history.label} moved {format_change(creep.change, history.unit)} from "
        f"{creep.first[:12]} to {creep.last[:12]} ({creep.commits} commits, "
        f"{creep.changes} change points) while no step between neighbouring baselines "
        f"passed the {history.threshold} limit a pull request is gated by (largest "
        f"{format_change(creep.largest_step, history.unit)})"
    )


def _header(history: History, depth: int) -> str:
    text = (
        f"{history.benchmark} on {history.env}: {len(history.points)} baseline(s) within "
        f"{depth} commits of the main line; {history.label}"
    )
    if history.noise is not None and len(history.points) >= 2:
        unit = "%" if history.metric == "step_time_us" else "pt"  # log scale: relative
        text += f", noise ±{history.noise * 100:.2f}{unit} per commit"
    return text + f"; change points: {history.method}"


def _rows(history: History) -> list[list[str]]:
    """Newest first, with a marker row where a change entered."""
    changes = {c.index: c for c in history.change_points}
    rows: list[list[str]] = []
    for index in range(len(history.points) - 1, -1, -1):
        point = history.points[index]
        rows.append(
            [
                point.commit[:12],
                str(point.back),
                (point.date or "")[:19],
                _value(history, point.centre),
                f"{_value(history, point.low)} – {_value(history, point.high)}",
                str(point.rounds),
            ]
        )
        change = changes.get(index)
        if change is not None:
            # Words, not ▲/▼: an arrow up beside a utilization drop (-10pt) read backwards.
            word = "worse" if change.bad else "better"
            rows.append(
                ["", "", "", f"{format_change(change.change, history.unit)} {word}", "", ""]
            )
    return rows


_HEADERS = ["commit", "back", "date", "centre", "range (rounds)", "rounds"]


def _findings(history: History) -> list[str]:
    lines = [f"change point: {change_line(history, c)}" for c in history.change_points]
    lines.extend(creep_line(history, c) for c in history.creep)
    if history.note:
        lines.append(f"note: {history.note}")
    if not history.change_points and len(history.points) >= 4:
        lines.append("no change point: one level along these commits")
    return lines


def render_table(histories: Sequence[History], depth: int) -> str:
    parts = []
    for history in histories:
        parts.append(_header(history, depth))
        parts.append(tabulate(_rows(history), headers=_HEADERS, disable_numparse=True))
        parts.extend(_findings(history))
        parts.append("")
    return "\n".join(parts)


def render_markdown(histories: Sequence[History], depth: int) -> str:
    parts = []
    for history in histories:
        parts.append(f"### perfgate history: `{history.benchmark}` on `{history.env}`")
        parts.append("")
        parts.append(_header(history, depth))
        parts.append("")
        findings = _findings(history)
        parts.extend(
            f"- **{line}**" if "creep" in line or "(new)" in line else f"- {line}"
            for line in findings
        )
        if findings:
            parts.append("")
        parts.append("<details><summary>Baselines</summary>")
        parts.append("")
        parts.append(
            tabulate(_rows(history), headers=_HEADERS, tablefmt="github", disable_numparse=True)
        )
        parts.append("")
        parts.append("</details>")
        parts.append("")
    return "\n".join(parts)


def new_findings_markdown(histories: Sequence[History]) -> str:
    """For a job summary after new baselines: the change points that entered among the
    newest baselines, and creep that reaches them; empty when there is none."""
    from perfgate.analysis.history import RECENT

    lines: list[str] = []
    for history in histories:
        newest = {p.commit for p in history.points[-RECENT:]}
        where = f"{md.code(history.benchmark)} on {md.code(history.env)}"
        lines.extend(
            f"- {where}: {md.escape(change_line(history, c))}"
            for c in history.change_points
            if c.recent
        )
        lines.extend(
            f"- {where}: **{md.escape(creep_line(history, c))}**"
            for c in history.creep
            if c.last in newest
        )
    if not lines:
        return ""
    return "### perfgate history: new change points on the main line\n\n" + "\n".join(lines) + "\n"


def history_document(histories: Sequence[History], depth: int) -> dict[str, Any]:
    return {
        "schema": HISTORY_SCHEMA,
        "schema_version": HISTORY_SCHEMA_VERSION,
        "depth": depth,
        "histories": [history_dict(h) for h in histories],
    }


def _chart(history: History, salt: str) -> Any:
    from perfgate.report.charts import history_chart

    scale = 1e-3 if is_time(history.metric) else 100.0
    unit = "ms" if is_time(history.metric) else "%"
    points = [
        {
            "commit": p.commit,
            "centre": p.centre * scale,
            "low": p.low * scale,
            "high": p.high * scale,
        }
        for p in history.points
    ]
    segments = [
        {"first": s.first, "last": s.last, "level": s.level * scale} for s in history.segments
    ]
    changes = [
        {"index": c.index, "label": format_change(c.change, history.unit)}
        for c in history.change_points
    ]
    title = (
        f"{history.benchmark} on {history.env}: {history.label} along the main line (oldest left)"
    )
    return history_chart(
        points, segments, changes, unit=f"{history.label} ({unit})", title=title, salt=salt
    )


def render_png(history: History) -> bytes:
    """The chart of one history as PNG bytes."""
    figure = _chart(history, "png")
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=120, metadata={"Software": None})
    return buffer.getvalue()


def render_html(histories: Sequence[History], depth: int) -> str:
    from markupsafe import Markup

    from perfgate.report.charts import to_svg
    from perfgate.report.html import render_template

    sections = []
    for index, history in enumerate(histories):
        svg = to_svg(
            _chart(history, f"h{index}"), f"h{index}", f"{history.label} along the main line"
        )
        sections.append(
            {
                "title": f"{history.benchmark} on {history.env}",
                "header": _header(history, depth),
                "chart": Markup(svg) if history.points else None,
                "findings": _findings(history),
                "rows": _rows(history),
                "headers": _HEADERS,
            }
        )
    return render_template("history.html.j2", title="perfgate history", sections=sections)


__all__ = [
    "HISTORY_SCHEMA",
    "HISTORY_SCHEMA_VERSION",
    "change_line",
    "creep_line",
    "history_document",
    "render_html",
    "render_markdown",
    "render_png",
    "render_table",
]

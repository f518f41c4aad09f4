"""The report's charts, drawn with matplotlib and returned as inline SVG text.

No pyplot and no GUI backend: each chart is a :class:`matplotlib.figure.Figure` saved to SVG
with its text kept as text (``svg.fonttype: none``), no date in its metadata and a hash salt of
its own, so two charts in one page never share an element id and the same input draws the
same bytes. matplotlib is imported only when a chart is drawn.
"""

from __future__ import annotations

import io
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from perfgate.analysis.timeline import free_segments, preparing_segment

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

# The msprof timeline's colours: compute green, copy blue, communication red; idle grey.
COLOURS = {
    "compute": "#3a9e4f",
    "comm": "#d9483b",
    "copy": "#3b73d1",
    "free": "#c9cdd2",
    "preparing": "#f2c14e",
    "baseline": "#8a9099",
    "current": "#3b73d1",
    "change": "#d9483b",
}
LANE_LABELS = {"compute": "compute", "comm": "communication", "copy": "copy", "free": "idle"}
BREAKDOWN_PARTS = (
    ("computing_us", "computing", "compute"),
    ("comm_not_overlapped_us", "communication (not overlapped)", "comm"),
    ("free_us", "free", "free"),
    ("preparing_us", "preparing", "preparing"),
)
WIDTH_IN = 8.0
_PROLOGUE = re.compile(r"^.*?(?=<svg)", re.DOTALL)


def _figure(height_in: float) -> Figure:
    from matplotlib.figure import Figure

    figure = Figure(figsize=(WIDTH_IN, height_in), layout="constrained")
    return figure


def to_svg(figure: Figure, salt: str, label: str) -> str:
    """The figure as an ``<svg>`` element to inline in HTML (no XML prologue), with a
    ``role="img"`` and ``aria-label`` for screen readers."""
    import matplotlib

    buffer = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": salt, "font.size": 9.0}):
        figure.savefig(buffer, format="svg", metadata={"Date": None})
    text = _PROLOGUE.sub("", buffer.getvalue(), count=1)
    escaped = label.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;")
    return text.replace("<svg ", f'<svg role="img" aria-label="{escaped}" ', 1)


def _ms(us: float) -> float:
    return us / 1e3


def _box_stats(boxes: Sequence[dict[str, Any]], label_prefix: str) -> list[dict[str, Any]]:
    return [
        {
            "med": _ms(b["median"]),
            "q1": _ms(b["q1"]),
            "q3": _ms(b["q3"]),
            "whislo": _ms(b.get("p5", b["min"])),
            "whishi": _ms(b.get("p95", b["max"])),
            "label": f"{label_prefix}{index + 1}",
            "fliers": [],
        }
        for index, b in enumerate(boxes)
    ]


def distribution_chart(
    baseline: Sequence[dict[str, Any]], current: Sequence[dict[str, Any]], salt: str
) -> str | None:
    """Step time per round (box: quartiles, whiskers: 5th and 95th percentiles — one stalled
    step must not flatten the boxes), baseline rounds then current rounds; a dashed line at
    each side's median round."""
    if not baseline and not current:
        return None
    figure = _figure(2.8)
    axes = figure.add_subplot()
    positions_b = list(range(1, len(baseline) + 1))
    offset = len(baseline) + (1 if baseline else 0)
    positions_c = [offset + i + 1 for i in range(len(current))]
    for boxes, positions, side in (
        (baseline, positions_b, "baseline"),
        (current, positions_c, "current"),
    ):
        if not boxes:
            continue
        stats = _box_stats(boxes, "b" if side == "baseline" else "c")
        drawn = axes.bxp(
            stats, positions=positions, widths=0.6, patch_artist=True, showfliers=False
        )
        for patch in drawn["boxes"]:
            patch.set_facecolor(COLOURS[side])
            patch.set_alpha(0.55)
            patch.set_edgecolor(COLOURS[side])
        for median in drawn["medians"]:
            median.set_color("#222222")
        centre = sorted(s["med"] for s in stats)[len(stats) // 2]
        axes.hlines(
            centre,
            positions[0] - 0.4,
            positions[-1] + 0.4,
            colors=COLOURS[side],
            linestyles="dashed",
            linewidth=1,
            label=f"{side}: {len(boxes)} round(s), median round {centre:.3f} ms",
        )
    axes.set_ylabel("step time (ms)")
    axes.set_title("Step time per round: baseline vs current", loc="left", fontsize=10)
    ticks = positions_b + positions_c
    labels = [f"b{i + 1}" for i in range(len(baseline))] + [
        f"c{i + 1}" for i in range(len(current))
    ]
    axes.set_xticks(ticks, labels, fontsize=8)
    every = -(-len(ticks) // 20)  # at most about 20 labels
    for index, tick in enumerate(axes.get_xticklabels()):
        tick.set_visible(index % every == 0)
    axes.legend(loc="best", fontsize=8, frameon=False)
    axes.grid(axis="y", alpha=0.3)
    return to_svg(figure, f"{salt}-distribution", "step time per round, baseline vs current")


def breakdown_chart(sides: Sequence[tuple[str, dict[str, float]]], salt: str) -> str | None:
    """The median step split into computing, communication (not overlapped), free and
    preparing, one stacked bar per side (ms); copy time is printed beside (it overlaps)."""
    sides = [(label, values) for label, values in sides if values.get("step_time_us")]
    if not sides:
        return None
    figure = _figure(1.0 + 0.45 * len(sides))
    axes = figure.add_subplot()
    rows = list(range(len(sides)))[::-1]
    for (_label, values), row in zip(sides, rows):
        left = 0.0
        for key, name, colour in BREAKDOWN_PARTS:
            width = _ms(values.get(key, 0.0))
            axes.barh(
                row,
                width,
                left=left,
                color=COLOURS[colour],
                height=0.6,
                label=name if row == rows[0] else None,
            )
            left += width
        note = f" {_ms(values['step_time_us']):.3f} ms"
        if values.get("copy_us"):
            note += f" (copy {_ms(values['copy_us']):.3f} ms, overlapping)"
        axes.text(left, row, note, va="center", fontsize=8)
    axes.set_yticks(rows, [label for label, _ in sides])
    axes.set_xlabel("median per profiled step (ms)")
    axes.set_title("Step breakdown", loc="left", fontsize=10)
    figure.legend(loc="outside upper right", ncol=4, fontsize=8, frameon=False)
    axes.margins(x=0.3)
    return to_svg(figure, f"{salt}-breakdown", "step breakdown, baseline vs current")


def timeline_chart(strips: Sequence[tuple[str, dict[str, Any] | None]], salt: str) -> str | None:
    """Each side's representative step as lanes — compute (green), communication (red), copy
    (blue), idle (grey; preparing amber) — like the msprof timeline, in ms from its start."""
    drawn = [(label, strip) for label, strip in strips if strip]
    if not drawn:
        return None
    lanes = ("compute", "comm", "copy", "free")
    figure = _figure(0.5 + 1.1 * len(drawn))
    grid = figure.subplots(len(drawn), 1, squeeze=False, sharex=False)
    for (label, strip), row in zip(drawn, grid):
        axes: Axes = row[0]
        segments = dict(strip.get("lanes") or {})
        segments["free"] = free_segments(strip)
        for index, lane in enumerate(lanes):
            y = len(lanes) - 1 - index
            bars = [(_ms(a), _ms(b - a)) for a, b in segments.get(lane, [])]
            if bars:
                axes.broken_barh(bars, (y - 0.4, 0.8), facecolors=COLOURS[lane])
        preparing = preparing_segment(strip)
        if preparing is not None:
            y = 0
            axes.broken_barh(
                [(0.0, _ms(preparing[1]))], (y - 0.4, 0.8), facecolors=COLOURS["preparing"]
            )
        axes.set_yticks(range(len(lanes)), [LANE_LABELS[lane] for lane in lanes][::-1], fontsize=8)
        axes.set_xlim(0, _ms(float(strip["step_time_us"])))
        axes.set_ylim(-0.6, len(lanes) - 0.4)
        length = _ms(float(strip["step_time_us"]))
        axes.set_title(
            f"{label}: step {strip['step']} (rank {strip['rank']}), {length:.3f} ms",
            loc="left",
            fontsize=9,
        )
        axes.grid(axis="x", alpha=0.3)
    grid[-1][0].set_xlabel("time from the step's start (ms)")
    return to_svg(figure, f"{salt}-timeline", "timeline of one representative step")


def history_chart(
    points: Sequence[dict[str, Any]],
    segments: Sequence[dict[str, Any]],
    change_points: Sequence[dict[str, Any]],
    *,
    unit: str,
    title: str,
    salt: str,
) -> Figure:
    """The metric per commit along the main line (oldest left): centre with its spread,
    each segment's level between change points, and a line where each change entered."""
    figure = _figure(3.2)
    axes = figure.add_subplot()
    xs = list(range(len(points)))
    centres = [p["centre"] for p in points]
    lows = [p["low"] for p in points]
    highs = [p["high"] for p in points]
    axes.fill_between(
        xs, lows, highs, color=COLOURS["current"], alpha=0.15, linewidth=0, label="spread (rounds)"
    )
    axes.plot(
        xs,
        centres,
        marker="o",
        markersize=3,
        color=COLOURS["current"],
        linewidth=1.2,
        label="centre",
    )
    for segment in segments:
        axes.hlines(
            segment["level"],
            segment["first"] - 0.3,
            segment["last"] + 0.3,
            colors="#222222",
            linewidth=1.6,
        )
    for index, change in enumerate(change_points):
        axes.axvline(
            change["index"] - 0.5,
            color=COLOURS["change"],
            linestyle="--",
            linewidth=1,
            label="change point" if index == 0 else None,
        )
        axes.annotate(
            str(change["label"]),
            (change["index"] - 0.5, max(highs)),
            textcoords="offset points",
            xytext=(3, -10),
            fontsize=8,
            color=COLOURS["change"],
        )
    axes.set_xticks(xs, [p["commit"][:7] for p in points], rotation=60, fontsize=7, ha="right")
    if len(xs) > 30:
        for index, tick in enumerate(axes.get_xticklabels()):
            tick.set_visible(index % max(1, len(xs) // 30) == 0)
    axes.set_ylabel(unit)
    axes.set_title(title, loc="left", fontsize=10)
    axes.grid(axis="y", alpha=0.3)
    axes.legend(loc="upper left", fontsize=8, frameon=False)
    return figure


__all__ = [
    "COLOURS",
    "breakdown_chart",
    "distribution_chart",
    "history_chart",
    "timeline_chart",
    "to_svg",
]

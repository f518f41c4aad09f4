"""The advisor's words: one line per hint with the figures that fired it, the steps and
operators involved, and the usual remedy in one line. Built from the facts the advisor kept
(:mod:`perfgate.analysis.advisor`), so a hint read back from a record reads the same.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from perfgate.analysis.advisor import Hint
from perfgate.analysis.metrics import NO_STEP
from perfgate.report.format import format_calls, format_ratio, format_time

TITLES = {
    "idle_gaps": "idle gaps",
    "host_copies": "host↔device copies",
    "small_kernels": "small-kernel runs",
    "sync_waits": "synchronisation waits",
    "communication": "communication",
    "rank_imbalance": "rank imbalance",
    "ai_cpu": "AI_CPU operators",
    "low_utilization": "low utilization",
}

REMEDIES = {
    "idle_gaps": "keep the device fed: take host work (data loading, logging, .item()) off "
    "the step or overlap it (DataLoader workers, pin_memory, non_blocking copies, "
    "prefetching); a gap every k steps is a periodic host task: make it asynchronous",
    "host_copies": "keep tensors on the device: drop per-step .to()/.cpu() round trips, "
    "copy from pinned memory with non_blocking=True, preprocess on the device",
    "small_kernels": "fuse them: torch.compile or graph mode (torchair on Ascend), fused "
    "operators (fused optimizer, fused norms); each launch costs more than its work",
    "sync_waits": "take synchronisation out of the step: no .item(), .cpu() or printing of "
    "device tensors and no stream synchronise per step; accumulate on the device and read "
    "back every N steps",
    "communication": "overlap communication with compute (DDP/FSDP gradient buckets, async "
    "collectives), send fewer and larger messages, or communicate less often (gradient "
    "accumulation)",
    "rank_imbalance": "balance the work across ranks (even data shards, sequence-length "
    "bucketing, CPU/NUMA binding of the slow rank's host): every collective waits for the "
    "slowest rank",
    "ai_cpu": "make them run on the AI Cores: use dtypes and shapes the AI Core kernels "
    "support (int32/float16/float32 rather than int64/float64), or a supported operator",
    "low_utilization": "the other hints say where the rest of the step goes; a larger batch "
    "gives the device more work per step",
}


def _f(hint: Hint, name: str) -> float:
    return float(hint.figures.get(name, float("nan")))


def _steps(steps: Iterable[int], limit: int = 6) -> str:
    shown = [str(s) for s in list(steps)[:limit]]
    return ", ".join(shown)


def _op_list(items: Iterable[Mapping[str, Any]], limit: int = 3) -> str:
    parts = []
    for item in list(items)[:limit]:
        direction = f" [{item['direction']}]" if item.get("direction") else ""
        calls = item.get("calls_per_step")
        part = f"{item['op']}{direction} {format_time(item.get('time_per_step_us'))}/step"
        if calls is not None:
            part += f" ({format_calls(calls)} calls)"
        if item.get("kind") and item["kind"] != "wait":
            part += f" ({item['kind']})"
        parts.append(part)
    return ", ".join(parts)


def _step_place(step: object) -> str:
    """``step 12``; the one window of a profile without step marks (step −1) is no step a
    user could look up: ``the profile (no step marks)``."""
    return "the profile (no step marks)" if step == NO_STEP else f"step {step}"


def _gap(item: Mapping[str, Any]) -> str:
    where = f"{format_time(item.get('gap_us'))} in {_step_place(item.get('step'))}"
    before = item.get("before")
    if before:
        kind = item.get("before_category")
        where += f" after {before}" + (f" [{kind}]" if kind and kind != "compute" else "")
    if item.get("at_end"):
        where += " at the end of the step (host work between steps)"
    elif item.get("after"):
        where += f", before {item['after']}"
    return where


def hint_message(hint: Hint) -> str:
    """The finding in one line, with its figures and what is involved."""
    rule = hint.rule
    limit = format_ratio(_f(hint, "limit"))
    if rule == "idle_gaps":
        text = (
            f"the device is idle {format_ratio(_f(hint, 'free_ratio'))} of the step "
            f"({format_time(_f(hint, 'free_us'))} of {format_time(_f(hint, 'step_time_us'))}, "
            f"limit {limit})"
        )
        if "period" in hint.figures:
            text += (
                f"; a {format_time(_f(hint, 'recurring_gap_us'))} gap recurs every "
                f"{int(_f(hint, 'period'))} steps (steps {_steps(hint.steps)})"
            )
        if hint.items:
            text += "; largest gaps: " + "; ".join(_gap(item) for item in hint.items)
        return text
    if rule == "host_copies":
        return (
            f"host↔device copies take {format_ratio(_f(hint, 'copy_ratio'))} of the step "
            f"({format_time(_f(hint, 'copy_us'))} per step, limit {limit}): "
            + (_op_list(hint.items) or "copy tasks")
        )
    if rule == "small_kernels":
        what = "ops" if _f(hint, "cpu_ops") else "kernels"
        text = (
            f"{format_calls(_f(hint, 'runs_per_step'))} run(s) per step of "
            f"{int(_f(hint, 'min_run'))} or more consecutive {what} under "
            f"{format_time(_f(hint, 'limit_us'))} with launch gaps: "
            f"{format_calls(_f(hint, 'kernels_per_step'))} {what} spanning "
            f"{format_time(_f(hint, 'span_us'))} per step "
            f"({format_ratio(_f(hint, 'span_ratio'))} of the step, "
            f"{format_time(_f(hint, 'launch_gap_us'))} of it launch gaps)"
        )
        if hint.items:
            first = hint.items[0]
            text += (
                f"; largest: {first['sequence']} ({int(first['kernels'])} {what}, "
                f"{format_time(first['span_us'])})"
            )
        return text
    if rule == "sync_waits":
        return (
            f"synchronisation keeps the device idle {format_ratio(_f(hint, 'sync_ratio'))} of "
            f"the step ({format_time(_f(hint, 'sync_us'))} per step, limit {limit}): "
            + _op_list(hint.items)
        )
    if rule == "communication":
        text = (
            f"communication not overlapped with compute takes "
            f"{format_ratio(_f(hint, 'comm_ratio'))} of the step "
            f"({format_time(_f(hint, 'comm_not_overlapped_us'))} per step, limit {limit}"
        )
        if "overlapped" in hint.figures:
            text += f"; {format_ratio(_f(hint, 'overlapped'))} of it overlapped"
        text += ")"
        return text + (": " + _op_list(hint.items) if hint.items else "")
    if rule == "rank_imbalance":
        text = (
            f"the slowest of {int(_f(hint, 'ranks'))} ranks is "
            f"{format_ratio(_f(hint, 'imbalance'))} over the median rank (limit {limit}; "
            f"rank {int(_f(hint, 'slowest_rank'))} is the slowest most often)"
        )
        if hint.items:
            worst = hint.items[0]
            text += (
                f"; worst: {_step_place(worst['step'])}, rank {worst['slowest_rank']} "
                f"{format_time(worst['slowest_us'])} vs median {format_time(worst['median_us'])}"
            )
        return text
    if rule == "ai_cpu":
        return (
            f"{int(_f(hint, 'operators'))} operator type(s) ran on the AI CPU, not the AI Cores: "
            f"{format_ratio(_f(hint, 'share'))} of the step "
            f"({format_time(_f(hint, 'time_per_step_us'))} per step): " + _op_list(hint.items)
        )
    if rule == "low_utilization":
        return (
            f"the device computes only {format_ratio(_f(hint, 'utilization'))} of the step "
            f"(limit {limit}); the rest: communication {format_ratio(_f(hint, 'comm_ratio'))}, "
            f"free {format_ratio(_f(hint, 'free_ratio'))}, preparing "
            f"{format_ratio(_f(hint, 'preparing_ratio'))}"
        )
    return f"{rule}: " + ", ".join(f"{k}={v:g}" for k, v in hint.figures.items())


def hint_line(hint: Hint) -> str:
    """``idle gaps: <finding> → <remedy>``: one self-contained line."""
    return f"{TITLES.get(hint.rule, hint.rule)}: {hint_message(hint)} → {remedy(hint)}"


def remedy(hint: Hint) -> str:
    return REMEDIES.get(hint.rule, "")


def hints_from(advice: Iterable[Mapping[str, Any]] | None) -> list[Hint]:
    """Hints from a record's ``advice`` list. An entry that is no hint, or whose items lack
    what its rule's message names (a damaged record, or one of another version), is skipped:
    advice informs, it decides no verdict."""
    hints = []
    for entry in advice or []:
        try:
            hint = Hint.from_dict(dict(entry))
            hint_message(hint)  # its figures and items hold what the message names
        except (KeyError, TypeError, ValueError, OverflowError, AttributeError):
            continue
        hints.append(hint)
    return hints


def advice_dict(hint: Hint) -> dict[str, Any]:
    """A hint as JSON: the facts, the finding in words and the remedy."""
    return {
        **hint.as_dict(),
        "title": TITLES.get(hint.rule, hint.rule),
        "message": hint_message(hint),
        "remedy": remedy(hint),
    }


def advice_lines(hints: Iterable[Hint], top: int | None = None) -> list[str]:
    """One line per hint, the largest impact first (``top`` of them when given)."""
    ordered = sorted(hints, key=lambda h: (h.rule == "low_utilization", -h.impact))
    return [hint_line(h) for h in (ordered if top is None else ordered[:top])]


def advice_block(
    hints: Iterable[Hint], top: int | None = None, width: int | None = None
) -> list[str]:
    """The hints for a terminal: ``- title: finding`` and ``  → remedy``, each wrapped to
    ``width`` (default: the terminal's) with the continuation lines indented."""
    import textwrap

    from perfgate.report.format import terminal_width

    width = max(width or terminal_width(), 40)
    ordered = sorted(hints, key=lambda h: (h.rule == "low_utilization", -h.impact))
    lines: list[str] = []
    for hint in ordered if top is None else ordered[:top]:
        title = TITLES.get(hint.rule, hint.rule)
        lines.extend(
            textwrap.wrap(f"- {title}: {hint_message(hint)}", width, subsequent_indent="  ")
        )
        lines.extend(textwrap.wrap(f"  → {remedy(hint)}", width, subsequent_indent="    "))
    return lines

"""The words of a comparison: why each metric got its status, one summary line per failing
metric, and the operators that explain it. Built from the facts the decision kept
(:mod:`perfgate.analysis.compare`).
"""

from __future__ import annotations

from perfgate.analysis.compare import ANOTHER_TEST, Comparison, MetricJudgement, OperatorDelta
from perfgate.report.format import (
    format_change,
    format_spread,
    format_value,
    p_clause,
    short_name,
)
from perfgate.verdict import MetricStatus, Verdict

BREAKDOWN_WORDS = {
    "computing_us": "computing",
    "comm_not_overlapped_us": "communication (not overlapped)",
    "free_us": "free (device idle)",
    "preparing_us": "preparing",
}
_STATUS_WORDS = {
    MetricStatus.REGRESSION: "regressed",
    MetricStatus.IMPROVEMENT: "improved",
    MetricStatus.UNSTABLE: "is unstable",
}


def compared_baseline(m: MetricJudgement) -> float | None:
    """The baseline figure a metric's change is measured from: the median of the recent
    baselines when the look-back judged it (``reference``), else the baseline's own. Shown
    beside the current figure, so that the two and the change agree."""
    if m.history_runs >= 2 and m.reference is not None and m.baseline is not None:
        return m.reference
    return m.baseline


def metric_reasons(m: MetricJudgement) -> list[str]:
    """Why ``m`` has its status, one short clause each (empty for a plain pass)."""
    if m.status is MetricStatus.NOT_AVAILABLE:
        side = "baseline" if m.n_baseline == 0 else "current run"
        return [f"the {side} has no {m.metric} samples"]
    reasons = []
    if m.history_runs >= 2 and m.effect is not None and m.reference is not None:
        reasons.append(
            f"judged against the median of the last {m.history_runs} baselines "
            f"({format_value(m.metric, m.reference)})"
        )
    if m.history_left_out and m.effect is not None:
        reasons.append(
            f"{m.history_left_out} older baseline(s) left out of the look-back: a step "
            "change separates them from this code"
        )
    if m.test == "effect-only":
        reasons.append(
            f"too few replicates for a test ({m.n_baseline} baseline, {m.n_current} current): "
            "decided on the effect alone"
        )
    elif m.test.startswith("mann-whitney") and m.effect is not None:
        reasons.append(
            "steps of single runs as replicates: the noise between runs is unknown "
            "(pytest --perfgate measures rounds)"
        )
    if m.copy_calls is not None:
        before, after = m.copy_calls
        reasons.append(
            f"copy tasks per step rose {before:g} → {after:g}: counts do not wander with the "
            "runner's load"
        )
    if m.status is MetricStatus.REGRESSION and m.far_beyond_noise and not m.significant:
        reasons.append(
            "far beyond the noise: at least twice the baseline, and every round's process "
            "1.5× beyond every baseline process"
        )
    if m.status is MetricStatus.UNSTABLE:
        reasons.append(unstable_clause(m))
    elif m.effect is not None:
        if m.significant is False and m.p_value is not None:
            # A regression decided by the rules above stands without the test: say so, not
            # "not significant" beside "regressed".
            alone = "the test alone is " if m.status is MetricStatus.REGRESSION else ""
            reasons.append(f"{alone}not significant ({p_clause(m.p_value)} ≥ α={m.alpha_look:.2g})")
        if m.within_history:
            reasons.append(
                f"within the spread of the last {m.history_runs} baselines "
                f"({format_value(m.metric, m.history_low)} – "
                f"{format_value(m.metric, m.history_high)})"
            )
    return reasons


def noise_figures(m: MetricJudgement) -> str:
    """The measured noise: ``±4.1% between rounds, ±2.0% between processes``."""
    parts = []
    if m.noise:  # 0: every round was a process of its own (a command), nothing within
        parts.append(f"{format_spread(m.noise, m.unit)} between rounds")
    if m.noise_process:
        parts.append(f"{format_spread(m.noise_process, m.unit)} between processes")
    if m.noise_session:
        parts.append(f"{format_spread(m.noise_session, m.unit)} between sessions")
    elif m.noise_session_assumed:
        parts.append(
            f"{format_spread(m.noise_session_assumed, m.unit)} between sessions assumed "
            "(one baseline session; 3 of the same code measure it; statistics.session_noise)"
        )
    return ", ".join(parts) or "unknown"


def unstable_clause(m: MetricJudgement) -> str:
    """Why ``m`` is unstable: the busy runner its wall time rose with, or the noise."""
    return contention_clause(m) if m.contended else noise_clause(m)


def contention_clause(m: MetricJudgement) -> str:
    """Why a wall-time rise on a busy runner is not called a regression."""
    change: float | None
    if m.unqueued_change is not None:
        name, change = "the step time less its wait for a CPU", m.unqueued_change
    else:
        name, change = "the CPU time per step", m.cpu_change
    shown = format_change(change, m.unit) if change is not None else "n/a"
    allowance = m.contention_allowance
    if change is not None and allowance and change > m.threshold_value:
        # It rose past the limit, but no further than the neighbours can slow a step.
        witness = (
            f"{name} rose {shown}, no more than such neighbours can slow a step (up to "
            f"{format_change(allowance, m.unit)}: a busy core is shared)"
        )
        cause = "the rise cannot be told from the neighbours'"
    else:
        witness = f"{name} moved only {shown}"
        cause = "the wall time rose with the neighbours, not the code"
    return (
        f"the runner was busy (other processes used {m.others_cpus:.1f} CPUs) and {witness}: "
        f"{cause}; run again on a quieter runner, or use a same-runner A/B run (perfgate ab)"
    )


def noise_clause(m: MetricJudgement) -> str:
    """Why a metric is unstable: a change past the limit that the noise leaves unproven, or
    noise that hides a change of the limit's size; the noise measured and the remedies."""
    if m.test.startswith("paired"):
        remedies = "more pairs (perfgate ab --pairs, statistics.ab_pairs), a quieter runner"
    elif m.more_rounds_help:
        remedies = (
            "more rounds (statistics.max_rounds), a same-runner A/B run (perfgate ab), "
            "a quieter runner"
        )
    else:
        # More rounds of one process would not shrink the noise that decides here.
        remedies = (
            "a same-runner A/B run (perfgate ab), baselines of the same code recorded on the "
            "baseline branch (the look-back measures the session noise), a quieter runner"
        )
    rounds = f"after {m.n_current} round{'' if m.n_current == 1 else 's'}"
    if m.effect == "bad":
        p = f"{p_clause(m.p_value)} ≥ α={m.alpha_look:.2g}" if m.p_value is not None else "untested"
        return (
            f"{format_change(m.change, m.unit)} is past the {m.threshold} limit but not "
            f"significant ({p}) with runner noise {noise_figures(m)} {rounds}; remedies: "
            f"{remedies}"
        )
    floor = format_spread(m.noise_change, m.unit) if m.noise_change is not None else "unknown"
    return (
        f"the change is known only to {floor}, wider than the {m.threshold} limit, with "
        f"runner noise {noise_figures(m)} {rounds}: a change of the limit's size would not "
        f"show; remedies: {remedies}, or a larger threshold"
    )


def baseline_label(c: Comparison) -> str:
    """Which baseline and how it was chosen: ``ab12cd34ef56 (merge-base …, 2 commits back)``."""
    commit = c.baseline.get("commit")
    label = str(commit)[:12] if commit else str(c.baseline.get("path", "baseline"))
    how = c.baseline.get("how")
    distance = c.baseline.get("distance")
    if how and distance is not None:
        back = "1 commit back" if distance == 1 else f"{distance} commits back"
        return f"{label} ({how}, {back})"
    return f"{label} ({how})" if how else label


def describe_operator(o: OperatorDelta, step_delta_us: float | None = None) -> str:
    """``MatMulV2 [AI_CORE] +2.000 ms/step (calls/step 8 → 16), 71% of the profiled step's
    +2.8 ms increase``. The share is of the profiled steps' change (where operator times are
    measured), which may differ from the timed rounds' change the step-time verdict judges:
    the text says which. A share is told only against a step time that moved the same
    way, and never beyond the whole: an operator that grew more than the step did says so,
    with what the rest of the step did."""
    text = f"{short_name(o.op_type, 80)} [{o.core}] {o.delta_us / 1e3:+.3f} ms/step"
    if o.status == "new":
        text += " (new operator)"
    elif o.status == "calls-changed":
        text += f" (calls/step {o.baseline_calls_per_step:g} → {o.current_calls_per_step:g})"
    share = o.share_of_step_delta
    if share is None or step_delta_us is None or share <= 0 or o.delta_us <= 0:
        return text
    change = f"the profiled step's {step_delta_us / 1e3:+.1f} ms increase"
    if share <= 1.0:
        return text + f", {share:.0%} of {change}"
    rest = step_delta_us - o.delta_us
    return text + f", more than {change} (the rest of it {rest / 1e3:+.1f} ms)"


def breakdown_explanation(c: Comparison) -> str | None:
    """Where the step's time went, when the operators do not say: e.g. "free (device idle)
    +5.10 ms/step" for a host-bound gap no device operator shows."""
    parts = [
        f"{BREAKDOWN_WORDS[name]} {delta / 1e3:+.2f} ms/step" for name, delta in c.moved_breakdown()
    ]
    return ", ".join(parts) if parts else None


def _metric_line(c: Comparison, m: MetricJudgement) -> str:
    """One metric's self-explanatory line: its values, change, limit and baseline, then why
    it is unstable, or what explains its regression."""
    word = _STATUS_WORDS[m.status] if c.judged else f"not judged ({_unjudged(c)})"
    line = (
        f"{c.benchmark}: {m.name} {word}: "
        f"{format_value(m.metric, compared_baseline(m))} → {format_value(m.metric, m.current)} "
        f"({format_change(m.change, m.unit)}, limit {m.threshold}) "
        f"vs baseline {baseline_label(c)}"
    )
    if m.p_value is not None:
        line += f"; {p_clause(m.p_value)}"
    if m.status is MetricStatus.UNSTABLE and c.judged:
        line += "; " + "; ".join(metric_reasons(m))
    if m.status is MetricStatus.REGRESSION:
        culprits = c.explaining_operators(m.metric)
        if culprits:
            line += "; explained by " + ", ".join(
                describe_operator(o, c.step_delta_us) for o in culprits
            )
        where = breakdown_explanation(c)
        if where and m.metric in ("step_time_us", "utilization", "free_ratio"):
            line += f"; per step: {where}"
    return line


def _unjudged(c: Comparison) -> str:
    """Why an incomparable run's figures were not judged, in a few words."""
    if any("(hard)" in w for w in c.warnings):
        return "another environment"
    if any(n.startswith(ANOTHER_TEST) for n in c.notes):
        return "another test's baseline"
    return "incomparable"


def summary_lines(c: Comparison) -> list[str]:
    """One self-explanatory line per regressed or unstable metric; improvements are listed
    only when nothing regressed (a slower kernel also "improves" utilization)."""
    shown = (
        (MetricStatus.REGRESSION, MetricStatus.UNSTABLE)
        if c.verdict is Verdict.REGRESSION
        else (MetricStatus.REGRESSION, MetricStatus.IMPROVEMENT, MetricStatus.UNSTABLE)
    )
    lines = [_metric_line(c, m) for m in c.metrics if m.gated and m.status in shown]
    lines.extend(
        f"{c.benchmark}: operator {short_name(o.op_type, 80)} [{o.core}] "
        f"{'regressed' if c.judged else f'not judged ({_unjudged(c)})'}: "
        f"{o.baseline_time_per_step_us / 1e3:.3f} → {o.current_time_per_step_us / 1e3:.3f} "
        f"ms/step ({p_clause(o.p_value)}, Holm-corrected)"
        for o in c.operators
        if o.regression
    )
    return lines


def reason_lines(c: Comparison) -> list[str]:
    """Each distinct reason once, with the gated metrics it applies to. An unstable
    metric's reasons are left out: its line in :func:`summary_lines`, which every report
    shows beside these, already gives them."""
    by_reason: dict[str, list[str]] = {}
    for m in c.metrics:
        if m.gated and m.status is not MetricStatus.UNSTABLE:
            for reason in metric_reasons(m):
                by_reason.setdefault(reason, []).append(m.name)
    return [f"{reason} ({', '.join(names)})" for reason, names in by_reason.items()]


def verdict_reason(c: Comparison) -> str | None:
    """One line that says why a benchmark did not simply pass (None when it did)."""
    reasons = verdict_reasons(c)
    return reasons[0] if reasons else None


def verdict_reasons(c: Comparison) -> list[str]:
    """The lines that say why a benchmark did not simply pass: for a regression (an
    improvement), one per regressed (improved) metric or operator, each with what explains
    it — the copy ratio's rise and its copy operator as well as the utilization drop it
    caused; otherwise one line. Empty when it passed."""
    if c.verdict in (Verdict.PASS, Verdict.NO_BASELINE):
        return []  # no-baseline: one line after the table says how to record them
    lines = summary_lines(c)
    if c.verdict in (Verdict.REGRESSION, Verdict.IMPROVEMENT) and lines:
        # The lines of metrics (or operators) with the verdict's own status, not of an
        # unstable metric listed before them.
        word = "regressed" if c.verdict is Verdict.REGRESSION else "improved"
        return [line for line in lines if f" {word}: " in line] or lines[:1]
    reason = _other_reason(c)
    return [reason] if reason is not None else []


def _other_reason(c: Comparison) -> str | None:
    """The one line of an unstable, incomparable or error verdict."""
    if c.verdict is Verdict.UNSTABLE:
        unstable = [m for m in c.metrics if m.gated and m.status is MetricStatus.UNSTABLE]
        if unstable:
            # The metric's own line: its values, change and limit before why it is undecided.
            return _metric_line(c, unstable[0])
    if c.verdict is Verdict.INCOMPARABLE:
        hard = [w for w in c.warnings if "(hard)" in w]
        said = [n.removeprefix("incomparable: ") for n in c.notes if n.startswith("incomparable:")]
        why = hard[0] if hard else said[-1] if said else "another environment"
        return f"{c.benchmark}: incomparable: {why}"
    if c.notes:
        return f"{c.benchmark}: {c.verdict.value}: {c.notes[0]}"
    return None

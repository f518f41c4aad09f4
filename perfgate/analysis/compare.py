"""Baseline vs current: the decision "regressed or noise". Pure functions over run records.

A gated metric regresses only when all of these hold:

1. **effect** — the median moved past the threshold in the bad direction (``+5%`` step time,
   ``-3pt`` utilization, ``+2pt`` copy ratio), measured against the nearest baseline or, with
   a look-back of two or more baselines, against the median of their run medians;
2. **significance** — a one-sided Mann–Whitney U test on the per-step samples, corrected for
   autocorrelated steps, gives p < α (default 0.01). With fewer than ``min_steps`` samples a
   side, or too few for the test to ever reach α, the verdict rests on the effect alone;
3. **outside the between-run spread** — with two or more ancestor baselines (the look-back),
   the current median must lie beyond the most extreme of their medians by more than
   0.3 × the threshold.

A metric whose baseline spread is too large to trust (robust CV above ``max_cv``, or a
spread in points above the threshold) is ``unstable``: advisory, never a failure — unless
the current median lies more than 4 robust standard deviations of that baseline away.

Every judgement keeps the facts it rests on (:class:`MetricJudgement`); the words come from
:mod:`perfgate.report.explain`. The rule's false-alarm rate and detection power are measured
in ``benchmarks/verdict_quality.py`` (``docs/verdict-quality.md``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from perfgate.analysis.statistics import (
    Samples,
    clean,
    mann_whitney_p,
    min_attainable_p,
    one_sided_mann_whitney_p,
    robust_spread,
    sample_median,
)
from perfgate.records import OperatorEntry, RunRecord
from perfgate.rules import MetricRule, OperatorRule, Rules, Statistics, Threshold, Unit
from perfgate.verdict import MetricStatus, Verdict

# Fields of the environment fingerprint that change what is measured: a difference makes
# the comparison meaningless. The other fields (driver, CANN, torch, python …) are exactly
# the upgrades a gate should judge, so they only warn.
HARD_FINGERPRINT_FIELDS = (
    "device",
    "device_count",
    "profiler",
    "profiler_level",
    "aic_metrics",
    "task_basis",
)
# How far (as a share of the threshold) the current run must lie beyond the most extreme
# look-back run to count as outside the between-run spread; measured in
# benchmarks/verdict_quality.py (docs/verdict-quality.md).
HISTORY_MARGIN = 0.3
# A change this many robust standard deviations of a noisy baseline away is judged anyway.
UNSTABLE_OVERRIDE = 4.0

Effect = Literal["bad", "good"]


@dataclass
class MetricJudgement:
    """The judgement of one metric and the facts it rests on.

    ``change`` is in the threshold's unit (a fraction for ``%`` and ``pt``, µs for times),
    against the nearest baseline; ``reference`` is what the effect was judged against (that
    baseline's median, or the median of the look-back runs when there are two or more).
    ``noise`` is the baseline's spread in the unit ``noise_unit`` and ``noise_limit`` the
    spread above which the metric is too noisy to judge.
    """

    name: str
    metric: str
    baseline: float
    current: float
    change: float
    threshold: str
    unit: str
    bad_sign: int
    gated: bool
    status: MetricStatus
    significant: bool | None
    p_value: float | None
    test: str
    n_baseline: int
    n_current: int
    alpha: float = 0.01
    min_steps: int = 10
    effect: Effect | None = None
    reference: float | None = None
    history_runs: int = 0
    history_low: float | None = None
    history_high: float | None = None
    within_history: bool = False
    noise: float | None = None
    noise_unit: str = Unit.RELATIVE.value
    noise_limit: float | None = None
    noisy: bool = False
    beyond_noise: bool = False

    @property
    def reference_change(self) -> float:
        """The change against :attr:`reference`, in the threshold's unit."""
        if self.reference is None:
            return self.change
        return _threshold_of(self).change(self.reference, self.current)


def _threshold_of(m: MetricJudgement) -> Threshold:
    return Threshold(value=0.0, unit=Unit(m.unit), text=m.threshold)


def judge_metric(
    rule: MetricRule,
    baseline_samples: Samples,
    current_samples: Samples,
    stats: Statistics,
    history_medians: Sequence[float] = (),
) -> MetricJudgement:
    """Judge one metric. ``history_medians``: per-run medians of the look-back baselines
    (nearest first, the compared baseline included); fewer than two means unknown spread."""
    base = clean(baseline_samples)
    cur = clean(current_samples)
    threshold = rule.threshold
    judgement = MetricJudgement(
        name=rule.label,
        metric=rule.metric,
        baseline=float(np.median(base)) if base.size else float("nan"),
        current=float(np.median(cur)) if cur.size else float("nan"),
        change=float("nan"),
        threshold=signed_threshold(threshold, rule.bad_sign),
        unit=threshold.unit.value,
        bad_sign=rule.bad_sign,
        gated=rule.gate,
        status=MetricStatus.PASS,
        significant=None,
        p_value=None,
        test="none",
        n_baseline=int(base.size),
        n_current=int(cur.size),
        alpha=stats.alpha,
        min_steps=stats.min_steps,
    )
    if base.size == 0 or cur.size == 0:
        judgement.status = MetricStatus.NOT_AVAILABLE
        return judgement
    judgement.change = threshold.change(judgement.baseline, judgement.current)
    history = [h for h in history_medians if h is not None and not math.isnan(h)]
    judgement.history_runs = len(history)
    # With a look-back, the effect is judged against the centre of the recent runs, not
    # against whichever mode the nearest run happened to land in.
    reference = float(np.median(history)) if len(history) >= 2 else judgement.baseline
    judgement.reference = reference
    if threshold.exceeded_by(reference, judgement.current, rule.bad_sign):
        judgement.effect = "bad"
    elif threshold.exceeded_by(reference, judgement.current, -rule.bad_sign):
        judgement.effect = "good"

    # Significance in whichever direction the effect points.
    direction = -rule.bad_sign if judgement.effect == "good" else rule.bad_sign
    enough = (
        min(base.size, cur.size) >= stats.min_steps
        and min_attainable_p(base.size, cur.size) < stats.alpha
    )
    if enough:
        p = mann_whitney_p(cur, base, greater=direction > 0)
        judgement.p_value = p
        judgement.significant = p < stats.alpha
        judgement.test = "mann-whitney-u"
    else:
        judgement.test = "effect-only"
    significant = judgement.significant is not False

    if len(history) >= 2:
        judgement.history_low, judgement.history_high = min(history), max(history)
        edge = judgement.history_high if direction > 0 else judgement.history_low
        # Beyond the spread means clearly beyond: topping the highest of k run medians by a
        # hair happens to 1 unchanged run in k + 1.
        beyond = threshold.change(edge, judgement.current) * direction
        judgement.within_history = beyond <= HISTORY_MARGIN * threshold.value

    _judge_noise(judgement, base, threshold, stats)
    unstable = judgement.noisy and not judgement.beyond_noise
    if unstable:
        judgement.status = MetricStatus.UNSTABLE
    elif judgement.effect == "bad" and significant and not judgement.within_history:
        judgement.status = MetricStatus.REGRESSION
    elif judgement.effect == "good" and significant and not judgement.within_history:
        judgement.status = MetricStatus.IMPROVEMENT
    return judgement


def _judge_noise(
    judgement: MetricJudgement, base: np.ndarray, threshold: Threshold, stats: Statistics
) -> None:
    """Whether the baseline is too noisy to judge, and whether the change is beyond its noise."""
    spread = robust_spread(base)
    if threshold.unit is Unit.POINTS:
        judgement.noise, judgement.noise_unit = spread, Unit.POINTS.value
        judgement.noise_limit = threshold.value
    else:
        median = judgement.baseline
        judgement.noise = spread / abs(median) if median else 0.0
        judgement.noise_unit = Unit.RELATIVE.value
        judgement.noise_limit = stats.max_cv
    judgement.noisy = judgement.noise > judgement.noise_limit
    if judgement.noisy and judgement.effect is not None:
        # A noisy baseline hides small changes, not one far outside its own spread.
        distance = abs(judgement.current - judgement.baseline)
        judgement.beyond_noise = distance > UNSTABLE_OVERRIDE * spread


def signed_threshold(threshold: Threshold, bad_sign: int) -> str:
    """The limit with its bad direction: ``+5%``, ``-3pt``."""
    text = threshold.text.lstrip("+-")
    return ("+" if bad_sign > 0 else "-") + text


@dataclass
class OperatorDelta:
    """One operator's change; times are device µs per step."""

    op_type: str
    core: str
    category: str
    baseline_time_per_step_us: float
    current_time_per_step_us: float
    delta_us: float
    share_of_step_delta: float | None
    baseline_calls_per_step: float
    current_calls_per_step: float
    status: str  # new | vanished | calls-changed | changed | unchanged
    current_share: float
    gated: bool = False
    p_value: float | None = None
    regression: bool = False


def operator_deltas(
    baseline_ops: Sequence[OperatorEntry],
    current_ops: Sequence[OperatorEntry],
    step_time_delta_us: float,
    rule: OperatorRule,
    alpha: float,
) -> list[OperatorDelta]:
    """Rank operators by how much of the step-time change they explain.

    Operators are gated only when ``rule.gate``: then an operator regresses when its current
    share is at least ``rule.min_share``, its time per step rose past ``rule.max_increase``,
    and (with per-step samples) a Mann–Whitney test survives Holm's correction over all
    gated operators.
    """

    def key(op: OperatorEntry) -> tuple[str, str]:
        return (str(op["op_type"]), str(op["core"]))

    base = {key(op): op for op in baseline_ops}
    cur = {key(op): op for op in current_ops}
    deltas: list[tuple[OperatorDelta, OperatorEntry | None, OperatorEntry | None]] = []
    for k in list(cur) + [k for k in base if k not in cur]:
        b, c = base.get(k), cur.get(k)
        b_time = _number(b["time_per_step_us"]) if b else 0.0
        c_time = _number(c["time_per_step_us"]) if c else 0.0
        b_calls = _number(b["calls_per_step"]) if b else 0.0
        c_calls = _number(c["calls_per_step"]) if c else 0.0
        if b is None:
            status = "new"
        elif c is None:
            status = "vanished"
        elif not math.isclose(b_calls, c_calls, rel_tol=1e-9, abs_tol=1e-9):
            status = "calls-changed"
        elif math.isclose(b_time, c_time, rel_tol=1e-3, abs_tol=0.01):
            status = "unchanged"
        else:
            status = "changed"
        delta = c_time - b_time
        explained = delta / step_time_delta_us if step_time_delta_us > 0 else None
        source = c or b
        assert source is not None
        current_share = c.get("share") if c else None
        deltas.append(
            (
                OperatorDelta(
                    op_type=k[0],
                    core=k[1],
                    category=str(source.get("category", "")),
                    baseline_time_per_step_us=b_time,
                    current_time_per_step_us=c_time,
                    delta_us=delta,
                    share_of_step_delta=explained,
                    baseline_calls_per_step=b_calls,
                    current_calls_per_step=c_calls,
                    status=status,
                    current_share=float(current_share) if current_share is not None else 0.0,
                ),
                b,
                c,
            )
        )
    if rule.gate:
        _gate_operators(deltas, rule, alpha)
    return sorted((d for d, _, _ in deltas), key=lambda d: (-abs(d.delta_us), d.op_type))


def _number(value: float | None) -> float:
    return 0.0 if value is None else float(value)


def _gate_operators(
    deltas: list[tuple[OperatorDelta, OperatorEntry | None, OperatorEntry | None]],
    rule: OperatorRule,
    alpha: float,
) -> None:
    candidates = []
    for delta, b, c in deltas:
        if c is None or delta.current_share < rule.min_share:
            continue
        delta.gated = True
        if b is None:
            continue  # a new operator explains, but there is nothing to test it against
        if not rule.max_increase.exceeded_by(
            delta.baseline_time_per_step_us, delta.current_time_per_step_us, +1
        ):
            continue
        b_samples = clean(b.get("samples_us") or [])
        c_samples = clean(c.get("samples_us") or [])
        if b_samples.size and c_samples.size:
            p = one_sided_mann_whitney_p(c_samples, b_samples)
        else:
            p = 0.0  # no per-step samples: decided on the effect alone
        delta.p_value = p
        candidates.append(delta)
    # Holm–Bonferroni over the operators actually tested: 300 operators at α=0.01 must not
    # produce three false alarms a run.
    candidates.sort(key=lambda d: d.p_value or 0.0)
    tested = len(candidates)
    for rank, delta in enumerate(candidates):
        if (delta.p_value or 0.0) < alpha / (tested - rank):
            delta.regression = True
        else:
            break


def fingerprint_differences(
    baseline: dict[str, Any], current: dict[str, Any]
) -> tuple[list[str], list[str]]:
    """(hard, soft) differences between two environment fingerprints, as readable lines."""
    hard: list[str] = []
    soft: list[str] = []
    for name in sorted(set(baseline) | set(current)):
        b, c = baseline.get(name), current.get(name)
        if b == c or b in (None, "") or c in (None, ""):
            continue
        line = f"{name}: {b} → {c}"
        (hard if name in HARD_FINGERPRINT_FIELDS else soft).append(line)
    return hard, soft


# Which operators explain a metric: copy ratio is explained by copy tasks, and so on.
_EXPLAINING_CATEGORY = {"copy_ratio": "copy", "comm_ratio": "comm"}
# An operator (or breakdown part) that grew by less than this share of the largest growth is
# noise next to it, not an explanation.
EXPLAIN_MIN_FRACTION = 0.1
_EXPLAIN_MIN_SHARE = 0.05
BREAKDOWN_PARTS = ("computing_us", "comm_not_overlapped_us", "free_us", "preparing_us")


@dataclass
class Comparison:
    """The comparison of one benchmark's current run with its baseline."""

    benchmark: str
    verdict: Verdict
    baseline: dict[str, Any]  # commit, how, distance, path, env
    current: dict[str, Any]  # commit, path, env
    metrics: list[MetricJudgement] = field(default_factory=list)
    operators: list[OperatorDelta] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # Median change of each breakdown column (µs per step, profiled steps).
    breakdown_delta_us: dict[str, float] = field(default_factory=dict)

    def explaining_operators(self, metric: str, limit: int = 3) -> list[OperatorDelta]:
        """The operators that grew most (for copy / comm ratio: copy / comm tasks only),
        leaving out those too small to matter next to the largest one."""
        category = _EXPLAINING_CATEGORY.get(metric)
        worse = [
            o
            for o in self.operators
            if o.delta_us > 0 and (category is None or o.category == category)
        ]
        if category is None:
            # For step time and utilization an operator explains only a real part of the
            # step's growth; a host-side gap is then told by the breakdown instead.
            worse = [
                o
                for o in worse
                if o.share_of_step_delta is None or o.share_of_step_delta >= _EXPLAIN_MIN_SHARE
            ]
        if not worse:
            return []
        largest = max(o.delta_us for o in worse)
        return [o for o in worse if o.delta_us >= EXPLAIN_MIN_FRACTION * largest][:limit]

    def moved_breakdown(self, limit: int = 2) -> list[tuple[str, float]]:
        """The breakdown parts that moved most (µs per step), leaving out those too small to
        matter next to the largest: where the step's time went when no operator says."""
        moved = sorted(
            ((abs(delta), name, delta) for name, delta in self.breakdown_delta_us.items()),
            reverse=True,
        )
        return [
            (name, delta)
            for size, name, delta in moved[:limit]
            if size > 0 and size >= EXPLAIN_MIN_FRACTION * moved[0][0]
        ]


def compare_runs(
    baseline: RunRecord,
    current: RunRecord,
    rules: Rules,
    *,
    history: Sequence[RunRecord] = (),
    baseline_info: dict[str, Any] | None = None,
    current_info: dict[str, Any] | None = None,
) -> Comparison:
    """Compare two run records under one benchmark's rules.

    ``history``: look-back baseline records, nearest first, ``baseline`` included; their
    per-run medians estimate the between-run spread. Without it, the baseline alone.
    """
    history = history or [baseline]
    comparison = Comparison(
        benchmark=str(current.get("benchmark") or baseline.get("benchmark")),
        verdict=Verdict.PASS,
        baseline=dict(baseline_info or {"commit": baseline.get("commit")}),
        current=dict(current_info or {"commit": current.get("commit")}),
    )
    hard, soft = fingerprint_differences(
        baseline.get("fingerprint", {}), current.get("fingerprint", {})
    )
    comparison.warnings.extend(f"environment differs (soft): {line}" for line in soft)
    base_samples, cur_samples = baseline["samples"], current["samples"]
    for rule in rules.metrics.values():
        if not rule.gate and not (base_samples.get(rule.metric) and cur_samples.get(rule.metric)):
            continue
        history_medians = [sample_median(h["samples"].get(rule.metric, [])) for h in history]
        comparison.metrics.append(
            judge_metric(
                rule,
                base_samples.get(rule.metric, []),
                cur_samples.get(rule.metric, []),
                rules.statistics,
                history_medians,
            )
        )
    # Operator times come from the profiled steps: explain them against the profiled step
    # time when both sides have it (the gated step time may be an unprofiled one).
    step_key = (
        "profiled_step_time_us"
        if base_samples.get("profiled_step_time_us") and cur_samples.get("profiled_step_time_us")
        else "step_time_us"
    )
    step_delta = sample_median(cur_samples.get(step_key, [])) - sample_median(
        base_samples.get(step_key, [])
    )
    comparison.breakdown_delta_us = {
        name: round(delta, 3)
        for name in BREAKDOWN_PARTS
        if not math.isnan(
            delta := sample_median(cur_samples.get(name, []))
            - sample_median(base_samples.get(name, []))
        )
    }
    comparison.operators = operator_deltas(
        baseline.get("operators", []),
        current.get("operators", []),
        step_delta if not math.isnan(step_delta) else 0.0,
        rules.operators,
        rules.statistics.alpha,
    )
    comparison.verdict = _verdict(comparison, hard)
    return comparison


def _verdict(comparison: Comparison, hard_differences: list[str]) -> Verdict:
    gated = [m for m in comparison.metrics if m.gated]
    if gated and all(m.status is MetricStatus.NOT_AVAILABLE for m in gated):
        comparison.notes.append("no gated metric could be computed from either side")
        return Verdict.ERROR
    if hard_differences:
        comparison.warnings.extend(
            f"environment differs (hard): {line}" for line in hard_differences
        )
        comparison.notes.append(
            "incomparable: the baseline was recorded in another environment; record one "
            "here with `perfgate baseline update` (or --perfgate-update)"
        )
        return Verdict.INCOMPARABLE
    statuses = {m.status for m in gated}
    if MetricStatus.REGRESSION in statuses or any(o.regression for o in comparison.operators):
        return Verdict.REGRESSION
    if MetricStatus.UNSTABLE in statuses:
        return Verdict.UNSTABLE
    if MetricStatus.IMPROVEMENT in statuses:
        comparison.notes.append(
            "improvement beyond the threshold: the baseline is stale; record a new one "
            "on the main branch"
        )
        return Verdict.IMPROVEMENT
    return Verdict.PASS

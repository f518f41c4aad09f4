"""Baseline vs current: the decision "regressed or noise" (DESIGN §4). Pure functions.

A gated metric regresses only when all of these hold:

1. **effect** — the median moved past the threshold in the bad direction (``+5%`` step time,
   ``-3pt`` utilization, ``+2pt`` copy ratio), measured against the nearest baseline or, with
   a look-back of two or more baselines, against the median of their run medians;
2. **significance** — a one-sided Mann–Whitney U test on the per-step samples, corrected for
   autocorrelated steps, gives p < α (default 0.01). With fewer than ``min_steps`` samples a
   side, or too few for the test to ever reach α, the verdict rests on the effect alone and
   says so;
3. **outside the between-run spread** — steps within one run understate run-to-run variance
   (a device can land in a slower mode for a whole run). With two or more ancestor baselines
   (the look-back), the current median must lie beyond the most extreme of their medians by
   more than 0.3 × the threshold; with one baseline the between-run spread is unknown and the
   report says so.

The rule's false-alarm rate and detection power are measured in
``benchmarks/verdict_quality.py`` (``docs/verdict-quality.md``).

A metric whose baseline spread is too large to trust (robust CV above ``max_cv``, or a
spread in points above the threshold) is ``unstable``: advisory, never a failure — unless
the current median lies more than 4 robust standard deviations of that baseline away, a
change no noise of that size explains.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy.stats import mannwhitneyu, norm

from perfgate.config import MetricRule, OperatorRule, Statistics, Threshold, Unit

PASS = "pass"
REGRESSION = "regression"
IMPROVEMENT = "improvement"
NO_BASELINE = "no-baseline"
INCOMPARABLE = "incomparable"
UNSTABLE = "unstable"
ERROR = "error"
VERDICTS = (PASS, REGRESSION, IMPROVEMENT, NO_BASELINE, INCOMPARABLE, UNSTABLE, ERROR)
NOT_AVAILABLE = "n/a"

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
_MAD_TO_SD = 1.4826  # MAD of a normal sample × this = its standard deviation
# How far (as a share of the threshold) the current run must lie beyond the most extreme
# look-back run to count as outside the between-run spread; measured in
# benchmarks/verdict_quality.py (docs/verdict-quality.md).
HISTORY_MARGIN = 0.3
# A change this many robust standard deviations of a noisy baseline away is judged anyway.
UNSTABLE_OVERRIDE = 4.0
_MAX_AUTOCORRELATION = 0.9


def lag1_autocorrelation(samples: npt.NDArray[np.float64]) -> float:
    """Lag-one autocorrelation of a series of per-step samples (0 for fewer than 3)."""
    if samples.size < 3:
        return 0.0
    centred = samples - samples.mean()
    denominator = float(np.dot(centred, centred))
    if denominator == 0.0:
        return 0.0
    return float(np.dot(centred[:-1], centred[1:]) / denominator)


def mann_whitney_p(
    current: npt.NDArray[np.float64], baseline: npt.NDArray[np.float64], *, greater: bool
) -> float:
    """One-sided Mann–Whitney U p-value, corrected for autocorrelated steps.

    Consecutive steps of one run are not independent (a slow phase lasts several steps),
    which makes the plain test overconfident: with lag-one autocorrelation 0.5, unchanged
    runs reach p < 0.01 about 7% of the time. The normal approximation's z is shrunk by the
    variance inflation (1 + ρ) / (1 − ρ) of an AR(1) series, ρ the mean lag-one
    autocorrelation of the two samples (clipped to [0, 0.9]).
    """
    result = mannwhitneyu(
        current, baseline, alternative="greater" if greater else "less", method="asymptotic"
    )
    rho = (lag1_autocorrelation(current) + lag1_autocorrelation(baseline)) / 2
    rho = min(max(rho, 0.0), _MAX_AUTOCORRELATION)
    inflation = (1 + rho) / (1 - rho)
    z = float(norm.isf(float(result.pvalue)))
    return float(norm.sf(z / math.sqrt(inflation)))


def _clean(values: Sequence[float | None] | npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    array = np.asarray([np.nan if v is None else v for v in values], dtype=np.float64)
    return array[~np.isnan(array)]


def robust_spread(samples: npt.NDArray[np.float64]) -> float:
    """A standard deviation estimate that one stalled step cannot inflate (1.4826 × MAD)."""
    if samples.size < 2:
        return 0.0
    return float(_MAD_TO_SD * np.median(np.abs(samples - np.median(samples))))


def min_attainable_p(n_baseline: int, n_current: int) -> float:
    """The smallest one-sided exact Mann–Whitney p-value these sample sizes allow."""
    return 1.0 / math.comb(n_baseline + n_current, n_baseline)


@dataclass
class MetricJudgement:
    """The judgement of one metric; ``change`` is in the threshold's unit."""

    name: str
    metric: str
    baseline: float
    current: float
    change: float
    threshold: str
    unit: str
    bad_sign: int
    gated: bool
    status: str
    significant: bool | None
    p_value: float | None
    test: str
    n_baseline: int
    n_current: int
    history_runs: int = 0
    history_low: float | None = None
    history_high: float | None = None
    reasons: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "metric": self.metric,
            "baseline": _json_number(self.baseline),
            "current": _json_number(self.current),
            "change": _json_number(self.change),
            "unit": self.unit,
            "threshold": self.threshold,
            "gated": self.gated,
            "significant": self.significant,
            "p_value": _json_number(self.p_value),
            "test": self.test,
            "n_baseline": self.n_baseline,
            "n_current": self.n_current,
            "history": {
                "runs": self.history_runs,
                "low": _json_number(self.history_low),
                "high": _json_number(self.history_high),
            },
            "status": self.status,
            "reasons": self.reasons,
        }


def _json_number(value: float | None) -> float | None:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return float(value)


def judge_metric(
    rule: MetricRule,
    baseline_samples: Sequence[float | None] | npt.NDArray[np.float64],
    current_samples: Sequence[float | None] | npt.NDArray[np.float64],
    stats: Statistics,
    history_medians: Sequence[float] = (),
) -> MetricJudgement:
    """Judge one metric. ``history_medians``: per-run medians of the look-back baselines
    (nearest first, the compared baseline included); fewer than two means unknown spread."""
    base = _clean(baseline_samples)
    cur = _clean(current_samples)
    threshold = rule.threshold
    judgement = MetricJudgement(
        name=rule.label,
        metric=rule.metric,
        baseline=float(np.median(base)) if base.size else float("nan"),
        current=float(np.median(cur)) if cur.size else float("nan"),
        change=float("nan"),
        threshold=_signed_threshold(threshold, rule.bad_sign),
        unit=threshold.unit.value,
        bad_sign=rule.bad_sign,
        gated=rule.gate,
        status=PASS,
        significant=None,
        p_value=None,
        test="none",
        n_baseline=int(base.size),
        n_current=int(cur.size),
    )
    if base.size == 0 or cur.size == 0:
        judgement.status = NOT_AVAILABLE
        side = "baseline" if base.size == 0 else "current run"
        judgement.reasons.append(f"the {side} has no {rule.metric} samples")
        return judgement
    judgement.change = threshold.change(judgement.baseline, judgement.current)
    history = [h for h in history_medians if h is not None and not math.isnan(h)]
    judgement.history_runs = len(history)
    # With a look-back, the effect is judged against the centre of the recent runs, not
    # against whichever mode the nearest run happened to land in.
    reference = float(np.median(history)) if len(history) >= 2 else judgement.baseline
    bad_effect = threshold.exceeded_by(reference, judgement.current, rule.bad_sign)
    good_effect = threshold.exceeded_by(reference, judgement.current, -rule.bad_sign)
    if len(history) >= 2 and (bad_effect or good_effect):
        judgement.reasons.append(
            f"judged against the median of the last {len(history)} baselines "
            f"({_fmt(reference, rule)}): {_fmt_change(threshold, reference, judgement.current)}"
        )

    # Significance in whichever direction the effect points.
    direction = rule.bad_sign if not good_effect else -rule.bad_sign
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
        judgement.reasons.append(
            f"too few steps for a significance test ({base.size} baseline, {cur.size} "
            f"current; need {stats.min_steps} a side): decided on the effect alone"
        )
    significant = judgement.significant is not False

    within_history = False
    if len(history) >= 2:
        judgement.history_low, judgement.history_high = min(history), max(history)
        edge = judgement.history_high if direction > 0 else judgement.history_low
        # Beyond the spread means clearly beyond: topping the highest of k run medians by a
        # hair happens to 1 unchanged run in k + 1.
        beyond = threshold.change(edge, judgement.current) * direction
        within_history = beyond <= HISTORY_MARGIN * threshold.value
    elif bad_effect or good_effect:
        judgement.reasons.append("between-run spread unknown: only one baseline run")

    unstable = _unstable(base, judgement.baseline, threshold, stats)
    if unstable:
        # A noisy baseline hides small changes, not one far outside its own spread.
        far = abs(judgement.current - judgement.baseline) > UNSTABLE_OVERRIDE * robust_spread(base)
        if far and (bad_effect or good_effect):
            judgement.reasons.append(
                f"{unstable}, but the change is beyond {UNSTABLE_OVERRIDE:g}× its spread"
            )
            unstable = None
        else:
            judgement.reasons.append(unstable)
    if bad_effect or good_effect:
        if not significant:
            judgement.reasons.append(
                f"not significant (p={judgement.p_value:.3g} ≥ α={stats.alpha:g})"
            )
        if within_history:
            judgement.reasons.append(
                f"within the spread of the last {len(history)} baselines "
                f"({_fmt(judgement.history_low, rule)} – {_fmt(judgement.history_high, rule)})"
            )
    if unstable:
        judgement.status = UNSTABLE
    elif bad_effect and significant and not within_history:
        judgement.status = REGRESSION
    elif good_effect and significant and not within_history:
        judgement.status = IMPROVEMENT
    return judgement


def _unstable(
    base: npt.NDArray[np.float64], median: float, threshold: Threshold, stats: Statistics
) -> str | None:
    spread = robust_spread(base)
    if threshold.unit is Unit.POINTS:
        if spread > threshold.value:
            return (
                f"baseline too noisy to judge: spread {spread * 100:.2f}pt exceeds the "
                f"{threshold.value * 100:g}pt limit"
            )
        return None
    cv = spread / abs(median) if median else 0.0
    if cv > stats.max_cv:
        return f"baseline too noisy to judge: robust CV {cv:.1%} > {stats.max_cv:.0%}"
    return None


def _fmt_change(threshold: Threshold, reference: float, current: float) -> str:
    change = threshold.change(reference, current)
    if threshold.unit is Unit.RELATIVE:
        return f"{change * 100:+.1f}%"
    if threshold.unit is Unit.POINTS:
        return f"{change * 100:+.2f}pt"
    return f"{change / 1e3:+.3f} ms"


def _signed_threshold(threshold: Threshold, bad_sign: int) -> str:
    text = threshold.text.lstrip("+-")
    return ("+" if bad_sign > 0 else "-") + text


def _fmt(value: float | None, rule: MetricRule) -> str:
    if value is None:
        return "n/a"
    if rule.metric.endswith("_us"):
        return f"{value / 1e3:.3f} ms"
    return f"{value * 100:.2f}%"


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

    def as_dict(self) -> dict[str, Any]:
        return {k: _json_number(v) if isinstance(v, float) else v for k, v in vars(self).items()}


def operator_deltas(
    baseline_ops: Sequence[dict[str, Any]],
    current_ops: Sequence[dict[str, Any]],
    step_time_delta_us: float,
    rule: OperatorRule,
    alpha: float,
) -> list[OperatorDelta]:
    """Rank operators by how much of the step-time change they explain.

    Each operator dict has ``op_type, core, category, calls_per_step, time_per_step_us,
    share`` and optionally ``samples_us`` (device time per step). Operators are gated only
    when ``rule.gate``: then an operator regresses when its current share is at least
    ``rule.min_share``, its time per step rose past ``rule.max_increase``, and (with
    samples) a Mann–Whitney test survives Holm's correction over all gated operators.
    """

    def key(op: dict[str, Any]) -> tuple[str, str]:
        return (str(op["op_type"]), str(op["core"]))

    base = {key(op): op for op in baseline_ops}
    cur = {key(op): op for op in current_ops}
    deltas: list[tuple[OperatorDelta, dict[str, Any] | None, dict[str, Any] | None]] = []
    for k in list(cur) + [k for k in base if k not in cur]:
        b, c = base.get(k), cur.get(k)
        b_time = float(b["time_per_step_us"]) if b else 0.0
        c_time = float(c["time_per_step_us"]) if c else 0.0
        b_calls = float(b["calls_per_step"]) if b else 0.0
        c_calls = float(c["calls_per_step"]) if c else 0.0
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
                    current_share=float(c["share"]) if c and c.get("share") is not None else 0.0,
                ),
                b,
                c,
            )
        )
    if rule.gate:
        _gate_operators(deltas, rule, alpha)
    ordered = sorted((d for d, _, _ in deltas), key=lambda d: (-abs(d.delta_us), d.op_type))
    return ordered


def _gate_operators(
    deltas: list[tuple[OperatorDelta, dict[str, Any] | None, dict[str, Any] | None]],
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
        b_samples, c_samples = _clean(b.get("samples_us") or []), _clean(c.get("samples_us") or [])
        if b_samples.size and c_samples.size:
            p = float(mannwhitneyu(c_samples, b_samples, alternative="greater").pvalue)
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
_EXPLAIN_MIN_FRACTION = 0.1
_EXPLAIN_MIN_SHARE = 0.05
_BREAKDOWN_WORDS = {
    "computing_us": "computing",
    "comm_not_overlapped_us": "communication (not overlapped)",
    "free_us": "free (device idle)",
    "preparing_us": "preparing",
}


@dataclass
class Comparison:
    """The comparison of one benchmark's current run with its baseline."""

    benchmark: str
    verdict: str
    baseline: dict[str, Any]  # commit, how, distance, path, env
    current: dict[str, Any]  # commit, path, env
    metrics: list[MetricJudgement] = field(default_factory=list)
    operators: list[OperatorDelta] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # Median change of each breakdown column (µs per step, profiled steps).
    breakdown_delta_us: dict[str, float] = field(default_factory=dict)

    def as_dict(self, top_operators: int | None = None) -> dict[str, Any]:
        operators = self.operators if top_operators is None else self.operators[:top_operators]
        return {
            "benchmark": self.benchmark,
            "verdict": self.verdict,
            "baseline": self.baseline,
            "current": self.current,
            "metrics": [m.as_dict() for m in self.metrics],
            "operators": [o.as_dict() for o in operators],
            "warnings": self.warnings,
            "notes": self.notes,
            "breakdown_delta_us": self.breakdown_delta_us,
            "summary": self.summary_lines(),
        }

    def baseline_label(self) -> str:
        commit = self.baseline.get("commit")
        label = str(commit)[:12] if commit else str(self.baseline.get("path", "baseline"))
        how = self.baseline.get("how")
        distance = self.baseline.get("distance")
        if how and distance is not None:
            back = "1 commit back" if distance == 1 else f"{distance} commits back"
            return f"{label} ({how}, {back})"
        return f"{label} ({how})" if how else label

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
        return [o for o in worse if o.delta_us >= _EXPLAIN_MIN_FRACTION * largest][:limit]

    def breakdown_explanation(self) -> str | None:
        """Where the step's time went, when the operators do not say: e.g. "free (idle)
        +5.10 ms/step" for a host-bound gap no device operator shows."""
        moved = sorted(
            ((abs(delta), name, delta) for name, delta in self.breakdown_delta_us.items()),
            reverse=True,
        )
        parts = [
            f"{_BREAKDOWN_WORDS[name]} {delta / 1e3:+.2f} ms/step"
            for size, name, delta in moved[:2]
            if size >= _EXPLAIN_MIN_FRACTION * moved[0][0] and size > 0
        ]
        return ", ".join(parts) if parts else None

    def summary_lines(self) -> list[str]:
        """One self-explanatory line per regressed or unstable metric; improvements are
        listed only when nothing regressed (a slower kernel also "improves" utilization)."""
        shown = (
            (REGRESSION, UNSTABLE)
            if self.verdict == REGRESSION
            else (REGRESSION, IMPROVEMENT, UNSTABLE)
        )
        lines = []
        for m in self.metrics:
            if not m.gated or m.status not in shown:
                continue
            what = {
                REGRESSION: "regressed",
                IMPROVEMENT: "improved",
                UNSTABLE: "is unstable",
            }[m.status]
            line = (
                f"{self.benchmark}: {m.name} {what}: {format_value(m.metric, m.baseline)} → "
                f"{format_value(m.metric, m.current)} ({format_change(m)}, limit {m.threshold})"
                f" vs baseline {self.baseline_label()}"
            )
            if m.p_value is not None:
                line += f"; p={m.p_value:.2g}"
            if m.status == UNSTABLE:
                line += "; " + "; ".join(m.reasons)
            if m.status == REGRESSION:
                culprits = self.explaining_operators(m.metric)
                if culprits:
                    line += "; explained by " + ", ".join(describe_operator(o) for o in culprits)
                where = self.breakdown_explanation()
                if where and m.metric in ("step_time_us", "utilization", "free_ratio"):
                    line += f"; per step: {where}"
            lines.append(line)
        lines.extend(
            f"{self.benchmark}: operator {o.op_type} [{o.core}] regressed: "
            f"{o.baseline_time_per_step_us / 1e3:.3f} → {o.current_time_per_step_us / 1e3:.3f} "
            f"ms/step (p={o.p_value:.2g}, Holm-corrected)"
            for o in self.operators
            if o.regression
        )
        return lines


def format_value(metric: str, value: float | None) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    if metric.endswith("_us"):
        return f"{value / 1e3:.3f} ms"
    return f"{value * 100:.2f}%"


def format_change(m: MetricJudgement) -> str:
    if m.change is None or math.isnan(m.change):
        return "n/a"
    if m.unit == Unit.RELATIVE.value:
        return f"{m.change * 100:+.1f}%"
    if m.unit == Unit.POINTS.value:
        return f"{m.change * 100:+.2f}pt"
    return f"{m.change / 1e3:+.3f} ms"


def describe_operator(o: OperatorDelta) -> str:
    text = f"{o.op_type} [{o.core}] {o.delta_us / 1e3:+.3f} ms/step"
    if o.status == "new":
        text += " (new operator)"
    elif o.status == "calls-changed":
        text += f" (calls/step {o.baseline_calls_per_step:g} → {o.current_calls_per_step:g})"
    if o.share_of_step_delta is not None and o.share_of_step_delta > 0:
        text += f", {min(o.share_of_step_delta, 9.99):.0%} of the step-time increase"
    return text


def sample_median(samples: Sequence[float | None]) -> float:
    """Median of per-step samples, ``None``/NaN left out; NaN when nothing is left."""
    clean = _clean(samples)
    return float(np.median(clean)) if clean.size else float("nan")


def compare_runs(
    baseline: dict[str, Any],
    current: dict[str, Any],
    *,
    metrics: Sequence[MetricRule],
    operators: OperatorRule,
    stats: Statistics,
    history: Sequence[dict[str, Any]] = (),
    baseline_info: dict[str, Any] | None = None,
    current_info: dict[str, Any] | None = None,
) -> Comparison:
    """Compare two run records (see :mod:`perfgate.analysis.record`).

    ``history``: look-back baseline records, nearest first, ``baseline`` included; their
    per-run medians estimate the between-run spread.
    """
    comparison = Comparison(
        benchmark=str(current.get("benchmark") or baseline.get("benchmark")),
        verdict=PASS,
        baseline=dict(baseline_info or {"commit": baseline.get("commit")}),
        current=dict(current_info or {"commit": current.get("commit")}),
    )
    hard, soft = fingerprint_differences(
        baseline.get("fingerprint", {}), current.get("fingerprint", {})
    )
    comparison.warnings.extend(f"environment differs (soft): {line}" for line in soft)
    base_samples, cur_samples = baseline.get("samples", {}), current.get("samples", {})
    for rule in metrics:
        if not rule.gate and not (base_samples.get(rule.metric) and cur_samples.get(rule.metric)):
            continue
        history_medians = [
            sample_median(h.get("samples", {}).get(rule.metric, [])) for h in history
        ]
        comparison.metrics.append(
            judge_metric(
                rule,
                base_samples.get(rule.metric, []),
                cur_samples.get(rule.metric, []),
                stats,
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
        for name in _BREAKDOWN_WORDS
        if not math.isnan(
            delta := sample_median(cur_samples.get(name, []))
            - sample_median(base_samples.get(name, []))
        )
    }
    comparison.operators = operator_deltas(
        baseline.get("operators", []),
        current.get("operators", []),
        step_delta if not math.isnan(step_delta) else 0.0,
        operators,
        stats.alpha,
    )
    gated = [m for m in comparison.metrics if m.gated]
    if hard:
        comparison.verdict = INCOMPARABLE
        comparison.warnings.extend(f"environment differs (hard): {line}" for line in hard)
        comparison.notes.append(
            "incomparable: the baseline was recorded in another environment; record one "
            "here with `perfgate baseline update` (or --perfgate-update)"
        )
    elif any(m.status == REGRESSION for m in gated) or any(
        o.regression for o in comparison.operators
    ):
        comparison.verdict = REGRESSION
    elif any(m.status == UNSTABLE for m in gated):
        comparison.verdict = UNSTABLE
    elif any(m.status == IMPROVEMENT for m in gated):
        comparison.verdict = IMPROVEMENT
        comparison.notes.append(
            "improvement beyond the threshold: the baseline is stale; record a new one "
            "on the main branch"
        )
    if gated and all(m.status == NOT_AVAILABLE for m in gated):
        comparison.verdict = ERROR
        comparison.notes.append("no gated metric could be computed from either side")
    return comparison


def _float(value: Any) -> float:
    return float("nan") if value is None else float(value)


def comparison_from_dict(data: dict[str, Any]) -> Comparison:
    """Rebuild a :class:`Comparison` from :meth:`Comparison.as_dict` (xdist workers hand
    their results to the controller as JSON)."""
    metrics = []
    for m in data.get("metrics", []):
        history = m.get("history") or {}
        metrics.append(
            MetricJudgement(
                name=m["name"],
                metric=m["metric"],
                baseline=_float(m.get("baseline")),
                current=_float(m.get("current")),
                change=_float(m.get("change")),
                threshold=m["threshold"],
                unit=m["unit"],
                bad_sign=1 if str(m["threshold"]).startswith("+") else -1,
                gated=bool(m["gated"]),
                status=m["status"],
                significant=m.get("significant"),
                p_value=m.get("p_value"),
                test=m.get("test", "none"),
                n_baseline=int(m.get("n_baseline", 0)),
                n_current=int(m.get("n_current", 0)),
                history_runs=int(history.get("runs", 0)),
                history_low=history.get("low"),
                history_high=history.get("high"),
                reasons=list(m.get("reasons", [])),
            )
        )
    operators = [
        OperatorDelta(
            op_type=str(o["op_type"]),
            core=str(o["core"]),
            category=str(o.get("category", "")),
            baseline_time_per_step_us=_float(o.get("baseline_time_per_step_us")),
            current_time_per_step_us=_float(o.get("current_time_per_step_us")),
            delta_us=_float(o.get("delta_us")),
            share_of_step_delta=o.get("share_of_step_delta"),
            baseline_calls_per_step=_float(o.get("baseline_calls_per_step")),
            current_calls_per_step=_float(o.get("current_calls_per_step")),
            status=str(o["status"]),
            current_share=_float(o.get("current_share")),
            gated=bool(o.get("gated", False)),
            p_value=o.get("p_value"),
            regression=bool(o.get("regression", False)),
        )
        for o in data.get("operators", [])
    ]
    return Comparison(
        benchmark=data["benchmark"],
        verdict=data["verdict"],
        baseline=dict(data.get("baseline", {})),
        current=dict(data.get("current", {})),
        metrics=metrics,
        operators=operators,
        warnings=list(data.get("warnings", [])),
        notes=list(data.get("notes", [])),
        breakdown_delta_us=dict(data.get("breakdown_delta_us", {})),
    )

"""The decision rule (effect AND significance AND outside the between-run spread), on
controlled samples whose answer is known."""

from __future__ import annotations

import numpy as np
import pytest

from perfgate.analysis.compare import (
    compare_runs,
    fingerprint_differences,
    operator_deltas,
)
from perfgate.analysis.statistics import min_attainable_p
from perfgate.report.explain import metric_reasons, summary_lines
from perfgate.rules import Rules, Statistics, default_rules
from perfgate.verdict import MetricStatus, Verdict

RULES = default_rules()
STEP = RULES.metrics["step_time"]
UTIL = RULES.metrics["utilization"]
STATS = Statistics()
STEP_ONLY = Rules(metrics={"step_time": STEP}, operators=RULES.operators, statistics=STATS)
PASS, REGRESSION, IMPROVEMENT, UNSTABLE = (
    MetricStatus.PASS,
    MetricStatus.REGRESSION,
    MetricStatus.IMPROVEMENT,
    MetricStatus.UNSTABLE,
)
INCOMPARABLE = Verdict.INCOMPARABLE


def steps(median_ms: float, n: int = 20, noise: float = 0.01, seed: int = 0) -> list[float]:
    rng = np.random.default_rng(seed)
    return list(median_ms * 1e3 * np.exp(rng.normal(0.0, noise, n)))


def judge(base: list[float], cur: list[float], history: tuple[float, ...] = ()) -> object:
    from perfgate.analysis.compare import judge_metric

    return judge_metric(STEP, base, cur, STATS, history)


def test_same_distribution_passes() -> None:
    j = judge(steps(100, seed=1), steps(100, seed=2))
    assert j.status == PASS
    assert abs(j.change) < 0.01


def test_eight_percent_slower_with_enough_steps_is_a_significant_regression() -> None:
    j = judge(steps(100, seed=1), steps(108, seed=2))
    assert j.status == REGRESSION
    assert j.significant is True
    assert j.p_value is not None and j.p_value < 1e-6
    assert j.change == pytest.approx(0.08, abs=0.01)
    assert j.threshold == "+5%"
    assert j.test == "mann-whitney-u"


def test_small_change_below_threshold_passes_even_when_significant() -> None:
    j = judge(steps(100, noise=0.001, seed=1), steps(103, noise=0.001, seed=2))
    assert j.significant is True
    assert j.status == PASS


def test_large_but_insignificant_change_is_not_a_regression() -> None:
    # Baseline and current overlap heavily: medians 6% apart, ranks mixed.
    base = [100e3, 150e3, 90e3, 140e3, 95e3, 160e3, 85e3, 150e3, 100e3, 145e3, 90e3, 150e3]
    cur = [v * 1.06 for v in reversed(base)]
    j = judge(base, cur)
    assert j.change > 0.05
    assert j.significant is False
    assert j.status != REGRESSION


def test_too_few_steps_decides_on_the_effect_and_says_so() -> None:
    j = judge([100e3, 101e3, 99e3], [110e3, 111e3, 109e3])
    assert j.test == "effect-only"
    assert j.status == REGRESSION
    assert any("too few steps for a significance test" in r for r in metric_reasons(j))
    # 3 vs 3 samples cannot reach α = 0.01: the smallest one-sided p is 1/20.
    assert min_attainable_p(3, 3) == pytest.approx(0.05)


def test_inside_the_between_run_spread_of_recent_baselines_is_not_a_regression() -> None:
    # The device sometimes lands in a 6% slower mode for a whole run: history knows it.
    j = judge(steps(100, seed=1), steps(106.5, seed=2), history=(100e3, 106.8e3, 100.2e3))
    assert j.change > 0.05 and j.significant
    assert j.status == PASS
    assert any("within the spread of the last 3 baselines" in r for r in metric_reasons(j))


def test_beyond_every_recent_baseline_is_a_regression() -> None:
    j = judge(steps(100, seed=1), steps(112, seed=2), history=(100e3, 106.8e3, 100.2e3))
    assert j.status == REGRESSION


def test_a_single_baseline_says_the_between_run_spread_is_unknown() -> None:
    j = judge(steps(100, seed=1), steps(108, seed=2), history=(100e3,))
    assert "between-run spread unknown: only one baseline run" in metric_reasons(j)


def test_noisy_baseline_is_unstable_not_a_regression() -> None:
    j = judge(steps(100, noise=0.3, seed=1), steps(130, noise=0.3, seed=2))
    assert j.status == UNSTABLE
    assert any("baseline too noisy to judge" in r for r in metric_reasons(j))


def test_faster_run_is_an_improvement() -> None:
    j = judge(steps(100, seed=1), steps(90, seed=2))
    assert j.status == IMPROVEMENT


def test_utilization_drop_in_points_is_judged_downwards() -> None:
    from perfgate.analysis.compare import judge_metric

    rng = np.random.default_rng(3)
    base = list(0.60 + rng.normal(0, 0.005, 20))
    cur = list(0.55 + rng.normal(0, 0.005, 20))
    j = judge_metric(UTIL, base, cur, STATS)
    assert j.status == REGRESSION
    assert j.change == pytest.approx(-0.05, abs=0.005)
    assert j.threshold == "-3pt"


def test_operators_are_ranked_by_their_share_of_the_step_time_increase() -> None:
    base = [
        {
            "op_type": "MatMulV2",
            "core": "AI_CORE",
            "category": "compute",
            "calls_per_step": 8,
            "time_per_step_us": 1000.0,
            "share": 0.5,
        },
        {
            "op_type": "Add",
            "core": "AI_VECTOR_CORE",
            "category": "compute",
            "calls_per_step": 4,
            "time_per_step_us": 100.0,
            "share": 0.05,
        },
    ]
    cur = [
        {
            "op_type": "MatMulV2",
            "core": "AI_CORE",
            "category": "compute",
            "calls_per_step": 8,
            "time_per_step_us": 1900.0,
            "share": 0.6,
        },
        {
            "op_type": "TransData",
            "core": "AI_CORE",
            "category": "compute",
            "calls_per_step": 2,
            "time_per_step_us": 300.0,
            "share": 0.1,
        },
    ]
    deltas = operator_deltas(base, cur, 1200.0, RULES.operators, 0.01)
    assert [(d.op_type, d.status) for d in deltas] == [
        ("MatMulV2", "changed"),
        ("TransData", "new"),
        ("Add", "vanished"),
    ]
    assert deltas[0].delta_us == 900.0
    assert deltas[0].share_of_step_delta == pytest.approx(0.75)
    assert not any(d.gated for d in deltas)  # operator gating is off by default


def test_operator_gating_corrects_for_the_number_of_operators() -> None:
    from dataclasses import replace

    rule = replace(RULES.operators, gate=True)
    rng = np.random.default_rng(5)
    base, cur = [], []
    for i in range(50):  # 50 operators, none changed: noise only
        b = list(100 + rng.normal(0, 5, 20))
        c = list(100 + rng.normal(0, 5, 20))
        for side, samples in ((base, b), (cur, c)):
            side.append(
                {
                    "op_type": f"Op{i}",
                    "core": "AI_CORE",
                    "category": "compute",
                    "calls_per_step": 1,
                    "time_per_step_us": float(np.mean(samples)),
                    "share": 0.02,
                    "samples_us": samples,
                }
            )
    # One operator truly 30% slower.
    cur[0] = {
        **cur[0],
        "samples_us": [v * 1.3 for v in cur[0]["samples_us"]],
        "time_per_step_us": cur[0]["time_per_step_us"] * 1.3,
    }
    deltas = operator_deltas(base, cur, 30.0, rule, 0.01)
    assert [d.op_type for d in deltas if d.regression] == ["Op0"]


def test_hard_fingerprint_difference_makes_runs_incomparable() -> None:
    base = {
        "benchmark": "b",
        "fingerprint": {"device": "Ascend910B4", "cann_version": "8.0"},
        "samples": {"step_time_us": steps(100)},
    }
    cur = {
        "benchmark": "b",
        "fingerprint": {"device": "Ascend910B3", "cann_version": "8.3"},
        "samples": {"step_time_us": steps(150)},
    }
    result = compare_runs(base, cur, STEP_ONLY)
    assert result.verdict == INCOMPARABLE
    assert "environment differs (hard): device: Ascend910B4 → Ascend910B3" in result.warnings
    assert "environment differs (soft): cann_version: 8.0 → 8.3" in result.warnings
    assert fingerprint_differences({"python": "3.10"}, {"python": "3.11"}) == (
        [],
        ["python: 3.10 → 3.11"],
    )


def test_regression_summary_line_names_benchmark_metric_change_limit_and_baseline() -> None:
    base = {
        "benchmark": "bert",
        "samples": {"step_time_us": steps(100)},
        "operators": [
            {
                "op_type": "MatMulV2",
                "core": "AI_CORE",
                "category": "compute",
                "calls_per_step": 8,
                "time_per_step_us": 40000.0,
                "share": 0.4,
            }
        ],
    }
    cur = {
        "benchmark": "bert",
        "samples": {"step_time_us": steps(110, seed=9)},
        "operators": [
            {
                "op_type": "MatMulV2",
                "core": "AI_CORE",
                "category": "compute",
                "calls_per_step": 8,
                "time_per_step_us": 49000.0,
                "share": 0.45,
            }
        ],
    }
    result = compare_runs(
        base,
        cur,
        STEP_ONLY,
        baseline_info={"commit": "a" * 40, "how": "merge-base of HEAD and main"},
    )
    assert result.verdict == REGRESSION
    [line] = summary_lines(result)
    assert line == (
        "bert: step_time regressed: 99.825 ms → 110.272 ms (+10.5%, limit +5%) vs baseline "
        "aaaaaaaaaaaa (merge-base of HEAD and main); p=2.4e-07; explained by MatMulV2 "
        "[AI_CORE] +9.000 ms/step, 86% of the step-time increase"
    )


def test_autocorrelated_steps_make_the_test_more_cautious() -> None:
    from perfgate.analysis.statistics import lag1_autocorrelation, mann_whitney_p

    rng = np.random.default_rng(11)
    base = rng.normal(100, 1, 20)
    cur = rng.normal(101.5, 1, 20)
    independent = mann_whitney_p(cur, base, greater=True)
    # The same values sorted into slow and fast phases: strongly autocorrelated.
    phased_cur, phased_base = np.sort(cur), np.sort(base)
    assert lag1_autocorrelation(phased_cur) > 0.8
    assert mann_whitney_p(phased_cur, phased_base, greater=True) > independent * 10
    assert lag1_autocorrelation(np.array([1.0, 2.0])) == 0.0


def test_topping_the_slowest_recent_run_by_a_hair_is_still_within_the_spread() -> None:
    # Current is just above the slowest of the recent runs (by less than 0.3 × 5%).
    j = judge(steps(100, seed=1), steps(107.5, seed=2), history=(100e3, 106.8e3, 100.2e3))
    assert j.status == PASS
    assert any("within the spread of the last 3 baselines" in r for r in metric_reasons(j))


def test_a_noisy_baseline_does_not_hide_a_change_far_outside_its_spread() -> None:
    j = judge(steps(100, noise=0.3, seed=1), steps(400, noise=0.02, seed=2))
    assert j.status == REGRESSION
    assert any("but the change is beyond 4× its spread" in r for r in metric_reasons(j))


def test_an_idle_gap_is_explained_by_free_time_not_by_noise_operators() -> None:
    def record(free_ms: float, seed: int) -> dict[str, object]:
        step = steps(10 + free_ms, seed=seed)
        return {
            "benchmark": "b",
            "samples": {
                "step_time_us": step,
                "computing_us": [10e3] * 20,
                "comm_not_overlapped_us": [0.0] * 20,
                "free_us": [s - 10e3 for s in step],
                "preparing_us": [0.0] * 20,
            },
            "operators": [
                {
                    "op_type": "aten::linear",
                    "core": "cpu",
                    "category": "compute",
                    "calls_per_step": 1,
                    "time_per_step_us": 9000.0 + seed,
                    "share": 0.9,
                },
            ],
        }

    result = compare_runs(record(0.5, 1), record(5.5, 2), STEP_ONLY)
    [line] = summary_lines(result)
    assert "; per step: free (device idle) +4.9" in line
    assert "explained by" not in line  # aten::linear's +0.001 ms is noise, not a cause
    assert result.breakdown_delta_us["computing_us"] == 0.0

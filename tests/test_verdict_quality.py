"""benchmarks/verdict_quality.py: the simulation's building blocks, its faithfulness to the
pytest plugin's loop, and the issue's verdict-quality targets asserted on a small run of it
(perfgate's real ``judge_rounds`` / ``look_back``).

Sampling slack: ``TRIALS`` trials a cell. A false-alarm target holds unless the Wilson 95%
interval lies wholly above 1%; a detection target unless it lies wholly below 95%; "always a
regression" means every trial. Where the rule misses a target the assertion stays, marked
``xfail`` with the number the full run measured (docs/verdict-quality.md): strict where the
miss is clear, not strict where the rate lies near the target.
"""

from __future__ import annotations

import importlib.util
import math
import os
import pickle
import sys
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import numpy as np
import pytest

from perfgate.analysis.compare import Comparison, MetricJudgement, compare_runs
from perfgate.analysis.statistics import spending_pocock
from perfgate.pytest_plugin import fixture
from perfgate.records import merge_processes
from perfgate.rules import Rules, default_rules
from perfgate.verdict import MetricStatus, Verdict

ROOT = Path(__file__).resolve().parents[1]
TRIALS = 100


def _load() -> ModuleType:
    path = ROOT / "benchmarks" / "verdict_quality.py"
    spec = importlib.util.spec_from_file_location("verdict_quality", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve their module by name
    spec.loader.exec_module(module)
    return module


vq = _load()
SCENARIOS = [s.name for s in vq.SCENARIOS]


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The simulation, run once a test session: under pytest-xdist each worker that took a
    test of this file ran all of it again (50 s apiece on a 2-vCPU runner)."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return vq.run(trials=TRIALS, seed=vq.SEED, jobs=2, guards=False)
    import fcntl  # xdist's workers: POSIX here

    session = tmp_path_factory.getbasetemp().parent  # the workers' common folder
    cache = session / f"verdict-quality-{TRIALS}.pickle"
    with open(session / "verdict-quality.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # the other worker waits for the first one's run
        if cache.exists():
            return pickle.loads(cache.read_bytes())
        computed = vq.run(trials=TRIALS, seed=vq.SEED, jobs=2, guards=False)
        cache.write_bytes(pickle.dumps(computed))
        return computed


# --- the noise model ------------------------------------------------------------------


def test_ar1_noise_has_the_asked_spread_and_autocorrelation() -> None:
    noise = vq.ar1_lognormal(np.random.default_rng(1), (4000, 20), sigma=0.02, phi=0.5)
    logs = np.log(noise)
    assert logs.std() == pytest.approx(0.02, rel=0.03)
    lag1 = np.corrcoef(logs[:, :-1].ravel(), logs[:, 1:].ravel())[0, 1]
    assert lag1 == pytest.approx(0.5, abs=0.03)
    # Stationary from the first step: the first step is as spread as the last.
    assert logs[:, 0].std() == pytest.approx(logs[:, -1].std(), rel=0.1)


def test_rounds_carry_their_own_effect_and_stalls() -> None:
    scenario = vq.replace(
        vq.QUIET, sigma_step=0.0, sigma_round=0.0, step_stall=0.1, round_stall=0.2
    )
    steps = vq.round_steps(np.random.default_rng(2), (2000, 5), scenario)
    assert steps.shape == (2000, 5, vq.STEPS)
    stalled_rounds = (steps.min(axis=-1) > 1.0).mean()  # every step of the round slowed
    assert stalled_rounds == pytest.approx(0.2, abs=0.02)
    assert steps.max() <= 5.0 * 3.0
    plain = vq.replace(vq.QUIET, sigma_step=0.0, sigma_round=0.03)
    rounds = np.log(vq.round_steps(np.random.default_rng(3), (20000,), plain)[:, 0])
    assert rounds.std() == pytest.approx(0.03, rel=0.05)


def test_bimodal_processes_land_in_one_of_two_modes() -> None:
    scenario = vq.replace(vq.QUIET, tau=0.0, mode_gap=0.06)
    levels = vq.process_levels(np.random.default_rng(4), (10000,), scenario)
    assert set(np.round(np.exp(np.unique(levels)), 6)) == {1.0, 1.06}
    assert (levels > 0).mean() == pytest.approx(0.5, abs=0.02)


def test_store_draws_shift_only_the_current_run_and_place_the_ancestors() -> None:
    scenario = next(s for s in vq.SCENARIOS if s.name == "step changes")
    first = vq.draw_store(scenario, 50, np.random.default_rng(5), level=1.08)
    again = vq.draw_store(scenario, 50, np.random.default_rng(5))
    stats = vq.STATISTICS
    assert first.baselines.shape == (50, stats.lookback, stats.processes, stats.max_rounds)
    assert first.current.shape == (50, stats.max_rounds)
    np.testing.assert_array_equal(first.baselines, again.baselines)
    np.testing.assert_allclose(first.current, again.current + math.log(1.08))
    np.testing.assert_allclose(first.current_steps, again.current_steps * 1.08)
    centres = first.baselines.mean(axis=(0, 2, 3))
    expected = np.log([1.0, vq.LEVEL_1024 / vq.LEVEL_512] + [vq.LEVEL_256 / vq.LEVEL_512] * 6)
    np.testing.assert_allclose(centres, expected, atol=0.01)
    assert first.baseline_steps.shape == (50, stats.processes * stats.rounds * vq.STEPS)


def test_ab_sessions_run_abba_and_drift_cancels_in_the_pairs() -> None:
    base, head = vq.ab_order(4)
    assert base.tolist() == [0, 3, 4, 7] and head.tolist() == [1, 2, 5, 6]
    # Only a drift within the session: ABBA pairs cancel it in the mean (a strong one
    # still widens the pairs' spread: unstable, never an alarm).
    for drift, allowed in ((0.1, {"pass"}), (0.5, {"pass", "unstable"})):
        drifting = vq.replace(vq.QUIET, sigma_step=0.005, tau=0.0, drift=drift)
        draws = vq.draw_ab(drifting, 40, np.random.default_rng(6), pairs=6)
        assert {vq.judge_ab(draws, i) for i in range(draws.trials)} <= allowed
    shifted = vq.draw_ab(vq.QUIET, 20, np.random.default_rng(7), level=1.08)
    assert {vq.judge_ab(shifted, i) for i in range(20)} == {MetricStatus.REGRESSION.value}
    assert shifted.first(3).base.shape == (20, 3, vq.STATISTICS.rounds)


# --- faithful to the plugin -----------------------------------------------------------


def _record(values: np.ndarray, process: int = 0) -> dict[str, Any]:
    """A run record whose timed rounds have the given round medians (µs, 3 steps each)."""
    steps, rounds, processes = [], [], []
    for index, value in enumerate(values):
        steps += [value * 0.99, value, value * 1.01]
        rounds += [float(index)] * 3
        processes += [float(process)] * 3
    return {
        "benchmark": "b",
        "commit": "c",
        "samples": {},
        "operators": [],
        "timing": {"step_time_us": steps, "round": rounds, "process": processes},
    }


def test_baseline_rounds_follow_the_plugins_noise_loop() -> None:
    stats = vq.STATISTICS
    rng = np.random.default_rng(8)
    for spread in (0.01, 0.08, 0.15, 0.4):
        rounds = spread * rng.standard_normal((20, stats.processes, stats.max_rounds))
        counts = vq.recorded_rounds(rounds, stats)
        for trial in range(20):
            first = rounds[trial, 0]
            measured = stats.rounds
            while True:
                noise = fixture._round_noise(_record(np.exp(first[:measured])))  # type: ignore[arg-type]
                if noise is None or noise <= stats.max_cv or measured >= stats.max_rounds:
                    break
                measured += stats.rounds
            assert counts[trial].tolist() == [measured] + [stats.rounds] * (stats.processes - 1)


def test_looks_are_the_plugins_looks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Drive ``Benchmark._gate`` with a store that stays inconclusive: the looks it takes
    (rounds, α, final) are the simulation's."""
    import perfgate.gate

    seen: list[tuple[int, Any]] = []
    record = _record(np.full(5, 100.0))

    def inconclusive(currents: Any, settings: Any, lookup: Any, **kwargs: Any) -> Any:
        rounds = len(set(currents[0]["timing"]["round"]))
        seen.append((rounds, kwargs["look"]))
        judgement = MetricJudgement.__new__(MetricJudgement)
        judgement.gated, judgement.inconclusive = True, True
        return [Comparison("b", Verdict.PASS, {}, {}, metrics=[judgement])]

    def more_rounds() -> Any:
        count = len(set(record["timing"]["round"]))
        record.update(_record(np.full(count + 5, 100.0)))
        return record

    monkeypatch.setattr(perfgate.gate, "gate_against_store", inconclusive)
    bench = fixture.Benchmark.__new__(fixture.Benchmark)
    bench.name = "b"
    bench.rules = Rules(metrics=default_rules().metrics, operators=default_rules().operators)
    bench.session = SimpleNamespace(  # type: ignore[assignment]
        settings=None, rootdir=ROOT, baseline_ref=None, strict=False
    )
    bench._gate(record, more_rounds)  # type: ignore[arg-type]
    assert seen == vq.looks()
    assert [rounds for rounds, _ in seen] == [5, 10, 15]
    assert sum(look.alpha for _, look in seen) == pytest.approx(vq.STATISTICS.alpha)
    assert seen[0][1].alpha == pytest.approx(spending_pocock(0.01, 1 / 3))


def test_a_look_judges_as_compare_runs_does() -> None:
    """The simulation's shortcut (round values straight into ``judge_rounds`` with the
    sessions ``look_back`` keeps) gives compare_runs's verdict on the same records."""
    scenario = next(s for s in vq.SCENARIOS if s.name == "step changes")
    stats = vq.STATISTICS
    for level in (1.0, 1.08, vq.LEVEL_1024 / vq.LEVEL_512):
        draws = vq.draw_store(scenario, 8, np.random.default_rng(9), level=level)
        counts = vq.recorded_rounds(draws.baselines)
        for trial in range(draws.trials):
            sessions = [
                vq.baseline_side(draws.baselines[trial, s], counts[trial, s])
                for s in range(stats.lookback)
            ]
            records = []
            for session in sessions:
                parts = [
                    _record(np.exp(session.values[session.processes == p]), int(p))
                    for p in np.unique(session.processes)
                ]
                merged = merge_processes(parts[0], parts[1:])  # type: ignore[arg-type]
                records.append(merged)
            for rounds, look in vq.looks():
                current = _record(np.exp(draws.current[trial, :rounds]))
                comparison = compare_runs(
                    records[0],
                    current,  # type: ignore[arg-type]
                    default_rules(),
                    history=records,
                    look=look,
                )
                [step] = [m for m in comparison.metrics if m.metric == "step_time_us"]
                kept = vq.look_back(sessions, vq.step_time_rule(), stats, log=True)
                ours = vq.gate(sessions, kept, draws.current[trial], stats, [(rounds, look)])
                assert ours.status == step.status.value


# --- the anchor rules on samples checkable by eye -------------------------------------


def test_anchor_rules_on_hand_built_samples() -> None:
    base = np.asarray([[100.0 + i * 0.1 for i in range(20)]])  # 100.0 … 101.9
    up6 = base * 1.06  # disjoint samples, +6%
    assert vq.pytest_benchmark_rule(up6, base)[0]
    assert vq.github_action_benchmark_rule(up6, base, 1.05)[0]
    assert not vq.github_action_benchmark_rule(up6, base)[0]  # 200% by default
    assert vq.asv_rule(up6, base, 1.05)[0]  # p ≈ 7e-8 < 0.002
    assert not vq.asv_rule(up6, base)[0]  # 1.06 < its default factor 1.1
    # One stalled step ×3 moves the mean 10%, the median and the ranks hardly at all.
    stalled = base.copy()
    stalled[0, -1] *= 3
    assert vq.pytest_benchmark_rule(stalled, base)[0]
    assert not vq.asv_rule(stalled, base, 1.05)[0]


def test_unknown_scenarios_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown scenarios"):
        vq.run(trials=10, scenarios=("no such scenario",))


def test_wilson_interval() -> None:
    lo, hi = vq.wilson(0, 100)
    assert lo == 0.0 and 0.03 < hi < 0.04
    lo, hi = vq.wilson(20, 2000)
    assert lo < 0.01 < hi and hi - lo < 0.01


# --- the targets, on the real rule ----------------------------------------------------

# The full run's misses (docs/verdict-quality.md), by (mode, scenario): the reason, and
# whether a run of TRIALS trials misses surely (strict) or only may (a rate near the
# target, where the small run's interval can land either side).
Misses = dict[tuple[str, str], tuple[str, bool]]
FALSE_ALARM_MISSES: Misses = {
    ("store-8", "drift 3%"): ("1.1% (95% interval 0.6%-2.0%)", False),
    ("store-8", "measured quiet"): ("1.2% (0.7%-2.1%)", False),
}
DETECTION_MISSES: Misses = {
    ("store-1", "noise 5%"): (
        "0.0%: one baseline session cannot measure the noise between sessions, so the "
        "assumed 20% (statistics.session_noise) stands in and +8% stays unstable; "
        "look-back 8: 97.0%, A/B: 99.9%",
        True,
    ),
}
GROSS_MISSES: Misses = {
    ("store-1", "heavy load"): ("99.6%: 0.4% unstable at τ 20% and 10% stalled rounds", False),
}
EXTRA_MISSES: Misses = {}


def _cases(misses: Misses, modes: list[str], scenarios: list[str]) -> list[Any]:
    cases = []
    for mode in modes:
        for name in scenarios:
            marks = []
            if (mode, name) in misses:
                reason, strict = misses[(mode, name)]
                marks.append(pytest.mark.xfail(strict=strict, reason=reason))
            cases.append(pytest.param(mode, name, marks=marks))
    return cases


MODES = [m.key for m in vq.MODES]


@pytest.mark.parametrize(("mode", "scenario"), _cases(FALSE_ALARM_MISSES, MODES, SCENARIOS))
def test_false_alarms_at_most_one_percent(results: Any, mode: str, scenario: str) -> None:
    lo, _ = results.interval(scenario, vq.NULL, mode)
    assert lo <= vq.FALSE_ALARM_TARGET


DETECTION_SCENARIOS = [s.name for s in vq.SCENARIOS if s.detection_target]


@pytest.mark.parametrize(("mode", "scenario"), _cases(DETECTION_MISSES, MODES, DETECTION_SCENARIOS))
def test_detects_a_true_8_percent_rise(results: Any, mode: str, scenario: str) -> None:
    _, hi = results.interval(scenario, vq.SHIFT, mode)
    assert hi >= vq.DETECTION_TARGET


@pytest.mark.parametrize(("mode", "scenario"), _cases(GROSS_MISSES, MODES, SCENARIOS))
def test_a_4x_slower_step_is_always_a_regression(results: Any, mode: str, scenario: str) -> None:
    assert results.rate(scenario, vq.GROSS, mode) == 1.0


EXTRA = [(s.name, extra) for s in vq.SCENARIOS for extra, _ in s.extra]


@pytest.mark.parametrize(
    ("mode", "scenario"), _cases(EXTRA_MISSES, ["store-1", "store-8"], [s for s, _ in EXTRA])
)
def test_step_changes_of_the_look_back_never_hide_a_return_to_slower_code(
    results: Any, mode: str, scenario: str
) -> None:
    for name, extra in EXTRA:
        if name == scenario:
            assert results.rate(scenario, extra, mode) == 1.0


def test_unstable_is_never_an_alarm_and_rounds_are_counted(results: Any) -> None:
    for name in SCENARIOS:
        for mode in MODES:
            row = results.tally(name, vq.NULL, mode)
            assert row["regression"] + row["unstable"] + row["improvement"] <= row["trials"]
            rounds = results.mean_rounds(name, vq.NULL, mode)
            if mode == "ab":
                assert rounds == 2 * vq.AB_PAIRS * vq.STATISTICS.rounds
            else:
                assert vq.STATISTICS.rounds <= rounds <= vq.STATISTICS.max_rounds


def test_the_anchors_behave_as_documented(results: Any) -> None:
    # github-action-benchmark's 200% never sees +8%; asv's default factor 1.1 rarely.
    assert results.rate("quiet", vq.SHIFT, "gab-200") == 0.0
    assert results.rate("quiet", vq.SHIFT, "asv-1.1") < 0.2
    # Mean-based rules at 5% alarm on stalled steps; asv's medians and ranks do not.
    assert results.rate("stalls", vq.NULL, "pytest-benchmark") > 0.05
    assert results.rate("stalls", vq.NULL, "asv-1.05") < 0.05
    # Process noise the anchors cannot see: they alarm on unchanged code.
    assert results.rate("process 5%", vq.NULL, "asv-1.05") > 0.05


# --- the report -----------------------------------------------------------------------


def test_report_has_every_mode_the_anchors_and_the_targets(results: Any) -> None:
    report = vq.markdown_report(results)
    for mode in vq.MODES:
        assert f"**perfgate, {mode.label}**" in report
    for _, label, _ in vq.ANCHORS:
        assert label in report
    assert f"seed {vq.SEED}" in report and "Targets (issue 9)" in report
    checks = vq.check_targets(results)
    assert {c.mode for c in checks} == set(MODES)


def test_command_line_writes_the_generated_block(tmp_path: Path) -> None:
    doc = tmp_path / "verdict-quality.md"
    doc.write_text(
        f"# Title\n\nprose\n\n{vq.BEGIN_MARK}\nSTALE BLOCK\n{vq.END_MARK}\n\nmore prose\n"
    )
    argv = ["--trials", "4", "--jobs", "1", "--scenario", "quiet", "--write", str(doc)]
    assert vq.main(argv) == 0
    text = doc.read_text()
    assert text.startswith("# Title\n\nprose\n\n")
    assert text.endswith(f"{vq.END_MARK}\n\nmore prose\n")
    assert "STALE BLOCK" not in text and "4 trials per cell" in text

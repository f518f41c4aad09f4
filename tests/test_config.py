"""perfgate.yaml and [tool.perfgate]: one schema, defaults, overrides, errors naming the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from perfgate.config import default_settings, load_settings, parse_threshold
from perfgate.errors import ConfigError
from perfgate.rules import Unit


def test_defaults_gate_step_time_utilization_and_copy_ratio() -> None:
    settings = default_settings()
    assert [r.label for r in settings.rules.gated] == ["step_time", "utilization", "copy_ratio"]
    step = settings.rules.metrics["step_time"]
    assert (step.threshold.value, step.threshold.unit, step.bad_sign) == (0.05, Unit.RELATIVE, 1)
    util = settings.rules.metrics["utilization"]
    assert (util.threshold.value, util.threshold.unit, util.bad_sign) == (0.03, Unit.POINTS, -1)
    assert settings.rules.metrics["copy_ratio"].threshold.unit is Unit.POINTS
    assert settings.rules.operators.gate is False
    assert settings.rules.operators.min_share == 0.01
    assert (settings.rules.statistics.alpha, settings.rules.statistics.min_steps) == (0.01, 10)
    assert settings.baseline.dir == "baselines"
    # None: the repository's default branch, resolved where a repository is at hand.
    assert settings.baseline.branch is None


@pytest.mark.parametrize(
    ("text", "value", "unit"),
    [
        ("5%", 0.05, Unit.RELATIVE),
        ("3pt", 0.03, Unit.POINTS),
        ("2ms", 2000.0, Unit.MICROSECONDS),
        ("500us", 500.0, Unit.MICROSECONDS),
        ("1.5s", 1.5e6, Unit.MICROSECONDS),
        ("+5%", 0.05, Unit.RELATIVE),
    ],
)
def test_thresholds_parse_with_their_unit(text: str, value: float, unit: Unit) -> None:
    threshold = parse_threshold(text, key="k", allowed=tuple(Unit))
    assert threshold.value == pytest.approx(value)
    assert threshold.unit is unit


def test_yaml_overrides_and_per_benchmark_thresholds(tmp_path: Path) -> None:
    (tmp_path / "perfgate.yaml").write_text(
        "thresholds:\n"
        "  step_time: {max_increase: 2ms}\n"
        "  comm_ratio: {max_increase: 4pt}\n"
        "statistics: {alpha: 0.05, lookback: 3}\n"
        "baseline: {env: shared-910b}\n"
        "benchmarks:\n"
        "  resnet50_train: {thresholds: {step_time: {max_increase: 3%}}}\n"
    )
    settings = load_settings(root=tmp_path)
    assert settings.rules.metrics["step_time"].threshold.value == 2000.0
    assert settings.rules.metrics["comm_ratio"].gate is True  # naming a limit turns the gate on
    assert settings.rules.statistics.alpha == 0.05
    assert settings.rules.statistics.lookback == 3
    assert settings.baseline.env == "shared-910b"
    resnet = settings.rules_for("resnet50_train")
    assert resnet.metrics["step_time"].threshold.text == "3%"
    assert resnet.metrics["utilization"].threshold.text == "3pt"
    assert settings.rules_for("other").metrics["step_time"].threshold.text == "2ms"


def test_pyproject_tool_section_is_read(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "x"\n\n[tool.perfgate.thresholds.utilization]\nmax_drop = "5pt"\n'
    )
    assert load_settings(root=tmp_path).rules.metrics["utilization"].threshold.value == 0.05


@pytest.mark.parametrize(
    ("yaml_text", "message"),
    [
        (
            "thresholds:\n  step_time: {max_incrase: 5%}\n",
            "perfgate.yaml: thresholds.step_time: unknown key 'max_incrase' "
            "(allowed: max_increase, gate)",
        ),
        (
            "thresholds:\n  utilization: {max_drop: 3}\n",
            "perfgate.yaml: thresholds.utilization.max_drop: 3 is not a threshold "
            "(a number needs a unit) (expected e.g. 3pt or 5%)",
        ),
        (
            "thresholds:\n  utilization: {max_drop: 2ms}\n",
            "perfgate.yaml: thresholds.utilization.max_drop: '2ms' is in us, not allowed here "
            "(expected e.g. 3pt or 5%)",
        ),
        (
            "profiler: nsys\n",
            "perfgate.yaml: profiler: 'nsys' is not one of auto, torch, torch_npu, msprof, none",
        ),
        (
            "statistics: {alpha: 2}\n",
            "perfgate.yaml: statistics.alpha: 2 is not a probability in (0, 1)",
        ),
        (
            "threshold: {}\n",
            "perfgate.yaml: unknown key 'threshold' (allowed: thresholds, statistics, baseline, "
            "profiler, measure, advisor, benchmarks)",
        ),
        (
            "benchmarks:\n  bert: {thresholds: {step_time: {max_increase: fast}}}\n",
            "perfgate.yaml: benchmarks.bert.thresholds.step_time.max_increase: 'fast' is not a "
            "threshold (expected e.g. 5% or 2ms or 500us)",
        ),
        (
            "baseline: {env: 'a/b'}\n",
            "perfgate.yaml: baseline.env: 'a/b' is not a safe directory name",
        ),
    ],
)
def test_bad_configuration_names_the_key_the_value_and_what_is_allowed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, yaml_text: str, message: str
) -> None:
    monkeypatch.chdir(tmp_path)
    Path("perfgate.yaml").write_text(yaml_text)
    with pytest.raises(ConfigError) as excinfo:
        load_settings(root=".")
    assert str(excinfo.value).startswith(message)


def test_invalid_yaml_says_where(tmp_path: Path) -> None:
    path = tmp_path / "perfgate.yaml"
    path.write_text("thresholds:\n  step_time: {max_increase: 5%\n")
    with pytest.raises(ConfigError, match=r"perfgate.yaml: not valid YAML at line 3, column 1"):
        load_settings(path)

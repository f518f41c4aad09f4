"""``perfgate.yaml`` / ``[tool.perfgate]``: one validated schema (DESIGN §6).

Defaults::

    thresholds:
      step_time:   {max_increase: 5%}
      utilization: {max_drop: 3pt}
      copy_ratio:  {max_increase: 2pt}
      operators:   {max_increase: 10%, min_share: 1%, gate: false}
    statistics: {alpha: 0.01, min_steps: 10, lookback: 8, max_cv: 10%}
    baseline:   {dir: baselines, branch: main, max_depth: 50, env: auto}
    profiler:   auto
    benchmarks:
      resnet50_train: {thresholds: {step_time: {max_increase: 3%}}}

Every unknown key and bad value is a :class:`~perfgate.errors.ConfigError` naming the file,
the key path, the value and what is allowed.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import Enum
from pathlib import Path
from typing import Any

import yaml

from perfgate.errors import ConfigError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib  # type: ignore[import-not-found, unused-ignore]


class Unit(str, Enum):
    """How a threshold is measured."""

    RELATIVE = "%"  # of the baseline value
    POINTS = "pt"  # percentage points of a ratio metric (0..1 scaled to 0..100)
    MICROSECONDS = "us"  # absolute time


@dataclass(frozen=True)
class Threshold:
    """A limit on a metric's change in its bad direction, e.g. ``5%``, ``3pt``, ``2ms``."""

    value: float  # fraction for % and pt (0.05 = 5%), µs for times
    unit: Unit
    text: str

    def exceeded_by(self, baseline: float, current: float, bad_sign: int) -> bool:
        """Whether ``current`` moved past the limit in the bad direction (+1 up, -1 down)."""
        return self.change(baseline, current) * bad_sign > self.value

    def change(self, baseline: float, current: float) -> float:
        """The change in this threshold's unit (fraction for % and pt, µs for times)."""
        if self.unit is Unit.RELATIVE:
            return (current - baseline) / baseline if baseline else float("inf")
        return current - baseline

    def __str__(self) -> str:
        return self.text


_TIME_UNITS = {"us": 1.0, "µs": 1.0, "ms": 1e3, "s": 1e6}
_THRESHOLD = re.compile(r"^\s*\+?-?\s*(\d+(?:\.\d+)?)\s*(%|pt|us|µs|ms|s)\s*$")


def parse_threshold(text: object, *, key: str, allowed: tuple[Unit, ...]) -> Threshold:
    """Parse ``5%`` / ``3pt`` / ``2ms`` into a :class:`Threshold`; ``key`` names it in errors."""
    forms = {Unit.RELATIVE: "5%", Unit.POINTS: "3pt", Unit.MICROSECONDS: "2ms or 500us"}
    expected = " or ".join(forms[u] for u in allowed)
    if isinstance(text, bool) or not isinstance(text, (str, int, float)):
        raise ConfigError(f"{key}: {text!r} is not a threshold (expected e.g. {expected})")
    match = _THRESHOLD.match(str(text))
    if not match:
        hint = " (a number needs a unit)" if re.fullmatch(r"\s*[\d.]+\s*", str(text)) else ""
        raise ConfigError(f"{key}: {text!r} is not a threshold{hint} (expected e.g. {expected})")
    number, suffix = float(match.group(1)), match.group(2)
    if suffix in _TIME_UNITS:
        unit, value = Unit.MICROSECONDS, number * _TIME_UNITS[suffix]
    elif suffix == "pt":
        unit, value = Unit.POINTS, number / 100
    else:
        unit, value = Unit.RELATIVE, number / 100
    if unit not in allowed:
        raise ConfigError(
            f"{key}: {text!r} is in {unit.value}, not allowed here (expected e.g. {expected})"
        )
    return Threshold(value=value, unit=unit, text=str(text).strip())


@dataclass(frozen=True)
class MetricRule:
    """How one gated metric is judged."""

    metric: str  # column name in the per-step samples, e.g. step_time_us
    label: str  # config key, e.g. step_time
    bad_sign: int  # +1: higher is worse; -1: lower is worse
    threshold: Threshold
    gate: bool = True


# Config key → (sample column, bad direction, threshold key, allowed units).
METRIC_SPECS: dict[str, tuple[str, int, str, tuple[Unit, ...]]] = {
    "step_time": ("step_time_us", +1, "max_increase", (Unit.RELATIVE, Unit.MICROSECONDS)),
    "utilization": ("utilization", -1, "max_drop", (Unit.POINTS, Unit.RELATIVE)),
    "copy_ratio": ("copy_ratio", +1, "max_increase", (Unit.POINTS, Unit.RELATIVE)),
    "comm_ratio": ("comm_ratio", +1, "max_increase", (Unit.POINTS, Unit.RELATIVE)),
    "free_ratio": ("free_ratio", +1, "max_increase", (Unit.POINTS, Unit.RELATIVE)),
}
_DEFAULT_METRICS = {
    "step_time": ("5%", True),
    "utilization": ("3pt", True),
    "copy_ratio": ("2pt", True),
    "comm_ratio": ("5pt", False),
    "free_ratio": ("5pt", False),
}


@dataclass(frozen=True)
class OperatorRule:
    max_increase: Threshold
    min_share: float  # fraction of the step an operator must hold to be gated
    gate: bool = False


@dataclass(frozen=True)
class Statistics:
    alpha: float = 0.01
    min_steps: int = 10
    lookback: int = 8  # ancestor baselines used to estimate the between-run spread
    max_cv: float = 0.10  # baseline spread (robust CV) above which a metric is unstable


@dataclass(frozen=True)
class BaselineSettings:
    dir: str = "baselines"
    branch: str = "main"
    max_depth: int = 50
    env: str = "auto"


@dataclass(frozen=True)
class Settings:
    """The validated configuration, with per-benchmark overrides resolved on demand."""

    metrics: dict[str, MetricRule]
    operators: OperatorRule
    statistics: Statistics = field(default_factory=Statistics)
    baseline: BaselineSettings = field(default_factory=BaselineSettings)
    profiler: str = "auto"
    benchmarks: dict[str, dict[str, Any]] = field(default_factory=dict)
    source: str = "defaults"

    def for_benchmark(self, name: str) -> Settings:
        """Settings with ``benchmarks.<name>`` overrides applied."""
        override = self.benchmarks.get(name)
        if not override:
            return self
        prefix = f"{self.source}: benchmarks.{name}"
        metrics, operators = _parse_thresholds(
            override.get("thresholds", {}), prefix + ".thresholds", self.metrics, self.operators
        )
        statistics = _parse_statistics(
            override.get("statistics", {}), prefix + ".statistics", self.statistics
        )
        return replace(self, metrics=metrics, operators=operators, statistics=statistics)

    @property
    def gated(self) -> list[MetricRule]:
        return [rule for rule in self.metrics.values() if rule.gate]


PROFILERS = ("auto", "torch", "torch_npu", "msprof", "none")
_TOP_KEYS = ("thresholds", "statistics", "baseline", "profiler", "benchmarks")
_BENCHMARK_KEYS = ("thresholds", "statistics")


def _check_keys(section: object, allowed: tuple[str, ...], where: str) -> Mapping[str, Any]:
    if section is None:
        return {}
    if not isinstance(section, Mapping):
        raise ConfigError(f"{where}: expected a mapping, got {type(section).__name__} {section!r}")
    for key in section:
        if key not in allowed:
            raise ConfigError(f"{where}: unknown key {key!r} (allowed: {', '.join(allowed)})")
    return section


def _parse_thresholds(
    section: object,
    where: str,
    metrics: dict[str, MetricRule],
    operators: OperatorRule,
) -> tuple[dict[str, MetricRule], OperatorRule]:
    section = _check_keys(section, (*METRIC_SPECS, "operators"), where)
    metrics = dict(metrics)
    for label, spec in section.items():
        key = f"{where}.{label}"
        if label == "operators":
            operators = _parse_operator_rule(spec, key, operators)
            continue
        _, _, limit_key, units = METRIC_SPECS[label]
        spec = _check_keys(spec, (limit_key, "gate"), key)
        rule = metrics[label]
        if limit_key in spec:
            rule = replace(
                rule,
                threshold=parse_threshold(spec[limit_key], key=f"{key}.{limit_key}", allowed=units),
                gate=True,
            )
        if "gate" in spec:
            rule = replace(rule, gate=_bool(spec["gate"], f"{key}.gate"))
        metrics[label] = rule
    return metrics, operators


def _parse_operator_rule(spec: object, key: str, rule: OperatorRule) -> OperatorRule:
    spec = _check_keys(spec, ("max_increase", "min_share", "gate"), key)
    if "max_increase" in spec:
        rule = replace(
            rule,
            max_increase=parse_threshold(
                spec["max_increase"],
                key=f"{key}.max_increase",
                allowed=(Unit.RELATIVE, Unit.MICROSECONDS),
            ),
        )
    if "min_share" in spec:
        share = parse_threshold(spec["min_share"], key=f"{key}.min_share", allowed=(Unit.RELATIVE,))
        rule = replace(rule, min_share=share.value)
    if "gate" in spec:
        rule = replace(rule, gate=_bool(spec["gate"], f"{key}.gate"))
    return rule


def _bool(value: object, key: str) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"{key}: {value!r} is not true or false")
    return value


def _int(value: object, key: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(f"{key}: {value!r} is not a whole number >= {minimum}")
    return value


def _parse_statistics(section: object, where: str, base: Statistics) -> Statistics:
    section = _check_keys(section, ("alpha", "min_steps", "lookback", "max_cv"), where)
    stats = base
    if "alpha" in section:
        alpha = section["alpha"]
        if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0 < alpha < 1:
            raise ConfigError(f"{where}.alpha: {alpha!r} is not a probability in (0, 1)")
        stats = replace(stats, alpha=float(alpha))
    if "min_steps" in section:
        stats = replace(stats, min_steps=_int(section["min_steps"], f"{where}.min_steps", 2))
    if "lookback" in section:
        stats = replace(stats, lookback=_int(section["lookback"], f"{where}.lookback", 1))
    if "max_cv" in section:
        cv = parse_threshold(section["max_cv"], key=f"{where}.max_cv", allowed=(Unit.RELATIVE,))
        stats = replace(stats, max_cv=cv.value)
    return stats


def _parse_baseline(section: object, where: str) -> BaselineSettings:
    section = _check_keys(section, ("dir", "branch", "max_depth", "env"), where)
    texts: dict[str, str] = {}
    for key in ("dir", "branch", "env"):
        if key in section:
            value = section[key]
            if not isinstance(value, str) or not value.strip():
                raise ConfigError(f"{where}.{key}: {value!r} is not a non-empty string")
            texts[key] = value
    settings = BaselineSettings(
        dir=texts.get("dir", "baselines"),
        branch=texts.get("branch", "main"),
        env=texts.get("env", "auto"),
    )
    if "max_depth" in section:
        settings = replace(settings, max_depth=_int(section["max_depth"], f"{where}.max_depth", 1))
    if settings.env != "auto" and not re.fullmatch(r"[A-Za-z0-9._-]+", settings.env):
        raise ConfigError(
            f"{where}.env: {settings.env!r} is not a safe directory name "
            "(letters, digits, '.', '_', '-')"
        )
    return settings


def default_settings() -> Settings:
    metrics = {
        label: MetricRule(
            metric=METRIC_SPECS[label][0],
            label=label,
            bad_sign=METRIC_SPECS[label][1],
            threshold=parse_threshold(
                text, key=f"thresholds.{label}", allowed=METRIC_SPECS[label][3]
            ),
            gate=gate,
        )
        for label, (text, gate) in _DEFAULT_METRICS.items()
    }
    operators = OperatorRule(
        max_increase=parse_threshold(
            "10%", key="thresholds.operators.max_increase", allowed=(Unit.RELATIVE,)
        ),
        min_share=0.01,
        gate=False,
    )
    return Settings(metrics=metrics, operators=operators)


def settings_from_mapping(data: object, source: str) -> Settings:
    """Validate a parsed configuration mapping (YAML document or ``[tool.perfgate]``)."""
    top = _check_keys(data, _TOP_KEYS, source)
    base = default_settings()
    metrics, operators = _parse_thresholds(
        top.get("thresholds"), f"{source}: thresholds", base.metrics, base.operators
    )
    statistics = _parse_statistics(top.get("statistics"), f"{source}: statistics", Statistics())
    baseline = _parse_baseline(top.get("baseline"), f"{source}: baseline")
    profiler = top.get("profiler", "auto")
    if profiler not in PROFILERS:
        raise ConfigError(f"{source}: profiler: {profiler!r} is not one of {', '.join(PROFILERS)}")
    benchmarks_section = _check_keys_any(top.get("benchmarks"), f"{source}: benchmarks")
    settings = Settings(
        metrics=metrics,
        operators=operators,
        statistics=statistics,
        baseline=baseline,
        profiler=str(profiler),
        benchmarks={},
        source=source,
    )
    benchmarks: dict[str, dict[str, Any]] = {}
    for name, override in benchmarks_section.items():
        benchmarks[str(name)] = dict(
            _check_keys(override, _BENCHMARK_KEYS, f"{source}: benchmarks.{name}")
        )
    settings = replace(settings, benchmarks=benchmarks)
    for name in benchmarks:  # validate overrides now, not at first use
        settings.for_benchmark(name)
    return settings


def _check_keys_any(section: object, where: str) -> Mapping[str, Any]:
    if section is None:
        return {}
    if not isinstance(section, Mapping):
        raise ConfigError(f"{where}: expected a mapping of benchmark names, got {section!r}")
    return section


def load_settings(path: str | Path | None = None, root: str | Path = ".") -> Settings:
    """Read ``path``, else ``perfgate.yaml`` / ``[tool.perfgate]`` under ``root``, else defaults."""
    if path is not None:
        file = Path(path)
        if not file.is_file():
            raise ConfigError(f"{file}: configuration file not found")
        return _load_file(file)
    root = Path(root)
    for name in ("perfgate.yaml", "perfgate.yml"):
        if (root / name).is_file():
            return _load_file(root / name)
    pyproject = root / "pyproject.toml"
    if pyproject.is_file():
        data = _read_toml(pyproject)
        section = data.get("tool", {}).get("perfgate")
        if section is not None:
            return settings_from_mapping(section, f"{pyproject} [tool.perfgate]")
    return default_settings()


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None


def _load_file(path: Path) -> Settings:
    if path.suffix == ".toml":
        section = _read_toml(path).get("tool", {}).get("perfgate", {})
        return settings_from_mapping(section, f"{path} [tool.perfgate]")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ConfigError(f"{path}: not valid YAML{where}") from None
    return settings_from_mapping(data if data is not None else {}, str(path))

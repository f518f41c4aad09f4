"""``perfgate.yaml`` / ``[tool.perfgate]`` → :class:`~perfgate.rules.Settings`: one validated
schema, read here and nowhere else.

Defaults::

    thresholds:
      step_time:   {max_increase: 5%}
      utilization: {max_drop: 3pt}
      copy_ratio:  {max_increase: 2pt}
      operators:   {max_increase: 10%, min_share: 1%, gate: false}
    statistics: {alpha: 0.01, min_steps: 10, lookback: 8, max_cv: 10%,
                 rounds: 5, max_rounds: 15, processes: 3, max_seconds: 120, ab_pairs: 4,
                 session_noise: 20%}
    measure:    {threads: auto, pin_cpu: auto, keep_memory: auto}
    advisor:    {free_ratio: 15%, copy_ratio: 25%, small_kernel_us: 50us, small_kernel_run: 8,
                 sync_ratio: 5%, comm_ratio: 30%, imbalance: 5%, ai_cpu_share: 0%,
                 utilization: 60%, disable: []}
    baseline:   {dir: baselines, max_depth: 50, env: auto}
    profiler:   auto
    benchmarks:
      resnet50_train: {thresholds: {step_time: {max_increase: 3%}}}

``baseline.branch`` defaults to the repository's default branch (``origin/HEAD``, else
``main`` or ``master``); set it to name another.

Every unknown key and bad value is a :class:`~perfgate.errors.ConfigError` naming the file,
the key path, the value and what is allowed.
"""

from __future__ import annotations

import math
import os
import re
import sys
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml

from perfgate.errors import ConfigError, clipped, shown
from perfgate.rules import (
    ADVISOR_RULES,
    METRICS,
    PROFILERS,
    AdvisorSettings,
    BaselineSettings,
    MeasureSettings,
    OperatorRule,
    Rules,
    Settings,
    Statistics,
    Threshold,
    Unit,
    default_rules,
)
from perfgate.store.keys import MAX_NAME, is_safe_name

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib  # type: ignore[import-not-found, unused-ignore]


def _has_control(text: str) -> bool:
    """Whether ``text`` holds a control character (a newline, NUL, DEL …)."""
    return any(ord(c) < 32 or ord(c) == 127 for c in text)


def _huge(value: object) -> bool:
    """An integer too long to be a name or a count (``str`` of it may even raise)."""
    return isinstance(value, int) and value.bit_length() > 64


_TIME_UNITS = {"us": 1.0, "µs": 1.0, "ms": 1e3, "s": 1e6}
_MAX_RELATIVE = 100.0  # 10,000%: a hundredfold change
_THRESHOLD = re.compile(r"^\s*([+-]?)\s*(\d+(?:\.\d+)?)\s*(%|pt|us|µs|ms|s)\s*$")


def parse_threshold(text: object, *, key: str, allowed: tuple[Unit, ...]) -> Threshold:
    """Parse ``5%`` / ``3pt`` / ``2ms`` into a :class:`Threshold`; ``key`` names it in errors."""
    forms = {Unit.RELATIVE: "5%", Unit.POINTS: "3pt", Unit.MICROSECONDS: "2ms or 500us"}
    expected = " or ".join(forms[u] for u in allowed)
    if isinstance(text, bool) or not isinstance(text, (str, int, float)) or _huge(text):
        raise ConfigError(f"{key}: {shown(text)} is not a threshold (expected e.g. {expected})")
    match = _THRESHOLD.match(str(text))
    if not match:
        hint = " (a number needs a unit)" if re.fullmatch(r"\s*[\d.]+\s*", str(text)) else ""
        raise ConfigError(
            f"{key}: {shown(text)} is not a threshold{hint} (expected e.g. {expected})"
        )
    sign, number, suffix = match.group(1), float(match.group(2)), match.group(3)
    if sign == "-":
        # The direction is the metric's (max_increase / max_drop): a sign would invert it.
        raise ConfigError(
            f"{key}: {shown(text)} is negative; a limit is a size in the metric's bad direction "
            f"(expected e.g. {expected})"
        )
    if suffix in _TIME_UNITS:
        unit, value = Unit.MICROSECONDS, number * _TIME_UNITS[suffix]
    elif suffix == "pt":
        unit, value = Unit.POINTS, number / 100
    else:
        unit, value = Unit.RELATIVE, number / 100
    if unit not in allowed:
        raise ConfigError(
            f"{key}: {shown(text)} is in {unit.value}, not allowed here (expected e.g. {expected})"
        )
    if not math.isfinite(value) or (unit is Unit.RELATIVE and value > _MAX_RELATIVE):
        # No change crosses such a limit: it would switch the gate off without saying so.
        raise ConfigError(
            f"{key}: {shown(text)} is too large (at most {_MAX_RELATIVE:.0%}; expected e.g. "
            f"{expected}; gate: false switches a metric's gate off)"
        )
    if unit is Unit.POINTS and value > 1:
        # A ratio moves 100 points at most: a larger limit is no limit (use gate: false).
        raise ConfigError(
            f"{key}: {shown(text)} is over 100pt, more than a ratio can move (expected e.g. "
            f"{expected}; gate: false switches the metric's gate off)"
        )
    return Threshold(value=value, unit=unit, text=str(text).strip())


_TOP_KEYS = (
    "thresholds",
    "statistics",
    "baseline",
    "profiler",
    "measure",
    "advisor",
    "benchmarks",
)
_STATISTICS_KEYS = (
    "alpha",
    "min_steps",
    "lookback",
    "max_cv",
    "rounds",
    "max_rounds",
    "processes",
    "max_seconds",
    "ab_pairs",
    "session_noise",
)
_BENCHMARK_KEYS = ("thresholds", "statistics")
# Statistics of the whole session: one A/B run, one set of measuring processes for all.
_SESSION_STATISTICS = {
    "ab_pairs": "a setting of the A/B run, which measures every benchmark in each pair",
    "processes": "a setting of the --perfgate-update session, whose processes measure every "
    "benchmark",
}


def _check_keys(section: object, allowed: tuple[str, ...], where: str) -> Mapping[str, Any]:
    if section is None:
        return {}
    if not isinstance(section, Mapping):
        raise ConfigError(
            f"{where}: expected a mapping, got {type(section).__name__} {shown(section)}"
        )
    for key in section:
        if key not in allowed:
            raise ConfigError(f"{where}: unknown key {shown(key)} (allowed: {', '.join(allowed)})")
    return section


def parse_rules(
    section: object, where: str, base: Rules, *, prefix: str | None = None, session: bool = False
) -> Rules:
    """``base`` with the overrides of a ``{thresholds, statistics}`` mapping applied: a
    ``benchmarks.<name>`` entry or a pytest marker (``where`` names it in errors; its keys
    are named ``<prefix>thresholds…``, by default ``<where>.thresholds…``); ``session``: the
    top-level settings, where the session's own statistics belong."""
    section = _check_keys(section, _BENCHMARK_KEYS, where)
    prefix = f"{where}." if prefix is None else prefix
    given = section.get("statistics")
    for key, why in _SESSION_STATISTICS.items():
        if not session and isinstance(given, Mapping) and key in given:
            # Taken from the session's settings whatever one benchmark says: ignored, unseen.
            raise ConfigError(
                f"{prefix}statistics.{key}: {why}, not of one benchmark (set it in the "
                "top-level statistics)"
            )
    rules = _parse_thresholds(section.get("thresholds"), f"{prefix}thresholds", base)
    statistics = _parse_statistics(given, f"{prefix}statistics", base.statistics)
    return replace(rules, statistics=statistics)


def _parse_thresholds(section: object, where: str, rules: Rules) -> Rules:
    section = _check_keys(section, (*METRICS, "operators"), where)
    metrics = dict(rules.metrics)
    operators = rules.operators
    for label, value in section.items():
        key = f"{where}.{label}"
        if label == "operators":
            operators = _parse_operator_rule(value, key, operators)
            continue
        spec = METRICS[label]
        entry = _check_keys(value, (spec.limit_key, "gate"), key)
        rule = metrics[label]
        if spec.limit_key in entry:
            limit = parse_threshold(
                entry[spec.limit_key], key=f"{key}.{spec.limit_key}", allowed=spec.units
            )
            if spec.limit_key == "max_drop" and limit.unit is Unit.RELATIVE and limit.value >= 1:
                # A positive figure drops by 100% at most (to nothing): no drop crosses it.
                raise ConfigError(
                    f"{key}.{spec.limit_key}: {shown(entry[spec.limit_key])} is no possible "
                    "drop (at most 100%, to nothing; gate: false switches the metric's gate off)"
                )
            rule = replace(rule, threshold=limit, gate=True)
        if "gate" in entry:
            rule = replace(rule, gate=_bool(entry["gate"], f"{key}.gate"))
        metrics[label] = rule
    return replace(rules, metrics=metrics, operators=operators)


def _share_of_step(text: object, key: str) -> float:
    """A share of the step such as ``15%``, as a fraction of at most 1."""
    share = parse_threshold(text, key=key, allowed=(Unit.RELATIVE,))
    if share.value > 1:
        raise ConfigError(f"{key}: {shown(text)} is over 100% of the step")
    return share.value


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
        rule = replace(rule, min_share=_share_of_step(spec["min_share"], f"{key}.min_share"))
    if "gate" in spec:
        rule = replace(rule, gate=_bool(spec["gate"], f"{key}.gate"))
    return rule


def _bool(value: object, key: str) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"{key}: {shown(value)} is not true or false")
    return value


# Counts (rounds, processes, commits to look back, …) beyond this are a typo or a hostile
# file: a million rounds would never end.
_MAX_COUNT = 1_000_000


def _int(value: object, key: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= _MAX_COUNT:
        raise ConfigError(
            f"{key}: {shown(value)} is not a whole number from {minimum} to {_MAX_COUNT:,}"
        )
    return value


_MIN_ALPHA = 1e-6


def _parse_statistics(section: object, where: str, base: Statistics) -> Statistics:
    section = _check_keys(section, _STATISTICS_KEYS, where)
    stats = base
    if "alpha" in section:
        alpha = section["alpha"]
        if (
            isinstance(alpha, bool)
            or not isinstance(alpha, (int, float))
            or not _MIN_ALPHA <= alpha < 1
        ):
            # Below 1e-6 the critical values are infinite: no change would ever be flagged.
            raise ConfigError(
                f"{where}.alpha: {shown(alpha)} is not a probability in (0, 1) of at least "
                f"{_MIN_ALPHA:g} (e.g. 0.01)"
            )
        stats = replace(stats, alpha=float(alpha))
    if "min_steps" in section:
        stats = replace(stats, min_steps=_int(section["min_steps"], f"{where}.min_steps", 2))
    if "lookback" in section:
        stats = replace(stats, lookback=_int(section["lookback"], f"{where}.lookback", 1))
    if "max_cv" in section:
        cv = parse_threshold(section["max_cv"], key=f"{where}.max_cv", allowed=(Unit.RELATIVE,))
        stats = replace(stats, max_cv=cv.value)
    if "session_noise" in section:
        noise = parse_threshold(
            section["session_noise"], key=f"{where}.session_noise", allowed=(Unit.RELATIVE,)
        )
        stats = replace(stats, session_noise=noise.value)
    for key, minimum in (("rounds", 2), ("max_rounds", 2), ("processes", 1), ("ab_pairs", 2)):
        if key in section:
            stats = replace(stats, **{key: _int(section[key], f"{where}.{key}", minimum)})
    if "max_seconds" in section:
        seconds = section["max_seconds"]
        if (
            isinstance(seconds, bool)
            or not isinstance(seconds, (int, float))
            or not 0 < seconds < math.inf
        ):
            raise ConfigError(
                f"{where}.max_seconds: {shown(seconds)} is not a number of seconds > 0"
            )
        stats = replace(stats, max_seconds=float(seconds))
    if stats.max_rounds < stats.rounds:
        raise ConfigError(
            f"{where}.max_rounds: {stats.max_rounds} is below rounds ({stats.rounds}) "
            "(expected max_rounds >= rounds)"
        )
    return stats


def _parse_measure(section: object, where: str) -> MeasureSettings:
    section = _check_keys(section, ("threads", "pin_cpu", "keep_memory"), where)
    settings = MeasureSettings()
    if "threads" in section:
        threads = section["threads"]
        if threads != "auto":
            threads = _int(threads, f"{where}.threads", 1)
        settings = replace(settings, threads=threads)
    for key in ("pin_cpu", "keep_memory"):  # true, false or auto
        if key in section:
            value = section[key]
            if value != "auto":
                value = _bool(value, f"{where}.{key}")
            settings = replace(settings, **{key: value})
    return settings


_MAX_PATH_TEXT = 200  # directory and branch names; a file system takes 255 bytes per name


def _parse_baseline(section: object, where: str) -> BaselineSettings:
    section = _check_keys(section, ("dir", "branch", "max_depth", "env"), where)
    texts: dict[str, str] = {}
    for key in ("dir", "branch", "env"):
        if key in section:
            value = section[key]
            if not isinstance(value, str) or not value.strip():
                raise ConfigError(f"{where}.{key}: {shown(value)} is not a non-empty string")
            if len(value) > _MAX_PATH_TEXT or _has_control(value):
                raise ConfigError(
                    f"{where}.{key}: {shown(value)} is not a name git and the file system "
                    f"take (expected at most {_MAX_PATH_TEXT} characters, no control characters)"
                )
            texts[key] = value
    settings = BaselineSettings(
        dir=texts.get("dir", "baselines"),
        branch=texts.get("branch"),
        env=texts.get("env", "auto"),
    )
    if "max_depth" in section:
        settings = replace(settings, max_depth=_int(section["max_depth"], f"{where}.max_depth", 1))
    store = Path(settings.dir)
    if store.is_absolute() or ".." in store.parts:
        # Baselines are committed with the code: the store lives inside the repository.
        raise ConfigError(
            f"{where}.dir: {shown(settings.dir)} leaves the repository (expected a relative path "
            "inside it, e.g. baselines)"
        )
    if settings.branch is not None and settings.branch.startswith("-"):
        raise ConfigError(
            f"{where}.branch: {shown(settings.branch)} is no branch name (a name never starts "
            "with '-'; expected e.g. main)"
        )
    if not store.parts or any(part.startswith(".git") for part in store.parts):
        raise ConfigError(
            f"{where}.dir: {shown(settings.dir)} is the repository's root or inside git's own "
            "files (expected a directory of its own, e.g. baselines)"
        )
    if settings.env != "auto" and not is_safe_name(settings.env):
        raise ConfigError(
            f"{where}.env: {shown(settings.env)} is not a safe directory name "
            f"(1 to {MAX_NAME} letters, digits, '.', '_', '-', not starting with '.')"
        )
    return settings


_ADVISOR_SHARES = (
    "free_ratio",
    "copy_ratio",
    "sync_ratio",
    "comm_ratio",
    "imbalance",
    "ai_cpu_share",
    "utilization",
)


def _parse_advisor(section: object, where: str) -> AdvisorSettings:
    """The ``advisor:`` section: shares of the step as ``15%``, the small-kernel limit as a
    time, the run length as a whole number, rules to switch off by name."""
    keys = (*_ADVISOR_SHARES, "small_kernel_us", "small_kernel_run", "disable")
    section = _check_keys(section, keys, where)
    settings = AdvisorSettings()
    for key in _ADVISOR_SHARES:
        if key in section:
            shares: dict[str, Any] = {key: _share_of_step(section[key], f"{where}.{key}")}
            settings = replace(settings, **shares)
    if "small_kernel_us" in section:
        limit = parse_threshold(
            section["small_kernel_us"],
            key=f"{where}.small_kernel_us",
            allowed=(Unit.MICROSECONDS,),
        )
        settings = replace(settings, small_kernel_us=limit.value)
    if "small_kernel_run" in section:
        run = _int(section["small_kernel_run"], f"{where}.small_kernel_run", 2)
        settings = replace(settings, small_kernel_run=run)
    if "disable" in section:
        names = section["disable"]
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise ConfigError(f"{where}.disable: {shown(names)} is not a list of rule names")
        for name in names:
            if name not in ADVISOR_RULES:
                raise ConfigError(
                    f"{where}.disable: unknown rule {shown(name)} "
                    f"(rules: {', '.join(ADVISOR_RULES)})"
                )
        settings = replace(settings, disable=tuple(names))
    return settings


# A configuration is a few dozen values. YAML aliases can make a small file a huge (or
# endlessly nested) document: a "billion laughs" of 400 bytes is a billion values.
_MAX_VALUES = 10_000
_MAX_NESTING = 20


def _check_size(data: object, source: str) -> None:
    """Refuse a document of more than :data:`_MAX_VALUES` values or nested deeper than
    :data:`_MAX_NESTING` levels, counting aliased values each time they appear; stops at the
    first value past either bound."""
    pending: list[tuple[object, int]] = [(data, 0)]
    counted = 0
    while pending:
        value, depth = pending.pop()
        counted += 1
        if counted > _MAX_VALUES or depth > _MAX_NESTING:
            raise ConfigError(
                f"{source}: more than {_MAX_VALUES:,} values or nested deeper than "
                f"{_MAX_NESTING} levels once its aliases are expanded (expected a configuration "
                "as docs/pytest.md shows it)"
            )
        if isinstance(value, Mapping):
            pending.extend((item, depth + 1) for pair in value.items() for item in pair)
        elif isinstance(value, (list, tuple)):
            pending.extend((item, depth + 1) for item in value)


def default_settings() -> Settings:
    """The settings of a repository without a configuration."""
    return Settings()


_MAX_BENCHMARK_NAME = 500  # pytest ids with parameters run long; a message stays readable


def settings_from_mapping(data: object, source: str) -> Settings:
    """Validate a parsed configuration mapping (YAML document or ``[tool.perfgate]``)."""
    _check_size(data, source)
    top = _check_keys(data, _TOP_KEYS, source)
    rules = parse_rules(
        {key: top[key] for key in _BENCHMARK_KEYS if key in top},
        source,
        default_rules(),
        prefix=f"{source}: ",
        session=True,
    )
    baseline = _parse_baseline(top.get("baseline"), f"{source}: baseline")
    profiler = top.get("profiler", "auto")
    if profiler not in PROFILERS:
        raise ConfigError(
            f"{source}: profiler: {shown(profiler)} is not one of {', '.join(PROFILERS)}"
        )
    benchmarks_section = top.get("benchmarks")
    if benchmarks_section is not None and not isinstance(benchmarks_section, Mapping):
        raise ConfigError(
            f"{source}: benchmarks: expected a mapping of benchmark names, got "
            f"{shown(benchmarks_section)}"
        )
    named: set[str] = set()
    for name in benchmarks_section or {}:
        if (
            isinstance(name, bool)
            or not isinstance(name, (str, int))
            or _huge(name)
            or not 0 < len(str(name)) <= _MAX_BENCHMARK_NAME
            or _has_control(str(name))
        ):
            raise ConfigError(
                f"{source}: benchmarks: {shown(name)} is no benchmark name (expected its "
                f"name as text, 1 to {_MAX_BENCHMARK_NAME} characters on one line, e.g. "
                "resnet50_train)"
            )
        if str(name) in named:  # 1 and '1'
            raise ConfigError(f"{source}: benchmarks: {shown(str(name))} is named twice")
        named.add(str(name))
    benchmarks = {
        str(name): parse_rules(override, f"{source}: benchmarks.{name}", rules)
        for name, override in (benchmarks_section or {}).items()
    }
    return Settings(
        rules=rules,
        baseline=baseline,
        measure=_parse_measure(top.get("measure"), f"{source}: measure"),
        advisor=_parse_advisor(top.get("advisor"), f"{source}: advisor"),
        profiler=str(profiler),
        benchmarks=benchmarks,
        source=source,
    )


# Where a project's settings are: one of these YAML files, or [tool.perfgate] of PYPROJECT.
YAML_SETTINGS = ("perfgate.yaml", "perfgate.yml")
PYPROJECT = "pyproject.toml"


def with_baseline_branch(settings: Settings, branch: str | None, where: str) -> Settings:
    """``settings`` with the baseline branch an option names (``--perfgate-baseline-branch``,
    the Action's ``baseline-branch``) instead of the configuration's; as they are when
    ``branch`` is None or empty. A name that cannot be a branch is a :class:`ConfigError`
    naming ``where``; one this repository lacks is refused where the baselines are looked up,
    as the configuration's is."""
    if not branch or not branch.strip():
        return settings
    branch = branch.strip()
    if branch.startswith("-") or len(branch) > _MAX_PATH_TEXT or any(c.isspace() for c in branch):
        raise ConfigError(
            f"{where}: {shown(branch)} is no branch name (expected e.g. main, without spaces "
            "or a leading '-')"
        )
    return replace(settings, baseline=replace(settings.baseline, branch=branch))


def load_settings(path: str | Path | None = None, root: str | Path = ".") -> Settings:
    """Read ``path``, else ``perfgate.yaml`` / ``[tool.perfgate]`` under ``root``, else defaults."""
    if path is not None:
        file = Path(path)
        if file.is_dir():
            raise ConfigError(
                f"{file}: is a directory (expected a configuration file: perfgate.yaml, or a "
                "pyproject.toml with [tool.perfgate])"
            )
        if not file.is_file():
            raise ConfigError(f"{file}: configuration file not found")
        return _load_file(file)
    root = Path(root)
    files = [root / name for name in YAML_SETTINGS if _settings_file(root / name)]
    pyproject = root / PYPROJECT
    section = _tool_section(pyproject) if _settings_file(pyproject) else None
    in_pyproject = f"{pyproject} [tool.perfgate]"
    places = [str(file) for file in files] + ([in_pyproject] if section is not None else [])
    if len(places) > 1:
        # Reading one, the gate would run without a word on settings other than those the
        # user edits (and an error in the other would never be seen).
        raise ConfigError(
            f"settings in {len(places)} places: {', '.join(places)} (perfgate reads one; "
            "keep the settings in one of them)"
        )
    if files:
        return _load_file(files[0])
    if section is not None:
        return settings_from_mapping(section, in_pyproject)
    return default_settings()


def _settings_file(path: Path) -> bool:
    """Whether a settings file is at ``path``. Something else there (a directory, a FIFO, a
    link to nothing) is an error: skipped, the gate ran on other settings without a word."""
    if path.is_file():
        return True
    if not os.path.lexists(path):
        return False
    kind = (
        "a directory"
        if path.is_dir()
        else "a symbolic link to nothing"
        if path.is_symlink() and not path.exists()
        else "no regular file (a FIFO, socket or device)"
    )
    raise ConfigError(f"{path}: is {kind} (expected a configuration file, or nothing there)")


# pytest's configuration files, in the order it looks for them in a folder, and the table
# that makes each one (None: the file alone does).
_PYTEST_INI = (
    ("pytest.toml", None),
    (".pytest.toml", None),
    ("pytest.ini", None),
    (".pytest.ini", None),
    ("pyproject.toml", "[tool.pytest"),  # [tool.pytest] (pytest 9) or .ini_options
    ("tox.ini", "[pytest]"),
    ("setup.cfg", "[tool:pytest]"),
)


def project_directory(start: str | Path) -> Path:
    """The folder whose settings and baseline store the CLI uses when started in ``start``:
    the one ``pytest --perfgate`` started there takes (``pytest_plugin.session.
    project_root``, from pytest's rootdir). The rootdir: the nearest folder from ``start``
    up with a pytest configuration file, else with a pyproject.toml, else ``start``. From
    it up to the top of the git work tree, the nearest folder with perfgate's settings;
    else the rootdir when a file fixed it, else the top. Outside git, the rootdir. (A run
    from ``bench/`` read ``bench/perfgate.yaml`` and ``bench/baselines/``, which no gate
    uses.)

    Raises:
        ConfigError: ``start`` is no directory.
    """
    given = Path(start)
    start = given.resolve()
    if not start.is_dir():
        raise ConfigError(f"{given}: no such directory (expected a checkout of the project)")
    ini_folder = next(
        (
            folder
            for folder in (start, *start.parents)
            if any(_has_section(folder / name, table) for name, table in _PYTEST_INI)
        ),
        None,
    )
    if ini_folder is None:  # pytest ≥ 8.1 then takes a pyproject.toml without its table
        ini_folder = next(
            (f for f in (start, *start.parents) if (f / "pyproject.toml").is_file()), None
        )
    found = project_folder(ini_folder or start, fixed=ini_folder is not None)
    return given if found == start else found  # as given where it is the start (paths said)


def project_folder(rootdir: Path, *, fixed: bool) -> Path:
    """The project's folder for pytest's ``rootdir`` (``fixed``: a configuration file made
    it the rootdir): the nearest folder from it up to the top of the git work tree that holds
    perfgate's settings; else the rootdir when a file fixed it, else the top. Outside git,
    the rootdir. Both the plugin and the CLI (:func:`project_directory`) take it."""
    from perfgate.store.git import work_tree

    top = work_tree(rootdir)
    if top is None or (top != rootdir and top not in rootdir.parents):
        return rootdir
    for folder in (rootdir, *rootdir.parents):
        if has_settings(folder):
            return folder
        if folder == top:
            break
    return rootdir if fixed else top


def _has_section(path: Path, section: str | None) -> bool:
    if not path.is_file():
        return False
    if section is None:
        return True
    try:
        return section in path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False


def has_settings(root: str | Path) -> bool:
    """Whether ``root`` holds perfgate's settings (``perfgate.yaml`` / ``.yml``, or a
    ``pyproject.toml`` with ``[tool.perfgate]``). A pyproject that cannot be read counts:
    reading it is what will say what is wrong."""
    root = Path(root)
    if any(os.path.lexists(root / name) for name in YAML_SETTINGS):
        return True  # reading it says what is wrong with it, if anything
    pyproject = root / PYPROJECT
    if not pyproject.is_file():
        return False
    try:
        return _tool_section(pyproject) is not None
    except ConfigError:
        return True


def _tool_section(path: Path) -> object | None:
    """``[tool.perfgate]`` of a TOML file, or None when it has none."""
    try:
        with path.open("rb") as handle:
            data = tomllib.load(handle)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: not UTF-8 at byte {exc.start}") from None
    except RecursionError:
        raise ConfigError(f"{path}: not valid TOML: nested too deeply to read") from None
    except ValueError as exc:  # an integer of more than 4,300 digits
        raise ConfigError(f"{path}: not valid TOML: {clipped(exc)}") from None
    tool = data.get("tool")
    if tool is None:
        return None
    if not isinstance(tool, dict):
        raise ConfigError(f"{path}: key 'tool' is {shown(tool)}, expected a table ([tool])")
    if "perfgate" not in tool:
        # [tool.perf-gate], [tool.PerfGate]: settings that would be defaults, silently.
        near = [k for k in tool if re.sub(r"[-_.\s]", "", str(k)).lower() == "perfgate"]
        if near:
            raise ConfigError(
                f"{path}: [tool.{near[0]}] is no table perfgate reads (expected [tool.perfgate])"
            )
    return tool.get("perfgate")


class _StrictLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing a key given twice in one mapping (PyYAML keeps the last
    silently: a second ``statistics:`` would replace the first unseen), with numbers read as
    YAML 1.2 reads them: an integer is decimal digits (YAML 1.1 made ``010`` 8, ``2:00``
    120 and ``0x10`` 16, silently), and ``1e-3`` is a number (1.1 wanted ``1.0e-3``)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue  # `<<: *shared`: merged by PyYAML, the mapping's own keys win
            key = self.construct_object(key_node, deep=deep)
            try:
                repeated = key in seen
                seen.add(key)
            except TypeError:  # unhashable: PyYAML's own check below names it
                continue
            if repeated:
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping",
                    node.start_mark,
                    f"found the key {shown(key)} twice",
                    key_node.start_mark,
                )
        return super().construct_mapping(node, deep=deep)


def _decimal_int(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> int | str:
    text = str(loader.construct_scalar(node))
    # Past Python's 4,300 digits int() refuses: kept as text, which the key refuses by name.
    return int(text, 10) if len(text) <= 4000 else text


_INT_TAG, _FLOAT_TAG = "tag:yaml.org,2002:int", "tag:yaml.org,2002:float"
_StrictLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag not in (_INT_TAG, _FLOAT_TAG)]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_StrictLoader.add_implicit_resolver(_INT_TAG, re.compile(r"^[-+]?[0-9]+$"), list("-+0123456789"))
_StrictLoader.add_implicit_resolver(
    _FLOAT_TAG,
    re.compile(
        r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
        r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
    ),
    list("-+.0123456789"),
)
_StrictLoader.add_constructor(_INT_TAG, _decimal_int)


def _yaml_problem(problem: str) -> str:
    """PyYAML's account of a syntax error, shortened; a tag it has no constructor for (the
    safe loader takes none of ``!!python/…`` or custom tags) said in YAML's own spelling."""
    tag = re.fullmatch(r"could not determine a constructor for the tag '(.*)'", problem)
    if tag:
        name = re.sub(r"^tag:yaml\.org,2002:", "!!", tag.group(1))
        return (
            f"the tag '{clipped(name, 60)}' is not taken (plain values only; quote it to keep text)"
        )
    return clipped(problem)


def _load_file(path: Path) -> Settings:
    if path.suffix == ".toml":
        section = _tool_section(path)
        if section is None:
            # Named on purpose (--config): defaults in its place would gate unnoticed.
            raise ConfigError(f"{path}: has no [tool.perfgate] table (expected the settings)")
        return settings_from_mapping(section, f"{path} [tool.perfgate]")
    try:
        data = yaml.load(path.read_bytes().decode("utf-8"), Loader=_StrictLoader)
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not valid YAML: not UTF-8 at byte {exc.start}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None)
        said = f": {_yaml_problem(problem)}" if problem else ""
        raise ConfigError(f"{path}: not valid YAML{where}{said}") from None
    except RecursionError:
        raise ConfigError(f"{path}: not valid YAML: nested too deeply to read") from None
    except (ValueError, KeyError, IndexError, AttributeError, TypeError) as exc:
        # PyYAML's constructors raise these for a tagged value they cannot take
        # (``!!int abc``, ``!!bool maybe``, ``2001-02-30``, an integer of 5,000 digits).
        raise ConfigError(
            f"{path}: not valid YAML: a value cannot be read as its type ({clipped(exc)}); "
            "quote it to keep it as text"
        ) from None
    return settings_from_mapping(data if data is not None else {}, str(path))

"""perfgate.yaml and [tool.perfgate]: one schema, defaults, overrides, errors naming the key."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from conftest import GitRepo

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


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "thresholds:\n  step_time: {max_increase: 5%\n",
            "at line 3, column 1: expected ',' or '}', but got '<stream end>'",
        ),
        (
            "thresholds:\n  step_time: !!python/object:os.system {}\n",
            "at line 2, column 14: the tag '!!python/object:os.system' is not taken (plain "
            "values only; quote it to keep text)",
        ),
        ("statistics: !env {rounds: 5}\n", "at line 1, column 13: the tag '!env' is not taken"),
        ("thresholds:\n\tstep_time: 5%\n", "at line 2, column 1: found character '\\t' that"),
    ],
)
def test_invalid_yaml_says_where_and_what(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "perfgate.yaml"
    path.write_text(text)
    # It said where only ("not valid YAML at line 2, column 14"), leaving the what to guess.
    with pytest.raises(ConfigError) as excinfo:
        load_settings(path)
    assert str(excinfo.value).startswith(f"{path}: not valid YAML {message}")


_BOMB = (
    "a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
    "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
    "e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]\nf: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e]\n"
    "profiler: [*f, *f, *f, *f, *f, *f, *f, *f, *f]\n"
)
_HUGE_INT = "9" * 4000  # 4,000 decimal digits: a YAML integer past what repr() shows whole


# Hostile files found by fuzzing the configuration (docs/reliability.md): each was a
# traceback, a hang, or a setting that silently switched the gate off.
@pytest.mark.parametrize(
    ("text", "message"),
    [
        (_BOMB, "more than 10,000 values or nested deeper than 20 levels"),
        ("a: " + "[" * 3000 + "]" * 3000 + "\n", "not valid YAML: nested too deeply to read"),
        ("statistics: {rounds: !!int abc}\n", "not valid YAML: a value cannot be read as its"),
        ("advisor: {disable: [!!bool maybe]}\n", "not valid YAML: a value cannot be read as its"),
        ("baseline: {dir: 2001-02-30}\n", "not valid YAML: a value cannot be read as its"),
        ("statistics: {rounds: !!int ''}\n", "not valid YAML: a value cannot be read as its"),
        ("statistics: {rounds: " + "9" * 5000 + "}\n", "statistics.rounds: '99999999999999"),
        (
            f"statistics: {{rounds: {_HUGE_INT}}}\n",
            "statistics.rounds: <an integer of about 4000 digits> is not a whole number from 2 "
            "to 1,000,000",
        ),
        (f"{_HUGE_INT}: 1\n", "not valid YAML at line 1"),
        (
            "statistics: {rounds: 500000000, max_rounds: 900000000}\n",
            "statistics.rounds: 500000000 is not a whole number from 2 to 1,000,000",
        ),
        (
            "thresholds: {operators: {max_increase: '" + "9" * 400 + "%'}}\n",
            "thresholds.operators.max_increase: '9999999999",
        ),
        (
            "thresholds: {comm_ratio: {max_increase: 500pt}}\n",
            "thresholds.comm_ratio.max_increase: '500pt' is over 100pt, more than a ratio can",
        ),
        (
            # Accepted, it switched the utilization gate off: no drop crosses 150%.
            "thresholds: {utilization: {max_drop: 150%}}\n",
            "thresholds.utilization.max_drop: '150%' is no possible drop (at most 100%",
        ),
        (
            "benchmarks: {b: {thresholds: {utilization: {max_drop: 100%}}}}\n",
            "benchmarks.b.thresholds.utilization.max_drop: '100%' is no possible drop",
        ),
        (
            "thresholds: {operators: {min_share: 1000%}}\n",
            "thresholds.operators.min_share: '1000%' is over 100% of the step",
        ),
        ("statistics: {alpha: 5.0e-324}\n", "statistics.alpha: 5e-324 is not a probability"),
        ("statistics: {max_seconds: .nan}\n", "statistics.max_seconds: nan is not a number"),
        ("statistics: {max_seconds: .inf}\n", "statistics.max_seconds: inf is not a number"),
        ('baseline: {dir: "a\\0b"}\n', "baseline.dir: 'a\\x00b' is not a name git and the"),
        ("baseline: {env: " + "x" * 5000 + "}\n", "baseline.env: 'xxxxxxxxxxxxxxxxxxxxxxxx"),
        ("baseline: {branch: --all}\n", "baseline.branch: '--all' is no branch name"),
        ("benchmarks: {[a, b]: {}}\n", "not valid YAML"),
        ("benchmarks: {1.5: {}}\n", "benchmarks: 1.5 is no benchmark name"),
        ('benchmarks: {"a\\nb": {}}\n', "benchmarks: 'a\\nb' is no benchmark name"),
        ("benchmarks: {x" + "y" * 600 + ": {}}\n", "benchmarks: 'xyyyyyyyyyyyyyyyyyyy"),
        ("benchmarks: {1: {}, '1': {}}\n", "benchmarks: '1' is named twice"),
        (
            f"thresholds: {{step_time: {{max_increase: {_HUGE_INT}}}}}\n",
            "thresholds.step_time.max_increase: <an integer of about 4000 digits> is not a",
        ),
        (
            "thresholds: {step_time: {max_increase: 100000000000000000000%}}\n",
            "thresholds.step_time.max_increase: '100000000000000000000%' is too large (at most "
            "10000%",
        ),
        (
            "statistics: {rounds: 5}\nthresholds: {}\nstatistics: {rounds: 7}\n",
            "not valid YAML at line 3, column 1: found the key 'statistics' twice",
        ),
        ("baseline: {env: '..'}\n", "baseline.env: '..' is not a safe directory name"),
        ("baseline: {env: " + "x" * 129 + "}\n", "baseline.env: 'xxxxxxxxxxxxxxxx"),
        ("baseline: {dir: .}\n", "baseline.dir: '.' is the repository's root or inside git's"),
        ("baseline: {dir: .git/x}\n", "baseline.dir: '.git/x' is the repository's root or"),
    ],
)
def test_hostile_configuration_is_one_error_naming_the_key(
    tmp_path: Path, text: str, message: str
) -> None:
    path = tmp_path / "perfgate.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as excinfo:
        load_settings(path)
    shown = str(excinfo.value)
    assert shown.startswith(f"{path}: ") and message in shown, shown
    assert len(shown) < 400  # values shown bounded, whatever their size


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[tool.perfgate]\nx = " + "[" * 3000 + "]" * 3000 + "\n", "nested too deeply"),
        ("[tool.perfgate.statistics]\nrounds = " + "9" * 5000 + "\n", "not valid TOML"),
    ],
)
def test_hostile_pyproject_is_one_error(tmp_path: Path, text: str, message: str) -> None:
    (tmp_path / "pyproject.toml").write_text(text)
    with pytest.raises(ConfigError, match=message):
        load_settings(root=tmp_path)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[project]\nname = 'x'\n", "has no [tool.perfgate] table"),
        ("[tool]\nperfgate = false\n", "expected a mapping, got bool False"),
    ],
)
def test_a_pyproject_named_by_config_must_hold_settings(
    tmp_path: Path, text: str, message: str
) -> None:
    """``--config pyproject.toml`` names the settings on purpose: the defaults in their
    place would gate with thresholds nobody chose."""
    path = tmp_path / "pyproject.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_settings(path)


def test_long_benchmark_names_and_aliases_of_a_few_values_are_fine(tmp_path: Path) -> None:
    name = "test_train[" + "resnet50-" * 20 + "]"
    path = tmp_path / "perfgate.yaml"
    path.write_text(
        "benchmarks:\n"
        f"  '{name}': &strict {{thresholds: {{step_time: {{max_increase: 2%}}}}}}\n"
        "  bert: *strict\n  7: *strict\n"
    )
    settings = load_settings(path)
    for key in (name, "bert", "7"):
        assert settings.benchmarks[key].metrics["step_time"].threshold.value == 0.02


def test_a_directory_given_as_the_configuration_says_so(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as error:
        load_settings(tmp_path)
    assert str(error.value).startswith(f"{tmp_path}: is a directory (expected a configuration")
    with pytest.raises(ConfigError, match="configuration file not found"):
        load_settings(tmp_path / "perfgate.yaml")


def test_an_entry_is_named_only_when_it_looks_like_a_run_benchmark_without_its_own(
    tmp_path: Path,
) -> None:
    config = tmp_path / "perfgate.yaml"
    config.write_text(
        "benchmarks:\n"
        "  CNN_Train: {thresholds: {step_time: {max_increase: 8%}}}\n"  # case: cnn_train
        "  resnet50_trian: {thresholds: {step_time: {max_increase: 8%}}}\n"  # has its own
        "  resnet50_train: {thresholds: {step_time: {max_increase: 8%}}}\n"
        "  bert_large: {thresholds: {step_time: {max_increase: 8%}}}\n"  # not run: unnamed
    )
    settings = load_settings(config)
    run = ["cnn_train", "resnet50_train", "input_pipeline"]
    assert settings.misnamed(run) == [
        f"{config}: benchmarks.CNN_Train names no benchmark of this run; did you mean "
        "cnn_train? (that one has the default rules)"
    ]
    assert settings.misnamed(["CNN_Train", "resnet50_train"]) == []
    assert default_settings().misnamed(run) == []


@pytest.mark.parametrize("kind", ["directory", "dangling link", "fifo"])
def test_a_settings_file_that_is_no_file_is_an_error(tmp_path: Path, kind: str) -> None:
    # Each was skipped: the gate ran on [tool.perfgate] or the defaults without a word.
    (tmp_path / "pyproject.toml").write_text("[tool.perfgate]\nprofiler = 'none'\n")
    where = tmp_path / "perfgate.yaml"
    if kind == "directory":
        where.mkdir()
        said = "is a directory"
    elif kind == "dangling link":
        where.symlink_to(tmp_path / "gone.yaml")
        said = "is a symbolic link to nothing"
    else:
        os.mkfifo(where)
        said = "is no regular file (a FIFO, socket or device)"
    with pytest.raises(ConfigError) as raised:
        load_settings(root=tmp_path)
    assert str(raised.value) == f"{where}: {said} (expected a configuration file, or nothing there)"


@pytest.mark.parametrize(
    "present",
    [
        ("perfgate.yaml", "pyproject.toml"),
        ("perfgate.yaml", "perfgate.yml"),
        ("perfgate.yml", "pyproject.toml"),
        ("perfgate.yaml", "perfgate.yml", "pyproject.toml"),
    ],
)
def test_settings_in_two_places_are_refused_not_one_silently_ignored(
    tmp_path: Path, present: tuple[str, ...]
) -> None:
    # perfgate.yaml won: a [tool.perfgate] beside it, even one holding a bad value, was never
    # read, and the gate ran on other settings than the ones the user edited.
    texts = {
        "perfgate.yaml": "statistics: {alpha: 0.01}\n",
        "perfgate.yml": "thresholds: {step_time: {max_increase: 500%}}\n",
        "pyproject.toml": '[tool.perfgate]\nthresholds = {step_time = {max_increase = "banana"}}\n',
    }
    for name in present:
        (tmp_path / name).write_text(texts[name])
    with pytest.raises(ConfigError) as error:
        load_settings(None, root=tmp_path)
    places = [
        f"{tmp_path / name}" + (" [tool.perfgate]" if name == "pyproject.toml" else "")
        for name in present
    ]
    assert str(error.value) == (
        f"settings in {len(present)} places: {', '.join(places)} (perfgate reads one; keep "
        "the settings in one of them)"
    )


def test_a_pyproject_without_a_perfgate_section_beside_perfgate_yaml_is_no_second_place(
    tmp_path: Path,
) -> None:
    (tmp_path / "perfgate.yaml").write_text("statistics: {alpha: 0.01}\n")
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "model"\n[tool.ruff]\n')
    assert load_settings(None, root=tmp_path).source == str(tmp_path / "perfgate.yaml")


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        # pytest 9's pytest.toml in bench/ makes bench/ the rootdir: the plugin's store
        # was bench/baselines/, the CLI's the top's.
        ({"bench/pytest.toml": "[pytest]\n"}, "bench"),
        # A pyproject.toml without a pytest table is pytest's rootdir too (pytest ≥ 8.1).
        ({"bench/pyproject.toml": "[project]\nname = 'x'\n"}, "bench"),
        # An ini file at the top fixes the rootdir there, and the plugin looks for settings
        # from it upwards only: bench/perfgate.yaml is not the project's.
        ({"pytest.ini": "[pytest]\n", "bench/perfgate.yaml": "thresholds: {}\n"}, "."),
        # No pytest file: the nearest folder with perfgate's settings.
        ({"bench/perfgate.yaml": "thresholds: {}\n"}, "bench"),
        ({"perfgate.yaml": "thresholds: {}\n"}, "."),
    ],
)
def test_the_clis_project_folder_is_the_plugins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, files: dict[str, str], expected: str
) -> None:
    from perfgate.config import project_directory

    GitRepo(tmp_path)
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    (tmp_path / "bench" / "deeper").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "bench" / "deeper")
    assert Path(project_directory(".")).resolve() == (tmp_path / expected).resolve()


def test_numbers_read_as_written_and_merge_keys_share_settings(tmp_path: Path) -> None:
    # YAML 1.1 made `010` 8, `2:00` 120 and `0x10` 16, silently; `1e-3` was text.
    path = tmp_path / "perfgate.yaml"
    path.write_text(
        "statistics: {rounds: 010, max_rounds: 20, alpha: 1e-3}\n"
        "baseline: {max_depth: 0100}\n"
        "benchmarks:\n"
        "  a: &shared\n"
        "    thresholds: {step_time: {max_increase: 3%}}\n"
        "  b:\n"
        "    <<: *shared\n"
    )
    settings = load_settings(path)
    assert settings.rules.statistics.rounds == 10
    assert settings.rules.statistics.alpha == 0.001
    assert settings.baseline.max_depth == 100
    # A merge key (`<<: *shared`) was refused as "the tag '!!merge' is not taken".
    assert settings.benchmarks["b"].metrics["step_time"].threshold.text == "3%"
    for text, said in (
        ("statistics: {max_rounds: 2:00}\n", "statistics.max_rounds: '2:00' is not a whole"),
        ("measure: {threads: 0x10}\n", "measure.threads: '0x10' is not a whole number"),
        ("measure: {keep_memory: sometimes}\n", "measure.keep_memory: 'sometimes'"),
    ):
        path.write_text(text)
        with pytest.raises(ConfigError) as caught:
            load_settings(path)
        assert said in str(caught.value)


def test_session_statistics_of_one_benchmark_and_a_misspelt_table_are_refused(
    tmp_path: Path,
) -> None:
    # Both were read as if absent: ab_pairs and processes of a benchmarks entry (the session
    # takes its own), and [tool.perf-gate] (the defaults gated).
    path = tmp_path / "perfgate.yaml"
    for key in ("ab_pairs", "processes"):
        path.write_text(f"benchmarks: {{fast: {{statistics: {{{key}: 2}}}}}}\n")
        with pytest.raises(ConfigError) as caught:
            load_settings(path)
        assert f"benchmarks.fast.statistics.{key}: a setting of the" in str(caught.value)
        assert str(caught.value).endswith("(set it in the top-level statistics)")
    path.write_text("statistics: {processes: 2, ab_pairs: 2}\n")  # where they belong
    assert load_settings(path).rules.statistics.processes == 2
    path.unlink()
    (tmp_path / "pyproject.toml").write_text("[tool.perf-gate]\nstatistics = {rounds = 3}\n")
    with pytest.raises(ConfigError) as caught:
        load_settings(root=tmp_path)
    assert str(caught.value) == (
        f"{tmp_path / 'pyproject.toml'}: [tool.perf-gate] is no table perfgate reads "
        "(expected [tool.perfgate])"
    )

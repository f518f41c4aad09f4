"""`pytest --perfgate` as users run it (pytester): options, skipping, record → pass →
regression, reports."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import git
import pytest
from conftest import GitRepo

# runpytest runs pytest --perfgate in this process (conftest's in_process_runs explains).
pytestmark = pytest.mark.usefixtures("in_process_runs")

# A benchmark whose work per step is set by the environment: WORK=4 is 4× heavier.
BENCHMARK = """
import os

def test_matmul(perfgate):
    import torch  # only where the benchmark runs: option and usage tests need no torch

    size = 192
    work = int(os.environ.get("WORK", "1"))
    a = torch.randn(size, size)
    b = torch.randn(size, size)

    def step():
        for _ in range(8 * work):
            torch.mm(a, b)

    perfgate.run(step, steps=12, warmup=2, size=size)

def test_plain():
    assert True
"""


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    """A git repository with one benchmark file, committed on main."""
    pytester.makepyfile(test_bench=BENCHMARK)
    pytester.makeini("[pytest]\n")
    # CI machines are shared and noisy: a team sets the limits its runners can hold.
    (pytester.path / "perfgate.yaml").write_text(
        "thresholds:\n  step_time: {max_increase: 60%}\n  utilization: {max_drop: 15pt}\n"
    )
    repo = GitRepo(pytester.path)
    repo.write(".gitignore", "perfgate-out/\n__pycache__/\n")
    repo.commit("benchmark", "test_bench.py", "tox.ini", ".gitignore", "perfgate.yaml")
    return pytester


@pytest.fixture(params=[[], ["-n", "2"]], ids=["one process", "xdist"])
def workers(request: pytest.FixtureRequest) -> list[str]:
    """pytest's arguments for a session in one process, then in two xdist workers."""
    arguments: list[str] = request.param
    if arguments:
        pytest.importorskip("xdist")
    return arguments


def _commit_all(path: Path, message: str) -> str:
    return GitRepo(path).commit(message)


ONE_PROCESS = "statistics: {processes: 1}\n"


def _committed_project(path: Path, files: dict[str, str], message: str) -> GitRepo:
    """A git repository at ``path`` on main holding ``files`` and a .gitignore of perfgate's
    output, committed."""
    repo = GitRepo(path)
    repo.write(".gitignore", "perfgate-out/\n__pycache__/\n")
    for name, text in files.items():
        repo.write(name, text)
    repo.commit(message)
    return repo


def test_help_lists_the_options(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--help")
    result.stdout.fnmatch_lines(
        [
            "perfgate: performance-regression gate:",
            "*--perfgate *run the perfgate benchmarks under a profiler*",
            "*--perfgate-update*record the baselines of HEAD instead of comparing",
            "*--perfgate-profiler=NAME*",
            "*--perfgate-baseline-ref=REF*",
            "*--perfgate-strict*",
            "*--perfgate-config=FILE*",
            "*--perfgate-json=PATH*",
            "*--perfgate-md=PATH*",
            "*perfgate_profiler (string):*",
        ]
    )


def test_without_the_flag_benchmarks_are_skipped_with_a_reason(project: pytest.Pytester) -> None:
    result = project.runpytest("-rs")
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(
        ["*perfgate benchmark: run with --perfgate to measure and gate it*"]
    )
    assert not (project.path / "perfgate-out").exists()


def test_a_bad_profiler_is_a_usage_error_naming_the_allowed_values(
    project: pytest.Pytester,
) -> None:
    result = project.runpytest("--perfgate", "--perfgate-profiler=nsys")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "*argument --perfgate-profiler: 'nsys' is not a profiler perfgate knows "
            "(choose from auto, torch, torch_npu, msprof, none)*"
        ]
    )


@pytest.mark.parametrize(
    ("args", "says"),
    [
        # An unset shell variable (--perfgate-config=$CONFIG) read the default file silently.
        (["--perfgate-config="], "*argument --perfgate-config: is empty (expected a file; *"),
        (
            ["--perfgate-baseline-ref="],
            "*argument --perfgate-baseline-ref: is empty (expected a git ref; *",
        ),
        # An empty A/B base gated against the stored baselines instead, without a word.
        (["--perfgate-ab="], "*argument --perfgate-ab: is empty (expected a git ref)"),
        (["--perfgate-out="], "*argument --perfgate-out: is empty (expected a directory; *"),
        # The A/B run measures its base now: a baseline ref was ignored without a word.
        (
            ["--perfgate-ab=HEAD", "--perfgate-baseline-ref=HEAD"],
            "*--perfgate-ab compares with a base measured now, not with stored baselines: drop "
            "--perfgate-baseline-ref (or --perfgate-ab)*",
        ),
    ],
    ids=["empty config", "empty ref", "empty ab", "empty out", "ab with a baseline ref"],
)
def test_options_that_would_be_ignored_are_usage_errors(
    project: pytest.Pytester, args: list[str], says: str
) -> None:
    result = project.runpytest("--perfgate", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([says])
    out = project.path / "perfgate-out"
    assert not out.exists() or not any(out.iterdir())  # nothing measured, nothing written


def test_an_output_directory_that_cannot_be_made_is_a_usage_error_before_any_benchmark(
    project: pytest.Pytester,
) -> None:
    (project.path / "out").write_text("a file, not a directory\n")
    result = project.runpytest("--perfgate", "--perfgate-out=out")
    assert result.ret == pytest.ExitCode.USAGE_ERROR  # not 1 (read as a regression)
    result.stderr.fnmatch_lines(
        [
            f"*perfgate: output directory {project.path / 'out'}: cannot be made (a file is "
            "there); expected a directory perfgate may write in (--perfgate-out, or "
            "perfgate_out in the ini)"
        ]
    )


def test_a_bad_config_is_a_usage_error_naming_the_key(project: pytest.Pytester) -> None:
    (project.path / "perfgate.yaml").write_text("thresholds:\n  step_time: {max_increase: 5}\n")
    result = project.runpytest("--perfgate")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*perfgate.yaml: thresholds.step_time.max_increase: 5 is not a threshold*"]
    )


def test_no_baseline_passes_and_says_how_to_record_one(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, needs_torch: None
) -> None:
    summary = project.path / "step_summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    result = project.runpytest("--perfgate", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            "*= perfgate =*",
            "benchmark*verdict*step*",
            "matmul*no-baseline*",
            "*record them with `pytest --perfgate --perfgate-update`*",
        ]
    )
    results = json.loads((project.path / "perfgate-out" / "results.json").read_text())
    assert results["format"] == "perfgate.results"
    [run] = results["runs"]
    assert run["benchmark"] == "matmul"
    assert run["verdict"] == "no-baseline"
    assert len(run["samples"]["step_time_us"]) == 12  # the profiled pass
    timing = run["timing"]  # 5 rounds of 12 timed steps, one process
    assert len(timing["step_time_us"]) == 60
    assert sorted(set(timing["round"])) == [0, 1, 2, 3, 4]
    assert set(timing["process"]) == {0}
    assert run["fingerprint"]["threads"] == 1  # CPU rounds run on one torch thread
    if sys.platform == "linux":  # glibc here, whose malloc keeps what a step frees
        assert run["fingerprint"]["malloc"] == "kept"
    assert run["parameters"] == {"steps": 12, "warmup": 2, "profiler": "torch", "size": 192}
    assert any(op["op_type"] == "aten::mm" for op in run["operators"])
    markdown = summary.read_text()
    assert "`matmul`: no-baseline" in markdown
    assert markdown == (project.path / "perfgate-out" / "summary.md").read_text()


def test_record_then_pass_then_a_four_times_heavier_step_fails_on_step_time(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, needs_torch: None
) -> None:
    recorded = project.runpytest("--perfgate", "--perfgate-update")
    recorded.assert_outcomes(passed=2)
    head = git.Repo(project.path).head.commit.hexsha
    [baseline] = list((project.path / "baselines" / "matmul").glob(f"*/{head}.json"))
    stored = json.loads(baseline.read_text())
    assert stored["commit"] == head
    # Three processes, each with its profiled pass of 12 steps and at least 5 rounds.
    assert set(stored["samples"]["process"]) == {0, 1, 2}
    assert len(stored["samples"]["step_time_us"]) == 36
    timing = stored["timing"]
    assert set(timing["process"]) == {0, 1, 2}
    assert len(timing["step_time_us"]) >= 3 * 5 * 12
    _commit_all(project.path, "perfgate: baselines")

    same = project.runpytest("--perfgate")
    same.assert_outcomes(passed=2)
    # The baseline's commit: its column on a wide terminal, one line under the table on a
    # narrow one (this run's, at xdist's 80 columns).
    assert f"baseline: {head[:12]}" in same.stdout.str() or any(
        line.startswith("matmul ") and head[:12] in line for line in same.stdout.lines
    )

    monkeypatch.setenv("WORK", "4")
    heavier = project.runpytest("--perfgate")
    assert heavier.ret == pytest.ExitCode.TESTS_FAILED, heavier.stdout.str()
    heavier.assert_outcomes(passed=1, failed=1)
    heavier.stdout.fnmatch_lines(
        [
            "*?REGRESSION? matmul*",
            f"*! matmul: step_time regressed: * → * (+*%, limit +60%) vs baseline {head[:12]}*"
            "explained by aten::mm ?cpu? +* ms/step (calls/step 8 → 32)*",
        ]
    )
    results = json.loads((project.path / "perfgate-out" / "results.json").read_text())
    assert results["runs"][0]["verdict"] == "regression"


def test_update_refuses_a_dirty_tree(project: pytest.Pytester) -> None:
    (project.path / "test_bench.py").write_text(BENCHMARK + "\n# edited\n")
    result = project.runpytest("--perfgate", "--perfgate-update")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*the working tree has uncommitted changes*pass --perfgate-allow-dirty*"]
    )
    assert not (project.path / "baselines").exists()


MARKED = """
import pytest

@pytest.mark.perfgate(name="tiny-loop", thresholds={"step_time": {"max_increase": "1%"}})
def test_loop(perfgate):
    perfgate.run(lambda: sum(range(1000)), steps=5, warmup=1)
"""


def test_marker_names_the_benchmark_and_tightens_its_threshold(
    project: pytest.Pytester,
) -> None:
    project.makepyfile(test_marked=MARKED)
    result = project.runpytest("--perfgate", "--perfgate-profiler=none", "test_marked.py")
    result.assert_outcomes(passed=1)
    results = json.loads((project.path / "perfgate-out" / "results.json").read_text())
    [run] = results["runs"]
    assert run["benchmark"] == "tiny-loop"
    assert run["fingerprint"]["profiler"] == "none"
    assert run["samples"] == {"step": [], "step_time_us": [], "process": []}
    assert len(run["timing"]["step_time_us"]) == 5 * 5  # rounds × steps


def test_comparing_the_results_file_again_reaches_the_plugins_verdict(
    project: pytest.Pytester,
) -> None:
    # DESIGN §2: one gate, two doors. The marker's threshold (+1%) and the α of the look
    # that decided live in the test and the session, not in the settings: `perfgate compare`
    # of the results file judged with the configured +60% and all of α (0.01).
    project.makepyfile(test_marked=MARKED)
    _commit_all(project.path, "a marked benchmark")  # a baseline of HEAD measures HEAD's file
    args = ("--perfgate", "--perfgate-profiler=none", "-p", "no:cacheprovider", "test_marked.py")
    project.runpytest(*args, "--perfgate-update").assert_outcomes(passed=1)
    _commit_all(project.path, "perfgate: baselines")
    project.runpytest(*args)  # its verdict is the runner's to decide
    results = project.path / "perfgate-out" / "results.json"
    [run] = json.loads(results.read_text())["runs"]
    assert run["judged_by"]["thresholds"] == {"step_time": {"max_increase": "1%"}}
    alpha_look = run["judged_by"]["alpha_look"]
    assert 0 < alpha_look < 0.01  # the first of three looks spends part of α
    plugin = {m["name"]: m for m in run["comparison"]["metrics"]}
    assert plugin["step_time"]["threshold"] == "+1%"
    again = subprocess.run(
        [sys.executable, "-m", "perfgate", "compare", str(results), "--format", "json"],
        cwd=project.path,
        capture_output=True,
        text=True,
        check=False,
    )
    [cli] = json.loads(again.stdout)["benchmarks"]
    assert cli["verdict"] == run["verdict"]
    for metric in cli["metrics"]:
        assert metric["threshold"] == plugin[metric["name"]]["threshold"]
        assert metric["alpha_look"] == alpha_look
        assert metric["status"] == plugin[metric["name"]]["status"]
        assert metric["p_value"] == plugin[metric["name"]]["p_value"]
    # A results file whose written thresholds are no thresholds is one error naming it.
    document = json.loads(results.read_text())
    document["runs"][0]["judged_by"]["thresholds"] = {"step_time": {"max_increase": 5}}
    results.write_text(json.dumps(document))
    bad = subprocess.run(
        [sys.executable, "-m", "perfgate", "compare", str(results)],
        cwd=project.path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert bad.returncode == 2, bad.stderr
    assert f"{results}: the run of 'tiny-loop'.judged_by" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_a_bad_marker_argument_fails_with_the_allowed_ones(project: pytest.Pytester) -> None:
    project.makepyfile(
        test_bad="""
        import pytest

        @pytest.mark.perfgate(nmae="x")
        def test_loop(perfgate):
            perfgate.run(lambda: None, steps=2, warmup=0)
        """
    )
    result = project.runpytest("--perfgate", "test_bad.py")
    assert result.ret != 0
    result.stdout.fnmatch_lines(
        [
            "*@pytest.mark.perfgate has no argument 'nmae' (allowed: name, thresholds, steps, "
            "warmup)*"
        ]
    )


def test_parallel_workers_hand_their_results_to_one_report(
    project: pytest.Pytester, needs_torch: None
) -> None:
    pytest.importorskip("xdist")
    project.makepyfile(
        test_more="""
        def test_loop_a(perfgate):
            perfgate.run(lambda: sum(range(2000)), steps=4, warmup=1)

        def test_loop_b(perfgate):
            perfgate.run(lambda: sum(range(3000)), steps=4, warmup=1)
        """
    )
    result = project.runpytest("--perfgate", "--perfgate-profiler=none", "-n", "2", "test_more.py")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*= perfgate =*", "loop_a*no-baseline*", "loop_b*no-baseline*"])
    results = json.loads((project.path / "perfgate-out" / "results.json").read_text())
    assert sorted(r["benchmark"] for r in results["runs"]) == ["loop_a", "loop_b"]
    assert not list((project.path / "perfgate-out" / ".workers").glob("*.json"))


def test_plugin_is_inert_and_light_without_the_flag(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_light="""
        import sys

        def test_nothing_heavy_imported():
            assert "pandas" not in sys.modules
            assert "perfgate.analysis.metrics" not in sys.modules
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:benchmark", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    assert os.environ.get("PERFGATE_STEP_MARKS") is None


def _quick_benchmark(project: pytest.Pytester) -> str:
    """Add and commit ``test_quick.py``: one benchmark ("loop") of pure Python; its commit."""
    project.makepyfile(
        test_quick="""
        def test_loop(perfgate):
            perfgate.run(lambda: sum(range(20000)), steps=5, warmup=1)
        """
    )
    return _commit_all(project.path, "quick benchmark")


def test_baseline_ref_picks_the_baseline_and_an_unknown_ref_is_a_usage_error(
    project: pytest.Pytester,
) -> None:
    first = _quick_benchmark(project)
    recorded = project.runpytest(
        "--perfgate", "--perfgate-update", "--perfgate-profiler=none", "test_quick.py"
    )
    recorded.assert_outcomes(passed=1)
    processes = project.path / "perfgate-out" / "processes"
    assert sorted(p.name for p in processes.iterdir()) == ["1", "2"]
    _commit_all(project.path, "perfgate: baselines")
    (project.path / "notes.txt").write_text("later work\n")
    _commit_all(project.path, "later work")

    result = project.runpytest(
        "--perfgate",
        "--perfgate-profiler=none",
        f"--perfgate-baseline-ref={first[:10]}",
        "test_quick.py",
    )
    result.assert_outcomes(passed=1)
    results = json.loads((project.path / "perfgate-out" / "results.json").read_text())
    baseline = results["runs"][0]["comparison"]["baseline"]
    assert baseline["commit"] == first
    assert baseline["how"] == f"--baseline-ref {first[:10]}"
    assert baseline["distance"] == 0
    # The update's extra processes' records and traces were left beside this run's profile.
    assert not processes.exists()

    unknown = project.runpytest("--perfgate", "--perfgate-baseline-ref=nosuchref")
    assert unknown.ret == pytest.ExitCode.USAGE_ERROR
    unknown.stderr.fnmatch_lines(["*perfgate:*nosuchref*"])


def test_stored_baselines_that_git_cannot_look_up_fail_the_benchmark(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Any failure of git (no git on the runner, a checkout without .git, git refusing a
    # checkout owned by another user) read as "no-baseline": a pass over a 6× slower step.
    _quick_benchmark(project)
    run = ("--perfgate", "--perfgate-profiler=none", "test_quick.py")
    project.runpytest(*run, "--perfgate-update").assert_outcomes(passed=1)
    _commit_all(project.path, "perfgate: baselines")
    [env] = [p.name for p in (project.path / "baselines" / "loop").iterdir()]
    (project.path / ".git").rename(project.path / "git-kept")
    result = project.runpytest(*run)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*loop*ERROR*",
            f"loop: error: 1 baseline(s) of loop on {env} are stored, but none can be looked up: "
            f"{project.path}: not inside a git repository (run perfgate from a git checkout, "
            "or `git init` and commit first)",
        ]
    )
    (project.path / "git-kept").rename(project.path / ".git")
    monkeypatch.setenv("GIT_PYTHON_GIT_EXECUTABLE", str(project.path / "no-git"))
    result = project.runpytest_subprocess(*run)  # GitPython reads it when it is imported
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [f"loop: error: 1 baseline(s) of loop on {env} are stored, but none can be looked up: *"]
    )
    # With nothing stored for this runner there is nothing to miss: no-baseline, saying why
    # (another runner's baselines are not this one's).
    (project.path / "baselines" / "loop" / env).rename(project.path / "baselines" / "loop" / "npu")
    result = project.runpytest_subprocess(*run)
    result.assert_outcomes(passed=1)
    [run_] = json.loads((project.path / "perfgate-out" / "results.json").read_text())["runs"]
    assert run_["verdict"] == "no-baseline"
    assert run_["comparison"]["notes"][0].startswith("no baseline lookup: cannot run git")


def test_a_damaged_baseline_fails_the_benchmark_and_is_no_missing_one(
    project: pytest.Pytester,
) -> None:
    # A baseline cut short (a bad merge, a full disk) once read as "no-baseline": the test
    # passed, and every change went through unjudged.
    _quick_benchmark(project)
    run = ("--perfgate", "--perfgate-profiler=none", "test_quick.py")
    project.runpytest(*run, "--perfgate-update").assert_outcomes(passed=1)
    [stored] = (project.path / "baselines" / "loop").rglob("*.json")
    text = stored.read_text(encoding="utf-8")
    stored.write_text(text[: len(text) // 2], encoding="utf-8")

    result = project.runpytest(*run)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*loop*ERROR*",
            f"*the baseline store holds a file perfgate cannot use: {stored}: not valid JSON "
            "at line*; restore it from git, or delete it and record that commit's baseline "
            "again*",
        ]
    )
    [judged] = json.loads((project.path / "perfgate-out" / "results.json").read_text())["runs"]
    assert judged["verdict"] == "error"
    assert judged["comparison"]["baseline"]["path"] == str(stored)


# Careless use of the fixture, found by an audit of the plugin (docs/reliability.md): each
# test below was a pass that measured or recorded something other than what it said, a
# traceback out of pytest itself, or a setting silently replaced.
MISUSE = """
import math

import numpy as np
import pytest

def noop():
    pass

def test_set_parameter(perfgate):
    perfgate.run(noop, steps=3, warmup=1, shapes={1, 2})

def test_nan_parameter(perfgate):
    perfgate.run(noop, steps=3, warmup=1, lr=math.nan)

def test_surrogate_parameter(perfgate):
    perfgate.run(noop, steps=3, warmup=1, tag="\\ud800")

def test_reserved_parameter(perfgate):
    perfgate.run(noop, steps=3, warmup=1, profiler="torch")

def test_numpy_parameters(perfgate):
    perfgate.run(noop, steps=3, warmup=1, batch=np.int64(32), shape=(np.float32(0.5), [1]))

def test_twice(perfgate):
    perfgate.run(noop, steps=3, warmup=1)
    perfgate.run(noop, steps=3, warmup=1)

@pytest.mark.perfgate(warmup=0)
def test_marker_warmup_zero(perfgate):
    perfgate.run(noop, steps=3)

def test_fraction_of_steps(perfgate):
    perfgate.run(noop, steps=2.9)

def test_steps_as_words(perfgate):
    perfgate.run(noop, steps="three")

def test_no_step_function(perfgate):
    perfgate.run(None, steps=3)

async def async_step():
    noop()

def test_async_step(perfgate):
    perfgate.run(async_step, steps=3)

def generator_step():
    yield noop()

def test_generator_step(perfgate):
    perfgate.run(generator_step, steps=3)

def test_too_many_steps(perfgate):
    perfgate.run(noop, steps=10**12)

def test_command_line_as_text(perfgate):
    perfgate.command("python train.py")

def test_command_without_argv(perfgate):
    perfgate.command([])

def test_command_timeout_as_text(perfgate):
    perfgate.command(["python", "-c", "pass"], timeout="60")

def test_command_env_numbers(perfgate):
    perfgate.command(["python", "-c", "pass"], env={"OMP_NUM_THREADS": 1})

def test_command_cwd_missing(perfgate):
    perfgate.command(["python", "-c", "pass"], cwd="no/such/dir")

@pytest.mark.perfgate(name="loop")
def test_marker_without_fixture():
    pass

def test_fixture_without_run(perfgate):
    pass

@pytest.mark.perfgate(name="shared")
def test_shared_a(perfgate):
    perfgate.run(noop, steps=3, warmup=1)

@pytest.mark.perfgate(name="shared")
def test_shared_b(perfgate):
    perfgate.run(noop, steps=3, warmup=1)

@pytest.mark.perfgate(name="")
def test_empty_name(perfgate):
    perfgate.run(noop, steps=3, warmup=1)

@pytest.mark.perfgate(name="models/resnet")
def test_path_name(perfgate):
    perfgate.run(noop, steps=3, warmup=1)

@pytest.mark.perfgate(thresholds={"step_time": {"max_increase": "a lot"}})
def test_threshold_words(perfgate):
    perfgate.run(noop, steps=3, warmup=1)
"""

MISUSE_SAYS = {
    "test_set_parameter": "perfgate.run: parameter 'shapes': is a set ({1, 2}); parameters are "
    "stored as JSON: numbers, strings, booleans, None, and lists or mappings (string keys) "
    "of them",
    "test_nan_parameter": "perfgate.run: parameter 'lr': is nan, which JSON cannot hold; *",
    "test_surrogate_parameter": "perfgate.run: parameter 'tag': holds a lone UTF-16 "
    "surrogate, which is no text; *",
    "test_reserved_parameter": "perfgate.run: parameter 'profiler' is set by perfgate itself "
    "(steps, warmup, profiler); give yours another name",
    "test_twice": "perfgate.run: benchmark 'twice' was already measured in this test; measure "
    "one benchmark per test (parametrize the test for variants)",
    "test_fraction_of_steps": "perfgate: steps must be a whole number >= 1, got 2.9",
    "test_steps_as_words": "perfgate: steps must be a whole number >= 1, got 'three'",
    "test_no_step_function": "perfgate.run: step_fn must be callable (one step), got None",
    # Both were measured as the making of a coroutine or generator, a few µs, without a word.
    "test_async_step": "perfgate.run: step_fn <function async_step at *> is an async or "
    "generator function, whose call does not run its body *",
    "test_generator_step": "perfgate.run: step_fn <function generator_step at *> is an async "
    "or generator function, whose call does not run its body *",
    # 10**12 steps ran for ever, to be refused by the record's bounds at the end; the
    # command's arguments met subprocess's TypeErrors (a string ran 'p' as a program).
    "test_too_many_steps": "perfgate: steps must be at most 2,222 (a record keeps at most "
    "100,000 timed steps: steps × statistics.max_rounds 15 × statistics.processes 3), got "
    "1,000,000,000,000",
    "test_command_line_as_text": "perfgate.command: argv must be a list of arguments, got the "
    "string 'python train.py' (split it: shlex.split(...), *",
    "test_command_without_argv": "perfgate.command: argv must be a non-empty list of "
    "arguments, got []",
    "test_command_timeout_as_text": "perfgate.command: timeout must be a number of seconds > 0 "
    "(or None), got '60'",
    "test_command_env_numbers": "perfgate.command: env must map names to text values (str), "
    "got {'OMP_NUM_THREADS': 1}",
    "test_command_cwd_missing": "perfgate.command: cwd 'no/such/dir' is not a directory",
    "test_marker_without_fixture": "perfgate: test_misuse.py::test_marker_without_fixture: "
    "@pytest.mark.perfgate marks a test that does not take the perfgate fixture, so nothing "
    "would be measured or gated; *",
    "test_fixture_without_run": "perfgate: test_misuse.py::test_fixture_without_run took the "
    "perfgate fixture but measured nothing, so nothing was gated; call perfgate.run(step_fn) "
    "or perfgate.command([...])",
    "test_shared_a": "perfgate: benchmark name 'shared' is used by 2 tests "
    "(test_misuse.py::test_shared_a, test_misuse.py::test_shared_b): a name is a baseline's "
    "place, so give each its own @pytest.mark.perfgate(name=...)",
    "test_empty_name": "perfgate: test_misuse.py::test_empty_name: @pytest.mark.perfgate: name "
    "must be a non-empty string, got ''",
    "test_path_name": "perfgate: test_misuse.py::test_path_name: @pytest.mark.perfgate: name "
    "'models/resnet' cannot be used in a baseline path (expected 1 to 128 letters, digits, "
    "'.', '_' or '-', not starting with '.')",
    "test_threshold_words": "perfgate: test_misuse.py::test_threshold_words: "
    "@pytest.mark.perfgate.thresholds.step_time.max_increase: 'a lot' is not a threshold "
    "(expected e.g. 5% or 2ms or 500us)",
}
# Refused before the test ran, each is reported under the name it asked for, else its default.
REFUSED_AS = {
    "test_marker_without_fixture": "loop",
    "test_shared_a": "shared",
    "test_empty_name": "empty_name",
    "test_path_name": "path_name",
}


MEASURED_BY_FIXTURES = """
import pytest

@pytest.fixture
def measured_after(perfgate):
    yield
    perfgate.run(lambda: sum(range(2000)), steps=5, warmup=1)

@pytest.fixture
def model(perfgate):
    yield perfgate

def test_teardown_measures(measured_after):
    pass

def test_forgets_to_measure(model):
    pass

def test_skipped(model):
    pytest.skip("needs an accelerator")
"""


def test_a_fixture_may_measure_in_its_teardown(
    project: pytest.Pytester, workers: list[str]
) -> None:
    # A yield fixture measuring after the test was refused as "measured nothing" while the
    # table showed its measurement.
    project.makepyfile(test_fixtures=MEASURED_BY_FIXTURES)
    result = project.runpytest(
        "--perfgate", "--perfgate-profiler=none", *workers, "test_fixtures.py"
    )
    outcomes = result.parseoutcomes()
    # test_forgets_to_measure's call passed; its teardown is the error that says why.
    assert (outcomes.get("passed"), outcomes.get("skipped"), outcomes.get("errors")) == (
        2,
        1,
        1,
    ), result.stdout.str()
    assert "failed" not in outcomes
    result.stdout.fnmatch_lines(
        [
            "*ERROR at teardown of test_forgets_to_measure*",
            "perfgate: test_fixtures.py::test_forgets_to_measure took the perfgate fixture but "
            "measured nothing, so nothing was gated; *",
        ]
    )
    runs = json.loads((project.path / "perfgate-out" / "results.json").read_text())["runs"]
    verdicts = {run["benchmark"]: run["verdict"] for run in runs}
    assert verdicts == {"teardown_measures": "no-baseline", "forgets_to_measure": "error"}


def test_careless_benchmarks_fail_saying_what_to_change(
    project: pytest.Pytester, workers: list[str]
) -> None:
    project.makepyfile(test_misuse=MISUSE)
    result = project.runpytest("--perfgate", "--perfgate-profiler=none", *workers, "test_misuse.py")
    outcomes = result.parseoutcomes()
    # The set and the NaN were a traceback out of pytest_sessionfinish (no results at all);
    # under xdist the set silently dropped the benchmark from the results.
    assert outcomes.get("passed") == 2, result.stdout.str()
    assert (outcomes.get("failed"), outcomes.get("errors")) == (17, 6)
    text = result.stdout.str()
    assert "Traceback" not in text and "INTERNALERROR" not in text
    for test, says in MISUSE_SAYS.items():
        result.stdout.fnmatch_lines([f"_* {test} _*", says])
    runs = json.loads((project.path / "perfgate-out" / "results.json").read_text())["runs"]
    by_name = {run["benchmark"]: run for run in runs}
    assert by_name["numpy_parameters"]["parameters"] == {
        "steps": 3,
        "warmup": 1,
        "profiler": "none",
        "batch": 32,
        "shape": [0.5, [1]],
    }
    # The marker's 0 was taken for "unset": the run warmed up 3 steps.
    assert by_name["marker_warmup_zero"]["parameters"]["warmup"] == 0
    measured = {name for name, run in by_name.items() if run["verdict"] != "error"}
    assert measured == {"marker_warmup_zero", "numpy_parameters"}
    # The misused benchmarks were left out of the reports, whose summary said no-baseline
    # over them: each is an error there, saying what to change — the 5 refused before their
    # test ran too (the two tests sharing a name once, under that name).
    errors = {n: r["comparison"]["notes"] for n, r in by_name.items() if r["verdict"] == "error"}
    assert len(errors) == 22
    # Measured once, then misused: an error too (its first verdict stood in every report).
    assert errors["twice"] == [
        "perfgate.run was called a second time in this test; measure one benchmark per test "
        "(parametrize the test for variants)"
    ]
    assert by_name["twice"]["samples"]  # the first measurement's figures stay
    for test, says in MISUSE_SAYS.items():
        name = REFUSED_AS.get(test, test.removeprefix("test_"))
        if name == "twice":
            continue
        # The same words (the stars: object addresses, tails).
        assert errors[name][0].startswith("not measured: "), name
        words = says.removeprefix("perfgate: ").split("*")
        assert all(part in errors[name][0] for part in words), errors[name]


FAILING_ELSEWHERE = """
import pytest

@pytest.fixture
def leaky():
    yield
    raise RuntimeError("left a file open")

def test_gated(perfgate):
    perfgate.run(lambda: sum(range(200)), steps=3, warmup=1)

def test_checked_after(perfgate):
    perfgate.run(lambda: sum(range(200)), steps=3, warmup=1)
    assert False, "the output is wrong"

def test_teardown(perfgate, leaky):
    perfgate.run(lambda: sum(range(200)), steps=3, warmup=1)

def test_plain():
    assert 1 + 1 == 3
"""


def test_the_results_say_which_tests_failed_for_other_reasons_than_a_verdict(
    project: pytest.Pytester, workers: list[str]
) -> None:
    project.makepyfile(test_elsewhere=FAILING_ELSEWHERE)
    run = ("--perfgate", "--perfgate-profiler=none", *workers, "test_elsewhere.py")
    result = project.runpytest(*run)
    result.assert_outcomes(passed=2, failed=2, errors=1)
    document = json.loads((project.path / "perfgate-out" / "results.json").read_text())
    assert document["strict"] is False
    # The reports held only verdicts (no-baseline), and the Action's verdict over them read
    # a regression elsewhere as the whole story.
    assert sorted(document["failed_elsewhere"], key=lambda f: f["test"]) == [
        {"test": "test_elsewhere.py::test_checked_after", "when": "call"},
        {"test": "test_elsewhere.py::test_plain", "when": "call"},
        {"test": "test_elsewhere.py::test_teardown", "when": "teardown"},
    ]
    # --perfgate-strict fails a benchmark without baseline: that failure is its verdict's.
    result = project.runpytest(*run, "--perfgate-strict", "-k", "gated")
    result.assert_outcomes(failed=1)
    document = json.loads((project.path / "perfgate-out" / "results.json").read_text())
    assert (document["strict"], document["failed_elsewhere"]) == (True, [])


REFUSED_EVERYWHERE = """
import pytest

@pytest.mark.perfgate(name="foo", warmups=1)
@pytest.mark.parametrize("batch", [1, 2, 3, 4])
def test_typo(perfgate, batch):
    perfgate.run(lambda: sum(range(200)), steps=3)

@pytest.fixture
def strict_in_setup(perfgate):
    perfgate.run(lambda: sum(range(200)), steps=3, warmup=1)

def test_measured_by_a_fixture(strict_in_setup):
    pass

def test_wrapping_the_verdict(perfgate):
    try:
        perfgate.run(lambda: sum(range(200)), steps=3, warmup=1)
    except BaseException as exc:
        raise RuntimeError("the benchmark harness failed") from exc

@pytest.mark.xfail(reason="thresholds being reworked")
@pytest.mark.perfgate(thresholds={"step_time": {"max_increase": "a lot"}})
def test_expected_refusal(perfgate):
    perfgate.run(lambda: sum(range(200)), steps=3)
"""


def test_refusals_across_workers_and_verdicts_in_fixtures_keep_the_results_readable(
    project: pytest.Pytester, workers: list[str]
) -> None:
    project.makepyfile(test_refused=REFUSED_EVERYWHERE)
    result = project.runpytest(
        "--perfgate", "--perfgate-profiler=none", "--perfgate-strict", *workers, "test_refused.py"
    )
    # Four cases of one misspelt marker on two workers, each saying its own node id, were
    # two runs of 'foo': a results file no door would read (pytest exit 3 under xdist).
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    path = project.path / "perfgate-out" / "results.json"
    document = json.loads(path.read_text())
    by_name = {run["benchmark"]: run for run in document["runs"]}
    assert sorted(by_name) == ["foo", "measured_by_a_fixture", "wrapping_the_verdict"]
    notes = by_name["foo"]["comparison"]["notes"]
    assert len(notes) == 4 and all("has no argument 'warmups'" in n for n in notes), notes
    # --perfgate-strict failed the benchmark a fixture ran, at setup: its verdict's failure,
    # which was listed as a test failed "for other reasons". The xfail-marked refusal (a
    # green XFAIL in pytest) was an error in the reports.
    assert by_name["measured_by_a_fixture"]["verdict"] == "no-baseline"
    assert sorted(f["test"] for f in document["failed_elsewhere"]) == [
        f"test_refused.py::test_typo[{batch}]" for batch in (1, 2, 3, 4)
    ]
    report = project.run(sys.executable, "-m", "perfgate", "report", str(path))
    assert report.ret == 2, report.stderr.str()  # foo's error, read and rendered
    assert "[ERROR] foo" in report.stdout.str()


FLAKY = """
from pathlib import Path

def test_flaky(perfgate):
    marker = Path("attempted")
    first = not marker.exists()
    marker.touch()

    def step():
        if first:
            raise ConnectionError("the data loader lost its worker")

    perfgate.run(step, steps=3, warmup=1)
"""


def test_a_rerun_benchmark_is_one_run_in_the_results_its_last_attempt(
    project: pytest.Pytester, workers: list[str]
) -> None:
    pytest.importorskip("pytest_rerunfailures")
    project.makepyfile(test_flaky=FLAKY)
    result = project.runpytest(
        "--perfgate", "--perfgate-profiler=none", "--reruns", "1", *workers, "test_flaky.py"
    )
    # Each attempt added a run of 'flaky': pytest green, and a results file that compare,
    # report and baseline update all refused ("runs[1] … is already runs[0]").
    assert {k: v for k, v in result.parseoutcomes().items() if k in ("passed", "rerun")} == {
        "passed": 1,
        "rerun": 1,
    }, result.stdout.str()
    path = project.path / "perfgate-out" / "results.json"
    [run] = json.loads(path.read_text())["runs"]
    assert (run["benchmark"], run["verdict"]) == ("flaky", "no-baseline")
    update = project.run(sys.executable, "-m", "perfgate", "baseline", "update", "--from", path)
    assert update.ret == 0, update.stderr.str()


CRASHING = """
def test_steady(perfgate):
    perfgate.run(lambda: sum(range(200)), steps=3, warmup=1)

def test_crashing(perfgate):
    calls = []

    def step():
        calls.append(1)
        if len(calls) > 2:
            raise ValueError("shapes (3, 4) and (5, 6) not aligned")

    perfgate.run(step, steps=3, warmup=1)
"""


def test_a_benchmark_that_crashes_is_an_error_in_every_report(project: pytest.Pytester) -> None:
    project.makepyfile(test_crash=CRASHING)
    out = project.path / "perfgate-out"
    out.mkdir()
    (out / "summary.md").write_text("### perfgate: ✅ pass\n")  # an earlier session's
    (out / "report.html").write_text(
        '<meta name="generator" content="perfgate 0.1"><h1>pass</h1>\n'
    )
    result = project.runpytest(
        "--perfgate", "--perfgate-profiler=none", "--perfgate-html=perfgate-out/report.html",
        "-k", "nothing",
    )  # fmt: skip
    # A session that measured nothing left the last one's verdict in place (the HTML page
    # too, after the results file and summary were cleared).
    assert not (out / "summary.md").exists()
    assert not (out / "report.html").exists()

    result = project.runpytest("--perfgate", "--perfgate-profiler=none", "test_crash.py")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*ValueError: shapes (3, 4) and (5, 6) not aligned",
            "crashing *ERROR *n/a*",
            "steady *no-baseline*",
            "crashing: error: not measured: ValueError: shapes (3, 4) and (5, 6) not aligned",
        ]
    )
    # It was left out: the job summary said "✅ pass" over a failed benchmark.
    summary = (out / "summary.md").read_text()
    assert summary.startswith("### perfgate: 💥 error\n")
    assert "> not measured: ValueError: shapes (3, 4) and (5, 6) not aligned" in summary
    runs = json.loads((out / "results.json").read_text())["runs"]
    assert [(r["benchmark"], r["verdict"]) for r in runs] == [
        ("crashing", "error"),
        ("steady", "no-baseline"),
    ]
    # Nothing to make a baseline of: refused, and the measured one can be picked.
    cli = [sys.executable, "-m", "perfgate", "baseline", "update", "--from", f"{out}/results.json"]
    update = project.run(*cli)
    assert update.ret == 2
    assert update.stderr.str().strip() == (
        "perfgate: error: crashing: holds no measurement (its verdict: error), so it can be "
        "no baseline; nothing was written (pick the measured ones with --benchmark)"
    )
    assert not (project.path / "baselines").exists()
    picked = project.run(*cli, "--benchmark", "steady")
    assert picked.ret == 0
    assert picked.stdout.str().startswith("recorded baselines/steady/")
    # The other door, `perfgate compare`, said NO-BASELINE against the store and PASS
    # against a given file (rc 0): the crash is an error there too, with its reason.
    compare = [sys.executable, "-m", "perfgate", "compare"]
    for sides in (
        [f"{out}/results.json"],
        [f"{out}/results.json", f"{out}/results.json", "--benchmark", "crashing"],
    ):
        gated = project.run(*compare, *sides)
        assert gated.ret == 2, sides
        text = gated.stdout.str()
        assert "[ERROR] crashing" in text, sides
        assert "not measured: ValueError: shapes (3, 4) and (5, 6) not aligned" in text, sides


CRASHING_OTHERWISE = """
import sys
import pytest

class Unprintable(Exception):
    def __str__(self):
        raise RuntimeError("no message")

def test_steady(perfgate):
    perfgate.run(lambda: sum(range(200)), steps=3, warmup=1)

def test_exits(perfgate):
    perfgate.run(lambda: sys.exit(3), steps=3, warmup=1)

def test_fails(perfgate):
    perfgate.run(lambda: pytest.fail("shapes differ"), steps=3, warmup=1)

def test_unprintable(perfgate):
    def step():
        raise Unprintable()
    perfgate.run(step, steps=3, warmup=1)

def test_before_run(perfgate):
    raise KeyError("no such layer")

def test_idle(perfgate):
    pass

@pytest.mark.xfail(reason="a known crash")
def test_expected(perfgate):
    perfgate.run(lambda: 1 / 0, steps=3, warmup=1)

def test_skipped(perfgate):
    perfgate.run(lambda: pytest.skip("no device"), steps=3, warmup=1)
"""


def test_every_crash_of_a_benchmark_is_an_error_in_the_reports_but_skips_and_xfails(
    project: pytest.Pytester, workers: list[str]
) -> None:
    # SystemExit and pytest.fail in the step, an exception whose message raises, a crash
    # before perfgate.run: pytest failed them, the reports left them out ("no-baseline" over
    # the session). An xfail-marked crash was an error there, failing the job's summary over
    # a green pytest.
    project.makepyfile(test_crash=CRASHING_OTHERWISE)
    result = project.runpytest("--perfgate", "--perfgate-profiler=none", *workers, "test_crash.py")
    result.assert_outcomes(passed=1, failed=5, skipped=1, xfailed=1)
    runs = json.loads((project.path / "perfgate-out" / "results.json").read_text())["runs"]
    said = {r["benchmark"]: (r["verdict"], r["comparison"]["notes"]) for r in runs}
    assert said == {
        "before_run": ("error", ["not measured: KeyError: 'no such layer'"]),
        "exits": ("error", ["not measured: SystemExit: 3"]),
        "fails": ("error", ["not measured: shapes differ"]),
        "idle": (
            "error",
            [
                "not measured: test_crash.py::test_idle took the perfgate fixture but measured "
                "nothing, so nothing was gated; call perfgate.run(step_fn) or "
                "perfgate.command([...])"
            ],
        ),
        "steady": ("no-baseline", said["steady"][1]),
        "unprintable": ("error", ["not measured: Unprintable: (its message could not be shown)"]),
    }
    summary = (project.path / "perfgate-out" / "summary.md").read_text()
    assert summary.startswith("### perfgate: 💥 error\n")


LOOP = """
def test_loop(perfgate):
    perfgate.run(lambda: sum(range(300)), steps=3, warmup=1)
"""


def test_from_a_subfolder_the_settings_and_store_are_the_repositorys(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No pytest ini: pytest's rootdir is wherever pytest is started.
    _committed_project(
        pytester.path, {"perfgate.yaml": ONE_PROCESS, "bench/test_loop.py": LOOP}, "benchmarks"
    )
    monkeypatch.chdir(pytester.path / "bench")
    result = pytester.runpytest(
        "--perfgate", "--perfgate-update", "--perfgate-profiler=none", "test_loop.py"
    )
    result.assert_outcomes(passed=1)
    # It took bench/ for the root: no settings (three processes measured, not one), the
    # baseline under bench/baselines, where a run from the top would never look.
    assert "measuring in process 2" not in result.stdout.str()
    assert (pytester.path / "baselines" / "loop").is_dir()
    assert not (pytester.path / "bench" / "baselines").exists()
    assert (pytester.path / "perfgate-out" / "results.json").is_file()
    # A path given on the command line is the caller's, as any shell user reads it.
    result = pytester.runpytest(
        "--perfgate", "--perfgate-profiler=none", "--perfgate-out=mine", "test_loop.py"
    )
    result.assert_outcomes(passed=1)
    assert (pytester.path / "bench" / "mine" / "results.json").is_file()


def test_ini_paths_are_the_ini_files(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = GitRepo(pytester.path)
    repo.write("pytest.ini", "[pytest]\nperfgate_config = conf/gate.yaml\nperfgate_out = out\n")
    repo.write("conf/gate.yaml", "statistics: {processes: 1}\n")
    repo.write("bench/test_loop.py", LOOP)
    repo.commit("benchmarks")
    monkeypatch.chdir(pytester.path / "bench")
    result = pytester.runpytest("--perfgate", "--perfgate-profiler=none")
    # It read conf/gate.yaml from the folder pytest started in: "configuration file not found".
    result.assert_outcomes(passed=1)
    assert (pytester.path / "out" / "results.json").is_file()


@pytest.mark.parametrize(
    ("options", "says"),
    [
        (["--perfgate-json=reports"], "--perfgate-json: *reports is a directory (expected a file"),
        (["--perfgate-md=reports"], "--perfgate-md: *reports is a directory (expected a file"),
        (
            ["--perfgate-json=r.json", "--perfgate-html=r.json"],
            "--perfgate-json and --perfgate-html name the same file *r.json: one report would "
            "replace the other",
        ),
        (["--perfgate-html=test_bench.py/r.html"], "--perfgate-html: *test_bench.py/r.html cannot"),
    ],
)
def test_report_paths_are_checked_before_anything_runs(
    project: pytest.Pytester, options: list[str], says: str
) -> None:
    (project.path / "reports").mkdir()
    result = project.runpytest("--perfgate", "--perfgate-profiler=none", *options)
    # They were found out after every benchmark had run, with pytest's internal-error code;
    # and json = html left the HTML page in the results file, exit 0.
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: perfgate: {says}*"])
    assert "test_matmul" not in result.stdout.str()


def test_session_settings_that_cannot_work_are_usage_errors(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(test_loop=LOOP)
    # Outside git: each benchmark was measured, then each test failed the same way.
    result = pytester.runpytest("--perfgate", "--perfgate-update")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "ERROR: perfgate: --perfgate-update records the baselines of HEAD, but *: not "
            "inside a git repository (run perfgate from a git checkout, or `git init` and "
            "commit first)"
        ]
    )
    # A repository without commits was said to be no repository.
    subprocess.run(["git", "init", "-q"], cwd=pytester.path, check=True)
    result = pytester.runpytest("--perfgate", "--perfgate-update")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "ERROR: perfgate: --perfgate-update records the baselines of HEAD, but *: the git "
            "repository has no commits yet (commit first: baselines are keyed by commit)"
        ]
    )
    shutil.rmtree(pytester.path / ".git")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(pytester.path))
    result = pytester.runpytest("--perfgate")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: perfgate: $GITHUB_STEP_SUMMARY: * is no file*"])
    monkeypatch.delenv("GITHUB_STEP_SUMMARY")
    pytester.makeini("[pytest]\nperfgate_strict = maybe\n")
    result = pytester.runpytest("--perfgate")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["ERROR: perfgate: ini option perfgate_strict: *'maybe'* (expected true or false)"]
    )


def test_an_interrupted_session_says_so_in_its_reports(project: pytest.Pytester) -> None:
    project.makepyfile(
        test_stop="""
        def test_first(perfgate):
            perfgate.run(lambda: sum(range(200)), steps=3, warmup=1)

        def test_second(perfgate):
            raise KeyboardInterrupt  # Ctrl-C while the second benchmark runs

        def test_third(perfgate):
            perfgate.run(lambda: sum(range(200)), steps=3, warmup=1)
        """
    )
    result = project.runpytest_subprocess("--perfgate", "--perfgate-profiler=none", "test_stop.py")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    note = (
        "the session was interrupted: only the benchmarks that finished are listed, and the "
        "others were not gated"
    )
    result.stdout.fnmatch_lines(["first *no-baseline*", note])
    # It read as a whole session's report of one benchmark.
    summary = (project.path / "perfgate-out" / "summary.md").read_text()
    assert summary.startswith(f"> **{note}**\n\n### perfgate: ")


def test_a_misspelt_benchmarks_entry_is_named_with_the_benchmark_it_missed(
    project: pytest.Pytester,
) -> None:
    # "loops" was meant for the benchmark "loop", which was judged by the defaults instead;
    # resnet50_train is simply not part of this run and is not named.
    (project.path / "perfgate.yaml").write_text(
        "benchmarks:\n"
        "  loops: {thresholds: {step_time: {max_increase: 50%}}}\n"
        "  resnet50_train: {thresholds: {step_time: {max_increase: 50%}}}\n"
    )
    _quick_benchmark(project)
    result = project.runpytest("--perfgate", "--perfgate-profiler=none", "test_quick.py")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "warning: */perfgate.yaml: benchmarks.loops names no benchmark of this run; "
            "did you mean loop? (that one has the default rules)"
        ]
    )
    assert "resnet50_train" not in result.stdout.str()


MODULE_MARKED = """
import pytest

pytestmark = pytest.mark.perfgate(steps=3, warmup=1)

def test_loop(perfgate):
    perfgate.run(lambda: sum(range(300)))

def test_model_output():
    assert sum(range(4)) == 6

class TestShapes:
    pytestmark = pytest.mark.perfgate(thresholds={"step_time": {"max_increase": "50%"}})

    def test_shape(self):
        assert [0] * 3 == [0, 0, 0]
"""


def test_a_module_or_class_marker_leaves_the_plain_tests_in_it_alone(
    pytester: pytest.Pytester,
) -> None:
    # `pytestmark = pytest.mark.perfgate(...)` set the benchmarks' defaults and skipped
    # every plain test of the module in normal runs (an error with --perfgate): unit tests
    # silently never ran in CI.
    pytester.makepyfile(test_marked=MODULE_MARKED)
    result = pytester.runpytest("-rs", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, skipped=1)
    result = pytester.runpytest("--perfgate", "--perfgate-profiler=none", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=3)
    results = json.loads((pytester.path / "perfgate-out" / "results.json").read_text())
    assert [run["benchmark"] for run in results["runs"]] == ["loop"]
    assert results["runs"][0]["parameters"]["steps"] == 3  # the module's marker applies


def test_a_marker_on_a_test_without_the_fixture_runs_it_as_a_plain_test(
    pytester: pytest.Pytester,
) -> None:
    # On the function itself it is a mistake perfgate names when it measures; without
    # --perfgate the test runs as what it is.
    pytester.makepyfile(
        test_plain="import pytest\n\n@pytest.mark.perfgate(steps=3)\ndef test_x():\n    pass\n"
    )
    pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=1)
    result = pytester.runpytest("--perfgate", "-p", "no:cacheprovider")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*marks a test that does not take the perfgate fixture*"])


def test_update_with_pytests_cache_options_measures_in_every_process(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The extra processes run without pytest's cache: --lf (here also from PYTEST_ADDOPTS)
    # made each of them a usage error, and the baseline carried one process, silently.
    project.path.joinpath("test_bench.py").write_text(LOOP)
    _commit_all(project.path, "loop")
    monkeypatch.setenv("PYTEST_ADDOPTS", "--ff --sw")
    result = project.runpytest(
        "--perfgate", "--perfgate-update", "--perfgate-profiler=none", "--lf", "--lfnf", "all"
    )
    result.assert_outcomes(passed=1)
    output = result.stdout.str()
    assert "measuring in process 3 of 3" in output
    assert "exited with" not in output
    [stored] = (project.path / "baselines" / "loop").glob("*/*.json")
    record = json.loads(stored.read_text())
    assert sorted(set(record["timing"]["process"])) == [0, 1, 2]
    assert not [note for note in record.get("notes", []) if "exited with" in note]


def test_a_measuring_process_that_fails_is_said_in_the_terminal(project: pytest.Pytester) -> None:
    # An ini addopts that only this session's pytest accepts: each extra process refuses it.
    project.path.joinpath("test_bench.py").write_text(LOOP)
    project.path.joinpath("tox.ini").write_text("[pytest]\naddopts = --lf\n")
    _commit_all(project.path, "loop, --lf in the ini")
    result = project.runpytest("--perfgate", "--perfgate-update", "--perfgate-profiler=none")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "perfgate: warning: process 2 exited with 4 (*unrecognized arguments: --lf*); it "
            "measured nothing: the baselines will carry fewer processes than "
            "statistics.processes asks"
        ]
    )


SETUP_FAILS = """
import pytest

@pytest.fixture
def model():
    raise OSError("checkpoint download failed")

@pytest.fixture(scope="module")
def shared(perfgate):
    return perfgate

def test_ok(perfgate):
    perfgate.run(lambda: sum(range(300)), steps=3, warmup=1)

def test_needs_model(perfgate, model):
    perfgate.run(lambda: model(1), steps=3, warmup=1)

def test_scope_mismatch(shared):
    shared.run(lambda: sum(range(300)), steps=3, warmup=1)
"""


def test_a_benchmark_whose_fixture_fails_is_an_error_in_every_report(
    pytester: pytest.Pytester, workers: list[str]
) -> None:
    # It was in no report: the table, summary.md and the PR comment said "no-baseline" for
    # the one that ran, over a benchmark that never measured.
    pytester.makepyfile(test_setup=SETUP_FAILS)
    result = pytester.runpytest(
        "--perfgate", "--perfgate-profiler=none", "-p", "no:cacheprovider", *workers
    )
    result.assert_outcomes(passed=1, errors=2)
    results = json.loads((pytester.path / "perfgate-out" / "results.json").read_text())
    verdicts = {run["benchmark"]: run["verdict"] for run in results["runs"]}
    assert verdicts == {"ok": "no-baseline", "needs_model": "error", "scope_mismatch": "error"}
    notes = {run["benchmark"]: run["comparison"]["notes"] for run in results["runs"]}
    assert notes["needs_model"] == [
        "not measured: test_setup.py::test_needs_model failed in setup: OSError: checkpoint "
        "download failed"
    ]
    assert notes["scope_mismatch"][0].startswith(
        "not measured: test_setup.py::test_scope_mismatch failed in setup: Failed: ScopeMismatch"
    )
    summary = (pytester.path / "perfgate-out" / "summary.md").read_text()
    assert summary.startswith("### perfgate: 💥 error\n")
    assert "needs_model" in summary and "checkpoint download failed" in summary


SHARD = """
def test_train(perfgate):
    perfgate.run(lambda: sum(range({size})), steps=3, warmup=1)
"""
SHAPES = """
import pytest

@pytest.mark.parametrize("shape", [(64,), (16,)])
def test_shapes(perfgate, shape):
    perfgate.run(lambda: sum(range(shape[0])), steps=3, warmup=1)
"""


def test_a_baseline_of_another_file_under_the_same_name_is_incomparable(
    pytester: pytest.Pytester,
) -> None:
    # Two folders run apart (a CI matrix by folder): b's test_train was judged against a's
    # baseline, a false regression. The record now says which test measured it, by its
    # path in the repository (pytest's rootdir here is the folder given, a/ or b/).
    shards = {
        "perfgate.yaml": ONE_PROCESS,
        "a/test_m.py": SHARD.format(size=300) + SHAPES,
        "b/test_m2.py": SHARD.format(size=300_000),
    }
    repo = _committed_project(pytester.path, shards, "two shards")
    args = ("--perfgate", "--perfgate-profiler=none", "-p", "no:cacheprovider")
    pytester.runpytest(*args, "--perfgate-update", "a").assert_outcomes(passed=3)
    baselines = pytester.path / "baselines"
    [stored] = (baselines / "train").glob("*/*.json")
    assert json.loads(stored.read_text())["test"] == {"id": "a/test_m.py::test_train"}
    [stored] = (baselines / "shapes-shape0").glob("*/*.json")
    assert json.loads(stored.read_text())["test"] == {
        "id": "a/test_m.py::test_shapes[shape0]",
        "params": {"shape": "(64,)"},
    }
    repo.commit("baselines")

    result = pytester.runpytest(*args, "b")
    result.assert_outcomes(passed=1)
    results = json.loads((pytester.path / "perfgate-out" / "results.json").read_text())
    [run] = results["runs"]
    assert run["verdict"] == "incomparable"
    assert run["comparison"]["notes"][-1].startswith(
        "incomparable: the baseline was measured by another test (a/test_m.py::test_train; "
        "this run: b/test_m2.py::test_train)"
    )
    # The test itself, from the top this time, is compared with its own baseline.
    result = pytester.runpytest(*args, "a/test_m.py::test_train")
    result.assert_outcomes(passed=1)
    results = json.loads((pytester.path / "perfgate-out" / "results.json").read_text())
    assert results["runs"][0]["verdict"] in ("pass", "unstable")


NOISY = """
import random
import time

def test_noisy(perfgate):
    perfgate.run(lambda: time.sleep(random.choice([0.005, 0.08])), steps=3, warmup=1)
"""


def test_a_noisy_baseline_keeps_the_time_budget_and_says_so_in_every_report(
    pytester: pytest.Pytester,
) -> None:
    # The re-measuring of a noisy baseline ignored statistics.max_seconds (15 rounds in each
    # process, whatever the budget), and its note reached neither the terminal nor
    # summary.md: only the baseline file said it.
    settings = "statistics: {processes: 1, max_cv: 1%, max_seconds: 0.3}\n"
    _committed_project(pytester.path, {"perfgate.yaml": settings, "test_noisy.py": NOISY}, "noisy")
    result = pytester.runpytest(
        "--perfgate", "--perfgate-update", "--perfgate-profiler=none", "-p", "no:cacheprovider"
    )
    result.assert_outcomes(passed=1)
    [stored] = (pytester.path / "baselines" / "noisy").glob("*/*.json")
    record = json.loads(stored.read_text())
    assert len(set(record["timing"]["round"])) == 10  # 5, then 5 more, then out of time
    [note] = [n for n in record["notes"] if n.startswith("baseline recorded with")]
    assert "after 10 rounds (statistics.max_seconds, 0.3 s, ran out): comparisons" in note
    result.stdout.fnmatch_lines([f"warning: noisy: {note}"])
    summary = (pytester.path / "perfgate-out" / "summary.md").read_text()
    assert "  - ⚠️ baseline recorded with runner noise" in summary


AFTER_MEASURING = """
import pytest

def step():
    return sum(range(300))

def test_fine(perfgate):
    perfgate.run(step, steps=3, warmup=1)

def test_wrong_output(perfgate):
    perfgate.run(step, steps=3, warmup=1)
    assert step() == 0, "the model's output is wrong"

def test_skip_after(perfgate):
    perfgate.run(step, steps=3, warmup=1)
    pytest.skip("no accelerator")

@pytest.mark.xfail(reason="known")
def test_known_bad(perfgate):
    perfgate.run(step, steps=3, warmup=1)
    assert 0

def test_twice(perfgate):
    perfgate.run(step, steps=3, warmup=1)
    perfgate.run(step, steps=3, warmup=1)
"""


def test_update_records_only_the_baselines_of_tests_that_pass(project: pytest.Pytester) -> None:
    # A test that failed, skipped or xfailed after perfgate.run had its baseline written
    # all the same (an Action would commit a broken model's numbers), and perfgate.run
    # called twice failed its test while every report said "recorded".
    project.path.joinpath("test_bench.py").write_text(AFTER_MEASURING)
    project.path.joinpath("perfgate.yaml").write_text("statistics: {processes: 1}\n")
    _commit_all(project.path, "tests that fail after measuring")
    result = project.runpytest(
        "--perfgate", "--perfgate-update", "--perfgate-profiler=none", "-p", "no:cacheprovider"
    )
    result.assert_outcomes(passed=1, failed=2, skipped=1, xfailed=1)
    stored = sorted(p.name for p in (project.path / "baselines").iterdir())
    assert stored == ["fine"]
    results = json.loads((project.path / "perfgate-out" / "results.json").read_text())
    runs = {run["benchmark"]: run for run in results["runs"]}
    assert {name: run["verdict"] for name, run in runs.items()} == {
        "fine": "recorded",
        "wrong_output": "error",
        "twice": "error",
    }
    assert runs["wrong_output"]["comparison"]["notes"] == [
        "measured, but its baseline was not recorded: its test failed in call (see the test's "
        "failure); fix it and record again"
    ]
    assert runs["twice"]["comparison"]["notes"] == [
        "perfgate.run was called a second time in this test; measure one benchmark per test "
        "(parametrize the test for variants)"
    ]
    assert runs["wrong_output"]["samples"]  # measured: the figures stay in the results
    # Without --perfgate-update, a second run is an error too, not the first one's verdict.
    result = project.runpytest(
        "--perfgate", "--perfgate-profiler=none", "-p", "no:cacheprovider", "-k", "twice"
    )
    result.assert_outcomes(failed=1)
    results = json.loads((project.path / "perfgate-out" / "results.json").read_text())
    assert [run["verdict"] for run in results["runs"]] == ["error"]


def test_collect_only_starts_no_measuring_process(project: pytest.Pytester) -> None:
    # --co with --perfgate-update started the two extra measuring processes (15 s here).
    result = project.runpytest("--perfgate", "--perfgate-update", "--co", "-p", "no:cacheprovider")
    assert result.ret == 0
    assert "measuring in process" not in result.stdout.str()
    result.stdout.fnmatch_lines(["*<Function test_matmul>*"])


def test_baselines_in_another_folders_store_are_named_not_passed_over_silently(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # bench/ has its own perfgate.yaml and store, recorded from inside bench/. Started at
    # the top, pytest reads the top's (empty) store: "no baseline", exit 0, not a word of
    # the baselines one folder down.
    bench = {"bench/perfgate.yaml": ONE_PROCESS, "bench/test_loop.py": LOOP}
    repo = _committed_project(pytester.path, bench, "benchmarks in bench/")
    monkeypatch.chdir(pytester.path / "bench")
    args = ("--perfgate", "--perfgate-profiler=none", "-p", "no:cacheprovider")
    pytester.runpytest(*args, "--perfgate-update").assert_outcomes(passed=1)
    assert (pytester.path / "bench" / "baselines" / "loop").is_dir()
    repo.commit("baselines")
    monkeypatch.chdir(pytester.path)
    result = pytester.runpytest(*args)
    result.assert_outcomes(passed=1)
    store = pytester.path / "bench" / "baselines"
    result.stdout.fnmatch_lines(
        [f"baselines of 'loop' exist in another store of this repository: {store} (this run's *"]
    )


def test_outside_git_the_hint_says_to_commit_first(pytester: pytest.Pytester) -> None:
    # It said "record them with --perfgate-update", which refuses exactly there.
    pytester.makepyfile(test_loop=LOOP)
    result = pytester.runpytest("--perfgate", "--perfgate-profiler=none", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["no baselines without a commit: baselines are kept by git *"])
    assert "no baseline yet for some benchmarks" not in result.stdout.str()


def test_update_refuses_a_benchmark_file_that_head_does_not_hold(
    pytester: pytest.Pytester,
) -> None:
    # git leaves untracked files out of "dirty": a new test file's benchmark was recorded
    # as a baseline of HEAD, which has no such benchmark.
    files = {"perfgate.yaml": ONE_PROCESS, "test_loop.py": LOOP}
    repo = _committed_project(pytester.path, files, "one benchmark")
    repo.write("test_new.py", LOOP.replace("def test_loop", "def test_fresh"))
    args = ("--perfgate", "--perfgate-update", "--perfgate-profiler=none", "-p", "no:cacheprovider")
    result = pytester.runpytest(*args)
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*test_new.py is not in HEAD (a new file, not committed): its baseline would be "
            "recorded as HEAD's; commit it first, or pass --perfgate-allow-dirty*"
        ]
    )
    assert sorted(p.name for p in (pytester.path / "baselines").iterdir()) == ["loop"]
    result = pytester.runpytest(*args, "--perfgate-allow-dirty")
    result.assert_outcomes(passed=2)
    assert sorted(p.name for p in (pytester.path / "baselines").iterdir()) == ["fresh", "loop"]

"""`perfgate ab` end to end, as users run it: a throwaway git repository with a tiny benchmark,
the base commit and the working tree measured in alternating pytest processes (ABBA), the
verdict, the exit status, the results file; and the doors a user can walk in by mistake (an
unknown base, no repository, a base whose benchmarks do not run)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import GIT_ENV, GitRepo

import perfgate
from perfgate import ab
from perfgate.cli import main

# The exit statuses of DESIGN §7 (as for `perfgate compare`).
EXIT_PASS, EXIT_REGRESSION, EXIT_ERROR = 0, 1, 2

# The perfgate code under test: the sessions of both sides must import it, not whichever
# copy is installed (`_python_path` appends the caller's PYTHONPATH to each checkout).
CODE = Path(perfgate.__file__).resolve().parent

# A pure-Python step (no torch, no profiler: a session is a pytest start-up and two short
# rounds), its work per step set by WORK in the file, so that the working tree can change it.
BENCHMARK = """
from pathlib import Path

WORK = 1

def test_loop(perfgate):
    import os

    import perfgate.ab as under_test  # the sessions run the perfgate under test

    assert Path(under_test.__file__).resolve().parent == Path(os.environ["PERFGATE_CODE"])
    perfgate.run(lambda: sum(range(20000 * WORK)), steps=10, warmup=1)
"""

# Shared 2-vCPU runners: wide limits, and the fewest rounds a run may have.
CONFIG = """\
thresholds:
  step_time: {max_increase: 60%}
statistics: {rounds: 2, max_rounds: 2}
"""

SESSION = re.compile(r"^perfgate ab: pair (\d+) of (\d+), (base|head) \((.+)\)$")


def _env() -> dict[str, str]:
    """This environment, without the caller's git, GitHub and pytest settings, with the code
    under test first on the path."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("GIT_", "GITHUB_", "PYTEST_")) and k != "PYTHONPATH"
    }
    env.update(GIT_ENV)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(CODE.parent), *filter(None, [os.environ.get("PYTHONPATH")])]
    )
    env["PERFGATE_CODE"] = str(CODE)
    return env


def perfgate_ab(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "perfgate", "ab", *args],
        cwd=cwd,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def sessions(stderr: str) -> list[tuple[int, str, Path]]:
    """(pair, side, checkout) of each session, in the order they ran."""
    found = [SESSION.match(line) for line in stderr.splitlines()]
    return [(int(m[1]), m[3], Path(m[4])) for m in found if m]


def worktrees(repo: GitRepo) -> list[str]:
    listed = repo.repo.git.worktree("list", "--porcelain").splitlines()
    return [line for line in listed if line.startswith("worktree ")]


@pytest.fixture
def project(git_repo: GitRepo) -> GitRepo:
    """A repository with the benchmark in bench/, committed on main: the base."""
    git_repo.write("bench/test_loop.py", BENCHMARK)
    git_repo.write("tox.ini", "[pytest]\n")
    git_repo.write("perfgate.yaml", CONFIG)
    git_repo.write(".gitignore", "perfgate-out/\n__pycache__/\n")
    git_repo.commit("a tiny benchmark")
    return git_repo


def _results(path: Path) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return document


def _check_sessions(stderr: str, project: GitRepo, out: Path, results: dict[str, Any]) -> None:
    """Two pairs in BAAB order (this tree first), the base in a worktree that is gone
    afterwards, the tree in the repository, and every session's record holding its rounds."""
    ran = sessions(stderr)
    assert [(pair, side) for pair, side, _ in ran] == [
        (1, "head"),
        (1, "base"),
        (2, "base"),
        (2, "head"),
    ], stderr
    base_trees = {checkout for _, side, checkout in ran if side == "base"}
    head_trees = {checkout for _, side, checkout in ran if side == "head"}
    assert head_trees == {project.path.resolve()}
    [base_tree] = base_trees
    assert base_tree != project.path.resolve()
    assert not base_tree.exists()  # the worktree is removed afterwards
    assert len(worktrees(project)) == 1
    ab = results["ab"]
    assert ab["pairs"] == 2
    assert {side: len(times) for side, times in ab["session_seconds"].items()} == {
        "base": 2,
        "head": 2,
    }
    for side in ("base", "head"):
        for pair in (0, 1):
            record = _results(out / side / str(pair) / "records" / "loop.json")
            timing = record["timing"]
            assert set(timing["process"]) == {pair}
            assert sorted(set(timing["round"])) == [0, 1]  # statistics.rounds
            assert len(timing["step_time_us"]) == 2 * 10  # rounds × steps
            assert all(t > 0 for t in timing["step_time_us"])


def _step_time(results: dict[str, Any]) -> dict[str, Any]:
    [run] = results["runs"]
    assert run["benchmark"] == "loop"
    [metric] = [m for m in run["comparison"]["metrics"] if m["name"] == "step_time"]
    assert isinstance(metric, dict)
    return metric


def _judged(
    done: subprocess.CompletedProcess[str], project: GitRepo, out: Path, label: str, status: int
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The results and the step-time judgement of an A/B run that exited with ``status``,
    its sessions checked (printed, for the record of what the runner measured)."""
    results = _results(out / "results.json")
    step_time = _step_time(results)
    print(f"{label} A/B: {step_time['change']:+.1%}, {step_time['status']}, {results['ab']}")
    assert done.returncode == status, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    _check_sessions(done.stderr, project, out, results)
    return results, step_time


@pytest.mark.slow
def test_an_unchanged_tree_passes_after_abba_sessions(project: GitRepo) -> None:
    base = project.head
    done = perfgate_ab(
        project.path, "--base", "HEAD", "--pairs", "2", "--", "bench", "--perfgate-profiler=none"
    )
    out = project.path / "perfgate-out" / "ab"
    results, step_time = _judged(done, project, out, "unchanged", EXIT_PASS)
    assert results["ab"]["base"] == base
    [run] = results["runs"]
    assert run["verdict"] not in ("regression", "error")
    comparison = run["comparison"]
    assert comparison["baseline"]["commit"] == base
    assert comparison["baseline"]["mode"] == "ab"
    assert comparison["current"] == {"commit": base, "dirty": False, "mode": "ab"}
    # Real figures of both sides: every round of every session, paired.
    assert step_time["baseline"] > 0 and step_time["current"] > 0
    assert step_time["n_baseline"] == step_time["n_current"] == 2 * 2  # pairs × rounds
    assert step_time["test"] == "paired t-test on A/B pairs"
    assert step_time["status"] != "regression"
    assert f"[{run['verdict'].upper()}] loop" in done.stdout


@pytest.mark.slow
def test_a_four_times_heavier_step_in_the_index_fails_on_step_time(project: GitRepo) -> None:
    base = project.head
    heavier = BENCHMARK.replace("WORK = 1", "WORK = 4")
    assert heavier != BENCHMARK
    project.write("bench/test_loop.py", heavier)
    project.repo.index.add(["bench/test_loop.py"])  # staged, not committed: the tree measures it
    # From inside bench/, without --repo: the pytest arguments name paths from where the user
    # stands, and the verdict takes the thresholds the sessions take, the repository root's
    # (+60%; bench/ has no configuration, and the default would be +5%).
    done = perfgate_ab(
        project.path / "bench",
        *("--base", "main", "--pairs", "2"),
        *("--", ".", "--perfgate-profiler=none"),
    )
    out = project.path / "bench" / "perfgate-out" / "ab"
    results, step_time = _judged(done, project, out, "4x heavier", EXIT_REGRESSION)
    [run] = results["runs"]
    assert run["verdict"] == "regression"
    assert run["comparison"]["current"] == {"commit": base, "dirty": True, "mode": "ab"}
    # The document says so too: `baseline update --from` it refuses a measurement of
    # uncommitted changes by this key (it read "dirty": null and recorded it as HEAD's).
    assert (results["dirty"], results["branch"]) == (True, "main")
    assert step_time["status"] == "regression"
    assert step_time["change"] > 0.6  # 4× the work per step
    assert step_time["current"] > step_time["baseline"] > 0
    assert "[REGRESSION] loop" in done.stdout
    assert re.search(
        r"! loop: step_time regressed: .* → .* \(\+[\d.]+%, limit \+60%\) vs baseline "
        rf"{base[:12]} \(A/B on this runner, 2 pairs, base main\)",
        done.stdout,
    ), done.stdout
    assert project.repo.git.diff("--cached", "--name-only") == "bench/test_loop.py"


@pytest.mark.slow
def test_a_benchmark_file_the_base_does_not_have_is_new_not_an_error(project: GitRepo) -> None:
    # A pull request adds a benchmark file and names it: the base's sessions run without it,
    # and its benchmark reads no-baseline beside the compared one.
    project.write("bench/test_new.py", BENCHMARK.replace("def test_loop", "def test_fresh"))
    done = perfgate_ab(
        project.path,
        *("--base", "HEAD", "--pairs", "2", "--"),
        *("bench/test_loop.py", "bench/test_new.py::test_fresh", "--perfgate-profiler=none"),
    )
    assert done.returncode == EXIT_PASS, done.stdout + done.stderr
    assert (
        "perfgate ab: bench/test_new.py::test_fresh not in the base HEAD: its benchmarks are "
        "new (no-baseline)" in done.stderr
    )
    results = _results(project.path / "perfgate-out" / "ab" / "results.json")
    verdicts = {run["benchmark"]: run["verdict"] for run in results["runs"]}
    assert verdicts["fresh"] == "no-baseline"
    assert verdicts["loop"] not in ("no-baseline", "error", "regression")
    assert [side for _, side, _ in sessions(done.stderr)] == ["head", "base", "base", "head"]
    # What this tree measured of the new one is kept (it was an empty record, env "ab").
    [fresh] = [run for run in results["runs"] if run["benchmark"] == "fresh"]
    assert fresh["env"].startswith("cpu-")
    assert sorted(set(fresh["timing"]["process"])) == [0, 1]


def test_the_base_sessions_leave_out_only_test_paths_it_lacks(project: GitRepo) -> None:
    head = project.path
    project.write("bench/test_new.py", BENCHMARK)
    project.write("notes.json", "{}")  # an option's value that happens to be a new file
    base = project.path.parent / "base-copy"
    project.repo.git.worktree("add", "--quiet", "--detach", str(base), "HEAD")
    try:
        args = ["-k", "loop", "bench/test_loop.py", "bench/test_new.py", "--out", "notes.json"]
        assert ab._base_arguments(args, head, base) == (
            ["-k", "loop", "bench/test_loop.py", "--out", "notes.json"],
            ["bench/test_new.py"],
        )
        # Only new paths: the base has nothing asked for, and runs no session.
        assert ab._base_arguments(["bench/test_new.py", "-q"], head, base) == (
            None,
            ["bench/test_new.py"],
        )
        # An ignored file is not the tree's; a path on both sides is kept.
        project.write(".gitignore", "perfgate-out/\n__pycache__/\nbench/test_new.py\n")
        assert ab._base_arguments(["bench", "bench/test_new.py"], head, base) == (
            ["bench", "bench/test_new.py"],
            [],
        )
    finally:
        project.repo.git.worktree("remove", "--force", str(base))


def _one_error_line(
    args: list[str], cwd: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> str:
    """`perfgate ab ARGS` run in ``cwd`` (in this process: an escaping exception fails the
    test with its traceback): exit status 2 and one error line on stderr, nothing else."""
    monkeypatch.chdir(cwd)
    assert main(["ab", *args]) == EXIT_ERROR
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith("perfgate: error: ")
    return lines[0]


@pytest.mark.parametrize("ref", ["nosuchref", "HEAD~5", "--output=x"])
def test_an_unknown_base_is_one_error_line(
    project: GitRepo, ref: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    args = [f"--base={ref}", "--pairs", "2", "--", "bench"]
    line = _one_error_line(args, project.path, capsys, monkeypatch)
    assert f"unknown git ref {ref!r}" in line
    assert len(worktrees(project)) == 1
    assert not (project.path / "x").exists()


def test_outside_a_git_repository_is_one_error_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    line = _one_error_line(["--base", "HEAD", "--", "."], plain, capsys, monkeypatch)
    assert "not inside a git repository" in line


def test_a_repository_without_commits_is_one_error_line(
    git_repo: GitRepo, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    line = _one_error_line(["--base", "HEAD", "--", "."], git_repo.path, capsys, monkeypatch)
    assert "has no commits yet" in line


def test_an_out_folder_holding_other_files_is_refused_not_emptied(
    project: GitRepo, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    mine = project.path / "notes" / "keep.txt"
    mine.parent.mkdir()
    mine.write_text("mine")
    args = ["--base", "HEAD", "--pairs", "2", "--out", "notes", "--", "bench"]
    line = _one_error_line(args, project.path, capsys, monkeypatch)
    assert "--out notes: holds files that are not an earlier perfgate ab run's output" in line
    assert mine.read_text() == "mine"
    args[args.index("notes")] = "notes/keep.txt"
    line = _one_error_line(args, project.path, capsys, monkeypatch)
    assert "--out notes/keep.txt: is a file" in line
    assert mine.read_text() == "mine"


@pytest.mark.parametrize("pairs", ["0", "1", "-1"])
def test_fewer_than_two_pairs_is_a_usage_error_that_says_two(
    project: GitRepo,
    pairs: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # `--pairs 0` said "must be 1 or more", and `--pairs 1` was then refused too.
    monkeypatch.chdir(project.path)
    with pytest.raises(SystemExit) as exited:
        main(["ab", "--base", "HEAD", "--pairs", pairs])
    assert exited.value.code == EXIT_ERROR
    err = capsys.readouterr().err
    assert f"argument --pairs: '{pairs}' must be 2 or more" in err


def test_a_test_that_fails_at_the_base_but_is_no_benchmark_does_not_stop_the_run(
    project: GitRepo,
) -> None:
    # The measuring sessions ran every test asked for: a test broken at the base (and fixed
    # by the change under review) stopped the A/B run with "did not run".
    project.write("bench/test_parser.py", "def test_parser():\n    assert 1 + 1 == 3\n")
    project.commit("a broken parser test")
    project.write("bench/test_parser.py", "def test_parser():\n    assert 1 + 1 == 2\n")
    project.commit("the parser test fixed")
    done = perfgate_ab(
        project.path, "--base", "HEAD~1", "--pairs", "2", "--", "bench", "--perfgate-profiler=none"
    )
    out = project.path / "perfgate-out" / "ab"
    results, _ = _judged(done, project, out, "base test broken", EXIT_PASS)
    assert [run["benchmark"] for run in results["runs"]] == ["loop"]
    # A base with no benchmark among the paths asked for: its benchmarks are new.
    project.write("bench/test_other.py", BENCHMARK.replace("def test_loop", "def test_other"))
    project.commit("another benchmark")
    done = perfgate_ab(
        project.path,
        "--base",
        "HEAD~1",
        "--pairs",
        "2",
        "--",
        "bench/test_parser.py",
        "bench/test_other.py",
        "--perfgate-profiler=none",
    )
    assert done.returncode == EXIT_PASS, done.stdout + done.stderr
    [run] = _results(out / "results.json")["runs"]
    assert (run["benchmark"], run["verdict"]) == ("other", "no-baseline")


def test_a_base_whose_sessions_fail_says_why_and_leaves_no_worktree(project: GitRepo) -> None:
    # The base's perfgate.yaml is broken, the tree fixes it: pytest ends the base's first
    # session with a usage error on stderr, and that is the reason the user must see.
    project.write("perfgate.yaml", "thresholds:\n  step_time: {max_increase: 5}\n")
    broken = project.commit("a threshold without a unit")
    project.write("perfgate.yaml", CONFIG)
    project.commit("the unit back")
    done = perfgate_ab(project.path, "--base", "HEAD~1", "--pairs", "2", "--", "bench")
    assert done.returncode == EXIT_ERROR, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    ran = sessions(done.stderr)
    # This tree's first session, then the base's, which stops the run at once.
    assert [(pair, side) for pair, side, _ in ran] == [(1, "head"), (1, "base")]
    assert not ran[1][2].exists()
    assert len(worktrees(project)) == 1
    error = done.stderr[done.stderr.index("perfgate: error: ") :]
    assert error.startswith(
        f"perfgate: error: the benchmarks of the base HEAD~1 ({broken[:12]}) did not run "
        "(pytest exited with 4):\n"
    ), done.stderr
    assert "perfgate.yaml: thresholds.step_time.max_increase: 5 is not a threshold" in error


def test_an_absolute_test_path_in_the_checkout_is_made_relative(tmp_path: Path) -> None:
    # `perfgate ab -- /repo/bench/test_x.py` ran this tree's file in the base's sessions too:
    # both sides measured the working tree, and a regression passed.
    top = tmp_path / "repo"
    (top / "bench").mkdir(parents=True)
    args = [
        str(top / "bench" / "test_x.py::test_loop"),
        str(top / "bench"),
        "-k",
        "loop",
        str(tmp_path / "elsewhere.py"),
    ]
    assert ab._relative_to_tree(args, top, top) == [
        "bench/test_x.py::test_loop",
        "bench",
        "-k",
        "loop",
        str(tmp_path / "elsewhere.py"),
    ]
    assert ab._relative_to_tree([str(top / "bench")], top, top / "bench") == ["."]


@pytest.mark.parametrize(
    ("arguments", "said"),
    [
        (["nosuchdir/"], "the benchmarks of this tree did not run (pytest exited with 4)"),
        (
            ["bench", "-k", "nomatch"],
            "no perfgate benchmark ran on this tree (pytest exited with 5): nothing to compare",
        ),
    ],
)
def test_arguments_that_run_nothing_stop_after_one_session_of_this_tree(
    project: GitRepo, arguments: list[str], said: str
) -> None:
    # A path that is nowhere was blamed on the base; a -k that selects nothing ran every
    # session of every pair before it said so.
    done = perfgate_ab(project.path, "--base", "HEAD", "--pairs", "2", "--", *arguments)
    assert done.returncode == EXIT_ERROR, done.stdout + done.stderr
    assert [(pair, side) for pair, side, _ in sessions(done.stderr)] == [(1, "head")]
    assert f"perfgate: error: {said}" in done.stderr
    assert len(worktrees(project)) == 1

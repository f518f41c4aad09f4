"""Bad input, odd git states and full disks, end to end (issue 11: "bad input never crashes or
lies, the store cannot be poisoned"): each case as the issue found it, through the real CLI,
the real pytest plugin and real git repositories.

The promise for every user mistake: exit 2 and one line naming the file, the key and what was
expected; no traceback; nothing half-written; and the store keeps working afterwards.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import GIT_ENV

from perfgate.cli import main
from perfgate.store.baselines import MAX_BASELINE_BYTES
from perfgate.store.git import baseline_walk, default_branch

DATA = Path(__file__).parent / "data"
LEVEL1 = DATA / "torch_npu" / "ascend-msinsight" / "pytorch_text_level1_rank0_ascend_pt"


# --------------------------------------------------------------------------- helpers


def git_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "GITHUB_"))}
    env.update(GIT_ENV)
    return env


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", *args], cwd=cwd, env=git_env(), capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def new_repo(path: Path, branch: str = "main") -> Path:
    path.mkdir(parents=True)
    git(path, "init", "--quiet", f"--initial-branch={branch}")
    (path / "model.py").write_text("VERSION = 1\n")
    (path / ".gitignore").write_text("perfgate-out/\n")
    git(path, "add", ".")
    git(path, "commit", "--quiet", "-m", "Model v1")
    return path


def commit_all(repo: Path, message: str) -> str:
    git(repo, "add", "-A")
    git(repo, "commit", "--quiet", "-m", message)
    return git(repo, "rev-parse", "HEAD")


def run_record(benchmark: str = "b", env: str = "e", step_us: float = 1000.0) -> dict[str, Any]:
    steps = list(range(12))
    return {
        "benchmark": benchmark,
        "env": env,
        "samples": {"step": steps, "step_time_us": [step_us + (i % 3) for i in steps]},
    }


def results_file(path: Path, runs: list[dict[str, Any]], commit: str | None = None) -> Path:
    document = {"format": "perfgate.results", "format_version": 1, "runs": runs}
    if commit is not None:
        document["commit"] = commit
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


def record_one_run(repo: Path, results: Path, cli: Cli) -> Path:
    """A results file of one run measured at HEAD, recorded as HEAD's baseline with
    ``perfgate baseline update --from`` (which must succeed); the results file."""
    results_file(results, [run_record()], commit=git(repo, "rev-parse", "HEAD"))
    assert cli("baseline", "update", "--from", str(results), "--repo", str(repo))[0] == 0
    return results


def store_files(repo: Path) -> list[str]:
    """Every file under baselines/, hidden temporary files included."""
    root = repo / "baselines"
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


class Cli:
    """``perfgate …`` run in this process through its real entry point."""

    def __init__(self, capsys: pytest.CaptureFixture[str]) -> None:
        self.capsys = capsys

    def __call__(self, *args: str) -> tuple[int, str, str]:
        status = main(list(args))
        out, err = self.capsys.readouterr()
        assert "Traceback" not in err
        if status == 2 and err:
            # One line naming what is wrong: the promise for every user mistake. (An error
            # verdict is a report on stdout, with the same exit status.)
            assert err.count("\n") == 1 and err.startswith("perfgate: error: "), err
        return status, out, err


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Cli:
    return Cli(capsys)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return new_repo(tmp_path / "repo")


def limited_writes(max_bytes: int) -> None:
    """In a child process: files may not grow past ``max_bytes`` — a disk that fills up.
    A write past it fails with EFBIG ("File too large") instead of killing the process.
    Such a child runs with :func:`no_bytecode`."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (max_bytes, max_bytes))


def no_bytecode(env: dict[str, str] | None = None) -> dict[str, str]:
    """``env`` (default: this one) for a child whose writes are limited: Python renames a
    bytecode file cut short by the limit into place, which would poison the suite's shared
    cache (tests/conftest.py) for every later process ("marshal data too short")."""
    return {**(os.environ if env is None else env), "PYTHONDONTWRITEBYTECODE": "1"}


# --------------------------------------------------------------------------- results files


def test_the_issues_bad_samples_are_refused_and_the_benchmark_still_works(
    repo: Path, tmp_path: Path, cli: Cli
) -> None:
    head = git(repo, "rev-parse", "HEAD")
    record_one_run(repo, tmp_path / "good.json", cli)
    commit_all(repo, "perfgate: baselines")
    before = store_files(repo)

    bad = tmp_path / "bad.json"
    bad.write_text(
        '{"format":"perfgate.results","format_version":1,'
        '"runs":[{"benchmark":"b","env":"e","samples":"abc"}]}'
    )
    status, _, err = cli("baseline", "update", "--from", str(bad), "--repo", str(repo))
    assert status == 2
    assert err == (
        f"perfgate: error: {bad}: key 'runs.0.samples' is 'abc' (expected a valid dictionary)\n"
    )
    assert store_files(repo) == before

    # compare (of another run: not the one the baseline was recorded from), baseline show
    # and history of that benchmark all still work.
    again = results_file(tmp_path / "again.json", [run_record(step_us=1001.0)], commit=head)
    status, out, _ = cli("compare", str(again), "--repo", str(repo))
    assert status == 0
    assert "[PASS] b" in out
    assert cli("baseline", "show", "b", "--repo", str(repo))[0] == 0
    status, out, _ = cli("history", "b", "--repo", str(repo))
    assert status == 0
    assert "b on e: 1 baseline(s)" in out


def test_a_baseline_with_nested_samples_is_an_error_not_a_false_regression(
    repo: Path, tmp_path: Path, cli: Cli
) -> None:
    head = git(repo, "rev-parse", "HEAD")
    path = repo / "baselines" / "b" / "e" / f"{head}.json"
    path.parent.mkdir(parents=True)
    path.write_text(
        json.dumps(
            {
                "format": "perfgate.baseline",
                "format_version": 1,
                "benchmark": "b",
                "env": "e",
                "commit": head,
                "samples": {"step_time_us": [[1], [2]]},
            }
        )
    )
    commit_all(repo, "a hand-made baseline")
    current = results_file(tmp_path / "current.json", [run_record(step_us=5000.0)])
    said = f"{path}: key 'samples.step_time_us.0' is [1] (expected a valid number); and 1 more"
    for command in (["baseline", "show", "b"], ["history", "b"]):
        status, _, err = cli(*command, "--repo", str(repo))
        assert status == 2, command  # never 1: a regression it did not measure
        assert err == f"perfgate: error: {said}\n"
    # compare judges every benchmark of the file: this one's verdict is error, saying why.
    status, out, err = cli("compare", str(current), "--repo", str(repo))
    assert (status, err) == (2, "")
    assert "[ERROR] b" in out
    assert f"the baseline store holds a file perfgate cannot use: {said}; restore" in out


def test_a_version_1_baseline_with_samples_abc_is_one_line(
    repo: Path, tmp_path: Path, cli: Cli
) -> None:
    # Version 1 files are upgraded when read; a damaged one must still get the schema's line.
    head = git(repo, "rev-parse", "HEAD")
    path = repo / "baselines" / "b" / "e" / f"{head}.json"
    path.parent.mkdir(parents=True)
    path.write_text(
        '{"format": "perfgate.baseline", "format_version": 1, "benchmark": "b", "env": "e", '
        f'"commit": "{head}", "samples": "abc"}}'
    )
    current = results_file(tmp_path / "current.json", [run_record()])
    status, out, err = cli("compare", str(current), "--repo", str(repo))
    assert (status, err) == (2, "")
    said = f"{path}: key 'samples' is 'abc' (expected a valid dictionary)"
    assert f"the baseline store holds a file perfgate cannot use: {said}; restore" in out


def test_one_damaged_baseline_does_not_poison_other_benchmarks(
    repo: Path, tmp_path: Path, cli: Cli
) -> None:
    head = git(repo, "rev-parse", "HEAD")
    damaged = repo / "baselines" / "other" / "e" / f"{head}.json"
    damaged.parent.mkdir(parents=True)
    damaged.write_text("{not json")
    commit_all(repo, "someone's damaged baseline")
    current = results_file(tmp_path / "current.json", [run_record()])
    status, out, _ = cli("compare", str(current), "--repo", str(repo))
    assert status == 0
    assert "[NO-BASELINE] b" in out


def test_a_run_without_env_is_one_line(repo: Path, tmp_path: Path, cli: Cli) -> None:
    run = run_record()
    del run["env"]
    source = results_file(tmp_path / "no-env.json", [run])
    status, _, err = cli("baseline", "update", "--from", str(source), "--repo", str(repo))
    assert status == 2
    assert err == f"perfgate: error: {source}: key 'runs.0.env' is missing\n"
    assert not (repo / "baselines").exists()


def test_a_results_file_of_another_commit_is_refused_unless_overridden(
    repo: Path, tmp_path: Path, cli: Cli
) -> None:
    measured = git(repo, "rev-parse", "HEAD")
    (repo / "model.py").write_text("VERSION = 2\n")
    head = commit_all(repo, "Model v2")
    source = results_file(tmp_path / "old.json", [run_record()], commit=measured)
    status, _, err = cli("baseline", "update", "--from", str(source), "--repo", str(repo))
    assert status == 2
    assert err == (
        f"perfgate: error: b: measured at commit {measured[:12]}, but HEAD is {head[:12]}; "
        "check out the measured commit, or pass --allow-other-commit to record it as HEAD's "
        "baseline anyway\n"
    )
    assert not (repo / "baselines").exists()
    status, out, _ = cli(
        "baseline", "update", "--from", str(source), "--allow-other-commit", "--repo", str(repo)
    )
    assert status == 0
    assert out.strip().endswith(f"baselines/b/e/{head}.json")


@pytest.mark.parametrize(
    ("name", "shown"),
    [
        (".git", "'.git'"),
        ("b" * 300, "'" + "b" * 56 + "..."),
    ],
)
def test_names_git_would_lose_or_cannot_hold_are_refused(
    repo: Path, tmp_path: Path, cli: Cli, name: str, shown: str
) -> None:
    source = results_file(tmp_path / "named.json", [run_record(benchmark=name)])
    status, _, err = cli("baseline", "update", "--from", str(source), "--repo", str(repo))
    assert status == 2
    assert err == (
        f"perfgate: error: {source}: key 'runs.0.benchmark' is {shown} (expected a name of "
        "letters, digits, '.', '_' or '-', not starting with '.')\n"
    )
    assert not (repo / "baselines").exists()


def test_a_100_mb_results_file_leaves_a_small_baseline(
    repo: Path, tmp_path: Path, cli: Cli
) -> None:
    head = git(repo, "rev-parse", "HEAD")
    run = run_record()
    # What a results run carries besides the record, and what a tool may add: none of it
    # is baseline content.
    run["verdict"] = "pass"
    run["comparison"] = {"notes": ["x" * 1000] * 1000}
    run["raw_profile"] = "y" * 100_000_000
    source = results_file(tmp_path / "huge.json", [run], commit=head)
    assert source.stat().st_size > 100_000_000
    status, _, _ = cli("baseline", "update", "--from", str(source), "--repo", str(repo))
    assert status == 0
    (stored,) = (repo / "baselines").rglob("*.json")
    assert stored.stat().st_size < 4_000
    record = json.loads(stored.read_text())
    assert set(record) == {
        "format", "format_version", "benchmark", "env", "commit", "branch", "commit_time",
        "created", "dirty", "samples",
    }  # fmt: skip
    assert record["samples"] == run["samples"]


def test_a_run_too_big_for_a_baseline_is_refused_naming_its_largest_part(
    repo: Path, tmp_path: Path, cli: Cli
) -> None:
    head = git(repo, "rev-parse", "HEAD")
    run = run_record()
    # 40 series of 50,000 samples: each within the schema's bounds, together ~9 MB of JSON.
    steps = 50_000
    run["samples"] = {"step": list(range(steps))}
    run["samples"].update({f"metric_{i}": [1234.567] * steps for i in range(40)})
    source = results_file(tmp_path / "big.json", [run], commit=head)
    status, _, err = cli("baseline", "update", "--from", str(source), "--repo", str(repo))
    assert status == 2
    assert err.startswith("perfgate: error: baseline b/e: ")
    assert f"is more than a baseline may hold ({MAX_BASELINE_BYTES // 1024 // 1024}.0 MiB)" in err
    assert "the largest part is key 'samples' (" in err
    assert err.endswith("(measure fewer steps or rounds); nothing was written\n")
    assert not (repo / "baselines").exists()


def test_a_baseline_file_too_big_to_be_one_is_refused_unread(
    repo: Path, tmp_path: Path, cli: Cli
) -> None:
    head = git(repo, "rev-parse", "HEAD")
    path = repo / "baselines" / "b" / "e" / f"{head}.json"
    path.parent.mkdir(parents=True)
    with path.open("w") as handle:
        handle.write('{"format": "perfgate.baseline", "pad": "')
        handle.write("z" * (MAX_BASELINE_BYTES + 1))
        handle.write('"}')
    status, _, err = cli("baseline", "show", str(path))
    assert status == 2
    assert err == (
        f"perfgate: error: {path}: 4.0 MiB is more than a baseline may hold (4.0 MiB); "
        "not a baseline perfgate wrote\n"
    )


# --------------------------------------------------------------------------- configuration


@pytest.mark.parametrize(
    ("name", "content", "expected"),
    [
        (
            "perfgate.yaml",
            b"thresholds:\n  step_time: {max_increase: -5%}\n",
            "{file}: thresholds.step_time.max_increase: '-5%' is negative; a limit is a size "
            "in the metric's bad direction (expected e.g. 5% or 2ms or 500us)",
        ),
        (
            "perfgate.yaml",
            b"baseline: {dir: /tmp/elsewhere}\n",
            "{file}: baseline.dir: '/tmp/elsewhere' leaves the repository (expected a "
            "relative path inside it, e.g. baselines)",
        ),
        (
            "perfgate.yaml",
            b"baseline: {dir: ../..}\n",
            "{file}: baseline.dir: '../..' leaves the repository (expected a relative path "
            "inside it, e.g. baselines)",
        ),
        (
            "pyproject.toml",
            b"tool = 5\n",
            "{file}: key 'tool' is 5, expected a table ([tool])",
        ),
        (
            "pyproject.toml",
            b"[tool.perfgate]\nprofiler = '\xff\xfe'\n",
            "{file}: not valid TOML: not UTF-8 at byte 28",
        ),
        (
            "perfgate.yaml",
            b"profiler: \xff\n",
            "{file}: not valid YAML: not UTF-8 at byte 10",
        ),
    ],
)
def test_configuration_mistakes_are_one_line_naming_the_file_and_key(
    repo: Path, tmp_path: Path, cli: Cli, name: str, content: bytes, expected: str
) -> None:
    config = repo / name
    config.write_bytes(content)
    current = results_file(tmp_path / "current.json", [run_record()])
    for command in (["compare", str(current)], ["baseline", "list"], ["history", "b"]):
        status, _, err = cli(*command, "--repo", str(repo))
        assert status == 2, command
        assert err.startswith("perfgate: error: " + expected.format(file=config)), err


# --------------------------------------------------------------------------- full disk


def test_baseline_update_on_a_full_disk_is_one_line_and_leaves_nothing(
    repo: Path, tmp_path: Path
) -> None:
    head = git(repo, "rev-parse", "HEAD")
    run = run_record()
    run["notes"] = ["n" * 1000] * 20  # a baseline of ~20 KB, past the 8 KB the "disk" holds
    source = results_file(tmp_path / "results.json", [run], commit=head)
    done = subprocess.run(
        [sys.executable, "-m", "perfgate", "baseline", "update", "--from", str(source)],
        cwd=repo,
        capture_output=True,
        text=True,
        env=no_bytecode(),
        preexec_fn=lambda: limited_writes(8192),
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr == (
        f"perfgate: error: baselines/b/e/{head}.json: cannot write the baseline "
        "(File too large); nothing was written\n"
    )
    assert store_files(repo) == []  # no baseline, no temporary file


PLUGIN_PROJECT = """
import time

def test_loop(perfgate):
    perfgate.run(lambda: time.sleep(0.0005), steps=12, warmup=1)
"""


def run_plugin(
    project: Path, *args: str, max_write: int | None = None
) -> subprocess.CompletedProcess[str]:
    """``pytest --perfgate`` in ``project``; ``max_write``: see :func:`limited_writes`."""
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--perfgate"]
    command += ["--perfgate-profiler=none", *args]
    limit = None if max_write is None else (lambda: limited_writes(max_write))
    return subprocess.run(
        command,
        cwd=project,
        env=git_env() if max_write is None else no_bytecode(git_env()),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        preexec_fn=limit,
    )


def test_pytest_perfgate_on_a_full_disk_fails_and_leaves_no_empty_results_file(
    repo: Path,
) -> None:
    (repo / "test_bench.py").write_text(PLUGIN_PROJECT)
    commit_all(repo, "A benchmark")
    done = run_plugin(repo, "test_bench.py", max_write=1024)
    out = repo / "perfgate-out"
    assert done.returncode == 3, done.stdout + done.stderr  # INTERNAL_ERROR, never green
    assert (
        f"perfgate: error: {out}/results.json: cannot write (File too large); nothing was written"
    ) in done.stdout
    assert "Traceback" not in done.stdout + done.stderr
    assert f"results: {out}/results.json" not in done.stdout  # not claimed as written
    left = sorted(p.name for p in out.rglob("*") if p.is_file())
    assert "results.json" not in left
    assert not [name for name in left if name.endswith(".tmp")]


@pytest.fixture
def tiny_disk(tmp_path: Path) -> Iterator[Path]:
    """A 64 KiB tmpfs, filled up: a real full disk (ENOSPC). Needs root; skipped without."""
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)],
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        with (mount / "filler").open("wb") as handle, contextlib.suppress(OSError):
            handle.write(b"\0" * 128 * 1024)
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=False)


def test_pytest_perfgate_on_a_really_full_disk(repo: Path, tiny_disk: Path) -> None:
    (repo / "test_bench.py").write_text(PLUGIN_PROJECT)
    commit_all(repo, "A benchmark")
    results = tiny_disk / "results.json"
    done = run_plugin(repo, "test_bench.py", f"--perfgate-json={results}")
    assert done.returncode == 3, done.stdout + done.stderr
    assert (
        f"perfgate: error: {results}: cannot write (No space left on device); nothing was written"
    ) in done.stdout
    assert sorted(p.name for p in tiny_disk.iterdir()) == ["filler"]


# --------------------------------------------------------------------------- shallow clones


@pytest.fixture
def origin_with_baseline(tmp_path: Path) -> tuple[Path, Path]:
    """A repository with a baseline of `b` recorded on main and committed, then a pull
    request branch of two commits: the situation of a CI run on a PR. Returns the origin
    and a results file of the PR's (unchanged) measurement."""
    origin = new_repo(tmp_path / "origin")
    (origin / "test_bench.py").write_text(PLUGIN_PROJECT)
    measured = commit_all(origin, "A benchmark")
    good = results_file(tmp_path / "main.json", [run_record()], commit=measured)
    assert main(["baseline", "update", "--from", str(good), "--repo", str(origin)]) == 0
    commit_all(origin, "perfgate: baselines")
    git(origin, "checkout", "--quiet", "-b", "pr")
    for i in (2, 3):
        (origin / "model.py").write_text(f"VERSION = {i}\n")
        commit_all(origin, f"Model v{i}")
    git(origin, "checkout", "--quiet", "main")
    return origin, results_file(tmp_path / "current.json", [run_record()])


def clone(origin: Path, target: Path, *args: str) -> Path:
    git(origin.parent, "clone", "--quiet", *args, f"file://{origin}", str(target))
    return target


def test_a_shallow_pr_clone_says_fetch_depth_0_and_is_an_error_under_strict(
    origin_with_baseline: tuple[Path, Path], tmp_path: Path, cli: Cli
) -> None:
    origin, current = origin_with_baseline
    full = clone(origin, tmp_path / "full", "--branch", "pr")
    status, out, _ = cli("compare", str(current), "--repo", str(full))
    assert status == 0
    assert "[PASS] b" in out  # the baseline is there, for a full clone

    shallow = clone(origin, tmp_path / "shallow", "--depth", "1", "--branch", "pr")
    status, out, _ = cli("compare", str(current), "--repo", str(shallow))
    assert status == 0
    assert "[NO-BASELINE] b" in out
    assert "this shallow clone has: the gate cannot see the baselines of older commits" in out
    assert "fetch the whole history (`fetch-depth: 0` on actions/checkout" in out
    assert "record one on the" not in out  # not the wrong advice

    status, out, _ = cli(
        "compare", str(current), "--repo", str(shallow), "--strict", "--format", "json"
    )
    assert status == 2
    (bench,) = json.loads(out)["benchmarks"]
    assert bench["verdict"] == "error"
    assert any("fetch-depth: 0" in note for note in bench["notes"])


def test_the_walk_knows_when_a_shallow_clone_cut_it_short(
    origin_with_baseline: tuple[Path, Path], tmp_path: Path
) -> None:
    origin, _ = origin_with_baseline
    deep_enough = clone(origin, tmp_path / "depth2", "--depth", "2", "--branch", "main")
    # All of max_depth=2 is inside the clone's history: nothing was cut.
    assert baseline_walk(deep_enough, max_depth=2).shallow is False
    assert baseline_walk(deep_enough, max_depth=10).shallow is True
    full = clone(origin, tmp_path / "full")
    assert baseline_walk(full, max_depth=10).shallow is False


def test_pytest_perfgate_in_a_shallow_clone_warns_and_errs_under_strict(
    origin_with_baseline: tuple[Path, Path], tmp_path: Path
) -> None:
    origin, _ = origin_with_baseline
    shallow = clone(origin, tmp_path / "shallow", "--depth", "1", "--branch", "pr")
    done = run_plugin(shallow, "test_bench.py")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "this checkout is a shallow clone" in done.stdout
    assert "`fetch-depth: 0` on actions/checkout" in done.stdout
    assert "record them with" not in done.stdout

    done = run_plugin(shallow, "test_bench.py", "--perfgate-strict")
    assert done.returncode == 1, done.stdout + done.stderr
    results = json.loads((shallow / "perfgate-out" / "results.json").read_text())
    assert [run["verdict"] for run in results["runs"]] == ["error"]


# --------------------------------------------------------------------------- branch names


def test_a_master_repository_works_the_same_everywhere(tmp_path: Path, cli: Cli) -> None:
    repo = new_repo(tmp_path / "repo", branch="master")
    (repo / "test_bench.py").write_text(PLUGIN_PROJECT)
    # About the branch: one measuring process per update is enough (3 cost 10 s here).
    (repo / "perfgate.yaml").write_text("statistics: {processes: 1}\n")
    commit_all(repo, "A benchmark")
    for i in (2, 3):
        done = run_plugin(repo, "test_bench.py", "--perfgate-update")
        assert done.returncode == 0, done.stdout + done.stderr
        # The baseline keeps all of the plugin's record (only the results file's own keys
        # about the run's outcome stay out).
        (run,) = json.loads((repo / "perfgate-out" / "results.json").read_text())["runs"]
        stored = json.loads(Path(run["baseline_path"]).read_text())
        outcome = {"verdict", "comparison", "baseline_path", "timings_s", "commit"}
        assert set(run) - outcome <= set(stored)
        commit_all(repo, "perfgate: baselines")
        (repo / "model.py").write_text(f"VERSION = {i}\n")
        commit_all(repo, f"Model v{i}")
    assert default_branch(repo) == "master"

    git(repo, "checkout", "--quiet", "-b", "feature")
    (repo / "model.py").write_text("VERSION = 'feature'\n")
    commit_all(repo, "Feature")
    done = run_plugin(repo, "test_bench.py")  # the plugin
    assert done.returncode == 0, done.stdout + done.stderr
    results = json.loads((repo / "perfgate-out" / "results.json").read_text())
    assert results["runs"][0]["comparison"]["baseline"]["how"] == "merge-base of HEAD and master"

    current = repo / "perfgate-out" / "results.json"
    status, out, _ = cli("compare", str(current), "--repo", str(repo), "--format", "json")
    assert json.loads(out)["benchmarks"][0]["baseline"]["how"] == "merge-base of HEAD and master"
    status, out, _ = cli("history", "loop", "--repo", str(repo))
    assert status == 0
    assert "loop on cpu-" in out and ": 2 baseline(s)" in out
    status, out, _ = cli("baseline", "prune", "--keep", "1", "--repo", str(repo))
    assert status == 0, out
    assert "removed 1 baseline(s): main-line ones beyond the newest 1 per benchmark and env" in out

    # An explicit baseline.branch still wins.
    (repo / "perfgate.yaml").write_text("baseline: {branch: release}\n")
    status, _, err = cli("baseline", "prune", "--keep", "1", "--repo", str(repo))
    assert status == 2
    assert "no branch 'release'" in err


def test_the_default_branch_is_origin_head_first(tmp_path: Path) -> None:
    origin = new_repo(tmp_path / "origin", branch="trunk")
    for branch in ("main", "master"):
        git(origin, "branch", branch)
    ci = clone(origin, tmp_path / "ci")
    # git clone sets origin/HEAD from the remote's HEAD: trunk, though main and master exist.
    assert default_branch(ci) == "trunk"
    git(ci, "remote", "set-head", "origin", "--delete")
    assert default_branch(ci) == "main"
    lonely = new_repo(tmp_path / "lonely", branch="develop")
    assert default_branch(lonely) == "main"  # nothing to go by: the usual name


def test_json_documents_are_strict_json_whatever_the_numbers() -> None:
    from perfgate.records import finite_json

    document = {"change": float("nan"), "rows": [1.5, float("inf"), (float("-inf"), 2)], "n": 3}
    text = json.dumps(finite_json(document), allow_nan=False)
    assert json.loads(text) == {"change": None, "rows": [1.5, None, [None, 2]], "n": 3}


def _poison(path: Path, kind: str) -> str:
    """Put ``kind`` where the baseline file ``path`` belongs; what the error must say."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "directory":
        path.mkdir()
        return "is a directory"
    if kind == "fifo":
        os.mkfifo(path)
        return "is no regular file (a FIFO, socket or device)"
    if kind == "dangling link":
        path.symlink_to(path.parent / "gone.json")
        return "is a symbolic link to nothing"
    path.symlink_to(path)  # a link to itself: ELOOP
    return "is a symbolic link to nothing"


@pytest.mark.parametrize("kind", ["directory", "fifo", "dangling link", "looping link"])
def test_a_baseline_that_is_no_file_is_an_error_not_no_baseline(
    repo: Path, tmp_path: Path, cli: Cli, kind: str
) -> None:
    # Each of these made the gate answer NO-BASELINE, exit 0 (a FIFO, or a loop: a traceback).
    head = git(repo, "rev-parse", "HEAD")
    where = repo / "baselines" / "b" / "e" / f"{head}.json"
    said = _poison(where, kind)
    current = results_file(tmp_path / "current.json", [run_record()])
    status, out, err = cli("compare", str(current), "--repo", str(repo))
    # That benchmark's verdict is error, saying why (the others would still be judged).
    assert (status, err) == (2, "")
    assert "[ERROR] b" in out
    assert f"the baseline store holds a file perfgate cannot use: {where}: {said}" in out
    status, _, err = cli("baseline", "list", "--repo", str(repo))
    assert status == 2 and str(where) in err
    # Nor is anything written there (a FIFO blocked the update; a link was written through).
    status, _, err = cli("baseline", "update", "--from", str(current), "--repo", str(repo))
    assert status == 2 and "nothing was written" in err


@pytest.mark.parametrize("level", ["benchmark", "env"])
@pytest.mark.parametrize("kind", ["dangling link", "looping link"])
def test_a_broken_link_where_the_store_has_a_directory_is_an_error(
    repo: Path, tmp_path: Path, cli: Cli, level: str, kind: str
) -> None:
    # A loop gave a traceback in `baseline list`, `history` and `prune`; a dangling link was
    # skipped, its benchmark's baselines "none".
    record_one_run(repo, tmp_path / "results.json", cli)
    where = repo / "baselines" / ("b2" if level == "benchmark" else "b/e2")
    where.symlink_to(where if kind == "looping link" else tmp_path / "gone")
    commands = [("baseline", "list"), ("baseline", "prune", "--keep", "1", "--dry-run")]
    if level == "env":  # the benchmark's history lists its envs (b2 is no part of b's)
        commands.append(("history", "b"))
    for command in commands:
        status, _, err = cli(*command, "--repo", str(repo))
        assert status == 2, command
        assert err.startswith(
            f"perfgate: error: {where}: is a symbolic link to nothing (its target is missing, "
            "or loops; expected a directory of the baseline store"
        ), (command, err)


def test_a_file_where_the_store_has_a_directory_is_an_error(
    repo: Path, tmp_path: Path, cli: Cli
) -> None:
    env = repo / "baselines" / "b" / "e"
    env.parent.mkdir(parents=True)
    env.write_text("not a directory")
    current = results_file(tmp_path / "current.json", [run_record()])
    status, out, _ = cli("compare", str(current), "--repo", str(repo))
    assert status == 2
    assert f"cannot use: {env}: is a file (expected a directory" in out
    # The store itself a file: that file is named, not the benchmark's directory below it.
    shutil.rmtree(repo / "baselines")
    (repo / "baselines").write_text("not a directory")
    status, out, _ = cli("compare", str(current), "--repo", str(repo))
    assert status == 2
    assert f"cannot use: {repo / 'baselines'}: is a file (expected a directory" in out
    for command in (("baseline", "list"), ("history", "b")):
        status, _, err = cli(*command, "--repo", str(repo))
        assert status == 2, command
        assert err.startswith(
            f"perfgate: error: {repo / 'baselines'}: is a file (expected a directory"
        ), (command, err)


def _recorded_plugin_project(repo: Path) -> Path:
    """``repo`` with a benchmark whose baseline the plugin recorded and committed, and a
    later commit to gate; the path of that baseline."""
    (repo / "test_bench.py").write_text(PLUGIN_PROJECT)
    (repo / "perfgate.yaml").write_text("statistics: {processes: 1, rounds: 2, max_rounds: 2}\n")
    commit_all(repo, "A benchmark")
    done = run_plugin(repo, "test_bench.py", "--perfgate-update")
    assert done.returncode == 0, done.stdout
    commit_all(repo, "perfgate: baselines")
    (repo / "model.py").write_text("VERSION = 2\n")
    commit_all(repo, "Model v2")
    [baseline] = (repo / "baselines" / "loop").rglob("*.json")
    return baseline


@pytest.mark.parametrize(
    "damage",
    ["directory", "fifo", "looping link", "env a file", "store a dangling link",
     "benchmark a dangling link"],
)  # fmt: skip
def test_pytest_perfgate_over_a_damaged_store_is_an_error_not_no_baseline(
    repo: Path, tmp_path: Path, damage: str
) -> None:
    # The plugin took each of these for "no baseline" (exit 0) where compare said error;
    # a link to nothing in the store's or a benchmark's place was no baseline in both doors
    # (a shared store whose mount is missing on this runner turned the gate off).
    baseline = _recorded_plugin_project(repo)
    if damage in ("directory", "fifo", "looping link"):
        baseline.unlink()
        said = f"{baseline}: {_poison(baseline, damage)}"
    elif damage == "env a file":
        shutil.rmtree(baseline.parent)
        baseline.parent.write_text("not a directory")
        said = f"{baseline.parent}: is a file (expected a directory"
    else:
        place = repo / "baselines" if damage.startswith("store") else baseline.parent.parent
        shutil.move(place, tmp_path / "moved")
        place.symlink_to(tmp_path / "not-mounted")
        said = f"{place}: is a symbolic link to nothing"
    done = run_plugin(repo, "test_bench.py")
    assert done.returncode == 1, done.stdout
    assert "loop         ERROR" in done.stdout
    assert f"the baseline store holds a file perfgate cannot use: {said}" in done.stdout
    if damage.startswith("store"):  # and recording there is refused before measuring
        commit_all(repo, "The store: a link to a shared one")
        done = run_plugin(repo, "test_bench.py", "--perfgate-update")
        said = done.stdout + done.stderr
        assert done.returncode == 4, said
        assert f"{repo / 'baselines'}: is a symbolic link to nothing" in said
        assert "measuring" not in said and "passed" not in said


def test_an_update_merges_only_the_records_of_its_own_processes(repo: Path) -> None:
    # An earlier --perfgate-update of 3 processes left processes/1 and processes/2; an update
    # of 1 process at a later commit merged them into its baseline (another commit's steps).
    baseline = _recorded_plugin_project(repo)
    (repo / "perfgate.yaml").write_text("statistics: {processes: 3, rounds: 2, max_rounds: 2}\n")
    commit_all(repo, "3 processes")
    assert run_plugin(repo, "test_bench.py", "--perfgate-update").returncode == 0
    commit_all(repo, "perfgate: baselines of 3 processes")
    (repo / "perfgate.yaml").write_text("statistics: {processes: 1, rounds: 2, max_rounds: 2}\n")
    head = commit_all(repo, "1 process")
    assert run_plugin(repo, "test_bench.py", "--perfgate-update").returncode == 0
    recorded = json.loads((baseline.parent / f"{head}.json").read_text())
    assert set(recorded["timing"]["process"]) == {0}
    assert not (repo / "perfgate-out" / "processes").exists()


def test_benchmark_names_that_differ_only_in_case_are_refused(repo: Path) -> None:
    (repo / "test_bench.py").write_text(
        PLUGIN_PROJECT + "\n\n@pytest.mark.perfgate(name='Loop')\ndef test_other(perfgate):\n"
        "    perfgate.run(lambda: time.sleep(0.0005), steps=12, warmup=1)\n"
    )
    (repo / "test_bench.py").write_text("import pytest\n" + (repo / "test_bench.py").read_text())
    commit_all(repo, "Two benchmarks")
    # The same in two xdist workers, each seeing one of the two: both passed there.
    for workers in ([], ["-n", "2"]):
        done = run_plugin(repo, "test_bench.py", *workers)
        assert done.returncode == 1, done.stdout
        assert (
            "benchmark names 'loop' (test_bench.py::test_loop) and 'Loop' "
            "(test_bench.py::test_other) differ only in case"
        ) in done.stdout
        results = json.loads((repo / "perfgate-out" / "results.json").read_text())
        verdicts = {run["benchmark"]: run["verdict"] for run in results["runs"]}
        assert verdicts == {"loop": "no-baseline", "Loop": "error"}


def test_a_baseline_link_is_not_written_through(repo: Path, tmp_path: Path, cli: Cli) -> None:
    head = git(repo, "rev-parse", "HEAD")
    outside = tmp_path / "outside.txt"
    outside.write_text("keep me")
    where = repo / "baselines" / "b" / "e" / f"{head}.json"
    where.parent.mkdir(parents=True)
    where.symlink_to(outside)
    source = results_file(tmp_path / "results.json", [run_record()], commit=head)
    status, _, err = cli("baseline", "update", "--from", str(source), "--repo", str(repo))
    assert status == 2 and err.startswith(f"perfgate: error: {where}: is a symbolic link")
    assert outside.read_text() == "keep me"


def test_one_benchmark_twice_in_a_results_file_is_refused(
    repo: Path, tmp_path: Path, cli: Cli
) -> None:
    # `baseline update` recorded both runs to one file, the last (5 ms) silently winning;
    # `compare` gated both.
    head = git(repo, "rev-parse", "HEAD")
    runs = [run_record(step_us=1000.0), run_record("c"), run_record(step_us=5000.0)]
    source = results_file(tmp_path / "dup.json", runs, commit=head)
    said = f"perfgate: error: {source}: runs[2]: benchmark 'b' on 'e' is already runs[0]"
    status, _, err = cli("baseline", "update", "--from", str(source), "--repo", str(repo))
    assert status == 2 and err.startswith(said)
    assert not (repo / "baselines").exists()
    status, out, err = cli("compare", str(source), "--repo", str(repo))
    assert (status, out) == (2, "") and err.startswith(said)


def test_a_baseline_update_checks_every_target_before_writing_one(
    repo: Path, tmp_path: Path, cli: Cli
) -> None:
    head = git(repo, "rev-parse", "HEAD")
    (repo / "baselines" / "z" / "e" / f"{head}.json").mkdir(parents=True)
    runs = [run_record("a"), run_record("z")]
    source = results_file(tmp_path / "results.json", runs, commit=head)
    status, _, err = cli("baseline", "update", "--from", str(source), "--repo", str(repo))
    assert status == 2 and "nothing was written" in err
    assert not (repo / "baselines" / "a").exists()  # it was written before the refusal


def test_ctrl_c_while_baselines_are_written_says_which_were(
    repo: Path, tmp_path: Path, cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    # It was a KeyboardInterrupt traceback, and the baselines written so far were not said.
    from perfgate import gate

    head = git(repo, "rev-parse", "HEAD")
    runs = [run_record(name) for name in ("a", "b", "c")]
    source = results_file(tmp_path / "results.json", runs, commit=head)
    from perfgate.store.baselines import write_prepared as write

    written: list[Path] = []

    def write_then_interrupted(path: Path, data: bytes) -> Path:  # Ctrl-C at the third
        if len(written) == 2:
            raise KeyboardInterrupt
        written.append(write(path, data))
        return written[-1]

    monkeypatch.setattr(gate, "write_prepared", write_then_interrupted)
    status, out, err = cli("baseline", "update", "--from", str(source), "--repo", str(repo))
    assert (status, out) == (130, "")
    store = repo / "baselines"
    assert err == (
        "perfgate: error: interrupted while writing baselines: 2 of 3 written "
        f"({store}/a/e/{head}.json, {store}/b/e/{head}.json); {store}/c/e/{head}.json and "
        "the ones after it were not\n"
    )
    assert store_files(repo) == [f"a/e/{head}.json", f"b/e/{head}.json"]


def test_a_baseline_of_a_newer_perfgate_is_kept_and_perfgate_upgraded(
    repo: Path, tmp_path: Path, cli: Cli
) -> None:
    record_one_run(repo, tmp_path / "results.json", cli)
    [path] = (repo / "baselines").rglob("*.json")
    newer = json.loads(path.read_text()) | {"format_version": 99}
    path.write_text(json.dumps(newer))
    current = results_file(tmp_path / "current.json", [run_record(step_us=1001.0)])
    status, out, _ = cli("compare", str(current), "--repo", str(repo))
    assert status == 2
    # Not "delete it and record that commit's baseline again": it is no damaged file.
    assert (
        "newer than this perfgate reads (up to 2); upgrade perfgate; upgrade perfgate where "
        "it runs (keep the file: a newer perfgate wrote it)"
    ) in " ".join(out.split())


def _inspect_json(profile: Path) -> dict[str, Any]:
    """``perfgate inspect PROFILE --format json`` in a process of its own: a reading that
    waits on a FIFO fails the test after a minute instead of hanging the suite."""
    done = subprocess.run(
        [sys.executable, "-m", "perfgate", "inspect", str(profile), "--format", "json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    document: dict[str, Any] = json.loads(done.stdout)
    return document


def test_a_fifo_named_profiler_info_is_passed_over_not_waited_on(tmp_path: Path) -> None:
    source = Path(__file__).parent / "data" / "torch_npu" / "ascend-msinsight"
    profile = tmp_path / "pytorch_text_level1_rank0_ascend_pt"
    shutil.copytree(source / profile.name, profile)
    (profile / "profiler_info_0.json").unlink()
    os.mkfifo(profile / "profiler_info_0.json")
    # it used to wait for a writer forever
    assert _inspect_json(profile)["metrics"]["step_time_us"]["median"] > 0


def test_a_fifo_named_profiler_info_beside_a_db_is_passed_over_not_waited_on(
    tmp_path: Path,
) -> None:
    source = Path(__file__).parent / "data" / "ascend_db" / "pytorch_db_level1_rank0_ascend_pt"
    profile = tmp_path / source.name
    (profile / "ASCEND_PROFILER_OUTPUT").mkdir(parents=True)
    db = "ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler_0.db"
    shutil.copyfile(source / db, profile / db)
    os.mkfifo(profile / "profiler_info_0.json")
    assert _inspect_json(profile)["metrics"]["step_time_us"]["median"] > 0


@pytest.mark.parametrize(
    ("profile_dir", "fifo"),
    [
        ("msprof_full_db", "msprof_1.db"),  # sorts after msprof_0.db: the one read
        (
            "pytorch_db_level1_rank0_ascend_pt",
            "ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler_1.db",
        ),
    ],
)
def test_a_fifo_named_like_a_database_is_passed_over_not_waited_on(
    tmp_path: Path, profile_dir: str, fifo: str
) -> None:
    profile = tmp_path / profile_dir
    shutil.copytree(Path(__file__).parent / "data" / "ascend_db" / profile_dir, profile)
    intact = _inspect_json(profile)
    os.mkfifo(profile / fifo)
    # it used to open the FIFO as the newest export and wait for a writer forever
    assert _inspect_json(profile)["metrics"] == intact["metrics"]


def test_a_report_that_cannot_be_written_whole_leaves_the_old_one(tmp_path: Path) -> None:
    results = Path(__file__).parent / "data" / "records" / "host_copy.results.json"
    page = tmp_path / "report.html"
    page.write_text("the good report of yesterday")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "perfgate",
            "report",
            str(results),
            "--format",
            "html",
            "-o",
            str(page),
        ],
        capture_output=True,
        text=True,
        env=no_bytecode(),
        preexec_fn=lambda: limited_writes(4096),
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr == f"perfgate: error: {page}: cannot write the report: File too large\n"
    assert page.read_text() == "the good report of yesterday"  # was 4096 bytes of a new one
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.html"]


@pytest.mark.skipif(sys.platform != "linux", reason="a file name that is no UTF-8: Linux")
def test_a_profile_under_a_directory_name_that_is_no_utf8_reads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # pyarrow takes paths as text: it raised UnicodeEncodeError ("internal error", exit 2).
    source = Path(__file__).parent / "data" / "torch_npu" / "ascend-msinsight"
    profile = tmp_path / "n\udcff" / "pytorch_text_level1_rank0_ascend_pt"
    shutil.copytree(source / profile.name, profile)
    assert main(["inspect", str(profile), "--format", "json"]) == 0
    read = json.loads(capsys.readouterr().out)
    assert main(["inspect", str(source / profile.name), "--format", "json"]) == 0
    original = json.loads(capsys.readouterr().out)
    assert read["metrics"] == original["metrics"]


LEVEL1 = Path(__file__).parent / "data" / "torch_npu" / "ascend-msinsight"
LEVEL1 = LEVEL1 / "pytorch_text_level1_rank0_ascend_pt"


def _with_step_trace(tmp_path: Path, edit: Any) -> Path:
    profile = tmp_path / LEVEL1.name
    shutil.copytree(LEVEL1, profile)
    table = profile / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv"
    header, row = table.read_text().splitlines()
    table.write_text("\n".join(edit(header.split(","), row.split(","))) + "\n")
    return profile


def test_a_preparing_cell_of_na_is_taken_as_0_and_said(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def na_preparing(header: list[str], row: list[str]) -> list[str]:
        row[header.index("Preparing")] = "N/A"
        return [",".join(header), ",".join(row)]

    profile = _with_step_trace(tmp_path, na_preparing)
    assert main(["inspect", str(profile), "--format", "json"]) == 0
    document = json.loads(capsys.readouterr().out)
    # Computing + Communication(Not Overlapped) + Free of the real row, as the column's
    # absence gives; before, the step silently became its tasks' span, with no note.
    step = document["metrics"]["step_time_us"]["median"]
    assert step == pytest.approx(8873.756 + 101963.203 + 25744.05, abs=1e-3)
    assert any(
        "Preparing is N/A or empty in 1 of 1 row(s): taken as 0" in n for n in document["notes"]
    )


def test_a_column_named_twice_is_refused_not_guessed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def computing_twice(header: list[str], row: list[str]) -> list[str]:
        return [",".join([*header, "Computing"]), ",".join([*row, "99999"])]

    profile = _with_step_trace(tmp_path, computing_twice)
    # The first column was read, the second ignored; which one is right, nobody can tell.
    assert main(["inspect", str(profile)]) == 2
    err = capsys.readouterr().err
    assert "step_trace_time.csv" in err and "'Computing'" in err
    assert "the header names this column 2 times (columns 2, 11)" in err


def test_a_kernel_details_csv_cut_mid_row_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    profile = tmp_path / LEVEL1.name
    shutil.copytree(LEVEL1, profile)
    table = profile / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
    table.write_bytes(table.read_bytes()[:20000])  # a profiler killed while writing
    # It was read as 19 of 34 operators, exit 0, without a word.
    assert main(["inspect", str(profile)]) == 2
    assert capsys.readouterr().err == (
        f"perfgate: error: {table}: its last line has 42 of the header's 46 cells and no line "
        "break: the file looks truncated (expected a torch_npu kernel_details.csv)\n"
    )
    # Cut at a line break, it is a shorter file, read as such.
    text = table.read_bytes()
    table.write_bytes(text[: text.rindex(b"\n") + 1])
    assert main(["inspect", str(profile)]) == 0


@pytest.mark.parametrize(
    ("value", "kind"), [("5", "number"), ('{"a": 1}', "object"), ("null", "null")]
)
def test_trace_events_that_are_no_array_say_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str, kind: str
) -> None:
    trace = tmp_path / "trace.json"
    trace.write_text(f'{{"schemaVersion": 1, "traceEvents": {value}}}')
    # It read "holds no task or step events", as if the array were empty.
    assert main(["inspect", str(trace)]) == 2
    assert capsys.readouterr().err.startswith(
        f"perfgate: error: {trace}: its 'traceEvents' holds a JSON {kind}, not an array of events"
    )


@pytest.mark.parametrize("gzipped", [False, True], ids=["plain", "gzip"])
@pytest.mark.parametrize(
    "trace", ["kineto/sampled_rank-0.json.gz", "ascend_timeline/trace_view.json"]
)
def test_a_trace_after_a_utf8_byte_order_mark_reads_as_without(
    tmp_path: Path, trace: str, gzipped: bool
) -> None:
    import gzip

    import pandas as pd

    from perfgate.ingest import load_profile

    original = DATA / trace
    text = (
        gzip.decompress(original.read_bytes()) if trace.endswith(".gz") else original.read_bytes()
    )
    marked = b"\xef\xbb\xbf" + text
    copy = tmp_path / "trace.json"
    copy.write_bytes(gzip.compress(marked) if gzipped else marked)
    # It was recognised as a trace (detection skips the mark), then refused as "not valid JSON".
    expected, read = load_profile(original), load_profile(copy)
    pd.testing.assert_frame_equal(read.tasks, expected.tasks)
    pd.testing.assert_frame_equal(read.steps, expected.steps)
    assert len(read.tasks) > 0


def test_the_baseline_branch_option_chooses_the_branch_the_gate_reads(repo: Path) -> None:
    # The Action's baseline-branch input recorded on develop while the gate read the default
    # branch: pull requests into develop were no-baseline, green. The option reaches both.
    (repo / "test_bench.py").write_text(
        PLUGIN_PROJECT.replace("time.sleep(0.0005)", "time.sleep(float(open('delay').read()))")
    )
    (repo / "delay").write_text("0.0005")
    (repo / "perfgate.yaml").write_text("statistics: {processes: 1, rounds: 2, max_rounds: 2}\n")
    commit_all(repo, "A benchmark")
    git(repo, "checkout", "--quiet", "-b", "develop")
    (repo / "model.py").write_text("VERSION = 2\n")
    commit_all(repo, "Develop")
    assert run_plugin(repo, "test_bench.py", "--perfgate-update").returncode == 0
    commit_all(repo, "perfgate: baselines of develop")
    git(repo, "checkout", "--quiet", "-b", "feature")
    (repo / "delay").write_text("0.004")
    commit_all(repo, "8x slower")
    unset = run_plugin(repo, "test_bench.py")
    assert unset.returncode == 0, unset.stdout
    assert "loop         no-baseline" in unset.stdout
    done = run_plugin(repo, "test_bench.py", "--perfgate-baseline-branch=develop")
    assert done.returncode == 1, done.stdout
    assert "loop         REGRESSION" in done.stdout
    assert "(merge-base of HEAD and develop" in done.stdout
    results = repo / "perfgate-out" / "results.json"
    compared = subprocess.run(
        [sys.executable, "-m", "perfgate", "compare", str(results), "--baseline-branch", "develop"],
        cwd=repo, env=git_env(), capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert compared.returncode == 1, compared.stdout + compared.stderr
    bad = run_plugin(repo, "test_bench.py", "--perfgate-baseline-branch=-x")
    assert bad.returncode == 4
    assert "--perfgate-baseline-branch: '-x' is no branch name" in bad.stdout + bad.stderr
    both = run_plugin(
        repo, "test_bench.py", "--perfgate-baseline-branch=develop", "--perfgate-baseline-ref=HEAD"
    )
    assert both.returncode == 4
    assert "give either --perfgate-baseline-ref or --perfgate-baseline-branch" in both.stderr


@pytest.mark.parametrize("option", ["--perfgate-json", "--perfgate-md", "--perfgate-html"])
def test_a_report_option_never_removes_a_file_perfgate_did_not_write(
    repo: Path, option: str
) -> None:
    # The session removes its earlier reports first: it removed whatever the option named
    # (the test module itself, perfgate.yaml, notes), before any check.
    (repo / "test_bench.py").write_text(PLUGIN_PROJECT)
    (repo / "NOTES.txt").write_text("keep me\n")
    commit_all(repo, "A benchmark")
    for target in ("test_bench.py", "NOTES.txt"):
        done = run_plugin(repo, "test_bench.py", f"{option}={target}")
        assert done.returncode == 4, done.stdout
        assert (
            f"{option}: {repo / target} exists and is no report perfgate wrote; it would be "
            "replaced"
        ) in done.stdout + done.stderr
    assert (repo / "NOTES.txt").read_text() == "keep me\n"
    assert (repo / "test_bench.py").read_text() == PLUGIN_PROJECT
    # Its own report of an earlier session it replaces, as before.
    assert run_plugin(repo, "test_bench.py", f"{option}=report.out").returncode == 0
    assert run_plugin(repo, "test_bench.py", f"{option}=report.out").returncode == 0


def test_a_path_the_system_refuses_is_one_line_not_a_traceback(
    repo: Path, tmp_path: Path, cli: Cli
) -> None:
    # A name past 255 bytes: "perfgate: internal error" and a traceback (INTERNALERROR, 3,
    # in pytest).
    long = "x" * 300
    baseline = DATA / "records" / "input_pipeline.baseline.json"
    for command in (
        ("inspect", f"{long}.json"),
        ("compare", str(baseline), str(baseline), "-o", str(tmp_path / f"{long}.txt")),
        ("compare", str(baseline), "--config", f"{long}.yaml"),
    ):
        status, _, err = cli(*command)
        assert status == 2, command
        assert err.startswith("perfgate: error: ") and err.endswith(": File name too long\n")
    (repo / "test_bench.py").write_text(PLUGIN_PROJECT)
    commit_all(repo, "A benchmark")
    done = run_plugin(repo, "test_bench.py", f"--perfgate-json={long}.json")
    assert done.returncode == 4, done.stdout + done.stderr
    assert "File name too long" in done.stderr and "INTERNALERROR" not in done.stdout


def test_baselines_of_another_runner_are_named_in_the_terminal(repo: Path) -> None:
    # Only results.json said that the benchmark's baselines are another runner's; the
    # terminal said "no baseline yet", as for a benchmark never recorded.
    (repo / "test_bench.py").write_text(PLUGIN_PROJECT)
    settings = "statistics: {processes: 1, rounds: 2, max_rounds: 2}\n"
    (repo / "perfgate.yaml").write_text(settings + "baseline: {env: ascend910b4-x8}\n")
    commit_all(repo, "A benchmark")
    assert run_plugin(repo, "test_bench.py", "--perfgate-update").returncode == 0
    (repo / "perfgate.yaml").write_text(settings)
    commit_all(repo, "perfgate: baselines of the Ascend runner")
    done = run_plugin(repo, "test_bench.py")
    assert done.returncode == 0, done.stdout
    assert "loop         no-baseline" in done.stdout
    assert "baselines of 'loop' exist for other runner environments: ascend910b4-x8" in (
        done.stdout
    )

"""`perfgate.command` under msprof, end to end through pytest: the real runner calls the
msprof stand-in in tests/bin exactly as it calls msprof, the real reader reads what it
wrote, and the gate names the copy that regressed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import git
import pytest
from conftest import GitRepo

# runpytest runs pytest --perfgate in this process (conftest's in_process_runs explains).
pytestmark = pytest.mark.usefixtures("in_process_runs")

TESTS = Path(__file__).parent
WORKLOADS = TESTS / "data" / "msprof_workloads"

BENCHMARK = f"""
import sys

def test_train(perfgate):
    perfgate.command([sys.executable, {str(WORKLOADS / "train_steps.py")!r},
                      "--steps", "12", "--warmup", "2"])
"""


@pytest.fixture
def ascend_runner(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """A git checkout on a runner whose msprof / npu-smi are the stand-ins in tests/bin."""
    devices = pytester.path / "dev"
    devices.mkdir()
    (devices / "davinci0").touch()
    monkeypatch.setenv("PATH", f"{TESTS / 'bin'}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("PERFGATE_DEV_ROOT", str(devices))
    monkeypatch.setenv("PERFGATE_FAKE_MSPROF_WORKLOAD", str(WORKLOADS / "baseline.json"))
    pytester.makepyfile(test_train=BENCHMARK)
    # This test is about the copy ratio; NumPy step times on a shared runner wander.
    (pytester.path / "perfgate.yaml").write_text(
        "thresholds: {step_time: {max_increase: 50%}, copy_ratio: {max_increase: 1pt}}\n"
    )
    (pytester.path / ".gitignore").write_text("perfgate-out/\n__pycache__/\ndev/\n")
    GitRepo(pytester.path).commit("benchmark", "test_train.py", "perfgate.yaml", ".gitignore")
    return pytester


def test_an_extra_host_copy_under_msprof_fails_on_copy_ratio_and_names_it(
    ascend_runner: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    recorded = ascend_runner.runpytest("--perfgate", "--perfgate-update")
    recorded.assert_outcomes(passed=1)
    [baseline] = list((ascend_runner.path / "baselines" / "train").glob("*/*.json"))
    stored = json.loads(baseline.read_text())
    assert stored["fingerprint"]["profiler"] == "msprof"
    assert stored["parameters"]["profiler"] == "msprof"
    # Three processes, one msprof pass of 12 steps each (warm-up steps are not samples);
    # every timed round is a run of the script, a process of its own.
    assert len(stored["samples"]["step_time_us"]) == 3 * 12
    assert set(stored["samples"]["process"]) == {0, 1, 2}
    assert len(stored["timing"]["step_time_us"]) == 3 * 5 * 12
    matmul = next(o for o in stored["operators"] if o["op_type"] == "MatMulV2")
    assert (matmul["calls_per_step"], matmul["time_per_step_us"]) == (2.0, 1800.0)
    repo = git.Repo(ascend_runner.path)
    repo.git.add("-A")
    repo.index.commit("perfgate: baselines")

    monkeypatch.setenv("PERFGATE_FAKE_MSPROF_WORKLOAD", str(WORKLOADS / "regressed.json"))
    result = ascend_runner.runpytest("--perfgate")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    result.stdout.fnmatch_lines(
        [
            "*! train: copy_ratio regressed: *% → *% (+*pt, limit +1pt) vs baseline *"
            "explained by MEMCPY_ASYNC ?MEMCPY_ASYNC? +0.480 ms/step (calls/step 1 → 2)*",
        ]
    )
    results = json.loads((ascend_runner.path / "perfgate-out" / "results.json").read_text())
    [run] = results["runs"]
    assert run["verdict"] == "regression"
    copy = next(m for m in run["comparison"]["metrics"] if m["name"] == "copy_ratio")
    assert copy["status"] == "regression"
    # 120 µs → 600 µs of copies in steps of about 7–9 ms (more on a busy runner): past the
    # 1pt limit, and the copy tasks per step rose 1 → 2.
    assert copy["change"] > 0.01
    assert copy["copy_calls"] == [1.0, 2.0]

    # The kept profile is this run's (the recording's PROF_* of three processes are gone), and
    # `perfgate inspect` of it reads the steps the command marked, as the gate did: it read
    # the export's own step_trace and ignored step_marks.jsonl.
    kept = ascend_runner.path / "perfgate-out" / "profiles" / "train"
    assert len(list(kept.glob("PROF_*"))) == 1
    inspected = subprocess.run(
        [sys.executable, "-m", "perfgate", "inspect", str(kept), "--format", "json"],
        capture_output=True,
        text=True,
        check=True,
    )
    document = json.loads(inspected.stdout)
    assert document["steps"]["analysed"] == len(run["samples"]["step_time_us"]) == 12
    n = document["metrics"]["copy_ratio"]["n"]
    assert (n, type(n)) == (12, int)  # a count, as docs/json.md shows it (it was 12.0)
    gated = copy["current"]
    assert document["metrics"]["copy_ratio"]["median"] == pytest.approx(gated, abs=0.02)


def test_without_msprof_on_path_the_benchmark_fails_saying_how_to_fix_it(
    ascend_runner: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", os.path.dirname(sys.executable) + os.pathsep + "/usr/bin:/bin")
    kept = ascend_runner.path / "perfgate-out" / "profiles" / "train"
    result = ascend_runner.runpytest("--perfgate", "--perfgate-profiler=msprof")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*msprof not found on PATH*set_env.sh*"])
    # Said before the timed rounds (5 runs of a training script can take minutes): the
    # script never ran, so it marked no steps.
    assert not list(kept.rglob("*.jsonl")), sorted(kept.rglob("*"))

    # On a runner with NPUs, `auto` measured step times alone when msprof was missing (the
    # CANN environment not sourced): incomparable with the msprof baseline, and a pass.
    result = ascend_runner.runpytest("--perfgate")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            "*msprof not found on PATH*set_env.sh*; this runner has Ascend NPUs, so perfgate "
            "will not measure step times alone in silence (--perfgate-profiler=none asks for "
            "that)*"
        ]
    )
    [run] = json.loads((ascend_runner.path / "perfgate-out" / "results.json").read_text())["runs"]
    assert run["verdict"] == "error"
    # Without NPUs (a CPU runner), `auto` is step time only, as before.
    monkeypatch.setenv("PERFGATE_DEV_ROOT", str(ascend_runner.path / "no-devices"))
    result = ascend_runner.runpytest("--perfgate")
    result.assert_outcomes(passed=1)
    [run] = json.loads((ascend_runner.path / "perfgate-out" / "results.json").read_text())["runs"]
    assert run["parameters"]["profiler"] == "none"

"""The terminal as a pytest user reads it (`pytest --perfgate`, end to end with pytester):
every non-pass verdict in the session table carries its one-line reason, pytest-benchmark's
own table is not printed for perfgate benchmarks, and the profiler's own lines (Kineto's
``USDT: … profiler_start``) stay out of the output."""

from __future__ import annotations

import json

import pytest
from conftest import GitRepo

pytestmark = pytest.mark.usefixtures("needs_torch")

# WORK sets the work per step; the step also writes a line to stderr under the profiler,
# which must survive the silencing of the profiler's own lines.
BENCHMARK = """
import os
import sys
import torch

def test_matmul(perfgate):
    work = int(os.environ.get("WORK", "1"))
    a = torch.randn(128, 128)
    said = []

    def step():
        for _ in range(4 * work):
            torch.mm(a, a)
        if not said:
            print("the step writes to stderr", file=sys.stderr)
            said.append(True)

    perfgate.run(step, steps=8, warmup=1)

def test_pytest_benchmark_still_has_its_table(benchmark):
    benchmark(sum, range(100))
"""


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(test_bench=BENCHMARK)
    pytester.makeini("[pytest]\n")
    (pytester.path / "perfgate.yaml").write_text(
        "thresholds:\n  step_time: {max_increase: 60%}\n  utilization: {max_drop: 50pt}\n"
        "  copy_ratio: {max_increase: 50pt}\n"
        "statistics: {rounds: 3, max_rounds: 3, processes: 1}\n"
    )
    repo = GitRepo(pytester.path)
    repo.write(".gitignore", "perfgate-out/\n__pycache__/\n.benchmarks/\n")
    repo.commit("benchmark")
    return pytester


def _perfgate_section(output: str) -> list[str]:
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines) if "= perfgate =" in line)
    end = next(
        (i for i, line in enumerate(lines) if i > start and line.startswith("=")), len(lines)
    )
    return lines[start + 1 : end]


def _reasons_follow_the_table(section: list[str]) -> dict[str, str]:
    """Each benchmark row's verdict, checked: a non-pass verdict has its reason — its own
    line under the table, or for no-baseline the one line that says how to record them."""
    table = section[: next(i for i, line in enumerate(section) if line.startswith("results: "))]
    # The rows follow the rule under the header (one line, or two on a narrow terminal).
    rule = next(i for i, line in enumerate(table) if line.startswith("---"))
    rows = [line.split() for line in table[rule + 1 :] if line]
    verdicts = {row[0]: row[1] for row in rows if len(row) > 1 and not row[0].endswith(":")}
    for name, verdict in verdicts.items():
        if verdict == "no-baseline":
            assert any(line.startswith("no baseline yet for some benchmarks") for line in section)
        elif verdict.lower() != "pass":
            assert any(line.startswith(f"{name}: ") for line in section), (name, section)
    return verdicts


def test_every_verdict_but_pass_says_why_in_one_line(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = project.runpytest_subprocess("--perfgate", "-p", "no:cacheprovider")
    first.assert_outcomes(passed=2)
    section = _perfgate_section(first.stdout.str())
    assert _reasons_follow_the_table(section) == {"matmul": "no-baseline"}
    assert any("record them with `pytest --perfgate --perfgate-update`" in line for line in section)

    recorded = project.runpytest_subprocess("--perfgate", "--perfgate-update")
    recorded.assert_outcomes(passed=2)
    repo = GitRepo(project.path)
    head = repo.head  # the baseline's commit
    repo.commit("perfgate: baselines")

    monkeypatch.setenv("WORK", "40")
    heavier = project.runpytest_subprocess("--perfgate", "-p", "no:cacheprovider")
    heavier.assert_outcomes(passed=1, failed=1)
    section = _perfgate_section(heavier.stdout.str())
    assert _reasons_follow_the_table(section) == {"matmul": "REGRESSION"}
    # The reason is the regressed metric's own line, whatever else is unstable.
    [reason] = [line for line in section if line.startswith("matmul: ")]
    assert reason.startswith("matmul: step_time regressed: ")
    assert f"vs baseline {head[:12]}" in reason
    # The failure message carries the advisor's hints on the regressed run, when any fired
    # (which ones depends on how long this machine's kernels take).
    results = json.loads((project.path / "perfgate-out" / "results.json").read_text())
    [run] = [r for r in results["runs"] if r["benchmark"] == "matmul"]
    if run.get("advice"):
        heavier.stdout.fnmatch_lines(["*advisor (* hint(s) on the current run):*"])
    else:
        assert "advisor (" not in heavier.stdout.str()

    monkeypatch.setenv("WORK", "1")
    other = project.runpytest_subprocess(
        "--perfgate", "--perfgate-profiler=none", "-p", "no:cacheprovider"
    )
    other.assert_outcomes(passed=2)
    section = _perfgate_section(other.stdout.str())
    assert _reasons_follow_the_table(section) == {"matmul": "incomparable"}
    # Another profiler records another device basis: a hard difference, named.
    [reason] = [line for line in section if line.startswith("matmul: ")]
    assert reason.startswith("matmul: incomparable: environment differs (hard): ")
    assert "→" in reason


def test_pytest_benchmark_prints_its_table_only_for_its_own_tests(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("pytest_benchmark")
    # Under xdist pytest-benchmark switches itself off in any pytest that inherits this.
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    result = project.runpytest_subprocess("--perfgate", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)
    output = result.stdout.str()
    # pytest-benchmark's table is there for the test that uses its fixture…
    table = [line for line in output.splitlines() if "test_pytest_benchmark_still_has" in line]
    assert table, output
    # …and perfgate's benchmark appears in perfgate's table only: one set of numbers.
    assert not any("test_matmul" in line for line in output.splitlines() if "benchmark" in line)
    assert "Name (time in" in output
    benchmark_table = output.split("Name (time in", 1)[1].split("Legend:", 1)[0]
    assert "test_matmul" not in benchmark_table


def test_no_profiler_lines_in_the_output(project: pytest.Pytester) -> None:
    result = project.runpytest_subprocess("--perfgate", "-s", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)
    everything = result.stdout.str() + result.stderr.str()
    assert "USDT:" not in everything
    assert "profiler_start" not in everything and "profiler_stop" not in everything
    # What the benchmark itself writes to stderr under the profiler still shows.
    assert "the step writes to stderr" in everything

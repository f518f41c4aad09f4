"""benchmarks/real_noise.py --ab: a regression is edited into the working tree for one run
and restored after it (also when the run fails), a file without the expected line fails
clearly, and the summary states the wall time per benchmark. No pytest run, no torch."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from conftest import GitRepo

ROOT = Path(__file__).resolve().parents[1]


def _load() -> ModuleType:
    path = ROOT / "benchmarks" / "real_noise.py"
    spec = importlib.util.spec_from_file_location("real_noise", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


real_noise = _load()

MODELS = 'import os\n\nREGRESSION = os.environ.get("PERFGATE_EXAMPLE_REGRESSION", "")\nSTEPS = 3\n'


def test_the_examples_have_the_line_the_ab_mode_edits() -> None:
    text = (ROOT / real_noise.MODELS).read_text(encoding="utf-8")
    assert text.splitlines().count(real_noise.REGRESSION_LINE) == 1


def test_a_regression_is_edited_in_for_one_run_and_restored(git_repo: GitRepo) -> None:
    git_repo.write("examples/models.py", MODELS)
    git_repo.commit("models")
    models = git_repo.path / "examples" / "models.py"
    with real_noise.regression_edit(git_repo.path, "host_copy"):
        edited = models.read_text(encoding="utf-8")
        assert 'os.environ.get("PERFGATE_EXAMPLE_REGRESSION", "host_copy")\n' in edited
        assert edited.replace('"host_copy")', '"")') == MODELS
    assert models.read_text(encoding="utf-8") == MODELS
    with pytest.raises(RuntimeError), real_noise.regression_edit(git_repo.path, "slow_op"):
        raise RuntimeError("the run failed")
    assert models.read_text(encoding="utf-8") == MODELS
    assert not git_repo.repo.is_dirty()


def test_a_models_file_without_the_line_fails_clearly(git_repo: GitRepo) -> None:
    git_repo.write("examples/models.py", 'REGRESSION = "host_copy"\n')
    git_repo.commit("models")
    with (
        pytest.raises(SystemExit, match="exactly once"),
        real_noise.regression_edit(git_repo.path, "idle_gap"),
    ):
        pytest.fail("entered without the line")
    assert not git_repo.repo.is_dirty()


def _run(scenario: str, wall: float, verdicts: list[str]) -> dict[str, Any]:
    return {
        "scenario": scenario,
        "index": 0,
        "exit_code": 1 if "regression" in verdicts else 0,
        "wall_s": wall,
        "loadavg_start": 1.0,
        "loadavg_end": 1.0,
        "benchmarks": {f"b{i}": {"verdict": v, "metrics": {}} for i, v in enumerate(verdicts)},
    }


def test_the_ab_summary_states_the_wall_time_per_benchmark() -> None:
    runs = [
        _run("ab unchanged", 120.0, ["ok", "ok", "ok"]),
        _run("ab host_copy", 90.0, ["regression", "ok", "ok"]),
        {**_run("ab slow_op", 30.0, []), "exit_code": 3},
    ]
    rows = real_noise.summarize(runs, per_benchmark=True)
    assert [r["wall_s_per_benchmark_median"] for r in rows] == [40.0, 30.0, None]
    table = real_noise.render(rows).splitlines()
    assert "wall/benchmark" in table[0]
    assert table[2].startswith("| ab unchanged | 1 | 0 | b0: ok 1")
    assert "| 40.0 s (max 40.0) |" in table[2]
    assert "| — |" in table[4]
    # The store mode's table keeps its columns.
    store = real_noise.render(real_noise.summarize(runs)).splitlines()
    assert "wall/benchmark" not in store[0]


def test_neighbours_run_beside_the_block_and_are_gone_after_it() -> None:
    with real_noise.neighbours(2) as processes:
        assert len(processes) == 2
        assert all(process.poll() is None for process in processes)  # running, CPU-bound
    assert all(process.poll() is not None for process in processes)
    with real_noise.neighbours(0) as none:
        assert none == []

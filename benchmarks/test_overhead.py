"""What perfgate adds to a benchmark beyond running it: measured with pytest-benchmark,
as ratios to the profiled run itself, measured in the same session.

    pytest benchmarks/test_overhead.py --benchmark-columns=median,mean,rounds

Not part of the test suite (``testpaths`` is ``tests``): timing is for humans, not CI.
The numbers are in docs/overhead.md.
"""

from __future__ import annotations

import sys
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from perfgate.analysis.compare import compare_runs
from perfgate.analysis.metrics import analyze
from perfgate.analysis.record import run_record
from perfgate.ingest import load_profile
from perfgate.profilers.torch_profiler import record_trace
from perfgate.rules import default_rules

sys.path.insert(0, str(Path(__file__).parents[1] / "examples"))
from models import cnn_train_step

STEPS = 20


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return record_trace(
        cnn_train_step(), tmp_path_factory.mktemp("t") / "cnn.json", steps=STEPS, warmup=1
    )


def test_reference_the_profiled_steps(benchmark: Any, tmp_path: Path) -> None:
    """The reference: 20 CNN training steps under torch.profiler, trace written."""
    step = cnn_train_step()
    benchmark.group = "overhead"
    benchmark.pedantic(
        lambda: record_trace(step, tmp_path / "cnn.json", steps=STEPS, warmup=1),
        rounds=3,
        iterations=1,
        warmup_rounds=1,
    )


def test_perfgate_reads_analyses_and_compares(benchmark: Any, trace: Path) -> None:
    """perfgate's own work on that trace: read, analyse, build the record, compare."""
    rules = default_rules()

    def work() -> None:
        profile = load_profile(trace)
        record = run_record(profile, analyze(profile), benchmark="cnn_train", env="cpu")
        compare_runs(record, record, rules)

    benchmark.group = "overhead"
    benchmark.pedantic(work, rounds=5, iterations=1, warmup_rounds=1)
    tracemalloc.start()
    work()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    benchmark.extra_info["peak_python_memory_mb"] = round(peak / 2**20, 1)
    benchmark.extra_info["trace_mb"] = round(trace.stat().st_size / 2**20, 1)

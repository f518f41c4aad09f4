"""The torch_npu profiler path without an NPU: stand-ins for torch_npu packages as a runner may
hold them (one whose import fails because the CANN environment is not set up; one of the
older API, before ``ExportType``), called exactly as perfgate calls torch_npu."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from perfgate.errors import PerfgateError
from perfgate.ingest import load_profile
from perfgate.profilers.measure import resolve_in_process_profiler
from perfgate.profilers.torch_npu_profiler import record_ascend_profile

REAL_EXPORT = (
    Path(__file__).parent
    / "data"
    / "torch_npu"
    / "ascend-msinsight"
    / "pytorch_text_level1_rank0_ascend_pt"
)

BROKEN = """
raise ImportError("libhccl.so: cannot open shared object file: No such file or directory")
"""

# torch_npu.profiler of the CANN 7.0 era: _ExperimentalConfig(profiler_level, aic_metrics,
# l2_cache, …) and no ExportType (it writes the text export only). Its handler leaves a real
# torch_npu text export where it is told to.
OLDER_PROFILER = f"""
import shutil
from pathlib import Path

calls = []

class ProfilerLevel:
    Level0, Level1, Level2 = "Level0", "Level1", "Level2"

class AiCMetrics:
    PipeUtilization = "PipeUtilization"

class ProfilerActivity:
    CPU, NPU = "CPU", "NPU"

def _ExperimentalConfig(profiler_level=None, aic_metrics=None, l2_cache=False,
                        record_op_args=False):
    calls.append(("_ExperimentalConfig", dict(profiler_level=profiler_level,
                                                aic_metrics=aic_metrics)))
    return object()

def schedule(wait, warmup, active, repeat=0, skip_first=0):
    calls.append(("schedule", dict(wait=wait, warmup=warmup, active=active, repeat=repeat)))
    return object()

def tensorboard_trace_handler(dir_name):
    def handler(prof):
        shutil.copytree({str(REAL_EXPORT)!r}, Path(dir_name) / "runner_123_ascend_pt")
    return handler

class profile:
    def __init__(self, activities, schedule, on_trace_ready, record_shapes,
                 experimental_config):
        self.on_trace_ready = on_trace_ready
        self.steps = 0
    def __enter__(self):
        return self
    def step(self):
        self.steps += 1
    def __exit__(self, *exc):
        calls.append(("steps", self.steps))
        self.on_trace_ready(self)
"""


def _install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, files: dict[str, str]) -> None:
    """A torch_npu package on sys.path (and no torch_npu imported before)."""
    for name, text in files.items():
        path = tmp_path / "site" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    for module in [m for m in sys.modules if m.split(".")[0] == "torch_npu"]:
        monkeypatch.delitem(sys.modules, module)


def test_a_torch_npu_that_does_not_import_is_an_error_not_a_cpu_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("torch")
    _install(tmp_path, monkeypatch, {"torch_npu/__init__.py": BROKEN})
    # `auto` took the failed import for "no NPU" and measured on the CPU: another runner key,
    # no baseline there, and a pass.
    with pytest.raises(PerfgateError) as caught:
        resolve_in_process_profiler("auto")
    assert str(caught.value) == (
        "torch_npu is installed but does not import (libhccl.so: cannot open shared object "
        "file: No such file or directory): source the CANN environment first, e.g. `source "
        "/usr/local/Ascend/ascend-toolkit/set_env.sh` (or set the action's cann-env input); "
        "or --perfgate-profiler=torch to measure without it"
    )
    assert resolve_in_process_profiler("torch") == "torch"  # asked for: no torch_npu needed
    with pytest.raises(PerfgateError, match=r"^torch_npu is installed but does not import \("):
        record_ascend_profile(lambda: None, tmp_path / "out", steps=2)


def test_an_older_torch_npu_without_export_type_writes_its_text_export(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _install(
        tmp_path,
        monkeypatch,
        {
            "torch_npu/__init__.py": "from . import profiler\n",
            "torch_npu/profiler.py": OLDER_PROFILER,
        },
    )
    steps: list[int] = []
    written = record_ascend_profile(lambda: steps.append(1), tmp_path / "out", steps=4, warmup=1)
    # It was AttributeError: module 'torch_npu.profiler' has no attribute 'ExportType'.
    assert written == tmp_path / "out" / "runner_123_ascend_pt"
    calls = sys.modules["torch_npu.profiler"].calls
    assert calls == [
        ("_ExperimentalConfig", {"profiler_level": "Level1", "aic_metrics": "PipeUtilization"}),
        ("schedule", {"wait": 0, "warmup": 1, "active": 4, "repeat": 1}),
        ("steps", 5),
    ]
    assert len(steps) == 5
    assert load_profile(written).source == "torch_npu"


def test_a_torch_npu_profiler_without_what_perfgate_calls_is_one_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lacking = OLDER_PROFILER.replace("def schedule(", "def no_schedule(")
    _install(
        tmp_path,
        monkeypatch,
        {
            "torch_npu/__init__.py": "__version__ = '2.1.0'\nfrom . import profiler\n",
            "torch_npu/profiler.py": lacking,
        },
    )
    with pytest.raises(PerfgateError) as caught:
        record_ascend_profile(lambda: None, tmp_path / "out", steps=2)
    assert str(caught.value) == (
        "torch_npu 2.1.0: its profiler lacks what perfgate uses (module 'torch_npu.profiler' "
        "has no attribute 'schedule'); perfgate needs torch_npu.profiler with "
        "_ExperimentalConfig(profiler_level, aic_metrics), schedule and "
        "tensorboard_trace_handler; upgrade torch_npu, or measure with --perfgate-profiler=torch"
    )

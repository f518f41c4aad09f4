"""Record a step loop with the torch_npu profiler (Ascend), in-process.

API as documented for Ascend Extension for PyTorch (torch_npu.profiler.profile with
``_ExperimentalConfig(profiler_level=Level1, aic_metrics=PipeUtilization)``, a schedule and
``tensorboard_trace_handler``), written as a text export that perfgate's torch_npu reader
reads. torch_npu is imported lazily. This path needs an NPU: the tests here exercise its
reader on real torch_npu outputs, not this function.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from perfgate.errors import PerfgateError
from perfgate.profilers.environment import torch_npu_import_error
from perfgate.profilers.quiet import quiet_profiler


def record_ascend_profile(
    step_fn: Callable[[], object], out_dir: str | Path, *, steps: int = 10, warmup: int = 1
) -> Path:
    """Profile ``steps`` steps (after ``warmup`` profiled-but-discarded steps) and return
    the ``*_ascend_pt`` directory torch_npu wrote under ``out_dir``."""
    try:
        import torch_npu
    except ImportError as exc:
        if exc.name == "torch_npu":
            raise PerfgateError(
                "--perfgate-profiler=torch_npu needs torch_npu (Ascend Extension for PyTorch), "
                "which is not installed"
            ) from None
        raise torch_npu_import_error(exc) from None
    profiler: Any = torch_npu.profiler
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    before = set(out.glob("*_ascend_pt"))
    try:
        options = {
            "profiler_level": profiler.ProfilerLevel.Level1,
            "aic_metrics": profiler.AiCMetrics.PipeUtilization,
        }
        # torch_npu before ExportType (CANN 7.0 and older) writes the text export only.
        if hasattr(profiler, "ExportType"):
            options["export_type"] = profiler.ExportType.Text
        experimental = profiler._ExperimentalConfig(**options)
        activities = [profiler.ProfilerActivity.CPU, profiler.ProfilerActivity.NPU]
        schedule = profiler.schedule(wait=0, warmup=warmup, active=steps, repeat=1)
        on_trace_ready = profiler.tensorboard_trace_handler(str(out))
    except (AttributeError, TypeError) as exc:
        version = getattr(torch_npu, "__version__", "of unknown version")
        raise PerfgateError(
            f"torch_npu {version}: its profiler lacks what perfgate uses ({exc}); perfgate "
            "needs torch_npu.profiler with _ExperimentalConfig(profiler_level, aic_metrics), "
            "schedule and tensorboard_trace_handler; upgrade torch_npu, or measure with "
            "--perfgate-profiler=torch"
        ) from None
    with (
        quiet_profiler(),
        profiler.profile(
            activities=activities,
            schedule=schedule,
            on_trace_ready=on_trace_ready,
            record_shapes=True,
            experimental_config=experimental,
        ) as prof,
    ):
        for _ in range(warmup + steps):
            step_fn()
            prof.step()
    written = sorted(set(out.glob("*_ascend_pt")) - before)
    if not written:
        raise PerfgateError(f"{out}: torch_npu's profiler wrote no *_ascend_pt directory")
    return written[-1]

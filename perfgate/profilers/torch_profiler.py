"""Record a step loop with torch.profiler into a Kineto (chrome) trace.

torch is imported lazily: perfgate itself does not need it, only profiled workloads do.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from perfgate.errors import PerfgateError
from perfgate.profilers.quiet import quiet_profiler


def _torch() -> Any:
    try:
        import torch
    except ImportError:
        raise PerfgateError(
            "the torch profiler needs PyTorch: pip install 'perfgate[torch]' (or pip install torch)"
        ) from None
    return torch


def record_trace(
    step_fn: Callable[[], object],
    out_path: str | Path,
    *,
    steps: int = 10,
    warmup: int = 3,
    record_shapes: bool = True,
) -> Path:
    """Run ``warmup + steps`` calls of ``step_fn`` under torch.profiler; write the trace.

    The profiler's own schedule does the warm-up (``wait=0, warmup=warmup, active=steps``),
    so the trace holds exactly ``steps`` ``ProfilerStep#N`` windows. CUDA activity is
    recorded when CUDA is available, and each step ends with a device synchronise so a
    step's kernels fall inside its window.

    Returns:
        The path of the written chrome trace (``.json``; ``.json.gz`` if asked for).
    """
    if steps < 1 or warmup < 0:
        raise PerfgateError(
            f"steps must be >= 1 and warmup >= 0 (got steps={steps}, warmup={warmup})"
        )
    torch = _torch()
    profiler = torch.profiler
    activities = [profiler.ProfilerActivity.CPU]
    cuda = bool(torch.cuda.is_available())
    if cuda:
        activities.append(profiler.ProfilerActivity.CUDA)
    out = Path(out_path)
    out.parent.mkdir(parents=True, exist_ok=True)

    def export(prof: Any) -> None:
        prof.export_chrome_trace(str(out))

    # Kineto writes "USDT: … profiler_start/stop" to stderr: kept out of the test output.
    with (
        quiet_profiler(),
        profiler.profile(
            activities=activities,
            schedule=profiler.schedule(wait=0, warmup=warmup, active=steps, repeat=1),
            on_trace_ready=export,
            record_shapes=record_shapes,
        ) as prof,
    ):
        for _ in range(warmup + steps):
            step_fn()
            if cuda:
                torch.cuda.synchronize()
            prof.step()
    if not out.exists():
        raise PerfgateError(f"{out}: torch.profiler wrote no trace")
    return out

"""Record a step loop with torch.profiler into a Kineto (chrome) trace.

torch is imported lazily: perfgate itself does not need it, only profiled workloads do.
"""

from __future__ import annotations

import sys
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
    step's kernels fall inside its window. On CPU the same schedule drives the autograd
    profiler directly (:func:`_record_on_cpu`: the same trace, without torch.profiler's
    import of ``torch._inductor``).

    Returns:
        The path of the written chrome trace (``.json``; ``.json.gz`` if asked for).
    """
    if steps < 1 or warmup < 0:
        raise PerfgateError(
            f"steps must be >= 1 and warmup >= 0 (got steps={steps}, warmup={warmup})"
        )
    torch = _torch()
    cuda = bool(torch.cuda.is_available())
    out = Path(out_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    if cuda or _needs_torch_profiler(torch):
        _record_with_torch_profiler(torch, step_fn, out, steps, warmup, record_shapes, cuda)
    else:
        _record_on_cpu(torch, step_fn, out, steps, warmup, record_shapes)
    if not out.exists():
        raise PerfgateError(f"{out}: torch.profiler wrote no trace")
    return out


def _record_with_torch_profiler(
    torch: Any,
    step_fn: Callable[[], object],
    out: Path,
    steps: int,
    warmup: int,
    record_shapes: bool,
    cuda: bool,
) -> None:
    profiler = torch.profiler
    activities = [profiler.ProfilerActivity.CPU]
    if cuda:
        activities.append(profiler.ProfilerActivity.CUDA)

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


def _needs_torch_profiler(torch: Any) -> bool:
    """Whether a CPU run needs what torch.profiler.profile adds to the autograd profiler: the
    benchmark imported inductor (its CUDA-graphs setting then counts), a process group is up
    (the trace's ``distributedInfo`` names the rank), or this torch's autograd profiler lacks
    the prepare / start phases that torch.profiler's schedule drives."""
    if "torch._inductor" in sys.modules:
        return True
    distributed = torch.distributed
    if distributed.is_available() and distributed.is_initialized():
        return True
    recorder = torch.autograd.profiler.profile
    return not (hasattr(recorder, "_prepare_trace") and hasattr(recorder, "_start_trace"))


def _record_on_cpu(
    torch: Any,
    step_fn: Callable[[], object],
    out: Path,
    steps: int,
    warmup: int,
    record_shapes: bool,
) -> None:
    """What torch.profiler.profile does for a CPU-only schedule, without it.

    torch.profiler.profile imports ``torch._inductor`` when it starts, only to read its
    CUDA-graphs setting (about 2 s per process on a CI runner, more than a small benchmark's
    whole profiled pass). On CPU that setting does nothing, so the autograd profiler it wraps
    is driven here as its schedule would: prepared for the warm-up steps, started for the
    active ones, each step annotated ``ProfilerStep#N``. The trace is the same Kineto trace.
    (With CUDA, and where :func:`_needs_torch_profiler` says so, torch.profiler runs as is.)
    """
    recorder = torch.autograd.profiler.profile(
        use_kineto=True, use_cpu=True, record_shapes=record_shapes
    )
    with quiet_profiler():
        recorder._prepare_trace()
        started = False
        try:
            for _ in range(warmup):
                step_fn()
            recorder._start_trace()
            started = True
            if record_shapes:  # as torch.profiler notes it in the trace's header
                torch.autograd._add_metadata_json("record_shapes", "1")
            for number in range(warmup, warmup + steps):
                with torch.profiler.record_function(f"ProfilerStep#{number}"):
                    step_fn()
        finally:
            if not started:  # a warm-up step raised: stop as torch.profiler stops a warm-up,
                recorder._start_trace()  # else torch warns "no active profiling session"
            recorder.__exit__(None, None, None)
        recorder.export_chrome_trace(str(out))

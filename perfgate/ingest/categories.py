"""Which category a task falls in (DESIGN §3), one place for every reader."""

from __future__ import annotations

import re

from perfgate.model import Category

ASCEND_COMPUTE = frozenset(
    {"AI_CORE", "AI_VECTOR_CORE", "MIX_AIC", "MIX_AIV", "AI_CPU", "FFTS_PLUS"}
)
ASCEND_COPY = frozenset({"MEMCPY_ASYNC", "SDMA_SQE", "PCIE_DMA_SQE"})
ASCEND_COMM = frozenset({"HCCL", "COMMUNICATION"})
# Task types that say nothing: ``N/A`` at Level0, ``Other`` for AI Core kernels in some
# torch_npu timelines (torch_npu counts those as Computing). See ascend_category.
UNKNOWN_CORE = frozenset({"", "N/A", "NA", "UNKNOWN", "OTHER"})

CPU_COPY_OPS = frozenset({"aten::copy_", "aten::to", "aten::_to_copy"})

_CUDA_DIRECTION = re.compile(r"\b(HtoD|DtoH|DtoD|HtoH|PtoP)\b", re.IGNORECASE)
_DIRECTIONS = {"htod": "h2d", "dtoh": "d2h", "dtod": "d2d", "htoh": "h2h", "ptop": "p2p"}


def ascend_category(task_type: str, name: str) -> Category:
    """Category of an Ascend task from its Task Type / Accelerator Core and name.

    Level0 profiles write ``N/A`` for the task type; there a task named ``hcom_*`` is
    communication and everything else is taken as compute (op_summary at Level0 lists the
    kernels the framework launched, not DMA or event tasks).
    """
    kind = task_type.strip().upper()
    if kind in ASCEND_COMM or name.startswith("hcom_"):
        return Category.COMM
    if kind in ASCEND_COMPUTE:
        return Category.COMPUTE
    if kind in ASCEND_COPY:
        return Category.COPY
    if kind in UNKNOWN_CORE:
        return Category.COMPUTE
    return Category.OTHER


def cuda_category(cat: str, name: str) -> Category:
    """Category of a Kineto GPU event (``cat`` is the trace's event category)."""
    if cat == "gpu_memcpy":
        return Category.COPY
    if cat == "kernel":
        lowered = name.lower()
        if lowered.startswith("nccl") or "ncclkernel" in lowered or "ncclDevKernel" in name:
            return Category.COMM
        return Category.COMPUTE
    return Category.OTHER


def cuda_copy_direction(name: str) -> str | None:
    """``h2d``/``d2h``/``d2d``… from a name like ``Memcpy HtoD (Pageable -> Device)``."""
    match = _CUDA_DIRECTION.search(name)
    return _DIRECTIONS[match.group(1).lower()] if match else None


def cpu_category(name: str) -> Category:
    """Category of a top-level CPU op in a CPU-only run."""
    return Category.COPY if name in CPU_COPY_OPS else Category.COMPUTE

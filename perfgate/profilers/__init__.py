"""Running a workload under a profiler (torch.profiler in-process; msprof and torch_npu later)."""

from __future__ import annotations

"""Canonical tables, their columns and units, and the :class:`Profile` every reader returns.

Every reader (torch_npu, msprof, Kineto, the SQLite exports) produces the same two tables, so
everything downstream is written once. All times are microseconds (µs) as float64; absolute
timestamps are the source's own clock (epoch µs for Ascend, the trace clock for Kineto).

``tasks`` — one row per device task (per top-level CPU op for CPU-only runs):

============  =======  ===========================================================
column        dtype    meaning
============  =======  ===========================================================
rank          int64    rank / device the task ran on (0 for single-device runs)
step          Int64    step the task belongs to; <NA> when the source does not say
                       (``assign_steps`` fills it from the step windows)
name          object   kernel / op instance name (``Op Name``, Kineto ``name``)
op_type       object   operator type (``OP Type``/``Type``); the name when the source
                       has no type
core          object   accelerator core / task type (``AI_CORE``, ``MIX_AIC``,
                       ``SDMA_SQE``, ``kernel``, ``gpu_memcpy``, ``cpu``, …)
category      object   one of :class:`Category`
start_us      float64  task start
dur_us        float64  task duration
============  =======  ===========================================================

Optional task columns: ``input_shapes`` (object), ``direction`` (object: ``h2d``, ``d2h``,
``d2d`` for copies when the source says), ``stream`` (object).

``steps`` — one row per (rank, step): ``rank`` (int64), ``step`` (Int64), ``start_us``,
``end_us`` (float64, NaN when the source gives no window, e.g. ``step_trace_time.csv`` alone).
Optional: the breakdown the source computed itself, ``computing_us``,
``comm_not_overlapped_us``, ``free_us``, ``preparing_us`` (float64), and ``warmup`` (bool:
the source marks the step as warm-up; such steps are excluded from metrics).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

import pandas as pd

from perfgate.errors import ProfileError


class Category(str, Enum):
    """What a task spends device time on (DESIGN §3)."""

    COMPUTE = "compute"
    COPY = "copy"
    COMM = "comm"
    OTHER = "other"


CATEGORIES = tuple(c.value for c in Category)

TASK_COLUMNS = ("rank", "step", "name", "op_type", "core", "category", "start_us", "dur_us")
OPTIONAL_TASK_COLUMNS = ("input_shapes", "direction", "stream")
STEP_COLUMNS = ("rank", "step", "start_us", "end_us")
BREAKDOWN_COLUMNS = ("computing_us", "comm_not_overlapped_us", "free_us", "preparing_us")

_TASK_DTYPES: dict[str, str] = {
    "rank": "int64",
    "step": "Int64",
    "name": "object",
    "op_type": "object",
    "core": "object",
    "category": "object",
    "start_us": "float64",
    "dur_us": "float64",
}
_STEP_DTYPES: dict[str, str] = {
    "rank": "int64",
    "step": "Int64",
    "start_us": "float64",
    "end_us": "float64",
}

# The note every reader and the analysis give a profile without step marks.
NO_STEP_MARKS_NOTE = "no step marks: analysed as one window"

# Values of Profile.metadata["task_basis"].
DEVICE_TASKS = "device"
CPU_OPS = "cpu"


def empty_tasks() -> pd.DataFrame:
    """A tasks table with the canonical columns and no rows."""
    return pd.DataFrame({c: pd.Series(dtype=t) for c, t in _TASK_DTYPES.items()})


def empty_steps() -> pd.DataFrame:
    """A steps table with the canonical columns and no rows."""
    return pd.DataFrame({c: pd.Series(dtype=t) for c, t in _STEP_DTYPES.items()})


def normalize_tasks(tasks: pd.DataFrame, source: str | Path) -> pd.DataFrame:
    """Check a reader's tasks table against the contract and coerce the dtypes.

    Raises:
        ProfileError: naming ``source`` and the column, when a required column is missing,
            a category is outside :data:`CATEGORIES`, or a duration is negative or missing.
    """
    missing = [c for c in TASK_COLUMNS if c not in tasks.columns]
    if missing:
        raise ProfileError(source, "reader produced no such task column", column=missing[0])
    out = tasks.astype(_TASK_DTYPES)
    bad = ~out["category"].isin(CATEGORIES)
    if bad.any():
        raise ProfileError(
            source,
            f"unknown task category {out.loc[bad, 'category'].iloc[0]!r}",
            column="category",
            expected=" | ".join(CATEGORIES),
        )
    if out["dur_us"].isna().any() or (out["dur_us"] < 0).any():
        raise ProfileError(
            source, "missing or negative task duration", column="dur_us", expected="µs >= 0"
        )
    if out["start_us"].isna().any():
        raise ProfileError(source, "missing task start time", column="start_us")
    return out.reset_index(drop=True)


def normalize_steps(steps: pd.DataFrame, source: str | Path) -> pd.DataFrame:
    """Check a reader's steps table against the contract and coerce the dtypes."""
    missing = [c for c in STEP_COLUMNS if c not in steps.columns]
    if missing:
        raise ProfileError(source, "reader produced no such step column", column=missing[0])
    dtypes = dict(_STEP_DTYPES)
    dtypes.update({c: "float64" for c in BREAKDOWN_COLUMNS if c in steps.columns})
    out = steps.astype(dtypes)
    if "warmup" in out.columns:
        out["warmup"] = out["warmup"].fillna(False).astype(bool)
    if out.duplicated(["rank", "step"]).any():
        dup = out.loc[out.duplicated(["rank", "step"]), ["rank", "step"]].iloc[0]
        raise ProfileError(
            source,
            f"step {dup['step']} of rank {dup['rank']} appears twice",
            column="step",
            expected="one row per (rank, step)",
        )
    return out.sort_values(["rank", "step"]).reset_index(drop=True)


@dataclass
class Profile:
    """One profile, read into the canonical tables.

    Attributes:
        source: the format that was read: ``torch_npu``, ``msprof``, ``kineto``,
            ``torch_npu_db``, ``msprof_db``, ``ascend_timeline``, ``cluster_step_trace``.
        path: what the user pointed at.
        tasks: the canonical tasks table (see module docstring).
        steps: the canonical steps table; empty when the source has no step marks.
        metadata: what the profile records about its environment, with these keys when
            known: ``cann_version``, ``torch_npu_version``, ``torch_version``,
            ``profiler_level``, ``aic_metrics``, ``device``, ``ranks`` (list[int]),
            ``task_basis`` (``device`` or ``cpu``), ``export_type``, ``copy_visible``
            (bool, default True: False when the source lists kernels only, e.g.
            ``kernel_details.csv`` without ``trace_view.json``/``task_time.csv``, so copy
            time is unknown rather than zero).
        notes: things the user should know about how the profile was read (one line each),
            e.g. "no step marks: analysed as one window".
    """

    source: str
    path: str
    tasks: pd.DataFrame
    steps: pd.DataFrame
    metadata: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.tasks = normalize_tasks(self.tasks, self.path)
        self.steps = normalize_steps(self.steps, self.path)
        self.metadata.setdefault("task_basis", DEVICE_TASKS)
        self.metadata.setdefault("copy_visible", True)

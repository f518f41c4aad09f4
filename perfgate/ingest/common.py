"""Helpers every reader shares: concatenating per-rank frames, text cells, small JSON files."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

import pandas as pd

from perfgate.errors import ProfileError
from perfgate.model import OPTIONAL_TASK_COLUMNS, TASK_COLUMNS, empty_tasks


def concat_frames(
    frames: Iterable[pd.DataFrame], empty: pd.DataFrame | None = None
) -> pd.DataFrame:
    """Concatenate, skipping empty frames (so empty tables never decide dtypes); ``empty`` (or a
    frame without columns) when every frame is empty."""
    kept = [f for f in frames if len(f) > 0]
    if not kept:
        return empty if empty is not None else pd.DataFrame()
    if len(kept) == 1:
        return kept[0].reset_index(drop=True)
    return pd.concat(kept, ignore_index=True)


def read_json_object(path: Path) -> dict[str, Any]:
    """A small JSON file holding one object (``profiler_info*.json``)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ProfileError(path, f"cannot be read ({exc.strerror or exc})") from exc
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ProfileError(path, f"is not valid JSON ({exc})", expected="a JSON object") from exc
    if not isinstance(data, dict):
        raise ProfileError(path, "does not hold a JSON object", expected="a JSON object")
    return data


T = TypeVar("T")


def read_auxiliary(
    read: Callable[[Path], T], path: Path, notes: list[str], without: str
) -> T | None:
    """``read(path)`` for a file the analysis can do without (op_statistic, profiler_info…).

    A :class:`~perfgate.errors.ProfileError` from it does not abort the profile: it becomes a
    note, saying what was wrong and ``without`` what the profile is read, and None is returned.
    """
    try:
        return read(path)
    except ProfileError as exc:
        notes.append(f"{exc}; skipped: {without}")
        return None


def strip_shape_quotes(shapes: pd.Series) -> pd.Series:
    """``"32,3,224,224"`` (the CSV's tripled quotes, once parsed) → ``32,3,224,224``."""
    return shapes.map(lambda v: v.strip('"') if isinstance(v, str) else v).astype(object)


def canonical_task_columns(tasks: pd.DataFrame) -> pd.DataFrame:
    """The canonical and optional task columns of ``tasks`` (helper columns dropped); the empty
    canonical table when ``tasks`` has no rows."""
    if tasks.empty:
        return empty_tasks()
    keep = [*TASK_COLUMNS, *(c for c in OPTIONAL_TASK_COLUMNS if c in tasks.columns)]
    return tasks[keep]

"""Helpers every reader shares: concatenating per-rank frames, text cells, small JSON files."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt
import pandas as pd

from perfgate.errors import ProfileError
from perfgate.intervals import merge
from perfgate.model import OPTIONAL_TASK_COLUMNS, TASK_COLUMNS, empty_tasks, provenance_columns


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
    except RecursionError as exc:
        raise ProfileError(
            path, "is nested too deeply to read", expected="a JSON object of a few levels"
        ) from exc
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
    codes, distinct = pd.factorize(shapes.to_numpy(dtype=object))
    table = [v.strip('"') if isinstance(v, str) else v for v in distinct]
    return pd.Series(
        np.array([*table, np.nan], dtype=object)[codes], index=shapes.index, dtype=object
    )


def canonical_task_columns(tasks: pd.DataFrame) -> pd.DataFrame:
    """The canonical and optional task columns of ``tasks`` and its provenance columns (other
    helper columns dropped); the empty canonical table when ``tasks`` has no rows."""
    if tasks.empty:
        return empty_tasks()
    keep = [*TASK_COLUMNS, *(c for c in OPTIONAL_TASK_COLUMNS if c in tasks.columns)]
    return tasks[keep + provenance_columns(tasks)]


# Ways two sources' rows are matched, tried in turn: the key columns must be known on both rows
# and equal. Where the task id is not in the key, two known task ids must still be equal; where
# the stream is not, two known streams must.
_SAME_TASK_KEYS = (
    ("stream", "task_id"),
    ("stream", "name"),
    ("stream", "core"),
    ("name",),
)


def tasks_not_in(
    candidates: pd.DataFrame, seen: pd.DataFrame, *, one_rank: bool = False
) -> pd.DataFrame:
    """The rows of ``candidates`` that are not tasks ``seen`` already lists: each task once.

    Two sources of one profile (kernel_details.csv and trace_view.json, op_summary and
    task_time, …) list some tasks twice, with start times a few µs apart. A candidate is the
    same task as a seen row when both are on the same ``rank``, their intervals overlap, and
    they share ``stream`` and ``task_id`` — or, where one of them does not say its task id,
    ``stream`` and the name or the core (tasks of one stream run one after another, so two
    overlapping tasks of a stream are one) — or, where one does not say its stream, the name.
    A known stream or task id that differs always tells two tasks apart.

    Both frames have the canonical task columns; ``stream`` and ``task_id`` are used when
    present. ``one_rank``: both come from one device (a rank directory) whose rank may not be
    known yet, so ``rank`` is not compared. Each candidate is compared with the seen rows of
    its key that start nearest before and after it (:func:`pandas.merge_asof`): linear in the
    rows, not quadratic.
    """
    if candidates.empty or seen.empty:
        return candidates
    left = _match_frame(candidates, one_rank)
    right = _match_frame(seen, one_rank)
    # Only rows whose interval meets one of the other side's can match: a few copy tasks
    # against half a million kernels leave a few thousand rows to sort and merge.
    left_near = _meets_any(left, right)
    right = right.loc[_meets_any(right, left)]
    left = left.loc[left_near]
    if left.empty or right.empty:
        return candidates
    duplicate = np.zeros(len(candidates), dtype=bool)
    for keys in _SAME_TASK_KEYS:
        lhs = left.loc[~duplicate[left["_row"].to_numpy()] & left[list(keys)].notna().all(axis=1)]
        rhs = right.loc[right[list(keys)].notna().all(axis=1)]
        if lhs.empty or rhs.empty:
            continue
        by = ["rank", *keys]
        # The text keys as one integer code per distinct value (both sides together): merge_asof
        # hashes integers far faster than strings.
        codes = {
            k: pd.factorize(np.concatenate([lhs[k].astype(str), rhs[k].astype(str)]))[0]
            for k in keys
        }
        lhs = lhs.assign(**{k: codes[k][: len(lhs)] for k in keys})
        rhs = rhs.assign(**{k: codes[k][len(lhs) :] for k in keys})
        lhs = lhs.sort_values("start_us", kind="stable")
        rhs = rhs.sort_values("start_us", kind="stable")
        rhs = rhs.rename(columns={c: f"{c}_seen" for c in rhs.columns if c not in by})
        for direction in ("backward", "forward"):
            pairs = pd.merge_asof(
                lhs,
                rhs,
                left_on="start_us",
                right_on="start_us_seen",
                by=by,
                direction=direction,
            )
            same = (pairs["start_us_seen"] <= pairs["end_us"]) & (
                pairs["start_us"] <= pairs["end_us_seen"]
            )
            for column in ("stream", "task_id"):
                if column not in keys:
                    both = pairs[column].notna() & pairs[f"{column}_seen"].notna()
                    same &= ~both | (pairs[column] == pairs[f"{column}_seen"])
            duplicate[pairs.loc[same.fillna(False).astype(bool), "_row"].to_numpy()] = True
    return candidates.loc[~duplicate]


def _meets_any(rows: pd.DataFrame, others: pd.DataFrame) -> npt.NDArray[np.bool_]:
    """Which of ``rows`` (``start_us``, ``end_us``) meet some interval of ``others``, ends
    included; all of them when an interval on either side is not finite (nothing to tell)."""
    start = rows["start_us"].to_numpy(dtype=np.float64)
    end = rows["end_us"].to_numpy(dtype=np.float64)
    other_start = others["start_us"].to_numpy(dtype=np.float64)
    other_end = others["end_us"].to_numpy(dtype=np.float64)
    if not (np.isfinite(other_start).all() and np.isfinite(other_end).all()):
        return np.ones(len(rows), dtype=bool)
    blocks_start, blocks_end = merge(other_start, other_end)
    # The last block that starts at or before a row's end meets the row when it ends at or
    # after the row's start (blocks are disjoint and sorted, so their ends increase too).
    last = np.searchsorted(blocks_start, end, side="right") - 1
    meets = (last >= 0) & (blocks_end[np.clip(last, 0, None)] >= start)
    return meets | ~(np.isfinite(start) & np.isfinite(end))


def _match_frame(tasks: pd.DataFrame, one_rank: bool) -> pd.DataFrame:
    """The columns :func:`tasks_not_in` compares, ids as text (``3`` and ``"3"`` are one id)."""
    rank = np.zeros(len(tasks), np.int64) if one_rank else tasks["rank"].to_numpy(np.int64)
    frame = pd.DataFrame(
        {
            "rank": rank,
            "start_us": tasks["start_us"].to_numpy(dtype=np.float64),
            "end_us": (tasks["start_us"] + tasks["dur_us"]).to_numpy(dtype=np.float64),
            "name": tasks["name"].to_numpy(dtype=object),
            "core": tasks["core"].to_numpy(dtype=object),
            "_row": np.arange(len(tasks)),
        }
    )
    for column in ("stream", "task_id"):
        if column in tasks.columns:
            values = tasks[column].astype(object)
            frame[column] = values.where(values.isna(), values.astype(str)).to_numpy()
        else:
            frame[column] = None
    return frame

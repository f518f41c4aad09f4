"""Helpers every reader shares: concatenating per-rank frames, text cells, small JSON files."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar

import numpy as np
import numpy.typing as npt
import pandas as pd

from perfgate.errors import ProfileError
from perfgate.intervals import FloatArray, merge
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
    order = list(dict.fromkeys(c for f in kept for c in f.columns))  # pandas' order
    # A column categorical in every frame that has it stays categorical (pandas would make
    # it text, or, where a frame lacks it, type it by pandas' version: 2.x passes over an
    # all-missing part when it chooses, 3.x does not).
    categorical = [
        c
        for c in order
        if all(isinstance(f[c].dtype, pd.CategoricalDtype) for f in kept if c in f.columns)
    ]
    if not categorical:
        return pd.concat(kept, ignore_index=True)
    # The categoricals are united by hand: each frame's codes mapped onto the shared
    # categories, and one dtype for the result (pandas would hash the categories of every
    # frame's dtype again, and re-code each frame).
    table = pd.concat(
        [f.drop(columns=[c for c in categorical if c in f.columns]) for f in kept],
        ignore_index=True,
    )
    for c in categorical:
        present = [f[c].array for f in kept if c in f.columns]
        shared = pd.Index(
            pd.unique(np.concatenate([part.categories.to_numpy(object) for part in present])),
            dtype=object,
        )
        # Code -1 (missing) stays -1: it takes the -1 appended to each mapping; a frame
        # without the column is missing in every row.
        codes = np.concatenate(
            [
                np.append(shared.get_indexer(f[c].array.categories), -1)[f[c].array.codes]
                if c in f.columns
                else np.full(len(f), -1, dtype=np.int64)
                for f in kept
            ]
        )
        table[c] = pd.Categorical.from_codes(codes, dtype=pd.CategoricalDtype(shared))
    return table[order]


def well_formed(text: str) -> str:
    """``text`` with its lone surrogates (JSON's ``"\\ud800"``, which no UTF-8 can hold) as
    U+FFFD, as the CSV and .db readers read a byte that is no UTF-8: a name stays a name."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


def read_json_object(path: Path) -> dict[str, Any]:
    """A small JSON file holding one object (``profiler_info*.json``); a UTF-8 byte order
    mark before it is skipped, as for the traces."""
    try:
        data = json.loads(path.read_text(encoding="utf-8-sig"))
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


def distinct_codes(values: pd.Series) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.object_]]:
    """``values`` as (codes, distinct values): code −1 where a value is missing. A categorical
    column gives its own codes, without hashing a value per row."""
    if isinstance(values.dtype, pd.CategoricalDtype):
        return (
            values.cat.codes.to_numpy().astype(np.int64),
            values.cat.categories.to_numpy(dtype=object),
        )
    codes, distinct = pd.factorize(values.to_numpy(dtype=object))
    return codes.astype(np.int64), np.asarray(distinct, dtype=object)


def categorical_from(
    table: npt.NDArray[np.object_], codes: npt.NDArray[np.integer[Any]], index: pd.Index
) -> pd.Series:
    """The categorical column whose row ``i`` is ``table[codes[i]]`` (missing where that is
    missing, or where the code is −1). ``table`` may repeat values: categories are distinct.

    The readers keep name columns so from the file to the canonical tasks (each distinct name
    converted, matched and categorized once); :class:`~perfgate.model.Profile` makes them
    plain objects again."""
    table_codes, categories = pd.factorize(np.asarray(table, dtype=object))
    rows = _taken_codes(np.asarray(table_codes, dtype=np.int64), np.asarray(codes))
    return pd.Series(
        pd.Categorical.from_codes(rows, pd.Index(categories, dtype=object)), index=index
    )


def strip_shape_quotes(shapes: pd.Series) -> pd.Series:
    """``"32,3,224,224"`` (the CSV's tripled quotes, once parsed) → ``32,3,224,224``."""
    codes, distinct = distinct_codes(shapes)
    table = np.array([v.strip('"') if isinstance(v, str) else v for v in distinct], dtype=object)
    return categorical_from(table, codes, shapes.index)


def first_rows(codes: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """For codes 0 … k − 1 (:func:`row_codes`), the position of each code's first row."""
    first = np.zeros(int(codes.max()) + 1 if codes.size else 0, dtype=np.int64)
    first[codes[::-1]] = np.arange(codes.size - 1, -1, -1)
    return first


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
# Ids are compared as text (``3`` and ``"3"`` are one id); names and cores as they are.
_ID_COLUMNS = ("stream", "task_id")
_NAME_COLUMNS = ("name", "core")


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
    its key that start nearest before and after it (the last one at or before its start, the
    first one at or after it): sorting and binary search, not a quadratic comparison. A row
    whose start or end is not finite matches nothing.
    """
    if candidates.empty or seen.empty:
        return candidates
    left, right = _MatchRows.of(candidates, one_rank), _MatchRows.of(seen, one_rank)
    # Only candidates whose interval meets a seen one can match: a few copy tasks against
    # half a million kernels leave a few to look at.
    left = left.take(_meets_any(left, right))
    rhs = right.take(np.ones(right.rows.size, dtype=bool))  # the finite intervals
    if not left.rows.size or not rhs.rows.size:
        return candidates
    codes: dict[str, tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]] = {}

    def code(column: str) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """A column's (left, right) codes, computed once, when a key first needs them."""
        if column not in codes:
            codes[column] = _shared_codes(left.values[column], rhs.values[column], column)
        return codes[column]

    ranks = _shared_codes(left.rank, rhs.rank, "rank")
    duplicate = np.zeros(len(candidates), dtype=bool)
    for keys in _SAME_TASK_KEYS:
        pending = np.flatnonzero(~duplicate[left.rows])  # positions in ``left``
        if not pending.size:
            break
        mine_rows = pending[np.all([code(k)[0][pending] >= 0 for k in keys], axis=0)]
        their_rows = np.flatnonzero(np.all([code(k)[1] >= 0 for k in keys], axis=0))
        if not mine_rows.size or not their_rows.size:
            continue
        # One integer per (rank, key…) value, equal on both sides for equal values.
        key = _combined_codes(
            [np.concatenate([ranks[0][mine_rows], ranks[1][their_rows]])]
            + [np.concatenate([code(k)[0][mine_rows], code(k)[1][their_rows]]) for k in keys]
        )
        split = mine_rows.size
        for nearest in _nearest_by_start(
            key[:split], left.start[mine_rows], key[split:], rhs.start[their_rows]
        ):
            found = nearest >= 0
            mine, theirs = mine_rows[found], their_rows[nearest[found]]
            same = (rhs.start[theirs] <= left.end[mine]) & (left.start[mine] <= rhs.end[theirs])
            for column in _ID_COLUMNS:
                if column not in keys:
                    ours, other = code(column)[0][mine], code(column)[1][theirs]
                    same &= (ours < 0) | (other < 0) | (ours == other)
            duplicate[left.rows[mine[same]]] = True
    return candidates.loc[~duplicate]


@dataclass(frozen=True)
class _MatchRows:
    """What :func:`tasks_not_in` compares of one side, as arrays; ``rows``: their positions in
    the side's frame."""

    rows: npt.NDArray[np.int64]
    rank: npt.NDArray[np.int64]
    start: FloatArray
    end: FloatArray
    values: dict[str, Any]  # per compared column: objects, or integer ids (_compared_values)

    @classmethod
    def of(cls, tasks: pd.DataFrame, one_rank: bool) -> _MatchRows:
        n = len(tasks)
        start = tasks["start_us"].to_numpy(dtype=np.float64)
        return cls(
            rows=np.arange(n),
            rank=np.zeros(n, np.int64) if one_rank else tasks["rank"].to_numpy(np.int64),
            start=start,
            end=start + tasks["dur_us"].to_numpy(dtype=np.float64),
            values={
                column: _compared_values(tasks, column) for column in (*_ID_COLUMNS, *_NAME_COLUMNS)
            },
        )

    def take(self, keep: npt.NDArray[np.bool_]) -> _MatchRows:
        """The rows where ``keep`` holds and whose interval is finite."""
        keep = keep & np.isfinite(self.start) & np.isfinite(self.end)
        return _MatchRows(
            self.rows[keep],
            self.rank[keep],
            self.start[keep],
            self.end[keep],
            {column: values[keep] for column, values in self.values.items()},
        )


def _compared_values(tasks: pd.DataFrame, column: str) -> Any:
    """One compared column of ``tasks`` as an array: integer ids as they are (comparing two
    integers is comparing their text, and hashing them is cheaper), the rest as objects."""
    if column not in tasks.columns:
        return np.full(len(tasks), None, dtype=object)
    values = tasks[column]
    if column in _ID_COLUMNS and pd.api.types.is_integer_dtype(values.dtype):
        return values.array
    if isinstance(values.dtype, pd.CategoricalDtype):
        return values.array
    return values.to_numpy(dtype=object)


def _shared_codes(
    left: Any, right: Any, column: str
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """The (left, right) codes of one compared column's values: equal values, equal codes on
    both sides; −1 where the value is missing. Ids are compared as text (:func:`_id_text`)."""
    if pd.api.types.is_integer_dtype(left.dtype) and pd.api.types.is_integer_dtype(right.dtype):
        both = pd.concat([pd.Series(left), pd.Series(right)], ignore_index=True)
        codes = np.asarray(pd.factorize(both)[0], dtype=np.int64)
        return codes[: len(left)], codes[len(left) :]
    if isinstance(left, pd.Categorical) and isinstance(right, pd.Categorical):
        # Each side's distinct values coded once, then its rows take their codes.
        distinct = np.concatenate(
            [left.categories.to_numpy(dtype=object), right.categories.to_numpy(dtype=object)]
        )
        if column in _ID_COLUMNS:
            distinct = _ids_as_text(distinct)
        shared = np.asarray(pd.factorize(distinct)[0], dtype=np.int64)
        split = len(left.categories)
        return (
            _taken_codes(shared[:split], np.asarray(left.codes)),
            _taken_codes(shared[split:], np.asarray(right.codes)),
        )
    left, right = (np.asarray(v, dtype=object) for v in (left, right))
    codes, distinct = pd.factorize(np.concatenate([left, right]))
    if column in _ID_COLUMNS and len(distinct):
        # Ids as text, converted once per distinct value.
        as_text = pd.factorize(_ids_as_text(np.asarray(distinct, dtype=object)))[0]
        codes = _taken_codes(np.asarray(as_text, dtype=np.int64), codes)
    codes = codes.astype(np.int64)
    return codes[: left.size], codes[left.size :]


def _taken_codes(
    table: npt.NDArray[np.int64], codes: npt.NDArray[np.integer[Any]]
) -> npt.NDArray[np.int64]:
    """``table[codes]``, −1 where a code is −1 (a missing value)."""
    return np.append(table.astype(np.int64), -1)[codes]  # code −1 takes the −1 appended


def _ids_as_text(distinct: npt.NDArray[np.object_]) -> npt.NDArray[np.object_]:
    """Distinct ids as text (:func:`_id_text`); ids read from text already are."""
    if pd.api.types.infer_dtype(distinct, skipna=False) == "string":
        return distinct
    return np.array([_id_text(v) for v in distinct], dtype=object)


def _id_text(value: Any) -> str:
    """An id as text; a whole float as the integer it is (an integer column with a missing
    cell becomes float: its 3.0 is the id 3, which factorizing already equates with 3)."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def repeated_rows(table: pd.DataFrame, key: Sequence[str], start: str) -> npt.NDArray[np.bool_]:
    """Which rows of ``table`` repeat an earlier row in every ``key`` column, all of them
    known: a task written twice. Only rows sharing their ``start`` (one of ``key``) with
    another row are compared, which on a million tasks leaves few."""
    repeated = np.zeros(len(table), dtype=bool)
    shares_start = table[start].duplicated(keep=False).to_numpy()
    if shares_start.any():
        candidates = table.loc[shares_start, list(key)]
        repeated[shares_start] = (
            candidates.notna().all(axis=1) & candidates.duplicated()
        ).to_numpy()
    return repeated


def row_codes(columns: Sequence[pd.Series | npt.NDArray[Any]]) -> npt.NDArray[np.int64]:
    """One small int64 per row (0 to rows − 1), equal where the rows are equal in every one
    of ``columns`` (a missing value equals only a missing value)."""
    combined = np.zeros(len(columns[0]), dtype=np.int64)
    size = 1
    for column in columns:
        codes, distinct = pd.factorize(column)
        radix = len(distinct) + 1  # code −1 (missing) becomes 0
        if size * radix >= 2**62:  # keep the products within int64
            combined, unique = pd.factorize(combined)
            size = len(unique)
        combined = combined * radix + (codes + 1)
        size *= radix
    return np.asarray(pd.factorize(combined)[0], dtype=np.int64)


def _combined_codes(columns: Sequence[npt.NDArray[np.int64]]) -> npt.NDArray[np.int64]:
    """One int64 per row, equal where the rows are equal in every one of ``columns`` (codes,
    none negative): the codes read as digits of a mixed radix, without hashing them
    (:func:`row_codes` hashes each column). The result stays below 2**31 (factorized when the
    digits would pass it), so that :func:`_nearest_by_start` can pair it with a start's rank."""
    combined = np.zeros(len(columns[0]), dtype=np.int64)
    size = 1
    for column in columns:
        radix = int(column.max()) + 1 if column.size else 1
        if size * radix >= 2**31:
            combined, unique = pd.factorize(combined)
            combined, size = np.asarray(combined, dtype=np.int64), len(unique)
        combined = combined * radix + column
        size *= radix
    if size >= 2**31:
        combined = np.asarray(pd.factorize(combined)[0], dtype=np.int64)
    return combined


def _nearest_by_start(
    left_key: npt.NDArray[np.int64],
    left_start: npt.NDArray[np.float64],
    right_key: npt.NDArray[np.int64],
    right_start: npt.NDArray[np.float64],
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """For each left row, the right row of the same key that starts last at or before it
    (ties: the last of them) and the one that starts first at or after it (ties: the first);
    −1 where there is none."""
    # Start times replaced by their rank among all starts (equal starts, equal ranks), so that
    # (key, start) is one exact int64 that sorts as the pair does. Each side comes mostly in
    # order of start: a stable sort merges the two runs (np.unique sorts from scratch).
    starts = np.concatenate([left_start, right_start])
    by_start = np.argsort(starts, kind="stable")
    ordered = starts[by_start]
    start_rank = np.empty(starts.size, dtype=np.int64)
    start_rank[by_start] = np.cumsum(np.append(True, ordered[1:] != ordered[:-1])) - 1
    width = np.int64(start_rank.max() + 1)
    distinct_keys = int(max(np.max(left_key, initial=0), np.max(right_key, initial=0))) + 1
    if distinct_keys * int(width) >= 2**62:
        both = np.asarray(pd.factorize(np.concatenate([left_key, right_key]))[0], dtype=np.int64)
        left_key, right_key = both[: left_key.size], both[left_key.size :]
    left_at = left_key * width + start_rank[: left_key.size]
    right_at = right_key * width + start_rank[left_key.size :]
    order = np.argsort(right_at, kind="stable")
    sorted_at = right_at[order]
    found = []
    sides: tuple[tuple[Literal["left", "right"], int], ...] = (("right", -1), ("left", 0))
    for side, shift in sides:
        at = np.searchsorted(sorted_at, left_at, side=side) + shift
        inside = (at >= 0) & (at < sorted_at.size)
        nearest = np.full(left_key.size, -1, dtype=np.int64)
        nearest[inside] = order[at[inside]]
        nearest[inside & (right_key[nearest] != left_key)] = -1  # another key's row
        found.append(nearest)
    return found[0], found[1]


def _meets_any(rows: _MatchRows, others: _MatchRows) -> npt.NDArray[np.bool_]:
    """Which of ``rows`` meet some interval of ``others``, ends included; all of them when an
    interval on either side is not finite (nothing to tell)."""
    start, end = rows.start, rows.end
    if not others.start.size:
        return np.zeros(start.size, dtype=bool)
    if not (np.isfinite(others.start).all() and np.isfinite(others.end).all()):
        return np.ones(start.size, dtype=bool)
    blocks_start, blocks_end = merge(others.start, others.end)
    # The last block that starts at or before a row's end meets the row when it ends at or
    # after the row's start (blocks are disjoint and sorted, so their ends increase too).
    last = np.searchsorted(blocks_start, end, side="right") - 1
    meets = (last >= 0) & (blocks_end[np.clip(last, 0, None)] >= start)
    return np.asarray(meets | ~(np.isfinite(start) & np.isfinite(end)), dtype=bool)

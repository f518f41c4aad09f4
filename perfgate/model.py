"""Canonical tables, their columns and units, and the :class:`Profile` every reader returns.

Every reader (torch_npu, msprof, Kineto, the SQLite exports) produces the same tables, so
everything downstream is written once: ``tasks`` (one row per device task, or per top-level
CPU op), ``steps`` (one row per rank and step) and, when the source has it, ``op_statistic``
(the profiler's per-operator totals). All times are microseconds (µs) as float64; time stamps
of an epoch-µs clock are stored relative to :data:`EPOCH_ORIGIN_US`, converted exactly from
the source's text or integers (:class:`TimeBase`). docs/formats.md §1 describes the columns
and the time base.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import suppress
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from enum import Enum
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from perfgate.errors import ProfileError


class Category(str, Enum):
    """What a task spends device time on (docs/formats.md §2)."""

    COMPUTE = "compute"
    COPY = "copy"
    COMM = "comm"
    OTHER = "other"


CATEGORIES = tuple(c.value for c in Category)

TASK_COLUMNS = ("rank", "step", "name", "op_type", "core", "category", "start_us", "dur_us")
OPTIONAL_TASK_COLUMNS = ("input_shapes", "direction", "stream", "task_id")
STEP_COLUMNS = ("rank", "step", "start_us", "end_us")
BREAKDOWN_COLUMNS = ("computing_us", "comm_not_overlapped_us", "free_us", "preparing_us")
OP_STATISTIC_COLUMNS = ("rank", "op_type", "core", "category", "count", "total_us")

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
_OP_STATISTIC_DTYPES: dict[str, str] = {
    "rank": "int64",
    "op_type": "object",
    "core": "object",
    "category": "object",
    "count": "int64",
    "total_us": "float64",
}

# The note every reader and the analysis give a profile without step marks.
NO_STEP_MARKS_NOTE = "no step marks: analysed as one window"

# Values of Profile.metadata["task_basis"].
DEVICE_TASKS = "device"
CPU_OPS = "cpu"


# --------------------------------------------------------------------------- time base

EPOCH_ORIGIN_US = 1_700_000_000_000_000
"""2023-11-14T22:13:20Z in epoch µs: the origin of epoch-clock profiles (docs/formats.md §1.5)."""
EPOCH_SIZED_US = 10**15
"""Timestamps from this many µs up are epoch µs (1e15 µs is 2001-09-09): they get the origin."""
NS_PER_US = 1000

# A plain decimal has at most this many integer digits (they always fit an int64) and this many
# fraction digits are used (more are below any float64 resolution of a time).
_MAX_WHOLE_DIGITS = 18
_MAX_FRACTION_DIGITS = 15
_ZERO, _NINE, _DOT, _MINUS, _PLUS = (ord(c) for c in "09.-+")
_SPACE, _TAB, _CARRIAGE_RETURN = ord(" "), ord("\t"), ord("\r")  # \t \n \v \f \r are 9-13


def time_origin_for(values_us: npt.ArrayLike) -> int:
    """:data:`EPOCH_ORIGIN_US` when a finite value is epoch-sized (≥ :data:`EPOCH_SIZED_US`), else
    0. ``values_us`` may be approximate (float64 parses of the text are good enough)."""
    values = np.asarray(values_us, dtype=np.float64).ravel()
    values = values[np.isfinite(values)]
    if values.size and float(np.abs(values).max()) >= EPOCH_SIZED_US:
        return EPOCH_ORIGIN_US
    return 0


def us_from_text(cells: pd.Series, origin_us: int) -> pd.Series:
    """Decimal strings of µs → float64 µs since ``origin_us``, rounded once.

    A plain decimal (``"1736408883704643.212\\t"``: optional sign, digits, optional fraction,
    white space around; msprof writes a TAB after its time stamps) is split: the integer part
    minus the origin in int64, then the fraction added, so the result is the float64 nearest to
    the exact difference. Missing cells (NaN/None) give NaN. Anything else that pandas parses
    as a number (``1e3``, ``.5``) is shifted exactly too (as a Decimal; ``inf`` stays
    infinite); text that is no number gives NaN: checking the cells is the caller's job.
    """
    return _ParsedText(cells).relative(origin_us)


class _ParsedText:
    """Decimal strings parsed once: exact parts of the plain decimals, float64 of the rest."""

    def __init__(self, cells: pd.Series, byte_rows: npt.NDArray[np.uint8] | None = None) -> None:
        cells = pd.Series(cells, copy=False)
        self.index = cells.index
        self.present = cells.notna().to_numpy()
        present = cells[self.present]
        # Trailing white space (msprof's TAB) is skipped by the byte parser itself; cells it
        # cannot take as they are (leading white space, non-ASCII) are stripped and tried again.
        if byte_rows is None:
            text = present.to_numpy(dtype=object)
            parts = _plain_decimals(text)
        else:  # the present cells' UTF-8 bytes given (see from_text): no Python strings
            parts = _plain_decimal_rows(byte_rows)
        self.plain, self.sign, self.whole, self.numerator, self.denominator = parts
        self.other = np.full(len(present), np.nan, dtype=np.float64)
        self.exact: dict[int, Decimal] = {}  # the other numbers, by position: exactly
        if not self.plain.all():
            retry = np.flatnonzero(~self.plain)
            retried = present.iloc[retry].to_numpy(dtype=object)
            stripped = np.array([str(v).strip() for v in retried], dtype=object)
            parts = _plain_decimals(stripped)
            for mine, theirs in zip(
                (self.plain, self.sign, self.whole, self.numerator, self.denominator), parts
            ):
                mine[retry] = theirs
            rest = retry[~parts[0]]
            if rest.size:
                texts = stripped[~parts[0]]
                other = pd.to_numeric(pd.Series(texts), errors="coerce").to_numpy(np.float64)
                self.other[rest] = other
                # The finite ones kept exact too (1.7000000000000001e15 is no float64): as
                # pyarrow's decimal reading of the same cells (ingest/ascend_csv.py) has them.
                for position, text in zip(rest[np.isfinite(other)], texts[np.isfinite(other)]):
                    with suppress(InvalidOperation):  # pandas' spellings are Decimal's
                        self.exact[int(position)] = Decimal(text)

    def approx(self) -> npt.NDArray[np.float64]:
        """The values' size, for :func:`time_origin_for`: the whole parts of plain decimals,
        the float64 of the rest, NaN where missing or no number. (Against an integer bound, a
        value's size is its whole part's: ``|w.f| ≥ n`` exactly when ``|w| ≥ n``.)"""
        values = self.other.copy()
        values[self.plain] = (self.sign * self.whole)[self.plain]
        return values

    def relative_values(self, origin_us: int) -> npt.NDArray[np.float64]:
        values = self.other - origin_us
        for position, number in self.exact.items():
            values[position] = float(number - origin_us)  # rounded once
        plain = self.plain
        if plain.any():
            sign = self.sign[plain]
            values[plain] = _whole_plus_fraction(
                sign * self.whole[plain] - np.int64(origin_us),
                sign * self.numerator[plain],
                self.denominator[plain],
            )
        return values

    def relative(self, origin_us: int) -> pd.Series:
        out = np.full(len(self.present), np.nan, dtype=np.float64)
        out[self.present] = self.relative_values(origin_us)
        return pd.Series(out, index=self.index)


_Int64s = npt.NDArray[np.int64]


def _plain_decimals(
    text: npt.NDArray[Any],
) -> tuple[npt.NDArray[np.bool_], _Int64s, _Int64s, _Int64s, _Int64s]:
    """Parse stripped strings ``[+-]digits[.digits]`` column-wise on their ASCII bytes.

    Returns (which are plain decimals, sign ±1, integer part, fraction numerator, fraction
    denominator: a power of ten), all int64 but the first.
    """
    try:
        raw = np.asarray(text, dtype=np.bytes_)
    except UnicodeEncodeError:  # a non-ASCII string is no plain decimal: parse the others
        raw = np.asarray([t if t.isascii() else "" for t in text], dtype=np.bytes_)
    return _plain_decimal_rows(raw.view(np.uint8).reshape(len(text), raw.dtype.itemsize))


_Parts = tuple[npt.NDArray[np.bool_], _Int64s, _Int64s, _Int64s, _Int64s]


def _plain_decimal_rows(chars: npt.NDArray[np.uint8]) -> _Parts:
    """:func:`_plain_decimals` of strings given as the rows of a byte matrix, each padded with
    NUL bytes (a byte outside ASCII belongs to no plain decimal)."""
    one_shape = _one_shape_rows(chars)
    return one_shape if one_shape is not None else _rows_by_shape(chars)


def _one_shape_rows(chars: npt.NDArray[np.uint8]) -> _Parts | None:
    """:func:`_rows_by_shape` of a matrix whose rows all have the first row's shape
    (unsigned digits, a dot or none, digits, then padding: a column of time stamps as msprof
    writes them), checked column block by column block; None for any other matrix."""
    n, width = chars.shape
    if n == 0 or width == 0:
        return None
    first = chars[0]
    blank_at = _blank(first)
    length = int(width - np.argmax(~blank_at[::-1])) if not blank_at.all() else 0
    dots = np.flatnonzero(first[:length] == _DOT)
    dot = int(dots[0]) if dots.size else length
    if not 1 <= dot <= _MAX_WHOLE_DIGITS:
        return None
    whole_digits = _digits_or_none(chars[:, :dot])
    fraction_digits = _digits_or_none(chars[:, dot + 1 : length])
    if (
        whole_digits is None
        or fraction_digits is None
        or not (dot == length or bool((chars[:, dot] == _DOT).all()))
        or not bool(_blank(chars[:, length:]).all())
    ):
        return None
    kept = fraction_digits[:, :_MAX_FRACTION_DIGITS]
    return (
        np.ones(n, dtype=bool),
        np.ones(n, dtype=np.int64),
        _digits_value(whole_digits, zero=0),
        _digits_value(kept, zero=0) if kept.shape[1] else np.zeros(n, dtype=np.int64),
        np.full(n, 10 ** kept.shape[1], dtype=np.int64),
    )


def _digits_or_none(block: npt.NDArray[np.uint8]) -> npt.NDArray[np.uint8] | None:
    """The digit values (0-9) of a block of ASCII digits, or None where a byte is no digit
    (below '0' the subtraction wraps round to 207 and up)."""
    values = block - np.uint8(_ZERO)
    return values if not values.size or int(values.max()) <= 9 else None


def _blank(chars: npt.NDArray[np.uint8]) -> npt.NDArray[np.bool_]:
    """NUL padding and white space (space, \\t \\n \\v \\f \\r)."""
    return np.asarray(
        (chars == 0) | (chars == _SPACE) | ((chars >= _TAB) & (chars <= _CARRIAGE_RETURN)),
        dtype=bool,
    )


def _rows_by_shape(chars: npt.NDArray[np.uint8]) -> _Parts:
    """:func:`_plain_decimal_rows`, rows grouped by their shape."""
    n, width = chars.shape
    if n == 0 or width == 0:
        no = np.zeros(n, dtype=bool)
        zero = np.zeros(n, np.int64)
        return no, np.ones(n, np.int64), zero, zero, np.ones(n, np.int64)
    # Up to the last byte that is neither NUL (bytes_ pads with it) nor white space.
    blank = _blank(chars)
    length = np.where(blank.all(axis=1), 0, width - np.argmax(~blank[:, ::-1], axis=1))
    signed = (chars[:, 0] == _MINUS) | (chars[:, 0] == _PLUS)
    sign = np.where(chars[:, 0] == _MINUS, -1, 1).astype(np.int64)
    dots = chars == _DOT
    dot_at = np.where(dots.any(axis=1), dots.argmax(axis=1), length)
    plain = np.zeros(n, dtype=bool)
    whole = np.zeros(n, dtype=np.int64)
    fraction_digits = np.zeros(n, dtype=np.int64)
    fraction_value = np.zeros(n, dtype=np.int64)
    # Rows of one shape (sign or not, dot and end at the same places: a column of time stamps
    # is mostly one or two shapes) have their digits at the same columns: they are checked
    # together, and their parts are matrix products of the digit blocks with powers of ten.
    shape = (signed * (width + 1) + dot_at) * (width + 1) + length
    order = np.argsort(shape, kind="stable")
    shapes, starts = np.unique(shape[order], return_index=True)
    ends = np.append(starts[1:], n)
    for key, start, end in zip(shapes.tolist(), starts.tolist(), ends.tolist()):
        sign_dot, row_length = divmod(key, width + 1)
        has_sign, dot = divmod(sign_dot, width + 1)
        if not 1 <= dot - has_sign <= _MAX_WHOLE_DIGITS:
            continue
        rows = order[start:end]
        whole_block = chars[rows, has_sign:dot]
        fraction_block = chars[rows, dot + 1 : row_length]
        ok = _all_digits(whole_block) & _all_digits(fraction_block)
        rows, whole_block, fraction_block = rows[ok], whole_block[ok], fraction_block[ok]
        plain[rows] = True
        whole[rows] = _digits_value(whole_block)
        kept = fraction_block[:, :_MAX_FRACTION_DIGITS]
        if kept.shape[1]:
            fraction_value[rows] = _digits_value(kept)
            fraction_digits[rows] = kept.shape[1]
    denominator: _Int64s = np.power(np.int64(10), fraction_digits)
    return plain, sign, whole, fraction_value, denominator


def _all_digits(block: npt.NDArray[np.uint8]) -> npt.NDArray[np.bool_]:
    return np.asarray(((block >= _ZERO) & (block <= _NINE)).all(axis=1), dtype=bool)


def _digits_value(block: npt.NDArray[np.uint8], zero: int = _ZERO) -> _Int64s:
    """The integers whose decimal digits are the rows of ``block`` (ASCII bytes, or digit
    values with ``zero`` 0)."""
    powers = np.power(np.int64(10), np.arange(block.shape[1] - 1, -1, -1, dtype=np.int64))
    return (block.astype(np.int64) - zero) @ powers


def _whole_plus_fraction(
    whole: npt.NDArray[np.int64],
    numerator: npt.NDArray[np.int64],
    denominator: npt.NDArray[np.int64],
) -> npt.NDArray[np.float64]:
    """``whole + numerator / denominator`` as float64, rounded once.

    ``|numerator| < denominator ≤ 10**15``. When ``whole * denominator + numerator`` fits in
    2**53 it is formed in int64 and divided once (IEEE division rounds correctly). Otherwise
    (epoch-sized values) the parts are given the same sign (``-2 + 0.999`` → ``-1 - 0.001``) and
    added: the sum never cancels, and the fraction's own rounding error (≤ 2**-54) is far below
    the spacing of such results. A whole part past 2**53 has no float64 of its own: it is
    rounded, and what rounding took off is added back with the fraction, so that the sum is
    rounded once (exact below 2**55; :data:`MAX_TIME_US` is far below 2**53).
    """
    up = (whole < 0) & (numerator > 0)
    down = (whole > 0) & (numerator < 0)
    whole = whole + up - down
    numerator = numerator - denominator * up + denominator * down
    small = np.abs(whole) < (2**53) // denominator
    if small.all():  # (times since an origin always are): no masks
        return _exact_quotient(whole, numerator, denominator)
    result: npt.NDArray[np.float64] = whole.astype(np.float64) + numerator / denominator
    if small.any():
        result[small] = _exact_quotient(whole[small], numerator[small], denominator[small])
    huge = (np.abs(whole) > 2**53) & (np.abs(whole) < 2**62)
    if huge.any():
        rounded = whole[huge].astype(np.float64)
        taken_off = whole[huge] - rounded.astype(np.int64)  # exact: both are integers
        result[huge] = rounded + (taken_off + numerator[huge] / denominator[huge])
    return result


def _exact_quotient(
    whole: npt.NDArray[np.int64],
    numerator: npt.NDArray[np.int64],
    denominator: npt.NDArray[np.int64],
) -> npt.NDArray[np.float64]:
    """``(whole * denominator + numerator) / denominator``, where the dividend fits 2**53:
    formed exactly in int64 and rounded once by the division."""
    quotient: npt.NDArray[np.float64] = (whole * denominator + numerator) / denominator
    return quotient


def us_from_ns(ns: npt.ArrayLike, origin_us: int) -> npt.NDArray[np.float64]:
    """Integer nanoseconds → float64 µs since ``origin_us``, rounded once.

    The origin is subtracted in int64 and the whole µs and the remaining ns are converted
    apart: a float64 holds integer ns exactly only below 2**53 ns (104 days).
    """
    relative = np.asarray(ns, dtype=np.int64) - np.int64(origin_us) * NS_PER_US
    rest = np.fmod(relative, NS_PER_US)  # the sign of ``relative``: the parts never cancel
    whole = (relative - rest) // NS_PER_US
    size = np.abs(whole)
    if size.size and size.max() <= 2**53:
        # What _whole_plus_fraction computes, without its general masks: the parts share a
        # sign, and a whole part that small is a float64 of its own. Where the dividend fits
        # 2**53 it is ``relative`` itself, divided once; elsewhere the parts are added.
        small = size < (2**53) // NS_PER_US
        if small.all():
            exact: npt.NDArray[np.float64] = relative.astype(np.float64) / NS_PER_US
            return exact
        added: npt.NDArray[np.float64] = whole.astype(np.float64) + rest / NS_PER_US
        if small.any():
            added[small] = relative[small].astype(np.float64) / NS_PER_US
        return added
    return _whole_plus_fraction(whole, rest, np.full(relative.shape, NS_PER_US, np.int64))


class TimeBase:
    """The time origin of one profile being read: every table of it is converted here.

    The first conversion that sees a value fixes the origin (:func:`time_origin_for` of those
    values) unless one was given; later conversions use it whatever their values, so the
    profile has one origin. :attr:`origin_us` is what ``metadata["time_origin_us"]`` records
    (0 while nothing fixed it).
    """

    def __init__(self, origin_us: int | None = None) -> None:
        self._origin_us = origin_us

    @property
    def origin_us(self) -> int:
        return self._origin_us or 0

    @property
    def fixed(self) -> bool:
        """Whether the origin is decided (given, or fixed by a conversion)."""
        return self._origin_us is not None

    def _adopt(self, approx_us: npt.ArrayLike) -> int:
        if self._origin_us is None:
            approx = np.asarray(approx_us, dtype=np.float64)
            if np.isfinite(approx).any():
                self._origin_us = time_origin_for(approx)
        return self.origin_us

    def from_text(
        self, cells: pd.Series, byte_rows: npt.NDArray[np.uint8] | None = None
    ) -> pd.Series:
        """:func:`us_from_text` with this profile's origin. ``byte_rows``, when given, are the
        UTF-8 bytes of ``cells``' present values, a row each, padded with NUL bytes: they are
        parsed instead of the strings (only cells that are no plain decimal are taken as
        strings)."""
        parsed = _ParsedText(cells, byte_rows)
        return parsed.relative(self.origin_us if self.fixed else self._adopt(parsed.approx()))

    def from_ns(self, ns: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """:func:`us_from_ns` with this profile's origin."""
        values = np.asarray(ns, dtype=np.int64)
        if self.fixed:
            return us_from_ns(values, self.origin_us)
        # The values' size in whole µs, exactly (a float64 of ns / 1000 may round up to a bound).
        return us_from_ns(values, self._adopt(np.abs(values) // NS_PER_US))


def rebase_times(table: pd.DataFrame, from_origin_us: int, to_origin_us: int) -> pd.DataFrame:
    """``table`` with its ``start_us``/``end_us`` moved from one origin to another (to merge
    profiles read apart). A float64 shift: exact only when the origins are equal (no change)."""
    if from_origin_us == to_origin_us:
        return table
    shift = float(from_origin_us - to_origin_us)
    moved = {c: table[c] + shift for c in ("start_us", "end_us") if c in table.columns}
    return table.assign(**moved) if moved else table


def unknown_ints(n: int) -> pd.arrays.IntegerArray:
    """``n`` missing Int64 values (a column no source filled yet), built without a Python
    list of ``pd.NA`` (a second at a million rows)."""
    return pd.arrays.IntegerArray(np.zeros(n, dtype=np.int64), np.ones(n, dtype=bool))


def empty_tasks() -> pd.DataFrame:
    """A tasks table with the canonical columns and no rows."""
    return pd.DataFrame({c: pd.Series(dtype=t) for c, t in _TASK_DTYPES.items()})


def empty_steps() -> pd.DataFrame:
    """A steps table with the canonical columns and no rows."""
    return pd.DataFrame({c: pd.Series(dtype=t) for c, t in _STEP_DTYPES.items()})


# --------------------------------------------------------------------------- provenance

SOURCE_COLUMN = "_source"
"""Helper column a reader may add to its tables: the :class:`SourceFile` each row came from."""
SOURCE_ROW = "_source_row"
"""Helper column: the row's number in its file (data row, table row, trace event), from 1."""
PROVENANCE_COLUMNS = (SOURCE_COLUMN, SOURCE_ROW)

MAX_TIME_US = 2**62 // NS_PER_US
"""The largest time or duration (µs) a profile may hold: 2**62 ns, 146 years, so that a time,
a duration and the difference of two times all fit the int64 nanoseconds the readers compute
in (epoch ns of today are 1.8e18, a quarter of that range)."""
MAX_DURATION_US = 24 * 3600 * 10**6
"""No device task, step or part of a step lasts a day: a longer duration is a broken value."""
MAX_ID = 2**63 - 1
"""Ranks, steps and counts are int64."""


@dataclass(frozen=True, eq=False)
class SourceFile:
    """Where rows of a canonical table come from, so that a value that breaks physics is
    reported at its file, row and column (docs/formats.md §12).

    Attributes:
        path: the file.
        headers: canonical column → the column as the file spells it (``Duration(us)``,
            ``TASK.endNs``, ``dur``); ``duration`` names what a step's length comes from when
            it is not its end (``Iteration Time(us)``).
        row: how the file counts its rows (``data row``, ``TASK row``, ``trace event #``).
    """

    path: str
    headers: Mapping[str, str] = field(default_factory=dict)
    row: str = "data row"

    def header(self, column: str) -> str:
        return self.headers.get(column, column)

    def renamed(self, **headers: str) -> SourceFile:
        """The same file with more (or other) column headers."""
        return SourceFile(self.path, {**self.headers, **headers}, self.row)


def with_source(
    table: pd.DataFrame, source: SourceFile, rows: npt.ArrayLike | None = None
) -> pd.DataFrame:
    """``table`` with the provenance columns set: every row from ``source``, numbered ``rows``
    (default: 1, 2, … in table order). Modifies and returns ``table``."""
    table[SOURCE_COLUMN] = pd.Series([source] * len(table), index=table.index, dtype=object)
    numbers = np.arange(1, len(table) + 1) if rows is None else np.asarray(rows)
    table[SOURCE_ROW] = pd.array(numbers, dtype="Int64")
    return table


def provenance_columns(table: pd.DataFrame) -> list[str]:
    """The provenance columns ``table`` has (to keep them through a column selection)."""
    return [c for c in PROVENANCE_COLUMNS if c in table.columns]


class _Where:
    """Names the file, row and column of a table's row for an error message."""

    def __init__(self, table: pd.DataFrame, fallback: str | Path) -> None:
        self.table = table
        self.fallback = str(fallback)

    def error(self, position: int, column: str, problem: str, expected: str | None) -> ProfileError:
        source = None
        row = None
        if SOURCE_COLUMN in self.table.columns:
            found = self.table[SOURCE_COLUMN].iloc[position]
            source = found if isinstance(found, SourceFile) else None
        if source is not None and SOURCE_ROW in self.table.columns:
            number = self.table[SOURCE_ROW].iloc[position]
            row = None if pd.isna(number) else int(number)
        if source is None:
            return ProfileError(self.fallback, problem, column=column, expected=expected)
        where = f"{source.row} {row}: " if row is not None else ""
        if source.row.endswith("#") and row is not None:
            where = f"{source.row}{row}: "
        return ProfileError(
            source.path, where + problem, column=source.header(column), expected=expected
        )


def _first(mask: npt.NDArray[np.bool_]) -> int:
    return int(np.flatnonzero(mask)[0])


def _check_ids(
    table: pd.DataFrame, columns: tuple[str, ...], where: _Where, *, required: tuple[str, ...]
) -> None:
    """Integer columns (rank, step, count): integers within int64, present where required."""
    for column in columns:
        if column not in table.columns:
            continue
        cells = table[column]
        if isinstance(cells.dtype, np.dtype) and cells.dtype.kind in "iu":
            continue  # already int64: in range by construction
        values = pd.to_numeric(cells, errors="coerce").astype("float64").to_numpy()
        present = cells.notna().to_numpy()
        missing = ~present if column in required else np.zeros(len(values), dtype=bool)
        bad = present & ~(
            np.isfinite(values) & (np.abs(values) < float(MAX_ID)) & (np.floor(values) == values)
        )
        if missing.any() or bad.any():
            at = _first(missing | bad)
            cell = cells.iloc[at]
            cell = cell.item() if isinstance(cell, np.generic) else cell  # not np.float64(…)
            problem = "no value" if missing[at] else f"holds {cell!r}"
            raise where.error(at, column, problem, "an integer id within the int64 range")


def _check_times(
    table: pd.DataFrame,
    columns: tuple[str, ...],
    where: _Where,
    *,
    durations: tuple[str, ...] = (),
    required: tuple[str, ...] = (),
    origin_us: int = 0,
) -> None:
    """Times and durations (µs): finite and within the int64-ns clock; durations ≥ 0 and
    shorter than :data:`MAX_DURATION_US`; times of an epoch clock (``origin_us`` is
    :data:`EPOCH_ORIGIN_US`) no earlier than :data:`EPOCH_SIZED_US` (2001)."""
    for column in columns:
        if column not in table.columns:
            continue
        values = table[column].to_numpy(dtype=np.float64, na_value=np.nan)
        known = ~np.isnan(values)
        if column in required and not known.all():
            at = _first(~known)
            raise where.error(at, column, "no value", "µs in every row")
        infinite = known & ~(np.abs(values) <= MAX_TIME_US)
        if infinite.any():
            at = _first(infinite)
            raise where.error(
                at,
                column,
                f"{values[at]:g} µs is no time a profiler records",
                f"a finite number of µs, at most {MAX_TIME_US:.3g} (int64 ns)",
            )
        if column in durations:
            negative = known & (values < 0)
            if negative.any():
                at = _first(negative)
                raise where.error(
                    at, column, f"negative duration ({values[at]:g} µs)", "a duration >= 0"
                )
            _check_duration(values, known, column, where)
        elif origin_us == EPOCH_ORIGIN_US:
            early = known & (values < EPOCH_SIZED_US - EPOCH_ORIGIN_US)
            if early.any():
                at = _first(early)
                raise where.error(
                    at,
                    column,
                    f"a time stamp before 2001 ({values[at] + EPOCH_ORIGIN_US:.0f} µs since "
                    "1970) among epoch time stamps",
                    "a time of the profile's clock (epoch µs)",
                )


def _check_duration(
    values: npt.NDArray[np.float64], known: npt.NDArray[np.bool_], column: str, where: _Where
) -> None:
    long = known & (values > MAX_DURATION_US)
    if long.any():
        at = _first(long)
        raise where.error(
            at,
            column,
            f"a duration of {values[at] / 3.6e9:.4g} h",
            "a duration of less than a day",
        )


def normalize_tasks(tasks: pd.DataFrame, source: str | Path, origin_us: int = 0) -> pd.DataFrame:
    """Check a reader's tasks table against the contract and coerce the dtypes.

    The values must be physically possible: ranks and steps int64 ids, start times finite,
    durations finite and >= 0, all within the int64-ns clock (:data:`MAX_TIME_US`). A
    violation names the file, row and column the value came from when the reader recorded
    them (:data:`SOURCE_COLUMN`, :data:`SOURCE_ROW`), else ``source`` and the canonical column. The
    provenance columns are dropped.

    Raises:
        ProfileError: a required column is missing, a category is outside
            :data:`CATEGORIES`, or a value breaks the checks above.
    """
    _require_columns(tasks, TASK_COLUMNS, source, "task")
    where = _Where(tasks.reset_index(drop=True), source)
    _check_ids(where.table, ("rank", "step"), where, required=("rank",))
    _check_times(
        where.table,
        ("start_us", "dur_us"),
        where,
        durations=("dur_us",),
        required=("start_us", "dur_us"),
        origin_us=origin_us,
    )
    out = where.table.drop(columns=provenance_columns(tasks))
    # Readers may keep names categorical (each distinct one worked out once); the table's
    # text columns are plain objects.
    text = {
        c: "object"
        for c in out.columns
        if isinstance(out[c].dtype, (pd.CategoricalDtype, pd.StringDtype))
    }
    out = _check_categories(out.astype({**text, **_TASK_DTYPES}), source, "task")
    return out.reset_index(drop=True)


def normalize_steps(steps: pd.DataFrame, source: str | Path, origin_us: int = 0) -> pd.DataFrame:
    """Check a reader's steps table against the contract and coerce the dtypes.

    Ranks and steps are int64 ids; a window (``start_us``/``end_us``, NaN when the source
    gives none) is finite, within the clock, and ends no earlier than it starts; breakdown
    columns are finite durations >= 0 (NaN: not given). Violations are named as in
    :func:`normalize_tasks`.
    """
    _require_columns(steps, STEP_COLUMNS, source, "step")
    where = _Where(steps.reset_index(drop=True), source)
    table = where.table
    _check_ids(table, ("rank", "step"), where, required=("rank", "step"))
    breakdown = tuple(c for c in BREAKDOWN_COLUMNS if c in table.columns)
    _check_times(
        table,
        ("start_us", "end_us", *breakdown),
        where,
        durations=breakdown,
        origin_us=origin_us,
    )
    start = table["start_us"].to_numpy(dtype=np.float64, na_value=np.nan)
    end = table["end_us"].to_numpy(dtype=np.float64, na_value=np.nan)
    backwards = end < start
    if backwards.any():
        at = _first(backwards)
        column = "duration" if "duration" in _headers(table, at) else "end_us"
        raise where.error(
            at,
            column,
            f"step ends {start[at] - end[at]:g} µs before it starts",
            "an end no earlier than the start",
        )
    span = end - start
    long = ~np.isnan(span) & (span > MAX_DURATION_US)
    if long.any():
        at = _first(long)
        column = "duration" if "duration" in _headers(table, at) else "end_us"
        raise where.error(
            at, column, f"a step of {span[at] / 3.6e9:.4g} h", "a step of less than a day"
        )
    dtypes = dict(_STEP_DTYPES)
    dtypes.update({c: "float64" for c in breakdown})
    out = table.drop(columns=provenance_columns(table)).astype(dtypes)
    if "warmup" in out.columns:
        out["warmup"] = out["warmup"].fillna(False).astype(bool)
    if out.duplicated(["rank", "step"]).any():
        position = _first(out.duplicated(["rank", "step"]).to_numpy())
        dup = out.iloc[position]
        raise where.error(
            position,
            "step",
            f"step {dup['step']} of rank {dup['rank']} appears twice",
            "one row per (rank, step)",
        )
    return out.sort_values(["rank", "step"]).reset_index(drop=True)


def _headers(table: pd.DataFrame, position: int) -> Mapping[str, str]:
    if SOURCE_COLUMN not in table.columns:
        return {}
    source = table[SOURCE_COLUMN].iloc[position]
    return source.headers if isinstance(source, SourceFile) else {}


def normalize_op_statistic(table: pd.DataFrame, source: str | Path) -> pd.DataFrame:
    """Check a reader's op_statistic table against the contract and coerce the dtypes
    (``count`` an int64 >= 0, ``total_us`` a finite duration >= 0)."""
    _require_columns(table, OP_STATISTIC_COLUMNS, source, "op_statistic")
    where = _Where(table.reset_index(drop=True), source)
    _check_ids(where.table, ("rank", "count"), where, required=("rank", "count"))
    counts = pd.to_numeric(where.table["count"], errors="coerce").to_numpy(dtype=np.float64)
    if (counts < 0).any():
        at = _first(counts < 0)
        raise where.error(at, "count", f"count {counts[at]:g}", "a count >= 0")
    _check_times(where.table, ("total_us",), where, durations=("total_us",), required=("total_us",))
    out = where.table[list(OP_STATISTIC_COLUMNS)].astype(_OP_STATISTIC_DTYPES)
    return _check_categories(out, source, "operator").reset_index(drop=True)


def _require_columns(
    table: pd.DataFrame, columns: tuple[str, ...], source: str | Path, what: str
) -> None:
    missing = [c for c in columns if c not in table.columns]
    if missing:
        raise ProfileError(source, f"reader produced no such {what} column", column=missing[0])


def _check_categories(table: pd.DataFrame, source: str | Path, what: str) -> pd.DataFrame:
    bad = ~table["category"].isin(CATEGORIES)
    if bad.any():
        raise ProfileError(
            source,
            f"unknown {what} category {table.loc[bad, 'category'].iloc[0]!r}",
            column="category",
            expected=" | ".join(CATEGORIES),
        )
    return table


@dataclass
class Profile:
    """One profile, read into the canonical tables.

    Attributes:
        source: the format that was read: ``torch_npu``, ``msprof``, ``kineto``,
            ``torch_npu_db``, ``msprof_db``, ``ascend_timeline``, ``cluster_step_trace``.
        path: what the user pointed at.
        tasks: the canonical tasks table (docs/formats.md §1.1).
        steps: the canonical steps table; empty when the source has no step marks.
        metadata: what the profile records about its environment, with these keys when
            known: ``cann_version``, ``torch_npu_version``, ``torch_version``,
            ``profiler_level``, ``aic_metrics``, ``device``, ``ranks`` (list[int]),
            ``task_basis`` (``device`` or ``cpu``), ``export_type``, ``copy_visible``
            (bool, default True: False when the source lists kernels only, e.g.
            ``kernel_details.csv`` without ``trace_view.json``/``task_time.csv``, so copy
            time is unknown rather than zero), ``time_origin_us`` (int, default 0: the origin
            of ``start_us``/``end_us``, :data:`EPOCH_ORIGIN_US` for epoch-clock sources; see
            docs/formats.md §1.5).
        notes: things the user should know about how the profile was read (one line each),
            e.g. "no step marks: analysed as one window".
        op_statistic: the profiler's own per-operator totals, when the source has them
            (``op_statistic.csv``, ``op_statistic_*.csv``): one row per (rank, operator type,
            core) with :data:`OP_STATISTIC_COLUMNS` (``count`` int64, ``total_us`` float64,
            ``category`` one of :class:`Category`); ``None`` otherwise. The analysis uses it
            when the profile has no per-task rows.
    """

    source: str
    path: str
    tasks: pd.DataFrame
    steps: pd.DataFrame
    metadata: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    op_statistic: pd.DataFrame | None = None

    def __post_init__(self) -> None:
        origin = int(self.metadata.get("time_origin_us", 0))
        self.tasks = normalize_tasks(self.tasks, self.path, origin)
        self.steps = normalize_steps(self.steps, self.path, origin)
        if self.op_statistic is not None:
            self.op_statistic = normalize_op_statistic(self.op_statistic, self.path)
        self.metadata.setdefault("task_basis", DEVICE_TASKS)
        self.metadata.setdefault("copy_visible", True)
        self.metadata.setdefault("time_origin_us", 0)

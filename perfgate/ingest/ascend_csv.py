"""Shared pieces of the Ascend CSV readers (torch_npu text export and msprof export).

torch_npu's ``kernel_details.csv`` is msprof's ``op_summary_*.csv`` with its columns renamed
(docs/formats.md §4.2), so one column table, :data:`TASK_COLUMN_MAP`, serves both readers.

Every CSV is read whole into a DataFrame (``pd.read_csv`` with ``usecols`` and ``dtype=str``),
then each column is converted once: cells are stripped (msprof writes a TAB inside time-stamp
cells, ``1736405443881410.320\\t``), empty cells are missing, ``N/A`` is kept in name and type
columns and means unknown elsewhere (docs/formats.md §8), numbers are parsed with
:func:`pandas.to_numeric`, and time stamps (kind ``time``) exactly from their text by the
profile's :class:`~perfgate.model.TimeBase` (epoch µs become µs since its origin). A cell that
does not hold what its column promises raises :class:`~perfgate.errors.ProfileError` naming the
file, the column and the row.
"""

from __future__ import annotations

import csv
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
import pandas as pd

from perfgate.errors import ProfileError
from perfgate.ingest.categories import categorize, op_type_from_name
from perfgate.ingest.common import (
    categorical_from,
    first_rows,
    row_codes,
    strip_shape_quotes,
)
from perfgate.ingest.progress import read_whole
from perfgate.intervals import FloatArray
from perfgate.model import (
    BREAKDOWN_COLUMNS,
    MAX_ID,
    OP_STATISTIC_COLUMNS,
    SourceFile,
    TimeBase,
    provenance_columns,
    unknown_ints,
    with_source,
)

# ``name``: a name or type, where ``N/A`` is a value (kept as written; only an empty cell is
# missing); ``text``: other text (ids, shapes), where ``N/A`` means unknown; ``time``: an
# absolute time stamp in µs (float64 µs since the TimeBase's origin).
ColumnKind = Literal["name", "text", "float", "int", "time"]

# Cells that mean "no value" in Ascend CSVs outside name columns. Default pandas NA strings
# ("NA", "null", "None", …) are deliberately not used: they could be kernel names.
NA_STRINGS = ("", "N/A")
NOT_AVAILABLE = "N/A"

Flavor = Literal["kernel_details", "op_summary"]
KERNEL_DETAILS: Flavor = "kernel_details"
OP_SUMMARY: Flavor = "op_summary"

# The one op_summary ↔ kernel_details column table (docs/formats.md §4.2).
#   canonical     kernel_details.csv      op_summary_*.csv          kind     header required
# ``device_id`` and ``task_id`` are helper columns: the readers turn the first into ``rank`` and
# use the second to match task_time rows; neither reaches the canonical tasks table.
TASK_COLUMN_MAP: tuple[tuple[str, str | None, str | None, ColumnKind, bool], ...] = (
    ("device_id", "Device_id", "Device_id", "int", False),
    ("step", "Step Id", None, "int", False),
    ("stream", "Stream ID", "Stream ID", "text", False),
    ("task_id", "Task ID", "Task ID", "text", False),
    ("name", "Name", "Op Name", "name", True),
    ("op_type", "Type", "OP Type", "name", True),
    ("core", "Accelerator Core", "Task Type", "name", True),
    ("start_us", "Start Time(us)", "Task Start Time(us)", "time", True),
    ("dur_us", "Duration(us)", "Task Duration(us)", "float", True),
    ("input_shapes", "Input Shapes", "Input Shapes", "text", False),
)
# ``Block Dim``/``Block Num`` (renamed in 2026) and the PMU columns are not read, so either
# spelling of the header is accepted.

# Columns that must hold a value in every row (a missing one means a truncated or broken file).
TASK_VALUE_REQUIRED = ("start_us", "dur_us")

# step_trace_time.csv (torch_npu) and cluster_step_trace_time.csv (msprof-analyze) breakdown
# columns → canonical breakdown columns (docs/formats.md §4.3, §4.8).
STEP_BREAKDOWN_MAP: tuple[tuple[str, str, bool], ...] = (
    # canonical                header                              header required
    ("computing_us", "Computing", True),
    ("comm_not_overlapped_us", "Communication(Not Overlapped)", True),
    ("free_us", "Free", True),
    ("preparing_us", "Preparing", False),  # absent before torch_npu added it
)
assert tuple(c for c, _, _ in STEP_BREAKDOWN_MAP) == BREAKDOWN_COLUMNS

# op_statistic.csv / op_statistic_*.csv (docs/formats.md §4.5).
OP_STATISTIC_COLUMNS_SPEC: tuple[tuple[str, str, ColumnKind, bool], ...] = (
    ("device_id", "Device_id", "int", False),
    ("op_type", "OP Type", "name", True),
    ("core", "Core Type", "name", True),
    ("count", "Count", "int", True),
    ("total_us", "Total Time(us)", "float", True),
)


@dataclass(frozen=True)
class CsvColumn:
    """One column to read: its header in the file and the canonical column it becomes."""

    canonical: str
    header: str
    kind: ColumnKind
    header_required: bool = True
    value_required: bool = False


def task_columns(flavor: Flavor) -> list[CsvColumn]:
    """:data:`TASK_COLUMN_MAP` under its ``kernel_details`` or ``op_summary`` header names."""
    columns = []
    for canonical, kd_header, os_header, kind, required in TASK_COLUMN_MAP:
        header = kd_header if flavor == KERNEL_DETAILS else os_header
        if header is None:
            continue
        columns.append(
            CsvColumn(canonical, header, kind, required, canonical in TASK_VALUE_REQUIRED)
        )
    return columns


def read_header(path: Path) -> list[str]:
    """The stripped header cells of a CSV file.

    Raises:
        ProfileError: the file cannot be opened, is empty or is not text.
    """
    return [cell.strip() for cell in _header_cells(path)]


def _header_cells(path: Path) -> list[str]:
    """The header cells of a CSV file as written (see :func:`read_header`)."""
    # Decoded with replacement: bytes that are no UTF-8 further on are the cells' business
    # (_read_cells); in the header they make no CSV text.
    try:
        with path.open(encoding="utf-8-sig", errors="replace", newline="") as handle:
            first = next(csv.reader(handle), None)
    except OSError as exc:
        raise ProfileError(path, f"cannot be read ({exc.strerror or exc})") from exc
    except csv.Error as exc:
        raise ProfileError(path, "is not a CSV text file", expected="UTF-8 CSV") from exc
    if first and any("\ufffd" in cell for cell in first):
        raise ProfileError(path, "is not a CSV text file", expected="UTF-8 CSV")
    if not first:
        raise ProfileError(path, "file is empty", expected="a CSV header line")
    return first


def _check_last_line(path: Path, cells: int, what: str) -> None:
    """Refuse a file cut in the middle of its last row (a profiler killed while writing): a
    last line without a line break and with fewer cells than the header. Read as it is,
    its missing cells would be missing values, and the file's operators silently fewer."""
    try:
        with path.open("rb") as handle:
            size = handle.seek(0, os.SEEK_END)
            handle.seek(max(0, size - 65536))
            tail = handle.read()
    except OSError:
        return  # the reading names it
    if not tail or tail.endswith((b"\n", b"\r")) or b"\n" not in tail:
        return  # complete, or the header alone, or a last line too long to judge
    lines = tail.rsplit(b"\n", 2)
    last = next(csv.reader([lines[-1].decode("utf-8", "replace")]), [])
    if len(last) < cells:
        raise ProfileError(
            path,
            f"its last line has {len(last)} of the header's {cells} cells and no line break: "
            "the file looks truncated",
            expected=what,
        )
    # Cut inside its last cell, the line has every cell. msprof ends each time cell with a
    # TAB (so that a spreadsheet keeps its digits): a time cell of the row before that ends
    # with one, where the last line's does not, was cut (a task_time cut so read 0 copies).
    before = lines[-2].rstrip(b"\r").decode("utf-8", "replace") if len(lines) == 3 else ""
    for column, (above, cell) in enumerate(zip(next(csv.reader([before]), []), last)):
        if above.endswith("\t") and not cell.endswith("\t"):
            raise ProfileError(
                path,
                f"its last line has no line break and its cell {column + 1} ({cell!r}) lacks "
                "the TAB that ends the time cells of the row before it: the file looks "
                "truncated",
                expected=what,
            )


def read_csv_columns(
    path: Path,
    columns: Sequence[CsvColumn],
    *,
    what: str,
    clock: TimeBase | None = None,
    categorical: bool = False,
) -> pd.DataFrame:
    """Read ``columns`` of the CSV at ``path`` into a DataFrame with the canonical names.

    Returns one column per found :class:`CsvColumn`, named ``canonical``, and the provenance
    columns (:func:`~perfgate.model.with_source`: this file, its data row numbers and each
    column's header, so that a check further on names them): ``name`` columns as
    object (stripped, ``N/A`` kept, empty → NaN), ``text`` as object (stripped, ``N/A``/empty →
    NaN), ``float`` as float64, ``int`` as Int64, ``time`` as
    float64 µs since ``clock``'s origin (a new :class:`~perfgate.model.TimeBase` when none is
    given: pass the profile's, so that all its files share one origin). Optional columns absent
    from the header are absent from the result. ``categorical``: ``name`` and ``text`` columns
    as categoricals of the same values (the task tables, whose names repeat a lot).

    Raises:
        ProfileError: a required header is missing (the message names it and ``what`` the file
            was expected to be), the file is not parseable CSV, a number cell holds text, or a
            ``value_required`` cell is empty (a truncated file).
    """
    written = _header_cells(path)  # read once; the readings below name columns by them
    header = [cell.strip() for cell in written]
    found = [c for c in columns if c.header in header]
    missing = [c for c in columns if c.header_required and c.header not in header]
    if missing:
        wanted = ", ".join(c.header for c in columns if c.header_required)
        raise ProfileError(
            path,
            "no such column in the header",
            column=missing[0].header,
            expected=f"{what} with columns {wanted}",
        )
    for column in found:
        places = [i + 1 for i, cell in enumerate(header) if cell == column.header]
        if len(places) > 1:  # which of them holds the numbers? Reading the first was a guess
            raise ProfileError(
                path,
                f"the header names this column {len(places)} times (columns "
                f"{', '.join(map(str, places))})",
                column=column.header,
                expected=f"{what} with each column once",
            )
    wanted_headers = {c.header for c in found}
    numeric = {c.header for c in found if c.kind in ("float", "int")}
    required = {c.header for c in found if c.kind in ("float", "int") and c.value_required}
    integers = {c.header for c in found if c.kind == "int"}
    # Number columns parsed while reading, by pyarrow (the fast extra) or else by pandas' C
    # parser (as pandas.to_numeric would: white space around, N/A and empty as missing); a
    # cell that is no number, or a required one that is missing, sends the file to the text
    # reading below, where _convert names the cell.
    raw = _arrow_cells(path, written, found)
    if raw is None and numeric:
        try:
            raw = _read_cells(path, written, wanted_headers, numeric)
        except ValueError:
            raw = None
    if raw is not None and not _fit(raw, required, integers):
        raw = None
    if raw is None:
        try:
            raw = _read_cells(path, written, wanted_headers, set())
        except (
            pd.errors.ParserError,
            pd.errors.EmptyDataError,
            UnicodeDecodeError,
            ValueError,
        ) as e:
            reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise ProfileError(
                path, f"cannot be parsed as CSV ({reason}); truncated file?", expected=what
            ) from e
    read_whole(path)
    raw.columns = [str(name).strip() for name in raw.columns]
    raw = raw.loc[:, ~raw.columns.duplicated()]
    out = pd.DataFrame(index=raw.index)
    clock = clock if clock is not None else TimeBase()
    for column in found:
        out[column.canonical] = _convert(path, raw[column.header], column, clock, categorical)
    # After the cells' own checks, which name the column a cut left empty.
    _check_last_line(path, len(written), what)
    headers = {c.canonical: c.header for c in found}
    if "device_id" in headers:
        headers["rank"] = headers["device_id"]
    return with_source(out, SourceFile(str(path), headers))


def _read_cells(
    path: Path, written: list[str], wanted: set[str], numeric: set[str]
) -> pd.DataFrame:
    """The ``wanted`` columns (headers matched stripped) of the CSV whose header cells are
    ``written``: ``numeric`` ones as float64 (empty and ``N/A`` cells NaN), the others as
    every cell is written (``object``: pandas' ``str`` dtype is several times slower to
    build, more so with pyarrow strings)."""
    names = [name for name in written if name.strip() in wanted]
    return pd.read_csv(
        path,
        usecols=lambda name: str(name).strip() in wanted,
        dtype={name: np.float64 if name.strip() in numeric else object for name in names},
        # N/A is data in name columns (see _convert), and pandas' default NA strings ("NA",
        # "null", "None", …) could be kernel names: only number columns have NA strings.
        na_values={name: list(NA_STRINGS) for name in names if name.strip() in numeric},
        keep_default_na=False,
        encoding="utf-8-sig",
        # Bytes that are no UTF-8 become U+FFFD, as in the .db reader: a name stays a name,
        # a number cell so damaged is refused where it is read, and a column perfgate does
        # not read cannot fail the file (pyarrow's reading never decodes those).
        encoding_errors="replace",
        # pandas 2's default float parser may miss the nearest float64 by a bit (pyarrow's,
        # and pandas 3's, never do: pandas 3 deprecates the choice); the two readings agree.
        **_CORRECTLY_ROUNDED,
    )


_CORRECTLY_ROUNDED: dict[str, Any] = (
    {"float_precision": "round_trip"} if int(pd.__version__.split(".")[0]) < 3 else {}
)


# Cells of time stamps longer than this are not parsed as a byte matrix (one row per cell, as
# wide as the longest): such a column is no column of time stamps anyway.
_MAX_BYTE_ROW = 64


def _arrow_cells(path: Path, written: list[str], found: Sequence[CsvColumn]) -> pd.DataFrame | None:
    """The cells :func:`_read_cells` gives, read by pyarrow's CSV reader where it is installed
    (the ``fast`` extra), or None: not installed, or pyarrow refuses the file (a row of
    another length, a number column holding text, bytes that are no UTF-8), which the pandas
    reading then reports or takes as it always did.

    Number columns come as float64 (empty and ``N/A`` cells NaN), name and text columns as
    categoricals of the cells as written (each distinct cell converted once), time stamps as
    integer ns (:func:`_arrow_ns`) or, where a column of them is not that simple, as Arrow
    strings, parsed from their bytes by :func:`_convert`.
    """
    table = _arrow_table(path, written, found, times_as_ns=True)
    table = _times_as_ns(table) if table is not None else None
    if table is None:  # time stamps of more places, missing or no number: read as text
        table = _arrow_table(path, written, found, times_as_ns=False)
    if table is None:
        return None
    columns: dict[str, pd.Series] = {}
    for name, column in zip(table.column_names, table.columns):
        series = _arrow_series(column)
        if series is None:
            return None
        columns[name] = series
    return pd.DataFrame(columns, index=pd.RangeIndex(table.num_rows))


# Time stamps are read by pyarrow as decimals of this scale: µs with three decimals, msprof's
# and torch_npu's ns resolution, as an exact integer of ns.
_NS_DIGITS = 3


def _arrow_table(
    path: Path, written: list[str], found: Sequence[CsvColumn], *, times_as_ns: bool
) -> Any:
    """The pyarrow Table of the ``found`` columns, each named by its header cell as written,
    or None where pyarrow refuses the file. ``times_as_ns``: time columns as decimals of
    :data:`_NS_DIGITS` places (a cell with more places, or that is no number, is refused),
    else as strings."""
    try:
        import pyarrow as pa
        import pyarrow.csv as arrow_csv
    except ImportError:
        return None
    position: dict[str, int] = {}
    for i, cell in enumerate(written):
        position.setdefault(cell.strip(), i)
    # Header cells as written could repeat or hold anything: columns are named by position.
    names = [f"column {i}" for i in range(len(written))]
    types: dict[str, Any] = {}
    headers: dict[str, str] = {}
    for column in found:
        name = names[position[column.header]]
        headers[name] = written[position[column.header]]
        if column.kind in ("float", "int"):
            types[name] = pa.float64()
        elif column.kind == "time":
            types[name] = pa.decimal128(38, _NS_DIGITS) if times_as_ns else pa.string()
        else:
            types[name] = pa.dictionary(pa.int32(), pa.string())
    convert = arrow_csv.ConvertOptions(
        column_types=types,
        include_columns=list(types),
        null_values=list(NA_STRINGS),
        strings_can_be_null=False,
    )
    table = None
    # First in parallel blocks cut at line ends. A quoted line break inside a block is read
    # as it is; one that a cut falls into leaves the block parsed to another length than the
    # cut, which pyarrow refuses ("out of sync with chunker", or a row of another length):
    # the file is then read again as one stream, where line breaks in values are safe.
    for newlines_in_values in (False, True):
        try:
            table = arrow_csv.read_csv(
                path,
                read_options=arrow_csv.ReadOptions(column_names=names, skip_rows=1),
                parse_options=arrow_csv.ParseOptions(newlines_in_values=newlines_in_values),
                convert_options=convert,
            )
            break
        except (pa.ArrowException, OSError):
            continue
        except UnicodeEncodeError:
            return None  # a path that is no UTF-8 (pyarrow takes text): pandas reads it
    if table is None:
        return None
    return table.rename_columns([headers[name] for name in table.column_names])


def _times_as_ns(table: Any) -> Any:
    """``table`` with its decimal time columns as int64 ns, or None where one of them has a
    missing cell (told apart from ``N/A`` only in the text) or a value past int64's ns."""
    import pyarrow as pa

    for i, column in enumerate(table.columns):
        if pa.types.is_decimal(column.type):
            ns = _arrow_ns(column)
            if ns is None:
                return None
            table = table.set_column(i, table.field(i).with_type(pa.int64()), pa.array(ns))
    return table


def _arrow_ns(column: Any) -> npt.NDArray[np.int64] | None:
    """A decimal column of :data:`_NS_DIGITS` places as its unscaled int64 values (ns), or
    None where a cell is missing or a value does not fit int64."""
    if column.null_count:
        return None
    array = column.combine_chunks()
    words = np.frombuffer(array.buffers()[1], dtype=np.int64)
    words = words[2 * array.offset : 2 * (array.offset + len(array))].reshape(-1, 2)
    low, high = words[:, 0], words[:, 1]  # little-endian two's complement halves
    if not (high == (low >> 63)).all():  # the high word only repeats the sign: fits int64
        return None
    return low.copy()


def _arrow_series(column: Any) -> pd.Series | None:
    """One column of :func:`_arrow_table` as :func:`_arrow_cells` gives it, or None where a
    number column holds what pandas' parser may read otherwise."""
    import pyarrow as pa

    kind = column.type
    if pa.types.is_floating(kind):
        values = column.to_numpy()
        # pandas' parser and pyarrow's may differ on what else is a number (inf, or nan
        # written in the text rather than a missing cell): such a file is left to pandas.
        written_nan = np.isnan(values) & ~column.is_null().to_numpy()
        if np.isinf(values).any() or written_nan.any():
            return None
        return pd.Series(values, dtype=np.float64)
    if pa.types.is_dictionary(kind):
        unified = column.unify_dictionaries()
        dictionary = unified.chunk(0).dictionary.to_pylist() if unified.num_chunks else []
        codes = np.concatenate(
            [chunk.indices.to_numpy() for chunk in unified.chunks] or [np.zeros(0, np.int32)]
        )
        return pd.Series(pd.Categorical.from_codes(codes, pd.Index(dictionary, dtype=object)))
    if pa.types.is_integer(kind):  # time stamps as ns (_times_as_ns)
        return pd.Series(column.to_numpy(), dtype=np.int64)
    return pd.Series(column, dtype=pd.ArrowDtype(pa.string()))


def _byte_rows(cells: pd.Series) -> npt.NDArray[np.uint8] | None:
    """The UTF-8 bytes of the present cells of an Arrow string Series, one row each, padded
    with NUL bytes; None where a cell is longer than :data:`_MAX_BYTE_ROW`."""
    import pyarrow as pa

    array = pa.chunked_array(cells.array.__arrow_array__()).combine_chunks().drop_null()
    offsets = np.frombuffer(array.buffers()[1], dtype=np.int32)[
        array.offset : array.offset + len(array) + 1
    ]
    data_buffer = array.buffers()[2]
    data = np.frombuffer(data_buffer, dtype=np.uint8) if data_buffer is not None else None
    lengths = np.diff(offsets)
    width = int(lengths.max()) if len(lengths) else 0
    if width > _MAX_BYTE_ROW:
        return None
    if width and data is not None and (lengths == width).all():
        # Every cell of one length (time stamps usually are): the bytes are the matrix.
        start = int(offsets[0])
        return data[start : start + len(lengths) * width].reshape(len(lengths), width).copy()
    rows = np.zeros((len(lengths), width), dtype=np.uint8)
    if width and data is not None:
        at = np.arange(width, dtype=np.int32)
        inside = at < lengths[:, None]
        rows[inside] = data[(offsets[:-1, None] + at)[inside]]
    return rows


def _fit(raw: pd.DataFrame, required: set[str], integers: set[str]) -> bool:
    """Whether number columns parsed while reading hold what they must: a value in every row
    of a ``required`` one, whole numbers within int64 in an ``integers`` one."""
    for name in raw.columns:
        header = str(name).strip()
        if header not in required | integers:
            continue
        numbers = raw[name].to_numpy(dtype=np.float64)
        if header in required and np.isnan(numbers).any():
            return False
        if header in integers:
            known = numbers[~np.isnan(numbers)]
            if not ((known == np.round(known)) & (np.abs(known) < float(MAX_ID))).all():
                return False
    return True


def _convert(
    path: Path, cells: pd.Series, column: CsvColumn, clock: TimeBase, categorical: bool = False
) -> pd.Series:
    """One column's cells → its kind. Only an empty cell (or a row cut short) is missing;
    ``N/A`` is kept in ``name`` columns, unknown in ``text`` ones, and no number elsewhere
    (an error where a value is required, else missing). ``categorical``: see
    :func:`read_csv_columns`."""
    index = cells.index
    if cells.dtype == np.float64:  # parsed while reading and checked (_fit)
        return _numbers(path, column, np.array(cells, dtype=np.float64), cells, index)
    if column.kind in ("name", "text"):
        if isinstance(cells.dtype, pd.CategoricalDtype):  # each distinct cell once, then taken
            codes = cells.cat.codes.to_numpy()
            categories = cells.cat.categories.to_numpy(dtype=object)
            if _padded(categories):
                categories = np.array([str(v).strip() for v in categories], dtype=object)
            distinct = np.append(categories, "")
            _require(path, column, (distinct == "")[codes])
            values = _text_values(distinct, column)
            if categorical:
                return categorical_from(values, codes % len(distinct), index)
            return pd.Series(values[codes], index=index, dtype=object)
        stripped = _stripped(cells.to_numpy(dtype=object))
        _require(path, column, stripped == "")
        values = _text_values(stripped, column)
        if categorical:
            codes, distinct_values = pd.factorize(values)
            return categorical_from(np.asarray(distinct_values, dtype=object), codes, index)
        return pd.Series(values, index=index, dtype=object)
    # Numbers and time stamps are parsed first (both parsers skip surrounding white space);
    # only the cells that gave no number are looked at again, to tell empty, N/A and text.
    if column.kind == "time" and cells.dtype == np.int64:  # ns, read by pyarrow (_arrow_cells)
        return pd.Series(clock.from_ns(cells.to_numpy()), index=index)
    if column.kind == "time":
        # Time stamps read by pyarrow (_arrow_cells) are parsed from their bytes.
        byte_rows = _byte_rows(cells) if isinstance(cells.dtype, pd.ArrowDtype) else None
        numbers = np.array(clock.from_text(cells, byte_rows), dtype=np.float64)  # writable
    else:
        numbers = _floats(cells.to_numpy(dtype=object))
    failed = np.flatnonzero(np.isnan(numbers))
    text = _stripped(cells.iloc[failed].to_numpy(dtype=object))
    empty = np.zeros(len(cells), dtype=bool)
    empty[failed] = text == ""
    _require(path, column, empty)
    placeholder = np.zeros(len(cells), dtype=bool)
    placeholder[failed] = text == NOT_AVAILABLE
    # N/A where a value is required is no number: reported with its row, as text would be.
    missing = empty | (placeholder & (not column.value_required))
    # N/A and empty cells of a number column are missing, whatever a parser made of them.
    numbers[empty | placeholder] = np.nan
    return _numbers(path, column, numbers, cells, index, missing=missing)


def _text_values(stripped: npt.NDArray[np.object_], column: CsvColumn) -> npt.NDArray[np.object_]:
    """Stripped cells of a ``name`` or ``text`` column as values: NaN where empty (and where
    ``N/A`` in a ``text`` column)."""
    absent = stripped == ""
    if column.kind == "text":
        absent |= stripped == NOT_AVAILABLE
    return np.where(absent, np.nan, stripped)


def _numbers(
    path: Path,
    column: CsvColumn,
    numbers: FloatArray,
    cells: pd.Series,
    index: pd.Index,
    missing: npt.NDArray[np.bool_] | None = None,
) -> pd.Series:
    """A number column's values, checked: NaN where a cell is ``missing`` (all NaN when not
    given) and else no number is an error naming the row, as is a fraction or an integer
    beyond int64 in an ``int`` column."""
    bad = np.isnan(numbers) & ~missing if missing is not None else np.zeros(len(numbers), bool)
    if column.kind == "int":
        whole = np.zeros(len(numbers), dtype=bool)
        np.equal(numbers, np.round(numbers), out=whole, where=~np.isnan(numbers))
        bad |= ~np.isnan(numbers) & ~(whole & (np.abs(numbers) < float(MAX_ID)))
    if bad.any():
        row = int(bad.nonzero()[0][0])
        kind = "an integer within the int64 range" if column.kind == "int" else "a number"
        raise ProfileError(
            path,
            f"data row {row + 1} holds {str(cells.iloc[row]).strip()!r}",
            column=column.header,
            expected=kind,
        )
    if column.kind == "int":
        unknown = np.isnan(numbers)
        integers = pd.arrays.IntegerArray(np.where(unknown, 0, numbers).astype(np.int64), unknown)
        return pd.Series(integers, index=index)
    return pd.Series(numbers, index=index)


def _stripped(values: npt.NDArray[np.object_]) -> npt.NDArray[np.object_]:
    """Cells without surrounding white space (msprof writes a TAB after time stamps); empty
    for a row cut short. Stripped once per distinct value: names and types repeat a lot."""
    sample = values[:: max(1, len(values) // 1000)]
    if len(pd.unique(sample)) * 2 > len(sample):  # mostly distinct (ids): rarely padded
        if not _padded(values):
            return values
        return np.array([v.strip() if type(v) is str else "" for v in values], dtype=object)
    codes, uniques = pd.factorize(values)
    table = np.array([str(v).strip() for v in uniques] + [""], dtype=object)
    return table[codes]  # code -1 (a missing cell) takes the trailing ""


def _padded(values: npt.NDArray[np.object_]) -> bool:
    """Whether some cell is no string, is empty, or may start or end with white space (a
    non-ASCII first or last character counts): judged on fixed-width code points at C speed."""
    if pd.api.types.infer_dtype(values, skipna=False) != "string":
        return len(values) > 0
    text = np.asarray(values, dtype=np.str_)
    lengths = np.char.str_len(text)
    if text.dtype.itemsize == 0 or (lengths == 0).any():
        return True
    points = text.view(np.uint32).reshape(len(text), -1)
    ends = np.concatenate([points[:, 0], points[np.arange(len(text)), lengths - 1]])
    return bool(((ends <= ord(" ")) | (ends > ord("~"))).any())


def _require(path: Path, column: CsvColumn, empty: npt.NDArray[np.bool_]) -> None:
    if column.value_required and empty.any():
        row = int(empty.nonzero()[0][0])
        raise ProfileError(
            path,
            f"data row {row + 1} has no value; the file looks truncated or damaged",
            column=column.header,
            expected="a value in every row",
        )


def _floats(values: npt.NDArray[np.object_]) -> FloatArray:
    """The cells as float64, NaN where a cell is no number."""
    try:  # every cell a number (the usual case): numpy's conversion, one pass
        joined = "".join(values)
        # Python's float() also takes 1_000 and non-ASCII digits, which pandas does not.
        if joined.isascii() and "_" not in joined:
            return values.astype(np.float64)
    except (ValueError, TypeError, OverflowError):
        pass
    return np.array(pd.to_numeric(pd.Series(values), errors="coerce"), dtype=np.float64)


def known(cells: pd.Series) -> pd.Series:
    """``cells`` with ``N/A`` (what Ascend tools write for an unknown name or type) as
    missing: for falling back to another column of the row."""
    unknown = [v for v in pd.unique(cells.dropna()) if str(v).strip().upper() == NOT_AVAILABLE]
    return cells.where(~cells.isin(unknown)) if unknown else cells


LEVEL0_NOTE = (
    "Level0 profile: kernel_details has no OP Type or Accelerator Core; op_type is derived "
    "from the kernel name (instance number removed) and core is 'N/A'"
)


def ascend_tasks(raw: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """Canonical task columns from a table read with :func:`task_columns`.

    Where the source says ``N/A`` (or nothing), falls back to what the row does say: ``name``
    from ``op_type``/``core``, ``op_type`` from the name (Level0, :func:`op_type_from_name`),
    ``core`` stays ``N/A``; adds ``category`` (:func:`~perfgate.ingest.categories.categorize`);
    strips the quotes around shapes. A table without ``op_type`` (task_time: kernels and
    non-operator tasks) types a task by its name, or by its task type where the name is
    ``N/A``. Keeps the helper columns ``device_id``, ``task_id``, ``stream`` when present,
    and leaves ``rank`` to the caller. Returns the table, with its name columns categorical,
    and notes for the user.
    """
    notes: list[str] = []
    tasks = raw.copy()
    # Each distinct (name, type, core) is worked out once, then taken by its rows.
    given = [c for c in ("name", "op_type", "core") if c in tasks.columns]
    combo = row_codes([tasks[c] for c in given])
    first = first_rows(combo)
    distinct = {c: pd.Series(tasks[c].iloc[first].to_numpy(dtype=object)) for c in given}
    core = distinct["core"].fillna(NOT_AVAILABLE)
    if "op_type" in distinct:
        op_type = known(distinct["op_type"])
    else:
        op_type = known(known(distinct["name"]).fillna(distinct["core"]))
    name = known(distinct["name"]).fillna(op_type).fillna(core)
    no_type = op_type.isna()
    if no_type.any():
        derived = {n: op_type_from_name(str(n)) for n in pd.unique(name[no_type])}
        op_type = op_type.where(~no_type, name.map(derived))
        if no_type.to_numpy()[combo].mean() > 0.5:
            notes.append(LEVEL0_NOTE)
    for column, values in (
        ("name", name),
        ("op_type", op_type),
        ("core", core),
        ("category", categorize(core, name)),
    ):
        tasks[column] = categorical_from(values.to_numpy(dtype=object), combo, tasks.index)
    if "input_shapes" in tasks.columns:
        tasks["input_shapes"] = strip_shape_quotes(tasks["input_shapes"])
    if "step" not in tasks.columns:
        tasks["step"] = unknown_ints(len(tasks))
    return tasks, notes


def breakdown_columns() -> list[CsvColumn]:
    """The step-trace breakdown columns as :class:`CsvColumn` (µs floats)."""
    return [
        CsvColumn(canonical, header, "float", required, value_required=required)
        for canonical, header, required in STEP_BREAKDOWN_MAP
    ]


def fill_missing_preparing(steps: pd.DataFrame, path: Path) -> list[str]:
    """Add ``preparing_us = 0`` when the file predates the Preparing column, or where its
    cell is ``N/A`` or empty (as the column's absence, not a reason to drop the step's
    breakdown and measure the step by its tasks' span instead); returns a note."""
    if "preparing_us" in steps.columns:
        unknown = steps["preparing_us"].isna()
        if not unknown.any():
            return []
        steps.loc[unknown, "preparing_us"] = 0.0
        return [
            f"{path.name}: Preparing is N/A or empty in {int(unknown.sum())} of {len(steps)} "
            "row(s): taken as 0"
        ]
    steps["preparing_us"] = 0.0
    return [f"{path.name} has no Preparing column (older version): preparing_us taken as 0"]


def read_op_statistic(path: Path, rank: int | None = None) -> pd.DataFrame:
    """``op_statistic.csv`` / ``op_statistic_*.csv`` as :data:`~perfgate.model.OP_STATISTIC_COLUMNS`
    (one row per operator type and core; ``rank`` from ``Device_id`` unless given).

    An ``OP Type`` of ``N/A`` (memcpy rows, Level0) becomes the row's ``Core Type``.
    """
    spec = [
        CsvColumn(canonical, header, kind, required, value_required=required)
        for canonical, header, kind, required in OP_STATISTIC_COLUMNS_SPEC
    ]
    raw = read_csv_columns(path, spec, what="an op_statistic CSV")
    if rank is not None:
        ranks: Any = rank
    elif "device_id" in raw.columns:
        ranks = raw["device_id"].fillna(0).astype("int64")
    else:
        ranks = 0
    out = pd.DataFrame(
        {
            "rank": ranks,
            "op_type": known(raw["op_type"]).fillna(known(raw["core"])).fillna(NOT_AVAILABLE),
            "core": raw["core"],
            "count": raw["count"].astype("int64"),
            "total_us": raw["total_us"],
        },
        index=raw.index,
    )
    out["category"] = categorize(out["core"], out["op_type"])
    for column in provenance_columns(raw):
        out[column] = raw[column]
    return out[[*OP_STATISTIC_COLUMNS, *provenance_columns(raw)]].astype({"rank": "int64"})

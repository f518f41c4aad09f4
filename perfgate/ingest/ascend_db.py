"""Reader for the Ascend SQLite exports: msprof's unified ``msprof_*.db`` and torch_npu's
``ascend_pytorch_profiler_{rank}.db`` (``export_type=db``).

Both share one schema: integer epoch **nanoseconds**, strings as ids into ``STRING_IDS``.
Tasks come from ``TASK`` (with ``COMPUTE_TASK_INFO`` for the operator of a kernel and
``COMMUNICATION_OP`` for collectives), steps from ``STEP_TIME`` or MSTX step ranges, the
breakdown from torch_npu's ``analysis.db`` or Insight's ``OVERLAP_ANALYSIS`` once checked
against the tasks. Which ``TASK`` rows become tasks, so that no device time is counted twice
(MIX parents, per-task HCCL rows, repeated rows), and every table and column read:
docs/formats.md §6. Interval logic stays in integer ns; the canonical times are µs since
``metadata["time_origin_us"]`` (one :class:`~perfgate.model.TimeBase`).
"""

from __future__ import annotations

import itertools
import re
import sqlite3
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from perfgate.errors import ProfileError
from perfgate.ingest import FormatReader
from perfgate.ingest.assemble import Part, assemble
from perfgate.ingest.categories import categorize
from perfgate.ingest.common import (
    read_auxiliary,
    read_json_object,
    repeated_rows,
    row_codes,
    strip_shape_quotes,
)
from perfgate.ingest.progress import read_whole
from perfgate.model import (
    BREAKDOWN_COLUMNS,
    MAX_TIME_US,
    NO_STEP_MARKS_NOTE,
    NS_PER_US,
    SOURCE_COLUMN,
    Category,
    Profile,
    SourceFile,
    TimeBase,
    empty_steps,
    unknown_ints,
    with_source,
)

MSPROF_DB_GLOB = "msprof_*.db"
TORCH_NPU_DB_GLOB = "ascend_pytorch_profiler*.db"
ASCEND_PROFILER_OUTPUT = "ASCEND_PROFILER_OUTPUT"
SQLITE_MAGIC = b"SQLite format 3\x00"

# Text exports that the CSV readers take: a directory holding them is not ours.
_TORCH_NPU_TEXT = ("kernel_details.csv", "step_trace_time.csv")
_MSPROF_TEXT_GLOBS = ("mindstudio_profiler_output/*.csv", "device_*/summary/*.csv")

# SQLite files next to a profile that are analysis results, not profiles.
_NOT_PROFILES = frozenset({"analysis.db", "cluster_analysis.db", "communication_analyzer.db"})
_NO_VALUE = frozenset({"", "N/A", "NULL"})
# An MSTX range whose message names a step: "step 3", "Step#3", "ProfilerStep#3",
# "perfgate step 3".
_STEP_MARK = re.compile(r"^(?:perfgate[\s_:-]*)?(?:ProfilerStep#|step[\s_#:-]*)(\d{1,18})$", re.I)
_MSTX_RANGE = 2  # ENUM_MSTX_EVENT_TYPE: 2 = start/end (a range)
_HCOM_OP_TYPE = re.compile(r"^(hcom_[A-Za-z0-9]+_)")
# OVERLAP_ANALYSIS.type codes (Ascend-msinsight CommonDefs.h OVERLAP_TYPES).
_COMPUTING, _COMMUNICATION, _COMM_NOT_OVERLAPPED, _FREE = 0, 1, 2, 3
# A breakdown agrees with the tasks when its Computing and Communication totals match the
# union of the tasks' intervals to this many µs.
_BREAKDOWN_TOLERANCE_US = 1.0


IntArray = npt.NDArray[np.int64]
_MAX_ID = 2**63 - 1
# Provenance of the canonical rows (docs/formats.md §12): which table, and the columns there.
_TASK_SOURCE, _COMM_OP_SOURCE, _STEP_SOURCE = "TASK", "COMMUNICATION_OP", "STEP_TIME"
_SOURCES = {
    kind: (
        kind,
        {
            "start_us": f"{kind}.startNs",
            "end_us": f"{kind}.endNs",
            "dur_us": f"{kind}.endNs",
            "duration": f"{kind}.endNs",
            "step": f"{kind}.id",
            "rank": f"{kind}.deviceId",
        },
    )
    for kind in (_TASK_SOURCE, _COMM_OP_SOURCE, _STEP_SOURCE)
}
# Communication (overlapped or not) is not a breakdown column; the sources give it and it is
# checked against the communication tasks.
_COMMUNICATION_US = "communication_us"


@dataclass
class _Busy:
    """``(device, start_ns, end_ns)`` arrays of the intervals a breakdown is checked against:
    kernels with operator info (what torch_npu / Insight count as Computing) and the
    communication tasks."""

    computing: tuple[IntArray, IntArray, IntArray]
    communication: tuple[IntArray, IntArray, IntArray]


@dataclass
class _Located:
    """The database to read and where its companions (profiler_info, analysis.db) live."""

    db: Path
    source: str
    notes: list[str] = field(default_factory=list)
    # Where a folder holds several exports (one per process or rank): all of them, refused.
    several: list[Path] = field(default_factory=list)


# --------------------------------------------------------------------------- detection


def detect(path: Path) -> bool:
    """Whether ``path`` is an msprof / torch_npu SQLite export this reader takes.

    A ``msprof_*.db`` or ``ascend_pytorch_profiler*.db`` file; an msprof ``PROF_*`` directory
    with ``msprof_*.db`` and no CSV export; a torch_npu ``*_ascend_pt`` directory (or its
    ``ASCEND_PROFILER_OUTPUT``) with ``ascend_pytorch_profiler*.db`` and no
    kernel_details.csv / step_trace_time.csv; the folder above such directories
    (:func:`_in_export_folders`); any other ``*.db`` file that starts like SQLite (a renamed
    export). ``analysis.db`` and other analysis results are not profiles.
    """
    try:
        return _find(path) is not None
    except OSError:
        return False


def _find(path: Path, *, reading: bool = False) -> _Located | None:
    """The export at ``path``; ``reading`` takes any ``*.db`` file (its content is checked)."""
    if path.is_file():
        if path.match(TORCH_NPU_DB_GLOB):
            return _Located(path, "torch_npu_db")
        if path.match(MSPROF_DB_GLOB):
            return _Located(path, "msprof_db")
        if path.suffix != ".db" or path.name in _NOT_PROFILES:
            return None
        # A renamed export: claimed only if it is SQLite; the tables tell the source.
        if reading or _starts_like_sqlite(path):
            return _Located(path, "")
        return None
    if not path.is_dir():
        return None
    for output in (path / ASCEND_PROFILER_OUTPUT, path):
        dbs = _regular_files(output, TORCH_NPU_DB_GLOB) if output.is_dir() else []
        if dbs:
            if any((output / text).exists() for text in _TORCH_NPU_TEXT):
                return None
            located = _Located(dbs[-1], "torch_npu_db")
            if len(dbs) > 1:
                located.notes.append(
                    f"{output} holds {len(dbs)} torch_npu databases; read {dbs[-1].name}"
                )
            return located
    dbs = _regular_files(path, MSPROF_DB_GLOB)
    if any(next(path.glob(g), None) is not None for g in _MSPROF_TEXT_GLOBS):
        return None
    if not dbs:
        return _in_export_folders(path)
    located = _Located(dbs[-1], "msprof_db")
    if len(dbs) > 1:
        # Re-exports add msprof_<timestamp>.db files; the newest name is the latest export.
        located.notes.append(f"{path} holds {len(dbs)} msprof databases; read {dbs[-1].name}")
    return located


def _regular_files(folder: Path, pattern: str) -> list[Path]:
    # A FIFO or folder of a database's name is no database: opening a FIFO waits forever.
    return sorted(p for p in folder.glob(pattern) if p.is_file())


def _in_export_folders(path: Path) -> _Located | None:
    """The export in the ``PROF_*`` / ``*_ascend_pt`` folders right under ``path`` (msprof's
    ``--output`` folder, torch_npu's ``dir_name``): the one there is, or, where there are
    several, the first with all of them in :attr:`_Located.several` (read refuses them: one
    database is one process's view, and a gate on part of a run would judge the wrong thing).
    """
    try:
        folders = sorted(
            p
            for p in path.iterdir()
            if p.is_dir() and (p.name.startswith("PROF_") or p.name.endswith("_ascend_pt"))
        )
    except OSError:
        return None
    found = [located for folder in folders if (located := _find(folder)) is not None]
    if len(found) > 1:
        found[0].several = [located.db for located in found]
    return found[0] if found else None


# --------------------------------------------------------------------------- reading


def read(path: Path) -> Profile:
    """Read an msprof / torch_npu SQLite export into the canonical tables (µs).

    Raises:
        ProfileError: the path is not such an export, the file is not SQLite, is truncated
            or corrupt, a required table or column is missing (the message names it), or the
            export holds neither device tasks nor steps.
    """
    located = _find(path, reading=True)
    if located is None:
        raise ProfileError(
            path,
            "not an msprof / torch_npu SQLite export",
            expected="msprof_*.db, ascend_pytorch_profiler*.db, or a PROF_* / *_ascend_pt "
            "directory holding one (without the CSV export), or the folder above it",
        )
    if located.several:
        names = ", ".join(str(db.relative_to(path)) for db in located.several)
        raise ProfileError(
            path,
            f"holds {len(located.several)} SQLite exports ({names}); perfgate reads one at a time",
            expected="one PROF_* or *_ascend_pt directory, or one .db file",
        )
    db = located.db
    notes = list(located.notes)
    clock = TimeBase()
    with _connect(db) as conn, ThreadPoolExecutor(max_workers=1) as background:
        schema = _Schema(conn, db)
        if not located.source:
            # torch_npu adds the framework side (PYTORCH_API, STEP_TIME) to msprof's tables.
            is_torch = schema.has("PYTORCH_API") or schema.has("STEP_TIME")
            located.source = "torch_npu_db" if is_torch else "msprof_db"
        # Insight's overlap table, as big as TASK, is fetched on the other core while TASK is
        # read (the ADBC driver lets go of the GIL).
        overlap = (
            background.submit(_arrow_integer_rows, db, _OVERLAP_SQL)
            if schema.has("OVERLAP_ANALYSIS")
            and _analysis_db(located) is None
            and _reads_at_once(db)
            else None
        )
        raw, strings = _read_task_rows(conn, schema)
        comm_ops = _read_comm_ops(conn, schema)
        rank_of = _rank_map(conn, schema)
        tasks, busy, task_notes = _build_tasks(db, raw, strings, comm_ops, rank_of, clock)
        notes += task_notes
        ranks = sorted(int(r) for r in pd.unique(tasks["rank"]))
        # The devices now, so that the TASK rows are let go before the steps are read; a
        # device id that is no clock value is still refused where it always was (below).
        refused: ProfileError | None = None
        try:
            devices = sorted(int(d) for d in pd.unique(_ns(raw["device_id"], db, "TASK.deviceId")))
        except ProfileError as e:
            refused = e
        del raw
        steps, step_notes = _read_steps(conn, schema, ranks, clock)
        notes += step_notes
        if not steps.empty:
            steps, breakdown_notes = _add_breakdown(
                conn, schema, located, steps, busy, rank_of, overlap
            )
            notes += breakdown_notes
        if refused is not None:
            raise refused
        metadata, info_notes = _metadata(conn, schema, located, devices, ranks)
        notes += info_notes
    return assemble(
        path,
        located.source,
        [Part(tasks=tasks, steps=steps)],
        time_origin_us=clock.origin_us,
        metadata=metadata,
        notes=notes,
        if_empty=ProfileError(
            db,
            "the export holds no device tasks and no steps",
            column="TASK",
            expected="rows in TASK (collect with task-time on) or STEP_TIME",
        ),
    )


def _starts_like_sqlite(path: Path) -> bool:
    with path.open("rb") as handle:
        return handle.read(len(SQLITE_MAGIC)) == SQLITE_MAGIC


def _read_only_uri(db: Path) -> str:
    """The URI that opens ``db`` read-only, leaving nothing beside it.

    Exports are WAL databases. Opened with mode=ro alone, sqlite creates -wal/-shm files
    beside them and leaves them there; immutable=1 touches nothing (profiles often lie in
    shared, read-only places). Only a non-empty -wal file (committed writes not yet copied
    into the database: an export still being written) needs the WAL machinery.
    """
    wal = db.with_name(db.name + "-wal")
    pending = wal.is_file() and wal.stat().st_size > 0
    return db.resolve().as_uri() + ("?mode=ro" if pending else "?mode=ro&immutable=1")


@contextmanager
def _connect(db: Path) -> Iterator[sqlite3.Connection]:
    """A read-only connection; a file that is not SQLite is refused before sqlite sees it."""
    if not db.is_file():  # a FIFO would be waited on forever
        raise ProfileError(db, "is not a regular file", expected="an SQLite database file")
    try:
        with db.open("rb") as handle:
            magic = handle.read(len(SQLITE_MAGIC))
    except OSError as e:
        raise ProfileError(db, f"cannot open: {e.strerror or e}") from e
    if magic != SQLITE_MAGIC:
        raise ProfileError(
            db, "not an SQLite database", expected="a file starting with 'SQLite format 3'"
        )
    try:
        conn = sqlite3.connect(_read_only_uri(db), uri=True)
    except sqlite3.Error as e:
        raise ProfileError(db, f"cannot open SQLite database: {e}") from e
    # Text that is not UTF-8 (a damaged string table) is read with U+FFFD in place of the bad
    # bytes: a name stays a name, and a number stored so is refused where it is read.
    conn.text_factory = _decode_text
    read_whole(db)
    with closing(conn):
        yield conn


def _decode_text(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def _query(conn: sqlite3.Connection, db: Path, sql: str, table: str | None) -> pd.DataFrame:
    """``pd.read_sql_query`` whose failures (corrupt, truncated file) become ProfileError."""
    try:
        return pd.read_sql_query(sql, conn)
    except (sqlite3.Error, pd.errors.DatabaseError) as e:
        # pandas wraps the sqlite error in a message that repeats the SQL; keep sqlite's words.
        cause = e.__cause__ if isinstance(e.__cause__, sqlite3.Error) else e
        reason = str(cause).splitlines()[0] if str(cause) else type(cause).__name__
        raise ProfileError(
            db,
            f"cannot read the database: {reason}",
            column=table,
            expected="a complete SQLite export (is the file truncated or corrupt?)",
        ) from e


class _Schema:
    """Tables and columns present in the database, and checks that name what is missing."""

    def __init__(self, conn: sqlite3.Connection, db: Path) -> None:
        self.db = db
        sql = "SELECT name, sql FROM sqlite_master WHERE type='table'"
        names = _query(conn, db, sql, None)
        self.tables = set(names["name"].astype(str))
        self._sql = {str(n): str(s) for n, s in zip(names["name"], names["sql"])}
        self._columns: dict[str, set[str]] = {}
        for table in self.tables:
            info = _query(conn, db, f'PRAGMA table_info("{table}")', table)
            self._columns[table] = set(info["name"].astype(str))

    def has(self, table: str, column: str | None = None) -> bool:
        if table not in self.tables:
            return False
        return column is None or column in self._columns[table]

    def require(self, table: str, columns: tuple[str, ...], expected: str) -> None:
        if table not in self.tables:
            raise ProfileError(self.db, "no such table", column=table, expected=expected)
        for column in columns:
            if column not in self._columns[table]:
                raise ProfileError(
                    self.db,
                    "no such column",
                    column=f"{table}.{column}",
                    expected=f"columns {', '.join(columns)}",
                )

    def has_rowid(self, table: str) -> bool:
        """Whether ``table.rowid`` is the table's rowid (not a column of that name, and not a
        WITHOUT ROWID table)."""
        if not self.has(table) or "WITHOUT ROWID" in self._sql.get(table, "").upper():
            return False
        return not any(self.has(table, alias) for alias in ("rowid", "_rowid_", "oid"))

    def rows(self, conn: sqlite3.Connection, table: str) -> int:
        if table not in self.tables:
            return 0
        return int(_query(conn, self.db, f'SELECT COUNT(*) AS n FROM "{table}"', table)["n"][0])


_TASK_COLUMNS = ("startNs", "endNs", "deviceId", "taskType", "globalTaskId")
_COMPUTE_COLUMNS = ("globalTaskId", "name", "taskType", "opType")
_COMM_TASK_COLUMNS = ("globalTaskId", "name", "taskType")
_COMM_OP_COLUMNS = ("opName", "startNs", "endNs")


def _read_task_rows(
    conn: sqlite3.Connection, schema: _Schema
) -> tuple[pd.DataFrame, _Strings | None]:
    """Every TASK row with its strings joined (one query; the joins are on primary keys).

    With :class:`_Strings` (the usual case) the string columns hold codes of the joined
    STRING_IDS rowids (0: no string), to be resolved with it, and these codes and the two
    flags come packed into a few integer columns (each cell SQLite yields is a Python object:
    fewer cells, less time); without, the strings themselves.
    """
    schema.require("TASK", _TASK_COLUMNS, "the device task table of an msprof / torch_npu db")
    schema.require("STRING_IDS", ("id", "value"), "the string table that TASK names point into")
    strings = _Strings.read(conn, schema)

    def task_col(column: str) -> str:
        return f"t.{column}" if schema.has("TASK", column) else "NULL"

    select = [
        "t.rowid AS source_row",
        "t.startNs AS start_ns",
        "t.endNs AS end_ns",
        "t.deviceId AS device_id",
        "t.taskType AS task_type_id",
        f"{task_col('streamId')} AS stream_id",
        f"{task_col('taskId')} AS task_id",
        f"{task_col('connectionId')} AS connection_id",
    ]
    select_columns = [entry.split(" AS ")[0] for entry in select]
    # (column, the STRING_IDS alias joined for it or None: no such string) and
    # (column, an SQL truth value).
    texts: list[tuple[str, str | None]] = [("task_type", "tt")]
    flags: list[tuple[str, str]] = []
    joins: list[str] = []
    # The id each STRING_IDS alias is looked up by (joined, or taken as its code, below).
    string_ids = {"tt": "t.taskType"}
    if schema.has("COMPUTE_TASK_INFO"):
        schema.require("COMPUTE_TASK_INFO", _COMPUTE_COLUMNS, "operator info of kernel tasks")
        has_shapes = schema.has("COMPUTE_TASK_INFO", "inputShapes")
        flags.append(("has_compute_info", "c.globalTaskId IS NOT NULL"))
        texts += [
            ("compute_name", "cn"),
            ("compute_core", "cc"),
            ("compute_op_type", "co"),
            ("input_shapes", "cs" if has_shapes else None),
        ]
        joins.append("LEFT JOIN COMPUTE_TASK_INFO c ON c.globalTaskId = t.globalTaskId")
        string_ids.update(cn="c.name", cc="c.taskType", co="c.opType")
        if has_shapes:
            string_ids["cs"] = "c.inputShapes"
    else:
        flags.append(("has_compute_info", "0"))
        texts += [(c, None) for c in ("compute_name", "compute_core", "compute_op_type")]
        texts.append(("input_shapes", None))
    if schema.has("COMMUNICATION_TASK_INFO"):
        schema.require("COMMUNICATION_TASK_INFO", _COMM_TASK_COLUMNS, "HCCL task info")
    if schema.has("COMMUNICATION_TASK_INFO") and not _surely_empty(conn, "COMMUNICATION_TASK_INFO"):
        flags.append(("is_comm_task", "m.globalTaskId IS NOT NULL"))
        texts += [("comm_name", "mn"), ("comm_task_type", "mt")]
        # Not a primary key in every version: one row per task before joining.
        joins.append(
            "LEFT JOIN (SELECT globalTaskId, MIN(name) AS name, MIN(taskType) AS taskType "
            "FROM COMMUNICATION_TASK_INFO GROUP BY globalTaskId) m "
            "ON m.globalTaskId = t.globalTaskId"
        )
        string_ids.update(mn="m.name", mt="m.taskType")
    else:  # no HCCL task info: what the join of an empty table gives
        flags.append(("is_comm_task", "0"))
        texts += [("comm_name", None), ("comm_task_type", None)]
    # After the tables they look into (LEFT JOINs keep TASK's rows and their order).
    string_joins = [f"LEFT JOIN STRING_IDS {a} ON {a}.id = {sql}" for a, sql in string_ids.items()]
    if strings is None:
        select += [f"{alias}.value AS {c}" if alias else f"NULL AS {c}" for c, alias in texts]
        select += [f"{sql} AS {c}" for c, sql in flags]
        sql = f"SELECT {', '.join(select)} FROM TASK t {' '.join(joins + string_joins)}"
        return _query(conn, schema.db, sql, "TASK"), strings
    # Each string column comes as the code of its string's rowid (from the id itself where
    # ids are rowids, else from SQLite's join), packed with the others into int64 cells.
    # Whether every TASK cell read is an INTEGER (the export's types): then the rows are
    # taken as int64 without pandas' per-cell type inference (_integer_rows).
    integer_cells = " AND ".join(
        f"typeof({column}) = 'integer'" for column in select_columns if column.startswith("t.")
    )
    flags.append((_INTEGER_CELLS, integer_cells))
    if _ids_are_rowids(conn):
        # Where every STRING_IDS id is its rowid, the row an id joins is the one whose rowid
        # it is: the code is the id itself where it is an integer within the table's range
        # (one that names no row resolves to "no string", as no joined row does), and the
        # STRING_IDS joins, half the query's time, go.
        lo, hi = strings.offset + 1, strings.offset + strings.radix - 1
        code = {
            alias: f"CASE WHEN typeof({sql}) = 'integer' AND {sql} BETWEEN {lo} AND {hi} "
            f"THEN {sql} - {strings.offset} ELSE 0 END"
            for alias, sql in string_ids.items()
        }
    else:
        code = {alias: f"COALESCE({alias}.rowid - {strings.offset}, 0)" for alias in string_ids}
        joins += string_joins
    fields = [(c, code[alias] if alias else "0", strings.radix) for c, alias in texts] + [
        (c, f"({sql})", 2) for c, sql in flags
    ]
    packs = _packs(fields)
    select += [
        " + ".join(f"{sql} * {scale}" for _, sql, _, scale in pack) + f" AS packed_{i}"
        for i, pack in enumerate(packs)
    ]
    sql = f"SELECT {', '.join(select)} FROM TASK t {' '.join(joins)}"
    table = _integer_rows(conn, sql, schema.db, _rowid_ranges(conn, schema.db, "TASK", "t"))
    unpacked = _unpacked(table, packs) if table is not None else {}
    if table is None or not unpacked[_INTEGER_CELLS].all():
        table = _query(conn, schema.db, sql, "TASK")
        unpacked = _unpacked(table, packs)
    del unpacked[_INTEGER_CELLS]
    return table.drop(columns=[f"packed_{i}" for i in range(len(packs))]).assign(
        **unpacked
    ), strings


_INTEGER_CELLS = "integer_cells"


def _ids_are_rowids(conn: sqlite3.Connection) -> bool:
    """Whether every STRING_IDS ``id`` is its row's rowid (``id INTEGER PRIMARY KEY``, as the
    exports declare it): then an id names at most one row, the one of that rowid."""
    try:
        row = conn.execute("SELECT 1 FROM STRING_IDS WHERE id IS NOT rowid LIMIT 1").fetchone()
    except sqlite3.Error:
        return False
    return row is None


def _unpacked(
    table: pd.DataFrame, packs: list[list[tuple[str, str, int, int]]]
) -> dict[str, IntArray]:
    """The fields of the ``packed_<i>`` columns of ``table`` (see :func:`_packs`)."""
    unpacked = {}
    for i, pack in enumerate(packs):
        packed = table[f"packed_{i}"].to_numpy(dtype=np.int64)
        for column, _, radix, scale in pack:
            unpacked[column] = packed // scale % radix
    return unpacked


def _integer_rows(
    conn: sqlite3.Connection, sql: str, db: Path, parts: list[str] | None = None
) -> pd.DataFrame | None:
    """The rows of ``sql`` as int64 columns, or None where a cell is NULL or no integer
    that numpy takes as one (a text or real cell may be taken, truncated: the caller checks
    the cells' SQL types), or where the query fails (the caller's reading reports it).

    With the ``fast`` extra installed, SQLite's rows are read into Arrow columns by the ADBC
    driver (:func:`_arrow_integer_rows`), without a Python object per cell; ``parts``: WHERE
    clauses that split the rows, in order (:func:`_rowid_ranges`), fetched at once.
    """
    if parts:
        arrow_table = _arrow_integer_rows_in_parts(db, [f"{sql} WHERE {part}" for part in parts])
    else:
        arrow_table = _arrow_integer_rows(db, sql)
    if arrow_table is not None:
        return arrow_table
    try:
        cursor = conn.execute(sql)
        names = [column[0] for column in cursor.description]
        rows = cursor.fetchall()
    except sqlite3.Error:
        return None
    try:
        cells = np.fromiter(
            itertools.chain.from_iterable(rows), dtype=np.int64, count=len(rows) * len(names)
        )
    except (TypeError, ValueError, OverflowError):
        return None
    return pd.DataFrame(cells.reshape(len(rows), len(names)), columns=names)


def _arrow_integer_rows(db: Path, sql: str) -> pd.DataFrame | None:
    """:func:`_integer_rows` through the ADBC SQLite driver, or None where it is not
    installed, fails, or yields anything but int64 columns without NULL. The driver infers a
    column's type from its first rows and refuses a later cell of another type (REAL, TEXT,
    BLOB: ``Type mismatch``), so int64 columns without NULL mean every cell is an INTEGER."""
    try:
        import adbc_driver_manager
        import adbc_driver_sqlite.dbapi
    except ImportError:
        return None
    try:
        with (
            adbc_driver_sqlite.dbapi.connect(_read_only_uri(db)) as conn,
            conn.cursor() as cursor,
        ):
            cursor.execute(sql)
            table = cursor.fetch_arrow_table()
    except (adbc_driver_manager.Error, OSError):
        return None
    columns = {}
    for name, column in zip(table.column_names, table.columns):
        if str(column.type) != "int64" or column.null_count:
            return None
        columns[name] = column.to_numpy()
    return pd.DataFrame(columns)


# A table of more rows than this is fetched in two halves at once (two cores, each with its
# own SQLite connection): the TASK query is most of a .db reading.
_ROWS_TO_SPLIT = 100_000


def _reads_at_once(db: Path) -> bool:
    """Whether ``db`` may be read by several connections at once: only a file opened
    immutable (:func:`_read_only_uri`). The ADBC driver brings its own SQLite, and two
    SQLites at once on a WAL file's shared memory crash the process (a bus error, seen)."""
    return _read_only_uri(db).endswith("immutable=1")


def _rowid_ranges(conn: sqlite3.Connection, db: Path, table: str, alias: str) -> list[str] | None:
    """WHERE clauses that split ``table`` (``alias`` in the query) into two rowid ranges, in
    rowid order (the order a full scan gives), or None: a small table, or a file that may not
    be read by two connections at once (:func:`_reads_at_once`)."""
    if not _reads_at_once(db):
        return None
    try:
        low, high = conn.execute(f'SELECT MIN(rowid), MAX(rowid) FROM "{table}"').fetchone()
    except sqlite3.Error:
        return None
    if not isinstance(low, int) or not isinstance(high, int) or high - low < _ROWS_TO_SPLIT:
        return None
    middle = low + (high - low) // 2
    return [f"{alias}.rowid <= {middle}", f"{alias}.rowid > {middle}"]


def _arrow_integer_rows_in_parts(db: Path, sqls: list[str]) -> pd.DataFrame | None:
    """:func:`_arrow_integer_rows` of each query, run at once, the rows one after another;
    None where one of them gives none."""
    with ThreadPoolExecutor(max_workers=len(sqls) - 1) as pool:
        others = [pool.submit(_arrow_integer_rows, db, sql) for sql in sqls[1:]]
        tables = [_arrow_integer_rows(db, sqls[0]), *(other.result() for other in others)]
    if any(table is None for table in tables):
        return None
    return pd.concat(tables, ignore_index=True)


def _packs(fields: list[tuple[str, str, int]]) -> list[list[tuple[str, str, int, int]]]:
    """``(column, sql, radix)`` fields (values from 0 to radix − 1) gathered into int64 cells,
    as ``(column, sql, radix, scale)``: a cell is the sum of value × scale, the scales products
    of the radices before, all below 2**63 (no partial sum overflows SQLite's integers)."""
    packs: list[list[tuple[str, str, int, int]]] = []
    scale = 2**63
    for column, sql, radix in fields:
        if scale * radix > 2**63 - 1:
            packs.append([])
            scale = 1
        packs[-1].append((column, sql, radix, scale))
        scale *= radix
    return packs


def _surely_empty(conn: sqlite3.Connection, table: str) -> bool:
    """Whether ``table`` has no row (False where it cannot be read: the query that joins it
    then fails, or not, as it always did)."""
    try:
        return conn.execute(f'SELECT 1 FROM "{table}" LIMIT 1').fetchone() is None
    except sqlite3.Error:
        return False


# Rowids beyond this are not packed (nor read as such: pandas' float64 of ids, once).
_EXACT_FLOAT_INT = 2**53


class _Strings:
    """STRING_IDS by rowid, for string columns read as codes of the joined strings' rowids
    (``rowid − offset``; 0 where no string was joined).

    A column is resolved once per distinct string rather than once per row: the per-value
    functions (:func:`_text`, :func:`strip_shape_quotes`) give what they give on the joined
    text, which is the same value.
    """

    def __init__(self, rowids: IntArray, values: npt.NDArray[np.object_]) -> None:
        order = np.argsort(rowids, kind="stable")
        self.offset = int(rowids.min()) - 1 if rowids.size else 0
        # Codes run from 1 to radix − 1.
        self.radix = int(rowids.max()) - self.offset + 1 if rowids.size else 1
        self._codes = rowids[order] - self.offset
        # The last entry stands for "no string" (no match, code 0).
        self._values = np.concatenate([values[order], np.array([None], dtype=object)])
        self._missing = pd.isna(self._values)

    @classmethod
    def read(cls, conn: sqlite3.Connection, schema: _Schema) -> _Strings | None:
        """The table, or None where the joins must yield the text itself: no usable rowid,
        rowids beyond 2**53, or a table that cannot be read whole (the join may still read
        the rows it needs, and fail, or not, as it always did)."""
        if not schema.has_rowid("STRING_IDS"):
            return None
        try:
            table = pd.read_sql_query("SELECT rowid AS sid, value FROM STRING_IDS", conn)
        except (sqlite3.Error, pd.errors.DatabaseError):
            return None
        sid = table["sid"]
        # (Not abs(): the int64 minimum has no int64 absolute value.)
        if sid.dtype.kind != "i" or (
            len(sid) and (int(sid.min()) < -_EXACT_FLOAT_INT or int(sid.max()) > _EXACT_FLOAT_INT)
        ):
            return None
        return cls(sid.to_numpy(dtype=np.int64), table["value"].to_numpy(dtype=object))

    def _positions(self, codes: pd.Series) -> IntArray:
        keys = codes.to_numpy(dtype=np.int64)
        at = np.searchsorted(self._codes, keys)
        found = at < self._codes.size
        found[found] = self._codes[at[found]] == keys[found]
        return np.where(found, at, -1)

    def isna(self, codes: pd.Series) -> npt.NDArray[np.bool_]:
        """Where the joined value is NULL (or there is none)."""
        return np.asarray(self._missing[self._positions(codes)], dtype=bool)

    def resolve(self, codes: pd.Series, transform: Callable[[pd.Series], pd.Series]) -> pd.Series:
        """``transform`` of the joined values, computed once per distinct string."""
        keys = codes.to_numpy(dtype=np.int64)
        if self.radix <= 4 * keys.size + 2**20:  # codes run below radix: no sort needed
            present = np.zeros(self.radix, dtype=bool)
            present[keys] = True
            distinct = np.flatnonzero(present)
            inverse = (np.cumsum(present) - 1)[keys]
        else:
            distinct, inverse = np.unique(keys, return_inverse=True)
        used = self._positions(pd.Series(distinct))
        done = transform(pd.Series(self._values[used], dtype=object)).to_numpy(dtype=object)
        return pd.Series(done[inverse.reshape(-1)], index=codes.index, dtype=object)


def _read_comm_ops(conn: sqlite3.Connection, schema: _Schema) -> pd.DataFrame:
    """COMMUNICATION_OP rows: ``start_ns, end_ns, name, op_type, connection_id, device_id``."""
    if not schema.has("COMMUNICATION_OP"):
        return pd.DataFrame(
            columns=[
                "source_row",
                "start_ns",
                "end_ns",
                "name",
                "op_type",
                "connection_id",
                "device_id",
            ]
        )
    schema.require("COMMUNICATION_OP", _COMM_OP_COLUMNS, "one row per collective operation")

    def op_col(column: str) -> str:
        return f"op.{column}" if schema.has("COMMUNICATION_OP", column) else "NULL"

    op_type = "ot.value" if schema.has("COMMUNICATION_OP", "opType") else "NULL"
    sql = (
        "SELECT op.rowid AS source_row, op.startNs AS start_ns, op.endNs AS end_ns, "
        "n.value AS name, "
        f"{op_type} AS op_type, {op_col('connectionId')} AS connection_id, "
        f"{op_col('deviceId')} AS device_id "
        "FROM COMMUNICATION_OP op LEFT JOIN STRING_IDS n ON n.id = op.opName"
        + (" LEFT JOIN STRING_IDS ot ON ot.id = op.opType" if op_type != "NULL" else "")
    )
    return _query(conn, schema.db, sql, "COMMUNICATION_OP")


def _rank_map(conn: sqlite3.Connection, schema: _Schema) -> dict[int, int]:
    """deviceId → rank from RANK_DEVICE_MAP (devices not in it keep their id as rank)."""
    if not schema.has("RANK_DEVICE_MAP", "rankId") or not schema.has("RANK_DEVICE_MAP", "deviceId"):
        return {}
    table = _query(
        conn, schema.db, "SELECT rankId, deviceId FROM RANK_DEVICE_MAP", "RANK_DEVICE_MAP"
    )
    table = _finite_rows(table)
    # Single-process runs write an invalid rank (-1 / 0xFFFFFFFF).
    table = table[(table["rankId"] >= 0) & (table["rankId"] < 2**31 - 1)]
    return {int(d): int(r) for r, d in zip(table["rankId"], table["deviceId"])}


_MAX_NS = MAX_TIME_US * NS_PER_US


def _finite_rows(table: pd.DataFrame) -> pd.DataFrame:
    """The rows whose every cell is a number within the int64-ns clock (others are noise in an
    auxiliary table: RANK_DEVICE_MAP, OVERLAP_ANALYSIS)."""
    numbers = pd.DataFrame({c: _numbers(table[c]) for c in table.columns}, index=table.index)
    keep = (numbers.abs() <= _MAX_NS).all(axis=1)
    return numbers.loc[keep]


def _ns(
    values: pd.Series, db: Path, column: str, rows: pd.Series | None = None, *, limit: int = _MAX_NS
) -> pd.Series:
    """Integer nanoseconds (or ids, with ``limit``) from a column that may hold integers or
    their text; ``rows`` are the rows' rowids in their table, for the message."""
    exact = _numbers(values)
    numbers = exact.astype("float64")
    bad = ~(numbers.abs() <= limit) | (numbers != numbers.round())
    if bad.any():
        at = int(np.flatnonzero(bad.to_numpy())[0])
        row = int(rows.iloc[at]) if rows is not None else at + 1
        value = values.iloc[at]
        if isinstance(value, bytes):
            problem = f"holds a {len(value)}-byte blob"
        elif value is None or (isinstance(value, float) and np.isnan(value)):
            problem = "has no value (NULL)"
        else:  # as SQLite holds it, not as numpy names it (np.float64(…))
            problem = f"holds {value.item() if isinstance(value, np.generic) else value!r}"
        raise ProfileError(
            db,
            f"row {row} {problem}",
            column=column,
            expected="integer nanoseconds of a real clock (at most 2**62)"
            if limit == _MAX_NS
            else "an integer id",
        )
    # Exact for integers stored as such (float64 parses only pick out the bad ones).
    return exact.astype("int64") if exact.dtype.kind in "iu" else numbers.astype("int64")


def _numbers(values: pd.Series) -> pd.Series:
    """The cells as numbers, NaN where a cell is none (text that is no number, a blob)."""
    if values.dtype.kind in "iuf":  # what _number_or_none would keep, cell by cell
        return values
    return pd.to_numeric(values.map(_number_or_none), errors="coerce")


def _number_or_none(value: Any) -> Any:
    """A cell as pandas can parse it: blobs and other objects are no number."""
    return value if isinstance(value, (int, float, str)) and not isinstance(value, bool) else None


def _id_text(values: pd.Series) -> pd.Series:
    """Integer ids (stream, task id) as text, None where missing; a cell that is no int64 id
    keeps its own text (it still tells tasks apart)."""
    numbers = _numbers(values).astype("float64")
    valid = ((numbers.abs() < 2**63) & (numbers == numbers.round())).to_numpy()
    ids = np.empty(len(values), dtype=object)
    # Each distinct id is written once.
    codes, distinct = pd.factorize(numbers.to_numpy()[valid].astype(np.int64))
    ids[valid] = np.asarray(distinct).astype(str).astype(object)[codes]
    if not valid.all():
        ids[~valid] = _cell_text(values[~valid]).to_numpy(dtype=object)
    return pd.Series(ids, index=values.index, dtype=object)


def _cell_text(values: pd.Series) -> pd.Series:
    """The cells' own text, None where missing."""
    text = values.map(_decoded).astype(object)
    return text.where(text.notna(), None)


# msprof writes an id it could not resolve as the number itself (``1.83976461015564e+19``, a
# 64-bit hash printed as a float): no name (docs/formats.md §6).
_UNRESOLVED_ID = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")


def _text(values: pd.Series) -> pd.Series:
    """Strings with the export's placeholders (``NULL``, ``N/A``, empty) and unresolved ids
    (a number where a name should be) as missing; blobs are decoded (UTF-8, invalid bytes
    replaced)."""
    cells = values.to_numpy(dtype=object)
    # Each distinct string looked at once; anything else (missing cells, numbers: factorizing
    # takes 1, 1.0 and True for one value) cell by cell.
    if pd.api.types.infer_dtype(cells, skipna=False) != "string":
        return _text_of_each(values)
    codes, distinct = pd.factorize(cells)
    done = _text_of_each(pd.Series(distinct, dtype=object)).to_numpy(dtype=object)
    return pd.Series(done[codes], index=values.index, dtype=object)


def _text_of_each(values: pd.Series) -> pd.Series:
    """:func:`_text`, cell by cell."""
    out = values.astype(object).map(_decoded)
    unresolved = out.map(lambda v: isinstance(v, str) and bool(_UNRESOLVED_ID.match(v.strip())))
    return out.where(~out.isin(_NO_VALUE) & out.notna() & ~unresolved.astype(bool))


def _decoded(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, float) and np.isnan(value):
        return None
    return str(value)


def _build_tasks(
    db: Path,
    raw: pd.DataFrame,
    strings: _Strings | None,
    comm_ops: pd.DataFrame,
    rank_of: dict[int, int],
    clock: TimeBase,
) -> tuple[pd.DataFrame, _Busy, list[str]]:
    """The canonical tasks table, the busy intervals a breakdown is checked against, notes."""
    notes: list[str] = []

    def text(column: str, transform: Callable[[pd.Series], pd.Series] = _text) -> pd.Series:
        """A string column of ``raw`` through a per-value ``transform``."""
        if strings is None:
            return transform(raw[column])
        return strings.resolve(raw[column], transform)

    rows = raw["source_row"]
    start_ns = _ns(raw["start_ns"], db, "TASK.startNs", rows)
    end_ns = _ns(raw["end_ns"], db, "TASK.endNs", rows)
    device = _ns(raw["device_id"], db, "TASK.deviceId", rows, limit=_MAX_ID)
    has_info = raw["has_compute_info"].fillna(0).astype(bool)
    is_comm_task = raw["is_comm_task"].fillna(0).astype(bool)
    task_type = text("task_type")
    unnamed = task_type.isna()
    if unnamed.any():
        task_type = task_type.fillna(
            raw.loc[unnamed, "task_type_id"].map(lambda v: f"taskType {_decoded(v)}")
        )

    # MIX parents: no operator info, same (device, stream, task id, connection) as a sub-task
    # that has it.
    key = ["device_id", "stream_id", "task_id", "connection_id"]
    keyed = raw[key].notna().all(axis=1)
    parent = pd.Series(False, index=raw.index)
    if keyed.any() and has_info.any():
        # The keys as one integer each (equal keys, equal integers: the columns' codes).
        codes = row_codes([raw[column] for column in key])
        info_keys = codes[(has_info & keyed).to_numpy()]
        parent = ~has_info & keyed & np.isin(codes, info_keys)

    # A TASK row written twice (same device, stream, task id and times) is one task.
    same_task = ["device_id", "stream_id", "task_id", "start_ns", "end_ns"]
    repeated = pd.Series(repeated_rows(raw, same_task, "start_ns"), index=raw.index)

    op_level_comm = len(comm_ops) > 0
    drop = parent | repeated
    if op_level_comm:
        comm_connections = pd.to_numeric(comm_ops["connection_id"], errors="coerce").dropna()
        of_comm_op = ~has_info & raw["connection_id"].isin(comm_connections.to_numpy())
        drop |= is_comm_task | of_comm_op
    elif is_comm_task.any():
        notes.append(
            "COMMUNICATION_OP is empty: communication counted per HCCL task "
            "(COMMUNICATION_TASK_INFO)"
        )

    compute_name = text("compute_name")
    name = task_type.copy()
    name = name.where(~has_info, compute_name.fillna(task_type))
    comm_task_kept = is_comm_task & ~drop
    name = name.where(~comm_task_kept, text("comm_name").fillna(task_type))

    op_type = task_type.copy()
    op_type = op_type.where(
        ~has_info, text("compute_op_type").fillna(compute_name).fillna(task_type)
    )
    op_type = op_type.where(~comm_task_kept, text("comm_task_type").fillna(task_type))

    core = task_type.copy()
    core = core.where(~has_info, text("compute_core").fillna(task_type))
    core = core.where(~comm_task_kept, "HCCL")

    shapes = text("input_shapes", lambda values: strip_shape_quotes(_text(values)))
    task_table = pd.DataFrame(
        {
            "device": device,
            "name": name,
            "op_type": op_type,
            "core": core,
            "start_ns": start_ns,
            "end_ns": end_ns,
            # Objects already (as `out` has them): concatenated with the communication ops'
            # all-missing column, a categorical would change dtype by pandas version.
            "input_shapes": shapes.where(has_info).astype(object),
            "stream": _id_text(raw["stream_id"]),
            "task_id": _id_text(raw["task_id"]),
            "source": _TASK_SOURCE,
            "source_row": rows,
        }
    )[~drop.to_numpy()]

    frames = [task_table]
    if op_level_comm:
        frames.append(_comm_op_tasks(db, comm_ops, raw, device))
    tasks = pd.concat(frames, ignore_index=True) if len(frames) > 1 else task_table
    tasks = tasks.sort_values(["start_ns", "end_ns"], kind="stable").reset_index(drop=True)

    out = pd.DataFrame(
        {
            "rank": _ranks(tasks["device"].to_numpy(dtype=np.int64), rank_of),
            "step": unknown_ints(len(tasks)),
            "name": tasks["name"].astype(object),
            "op_type": tasks["op_type"].astype(object),
            "core": tasks["core"].astype(object),
            "category": categorize(tasks["core"], tasks["name"]),
            # Exact: the origin is subtracted, and the duration taken, in integer ns.
            "start_us": clock.from_ns(tasks["start_ns"].to_numpy(dtype=np.int64)),
            "dur_us": (tasks["end_ns"] - tasks["start_ns"]).to_numpy() / NS_PER_US,
            "input_shapes": tasks["input_shapes"].astype(object),
            "stream": tasks["stream"].astype(object),
            "task_id": tasks["task_id"].astype(object),
        }
    )
    sources = {
        kind: SourceFile(str(db), headers, row=f"{table} row")
        for kind, (table, headers) in _SOURCES.items()
    }
    with_source(out, sources[_TASK_SOURCE], tasks["source_row"].to_numpy())
    out[SOURCE_COLUMN] = tasks["source"].map(sources).to_numpy()
    no_shapes = (
        strings.isna(raw["input_shapes"]) if strings is not None else raw["input_shapes"].isna()
    )
    if no_shapes.all():
        out = out.drop(columns="input_shapes")
    comm = (out["category"] == Category.COMM.value).to_numpy()
    busy = _Busy(
        computing=(
            device[has_info].to_numpy(dtype=np.int64),
            start_ns[has_info].to_numpy(dtype=np.int64),
            end_ns[has_info].to_numpy(dtype=np.int64),
        ),
        communication=(
            tasks["device"].to_numpy(dtype=np.int64)[comm],
            tasks["start_ns"].to_numpy(dtype=np.int64)[comm],
            tasks["end_ns"].to_numpy(dtype=np.int64)[comm],
        ),
    )
    return out, busy, notes


def _comm_op_tasks(
    db: Path, comm_ops: pd.DataFrame, raw: pd.DataFrame, task_device: pd.Series
) -> pd.DataFrame:
    """COMMUNICATION_OP rows as tasks (core ``HCCL``, like the op rows of kernel_details)."""
    rows = comm_ops["source_row"]
    start_ns = _ns(comm_ops["start_ns"], db, "COMMUNICATION_OP.startNs", rows)
    end_ns = _ns(comm_ops["end_ns"], db, "COMMUNICATION_OP.endNs", rows)
    name = _text(comm_ops["name"]).fillna("hcom")
    # opType is the collective type (hcom_allReduce_); older exports lack it (or write -1):
    # the same type is the name without its instance numbers.
    op_type = _text(comm_ops["op_type"]).fillna(
        name.map(lambda n: m.group(1) if (m := _HCOM_OP_TYPE.match(n)) else n)
    )
    device = pd.to_numeric(comm_ops["device_id"].map(_number_or_none), errors="coerce")
    device = device.where(device.abs() < 2**31)  # a device id, else unknown
    if device.isna().any():
        # The op's device is that of the tasks sharing its connectionId.
        by_connection = (
            pd.DataFrame({"connection_id": raw["connection_id"], "device": task_device})
            .dropna()
            .drop_duplicates("connection_id")
            .set_index("connection_id")["device"]
        )
        device = device.fillna(comm_ops["connection_id"].map(by_connection))
        fallback = int(task_device.mode().iloc[0]) if len(task_device) else 0
        device = device.fillna(fallback)
    return pd.DataFrame(
        {
            "device": device.astype("int64"),
            "name": name,
            "op_type": op_type,
            "core": "HCCL",
            "start_ns": start_ns,
            "end_ns": end_ns,
            "input_shapes": None,
            "stream": None,
            "task_id": None,
            "source": _COMM_OP_SOURCE,
            "source_row": rows,
        }
    )


# --------------------------------------------------------------------------- steps


def _read_steps(
    conn: sqlite3.Connection, schema: _Schema, ranks: list[int], clock: TimeBase
) -> tuple[pd.DataFrame, list[str]]:
    """Step windows from STEP_TIME (torch_npu), else from MSTX step ranges.

    Neither table has a device column; the database is one process, so every rank in it
    gets the same windows.
    """
    windows = pd.DataFrame(columns=["step", "start_ns", "end_ns"])
    if schema.rows(conn, "STEP_TIME"):
        schema.require("STEP_TIME", ("id", "startNs", "endNs"), "one row per step")
        sql = "SELECT rowid AS source_row, id, startNs, endNs FROM STEP_TIME"
        table = _query(conn, schema.db, sql, "STEP_TIME")
        rows = table["source_row"]
        windows = pd.DataFrame(
            {
                "step": _ns(table["id"], schema.db, "STEP_TIME.id", rows, limit=_MAX_ID),
                "start_ns": _ns(table["startNs"], schema.db, "STEP_TIME.startNs", rows),
                "end_ns": _ns(table["endNs"], schema.db, "STEP_TIME.endNs", rows),
                "source_row": rows,
            }
        )
    elif schema.rows(conn, "MSTX_EVENTS"):
        windows = _mstx_steps(conn, schema)
    if windows.empty:
        return empty_steps(), [NO_STEP_MARKS_NOTE]
    start_ns = windows["start_ns"].to_numpy(dtype=np.int64)
    end_ns = windows["end_ns"].to_numpy(dtype=np.int64)
    start_us, end_us = clock.from_ns(start_ns), clock.from_ns(end_ns)
    source = SourceFile(str(schema.db), _SOURCES[_STEP_SOURCE][1], row="STEP_TIME row")
    if "source_row" not in windows.columns:  # MSTX ranges: one step may merge several rows
        source = SourceFile(str(schema.db), {"end_us": "MSTX_EVENTS.endNs"}, row="MSTX step")
        windows = windows.assign(source_row=windows["step"])
    frames = [
        with_source(
            pd.DataFrame(
                {
                    "rank": np.full(len(windows), rank, dtype=np.int64),
                    "step": windows["step"].to_numpy(dtype=np.int64),
                    "start_us": start_us,
                    "end_us": end_us,
                    "start_ns": start_ns,
                    "end_ns": end_ns,
                }
            ),
            source,
            windows["source_row"].to_numpy(),
        )
        for rank in (ranks or [0])
    ]
    return pd.concat(frames, ignore_index=True), []


def _mstx_steps(conn: sqlite3.Connection, schema: _Schema) -> pd.DataFrame:
    """MSTX start/end ranges whose message names a step (``step 3``, ``ProfilerStep#3``)."""
    schema.require(
        "MSTX_EVENTS", ("startNs", "endNs", "eventType", "message"), "MSTX marks and ranges"
    )
    sql = (
        "SELECT e.startNs AS start_ns, e.endNs AS end_ns, s.value AS message "
        "FROM MSTX_EVENTS e LEFT JOIN STRING_IDS s ON s.id = e.message "
        f"WHERE e.eventType = {_MSTX_RANGE}"
    )
    marks = _query(conn, schema.db, sql, "MSTX_EVENTS")
    step = (
        marks["message"].map(_decoded).astype(str).str.strip().str.extract(_STEP_MARK, expand=False)
    )
    marks = marks[step.notna()].assign(step=step.dropna().astype("int64"))
    if marks.empty:
        return pd.DataFrame(columns=["step", "start_ns", "end_ns"])
    marks = marks.assign(
        start_ns=_ns(marks["start_ns"], schema.db, "MSTX_EVENTS.startNs"),
        end_ns=_ns(marks["end_ns"], schema.db, "MSTX_EVENTS.endNs"),
    )
    # Nested or repeated marks of one step (several threads) span the step together.
    return (
        marks.groupby("step", as_index=False)
        .agg(start_ns=("start_ns", "min"), end_ns=("end_ns", "max"))
        .sort_values("step")
    )


def _add_breakdown(
    conn: sqlite3.Connection,
    schema: _Schema,
    located: _Located,
    steps: pd.DataFrame,
    busy: _Busy,
    rank_of: dict[int, int],
    overlap: Future[pd.DataFrame | None] | None = None,
) -> tuple[pd.DataFrame, list[str]]:
    """The steps table with ``computing_us, comm_not_overlapped_us, free_us, preparing_us``.

    From torch_npu's analysis.db when present, else from OVERLAP_ANALYSIS. Either is used only
    if its Computing and Communication totals match, per step, the union of the kernels with
    operator info and of the communication tasks; otherwise it is left out with a note (the
    analysis then works the breakdown out from the tasks). The values are the source's own:
    its Free stops at the last device task, so the four parts fall short of the step window
    by the idle tail up to the step's end mark (the analysis gives that tail to Free).
    """
    notes: list[str] = []
    breakdown: pd.DataFrame | None = None
    origin = ""
    analysis_db = _analysis_db(located)
    if analysis_db is not None:
        origin = f"{analysis_db.name} StepTraceTime"
        try:
            breakdown = _analysis_db_breakdown(analysis_db, steps)
        except ProfileError as e:
            notes.append(f"{origin} unreadable ({e})")
    if breakdown is None and schema.rows(conn, "OVERLAP_ANALYSIS"):
        origin = "OVERLAP_ANALYSIS"
        breakdown = _overlap_breakdown(conn, schema, steps, rank_of, overlap)
    if breakdown is None:
        return _public_steps(steps), notes
    merged = steps.merge(breakdown, on=["rank", "step"], how="left")
    values = merged[[_COMMUNICATION_US, *BREAKDOWN_COLUMNS]].astype("float64")
    if values.isna().any().any():
        notes.append(f"{origin} does not cover every step: step breakdown left out")
        return _public_steps(steps), notes
    impossible = ~((values >= 0) & (values <= MAX_TIME_US))
    if impossible.any().any():
        row, column = np.argwhere(impossible.to_numpy())[0]
        notes.append(
            f"{origin} gives {values.columns[column]} = {values.iat[row, column]:g} µs in step "
            f"{merged['step'].iloc[row]}, no possible duration: step breakdown left out"
        )
        return _public_steps(steps), notes
    for column, label, (device, start, end) in (
        ("computing_us", "Computing", busy.computing),
        (_COMMUNICATION_US, "Communication", busy.communication),
    ):
        from_tasks = _union_per_step(merged, device, start, end, rank_of)
        off = (merged[column] - from_tasks).abs() > _BREAKDOWN_TOLERANCE_US
        if off.any():
            row = int(np.flatnonzero(off.to_numpy())[0])
            notes.append(
                f"{origin} gives {label} {merged[column].iloc[row]:.3f} µs in step "
                f"{merged['step'].iloc[row]} but the tasks cover {from_tasks.iloc[row]:.3f} µs: "
                "step breakdown left out"
            )
            return _public_steps(steps), notes
    return _public_steps(merged.drop(columns=_COMMUNICATION_US)), notes


def _analysis_db(located: _Located) -> Path | None:
    """torch_npu's analysis.db beside the export, whose step breakdown is taken first."""
    analysis_db = located.db.parent / "analysis.db"
    return analysis_db if located.source == "torch_npu_db" and analysis_db.is_file() else None


def _analysis_db_breakdown(analysis_db: Path, steps: pd.DataFrame) -> pd.DataFrame | None:
    """torch_npu's own step breakdown (µs) from analysis.db, for every rank of ``steps``."""
    columns = (
        "step",
        "computing",
        "communication",
        "communication_not_overlapped",
        "free",
        "preparing",
    )
    with _connect(analysis_db) as conn:
        schema = _Schema(conn, analysis_db)
        if not schema.has("StepTraceTime"):
            return None
        schema.require("StepTraceTime", columns, "torch_npu's step breakdown")
        sql = f"SELECT {', '.join(columns)} FROM StepTraceTime"
        table = _query(conn, analysis_db, sql, "StepTraceTime")
    # Column by column: DataFrame.map is pandas 2.1's (pyproject allows 2.0).
    table = pd.DataFrame({c: _numbers(table[c]) for c in table.columns}, index=table.index)
    step = table["step"]
    table = table.loc[(step.abs() < 2**63) & (step == step.round())]
    per_step = pd.DataFrame(
        {
            "step": table["step"].astype("int64"),
            "computing_us": table["computing"].astype("float64"),
            "communication_us": table["communication"].astype("float64"),
            "comm_not_overlapped_us": table["communication_not_overlapped"].astype("float64"),
            "free_us": table["free"].astype("float64"),
            "preparing_us": table["preparing"].astype("float64"),
        }
    )
    # The analysis.db of a rank directory describes that rank only.
    ranks = pd.DataFrame({"rank": pd.unique(steps["rank"])})
    return ranks.merge(per_step, how="cross")


def _overlap_breakdown(
    conn: sqlite3.Connection,
    schema: _Schema,
    steps: pd.DataFrame,
    rank_of: dict[int, int],
    fetched: Future[pd.DataFrame | None] | None = None,
) -> pd.DataFrame | None:
    """Per (rank, step): the OVERLAP_ANALYSIS intervals clipped to the step window.

    Preparing = first Computing/Communication start − step start (torch_npu's definition);
    Computing, Communication, Communication(Not Overlapped) and Free are summed from there to
    the step end — what torch_npu writes to analysis.db for the same intervals. Rows of one
    type are disjoint in Insight's table, so their clipped sum is their union; the sum is what
    is taken (of any rows), in integer ns, for every step at once.
    """
    schema.require(
        "OVERLAP_ANALYSIS", ("deviceId", "startNs", "endNs", "type"), "Insight's overlap table"
    )
    table = _overlap_rows(conn, schema.db, fetched)
    if not table["type"].isin([0, 1, 2, 3]).all():
        return None
    rank = _ranks(table["deviceId"].to_numpy(), rank_of)
    kind = table["type"].to_numpy()
    start_ns = table["startNs"].to_numpy(dtype=np.int64)
    end_ns = table["endNs"].to_numpy(dtype=np.int64)
    step_rank, lo, hi = (steps[c].to_numpy(dtype=np.int64) for c in ("rank", "start_ns", "end_ns"))
    codes = (_COMPUTING, _COMMUNICATION, _COMM_NOT_OVERLAPPED, _FREE)
    covered = {code: np.zeros(len(steps), dtype=np.int64) for code in codes}
    first = hi - lo  # no Computing/Communication in the window: nothing is counted
    found = np.zeros(len(steps), dtype=bool)
    for r in np.unique(step_rank):
        windows = step_rank == r
        mine = rank == r
        busy = mine & np.isin(kind, [_COMPUTING, _COMMUNICATION])
        found[windows], first[windows] = _first_inside(
            start_ns[busy], end_ns[busy], lo[windows], hi[windows]
        )
        counted_from = lo[windows] + first[windows]
        for code in codes:
            of_type = mine & (kind == code)
            covered[code][windows] = _overlap_sums(
                start_ns[of_type], end_ns[of_type], counted_from, hi[windows]
            )
    return pd.DataFrame(
        {
            "rank": step_rank,
            "step": steps["step"].to_numpy(dtype=np.int64),
            "computing_us": covered[_COMPUTING] / NS_PER_US,
            "communication_us": covered[_COMMUNICATION] / NS_PER_US,
            "comm_not_overlapped_us": covered[_COMM_NOT_OVERLAPPED] / NS_PER_US,
            "preparing_us": np.where(found, first / NS_PER_US, 0.0),
            "free_us": covered[_FREE] / NS_PER_US,
        }
    )


# OVERLAP_ANALYSIS rows fetched at once (a row of Python objects takes some 200 bytes).
_OVERLAP_CHUNK_ROWS = 100_000


_OVERLAP_COLUMNS = ("deviceId", "startNs", "endNs", "type")
_OVERLAP_SQL = f"SELECT {', '.join(_OVERLAP_COLUMNS)} FROM OVERLAP_ANALYSIS"


def _overlap_rows(
    conn: sqlite3.Connection, db: Path, fetched: Future[pd.DataFrame | None] | None = None
) -> pd.DataFrame:
    """``deviceId, startNs, endNs, type`` of the OVERLAP_ANALYSIS rows that are numbers within
    the clock (:func:`_finite_rows`). Where every cell is an integer (SQLite says, in one scan)
    the rows are fetched into int64 arrays (Arrow columns with the ``fast`` extra, else a
    chunk at a time): the table pandas would build, without its object columns; else the
    table is read whole as it is. ``fetched``: the Arrow fetch, already started."""
    columns, sql = _OVERLAP_COLUMNS, _OVERLAP_SQL
    # int64 columns only where every cell is one
    arrow_rows = fetched.result() if fetched is not None else _arrow_integer_rows(db, sql)
    if arrow_rows is not None and len(arrow_rows):
        return _finite_rows(arrow_rows)
    other = " OR ".join(f"typeof({c}) != 'integer'" for c in columns)
    try:
        if conn.execute(f"SELECT 1 FROM OVERLAP_ANALYSIS WHERE {other} LIMIT 1").fetchone() is None:
            cursor = conn.execute(sql)
            chunks = []
            while rows := cursor.fetchmany(_OVERLAP_CHUNK_ROWS):
                chunks.append(np.array(rows, dtype=np.int64))
            if chunks:
                return _finite_rows(pd.DataFrame(np.concatenate(chunks), columns=list(columns)))
    except sqlite3.Error:
        pass  # the whole-table query says why
    return _finite_rows(_query(conn, db, sql, "OVERLAP_ANALYSIS"))


# Interval-window pairs made at once by _overlap_sums (memory: a few int64 arrays of this size).
_PAIRS_PER_CHUNK = 1 << 22


def _overlap_sums(starts: IntArray, ends: IntArray, lo: IntArray, hi: IntArray) -> IntArray:
    """For each window ``[lo[i], hi[i])``: the summed lengths of the intervals ``[start, end)``
    inside it, ``Σ max(0, min(end, hi) − max(start, lo))``, in exact integer ns.

    The windows are sorted once and each interval is paired, by binary search, with the run of
    windows it may reach: the cost is the intervals plus the pairs (about one per interval
    where the windows are disjoint), not intervals × windows.
    """
    sums = np.zeros(len(lo), dtype=np.int64)
    valid = ends > starts
    s, e = starts[valid], ends[valid]
    if not s.size or not len(lo):
        return sums
    order = np.argsort(lo, kind="stable")
    window_lo, window_hi = lo[order], hi[order]
    # Windows before `first` end at or before the interval starts (their running maximum end
    # does); windows from `stop` on start at or after it ends.
    first = np.searchsorted(np.maximum.accumulate(window_hi), s, side="right")
    stop = np.searchsorted(window_lo, e, side="left")
    count = np.maximum(stop - first, 0)
    total = np.cumsum(count)
    begin = 0
    while begin < len(s):
        done = int(total[begin - 1]) if begin else 0
        end = max(int(np.searchsorted(total, done + _PAIRS_PER_CHUNK, side="right")), begin + 1)
        n = count[begin:end]
        row = np.repeat(np.arange(begin, end), n)
        # The window of each pair: the interval's first window plus the pair's place in its run.
        window = first[row] + np.arange(row.size) - np.repeat(np.cumsum(n) - n, n)
        part = np.minimum(e[row], window_hi[window]) - np.maximum(s[row], window_lo[window])
        np.add.at(sums, window, np.maximum(part, 0))
        begin = end
    out = np.empty_like(sums)
    out[order] = sums
    return out


def _first_inside(
    starts: IntArray, ends: IntArray, lo: IntArray, hi: IntArray
) -> tuple[npt.NDArray[np.bool_], IntArray]:
    """For each window ``[lo, hi)``: whether an interval overlaps it (by more than nothing), and
    the earliest such interval's start clipped to the window, in ns since ``lo`` (``hi − lo``
    where none does)."""
    valid = ends > starts
    order = np.argsort(starts[valid], kind="stable")
    s, e = starts[valid][order], ends[valid][order]
    if not s.size:
        return np.zeros(len(lo), dtype=bool), hi - lo
    # Intervals starting at or before lo: one overlaps the window if it ends after lo.
    before = np.searchsorted(s, lo, side="right")
    reach = np.maximum.accumulate(e)[np.maximum(before - 1, 0)]
    straddles = (before > 0) & (reach > lo) & (hi > lo)
    # Else the first interval starting after lo, if it starts before hi.
    after = s[np.minimum(before, s.size - 1)]
    inside = (before < s.size) & (after < hi)
    found = straddles | inside
    first = np.where(straddles, 0, np.where(inside, after - lo, hi - lo))
    return found, first


def _merged(starts: IntArray, ends: IntArray) -> tuple[IntArray, IntArray]:
    """The union of the intervals ``[start, end)`` as disjoint sorted intervals (integer ns)."""
    valid = ends > starts
    order = np.argsort(starts[valid], kind="stable")
    s, e = starts[valid][order], ends[valid][order]
    if not s.size:
        return s, e
    running_end = np.maximum.accumulate(e)
    new_block = np.empty(s.size, dtype=bool)
    new_block[0] = True
    new_block[1:] = s[1:] > running_end[:-1]
    last = np.append(np.flatnonzero(new_block)[1:] - 1, s.size - 1)
    return s[new_block], running_end[last]


def _ranks(device: npt.NDArray[Any], rank_of: dict[int, int]) -> IntArray:
    """The rank of each device id (its own id where RANK_DEVICE_MAP has none)."""
    distinct, inverse = np.unique(device, return_inverse=True)
    ranks = np.array([rank_of.get(int(d), int(d)) for d in distinct], dtype=np.int64)
    return ranks[inverse.reshape(-1)]


def _union_per_step(
    steps: pd.DataFrame, device: IntArray, start: IntArray, end: IntArray, rank_of: dict[int, int]
) -> pd.Series:
    """µs covered by the union of the intervals ``[start, end)`` inside each step's window."""
    rank = _ranks(device, rank_of)
    step_rank, lo, hi = (steps[c].to_numpy(dtype=np.int64) for c in ("rank", "start_ns", "end_ns"))
    covered = np.zeros(len(steps), dtype=np.int64)
    for r in np.unique(step_rank):
        windows = step_rank == r
        mine = rank == r
        union_starts, union_ends = _merged(start[mine], end[mine])
        covered[windows] = _overlap_sums(union_starts, union_ends, lo[windows], hi[windows])
    return pd.Series(covered / NS_PER_US, index=steps.index, dtype="float64")


def _public_steps(steps: pd.DataFrame) -> pd.DataFrame:
    return steps.drop(columns=["start_ns", "end_ns"])


# --------------------------------------------------------------------------- metadata


def _metadata(
    conn: sqlite3.Connection,
    schema: _Schema,
    located: _Located,
    devices: list[int],
    ranks: list[int],
) -> tuple[dict[str, Any], list[str]]:
    """Environment facts from META_DATA, NPU_INFO and profiler_info*.json, and notes."""
    metadata: dict[str, Any] = {"export_type": "db", "ranks": ranks}
    if schema.has("META_DATA", "name") and schema.has("META_DATA", "value"):
        meta = _query(conn, schema.db, "SELECT name, value FROM META_DATA", "META_DATA")
        values = {str(_decoded(n)).lower(): v for n, v in zip(meta["name"], meta["value"])}
        for key in ("cann_version", "torch_npu_version"):
            if values.get(key):
                metadata[key] = str(_decoded(values[key]))
    if schema.has("NPU_INFO", "id") and schema.has("NPU_INFO", "name"):
        npus = _query(conn, schema.db, "SELECT id, name FROM NPU_INFO", "NPU_INFO").dropna()
        ids = pd.to_numeric(npus["id"].map(_number_or_none), errors="coerce")
        names = {
            int(i): str(_decoded(n))
            for i, n in zip(ids, npus["name"])
            if pd.notna(i) and abs(i) < 2**31 and i == int(i)
        }
        # NPU_INFO lists every device of the host; the one that ran the tasks is ours.
        for device_id in [*devices, *sorted(names)]:
            if device_id in names:
                metadata["device"] = names[device_id]
                break
    info, notes = _profiler_info(located)
    config = info.get("config")
    experimental = config.get("experimental_config") if isinstance(config, dict) else None
    if isinstance(experimental, dict):
        for key, source_key in (
            ("profiler_level", "_profiler_level"),
            ("aic_metrics", "_aic_metrics"),
        ):
            if isinstance(experimental.get(source_key), str):
                metadata[key] = experimental[source_key]
    for key in ("cann_version", "torch_npu_version"):
        if isinstance(info.get(key), str):
            metadata.setdefault(key, info[key])
    return metadata, notes


def _profiler_info(located: _Located) -> tuple[dict[str, Any], list[str]]:
    """torch_npu's profiler_info[_{rank}].json in the *_ascend_pt directory, if any."""
    if located.source != "torch_npu_db":
        return {}, []
    parent = located.db.parent
    roots = [parent.parent, parent] if parent.name == ASCEND_PROFILER_OUTPUT else [parent]
    for root in roots:
        for info_path in _regular_files(root, "profiler_info*.json"):
            notes: list[str] = []
            info = read_auxiliary(
                read_json_object, info_path, notes, "versions and profiler level not recorded"
            )
            return (info or {}), notes
    return {}, []


READER = FormatReader("ascend_db", detect, read)

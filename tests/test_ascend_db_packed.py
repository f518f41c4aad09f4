"""The SQLite reader packs the joined STRING_IDS rowids of a TASK row into a few integer cells
(issue 10): however the string table is numbered, the tables are those read without packing."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pandas as pd
import pytest

from perfgate.errors import ProfileError
from perfgate.ingest import ascend_db
from perfgate.model import SOURCE_COLUMN, Profile

DATA = Path(__file__).parent / "data" / "ascend_db"
FIXTURES = {
    "torch_npu": DATA / "pytorch_db_level1_rank0_ascend_pt",
    "msprof": DATA / "msprof_full_db",
}


def _db(root: Path) -> Path:
    return next(p for p in root.rglob("*.db") if p.name != "analysis.db")


def assert_same_tables(got: Profile, expected: Profile) -> None:
    for name in ("tasks", "steps"):
        pd.testing.assert_frame_equal(
            getattr(got, name).drop(columns=SOURCE_COLUMN, errors="ignore"),
            getattr(expected, name).drop(columns=SOURCE_COLUMN, errors="ignore"),
            check_exact=True,
        )
    assert got.notes == expected.notes


@pytest.mark.parametrize(
    "extra_rowids",
    [
        [-7],  # codes offset by a negative rowid
        [2**40],  # one string per packed cell
        [-(2**52), 2**52],  # the widest rowids still packed
        [2**53 + 1],  # beyond: the joins give the text itself
        [-(2**63)],  # the int64 minimum, whose absolute value int64 cannot hold (fuzz seed 9)
    ],
)
@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_unreferenced_strings_numbered_anyhow_change_nothing(
    name: str, extra_rowids: list[int], tmp_path: Path
) -> None:
    copy = tmp_path / FIXTURES[name].name
    shutil.copytree(FIXTURES[name], copy)
    with sqlite3.connect(_db(copy)) as conn:
        conn.executemany(
            "INSERT INTO STRING_IDS (id, value) VALUES (?, ?)",
            [(rowid, f"unused {rowid}") for rowid in extra_rowids],
        )
    conn.close()
    assert_same_tables(ascend_db.read(copy), ascend_db.read(FIXTURES[name]))


def test_packs_stay_below_two_to_the_63() -> None:
    radix = 2**20
    fields = [(c, c, radix) for c in "abc"] + [("d", "d", 2), ("e", "e", 2), ("f", "f", radix)]
    packs = ascend_db._packs(fields)
    assert [[column for column, *_ in pack] for pack in packs] == [list("abcde"), ["f"]]
    for pack in packs:
        assert sum((radix - 1) * scale for _, _, radix, scale in pack) < 2**63


@pytest.mark.parametrize(
    "change",
    [
        None,  # every cell an INTEGER: read as int64 at once
        "UPDATE TASK SET startNs = 1000.5 WHERE rowid = 7",  # a fraction of a ns
        "UPDATE TASK SET startNs = CAST(startNs AS REAL) WHERE rowid = 9",  # a whole REAL
        "UPDATE TASK SET streamId = CAST(streamId AS TEXT) WHERE rowid = 7",  # a TEXT id
        "UPDATE TASK SET taskId = NULL WHERE rowid = 3",  # an unknown task id
        "UPDATE TASK SET deviceId = 'x' WHERE rowid = 5",  # no number at all
    ],
)
@pytest.mark.parametrize("rows_reader", ["adbc", "fromiter"])
def test_task_rows_read_as_integers_give_what_pandas_reading_gives(
    change: str | None, rows_reader: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The int64 readings (ADBC's Arrow columns, numpy.fromiter) could truncate 0.5 and parse
    # '12' silently: they are used only where SQLite says every cell is an INTEGER.
    if rows_reader == "adbc":
        pytest.importorskip("adbc_driver_sqlite", reason="the fast extra is not installed")
    else:
        monkeypatch.setattr(ascend_db, "_arrow_integer_rows", lambda db, sql: None)
    copy = tmp_path / "msprof"
    shutil.copytree(FIXTURES["msprof"], copy)
    if change is not None:
        with sqlite3.connect(_db(copy)) as conn:
            conn.execute(change)
        conn.close()
    used = []
    integer_rows = ascend_db._integer_rows

    def spy(
        conn: sqlite3.Connection, sql: str, db: Path, parts: list[str] | None = None
    ) -> pd.DataFrame | None:
        rows = integer_rows(conn, sql, db, parts)
        used.append(rows is not None)
        return rows

    def read(path: Path) -> Profile | str:
        try:
            return ascend_db.read(path)
        except ProfileError as e:
            return str(e)

    monkeypatch.setattr(ascend_db, "_integer_rows", spy)
    fast = read(copy)
    monkeypatch.setattr(ascend_db, "_integer_rows", lambda conn, sql, db, parts=None: None)
    slow = read(copy)
    if isinstance(fast, str) or isinstance(slow, str):
        assert fast == slow
    else:
        assert_same_tables(fast, slow)
    if change is None:
        assert used == [True]


def test_adbc_reads_the_rows_numpy_reads(tmp_path: Path) -> None:
    # The same query through both int64 readings: the same frame, column for column.
    pytest.importorskip("adbc_driver_sqlite", reason="the fast extra is not installed")
    db = _db(FIXTURES["torch_npu"])
    sql = "SELECT rowid AS source_row, startNs, endNs, deviceId, taskType FROM TASK"
    with ascend_db._connect(db) as conn:
        arrow = ascend_db._arrow_integer_rows(db, sql)
        assert arrow is not None and len(arrow) == 552
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(ascend_db, "_arrow_integer_rows", lambda db, sql: None)
            numpy_rows = ascend_db._integer_rows(conn, sql, db)
    assert numpy_rows is not None
    pd.testing.assert_frame_equal(arrow, numpy_rows)


@pytest.mark.parametrize("last", ["'x'", "0.5", "7.0", "x'37'", "NULL", "2"])
def test_adbc_reading_gives_up_on_a_cell_its_first_rows_did_not_announce(
    last: str, tmp_path: Path
) -> None:
    # The driver infers a column's type from its first 1,024 rows: a later TEXT, REAL (even a
    # whole one), BLOB or NULL cell must not come back as an int64 (the caller then reads the
    # rows cell by cell). The column has no type, so that SQLite keeps each cell's own.
    pytest.importorskip("adbc_driver_sqlite", reason="the fast extra is not installed")
    db = tmp_path / "rows.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE T (v)")
        conn.executemany("INSERT INTO T VALUES (?)", [(i,) for i in range(3000)])
        conn.execute(f"INSERT INTO T VALUES ({last})")
    conn.close()
    rows = ascend_db._arrow_integer_rows(db, "SELECT v FROM T")
    if last == "2":
        assert rows is not None and rows["v"].tolist() == [*range(3000), 2]
    else:
        assert rows is None


@pytest.mark.parametrize(
    "change",
    [
        None,
        "UPDATE COMPUTE_TASK_INFO SET name = 999999999 WHERE rowid = 3",  # names no string
        "UPDATE COMPUTE_TASK_INFO SET opType = 'abc' WHERE rowid = 4",  # no id at all
        "UPDATE COMPUTE_TASK_INFO SET name = 2.5 WHERE rowid = 5",  # a fraction
        "UPDATE COMPUTE_TASK_INFO SET taskType = NULL WHERE rowid = 6",
        "UPDATE TASK SET taskType = -5 WHERE rowid = 7",  # below every id
        # A hole: the string a kernel's name points to is gone.
        "DELETE FROM STRING_IDS WHERE id = (SELECT name FROM COMPUTE_TASK_INFO LIMIT 1)",
        # ids that are not rowids: the joins must stay.
        "CREATE TABLE S2 (id INTEGER, value TEXT); INSERT INTO S2 SELECT id, value FROM "
        "STRING_IDS ORDER BY id DESC; DROP TABLE STRING_IDS; ALTER TABLE S2 RENAME TO STRING_IDS",
    ],
)
@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_string_codes_from_ids_give_what_the_joins_give(
    name: str, change: str | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Where every STRING_IDS id is its rowid, the codes are taken from the ids themselves
    # instead of joining STRING_IDS: the tables must be those the joins give.
    copy = tmp_path / FIXTURES[name].name
    shutil.copytree(FIXTURES[name], copy)
    if change is not None:
        with sqlite3.connect(_db(copy)) as conn:
            conn.executescript(change)
        conn.close()

    def read() -> Profile | str:
        try:
            return ascend_db.read(copy)
        except ProfileError as e:
            return str(e)

    from_ids = read()
    monkeypatch.setattr(ascend_db, "_ids_are_rowids", lambda conn: False)
    joined = read()
    if isinstance(from_ids, str) or isinstance(joined, str):
        assert from_ids == joined
    else:
        assert_same_tables(from_ids, joined)

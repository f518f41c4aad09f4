"""With the fast extra, the Ascend CSVs are read by pyarrow; without it, by pandas
(``ingest/ascend_csv.py``). Both readings must give the same table, or the same error, for
any file: the real exports in ``tests/data`` and files full of hostile cells."""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from perfgate.errors import ProfileError
from perfgate.ingest import ascend_csv, detect_reader, load_profile
from perfgate.ingest.ascend_csv import (
    KERNEL_DETAILS,
    CsvColumn,
    read_csv_columns,
    task_columns,
)
from perfgate.model import SOURCE_COLUMN, TimeBase

pytest.importorskip("pyarrow", reason="the fast extra is not installed")

DATA = Path(__file__).parent / "data"

HEADER = [
    "Device_id",
    "Step Id",
    "Name",
    "Type",
    "Accelerator Core",
    "Start Time(us)",
    "Duration(us)",
    "Stream ID",
    "Task ID",
    "Input Shapes",
]

# Cells of every sort the readers meet or should survive, per column kind.
NAMES = ["MatMul", " MatMul ", "N/A", "", "Add_1", "名前", '"a,b"', '""', "NA", "null", "\tX"]
NUMBERS = ["1.5", " 2.25 ", "7", "N/A", "", "nan", "inf", "1e3", "+5", "-0", "1_000", "x", '"3"']
INTEGERS = ["0", "3", " 4 ", "N/A", "", "2.5", "9223372036854775807", "-1", "1e2", "x"]
TIMES = [
    "1736408883704643.212\t",
    "1736408883704644.000",
    " 1736408883704645.5",
    "1736408883704646",
    "N/A",
    "",
    "1.7e15",
    "1.7000000000000001e15",  # no float64: exact either way (a decimal for pyarrow)
    "+1736408883704647.1",
    "1736408883704643.2129999",
    "abc",
    "1" * 70,  # wider than the byte matrix takes: parsed from the strings
]


def _cell(rng: random.Random, header: str) -> str:
    if header in ("Duration(us)",):
        pool = NUMBERS
    elif header in ("Device_id", "Step Id"):
        pool = INTEGERS
    elif header == "Start Time(us)":
        pool = TIMES
    else:
        pool = NAMES
    # Mostly well-formed, so that many files read and the rest fail at one cell.
    return rng.choice(pool) if rng.random() < 0.02 else pool[rng.randrange(3) if pool else 0]


def _hostile_file(rng: random.Random, path: Path) -> None:
    rows = [",".join(HEADER)]
    for _ in range(rng.randrange(1, 40)):
        cells = [_cell(rng, h) for h in HEADER]
        damage = rng.random()
        if damage < 0.03:
            cells = cells[: rng.randrange(len(cells))]  # a row cut short
        elif damage < 0.05:
            cells.append("extra")  # a field too many
        rows.append(",".join(cells))
    text = "\n".join(rows) + ("\n" if rng.random() < 0.9 else "")
    if rng.random() < 0.1:
        text = text.replace("\n", "\r\n")
    data = text.encode("utf-8")
    if rng.random() < 0.1:
        data = b"\xef\xbb\xbf" + data  # a byte-order mark
    if rng.random() < 0.05:
        data = data[: rng.randrange(len(data))]  # truncated anywhere
    if rng.random() < 0.03:
        data = data.replace(b"MatMul", b"Mat\xffMul", 1)  # not UTF-8
    path.write_bytes(data)


def _read(path: Path, categorical: bool = False) -> pd.DataFrame | str:
    try:
        table = read_csv_columns(
            path,
            task_columns(KERNEL_DETAILS),
            what="a kernel table",
            clock=TimeBase(origin_us=1736408883704000),
            categorical=categorical,
        )
    except ProfileError as e:
        return str(e)
    if categorical:  # the same values; the categories' order is each reading's own
        kinds = {
            c: "object" for c in table.columns if isinstance(table[c].dtype, pd.CategoricalDtype)
        }
        text = {c.canonical for c in task_columns(KERNEL_DETAILS) if c.kind in ("name", "text")}
        assert set(kinds) == text & set(table.columns)
        table = table.astype(kinds)
    return table


def _both(
    path: Path, monkeypatch: pytest.MonkeyPatch, categorical: bool = False
) -> tuple[object, object, bool]:
    """Both readings of ``path``, and whether pyarrow's took the file (rather than leaving
    it to pandas); ``categorical``: name and text columns read as categoricals."""
    used = []
    arrow_cells = ascend_csv._arrow_cells

    def spy(path: Path, written: list[str], found: Sequence[CsvColumn]) -> pd.DataFrame | None:
        cells = arrow_cells(path, written, found)
        used.append(cells is not None)
        return cells

    with monkeypatch.context() as patch:
        patch.setattr(ascend_csv, "_arrow_cells", spy)
        fast = _read(path, categorical)
    with monkeypatch.context() as patch:
        patch.setattr(ascend_csv, "_arrow_cells", lambda path, written, found: None)
        slow = _read(path, categorical)
    return fast, slow, any(used)


@pytest.mark.parametrize("categorical", [False, True], ids=["objects", "categorical"])
def test_hostile_files_read_alike(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, categorical: bool
) -> None:
    rng = random.Random(20261204)
    read_tables = errors = taken_by_arrow = 0
    for i in range(300):
        path = tmp_path / f"kernel_details_{i}.csv"
        _hostile_file(rng, path)
        fast, slow, arrow = _both(path, monkeypatch, categorical)
        if categorical and isinstance(fast, pd.DataFrame):
            # The categorical reading holds the values the plain one does.
            plain = _read(path)
            assert isinstance(plain, pd.DataFrame)
            pd.testing.assert_frame_equal(
                fast.drop(columns=SOURCE_COLUMN),
                plain.drop(columns=SOURCE_COLUMN),
                check_exact=True,
            )
        taken_by_arrow += arrow
        if isinstance(slow, str) or isinstance(fast, str):
            assert fast == slow, path.read_bytes()[:2000]
            errors += 1
        else:
            assert isinstance(fast, pd.DataFrame) and isinstance(slow, pd.DataFrame)
            pd.testing.assert_frame_equal(
                fast.drop(columns=SOURCE_COLUMN), slow.drop(columns=SOURCE_COLUMN), check_exact=True
            )
            assert fast[SOURCE_COLUMN].astype(str).equals(slow[SOURCE_COLUMN].astype(str))
            read_tables += 1
    # Both outcomes are exercised, and pyarrow's reading is not merely always declined.
    print(f"{read_tables} read, {errors} refused, {taken_by_arrow} taken by pyarrow")
    assert read_tables > 50 and errors > 50 and taken_by_arrow > 50


def _profiles() -> list[Path]:
    """Every path in tests/data that the CSV readers (torch_npu, msprof) take."""
    found = []
    for path in sorted(DATA.rglob("*")):
        try:
            reader = detect_reader(path)
        except ProfileError:
            continue
        if reader.name in ("torch_npu", "msprof"):
            found.append(path)
    return found


@pytest.mark.parametrize("profile", _profiles(), ids=lambda p: str(p.relative_to(DATA)))
def test_real_exports_read_alike(profile: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def tables(use_arrow: bool) -> dict[str, pd.DataFrame] | str:
        with monkeypatch.context() as patch:
            if not use_arrow:
                patch.setattr(ascend_csv, "_arrow_cells", lambda path, written, found: None)
            try:
                loaded = load_profile(profile)
            except ProfileError as e:  # a folder of several profiles may be refused: alike
                return str(e)
        return {"tasks": loaded.tasks, "steps": loaded.steps}

    fast, slow = tables(True), tables(False)
    if isinstance(fast, str) or isinstance(slow, str):
        assert fast == slow
        return
    for name in fast:
        pd.testing.assert_frame_equal(
            fast[name].drop(columns=SOURCE_COLUMN, errors="ignore"),
            slow[name].drop(columns=SOURCE_COLUMN, errors="ignore"),
            check_exact=True,
        )


def test_line_breaks_in_names_across_read_blocks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pyarrow reads in parallel blocks cut at line ends; a quoted line break where a block
    is cut must not split the row. Every name holds one, the file spans several 1 MB blocks:
    the parallel reading is refused and the file read again, to the same table as pandas'."""
    import pyarrow.csv as arrow_csv

    path = tmp_path / "kernel_details.csv"
    rows = [",".join(HEADER)]
    for i in range(50_000):
        start = f"{1736408883704643 + i * 10}.{i % 1000:03d}"
        rows.append(f'0,1,"Mat\nMul_{i}",MatMul,AI_CORE,{start},5.5,2,{i},"""8,8"""')
    path.write_text("\n".join(rows) + "\n")
    assert path.stat().st_size > 3 * 2**20
    attempts: list[bool] = []
    read_csv = arrow_csv.read_csv

    def spy(*args: Any, **kwargs: Any) -> Any:
        attempts.append(kwargs["parse_options"].newlines_in_values)
        return read_csv(*args, **kwargs)

    monkeypatch.setattr(arrow_csv, "read_csv", spy)
    fast, slow, arrow = _both(path, monkeypatch)
    assert arrow and attempts == [False, True]
    assert isinstance(fast, pd.DataFrame) and isinstance(slow, pd.DataFrame)
    assert fast["name"].iloc[49_999] == "Mat\nMul_49999"
    pd.testing.assert_frame_equal(
        fast.drop(columns=SOURCE_COLUMN), slow.drop(columns=SOURCE_COLUMN), check_exact=True
    )

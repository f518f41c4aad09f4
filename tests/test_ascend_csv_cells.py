"""How the Ascend CSV readers read a cell, kind by kind (docs/formats.md §8): white space
around a value is not part of it, only an empty cell is missing, ``N/A`` is a value in name
columns and unknown elsewhere, and a number cell holding anything else is an error naming
the row. The column-wise fast paths must keep every one of these rules."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from perfgate.errors import ProfileError
from perfgate.ingest import ascend_csv
from perfgate.ingest.ascend_csv import CsvColumn, read_csv_columns
from perfgate.model import TimeBase

COLUMNS = [
    CsvColumn("name", "Name", "name"),
    CsvColumn("stream", "Stream ID", "text"),
    CsvColumn("dur_us", "Duration(us)", "float", value_required=True),
    CsvColumn("wait_us", "Wait(us)", "float", header_required=False),
    CsvColumn("step", "Step Id", "int", header_required=False),
    CsvColumn("start_us", "Start Time(us)", "time", value_required=True),
]
HEADER = "Name,Stream ID,Duration(us),Wait(us),Step Id,Start Time(us)\n"


@pytest.fixture(autouse=True, params=["pyarrow", "pandas"])
def csv_parser(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every rule holds for both readings of the cells: pyarrow's (the fast extra) and pandas'."""
    if request.param == "pyarrow":
        pytest.importorskip("pyarrow", reason="the fast extra is not installed")
    else:
        monkeypatch.setattr(ascend_csv, "_arrow_cells", lambda path, written, found: None)
    return str(request.param)


def read(tmp_path: Path, *rows: str):  # type: ignore[no-untyped-def]
    path = tmp_path / "kernel_details.csv"
    path.write_text(HEADER + "".join(row + "\n" for row in rows), encoding="utf-8")
    clock = TimeBase(origin_us=1736408883704000)
    return read_csv_columns(path, COLUMNS, what="a kernel table", clock=clock)


def test_cells_of_every_kind(tmp_path: Path) -> None:
    table = read(
        tmp_path,
        " MatMul ,2,1.5\t,N/A,3, 1736408883704643.212\t",
        "N/A,N/A, 2.25,,4,1736408883704644.000",
        ",  , 7 , 0.5 ,,1736408883704645.5",
    )
    assert table["name"].tolist()[:2] == ["MatMul", "N/A"]
    assert table["name"].isna().tolist() == [False, False, True]
    assert table["stream"].tolist()[0] == "2"
    assert table["stream"].isna().tolist() == [False, True, True]
    assert table["dur_us"].tolist() == [1.5, 2.25, 7.0]
    assert np.isnan(table["wait_us"].iloc[0]) and np.isnan(table["wait_us"].iloc[1])
    assert table["wait_us"].iloc[2] == 0.5
    assert table["step"].tolist()[:2] == [3, 4] and table["step"].isna().iloc[2]
    # µs since the origin, exactly as written (epoch µs in a float64 would lose the ns).
    assert table["start_us"].tolist() == [643.212, 644.0, 645.5]


@pytest.mark.parametrize(
    ("duration", "message"),
    [
        ("fast", "data row 2 holds 'fast'"),
        ("N/A", "data row 2 holds 'N/A'"),
        ("nan", "data row 2 holds 'nan'"),
        ("1_000", "data row 2 holds '1_000'"),
        ("١٢", "data row 2 holds '١٢'"),
        ("  ", "data row 2 has no value"),
    ],
)
def test_a_bad_number_cell_is_named_by_row(tmp_path: Path, duration: str, message: str) -> None:
    with pytest.raises(ProfileError, match=rf"column 'Duration\(us\)': {message}"):
        read(tmp_path, "A,1,1.0,,1,10.0", f"B,1,{duration},,1,11.0")


def test_a_fraction_in_an_integer_column_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ProfileError, match=r"column 'Step Id': data row 1 holds '2.5'"):
        read(tmp_path, "A,1,1.0,,2.5,10.0")


def test_an_empty_time_stamp_is_a_damaged_file(tmp_path: Path) -> None:
    with pytest.raises(ProfileError, match=r"'Start Time\(us\)': data row 1 has no value"):
        read(tmp_path, "A,1,1.0,,1,\t")


def test_bytes_that_are_no_utf8_are_replaced_and_refused_only_where_read(tmp_path: Path) -> None:
    path = tmp_path / "kernel_details.csv"
    clock = TimeBase(origin_us=1736408883704000)

    def read_bytes(*rows: bytes):  # type: ignore[no-untyped-def]
        path.write_bytes(HEADER.replace("\n", ",Unread\n").encode() + b"".join(rows))
        return read_csv_columns(path, COLUMNS, what="a kernel table", clock=clock)

    table = read_bytes(b"Mat\xffMul,2,1.5,,3,10.0,GBK \xc4\xe3\n")
    assert table["name"].tolist() == ["Mat\ufffdMul"]
    assert table["dur_us"].tolist() == [1.5]
    with pytest.raises(ProfileError, match=r"column 'Duration\(us\)': data row 2 holds '1\ufffd5'"):
        read_bytes(b"A,2,1.5,,3,10.0,x\n", b"B,2,1\xff5,,3,11.0,x\n")
    # In the header they make no CSV text.
    path.write_bytes(b"Na\xffme,Duration(us)\nA,1.0\n")
    with pytest.raises(ProfileError, match="is not a CSV text file"):
        read_csv_columns(path, COLUMNS, what="a kernel table", clock=clock)


@pytest.mark.parametrize(
    ("stamps", "as_ns", "expected"),
    [
        # msprof's own shape: pyarrow reads them as decimals of three places, exact ns.
        (
            ["1736408883704643.212\t", " 1736408883704644.5", "1736408883704645"],
            True,
            [643.212, 644.5, 645.0],
        ),
        # A fourth place, a missing cell: the text path (which also names a bad cell).
        (
            ["1736408883704643.2125", "1736408883704644.5", "1736408883704645"],
            False,
            [643.2125, 644.5, 645.0],
        ),
        (["1736408883704643.212", "N/A", "1736408883704645"], False, [643.212, None, 645.0]),
    ],
)
def test_time_stamps_read_as_ns_only_where_exact(
    tmp_path: Path, csv_parser: str, stamps: list[str], as_ns: bool, expected: list[float | None]
) -> None:
    path = tmp_path / "kernel_details.csv"
    rows = [f"MatMul,2,1.5,,1,{stamp}" for stamp in stamps]
    path.write_text(HEADER + "".join(row + "\n" for row in rows), encoding="utf-8")
    columns = [*COLUMNS[:-1], dataclasses.replace(COLUMNS[-1], value_required=False)]
    cells = ascend_csv._arrow_cells(path, HEADER.strip().split(","), columns)
    if csv_parser == "pyarrow":
        assert cells is not None
        assert (cells["Start Time(us)"].dtype == np.int64) is as_ns
    clock = TimeBase(origin_us=1736408883704000)
    starts = read_csv_columns(path, columns, what="a kernel table", clock=clock)["start_us"]
    assert [None if np.isnan(v) else v for v in starts] == expected

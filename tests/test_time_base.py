"""The time base of perfgate.model: epoch µs stored relative to EPOCH_ORIGIN_US, exactly.

Expected values are computed with Decimal, independently of the vectorised helpers: a stored
time must be the float64 nearest to the exact difference (equal, not approximately equal).
"""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfgate import model
from perfgate.ingest.ascend_csv import CsvColumn, read_csv_columns
from perfgate.intervals import merge, union_length
from perfgate.model import (
    EPOCH_ORIGIN_US,
    TimeBase,
    rebase_times,
    time_origin_for,
    us_from_ns,
    us_from_text,
)


def exact(text: str, origin: int = EPOCH_ORIGIN_US) -> float:
    return float(Decimal(text.strip()) - origin)


def test_the_origin_is_2023_11_14_in_epoch_microseconds() -> None:
    assert EPOCH_ORIGIN_US == 1_700_000_000_000_000
    assert pd.Timestamp(EPOCH_ORIGIN_US, unit="us", tz="UTC").isoformat() == (
        "2023-11-14T22:13:20+00:00"
    )


def test_a_whole_part_past_2_53_is_rounded_once_with_its_fraction() -> None:
    # 9007199254740993 lies halfway between two float64: rounded alone it goes to the even
    # …992, and + 0.1 stays there; the exact value …993.1 is nearest to …994. (Found by the
    # property test below; such values are beyond the clock's range, MAX_TIME_US, anyway.)
    texts = ["9007199254740993.1", "9007199254740993", "9007199254740995.5", "-9007199254740993.1"]
    got = us_from_text(pd.Series(texts, dtype=object), 0).tolist()
    assert (
        got
        == [exact(t, 0) for t in texts]
        == [
            9007199254740994.0,
            9007199254740992.0,
            9007199254740996.0,
            -9007199254740994.0,
        ]
    )


def test_decimal_text_is_converted_exactly_tab_and_all() -> None:
    cells = pd.Series(
        [
            "1736408883704643.212\t",  # msprof's TAB inside the cell
            " 1736410576538298.460 ",
            "1736410576386409.710",
            "1780676244313289",
            "1698220811392354.694",  # before the origin: negative
        ]
    )
    got = us_from_text(cells, EPOCH_ORIGIN_US)
    assert got.tolist() == [exact(c) for c in cells]
    assert got.iloc[0] == 36408883704643.212
    # the torch_npu db STEP_TIME window, to the last decimal (absolute float64: 151888.5)
    assert got.iloc[1] - got.iloc[2] == 151888.75
    assert got.iloc[4] < 0


def test_missing_cells_give_nan_and_na_strings_stay_the_callers_job() -> None:
    # The CSV reader turns "N/A" and "" into NaN before converting; text that is no number
    # gives NaN here (the reader refuses it earlier, naming the row).
    got = us_from_text(pd.Series([np.nan, None, "N/A", "1736408883704643.212"]), EPOCH_ORIGIN_US)
    assert got.isna().tolist() == [True, True, True, False]
    assert us_from_text(pd.Series([], dtype=object), EPOCH_ORIGIN_US).empty


def test_other_number_spellings_are_exact_too() -> None:
    got = us_from_text(pd.Series(["1e3", ".5", "-3.25", "+7", "5.", "inf"]), 0)
    assert got.tolist() == [1000.0, 0.5, -3.25, 7.0, 5.0, float("inf")]
    # No float64 holds 1700000000000000.1: through one, the 0.1 µs would be lost.
    texts = ["1.7000000000000001e15", "17364088837046432e-1"]
    got = us_from_text(pd.Series(texts), EPOCH_ORIGIN_US)
    assert got.tolist() == [exact(t) for t in texts] == [0.1, 36408883704643.2]


def test_many_random_stamps_are_all_exact() -> None:
    rng = np.random.default_rng(7)
    whole = rng.integers(1_690_000_000_000_000, 1_800_000_000_000_000, 2000)
    digits = rng.integers(0, 4, 2000)
    fraction = rng.integers(0, 1000, 2000)
    texts = [
        f"{w}.{str(f).zfill(3)[:d]}" if d else str(w) for w, d, f in zip(whole, digits, fraction)
    ]
    got = us_from_text(pd.Series(texts), EPOCH_ORIGIN_US).to_numpy()
    assert (got == np.array([exact(t) for t in texts])).all()
    ns = whole * 1000 + fraction
    assert (us_from_ns(ns, EPOCH_ORIGIN_US) == np.array([exact(f"{n}e-3") for n in ns])).all()
    # small values (origin 0) too: 3.655 must not come out as 3 + 0.655 = 3.6550000000000002
    small = rng.integers(-5_000_000, 5_000_000, 2000)
    expected = np.array([float(Decimal(int(n)) / 1000) for n in small])
    assert (us_from_ns(small, 0) == expected).all()
    texts = [str(Decimal(int(n)) / 1000) for n in small]
    assert (us_from_text(pd.Series(texts), 0).to_numpy() == expected).all()


@settings(max_examples=300, deadline=None, database=None)
@given(
    cells=st.lists(
        st.tuples(
            st.sampled_from(["", " ", "\t", "\u00a0"]),
            st.sampled_from(["", "-", "+"]),
            st.integers(0, 10**16 - 1),
            st.text("0123456789", max_size=15),
            st.sampled_from(["", "\t", " ", "\r\n", " \t "]),
        ),
        min_size=1,
        max_size=40,
    ),
    origin=st.sampled_from([0, EPOCH_ORIGIN_US]),
)
def test_white_space_around_a_plain_decimal_changes_nothing(
    cells: list[tuple[str, str, int, str, str]], origin: int
) -> None:
    # The byte parser skips trailing white space itself and strips the rest on a second pass;
    # column-wise, cells of one shape are parsed together: every cell must still be exact.
    texts = [
        f"{lead}{sign}{whole}{'.' + f if f else ''}{tail}" for lead, sign, whole, f, tail in cells
    ]
    got = us_from_text(pd.Series(texts, dtype=object), origin).to_numpy()
    assert got.tolist() == [exact(t, origin) for t in texts]


def test_integer_nanoseconds_are_converted_in_integer_arithmetic() -> None:
    ns = np.array([1736410576538298460, 1736410576386409710, 1698220811392354694])
    got = us_from_ns(ns, EPOCH_ORIGIN_US)
    assert got.tolist() == [
        exact("1736410576538298.460"),
        exact("1736410576386409.710"),
        exact("1698220811392354.694"),
    ]
    assert got[0] - got[1] == 151888.75
    # what dividing first would give: 0.25 µs steps
    assert ns[0] / 1000 - ns[1] / 1000 == 151888.5
    assert us_from_ns(np.array([1500, -1, -1999]), 0).tolist() == [1.5, -0.001, -1.999]
    assert us_from_text(pd.Series(["-0.001", "-1.999"]), 0).tolist() == [-0.001, -1.999]
    # a fraction and a negative whole part do not cancel: -1 + 0.999 would round twice
    assert us_from_text(pd.Series(["1699999999999999.999"]), EPOCH_ORIGIN_US).tolist() == [-0.001]


def test_nanoseconds_give_what_the_general_split_gives_on_both_sides_of_2_53() -> None:
    # us_from_ns takes shortcuts (one division below 2**53 ns, the parts added above): each
    # float64 must be _whole_plus_fraction's, including where the two ways meet.
    rng = np.random.default_rng(20261207)
    edge = (2**53) // 1000 * 1000
    ns = np.concatenate(
        [
            rng.integers(-(2**53), 2**53, 20_000),
            rng.integers(edge - 10**5, edge + 10**5, 20_000),
            -rng.integers(edge - 10**5, edge + 10**5, 20_000),
            rng.integers(1_700_000_000_000_000_000, 1_800_000_000_000_000_000, 20_000),
            np.array([0, 1, -1, 999, -999, 2**53 - 1, 2**53, 2**53 + 1, 2**62]),
        ]
    )
    for origin in (0, EPOCH_ORIGIN_US):
        relative = ns - np.int64(origin) * 1000
        rest = np.fmod(relative, 1000)
        general = model._whole_plus_fraction(
            (relative - rest) // 1000, rest, np.full(ns.shape, 1000, np.int64)
        )
        assert np.array_equal(us_from_ns(ns, origin), general)
        small = ns[np.abs(ns) < 2**50]
        assert np.array_equal(us_from_ns(small, 0), small / 1000)  # exact: one rounding


def test_the_origin_applies_only_to_epoch_sized_values() -> None:
    assert time_origin_for([1736408883704643.212]) == EPOCH_ORIGIN_US
    assert time_origin_for([1e15]) == EPOCH_ORIGIN_US
    # a Kineto trace clock (4.2e12 µs), a synthetic test profile: left absolute
    assert time_origin_for([4203669603187.439, np.nan]) == 0
    assert time_origin_for([]) == 0
    clock = TimeBase()
    assert clock.from_text(pd.Series(["4203669603187.439"])).tolist() == [4203669603187.439]
    assert (clock.origin_us, clock.fixed) == (0, True)


def test_a_time_base_gives_every_table_of_a_profile_the_first_tables_origin() -> None:
    clock = TimeBase()
    assert not clock.fixed
    assert clock.from_text(pd.Series([None, np.nan])).isna().all()
    assert not clock.fixed  # nothing seen yet
    tasks = clock.from_text(pd.Series(["1736408883704643.212"]))
    assert clock.origin_us == EPOCH_ORIGIN_US
    steps = clock.from_ns(np.array([1736408883690000500]))
    assert tasks.iloc[0] - steps[0] == pytest.approx(14642.712, abs=2**-7)
    # later values are converted with the same origin, whatever their size
    assert clock.from_text(pd.Series(["100"])).tolist() == [100.0 - EPOCH_ORIGIN_US]
    given = TimeBase(0)
    assert given.from_ns(np.array([1736410576538298460])).tolist() == [1736410576538298.5]


def test_rebase_moves_start_and_end_between_origins() -> None:
    steps = pd.DataFrame({"step": [1], "start_us": [-5.0], "end_us": [10.0]})
    assert rebase_times(steps, EPOCH_ORIGIN_US, EPOCH_ORIGIN_US) is steps
    moved = rebase_times(steps, EPOCH_ORIGIN_US, 0)
    assert moved[["start_us", "end_us"]].values.tolist() == [
        [EPOCH_ORIGIN_US - 5.0, EPOCH_ORIGIN_US + 10.0]
    ]
    assert rebase_times(pd.DataFrame({"dur_us": [1.0]}), 0, EPOCH_ORIGIN_US)["dur_us"][0] == 1.0


def test_csv_time_columns_share_the_clock_and_keep_na(tmp_path: Path) -> None:
    first, second = tmp_path / "a.csv", tmp_path / "b.csv"
    first.write_text("Start Time(us),Name\n1736408883704643.212\t,k\nN/A,m\n", encoding="utf-8")
    second.write_text("Start Time(us),Name\n100.5\t,k\n", encoding="utf-8")
    columns = [CsvColumn("start_us", "Start Time(us)", "time"), CsvColumn("name", "Name", "text")]
    clock = TimeBase()
    a = read_csv_columns(first, columns, what="test", clock=clock)
    b = read_csv_columns(second, columns, what="test", clock=clock)
    assert a["start_us"].iloc[0] == 36408883704643.212
    assert np.isnan(a["start_us"].iloc[1])
    assert b["start_us"].tolist() == [100.5 - EPOCH_ORIGIN_US]  # the profile's one origin
    # alone, a small clock keeps its values
    assert read_csv_columns(second, columns, what="test")["start_us"].tolist() == [100.5]


def test_intervals_merge_relative_times_below_zero() -> None:
    # Profiles recorded before the origin (msprof_full_db: October 2023) have negative times.
    starts, ends = merge([-10.0, -8.0, -3.0, 5.0], [-7.0, -2.0, -1.0, 6.0])
    assert starts.tolist() == [-10.0, 5.0]
    assert ends.tolist() == [-1.0, 6.0]
    assert union_length([-1779188.5, -1779180.0], [-1779185.0, -1779179.0]) == 4.5


@settings(max_examples=300, deadline=None, database=None)
@given(
    whole_digits=st.integers(1, 19),
    fraction_digits=st.one_of(st.none(), st.integers(0, 17)),
    rows=st.integers(1, 30),
    padding=st.lists(st.sampled_from([0, ord(" "), ord("\t"), ord("\r"), ord("\n")]), max_size=3),
    damage=st.one_of(
        st.none(), st.tuples(st.integers(0, 29), st.integers(0, 40), st.integers(0, 255))
    ),
    seed=st.integers(0, 2**32 - 1),
)
def test_a_column_of_one_shape_parses_as_row_by_row(
    whole_digits: int,
    fraction_digits: int | None,
    rows: int,
    padding: list[int],
    damage: tuple[int, int, int] | None,
    seed: int,
) -> None:
    # A column whose stamps share one shape is checked and parsed in whole blocks
    # (model._one_shape_rows); any byte out of place leaves it to the parse by shapes.
    rng = np.random.default_rng(seed)
    width = whole_digits + (0 if fraction_digits is None else 1 + fraction_digits)
    chars = np.zeros((rows, width + len(padding)), dtype=np.uint8)
    chars[:, :width] = rng.integers(ord("0"), ord("9") + 1, (rows, width))
    if fraction_digits is not None:
        chars[:, whole_digits] = ord(".")
    chars[:, width:] = padding
    shaped = model._one_shape_rows(chars)
    if whole_digits <= 18:
        assert shaped is not None  # the fast path is taken when it should be
    if damage is not None:
        row, at, byte = damage
        chars[row % rows, at % chars.shape[1]] = byte
    expected = model._rows_by_shape(chars)
    got = model._plain_decimal_rows(chars)
    for mine, theirs in zip(got, expected):
        assert mine.tolist() == theirs.tolist()

"""The msprof text-export reader against the real msprof export in tests/data/msprof.

Expected numbers were read off the CSV files by hand (cat -A / awk), independent of perfgate;
each is commented with its origin. Sliced, multi-export, legacy and multi-process layouts are
built in ``tmp_path`` from copies of the real files. The step_trace CSV is synthetic (see
tests/data/msprof/README.md): no real one exists. Time stamps are epoch µs: the tables hold
µs since EPOCH_ORIGIN_US, converted exactly from the cells' text.
"""

from __future__ import annotations

import shutil
from decimal import Decimal
from pathlib import Path

import pandas as pd
import pytest

from perfgate.analysis.metrics import analyze
from perfgate.errors import ProfileError
from perfgate.ingest import load_profile, msprof
from perfgate.ingest.msprof import ExportFile, newest_export, parse_export_name
from perfgate.model import EPOCH_ORIGIN_US, Profile

DATA = Path(__file__).parent / "data" / "msprof"
PROF = DATA / "ascend-msprof-skill" / "PROF_000001_20260605161708478_FRJKORBPFMHQMGLA"
OUTPUT = PROF / "mindstudio_profiler_output"
STAMP = "20260605161737"
OP_SUMMARY = OUTPUT / f"op_summary_{STAMP}.csv"
TASK_TIME = OUTPUT / f"task_time_{STAMP}.csv"
SYNTHETIC_STEP_TRACE = DATA / "synthetic" / f"step_trace_{STAMP}.csv"

# Stored times are the float64 nearest to the exact relative value.
EXACT = 1e-6


def relative_us(epoch_us: str) -> float:
    """An epoch-µs time stamp as the readers store it: µs since EPOCH_ORIGIN_US, exactly."""
    return float(Decimal(epoch_us) - EPOCH_ORIGIN_US)


# op_summary_20260605161737.csv: Task Start Time(us) / Task Duration(us) of Task ID 0, 1, 2
KERNELS = (
    (relative_us("1780676244313289.000"), 87139.380),
    (relative_us("1780676244407387.120"), 86808.420),
    (relative_us("1780676244500755.880"), 86846.720),
)


def read(path: Path) -> Profile:
    assert msprof.detect(path), f"msprof.detect should recognise {path}"
    return msprof.read(path)


def copy_prof(target: Path) -> Path:
    shutil.copytree(PROF, target)
    return target


def kernels(profile: Profile) -> pd.DataFrame:
    return profile.tasks[profile.tasks["core"] == "MIX_AIC"].sort_values("start_us")


# ----------------------------------------------------------------------------- the real export


def test_prof_directory_gives_three_kernels_plus_the_runtime_tasks_of_task_time() -> None:
    profile = read(PROF)
    assert profile.source == "msprof"
    tasks = profile.tasks
    # op_summary: 3 MIX_AIC rows. task_time: 7 rows = the same 3 kernels + PROFILING_ENABLE,
    # TASK_TIMEOUT_SET, EVENT_RECORD, PROFILING_DISABLE; the profiler's own ENABLE/DISABLE are
    # dropped, the kernels are not counted twice.
    assert len(tasks) == 5
    assert tasks["core"].value_counts().to_dict() == {
        "MIX_AIC": 3,
        "TASK_TIMEOUT_SET": 1,
        "EVENT_RECORD": 1,
    }
    assert tasks.groupby("core")["category"].first().to_dict() == {
        "MIX_AIC": "compute",
        "TASK_TIMEOUT_SET": "other",
        "EVENT_RECORD": "other",
    }
    assert set(tasks["rank"]) == {0}  # Device_id 0
    assert profile.metadata["ranks"] == [0]
    assert profile.metadata["export_type"] == "text"
    assert profile.metadata["time_origin_us"] == EPOCH_ORIGIN_US


def test_kernel_rows_keep_op_summary_times_not_task_time_ones() -> None:
    rows = kernels(read(PROF))
    assert list(rows["name"]) == ["main_kernel"] * 3
    assert list(rows["op_type"]) == ["main_kernel"] * 3
    assert list(rows["stream"]) == ["1756"] * 3
    for (_, row), (start, dur) in zip(rows.iterrows(), KERNELS):
        assert row["start_us"] == pytest.approx(start, abs=EXACT)
        # op_summary durations; task_time has 87141.960, 86810.080, 86849.340 for the same tasks
        assert row["dur_us"] == pytest.approx(dur)
    # op_statistic_20260605161737.csv: 0,main_kernel,MIX_AIC,3,260794.52 — the same total
    assert rows["dur_us"].sum() == pytest.approx(260794.52)


def test_task_time_only_tasks_come_with_their_type_as_name() -> None:
    tasks = read(PROF).tasks.set_index("core")
    # task_time: 0,N/A,TASK_TIMEOUT_SET,1754,5,93.980,1780676228931378.960\t,…
    timeout = tasks.loc["TASK_TIMEOUT_SET"]
    assert (timeout["name"], timeout["op_type"], timeout["stream"]) == (
        "TASK_TIMEOUT_SET",
        "TASK_TIMEOUT_SET",
        "1754",
    )
    assert timeout["start_us"] == pytest.approx(relative_us("1780676228931378.960"), abs=EXACT)
    assert timeout["dur_us"] == pytest.approx(93.98)
    # 0,N/A,EVENT_RECORD,1754,6,0.000,1780676228931472.960\t,…
    assert tasks.loc["EVENT_RECORD", "dur_us"] == 0.0


def test_no_step_trace_means_one_window_with_a_note() -> None:
    profile = read(PROF)
    assert profile.steps.empty
    assert "no step marks: analysed as one window" in profile.notes
    assert profile.tasks["step"].isna().all()


def test_op_statistic_is_the_profiles_op_statistic_table() -> None:
    statistic = read(PROF).op_statistic
    assert statistic is not None
    assert statistic.to_dict("records") == [
        {
            "rank": 0,
            "op_type": "main_kernel",
            "core": "MIX_AIC",
            "category": "compute",
            "count": 3,
            "total_us": 260794.52,
        }
    ]


def test_output_folder_parent_folder_and_prof_folder_read_the_same(tmp_path: Path) -> None:
    parent = tmp_path / "run"
    copy_prof(parent / PROF.name)
    reference = read(PROF).tasks
    for path in (OUTPUT, parent):
        pd.testing.assert_frame_equal(read(path).tasks, reference)


def test_a_lone_op_summary_file_gives_only_its_kernels() -> None:
    profile = read(OP_SUMMARY)
    assert len(profile.tasks) == 3
    assert set(profile.tasks["core"]) == {"MIX_AIC"}
    assert any("task_time" in note for note in profile.notes)


# ----------------------------------------------------------------------------- file layouts


def test_export_file_names_follow_msprof_grammar() -> None:
    merged = parse_export_name(Path(f"op_summary_{STAMP}.csv"))
    assert merged == ExportFile(Path(f"op_summary_{STAMP}.csv"), "op_summary", "", None, STAMP)
    sliced = parse_export_name(Path("op_summary_slice_1_20260605161802.csv"))
    assert sliced is not None and (sliced.slice, sliced.stamp) == (1, "20260605161802")
    legacy = parse_export_name(Path("task_time_3_1_20260605161737.csv"))
    assert legacy is not None and (legacy.kind, legacy.device) == ("task_time", 3)
    assert parse_export_name(Path("step_trace_time.csv")) is None
    assert parse_export_name(Path("op_summary.csv")) is None


def test_newest_export_keeps_slices_stamped_later_than_their_first_file() -> None:
    def f(name: str) -> ExportFile:
        parsed = parse_export_name(Path(name))
        assert parsed is not None
        return parsed

    old = f("op_summary_20260101000000.csv")
    first = f("op_summary_slice_0_20260605161737.csv")
    second = f("op_summary_slice_1_20260605161740.csv")  # written 3 s later
    chosen, older = newest_export([second, old, first])
    assert chosen == [first, second]
    assert older == [old]


def test_sliced_op_summary_files_are_merged(tmp_path: Path) -> None:
    folder = tmp_path / "PROF_1" / "mindstudio_profiler_output"
    folder.mkdir(parents=True)
    lines = OP_SUMMARY.read_bytes().splitlines(keepends=True)
    (folder / "op_summary_slice_0_20260605161737.csv").write_bytes(b"".join(lines[:3]))
    (folder / "op_summary_slice_1_20260605161739.csv").write_bytes(lines[0] + lines[3])
    shutil.copy(TASK_TIME, folder)
    rows = kernels(read(tmp_path / "PROF_1"))
    assert list(rows["dur_us"]) == pytest.approx([dur for _, dur in KERNELS])
    assert len(read(tmp_path / "PROF_1").tasks) == 5


def test_of_several_exports_only_the_newest_is_read(tmp_path: Path) -> None:
    prof = copy_prof(tmp_path / PROF.name)
    folder = prof / "mindstudio_profiler_output"
    # An older export with one kernel whose duration reads 1.000.
    lines = OP_SUMMARY.read_text().splitlines(keepends=True)
    older_row = lines[1].replace(",87139.380,", ",1.000,")
    (folder / "op_summary_20260601000000.csv").write_text(lines[0] + older_row)
    profile = read(prof)
    assert list(kernels(profile)["dur_us"]) == pytest.approx([dur for _, dur in KERNELS])
    assert any("op_summary_20260601000000.csv" in note for note in profile.notes)


def test_older_device_summary_layout_takes_the_rank_from_the_device_folder(
    tmp_path: Path,
) -> None:
    summary = tmp_path / "PROF_000002_x" / "device_3" / "summary"
    summary.mkdir(parents=True)
    (tmp_path / "PROF_000002_x" / "device_3" / "timeline").mkdir()
    # Older op_summary/task_time without Device_id: drop the first column.
    for source, name in ((OP_SUMMARY, "op_summary"), (TASK_TIME, "task_time")):
        table = pd.read_csv(source, dtype=str, keep_default_na=False)
        table.drop(columns="Device_id").to_csv(summary / f"{name}_{STAMP}.csv", index=False)
    profile = read(tmp_path / "PROF_000002_x")
    assert profile.metadata["ranks"] == [3]
    assert len(profile.tasks) == 5
    assert read(summary).metadata["ranks"] == [3]


def test_several_prof_directories_are_several_ranks(tmp_path: Path) -> None:
    copy_prof(tmp_path / "PROF_000001_a")
    second = copy_prof(tmp_path / "PROF_000002_b") / "mindstudio_profiler_output"
    for name in (OP_SUMMARY.name, TASK_TIME.name):
        lines = (second / name).read_text().splitlines(keepends=True)
        (second / name).write_text(lines[0] + "".join("1" + line[1:] for line in lines[1:]))
    profile = read(tmp_path)
    assert profile.metadata["ranks"] == [0, 1]
    assert profile.tasks.groupby("rank").size().to_dict() == {0: 5, 1: 5}


def test_two_runs_of_one_device_side_by_side_are_refused(tmp_path: Path) -> None:
    # Two msprof runs into one directory were read as one rank: a single "step" spanning
    # both runs and the gap between them, utilization near 0%, and not a word.
    first = copy_prof(tmp_path / "PROF_000001_20261207022019882_HXRXBFPGDEFKBZZX")
    second = copy_prof(tmp_path / "PROF_000001_20261207022021194_XRWIDMKZAJPNUOND")
    with pytest.raises(ProfileError) as error:
        read(tmp_path)
    assert str(error.value) == (
        f"{second}: device 0 is also in {first.name}: two msprof runs in one directory "
        "(expected one PROF_* directory per device (give the path of the run to read))"
    )
    assert read(second).metadata["ranks"] == [0]


def test_a_communication_op_listed_in_both_files_is_counted_once(tmp_path: Path) -> None:
    # Constructed from the real rows: op_summary writes communication ops with Task/Stream ID
    # N/A, so the task_time copy of such an op is matched by name and overlapping time.
    folder = copy_prof(tmp_path / PROF.name) / "mindstudio_profiler_output"
    cells = OP_SUMMARY.read_text().splitlines()[1].split(",")
    # Task ID, Stream ID, Op Name, OP Type, OP State, Task Type, Task Start Time, Duration
    cells[2:10] = [
        *("N/A", "N/A", "hcom_allReduce__1_0_1", "hcom_allReduce_", "N/A"),
        *("COMMUNICATION", "1780676244600000.000\t", "50.000"),
    ]
    assert len(cells) == 46
    with (folder / OP_SUMMARY.name).open("a") as handle:
        handle.write(",".join(cells) + "\n")
    with (folder / TASK_TIME.name).open("a") as handle:
        handle.write(
            "0,hcom_allReduce__1_0_1,COMMUNICATION,1757,9,49.000,"
            "1780676244600001.000\t,1780676244600050.000\t\n"
        )
    tasks = read(folder).tasks
    assert tasks["category"].value_counts().to_dict() == {"compute": 3, "other": 2, "comm": 1}
    assert tasks.loc[tasks["category"] == "comm", "dur_us"].tolist() == [50.0]


def test_synthetic_step_trace_gives_iteration_windows(tmp_path: Path) -> None:
    prof = copy_prof(tmp_path / PROF.name)
    shutil.copy(SYNTHETIC_STEP_TRACE, prof / "mindstudio_profiler_output")
    profile = read(prof)
    steps = profile.steps
    # window = [Iteration End − Iteration Time, Iteration End] (README table)
    assert list(steps["step"]) == [1, 2, 3]
    assert list(steps["start_us"]) == pytest.approx(
        [relative_us(t) for t in ("1780676244310000", "1780676244405000", "1780676244498000")],
        abs=EXACT,
    )
    assert list(steps["end_us"]) == pytest.approx(
        [relative_us(t) for t in ("1780676244405000", "1780676244498000", "1780676244590000")],
        abs=EXACT,
    )
    assert "no step marks: analysed as one window" not in profile.notes
    # each kernel lies inside its iteration
    for (start, dur), (_, step) in zip(KERNELS, steps.iterrows()):
        assert step["start_us"] <= start and start + dur <= step["end_us"]


def test_step_trace_of_several_graphs_keeps_the_longest_running_one(tmp_path: Path) -> None:
    prof = copy_prof(tmp_path / PROF.name)
    text = SYNTHETIC_STEP_TRACE.read_text()
    # A second graph (Model ID 2) with two 10 µs iterations.
    extra = "".join(
        f"0,{i},N/A,N/A,{1780676244600000 + 10 * i}.000\t,10.000,N/A,N/A,N/A,2,N/A,N/A\n"
        for i in (1, 2)
    )
    (prof / "mindstudio_profiler_output" / SYNTHETIC_STEP_TRACE.name).write_text(text + extra)
    profile = read(prof)
    assert list(profile.steps["step"]) == [1, 2, 3]
    assert profile.steps["end_us"].iloc[-1] == pytest.approx(
        relative_us("1780676244590000"), abs=EXACT
    )
    assert any("several Model IDs" in note for note in profile.notes)


# ----------------------------------------------------------------------------- detection, errors


def test_folders_without_summary_csvs_are_not_msprof(tmp_path: Path) -> None:
    db_only = tmp_path / "PROF_000003_db" / "mindstudio_profiler_output"
    db_only.mkdir(parents=True)
    (tmp_path / "PROF_000003_db" / "msprof_20260605161737.db").write_bytes(b"SQLite format 3\x00")
    assert not msprof.detect(tmp_path / "PROF_000003_db")
    assert not msprof.detect(db_only)
    assert not msprof.detect(tmp_path)
    with pytest.raises(ProfileError, match="holds no op_summary") as error:
        msprof.read(tmp_path / "PROF_000003_db")
    assert "mindstudio_profiler_output" in str(error.value)


def test_a_collection_never_exported_says_how_to_export_it(tmp_path: Path) -> None:
    # What msprof leaves when its automatic export failed: raw data, no summary folder.
    prof = tmp_path / "PROF_000001_20261207021457377_MFFTAYJCYCAKYTVE"
    for raw in ("device_0/data/ts_track.data.0.slice_0", "host/data/api_event.data.0.slice_0"):
        (prof / raw).parent.mkdir(parents=True)
        (prof / raw).write_bytes(b"\x00" * 64)
    with pytest.raises(ProfileError) as error:
        load_profile(prof)
    # It was "not a profile layout perfgate knows", with the list of every layout.
    assert str(error.value) == (
        f"{prof}: msprof collected data (device_N/, host/) but never exported it (expected an "
        f"export: run `msprof --export=on --output={prof}`, then read it again)"
    )
    shutil.copytree(prof, tmp_path / "PROF_000002_20261207021501000_ABCDEFGHIJKLMNOP")
    with pytest.raises(ProfileError) as error:
        load_profile(tmp_path)
    assert str(error.value) == (
        f"{tmp_path}: msprof collected data in {prof.name}, PROF_000002_20261207021501000_"
        "ABCDEFGHIJKLMNOP (device_N/, host/) but never exported it (expected an export: run "
        f"`msprof --export=on --output={prof}` for each PROF_* directory, then read it again)"
    )
    # An exported collection beside it is read as before.
    copy_prof(tmp_path / PROF.name)
    assert load_profile(tmp_path).source == "msprof"


def test_a_truncated_op_summary_names_file_and_column(tmp_path: Path) -> None:
    folder = copy_prof(tmp_path / PROF.name) / "mindstudio_profiler_output"
    data = OP_SUMMARY.read_bytes()
    # Cut the third row right after its Task Start Time cell.
    third_row = data.index(b"0,4294967295,2,1756")
    cut_at = data.index(b"\t,", third_row) + 2
    (folder / OP_SUMMARY.name).write_bytes(data[:cut_at])
    with pytest.raises(ProfileError, match="data row 3 has no value") as error:
        msprof.read(folder)
    message = str(error.value)
    assert OP_SUMMARY.name in message and "'Task Duration(us)'" in message


def test_a_task_time_cut_inside_its_last_cell_is_refused(tmp_path: Path) -> None:
    # Cut inside the last row's last time cell (a killed writer): every cell is there, so it
    # read as complete — and a cut a third of the way in read 0 copies, an "improvement".
    folder = copy_prof(tmp_path / PROF.name) / "mindstudio_profiler_output"
    data = TASK_TIME.read_bytes()
    last_cell = data.rstrip(b"\t\n").rindex(b",") + 1
    (folder / TASK_TIME.name).write_bytes(data[: last_cell + 7])  # "1780676" of the stamp
    with pytest.raises(ProfileError) as error:
        msprof.read(folder)
    message = str(error.value)
    assert message.startswith(f"{folder / TASK_TIME.name}: its last line has no line break")
    assert "cell 8 ('1780676') lacks the TAB that ends the time cells" in message
    assert message.endswith("the file looks truncated (expected an msprof task_time CSV)")
    # The same file whole but for its final line break reads as before.
    (folder / TASK_TIME.name).write_bytes(data.rstrip(b"\n"))
    assert len(msprof.read(folder).tasks) == len(msprof.read(PROF).tasks)


def test_an_op_summary_without_task_duration_names_the_column(tmp_path: Path) -> None:
    folder = copy_prof(tmp_path / PROF.name) / "mindstudio_profiler_output"
    target = folder / OP_SUMMARY.name
    target.write_bytes(target.read_bytes().replace(b"Task Duration(us)", b"Task Duration", 1))
    with pytest.raises(ProfileError, match=r"column 'Task Duration\(us\)'") as error:
        msprof.read(folder)
    assert str(target) in str(error.value)


def test_a_foreign_csv_with_an_op_summary_name_is_refused(tmp_path: Path) -> None:
    csv = tmp_path / f"op_summary_{STAMP}.csv"
    csv.write_text("epoch,loss\n1,0.5\n")
    assert msprof.detect(csv)  # the name says op_summary…
    with pytest.raises(ProfileError, match="column 'Op Name'") as error:  # …the header does not
        msprof.read(csv)
    assert str(csv) in str(error.value) and "op_summary" in str(error.value)


def test_an_empty_op_summary_file_is_an_error_naming_it(tmp_path: Path) -> None:
    folder = copy_prof(tmp_path / PROF.name) / "mindstudio_profiler_output"
    (folder / OP_SUMMARY.name).write_bytes(b"")
    with pytest.raises(ProfileError, match="file is empty") as error:
        msprof.read(folder)
    assert OP_SUMMARY.name in str(error.value)


def test_torch_npu_layouts_are_not_msprof() -> None:
    torch_npu_data = Path(__file__).parent / "data" / "torch_npu" / "ascend-msinsight"
    assert not msprof.detect(torch_npu_data / "pytorch_text_level1_rank0_ascend_pt")
    assert not msprof.detect(
        torch_npu_data / "pytorch_text_level1_rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    )


def test_an_op_statistic_row_with_op_type_na_reads_as_its_core_type(tmp_path: Path) -> None:
    prof = copy_prof(tmp_path / PROF.name)
    statistic_csv = prof / "mindstudio_profiler_output" / f"op_statistic_{STAMP}.csv"
    with statistic_csv.open("a") as handle:
        handle.write("0,N/A,MEMCPY_ASYNC,1,301.5,301.5,301.5,301.5,0.1\n")
    statistic = read(prof).op_statistic
    assert statistic is not None
    assert statistic[["op_type", "core", "category", "count"]].values.tolist() == [
        ["main_kernel", "MIX_AIC", "compute", 3],
        ["MEMCPY_ASYNC", "MEMCPY_ASYNC", "copy", 1],
    ]


def test_a_damaged_op_statistic_is_skipped_with_a_note(tmp_path: Path) -> None:
    prof = copy_prof(tmp_path / PROF.name)
    statistic_csv = prof / "mindstudio_profiler_output" / f"op_statistic_{STAMP}.csv"
    statistic_csv.write_text("Device_id,OP Type,Core Type,Count\n0,main_kernel,MIX_AIC,3\n")
    profile = read(prof)
    assert profile.op_statistic is None
    assert len(kernels(profile)) == 3
    [note] = [n for n in profile.notes if statistic_csv.name in n]
    assert note.startswith(f"{statistic_csv}: column 'Total Time(us)': no such column")


def test_op_summary_rows_without_task_id_are_not_counted_again_from_task_time(
    tmp_path: Path,
) -> None:
    # Task ID N/A in the three op_summary kernel rows (Stream ID 1756 kept): task_time lists
    # the same three kernels (task_id 0, 1, 2, stream 1756, starts 1.58 µs earlier).
    folder = copy_prof(tmp_path / PROF.name) / "mindstudio_profiler_output"
    lines = OP_SUMMARY.read_text().splitlines()
    rows = [line.split(",") for line in lines[1:]]
    for cells in rows:
        cells[2] = "N/A"  # Task ID
    (folder / OP_SUMMARY.name).write_text(
        "\n".join([lines[0], *(",".join(c) for c in rows)]) + "\n"
    )
    profile = read(folder)
    assert len(kernels(profile)) == 3  # not 6
    assert kernels(profile)["dur_us"].tolist() == [dur for _, dur in KERNELS]


def test_a_task_time_kernel_on_another_stream_is_another_task(tmp_path: Path) -> None:
    # The same kernel name and an overlapping time, but stream 1757 and Task ID known on
    # both sides and different: two tasks.
    folder = copy_prof(tmp_path / PROF.name) / "mindstudio_profiler_output"
    with (folder / TASK_TIME.name).open("a") as handle:
        handle.write(
            "0,main_kernel,MIX_AIC,1757,0,100.000,1780676244313300.000\t,1780676244313400.000\t\n"
        )
    assert len(kernels(read(folder))) == 4


def test_bookkeeping_tasks_before_the_work_are_not_in_the_operator_table() -> None:
    # No step marks: the window spans the 3 main_kernel tasks (274,313.594 µs). msprof's
    # TASK_TIMEOUT_SET (93.98 µs) and EVENT_RECORD ran about 15.4 s before it; they used to
    # be listed with a share of a window they are not in.
    analysis = analyze(msprof.read(PROF))
    assert analysis.per_step["step_time_us"].tolist() == [pytest.approx(274313.594, abs=0.05)]
    assert analysis.operators[["op_type", "core", "calls_per_step"]].values.tolist() == [
        ["main_kernel", "MIX_AIC", 3.0]
    ]
    assert (
        "2 task(s) outside the span of the work (first to last compute, copy or communication "
        "task) are not counted"
    ) in analysis.notes

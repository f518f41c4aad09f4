"""The SQLite-export reader (msprof_*.db, ascend_pytorch_profiler_*.db) on real exports.

Fixtures (copied byte-for-byte from xiaobingling93-pixel/Ascend-msinsight @ 91d1c4ec, see
/work/shared/fixtures/real/SOURCES.md) under tests/data/ascend_db/:

* pytorch_db_level1_rank0_ascend_pt/ — torch_npu export_type=db, Level1, one step (50);
* msprof_full_db/msprof_0.db — Insight's server test database (msprof schema; its TASK and
  MSTX rows come from different runs, COMMUNICATION_OP is empty);
* pytorch_text_level1_rank0_ascend_pt/ — kernel_details.csv and step_trace_time.csv of another
  run of the same torch_npu model and configuration (text export), for the structure check.

Every expected number was worked out with the sqlite3 shell on the fixture; the query is in
the comment next to it. Times in the databases are epoch ns; the reader gives µs since
EPOCH_ORIGIN_US (metadata["time_origin_us"]), exactly: the expected values are computed with
Decimal from the ns in the database.
"""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import pandas as pd
import pytest

from perfgate.errors import ProfileError
from perfgate.ingest import ascend_db, load_profile
from perfgate.intervals import union_length
from perfgate.model import BREAKDOWN_COLUMNS, EPOCH_ORIGIN_US, NO_STEP_MARKS_NOTE, Profile

DATA = Path(__file__).parent / "data" / "ascend_db"
TORCH_PT = DATA / "pytorch_db_level1_rank0_ascend_pt"
TORCH_OUTPUT = TORCH_PT / "ASCEND_PROFILER_OUTPUT"
TORCH_DB = TORCH_OUTPUT / "ascend_pytorch_profiler_0.db"
ANALYSIS_DB = TORCH_OUTPUT / "analysis.db"
MSPROF_DIR = DATA / "msprof_full_db"
MSPROF_DB = MSPROF_DIR / "msprof_0.db"
TEXT_OUTPUT = DATA / "pytorch_text_level1_rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT"

# Stored times are the float64 nearest to the exact relative value: equal to within rounding.
EXACT = 1e-6


def relative_us(epoch_us: str) -> float:
    """An epoch-µs time stamp as the readers store it: µs since EPOCH_ORIGIN_US, exactly."""
    return float(Decimal(epoch_us) - EPOCH_ORIGIN_US)


@pytest.fixture(scope="module")
def torch_db() -> Profile:
    return ascend_db.read(TORCH_PT)


@pytest.fixture(scope="module")
def msprof_db() -> Profile:
    return ascend_db.read(MSPROF_DIR)


@pytest.fixture()
def writable_msprof(tmp_path: Path) -> Iterator[tuple[Path, sqlite3.Connection]]:
    """A copy of msprof_0.db in tmp_path and a connection to change it.

    The connection stays open while the test reads, so committed edits sit in the -wal file
    (the exports are WAL databases), as in an export still being written: the reader must
    see them.
    """
    copy = tmp_path / "msprof_0.db"
    shutil.copyfile(MSPROF_DB, copy)
    conn = sqlite3.connect(copy)
    try:
        yield copy, conn
    finally:
        conn.close()


# ----------------------------------------------------------------------------- detection


def test_detect_takes_both_database_files_and_their_directories() -> None:
    assert ascend_db.detect(TORCH_DB)
    assert ascend_db.detect(TORCH_OUTPUT)
    assert ascend_db.detect(TORCH_PT)
    assert ascend_db.detect(MSPROF_DB)
    assert ascend_db.detect(MSPROF_DIR)


def test_detect_leaves_analysis_db_and_text_exports_to_others() -> None:
    assert not ascend_db.detect(ANALYSIS_DB)
    assert not ascend_db.detect(TEXT_OUTPUT)
    assert not ascend_db.detect(TEXT_OUTPUT.parent)
    assert not ascend_db.detect(TEXT_OUTPUT / "kernel_details.csv")


def test_detect_leaves_an_ascend_pt_directory_with_both_exports_to_the_csv_reader(
    tmp_path: Path,
) -> None:
    output = tmp_path / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    output.mkdir(parents=True)
    shutil.copyfile(TORCH_DB, output / TORCH_DB.name)
    assert ascend_db.detect(output.parent)
    shutil.copyfile(TEXT_OUTPUT / "kernel_details.csv", output / "kernel_details.csv")
    assert not ascend_db.detect(output.parent)
    assert not ascend_db.detect(output)


def test_detect_leaves_a_prof_directory_with_a_csv_export_to_the_msprof_reader(
    tmp_path: Path,
) -> None:
    prof = tmp_path / "PROF_000001_20231025000000000_ABC"
    prof.mkdir()
    shutil.copyfile(MSPROF_DB, prof / "msprof_20231025000000.db")
    assert ascend_db.detect(prof)
    (prof / "mindstudio_profiler_output").mkdir()
    (prof / "mindstudio_profiler_output" / "op_summary_20231025000000.csv").write_text("x\n")
    assert not ascend_db.detect(prof)


def test_a_prof_directory_with_several_exports_reads_the_newest(tmp_path: Path) -> None:
    prof = tmp_path / "PROF_000001_20231025000000000_ABC"
    prof.mkdir()
    shutil.copyfile(MSPROF_DB, prof / "msprof_20231025000000.db")
    shutil.copyfile(MSPROF_DB, prof / "msprof_20231026000000.db")
    profile = ascend_db.read(prof)
    assert profile.notes[0] == f"{prof} holds 2 msprof databases; read msprof_20231026000000.db"


def test_the_folder_above_one_export_reads_that_export(tmp_path: Path) -> None:
    # msprof --output=out writes out/PROF_*/; torch_npu's dir_name holds *_ascend_pt folders.
    for export in (MSPROF_DIR, TORCH_PT):
        out = tmp_path / export.name / "out"
        folder = "PROF_000001_20231025000000000_ABC" if export == MSPROF_DIR else export.name
        shutil.copytree(export, out / folder)
        (out / "notes").mkdir()  # other folders are no export
        got, expected = load_profile(out), load_profile(export)
        assert got.source == expected.source
        assert len(got.tasks) == len(expected.tasks) > 0
        assert got.tasks["dur_us"].sum() == expected.tasks["dur_us"].sum()


def test_the_folder_above_several_exports_is_refused_naming_them(tmp_path: Path) -> None:
    for n in (1, 2):
        shutil.copytree(MSPROF_DIR, tmp_path / f"PROF_00000{n}_20231025000000000_ABC")
    with pytest.raises(ProfileError) as refused:
        load_profile(tmp_path)
    assert str(refused.value) == (
        f"{tmp_path}: holds 2 SQLite exports (PROF_000001_20231025000000000_ABC/msprof_0.db, "
        "PROF_000002_20231025000000000_ABC/msprof_0.db); perfgate reads one at a time "
        "(expected one PROF_* or *_ascend_pt directory, or one .db file)"
    )


def test_reading_leaves_nothing_beside_the_database(tmp_path: Path) -> None:
    # The exports are WAL databases; a plain read-only open would leave -wal/-shm files.
    shutil.copyfile(MSPROF_DB, tmp_path / MSPROF_DB.name)
    ascend_db.read(tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == [MSPROF_DB.name]


def test_load_profile_routes_the_exports_to_this_reader() -> None:
    # The torch_npu and msprof CSV readers are asked first; they must leave these alone.
    assert load_profile(TORCH_PT).source == "torch_npu_db"
    assert load_profile(MSPROF_DIR).source == "msprof_db"
    with pytest.raises(ProfileError, match="not a profile layout"):
        load_profile(ANALYSIS_DB)


# ----------------------------------------------------------------------------- torch_npu db


def test_torch_npu_db_keeps_one_row_per_kernel_copy_event_and_collective(
    torch_db: Profile,
) -> None:
    assert torch_db.source == "torch_npu_db"
    # TASK has 552 rows. Left out: 296 per-task HCCL rows (in COMMUNICATION_TASK_INFO), the 4
    # AI_CORE tasks sharing a COMMUNICATION_OP connectionId, and 13 MIX parents (no
    # COMPUTE_TASK_INFO, same streamId/taskId/connectionId as a sub-task that has it);
    # added: the 4 COMMUNICATION_OP rows. 552 - 296 - 4 - 13 + 4 = 243.
    assert len(torch_db.tasks) == 243
    # compute: COMPUTE_TASK_INFO taskType AI_CORE 23 + AI_VECTOR_CORE 149 + MIX_AIV 13 +
    # DSA_SQE 2; copy: TASK taskType MEMCPY_ASYNC 24; other: EVENT_RECORD 16, EVENT_WAIT 10,
    # PROFILING_ENABLE 1, PROFILING_DISABLE 1.
    assert torch_db.tasks["category"].value_counts().to_dict() == {
        "compute": 187,
        "other": 28,
        "copy": 24,
        "comm": 4,
    }
    # The profiler's Computing of step 50 (8903.431 µs, OVERLAP_ANALYSIS and
    # step_trace_time) is the union of these compute tasks to the ns: DSA_SQE counted
    # (without its 2 tasks, 8897.971; start times are kept to 1/64 µs).
    compute = torch_db.tasks[torch_db.tasks["category"] == "compute"]
    assert union_length(
        compute["start_us"], compute["start_us"] + compute["dur_us"]
    ) == pytest.approx(8903.431, abs=0.06)
    assert torch_db.tasks.groupby("core").size().to_dict() == {
        "AI_CORE": 23,
        "AI_VECTOR_CORE": 149,
        "DSA_SQE": 2,
        "EVENT_RECORD": 16,
        "EVENT_WAIT": 10,
        "HCCL": 4,
        "MEMCPY_ASYNC": 24,
        "MIX_AIV": 13,
        "PROFILING_DISABLE": 1,
        "PROFILING_ENABLE": 1,
    }


def test_torch_npu_db_kernel_times_are_converted_from_ns_to_us(torch_db: Profile) -> None:
    # SELECT t.startNs, t.endNs, i.value FROM TASK t JOIN COMPUTE_TASK_INFO c USING
    # (globalTaskId) JOIN STRING_IDS n ON n.id = c.name JOIN STRING_IDS i ON i.id =
    # c.inputShapes WHERE n.value = 'trans_TransData_0'
    # → 1736410576404465403, 1736410576404519164, '"32,3,224,224"'
    row = torch_db.tasks[torch_db.tasks["name"] == "trans_TransData_0"].iloc[0]
    assert row["op_type"] == "TransData"
    assert row["core"] == "AI_VECTOR_CORE"
    assert row["category"] == "compute"
    assert row["start_us"] == pytest.approx(relative_us("1736410576404465.403"), abs=EXACT)
    assert row["dur_us"] == pytest.approx(53.761, abs=1e-9)
    assert row["input_shapes"] == "32,3,224,224"
    assert row["stream"] == "2"
    assert row["rank"] == 0


def test_torch_npu_db_mix_kernel_is_its_sub_task_not_its_parent(torch_db: Profile) -> None:
    # NLLLoss: parent TASK 62 (KERNEL_AICORE, no COMPUTE_TASK_INFO, 17140 ns) and sub-task 58
    # (MIX_AIV, 1736410576421824970..1736410576421838990 = 14020 ns), both stream 2, taskId
    # 11112, connectionId 1115.
    nll = torch_db.tasks[torch_db.tasks["op_type"] == "NLLLoss"]
    assert len(nll) == 1
    assert nll.iloc[0]["core"] == "MIX_AIV"
    assert nll.iloc[0]["dur_us"] == pytest.approx(14.020, abs=1e-9)
    assert not (torch_db.tasks["core"] == "KERNEL_AICORE").any()


def test_torch_npu_db_communication_is_one_task_per_collective(torch_db: Profile) -> None:
    # SELECT n.value, startNs, endNs - startNs FROM COMMUNICATION_OP JOIN STRING_IDS n ON
    # n.id = opName ORDER BY startNs; opType → 'hcom_allReduce_' for all four.
    comm = torch_db.tasks[torch_db.tasks["category"] == "comm"]
    assert comm["name"].tolist() == [
        "hcom_allReduce__210_0_1",
        "hcom_allReduce__210_1_1",
        "hcom_allReduce__210_2_1",
        "hcom_allReduce__210_3_1",
    ]
    assert (comm["op_type"] == "hcom_allReduce_").all()
    assert (comm["core"] == "HCCL").all()
    assert comm["dur_us"].tolist() == pytest.approx([88750.993, 2180.324, 2412.628, 8764.155])
    assert comm.iloc[0]["start_us"] == pytest.approx(relative_us("1736410576431631.806"), abs=EXACT)
    # The per-task rows (SDMA, Notify Wait, Write Value) and the op's own AI_CORE task are
    # not also counted.
    assert not torch_db.tasks["core"].isin(["SDMA", "Notify Wait", "Write Value"]).any()
    assert torch_db.tasks["dur_us"].max() == pytest.approx(88750.993)


def test_torch_npu_db_step_window_comes_from_step_time(torch_db: Profile) -> None:
    # SELECT * FROM STEP_TIME → 50 | 1736410576386409710 | 1736410576538298460
    steps = torch_db.steps
    assert steps[["rank", "step"]].values.tolist() == [[0, 50]]
    assert steps["start_us"].iloc[0] == pytest.approx(
        relative_us("1736410576386409.710"), abs=EXACT
    )
    assert steps["end_us"].iloc[0] == pytest.approx(relative_us("1736410576538298.460"), abs=EXACT)
    assert steps["end_us"].iloc[0] - steps["start_us"].iloc[0] == pytest.approx(
        151888.75, abs=EXACT
    )
    assert torch_db.metadata["time_origin_us"] == EPOCH_ORIGIN_US


def test_torch_npu_db_breakdown_is_torch_npus_own_from_analysis_db(torch_db: Profile) -> None:
    # analysis.db: SELECT computing, communication_not_overlapped, free, preparing FROM
    # StepTraceTime → 8903.431 | 98071.947 | 25258.144 | 18055.693 (step 50)
    step = torch_db.steps.iloc[0]
    assert step["computing_us"] == pytest.approx(8903.431)
    assert step["comm_not_overlapped_us"] == pytest.approx(98071.947)
    assert step["free_us"] == pytest.approx(25258.144)
    assert step["preparing_us"] == pytest.approx(18055.693)
    # The four stop at the last device activity (max OVERLAP_ANALYSIS.endNs =
    # 1736410576536698925): 538298460 - 536698925 ns = 1599.535 µs of idle tail short of the
    # window.
    window = step["end_us"] - step["start_us"]
    parts = sum(step[c] for c in BREAKDOWN_COLUMNS)
    assert parts == pytest.approx(150289.215)
    assert window - parts == pytest.approx(1599.535, abs=1e-6)
    assert torch_db.notes == []


def test_overlap_analysis_gives_the_same_breakdown_when_analysis_db_is_absent(
    tmp_path: Path,
) -> None:
    # OVERLAP_ANALYSIS (type 0 Computing, 1 Communication, 2 Comm(Not Overlapped), 3 Free):
    # SELECT type, SUM(endNs - startNs) GROUP BY type → 8903431, 102108100, 98071947,
    # 25258144 ns; min(startNs) of types 0/1 = 1736410576404465403 → Preparing
    # 404465403 - 386409710 = 18055693 ns. Type 0 is exactly the merged TASK ⋈
    # COMPUTE_TASK_INFO intervals and type 1 the COMMUNICATION_OP intervals (the reader
    # checks both totals before using the table).
    lone = tmp_path / TORCH_DB.name
    shutil.copyfile(TORCH_DB, lone)
    step = ascend_db.read(lone).steps.iloc[0]
    assert step["computing_us"] == pytest.approx(8903.431)
    assert step["comm_not_overlapped_us"] == pytest.approx(98071.947)
    assert step["free_us"] == pytest.approx(25258.144)
    assert step["preparing_us"] == pytest.approx(18055.693)


def test_torch_npu_db_metadata_comes_from_npu_info_and_profiler_info(torch_db: Profile) -> None:
    # NPU_INFO: 0 | Ascend910B; RANK_DEVICE_MAP: 0 | 0; profiler_info_0.json:
    # _profiler_level Level1, _aic_metrics ACL_AICORE_PIPE_UTILIZATION, _export_type db (it
    # records no cann/torch_npu version).
    assert torch_db.metadata == {
        "export_type": "db",
        "ranks": [0],
        "device": "Ascend910B",
        "profiler_level": "Level1",
        "aic_metrics": "ACL_AICORE_PIPE_UTILIZATION",
        "task_basis": "device",
        "copy_visible": True,  # the TASK table holds every task, MEMCPY_ASYNC included
        "time_origin_us": EPOCH_ORIGIN_US,  # epoch ns: stored relative to the origin
    }


def test_torch_npu_db_has_the_structure_of_the_text_export_of_the_same_model(
    torch_db: Profile,
) -> None:
    # Another run, so the times differ (text step 50: Computing 8873.756 µs vs 8903.431 µs
    # here), but the kernels launched are the same: every (Type, Accelerator Core) of
    # kernel_details.csv occurs as often as (op_type, core) here, the collectives are four
    # hcom_allReduce_ on HCCL, and both have the one step 50.
    kernels = pd.read_csv(
        TEXT_OUTPUT / "kernel_details.csv", usecols=["Step Id", "Type", "Accelerator Core"]
    )
    text_counts = kernels.groupby(["Type", "Accelerator Core"]).size().to_dict()
    db_tasks = torch_db.tasks[torch_db.tasks["category"].isin(["compute", "comm"])]
    db_counts = db_tasks.groupby(["op_type", "core"]).size().to_dict()
    assert len(text_counts) == 34
    assert db_counts == text_counts
    text_steps = pd.read_csv(TEXT_OUTPUT / "step_trace_time.csv", usecols=["Step"])
    assert text_steps["Step"].tolist() == torch_db.steps["step"].tolist() == [50]


# ----------------------------------------------------------------------------- msprof db


def test_msprof_db_reads_every_task_with_per_task_communication(msprof_db: Profile) -> None:
    assert msprof_db.source == "msprof_db"
    # 24 TASK rows, none dropped (COMMUNICATION_OP is empty, no MIX pairs):
    # compute: 11 with COMPUTE_TASK_INFO (taskType → AI_VECTOR_CORE) + 2 TASK taskType
    # AI_CORE (globalTaskId 49207, 49209); comm: 8 rows in COMMUNICATION_TASK_INFO + 49210
    # whose task type string is 'hcom_allReduce__305_880_1'; other: 46933
    # ('aclnnLayerNormBackward'), 49208 ('GeluGrad_Tiling') — this test database's STRING_IDS
    # do not match its TASK rows, so these "task types" are whatever the ids point at.
    assert len(msprof_db.tasks) == 24
    assert msprof_db.tasks["category"].value_counts().to_dict() == {
        "compute": 13,
        "comm": 9,
        "other": 2,
    }
    assert set(msprof_db.tasks["rank"]) == {2}  # TASK.deviceId, no RANK_DEVICE_MAP
    assert msprof_db.notes == [
        "COMMUNICATION_OP is empty: communication counted per HCCL task (COMMUNICATION_TASK_INFO)",
        NO_STEP_MARKS_NOTE,
    ]


def test_msprof_db_first_kernel_and_longest_hccl_task(msprof_db: Profile) -> None:
    # globalTaskId 0: 1698220811392354694..1698220811392966786, name id 0 →
    # 'aclnnInplaceZero_ZerosLikeAiCore_ZerosLike', opType 2 → 'ZerosLike', taskType 1 →
    # 'AI_VECTOR_CORE'.
    first = msprof_db.tasks.iloc[0]
    assert first["name"] == "aclnnInplaceZero_ZerosLikeAiCore_ZerosLike"
    assert first["op_type"] == "ZerosLike"
    assert first["core"] == "AI_VECTOR_CORE"
    # October 2023, before the origin: negative relative times.
    assert first["start_us"] == pytest.approx(relative_us("1698220811392354.694"), abs=EXACT)
    assert first["start_us"] < 0
    assert msprof_db.metadata["time_origin_us"] == EPOCH_ORIGIN_US
    assert first["dur_us"] == pytest.approx(612.092, abs=1e-9)
    # globalTaskId 46936: 1698220811529766440..1698220811529930083 (163643 ns), name id 1319
    # → 'hcom_allGather__305_879_1', taskType 402.
    hccl = msprof_db.tasks[msprof_db.tasks["core"] == "HCCL"]
    assert len(hccl) == 8
    assert (hccl["name"] == "hcom_allGather__305_879_1").all()
    assert hccl["dur_us"].max() == pytest.approx(163.643, abs=1e-9)


def test_msprof_db_without_step_marks_is_one_window(msprof_db: Profile) -> None:
    # MSTX_EVENTS: 13 start/end ranges whose messages (ids 5, 7, 37, 39, 40, 56, 57, 105)
    # are shapes and kernel names, not steps; no STEP_TIME.
    assert msprof_db.steps.empty
    assert msprof_db.metadata["device"] == "Ascend910B"  # NPU_INFO id 2
    assert msprof_db.metadata["ranks"] == [2]
    assert msprof_db.metadata["export_type"] == "db"


def test_mstx_range_named_step_becomes_a_step_window(
    writable_msprof: tuple[Path, sqlite3.Connection],
) -> None:
    path, conn = writable_msprof
    conn.execute("INSERT INTO STRING_IDS (id, value) VALUES (100000, 'step 7')")
    conn.execute(
        "INSERT INTO MSTX_EVENTS (startNs, endNs, eventType, message) "
        "VALUES (1698220811392354694, 1698220811533883302, 2, 100000)"
    )
    conn.commit()
    profile = ascend_db.read(path)
    assert profile.steps[["rank", "step"]].values.tolist() == [[2, 7]]
    step = profile.steps.iloc[0]
    assert step["start_us"] == pytest.approx(relative_us("1698220811392354.694"), abs=EXACT)
    assert step["end_us"] == pytest.approx(relative_us("1698220811533883.302"), abs=EXACT)
    assert step["end_us"] - step["start_us"] == pytest.approx(141528.608, abs=1e-3)
    # This database's OVERLAP_ANALYSIS was built without communication (COMMUNICATION_OP is
    # empty): Computing matches the 11 kernels (663.872 µs) but its Communication (0) does
    # not match the 9 HCCL tasks (sum of their disjoint durations 227.966 µs), so the
    # breakdown is left out and the analysis derives it from the tasks.
    assert not any(c in profile.steps.columns for c in BREAKDOWN_COLUMNS)
    assert profile.notes[-1] == (
        "OVERLAP_ANALYSIS gives Communication 0.000 µs in step 7 but the tasks cover "
        "227.966 µs: step breakdown left out"
    )


# ----------------------------------------------------------------------------- bad input


def test_a_db_file_that_is_not_sqlite_is_refused_naming_the_file(tmp_path: Path) -> None:
    garbage = tmp_path / "x.db"
    garbage.write_bytes(b"\x00\x01 not a database " * 64)
    assert not ascend_db.detect(garbage)
    with pytest.raises(ProfileError, match="not an SQLite database") as raised:
        ascend_db.read(garbage)
    assert str(garbage) in str(raised.value)


def test_a_sqlite_file_without_task_table_names_the_table(tmp_path: Path) -> None:
    impostor = tmp_path / "ascend_pytorch_profiler_0.db"
    shutil.copyfile(ANALYSIS_DB, impostor)  # real SQLite, but torch_npu's analysis tables
    with pytest.raises(ProfileError) as raised:
        ascend_db.read(impostor)
    assert raised.value.column == "TASK"
    assert "no such table" in str(raised.value)
    assert str(impostor) in str(raised.value)
    assert "device task table" in str(raised.value)


def test_a_renamed_task_column_names_table_and_column(
    writable_msprof: tuple[Path, sqlite3.Connection],
) -> None:
    path, conn = writable_msprof
    conn.execute("ALTER TABLE TASK RENAME COLUMN startNs TO beginNs")
    conn.commit()
    with pytest.raises(ProfileError) as raised:
        ascend_db.read(path)
    assert raised.value.column == "TASK.startNs"
    assert str(path) in str(raised.value)


def test_a_truncated_database_is_an_error_not_a_short_profile(tmp_path: Path) -> None:
    truncated = tmp_path / TORCH_DB.name
    data = TORCH_DB.read_bytes()
    truncated.write_bytes(data[: len(data) // 2])
    with pytest.raises(ProfileError, match="malformed") as raised:
        ascend_db.read(truncated)
    assert str(truncated) in str(raised.value)
    assert "truncated or corrupt" in str(raised.value)


def test_an_export_without_tasks_or_steps_is_an_error(
    writable_msprof: tuple[Path, sqlite3.Connection],
) -> None:
    path, conn = writable_msprof
    conn.execute("DELETE FROM TASK")
    conn.commit()
    with pytest.raises(ProfileError, match="no device tasks and no steps") as raised:
        ascend_db.read(path)
    assert raised.value.column == "TASK"


def test_a_directory_without_an_export_is_refused(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("nothing here\n")
    assert not ascend_db.detect(tmp_path)
    with pytest.raises(ProfileError, match="not an msprof / torch_npu SQLite export"):
        ascend_db.read(tmp_path)


@pytest.mark.parametrize(
    ("cell", "said"),
    [
        (None, "row 1 has no value (NULL)"),
        (1.5, "row 1 holds 1.5"),
        (b"\x00" * 4, "row 1 holds a 4-byte blob"),
    ],
)
def test_a_bad_task_time_is_told_as_sqlite_holds_it(
    writable_msprof: tuple[Path, sqlite3.Connection], cell: object, said: str
) -> None:
    path, conn = writable_msprof
    conn.execute("UPDATE TASK SET endNs = ? WHERE rowid = 1", (cell,))
    conn.commit()
    with pytest.raises(ProfileError) as error:
        load_profile(path)
    # Was "row 1 holds np.float64(nan)" for the NULL.
    assert f"column 'TASK.endNs': {said} (expected integer nanoseconds" in str(error.value)


def _torch_db_copy(tmp_path: Path) -> Path:
    """The torch_npu .db directory without analysis.db (which is not read here)."""
    target = tmp_path / TORCH_PT.name
    (target / TORCH_OUTPUT.name).mkdir(parents=True)
    shutil.copyfile(TORCH_DB, target / TORCH_OUTPUT.name / TORCH_DB.name)
    return target


def test_a_profiler_info_after_a_byte_order_mark_gives_the_same_metadata(
    tmp_path: Path, torch_db: Profile
) -> None:
    target = _torch_db_copy(tmp_path)
    info = (TORCH_PT / "profiler_info_0.json").read_bytes()
    (target / "profiler_info_0.json").write_bytes(b"\xef\xbb\xbf" + info)
    profile = ascend_db.read(target)
    assert profile.metadata["profiler_level"] == "Level1"
    assert profile.metadata == torch_db.metadata
    assert not [note for note in profile.notes if "profiler_info" in note]


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (b'{"config": {"common_config": {"', "is not valid JSON"),
        (b"[1, 2]", "does not hold a JSON object"),
    ],
)
def test_a_damaged_profiler_info_beside_a_db_is_a_note_and_the_tasks_are_read(
    tmp_path: Path, torch_db: Profile, content: bytes, problem: str
) -> None:
    target = _torch_db_copy(tmp_path)
    (target / "profiler_info_0.json").write_bytes(content)
    profile = ascend_db.read(target)
    assert "profiler_level" not in profile.metadata
    assert profile.metadata["device"] == "Ascend910B"  # NPU_INFO, from the database
    pd.testing.assert_frame_equal(profile.tasks, torch_db.tasks)
    [note] = [n for n in profile.notes if "profiler_info_0.json" in n]
    assert note.startswith(f"{target / 'profiler_info_0.json'}: {problem}")
    assert note.endswith("skipped: versions and profiler level not recorded")


def test_a_task_row_written_twice_is_one_task_but_a_task_sharing_its_start_is_another(
    writable_msprof: tuple[Path, sqlite3.Connection],
) -> None:
    path, conn = writable_msprof
    before = len(ascend_db.read(path).tasks)
    columns = "startNs, endNs, deviceId, connectionId, globalPid, taskType, contextId, streamId"
    info = (
        "name, blockDim, mixBlockDim, taskType, opType, inputFormats, inputDataTypes, "
        "inputShapes, outputFormats, outputDataTypes, outputShapes, waitNs"
    )

    def copy_first_kernel(global_task_id: int, task_id: str) -> None:
        """globalTaskId 0 (a kernel with its operator info) again, under a new global id."""
        conn.execute(
            f"INSERT INTO TASK ({columns}, taskId, modelId, globalTaskId) "
            f"SELECT {columns}, {task_id}, modelId, {global_task_id} FROM TASK "
            "WHERE globalTaskId = 0"
        )
        conn.execute(
            f"INSERT INTO COMPUTE_TASK_INFO ({info}, globalTaskId) "
            f"SELECT {info}, {global_task_id} FROM COMPUTE_TASK_INFO WHERE globalTaskId = 0"
        )
        conn.commit()

    # The same device, stream, task id and times: the row written twice.
    copy_first_kernel(900001, "taskId")
    assert len(ascend_db.read(path).tasks) == before
    # Another task id at the same start: another task.
    copy_first_kernel(900002, "taskId + 7")
    assert len(ascend_db.read(path).tasks) == before + 1


@pytest.mark.parametrize("export", [MSPROF_DB, TORCH_DB], ids=["msprof", "torch_npu"])
def test_task_rows_fetched_in_two_halves_at_once_are_the_rows_read_whole(
    export: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("adbc_driver_sqlite", reason="the fast extra is not installed")
    whole = ascend_db.read(export)
    fetched: list[str] = []
    arrow_rows = ascend_db._arrow_integer_rows

    def spy(db: Path, sql: str) -> pd.DataFrame | None:
        fetched.append(sql)
        return arrow_rows(db, sql)

    monkeypatch.setattr(ascend_db, "_ROWS_TO_SPLIT", 1)  # the fixtures' few rows split too
    monkeypatch.setattr(ascend_db, "_arrow_integer_rows", spy)
    halves = ascend_db.read(export)
    assert sum(" FROM TASK t " in sql and "t.rowid" in sql for sql in fetched) == 2
    pd.testing.assert_frame_equal(halves.tasks, whole.tasks, check_exact=True)
    pd.testing.assert_frame_equal(halves.steps, whole.steps, check_exact=True)
    assert halves.notes == whole.notes

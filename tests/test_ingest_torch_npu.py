"""The torch_npu text-export reader against real ASCEND_PROFILER_OUTPUT files.

Every expected number was read off the fixture files by hand (awk / pandas in a scratch
shell, independent of perfgate); the comment next to each says where it comes from.
Variants (several ranks, renamed headers, truncated files) are built in ``tmp_path`` from
copies of the real files. Time stamps are epoch µs: the tables hold µs since EPOCH_ORIGIN_US,
converted exactly from the cells' text.
"""

from __future__ import annotations

import json
import shutil
from decimal import Decimal
from pathlib import Path

import pandas as pd
import pytest

from perfgate.errors import ProfileError
from perfgate.ingest import torch_npu
from perfgate.ingest.ascend_csv import LEVEL0_NOTE
from perfgate.ingest.categories import op_type_from_name
from perfgate.intervals import union_length
from perfgate.model import EPOCH_ORIGIN_US, Profile

DATA = Path(__file__).parent / "data" / "torch_npu"
LEVEL0 = DATA / "ascend-msinsight" / "pytorch_text_level0_rank0_ascend_pt"
LEVEL1 = DATA / "ascend-msinsight" / "pytorch_text_level1_rank0_ascend_pt"
LEVEL2 = DATA / "ascend-msinsight" / "st_level2_rank_0_ascend_pt"
ADVISOR_NEW = DATA / "ascend-mstt" / "advisor_compute_advice_data" / "kernel_details.csv"
ADVISOR_OLD = DATA / "ascend-mstt" / "advisor_backend_compute_advice" / "kernel_details.csv"
CLUSTER_DIR = DATA / "ascend-mstt" / "cluster_analysis_output"
OUTPUT = "ASCEND_PROFILER_OUTPUT"

# Stored times are the float64 nearest to the exact relative value.
EXACT = 1e-6


def relative_us(epoch_us: str) -> float:
    """An epoch-µs time stamp as the readers store it: µs since EPOCH_ORIGIN_US, exactly."""
    return float(Decimal(epoch_us) - EPOCH_ORIGIN_US)


def read(path: Path) -> Profile:
    assert torch_npu.detect(path), f"torch_npu.detect should recognise {path}"
    return torch_npu.read(path)


def copy_rank_dir(source: Path, target: Path) -> Path:
    shutil.copytree(source, target)
    return target


def one_task(profile: Profile, name: str) -> pd.Series:
    rows = profile.tasks[profile.tasks["name"] == name]
    assert len(rows) == 1, f"{name} appears {len(rows)} times"
    return rows.iloc[0]


# ----------------------------------------------------------------------------- Level0


def test_level0_export_has_191_tasks_of_which_the_4_hcom_ones_are_communication() -> None:
    profile = read(LEVEL0)
    assert profile.source == "torch_npu"
    # awk -F, 'NR>1{c[$4]++}' kernel_details.csv → N/A 187, HCCL 4
    assert len(profile.tasks) == 191
    assert profile.tasks["core"].value_counts().to_dict() == {"N/A": 187, "HCCL": 4}
    assert profile.tasks["category"].value_counts().to_dict() == {"compute": 187, "comm": 4}
    assert set(profile.tasks["step"]) == {50}
    assert (profile.tasks["rank"] == 0).all()


def test_level0_operator_types_come_from_kernel_names_and_match_level1_counts() -> None:
    profile = read(LEVEL0)
    assert LEVEL0_NOTE in profile.notes
    counts = profile.tasks["op_type"].value_counts()
    # Level1 op_statistic.csv of the same model: TransData 57, Conv2D 5, MatMulV2 8, ReduceSum
    # 10; Level0 names: 57 contain "TransData", 5 match ^Conv2D[0-9].
    assert counts["TransData"] == 57
    assert counts["Conv2D"] == 5
    assert counts["MatMulV2"] == 8
    assert counts["ReduceSum"] == 10
    assert counts["hcom_allReduce_"] == 4


def test_level0_first_kernel_keeps_its_tab_terminated_start_time_and_duration() -> None:
    profile = read(LEVEL0)
    first = one_task(profile, "trans_TransData_0")
    # line 2: 50,trans_TransData_0,N/A,N/A,1736405443881410.320\t,50.621,0,0\r\n
    assert first["start_us"] == pytest.approx(relative_us("1736405443881410.320"), abs=EXACT)
    assert profile.metadata["time_origin_us"] == EPOCH_ORIGIN_US
    assert first["dur_us"] == pytest.approx(50.621)
    assert first["op_type"] == "TransData"
    assert first["core"] == "N/A"


def test_level0_files_really_have_crlf_line_endings() -> None:
    # Guards the meaning of the Level0 tests above: they read a CRLF file.
    assert b"\r\n" in (LEVEL0 / OUTPUT / "kernel_details.csv").read_bytes()


def test_level0_step_50_breakdown_from_step_trace_time_without_window() -> None:
    steps = read(LEVEL0).steps
    assert len(steps) == 1
    step = steps.iloc[0]
    # step_trace_time.csv row: 50,8827.472999999998,81515.607,…,25908.102000000003,…,19358.0
    assert (step["rank"], step["step"]) == (0, 50)
    assert step["computing_us"] == pytest.approx(8827.473)
    assert step["comm_not_overlapped_us"] == pytest.approx(81515.607)
    assert step["free_us"] == pytest.approx(25908.102)
    assert step["preparing_us"] == pytest.approx(19358.0)
    assert steps["start_us"].dtype == "float64"
    assert steps["start_us"].isna().all() and steps["end_us"].isna().all()


def test_level0_metadata_from_profiler_info_0_json() -> None:
    metadata = read(LEVEL0).metadata
    assert metadata["profiler_level"] == "Level0"
    assert metadata["aic_metrics"] == "ACL_AICORE_NONE"
    assert metadata["export_type"] == "text"
    assert metadata["ranks"] == [0]
    assert "cann_version" not in metadata  # this older profiler_info has no versions


# ----------------------------------------------------------------------------- Level1


def test_level1_category_counts_per_accelerator_core() -> None:
    tasks = read(LEVEL1).tasks
    # awk on Accelerator Core: AI_VECTOR_CORE 149, AI_CORE 23, MIX_AIV 13, HCCL 4, DSA_SQE 2
    assert tasks["core"].value_counts().to_dict() == {
        "AI_VECTOR_CORE": 149,
        "AI_CORE": 23,
        "MIX_AIV": 13,
        "HCCL": 4,
        "DSA_SQE": 2,
    }
    by_core = tasks.groupby("core")["category"].unique().map(list).to_dict()
    assert by_core == {
        "AI_CORE": ["compute"],
        "AI_VECTOR_CORE": ["compute"],
        "MIX_AIV": ["compute"],
        "HCCL": ["comm"],
        "DSA_SQE": ["compute"],
    }
    assert tasks["category"].value_counts().to_dict() == {"compute": 187, "comm": 4}
    # Σ Duration(us) over the 191 rows (pandas on the raw file)
    assert tasks["dur_us"].sum() == pytest.approx(114865.613)
    # The profiler counts DSA_SQE (DSAGenBitMask) as computing: step_trace_time.csv's
    # Computing, 8873.756, is the union of the compute tasks with them (8873.737; the rest is
    # the profiler's rounding; start times are kept to 1/64 µs), not without them (8868.217).
    compute = tasks[tasks["category"] == "compute"]
    assert union_length(
        compute["start_us"], compute["start_us"] + compute["dur_us"]
    ) == pytest.approx(8873.737, abs=0.06)


def test_level1_conv2d_row_has_type_start_duration_and_unquoted_shapes() -> None:
    conv = one_task(read(LEVEL1), "Conv2D1")
    # line 4: …,Conv2D1,Conv2D,dynamic,AI_CORE,1736408883704903.918\t,313.886,…,
    #         """32,1,224,224,8;121,4,16,8;64""",…
    assert conv["op_type"] == "Conv2D"
    assert conv["core"] == "AI_CORE"
    assert conv["start_us"] == pytest.approx(relative_us("1736408883704903.918"), abs=EXACT)
    assert conv["dur_us"] == pytest.approx(313.886)
    assert conv["input_shapes"] == "32,1,224,224,8;121,4,16,8;64"
    assert conv["stream"] == "2"


def test_level1_allreduce_keeps_its_type_and_has_no_stream() -> None:
    hcom = one_task(read(LEVEL1), "hcom_allReduce__586_0_1")
    # line 81: …,N/A,N/A,hcom_allReduce__586_0_1,hcom_allReduce_,N/A,HCCL,
    #          1736408883732241.563\t,79089.52,…
    assert hcom["op_type"] == "hcom_allReduce_"
    assert hcom["category"] == "comm"
    assert hcom["start_us"] == pytest.approx(relative_us("1736408883732241.563"), abs=EXACT)
    assert hcom["dur_us"] == pytest.approx(79089.52)
    assert pd.isna(hcom["stream"])
    assert pd.isna(hcom["input_shapes"])


def test_level1_step_50_breakdown_sums_to_154483_509_us() -> None:
    step = read(LEVEL1).steps.iloc[0]
    # step_trace_time.csv: Preparing 17902.5 + Computing 8873.756 + Comm(Not Overlapped)
    # 101963.203 + Free 25744.05 = 154483.509 µs
    assert step["step"] == 50
    assert step["preparing_us"] == pytest.approx(17902.5)
    assert step["computing_us"] == pytest.approx(8873.756)
    assert step["comm_not_overlapped_us"] == pytest.approx(101963.203)
    assert step["free_us"] == pytest.approx(25744.05)
    total = sum(
        step[c] for c in ("preparing_us", "computing_us", "comm_not_overlapped_us", "free_us")
    )
    assert total == pytest.approx(154483.509)


def test_level1_metadata_and_op_statistic_table() -> None:
    profile = read(LEVEL1)
    metadata = profile.metadata
    assert metadata["profiler_level"] == "Level1"
    assert metadata["aic_metrics"] == "ACL_AICORE_PIPE_UTILIZATION"
    assert metadata["export_type"] == "text"
    assert "op_statistic" not in metadata
    statistic = profile.op_statistic
    assert statistic is not None
    assert list(statistic.columns) == ["rank", "op_type", "core", "category", "count", "total_us"]
    # op_statistic.csv: 33 data rows; Σ Count = 187 = 191 kernels − 4 HCCL
    assert len(statistic) == 33
    assert statistic["count"].sum() == 187
    transdata = statistic[statistic["op_type"] == "TransData"].iloc[0]
    assert (transdata["core"], transdata["category"], transdata["count"]) == (
        "AI_VECTOR_CORE",
        "compute",
        57,
    )
    assert transdata["total_us"] == pytest.approx(1423.208)


def test_the_ascend_profiler_output_folder_reads_like_its_rank_directory() -> None:
    from_output = read(LEVEL1 / OUTPUT)
    from_rank_dir = read(LEVEL1)
    pd.testing.assert_frame_equal(from_output.tasks, from_rank_dir.tasks)
    pd.testing.assert_frame_equal(from_output.steps, from_rank_dir.steps)
    assert from_output.metadata["profiler_level"] == "Level1"


def test_level0_name_rule_gives_back_every_level1_type() -> None:
    # The Level1 export of the Level0 model names each kernel and gives its Type: the Level0
    # fallback rule must recover all 191 of them.
    raw = pd.read_csv(LEVEL1 / OUTPUT / "kernel_details.csv", usecols=["Name", "Type"])
    derived = raw["Name"].map(op_type_from_name)
    assert (derived == raw["Type"]).all(), raw[derived != raw["Type"]]


@pytest.mark.parametrize(
    ("name", "op_type"),
    [
        ("trans_TransData_0", "TransData"),
        ("Conv2D1", "Conv2D"),
        ("ReduceSum7", "ReduceSum"),
        ("Conv2DBackpropFilter6_MemSet", "MemSet"),
        # A real Level0 trace (tests/data/ascend_timeline): the memset of a TransData.
        ("trans_TransData_27_MemSet", "MemSet"),
        ("aclnnMm_MatMulCommon_MatMulV2", "MatMulV2"),
        ("hcom_allReduce__868_0_1", "hcom_allReduce_"),
        ("GatherV282", "GatherV2"),  # advisor_backend_compute_advice: Type GatherV2
        ("atomic_memset-1_69_2208226_1_0", "MemSet"),  # same file: Type MemSet
        ("main_kernel", "main_kernel"),
    ],
)
def test_level0_operator_type_rule(name: str, op_type: str) -> None:
    assert op_type_from_name(name) == op_type


# ----------------------------------------------------------------------------- Level2


def test_level2_export_without_kernel_details_gives_steps_and_a_note() -> None:
    profile = read(LEVEL2)
    assert profile.tasks.empty
    assert any("kernel_details.csv" in note for note in profile.notes)
    step = profile.steps.iloc[0]
    # step_trace_time.csv: 0,13,231290.09999999995,420174.2600000001,…,158558.00000000032,…,206.25
    assert (len(profile.steps), step["rank"], step["step"]) == (1, 0, 13)
    assert step["computing_us"] == pytest.approx(231290.1)
    assert step["comm_not_overlapped_us"] == pytest.approx(420174.26)
    assert step["free_us"] == pytest.approx(158558.0)
    assert step["preparing_us"] == pytest.approx(206.25)


def test_level2_metadata_has_versions_and_op_statistic() -> None:
    profile = read(LEVEL2)
    metadata = profile.metadata
    # profiler_info_0.json: torch_npu_version 2.7.1, cann_version 8.3.RC1, Level2,
    # _export_type ["text"], rank_id "0" (a string)
    assert metadata["cann_version"] == "8.3.RC1"
    assert metadata["torch_npu_version"] == "2.7.1"
    assert metadata["profiler_level"] == "Level2"
    assert metadata["export_type"] == "text"
    assert metadata["ranks"] == [0]
    statistic = profile.op_statistic
    assert statistic is not None
    # op_statistic.csv: 35 data rows, Σ Count 2448; row 0,MatMulV3,AI_CORE,280,48000.78,…
    assert len(statistic) == 35
    assert statistic["count"].sum() == 2448
    matmul = statistic[statistic["op_type"] == "MatMulV3"].iloc[0]
    assert (matmul["core"], matmul["count"]) == ("AI_CORE", 280)
    assert matmul["total_us"] == pytest.approx(48000.78)


# ----------------------------------------------------------------------------- lone files


def test_lone_newer_kernel_details_with_quoted_tab_timestamps() -> None:
    profile = read(ADVISOR_NEW)
    tasks = profile.tasks
    # 29 rows; Accelerator Core AI_CORE 12, MIX_AIC 9, AI_VECTOR_CORE 8; Step Id 19. Four
    # repeat an earlier row's task (stream 2, same task id, start and duration): a MatMulV3
    # row written four times (AI_CORE) and FlashAttentionScore listed again as
    # FlashAttentionScore_varlen (MIX_AIC). Each task once: 25.
    assert len(tasks) == 25
    assert tasks["core"].value_counts().to_dict() == {
        "AI_CORE": 9,
        "MIX_AIC": 8,
        "AI_VECTOR_CORE": 8,
    }
    calls = tasks.groupby("op_type", observed=True)["dur_us"].agg(["size", "sum"])
    assert calls.loc["MatMulV3", "size"] == 5
    assert calls.loc["MatMulV3", "sum"] == pytest.approx(2558.412)
    assert (
        "4 task row(s) repeat an earlier row's stream, task id, start and duration: each task "
        "counted once"
    ) in profile.notes
    assert set(tasks["step"]) == {19}
    first = tasks.iloc[0]
    # line 2: …,MatMulV2,dynamic,AI_CORE,"1736413971558972.912\t",185.504,…,
    #         """81920,4096;8192,512""",…
    assert first["op_type"] == "MatMulV2"
    assert first["start_us"] == pytest.approx(relative_us("1736413971558972.912"), abs=EXACT)
    assert profile.metadata["time_origin_us"] == EPOCH_ORIGIN_US
    assert first["dur_us"] == pytest.approx(185.504)
    assert first["input_shapes"] == "81920,4096;8192,512"
    assert profile.steps.empty
    assert "no step marks: analysed as one window" in profile.notes


def test_lone_older_kernel_details_counts_ai_cpu_and_dsa_as_compute() -> None:
    tasks = read(ADVISOR_OLD).tasks
    # 591 rows: AI_VECTOR_CORE 520, MIX_AIV 25, HCCL 19, AI_CORE 13, AI_CPU 7, DSA_SQE 7
    assert len(tasks) == 591
    assert tasks["core"].value_counts()["AI_CPU"] == 7
    assert tasks["category"].value_counts().to_dict() == {"compute": 572, "comm": 19}
    # Σ Duration(us) (pandas on the raw file) = 396807.04
    assert tasks["dur_us"].sum() == pytest.approx(396807.04)
    assert set(tasks["step"]) == {1}


def test_cluster_step_trace_time_gives_one_step_per_rank_and_skips_the_stage_row() -> None:
    for path in (CLUSTER_DIR / "cluster_step_trace_time.csv", CLUSTER_DIR):
        profile = read(path)
        assert profile.source == "cluster_step_trace"
        steps = profile.steps
        # 8 rows of Type rank (Index 0..7); the 9th row (Type stage) holds column maxima
        assert list(steps["rank"]) == list(range(8))
        assert set(steps["step"]) == {0}  # Step cells are empty: one whole-profile step
        rank5 = steps[steps["rank"] == 5].iloc[0]
        assert rank5["comm_not_overlapped_us"] == pytest.approx(756374.86)
        rank1 = steps[steps["rank"] == 1].iloc[0]
        assert rank1["computing_us"] == pytest.approx(80435.7465)
        assert rank1["free_us"] == pytest.approx(1488610.05875)
        assert (steps["preparing_us"] == 0.0).all()  # no Preparing column in this version
        assert any("Preparing" in note for note in profile.notes)
        assert profile.tasks.empty
        assert profile.metadata["ranks"] == list(range(8))


def test_lone_step_trace_time_file_reads_its_device_id_as_rank(tmp_path: Path) -> None:
    csv = tmp_path / "step_trace_time.csv"
    text = (LEVEL2 / OUTPUT / "step_trace_time.csv").read_text()
    csv.write_text(text.replace("\n0,13,", "\n3,13,"))
    profile = read(csv)
    assert list(profile.steps["rank"]) == [3]
    assert profile.steps["computing_us"].iloc[0] == pytest.approx(231290.1)


# ----------------------------------------------------------------------------- ranks


def make_rank(source: Path, target: Path, rank: int) -> Path:
    """A copy of ``source`` whose profiler_info says ``rank``."""
    copy_rank_dir(source, target)
    info_path = target / "profiler_info_0.json"
    info = json.loads(info_path.read_text())
    info["rank_id"] = rank
    info_path.unlink()
    (target / f"profiler_info_{rank}.json").write_text(json.dumps(info))
    return target


def test_a_directory_of_ranks_is_read_rank_by_rank(tmp_path: Path) -> None:
    make_rank(LEVEL1, tmp_path / "node_rank0_ascend_pt", 0)
    make_rank(LEVEL0, tmp_path / "node_rank1_ascend_pt", 1)
    profile = read(tmp_path)
    assert profile.metadata["ranks"] == [0, 1]
    assert profile.tasks.groupby("rank").size().to_dict() == {0: 191, 1: 191}
    steps = profile.steps.set_index("rank")
    assert steps.loc[0, "computing_us"] == pytest.approx(8873.756)  # Level1 file
    assert steps.loc[1, "computing_us"] == pytest.approx(8827.473)  # Level0 file
    assert any("ranks disagree on profiler_level" in note for note in profile.notes)


def test_rank_comes_from_the_profiler_info_file_name_without_rank_id(tmp_path: Path) -> None:
    rank_dir = copy_rank_dir(LEVEL1, tmp_path / "x_ascend_pt")
    info = json.loads((rank_dir / "profiler_info_0.json").read_text())
    del info["rank_id"]
    (rank_dir / "profiler_info_0.json").unlink()
    (rank_dir / "profiler_info_6.json").write_text(json.dumps(info))
    profile = read(rank_dir)
    assert profile.metadata["ranks"] == [6]
    assert set(profile.tasks["rank"]) == {6}
    assert set(profile.steps["rank"]) == {6}


def test_device_id_column_and_block_num_header_are_accepted(tmp_path: Path) -> None:
    # Newer torch_npu: Device_id after Step Id, Block Num / Mix Block Num instead of *Dim.
    rank_dir = tmp_path / "new_ascend_pt"
    (rank_dir / OUTPUT).mkdir(parents=True)
    lines = (LEVEL1 / OUTPUT / "kernel_details.csv").read_bytes().split(b"\r\n")
    header = (
        lines[0].replace(b"Block Dim", b"Block Num").replace(b"Step Id,", b"Step Id,Device_id,")
    )
    body = [line.replace(b"50,", b"50,4,", 1) for line in lines[1:] if line]
    (rank_dir / OUTPUT / "kernel_details.csv").write_bytes(b"\r\n".join([header, *body]) + b"\r\n")
    profile = read(rank_dir)  # no profiler_info: the rank is the Device_id
    assert profile.metadata["ranks"] == [4]
    assert len(profile.tasks) == 191
    assert one_task(profile, "Conv2D1")["dur_us"] == pytest.approx(313.886)


def test_two_directories_claiming_the_same_rank_are_refused(tmp_path: Path) -> None:
    copy_rank_dir(LEVEL0, tmp_path / "a_ascend_pt")
    copy_rank_dir(LEVEL1, tmp_path / "b_ascend_pt")
    with pytest.raises(ProfileError, match="rank 0 appears twice") as error:
        torch_npu.read(tmp_path)
    assert "rank_id" in str(error.value)


# ----------------------------------------------------------------------------- steps


def test_no_schedule_means_one_whole_profile_step_for_steps_and_tasks(tmp_path: Path) -> None:
    rank_dir = copy_rank_dir(LEVEL0, tmp_path / "x_ascend_pt")
    kernel_details = pd.read_csv(LEVEL0 / OUTPUT / "kernel_details.csv", dtype=str)
    kernel_details.drop(columns="Step Id").to_csv(
        rank_dir / OUTPUT / "kernel_details.csv", index=False
    )
    trace = (LEVEL0 / OUTPUT / "step_trace_time.csv").read_text()
    (rank_dir / OUTPUT / "step_trace_time.csv").write_text(trace.replace("\n50,", "\n,"))
    profile = read(rank_dir)
    assert list(profile.steps["step"]) == [0]
    assert set(profile.tasks["step"]) == {0}
    assert any("no step numbers" in note for note in profile.notes)


def test_step_trace_without_preparing_column_gets_zero_and_a_note(tmp_path: Path) -> None:
    rank_dir = copy_rank_dir(LEVEL1, tmp_path / "x_ascend_pt")
    trace = pd.read_csv(LEVEL1 / OUTPUT / "step_trace_time.csv")
    trace.drop(columns="Preparing").to_csv(rank_dir / OUTPUT / "step_trace_time.csv", index=False)
    profile = read(rank_dir)
    assert profile.steps["preparing_us"].iloc[0] == 0.0
    assert profile.steps["free_us"].iloc[0] == pytest.approx(25744.05)
    assert any("no Preparing column" in note for note in profile.notes)


def test_trace_view_profiler_steps_give_the_step_window(tmp_path: Path) -> None:
    rank_dir = copy_rank_dir(LEVEL1, tmp_path / "x_ascend_pt")
    # Synthetic trace_view.json (the real one is not in the fixture set): a Python process
    # with ProfilerStep#50 spanning the first and last kernel of the real kernel_details.
    events = [
        {"ph": "M", "name": "process_name", "pid": 7, "tid": 0, "args": {"name": "Python"}},
        {
            "ph": "X",
            "name": "ProfilerStep#50",
            "cat": "cpu_op",
            "pid": 7,
            "tid": 7,
            "ts": "1736408883690000.500",
            "dur": 160000.25,
        },
    ]
    (rank_dir / OUTPUT / "trace_view.json").write_text(json.dumps(events))
    profile = read(rank_dir)
    step = profile.steps.iloc[0]
    assert step["step"] == 50
    assert step["start_us"] == pytest.approx(relative_us("1736408883690000.500"), abs=EXACT)
    assert step["end_us"] == pytest.approx(relative_us("1736408883850000.750"), abs=EXACT)
    assert step["computing_us"] == pytest.approx(8873.756)  # breakdown kept
    # kernel_details.csv and trace_view.json share one origin: Conv2D1 starts at
    # 1736408883704903.918, 14903.418 µs into the step (a difference of two stored times,
    # each the nearest float64: 2**-7 µs apart at 3.6e13 µs since the origin)
    assert profile.metadata["time_origin_us"] == EPOCH_ORIGIN_US
    conv = one_task(profile, "Conv2D1")
    assert conv["start_us"] - step["start_us"] == pytest.approx(14903.418, abs=2**-7)


def test_step_cells_empty_in_only_some_rows_are_an_error(tmp_path: Path) -> None:
    csv = tmp_path / "step_trace_time.csv"
    text = (LEVEL2 / OUTPUT / "step_trace_time.csv").read_text()
    row = text.splitlines()[1]
    csv.write_text(text + row.replace("0,13,", "0,,", 1) + "\n")
    with pytest.raises(ProfileError, match="column 'Step'") as error:
        torch_npu.read(csv)
    assert "step_trace_time.csv" in str(error.value)


# ----------------------------------------------------------------------------- detection, errors


def test_an_export_of_db_files_only_is_left_to_the_sqlite_reader(tmp_path: Path) -> None:
    output = tmp_path / "x_ascend_pt" / OUTPUT
    output.mkdir(parents=True)
    (output / "ascend_pytorch_profiler_0.db").write_bytes(b"SQLite format 3\x00")
    (output / "analysis.db").write_bytes(b"SQLite format 3\x00")
    assert not torch_npu.detect(tmp_path / "x_ascend_pt")
    assert not torch_npu.detect(output)
    assert not torch_npu.detect(tmp_path)


def test_an_empty_ascend_profiler_output_is_an_error_naming_the_folder(tmp_path: Path) -> None:
    rank_dir = tmp_path / "x_ascend_pt"
    (rank_dir / OUTPUT).mkdir(parents=True)
    shutil.copy(LEVEL1 / "profiler_info_0.json", rank_dir)
    assert torch_npu.detect(rank_dir)
    with pytest.raises(ProfileError, match=f"{OUTPUT} is empty") as error:
        torch_npu.read(rank_dir)
    assert str(rank_dir / OUTPUT) in str(error.value)


def test_a_kernel_details_cut_mid_row_names_the_missing_column(tmp_path: Path) -> None:
    data = (LEVEL1 / OUTPUT / "kernel_details.csv").read_bytes()
    lines = data.split(b"\r\n")
    # Keep the header and 9 rows, then the 10th row up to its Accelerator Core cell.
    cut = b"\r\n".join(lines[:10]) + b"\r\n" + b",".join(lines[10].split(b",")[:8])
    csv = tmp_path / "kernel_details.csv"
    csv.write_bytes(cut)
    with pytest.raises(ProfileError, match="data row 10 has no value") as error:
        torch_npu.read(csv)
    message = str(error.value)
    assert str(csv) in message and "'Start Time(us)'" in message and "truncated" in message


def test_a_kernel_details_cut_inside_a_quoted_shape_is_reported_as_truncated(
    tmp_path: Path,
) -> None:
    data = (LEVEL1 / OUTPUT / "kernel_details.csv").read_bytes()
    cut_at = data.index(b'"""64,3,11,11"""') + 5  # inside the quotes of line 3
    csv = tmp_path / "kernel_details.csv"
    csv.write_bytes(data[:cut_at])
    with pytest.raises(ProfileError, match="truncated") as error:
        torch_npu.read(csv)
    assert str(csv) in str(error.value)


def test_a_missing_duration_column_is_named_in_the_error(tmp_path: Path) -> None:
    rank_dir = copy_rank_dir(LEVEL1, tmp_path / "x_ascend_pt")
    csv = rank_dir / OUTPUT / "kernel_details.csv"
    csv.write_bytes(csv.read_bytes().replace(b"Duration(us)", b"Dur(us)", 1))
    with pytest.raises(ProfileError, match=r"column 'Duration\(us\)'") as error:
        torch_npu.read(rank_dir)
    assert str(csv) in str(error.value)


def test_a_number_cell_holding_text_is_named_with_its_row(tmp_path: Path) -> None:
    csv = tmp_path / "kernel_details.csv"
    text = ADVISOR_NEW.read_bytes().replace(b",185.504,", b",fast,", 1)
    csv.write_bytes(text)
    with pytest.raises(ProfileError, match=r"column 'Duration\(us\)': data row 1 holds 'fast'"):
        torch_npu.read(csv)


def test_a_foreign_csv_named_kernel_details_is_refused_naming_a_column(tmp_path: Path) -> None:
    csv = tmp_path / "kernel_details.csv"
    csv.write_text("epoch,loss,accuracy\n1,0.5,0.9\n")
    with pytest.raises(ProfileError, match="column 'Name'") as error:
        torch_npu.read(csv)
    assert str(csv) in str(error.value) and "kernel_details.csv" in str(error.value)


def test_a_foreign_csv_under_another_name_is_not_detected(tmp_path: Path) -> None:
    csv = tmp_path / "metrics.csv"
    csv.write_text("epoch,loss,accuracy\n1,0.5,0.9\n")
    assert not torch_npu.detect(csv)
    assert not torch_npu.detect(tmp_path)


def test_a_renamed_kernel_details_is_recognised_by_its_header(tmp_path: Path) -> None:
    csv = tmp_path / "rank0_kernels.csv"
    shutil.copy(ADVISOR_NEW, csv)
    assert torch_npu.detect(csv)
    assert len(torch_npu.read(csv).tasks) == 25  # 29 rows, 4 of them repeated tasks


# ----------------------------------------------------------------------------- N/A, auxiliary


def insert_line(path: Path, index: int, line: str) -> None:
    """Insert ``line`` as line ``index`` (0 = the header) of a CSV, in its own line endings."""
    raw = path.read_bytes()
    newline = b"\r\n" if b"\r\n" in raw else b"\n"
    lines = raw.split(newline)
    lines.insert(index, line.encode())
    path.write_bytes(newline.join(lines))


def test_an_op_statistic_row_whose_op_type_is_na_reads_as_its_core_type(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Data row 7 of op_statistic.csv becomes a memcpy row as torch_npu writes it: OP Type N/A.
    rank_dir = copy_rank_dir(LEVEL1, tmp_path / "x_ascend_pt")
    statistic_csv = rank_dir / OUTPUT / "op_statistic.csv"
    insert_line(statistic_csv, 7, "N/A,MEMCPY_ASYNC,2,603.4,301.2,301.7,302.2,0.2")
    profile = read(rank_dir)
    assert profile.op_statistic is not None
    assert len(profile.op_statistic) == 34  # the 33 real rows and the memcpy row
    memcpy = profile.op_statistic.iloc[6]
    assert (memcpy["op_type"], memcpy["core"], memcpy["category"], memcpy["count"]) == (
        "MEMCPY_ASYNC",
        "MEMCPY_ASYNC",
        "copy",
        2,
    )
    assert memcpy["total_us"] == pytest.approx(603.4)
    assert not any("op_statistic" in note for note in profile.notes)
    # The whole inspect reads (it exited 2 on "column 'OP Type': data row 7 has no value").
    from perfgate.cli import main

    assert main(["inspect", str(rank_dir)]) == 0
    assert "hcom_allReduce_" in capsys.readouterr().out


def test_na_and_pandas_na_words_are_names_in_name_and_type_columns(tmp_path: Path) -> None:
    # Real first row of kernel_details.csv, as three variants: a kernel literally named "NA"
    # (pandas reads NA, null, None… as missing by default), a memcpy task with Type N/A, and
    # one whose name and type are both N/A.
    rank_dir = copy_rank_dir(LEVEL1, tmp_path / "x_ascend_pt")
    kernel_details = rank_dir / OUTPUT / "kernel_details.csv"
    first = kernel_details.read_bytes().split(b"\r\n")[1].decode()
    cells = first.split(",")
    name_at, type_at, core_at = 4, 5, 7  # Step Id,Model ID,Task ID,Stream ID,Name,Type,…
    rows = []
    for task_id, (name, op_type, core) in enumerate(
        (
            ("NA", "null", "AI_CORE"),
            ("MemcpyAsync", "N/A", "MEMCPY_ASYNC"),
            ("N/A", "N/A", "MEMCPY_ASYNC"),
        ),
        start=900_000,  # tasks of their own: a row that repeats another's task is one task
    ):
        cells[2], cells[name_at], cells[type_at], cells[core_at] = str(task_id), name, op_type, core
        rows.append(",".join(cells))
    for offset, row in enumerate(rows):
        insert_line(kernel_details, 1 + offset, row)
    tasks = read(rank_dir).tasks
    assert len(tasks) == 191 + 3
    added = tasks.iloc[:3]
    assert added["name"].tolist() == ["NA", "MemcpyAsync", "MEMCPY_ASYNC"]
    assert added["op_type"].tolist() == ["null", "MemcpyAsync", "MEMCPY_ASYNC"]
    assert added["category"].tolist() == ["compute", "copy", "copy"]


def test_a_truncated_row_is_still_an_error_naming_file_column_and_row(tmp_path: Path) -> None:
    rank_dir = copy_rank_dir(LEVEL1, tmp_path / "x_ascend_pt")
    kernel_details = rank_dir / OUTPUT / "kernel_details.csv"
    lines = kernel_details.read_bytes().split(b"\r\n")
    cells = lines[3].split(b",")
    lines[3] = b",".join(cells[:9])  # cut after Start Time(us): Duration(us) is empty
    kernel_details.write_bytes(b"\r\n".join(lines))
    with pytest.raises(ProfileError) as raised:
        read(rank_dir)
    message = str(raised.value)
    assert message.startswith(f"{kernel_details}: column 'Duration(us)': data row 3 has no value")


def test_na_in_a_required_number_column_is_named_as_no_number(tmp_path: Path) -> None:
    rank_dir = copy_rank_dir(LEVEL1, tmp_path / "x_ascend_pt")
    kernel_details = rank_dir / OUTPUT / "kernel_details.csv"
    lines = kernel_details.read_bytes().split(b"\r\n")
    cells = lines[2].split(b",")
    cells[9] = b"N/A"  # Duration(us)
    lines[2] = b",".join(cells)
    kernel_details.write_bytes(b"\r\n".join(lines))
    with pytest.raises(
        ProfileError, match=r"'Duration\(us\)': data row 2 holds 'N/A' \(expected a"
    ):
        read(rank_dir)


def test_a_damaged_op_statistic_is_skipped_with_a_note(tmp_path: Path) -> None:
    rank_dir = copy_rank_dir(LEVEL1, tmp_path / "x_ascend_pt")
    statistic_csv = rank_dir / OUTPUT / "op_statistic.csv"
    text = statistic_csv.read_bytes()
    statistic_csv.write_bytes(text[: text.index(b"MatMulV2") + len(b"MatMulV2,AI_CORE,")])
    profile = read(rank_dir)
    assert profile.op_statistic is None
    assert len(profile.tasks) == 191  # kernel_details.csv still read
    [note] = [n for n in profile.notes if "op_statistic.csv" in n]
    assert note.startswith(f"{statistic_csv}: column 'Count': data row 3 has no value")
    assert note.endswith("skipped: the profiler's per-operator totals are not used")


def test_a_damaged_profiler_info_is_skipped_with_a_note_and_the_rank_from_its_name(
    tmp_path: Path,
) -> None:
    rank_dir = copy_rank_dir(LEVEL1, tmp_path / "x_ascend_pt")
    info = rank_dir / "profiler_info_0.json"
    info.write_bytes(info.read_bytes()[:40])
    profile = read(rank_dir)
    assert profile.metadata["ranks"] == [0]
    assert "profiler_level" not in profile.metadata
    [note] = [n for n in profile.notes if "profiler_info_0.json" in n]
    assert "is not valid JSON" in note
    assert note.endswith("skipped: versions, profiler level and rank_id not recorded")


def test_a_corrupt_communication_json_or_api_statistic_changes_nothing(tmp_path: Path) -> None:
    # perfgate reads neither file: a damaged one must not stop the analysis.
    rank_dir = copy_rank_dir(LEVEL1, tmp_path / "x_ascend_pt")
    (rank_dir / OUTPUT / "communication.json").write_text('{"step50": {"p2p": {}, "collec')
    (rank_dir / OUTPUT / "api_statistic.csv").write_bytes(b"\xff\xfe garbage")
    damaged, intact = read(rank_dir), read(LEVEL1)
    pd.testing.assert_frame_equal(damaged.tasks, intact.tasks)
    pd.testing.assert_frame_equal(damaged.steps, intact.steps)
    assert damaged.notes == intact.notes


def test_a_profiler_info_after_a_byte_order_mark_is_read(tmp_path: Path) -> None:
    rank_dir = copy_rank_dir(LEVEL1, tmp_path / "x_ascend_pt")
    info = rank_dir / "profiler_info_0.json"
    info.write_bytes(b"\xef\xbb\xbf" + info.read_bytes())
    profile, intact = read(rank_dir), read(LEVEL1)
    assert profile.metadata["profiler_level"] == "Level1"
    assert profile.metadata == intact.metadata
    assert profile.notes == intact.notes

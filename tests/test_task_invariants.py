"""Invariants every reader keeps, over every real fixture: each task is counted once, and the
operator table (sums of task durations) agrees with the metrics (unions of task intervals).

A sum of durations can exceed the union of the same intervals (tasks overlap on several
streams), never fall below it; copies of one stream never overlap, so a copy listed by two
sources shows as two overlapping copies on one stream.
"""

from __future__ import annotations

import csv
import json
import shutil
import warnings
from pathlib import Path

import pandas as pd
import pytest

from perfgate.analysis.metrics import analyze, assign_steps
from perfgate.ingest import load_profile
from perfgate.intervals import merge, union_length
from perfgate.model import Profile

DATA = Path(__file__).parent / "data"
TORCH_NPU = DATA / "torch_npu"
TRACE_VIEW = DATA / "ascend_timeline" / "trace_view.json"
FIXTURES = [
    TORCH_NPU / "ascend-msinsight" / "pytorch_text_level0_rank0_ascend_pt",
    TORCH_NPU / "ascend-msinsight" / "pytorch_text_level1_rank0_ascend_pt",
    TORCH_NPU / "ascend-msinsight" / "st_level2_rank_0_ascend_pt",
    TORCH_NPU / "ascend-mstt" / "advisor_compute_advice_data" / "kernel_details.csv",
    TORCH_NPU / "ascend-mstt" / "advisor_backend_compute_advice" / "kernel_details.csv",
    TORCH_NPU / "ascend-mstt" / "cluster_analysis_output",
    DATA / "msprof" / "ascend-msprof-skill" / "PROF_000001_20260605161708478_FRJKORBPFMHQMGLA",
    DATA / "ascend_db" / "msprof_full_db" / "msprof_0.db",
    DATA / "ascend_db" / "pytorch_db_level1_rank0_ascend_pt",
    DATA / "ascend_db" / "pytorch_text_level1_rank0_ascend_pt",
    TRACE_VIEW,
    *sorted((DATA / "kineto").glob("*.json.gz")),
]
# Fixtures with copy tasks, and their copies per step (read off the files).
COPIES_PER_STEP = {
    "pytorch_db_level1_rank0_ascend_pt": 24,  # TASK: 24 MEMCPY_ASYNC rows
    "trace_view.json": 2,  # two MEMCPY_ASYNC events inside ProfilerStep#1
    "benchmark_result_2869224_1695835535_trace.json.gz": 16,  # 16 gpu_memcpy
    "mi250_minitoy_train_ROCm6_2_kineto.json.gz": 2,  # both HtoD in step 1, step 2 left out
    "sampled_rank-0.json.gz": 20,  # 40 gpu_memcpy over 2 steps
    "sampled_rank-1.json.gz": 20,
}
# Stored epoch times are float64 spaced 2**-7 µs apart: an interval end may move that much.
SPACING_US = 2**-7


def ids(path: Path) -> str:
    return f"{path.parent.name}/{path.name}"


def counted_tasks(profile: Profile, analysed: pd.DataFrame) -> pd.DataFrame:
    """The tasks the analysis counts: those of the analysed (rank, step) windows."""
    tasks = assign_steps(profile.tasks, profile.steps) if not profile.steps.empty else None
    if tasks is None:
        tasks = profile.tasks.assign(step=profile.tasks["step"].fillna(-1))
        # Without step marks a window spans the work (compute, copy, comm); bookkeeping
        # tasks outside it (msprof's TASK_TIMEOUT_SET, seconds before) are not counted.
        keep = pd.Series(True, index=tasks.index)
        for _, group in tasks.groupby(["rank", "step"]):
            work = group.loc[group["category"] != "other"]
            work = group if work.empty else work
            low, high = work["start_us"].min(), (work["start_us"] + work["dur_us"]).max()
            ends = group["start_us"] + group["dur_us"]
            keep.loc[group.index] = (ends >= low) & (group["start_us"] <= high)
        return tasks.loc[keep]
    keys = set(zip(analysed["rank"].tolist(), analysed["step"].tolist()))
    keep = [(r, s) in keys for r, s in zip(tasks["rank"].tolist(), tasks["step"].tolist())]
    return tasks.loc[keep]


@pytest.mark.parametrize("path", FIXTURES, ids=ids)
def test_operator_time_per_category_is_at_least_its_interval_union(path: Path) -> None:
    profile = load_profile(path)
    analysis = analyze(profile)
    if profile.tasks.empty:
        pytest.skip("no per-task data in this export")
    tasks = counted_tasks(profile, analysis.per_rank)
    rank_steps = len(analysis.per_rank)
    table = analysis.operators.groupby("category")["time_per_step_us"].sum()
    for category, rows in tasks.groupby("category"):
        unions = [
            union_length(g["start_us"], g["start_us"] + g["dur_us"])
            for _, g in rows.groupby(["rank", "step"])
        ]
        union_per_step = sum(unions) / rank_steps
        assert table[category] >= union_per_step - SPACING_US * len(rows), category
        # And the table holds exactly the counted tasks' time.
        assert table[category] == pytest.approx(rows["dur_us"].sum() / rank_steps)


@pytest.mark.parametrize("path", FIXTURES, ids=ids)
def test_no_two_copies_of_one_stream_overlap_and_the_table_counts_each(path: Path) -> None:
    profile = load_profile(path)
    analysis = analyze(profile)
    copies = profile.tasks.loc[profile.tasks["category"] == "copy"]
    if "stream" in copies.columns:
        for _, rows in copies.dropna(subset=["stream"]).groupby(["rank", "stream"]):
            starts = rows["start_us"].to_numpy()
            ends = starts + rows["dur_us"].to_numpy()
            merged_starts, _ = merge(starts, ends - SPACING_US)  # touching is not overlapping
            assert len(merged_starts) == len(rows), "a copy task is listed twice"
    table = analysis.operators.loc[analysis.operators["category"] == "copy"]
    expected = COPIES_PER_STEP.get(path.name, 0)
    assert table["calls_per_step"].sum() == expected


@pytest.mark.parametrize(
    "path",
    [p for p in FIXTURES if p.name in COPIES_PER_STEP],
    ids=ids,
)
def test_copy_rows_of_the_operator_table_agree_with_copy_ratio(path: Path) -> None:
    analysis = analyze(load_profile(path))
    copy_time = analysis.operators.loc[analysis.operators["category"] == "copy"]
    per_step = float(copy_time["time_per_step_us"].sum())
    copy_us = float(analysis.per_rank["copy_us"].mean())
    # Copies of these profiles never overlap one another: sum and union are the same time.
    assert per_step == pytest.approx(copy_us, abs=SPACING_US * COPIES_PER_STEP[path.name])
    # copy_ratio is that time over the step time, step by step.
    ratios = analysis.per_rank["copy_us"] / analysis.per_rank["step_time_us"]
    assert analysis.per_rank["copy_ratio"].tolist() == pytest.approx(ratios.tolist())


def kernel_details_from_trace_view(rank_dir: Path) -> Path:
    """A torch_npu rank directory: the real trace_view.json and a kernel_details.csv that lists
    its device tasks, memcpy rows included (Type N/A), as newer torch_npu writes it."""
    output = rank_dir / "ASCEND_PROFILER_OUTPUT"
    output.mkdir(parents=True)
    shutil.copy(TRACE_VIEW, output / "trace_view.json")
    events = json.loads(TRACE_VIEW.read_text())
    hardware = {
        e["pid"]
        for e in events
        if e.get("ph") == "M" and e.get("name") == "process_name"
        if e["args"]["name"] == "Ascend Hardware"
    }
    header = [
        *("Step Id", "Model ID", "Task ID", "Stream ID", "Name", "Type", "Accelerator Core"),
        *("Start Time(us)", "Duration(us)", "Wait Time(us)", "Block Dim"),
    ]
    rows = []
    for e in events:
        if e.get("ph") != "X" or e["pid"] not in hardware:
            continue
        args = e["args"]
        memcpy = e["name"] == "MEMCPY_ASYNC"
        core = "MEMCPY_ASYNC" if memcpy else args["Task Type"].replace("Other", "AI_CORE")
        op_type = "N/A" if memcpy else e["name"].rsplit("_", 1)[-1]
        numbers = (args["Model Id"], args["Task Id"], args["Stream Id"])
        rows.append([1, *numbers, e["name"], op_type, core, e["ts"] + "\t", e["dur"], 0, 0])
    with (output / "kernel_details.csv").open("w", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\r\n")
        writer.writerow(header)
        writer.writerows(rows)
    return rank_dir


def test_a_copy_in_both_kernel_details_and_trace_view_is_counted_once(tmp_path: Path) -> None:
    # trace_view.json: MEMCPY_ASYNC Task Id 440 (1.11 µs) and 460 (1.08 µs) on stream 3 in
    # ProfilerStep#1; kernel_details.csv lists them too. Before: 4 calls, 4.38 µs per step.
    profile = load_profile(kernel_details_from_trace_view(tmp_path / "x_ascend_pt"))
    assert len(profile.tasks) == 276  # the 276 Ascend Hardware events, none twice
    copies = profile.tasks.loc[profile.tasks["category"] == "copy"]
    assert copies["task_id"].tolist() == ["440", "460"]
    analysis = analyze(profile)
    memcpy = analysis.operators.set_index("op_type").loc["MEMCPY_ASYNC"]
    assert memcpy["calls_per_step"] == 2
    assert memcpy["time_per_step_us"] == pytest.approx(1.11 + 1.08)
    assert float(analysis.per_step["copy_us"].iloc[0]) == pytest.approx(2.19, abs=2 * SPACING_US)


TEXT_COLUMNS = (
    "name",
    "op_type",
    "core",
    "category",
    "input_shapes",
    "direction",
    "stream",
    "task_id",
)


@pytest.mark.parametrize("path", FIXTURES, ids=ids)
def test_text_columns_are_plain_objects(path: Path) -> None:
    """Readers keep names categorical while reading (ingest/common.categorical_from), and
    pandas may make text columns ``str``; the tasks table every reader gives the analysis
    holds them as plain objects (docs/formats.md §1.1)."""
    tasks = load_profile(path).tasks
    text = [c for c in TEXT_COLUMNS if c in tasks.columns]
    assert {c: str(tasks[c].dtype) for c in text} == {c: "object" for c in text}


def _every_readable_path() -> list[Path]:
    """Every path in tests/data that a reader takes (files and the directories above them)."""
    from perfgate.errors import ProfileError
    from perfgate.ingest import detect_reader

    found = []
    for path in sorted(DATA.rglob("*")):
        try:
            detect_reader(path)
        except ProfileError:
            continue
        found.append(path)
    return found


@pytest.mark.parametrize("path", _every_readable_path(), ids=lambda p: str(p.relative_to(DATA)))
def test_reading_and_analysing_a_real_profile_warns_nothing(path: Path) -> None:
    """A warning (pandas' FutureWarning about concatenating empty tables, under pandas 2)
    would reach the user's terminal on every `perfgate inspect`."""
    from perfgate.errors import ProfileError

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        try:
            profile = load_profile(path)
        except ProfileError:
            return  # a folder of several profiles is refused: no table to warn about
        analyze(profile)

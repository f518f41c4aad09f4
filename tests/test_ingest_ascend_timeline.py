"""Ascend timelines (torch_npu trace_view.json, msprof_*.json) → canonical tables.

Expected figures were worked out from the raw file with a scratch script: ``json.load`` the
array, map pids to tracks through the ``process_name`` metadata (Python 437675, Ascend
Hardware 800, CANN 43767502, Overlap Analysis 4376751100), count and sum with ``Decimal``.
Time stamps are epoch µs strings: the tables hold them as µs since EPOCH_ORIGIN_US, exactly.
"""

from __future__ import annotations

import json
from collections import Counter
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from perfgate.errors import ProfileError
from perfgate.ingest import load_profile
from perfgate.ingest.chrome_trace import detect, profiler_step_windows, read
from perfgate.model import EPOCH_ORIGIN_US

DATA = Path(__file__).parent / "data" / "ascend_timeline"
TRACE_VIEW = DATA / "trace_view.json"
TINY = DATA / "trace_view_tiny.json"

# Stored times are the float64 nearest to the exact relative value.
EXACT = 1e-6


def relative_us(epoch_us: str) -> float:
    """An epoch-µs time stamp as the readers store it: µs since EPOCH_ORIGIN_US, exactly."""
    return float(Decimal(epoch_us) - EPOCH_ORIGIN_US)


# ProfilerStep#1 (cat cpu_op, Python process): ts "1704161511420289.011", dur 14091.97
STEP_START = relative_us("1704161511420289.011")
STEP_END = relative_us("1704161511434380.981")


def events() -> list[dict[str, Any]]:
    loaded: list[dict[str, Any]] = json.loads(TRACE_VIEW.read_text())
    return loaded


def test_trace_view_tasks_are_the_events_on_the_ascend_hardware_track() -> None:
    profile = read(TRACE_VIEW)

    assert profile.source == "ascend_timeline"
    assert (
        profile.metadata.items()
        >= {
            "ranks": [0],
            "task_basis": "device",
            "time_origin_us": EPOCH_ORIGIN_US,
        }.items()
    )
    tasks = profile.tasks
    # 276 X events on pid 800 (process_name "Ascend Hardware"), all on Stream Id 3
    assert len(tasks) == 276
    assert set(tasks["stream"]) == {"3"}
    # Task Type is "Other" for 274 of them (this torch_npu/CANN writes no finer type) and
    # AI_CPU for 2; two of the "Other" tasks are *named* MEMCPY_ASYNC, so that name is the core
    assert Counter(tasks["core"]) == {"Other": 272, "MEMCPY_ASYNC": 2, "AI_CPU": 2}
    assert Counter(zip(tasks["core"], tasks["category"])) == {
        # "Other" says nothing; torch_npu's own Computing (1788.2505 µs = all task time
        # minus the two copies) counts these kernels as compute, and so does perfgate
        ("Other", "compute"): 272,
        ("MEMCPY_ASYNC", "copy"): 2,
        ("AI_CPU", "compute"): 2,
    }
    # the MEMCPY_ASYNC durations are 1.11 and 1.08; the AI_CPU ones 188.148… and 139.418…
    by_core = tasks.groupby("core")["dur_us"].sum()
    assert by_core["MEMCPY_ASYNC"] == pytest.approx(2.19)
    assert by_core["AI_CPU"] == pytest.approx(188.14802169799805 + 139.4186019897461)
    assert tasks["dur_us"].sum() == pytest.approx(1790.44062368774415)
    # names keep the instance; op_type drops it: aclnnMm_/aclnnAddmm_MatMulCommon_MatMulV2
    # (6 + 3 tasks) → MatMulV2, Conv2D1 → Conv2D, trans_TransData_8 → TransData
    assert (tasks["op_type"] == "MatMulV2").sum() == 9
    assert tasks.loc[tasks["name"] == "Conv2D1", "op_type"].tolist() == ["Conv2D"]
    assert set(tasks.loc[tasks["name"] == "trans_TransData_8", "op_type"]) == {"TransData"}
    # the first device task starts at "1704161511422904.204", inside ProfilerStep#1
    assert tasks["start_us"].min() == pytest.approx(relative_us("1704161511422904.204"), abs=EXACT)
    assert tasks["step"].tolist() == [1] * 276
    assert profile.notes == []


def test_trace_view_step_has_the_overlap_analysis_breakdown() -> None:
    profile = read(TRACE_VIEW)

    assert len(profile.steps) == 1
    step = profile.steps.iloc[0]
    assert (step["rank"], step["step"]) == (0, 1)
    assert step["start_us"] == pytest.approx(STEP_START, abs=EXACT)
    assert step["end_us"] == pytest.approx(STEP_END, abs=EXACT)
    # a difference of two stored times: exact to their float64 spacing (2**-11 µs here)
    assert step["end_us"] - step["start_us"] == pytest.approx(14091.97, abs=1e-3)
    # Overlap Analysis: 274 "Computing" events summing to 1788.2505 µs (= all device task
    # time 1790.4406 minus the two MEMCPY_ASYNC, 2.19), 273 "Free" summing to 9481.667, and
    # no "Communication(Not Overlapped)" events
    assert step["computing_us"] == pytest.approx(1788.2505)
    assert step["free_us"] == pytest.approx(9481.667)
    assert step["comm_not_overlapped_us"] == 0.0
    # Preparing: first Computing event "1704161511422904.204" − step start = 2615.193 µs
    assert step["preparing_us"] == pytest.approx(2615.193, abs=1e-6)


def test_tracks_are_found_by_process_name_not_by_pid(tmp_path: Path) -> None:
    # swap the pids of the Python and Ascend Hardware processes: nothing may change
    swap = {437675: 800, 800: 437675}
    moved = [{**e, "pid": swap.get(e["pid"], e["pid"])} for e in events()]
    path = tmp_path / "trace_view.json"
    path.write_text(json.dumps(moved))

    profile = read(path)

    assert len(profile.tasks) == 276
    assert profile.steps["step"].tolist() == [1]
    assert profile.steps["computing_us"].iloc[0] == pytest.approx(1788.2505)


def test_a_timeline_without_framework_steps_is_one_window(tmp_path: Path) -> None:
    # what an msprof_*.json looks like: no Python process, so no ProfilerStep marks
    no_python = [e for e in events() if e.get("pid") != 437675]
    path = tmp_path / "msprof_20240102000000.json"
    path.write_text(json.dumps(no_python))

    profile = read(path)

    assert profile.steps.empty
    assert profile.notes == ["no step marks: analysed as one window"]
    assert len(profile.tasks) == 276
    assert profile.tasks["step"].isna().all()


def test_profiler_step_windows_gives_the_python_step_marks() -> None:
    windows = profiler_step_windows(TRACE_VIEW)

    assert windows["step"].tolist() == [1]
    assert str(windows["step"].dtype) == "Int64"
    assert windows["start_us"].tolist() == pytest.approx([STEP_START], abs=EXACT)
    assert windows["end_us"].tolist() == pytest.approx([STEP_END], abs=EXACT)
    assert windows.attrs["time_origin_us"] == EPOCH_ORIGIN_US


def test_detect_and_load_profile_recognise_the_timeline() -> None:
    assert detect(TRACE_VIEW)
    assert detect(TINY)
    assert load_profile(TRACE_VIEW).source == "ascend_timeline"


def test_a_timeline_with_only_metadata_events_is_an_error_naming_the_file() -> None:
    # trace_view_tiny.json: 23 "ph": "M" events (Ascend Hardware process, Stream threads)
    with pytest.raises(ProfileError, match="holds no task or step events") as info:
        read(TINY)
    assert str(TINY) in str(info.value)


def test_a_truncated_timeline_is_an_error_naming_the_file(tmp_path: Path) -> None:
    data = TRACE_VIEW.read_bytes()
    cut = tmp_path / "trace_view.json"
    cut.write_bytes(data[: len(data) // 2])

    with pytest.raises(ProfileError, match="truncated or not valid JSON") as info:
        read(cut)
    assert str(cut) in str(info.value)


def test_a_task_with_an_unreadable_timestamp_is_an_error_naming_ts(tmp_path: Path) -> None:
    broken = events()
    task = next(e for e in broken if e.get("pid") == 800 and e.get("ph") == "X")
    task["ts"] = "1704161511422904,204"  # a decimal comma
    path = tmp_path / "trace_view.json"
    path.write_text(json.dumps(broken))

    with pytest.raises(ProfileError, match="is not a number") as info:
        read(path)
    assert info.value.column == "ts"
    assert str(path) in str(info.value)


def test_a_timeline_with_two_devices_reads_one_rank_per_npu_label(tmp_path: Path) -> None:
    # the real file with its device tracks relabelled "NPU 4" and copied as "NPU 5"
    # (pid 800 → 801, 4376751100 → 4376751101), as msprof labels the tracks of each device
    device_pids = {800: 801, 4376751100: 4376751101}
    original = events()
    relabelled: list[dict[str, Any]] = []
    for event in original:
        if event.get("name") == "process_labels" and event["pid"] in device_pids:
            event = {**event, "args": {"labels": "NPU 4"}}
        relabelled.append(event)
    copies = [
        {**e, "pid": device_pids[e["pid"]]}
        if e.get("name") != "process_labels"
        else {**e, "pid": device_pids[e["pid"]], "args": {"labels": "NPU 5"}}
        for e in relabelled
        if e.get("pid") in device_pids and e.get("ph") in ("X", "M")
    ]
    path = tmp_path / "msprof_20240102000000.json"
    path.write_text(json.dumps(relabelled + copies))

    profile = read(path)

    assert profile.metadata["ranks"] == [4, 5]
    assert profile.tasks.groupby("rank").size().to_dict() == {4: 276, 5: 276}
    assert profile.steps[["rank", "step"]].values.tolist() == [[4, 1], [5, 1]]
    assert profile.steps["computing_us"].tolist() == pytest.approx([1788.2505, 1788.2505])

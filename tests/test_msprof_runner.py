"""The msprof runner, the step marks, and the msprof stand-in they are tested through.

Every run goes through ``tests/bin/msprof`` (a faithful stand-in: msprof's argument forms,
its behaviour on a failing application, the real export formats) which really runs the
benchmark script ``tests/data/msprof_workloads/train_steps.py``; the script's own step marks
give the step windows and the workload JSON says which device tasks ran in each. Expected
metrics are derived by hand from the workload and the measured windows.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import time
import types
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from perfgate.analysis.metrics import RunAnalysis, analyze
from perfgate.errors import PerfgateError
from perfgate.ingest import load_profile
from perfgate.marks import STEP_MARKS_ENV, TRUNCATED_NOTE, read_step_marks, step
from perfgate.model import EPOCH_ORIGIN_US, NO_STEP_MARKS_NOTE, Profile, TimeBase
from perfgate.profilers.msprof import (
    MSPROF_OPTIONS,
    STEP_MARKS_NOTE,
    MsprofRun,
    load_msprof_run,
    run_under_msprof,
)

TESTS = Path(__file__).resolve().parent
BIN = TESTS / "bin"
WORKLOADS = TESTS / "data" / "msprof_workloads"
TRAIN = WORKLOADS / "train_steps.py"
REAL_EXPORT = next(
    (TESTS / "data" / "msprof" / "ascend-msprof-skill").glob("PROF_*/mindstudio_profiler_output")
)
STEPS, WARMUP = 12, 2
TRAIN_COMMAND = [sys.executable, str(TRAIN), "--steps", str(STEPS), "--warmup", str(WARMUP)]
PROF_NAME = re.compile(r"^PROF_000001_\d{17}_[A-Z]{16}$")

# What the workload JSONs put in every step (µs): kernels back to back, copies first.
BASELINE_COMPUTE_US = 2 * 900.0 + 2 * 35.0 + 2 * 12.5  # MatMulV2, Tanh, Mul
REGRESSED_COMPUTE_US = 2 * 1100.0 + 2 * 35.0 + 2 * 12.5
COPY_US = 120.0  # one MEMCPY_ASYNC per step
REGRESSED_COPY_US = 120.0 + 480.0  # and an extra, larger host-to-device copy
GAP_US = 5.0
# The stand-in lays its tasks out from float(start_us) of the marks: epoch µs that a float64
# rounds to 0.25 µs, so its tasks sit up to 0.125 µs off the exact marks (perfgate's own times
# are exact to the float64 spacing of µs since the origin, 2**-6 µs in 2026).
STAMP_US = 0.25


def relative_us(epoch_us: Decimal) -> float:
    """An epoch-µs time stamp as the readers store it: µs since EPOCH_ORIGIN_US, exactly."""
    return float(epoch_us - EPOCH_ORIGIN_US)


def npu_env(root: Path, workload: str | None = "baseline.json") -> dict[str, str]:
    """An environment where msprof and npu-smi are the stand-ins and davinci0 exists."""
    dev = root / "dev"
    dev.mkdir(parents=True, exist_ok=True)
    (dev / "davinci0").touch()
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("PERFGATE_") and k not in ("RANK", "LOCAL_RANK")
    }
    env["PATH"] = f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"
    env["PERFGATE_DEV_ROOT"] = str(dev)
    if workload is not None:
        env["PERFGATE_FAKE_MSPROF_WORKLOAD"] = str(WORKLOADS / workload)
    return env


@dataclass
class Profiled:
    run: MsprofRun
    profile: Profile
    analysis: RunAnalysis
    marks: pd.DataFrame


def profiled(root: Path, workload: str) -> Profiled:
    run = run_under_msprof(TRAIN_COMMAND, root / "out", env=npu_env(root, workload), timeout=120)
    profile = load_msprof_run(run)
    return Profiled(run, profile, analyze(profile), read_step_marks(run.marks_path))


@pytest.fixture(scope="module")
def baseline(tmp_path_factory: pytest.TempPathFactory) -> Profiled:
    return profiled(tmp_path_factory.mktemp("baseline"), "baseline.json")


@pytest.fixture(scope="module")
def regressed(tmp_path_factory: pytest.TempPathFactory) -> Profiled:
    return profiled(tmp_path_factory.mktemp("regressed"), "regressed.json")


def export_file(prof: Path, kind: str) -> Path:
    [path] = (prof / "mindstudio_profiler_output").glob(f"{kind}_*.csv")
    return path


def operator(analysis: RunAnalysis, op_type: str) -> pd.Series:
    [row] = [r for _, r in analysis.operators.iterrows() if r["op_type"] == op_type]
    return row


def measured(result: Profiled) -> pd.DataFrame:
    marks = result.marks.loc[~result.marks["warmup"]]
    return marks.assign(span=marks["end_us"] - marks["start_us"]).set_index("step")


# --------------------------------------------------------------------------- the run


def test_the_runner_gives_msprof_the_output_the_options_and_the_wrapped_command(
    baseline: Profiled,
) -> None:
    first = baseline.run.log_path.read_text(encoding="utf-8").splitlines()[0]
    out = baseline.run.out_dir
    assert shlex.split(first.removeprefix("$ ")) == [
        str(BIN / "msprof"),
        f"--output={out}",
        "--ascendcl=on",
        "--runtime-api=on",
        "--task-time=l1",
        "--aic-mode=task-based",
        "--aic-metrics=PipeUtilization",
        sys.executable,
        "-m",
        "perfgate.profilers.msprof",
        f"--exit-status={out / 'app_exit_status'}",
        "--",
        *TRAIN_COMMAND,
    ]
    assert baseline.run.returncode == 0
    assert baseline.run.marks_path == out / "step_marks.jsonl"
    assert (out / "app_exit_status").read_text(encoding="utf-8").strip() == "0"


def test_a_run_leaves_one_prof_directory_named_and_laid_out_as_msprofs(
    baseline: Profiled,
) -> None:
    [prof] = baseline.run.prof_dirs
    assert PROF_NAME.match(prof.name), prof.name
    assert prof.parent == baseline.run.out_dir
    for kind in ("op_summary", "task_time", "op_statistic"):
        assert re.fullmatch(rf"{kind}_\d{{14}}\.csv", export_file(prof, kind).name)


def test_the_export_headers_are_byte_for_byte_those_of_a_real_cann_export(
    baseline: Profiled,
) -> None:
    [prof] = baseline.run.prof_dirs
    for kind in ("op_summary", "task_time", "op_statistic"):
        [real] = REAL_EXPORT.glob(f"{kind}_*.csv")
        ours = export_file(prof, kind).read_text(encoding="utf-8").splitlines()[0]
        assert ours == real.read_text(encoding="utf-8").splitlines()[0]


def test_the_export_cells_have_msprofs_tab_stamps_na_and_tripled_quote_shapes(
    baseline: Profiled,
) -> None:
    [prof] = baseline.run.prof_dirs
    op_summary = export_file(prof, "op_summary").read_text(encoding="utf-8").splitlines()
    first = op_summary[1]
    assert re.search(r",\d{16}\.\d{3}\t,900\.000,0,", first), first
    assert ',"""256,256;256,256""",FLOAT16;FLOAT16,' in first
    assert ",FORMAT_ND,N/A," in first  # Context ID of an AI_CORE task
    # 14 steps (warm-up included) x 6 kernels; copies are not operators.
    assert len(op_summary) - 1 == (STEPS + WARMUP) * 6
    assert not any("MEMCPY_ASYNC" in line for line in op_summary)
    task_time = export_file(prof, "task_time").read_text(encoding="utf-8").splitlines()
    copies = [line for line in task_time if ",MEMCPY_ASYNC," in line]
    assert len(copies) == STEPS + WARMUP
    assert all(re.match(r"0,N/A,MEMCPY_ASYNC,2,\d+,120\.000,\d+\.\d{3}\t,", c) for c in copies)


def test_the_steps_are_the_marked_windows_with_the_warm_ups_flagged(baseline: Profiled) -> None:
    steps = baseline.profile.steps
    lines = baseline.run.marks_path.read_text().splitlines()
    marks = [json.loads(line, parse_float=Decimal) for line in lines]
    assert [m["step"] for m in marks] == list(range(STEPS + WARMUP))
    assert steps["step"].tolist() == list(range(STEPS + WARMUP))
    assert steps["warmup"].tolist() == [True] * WARMUP + [False] * STEPS
    # the marks' exact decimals, in the time base of the export's task times
    assert baseline.profile.metadata["time_origin_us"] == EPOCH_ORIGIN_US
    assert steps["start_us"].tolist() == [relative_us(m["start_us"]) for m in marks]
    assert steps["end_us"].tolist() == [relative_us(m["end_us"]) for m in marks]
    assert steps["rank"].tolist() == [0] * (STEPS + WARMUP)
    assert baseline.profile.source == "msprof"
    assert f"{STEP_MARKS_NOTE} (step_marks.jsonl: 12 step(s), 2 warm-up)" in (
        baseline.profile.notes
    )
    assert NO_STEP_MARKS_NOTE not in baseline.profile.notes


def test_each_step_has_the_workloads_copy_and_compute_time_over_its_measured_window(
    baseline: Profiled,
) -> None:
    per_step = baseline.analysis.per_step.set_index("step")
    windows = measured(baseline)
    assert per_step.index.tolist() == list(range(WARMUP, WARMUP + STEPS))
    for number, row in per_step.iterrows():
        span = windows.loc[number, "span"]
        assert row["step_time_us"] == span
        assert row["copy_us"] == pytest.approx(COPY_US, abs=STAMP_US)
        assert row["copy_ratio"] == pytest.approx(COPY_US / span, abs=STAMP_US / span)
        assert row["computing_us"] == pytest.approx(BASELINE_COMPUTE_US, abs=STAMP_US)
        assert row["utilization"] == pytest.approx(BASELINE_COMPUTE_US / span, abs=STAMP_US / span)
        # Before the first kernel: a gap, the copy, a gap.
        assert row["preparing_us"] == pytest.approx(GAP_US + COPY_US + GAP_US, abs=STAMP_US)
        assert row["comm_ratio"] == 0.0
        breakdown = (row["computing_us"] + row["comm_not_overlapped_us"] + row["free_us"]) + row[
            "preparing_us"
        ]
        assert breakdown == pytest.approx(span)


def test_the_operator_table_has_the_workloads_calls_and_time_per_step(baseline: Profiled) -> None:
    matmul = operator(baseline.analysis, "MatMulV2")
    assert (matmul["core"], matmul["category"]) == ("AI_CORE", "compute")
    assert matmul["calls_per_step"] == 2
    assert matmul["time_per_step_us"] == pytest.approx(1800.0)
    assert operator(baseline.analysis, "Tanh")["time_per_step_us"] == pytest.approx(70.0)
    assert operator(baseline.analysis, "Mul")["time_per_step_us"] == pytest.approx(25.0)
    copy = operator(baseline.analysis, "MEMCPY_ASYNC")
    assert (copy["category"], copy["calls_per_step"]) == ("copy", 1)
    assert copy["time_per_step_us"] == pytest.approx(COPY_US)
    assert baseline.analysis.operators["op_type"].tolist()[0] == "MatMulV2"


def test_the_regressed_workload_has_a_higher_copy_ratio_and_a_slower_matmul(
    baseline: Profiled, regressed: Profiled
) -> None:
    per_step = regressed.analysis.per_step.set_index("step")
    windows = measured(regressed)
    for number, row in per_step.iterrows():
        span = windows.loc[number, "span"]
        assert row["copy_us"] == pytest.approx(REGRESSED_COPY_US, abs=STAMP_US)
        assert row["copy_ratio"] == pytest.approx(REGRESSED_COPY_US / span, abs=STAMP_US / span)
        assert row["utilization"] == pytest.approx(REGRESSED_COMPUTE_US / span, abs=STAMP_US / span)
    copy_ratio = {
        name: result.analysis.summary["copy_ratio"]["median"]
        for name, result in (("baseline", baseline), ("regressed", regressed))
    }
    # 600 µs against 120 µs of copies: higher unless the steps ran 5 times slower.
    step_times = {
        name: result.analysis.summary["step_time_us"]["median"]
        for name, result in (("baseline", baseline), ("regressed", regressed))
    }
    assert copy_ratio["regressed"] > copy_ratio["baseline"], (copy_ratio, step_times)
    assert operator(regressed.analysis, "MatMulV2")["time_per_step_us"] == pytest.approx(2200.0)
    assert operator(regressed.analysis, "MatMulV2")["calls_per_step"] == 2
    copies = operator(regressed.analysis, "MEMCPY_ASYNC")
    assert copies["calls_per_step"] == 2
    assert copies["time_per_step_us"] == pytest.approx(REGRESSED_COPY_US)


def test_two_prof_directories_are_read_as_one_profile(
    baseline: Profiled, regressed: Profiled, tmp_path: Path
) -> None:
    both = MsprofRun(
        prof_dirs=[*baseline.run.prof_dirs, *regressed.run.prof_dirs],
        marks_path=tmp_path / "no_marks.jsonl",
        returncode=0,
        log_path=tmp_path / "msprof.log",
    )
    profile = load_msprof_run(both)
    assert len(profile.tasks) == len(baseline.profile.tasks) + len(regressed.profile.tasks)
    assert profile.steps.empty
    assert NO_STEP_MARKS_NOTE in profile.notes


# --------------------------------------------------------------------------- failures


def test_a_failing_command_is_an_error_naming_its_exit_code_though_msprof_exits_0(
    tmp_path: Path,
) -> None:
    command = [sys.executable, "-c", "import sys; print('boom'); sys.exit(3)"]
    with pytest.raises(PerfgateError) as caught:
        run_under_msprof(command, tmp_path / "out", env=npu_env(tmp_path))
    message = str(caught.value)
    assert "(it exited with 3)" in message
    assert shlex.join(command) in message
    assert "boom" in message  # the end of the log
    assert "\n" not in message
    # The stand-in, like msprof, only warned about the application and exported anyway.
    log = (tmp_path / "out" / "msprof.log").read_text(encoding="utf-8")
    assert "[WARNING] An exception has occurred in process App, return code: No such process." in (
        log
    )
    assert list((tmp_path / "out").glob("PROF_*"))


def test_an_option_msprof_rejects_is_an_error_with_msprofs_exit_code_and_complaint(
    tmp_path: Path,
) -> None:
    with pytest.raises(PerfgateError) as caught:
        run_under_msprof(
            TRAIN_COMMAND,
            tmp_path / "out",
            options=[*MSPROF_OPTIONS, "--bogus=1"],
            env=npu_env(tmp_path),
        )
    message = str(caught.value)
    assert "msprof failed (it exited with 255)" in message
    assert "msprof: unrecognized option '--bogus=1'" in message
    assert str(tmp_path / "out" / "msprof.log") in message


def test_a_workload_that_never_used_the_npu_is_msprofs_no_profiling_data_error(
    tmp_path: Path,
) -> None:
    with pytest.raises(PerfgateError, match=r"exited with 255.*Failed to find profiling data"):
        run_under_msprof(TRAIN_COMMAND, tmp_path / "out", env=npu_env(tmp_path, workload=None))


def test_msprof_exiting_0_without_a_prof_directory_is_an_error_pointing_at_the_log(
    tmp_path: Path,
) -> None:
    # --delay: collection would start after 60 s, but the application is done before.
    with pytest.raises(PerfgateError) as caught:
        run_under_msprof(
            TRAIN_COMMAND,
            tmp_path / "out",
            options=[*MSPROF_OPTIONS, "--delay=60"],
            env=npu_env(tmp_path),
        )
    message = str(caught.value)
    assert message.startswith("msprof wrote nothing: no PROF_* directory in ")
    assert str(tmp_path / "out" / "msprof.log") in message


def test_a_timeout_stops_msprof_and_the_command_it_started(tmp_path: Path) -> None:
    marker = tmp_path / "still_running"
    command = [
        sys.executable,
        "-c",
        f"import time, pathlib; time.sleep(4); pathlib.Path({str(marker)!r}).touch()",
    ]
    started = time.monotonic()
    with pytest.raises(PerfgateError, match=r"timed out after 1 s"):
        run_under_msprof(command, tmp_path / "out", env=npu_env(tmp_path), timeout=1)
    assert time.monotonic() - started < 4
    time.sleep(4.5 - (time.monotonic() - started))
    assert not marker.exists()


def test_the_environment_is_checked_before_msprof_runs(tmp_path: Path) -> None:
    env = npu_env(tmp_path)
    (tmp_path / "dev" / "davinci0").unlink()
    with pytest.raises(PerfgateError, match="no NPU device"):
        run_under_msprof(TRAIN_COMMAND, tmp_path / "out", env=env)
    assert not (tmp_path / "out").exists()


# --------------------------------------------------------------------------- stand-in forms


def test_the_stand_in_takes_the_application_option_form(tmp_path: Path) -> None:
    env = npu_env(tmp_path)
    env[STEP_MARKS_ENV] = str(tmp_path / "marks.jsonl")
    application = shlex.join([sys.executable, str(TRAIN), "--steps", "3", "--warmup", "0"])
    done = subprocess.run(
        [str(BIN / "msprof"), f"--output={tmp_path / 'out'}", f"--application={application}"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "[INFO] Process profiling data complete. Data is saved in " in done.stdout
    [prof] = (tmp_path / "out").glob("PROF_*")
    profile = load_profile(prof)
    # 3 steps x 6 kernels from op_summary, 3 copies and 2 runtime tasks from task_time.
    assert len(profile.tasks) == 3 * 6 + 3 + 2
    assert len(read_step_marks(tmp_path / "marks.jsonl")) == 3


def test_task_time_l0_exports_na_types_and_the_reader_names_operators_from_kernels(
    tmp_path: Path,
) -> None:
    run = run_under_msprof(
        [sys.executable, str(TRAIN), "--steps", "3", "--warmup", "0"],
        tmp_path / "out",
        options=["--task-time=l0"],
        env=npu_env(tmp_path),
    )
    [prof] = run.prof_dirs
    header = export_file(prof, "op_summary").read_text(encoding="utf-8").splitlines()[0]
    assert header.endswith(",Output Formats,Context ID")  # no PMU columns without l1
    operators = analyze(load_msprof_run(run)).operators.set_index("op_type")
    assert operators.loc["MatMulV2", "core"] == "N/A"
    assert operators.loc["MatMulV2", "calls_per_step"] == 2
    assert operators.loc["MatMulV2", "time_per_step_us"] == pytest.approx(1800.0)


def test_a_command_without_step_marks_is_analysed_as_one_window(tmp_path: Path) -> None:
    run = run_under_msprof(
        [sys.executable, "-c", "import time; time.sleep(0.05)"],
        tmp_path / "out",
        env=npu_env(tmp_path),
    )
    assert not run.marks_path.exists()
    profile = load_msprof_run(run)
    assert profile.steps.empty
    analysis = analyze(profile)
    assert analysis.per_step["step"].tolist() == [-1]
    assert NO_STEP_MARKS_NOTE in analysis.notes
    assert operator(analysis, "MatMulV2")["calls_per_step"] == 2


def test_marks_of_another_rank_are_laid_over_the_one_device_msprof_saw(tmp_path: Path) -> None:
    env = {**npu_env(tmp_path), "RANK": "3"}
    run = run_under_msprof(
        [sys.executable, str(TRAIN), "--steps", "3", "--warmup", "1"], tmp_path / "out", env=env
    )
    assert read_step_marks(run.marks_path)["rank"].tolist() == [3] * 4
    profile = load_msprof_run(run)
    assert profile.steps["rank"].tolist() == [0] * 4
    assert "step marks of rank(s) [3] laid over the tasks of device(s) [0], in order" in (
        profile.notes
    )
    assert operator(analyze(profile), "MatMulV2")["calls_per_step"] == 2


# --------------------------------------------------------------------------- step marks


def test_step_only_runs_its_body_without_the_environment_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(STEP_MARKS_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    ran = []
    for i in range(3):
        with step(i, warmup=i == 0):
            ran.append(i)
    assert ran == [0, 1, 2]
    assert list(tmp_path.iterdir()) == []


def test_step_appends_one_json_line_per_step_in_epoch_microseconds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    marks = tmp_path / "marks.jsonl"
    monkeypatch.setenv(STEP_MARKS_ENV, str(marks))
    monkeypatch.delenv("RANK", raising=False)
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    before = time.time() * 1e6
    for i in range(3):
        with step(i, warmup=i == 0):
            time.sleep(0.002)
    after = time.time() * 1e6
    text = marks.read_text(encoding="utf-8").splitlines()
    # the times are the ns of time.time_ns() as exact decimals of µs, never a float64's digits
    assert all(re.search(r'"start_us":\d{16}\.\d{3},"end_us":\d{16}\.\d{3},', t) for t in text)
    lines = [json.loads(line) for line in text]
    assert [(m["step"], m["warmup"], m["rank"], m["pid"]) for m in lines] == [
        (0, True, 0, os.getpid()),
        (1, False, 0, os.getpid()),
        (2, False, 0, os.getpid()),
    ]
    for mark in lines:
        assert before <= mark["start_us"] < mark["end_us"] <= after
        assert mark["end_us"] - mark["start_us"] >= 2000.0
    assert lines[0]["end_us"] <= lines[1]["start_us"]


def test_a_step_whose_body_raises_is_not_recorded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    marks = tmp_path / "marks.jsonl"
    monkeypatch.setenv(STEP_MARKS_ENV, str(marks))
    with step(0):
        pass
    with pytest.raises(ZeroDivisionError), step(1):
        _ = 1 / 0
    assert read_step_marks(marks)["step"].tolist() == [0]


def test_the_rank_of_a_mark_comes_from_rank_or_local_rank(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    marks = tmp_path / "marks.jsonl"
    monkeypatch.setenv(STEP_MARKS_ENV, str(marks))
    monkeypatch.delenv("RANK", raising=False)
    monkeypatch.setenv("LOCAL_RANK", "2")
    with step(0):
        pass
    monkeypatch.setenv("RANK", "5")
    with step(0):
        pass
    frame = read_step_marks(marks)
    assert list(zip(frame["rank"], frame["step"])) == [(2, 0), (5, 0)]


def test_step_synchronises_the_npu_and_opens_an_mstx_range_under_torch_npu(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[Any] = []
    npu = types.SimpleNamespace(
        is_initialized=lambda: True, synchronize=lambda: calls.append("npu.synchronize")
    )
    cuda = types.SimpleNamespace(
        is_initialized=lambda: False, synchronize=lambda: calls.append("cuda.synchronize")
    )

    def range_start(message: str) -> int:
        calls.append(("range_start", message))
        return 41

    mstx = types.SimpleNamespace(
        range_start=range_start,
        range_end=lambda range_id: calls.append(("range_end", range_id)),
    )
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(npu=npu, cuda=cuda))
    monkeypatch.setitem(
        sys.modules, "torch_npu", types.SimpleNamespace(npu=types.SimpleNamespace(mstx=mstx))
    )
    monkeypatch.setenv(STEP_MARKS_ENV, str(tmp_path / "marks.jsonl"))
    with step(5):
        calls.append("body")
    assert calls == [
        "npu.synchronize",
        ("range_start", "step 5"),
        "body",
        "npu.synchronize",
        ("range_end", 41),
    ]


def test_step_leaves_cuda_alone_when_the_workload_never_initialised_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_context() -> None:
        raise AssertionError("synchronize would create a CUDA context")

    cuda = types.SimpleNamespace(is_initialized=lambda: False, synchronize=no_context)
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(cuda=cuda))
    monkeypatch.delitem(sys.modules, "torch_npu", raising=False)
    monkeypatch.setenv(STEP_MARKS_ENV, str(tmp_path / "marks.jsonl"))
    with step(0):
        pass
    assert len(read_step_marks(tmp_path / "marks.jsonl")) == 1


def test_read_step_marks_ignores_a_truncated_last_line_and_says_so(tmp_path: Path) -> None:
    marks = tmp_path / "marks.jsonl"
    marks.write_text(
        '{"step":0,"start_us":100.0,"end_us":200.5,"warmup":true,"pid":7,"rank":0}\n'
        '{"step":1,"start_us":201.0,"end_us":300.0,"warmup":false,"pid":7,"rank":0}\n'
        '{"step":2,"start_us":301.0,"end_',
        encoding="utf-8",
    )
    frame = read_step_marks(marks)
    assert frame[["rank", "step", "start_us", "end_us", "warmup"]].to_dict("records") == [
        {"rank": 0, "step": 0, "start_us": 100.0, "end_us": 200.5, "warmup": True},
        {"rank": 0, "step": 1, "start_us": 201.0, "end_us": 300.0, "warmup": False},
    ]
    assert frame.attrs["notes"] == [f"{marks}: {TRUNCATED_NOTE}"]


def test_read_step_marks_converts_the_decimals_exactly_to_the_time_origin(tmp_path: Path) -> None:
    marks = tmp_path / "marks.jsonl"
    marks.write_text(
        # as perfgate writes them now (three decimals), and as older versions did (a float's
        # shortest repr)
        '{"step":0,"start_us":1780676244313289.123,"end_us":1780676244321002.705,'
        '"warmup":false,"pid":7,"rank":0}\n'
        '{"step":1,"start_us":1780676244321003.1,"end_us":1780676244330000,"rank":0}\n',
        encoding="utf-8",
    )
    frame = read_step_marks(marks)
    assert frame.attrs["time_origin_us"] == EPOCH_ORIGIN_US
    assert frame["start_us"].tolist() == [
        relative_us(Decimal("1780676244313289.123")),
        relative_us(Decimal("1780676244321003.1")),
    ]
    assert frame["end_us"].tolist() == [
        relative_us(Decimal("1780676244321002.705")),
        80676244330000.0,
    ]
    # in a profile's time base (here: one whose times are not epoch µs, origin 0)
    absolute = read_step_marks(marks, clock=TimeBase(0))
    assert absolute.attrs["time_origin_us"] == 0
    assert absolute["end_us"].iloc[1] == 1780676244330000.0


def test_small_mark_times_are_kept_as_they_are(tmp_path: Path) -> None:
    marks = tmp_path / "marks.jsonl"
    marks.write_text('{"step":0,"start_us":100,"end_us":200.125}\n', encoding="utf-8")
    frame = read_step_marks(marks)
    assert frame.attrs["time_origin_us"] == 0
    assert frame[["start_us", "end_us"]].values.tolist() == [[100.0, 200.125]]


@pytest.mark.parametrize(
    ("second_line", "problem"),
    [
        ("not json", "not JSON"),
        ('{"step":"1","start_us":1.0,"end_us":2.0}', "step is '1'"),
        ('{"step":1,"start_us":5.0,"end_us":2.0}', "end_us is before start_us"),
        ('{"step":1,"start_us":NaN,"end_us":2.0}', "start_us is nan"),
        ('{"step":1,"start_us":"5.0","end_us":6.0}', "start_us is '5.0'"),
        (
            '{"step":0,"start_us":5.0,"end_us":6.0}',
            "step 0 of rank 0 is marked twice (lines 1 and 2)",
        ),
    ],
)
def test_read_step_marks_names_the_file_and_line_of_a_bad_mark(
    tmp_path: Path, second_line: str, problem: str
) -> None:
    marks = tmp_path / "marks.jsonl"
    marks.write_text(
        '{"step":0,"start_us":1.0,"end_us":2.0}\n' + second_line + "\n", encoding="utf-8"
    )
    with pytest.raises(PerfgateError) as caught:
        read_step_marks(marks)
    assert str(caught.value).startswith(f"{marks}:2: ")
    assert problem in str(caught.value)


# ----------------------------------------------------------------------------- timed rounds


def _timed(argv: list[str], out: Path, timeout: float | None = 30) -> list[float]:
    from perfgate.profilers.measure import marked_step_times

    return marked_step_times(argv, out, dict(os.environ), None, timeout)


def test_a_command_that_is_not_executable_is_one_line(tmp_path: Path) -> None:
    # A PermissionError traceback before.
    script = tmp_path / "train.py"
    script.write_text("print('hi')\n")
    with pytest.raises(PerfgateError) as error:
        _timed([str(script)], tmp_path)
    assert str(error.value) == (
        f"{script}: permission denied: make it executable (chmod +x), or run it with its "
        f"interpreter ([sys.executable, {str(script)!r}, ...])"
    )


def test_a_command_killed_by_a_signal_says_which(tmp_path: Path) -> None:
    # "exited with -11: " (a bare number, then nothing) before.
    crash = "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"
    with pytest.raises(PerfgateError) as error:
        _timed([sys.executable, "-c", crash], tmp_path)
    assert str(error.value).endswith("was killed by signal 11 (SIGSEGV)")


def test_a_timeout_stops_the_command_and_what_it_started(tmp_path: Path) -> None:
    # The command was killed, its children (DataLoader workers, ranks) lived on.
    child_pid = tmp_path / "child.pid"
    script = (
        "import subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        f"open({str(child_pid)!r}, 'w').write(str(child.pid))\n"
        "time.sleep(60)\n"
    )
    started = time.monotonic()
    with pytest.raises(PerfgateError, match="ran past its timeout of 3 s and was stopped"):
        _timed([sys.executable, "-c", script], tmp_path, timeout=3)
    assert time.monotonic() - started < 30
    pid = int(child_pid.read_text())
    for _ in range(50):  # the kill is delivered; the zombie is reaped by init
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        if Path(f"/proc/{pid}/stat").is_file() and ") Z " in Path(f"/proc/{pid}/stat").read_text():
            break
        time.sleep(0.1)
    else:
        os.kill(pid, 9)
        pytest.fail(f"the command's child {pid} outlived its timeout")


def test_a_profile_folder_that_cannot_be_written_is_one_line(tmp_path: Path) -> None:
    # An OSError traceback from unlinking the stale step marks before.
    out = tmp_path / "profiles"
    out.mkdir()
    (out / "timed_step_marks.jsonl").mkdir()  # in the way, and no file to unlink
    with pytest.raises(PerfgateError) as error:
        _timed([sys.executable, "-c", "pass"], out)
    assert str(error.value).startswith(f"{out}: cannot write the step marks there (")

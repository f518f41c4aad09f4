"""How fast perfgate reads big profiles, against bare reads of the same files, in one run.

Generates realistic large profiles in a scratch directory, then measures, each in a fresh
subprocess (wall time of the work itself, imports excluded; peak RSS of the whole process from
``os.wait4``):

* ``torch_npu`` — a torch_npu text export (``*_ascend_pt/ASCEND_PROFILER_OUTPUT/``):
  ``kernel_details.csv`` with the real Level1 header, rows shaped like the real fixture's
  (``tests/data/torch_npu/ascend-msinsight/pytorch_text_level1_rank0_ascend_pt``),
  ``step_trace_time.csv``, ``trace_view.json`` (``ProfilerStep#N`` spans, Python / CANN /
  Ascend Hardware / Overlap Analysis events, flow events, ``MEMCPY_ASYNC`` tasks) and
  ``profiler_info_0.json``. Bare: ``pandas.read_csv(kernel_details.csv)`` and
  ``json.load(trace_view.json)``.
* ``msprof`` — an msprof text export (``PROF_*/mindstudio_profiler_output/``: ``op_summary``,
  ``task_time``, ``step_trace``, ``op_statistic``). Bare: ``read_csv`` of the first three.
* ``msprof_db`` — an msprof ``msprof_0.db`` (the schema of the real
  ``tests/data/ascend_db/msprof_full_db/msprof_0.db``, scaled up; steps from MSTX ranges).
  Bare: ``pandas.read_sql_query("SELECT * FROM TASK")``.
* ``msprof_db_steps`` — the same tables as torch_npu's ``ascend_pytorch_profiler_0.db`` (in a
  ``*_ascend_pt`` directory, without analysis.db) with ``STEP_TIME``, ``RANK_DEVICE_MAP`` and
  Insight's ``OVERLAP_ANALYSIS`` (Computing, Communication, Free per kernel): the step
  breakdown is read and checked against the tasks step by step. Bare: as ``msprof_db``.
* ``kineto`` — a torch.profiler (Kineto) trace of about 1 GB (CUDA: cpu_op, cuda_runtime,
  kernel, gpu_memcpy, ac2g flows). Bare: ``json.load``.

"perfgate" is ``perfgate inspect --format json``: ``load_profile`` + ``analyze`` +
``inspect_document`` + ``json.dumps`` (the phases are timed apart).

Time ratio = perfgate / the sum of the bare reads of the case. Memory ratio = perfgate's peak
RSS / the peak RSS of the case's memory reference: ``read_csv`` for the CSV exports (issue 10's
target: at most 1.5x read_csv's peak), the ``SELECT`` for the database, ``json.load`` for
Kineto (which perfgate should beat: it streams).

    python benchmarks/read_speed.py                 # full size (about 2.5 GB of files)
    python benchmarks/read_speed.py --quick         # 1/20 of it, to try things
    python benchmarks/read_speed.py --cases torch_npu --profile --json out.json
    python benchmarks/read_speed.py --data /tmp/pg-data   # keep the files for the next run

Not part of the test suite: timing is for humans, not CI. The numbers are in
docs/performance.md.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import importlib
import io
import json
import os
import random
import resource
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TORCH_NPU_FIXTURE = (
    ROOT / "tests/data/torch_npu/ascend-msinsight/pytorch_text_level1_rank0_ascend_pt"
)
OP_SUMMARY_FIXTURE = next(
    (ROOT / "tests/data/msprof/ascend-msprof-skill").glob(
        "PROF_*/mindstudio_profiler_output/op_summary_*.csv"
    )
)

CASES = ("torch_npu", "msprof", "msprof_db", "msprof_db_steps", "kineto")
FULL_STEPS = 20_000
KERNELS_PER_STEP = 25  # 500k kernel rows: kernel_details.csv ~170 MB, as in issue 10
KINETO_FULL_BYTES = 1_000_000_000
EXPORT_STAMP = "20260605161737"
EPOCH_NS = 1_736_408_883_704_643_212  # the fixture's first kernel, in ns

# --------------------------------------------------------------------------------------------
# The workload every Ascend case describes: steps of kernels on one stream, one H2D copy each.
# --------------------------------------------------------------------------------------------


@dataclass
class Task:
    template: list[str]  # a kernel_details.csv row of the real fixture
    name: str
    op_type: str
    core: str
    task_id: int
    stream: int
    start_ns: int
    dur_ns: int
    wait_ns: int


@dataclass
class Step:
    number: int
    start_ns: int
    end_ns: int
    copy_start_ns: int
    copy_dur_ns: int
    copy_task_id: int
    kernels: list[Task] = field(default_factory=list)


def _kernel_templates() -> tuple[list[str], list[list[str]]]:
    path = TORCH_NPU_FIXTURE / "ASCEND_PROFILER_OUTPUT/kernel_details.csv"
    with path.open(newline="") as handle:
        rows = list(csv.reader(handle))
    return rows[0], rows[1:]


def workload(steps: int, kernels_per_step: int, seed: int = 7) -> Iterator[Step]:
    """Steps of ``kernels_per_step`` kernels (the fixture's rows in turn) and one copy."""
    header, templates = _kernel_templates()
    col = {name: i for i, name in enumerate(header)}
    rng = random.Random(seed)
    t = EPOCH_NS
    task_id = 11051
    k = 0
    for number in range(1, steps + 1):
        step_start = t
        t += rng.randint(60_000, 140_000)  # preparing: host work before the first task
        copy_start = t
        copy_dur = rng.randint(20_000, 40_000)
        copy_id = task_id % 65536
        task_id += 1
        t += copy_dur + rng.randint(2_000, 6_000)
        step = Step(number, step_start, 0, copy_start, copy_dur, copy_id)
        previous_end = t
        for _ in range(kernels_per_step):
            row = templates[k % len(templates)]
            k += 1
            dur_us = min(float(row[col["Duration(us)"]]), 150.0)
            dur = int(dur_us * rng.uniform(0.9, 1.1) * 1000) + 1000
            gap = rng.randint(1_000, 30_000)
            start = previous_end + gap
            stream = row[col["Stream ID"]]
            step.kernels.append(
                Task(
                    template=row,
                    name=row[col["Name"]],
                    op_type=row[col["Type"]],
                    core=row[col["Accelerator Core"]],
                    task_id=task_id % 65536,
                    stream=int(stream) if stream.isdigit() else 2,
                    start_ns=start,
                    dur_ns=dur,
                    wait_ns=gap,
                )
            )
            task_id += 1
            previous_end = start + dur
        t = previous_end + rng.randint(50_000, 150_000)  # free tail
        step.end_ns = t
        t += rng.randint(1_000, 5_000)  # between steps
        yield step


def us_text(ns: int) -> str:
    """Epoch ns → the µs text Ascend tools write: ``1736408883704643.212``."""
    return f"{ns // 1000}.{ns % 1000:03d}"


def dur_text(ns: int) -> str:
    return f"{ns / 1000:.3f}"


def _breakdown(step: Step) -> tuple[float, float, float, float]:
    """(computing, comm not overlapped, free, preparing) in µs, as torch_npu would write."""
    compute = sum(k.dur_ns for k in step.kernels if k.core not in ("HCCL", "DSA_SQE"))
    comm = sum(k.dur_ns for k in step.kernels if k.core == "HCCL")
    first = min(k.start_ns for k in step.kernels)
    preparing = first - step.start_ns
    free = (step.end_ns - step.start_ns) - compute - comm - preparing
    return compute / 1000, comm / 1000, free / 1000, preparing / 1000


# --------------------------------------------------------------------------------------------
# Generators
# --------------------------------------------------------------------------------------------


class _Writer:
    """Buffered text output; flushes every ~4 MB."""

    def __init__(self, path: Path) -> None:
        self.handle = path.open("w", encoding="utf-8", newline="")
        self.parts: list[str] = []
        self.size = 0

    def write(self, text: str) -> None:
        self.parts.append(text)
        self.size += len(text)
        if self.size > 4_000_000:
            self.flush()

    def flush(self) -> None:
        self.handle.write("".join(self.parts))
        self.parts, self.size = [], 0

    def close(self) -> None:
        self.flush()
        self.handle.close()


def generate_torch_npu(out: Path, steps: int) -> dict[str, Path]:
    rank_dir = out / "worker0_20260101000000000_ascend_pt"
    output = rank_dir / "ASCEND_PROFILER_OUTPUT"
    output.mkdir(parents=True)
    shutil.copy(TORCH_NPU_FIXTURE / "profiler_info_0.json", rank_dir / "profiler_info_0.json")
    header, _ = _kernel_templates()
    col = {name: i for i, name in enumerate(header)}
    kernels = _Writer(output / "kernel_details.csv")
    kernels.write(",".join(header) + "\n")
    step_trace = _Writer(output / "step_trace_time.csv")
    step_trace.write(
        "Step,Computing,Communication(Not Overlapped),Overlapped,Communication,Free,Stage,"
        "Bubble,Communication(Not Overlapped and Exclude Receive),Preparing\n"
    )
    trace = _Writer(output / "trace_view.json")
    py, cann, hw, overlap, tid = 437675, 43767502, 800, 4376751100, 437675
    trace.write("[\n")
    trace.write(
        ",\n".join(
            json.dumps(e)
            for e in (
                _meta(py, "process_name", {"name": "Python"}),
                _meta(py, "process_labels", {"labels": "CPU"}),
                _meta(py, "thread_name", {"name": f"Thread {tid}"}, tid),
                _meta(cann, "process_name", {"name": "CANN"}),
                _meta(cann, "process_labels", {"labels": "CPU"}),
                _meta(hw, "process_name", {"name": "Ascend Hardware"}),
                _meta(hw, "process_labels", {"labels": "NPU"}),
                _meta(hw, "thread_name", {"name": "Stream 2"}, 2),
                _meta(overlap, "process_name", {"name": "Overlap Analysis"}),
                _meta(overlap, "process_labels", {"labels": "NPU"}),
                _meta(overlap, "thread_name", {"name": "Computing"}, 0),
                _meta(overlap, "thread_name", {"name": "Free"}, 3),
            )
        )
    )
    flow = 1
    for step in workload(steps, KERNELS_PER_STEP):
        computing, comm, free, preparing = _breakdown(step)
        step_trace.write(
            f"{step.number},{computing:.3f},{comm:.3f},0,{comm:.3f},{free:.3f},"
            f"{(step.end_ns - step.start_ns) / 1000:.3f},0,{comm:.3f},{preparing:.3f}\n"
        )
        events: list[str] = [
            f'{{"ph": "X", "name": "ProfilerStep#{step.number}", "pid": {py}, "tid": {tid}, '
            f'"ts": "{us_text(step.start_ns)}", "dur": {dur_text(step.end_ns - step.start_ns)}, '
            f'"cat": "cpu_op", "args": {{"Sequence number": -1, "Fwd thread id": 0}}}}',
            f'{{"name": "AscendCL@aclrtMemcpy", "pid": {cann}, "tid": {tid}, '
            f'"ts": "{us_text(step.copy_start_ns - 15_000)}", "dur": 12.770127573574, '
            f'"args": {{"Thread Id": {tid}, "Mode": "ACL_RTS", "level": "acl", '
            f'"id": "aclrtMemcpy", "item_id": "0", "connection_id": {flow}}}, "ph": "X"}}',
            f'{{"name": "MEMCPY_ASYNC", "pid": {hw}, "tid": 2, '
            f'"ts": "{us_text(step.copy_start_ns)}", "dur": {dur_text(step.copy_dur_ns)}, '
            f'"args": {{"Model Id": 4294967295, "Task Type": "MEMCPY_ASYNC", "Stream Id": 2, '
            f'"Task Id": {step.copy_task_id}, "Batch Id": 0, "Subtask Id": 4294967295, '
            f'"connection_id": {flow}}}, "ph": "X"}}',
        ]
        flow += 1
        for k in step.kernels:
            row = list(k.template)
            row[col["Step Id"]] = str(step.number)
            row[col["Task ID"]] = str(k.task_id) if row[col["Task ID"]] != "N/A" else "N/A"
            row[col["Start Time(us)"]] = us_text(k.start_ns) + "\t"
            row[col["Duration(us)"]] = dur_text(k.dur_ns)
            row[col["Wait Time(us)"]] = dur_text(k.wait_ns)
            kernels.write(_csv_line(row))
            host = k.start_ns - 40_000
            ts = us_text(k.start_ns)
            events += [
                f'{{"ph": "X", "name": "aten::{k.op_type.lower()}", "pid": {py}, '
                f'"tid": {tid}, "ts": "{us_text(host)}", "dur": 13.08, "cat": "cpu_op", '
                f'"args": {{"Sequence number": {flow}, "Fwd thread id": 0}}}}',
                f'{{"name": "{k.name}", "pid": {hw}, "tid": {k.stream}, "ts": "{ts}", '
                f'"dur": {dur_text(k.dur_ns)}, "args": {{"Model Id": 4294967295, '
                f'"Task Type": "{k.core}", "Stream Id": {k.stream}, "Task Id": {k.task_id}, '
                f'"Batch Id": 0, "Subtask Id": 4294967295, "connection_id": {flow}}}, '
                '"ph": "X"}',
                f'{{"ph": "s", "bp": "e", "name": "torch_to_npu", "id": {flow}, "pid": {py}, '
                f'"tid": {tid}, "ts": "{us_text(host)}", "cat": "async_npu"}}',
                f'{{"ph": "f", "bp": "e", "name": "torch_to_npu", "id": {flow}, "pid": {hw}, '
                f'"tid": {k.stream}, "ts": "{ts}", "cat": "async_npu"}}',
                f'{{"name": "Computing", "pid": {overlap}, "tid": 0, "ts": "{ts}", '
                f'"dur": {dur_text(k.dur_ns)}, "ph": "X"}}',
            ]
            flow += 1
        trace.write(",\n" + ",\n".join(events))
    trace.write("\n]\n")
    for w in (kernels, step_trace, trace):
        w.close()
    return {
        "profile": rank_dir,
        "kernel_details": output / "kernel_details.csv",
        "trace_view": output / "trace_view.json",
    }


def _meta(pid: int, name: str, args: dict[str, Any], tid: int = 0) -> dict[str, Any]:
    return {"name": name, "pid": pid, "tid": tid, "args": args, "ph": "M"}


def _csv_line(row: list[str]) -> str:
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerow(row)
    return buffer.getvalue()


def generate_msprof(out: Path, steps: int) -> dict[str, Path]:
    folder = out / "PROF_000001_20260605161708478_FRJKORBPFMHQMGLA/mindstudio_profiler_output"
    folder.mkdir(parents=True)
    with OP_SUMMARY_FIXTURE.open(newline="") as handle:
        op_header = next(csv.reader(handle))
    kd_header, _ = _kernel_templates()
    kd = {name: i for i, name in enumerate(kd_header)}
    # kernel_details.csv is op_summary renamed (msprof-formats.md §3.1).
    renamed = {
        "Op Name": "Name",
        "OP Type": "Type",
        "Task Type": "Accelerator Core",
        "Task Start Time(us)": "Start Time(us)",
        "Task Duration(us)": "Duration(us)",
        "Task Wait Time(us)": "Wait Time(us)",
    }
    source = [kd.get(renamed.get(c, c)) for c in op_header]
    op_summary = _Writer(folder / f"op_summary_{EXPORT_STAMP}.csv")
    op_summary.write(",".join(op_header) + "\n")
    task_time = _Writer(folder / f"task_time_{EXPORT_STAMP}.csv")
    task_time.write(
        "Device_id,kernel_name,kernel_type,stream_id,task_id,task_time(us),task_start(us),"
        "task_stop(us)\n"
    )
    step_trace = _Writer(folder / f"step_trace_{EXPORT_STAMP}.csv")
    step_trace.write(
        "Device_id,Iteration ID,FP Start(us),BP End(us),Iteration End(us),Iteration Time(us),"
        "FP to BP Time(us),Iteration Refresh(us),Data Aug Bound(us),Model ID,Reduce Start(us),"
        "Reduce Duration(us)\n"
    )
    stats: dict[tuple[str, str], list[float]] = {}
    previous_end: int | None = None
    for step in workload(steps, KERNELS_PER_STEP):
        fp, bp = step.kernels[0].start_ns, step.kernels[-1].start_ns
        aug = "N/A" if previous_end is None else dur_text(fp - previous_end)
        step_trace.write(
            f"0,{step.number},{us_text(fp)}\t,{us_text(bp)}\t,{us_text(step.end_ns)}\t,"
            f"{dur_text(step.end_ns - step.start_ns)},{dur_text(bp - fp)},"
            f"{dur_text(step.end_ns - bp)},{aug},1,N/A,N/A\n"
        )
        previous_end = step.end_ns
        lines = [
            _task_time_line(
                "N/A", "EVENT_RECORD", 2, step.copy_task_id, step.copy_start_ns - 3000, 0
            ),
            _task_time_line(
                "N/A", "MEMCPY_ASYNC", 2, step.copy_task_id, step.copy_start_ns, step.copy_dur_ns
            ),
        ]
        for k in step.kernels:
            row = ["0" if i is None else k.template[i] for i in source]
            row[op_header.index("Task ID")] = str(k.task_id)
            row[op_header.index("Task Start Time(us)")] = us_text(k.start_ns) + "\t"
            row[op_header.index("Task Duration(us)")] = dur_text(k.dur_ns)
            row[op_header.index("Task Wait Time(us)")] = dur_text(k.wait_ns)
            if k.core == "HCCL":
                row[op_header.index("Task ID")] = row[op_header.index("Stream ID")] = "N/A"
            op_summary.write(_csv_line(row))
            if k.core != "HCCL":
                # task_time sees a kernel from the task scheduler: in the real export
                # (tests/data/msprof/ascend-msprof-skill) 0.9-1.6 µs before op_summary's
                # start, and 1.7-2.6 µs longer; the reader must match them, not find them equal.
                lines.append(
                    _task_time_line(
                        k.name, k.core, k.stream, k.task_id, k.start_ns - 1_340, k.dur_ns + 2_300
                    )
                )
            stats.setdefault((k.op_type, k.core), []).append(k.dur_ns / 1000)
        task_time.write("".join(lines))
    for w in (op_summary, task_time, step_trace):
        w.close()
    total = sum(sum(v) for v in stats.values())
    with (folder / f"op_statistic_{EXPORT_STAMP}.csv").open("w") as handle:
        handle.write(
            "Device_id,OP Type,Core Type,Count,Total Time(us),Min Time(us),Avg Time(us),"
            "Max Time(us),Ratio(%)\n"
        )
        for (op_type, core), durs in sorted(stats.items(), key=lambda kv: -sum(kv[1])):
            handle.write(
                f"0,{op_type},{core},{len(durs)},{sum(durs):.3f},{min(durs):.3f},"
                f"{sum(durs) / len(durs):.3f},{max(durs):.3f},{100 * sum(durs) / total:.3f}\n"
            )
    return {
        "profile": folder.parent,
        "op_summary": folder / f"op_summary_{EXPORT_STAMP}.csv",
        "task_time": folder / f"task_time_{EXPORT_STAMP}.csv",
        "step_trace": folder / f"step_trace_{EXPORT_STAMP}.csv",
    }


def _task_time_line(name: str, kind: str, stream: int, task: int, start: int, dur: int) -> str:
    return (
        f"0,{name},{kind},{stream},{task},{dur_text(dur)},{us_text(start)}\t,"
        f"{us_text(start + dur)}\t\n"
    )


_DB_SCHEMA = """
CREATE TABLE "ENUM_API_TYPE" (id INTEGER PRIMARY KEY,name TEXT);
CREATE TABLE STRING_IDS (id INTEGER PRIMARY KEY,value TEXT);
CREATE TABLE "NPU_INFO" (id INTEGER PRIMARY KEY,name TEXT);
CREATE TABLE "SESSION_TIME_INFO" (startTimeNs INTEGER,endTimeNs INTEGER,baseTimeNs INTEGER);
CREATE TABLE "TASK" (startNs INTEGER, endNs INTEGER, deviceId INTEGER, connectionId INTEGER,
    globalPid INTEGER, taskType INTEGER, contextId INTEGER, streamId INTEGER, taskId INTEGER,
    modelId INTEGER, globalTaskId integer constraint TASK_pk primary key, depth integer);
CREATE TABLE "COMMUNICATION_TASK_INFO" (name INTEGER, globalTaskId INTEGER
    constraint COMMUNICATION_TASK_INFO_pk primary key, taskType INTEGER, planeId INTEGER,
    groupName INTEGER, notifyId INTEGER, rdmaType INTEGER, srcRank INTEGER, dstRank INTEGER,
    transportType INTEGER, size INTEGER, dataType INTEGER, linkType INTEGER, opId INTEGER);
CREATE TABLE COMMUNICATION_OP (opName INTEGER, startNs INTEGER, endNs INTEGER,
    connectionId INTEGER, groupName INTEGER, opId INTEGER primary key, waitNs INTEGER,
    opConnectionId TEXT, opType INTEGER DEFAULT -1);
CREATE TABLE "COMPUTE_TASK_INFO" ("name" INTEGER, "globalTaskId" INTEGER, "blockDim" INTEGER,
    "mixBlockDim" INTEGER, "taskType" INTEGER, "opType" INTEGER, "inputFormats" INTEGER,
    "inputDataTypes" INTEGER, "inputShapes" INTEGER, "outputFormats" INTEGER,
    "outputDataTypes" INTEGER, "outputShapes" INTEGER, "waitNs" INTEGER,
    CONSTRAINT "COMPUTE_TASK_INFO_pk" PRIMARY KEY ("globalTaskId"));
CREATE TABLE "MSTX_EVENTS" ("startNs" INTEGER, "endNs" INTEGER, "eventType" INTEGER,
    "rangeId" INTEGER, "category" INTEGER, "message" INTEGER, "globalTid" INTEGER,
    "endGlobalTid" INTEGER, "domainId" INTEGER, "connectionId" INTEGER, "depth" integer);
CREATE INDEX TASK_INDEX on TASK(globalTaskId, startNs);
"""
# What a torch_npu export_type=db adds (tests/data/ascend_db/pytorch_db_level1_rank0_ascend_pt).
_DB_STEP_SCHEMA = """
CREATE TABLE STEP_TIME (id INTEGER, startNs INTEGER, endNs INTEGER);
CREATE TABLE RANK_DEVICE_MAP (rankId INTEGER, deviceId INTEGER);
CREATE TABLE OVERLAP_ANALYSIS (id INTEGER PRIMARY KEY AUTOINCREMENT, deviceId integer,
    startNs integer, endNs integer, type integer);
"""


def _overlap_rows(step: Step) -> list[tuple[int, int, int, int]]:
    """Insight's OVERLAP_ANALYSIS rows of one step (device 0): Computing (0) and Communication
    (1, and 2: not overlapped, the kernels run one after another) per kernel, Free (3) between
    them."""
    rows: list[tuple[int, int, int, int]] = []
    previous_end = 0
    for k in step.kernels:
        end = k.start_ns + k.dur_ns
        if previous_end and k.start_ns > previous_end:
            rows.append((0, previous_end, k.start_ns, 3))
        if k.core == "HCCL":
            rows += [(0, k.start_ns, end, 1), (0, k.start_ns, end, 2)]
        else:
            rows.append((0, k.start_ns, end, 0))
        previous_end = end
    return rows


def generate_msprof_db(out: Path, steps: int, *, torch_steps: bool = False) -> dict[str, Path]:
    """msprof's ``msprof_0.db``; with ``torch_steps`` torch_npu's ``ascend_pytorch_profiler_0.db``
    (no analysis.db): the same tables and STEP_TIME, RANK_DEVICE_MAP, OVERLAP_ANALYSIS."""
    if torch_steps:
        prof = out / "localhost_1234_20260605161708478_ascend_pt"
        (prof / "ASCEND_PROFILER_OUTPUT").mkdir(parents=True)
        db = prof / "ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler_0.db"
    else:
        prof = out / "PROF_000001_20260605161708478_FRJKORBPFMHQMGLA"
        prof.mkdir(parents=True)
        db = prof / "msprof_0.db"
    conn = sqlite3.connect(db)
    conn.executescript(_DB_SCHEMA + (_DB_STEP_SCHEMA if torch_steps else ""))
    kd_header, _ = _kernel_templates()
    kd = {name: i for i, name in enumerate(kd_header)}
    strings: dict[str, int] = {}

    def sid(text: str) -> int:
        if text not in strings:
            strings[text] = len(strings)
        return strings[text]

    runtime_type = {"AI_CORE": "KERNEL_AICORE", "MIX_AIV": "KERNEL_AIVEC"}
    conn.executemany(
        "INSERT INTO ENUM_API_TYPE VALUES (?, ?)",
        [(5000, "runtime"), (5500, "hccl"), (10000, "node"), (15000, "model"), (20000, "acl")],
    )
    conn.execute("INSERT INTO NPU_INFO VALUES (0, 'Ascend910B')")
    tasks: list[tuple[int, ...]] = []
    compute: list[tuple[int, ...]] = []
    comm: list[tuple[int, ...]] = []
    mstx: list[tuple[int, ...]] = []
    step_time: list[tuple[int, int, int]] = []
    overlap: list[tuple[int, int, int, int]] = []
    gid = 0
    first = last = 0
    for step in workload(steps, KERNELS_PER_STEP):
        first = first or step.start_ns
        last = step.end_ns
        mstx.append(
            (step.start_ns, step.end_ns, 2, step.number, 4294967295, sid(f"step {step.number}"),
             4398785246508220, 4398785246508220, 38, 4000533278 + step.number, 0)
        )  # fmt: skip
        if torch_steps:
            step_time.append((step.number, step.start_ns, step.end_ns))
            overlap += _overlap_rows(step)
        for kind, start, dur in (
            ("EVENT_RECORD", step.copy_start_ns - 3000, 20),
            ("MEMCPY_ASYNC", step.copy_start_ns, step.copy_dur_ns),
        ):
            tasks.append(
                (start, start + dur, 0, 4294967295, 0, sid(kind), 4294967295, 2,
                 step.copy_task_id, 4294967295, gid, 0)
            )  # fmt: skip
            gid += 1
        for k in step.kernels:
            end = k.start_ns + k.dur_ns
            if k.core == "HCCL":
                comm.append(
                    (sid(k.name), k.start_ns, end, gid, sid("group"), gid, 0, "", sid(k.op_type))
                )
                gid += 1
                continue
            row = k.template
            tasks.append(
                (k.start_ns, end, 0, gid, 0, sid(runtime_type.get(k.core, "KERNEL_AIVEC")),
                 4294967295, k.stream, k.task_id, 4294967295, gid, 0)
            )  # fmt: skip
            compute.append(
                (sid(k.name), gid, 8, 0, sid(k.core), sid(k.op_type), sid(row[kd["Input Formats"]]),
                 sid(row[kd["Input Data Types"]]), sid(row[kd["Input Shapes"]]),
                 sid(row[kd["Output Formats"]]), sid(row[kd["Output Data Types"]]),
                 sid(row[kd["Output Shapes"]]), k.wait_ns)
            )  # fmt: skip
            gid += 1
    conn.executemany("INSERT INTO TASK VALUES (?,?,?,?,?,?,?,?,?,?,?,?)", tasks)
    conn.executemany("INSERT INTO COMPUTE_TASK_INFO VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)", compute)
    conn.executemany("INSERT INTO COMMUNICATION_OP VALUES (?,?,?,?,?,?,?,?,?)", comm)
    conn.executemany("INSERT INTO MSTX_EVENTS VALUES (?,?,?,?,?,?,?,?,?,?,?)", mstx)
    conn.executemany("INSERT INTO STRING_IDS VALUES (?, ?)", [(i, s) for s, i in strings.items()])
    if torch_steps:
        conn.executemany("INSERT INTO STEP_TIME VALUES (?, ?, ?)", step_time)
        conn.execute("INSERT INTO RANK_DEVICE_MAP VALUES (0, 0)")
        conn.executemany(
            "INSERT INTO OVERLAP_ANALYSIS (deviceId, startNs, endNs, type) VALUES (?, ?, ?, ?)",
            overlap,
        )
    conn.execute(
        "INSERT INTO SESSION_TIME_INFO VALUES (?, ?, ?)", (first, last, 1577808000000000000)
    )
    conn.commit()
    conn.close()
    return {"profile": prof, "db": db}


_CUDA_OPS = (
    ("aten::linear", "aten::addmm", "ampere_sgemm_128x64_tn", 180_000),
    ("aten::relu", "aten::clamp_min", "void at::native::vectorized_elementwise_kernel<4, "
     "at::native::(anonymous namespace)::launch_clamp_scalar(at::TensorIteratorBase&, "
     "c10::Scalar, c10::Scalar, at::native::detail::ClampLimits)::{lambda()#1}::operator()() "
     "const::{lambda()#7}::operator()() const::{lambda(float)#1}, at::detail::Array<char*, 2> "
     ">(int, at::native::(anonymous namespace)::launch_clamp_scalar(at::TensorIteratorBase&, "
     "c10::Scalar, c10::Scalar, at::native::detail::ClampLimits)::{lambda()#1}::operator()() "
     "const::{lambda()#7}::operator()() const::{lambda(float)#1}, at::detail::Array<char*, 2>)",
     12_000),
    ("aten::layer_norm", "aten::native_layer_norm", "void at::native::(anonymous namespace)::"
     "vectorized_layer_norm_kernel<float, float>(int, float, float const*, float const*, "
     "float const*, float*, float*, float*)", 25_000),
    ("aten::add_", "aten::add_", "void at::native::vectorized_elementwise_kernel<4, "
     "at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3> >(int, "
     "at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)", 8_000),
)  # fmt: skip


def generate_kineto(out: Path, target_bytes: int) -> dict[str, Path]:
    out.mkdir(parents=True)
    path = out / "rank0.pt.trace.json"
    trace = _Writer(path)
    header = {
        "schemaVersion": 1,
        "deviceProperties": [
            {"id": 0, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85045477376,
             "computeMajor": 9, "computeMinor": 0, "maxThreadsPerBlock": 1024,
             "maxThreadsPerMultiprocessor": 2048, "regsPerBlock": 65536, "warpSize": 32,
             "sharedMemPerBlock": 49152, "numSms": 132}
        ],
        "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 1},
        "record_shapes": 1,
    }  # fmt: skip
    text = json.dumps(header, indent=2)
    trace.write(text[: text.rfind("}")].rstrip() + ',\n  "traceEvents": [\n')
    pid, tid = 4037, 4037
    rng = random.Random(11)
    t = 1_682_725_898_082_212_000  # ns
    corr = 6_935_929
    written = len(text)
    step = 0
    first = True
    while written < target_bytes:
        step += 1
        events: list[str] = []
        step_start = t
        t += 50_000
        for repeat in range(9):
            for parent, child, kernel, kdur in _CUDA_OPS:
                op_start, op_dur = t, 60_000
                corr += 1
                launch = op_start + 20_000
                gpu = launch + rng.randint(5_000, 40_000)
                dur = kdur + rng.randint(0, kdur // 10)
                events += [
                    f'{{"ph": "X", "cat": "cpu_op", "name": "{parent}", "pid": {pid}, '
                    f'"tid": {tid}, "ts": {_kts(op_start)}, "dur": {_kdur(op_dur)}, '
                    f'"args": {{"External id": {corr}, "Record function id": 0, '
                    f'"Ev Idx": {corr}, "Input Dims": [[64, 1024], [1024, 1024]], '
                    f'"Input type": ["float", "float"]}}}}',
                    f'{{"ph": "X", "cat": "cpu_op", "name": "{child}", "pid": {pid}, '
                    f'"tid": {tid}, "ts": {_kts(op_start + 5_000)}, "dur": {_kdur(50_000)}, '
                    f'"args": {{"External id": {corr}, "Record function id": 0, '
                    f'"Ev Idx": {corr + 1}, "Input Dims": [[64, 1024]], '
                    f'"Input type": ["float"]}}}}',
                    f'{{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", '
                    f'"pid": {pid}, "tid": {tid}, "ts": {_kts(launch)}, "dur": {_kdur(8_000)}, '
                    f'"args": {{"External id": {corr}, "cbid": 211, "correlation": {corr}}}}}',
                    f'{{"ph": "X", "cat": "kernel", "name": "{kernel}", "pid": 0, "tid": 7, '
                    f'"ts": {_kts(gpu)}, "dur": {_kdur(dur)}, "args": {{"External id": {corr}, '
                    f'"queued": 0, "device": 0, "context": 1, "stream": 7, '
                    f'"correlation": {corr}, "registers per thread": 32, "shared memory": 0, '
                    f'"blocks per SM": 22.222221, "warps per SM": 177.77777, '
                    f'"grid": [2400, 1, 1], "block": [256, 1, 1], '
                    f'"est. achieved occupancy %": 100}}}}',
                    f'{{"ph": "s", "id": {corr}, "pid": {pid}, "tid": {tid}, '
                    f'"ts": {_kts(launch)}, "cat": "ac2g", "name": "ac2g"}}',
                    f'{{"ph": "f", "id": {corr}, "pid": 0, "tid": 7, "ts": {_kts(gpu)}, '
                    f'"cat": "ac2g", "name": "ac2g", "bp": "e"}}',
                ]
                t = max(op_start + op_dur, gpu + dur - 40_000) + 2_000
            if repeat == 0:
                corr += 1
                events.append(
                    f'{{"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pageable -> '
                    f'Device)", "pid": 0, "tid": 7, "ts": {_kts(t)}, "dur": {_kdur(30_000)}, '
                    f'"args": {{"External id": {corr}, "device": 0, "context": 1, '
                    f'"stream": 7, "correlation": {corr}, "bytes": 262144, '
                    f'"memory bandwidth (GB/s)": 8.7}}}}'
                )
                t += 32_000
        t += 60_000
        events.append(
            f'{{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#{step}", '
            f'"pid": {pid}, "tid": {tid}, "ts": {_kts(step_start)}, '
            f'"dur": {_kdur(t - step_start)}, "args": {{"External id": {corr}}}}}'
        )
        chunk = ("" if first else ",\n") + ",\n".join(events)
        first = False
        trace.write(chunk)
        written += len(chunk)
    trace.write(
        ',\n{"name": "process_name", "ph": "M", "pid": 4037, "tid": 0, '
        '"args": {"name": "python"}}\n  ],\n  "traceName": "rank0.pt.trace.json"\n}\n'
    )
    trace.close()
    return {"profile": path, "trace": path}


def _kts(ns: int) -> str:
    return f"{ns // 1000}.{ns % 1000:03d}"


def _kdur(ns: int) -> str:
    return f"{ns / 1000:.3f}"


# --------------------------------------------------------------------------------------------
# Measuring, one fresh process per measurement
# --------------------------------------------------------------------------------------------


def _rss_mb() -> float:
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _import_lazy_modules() -> None:
    """Import what perfgate imports only when it reads (its readers, pyarrow, ADBC, orjson), so
    that its clock, like the bare reads', starts after the imports. Without this, a machine
    that writes no bytecode (PYTHONDONTWRITEBYTECODE) compiled the readers' source inside the
    measured time: 0.15-0.2 s of msprof's 1.6 s."""
    import perfgate.profilers.msprof  # noqa: F401
    from perfgate.ingest import readers

    readers()
    for name in ("pyarrow.csv", "orjson", "adbc_driver_manager", "adbc_driver_sqlite.dbapi"):
        with contextlib.suppress(ImportError):  # no fast extra: perfgate will not import them
            importlib.import_module(name)


def _worker(job: dict[str, Any]) -> dict[str, Any]:
    """Run one measurement in this (fresh) process; imports happen before the clock starts."""
    import pandas as pd

    kind, paths = job["kind"], job["paths"]
    phases: dict[str, float] = {}
    work: Callable[[], None]
    if kind == "read_csv":

        def work() -> None:
            for p in paths:
                t0 = time.perf_counter()
                pd.read_csv(p)
                phases[Path(p).name] = time.perf_counter() - t0

    elif kind == "json_load":

        def work() -> None:
            with open(paths[0], "rb") as handle:
                json.load(handle)

    elif kind == "select":

        def work() -> None:
            with sqlite3.connect(paths[0]) as conn:
                pd.read_sql_query("SELECT * FROM TASK", conn)

    elif kind == "perfgate":
        from perfgate.analysis.metrics import analyze
        from perfgate.ingest import load_profile
        from perfgate.report import inspect

        _import_lazy_modules()

        def work() -> None:
            t0 = time.perf_counter()
            profile = load_profile(paths[0])
            t1 = time.perf_counter()
            analysis = analyze(profile)
            t2 = time.perf_counter()
            # What `perfgate inspect --format json` writes (cli._cmd_inspect).
            if hasattr(inspect, "inspect_json"):
                text = inspect.inspect_json(profile, analysis)
            else:  # perfgate before inspect_json
                text = json.dumps(inspect.inspect_document(profile, analysis), indent=2) + "\n"
            t3 = time.perf_counter()
            phases.update(read=t1 - t0, analyze=t2 - t1, json=t3 - t2)
            phases["tasks"] = len(profile.tasks)
            phases["steps"] = len(analysis.per_step)
            phases["output_bytes"] = len(text)

    else:
        raise SystemExit(f"unknown job kind {kind}")
    base = _rss_mb()
    result: dict[str, Any] = {"base_rss_mb": base}
    if job.get("profile"):
        import cProfile
        import pstats

        profiler = cProfile.Profile()
        t0 = time.perf_counter()
        profiler.runcall(work)
        result["wall_s"] = time.perf_counter() - t0
        out = io.StringIO()
        stats = pstats.Stats(profiler, stream=out)
        stats.sort_stats("cumulative").print_stats(job.get("top", 25))
        stats.sort_stats("tottime").print_stats(job.get("top", 25))
        result["profile"] = out.getvalue()
    else:
        t0 = time.perf_counter()
        work()
        result["wall_s"] = time.perf_counter() - t0
    result["phases"] = phases
    return result


def measure(job: dict[str, Any], mem_limit_gb: float) -> dict[str, Any]:
    """Run ``job`` in a fresh interpreter; add its peak RSS (MB) from ``os.wait4``."""

    def limit() -> None:
        if mem_limit_gb > 0:
            cap = int(mem_limit_gb * 2**30)
            resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

    # The worker imports the perfgate of this checkout (ROOT), not whichever one is installed.
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    proc = subprocess.Popen(
        [sys.executable, __file__, "--worker", json.dumps(job)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=limit,
        cwd=ROOT,
        env=env,
    )
    assert proc.stdout is not None and proc.stderr is not None
    out = proc.stdout.read()
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        tail = err.decode(errors="replace").strip().splitlines()[-3:]
        return {"error": f"exit {proc.returncode}: {' | '.join(tail)}", "peak_rss_mb": None}
    result: dict[str, Any] = json.loads(out)
    result["peak_rss_mb"] = usage.ru_maxrss / 1024  # KB on Linux
    return result


@dataclass
class Case:
    name: str
    generate: Callable[[Path], dict[str, Path]]
    bare: Callable[[dict[str, Path]], list[dict[str, Any]]]
    memory_reference: str  # label of the bare job perfgate's memory is compared with


def cases(scale: float) -> dict[str, Case]:
    steps = max(int(FULL_STEPS * scale), 2)
    return {
        "torch_npu": Case(
            "torch_npu",
            lambda out: generate_torch_npu(out, steps),
            lambda f: [
                {"label": "read_csv kernel_details", "kind": "read_csv",
                 "paths": [str(f["kernel_details"])]},
                {"label": "json.load trace_view", "kind": "json_load",
                 "paths": [str(f["trace_view"])]},
            ],
            "read_csv kernel_details",
        ),
        "msprof": Case(
            "msprof",
            lambda out: generate_msprof(out, steps),
            lambda f: [
                {"label": "read_csv op_summary+task_time+step_trace", "kind": "read_csv",
                 "paths": [str(f["op_summary"]), str(f["task_time"]), str(f["step_trace"])]},
            ],
            "read_csv op_summary+task_time+step_trace",
        ),
        "msprof_db": Case(
            "msprof_db",
            lambda out: generate_msprof_db(out, steps),
            lambda f: [{"label": "SELECT * FROM TASK", "kind": "select", "paths": [str(f["db"])]}],
            "SELECT * FROM TASK",
        ),
        "msprof_db_steps": Case(
            "msprof_db_steps",
            lambda out: generate_msprof_db(out, steps, torch_steps=True),
            lambda f: [{"label": "SELECT * FROM TASK", "kind": "select", "paths": [str(f["db"])]}],
            "SELECT * FROM TASK",
        ),
        "kineto": Case(
            "kineto",
            lambda out: generate_kineto(out, int(KINETO_FULL_BYTES * scale)),
            lambda f: [{"label": "json.load trace", "kind": "json_load",
                        "paths": [str(f["trace"])]}],
            "json.load trace",
        ),
    }  # fmt: skip


def _files_size_mb(files: dict[str, Path]) -> float:
    root = files["profile"]
    paths = [root] if root.is_file() else [p for p in root.rglob("*") if p.is_file()]
    return sum(p.stat().st_size for p in paths) / 1e6


def _prepare(case: Case, data: Path, scale: float) -> dict[str, Path]:
    """Generate the case's files under ``data`` unless a previous run left them there."""
    folder = data / f"{case.name}-scale{scale:g}"
    marker = folder / "files.json"
    if marker.is_file():
        return {k: Path(v) for k, v in json.loads(marker.read_text()).items()}
    if folder.exists():
        shutil.rmtree(folder)
    t0 = time.perf_counter()
    files = case.generate(folder / "data")
    marker.write_text(json.dumps({k: str(v) for k, v in files.items()}))
    print(
        f"  generated {case.name}: {_files_size_mb(files):,.0f} MB in "
        f"{time.perf_counter() - t0:.1f} s",
        file=sys.stderr,
    )
    return files


def fast_extra() -> str:
    """Which of the ``fast`` extra's packages this environment has: with pyarrow installed,
    perfgate reads the CSVs with it and pandas' own ``read_csv`` (the bare reference) builds
    its text columns on it too, several times faster; with the ADBC driver, the .db rows."""
    found = []
    for module in ("pyarrow", "adbc_driver_sqlite"):
        try:
            found.append(f"{module} {importlib.import_module(module).__version__}")
        except ImportError:
            found.append(f"no {module}")
    return ", ".join(found)


def _best(job: dict[str, Any], repeat: int, mem_limit_gb: float) -> dict[str, Any]:
    runs = [measure(job, mem_limit_gb) for _ in range(repeat)]
    good = [r for r in runs if "error" not in r]
    if not good:
        return runs[0]
    best = min(good, key=lambda r: r["wall_s"])
    best["peak_rss_mb"] = min(r["peak_rss_mb"] for r in good)
    return best


def run(args: argparse.Namespace) -> dict[str, Any]:
    scale = 0.05 if args.quick else args.scale
    data = Path(args.data) if args.data else Path(tempfile.mkdtemp(prefix="perfgate-speed-"))
    data.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {"scale": scale, "fast_extra": fast_extra(), "cases": {}}
    try:
        for name in args.cases:
            case = cases(scale)[name]
            print(f"{name}:", file=sys.stderr)
            files = _prepare(case, data, scale)
            entry: dict[str, Any] = {"size_mb": _files_size_mb(files), "bare": {}}
            for job in case.bare(files):
                result = _best(job, args.repeat, args.mem_limit_gb)
                entry["bare"][job["label"]] = result
                print(f"  {job['label']}: {_short(result)}", file=sys.stderr)
            job = {"kind": "perfgate", "paths": [str(files["profile"])]}
            entry["perfgate"] = _best(job, args.repeat, args.mem_limit_gb)
            print(f"  perfgate: {_short(entry['perfgate'])}", file=sys.stderr)
            if args.profile:
                profiled = measure({**job, "profile": True, "top": args.top}, args.mem_limit_gb)
                entry["profile"] = profiled.get("profile", profiled.get("error"))
            entry["memory_reference"] = case.memory_reference
            report["cases"][name] = entry
    finally:
        if not args.data:
            shutil.rmtree(data, ignore_errors=True)
    return report


def _short(result: dict[str, Any]) -> str:
    if "error" in result:
        return result["error"]
    phases = {k: round(v, 2) for k, v in result.get("phases", {}).items()}
    return f"{result['wall_s']:.2f} s, peak {result['peak_rss_mb']:.0f} MB {phases or ''}"


def table(report: dict[str, Any]) -> str:
    from tabulate import tabulate

    rows = []
    for name, entry in report["cases"].items():
        bare = entry["bare"]
        perf = entry["perfgate"]
        bare_time = sum(b.get("wall_s", float("nan")) for b in bare.values())
        bare_peak = bare[entry["memory_reference"]].get("peak_rss_mb") or float("nan")
        perf_time = perf.get("wall_s", float("nan"))
        perf_peak = perf.get("peak_rss_mb") or float("nan")
        phases = perf.get("phases", {})
        rows.append(
            [
                f"{name} ({entry['size_mb']:,.0f} MB)",
                f"{bare_time:.2f}",
                f"{perf_time:.2f}",
                f"{perf_time / bare_time:.2f}x",
                f"{bare_peak:,.0f}",
                f"{perf_peak:,.0f}",
                f"{perf_peak / bare_peak:.2f}x",
                " / ".join(f"{phases[k]:.1f}" for k in ("read", "analyze", "json") if k in phases),
            ]
        )
    headers = [
        "case",
        "bare s",
        "perfgate s",
        "time ratio",
        "bare peak MB",
        "perfgate peak MB",
        "mem ratio",
        "read / analyze / json s",
    ]
    lines = [tabulate(rows, headers=headers, colalign=("left",) + ("right",) * 7)]
    for name, entry in report["cases"].items():
        for label, b in entry["bare"].items():
            if "error" in b:
                lines.append(f"  {name}: {label}: {b['error']}")
            else:
                lines.append(
                    f"  {name}: {label}: {b['wall_s']:.2f} s, peak {b['peak_rss_mb']:,.0f} MB"
                )
        if "error" in entry["perfgate"]:
            lines.append(f"  {name}: perfgate: {entry['perfgate']['error']}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--cases", nargs="+", choices=CASES, default=list(CASES))
    parser.add_argument("--scale", type=float, default=1.0, help="size; 1 = full (default)")
    parser.add_argument("--quick", action="store_true", help="scale 1/20")
    parser.add_argument("--data", help="keep generated files here and reuse them next time")
    parser.add_argument("--repeat", type=int, default=1, help="runs per measurement (best)")
    parser.add_argument("--json", metavar="OUT", help="write the measurements as JSON")
    parser.add_argument("--profile", action="store_true", help="cProfile perfgate per case")
    parser.add_argument("--top", type=int, default=25, help="cProfile entries to print")
    parser.add_argument(
        "--mem-limit-gb",
        type=float,
        default=16.0,
        help="address-space cap per measurement (0: none); a bare json.load of 1 GB needs ~8",
    )
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(_worker(json.loads(args.worker))))
        return 0
    report = run(args)
    print(
        f"scale {report['scale']:g} ({int(FULL_STEPS * report['scale'])} steps); "
        f"{report['fast_extra']}"
    )
    print(table(report))
    if args.profile:
        for name, entry in report["cases"].items():
            print(f"\n===== cProfile: perfgate inspect, {name} =====")
            print(entry.get("profile", ""))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

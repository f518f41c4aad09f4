"""torch.profiler (Kineto) chrome traces → canonical tables (perfgate.ingest.chrome_trace).

Expected figures were worked out from the raw files with a scratch script
(``json.load(gzip.open(f))["traceEvents"]``, counting events by ``cat``, summing ``dur``,
and taking ``ProfilerStep#N`` ``user_annotation`` events as ``[ts, ts + dur)`` windows).
Traces whose clock is epoch µs (the sampled rank traces, 1682725898… µs) are stored as µs since
EPOCH_ORIGIN_US; the others (ROCm, CPU-only: ~4e12 and ~1e12 µs) keep their times (origin 0).
"""

from __future__ import annotations

import gzip
import json
import re
import shutil
from collections import Counter
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from perfgate.analysis.metrics import analyze
from perfgate.errors import ProfileError
from perfgate.ingest import load_profile
from perfgate.ingest.chrome_trace import detect, profiler_step_windows, read, top_level_mask
from perfgate.model import EPOCH_ORIGIN_US, NO_STEP_MARKS_NOTE

E = EPOCH_ORIGIN_US  # whole epoch µs minus the origin: exact integers in the tables

DATA = Path(__file__).parent / "data" / "kineto"
ALEXNET = DATA / "benchmark_result_2869224_1695835535_trace.json.gz"
RANK0 = DATA / "sampled_rank-0.json.gz"
RANK1 = DATA / "sampled_rank-1.json.gz"
CPU_ONLY = DATA / "rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz"
AMD = DATA / "mi250_minitoy_train_ROCm6_2_kineto.json.gz"


def raw_events(path: Path) -> list[dict[str, Any]]:
    """The trace's events, loaded whole (fine in a test), with decimals kept exact."""
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt") as handle:
        events: list[dict[str, Any]] = json.load(handle, parse_float=Decimal)["traceEvents"]
    return events


def by_category(tasks: pd.DataFrame) -> dict[tuple[Any, ...], tuple[int, Any]]:
    """(step, core, category) → (number of tasks, summed dur_us)."""
    grouped = tasks.groupby(["step", "core", "category"]).agg(
        n=("dur_us", "size"), dur=("dur_us", "sum")
    )
    return {
        (int(step), str(core), str(category)): (int(n), float(dur))
        for step, core, category, n, dur in grouped.reset_index().itertuples(index=False)
    }


# --- GPU traces ------------------------------------------------------------------------------


def test_a_cuda_trace_without_profiler_steps_is_one_window_of_every_gpu_event() -> None:
    profile = read(ALEXNET)

    assert profile.source == "kineto"
    assert profile.steps.empty
    assert "no step marks: analysed as one window" in profile.notes
    assert profile.tasks["step"].isna().all()
    # 79 kernel + 16 gpu_memcpy + 3 gpu_memset events; dur sums 10692, 55503, 8 µs.
    counts = profile.tasks.groupby(["core", "category"])["dur_us"].agg(["size", "sum"])
    assert counts.reset_index().values.tolist() == [
        ["gpu_memcpy", "copy", 16, 55503.0],
        ["gpu_memset", "other", 3, 8.0],
        ["kernel", "compute", 79, 10692.0],
    ]
    # every memcpy is "Memcpy HtoD (…)"; kernels carry no direction
    assert profile.tasks.loc[profile.tasks["core"] == "gpu_memcpy", "direction"].eq("h2d").all()
    assert profile.tasks.loc[profile.tasks["core"] == "kernel", "direction"].isna().all()
    # args.stream: 91 events on stream 7, 7 on stream 20
    assert Counter(profile.tasks["stream"]) == {"7": 91, "20": 7}
    assert (profile.tasks["op_type"] == profile.tasks["name"]).all()
    assert profile.metadata["device"] == "NVIDIA A100-PG509-200"
    assert profile.metadata["ranks"] == [0]
    assert profile.metadata["task_basis"] == "device"


def test_gpu_events_of_a_training_trace_go_to_the_profiler_step_holding_their_start() -> None:
    profile = read(RANK0)

    # ProfilerStep#551 ts 1682725898079292 dur 607312; #552 ts 1682725898686653 dur 622928
    # (epoch µs: stored relative to the origin, here before it)
    assert profile.metadata["time_origin_us"] == EPOCH_ORIGIN_US
    assert profile.steps[["rank", "step", "start_us", "end_us"]].values.tolist() == [
        [0, 551, 1682725898079292 - E, 1682725898686604 - E],
        [0, 552, 1682725898686653 - E, 1682725899309581 - E],
    ]
    # per step: 572 non-NCCL kernels, 5 ncclKernel_SendRecv, 20 memcpy, 5 memset
    assert by_category(profile.tasks) == {
        (551, "gpu_memcpy", "copy"): (20, 643.0),
        (551, "gpu_memset", "other"): (5, 19.0),
        (551, "kernel", "comm"): (5, 195327.0),
        (551, "kernel", "compute"): (572, 106252.0),
        (552, "gpu_memcpy", "copy"): (20, 654.0),
        (552, "gpu_memset", "other"): (5, 9.0),
        (552, "kernel", "comm"): (5, 200872.0),
        (552, "kernel", "compute"): (572, 104068.0),
    }
    # memcpy names: 12 HtoD, 4 DtoH, 4 DtoD in each step
    copies = profile.tasks.loc[profile.tasks["category"] == "copy"]
    assert Counter(zip(copies["step"], copies["direction"])) == {
        (551, "h2d"): 12,
        (551, "d2h"): 4,
        (551, "d2d"): 4,
        (552, "h2d"): 12,
        (552, "d2h"): 4,
        (552, "d2d"): 4,
    }
    comm = profile.tasks.loc[profile.tasks["category"] == "comm", "op_type"]
    assert set(comm) == {
        "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)"
    }
    assert profile.notes == []
    # this sample has no deviceProperties, so the GPU model is unknown rather than guessed
    assert "device" not in profile.metadata


def test_a_directory_of_rank_traces_takes_each_rank_from_distributed_info(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    # file order is the reverse of rank order: the rank must come from distributedInfo.rank
    shutil.copy(RANK1, run / "a_worker.1682725898.pt.trace.json.gz")
    shutil.copy(RANK0, run / "b_worker.1682725898.pt.trace.json.gz")

    assert detect(run)
    profile = read(run)

    assert profile.metadata["ranks"] == [0, 1]
    assert profile.steps[["rank", "step"]].values.tolist() == [
        [0, 551],
        [0, 552],
        [1, 551],
        [1, 552],
    ]
    # rank 1: ProfilerStep#551 ts 1682725898079484 dur 607904
    rank1 = profile.steps.loc[profile.steps["rank"] == 1].iloc[0]
    assert (rank1["start_us"], rank1["end_us"]) == (1682725898079484 - E, 1682725898687388 - E)
    assert profile.metadata["time_origin_us"] == EPOCH_ORIGIN_US
    compute = profile.tasks.loc[profile.tasks["category"] == "compute"]
    # rank 0 launches 572 non-NCCL kernels per step, rank 1 547 (1104 kernels − 10 NCCL)
    assert compute.groupby(["rank", "step"]).size().to_dict() == {
        (0, 551): 572,
        (0, 552): 572,
        (1, 551): 547,
        (1, 552): 547,
    }
    assert len(profile.tasks) == 1204 + 1154


def test_a_rocm_trace_takes_steps_from_the_host_marks_not_the_gpu_annotation() -> None:
    profile = read(AMD)

    # host ProfilerStep#1 ts 4203669603187.439 dur 9288.291, #2 ts 4203669612512.74 dur 49.073;
    # the gpu_user_annotation "ProfilerStep#1" (ts 4203669603454.205) is not a step mark.
    # Step 2 holds no GPU task (the trace ends in it): it is left out with a note rather than
    # analysed as a step of 0% utilization (docs/formats.md §12).
    assert profile.steps["step"].tolist() == [1]
    assert any("2 (rank 0) hold no task of their rank" in n for n in profile.notes)
    # a trace clock below 1e15 µs: the times stay as they are
    assert profile.metadata["time_origin_us"] == 0
    assert profile.steps["start_us"].tolist() == pytest.approx([4203669603187.439], abs=1e-3)
    assert profile.steps["end_us"].tolist() == pytest.approx([4203669612475.730], abs=1e-3)
    # all 14 kernels and 2 HtoD copies start inside step 1 (the last kernel at …612357.612)
    assert by_category(profile.tasks) == {
        (1, "gpu_memcpy", "copy"): (2, pytest.approx(38.161)),
        (1, "kernel", "compute"): (14, pytest.approx(110.881)),
    }
    assert profile.metadata["device"] == "AMD Radeon Graphics"


# --- CPU-only traces -------------------------------------------------------------------------


def test_a_cpu_only_trace_reads_top_level_cpu_ops_and_keeps_the_rank() -> None:
    profile = read(CPU_ONLY)

    assert profile.metadata.items() >= {"ranks": [34], "task_basis": "cpu", "device": "cpu"}.items()
    # ProfilerStep#551 (ts 1212075529876.817 dur 210109.162) holds no op. It is the only step,
    # so it is kept: left out, the 4 ops after it would be analysed as one window in its place
    # (a 14.587 µs "step" of 27% utilization; docs/formats.md §12)
    assert profile.steps[["rank", "step"]].values.tolist() == [[34, 551]]
    span = (profile.steps["end_us"] - profile.steps["start_us"]).tolist()
    assert span == [pytest.approx(210109.162, abs=1e-3)]
    assert "no step window holds a task of its rank: the steps are kept" in " ".join(profile.notes)
    assert NO_STEP_MARKS_NOTE not in profile.notes
    assert profile.metadata["time_origin_us"] == 0  # a trace clock, not epoch µs
    # the only cpu_op events are 4 aten::empty at ts 1212076812889.31…, after the step ended;
    # the gloo:all_reduce ranges on threads 3553/3554 are user_annotation, not ops
    assert profile.tasks["name"].tolist() == ["aten::empty"] * 4
    assert profile.tasks["step"].isna().all()
    assert profile.tasks["dur_us"].sum() == pytest.approx(2.503 + 0.473 + 0.401 + 0.587)
    assert set(profile.tasks["core"]) == {"cpu"}
    assert set(profile.tasks["category"]) == {"compute"}
    assert any("4 of 4 CPU ops start outside every ProfilerStep window" in n for n in profile.notes)


def nested_by_brute_force(ops: list[dict[str, Any]]) -> list[bool]:
    """Independent oracle for the top-level rule: op i is nested when another op j of the same
    pid/tid contains its [ts, ts + dur] (for identical intervals the earlier one is the parent)."""
    start = np.array([int(Decimal(op["ts"]) * 1000) for op in ops], dtype=np.int64)
    end = start + np.array([int(Decimal(op["dur"]) * 1000) for op in ops], dtype=np.int64)
    thread = np.array([f"{op['pid']}/{op['tid']}" for op in ops])
    same_thread = thread[:, None] == thread[None, :]
    contains = (start[:, None] <= start[None, :]) & (end[None, :] <= end[:, None])
    identical = (start[:, None] == start[None, :]) & (end[:, None] == end[None, :])
    index = np.arange(len(ops))
    parent = same_thread & contains & (~identical | (index[:, None] < index[None, :]))
    return [bool(x) for x in parent.any(axis=0)]


def ops_frame(ops: list[dict[str, Any]]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "pid": [str(op["pid"]) for op in ops],
            "tid": [str(op["tid"]) for op in ops],
            "ts_ns": [int(Decimal(op["ts"]) * 1000) for op in ops],
            "dur_ns": [int(Decimal(op["dur"]) * 1000) for op in ops],
        }
    )


def test_the_top_level_rule_treats_the_autograd_thread_as_its_own_thread() -> None:
    # the CUDA training trace runs backward on the autograd device thread (tid 23695) and
    # forward on the main thread (tid 4037)
    ops = [e for e in raw_events(RANK0) if e.get("ph") == "X" and e.get("cat") == "cpu_op"]
    top = top_level_mask(ops_frame(ops))

    nested = nested_by_brute_force(ops)
    assert top.tolist() == [not n for n in nested]
    top_names = Counter((ops[i]["tid"], ops[i]["name"]) for i in np.flatnonzero(top.to_numpy()))
    # the first event of the file: evaluate_function: MeanBackward0 on tid 23695, top-level,
    # and MeanBackward0 inside it is not
    assert top_names[(23695, "autograd::engine::evaluate_function: MeanBackward0")] >= 1
    assert top_names[(23695, "MeanBackward0")] == 0
    assert {tid for tid, _ in top_names} == {4037, 23695}


# --- a trace recorded by this test -----------------------------------------------------------


def record_cpu_training_trace(path: Path) -> None:
    """A tiny MLP trained with SGD for 5 steps under schedule(wait=1, warmup=1, active=3)."""
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile, schedule

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    inputs = torch.randn(8, 16, dtype=torch.float64)  # cast every step: a top-level aten::to
    targets = torch.randn(8, 4)

    def on_ready(prof: Any) -> None:
        prof.export_chrome_trace(str(path))

    with profile(
        activities=[ProfilerActivity.CPU],
        schedule=schedule(wait=1, warmup=1, active=3),
        on_trace_ready=on_ready,
    ) as prof:
        for _ in range(5):
            batch = inputs.to(torch.float32)
            loss = torch.nn.functional.mse_loss(model(batch), targets)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            prof.step()


@pytest.mark.slow  # importing torch and recording take 3-8 s on a 2-core runner
def test_the_reader_agrees_with_a_trace_recorded_from_a_cpu_training_loop(
    tmp_path: Path,
) -> None:
    trace = tmp_path / "mlp.pt.trace.json"
    record_cpu_training_trace(trace)
    events = [e for e in raw_events(trace) if e.get("ph") == "X"]
    marks = sorted(
        (e for e in events if re.fullmatch(r"ProfilerStep#\d+", e["name"])),
        key=lambda e: Decimal(e["ts"]),
    )
    ops = [e for e in events if e["cat"] == "cpu_op" and e not in marks]
    top_ops = [op for op, n in zip(ops, nested_by_brute_force(ops)) if not n]

    assert detect(trace)
    profile = read(trace)

    # wait=1, warmup=1, active=3 → the active steps are ProfilerStep#2, #3, #4
    assert len(marks) == 3
    assert profile.steps["step"].tolist() == [2, 3, 4]
    assert profile.metadata["task_basis"] == "cpu"
    assert profile.metadata["device"] == "cpu"
    for mark, (_, step) in zip(marks, profile.steps.iterrows()):
        start = float(mark["ts"])
        assert step["start_us"] == pytest.approx(start, abs=1e-3)
        assert step["end_us"] == pytest.approx(start + float(mark["dur"]), abs=1e-3)
        lo, hi = Decimal(mark["ts"]), Decimal(mark["ts"]) + Decimal(mark["dur"])
        expected = [op for op in top_ops if lo <= Decimal(op["ts"]) < hi]
        got = profile.tasks.loc[profile.tasks["step"] == step["step"]]
        assert sorted(got["name"]) == sorted(op["name"] for op in expected)
        assert got["dur_us"].sum() == pytest.approx(sum(float(op["dur"]) for op in expected))
        names = Counter(got["name"])
        # the x.to(float32) cast is one top-level aten::to, counted as a copy; its
        # aten::_to_copy / aten::copy_ children are not tasks of their own
        assert names["aten::to"] == 1
        assert names["aten::_to_copy"] == 0
        assert set(got.loc[got["name"] == "aten::to", "category"]) == {"copy"}
        # backward runs on the same thread on CPU; each node is a top-level evaluate_function
        assert names["autograd::engine::evaluate_function: MseLossBackward0"] == 1
        assert names["autograd::engine::evaluate_function: AddmmBackward0"] == 2
        # SGD's updates sit under the Optimizer.step user_annotation, so they are top-level:
        # one aten::add_ per parameter tensor (2 weights, 2 biases)
        assert names["aten::add_"] == 4
    to_ops = [op for op in top_ops if op["name"] == "aten::to"]
    assert len(to_ops) == 3
    for op in to_ops:  # the raw trace really has the copy nested in the cast
        lo, hi = Decimal(op["ts"]), Decimal(op["ts"]) + Decimal(op["dur"])
        assert any(
            o["name"] == "aten::copy_" and lo <= Decimal(o["ts"]) < hi and o["tid"] == op["tid"]
            for o in ops
        )
    assert profile.tasks["step"].notna().all()


# --- detection -------------------------------------------------------------------------------


def test_detect_recognises_traces_and_directories_of_traces(tmp_path: Path) -> None:
    assert all(detect(p) for p in (ALEXNET, RANK0, CPU_ONLY, AMD))
    not_a_trace = tmp_path / "config.json"
    not_a_trace.write_text('{"a": 1}')
    assert not detect(not_a_trace)
    csv = tmp_path / "kernel_details.csv"
    csv.write_text("Name,Type\n")
    assert not detect(csv)
    # a torch_npu output directory is the torch_npu reader's, even with a trace inside
    npu = tmp_path / "worker_ascend_pt"
    (npu / "ASCEND_PROFILER_OUTPUT").mkdir(parents=True)
    shutil.copy(CPU_ONLY, npu / CPU_ONLY.name)
    assert not detect(npu)
    plain = tmp_path / "plain"
    plain.mkdir()
    shutil.copy(CPU_ONLY, plain / CPU_ONLY.name)
    assert detect(plain)


def test_a_directory_of_traces_is_recognised_by_content_whatever_the_names(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # As HTA ships them (sampled_rank-0.json.gz, control.json.gz): no *.pt.trace.json name;
    # one copied without any extension, uncompressed; other files beside them are ignored.
    run = tmp_path / "traces"
    run.mkdir()
    shutil.copy(RANK0, run / RANK0.name)
    (run / "rank1").write_bytes(gzip.decompress(RANK1.read_bytes()))
    (run / "config.json").write_text('{"lr": 0.1}')
    (run / "README").write_text("profiled on 2 A100s\n")
    assert detect(run)
    profile = load_profile(run)
    assert profile.source == "kineto"
    assert profile.metadata["ranks"] == [0, 1]
    assert profile.steps["step"].tolist() == [551, 552, 551, 552]
    # The CLI reads it too (it exited 2: "not a profile layout perfgate knows").
    from perfgate.cli import main

    assert main(["inspect", str(run), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["steps"]["ranks"] == [0, 1]


def test_a_directory_without_a_trace_is_not_kineto(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text('{"lr": 0.1}')
    (tmp_path / "events.json.gz").write_bytes(gzip.compress(b'{"events": []}'))
    assert not detect(tmp_path)


def test_load_profile_picks_the_kineto_reader_for_a_trace() -> None:
    profile = load_profile(CPU_ONLY)
    assert profile.source == "kineto"
    assert profile.metadata["ranks"] == [34]


def test_profiler_step_windows_of_a_kineto_trace() -> None:
    windows = profiler_step_windows(RANK1)
    assert windows.to_dict("list") == {
        "step": [551, 552],
        "start_us": [1682725898079484 - E, 1682725898687438 - E],
        "end_us": [1682725898687388 - E, 1682725899318077 - E],
    }
    assert windows.attrs["time_origin_us"] == EPOCH_ORIGIN_US


# --- errors ----------------------------------------------------------------------------------


def test_a_truncated_gzip_trace_is_an_error_naming_the_file(tmp_path: Path) -> None:
    cut = tmp_path / "cut.pt.trace.json.gz"
    data = RANK0.read_bytes()
    cut.write_bytes(data[: len(data) // 2])

    with pytest.raises(ProfileError, match="truncated") as info:
        read(cut)
    assert str(cut) in str(info.value)


def test_a_truncated_json_trace_is_an_error_naming_the_file(tmp_path: Path) -> None:
    text = gzip.decompress(RANK0.read_bytes())
    cut = tmp_path / "cut.pt.trace.json"
    cut.write_bytes(text[: len(text) // 2])

    assert detect(cut)  # the head still looks like a trace …
    with pytest.raises(ProfileError, match="truncated or not valid JSON") as info:
        read(cut)  # … but reading it fails with the file named
    assert str(cut) in str(info.value)


def test_json_without_trace_events_is_an_error_naming_the_key(tmp_path: Path) -> None:
    other = tmp_path / "other.json"
    other.write_text('{"a": 1}')

    with pytest.raises(ProfileError, match="traceEvents") as info:
        read(other)
    assert str(other) in str(info.value)
    assert info.value.column == "traceEvents"


def test_a_trace_with_only_metadata_events_is_an_error(tmp_path: Path) -> None:
    # the real CPU-only trace with its X events removed: 12 process/thread metadata events
    with gzip.open(CPU_ONLY, "rt") as handle:
        trace = json.load(handle)
    trace["traceEvents"] = [e for e in trace["traceEvents"] if e["ph"] == "M"]
    meta_only = tmp_path / "meta.pt.trace.json"
    meta_only.write_text(json.dumps(trace))

    with pytest.raises(ProfileError, match="no task or step events") as info:
        read(meta_only)
    assert str(meta_only) in str(info.value)


def test_an_event_with_a_non_numeric_timestamp_is_an_error_naming_ts(tmp_path: Path) -> None:
    with gzip.open(AMD, "rt") as handle:
        trace = json.load(handle)
    # A kernel: a GPU trace's tasks. (Its CPU ops other than the step marks are not read.)
    first_x = next(e for e in trace["traceEvents"] if e["ph"] == "X" and e["cat"] == "kernel")
    first_x["ts"] = "soon"
    bad = tmp_path / "bad.pt.trace.json"
    bad.write_text(json.dumps(trace))

    with pytest.raises(ProfileError, match="'soon' is not a number") as info:
        read(bad)
    assert info.value.column == "ts"
    assert str(bad) in str(info.value)


def test_two_traces_claiming_the_same_rank_are_an_error(tmp_path: Path) -> None:
    shutil.copy(RANK0, tmp_path / "a.pt.trace.json.gz")
    shutil.copy(RANK0, tmp_path / "b.pt.trace.json.gz")

    with pytest.raises(ProfileError, match="claims rank 0") as info:
        read(tmp_path)
    assert "b.pt.trace.json.gz" in str(info.value)


def _one_step_trace(path: Path, kernels: list[tuple[int, int]]) -> Path:
    """ProfilerStep#1 over [1000, 1100) µs and device kernels at (ts, dur)."""
    events: list[dict[str, object]] = [
        {
            "ph": "X",
            "cat": "user_annotation",
            "name": "ProfilerStep#1",
            "pid": 1,
            "tid": 1,
            "ts": 1000,
            "dur": 100,
        },
    ]
    for i, (ts, dur) in enumerate(kernels):
        events.append(
            {
                "ph": "X",
                "cat": "kernel",
                "name": f"k{i}",
                "pid": 0,
                "tid": 7,
                "ts": ts,
                "dur": dur,
                "args": {"device": 0, "stream": 7, "correlation": i + 1},
            }
        )
    path.write_text(json.dumps({"distributedInfo": {"rank": 0}, "traceEvents": events}))
    return path


def test_when_no_step_holds_a_task_the_work_between_steps_is_not_read_as_a_step(
    tmp_path: Path,
) -> None:
    # The kernels at 1200 and 1300 lie after the only step. They used to be analysed as one
    # window in its place: a 105 µs "step" of 14.29% utilization (found against HTA, which
    # always takes the whole trace). One kernel inside the step made it a 100 µs step of 10%.
    after_only = analyze(read(_one_step_trace(tmp_path / "a.json", [(1200, 10), (1300, 5)])))
    assert after_only.per_step[["step", "step_time_us"]].values.tolist() == [[1, 100.0]]
    assert after_only.summary["utilization"]["n"] == 0  # unknown: no task inside the step
    inside = analyze(
        read(_one_step_trace(tmp_path / "b.json", [(1050, 10), (1200, 10), (1300, 5)]))
    )
    assert inside.per_step[["step", "step_time_us", "utilization"]].values.tolist() == [
        [1, 100.0, 0.1]
    ]

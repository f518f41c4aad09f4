"""The advisor's rules (perfgate/analysis/advisor.py), each on profiles that trip it and on
profiles that do not: the real exports in tests/data where they show it, small generated
ones otherwise (every expected number can be checked by eye)."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import pandas as pd
import pytest

from perfgate.analysis.advisor import Hint, advise, short_name
from perfgate.analysis.metrics import RunAnalysis, analyze
from perfgate.cli import main
from perfgate.config import settings_from_mapping
from perfgate.errors import ConfigError
from perfgate.ingest import load_profile
from perfgate.model import Profile
from perfgate.report.advice import hint_line, hint_message, hints_from
from perfgate.rules import AdvisorSettings

DATA = Path(__file__).parent / "data"
LEVEL1 = DATA / "torch_npu/ascend-msinsight/pytorch_text_level1_rank0_ascend_pt"
MSPROF = DATA / "msprof/ascend-msprof-skill/PROF_000001_20260605161708478_FRJKORBPFMHQMGLA"
AI_CPU = DATA / "torch_npu/ascend-mstt/advisor_backend_compute_advice"
CLUSTER = DATA / "torch_npu/ascend-mstt/cluster_analysis_output"
ALEXNET = DATA / "kineto/benchmark_result_2869224_1695835535_trace.json.gz"
TIMELINE = DATA / "ascend_timeline/trace_view.json"


@cache
def analysed(path: Path) -> tuple[Profile, RunAnalysis]:
    profile = load_profile(path)
    return profile, analyze(profile)


def hints_of(path: Path, settings: AdvisorSettings | None = None) -> dict[str, Hint]:
    return {h.rule: h for h in advise(*analysed(path), settings)}


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """HTA's 2-rank CUDA sample (NCCL kernels, ProfilerStep#551/#552) as one directory."""
    folder = tmp_path_factory.mktemp("ranks")
    for rank in (0, 1):
        name = f"sampled_rank-{rank}.json.gz"
        (folder / name).write_bytes((DATA / "kineto" / name).read_bytes())
    return folder


Task = tuple[int, str, str, str, float, float]  # rank, op_type, core, category, start, dur


def generated(tasks: list[Task], steps: list[tuple[int, int, float, float]]) -> Profile:
    """A profile from rows: tasks (rank, op_type, core, category, start_us, dur_us), steps
    (rank, step, start_us, end_us)."""
    table = pd.DataFrame(
        {
            "rank": [t[0] for t in tasks],
            "step": pd.array([None] * len(tasks), dtype="Int64"),
            "name": [t[1] for t in tasks],
            "op_type": [t[1] for t in tasks],
            "core": [t[2] for t in tasks],
            "category": [t[3] for t in tasks],
            "start_us": [t[4] for t in tasks],
            "dur_us": [t[5] for t in tasks],
        }
    )
    windows = pd.DataFrame(
        {
            "rank": [s[0] for s in steps],
            "step": pd.array([s[1] for s in steps], dtype="Int64"),
            "start_us": [s[2] for s in steps],
            "end_us": [s[3] for s in steps],
        }
    )
    return Profile(source="generated", path="generated", tasks=table, steps=windows)


def generated_hints(profile: Profile, settings: AdvisorSettings | None = None) -> dict[str, Hint]:
    return {h.rule: h for h in advise(profile, analyze(profile), settings)}


# --------------------------------------------------------------------------- idle gaps


def test_idle_gaps_trip_on_the_level1_profile_and_name_the_largest_gaps() -> None:
    hint = hints_of(LEVEL1)["idle_gaps"]
    # step_trace_time.csv: Free 25744.05 of 154483.509 µs = 16.66% > 15%.
    assert hint.figures["free_ratio"] == pytest.approx(25744.05 / 154483.509)
    assert hint.figures["limit"] == 0.15
    assert hint.steps == [50]
    largest = hint.items[0]
    # Transpose … DropOutDoMask (1753.367 µs) holds DSAGenBitMask, device work as the
    # profiler counts it (DSA_SQE is compute): the largest gap is another.
    assert largest["gap_us"] == pytest.approx(1318.828, abs=1e-2)
    assert (largest["before"], largest["before_category"], largest["after"]) == (
        "TransData",
        "compute",
        "TransData",
    )
    assert "idle 16.66% of the step" in hint_message(hint)


def test_idle_gaps_on_a_kineto_trace_name_the_task_before_the_gap() -> None:
    hint = hints_of(ALEXNET)["idle_gaps"]
    # One window of 12.92 s (no step marks) with 80 ms of kernels and copies in it.
    assert hint.figures["free_ratio"] == pytest.approx(0.99299, abs=1e-5)
    gap = hint.items[0]
    assert gap["gap_us"] == 10857887.0
    assert (gap["before"], gap["after"]) == ("Memset", "computeOffsetsKernel")
    # The window's step id is a sentinel (-1), no step a user could look up.
    assert gap["step"] == -1
    message = hint_message(hint)
    assert "10.858 s in the profile (no step marks) after Memset [other]" in message
    assert "step -1" not in message


def test_idle_gaps_do_not_trip_on_a_busy_device() -> None:
    # msprof fixture: three MIX_AIC kernels busy 95.07% of the window: free 4.93%.
    assert "idle_gaps" not in hints_of(MSPROF)


def _every_fourth_step_stalls() -> Profile:
    # 12 steps of 10 ms; each computes [0.1, 9.9) ms, except steps 3, 7, 11 (every 4th)
    # whose compute ends at 5.9 ms: a 4 ms gap (40% of the step) at the end.
    tasks: list[Task] = []
    steps = []
    for step in range(12):
        start = step * 10_000.0
        busy = 5_800.0 if step % 4 == 3 else 9_800.0
        tasks.append((0, "MatMul", "AI_CORE", "compute", start + 100, busy))
        steps.append((0, step, start, start + 10_000.0))
    return generated(tasks, steps)


def test_a_gap_every_k_steps_is_found_though_the_median_step_is_busy() -> None:
    hint = generated_hints(_every_fourth_step_stalls())["idle_gaps"]
    assert hint.figures["free_ratio"] == pytest.approx(0.01)  # the median step: 100 µs idle
    assert hint.figures["period"] == 4
    assert hint.figures["recurring_gap_us"] == pytest.approx(4_100.0)
    assert hint.steps == [3, 7, 11]
    assert "a 4.100 ms gap recurs every 4 steps (steps 3, 7, 11)" in hint_message(hint)
    assert hint.items[0]["at_end"] is True


def test_irregular_stalls_are_not_a_recurring_pattern() -> None:
    profile = _every_fourth_step_stalls()
    # Move one stall: steps 3, 7 and 10 are not evenly spaced.
    tasks = profile.tasks.copy()
    tasks.loc[11, "dur_us"] = 9_800.0
    tasks.loc[10, "dur_us"] = 5_800.0
    moved = Profile(source="generated", path="generated", tasks=tasks, steps=profile.steps)
    assert "idle_gaps" not in generated_hints(moved)


# --------------------------------------------------------------------------- copies


def _copy_heavy() -> Profile:
    # 2 steps of 1 ms: compute 500 µs, then a 300 µs host-to-device copy (30% > 25%).
    tasks: list[Task] = []
    for step in range(2):
        start = step * 1000.0
        tasks.append((0, "MatMul", "kernel", "compute", start, 500.0))
        tasks.append((0, "Memcpy HtoD", "gpu_memcpy", "copy", start + 600, 300.0))
    profile = generated(tasks, [(0, 0, 0.0, 1000.0), (0, 1, 1000.0, 2000.0)])
    profile.tasks["direction"] = ["", "h2d", "", "h2d"]
    return profile


def test_host_copies_over_a_quarter_of_the_step_name_the_copy_ops() -> None:
    hint = generated_hints(_copy_heavy())["host_copies"]
    assert hint.figures["copy_ratio"] == pytest.approx(0.30)
    assert hint.items[0]["op"] == "Memcpy HtoD"
    assert hint.items[0]["direction"] == "h2d"
    assert hint.items[0]["time_per_step_us"] == 300.0
    assert "Memcpy HtoD [h2d] 300.0 µs/step (1 calls)" in hint_message(hint)


def test_host_copies_do_not_trip_on_real_traces_below_the_limit() -> None:
    # alexnet: 55.5 ms of HtoD copies in a 12.9 s window (0.43%); Level1: copies unknown.
    assert "host_copies" not in hints_of(ALEXNET)
    assert "host_copies" not in hints_of(LEVEL1)
    assert "host_copies" not in generated_hints(_copy_heavy(), AdvisorSettings(copy_ratio=0.35))


# --------------------------------------------------------------------------- small kernels


def test_small_kernel_runs_on_the_level1_profile_name_the_sequence() -> None:
    hint = hints_of(LEVEL1)["small_kernels"]
    assert hint.figures["runs_per_step"] == 2
    assert hint.figures["kernels_per_step"] == 52  # a run of 44 and one of 8
    first = hint.items[0]
    assert first["kernels"] == 44
    assert first["sequence"].startswith("LogSoftmaxV2 → OnesLike → MemSet → NLLLoss")
    assert first["span_us"] == pytest.approx(11767.44, abs=0.01)


def test_small_kernel_runs_on_cuda_shorten_kernel_signatures(two_ranks: Path) -> None:
    hint = hints_of(two_ranks)["small_kernels"]
    assert hint.figures["runs_per_step"] == pytest.approx(12.25)  # 49 runs over 4 rank-steps
    assert "vectorized_elementwise_kernel ×3" in hint.items[0]["sequence"]
    assert "<" not in hint.items[0]["sequence"]


def test_long_kernels_and_back_to_back_small_ones_are_no_fusion_hint() -> None:
    assert "small_kernels" not in hints_of(MSPROF)  # three kernels of ~87 ms
    # Ten 10 µs kernels back to back (no launch gap between them), then ten with 5 µs gaps.
    back_to_back: list[Task] = [(0, "Add", "AI_CORE", "compute", i * 10.0, 10.0) for i in range(10)]
    profile = generated(back_to_back, [(0, 0, 0.0, 100.0)])
    assert "small_kernels" not in generated_hints(profile)
    gapped: list[Task] = [(0, "Add", "AI_CORE", "compute", i * 15.0, 10.0) for i in range(10)]
    hint = generated_hints(generated(gapped, [(0, 0, 0.0, 150.0)]))["small_kernels"]
    assert hint.items[0]["sequence"] == "Add ×10"
    assert hint.figures["launch_gap_us"] == 45.0  # nine gaps of 5 µs
    # The same with a host copy in three of the gaps (one filling its gap, two half of
    # theirs): 45 − 5 − 2.5 − 2.5 µs of launch gaps; the copies' time was counted as gaps.
    copies: list[Task] = [
        (0, "MEMCPY_ASYNC", "MEMCPY_ASYNC", "copy", 10.0, 5.0),
        (0, "MEMCPY_ASYNC", "MEMCPY_ASYNC", "copy", 25.0, 2.5),
        (0, "MEMCPY_ASYNC", "MEMCPY_ASYNC", "copy", 42.5, 2.5),
    ]
    hint = generated_hints(generated(gapped + copies, [(0, 0, 0.0, 150.0)]))["small_kernels"]
    assert hint.items[0]["sequence"] == "Add ×10"
    assert hint.figures["launch_gap_us"] == 35.0
    assert hint.figures["span_us"] == 135.0  # 145 µs less the copies' 10 µs in its gaps


def test_per_sample_copies_between_small_ops_are_the_copies_hint_not_a_fusion_one() -> None:
    # A step that copies 16 samples to the host one by one (`.cpu()` each): a small op, a
    # 20 µs copy in the gap, and so on. The run of small ops spanned the copies too and its
    # "share of the step" (the hint's impact) ranked it above the copies hint.
    tasks: list[Task] = []
    for i in range(16):
        tasks.append((0, "aten::detach", "cpu", "compute", i * 30.0, 3.0))
        tasks.append((0, "aten::to", "cpu", "copy", i * 30.0 + 5.0, 20.0))
    hints = generated_hints(generated(tasks, [(0, 0, 0.0, 480.0)]))
    small = hints["small_kernels"]
    assert small.figures["span_us"] == pytest.approx(16 * 3.0 + 15 * 7.0)  # 153 of 453 µs
    assert small.figures["launch_gap_us"] == pytest.approx(15 * 7.0)
    assert hints["host_copies"].impact > small.impact


def test_a_stall_inside_a_run_of_small_kernels_claims_no_more_than_the_steps() -> None:
    # Five steps of 150 µs, each ten 10 µs kernels with 5 µs launch gaps; in one step (a
    # busy runner) the host stalled 4 ms in the middle of the run. Mean span over the median
    # step said 204% "of the step"; the share is of all the steps' time now.
    tasks: list[Task] = []
    steps = []
    start = 0.0
    for step in range(5):
        stall = 4000.0 if step == 3 else 0.0
        for i in range(10):
            tasks.append(
                (0, "Add", "AI_CORE", "compute", start + i * 15.0 + stall * (i >= 5), 10.0)
            )
        end = start + 150.0 + stall
        steps.append((0, step, start, end))
        start = end
    hint = generated_hints(generated(tasks, steps))["small_kernels"]
    spans = 4 * 145.0 + 145.0 + 4000.0  # the run of each step, the stalled one included
    assert hint.figures["span_ratio"] == pytest.approx(spans / (5 * 150.0 + 4000.0))
    assert hint.figures["span_ratio"] <= 1.0


# --------------------------------------------------------------------------- sync waits


def test_a_wait_on_the_critical_path_is_a_sync_hint_and_a_hidden_one_is_not() -> None:
    # Step of 1000 µs: compute [0, 400) and [600, 1000); an EVENT_WAIT task [400, 600).
    exposed: list[Task] = [
        (0, "MatMul", "AI_CORE", "compute", 0.0, 400.0),
        (0, "EVENT_WAIT", "EVENT_WAIT", "other", 400.0, 200.0),
        (0, "MatMul", "AI_CORE", "compute", 600.0, 400.0),
    ]
    hint = generated_hints(generated(exposed, [(0, 0, 0.0, 1000.0)]))["sync_waits"]
    assert hint.figures["sync_ratio"] == pytest.approx(0.20)
    assert hint.items[0] == {
        "op": "EVENT_WAIT",
        "kind": "wait",
        "time_per_step_us": 200.0,
        "calls_per_step": 1.0,
    }
    hidden: list[Task] = [
        (0, "MatMul", "AI_CORE", "compute", 0.0, 1000.0),
        (0, "EVENT_WAIT", "EVENT_WAIT", "other", 400.0, 200.0),
    ]
    assert "sync_waits" not in generated_hints(generated(hidden, [(0, 0, 0.0, 1000.0)]))


def test_idle_time_after_a_device_to_host_copy_is_a_host_sync() -> None:
    # .item() pattern: compute, a 10 µs DtoH copy, the device idle 290 µs, compute again.
    tasks: list[Task] = [
        (0, "add_kernel", "kernel", "compute", 0.0, 500.0),
        (0, "Memcpy DtoH (Device -> Pageable)", "gpu_memcpy", "copy", 500.0, 10.0),
        (0, "add_kernel", "kernel", "compute", 800.0, 200.0),
    ]
    hint = generated_hints(generated(tasks, [(0, 0, 0.0, 1000.0)]))["sync_waits"]
    assert hint.figures["sync_ratio"] == pytest.approx(0.29)
    assert hint.items[0]["kind"] == "idle after device→host copy"
    assert hint.items[0]["time_per_step_us"] == 290.0


def test_no_sync_hint_on_the_real_profiles() -> None:
    for path in (LEVEL1, MSPROF, AI_CPU, ALEXNET):
        assert "sync_waits" not in hints_of(path), path


# --------------------------------------------------------------------------- communication


def test_communication_not_overlapped_trips_on_the_level1_profile() -> None:
    hint = hints_of(LEVEL1)["communication"]
    # step_trace_time.csv: Communication(Not Overlapped) 101963.203 of 154483.509 µs.
    assert hint.figures["comm_ratio"] == pytest.approx(101963.203 / 154483.509)
    assert hint.items[0]["op"] == "hcom_allReduce_"
    assert hint.items[0]["time_per_step_us"] == pytest.approx(105991.876)
    assert hint.items[0]["calls_per_step"] == 4


def test_communication_under_the_limit_is_no_hint(two_ranks: Path) -> None:
    # HTA's NCCL sample: comm not overlapped 22.1% and 26.8% of its two steps.
    assert "communication" not in hints_of(two_ranks)
    assert "communication" not in hints_of(MSPROF)


# --------------------------------------------------------------------------- imbalance


def test_rank_imbalance_names_the_slow_rank() -> None:
    # Four ranks, two steps; rank 2 takes 1100 µs, the others 1000 µs: 10% over the median.
    tasks: list[Task] = []
    steps = []
    for rank in range(4):
        length = 1100.0 if rank == 2 else 1000.0
        for step in range(2):
            start = step * 2000.0
            tasks.append((rank, "MatMul", "AI_CORE", "compute", start, length))
            steps.append((rank, step, start, start + length))
    hint = generated_hints(generated(tasks, steps))["rank_imbalance"]
    assert hint.figures["imbalance"] == pytest.approx(0.10)
    assert hint.figures["slowest_rank"] == 2
    assert hint.items[0] == {
        "step": 0,
        "slowest_rank": 2,
        "slowest_us": 1100.0,
        "median_us": 1000.0,
    }


def test_rank_imbalance_under_the_limit_is_no_hint(two_ranks: Path) -> None:
    assert "rank_imbalance" not in hints_of(CLUSTER)  # 8 ranks, slowest 2.36% over the median
    assert "rank_imbalance" not in hints_of(two_ranks)
    assert "rank_imbalance" not in hints_of(LEVEL1)  # one rank


# --------------------------------------------------------------------------- AI_CPU


def test_ai_cpu_operators_are_named() -> None:
    hint = hints_of(AI_CPU)["ai_cpu"]
    assert hint.items[0]["op"] == "Cast"
    assert hint.items[0]["time_per_step_us"] == pytest.approx(785.18)
    assert hint.items[0]["calls_per_step"] == 7
    timeline = hints_of(TIMELINE)["ai_cpu"]
    assert timeline.items[0]["op"] == "Cast"
    assert timeline.items[0]["calls_per_step"] == 2


def test_mix_aic_kernels_are_not_ai_cpu_and_the_limit_is_respected() -> None:
    assert "ai_cpu" not in hints_of(MSPROF)  # MIX_AIC: the AI Cores
    assert "ai_cpu" not in hints_of(AI_CPU, AdvisorSettings(ai_cpu_share=0.01))  # 0.15%


# --------------------------------------------------------------------------- utilization


def test_low_utilization_trips_on_level1_and_not_on_a_busy_device() -> None:
    hint = hints_of(LEVEL1)["low_utilization"]
    assert hint.figures["utilization"] == pytest.approx(8873.756 / 154483.509)
    assert "the device computes only 5.74% of the step" in hint_message(hint)
    assert "low_utilization" not in hints_of(MSPROF)  # 95.07%


# --------------------------------------------------------------------------- the whole


def test_hints_are_ordered_by_impact_and_round_trip_through_a_record() -> None:
    hints = list(hints_of(LEVEL1).values())
    ordered = advise(*analysed(LEVEL1))
    assert [h.rule for h in ordered] == [
        "communication",
        "idle_gaps",
        "small_kernels",
        "low_utilization",  # sums the others up: last
    ]
    again = hints_from(json.loads(json.dumps([h.as_dict() for h in hints])))
    assert [hint_line(h) for h in again] == [hint_line(h) for h in hints]


def test_short_names_of_kernel_signatures() -> None:
    assert short_name("void at::native::elementwise_kernel<128, 2>(int, float)") == (
        "elementwise_kernel"
    )
    assert short_name("aten::copy_") == "aten::copy_"
    assert short_name("hcom_allReduce_") == "hcom_allReduce_"
    # CUDA's copy names hold an arrow inside their parentheses (the HTA sample traces); its
    # ">" closes no "(": once it left "Memcpy DtoD  Device".
    assert short_name("Memcpy DtoD (Device -> Device)") == "Memcpy DtoD"
    assert short_name("void f<(bool)1, g<int>>(int (*)(float))") == "f"
    assert short_name("a -> b") == "a -> b"
    # Long generated names that differ only at their end stay apart: cut in the middle.
    fused = [short_name("triton_" + "L" * 1990 + f"_fused_{i}") for i in range(2)]
    assert fused[0] != fused[1]
    assert fused[0].startswith("triton_LLL") and fused[0].endswith("LL_fused_0")
    assert len(fused[0]) == 80


def test_advisor_settings_come_from_perfgate_yaml() -> None:
    settings = settings_from_mapping(
        {"advisor": {"free_ratio": "20%", "small_kernel_us": "20us", "disable": ["ai_cpu"]}},
        "perfgate.yaml",
    ).advisor
    assert (settings.free_ratio, settings.small_kernel_us, settings.disable) == (
        0.20,
        20.0,
        ("ai_cpu",),
    )
    rules = hints_of(LEVEL1, settings)
    assert "idle_gaps" not in rules  # 16.66% is under 20%
    assert "ai_cpu" not in hints_of(AI_CPU, settings)
    with pytest.raises(ConfigError, match=r"advisor: unknown key 'free'"):
        settings_from_mapping({"advisor": {"free": "20%"}}, "perfgate.yaml")
    with pytest.raises(ConfigError, match=r"advisor.disable: unknown rule 'gaps'"):
        settings_from_mapping({"advisor": {"disable": ["gaps"]}}, "perfgate.yaml")
    with pytest.raises(ConfigError, match=r"advisor.small_kernel_run: 1 is not a whole number"):
        settings_from_mapping({"advisor": {"small_kernel_run": 1}}, "perfgate.yaml")


def test_inspect_prints_the_hints_in_every_format(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", str(LEVEL1), "--format", "json"]) == 0
    document = json.loads(capsys.readouterr().out)
    rules = [a["rule"] for a in document["advice"]]
    assert rules == ["communication", "idle_gaps", "small_kernels", "low_utilization"]
    assert document["advice"][0]["message"].startswith(
        "communication not overlapped with compute takes 66.00% of the step"
    )
    assert document["advice"][0]["remedy"].startswith("overlap communication with compute")
    assert main(["inspect", str(LEVEL1)]) == 0
    table = capsys.readouterr().out
    assert "advisor (4 hint(s), largest impact first)" in table
    assert "hcom_allReduce_ 105.992 ms/step (4 calls)" in table
    assert main(["inspect", str(LEVEL1), "--format", "md"]) == 0
    assert "**Advisor** (4 hint(s)" in capsys.readouterr().out


# --------------------------------------------------------------------------- records, reports


def test_a_record_carries_its_hints_and_strip_and_a_comparison_shows_them(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from perfgate.analysis.compare import compare_runs
    from perfgate.records import validate_run
    from perfgate.report.compare import comparison_dict, comparison_from_dict, render_table
    from perfgate.rules import default_rules
    from perfgate.sides import load_side

    [record] = load_side(LEVEL1).records
    assert [a["rule"] for a in record["advice"]] == [
        "communication",
        "idle_gaps",
        "small_kernels",
        "low_utilization",
    ]
    strip = record["timeline"]
    assert strip is not None
    assert (strip["step"], strip["rank"], strip["step_time_us"]) == (50, 0, 154483.508)
    assert len(strip["lanes"]["comm"]) == 4  # the four hcom_allReduce_ tasks
    assert len(json.dumps(record["advice"])) + len(json.dumps(strip)) < 4000
    comparison = compare_runs(record, record, default_rules())
    assert comparison.advice == record["advice"]
    assert comparison.baseline_summary["rounds"][0]["median"] == pytest.approx(154483.509)
    again = comparison_from_dict(json.loads(json.dumps(comparison_dict(comparison))))
    assert again.advice == comparison.advice
    table = render_table([again])
    assert "advisor (3 of 4 hint(s) on the current run):" in table
    assert "- communication: communication not overlapped with compute takes 66.00%" in table
    # A hostile file cannot make a record's advice large.
    with pytest.raises(Exception, match="advice"):
        validate_run({**record, "advice": record["advice"] * 10}, "test")

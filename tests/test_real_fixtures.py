"""Every real profile in ../shared/fixtures/real (copied to tests/data) through `perfgate
inspect`, end to end: the format is detected and the headline numbers are the ones worked
out by hand from the files (the readers' own tests check the tables row by row)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from perfgate.cli import main

DATA = Path(__file__).parent / "data"
MSPROF = "msprof/ascend-msprof-skill/PROF_000001_20260605161708478_FRJKORBPFMHQMGLA"
ADVISOR = "torch_npu/ascend-mstt/advisor_compute_advice_data"

# Step times agree to three decimals (abs 1e-3), as msprof-analyze gives them: epoch time
# stamps are stored relative to perfgate.model.EPOCH_ORIGIN_US, each the float64 nearest to its
# exact value, not rounded to 0.25 µs as absolute epoch µs would be. A window whose ends are
# such stamps is exact to their float64 spacing, which is coarser than 1e-3 µs for these two:
# 2**-7 µs for 2025 stamps (3.6e13 µs after the origin), 2**-6 µs for 2026 ones (8.1e13 µs).
SPACING = {ADVISOR: 2**-7, MSPROF: 2**-6}

# path, detected format, steps analysed, median step time (µs), median utilization
CASES = [
    # step_trace_time.csv step 50: Preparing 19358.0 + Computing 8827.473
    # + Communication(Not Overlapped) 81515.607 + Free 25908.102
    (
        "torch_npu/ascend-msinsight/pytorch_text_level0_rank0_ascend_pt",
        "torch_npu",
        1,
        135609.182,
        8827.473 / 135609.182,
    ),
    # 17902.5 + 8873.756 + 101963.203 + 25744.05 (the example: 154 483.5 µs, 5.74%)
    (
        "torch_npu/ascend-msinsight/pytorch_text_level1_rank0_ascend_pt",
        "torch_npu",
        1,
        154483.509,
        8873.756 / 154483.509,
    ),
    # step 13 (Device_id column): 206.25 + 231290.1 + 420174.26 + 158558.0
    (
        "torch_npu/ascend-msinsight/st_level2_rank_0_ascend_pt",
        "torch_npu",
        1,
        810228.61,
        231290.1 / 810228.61,
    ),
    # Step Id 19 only, no step table: first kernel start 1736413971411629.128 → last end
    # 1736413974268749.533
    ("torch_npu/ascend-mstt/advisor_compute_advice_data", "torch_npu", 1, 2857120.405, None),
    # 1699529622790614.8 → 1699529623307500.34
    ("torch_npu/ascend-mstt/advisor_backend_compute_advice", "torch_npu", 1, 516885.54, None),
    # 8 ranks, the slowest is rank 0: Computing 80309.687 + Comm(NO) 683731.290 + Free
    # 990605.104 (no Preparing column)
    (
        "torch_npu/ascend-mstt/cluster_analysis_output",
        "cluster_step_trace",
        1,
        80309.68717187493 + 683731.2897031249 + 990605.1042031233,
        80309.68717187493 / 1754646.0811,
    ),
    # 3 MIX_AIC kernels (87139.38 + 86808.42 + 86846.72 = 260794.52 µs busy) in one window
    # from the first start 1780676244313289.000 to the last end 1780676244500755.880 +
    # 86846.720 (TASK_TIMEOUT_SET, 15 s earlier, is bookkeeping)
    (
        MSPROF,
        "msprof",
        1,
        274313.6,
        260794.52 / 274313.6,
    ),
    # STEP_TIME step 50: 1736410576538298.460 − 1736410576386409.710 = 151888.75 µs
    ("ascend_db/pytorch_db_level1_rank0_ascend_pt", "torch_npu_db", 1, 151888.75, None),
    ("ascend_db/msprof_full_db", "msprof_db", 1, None, None),
    # ProfilerStep#1: [1704161511420289.011, 1704161511434380.981) = 14091.97 µs
    ("ascend_timeline/trace_view.json", "ascend_timeline", 1, 14091.97, None),
    # ProfilerStep#551 607312 µs and #552 622928 µs: median 615120
    ("kineto/sampled_rank-0.json.gz", "kineto", 2, 615120.0, None),
    ("kineto/sampled_rank-1.json.gz", "kineto", 2, None, None),
    # ProfilerStep#2 holds no GPU task (the trace ends in it): left out
    ("kineto/mi250_minitoy_train_ROCm6_2_kineto.json.gz", "kineto", 1, None, None),
    ("kineto/benchmark_result_2869224_1695835535_trace.json.gz", "kineto", 1, None, None),
    # ProfilerStep#551 (210109.162 µs) holds none of the 4 cpu_ops, which lie after it: the step
    # is kept with its time, its ratios unknown (the ops are not analysed in its place)
    ("kineto/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz", "kineto", 1, 210109.162, None),
]
# Profiles no step of which holds a task: only the step time is measured.
RATIOS_UNKNOWN = {"kineto/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz"}


@pytest.mark.parametrize(
    ("relative", "fmt", "steps", "step_time", "utilization"), CASES, ids=[c[0] for c in CASES]
)
def test_every_real_profile_inspects(
    capsys: pytest.CaptureFixture[str],
    relative: str,
    fmt: str,
    steps: int,
    step_time: float | None,
    utilization: float | None,
) -> None:
    assert main(["inspect", str(DATA / relative), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["profile"]["format"] == fmt
    assert doc["steps"]["analysed"] == steps
    metrics = doc["metrics"]
    assert metrics["step_time_us"]["n"] == steps
    assert metrics["step_time_us"]["median"] > 0
    if step_time is not None:
        tolerance = SPACING.get(relative, 1e-3)
        assert metrics["step_time_us"]["median"] == pytest.approx(step_time, abs=tolerance)
    if utilization is not None:
        assert metrics["utilization"]["median"] == pytest.approx(utilization, abs=1e-6)
    if relative in RATIOS_UNKNOWN:
        assert all(metrics[name]["n"] == 0 for name in ("utilization", "comm_ratio", "free_ratio"))
        return
    for name in ("utilization", "comm_ratio", "free_ratio"):
        assert 0.0 <= metrics[name]["median"] <= 1.0
    # the breakdown always sums to the step time
    for row in doc["per_step"]:
        parts = [
            row[c] for c in ("computing_us", "comm_not_overlapped_us", "free_us", "preparing_us")
        ]
        assert sum(parts) == pytest.approx(row["step_time_us"], rel=1e-9, abs=1e-6)


def test_a_metadata_only_timeline_is_an_error_not_a_silent_zero(
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = DATA / "ascend_timeline" / "trace_view_tiny.json"
    assert main(["inspect", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"perfgate: error: {path}: holds no task or step events")
    assert err.count("\n") == 1


# HTA 0.5.0's own functions (get_temporal_breakdown, get_comm_comp_overlap) on its frame of
# each trace cut to perfgate's ProfilerStep windows, 2026-12-06 (docs/metrics.md): per
# (rank, step), computing, communication not overlapped, before the first task, memcpy.
HTA_ON_THE_SAME_WINDOWS = {
    ("sampled_rank-0.json.gz", 551): (106252.0, 172259.0, 2936.0, 643.0),
    ("sampled_rank-0.json.gz", 552): (104068.0, 164724.0, 2821.0, 654.0),
    ("sampled_rank-1.json.gz", 551): (135548.0, 134336.0, 2897.0, 2653.0),
    ("sampled_rank-1.json.gz", 552): (136425.0, 169187.0, 2843.0, 13820.0),
}


@pytest.mark.parametrize("trace", ["sampled_rank-0.json.gz", "sampled_rank-1.json.gz"])
def test_the_hta_sample_traces_read_as_hta_reads_them_on_the_same_windows(
    capsys: pytest.CaptureFixture[str], trace: str
) -> None:
    assert main(["inspect", str(DATA / "kineto" / trace), "--format", "json"]) == 0
    for row in json.loads(capsys.readouterr().out)["per_step"]:
        expected = HTA_ON_THE_SAME_WINDOWS[(trace, row["step"])]
        got = (
            row["computing_us"],
            row["comm_not_overlapped_us"],
            row["preparing_us"],
            row["copy_us"],
        )
        assert got == pytest.approx(expected, abs=1e-3)

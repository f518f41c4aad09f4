"""One formatter for every number and name perfgate shows."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from perfgate.cli import main
from perfgate.report.format import (
    format_change,
    format_ms,
    format_p,
    format_ratio,
    format_time,
    format_value,
    p_clause,
    short_name,
    short_names,
    terminal_width,
)
from perfgate.rules import Unit

TEMPLATE_KERNEL = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
    "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, "
    "at::detail::Array<char*, 3>)"
)
HTA = (
    Path(__file__).parent / "data" / "kineto" / "benchmark_result_2869224_1695835535_trace.json.gz"
)


def test_times_and_changes_read_the_same_everywhere() -> None:
    assert format_time(154483.509) == "154.484 ms"
    assert format_time(50.6) == "50.6 µs"
    assert format_time(1_204_000.0) == "1.204 s"
    assert format_time(float("nan")) == "n/a"
    assert format_change(0.104, Unit.RELATIVE) == "+10.4%"
    assert format_change(-0.0125, Unit.POINTS) == "-1.25pt"
    assert format_change(2000.0, Unit.MICROSECONDS) == "+2.000 ms"


def test_absurd_magnitudes_read_in_a_few_characters() -> None:
    # A hand-edited change of 1e300 in a results file printed a 300-digit table cell.
    assert format_change(1e300, Unit.RELATIVE) == "+1e+302%"
    assert format_change(-1e300, Unit.POINTS) == "-1e+302pt"
    assert format_change(1e300, Unit.MICROSECONDS) == "+1e+297 ms"
    assert format_time(1e300) == "1e+294 s"
    assert format_ratio(1e300) == "1e+302%"
    assert format_ms(1e300, signed=True) == "+1e+297"
    # Infinity reads in its unit (it read "+inf%" for points and times too).
    assert format_change(float("inf"), Unit.RELATIVE) == "+inf%"
    assert format_change(float("-inf"), Unit.POINTS) == "-infpt"
    assert format_change(float("inf"), Unit.MICROSECONDS) == "+inf ms"
    # Below the cut, fixed places as before.
    assert format_change(9_999_999.0, Unit.RELATIVE) == "+999999900.0%"
    assert format_time(123_456_789.0) == "123.457 s"


def test_template_and_parameter_lists_fold_and_long_names_are_cut_in_the_middle() -> None:
    assert short_name(TEMPLATE_KERNEL, 60) == (
        "void at::native::vectorized_elementwise_kernel<…>(…)"
    )
    assert short_name("aten::to", 60) == "aten::to"
    cut = short_name("a" * 50 + "b" * 50, 30)
    assert len(cut) == 30 and cut.startswith("a") and cut.endswith("b") and "…" in cut


SAMPLED_RANKS = [
    Path(__file__).parent / "data" / "kineto" / f"sampled_rank-{rank}.json.gz" for rank in (0, 1)
]


@pytest.mark.parametrize("width", [24, 40, 60, 100])
def test_look_alike_kernel_names_are_told_apart_in_a_table(width: int) -> None:
    # Three FBGEMM kernels of the HTA sample traces that part in the middle of the name and
    # read alike cut in the middle; two names that part only in their template lists.
    names = [
        "void split_embedding_backward_codegen_rowwise_adagrad_unweighted_kernel_cta_per_row_1"
        "<c10::Half, float, c10::Half, 2ul, 32>(at::GenericPackedTensorAccessor<float, 2ul, "
        "at::RestrictPtrTraits, long>, float, float, float, long)",
        "void split_embedding_backward_codegen_rowwise_adagrad_unweighted_kernel_warp_per_row_1"
        "<c10::Half, float, c10::Half, 2ul, 32>(at::GenericPackedTensorAccessor<float, 2ul, "
        "at::RestrictPtrTraits, long>, float, float, float, long)",
        "void split_embedding_backward_codegen_rowwise_adagrad_weighted_kernel_cta_per_row_1"
        "<c10::Half, float, c10::Half, 2ul, 32>(at::GenericPackedTensorAccessor<float, 2ul, "
        "at::RestrictPtrTraits, long>, float, float, float, long)",
        TEMPLATE_KERNEL,
        TEMPLATE_KERNEL.replace("<float>", "<c10::Half>"),
        "aten::mm",
        "aten::mm",  # the same operator on another core: one name, shown once as it is
    ]
    shown = short_names(names, width)
    assert all(len(name) <= width for name in shown)
    assert len(set(shown[:5])) == 5
    assert shown[5] == shown[6] == "aten::mm"
    # Alone, a name is cut as short_name cuts it.
    assert short_names(names[:1], width) == [short_name(names[0], width)]


def test_the_json_of_a_compare_holds_every_operator_its_table_lists(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Between the two HTA ranks, an NCCL kernel moved 8.6 ms/step within its noise
    # (unchanged) and a vanished kernel 4.6 ms: the table lists the vanished one; --top 5
    # of the JSON once kept the NCCL kernel instead, and the vanished one's full name was
    # nowhere.
    args = ["compare", *map(str, SAMPLED_RANKS), "--top", "5"]
    assert main(args) == 0
    table = capsys.readouterr().out
    assert main([*args, "--format", "json"]) == 0
    operators = json.loads(capsys.readouterr().out)["benchmarks"][0]["operators"]
    listed = [o for o in operators if o["status"] != "unchanged"]
    assert len(listed) == 5
    assert sum("vanished" in line for line in table.splitlines()) == 1
    assert [o["status"] for o in listed].count("vanished") == 1


def test_tables_fit_the_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "90")
    assert terminal_width() == 90
    done = subprocess.run(
        [sys.executable, "-m", "perfgate", "inspect", str(HTA)],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "COLUMNS": "90"},
    )
    table = [line for line in done.stdout.splitlines() if "kernel" in line]
    assert table and max(len(line) for line in table) <= 90
    assert any("<…>(…)" in line for line in table)
    # JSON keeps the names whole.
    document = json.loads(
        subprocess.run(
            [sys.executable, "-m", "perfgate", "inspect", str(HTA), "--format", "json"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    assert any("<" in op["op_type"] and "…" not in op["op_type"] for op in document["operators"])


SAMPLED = [Path(__file__).parent / "data" / "kineto" / f"sampled_rank-{r}.json.gz" for r in (0, 1)]


def _operator_table(width: int, *args: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-m", "perfgate", *args],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "COLUMNS": str(width)},
    )
    lines = done.stdout.splitlines()
    start = next(
        i for i, line in enumerate(lines) if line.startswith(("operators", "top operators"))
    )
    end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith(("!", "advisor")))
    return [line for line in lines[start + 1 : end] if line]


@pytest.mark.parametrize("width", [80, 100, 120, 200])
def test_the_compare_operator_table_fits_the_terminal(width: int) -> None:
    # Template kernels of the HTA samples: names of 100+ characters, five columns of numbers.
    table = _operator_table(width, "compare", *map(str, SAMPLED))
    assert len(table) == 3 + 5  # two header lines, the rule, five operators
    assert max(len(line) for line in table) <= width
    header = " ".join(table[:2])
    # What explains a change is always there; the rest goes when the room runs out.
    for kept in ("op_type", "current", "Δ", "calls/step", "status"):
        assert kept in header
    assert ("core" in header) == (width >= 100)
    assert ("of" in header.split()) == (width >= 120)
    assert any("Memcpy HtoD (Pinned -> Device)" in line for line in table)


@pytest.mark.parametrize("width", [80, 120])
def test_the_inspect_operator_table_fits_the_terminal(width: int) -> None:
    table = _operator_table(width, "inspect", str(SAMPLED[0]))
    assert len(table) == 2 + 10 and max(len(line) for line in table) <= width
    assert "category" in table[0]


@pytest.mark.parametrize(
    ("share", "cell"),
    [
        (None, "—"),
        (float("nan"), "—"),
        (0.58, "58%"),
        (1.0, "100%"),
        (4.1, ">100%"),
        (-2.26, "opposite"),
    ],
)
def test_an_operators_share_of_the_step_change_never_claims_more_than_the_whole(
    share: float | None, cell: str
) -> None:
    from perfgate.report.format import format_share

    assert format_share(share) == cell


def test_a_p_value_that_underflowed_is_not_shown_as_zero() -> None:
    # host_copy on cnn_train: copy ratio 0.00% in every baseline round, 7.13% now; the
    # t-test's p underflows to 0.0, and "p=0" would claim a certainty no test gives.
    assert format_p(0.0) == "<1e-300" and p_clause(0.0) == "p<1e-300"
    assert format_p(0.0016) == "0.0016" and p_clause(0.0016) == "p=0.0016"
    assert format_p(1.4e-112) == "1.4e-112"
    assert format_p(None) == p_clause(None)[2:]


@pytest.mark.parametrize("width", [60, 80])
def test_wide_names_are_cut_and_aligned_by_terminal_columns(
    monkeypatch: pytest.MonkeyPatch, width: int
) -> None:
    from perfgate.report.format import display_width, named_table

    # record_function labels are the user's words: a CJK label takes two columns a character.
    names = ["数据加载与预处理：图像解码、随机裁剪、归一化、拷贝到设备", "前向计算", "aten::linear"]
    cells = [["12.500", "1", "changed"], ["3.000", "2", "new"], ["1.000", "4", "changed"]]
    monkeypatch.setenv("COLUMNS", str(width))
    lines = named_table(names, cells, ["op_type", "ms/step", "calls", "status"]).splitlines()
    assert max(map(display_width, lines)) <= width
    # Each number column starts at the same terminal column on every row.
    starts = {
        display_width(line[: line.index(cell)])
        for line, cell in zip(lines[2:], ("12.500", "3.000", "1.000"))
    }
    assert len(starts) == 1
    assert lines[3].startswith("前向计算 ")
    assert "…" in lines[2] and lines[2].startswith("数据加载")
    assert display_width(short_name(names[0], 21)) <= 21


def test_baseline_show_gives_the_step_time_a_comparison_takes() -> None:
    # The real input_pipeline baseline: `perfgate baseline show` gave the profiled steps'
    # median (2.044 ms, under the profiler) as the step time; the gate takes the timed
    # rounds' centre (1.883 ms).
    from perfgate.analysis.compare import gated_value
    from perfgate.report.baseline import render_baseline

    record = json.loads(
        (Path(__file__).parent / "data" / "records" / "input_pipeline.baseline.json").read_text()
    )
    rows = {
        line[:20].strip(): line[20:].split()
        for line in render_baseline(record).splitlines()
        if line.startswith(("step_time", "copy_ratio"))
    }
    assert " ".join(rows["step_time (timed)"][:2]) == format_value(
        "step_time_us", gated_value(record, "step_time_us")
    )
    assert rows["step_time (timed)"][-1] == str(len(record["timing"]["step_time_us"]))
    assert rows["step_time (profiled)"][0] == "—"
    assert " ".join(rows["step_time (profiled)"][1:3]) == "2.044 ms"
    assert rows["copy_ratio"][0] == format_value("copy_ratio", gated_value(record, "copy_ratio"))
    assert "device_count=1," in render_baseline(record)  # not 1.0


def test_a_metric_that_is_not_gated_shows_its_status_in_parentheses(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # "✅ pass" over a table whose every changed row said REGRESSION: none of them was gated.
    config = tmp_path / "perfgate.yaml"
    config.write_text(
        "thresholds: {step_time: {gate: false}, utilization: {gate: false},"
        " copy_ratio: {gate: false}}\n"
    )
    records = Path(__file__).parent / "data" / "records"
    sides = [str(records / "input_pipeline.baseline.json"), str(records / "host_copy.results.json")]
    for fmt in ("table", "md"):
        argv = ["compare", *sides, "--benchmark", "input_pipeline", "--config", str(config)]
        assert main([*argv, "--format", fmt]) == 0
        lines = capsys.readouterr().out.splitlines()
        [copy] = [line for line in lines if line.lstrip("| ").startswith("copy_ratio")]
        assert "(regression)" in copy and "REGRESSION" not in copy

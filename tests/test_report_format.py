"""One formatter for every number and name perfgate shows."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from perfgate.report.format import format_change, format_time, short_name, terminal_width
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


def test_template_and_parameter_lists_fold_and_long_names_are_cut_in_the_middle() -> None:
    assert short_name(TEMPLATE_KERNEL, 60) == (
        "void at::native::vectorized_elementwise_kernel<…>(…)"
    )
    assert short_name("aten::to", 60) == "aten::to"
    cut = short_name("a" * 50 + "b" * 50, 30)
    assert len(cut) == 30 and cut.startswith("a") and cut.endswith("b") and "…" in cut


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

"""Every real fixture profile makes a run record that validates, so `perfgate compare`
and the gate accept what `perfgate inspect` reads: kernel names run to 5,123 characters in a
real PyTorch trace, and rocBLAS kernel sequences past an advice item's 200."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from test_task_invariants import FIXTURES, ids

from perfgate.analysis.metrics import analyze
from perfgate.analysis.record import record_name, run_record
from perfgate.cli import main
from perfgate.ingest import load_profile
from perfgate.records import MAX_ITEM_TEXT, MAX_NOTES, MAX_TEXT

KINETO = Path(__file__).parent / "data" / "kineto"
LONG_NAMES = KINETO / "benchmark_result_2869224_1695835535_trace.json.gz"
ROCM = KINETO / "mi250_minitoy_train_ROCm6_2_kineto.json.gz"


@pytest.mark.parametrize("path", FIXTURES, ids=ids)
def test_every_real_profile_makes_a_valid_record(path: Path) -> None:
    profile = load_profile(path)
    analysis = analyze(profile)
    record = run_record(profile, analysis, benchmark="b", env="e")  # validates, or raises
    names = [(op["op_type"], op["core"]) for op in record["operators"]]
    assert len(set(names)) == len(names) == min(len(analysis.operators), 2000)
    for hint in record["advice"]:
        for item in hint["items"]:
            assert all(len(v) <= MAX_ITEM_TEXT for v in item.values() if isinstance(v, str))


def test_a_kernel_name_past_the_record_bound_keeps_its_head_and_a_digest() -> None:
    profile = load_profile(LONG_NAMES)
    longest = max(profile.tasks["op_type"].unique(), key=len)
    assert len(longest) == 5123 and longest.startswith(
        "void at::native::(anonymous namespace)::distribution_elementwise_grid_stride_kernel<"
    )
    kept = record_name(longest)
    assert len(kept) == MAX_TEXT and kept.startswith(longest[:1900])
    assert re.fullmatch(r"…#[0-9a-f]{16}", kept[-18:])
    assert record_name(longest) == kept  # the same in the baseline and the run
    assert record_name(longest[:-1] + "x") != kept  # a name differing at its end differs
    assert record_name("aten::mm") == "aten::mm"
    record = run_record(profile, analyze(profile), benchmark="b", env="e")
    assert kept in {op["op_type"] for op in record["operators"]}


def test_compare_of_two_real_kineto_traces_with_long_names(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Both records used to fail their own validation (exit 2): an op_type of 5,123
    # characters, an advice sequence of rocBLAS kernels past 200.
    assert main(["compare", str(LONG_NAMES), str(ROCM), "--format", "json"]) == 0
    document = json.loads(capsys.readouterr().out)
    (benchmark,) = document["benchmarks"]
    assert benchmark["verdict"] == "incomparable"  # an A100 against an MI250
    long_kernel = [op for op in benchmark["operators"] if len(op["op_type"]) > 300]
    assert long_kernel and long_kernel[0]["op_type"].startswith("void at::native::")
    assert main(["compare", str(LONG_NAMES), str(LONG_NAMES), "--format", "json"]) == 0
    (same,) = json.loads(capsys.readouterr().out)["benchmarks"]
    assert same["verdict"] == "pass"
    assert {m["status"] for m in same["metrics"]} == {"pass"}


def test_a_record_keeps_its_notes_within_bounds() -> None:
    # A cluster of hundreds of ranks or exports can have more notes than a record keeps.
    profile = load_profile(ROCM)
    analysis = analyze(profile)
    analysis.notes.insert(0, "x" * (MAX_TEXT + 50))
    analysis.notes.extend(f"rank {i}: an older export ignored" for i in range(500))
    record = run_record(profile, analysis, benchmark="b", env="e")  # validates, or raises
    notes = record["notes"]
    assert len(notes) == MAX_NOTES
    assert notes[0] == "x" * (MAX_TEXT - 1) + "…"
    assert notes[1 : MAX_NOTES - 1] == analysis.notes[1 : MAX_NOTES - 1]
    left_out = len(analysis.notes) - MAX_NOTES + 1
    assert notes[-1] == f"… and {left_out} more notes (perfgate inspect shows all)"

"""A trace is read for the events its tables are built from and no others (issue 10): skipping
the rest changes no table. Checked on the real traces by reading them again with every
complete event kept."""

from __future__ import annotations

import json
from decimal import ROUND_HALF_EVEN, Decimal
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfgate.ingest import chrome_trace
from perfgate.model import MAX_TIME_US, Category, Profile

DATA = Path(__file__).parent / "data"
TRACES = [
    DATA / "ascend_timeline/trace_view.json",  # host events before the process names, as written
    *sorted((DATA / "kineto").glob("*.json.gz")),
]


def read_keeping_everything(path: Path, monkeypatch: pytest.MonkeyPatch) -> Profile:
    with monkeypatch.context() as patch:
        patch.setattr(chrome_trace._Selection, "wants", lambda self, event, name: True)
        return chrome_trace.read(path)


@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.name)
def test_skipped_events_change_no_table(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    selective = chrome_trace.read(path)
    everything = read_keeping_everything(path, monkeypatch)
    pd.testing.assert_frame_equal(selective.tasks, everything.tasks)
    pd.testing.assert_frame_equal(selective.steps, everything.steps)
    assert selective.metadata == everything.metadata
    assert selective.notes == everything.notes
    assert len(selective.tasks) > 0


@pytest.mark.parametrize(
    ("path", "kept", "of"),
    [
        # The 382 CANN events are skipped. torch_npu writes the 1,007 host events before the
        # process names: they are kept (their track is not known yet) and left out by track.
        ("ascend_timeline/trace_view.json", 1830, 1830 + 382),
        # cuda_runtime, python_function, gpu_user_annotation … are skipped.
        ("kineto/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz", None, None),
    ],
)
def test_a_reading_keeps_fewer_events(
    path: str, kept: int | None, of: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    selective = len(chrome_trace._read_trace(DATA / path).events)
    with monkeypatch.context() as patch:
        patch.setattr(chrome_trace._Selection, "wants", lambda self, event, name: True)
        everything = len(chrome_trace._read_trace(DATA / path).events)
    assert selective < everything
    if kept is not None:
        assert (selective, everything) == (kept, of)


def test_reading_for_copies_gives_the_copy_tasks_and_the_step_windows(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    path = DATA / "ascend_timeline/trace_view.json"
    copies = chrome_trace.read(path, tasks="copies")
    whole = chrome_trace.read(path)
    expected = whole.tasks.loc[whole.tasks["category"] == Category.COPY.value]
    assert len(expected) > 0
    pd.testing.assert_frame_equal(
        copies.tasks.reset_index(drop=True), expected.reset_index(drop=True)
    )
    windows = ["rank", "step", "start_us", "end_us"]
    pd.testing.assert_frame_equal(copies.steps[windows], whole.steps[windows])


def test_a_timeline_without_copies_or_step_marks_read_for_copies_is_empty_not_an_error(
    tmp_path: Path,
) -> None:
    # torch_npu takes the kernels from kernel_details.csv: a trace_view.json of a run with no
    # host-device copy and no ProfilerStep (no schedule) has nothing it needs, and is valid.
    events = json.loads((DATA / "ascend_timeline/trace_view.json").read_text())
    kept = [
        e
        for e in events
        if not str(e.get("name", "")).startswith("ProfilerStep#")
        and e.get("args", {}).get("Task Type") not in ("MEMCPY_ASYNC",)
        and e.get("name") != "MEMCPY_ASYNC"
    ]
    trace = tmp_path / "trace_view.json"
    trace.write_text(json.dumps(kept))
    profile = chrome_trace.read(trace, tasks="copies")
    assert profile.tasks.empty and profile.steps.empty
    assert len(chrome_trace.read(trace).tasks) > 0  # read whole, it has the kernels


@settings(max_examples=400, deadline=None, database=None)
@given(
    whole=st.integers(0, MAX_TIME_US - 1),
    fraction=st.text("0123456789", max_size=8),
    form=st.sampled_from(["decimal", "text", "int"]),
)
def test_time_stamps_and_durations_read_as_the_decimal_they_write(
    whole: int, fraction: str, form: str
) -> None:
    # The fast paths (ints, decimals and strings of at most three decimals) must give what the
    # Decimal definition gives: ts in ns rounded half to even, dur as the nearest float64.
    text = f"{whole}.{fraction}" if fraction and form != "int" else str(whole)
    value: object = {"decimal": Decimal(text), "text": text, "int": whole}[form]
    columns = chrome_trace._EventColumns(Path("t.json"), chrome_trace._Selection("array", "all"))
    event = {"ts": value, "dur": value if form != "text" else Decimal(text)}
    exact = Decimal(text)
    assert columns._ns(event) == int((exact * 1000).to_integral_value(rounding=ROUND_HALF_EVEN))
    assert columns._us(event) == float(exact)

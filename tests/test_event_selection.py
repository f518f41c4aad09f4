"""A trace is read for the events its tables are built from and no others (issue 10): skipping
the rest changes no table. Checked on the real traces by reading them again with every
complete event kept."""

from __future__ import annotations

import gzip
import json
from decimal import ROUND_HALF_EVEN, Decimal
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfgate.errors import ProfileError
from perfgate.ingest import chrome_trace
from perfgate.model import CPU_OPS, MAX_TIME_US, Category, Profile

DATA = Path(__file__).parent / "data"
TRACES = [
    DATA / "ascend_timeline/trace_view.json",  # host events before the process names, as written
    *sorted((DATA / "kineto").glob("*.json.gz")),
]


def keep_everything(patch: pytest.MonkeyPatch) -> None:
    """Every complete event parsed and kept: no selection, no scan for marked events."""
    patch.setattr(chrome_trace._Selection, "wants", lambda self, event, name: True)
    patch.setattr(chrome_trace, "_read_candidates", lambda path, columns: False)


def read_keeping_everything(path: Path, monkeypatch: pytest.MonkeyPatch) -> Profile:
    with monkeypatch.context() as patch:
        keep_everything(patch)
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
        keep_everything(patch)
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


# --------------------------------------------------------------------------- marked events
# A copies or steps reading of an Ascend timeline parses only the events that hold a mark of
# what it keeps (_read_candidates); anything but a plain array of objects goes to the full
# parse, which says what is wrong.


def read_in_full(path: Path, scope: chrome_trace._Scope) -> chrome_trace._Trace:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(chrome_trace, "_read_candidates", lambda path, columns: False)
        return chrome_trace._read_trace(path, scope)


def assert_same_trace(fast: chrome_trace._Trace, full: chrome_trace._Trace) -> None:
    pd.testing.assert_frame_equal(fast.events, full.events)
    assert fast.process_names == full.process_names
    assert fast.process_labels == full.process_labels


@pytest.mark.parametrize(
    ("chunk", "scope"),
    [
        *((chunk, scope) for chunk in (1, 7, 64, 4096, 8 << 20) for scope in ("copies", "steps")),
        # A Kineto header is searched again while the array of events has not begun: a byte
        # at a time through one takes minutes.
        *((chunk, "all") for chunk in (7, 64, 4096, 8 << 20)),
    ],
)
def test_marked_events_read_as_the_full_parse_reads_them_in_chunks_of_any_size(
    chunk: int, scope: chrome_trace._Scope, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(chrome_trace, "_SCAN_CHUNK", chunk)
    small = chunk < 4096  # a byte at a time through a big trace takes minutes
    if scope == "all":  # a Kineto trace (an Ascend timeline read whole parses every event)
        path = (
            DATA
            / "kineto"
            / (
                "rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz"
                if small
                else "sampled_rank-0.json.gz"
            )
        )
    else:
        path = DATA / "ascend_timeline" / ("trace_view_tiny.json" if small else "trace_view.json")
    fast = chrome_trace._read_trace(path, scope)
    assert_same_trace(fast, read_in_full(path, scope))
    names = fast.events["name"]
    if scope == "copies" and not small:
        assert (names == "MEMCPY_ASYNC").sum() > 0
    if scope == "all":
        assert fast.events["cat"].isin(chrome_trace.GPU_EVENT_CATS).any() or small
    if not small:
        assert names.str.startswith("ProfilerStep#").any()


def test_an_escaped_mark_is_still_read(tmp_path: Path) -> None:
    events = json.loads((DATA / "ascend_timeline/trace_view.json").read_text())
    text = json.dumps(events)
    escaped = text.replace('"MEMCPY_ASYNC"', '"MEMCPY\\u005fASYNC"')
    assert escaped != text
    path = tmp_path / "trace_view.json"
    path.write_text(escaped)
    copies = chrome_trace._read_trace(path, "copies").events
    assert (copies["name"] == "MEMCPY_ASYNC").sum() > 0
    assert_same_trace(chrome_trace._read_trace(path, "copies"), read_in_full(path, "copies"))


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda t: t[:-1] + ", 3]", "trace event #* is a JSON int"),
        (lambda t: t[:-1] + ", [1]]", "trace event #* is a JSON list"),
        (lambda t: t.replace("}, {", "} {", 1), "is truncated or not valid JSON"),
        (lambda t: t.replace("}, {", "},, {", 1), "is truncated or not valid JSON"),
        (lambda t: t[: len(t) // 2], "is truncated or not valid JSON"),
        (lambda t: t + " []", "is truncated or not valid JSON"),
        (lambda t: t.replace('"MEMCPY_ASYNC"', '"MEMCPY_ASYNC" x', 1), "not valid JSON"),
    ],
)
def test_a_timeline_that_is_not_a_plain_array_of_objects_gets_the_full_parse_and_its_error(
    damage: object, message: str, tmp_path: Path
) -> None:
    text = json.dumps(json.loads((DATA / "ascend_timeline/trace_view.json").read_text()))
    path = tmp_path / "trace_view.json"
    path.write_text(damage(text))  # type: ignore[operator]
    with pytest.raises(ProfileError) as raised:
        chrome_trace._read_trace(path, "copies")
    assert fnmatch(str(raised.value), f"*{message}*"), str(raised.value)
    assert str(raised.value).startswith(str(path))


def test_damage_inside_an_event_no_table_uses_does_not_stop_a_copies_reading(
    tmp_path: Path,
) -> None:
    # Only the events a reading keeps are parsed; a kernel event with a broken value is
    # skipped like the others (the full reading, which parses every event, refuses it).
    original = (DATA / "ascend_timeline/trace_view.json").read_text()
    index = original.index('"ph": "X"')
    event = original[original.rindex("{", 0, index) : original.index("}", index)]
    assert "MEMCPY" not in event and "ProfilerStep" not in event
    damaged = original[:index] + '"ph": "X" 0' + original[index + len('"ph": "X"') :]
    path = tmp_path / "trace_view.json"
    path.write_text(damaged)
    clean = tmp_path / "clean.json"
    clean.write_text(original)
    pd.testing.assert_frame_equal(
        chrome_trace._read_trace(path, "copies").events,
        chrome_trace._read_trace(clean, "copies").events,
    )
    with pytest.raises(ProfileError, match="not valid JSON"):
        chrome_trace._read_trace(path, "all")


def test_a_gpu_trace_keeps_its_cpu_ops_only_for_the_step_marks() -> None:
    path = DATA / "kineto/benchmark_result_2869224_1695835535_trace.json.gz"  # deviceProperties
    events = chrome_trace._read_trace(path).events
    assert events["cat"].isin(chrome_trace.GPU_EVENT_CATS).any()
    ops = events.loc[events["cat"] == "cpu_op", "name"]
    assert ops.str.startswith("ProfilerStep#").all()
    with pytest.MonkeyPatch.context() as patch:
        keep_everything(patch)
        everything = chrome_trace._read_trace(path).events
    assert (everything["cat"] == "cpu_op").sum() == 359


def test_a_trace_with_device_properties_but_no_gpu_event_is_read_again_for_its_cpu_ops(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Recorded on a GPU machine with CPU activity only: the header names the GPU, the
    # events are CPU ops, and they are the tasks.
    with gzip.open(DATA / "kineto/benchmark_result_2869224_1695835535_trace.json.gz") as file:
        document = json.load(file)
    assert document["deviceProperties"]
    document["traceEvents"] = [
        e for e in document["traceEvents"] if e.get("cat") not in chrome_trace.GPU_EVENT_CATS
    ]
    path = tmp_path / "cpu_activity.pt.trace.json"
    path.write_text(json.dumps(document))
    selections: list[bool] = []
    original = chrome_trace._read_events

    def spy(*args: Any) -> chrome_trace._Trace:
        selections.append(args[-1].cpu_ops)
        return original(*args)

    with monkeypatch.context() as patch:
        patch.setattr(chrome_trace, "_read_events", spy)
        profile = chrome_trace.read(path)
    assert selections == [False, True]
    assert profile.metadata["task_basis"] == CPU_OPS
    assert len(profile.tasks) > 0
    pd.testing.assert_frame_equal(profile.tasks, read_keeping_everything(path, monkeypatch).tasks)


def kineto_text() -> str:
    with gzip.open(DATA / "kineto/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz", "rt") as file:
        return file.read()


def test_traceevents_in_a_header_string_is_not_taken_for_the_array(tmp_path: Path) -> None:
    document = json.loads(kineto_text())
    header = {"note": 'a "traceEvents": [ in a string', **document}
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(header))
    assert_same_trace(chrome_trace._read_trace(path), read_in_full(path, "all"))
    assert len(chrome_trace._read_trace(path).events) > 0


def with_second_traceevents(tmp_path: Path) -> Path:
    """The Kineto trace with a second ``traceEvents`` array (of 3 events) after the first."""
    text = kineto_text().rstrip()
    assert text.endswith("}")
    events = json.loads(text)["traceEvents"]
    path = tmp_path / "trace.json"
    path.write_text(text[:-1] + ', "traceEvents": ' + json.dumps(events[:3]) + "}")
    return path


def test_a_second_traceevents_array_gets_the_full_parse(tmp_path: Path) -> None:
    # Both arrays' events are read by the full parse (ijson), and so by this reading.
    path = with_second_traceevents(tmp_path)
    scans, trace = read_with_scans(path)
    assert scans == [False]
    assert_same_trace(trace, read_in_full(path, "all"))


def read_with_scans(path: Path) -> tuple[list[bool], chrome_trace._Trace]:
    """The trace, and whether each scan of it found a plain array (False: the full parse)."""
    scans: list[bool] = []
    original = chrome_trace._read_candidates

    def spy(path: Path, columns: chrome_trace._EventColumns) -> bool:
        scans.append(original(path, columns))
        return scans[-1]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(chrome_trace, "_read_candidates", spy)
        trace = chrome_trace._read_trace(path)
    return scans, trace


@pytest.mark.parametrize("cut", [1, 6, 11])
def test_a_second_traceevents_key_cut_by_a_chunk_end_is_still_seen(
    cut: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The chunk ends ``cut`` bytes into the second key: each chunk alone holds only a part.
    path = with_second_traceevents(tmp_path)
    second = path.read_bytes().rindex(b'"traceEvents"') + 1  # the key's first letter
    monkeypatch.setattr(chrome_trace, "_SCAN_CHUNK", second + cut)
    scans, trace = read_with_scans(path)
    assert scans == [False]
    assert_same_trace(trace, read_in_full(path, "all"))

"""Chrome-trace readers: torch.profiler (Kineto) traces and Ascend timelines.

Two sources share the Chrome trace event format and this module:

* ``kineto`` — a torch.profiler trace: a JSON object whose ``traceEvents`` array holds the
  events (plain or gzip), or a directory of them, one rank per file. Tasks are the GPU events
  (``kernel``, ``gpu_memcpy``, ``gpu_memset``) or, without any, the top-level ``cpu_op``
  events (:func:`top_level_mask`); steps are the ``ProfilerStep#N`` marks.
* ``ascend_timeline`` — torch_npu's ``trace_view.json`` or msprof's ``msprof_*.json``: a JSON
  *array* of events whose ``ts`` is a string of epoch µs. Tracks are found by their
  ``process_name`` metadata, never by pid (docs/formats.md §7.2); each step gets the breakdown
  torch_npu sums from the ``Overlap Analysis`` track (docs/formats.md §4.3).

Both are recognised by content, whatever the files are called (docs/formats.md §3). Events
are streamed with ijson into columns; the file is never loaded whole. Times are integer ns
while reading and become float64 µs through the profile's :class:`~perfgate.model.TimeBase`.
docs/formats.md §7 says which events and arguments become which columns.
"""

from __future__ import annotations

import gzip
import json
import re
import zlib
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation
from pathlib import Path
from typing import IO, Any, Literal, cast

import ijson
import numpy as np
import numpy.typing as npt
import pandas as pd
from pandas.api.extensions import ExtensionArray

from perfgate.errors import ProfileError
from perfgate.ingest import FormatReader
from perfgate.ingest.assemble import Part, assemble
from perfgate.ingest.categories import (
    ASCEND_COMM,
    ASCEND_COMPUTE,
    ASCEND_COPY,
    ascend_category,
    categorize,
    cpu_category,
    cuda_category,
    cuda_copy_direction,
    op_type_from_name,
)
from perfgate.ingest.common import concat_frames, well_formed
from perfgate.ingest.progress import tracked
from perfgate.model import (
    CPU_OPS,
    DEVICE_TASKS,
    MAX_ID,
    MAX_TIME_US,
    NS_PER_US,
    Category,
    Profile,
    SourceFile,
    TimeBase,
    empty_steps,
    unknown_ints,
    with_source,
)

KINETO = "kineto"
ASCEND_TIMELINE = "ascend_timeline"

KINETO_SUFFIXES = (".pt.trace.json", ".pt.trace.json.gz")
# Directories other readers own (torch_npu, msprof): a directory holding one is not ours.
_FOREIGN_DIR = re.compile(r"^(ASCEND_PROFILER_OUTPUT|PROF_.*|.*_ascend_pt)$")

# How much of a file detect() looks at.
_DETECT_BYTES = 8192
_GZIP_MAGIC = b"\x1f\x8b"
_UTF8_BOM = b"\xef\xbb\xbf"
# Keys Kineto writes in a trace's header (before the events): one of them marks a trace even
# when a big header pushes "traceEvents" past the first few KB.
_KINETO_HEADER_KEYS = (b'"traceEvents"', b'"schemaVersion"', b'"deviceProperties"')

_MAX_RANK = 2**31 - 1
_PROFILER_STEP = re.compile(r"^ProfilerStep#(\d+)$")
_STEP_MARK_CATS = frozenset({"user_annotation", "cpu_op"})
GPU_EVENT_CATS = ("kernel", "gpu_memcpy", "gpu_memset")

ASCEND_HARDWARE = "Ascend Hardware"
OVERLAP_ANALYSIS = "Overlap Analysis"
_ASCEND_PROCESSES = frozenset({ASCEND_HARDWARE, OVERLAP_ANALYSIS, "CANN", "AI Core Freq"})
_KNOWN_TASK_TYPES = ASCEND_COMPUTE | ASCEND_COPY | ASCEND_COMM
# Task Type values that say nothing; a task whose *name* is a task type then takes it as core.
_UNSPECIFIC_TASK_TYPES = frozenset({"", "N/A", "OTHER"})
# Overlap Analysis event name → canonical breakdown column (torch_npu's step_trace_time.csv).
_OVERLAP_COLUMNS = {
    "Computing": "computing_us",
    "Communication(Not Overlapped)": "comm_not_overlapped_us",
    "Free": "free_us",
}
# Events that mark the first device work of a step, for Preparing (torch_npu's rule).
_FIRST_WORK_EVENTS = frozenset({"Computing", "Communication"})

# Top-level header keys that may carry the torch version (Kineto itself writes none).
_TORCH_VERSION_KEYS = ("pytorch_version", "torch_version")

# Whole digits the fast path of a time stamp string parses (MAX_TIME_US has 16).
_FAST_WHOLE_DIGITS = len(str(MAX_TIME_US))
_TIME_EXPECTED = f"a finite number of µs, at most {MAX_TIME_US:.3g} (int64 ns)"
_TRACE_EXPECTED = (
    "a torch.profiler trace (a JSON object with a 'traceEvents' array) or an Ascend "
    "timeline (a JSON array of trace events)"
)


# ---------------------------------------------------------------------------------------------
# Public entry points
# ---------------------------------------------------------------------------------------------


def detect(path: Path) -> bool:
    """Whether ``path`` is a Chrome trace file, or a directory of torch.profiler traces.

    Recognised by content, whatever the names: a file (plain or gzip) that starts, after white
    space, with ``{`` and a Kineto header key, or with ``[`` and an event object. A directory
    must hold such a Kineto trace (or a ``*.pt.trace.json[.gz]`` file) and no torch_npu /
    msprof output (other readers take those). At most :data:`_DETECT_BYTES` of a file are read.
    """
    path = Path(path)
    if path.is_dir():
        try:
            children = sorted(path.iterdir())
        except OSError:
            return False
        if any(c.is_dir() and _FOREIGN_DIR.match(c.name) for c in children):
            return False
        return bool(_kineto_files(children))
    return _sniff(path) is not None


def _sniff(path: Path) -> Literal["object", "array"] | None:
    """``object`` for a file that starts like a Kineto trace, ``array`` for one that starts like
    an array of trace events (an Ascend timeline), else None; reads :data:`_DETECT_BYTES`."""
    try:
        if not path.is_file():
            return None
        with _open(path) as handle:
            head = handle.read(_DETECT_BYTES)
    except (OSError, EOFError, zlib.error):
        return None
    head = head.removeprefix(_UTF8_BOM).lstrip(b" \t\r\n")
    if head.startswith(b"{") and any(key in head for key in _KINETO_HEADER_KEYS):
        return "object"
    if head.startswith(b"[") and head[1:].lstrip().startswith(b"{") and b'"ph"' in head:
        return "array"
    return None


def _kineto_files(children: Iterable[Path]) -> list[Path]:
    """The torch.profiler traces among a directory's entries: named ``*.pt.trace.json[.gz]``
    (a damaged one is then reported, not skipped) or starting like one."""
    return [
        c
        for c in children
        if not c.name.startswith(".")
        and c.is_file()
        and (c.name.endswith(KINETO_SUFFIXES) or _sniff(c) == "object")
    ]


def read(
    path: Path, *, clock: TimeBase | None = None, tasks: Literal["all", "copies"] = "all"
) -> Profile:
    """Read a torch.profiler trace (file or directory) or an Ascend timeline.

    ``clock`` is the time base of a profile this trace is part of (torch_npu's
    ``trace_view.json`` next to ``kernel_details.csv``); by default the trace has its own.
    ``tasks="copies"`` reads an Ascend timeline for its step windows and copy tasks only
    (torch_npu takes the kernels and the breakdown from its CSVs): the profile then has no
    other tasks and no breakdown.

    Raises:
        ProfileError: the file is missing, truncated or not JSON; a JSON object has no
            ``traceEvents``; an event lacks ``ts``/``dur`` or holds a non-number there; the
            trace holds neither tasks nor step marks; two traces of a directory claim the
            same rank.
    """
    path = Path(path)
    clock = clock if clock is not None else TimeBase()
    if path.is_dir():
        return _read_kineto_dir(path, clock)
    if not path.exists():
        raise ProfileError(path, "no such file or directory")
    trace = _read_trace(path, scope=tasks)
    if trace.layout == "array" and trace.is_ascend():
        return _ascend_profile(path, trace, clock, tasks)
    return _kineto_profile(path, [(path, trace)], clock)


def profiler_step_windows(path: Path, *, clock: TimeBase | None = None) -> pd.DataFrame:
    """The ``ProfilerStep#N`` windows of a Chrome trace (``trace_view.json``, a Kineto trace).

    Returns columns ``step`` (Int64), ``start_us``, ``end_us`` (float64, the event's
    ``[ts, ts + dur)`` in µs since ``clock``'s origin, or the trace's own time base;
    ``frame.attrs["time_origin_us"]`` says which), sorted by step; no rows when the trace has
    no step marks.

    Raises:
        ProfileError: as :func:`read` for a file that is not a readable trace, or when one step
            number is marked twice.
    """
    path = Path(path)
    trace = _read_trace(path, scope="steps")
    windows = _step_windows(trace.events, path)
    if windows["step"].duplicated().any():
        step = int(windows.loc[windows["step"].duplicated(), "step"].iloc[0])
        raise ProfileError(
            path, f"ProfilerStep#{step} is marked twice", column="name", expected="one per step"
        )
    clock = clock if clock is not None else TimeBase()
    frame = pd.DataFrame(
        {
            "step": windows["step"].astype("Int64").reset_index(drop=True),
            "start_us": clock.from_ns(windows["start_ns"].to_numpy(dtype=np.int64)),
            "end_us": clock.from_ns(windows["end_ns"].to_numpy(dtype=np.int64)),
        }
    )
    frame.attrs["time_origin_us"] = clock.origin_us
    return frame


def top_level_mask(ops: pd.DataFrame) -> pd.Series:
    """Which CPU ops are top-level: not nested inside another op of the same thread.

    ``ops`` has columns ``pid``, ``tid``, ``ts_ns``, ``dur_ns`` (one row per ``cpu_op``; the
    ``ProfilerStep#N`` marks and ``user_annotation`` ranges such as ``Optimizer.step#SGD.step``
    are *not* passed in, so they are never parents).

    The rule: op B is nested in op A when both ran on the same ``(pid, tid)`` and
    ``[B.ts, B.ts + B.dur]`` lies inside ``[A.ts, A.ts + A.dur]``. An op nested in nothing is
    top-level. Threads are independent: ops on another thread (e.g. CUDA's autograd device
    thread running ``autograd::engine::evaluate_function: …``) are top-level there when nothing
    on *their* thread encloses them. Of two ops with the same interval the first listed is the
    parent. Two ops that only partly overlap (which one thread cannot produce) are both
    top-level.

    Sorted by start (longest first on ties), an op is nested exactly when an earlier op of its
    thread ends at or after its end, so one running maximum of end times per thread decides.
    torch 2.13 on CPU records the whole training step on the calling thread: forward aten ops,
    ``autograd::engine::evaluate_function: XBackward0`` for each backward node, and the
    optimizer's ``aten::add_`` etc. (under a ``user_annotation``, so top-level themselves).
    """
    if ops.empty:
        return pd.Series(np.zeros(0, dtype=bool), index=ops.index)
    end = ops["ts_ns"] + ops["dur_ns"]
    frame = pd.DataFrame(
        {
            "thread": ops["pid"].astype(str) + "/" + ops["tid"].astype(str),
            "ts": ops["ts_ns"],
            "neg_end": -end,
            "end": end,
            "order": np.arange(len(ops)),
        },
        index=ops.index,
    ).sort_values(["thread", "ts", "neg_end", "order"], kind="stable")
    # Kept in int64 ns throughout: epoch nanoseconds do not fit a float64 exactly.
    ends = frame["end"].to_numpy()
    threads = frame["thread"].to_numpy()
    running_max = frame.groupby("thread", sort=False)["end"].cummax().to_numpy()
    first_of_thread = np.ones(len(frame), dtype=bool)
    first_of_thread[1:] = threads[1:] != threads[:-1]
    earlier_max_end = np.zeros(len(frame), dtype=np.int64)
    earlier_max_end[1:] = running_max[:-1]
    top = first_of_thread | (ends > earlier_max_end)
    return pd.Series(top, index=frame.index).reindex(ops.index)


# ---------------------------------------------------------------------------------------------
# Streaming the events into columns
# ---------------------------------------------------------------------------------------------


@dataclass
class _Trace:
    """The complete (``ph: X``) events of one trace as columns, plus its metadata.

    ``events`` columns: ``cat``, ``name``, ``pid``, ``tid`` (str), ``ts_ns`` (int64, exact),
    ``stream``, ``task_id``, ``task_type``, ``input_shapes`` (object, None when absent), ``dur_us``
    (float64, as written) and ``dur_ns`` (int64, rounded, for interval logic).
    """

    layout: Literal["object", "array"]
    header: dict[str, Any]
    events: pd.DataFrame
    process_names: dict[str, str] = field(default_factory=dict)
    process_labels: dict[str, str] = field(default_factory=dict)

    def is_ascend(self) -> bool:
        return bool(_ASCEND_PROCESSES & set(self.process_names.values()))

    def pids_named(self, name: str) -> list[str]:
        return sorted(pid for pid, pname in self.process_names.items() if pname == name)


MAX_JSON_DEPTH = 100
"""How deeply a trace may nest JSON arrays and objects. Kineto and Ascend events nest about
six levels (``traceEvents`` → event → ``args`` → ``Input Dims`` → shape); a deeper file is
refused while it streams, before a parser builds the nesting (docs/formats.md §7)."""

_OPEN_BRACE, _OPEN_BRACKET, _CLOSE_BRACE, _CLOSE_BRACKET = b"{[}]"
_QUOTE, _BACKSLASH = ord('"'), ord("\\")


_Ints = npt.NDArray[np.int64]


class _DepthGuard:
    """A binary file whose bytes are checked, as they are read, for JSON nesting deeper than
    :data:`MAX_JSON_DEPTH` (brackets inside strings do not count). Vectorised per chunk: the
    parser reads in chunks, so the check costs a few passes over bytes already in memory."""

    def __init__(self, handle: IO[bytes], path: Path) -> None:
        self.handle = handle
        self.path = path
        self.depth = 0
        self.in_string = False
        self.backslashes = 0  # trailing backslashes of the previous chunk, inside a string
        self.offset = 0

    def read(self, size: int = -1) -> bytes:
        data = self.handle.read(size)
        if data:
            self._scan(data)
        return data

    def structure(self, data: bytes) -> tuple[_Ints, _Ints, _Ints]:
        """Check ``data``, the next bytes of the file, and return its brackets outside strings:
        where they are (offsets in the file), +1 for an opening one and −1 for a closing one,
        and the depth after each."""
        offset = self.offset
        at, step, depth = self._scan(data)
        brackets = step != 0
        return at[brackets] + offset, step[brackets], depth[brackets]

    def _scan(self, data: bytes) -> tuple[_Ints, _Ints, _Ints]:
        """Check ``data``, the next bytes of the file: its quotes and brackets (offsets in the
        data), the depth change of each (0 for quotes and brackets inside strings) and the
        depth after each."""
        chars = np.frombuffer(data, dtype=np.uint8)
        n = len(chars)
        if not n:
            empty = np.empty(0, dtype=np.int64)
            return empty, empty, empty
        if self.backslashes or b"\\" in data:
            quote, trailing = self._real_quotes(chars)
        else:  # no escapes in this chunk (the usual case): every quote is real
            quote, trailing = chars == _QUOTE, 0
        opening = (chars == _OPEN_BRACE) | (chars == _OPEN_BRACKET)
        closing = (chars == _CLOSE_BRACE) | (chars == _CLOSE_BRACKET)
        # Only quotes and brackets matter: a tenth of a trace's bytes or less.
        at = np.flatnonzero(quote | opening | closing)
        is_quote = quote[at]
        flips = np.cumsum(is_quote, dtype=np.int64)
        # Inside a string: an odd number of real quotes before the byte (the quotes themselves
        # are no brackets).
        inside = (flips - is_quote + self.in_string) % 2 == 1
        step = opening[at].astype(np.int64) - closing[at]
        step[inside] = 0
        depth = self.depth + np.cumsum(step)
        if len(depth) and int(depth.max()) > MAX_JSON_DEPTH:
            where = self.offset + int(at[np.argmax(depth > MAX_JSON_DEPTH)])
            raise ProfileError(
                self.path,
                f"JSON nested deeper than {MAX_JSON_DEPTH} levels (at byte {where})",
                expected=f"trace events nested at most {MAX_JSON_DEPTH} levels deep",
            )
        if len(depth):
            self.depth = int(depth[-1])
            self.in_string = bool((int(flips[-1]) + self.in_string) % 2)
        self.backslashes = trailing
        self.offset += n
        return at, step, depth

    def _real_quotes(self, chars: npt.NDArray[np.uint8]) -> tuple[npt.NDArray[np.bool_], int]:
        """Which bytes are unescaped quotes (a quote after an odd run of backslashes is
        escaped; the run may continue the previous chunk's), and the chunk's trailing run of
        backslashes."""
        n = len(chars)
        index = np.arange(n)
        backslash = chars == _BACKSLASH
        last_other = np.maximum.accumulate(np.where(backslash, -1, index))
        run_before = np.empty(n, dtype=np.int64)
        run_before[0] = self.backslashes
        ends_run = index[1:] - 1
        run_before[1:] = np.where(
            last_other[:-1] < 0, ends_run + 1 + self.backslashes, ends_run - last_other[:-1]
        )
        quote = (chars == _QUOTE) & (run_before % 2 == 0)
        trailing = n - 1 - int(last_other[-1])
        return quote, trailing + (self.backslashes if trailing == n else 0)


@contextmanager
def _guarded(path: Path) -> Iterator[IO[bytes]]:
    """:func:`_open` with the nesting checked as the bytes stream (:class:`_DepthGuard`)."""
    with _open(path) as handle:
        yield cast(IO[bytes], _DepthGuard(handle, path))


@contextmanager
def _open(path: Path) -> Iterator[IO[bytes]]:
    """The file's bytes, gunzipped when it is gzip (by its magic bytes, not its name), after a
    UTF-8 byte-order mark if the text starts with one (editors on Windows write it; JSON
    parsers refuse it)."""
    with path.open("rb") as file:
        start = file.read(len(_UTF8_BOM))
        gzipped = start.startswith(_GZIP_MAGIC)
        file.seek(len(_UTF8_BOM) if start == _UTF8_BOM else 0)
        raw = tracked(file, path)  # progress counts the bytes on disk
        if gzipped:
            with gzip.open(raw, "rb") as handle:
                if handle.peek(len(_UTF8_BOM)).startswith(_UTF8_BOM):
                    handle.read(len(_UTF8_BOM))
                yield cast(IO[bytes], handle)
        else:
            yield raw


@contextmanager
def _json_errors(path: Path) -> Iterator[None]:
    """Turn what a damaged file raises while streaming into one ProfileError naming it."""
    try:
        yield
    except ijson.JSONError as exc:
        raise ProfileError(
            path, f"is truncated or not valid JSON ({_first_line(exc)})", expected=_TRACE_EXPECTED
        ) from exc
    except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
        raise ProfileError(
            path,
            f"is a truncated or damaged gzip file ({_first_line(exc)})",
            expected=_TRACE_EXPECTED,
        ) from exc
    except UnicodeDecodeError as exc:
        raise ProfileError(path, "is not UTF-8 JSON text", expected=_TRACE_EXPECTED) from exc
    except OSError as exc:
        raise ProfileError(path, f"cannot be read ({exc.strerror or exc})") from exc


def _first_line(exc: BaseException) -> str:
    """The first line of an exception's message (yajl adds a multi-line pointer)."""
    lines = str(exc).strip().splitlines()
    return lines[0].strip() if lines else type(exc).__name__


def _read_trace(path: Path, scope: _Scope = "all") -> _Trace:
    """Stream ``path`` into a :class:`_Trace` of the X events ``scope`` needs
    (:class:`_Selection`).

    A Kineto trace with ``deviceProperties`` is read first without its CPU ops (a GPU trace's
    tasks are its GPU events; the CPU ops give only the step marks), and read again with
    them when it holds no GPU event after all.
    """
    with _json_errors(path):
        layout, header = _read_layout(path)
        if layout == "object" and scope == "all" and header.get("deviceProperties"):
            trace = _read_events(path, layout, header, _Selection(layout, scope, cpu_ops=False))
            if trace.events["cat"].isin(GPU_EVENT_CATS).any():
                return trace
        return _read_events(path, layout, header, _Selection(layout, scope))


def _read_events(
    path: Path, layout: Literal["object", "array"], header: dict[str, Any], selection: _Selection
) -> _Trace:
    """The events ``selection`` keeps: only those parsed where the file allows
    (:func:`_read_candidates`), else all of them streamed through ijson."""
    if selection.scope != "all" or layout == "object":
        columns = _EventColumns(path, selection.fresh())
        if _read_candidates(path, columns):
            return _Trace(
                layout, header, columns.frame(), columns.process_names, columns.process_labels
            )
        # Something other than a plain array of objects: the full parse says what.
    columns = _EventColumns(path, selection.fresh())
    prefix = "traceEvents.item" if layout == "object" else "item"
    with _guarded(path) as handle:
        for event in ijson.items(handle, prefix, buf_size=_READ_CHUNK):
            columns.add(event)
    return _Trace(layout, header, columns.frame(), columns.process_names, columns.process_labels)


# What an event a reading keeps must contain, in lower case (the scan looks for these before
# anything is parsed): a step mark's name, a metadata event's phase, a \\u escape (which
# could spell anything); for copies of an Ascend timeline a copy task type (in its Task Type
# or, where that says nothing, its name); for a Kineto trace the categories it keeps.
_STEP_MARKS = (b"profilerstep#", b'"m"', b"\\u")
_COPY_MARKS = tuple(kind.lower().encode() for kind in sorted(ASCEND_COPY))
_GPU_MARKS = (*(f'"{cat}"'.encode() for cat in GPU_EVENT_CATS), b'"user_annotation"')
_CPU_OP_MARK = b'"cpu_op"'
_TRACE_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')
# After the array: any spelling of the key, which ijson would read (or refuse) again.
_SECOND_KEY = b"traceevents"
_SCAN_CHUNK = 8 * 1024 * 1024
_BETWEEN_EVENTS = np.zeros(256, dtype=np.bool_)
_BETWEEN_EVENTS[list(b" \t\r\n,")] = True
_COMMA = ord(",")


class _NotPlain(Exception):
    """The events are not a plain array of objects: the full parse reads them."""


def _marks(selection: _Selection) -> tuple[bytes, ...]:
    """What the events a reading keeps contain (:data:`_STEP_MARKS` …)."""
    if selection.scope == "steps":
        return _STEP_MARKS
    if selection.layout == "array":
        return _STEP_MARKS + (_COPY_MARKS if selection.scope == "copies" else ())
    return _STEP_MARKS + _GPU_MARKS + ((_CPU_OP_MARK,) if selection.cpu_ops else ())


def _read_candidates(path: Path, columns: _EventColumns) -> bool:
    """Read a trace for the events ``columns.selection`` keeps, parsing only those: the bytes
    are scanned for the events (brackets outside strings, as :class:`_DepthGuard` counts
    them), and only the events that hold a mark of what is kept (:func:`_marks`) are parsed,
    in file order, through the same :class:`_Selection`. torch_npu's trace_view.json holds
    millions of host and CANN events around a few thousand step marks and copies; a Kineto
    trace, runtime calls, flows and CPU ops beside its kernels.

    The events left unparsed are checked for their nesting and strings only, not for being
    valid JSON inside: no table uses them. False, with ``columns`` to be dropped, when the
    events are not a plain array of objects (anything but white space and one comma between
    them, a truncated end, a kept event that does not parse, a second ``traceEvents``): the
    full parse then reads the file and says what is wrong.
    """
    try:
        with _open(path) as handle:
            _scan_candidates(path, handle, columns)
    except _NotPlain:
        return False
    return True


def _scan_candidates(path: Path, handle: IO[bytes], columns: _EventColumns) -> None:
    guard = _DepthGuard(handle, path)
    # The array of events: the top-level value (an Ascend timeline) or traceEvents' value;
    # its events are one level deeper.
    base = 1 if columns.selection.layout == "array" else 2
    marks = _marks(columns.selection)
    buffer, buffer_at = b"", 0  # bytes not yet done with, and their offset in the file
    array_start: int | None = None  # the array's '['
    before_array: list[tuple[_Ints, _Ints, _Ints]] = []  # the brackets before it
    open_event: int | None = None  # the offset of an event that started but has not ended
    last_end = -1  # where the last event ended, or the array's '[' before one
    array_end: int | None = None  # the array's ']'
    events = 0  # events done with
    after = b""  # the last bytes after the array, for a key cut by a chunk's end
    while data := handle.read(_SCAN_CHUNK):
        offset = guard.offset
        at, step, depth = guard.structure(data)
        chars = np.frombuffer(data, dtype=np.uint8)
        if array_end is not None:
            after = _after_the_array(after + data, base)
            continue
        buffer += data
        if array_start is None:
            before_array.append((at, step, depth))
            array_start = _array_start(buffer, buffer_at, before_array, base)
            if array_start is None:
                continue
            last_end = array_start
            if base == 1:
                _only_white_space(np.frombuffer(buffer, np.uint8)[: array_start - buffer_at])
            keep = at > array_start
            at, step, depth = at[keep], step[keep], depth[keep]
        starts = at[(step == 1) & (depth == base + 1)]
        ends = at[(step == -1) & (depth == base)]
        closed = at[(step == -1) & (depth == base - 1)]
        if len(closed):
            array_end = int(closed[0])
            starts, ends = starts[starts < array_end], ends[ends < array_end]
            after = _after_the_array(data[array_end + 1 - offset :], base)
        if len(starts) and (chars[starts - offset] != _OPEN_BRACE).any():
            raise _NotPlain  # an array among the events
        # What comes before each event that starts here: the last one's end, or the '['.
        begun = np.concatenate(([open_event], starts)) if open_event is not None else starts
        if not 0 <= len(begun) - len(ends) <= 1:
            raise _NotPlain
        left = ends if open_event is not None else np.concatenate(([last_end], ends))
        left = left[: len(starts)]
        commas = np.ones(len(starts), dtype=np.int64)
        if events == 0 and open_event is None and len(starts):
            commas[0] = 0  # the first event follows the '['
        gaps = [(left, starts, commas)]
        if array_end is not None:
            if len(begun) > len(ends):
                raise _NotPlain
            before_end = int(ends[-1]) if len(ends) else last_end
            gaps.append((np.asarray([before_end]), np.asarray([array_end]), np.zeros(1, np.int64)))
        _check_gaps(np.frombuffer(buffer, dtype=np.uint8), buffer_at, gaps)
        if len(ends):
            complete = buffer[: int(ends[-1]) + 1 - buffer_at]
            _parse_marked(complete, buffer_at, begun[: len(ends)], ends, events, marks, columns)
            events += len(ends)
            last_end = int(ends[-1])
        open_event = int(begun[-1]) if len(begun) > len(ends) else None
        keep_from = open_event if open_event is not None else last_end
        buffer, buffer_at = buffer[keep_from - buffer_at :], keep_from
    if guard.depth or guard.in_string or open_event is not None or array_end is None:
        raise _NotPlain  # truncated


def _array_start(
    buffer: bytes, buffer_at: int, brackets: list[tuple[_Ints, _Ints, _Ints]], base: int
) -> int | None:
    """The offset of the array of events' '[' once ``buffer`` (the file from ``buffer_at``)
    shows it: the top-level bracket of a timeline, or the one after the top-level object's
    ``"traceEvents":`` key."""
    at = np.concatenate([a for a, _, _ in brackets])
    step = np.concatenate([s for _, s, _ in brackets])
    depth = np.concatenate([d for _, _, d in brackets])
    opening = at[(step == 1) & (depth == base)]
    if base == 1:
        return int(opening[0]) if len(opening) else None
    for match in _TRACE_EVENTS_KEY.finditer(buffer):
        bracket = buffer_at + match.end() - 1
        if bracket in opening:  # not inside a string, and a key of the top-level object
            return bracket
    return None


def _after_the_array(data: bytes, base: int) -> bytes:
    """After a timeline's array: white space. After traceEvents' array: the rest of the
    object, which no table reads, unless it holds another traceEvents (ijson reads both).
    Returns the bytes to put before the next chunk's: the end of ``data``, where a key may
    begin that the next chunk ends."""
    if base == 1:
        _only_white_space(np.frombuffer(data, dtype=np.uint8))
        return b""
    if _SECOND_KEY in data.lower():  # any case: ijson would say whether
        raise _NotPlain
    return data[-(len(_SECOND_KEY) - 1) :]


def _only_white_space(chars: npt.NDArray[np.uint8]) -> None:
    if not _BETWEEN_EVENTS[chars].all() or (chars == _COMMA).any():
        raise _NotPlain


def _check_gaps(
    view: npt.NDArray[np.uint8], view_at: int, gaps: list[tuple[_Ints, _Ints, _Ints]]
) -> None:
    """Between each ``left`` and ``right`` bracket (offsets in the file; ``view`` holds the
    bytes from ``view_at``): white space and ``commas`` commas (one between events, none
    after '[' or before ']'). Gathered gap by gap: they are a few bytes each."""
    before = np.concatenate([left for left, _, _ in gaps]) + 1 - view_at
    after = np.concatenate([right for _, right, _ in gaps]) - view_at
    expected = np.concatenate([commas for _, _, commas in gaps])
    lengths = after - before
    if not len(lengths):
        return
    if (lengths < 0).any() or (before < 0).any():
        raise _NotPlain
    bounds = np.concatenate(([0], np.cumsum(lengths)))
    index = np.repeat(before - bounds[:-1], lengths) + np.arange(int(bounds[-1]))
    between = view[index]
    if not _BETWEEN_EVENTS[between].all():
        raise _NotPlain
    counted = np.concatenate(([0], np.cumsum(between == _COMMA)))
    if (counted[bounds[1:]] - counted[bounds[:-1]] != expected).any():
        raise _NotPlain


def _parse_marked(
    data: bytes,
    data_at: int,
    starts: _Ints,
    ends: _Ints,
    events_before: int,
    marks: tuple[bytes, ...],
    columns: _EventColumns,
) -> None:
    """Parse the events of ``data`` (bytes from file offset ``data_at``; events from
    ``starts`` to ``ends``, inclusive) that hold one of ``marks``, and add them in order."""
    lower = data.lower()
    found: list[int] = []
    for mark in marks:
        position = lower.find(mark)
        while position != -1:
            found.append(position)
            position = lower.find(mark, position + 1)
    if not found:
        return
    # Between events there is only white space and commas: a mark is inside the event
    # whose end is the first at or after it.
    numbers = np.unique(np.searchsorted(ends, np.asarray(found, dtype=np.int64) + data_at))
    for number in numbers.tolist():
        start, end = int(starts[number]) - data_at, int(ends[number]) - data_at
        try:
            event = json.loads(
                data[start : end + 1], parse_float=Decimal, parse_constant=_no_constant
            )
        except (ValueError, RecursionError) as exc:
            raise _NotPlain from exc
        columns.seen = events_before + number
        columns.add(event)


def _no_constant(name: str) -> None:
    """JSON has no NaN or Infinity (Python's json module reads them; ijson does not)."""
    raise ValueError(f"{name} is not JSON")


def _read_layout(path: Path) -> tuple[Literal["object", "array"], dict[str, Any]]:
    """Whether the trace is an object with ``traceEvents`` or an array of events.

    For an object, also returns the header keys that precede ``traceEvents`` (Kineto writes
    ``deviceProperties`` and ``distributedInfo`` there); parsing stops at ``traceEvents``.
    """
    builder = ijson.ObjectBuilder()
    top_level: str | None = None
    header: dict[str, Any] | None = None
    with _guarded(path) as handle:
        for prefix, event, value in ijson.parse(handle):
            if header is not None:  # the value of traceEvents begins
                if event != "start_array":
                    kind = "object" if event == "start_map" else event
                    raise ProfileError(
                        path,
                        f"its 'traceEvents' holds a JSON {kind}, not an array of events",
                        expected=_TRACE_EXPECTED,
                    )
                return "object", header
            if prefix == "" and top_level is None:
                top_level = event
                if event == "start_array":
                    return "array", {}
                if event != "start_map":
                    raise ProfileError(
                        path,
                        f"holds a JSON {event.replace('start_', '')}, not a trace",
                        expected=_TRACE_EXPECTED,
                    )
            if prefix == "" and event == "map_key" and value == "traceEvents":
                built = builder.value
                header = dict(built) if isinstance(built, dict) else {}
                continue
            builder.event(event, value)
    if top_level is None:
        raise ProfileError(path, "file is empty", expected=_TRACE_EXPECTED)
    raise ProfileError(
        path,
        "JSON object has no 'traceEvents' key: not a Chrome trace",
        column="traceEvents",
        expected=_TRACE_EXPECTED,
    )


_Scope = Literal["all", "copies", "steps"]
_READ_CHUNK = 256 * 1024
# X events a Kineto trace's tables are built from: device tasks, CPU ops (the tasks of a
# CPU-only run) and the step marks. cuda_runtime, python_function, flows etc. are skipped.
_KINETO_CATS = frozenset(GPU_EVENT_CATS) | _STEP_MARK_CATS
_HOST, _DEVICE, _OVERLAP, _UNUSED = "host", "device", "overlap", "unused"
_ROLES = {ASCEND_HARDWARE: _DEVICE, OVERLAP_ANALYSIS: _OVERLAP, "CANN": _UNUSED}


class _Selection:
    """Which complete events a reading keeps: those some table is built from, decided per event
    before its fields are parsed (most of a timeline is host, CANN and flow events no table
    uses; parsing them cost more than reading the file).

    * a Kineto trace (``object``): events of :data:`_KINETO_CATS`; with ``cpu_ops`` False, of
      the CPU ops only the step marks;
    * an Ascend timeline (``array``), scope ``all``: events of the Ascend Hardware and Overlap
      Analysis tracks, and once the trace is known to be Ascend, only the ``ProfilerStep#N``
      marks of host tracks; none of the other Ascend tracks (CANN, AI Core Freq). A track is
      known by its ``process_name`` event, which may come after the track's first events:
      until then everything is kept, and the tables pick by track as before;
    * scope ``copies`` (torch_npu's ``trace_view.json``): step marks and copy tasks, by their
      name and Task Type alone (no track needed);
    * scope ``steps``: step marks.
    """

    def __init__(
        self, layout: Literal["object", "array"], scope: _Scope, *, cpu_ops: bool = True
    ) -> None:
        self.layout = layout
        self.scope = scope
        self.cpu_ops = cpu_ops  # a Kineto trace's CPU ops, beside their step marks
        self.roles: dict[object, str] = {}
        self.ascend = False  # an Ascend track has been named: host tracks give step marks only
        self._copies: dict[tuple[str, str], bool] = {}

    def fresh(self) -> _Selection:
        """The same selection, before any event was read."""
        return _Selection(self.layout, self.scope, cpu_ops=self.cpu_ops)

    def name_process(self, pid: object, name: str) -> None:
        if name in _ASCEND_PROCESSES:
            self.ascend = True
        if isinstance(pid, (int, str)):
            self.roles[pid] = _ROLES.get(name, _UNUSED if name in _ASCEND_PROCESSES else _HOST)

    def wants(self, event: dict[str, Any], name: str) -> bool:
        if self.scope == "steps":
            return name.startswith("ProfilerStep#")
        if self.layout == "object":
            cat = event.get("cat")
            if not isinstance(cat, str) or cat not in _KINETO_CATS:
                return False
            return cat != "cpu_op" or self.cpu_ops or name.startswith("ProfilerStep#")
        if self.scope == "copies":
            return name.startswith("ProfilerStep#") or self._is_copy(event, name)
        pid = event.get("pid")
        role = self.roles.get(pid) if isinstance(pid, (int, str)) else None
        if role is None or role in (_DEVICE, _OVERLAP):
            return True
        if role == _UNUSED:
            return False
        return not self.ascend or name.startswith("ProfilerStep#")

    def _is_copy(self, event: dict[str, Any], name: str) -> bool:
        args = event.get("args")
        task_type = args.get("Task Type") if type(args) is dict else None
        key = (name, task_type if type(task_type) is str else repr(task_type))
        copy = self._copies.get(key)
        if copy is None:
            core = timeline_core(None if task_type is None else str(task_type), name)
            copy = self._copies[key] = ascend_category(core, name) is Category.COPY
        return copy


def timeline_core(task_type: str | None, name: str) -> str:
    """An Ascend timeline task's core: its ``Task Type``, or its name when the type says nothing
    and the name is a task type (some timelines write ``Other`` or nothing for a task named
    ``MEMCPY_ASYNC``)."""
    core = "N/A" if task_type is None else task_type
    if core.strip().upper() in _UNSPECIFIC_TASK_TYPES and name in _KNOWN_TASK_TYPES:
        return name
    return core


class _EventColumns:
    """Accumulates X events column by column and process metadata from M events."""

    def __init__(self, path: Path, selection: _Selection) -> None:
        self.path = path
        self.selection = selection
        self.cat: list[str] = []
        self.name: list[str] = []
        self.pid: list[str] = []
        self.tid: list[str] = []
        self.ts_ns: list[int] = []
        self.dur_us: list[float] = []
        self.stream: list[str | None] = []
        self.task_id: list[str | None] = []
        self.task_type: list[str | None] = []
        self.input_shapes: list[str | None] = []
        self.event: list[int] = []  # each kept event's number in the file (from 1)
        self.process_names: dict[str, str] = {}
        self.process_labels: dict[str, str] = {}
        # One string object per distinct value: traces repeat names and categories a lot.
        self._strings: dict[str, str] = {}
        self._numbers: dict[object, str] = {}
        self.seen = 0  # events read so far, to point at a bad one

    def _intern(self, value: object) -> str:
        if type(value) is str:
            interned = self._strings.get(value)
            if interned is None:  # a new text: made well-formed once
                interned = self._strings[value] = well_formed(value)
            return interned
        kind = type(value)
        if kind is int:  # pids and tids: one text per number, made once
            text = self._numbers.get(value)
            if text is None:
                text = self._numbers[value] = self._strings.setdefault(str(value), str(value))
            return text
        text = "" if value is None else str(value)
        return self._strings.setdefault(text, text)

    def add(self, event: object) -> None:
        self.seen += 1
        if type(event) is not dict:
            raise ProfileError(
                self.path,
                f"trace event #{self.seen} is a JSON {type(event).__name__}",
                expected="JSON objects as trace events",
            )
        phase = event.get("ph")
        if phase == "M":
            self._metadata(event)
            return
        if phase != "X":
            return
        name = self._intern(event.get("name"))
        if not self.selection.wants(event, name):
            return
        args = event.get("args")
        args = args if type(args) is dict else {}
        self.event.append(self.seen)
        self.cat.append(self._intern(event.get("cat")))
        self.name.append(name)
        self.pid.append(self._intern(event.get("pid")))
        self.tid.append(self._intern(event.get("tid")))
        self.ts_ns.append(self._ns(event))
        self.dur_us.append(self._us(event))
        stream = args.get("stream", args.get("Stream Id", args.get("Physic Stream Id")))
        self.stream.append(None if stream is None else self._intern(stream))
        task_id = args.get("Task Id")
        self.task_id.append(None if task_id is None else self._intern(task_id))
        task_type = args.get("Task Type")
        self.task_type.append(None if task_type is None else self._intern(task_type))
        dims = args.get("Input Dims")
        self.input_shapes.append(_shapes_text(dims) if isinstance(dims, list) else None)

    def _metadata(self, event: dict[str, Any]) -> None:
        args = event.get("args")
        if not isinstance(args, dict):
            return
        raw_pid = event.get("pid")
        pid = self._intern(raw_pid)
        if event.get("name") == "process_name" and isinstance(args.get("name"), str):
            self.process_names[pid] = args["name"]
            self.selection.name_process(raw_pid, args["name"])
        elif event.get("name") == "process_labels" and isinstance(args.get("labels"), str):
            self.process_labels[pid] = args["labels"]

    def _ns(self, event: dict[str, Any]) -> int:
        """``ts`` (µs: int, decimal or a string of a decimal) as integer ns, exactly."""
        value = event.get("ts")
        # Fast paths for what profilers write, exact in integers: an int; a decimal (Kineto's
        # 1682725898082262.0, which ijson gives as a Decimal: its text is cheaper than Decimal
        # arithmetic) or a string of one (Ascend's "1736408883704643.212") with at most three
        # decimals. Anything else takes the Decimal path, which also names what is wrong.
        kind = type(value)
        if kind is int:
            if -MAX_TIME_US <= cast(int, value) <= MAX_TIME_US:
                return cast(int, value) * NS_PER_US
        elif kind is str or kind is Decimal:
            whole, dot, fraction = str(value).partition(".")
            if (
                whole.isascii()
                and whole.isdigit()
                and len(whole) <= _FAST_WHOLE_DIGITS
                and (not dot or (fraction.isascii() and fraction.isdigit() and len(fraction) <= 3))
                and int(whole) <= MAX_TIME_US
            ):
                return int(whole) * NS_PER_US + (int(fraction.ljust(3, "0")) if dot else 0)
        number = self._decimal(event, "ts")
        return int((number * NS_PER_US).to_integral_value(rounding=ROUND_HALF_EVEN))

    def _us(self, event: dict[str, Any]) -> float:
        """``dur`` in µs as float64 (Ascend writes sub-ns digits, e.g. ``1.2695``)."""
        value = event.get("dur")
        kind = type(value)
        if kind is Decimal or kind is int:
            # float() of a decimal's text rounds once, as float() of the Decimal does.
            duration = float(str(value))
            if 0 <= duration < MAX_TIME_US:
                return duration
        return float(self._decimal(event, "dur"))

    def _decimal(self, event: dict[str, Any], key: str) -> Decimal:
        value = event.get(key)
        try:
            if isinstance(value, bool) or value is None:
                raise InvalidOperation
            number = Decimal(value.strip()) if isinstance(value, str) else Decimal(value)
            if not number.is_finite():
                raise InvalidOperation
        except (InvalidOperation, TypeError, ValueError) as exc:
            problem = "missing" if value is None else f"{value!r} is not a number"
            raise self._error(event, key, problem, "µs as a number") from exc
        # A time beyond int64 nanoseconds (year 2262) is no clock's; a complete event's
        # duration is never negative (docs/formats.md §12).
        if abs(number) > MAX_TIME_US:
            raise self._error(
                event, key, f"{value!r} µs is no time a profiler records", _TIME_EXPECTED
            )
        if key == "dur" and number < 0:
            raise self._error(event, key, f"negative duration {value!r}", "a duration >= 0")
        return number

    def _error(self, event: dict[str, Any], key: str, problem: str, expected: str) -> ProfileError:
        name = event.get("name")
        shown = repr(name) if len(repr(name)) <= 80 else repr(name)[:77] + "..."
        where = f"trace event #{self.seen} ({shown})"
        return ProfileError(self.path, f"{where}: {problem}", column=key, expected=expected)

    def frame(self) -> pd.DataFrame:
        return pd.DataFrame(
            {
                "cat": pd.Series(self.cat, dtype=object),
                "name": pd.Series(self.name, dtype=object),
                "pid": pd.Series(self.pid, dtype=object),
                "tid": pd.Series(self.tid, dtype=object),
                "ts_ns": pd.Series(self.ts_ns, dtype="int64"),
                "dur_us": pd.Series(self.dur_us, dtype="float64"),
                # Interval logic (nesting, step windows) runs on integer ns.
                "dur_ns": np.rint(np.asarray(self.dur_us, dtype="float64") * NS_PER_US).astype(
                    "int64"
                ),
                "stream": pd.Series(self.stream, dtype=object),
                "task_id": pd.Series(self.task_id, dtype=object),
                "task_type": pd.Series(self.task_type, dtype=object),
                "input_shapes": pd.Series(self.input_shapes, dtype=object),
                "event": pd.Series(self.event, dtype="int64"),
            }
        )


def _shapes_text(dims: list[Any]) -> str:
    """Kineto ``Input Dims`` ``[[8, 16], []]`` → ``8,16;`` (the Ascend ``Input Shapes`` form)."""
    return ";".join(
        ",".join(str(d) for d in shape) if isinstance(shape, list) else str(shape) for shape in dims
    )


# ---------------------------------------------------------------------------------------------
# Steps and step assignment (both sources)
# ---------------------------------------------------------------------------------------------


def _step_windows(events: pd.DataFrame, path: Path) -> pd.DataFrame:
    """``ProfilerStep#N`` host events → columns ``step`` (int), ``start_ns``, ``end_ns`` and
    ``event`` (the mark's number in the file)."""
    number = events["name"].str.extract(_PROFILER_STEP, expand=False)
    marks = events.loc[number.notna() & events["cat"].isin(_STEP_MARK_CATS)]
    digits = number.loc[marks.index]
    too_big = digits.str.lstrip("0").str.len() > len(str(MAX_ID))
    too_big |= pd.to_numeric(digits.where(~too_big, "0"), errors="coerce") > MAX_ID
    if too_big.any():
        at = int(np.flatnonzero(too_big.to_numpy())[0])
        raise ProfileError(
            path,
            f"trace event #{marks['event'].iloc[at]}: step number of "
            f"{marks['name'].iloc[at][:60]!r} beyond the int64 range",
            column="name",
            expected="ProfilerStep#N with N an int64",
        )
    return (
        pd.DataFrame(
            {
                "step": digits.astype("int64"),
                "start_ns": marks["ts_ns"],
                "end_ns": marks["ts_ns"] + marks["dur_ns"],
                "event": marks["event"],
            }
        )
        .sort_values("step")
        .reset_index(drop=True)
    )


def _steps_in_window(starts_ns: np.ndarray, windows: pd.DataFrame) -> ExtensionArray:
    """The step whose ``[start, end)`` holds each start; <NA> outside every window."""
    result = unknown_ints(len(starts_ns))
    if windows.empty or len(starts_ns) == 0:
        return result
    ordered = windows.sort_values("start_ns")
    window_starts = ordered["start_ns"].to_numpy()
    window_ends = ordered["end_ns"].to_numpy()
    idx = np.searchsorted(window_starts, starts_ns, side="right") - 1
    safe = np.clip(idx, 0, None)
    inside = (idx >= 0) & (starts_ns < window_ends[safe])
    steps = ordered["step"].to_numpy()[safe]
    result[inside] = steps[inside]
    return result


def _steps_table(
    rank: int, windows: pd.DataFrame, clock: TimeBase, source: SourceFile
) -> pd.DataFrame:
    steps = pd.DataFrame(
        {
            "rank": np.full(len(windows), rank, dtype="int64"),
            "step": windows["step"].astype("Int64").to_numpy(),
            "start_us": clock.from_ns(windows["start_ns"].to_numpy(dtype=np.int64)),
            "end_us": clock.from_ns(windows["end_ns"].to_numpy(dtype=np.int64)),
        }
    )
    return with_source(steps, source, windows["event"].to_numpy())


def _source(path: Path) -> SourceFile:
    """Provenance of a trace's rows: its events, by number, and their keys."""
    headers = {"start_us": "ts", "dur_us": "dur", "end_us": "dur", "step": "name"}
    headers.update(dict.fromkeys(("computing_us", "comm_not_overlapped_us", "free_us"), "dur"))
    headers["preparing_us"] = "ts"
    return SourceFile(str(path), headers, row="trace event #")


# ---------------------------------------------------------------------------------------------
# Kineto
# ---------------------------------------------------------------------------------------------


def _read_kineto_dir(directory: Path, clock: TimeBase) -> Profile:
    files = _kineto_files(sorted(directory.iterdir()))
    if not files:
        raise ProfileError(
            directory,
            "holds no torch.profiler trace",
            expected="torch.profiler traces (JSON objects with 'traceEvents', plain or gzip)",
        )

    def traces() -> Iterator[tuple[Path, _Trace]]:
        # One trace in memory at a time: only its canonical rows are kept.
        for file in files:
            trace = _read_trace(file)
            if trace.layout != "object":
                raise ProfileError(
                    file,
                    "is a JSON array, not a torch.profiler trace",
                    expected="a JSON object with a 'traceEvents' array",
                )
            yield file, trace

    return _kineto_profile(directory, traces(), clock)


def _kineto_profile(path: Path, traces: Iterable[tuple[Path, _Trace]], clock: TimeBase) -> Profile:
    """One rank per trace: ``distributedInfo.rank``, else the trace's place in file order."""
    parts: list[Part] = []
    devices: list[str] = []
    notes: list[str] = []
    cpu_basis: list[bool] = []
    versions: set[str] = set()
    owner: dict[int, Path] = {}
    for order, (file, trace) in enumerate(traces):
        rank = _kineto_rank(trace.header, order)
        if rank in owner:
            raise ProfileError(
                file,
                f"claims rank {rank}, as {owner[rank].name} does",
                column="distributedInfo.rank",
                expected="one trace per rank",
            )
        owner[rank] = file
        windows = _step_windows(trace.events, file)
        if windows["step"].duplicated().any():
            step = int(windows.loc[windows["step"].duplicated(), "step"].iloc[0])
            raise ProfileError(
                file, f"ProfilerStep#{step} is marked twice", column="name", expected="one per step"
            )
        source = _source(file)
        device_events = trace.events["cat"].isin(GPU_EVENT_CATS)
        if device_events.any():
            rank_tasks = _gpu_tasks(trace.events.loc[device_events], windows, rank, clock)
            devices += _gpu_device_names(trace.header, trace.events.loc[device_events])
            cpu_basis.append(False)
        else:
            rank_tasks = _cpu_tasks(trace.events, windows, rank, clock)
            cpu_basis.append(True)
        rank_tasks = with_source(rank_tasks, source, rank_tasks.pop("event").to_numpy())
        if rank_tasks.empty and windows.empty:
            raise ProfileError(
                file,
                "holds no task or step events: no kernel/gpu_memcpy/gpu_memset events, "
                "no cpu_op events and no ProfilerStep#N marks",
                column="traceEvents",
                expected="a torch.profiler trace recorded with CPU and/or CUDA activities",
            )
        outside = int(rank_tasks["step"].isna().sum()) if not windows.empty else 0
        if outside:
            kind = "CPU ops" if cpu_basis[-1] else "device tasks"
            notes.append(
                f"{file.name}: {outside} of {len(rank_tasks)} {kind} start outside every "
                "ProfilerStep window (step left empty)"
            )
        parts.append(Part(tasks=rank_tasks, steps=_steps_table(rank, windows, clock, source)))
        versions |= {str(trace.header[k]) for k in _TORCH_VERSION_KEYS if k in trace.header}
    if len(set(cpu_basis)) > 1:
        raise ProfileError(
            path,
            "mixes GPU traces and CPU-only traces",
            expected="traces of one run, all with or all without GPU activity",
        )
    metadata: dict[str, Any] = {
        "ranks": sorted(owner),
        "task_basis": CPU_OPS if cpu_basis[0] else DEVICE_TASKS,
    }
    device = "cpu" if cpu_basis[0] else ", ".join(dict.fromkeys(devices))
    if device:  # a GPU trace without deviceProperties does not say which GPU
        metadata["device"] = device
    if versions:
        metadata["torch_version"] = ", ".join(sorted(versions))
    return assemble(
        path, KINETO, parts, time_origin_us=clock.origin_us, metadata=metadata, notes=notes
    )


def _kineto_rank(header: dict[str, Any], order: int) -> int:
    info = header.get("distributedInfo")
    rank = info.get("rank") if isinstance(info, dict) else None
    if isinstance(rank, int) and not isinstance(rank, bool) and 0 <= rank <= _MAX_RANK:
        return rank
    return order


def _gpu_tasks(
    events: pd.DataFrame, windows: pd.DataFrame, rank: int, clock: TimeBase
) -> pd.DataFrame:
    names = events["name"]
    cats = events["cat"]
    pairs = pd.unique(pd.Series(list(zip(cats, names)), dtype=object))
    category = {pair: cuda_category(pair[0], pair[1]).value for pair in pairs}
    direction = [
        cuda_copy_direction(name) if cat == "gpu_memcpy" else None for cat, name in zip(cats, names)
    ]
    starts = events["ts_ns"].to_numpy()
    return pd.DataFrame(
        {
            "rank": np.full(len(events), rank, dtype="int64"),
            "step": _steps_in_window(starts, windows),
            "name": names.to_numpy(),
            "op_type": names.to_numpy(),
            "core": cats.to_numpy(),
            "category": [category[pair] for pair in zip(cats, names)],
            "start_us": clock.from_ns(starts),
            "dur_us": events["dur_us"].to_numpy(),
            "direction": pd.Series(direction, dtype=object).to_numpy(),
            "stream": events["stream"].to_numpy(),
            "event": events["event"].to_numpy(),
        }
    )


def _gpu_device_names(header: dict[str, Any], device_events: pd.DataFrame) -> list[str]:
    """Names of the ``deviceProperties`` entries whose id the GPU events' pids use."""
    props = header.get("deviceProperties")
    if not isinstance(props, list):
        return []
    by_id = {str(p.get("id")): str(p["name"]) for p in props if isinstance(p, dict) and "name" in p}
    used = [by_id[pid] for pid in pd.unique(device_events["pid"]) if pid in by_id]
    if used:
        return used
    return list(by_id.values())[:1]


def _cpu_tasks(
    events: pd.DataFrame, windows: pd.DataFrame, rank: int, clock: TimeBase
) -> pd.DataFrame:
    ops = events.loc[(events["cat"] == "cpu_op") & ~events["name"].str.match(_PROFILER_STEP)]
    ops = ops.loc[top_level_mask(ops)]
    names = ops["name"]
    category = {name: cpu_category(name).value for name in pd.unique(names)}
    starts = ops["ts_ns"].to_numpy()
    tasks = pd.DataFrame(
        {
            "rank": np.full(len(ops), rank, dtype="int64"),
            "step": _steps_in_window(starts, windows),
            "name": names.to_numpy(),
            "op_type": names.to_numpy(),
            "core": np.full(len(ops), "cpu", dtype=object),
            "category": names.map(category).to_numpy(),
            "start_us": clock.from_ns(starts),
            "dur_us": ops["dur_us"].to_numpy(),
            "event": ops["event"].to_numpy(),
        }
    )
    if ops["input_shapes"].notna().any():
        tasks["input_shapes"] = ops["input_shapes"].to_numpy()
    return tasks


# ---------------------------------------------------------------------------------------------
# Ascend timelines (trace_view.json, msprof_*.json)
# ---------------------------------------------------------------------------------------------


def _ascend_profile(path: Path, trace: _Trace, clock: TimeBase, scope: _Scope = "all") -> Profile:
    """The profile of an Ascend timeline; read for ``scope="copies"`` (only step marks and
    copy tasks kept) a timeline with neither is an empty profile, not an error: its reader
    has the kernels from elsewhere."""
    events = trace.events
    hardware = trace.pids_named(ASCEND_HARDWARE)
    rank_of = _ascend_ranks(trace, hardware)
    windows = _step_windows(events.loc[~events["pid"].isin(_device_pids(trace))], path)
    if windows["step"].duplicated().any():
        step = int(windows.loc[windows["step"].duplicated(), "step"].iloc[0])
        raise ProfileError(
            path, f"ProfilerStep#{step} is marked twice", column="name", expected="one per step"
        )
    device_events = events.loc[events["pid"].isin(hardware)]
    if device_events.empty and windows.empty and scope != "copies":
        raise ProfileError(
            path,
            "holds no task or step events: no complete (ph 'X') events on an "
            f"'{ASCEND_HARDWARE}' track and no ProfilerStep#N marks",
            expected="an Ascend timeline recorded with device task time (trace_view.json, "
            "msprof_*.json)",
        )
    ranks = sorted(set(rank_of.values())) or [0]
    source = _source(path)
    tasks = _ascend_tasks(device_events, windows, rank_of, clock)
    tasks = with_source(tasks, source, device_events["event"].to_numpy())
    overlap = events.loc[events["pid"].isin(trace.pids_named(OVERLAP_ANALYSIS))]
    steps = concat_frames(
        [
            _ascend_steps(
                rank, windows, overlap, rank_of, clock, source, has_overlap=bool(len(overlap))
            )
            for rank in ranks
        ],
        empty_steps(),
    )
    notes = []
    outside = int(tasks["step"].isna().sum()) if not windows.empty else 0
    if outside:
        notes.append(
            f"{outside} of {len(tasks)} device tasks start outside every ProfilerStep window "
            "(step left empty)"
        )
    return assemble(
        path,
        ASCEND_TIMELINE,
        [Part(tasks=tasks, steps=steps)],
        time_origin_us=clock.origin_us,
        metadata={"ranks": ranks, "task_basis": DEVICE_TASKS},
        notes=notes,
    )


def _device_pids(trace: _Trace) -> set[str]:
    return {pid for pid, name in trace.process_names.items() if name in _ASCEND_PROCESSES}


def _ascend_ranks(trace: _Trace, hardware: list[str]) -> dict[str, int]:
    """pid → rank for device tracks: 0 with one device, else the id in the label ``NPU <id>``."""
    labels = {pid: trace.process_labels.get(pid, "") for pid in hardware}
    single = len(set(labels.values())) <= 1
    rank_of: dict[str, int] = {}
    for pid, label in trace.process_labels.items():
        if single:
            rank_of[pid] = 0
            continue
        match = re.fullmatch(r"NPU\s+(\d+)", label.strip())
        if match:
            rank_of[pid] = int(match.group(1))
    for order, pid in enumerate(hardware):
        rank_of.setdefault(pid, 0 if single else order)
    return rank_of


def _ascend_tasks(
    device_events: pd.DataFrame,
    windows: pd.DataFrame,
    rank_of: dict[str, int],
    clock: TimeBase,
) -> pd.DataFrame:
    names = device_events["name"]
    pairs = [
        (t if isinstance(t, str) else None, n)
        for t, n in zip(device_events["task_type"].tolist(), names.tolist())
    ]
    cores = {pair: timeline_core(*pair) for pair in set(pairs)}
    core = pd.Series([cores[pair] for pair in pairs], index=device_events.index, dtype=object)
    op_types = {name: op_type_from_name(name) for name in pd.unique(names)}
    starts = device_events["ts_ns"].to_numpy()
    ranks = device_events["pid"].map(rank_of).fillna(0).astype("int64").to_numpy()
    step = unknown_ints(len(device_events))
    for rank in np.unique(ranks):
        on_rank = ranks == rank
        step[on_rank] = _steps_in_window(starts[on_rank], windows)
    return pd.DataFrame(
        {
            "rank": ranks,
            "step": step,
            "name": names.to_numpy(),
            "op_type": names.map(op_types).to_numpy(),
            "core": core.to_numpy(),
            "category": categorize(core, names).to_numpy(),
            "start_us": clock.from_ns(starts),
            "dur_us": device_events["dur_us"].to_numpy(),
            "stream": device_events["stream"].fillna(device_events["tid"]).to_numpy(),
            "task_id": device_events["task_id"].to_numpy(),
        }
    )


def _ascend_steps(
    rank: int,
    windows: pd.DataFrame,
    overlap: pd.DataFrame,
    rank_of: dict[str, int],
    clock: TimeBase,
    source: SourceFile,
    *,
    has_overlap: bool,
) -> pd.DataFrame:
    """Step rows of one rank, with torch_npu's breakdown when there is an Overlap Analysis track.

    As torch_npu computes ``step_trace_time.csv``: each Overlap Analysis event adds its ``dur``
    to the step whose ``[start, end)`` holds its ``ts``; Preparing is the first Computing or
    Communication event's start minus the step start (clamped at 0; NaN when the step has none).
    """
    steps = _steps_table(rank, windows, clock, source)
    if not has_overlap or windows.empty:
        return steps
    mine = overlap.loc[overlap["pid"].map(rank_of).fillna(0).astype("int64") == rank]
    mine = mine.assign(step=_steps_in_window(mine["ts_ns"].to_numpy(), windows))
    mine = mine.dropna(subset=["step"])
    for event_name, column in _OVERLAP_COLUMNS.items():
        sums = mine.loc[mine["name"] == event_name].groupby("step")["dur_us"].sum()
        steps[column] = steps["step"].map(sums).fillna(0.0).astype("float64")
    first_work = mine.loc[mine["name"].isin(_FIRST_WORK_EVENTS)].groupby("step")["ts_ns"].min()
    starts = pd.Series(windows["start_ns"].to_numpy(), index=windows["step"].to_numpy())
    preparing = (first_work - starts.reindex(first_work.index)).clip(lower=0) / NS_PER_US
    steps["preparing_us"] = steps["step"].map(preparing).astype("float64")
    return steps


READER = FormatReader("chrome_trace", detect, read)

"""Mutation fuzzing of the profile readers: mutate a real fixture, run ``perfgate inspect``,
judge the outcome.

Used by ``tests/test_fuzz_readers.py`` (Hypothesis draws the mutations, a few hundred cases per
reader) and by ``benchmarks/fuzz_readers.py`` (many more, seeded, with the figures that
docs/reliability.md reports). The promise checked for every case (DESIGN.md §7, issue 11):

* exit 0 with physically valid numbers: ``--format json`` is strict JSON (no ``NaN`` or
  ``Infinity``), times are finite and non-negative, ratios and operator shares lie in [0, 1],
  the breakdown of every step sums to its step time, and no step without any device work is
  reported as 0% utilization; or
* exit 2 with one line on stderr that names a file of the profile (not only its directory)
  and no internal column name (``dur_us``, ``step``, …) where the file has a header of its own;
* never a traceback, never a hang past 30 s, never more than 2 GiB of memory;
* a profile that reads is one ``perfgate compare`` takes too: compared with itself, exit 0
  and the verdict ``pass`` (its run record validates).

Each case runs in a forked child (fork is cheap once pandas is imported) under an address-space
limit and an alarm, so a runaway case is stopped and reported instead of taking the test run
down. A mutation is described by the integers a :class:`Chooser` draws, so Hypothesis can
shrink it and a seeded :class:`random.Random` can replay it.
"""

from __future__ import annotations

import contextlib
import csv
import gzip
import io
import json
import math
import os
import random
import re
import resource
import shutil
import signal
import sqlite3
import traceback
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

DATA = Path(__file__).parent / "data"

TIMEOUT_S = 30
MEMORY_LIMIT = 2 << 30  # bytes a case may add on top of the process it is forked from

# --------------------------------------------------------------------------- choices


class Chooser(Protocol):
    """Where a mutation's choices come from: Hypothesis' ``data.draw`` or a seeded RNG."""

    def below(self, n: int) -> int:
        """An integer in ``[0, n)``; ``n >= 1``."""
        ...


class RandomChooser:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def below(self, n: int) -> int:
        return self.rng.randrange(n)


def pick(chooser: Chooser, items: Sequence[Any]) -> Any:
    return items[chooser.below(len(items))]


# Cell values that break a number, an id or a time in every way the mutation run found.
NUMBER_TEXT = (
    "inf",
    "-inf",
    "nan",
    "Infinity",
    "1e400",
    "-1e400",
    "1e308",
    "-1e308",
    "1e19",
    "1.8446744073709552e19",
    "99999999999999999999",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775809",
    "-1e9",
    "-1",
    "-0.5",
    "0",
    "1e-320",
    "0x1F",
    "1_000",
    "1,5",
    "12abc",
    " 7 ",
    "3.5",
)
OTHER_TEXT = ("", "N/A", "NA", "null", "abc", "\t", "1" * 400, "μs 🙂", "a\x00b", '"', "=1+1")
CELL_TEXT = NUMBER_TEXT + OTHER_TEXT


class Raw:
    """A JSON token written as is (numbers JSON parsers turn into ``inf``, deep nesting)."""

    def __init__(self, text: str) -> None:
        self.text = text


def _deep(depth: int) -> Raw:
    return Raw('{"a":' * depth + "1" + "}" * depth)


JSON_VALUES: tuple[Any, ...] = (
    Raw("1e400"),
    Raw("-1e400"),
    Raw("1e308"),
    Raw("1e19"),
    Raw("99999999999999999999"),
    Raw("-1e9"),
    Raw("-1"),
    Raw("0"),
    Raw("1e-320"),
    Raw("NaN"),
    Raw("Infinity"),
    3.5,
    "inf",
    "1e400",
    "-5",
    "ProfilerStep#99999999999999999999",
    "ProfilerStep#-1",
    "ProfilerStep#1",
    "",
    None,
    True,
    [],
    {},
    [1, 2],
    {"x": {"y": [1, {"z": None}]}},
    "\udcff",
    _deep(40),
)
# Nesting the mutation run used to exhaust the stack and memory; the CI suite tries the depth
# once per heavy case (tests/test_fuzz_readers.py), the benchmark script at random.
DEEP_VALUES = (_deep(2_000), _deep(30_000), _deep(100_000))


# --------------------------------------------------------------------------- targets


@dataclass(frozen=True)
class Target:
    """A real fixture (copied into a scratch directory) and the path inspect is given."""

    name: str
    fmt: str  # the format row of docs/reliability.md
    fixture: str  # relative to tests/data
    entry: str = ""  # what inspect reads, relative to the copy ("" = the copy itself)
    extra: tuple[tuple[str, str], ...] = ()  # (fixture file, destination in the copy)
    heavy: bool = False  # left out of the CI suite (slow to read)

    def build(self, root: Path) -> Path:
        source = DATA / self.fixture
        copy = root / source.name
        if source.is_dir():
            shutil.copytree(source, copy)
        else:
            shutil.copy(source, copy)
        for src, dst in self.extra:
            shutil.copy(DATA / src, copy / dst)
        _make_writable(copy)
        return copy / self.entry if self.entry else copy


def _make_writable(path: Path) -> None:
    for p in [path, *path.rglob("*")] if path.is_dir() else [path]:
        p.chmod(p.stat().st_mode | 0o200)


MSPROF_PROF = "msprof/ascend-msprof-skill/PROF_000001_20260605161708478_FRJKORBPFMHQMGLA"
TARGETS = (
    Target(
        "torch_npu_l1",
        "torch_npu text",
        "torch_npu/ascend-msinsight/pytorch_text_level1_rank0_ascend_pt",
    ),
    Target(
        "torch_npu_l0",
        "torch_npu text",
        "torch_npu/ascend-msinsight/pytorch_text_level0_rank0_ascend_pt",
    ),
    Target(
        "torch_npu_l2", "torch_npu text", "torch_npu/ascend-msinsight/st_level2_rank_0_ascend_pt"
    ),
    Target(
        "kernel_details", "torch_npu text", "torch_npu/ascend-mstt/advisor_backend_compute_advice"
    ),
    Target("cluster", "cluster_step_trace", "torch_npu/ascend-mstt/cluster_analysis_output"),
    Target(
        "msprof",
        "msprof text",
        MSPROF_PROF,
        extra=(
            (
                "msprof/synthetic/step_trace_20260605161737.csv",
                "mindstudio_profiler_output/step_trace_20260605161737.csv",
            ),
        ),
    ),
    Target("msprof_db", "msprof .db", "ascend_db/msprof_full_db"),
    Target("torch_npu_db", "torch_npu .db", "ascend_db/pytorch_db_level1_rank0_ascend_pt"),
    Target("kineto_gpu", "kineto", "kineto/benchmark_result_2869224_1695835535_trace.json.gz"),
    Target("kineto_cpu", "kineto", "kineto/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz"),
    Target("kineto_rocm", "kineto", "kineto/mi250_minitoy_train_ROCm6_2_kineto.json.gz"),
    Target("kineto_nccl", "kineto", "kineto/sampled_rank-0.json.gz", heavy=True),
    Target("ascend_timeline", "ascend timeline", "ascend_timeline/trace_view.json", heavy=True),
)
FORMATS = tuple(dict.fromkeys(t.fmt for t in TARGETS))
# The files a mutation of each profile leaves alone: the readers never open them
# (docs/formats.md §4.7), so mutating them tests nothing.
_NOT_READ = re.compile(r"^(api_statistic|communication|communication_matrix)[^/]*$|\.md$")


def mutable_files(case: Path) -> list[Path]:
    files = [case] if case.is_file() else sorted(p for p in case.rglob("*") if p.is_file())
    return [p for p in files if not _NOT_READ.search(p.name)]


# --------------------------------------------------------------------------- mutations


def mutate(case: Path, chooser: Chooser, *, deep: bool = False) -> str:
    """Apply one mutation to a file of ``case`` (chosen by ``chooser``); returns what it did."""
    target = pick(chooser, mutable_files(case))
    if chooser.below(8) == 0:
        return f"{target.name}: {_mutate_bytes(target, chooser)}"
    suffix = target.name.rsplit(".", 2)
    if target.suffix == ".csv":
        what = _mutate_csv(target, chooser)
    elif target.suffix == ".db":
        what = _mutate_sqlite(target, chooser)
    elif target.suffix == ".json" or suffix[-2:] == ["json", "gz"]:
        what = _mutate_json(target, chooser, deep=deep)
    else:
        what = _mutate_bytes(target, chooser)
    return f"{target.name}: {what}"


def _mutate_bytes(path: Path, chooser: Chooser) -> str:
    data = bytearray(path.read_bytes())
    if not data:
        return "empty file left empty"
    kind = chooser.below(4)
    at = chooser.below(len(data))
    if kind == 0:
        path.write_bytes(bytes(data[:at]))
        return f"truncated at byte {at}"
    if kind == 1:
        data[at] ^= 1 << chooser.below(8)
        path.write_bytes(bytes(data))
        return f"bit flip at byte {at}"
    if kind == 2:
        data[at:at] = pick(chooser, (b"\xff\xfe", b"\x00", b"\xc3", b"\xed\xa0\x80"))
        path.write_bytes(bytes(data))
        return f"non-UTF-8 bytes inserted at {at}"
    path.write_bytes(b"")
    return "emptied"


def _mutate_csv(path: Path, chooser: Chooser) -> str:
    raw = path.read_bytes()
    text = raw.decode("utf-8-sig", errors="surrogateescape")
    rows = list(csv.reader(io.StringIO(text, newline="")))
    if not rows:
        return _mutate_bytes(path, chooser)
    header, body = rows[0], rows[1:]
    kind = chooser.below(10)
    what: str
    if kind <= 4 and body:  # a cell
        r, c = chooser.below(len(body)), chooser.below(len(header))
        value = pick(chooser, CELL_TEXT)
        row = body[r]
        row.extend([""] * (len(header) - len(row)))
        row[c] = value
        what = f"data row {r + 1}, {header[c]!r} = {value!r}"
    elif kind == 5 and body:  # a column's value in every row
        c = chooser.below(len(header))
        value = pick(chooser, CELL_TEXT)
        for row in body:
            if c < len(row):
                row[c] = value
        what = f"every {header[c]!r} = {value!r}"
    elif kind == 6:  # the header
        c = chooser.below(len(header))
        choice = chooser.below(3)
        if choice == 0:
            what = f"column {header[c]!r} removed"
            for row in rows:
                if c < len(row):
                    del row[c]
        elif choice == 1:
            what = f"header {header[c]!r} renamed"
            header[c] = header[c] + "_x"
        else:
            what = f"column {header[c]!r} duplicated"
            for row in rows:
                if c < len(row):
                    row.insert(c, row[c])
    elif kind == 7 and body:  # swap two cells of a row (start/end, step/time)
        r = chooser.below(len(body))
        a, b = chooser.below(len(header)), chooser.below(len(header))
        row = body[r]
        row.extend([""] * (len(header) - len(row)))
        row[a], row[b] = row[b], row[a]
        what = f"data row {r + 1}: {header[a]!r} and {header[b]!r} swapped"
    elif kind == 8 and body:  # rows: delete, duplicate, cut short
        r = chooser.below(len(body))
        choice = chooser.below(3)
        if choice == 0:
            del body[r]
            what = f"data row {r + 1} deleted"
        elif choice == 1:
            body.insert(r, list(body[r]))
            what = f"data row {r + 1} duplicated"
        else:
            body[r] = body[r][: chooser.below(max(len(body[r]), 1))]
            what = f"data row {r + 1} cut short"
        rows = [header, *body]
    else:  # every data row removed
        rows = [header]
        what = "every data row removed"
    out = io.StringIO()
    csv.writer(out, lineterminator="\r\n" if b"\r\n" in raw else "\n").writerows(rows)
    path.write_bytes(out.getvalue().encode("utf-8", errors="surrogateescape"))
    return what


# ---- JSON


def _load_json(path: Path) -> tuple[Any, bool]:
    raw = path.read_bytes()
    gz = raw[:2] == b"\x1f\x8b"
    return json.loads(gzip.decompress(raw) if gz else raw), gz


def _dump_json(path: Path, data: Any, gz: bool) -> None:
    raws: list[str] = []

    def encode(value: Any) -> Any:
        if isinstance(value, Raw):
            raws.append(value.text)
            return f"__RAW_{len(raws) - 1}__"
        if isinstance(value, dict):
            return {k: encode(v) for k, v in value.items()}
        if isinstance(value, list):
            return [encode(v) for v in value]
        return value

    text = json.dumps(encode(data), ensure_ascii=False)
    text = re.sub(r'"__RAW_(\d+)__"', lambda m: raws[int(m.group(1))], text)
    try:
        blob = text.encode("utf-8", errors="surrogateescape")
    except UnicodeEncodeError:  # a lone surrogate (an escaped "\ud800" in the source): its
        blob = text.encode("utf-8", errors="surrogatepass")  # bytes, invalid UTF-8 as written
    path.write_bytes(gzip.compress(blob, mtime=0) if gz else blob)


def _events(data: Any) -> list[Any] | None:
    if isinstance(data, list):
        return data
    if isinstance(data, dict) and isinstance(data.get("traceEvents"), list):
        return data["traceEvents"]
    return None


def _mutate_json(path: Path, chooser: Chooser, *, deep: bool) -> str:
    try:
        data, gz = _load_json(path)
    # Damaged by an earlier mutation (zlib.error: a gzip stream whose bytes were changed).
    except (ValueError, OSError, EOFError, RecursionError, zlib.error):
        return _mutate_bytes(path, chooser)
    values = JSON_VALUES + DEEP_VALUES if deep else JSON_VALUES
    events = _events(data)
    if events and chooser.below(5) != 0:
        # Events that carry the numbers: complete events, most of them.
        complete = [i for i, e in enumerate(events) if isinstance(e, dict) and e.get("ph") == "X"]
        index = pick(chooser, complete) if complete else chooser.below(len(events))
        event = events[index]
        kind = chooser.below(6)
        if kind == 0 or not isinstance(event, dict):
            del events[index]
            what = f"event {index} deleted"
        elif kind == 1:
            events.insert(index, json.loads(json.dumps(event)))
            what = f"event {index} duplicated"
        elif kind == 2 and isinstance(event, dict):
            ts, dur = event.get("ts"), event.get("dur")
            if isinstance(ts, (int, float, str)) and isinstance(dur, (int, float)):
                event["ts"], event["dur"] = _shift(ts, dur), -dur
                what = f"event {index}: end and start swapped"
            else:
                what = f"event {index}: no ts/dur to swap"
        else:
            keys = [*event, "args"] if isinstance(event, dict) else ["args"]
            key = pick(chooser, keys)
            value = pick(chooser, values)
            if key == "args" and chooser.below(2) == 0 and isinstance(event.get("args"), dict):
                args = event["args"]
                sub = pick(chooser, [*args, "Task Type"]) if args else "Task Type"
                args[sub] = value
                what = f"event {index}: args.{sub} = {_show(value)}"
            elif chooser.below(6) == 0:
                event.pop(key, None)
                what = f"event {index}: {key} removed"
            else:
                event[key] = value
                what = f"event {index}: {key} = {_show(value)}"
    elif isinstance(data, dict) and data:
        key = pick(chooser, [*data, "rank_id"])
        if isinstance(data.get(key), dict) and data[key] and chooser.below(2) == 0:
            inner = data[key]
            sub = pick(chooser, list(inner))
            inner[sub] = pick(chooser, values)
            what = f"{key}.{sub} = {_show(inner[sub])}"
        elif key == "distributedInfo" or (key == "rank_id" and chooser.below(2) == 0):
            data[key] = (
                pick(chooser, values) if key == "rank_id" else {"rank": pick(chooser, values)}
            )
            what = f"{key} = {_show(data[key])}"
        else:
            data[key] = pick(chooser, values)
            what = f"{key} = {_show(data[key])}"
    else:
        data = pick(chooser, values)
        what = f"whole document = {_show(data)}"
    _dump_json(path, data, gz)
    return what


def _shift(ts: Any, dur: float) -> Any:
    if isinstance(ts, str):
        try:
            return str(float(ts) + dur)
        except ValueError:
            return ts
    return ts + dur


def _show(value: Any) -> str:
    if isinstance(value, Raw):
        return value.text if len(value.text) < 40 else f"<nested {value.text.count('{')} deep>"
    return repr(value)[:60]


# ---- SQLite

# What the SQLite reader reads (docs/formats.md §6); mutating other tables tests nothing.
_DB_TABLES = (
    "TASK",
    "TASK",
    "TASK",
    "STRING_IDS",
    "COMPUTE_TASK_INFO",
    "COMMUNICATION_OP",
    "COMMUNICATION_TASK_INFO",
    "STEP_TIME",
    "MSTX_EVENTS",
    "RANK_DEVICE_MAP",
    "META_DATA",
    "NPU_INFO",
    "OVERLAP_ANALYSIS",
    "StepTraceTime",
)
_DB_VALUES: tuple[Any, ...] = (
    2**63 - 1,
    -(2**63),
    -1,
    0,
    1e308,
    float("inf"),
    float("-inf"),
    -1e9,
    1.5,
    "abc",
    "",
    "N/A",
    "99999999999999999999",
    b"\xff\xfe\x00",
    None,
)
_BAD_TEXT = "bad_utf8"  # CAST(x'ff80' AS TEXT): text that is not UTF-8


def _mutate_sqlite(path: Path, chooser: Chooser) -> str:
    try:
        return _mutate_sqlite_rows(path, chooser)
    except sqlite3.DatabaseError as exc:  # text into an INTEGER PRIMARY KEY, a damaged file
        return f"nothing changed ({exc})"


def _mutate_sqlite_rows(path: Path, chooser: Chooser) -> str:
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute("PRAGMA journal_mode=DELETE")
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        present = [t for t in _DB_TABLES if t in tables]
        if not present:
            return _mutate_bytes(path, chooser)
        table = pick(chooser, present)
        columns = [r[1] for r in conn.execute(f'PRAGMA table_info("{table}")')]
        rowids = [r[0] for r in conn.execute(f'SELECT rowid FROM "{table}"')]
        kind = chooser.below(8)
        if kind == 0 or not rowids or not columns:
            if chooser.below(2) == 0:
                conn.execute(f'DROP TABLE "{table}"')
                what = f"table {table} dropped"
            else:
                conn.execute(f'DELETE FROM "{table}"')
                what = f"every {table} row deleted"
        elif kind == 1:
            rowid = pick(chooser, rowids)
            conn.execute(f'DELETE FROM "{table}" WHERE rowid = ?', (rowid,))
            what = f"{table} row {rowid} deleted"
        elif kind == 2 and "startNs" in columns and "endNs" in columns:
            rowid = pick(chooser, rowids)
            conn.execute(
                f'UPDATE "{table}" SET startNs = endNs, endNs = startNs WHERE rowid = ?', (rowid,)
            )
            what = f"{table} row {rowid}: startNs and endNs swapped"
        else:
            rowid = pick(chooser, rowids)
            column = pick(chooser, columns)
            every = chooser.below(6) == 0
            where = "" if every else " WHERE rowid = ?"
            params: tuple[Any, ...] = () if every else (rowid,)
            if chooser.below(len(_DB_VALUES) + 1) == 0:
                value: Any = _BAD_TEXT
                conn.execute(
                    f'UPDATE "{table}" SET "{column}" = CAST(x\'ff80\' AS TEXT){where}', params
                )
            else:
                value = pick(chooser, _DB_VALUES)
                conn.execute(f'UPDATE "{table}" SET "{column}" = ?{where}', (value, *params))
            what = f"{table} {'every row' if every else f'row {rowid}'}: {column} = {value!r}"
        conn.commit()
    return what


# --------------------------------------------------------------------------- running


@dataclass
class Outcome:
    """What one case did: ``kind`` is ``ok``, ``clean``, ``vague`` (a clean error that does not
    name the file or names an internal column), ``traceback``, ``wrong``, ``hang`` or
    ``memory``."""

    kind: str
    detail: str = ""
    rc: int | None = None
    stderr: str = ""
    maxrss_mb: float = 0.0
    problems: list[str] = field(default_factory=list)


def _vm_size() -> int:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _child(path: Path, write_fd: int, timeout_s: int, memory: int, compare: bool) -> None:
    """Run inspect in the forked child; write a JSON report to ``write_fd``; never return."""
    status = 0
    try:
        limit = _vm_size() + memory
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        signal.signal(signal.SIGALRM, signal.SIG_DFL)
        signal.alarm(timeout_s)
        from perfgate.cli import main

        out, err = io.StringIO(), io.StringIO()
        report: dict[str, Any]
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                rc = main(["inspect", str(path), "--format", "json"])
            report = {"rc": rc, "stdout": out.getvalue(), "stderr": err.getvalue()}
            if rc == 0 and compare:
                # What inspect reads, compare and the gate must take too: its run record
                # validates, and the profile against itself passes.
                same, err = io.StringIO(), io.StringIO()
                with contextlib.redirect_stdout(same), contextlib.redirect_stderr(err):
                    rc_same = main(["compare", str(path), str(path), "--format", "json"])
                report["compare"] = {
                    "rc": rc_same,
                    "verdict": _verdict(same.getvalue()),
                    "stderr": err.getvalue(),
                }
        except MemoryError:
            report = {"memory": True, "stderr": err.getvalue()}
        except BaseException as exc:
            tb = traceback.extract_tb(exc.__traceback__)
            where = f"{Path(tb[-1].filename).name}:{tb[-1].lineno}" if tb else "?"
            report = {"exception": f"{type(exc).__name__} at {where}: {str(exc)[:200]}"}
        signal.alarm(0)
        data = json.dumps(report).encode()
        view = memoryview(data)
        while view:
            view = view[os.write(write_fd, view) :]
    except BaseException:
        status = 3
    finally:
        os._exit(status)


def run_inspect(
    path: Path, *, timeout_s: int = TIMEOUT_S, memory: int = MEMORY_LIMIT, compare: bool = True
) -> Outcome:
    """``perfgate inspect PATH --format json`` in a forked child, judged (see the module doc);
    with ``compare``, then ``perfgate compare PATH PATH`` when inspect read it."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        os.close(read_fd)
        _child(path, write_fd, timeout_s, memory, compare)
    os.close(write_fd)
    chunks = []
    with os.fdopen(read_fd, "rb") as pipe:
        while chunk := pipe.read(1 << 16):
            chunks.append(chunk)
    _, status, usage = os.wait4(pid, 0)
    maxrss_mb = usage.ru_maxrss / 1024
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        if sig == signal.SIGALRM:
            return Outcome("hang", f"still running after {timeout_s} s", maxrss_mb=maxrss_mb)
        return Outcome("memory", f"killed by signal {sig}", maxrss_mb=maxrss_mb)
    try:
        report = json.loads(b"".join(chunks))
    except ValueError:
        return Outcome("memory", "child died without a report", maxrss_mb=maxrss_mb)
    if report.get("memory"):
        return Outcome("memory", "MemoryError under the 2 GiB limit", maxrss_mb=maxrss_mb)
    if "exception" in report:
        return Outcome("traceback", report["exception"], maxrss_mb=maxrss_mb)
    outcome = judge(path, report["rc"], report["stdout"], report["stderr"])
    same = report.get("compare")
    if outcome.kind == "ok" and same and (same["rc"] != 0 or same["verdict"] != "pass"):
        outcome = Outcome(
            "wrong",
            f"compare with itself: exit {same['rc']}, verdict {same['verdict']}: "
            f"{same['stderr'][:300]}",
            same["rc"],
            same["stderr"],
        )
    outcome.maxrss_mb = maxrss_mb
    return outcome


def _verdict(stdout: str) -> str | None:
    try:
        return str(json.loads(stdout)["verdict"])
    except (ValueError, KeyError, TypeError):
        return None


# --------------------------------------------------------------------------- judging

# Canonical column names a user never sees in a file: an error naming one is vague.
_INTERNAL_COLUMN = re.compile(
    r"column '(rank|step|op_type|core|category|start_us|end_us|dur_us|computing_us|"
    r"comm_not_overlapped_us|free_us|preparing_us|count|total_us)'"
)
_RATIOS = ("utilization", "copy_ratio", "comm_ratio", "free_ratio")
_TIMES = ("step_time_us", "computing_us", "comm_not_overlapped_us", "free_us", "preparing_us")
_TOLERANCE = 1e-6
_OVERLAP_NOTE = "overlap an earlier task of"


def judge(path: Path, rc: int, stdout: str, stderr: str) -> Outcome:
    if rc == 2:
        lines = stderr.strip().splitlines()
        message = lines[0] if lines else ""
        if len(lines) != 1 or not message.startswith("perfgate: error: "):
            return Outcome("vague", f"not one error line: {stderr[:300]!r}", rc, stderr)
        if "Traceback" in stderr:
            return Outcome("traceback", message, rc, stderr)
        names = {p.name for p in mutable_files(path)} | {
            p.name for p in ([path] if path.is_file() else path.rglob("*")) if p.is_file()
        }
        if not any(name in message for name in names):
            return Outcome("vague", f"names no file: {message}", rc, stderr)
        if _INTERNAL_COLUMN.search(message):
            return Outcome("vague", f"internal column: {message}", rc, stderr)
        return Outcome("clean", message, rc, stderr)
    if rc != 0:
        return Outcome("traceback", f"exit {rc}: {stderr[:300]}", rc, stderr)
    problems = physics_problems(stdout)
    if problems:
        return Outcome("wrong", "; ".join(problems[:3]), rc, stderr, problems=problems)
    return Outcome("ok", "", rc, stderr)


def _strict(text: str) -> Any:
    def refuse(token: str) -> Any:
        raise ValueError(f"non-standard JSON token {token}")

    return json.loads(text, parse_constant=refuse)


def _bad_number(value: Any, *, ratio: bool = False) -> bool:
    if value is None:
        return False
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
        return True
    if value < -_TOLERANCE:
        return True
    return ratio and value > 1 + _TOLERANCE


def physics_problems(stdout: str) -> list[str]:
    """What is physically wrong in an ``inspect --format json`` document (empty: nothing)."""
    try:
        doc = _strict(stdout)
    except ValueError as exc:
        return [f"invalid JSON: {exc}"]
    problems: list[str] = []
    for name, stats in doc.get("metrics", {}).items():
        for key in ("median", "mean", "min", "max"):
            if _bad_number(stats.get(key), ratio=name in _RATIOS):
                problems.append(f"metrics.{name}.{key} = {stats.get(key)}")
    # A step whose only tasks are "other" (no compute, copy or comm) is idle by definition.
    has_operators = bool(doc.get("operators")) and all(
        op.get("category") != "other" for op in doc.get("operators", [])
    )
    for row in doc.get("per_step", []):
        step = row.get("step")
        for key in (*_TIMES, "copy_us"):
            if _bad_number(row.get(key)):
                problems.append(f"step {step}: {key} = {row.get(key)}")
        for key in _RATIOS:
            if _bad_number(row.get(key), ratio=True):
                problems.append(f"step {step}: {key} = {row.get(key)}")
        parts = [row.get(k) for k in _TIMES[1:]]
        total = row.get("step_time_us")
        summed = all(isinstance(p, (int, float)) for p in parts) and total is not None
        if summed and abs(sum(parts) - total) > 1e-3 + 1e-6 * abs(total):
            problems.append(f"step {step}: breakdown sums to {sum(parts)}, not {total}")
        if (
            has_operators
            and row.get("breakdown_from") == "tasks"
            and total
            and row.get("computing_us") == 0
            and row.get("comm_not_overlapped_us") == 0
            and not row.get("copy_us")
        ):
            problems.append(f"step {step}: no device work at all, reported as idle")
    # An operator's share of the step passes 100% only when its tasks overlap each other, and
    # the profile's notes must say so (ingest.assemble notes overlapping tasks of a stream).
    explained = any(_OVERLAP_NOTE in note for note in doc.get("notes", []))
    for op in doc.get("operators", []):
        for key in ("time_per_step_us", "calls_per_step"):
            if _bad_number(op.get(key)):
                problems.append(f"operator {op.get('op_type')}: {key} = {op.get(key)}")
        if _bad_number(op.get("share"), ratio=not explained):
            problems.append(f"operator {op.get('op_type')}: share = {op.get('share')}")
    return problems


# --------------------------------------------------------------------------- one case


def warm_up() -> None:
    """Import what inspect needs once, before forking, so each child starts warm."""
    import perfgate.analysis.metrics
    import perfgate.cli
    import perfgate.report.inspect
    from perfgate.ingest import readers

    readers()
    del perfgate


def run_case(
    target: Target,
    chooser: Chooser,
    root: Path,
    *,
    mutations: int = 1,
    deep: bool = False,
    compare: bool = True,
) -> tuple[Outcome, list[str]]:
    """Copy ``target`` under ``root``, mutate it, inspect it (and compare it with itself when
    ``compare``); the outcome and the mutations."""
    case = target.build(root)
    done = [mutate(case, chooser, deep=deep) for _ in range(mutations)]
    return run_inspect(case, compare=compare), done


FormatCounts = dict[str, dict[str, int]]
KINDS = ("ok", "clean", "vague", "traceback", "wrong", "hang", "memory")


def tally(counts: FormatCounts, fmt: str, outcome: Outcome) -> None:
    row = counts.setdefault(fmt, dict.fromkeys(KINDS, 0))
    row[outcome.kind] += 1


def failures(outcome: Outcome) -> bool:
    """Whether the outcome breaks the promise."""
    return outcome.kind not in ("ok", "clean")


Check = Callable[[Outcome], None]

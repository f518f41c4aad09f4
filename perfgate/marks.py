"""Step marks: the helper a benchmark script calls around each step.

```python
from perfgate.marks import step

for i in range(warmup + steps):
    with step(i, warmup=i < warmup):
        train_step()
```

When the environment variable :data:`STEP_MARKS_ENV` names a file (perfgate's msprof runner
sets it), each finished step appends one JSON line to that file::

    {"step":3,"start_us":1780676244313289.123,"end_us":1780676244321002.705,
     "warmup":false,"pid":4242,"rank":0}

Times are epoch microseconds from :func:`time.time_ns`, the clock msprof stamps its tasks
with, so a step's window can be laid over the device tasks of the same run. They are written
with exactly three decimals (the integer ns, never a float64, which would keep only 0.25 µs)
and :func:`read_step_marks` reads the numbers as decimals, converting them as the readers
convert msprof's time stamps (:class:`~perfgate.model.TimeBase`); marks written as floats by
older versions read the same way. The line is written with one ``write`` on an ``O_APPEND``
descriptor: a process killed mid-run keeps every finished step, and several ranks can share
one file.

Under ``torch_npu`` each step is also an mstx range (``step N``), so msprof and torch_npu
timelines show the steps, and the device (NPU, or CUDA when the workload initialised it) is
synchronised before the step's start and end are taken, so that the window holds the step's
device work. torch is never imported here: only a workload that imported it is synchronised.

Without the environment variable :func:`step` only runs its body.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

from perfgate.errors import ProfileError

if TYPE_CHECKING:
    import pandas as pd

    from perfgate.model import TimeBase

STEP_MARKS_ENV = "PERFGATE_STEP_MARKS"
# The note on a profile whose steps are the marked windows.
STEP_MARKS_NOTE = "steps from perfgate step marks"
MARK_COLUMNS = ("rank", "step", "start_us", "end_us", "warmup")
TRUNCATED_NOTE = "last line is incomplete (the process stopped mid-write?) and was ignored"


@contextmanager
def step(index: int, *, warmup: bool = False) -> Iterator[None]:
    """Mark the body of the ``with`` block as step ``index`` (a warm-up step if ``warmup``).

    A step whose body raises is not recorded.
    """
    path = os.environ.get(STEP_MARKS_ENV)
    if not path:
        yield
        return
    sync = _device_synchronizer()
    mstx = _mstx()
    sync()
    start_ns = time.time_ns()
    range_id = mstx.range_start(f"step {index}") if mstx is not None else None
    try:
        yield
        sync()
        end_ns = time.time_ns()
    finally:
        if range_id is not None and mstx is not None:
            mstx.range_end(range_id)
    _append(path, _mark_line(index, start_ns, end_ns, warmup=warmup))


def _mark_line(index: int, start_ns: int, end_ns: int, *, warmup: bool) -> str:
    """One step mark as a JSON line, its times exact epoch µs (three decimals from the ns)."""
    rest = json.dumps(
        {"warmup": bool(warmup), "pid": os.getpid(), "rank": _rank()}, separators=(",", ":")
    )
    times = f'"start_us":{_us_text(start_ns)},"end_us":{_us_text(end_ns)}'
    return f'{{"step":{int(index)},{times},{rest[1:]}\n'


def _us_text(ns: int) -> str:
    """Integer ns as a decimal of µs: ``1780676244313289123`` → ``1780676244313289.123``."""
    whole, rest = divmod(int(ns), 1000)
    return f"{whole}.{rest:03d}"


def _append(path: str, line_text: str) -> None:
    line = line_text.encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def _rank() -> int:
    for name in ("RANK", "LOCAL_RANK"):
        value = os.environ.get(name, "").strip()
        if value.isdigit():
            return int(value)
    return 0


def _device_synchronizer() -> Any:
    """A callable that waits for the workload's device, or does nothing.

    Only a workload that already imported torch is synchronised; CUDA only when the workload
    initialised it (synchronising would otherwise create a CUDA context for a CPU script).
    """
    torch = sys.modules.get("torch")
    if torch is None:
        return _nothing
    npu = getattr(torch, "npu", None) if "torch_npu" in sys.modules else None
    if npu is not None and _initialized(npu):
        return npu.synchronize
    cuda = getattr(torch, "cuda", None)
    if cuda is not None and _initialized(cuda):
        return cuda.synchronize
    return _nothing


def _initialized(backend: Any) -> bool:
    check = getattr(backend, "is_initialized", None) or getattr(backend, "is_available", None)
    return bool(check()) if check is not None else False


def _nothing() -> None:
    return None


def _mstx() -> Any:
    """``torch_npu.npu.mstx`` when the workload imported torch_npu and it has ranges.

    ``range_start(message, stream=None, domain='default') -> int`` and
    ``range_end(range_id, domain='default')`` (torch_npu API reference); older torch_npu
    releases have no mstx, hence the attribute checks.
    """
    torch_npu = sys.modules.get("torch_npu")
    mstx = getattr(getattr(torch_npu, "npu", None), "mstx", None)
    if mstx is None or not hasattr(mstx, "range_start") or not hasattr(mstx, "range_end"):
        return None
    return mstx


# --------------------------------------------------------------------------- reading


def read_step_marks(path: Path, *, clock: TimeBase | None = None) -> pd.DataFrame:
    """The step windows a run marked, as canonical step rows.

    Returns one row per marked step with columns ``rank`` (int64), ``step`` (Int64),
    ``start_us``, ``end_us`` (float64, µs since ``clock``'s origin: pass the time base of the
    profile the marks go with; by default the marks get their own, epoch µs becoming µs since
    :data:`~perfgate.model.EPOCH_ORIGIN_US`), ``warmup`` (bool), ``pid`` (Int64), sorted by
    rank and step. ``frame.attrs["time_origin_us"]`` is the origin, ``frame.attrs["notes"]``
    lists what the user should know (an incomplete last line, left by a process killed
    mid-write, is ignored and noted).

    Raises:
        ProfileError: the file cannot be read, a complete line is not a step mark (the
            message names the file and line), or a step appears twice for one rank.
    """
    import pandas as pd

    from perfgate.model import TimeBase

    path = Path(path)
    try:
        text = path.read_bytes().decode("utf-8")
    except OSError as exc:
        raise ProfileError(path, f"cannot be read ({exc.strerror or exc})") from exc
    except UnicodeDecodeError as exc:
        raise ProfileError(path, "is not UTF-8 text", expected="JSON lines") from exc
    lines = text.split("\n")
    # The text after the last newline is a line whose write did not finish (or nothing).
    complete, tail = lines[:-1], lines[-1]
    notes: list[str] = []
    rows: list[dict[str, Any]] = []
    for number, line in enumerate(complete, start=1):
        if line.strip():
            rows.append(_parse_mark(path, number, line))
    if tail.strip():
        try:
            rows.append(_parse_mark(path, len(complete) + 1, tail))
        except ProfileError:
            notes.append(f"{path}: {TRUNCATED_NOTE}")
    frame = pd.DataFrame(rows, columns=[*MARK_COLUMNS, "pid", "line"])
    duplicated = frame.duplicated(["rank", "step"], keep=False)
    if duplicated.any():
        first = frame.loc[duplicated].iloc[0]
        twins = frame.loc[
            duplicated & (frame["rank"] == first["rank"]) & (frame["step"] == first["step"])
        ]
        where = " and ".join(str(n) for n in twins["line"])
        raise ProfileError(
            f"{path}:{twins['line'].iloc[-1]}",
            f"step {first['step']} of rank {first['rank']} is marked twice (lines {where})",
            expected="each step index used once per rank, warm-up steps included",
        )
    clock = clock if clock is not None else TimeBase()
    # Exact decimal text → µs since the origin (one conversion for both columns: one origin).
    times = clock.from_text(pd.concat([frame["start_us"], frame["end_us"]], ignore_index=True))
    frame["start_us"] = times.iloc[: len(frame)].to_numpy()
    frame["end_us"] = times.iloc[len(frame) :].to_numpy()
    frame = frame.drop(columns="line").astype(
        {
            "rank": "int64",
            "step": "Int64",
            "start_us": "float64",
            "end_us": "float64",
            "warmup": "bool",
            "pid": "Int64",
        }
    )
    frame = frame.sort_values(["rank", "step"]).reset_index(drop=True)
    frame.attrs["notes"] = notes
    frame.attrs["time_origin_us"] = clock.origin_us
    return frame


def _parse_mark(path: Path, number: int, line: str) -> dict[str, Any]:
    where = f"{path}:{number}"
    expected = 'a JSON object {"step": int, "start_us": µs, "end_us": µs, "warmup": bool}'
    try:
        # Numbers with a fraction as Decimal: the times' text is exact, a float64 is not.
        record = json.loads(line, parse_float=Decimal)
    except json.JSONDecodeError as exc:
        raise ProfileError(where, f"not JSON ({exc.msg})", expected=expected) from exc
    if not isinstance(record, dict):
        raise ProfileError(where, "not a JSON object", expected=expected)
    step_no = record.get("step")
    if not _is_int(step_no):
        raise ProfileError(where, f"step is {step_no!r}", expected="an integer step index")
    times: dict[str, Decimal] = {}
    for key in ("start_us", "end_us"):
        value = record.get(key)
        if not isinstance(value, (int, Decimal)) or isinstance(value, bool):
            raise ProfileError(where, f"{key} is {value!r}", expected="epoch microseconds")
        times[key] = Decimal(value)
    if times["end_us"] < times["start_us"]:
        raise ProfileError(where, "end_us is before start_us", expected="end_us >= start_us")
    warmup = record.get("warmup", False)
    if not isinstance(warmup, bool):
        raise ProfileError(where, f"warmup is {warmup!r}", expected="true or false")
    rank = record.get("rank", 0)
    if not _is_int(rank) or rank < 0:
        raise ProfileError(where, f"rank is {rank!r}", expected="an integer >= 0")
    pid = record.get("pid")
    return {
        "rank": rank,
        "step": step_no,
        **{key: format(value, "f") for key, value in times.items()},  # exact text
        "warmup": warmup,
        "pid": pid if _is_int(pid) else None,
        "line": number,
    }


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


__all__ = ["STEP_MARKS_ENV", "read_step_marks", "step"]

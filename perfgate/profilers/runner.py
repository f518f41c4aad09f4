"""A quieter runner for the measured rounds, and a measure of how busy it was.

* :func:`pinned` holds torch's intra-op threads and the process's CPU affinity fixed while
  rounds run (as asv's ``--cpu-affinity`` and pyperf's tuning do): on a shared 2-vCPU runner
  torch's default threads turn a 1.5 ms step into 15 ms with 100 ms outliers, and one
  thread on one core gives back 1.5 ms. With ``keep_memory`` it also asks glibc's malloc
  to keep freed memory in the process (:func:`keep_freed_memory`).
* :class:`LoadMeter` reads ``/proc/stat`` around the rounds: how much CPU the *other*
  processes used meanwhile (and the hypervisor's steal), so a report can say "the runner was
  busy" instead of blaming the code.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import resource
import shlex
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

_PROC_STAT = "/proc/stat"
# Fields of a /proc/stat cpu line: user nice system idle iowait irq softirq steal …
_IDLE_FIELDS = (3, 4)
_STEAL_FIELD = 7


@dataclass(frozen=True)
class Pinning:
    """What the rounds ran with: torch intra-op threads, the CPUs allowed (None: as the
    process had them) and glibc's malloc (``kept``: :func:`keep_freed_memory` took effect;
    ``system``: its own thresholds)."""

    threads: int | None
    cpus: tuple[int, ...] | None
    malloc: str = "system"

    def fingerprint(self) -> dict[str, int | str]:
        out: dict[str, int | str] = {"malloc": self.malloc}
        if self.threads is not None:
            out["threads"] = self.threads
        if self.cpus is not None:
            out["cpus_pinned"] = len(self.cpus)
        return out


# glibc's mallopt parameters (malloc.h).
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
# The largest threshold glibc's own adaptation reaches (DEFAULT_MMAP_THRESHOLD_MAX, 64-bit).
_MMAP_THRESHOLD_BYTES = 32 * 2**20
_NEVER_TRIM_BYTES = 2**31 - 1
_memory_kept = False


def keep_freed_memory() -> bool:
    """Ask glibc's malloc to keep the memory a step frees for the next step: blocks up to
    32 MiB come from the heap rather than a fresh ``mmap`` each, and the heap's top is not
    given back to the kernel. Otherwise each step's large tensors may be mapped, faulted in
    page by page and unmapped again, at a cost that varies with the machine's memory
    pressure: on a shared 2-vCPU VM the medians of fresh processes of the example CNN
    spread 25-40 ms with glibc's own thresholds and 21-26 ms with these (10 processes each).

    Holds for the rest of the process (glibc cannot return to its adaptive thresholds).
    Returns whether it is in effect: False where the C library is not glibc (musl, macOS).
    """
    global _memory_kept
    if _memory_kept:
        return True
    try:
        libc = ctypes.CDLL(None)
        libc.gnu_get_libc_version  # noqa: B018 - glibc alone has it; others' mallopt differs
        mallopt = libc.mallopt
    except (OSError, AttributeError, TypeError):  # TypeError: no CDLL(None) (Windows)
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    _memory_kept = bool(mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD_BYTES)) and bool(
        mallopt(_M_TRIM_THRESHOLD, _NEVER_TRIM_BYTES)
    )
    return _memory_kept


def _cpu_times() -> dict[str, list[int]] | None:
    """The cpu lines of /proc/stat (clock ticks), or None where there is no /proc."""
    try:
        with open(_PROC_STAT, encoding="ascii") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return None
    times = {}
    for line in lines:
        if line.startswith("cpu"):
            name, *values = line.split()
            times[name] = [int(v) for v in values[:8]]
    return times


def least_busy_cpu(allowed: set[int], sample_s: float = 0.05) -> int:
    """Of ``allowed``, the CPU that was least busy over a short sample (ties: the lowest)."""
    before = _cpu_times()
    time.sleep(sample_s)
    after = _cpu_times()
    if not before or not after:
        return min(allowed)

    def busy(cpu: int) -> float:
        a, b = after.get(f"cpu{cpu}"), before.get(f"cpu{cpu}")
        if a is None or b is None:
            return float("inf")
        deltas = [x - y for x, y in zip(a, b)]
        total = sum(deltas)
        idle = sum(deltas[i] for i in _IDLE_FIELDS)
        return (total - idle) / total if total else 0.0

    return min(sorted(allowed), key=busy)


@contextlib.contextmanager
def pinned(threads: int | None, pin_cpu: bool, keep_memory: bool = False) -> Iterator[Pinning]:
    """Run the block with torch's intra-op threads set to ``threads`` (when torch is in use
    and ``threads`` is not None) and, with ``pin_cpu``, the process pinned to the least busy
    CPU it may use. Both are restored afterwards. ``keep_memory``: :func:`keep_freed_memory`
    first (not undone: see there)."""
    torch = sys.modules.get("torch")
    old_threads = torch.get_num_threads() if torch is not None else None
    can_pin = pin_cpu and hasattr(os, "sched_setaffinity")
    old_cpus = set(os.sched_getaffinity(0)) if can_pin else None
    cpus: tuple[int, ...] | None = None
    try:
        if torch is not None and threads is not None:
            torch.set_num_threads(threads)
        if can_pin and old_cpus:
            cpu = least_busy_cpu(old_cpus)
            os.sched_setaffinity(0, {cpu})
            cpus = (cpu,)
        kept = keep_freed_memory() if keep_memory else _memory_kept
        yield Pinning(
            threads=threads if torch is not None else None,
            cpus=cpus,
            malloc="kept" if kept else "system",
        )
    finally:
        if torch is not None and old_threads is not None:
            torch.set_num_threads(old_threads)
        if old_cpus is not None and cpus is not None:
            os.sched_setaffinity(0, old_cpus)


@dataclass(frozen=True)
class Load:
    """How busy the runner was over an interval, in CPUs: ``others`` is the CPU time other
    processes used divided by the wall time (1.0: one CPU busy all along), ``steal`` the
    time the hypervisor gave to other machines, ``cpus`` the CPUs the machine has."""

    others: float
    steal: float
    cpus: int
    wall_s: float

    def as_dict(self) -> dict[str, float | int]:
        return {
            "others_cpus": round(self.others, 3),
            "steal_cpus": round(self.steal, 3),
            "cpus": self.cpus,
            "wall_s": round(self.wall_s, 3),
        }


class LoadMeter:
    """Measures :class:`Load` between :meth:`start` and :meth:`stop` (None where /proc/stat
    cannot be read)."""

    def __init__(self) -> None:
        self._start: tuple[float, list[int], float] | None = None

    @staticmethod
    def _own_cpu_s() -> float:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        return usage.ru_utime + usage.ru_stime + children.ru_utime + children.ru_stime

    def start(self) -> None:
        times = _cpu_times()
        if times is None or "cpu" not in times:
            self._start = None
            return
        self._start = (time.monotonic(), times["cpu"], self._own_cpu_s())

    def stop(self) -> Load | None:
        if self._start is None:
            return None
        started, before, own_before = self._start
        times = _cpu_times()
        if times is None or "cpu" not in times:
            return None
        wall = time.monotonic() - started
        if wall <= 0:
            return None
        ticks = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
        deltas = [a - b for a, b in zip(times["cpu"], before)]
        idle = sum(deltas[i] for i in _IDLE_FIELDS)
        steal = deltas[_STEAL_FIELD] if len(deltas) > _STEAL_FIELD else 0
        busy_s = (sum(deltas) - idle - steal) / ticks
        own = self._own_cpu_s() - own_before
        cpus = sum(1 for name in times if name != "cpu")
        return Load(
            others=max(busy_s - own, 0.0) / wall,
            steal=steal / ticks / wall,
            cpus=cpus or 1,
            wall_s=wall,
        )


def measuring_command(
    pytest_args: Sequence[str], process: int, records: Path, xdist: bool
) -> list[str]:
    """Another pytest process that measures the selected benchmarks as process ``process``
    and writes its run records to ``records`` (its report beside them, in ``out``): the
    baseline's extra processes (``--perfgate-update``) and the sides of an A/B run. Under
    xdist it runs alone (``-n 0``): one process measures at a time.

    It runs without pytest's cache, so that it leaves ``.pytest_cache`` as the session that
    reports will; the options that need the cache (``--lf``, ``--sw``, …) are left out
    (:func:`without_cache_options`): pytest would refuse them. It measures the benchmarks
    ``--lf`` would leave out too, so each of those selected still gets its processes."""
    command = [
        sys.executable,
        "-m",
        "pytest",
        *without_cache_options(pytest_args),
        "--perfgate",
        f"--perfgate-process={process}",
        f"--perfgate-records={records}",
        f"--perfgate-out={records.parent / 'out'}",
        "-p",
        "no:cacheprovider",
        "-q",
    ]
    return command + (["-n", "0"] if xdist else [])


# pytest's cacheprovider options (pytest 7 to 9): without the plugin they are errors.
_CACHE_FLAGS = frozenset(
    {
        "--lf",
        "--last-failed",
        "--ff",
        "--failed-first",
        "--nf",
        "--new-first",
        "--cache-clear",
        "--sw",
        "--stepwise",
        "--sw-skip",
        "--stepwise-skip",
        "--sw-reset",
        "--stepwise-reset",
    }
)
_CACHE_VALUED = frozenset({"--lfnf", "--last-failed-no-failures"})  # take a value


def without_cache_options(args: Sequence[str]) -> list[str]:
    """``args`` without pytest's cache options (``--lf``, ``--ff``, ``--nf``, ``--sw``,
    ``--lfnf VALUE``, ``--cache-clear``, ``--cache-show``, …), which a process run with
    ``-p no:cacheprovider`` refuses."""
    kept: list[str] = []
    skip_value = False
    for arg in args:
        if skip_value:
            skip_value = False
            continue
        name = arg.split("=", 1)[0]
        if arg in _CACHE_FLAGS or name == "--cache-show":
            continue
        if name in _CACHE_VALUED:
            skip_value = "=" not in arg
            continue
        kept.append(arg)
    return kept


def measuring_env() -> dict[str, str]:
    """This process's environment for a measuring process: without GITHUB_STEP_SUMMARY, so
    that only the session that reports writes the job summary; ``PYTEST_ADDOPTS`` without
    the cache options (:func:`without_cache_options`)."""
    env = {k: v for k, v in os.environ.items() if k != "GITHUB_STEP_SUMMARY"}
    addopts = env.get("PYTEST_ADDOPTS")
    if addopts:
        with contextlib.suppress(ValueError):  # unbalanced quotes: pytest will say so
            env["PYTEST_ADDOPTS"] = shlex.join(without_cache_options(shlex.split(addopts)))
    return env

"""Measure a benchmark: time its steps, profile them, and turn what was seen into a run
record. No pytest here: the plugin's fixture calls these and decides what to do with them.
"""

from __future__ import annotations

import gc
import importlib.util
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfgate.errors import PerfgateError
from perfgate.model import Profile
from perfgate.profilers.environment import (
    MSPROF_NOT_FOUND,
    ascend_devices,
    torch_npu_import_error,
)
from perfgate.records import RunRecord, validate_run
from perfgate.rules import AdvisorSettings
from perfgate.store.keys import env_key

StepFn = Callable[[], object]
NO_PROFILER_NOTE = (
    "no profiler: step time only (utilization, copy ratio and operators need "
    "--perfgate-profiler=torch, torch_npu or msprof)"
)


class PhaseClock:
    """Seconds spent in each phase of a benchmark, for the overhead report."""

    def __init__(self) -> None:
        self.laps: dict[str, float] = {}
        self._last = time.perf_counter()

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.laps[name] = round(self.laps.get(name, 0.0) + now - self._last, 4)
        self._last = now


def resolve_in_process_profiler(choice: str) -> str:
    """``auto`` → ``torch_npu`` on an NPU, ``torch`` where torch imports, else ``none``.

    Raises:
        PerfgateError: the profiler asked for is not installed, or torch_npu is installed
            but does not import (a CANN environment not set up): measuring on the CPU then
            would land the run under another runner key, to pass without a baseline.
    """
    if choice == "msprof":
        raise PerfgateError(
            "msprof profiles a whole process: use perfgate.command([...]) for msprof "
            "benchmarks, or --perfgate-profiler=torch_npu for an in-process step loop"
        )
    if choice in ("torch", "torch_npu", "none"):
        if choice != "none" and importlib.util.find_spec(choice) is None:
            raise PerfgateError(
                f"--perfgate-profiler={choice} needs the {choice} package, which is not installed"
            )
        return choice
    if importlib.util.find_spec("torch_npu") is not None and _npu_available():
        return "torch_npu"
    if importlib.util.find_spec("torch") is not None:
        return "torch"
    return "none"


def resolve_command_profiler(choice: str, env: Mapping[str, str]) -> str:
    """``auto`` → ``msprof`` when it is on ``env``'s ``PATH``, else ``none``; in-process
    profilers cannot profile a command.

    Raises:
        PerfgateError: ``auto`` on a runner with Ascend NPUs but no msprof (the CANN
            environment not sourced): a run of step times alone would pass as incomparable
            with its msprof baseline.
    """
    if choice == "auto":
        if shutil.which("msprof", path=env.get("PATH")):
            return "msprof"
        if ascend_devices(env):
            raise PerfgateError(
                f"{MSPROF_NOT_FOUND}; this runner has Ascend NPUs, so perfgate will not "
                "measure step times alone in silence (--perfgate-profiler=none asks for that)"
            )
        return "none"
    if choice not in ("msprof", "none"):
        raise PerfgateError(
            f"--perfgate-profiler={choice} profiles steps in this process; a "
            "command is profiled from outside: use msprof (or none for step time "
            "only), or perfgate.run(step_fn) for an in-process step loop"
        )
    return choice


def _npu_available() -> bool:
    """Whether torch_npu (installed) drives an NPU here.

    Raises:
        PerfgateError: torch_npu is installed but fails to import.
    """
    try:
        import torch
        import torch_npu  # noqa: F401
    except Exception as exc:  # installed (find_spec found it) yet broken
        raise torch_npu_import_error(exc) from None
    try:
        return bool(getattr(torch, "npu").is_available())  # noqa: B009 - added by torch_npu
    except Exception:  # an NPU stack that fails to initialise is "no NPU" here
        return False


def device_synchronize() -> Callable[[], None]:
    """A function that waits for the accelerator (CUDA or NPU), when torch is in use."""
    torch = sys.modules.get("torch")
    if torch is None:
        return lambda: None
    npu = getattr(torch, "npu", None)
    if npu is not None and getattr(npu, "is_available", lambda: False)():
        return lambda: npu.synchronize()
    if torch.cuda.is_available():
        return lambda: torch.cuda.synchronize()
    return lambda: None


def accelerator() -> str | None:
    """``npu`` or ``cuda`` when torch in this process drives one, else None (the CPU)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    npu = getattr(torch, "npu", None)
    if npu is not None and getattr(npu, "is_available", lambda: False)():
        return "npu"
    return "cuda" if torch.cuda.is_available() else None


def time_steps(step: StepFn, steps: int) -> list[float]:
    """Wall time of each of ``steps`` calls of ``step``, in µs."""
    return time_steps_with_cpu(step, steps)[0]


class RunQueueClock:
    """The time this thread has waited for a CPU (runnable, not running), in ns, from Linux's
    ``/proc/thread-self/schedstat`` (its second field). On a crowded runner the wall time of a
    step grows by exactly that wait; what is left is the step's own time, sleeping and
    waiting included. ``None`` from :meth:`open` where the kernel does not say."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    @classmethod
    def open(cls) -> RunQueueClock | None:
        try:
            fd = os.open("/proc/thread-self/schedstat", os.O_RDONLY)
        except OSError:
            return None
        clock = cls(fd)
        if clock.read() is None:
            clock.close()
            return None
        return clock

    def read(self) -> int | None:
        try:
            fields = os.pread(self._fd, 128, 0).split()
            return int(fields[1])
        except (OSError, IndexError, ValueError):
            return None

    def close(self) -> None:
        os.close(self._fd)


def time_steps_with_cpu(
    step: StepFn, steps: int, queue: RunQueueClock | None = None
) -> tuple[list[float], list[float], list[float] | None]:
    """Wall time, CPU time (of this process, every thread) and, given ``queue``, the
    run-queue wait of this thread, of each of ``steps`` calls of ``step``, in µs. On a busy
    runner the wall time grows with the neighbours' share of the CPUs, by the time the step
    waited for one; wall time less that wait tells slower code from a crowded machine."""
    wall: list[float] = []
    cpu: list[float] = []
    waits: list[float] | None = [] if queue is not None else None
    for _ in range(steps):
        before = queue.read() if queue is not None else None
        start, start_cpu = time.perf_counter_ns(), time.process_time_ns()
        step()
        cpu.append((time.process_time_ns() - start_cpu) / 1e3)
        wall.append((time.perf_counter_ns() - start) / 1e3)
        if queue is not None and waits is not None:
            after = queue.read()
            if before is None or after is None:
                waits = None  # a failed read (never seen): no step has a figure
            else:
                waits.append((after - before) / 1e3)
    return wall, cpu, waits


@dataclass
class Timing:
    """Timed steps in rounds: the ``timing`` table of a run record."""

    step_time_us: list[float] = field(default_factory=list)
    rounds: list[int] = field(default_factory=list)
    process: int = 0
    cpu_time_us: list[float] | None = None  # per step; None where CPU time says nothing
    # Per step, the time the timing thread waited for a CPU; None where not measured.
    run_queue_us: list[float] | None = None

    @property
    def round_count(self) -> int:
        return len(set(self.rounds))

    def measure(self, step: StepFn, steps: int, warmup: int, rounds: int) -> None:
        """Measure ``rounds`` more rounds: each re-warms (``warmup`` steps), collects
        garbage, then times ``steps`` steps.

        What is alive before the first round is frozen (:func:`gc.freeze`) until the last
        round ends: each round's collection, and any the steps set off, then look only at
        objects made since. With torch imported a full collection scans some 260,000
        objects, 0.17-0.18 s a round here; a collection inside a timed step added that to
        the step.
        """
        first = max(self.rounds, default=-1) + 1
        gc.collect()
        gc.freeze()
        try:
            for index in range(first, first + rounds):
                self._round(step, steps, warmup, index)
        finally:
            gc.unfreeze()

    def _round(self, step: StepFn, steps: int, warmup: int, index: int) -> None:
        for _ in range(warmup):
            step()
        gc.collect()
        queue = RunQueueClock.open() if self.run_queue_us is not None else None
        try:
            wall, cpu, waited = time_steps_with_cpu(step, steps, queue)
        finally:
            if queue is not None:
                queue.close()
        self.step_time_us.extend(round(t, 3) for t in wall)
        if self.cpu_time_us is not None:
            self.cpu_time_us.extend(round(t, 3) for t in cpu)
        if self.run_queue_us is not None:
            if waited is None:
                self.run_queue_us = None  # not measured for every step: none at all
            else:
                self.run_queue_us.extend(round(t, 3) for t in waited)
        self.rounds.extend([index] * steps)

    def add_run(self, times: Sequence[float]) -> None:
        """One more round from a run of its own (a command's process)."""
        index = max(self.rounds, default=-1) + 1
        self.step_time_us.extend(round(t, 3) for t in times)
        self.rounds.extend([index] * len(times))

    def table(self, *, one_process_per_round: bool = False) -> dict[str, list[float | None]]:
        """The ``timing`` table; each round its own process for runs of a command."""
        processes = self.rounds if one_process_per_round else [self.process] * len(self.rounds)
        table: dict[str, list[float | None]] = {
            "step_time_us": list(self.step_time_us),
            "round": [float(r) for r in self.rounds],
            "process": [float(p) for p in processes],
        }
        if self.cpu_time_us is not None and len(self.cpu_time_us) == len(self.step_time_us):
            table["cpu_time_us"] = list(self.cpu_time_us)
        if self.run_queue_us is not None and len(self.run_queue_us) == len(self.step_time_us):
            table["run_queue_us"] = list(self.run_queue_us)
        return table


def profile_steps(step: StepFn, steps: int, profiler: str, out: Path) -> Profile:
    """Run ``steps`` steps under an in-process profiler (``torch`` or ``torch_npu``) and
    read what it wrote."""
    from perfgate.ingest import load_profile

    if profiler == "torch_npu":
        from perfgate.profilers.torch_npu_profiler import record_ascend_profile

        written = record_ascend_profile(step, out, steps=steps)
    else:
        from perfgate.profilers.torch_profiler import record_trace

        written = record_trace(step, out / "trace.json", steps=steps, warmup=1)
    return load_profile(written)


def runtime_fingerprint() -> dict[str, Any]:
    from perfgate.profilers.environment import fingerprint

    return fingerprint()


def env_for(fingerprint: dict[str, Any], configured: str) -> str:
    """The runner key: the configured ``baseline.env``, or one from the fingerprint."""
    return configured if configured != "auto" else env_key(fingerprint)


def record_from_profile(
    profile: Profile,
    benchmark: str,
    configured_env: str,
    advisor: AdvisorSettings | None = None,
) -> RunRecord:
    """The run record of a profile, with the runtime environment in its fingerprint and the
    advisor's hints (``advisor``: their thresholds)."""
    from perfgate.analysis.metrics import analyze
    from perfgate.analysis.record import fingerprint_from_profile, run_record

    analysis = analyze(profile)
    fingerprint = {**runtime_fingerprint(), **fingerprint_from_profile(profile, analysis)}
    if profile.metadata.get("task_basis") == "cpu":
        # On a CPU-only run the CPU is the device: another CPU model is incomparable.
        fingerprint["device"] = fingerprint.get("cpu") or "cpu"
    return run_record(
        profile,
        analysis,
        benchmark=benchmark,
        env=env_for(fingerprint, configured_env),
        fingerprint=fingerprint,
        advisor=advisor,
    )


def timing_record(
    timings: Sequence[float], benchmark: str, configured_env: str, profiler: str
) -> RunRecord:
    """The run record of step times alone (no profiler)."""
    fingerprint = {**runtime_fingerprint(), "profiler": profiler}
    return validate_run(
        {
            "benchmark": benchmark,
            "env": env_for(fingerprint, configured_env),
            "fingerprint": fingerprint,
            "parameters": {},
            "profile": {"format": None, "path": None},
            "samples": {
                "step": list(range(len(timings))),
                "step_time_us": [round(t, 3) for t in timings],
            },
            "operators": [],
            "notes": [NO_PROFILER_NOTE],
        },
        f"the record of benchmark {benchmark!r}",
    )


def marked_step_times(
    argv: list[str],
    out: Path,
    env: Mapping[str, str],
    cwd: str | Path | None,
    timeout: float | None,
) -> list[float]:
    """Run ``argv`` (which marks its steps with :func:`perfgate.marks.step`) and return the
    wall time of each step it marked, warm-up steps left out, in µs."""
    from perfgate.marks import STEP_MARKS_ENV, read_step_marks
    from perfgate.profilers.msprof import exit_text, kill_group

    # Not the msprof run's step_marks.jsonl, which the kept profile reads its steps from.
    marks = out / "timed_step_marks.jsonl"
    try:
        marks.unlink(missing_ok=True)
    except OSError as exc:
        raise PerfgateError(
            f"{out}: cannot write the step marks there ({exc.strerror or exc}); give "
            "--perfgate-out a folder this runner can write"
        ) from None
    child_env = {**env, STEP_MARKS_ENV: str(marks)}
    shown = " ".join(argv)
    try:
        # A session of its own: a timeout stops the command and everything it started
        # (DataLoader workers, torchrun's ranks), not the command alone.
        proc = subprocess.Popen(
            argv,
            cwd=cwd,
            env=child_env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
    except FileNotFoundError:
        raise PerfgateError(f"{argv[0]}: command not found") from None
    except PermissionError:
        raise PerfgateError(
            f"{argv[0]}: permission denied: make it executable (chmod +x), or run it with "
            f"its interpreter ([sys.executable, {argv[0]!r}, ...])"
        ) from None
    except OSError as exc:
        raise PerfgateError(f"cannot run {argv[0]}: {exc.strerror or exc}") from None
    try:
        _, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        raise PerfgateError(
            f"{shown} ran past its timeout of {timeout:g} s and was stopped, with every "
            "process it started"
        ) from None
    except BaseException:
        kill_group(proc)
        raise
    if proc.returncode != 0:
        tail = "\n".join(stderr.strip().splitlines()[-5:])
        raise PerfgateError(f"{shown} {exit_text(proc.returncode)}" + (f": {tail}" if tail else ""))
    if not marks.exists():
        raise PerfgateError(
            f"{shown} marked no steps: wrap each step in `with perfgate.marks.step(i):`"
        )
    steps = read_step_marks(marks)
    marks.unlink(missing_ok=True)
    if "warmup" in steps.columns:
        steps = steps.loc[~steps["warmup"].astype(bool)]
    return [float(v) for v in (steps["end_us"] - steps["start_us"])]

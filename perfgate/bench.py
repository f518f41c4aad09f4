"""The ``perfgate`` fixture's object: run a benchmark, profile it, compare it, report it."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, NoReturn

import pytest

from perfgate.analysis.compare import (
    ERROR,
    INCOMPARABLE,
    NO_BASELINE,
    REGRESSION,
    UNSTABLE,
    Comparison,
)
from perfgate.config import Settings
from perfgate.errors import ConfigError, PerfgateError
from perfgate.session import BenchmarkResult, PerfgateSession, benchmark_name
from perfgate.store.baselines import check_name

MARKER_KEYS = ("name", "thresholds", "steps", "warmup")
StepFn = Callable[[], object]


class Benchmark:
    """What a test gets from the ``perfgate`` fixture.

    * :meth:`run` — an in-process step loop: ``perfgate.run(step_fn, steps=20, warmup=3)``;
    * :meth:`command` — a script profiled from outside (msprof), which marks its steps with
      :func:`perfgate.marks.step`.
    """

    def __init__(self, session: PerfgateSession, request: pytest.FixtureRequest) -> None:
        self.session = session
        self.request = request
        node = request.node
        marker = node.get_closest_marker("perfgate")
        options: dict[str, Any] = dict(marker.kwargs) if marker else {}
        unknown = sorted(set(options) - set(MARKER_KEYS))
        if unknown:
            raise pytest.UsageError(
                f"{node.nodeid}: @pytest.mark.perfgate has no argument {unknown[0]!r} "
                f"(allowed: {', '.join(MARKER_KEYS)})"
            )
        callspec = getattr(node, "callspec", None)
        default = benchmark_name(
            node.nodeid,
            getattr(node, "originalname", node.name),
            callspec.id if callspec is not None else None,
        )
        self.name = str(options.get("name") or default)
        self.default_steps = options.get("steps")
        self.default_warmup = options.get("warmup")
        try:
            check_name(self.name, "benchmark")
            session.register_name(self.name, node.nodeid)
            self.settings = self._settings(options.get("thresholds"))
        except PerfgateError as exc:
            _fail(f"perfgate: {exc}")
        self.result: BenchmarkResult | None = None

    def _settings(self, thresholds: object) -> Settings:
        settings = self.session.settings
        if thresholds is None:
            return settings.for_benchmark(self.name)
        if not isinstance(thresholds, Mapping):
            raise ConfigError(
                f"@pytest.mark.perfgate(thresholds=...): expected a mapping like "
                f"{{'step_time': {{'max_increase': '3%'}}}}, got {thresholds!r}"
            )
        override = dict(settings.benchmarks.get(self.name, {}))
        merged = {**override.get("thresholds", {}), **thresholds}
        override["thresholds"] = merged
        marked = replace(
            settings,
            benchmarks={**settings.benchmarks, self.name: override},
            source="@pytest.mark.perfgate",
        )
        return marked.for_benchmark(self.name)

    # ------------------------------------------------------------------ in-process

    def run(
        self,
        step_fn: StepFn,
        steps: int | None = None,
        warmup: int | None = None,
        **parameters: Any,
    ) -> BenchmarkResult:
        """Run ``warmup`` steps, time ``steps`` steps unprofiled, profile ``steps`` more,
        compare with the baseline (or record it with ``--perfgate-update``).

        The gated step time comes from the unprofiled steps, so the profiler's own overhead
        does not leak into it; utilization, copy ratio and the operator table come from the
        profiled steps. ``parameters`` (batch size, shapes…) are stored with the baseline.
        """
        steps = int(steps if steps is not None else self.default_steps or 20)
        warmup = int(warmup if warmup is not None else self.default_warmup or 3)
        if steps < 1 or warmup < 0:
            pytest.fail(
                f"perfgate.run: steps must be >= 1 and warmup >= 0 "
                f"(got steps={steps}, warmup={warmup})",
                pytrace=False,
            )
        try:
            profiler = resolve_in_process_profiler(self.session.profiler)
            sync = device_synchronize()

            def step() -> None:
                step_fn()
                sync()

            clock = _PhaseClock()
            for _ in range(warmup):
                step()
            clock.lap("warmup")
            timings = self._time_steps(step, steps)
            clock.lap("timed_steps")
            record = self._profiled_record(step, steps, profiler, timings, clock)
        except PerfgateError as exc:
            _fail(f"perfgate: {self.name}: {exc}")
        record["parameters"] = {
            "steps": steps,
            "warmup": warmup,
            "profiler": profiler,
            **parameters,
        }
        return self._finish(record)

    def _time_steps(self, step: StepFn, steps: int) -> list[float]:
        """Per-step wall times in µs, through pytest-benchmark when it is active."""
        fixture = self._pytest_benchmark()
        if fixture is not None:
            fixture.pedantic(step, rounds=steps, iterations=1, warmup_rounds=0)
            data = getattr(getattr(fixture.stats, "stats", None), "data", None)
            if data is not None and len(data) == steps:
                return [float(seconds) * 1e6 for seconds in data]
        timings = []
        for _ in range(steps):
            start = time.perf_counter_ns()
            step()
            timings.append((time.perf_counter_ns() - start) / 1e3)
        return timings

    def _pytest_benchmark(self) -> Any:
        config = self.request.config
        if not config.pluginmanager.hasplugin("benchmark"):
            return None
        # pytest-benchmark switches itself off under xdist and with --benchmark-disable;
        # asking for its fixture then only earns a "fixture was not used" warning.
        benchmark_session = getattr(config, "_benchmarksession", None)
        if benchmark_session is None or getattr(benchmark_session, "disabled", True):
            return None
        fixture = self.request.getfixturevalue("benchmark")
        return None if getattr(fixture, "disabled", True) else fixture

    def _profiled_record(
        self, step: StepFn, steps: int, profiler: str, timings: list[float], clock: _PhaseClock
    ) -> dict[str, Any]:
        from perfgate.ingest import load_profile

        out = self.session.profile_dir(self.name)
        if profiler == "none":
            record = self._timing_record(timings, "none")
            record["timings_s"] = clock.laps
            return record
        if profiler == "torch_npu":
            from perfgate.profilers.torch_npu_profiler import record_ascend_profile

            written = record_ascend_profile(step, out, steps=steps)
        else:
            from perfgate.profilers.torch_profiler import record_trace

            written = record_trace(step, out / "trace.json", steps=steps, warmup=1)
        clock.lap("profiled_steps")
        record = self._record_from_profile(load_profile(written))
        clock.lap("analysis")
        # Where the time went: perfgate's own overhead is everything but the steps.
        record["timings_s"] = clock.laps
        samples = record["samples"]
        # Gate the unprofiled step time; keep the profiled one for the breakdown.
        samples["profiled_step_time_us"] = samples["step_time_us"]
        samples["step_time_us"] = [round(t, 3) for t in timings]
        return record

    def _record_from_profile(self, profile: Any) -> dict[str, Any]:
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
            benchmark=self.name,
            env=self._env(fingerprint),
            fingerprint=fingerprint,
        )

    def _timing_record(self, timings: list[float], profiler: str) -> dict[str, Any]:
        fingerprint = {**runtime_fingerprint(), "profiler": profiler}
        return {
            "benchmark": self.name,
            "env": self._env(fingerprint),
            "fingerprint": fingerprint,
            "parameters": {},
            "profile": {"format": None, "path": None},
            "samples": {
                "step": list(range(len(timings))),
                "step_time_us": [round(t, 3) for t in timings],
            },
            "operators": [],
            "notes": [
                "no profiler: step time only (utilization, copy ratio and operators "
                "need --perfgate-profiler=torch, torch_npu or msprof)"
            ],
        }

    def _env(self, fingerprint: dict[str, Any]) -> str:
        from perfgate.runs import env_key

        configured = self.session.settings.baseline.env
        return configured if configured != "auto" else env_key(fingerprint)

    # ------------------------------------------------------------------ command

    def command(
        self,
        argv: Sequence[str],
        *,
        cwd: str | Path | None = None,
        env: Mapping[str, str] | None = None,
        timeout: float | None = None,
        **parameters: Any,
    ) -> BenchmarkResult:
        """Run ``argv`` (a training or inference script that marks its steps with
        :func:`perfgate.marks.step`) under msprof — or, without msprof, time its steps."""
        argv = [str(a) for a in argv]
        child_env = {**os.environ, **(env or {})}
        profiler = self.session.profiler
        if profiler == "auto":
            profiler = "msprof" if shutil.which("msprof", path=child_env.get("PATH")) else "none"
        out = self.session.profile_dir(self.name)
        try:
            if profiler == "msprof":
                from perfgate.profilers.msprof import load_msprof_run, run_under_msprof

                run = run_under_msprof(argv, out, env=child_env, timeout=timeout)
                record = self._record_from_profile(load_msprof_run(run))
            elif profiler == "none":
                record = self._timing_record(
                    self._marked_step_times(argv, out, child_env, cwd, timeout), "none"
                )
            else:
                raise PerfgateError(
                    f"--perfgate-profiler={profiler} profiles steps in this process; a "
                    "command is profiled from outside: use msprof (or none for step time "
                    "only), or perfgate.run(step_fn) for an in-process step loop"
                )
        except PerfgateError as exc:
            _fail(f"perfgate: {self.name}: {exc}")
        record["parameters"] = {"command": argv, "profiler": profiler, **parameters}
        return self._finish(record)

    def _marked_step_times(
        self,
        argv: list[str],
        out: Path,
        env: dict[str, str],
        cwd: str | Path | None,
        timeout: float | None,
    ) -> list[float]:
        from perfgate.marks import read_step_marks

        marks = out / "step_marks.jsonl"
        marks.unlink(missing_ok=True)
        env = {**env, "PERFGATE_STEP_MARKS": str(marks)}
        done = subprocess.run(
            argv, cwd=cwd, env=env, timeout=timeout, check=False, capture_output=True, text=True
        )
        if done.returncode != 0:
            tail = "\n".join(done.stderr.strip().splitlines()[-5:])
            raise PerfgateError(f"{' '.join(argv)} exited with {done.returncode}: {tail}")
        if not marks.exists():
            raise PerfgateError(
                f"{' '.join(argv)} marked no steps: wrap each step in "
                "`with perfgate.marks.step(i):`"
            )
        steps = read_step_marks(marks)
        if "warmup" in steps.columns:
            steps = steps.loc[~steps["warmup"].astype(bool)]
        return [float(v) for v in (steps["end_us"] - steps["start_us"])]

    # ------------------------------------------------------------------ verdict

    def _finish(self, record: dict[str, Any]) -> BenchmarkResult:
        from perfgate.gate import StoreLookup, gate_against_store, record_baselines

        session = self.session
        record["commit"] = session.commit.get("commit")
        if session.update:
            try:
                [path] = record_baselines(
                    [record], self.settings, session.rootdir, allow_dirty=session.allow_dirty
                )
            except PerfgateError as exc:
                _fail(f"perfgate: {exc}")
            result = BenchmarkResult(record=record, comparison=None, recorded=path)
            session.results.append(result)
            self.result = result
            return result
        gate_started = time.perf_counter()
        try:
            [comparison] = gate_against_store(
                [record],
                self.settings,
                StoreLookup(repo_dir=session.rootdir, baseline_ref=session.baseline_ref),
            )
        except PerfgateError as exc:
            comparison = Comparison(
                benchmark=self.name,
                verdict=NO_BASELINE,
                baseline={"commit": None},
                current={"commit": record.get("commit")},
                notes=[f"no baseline lookup: {exc}"],
            )
        if "timings_s" in record:
            record["timings_s"]["gate"] = round(time.perf_counter() - gate_started, 4)
        result = BenchmarkResult(record=record, comparison=comparison)
        session.results.append(result)
        self.result = result
        failing = {REGRESSION, ERROR}
        if session.strict:
            failing |= {NO_BASELINE, INCOMPARABLE, UNSTABLE}
        if comparison.verdict in failing:
            from perfgate.report.compare import render_table

            pytest.fail(render_table([comparison]), pytrace=False)
        return result


class _PhaseClock:
    """Seconds spent in each phase of a benchmark, for the overhead report."""

    def __init__(self) -> None:
        self.laps: dict[str, float] = {}
        self._last = time.perf_counter()

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.laps[name] = round(now - self._last, 4)
        self._last = now


def _fail(message: str) -> NoReturn:
    """Fail the test with a one-line perfgate message (no chained traceback)."""
    __tracebackhide__ = True
    raise pytest.fail.Exception(message, pytrace=False) from None


def resolve_in_process_profiler(choice: str) -> str:
    """``auto`` → ``torch_npu`` on an NPU, ``torch`` where torch imports, else ``none``."""
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


def _npu_available() -> bool:
    try:
        import torch
        import torch_npu  # noqa: F401

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


def runtime_fingerprint() -> dict[str, Any]:
    from perfgate.profilers.environment import fingerprint

    return fingerprint()

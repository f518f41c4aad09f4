"""The ``perfgate`` fixture's object: run a benchmark, compare it, fail the test on a
regression. Measuring is :mod:`perfgate.profilers.measure`'s, deciding is the gate's."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NoReturn

import pytest

from perfgate.analysis.compare import Comparison
from perfgate.errors import ConfigError, PerfgateError
from perfgate.profilers import measure
from perfgate.pytest_plugin.session import PerfgateSession, benchmark_name
from perfgate.records import RunRecord
from perfgate.report.results import BenchmarkResult
from perfgate.rules import Rules
from perfgate.store.keys import check_name
from perfgate.verdict import Verdict, fails

MARKER_KEYS = ("name", "thresholds", "steps", "warmup")


class Benchmark:
    """What a test gets from the ``perfgate`` fixture.

    * :meth:`run` — an in-process step loop: ``perfgate.run(step_fn, steps=20, warmup=3)``;
    * :meth:`command` — a script profiled from outside (msprof), which marks its steps with
      :func:`perfgate.marks.step`.
    """

    def __init__(self, session: PerfgateSession, request: pytest.FixtureRequest) -> None:
        self.session = session
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
            self.rules = self._rules(options.get("thresholds"))
        except PerfgateError as exc:
            _fail(f"perfgate: {exc}")
        self.result: BenchmarkResult | None = None

    def _rules(self, thresholds: object) -> Rules:
        rules = self.session.settings.rules_for(self.name)
        if thresholds is None:
            return rules
        if not isinstance(thresholds, Mapping):
            raise ConfigError(
                f"@pytest.mark.perfgate(thresholds=...): expected a mapping like "
                f"{{'step_time': {{'max_increase': '3%'}}}}, got {thresholds!r}"
            )
        from perfgate.config import parse_rules

        return parse_rules({"thresholds": thresholds}, "@pytest.mark.perfgate", rules)

    # ------------------------------------------------------------------ in-process

    def run(
        self,
        step_fn: measure.StepFn,
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
            _fail(
                f"perfgate.run: steps must be >= 1 and warmup >= 0 "
                f"(got steps={steps}, warmup={warmup})"
            )
        try:
            profiler = measure.resolve_in_process_profiler(self.session.profiler)
            sync = measure.device_synchronize()

            def step() -> None:
                step_fn()
                sync()

            clock = measure.PhaseClock()
            for _ in range(warmup):
                step()
            clock.lap("warmup")
            timings = measure.time_steps(step, steps)
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
        return self._finish(record, clock.laps)

    def _profiled_record(
        self,
        step: measure.StepFn,
        steps: int,
        profiler: str,
        timings: list[float],
        clock: measure.PhaseClock,
    ) -> RunRecord:
        configured_env = self.session.settings.baseline.env
        if profiler == "none":
            return measure.timing_record(timings, self.name, configured_env, "none")
        profile = measure.profile_steps(step, steps, profiler, self.session.profile_dir(self.name))
        clock.lap("profiled_steps")
        record = measure.record_from_profile(profile, self.name, configured_env)
        clock.lap("analysis")
        samples = record["samples"]
        # Gate the unprofiled step time; keep the profiled one for the breakdown.
        samples["profiled_step_time_us"] = samples["step_time_us"]
        samples["step_time_us"] = [round(t, 3) for t in timings]
        return record

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
        out = self.session.profile_dir(self.name)
        configured_env = self.session.settings.baseline.env
        clock = measure.PhaseClock()
        try:
            profiler = measure.resolve_command_profiler(
                self.session.profiler, child_env.get("PATH")
            )
            if profiler == "msprof":
                from perfgate.profilers.msprof import load_msprof_run, run_under_msprof

                run = run_under_msprof(argv, out, env=child_env, timeout=timeout)
                clock.lap("profiled_steps")
                record = measure.record_from_profile(
                    load_msprof_run(run), self.name, configured_env
                )
                clock.lap("analysis")
            else:
                timings = measure.marked_step_times(argv, out, child_env, cwd, timeout)
                clock.lap("timed_steps")
                record = measure.timing_record(timings, self.name, configured_env, "none")
        except PerfgateError as exc:
            _fail(f"perfgate: {self.name}: {exc}")
        record["parameters"] = {"command": argv, "profiler": profiler, **parameters}
        return self._finish(record, clock.laps)

    # ------------------------------------------------------------------ verdict

    def _finish(self, record: RunRecord, laps: dict[str, float]) -> BenchmarkResult:
        from perfgate.gate import StoreLookup, gate_against_store, record_baselines

        session = self.session
        record["commit"] = session.commit.get("commit")
        if session.update:
            try:
                [path] = record_baselines(
                    [record], session.settings, session.rootdir, allow_dirty=session.allow_dirty
                )
            except PerfgateError as exc:
                _fail(f"perfgate: {exc}")
            return self._keep(BenchmarkResult(record=record, timings_s=laps, recorded=path))
        gate_started = time.perf_counter()
        try:
            [comparison] = gate_against_store(
                [record],
                session.settings,
                StoreLookup(repo_dir=session.rootdir, baseline_ref=session.baseline_ref),
                rules={self.name: self.rules},
            )
        except PerfgateError as exc:
            comparison = Comparison(
                benchmark=self.name,
                verdict=Verdict.NO_BASELINE,
                baseline={"commit": None},
                current={"commit": record.get("commit")},
                notes=[f"no baseline lookup: {exc}"],
            )
        laps["gate"] = round(time.perf_counter() - gate_started, 4)
        result = self._keep(BenchmarkResult(record=record, timings_s=laps, comparison=comparison))
        if fails(comparison.verdict, session.strict):
            from perfgate.report.compare import render_table

            _fail(render_table([comparison]))
        return result

    def _keep(self, result: BenchmarkResult) -> BenchmarkResult:
        self.session.results.append(result)
        self.result = result
        return result


def _fail(message: str) -> NoReturn:
    """Fail the test with a perfgate message (no chained traceback)."""
    __tracebackhide__ = True
    raise pytest.fail.Exception(message, pytrace=False) from None

"""The ``perfgate`` fixture's object: run a benchmark, compare it, fail the test on a
regression. Measuring is :mod:`perfgate.profilers.measure`'s, deciding is the gate's."""

from __future__ import annotations

import inspect
import math
import numbers
import os
import re
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, NoReturn

import pytest

from perfgate.analysis.compare import Comparison, Look
from perfgate.errors import ConfigError, PerfgateError, StoreError, clipped, shown
from perfgate.profilers import measure, runner
from perfgate.profilers.environment import check_msprof_environment
from perfgate.pytest_plugin.session import PerfgateSession, identity_of_test, item_benchmark_name
from perfgate.records import MAX_SAMPLES, RunRecord, encodes_as_utf8, merge_processes
from perfgate.report.format import terminal_text
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
        # The marker's arguments were checked at collection (plugin.marker_problem).
        options: dict[str, Any] = dict(marker.kwargs) if marker else {}
        self.name = item_benchmark_name(node)
        self.test = identity_of_test(node, session.repository_top)
        self.thresholds = options.get("thresholds")
        self.default_steps = options.get("steps")
        self.default_warmup = options.get("warmup")
        try:
            check_name(self.name, "benchmark")
            session.register_name(self.name, node.nodeid)
            self.rules = self._rules(options.get("thresholds"))
            if session.update and not session.allow_dirty and not session.measure_only:
                _check_committed(Path(str(node.path)), session.repository_top)
        except PerfgateError as exc:
            problem = f"{node.nodeid}: {exc}"
            session.keep_refusal(self.name, problem, node.nodeid)  # the summary must say it
            _fail(f"perfgate: {problem}")
        self.result: BenchmarkResult | None = None
        self.gate_failure: BaseException | None = None  # what the verdict raised, if it failed
        self._started = False
        # --perfgate-update: the baseline measured, written once its test has passed.
        self.pending_baseline: RunRecord | None = None

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
        """Measure ``step_fn`` in rounds and compare with the baseline (or, with
        ``--perfgate-update``, record it).

        A round re-warms (``warmup`` steps) and times ``steps`` steps unprofiled: the gated
        step time. ``statistics.rounds`` rounds are measured, and more (up to
        ``statistics.max_rounds``) while the comparison cannot decide. One more pass of
        ``steps`` steps runs under the profiler for utilization, copy ratio and the
        operator table. On the CPU the rounds run with one torch thread on one CPU
        (``measure:`` in perfgate.yaml). ``parameters`` (batch size, shapes…) are stored
        with the baseline.
        """
        self._once("run")
        if not callable(step_fn):
            _fail(f"perfgate.run: step_fn must be callable (one step), got {shown(step_fn)}")
        if _lazy_function(step_fn):
            # Calling it only makes a coroutine or generator: its body would never run, and
            # the steps timed would be the making of an object.
            _fail(
                f"perfgate.run: step_fn {shown(step_fn)} is an async or generator function, "
                "whose call does not run its body (expected a plain function that runs one "
                "step, e.g. lambda: asyncio.run(step()) or lambda: list(step()))"
            )
        # A marker's 0 is a value, not "unset": only None falls back to the default.
        steps = _count("steps", steps if steps is not None else self.default_steps, 20, 1)
        stats = self.rules.statistics
        # A record keeps at most MAX_SAMPLES timed steps: refused now, not after the rounds.
        most = MAX_SAMPLES // (stats.max_rounds * stats.processes)
        if steps > most:
            _fail(
                f"perfgate: steps must be at most {most:,} (a record keeps at most "
                f"{MAX_SAMPLES:,} timed steps: steps × statistics.max_rounds "
                f"{stats.max_rounds} × statistics.processes {stats.processes}), got {steps:,}"
            )
        warmup = _count("warmup", warmup if warmup is not None else self.default_warmup, 3, 0)
        extra = _json_parameters("perfgate.run", parameters, ("steps", "warmup", "profiler"))
        if self.session.ab_ref:
            return self._from_ab()
        stats = self.rules.statistics
        clock = measure.PhaseClock()
        try:
            profiler = measure.resolve_in_process_profiler(self.session.profiler)
            sync = measure.device_synchronize()

            def step() -> None:
                step_fn()
                sync()

            threads, pin_cpu, keep_memory = self._quieting()
            with runner.pinned(threads, pin_cpu, keep_memory) as pinning:
                meter = runner.LoadMeter()
                meter.start()
                timing = measure.Timing(process=self.session.process)
                if measure.accelerator() is None:
                    # On the CPU, the wall time less the wait for a CPU (or else the CPU
                    # time) witnesses a wall-time rise on a busy runner.
                    timing.cpu_time_us = []
                    timing.run_queue_us = []
                timing.measure(step, steps, warmup, stats.rounds)
                clock.lap("timed_rounds")
                record = self._profiled_record(step, steps, profiler, clock)
                self._attach(record, timing, pinning, meter.stop())
                record["parameters"] = {
                    "steps": steps,
                    "warmup": warmup,
                    "profiler": profiler,
                    **extra,
                }
                record["test"] = self.test

                def more_rounds() -> RunRecord:
                    meter.start()
                    timing.measure(step, steps, warmup, stats.rounds)
                    clock.lap("timed_rounds")
                    self._attach(record, timing, pinning, meter.stop())
                    return record

                return self._finish(record, clock.laps, more_rounds)
        except PerfgateError as exc:
            self.keep_failure(str(exc))
            _fail(f"perfgate: {self.name}: {exc}")
        except Exception as exc:
            # The benchmark's own code raised: pytest shows its traceback; the reports
            # must still say this benchmark was not measured, not leave it out.
            self.keep_failure(exception_line(exc))
            raise

    def _quieting(self) -> tuple[int | None, bool, bool]:
        """torch threads, CPU pinning and glibc's malloc for the rounds: ``threads: auto``
        is one thread on the CPU (on an accelerator the host threads feed the device),
        ``pin_cpu: auto`` is off, ``keep_memory: auto`` is on on the CPU."""
        settings = self.session.settings.measure
        on_cpu = measure.accelerator() is None
        threads = settings.threads
        pin = settings.pin_cpu
        # Pinning to one CPU is off by default: measured on a shared 2-vCPU runner it bought
        # no isolation (the neighbours crowd onto the pinned CPU) and cost up to 30%
        # (docs/verdict-quality.md). One torch thread cut the spread between processes 3–6×.
        keep = settings.keep_memory
        return (
            (1 if on_cpu else None) if threads == "auto" else int(threads),
            False if pin == "auto" else bool(pin),
            on_cpu if keep == "auto" else bool(keep),
        )

    def _profiled_record(
        self, step: measure.StepFn, steps: int, profiler: str, clock: measure.PhaseClock
    ) -> RunRecord:
        configured_env = self.session.settings.baseline.env
        if profiler == "none":
            return measure.timing_record([], self.name, configured_env, "none")
        profile = measure.profile_steps(step, steps, profiler, self.session.profile_dir(self.name))
        clock.lap("profiled_steps")
        record = measure.record_from_profile(
            profile, self.name, configured_env, self.session.settings.advisor
        )
        clock.lap("analysis")
        return record

    def _attach(
        self,
        record: RunRecord,
        timing: measure.Timing,
        pinning: runner.Pinning,
        load: runner.Load | None,
        *,
        one_process_per_round: bool = False,
    ) -> None:
        """Put the rounds, the process of the profiled pass and the runner's state into
        the record."""
        record["timing"] = timing.table(one_process_per_round=one_process_per_round)
        samples = record["samples"]
        column = next(iter(samples.values()), [])
        samples["process"] = [float(self.session.process)] * len(column)
        record.setdefault("fingerprint", {}).update(pinning.fingerprint())
        if load is not None:
            record["runner"] = {"load": load.as_dict()}  # type: ignore[typeddict-unknown-key]

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
        :func:`perfgate.marks.step`) once per round — every round a fresh process — and,
        with msprof on the runner, once more under msprof for the device metrics and the
        operator table."""
        self._once("command")
        argv, cwd, env = _command_arguments(argv, cwd, env, timeout)
        extra = _json_parameters("perfgate.command", parameters, ("command", "profiler"))
        if self.session.ab_ref:
            return self._from_ab()
        child_env = {**os.environ, **env}
        out = self.session.profile_dir(self.name)
        configured_env = self.session.settings.baseline.env
        stats = self.rules.statistics
        clock = measure.PhaseClock()
        try:
            profiler = measure.resolve_command_profiler(self.session.profiler, child_env)
            if profiler == "msprof":  # before the timed rounds, which can take minutes
                check_msprof_environment(child_env)
            pinning = runner.Pinning(threads=None, cpus=None)
            meter = runner.LoadMeter()
            meter.start()
            timing = measure.Timing(process=self.session.process)

            def run_rounds(count: int) -> None:
                for _ in range(count):
                    timing.add_run(measure.marked_step_times(argv, out, child_env, cwd, timeout))
                clock.lap("timed_rounds")

            run_rounds(stats.rounds)
            if profiler == "msprof":
                from perfgate.profilers.msprof import (
                    clear_kept_run,
                    load_msprof_run,
                    run_under_msprof,
                )

                clear_kept_run(out)
                run = run_under_msprof(argv, out, env=child_env, timeout=timeout, cwd=cwd)
                clock.lap("profiled_steps")
                record = measure.record_from_profile(
                    load_msprof_run(run), self.name, configured_env, self.session.settings.advisor
                )
                clock.lap("analysis")
            else:
                record = measure.timing_record([], self.name, configured_env, "none")
            self._attach(record, timing, pinning, meter.stop(), one_process_per_round=True)
            record["parameters"] = {"command": argv, "profiler": profiler, **extra}
            record["test"] = self.test

            def more_rounds() -> RunRecord:
                meter.start()
                run_rounds(stats.rounds)
                self._attach(record, timing, pinning, meter.stop(), one_process_per_round=True)
                return record

            return self._finish(record, clock.laps, more_rounds)
        except PerfgateError as exc:
            self.keep_failure(str(exc))
            _fail(f"perfgate: {self.name}: {exc}")
        except Exception as exc:
            self.keep_failure(exception_line(exc))
            raise

    # ------------------------------------------------------------------ verdict

    def _finish(
        self,
        record: RunRecord,
        laps: dict[str, float],
        more_rounds: Callable[[], RunRecord],
    ) -> BenchmarkResult:
        session = self.session
        record["commit"] = session.commit.get("commit")
        if session.measure_only:
            session.write_record(record)
            return self._keep(BenchmarkResult(record=record, timings_s=laps))
        if session.update:
            return self._record_baseline(record, laps, more_rounds)
        gate_started = time.perf_counter()
        comparison, look = self._gate(record, more_rounds)
        laps["gate"] = round(time.perf_counter() - gate_started, 4)
        # What judged it beyond the settings, so that `perfgate compare` of the results file
        # reaches this verdict too: the marker's thresholds and the α of the deciding look.
        judged_by: dict[str, Any] = {"thresholds": self.thresholds, "alpha_look": look.alpha}
        result = self._keep(
            BenchmarkResult(
                record=record, timings_s=laps, comparison=comparison, judged_by=judged_by
            )
        )
        if fails(comparison.verdict, session.strict):
            from perfgate.report.compare import render_table

            # The test's failure is the verdict's: told apart from any other by its identity.
            self.gate_failure = pytest.fail.Exception(
                terminal_text(render_table([comparison])), pytrace=False
            )
            raise self.gate_failure
        return result

    def _gate(
        self, record: RunRecord, more_rounds: Callable[[], RunRecord]
    ) -> tuple[Comparison, Look]:
        """Compare with the stored baseline; while inconclusive, measure more rounds and
        look again, spending α over the looks (Lan–DeMets, Pocock type). Returns the last
        comparison and the look it was."""
        from perfgate.analysis.statistics import spending_pocock
        from perfgate.gate import StoreLookup, damaged_store, gate_against_store, store_root
        from perfgate.store.baselines import stored_baselines

        session = self.session
        stats = self.rules.statistics
        started = time.perf_counter()
        spent = 0.0
        while True:
            rounds = len(set(record["timing"]["round"])) if record.get("timing") else 1
            fraction = min(rounds / stats.max_rounds, 1.0)
            out_of_time = time.perf_counter() - started > stats.max_seconds
            final = rounds + stats.rounds > stats.max_rounds or out_of_time
            cumulative = stats.alpha if final else spending_pocock(stats.alpha, fraction)
            look = Look(alpha=max(cumulative - spent, 0.0), final=final)
            spent = cumulative
            try:
                [comparison] = gate_against_store(
                    [record],
                    session.settings,
                    StoreLookup(
                        repo_dir=session.rootdir,
                        baseline_ref=session.baseline_ref,
                        strict=session.strict,
                    ),
                    rules={self.name: self.rules},
                    look=look,
                )
            except PerfgateError as exc:
                # Without git the baselines cannot be told apart by commit. Where some are
                # stored, passing as no-baseline would let every change through unjudged
                # (git refusing the checkout's owner, no git on the runner, no .git at all).
                root = store_root(session.rootdir, session.settings)
                current = {"commit": record.get("commit")}
                if isinstance(exc, StoreError):  # a damaged store is no missing baseline
                    return damaged_store(self.name, exc, current), look
                try:
                    stored = stored_baselines(root, self.name, record["env"])
                except StoreError as damage:
                    return damaged_store(self.name, damage, current), look
                unfound = Comparison(
                    benchmark=self.name,
                    verdict=Verdict.ERROR if stored else Verdict.NO_BASELINE,
                    baseline={"commit": None},
                    current=current,
                    notes=[
                        f"{stored} baseline(s) of {self.name} on {record['env']} are stored, "
                        f"but none can be looked up: {exc}"
                        if stored
                        else f"no baseline lookup: {exc}"
                    ],
                )
                return unfound, look
            if final or not comparison.inconclusive:
                return comparison, look
            record = more_rounds()

    def _record_baseline(
        self,
        record: RunRecord,
        laps: dict[str, float],
        more_rounds: Callable[[], RunRecord],
    ) -> BenchmarkResult:
        """Record this benchmark's baseline from this process and the others the session
        ran; re-measure while its rounds are too noisy, and say so if they stay that way."""
        session = self.session
        stats = self.rules.statistics
        noise = _round_noise(record)
        started = time.perf_counter()
        out_of_time = False
        while noise is not None and noise > stats.max_cv and _rounds(record) < stats.max_rounds:
            # The gate's time budget holds here too: a slow noisy model must not take
            # max_rounds / rounds times as long in each process, unbounded.
            out_of_time = time.perf_counter() - started > stats.max_seconds
            if out_of_time:
                break
            record = more_rounds()
            noise = _round_noise(record)
        merged = merge_processes(record, session.other_processes(self.name))
        notes = list(merged.get("notes", []))
        notes.extend(session.process_problems)
        if noise is not None and noise > stats.max_cv:
            budget = f" (statistics.max_seconds, {stats.max_seconds:g} s, ran out)"
            notes.append(
                f"baseline recorded with runner noise ±{noise:.1%} between rounds (more than "
                f"{stats.max_cv:.0%}) after {_rounds(record)} rounds{budget if out_of_time else ''}"
                ": comparisons with it will say unstable for small changes; record it again on "
                "a quieter runner"
            )
        merged["notes"] = notes
        # Written when the test has passed (plugin.pytest_runtest_makereport): a test that
        # fails, skips or xfails after measuring records nothing.
        self.pending_baseline = merged
        return self._keep(BenchmarkResult(record=merged, timings_s=laps))

    def write_baseline(self) -> None:
        """The test passed: write the baseline it measured. A store that refuses it makes
        the result an ``error`` and raises the :class:`PerfgateError`."""
        from perfgate.gate import record_baselines

        merged, self.pending_baseline = self.pending_baseline, None
        if merged is None or self.result is None:
            return
        session = self.session
        try:
            [path] = record_baselines(
                [merged], session.settings, session.rootdir, allow_dirty=session.allow_dirty
            )
        except PerfgateError as exc:
            # Measured, not recorded: the run is in the reports as measured, its verdict error.
            self._keep_error(f"measured, but its baseline was not recorded: {exc}")
            raise
        self.result.recorded = path

    def keep_baseline_unwritten(self, why: str) -> None:
        """The test failed after measuring: no baseline, and the reports say so."""
        if self.pending_baseline is not None:
            self.pending_baseline = None
            self._keep_error(f"measured, but its baseline was not recorded: {why}")

    def _keep_error(self, note: str) -> None:
        """This benchmark's kept run becomes an ``error`` saying ``note`` (its figures stay)."""
        if self.result is None:
            self.keep_failure(note)
            return
        record = self.result.record
        failed = Comparison(
            benchmark=self.name,
            verdict=Verdict.ERROR,
            baseline={"commit": None},
            current={"commit": record.get("commit")},
            notes=[note],
        )
        self._keep(
            BenchmarkResult(record=record, comparison=failed, timings_s=self.result.timings_s)
        )

    def _from_ab(self) -> BenchmarkResult:
        """--perfgate-ab: this benchmark was measured in the A/B pairs at session start."""
        session = self.session
        comparison = session.ab_comparisons.get(self.name)
        if comparison is None:
            _fail(f"perfgate: {self.name}: the A/B run measured no benchmark of this name")
        record = session.ab_records.get(self.name) or {
            "benchmark": self.name,
            "env": "ab",
            "samples": {},
        }
        result = self._keep(BenchmarkResult(record=record, comparison=comparison))
        if fails(comparison.verdict, session.strict):
            from perfgate.report.compare import render_table

            # The test's failure is the verdict's: told apart from any other by its identity.
            self.gate_failure = pytest.fail.Exception(
                terminal_text(render_table([comparison])), pytrace=False
            )
            raise self.gate_failure
        return result

    @property
    def measured(self) -> bool:
        """Whether the test called :meth:`run` or :meth:`command`."""
        return self._started

    def _once(self, what: str) -> None:
        """One measurement per test: a second one would be a second run of the same
        benchmark name, and the second baseline would replace the first."""
        if self._started:  # (a kept result implies it)
            self.pending_baseline = None
            kept = self.result.comparison if self.result is not None else None
            if self.result is not None and (kept is None or kept.verdict is not Verdict.ERROR):
                # Misuse is an error in every report, not the first measurement's verdict.
                self._keep_error(
                    f"perfgate.{what} was called a second time in this test; measure one "
                    "benchmark per test (parametrize the test for variants)"
                )
            _fail(
                f"perfgate.{what}: benchmark {self.name!r} was already measured in this test; "
                "measure one benchmark per test (parametrize the test for variants)"
            )
        self._started = True

    def keep_crash(self, exc: BaseException) -> None:
        """Record that this benchmark's test raised ``exc`` before it was measured, unless
        that is pytest's way of skipping the test, expecting its failure or ending the
        session (or the user's Ctrl-C): every other exception, ``SystemExit`` and
        ``pytest.fail`` included, goes into the reports as an ``error``, so that no summary
        says pass over it."""
        outcomes = (pytest.skip.Exception, pytest.xfail.Exception, pytest.exit.Exception)
        if isinstance(exc, (*outcomes, KeyboardInterrupt)):
            return
        # pytest.fail (perfgate's own usage errors too) says all in its message.
        said = isinstance(exc, (PerfgateError, pytest.fail.Exception))
        self.keep_failure(_message(exc) if said else exception_line(exc))

    def expected_to_fail(self) -> None:
        """The test failed as its ``xfail`` mark expects: like a skipped benchmark, it is in
        no report (an ``error``, or the regression that failed it, failed the job's summary
        over a green pytest)."""
        self.pending_baseline = None
        if self.result is not None:
            self.session.results.remove(self.result)
            self.result = None

    def keep_failure(self, reason: str) -> None:
        """A benchmark that could not be measured, gated or recorded goes into the reports as
        an ``error`` with the reason (once: a result already kept says more)."""
        if self.result is None:
            self._keep(unmeasured_result(self.session, self.name, reason))

    def _keep(self, result: BenchmarkResult) -> BenchmarkResult:
        # A rerun of the test (pytest-rerunfailures) measures again: the last attempt is
        # the benchmark's run, as its outcome is the test's (two runs of a name would make
        # the results file invalid).
        results = self.session.results
        results[:] = [r for r in results if r.record["benchmark"] != self.name]
        results.append(result)
        self.result = result
        return result


def _check_committed(test_file: Path, top: Path | None) -> None:
    """--perfgate-update records HEAD's baselines: a test file HEAD does not hold (new, not
    committed yet: git's dirtiness leaves untracked files out) would be recorded as HEAD's.
    ``top``: the work tree's top (none outside git, where the update is refused already)."""
    from perfgate.store.git import in_head

    if top is not None and in_head(test_file, top) is False:
        raise PerfgateError(
            f"{test_file.name} is not in HEAD (a new file, not committed): its baseline would "
            "be recorded as HEAD's; commit it first, or pass --perfgate-allow-dirty"
        )


def unmeasured_result(session: PerfgateSession, name: str, reason: str) -> BenchmarkResult:
    """The ``error`` result of benchmark ``name``, which was not measured for ``reason``."""
    comparison = Comparison(
        benchmark=name,
        verdict=Verdict.ERROR,
        baseline={"commit": None},
        current={"commit": session.commit.get("commit")},
        notes=[f"not measured: {reason}"],
    )
    configured = session.settings.baseline.env
    try:
        env = measure.env_for(measure.runtime_fingerprint(), configured)
    except Exception:  # the report of a failure must not fail in turn
        env = configured if configured != "auto" else "unknown"
    record: RunRecord = {"benchmark": name, "env": env, "samples": {}}
    return BenchmarkResult(record=record, comparison=comparison)


def _rounds(record: RunRecord) -> int:
    timing = record.get("timing")
    return len(set(timing["round"])) if timing else 1


def _round_noise(record: RunRecord) -> float | None:
    """The spread of one round's step time (relative), from the record's rounds."""
    from perfgate.analysis.compare import side_rounds
    from perfgate.analysis.statistics import difference

    rounds = side_rounds(record, "step_time_us")
    if rounds.rounds < 2:
        return None
    diff = difference(rounds, rounds)
    return math.expm1(diff.round_noise) if diff is not None else None


def exception_line(exc: BaseException) -> str:
    """``ValueError: bad shape`` on one line, at most 300 characters."""
    return clipped(f"{type(exc).__name__}: {_message(exc)}", 300)


def _message(exc: BaseException) -> str:
    """What ``exc`` says, or that it cannot say it (its ``__str__`` raised in turn)."""
    try:
        return str(exc)
    except Exception:
        return "(its message could not be shown)"


def _count(name: str, value: object, default: int, minimum: int) -> int:
    """``steps`` / ``warmup`` as a whole number of at least ``minimum`` (``None``: the
    default). A fraction is refused, not truncated: 2.9 steps is no count."""
    if value is None:
        return default
    whole = isinstance(value, numbers.Integral) and not isinstance(value, bool)
    if isinstance(value, str) and re.fullmatch(r"\s*[+-]?[0-9]+\s*", value):
        whole = True  # "20" from an ini or an environment variable
    number = int(value) if whole else None  # type: ignore[call-overload]
    if number is None or number < minimum:
        _fail(f"perfgate: {name} must be a whole number >= {minimum}, got {shown(value)}")
    return number


def _json_parameters(
    what: str, parameters: Mapping[str, Any], reserved: Sequence[str]
) -> dict[str, Any]:
    """The benchmark's parameters as the JSON they are stored as (numpy and torch scalars
    become numbers, tuples lists), or a test failure naming the first that is none; a
    parameter perfgate sets itself is refused, so a record never says what did not run."""
    taken = sorted(set(parameters) & set(reserved))
    if taken:
        _fail(
            f"{what}: parameter {taken[0]!r} is set by perfgate itself "
            f"({', '.join(reserved)}); give yours another name"
        )
    out: dict[str, Any] = {}
    for key, value in parameters.items():
        try:
            out[key] = _json_value(value)
        except ValueError as exc:
            _fail(
                f"{what}: parameter {key!r}{exc}; parameters are stored as JSON: numbers, "
                "strings, booleans, None, and lists or mappings (string keys) of them"
            )
    return out


def _json_value(value: object, depth: int = 0) -> object:
    """``value`` as plain JSON data; ``ValueError`` says where and why it is not (its
    message continues the parameter's name: ``[2]: is a set``)."""
    if depth > 20:
        raise ValueError(": is nested deeper than 20 levels")
    if value is None or isinstance(value, bool | str):
        if isinstance(value, str) and not encodes_as_utf8(value):
            raise ValueError(": holds a lone UTF-16 surrogate, which is no text")
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        number = float(value)
        if not math.isfinite(number):
            raise ValueError(f": is {number}, which JSON cannot hold")
        return number
    item = getattr(value, "item", None)  # a one-element numpy array or torch tensor
    if callable(item) and getattr(value, "ndim", None) == 0:
        return _json_value(item(), depth + 1)
    if isinstance(value, list | tuple):
        out = []
        for i, child in enumerate(value):
            try:
                out.append(_json_value(child, depth + 1))
            except ValueError as exc:
                raise ValueError(f"[{i}]{exc}") from None
        return out
    if isinstance(value, Mapping):
        mapping: dict[str, object] = {}
        for key, child in value.items():
            if not isinstance(key, str) or not encodes_as_utf8(key):
                raise ValueError(f": has the key {shown(key)}, not a string")
            try:
                mapping[key] = _json_value(child, depth + 1)
            except ValueError as exc:
                raise ValueError(f"[{key!r}]{exc}") from None
        return mapping
    raise ValueError(f": is a {type(value).__name__} ({shown(value)})")


def _command_arguments(
    argv: object, cwd: object, env: object, timeout: object
) -> tuple[list[str], Path | None, dict[str, str]]:
    """:meth:`Benchmark.command`'s arguments checked, or a test failure naming the first
    that is wrong (they met subprocess's own TypeErrors deep in the first round)."""
    what = "perfgate.command"
    if isinstance(argv, (str, bytes)):
        _fail(
            f"{what}: argv must be a list of arguments, got the string {shown(argv)} (split "
            "it: shlex.split(...), or ['bash', '-c', ...] for a shell line)"
        )
    if not isinstance(argv, Sequence) or not argv:
        _fail(f"{what}: argv must be a non-empty list of arguments, got {shown(argv)}")
    bad = [a for a in argv if not isinstance(a, (str, os.PathLike, int, float))]
    if bad:
        _fail(f"{what}: argv items must be text or paths, got {shown(bad[0])}")
    if cwd is not None:
        if not isinstance(cwd, (str, os.PathLike)):
            _fail(f"{what}: cwd must be a directory path, got {shown(cwd)}")
        if not Path(cwd).is_dir():
            _fail(f"{what}: cwd {shown(str(cwd))} is not a directory")
    if env is not None and not (
        isinstance(env, Mapping)
        and all(isinstance(k, str) and isinstance(v, str) for k, v in env.items())
    ):
        _fail(f"{what}: env must map names to text values (str), got {shown(env)}")
    if timeout is not None and not (
        isinstance(timeout, (int, float))
        and not isinstance(timeout, bool)
        and math.isfinite(timeout)
        and timeout > 0
    ):
        _fail(f"{what}: timeout must be a number of seconds > 0 (or None), got {shown(timeout)}")
    return [str(a) for a in argv], Path(cwd) if cwd is not None else None, dict(env or {})


def _fail(message: str) -> NoReturn:
    """Fail the test with a perfgate message (no chained traceback)."""
    __tracebackhide__ = True
    raise pytest.fail.Exception(terminal_text(message), pytrace=False) from None


def _lazy_function(function: object) -> bool:
    """Whether calling ``function`` makes a coroutine or generator instead of running it."""
    return (
        inspect.iscoroutinefunction(function)
        or inspect.isgeneratorfunction(function)
        or inspect.isasyncgenfunction(function)
    )

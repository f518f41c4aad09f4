"""The pytest plugin: ``pytest --perfgate``. Options and hooks only: the session object
(:mod:`perfgate.pytest_plugin.session`) and the fixture (:mod:`perfgate.pytest_plugin.fixture`)
do the work.

Registered through the ``pytest11`` entry point. Without ``--perfgate`` it is inert: tests
that use the ``perfgate`` fixture or marker are skipped with a reason, and nothing heavier
than pytest is imported.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from perfgate.options import add_config_option, add_gate_options, add_profiler_option, given
from perfgate.rules import PROFILERS

if TYPE_CHECKING:
    from perfgate.pytest_plugin.fixture import Benchmark
    from perfgate.pytest_plugin.session import PerfgateSession

SESSION_KEY: pytest.StashKey[PerfgateSession] = pytest.StashKey()
# A benchmark declared wrongly: the name its error goes into the reports under, and what is wrong.
PROBLEM_KEY: pytest.StashKey[tuple[str, str]] = pytest.StashKey()
BENCHMARK_KEY: pytest.StashKey[Benchmark] = pytest.StashKey()
# Whether the test's call phase passed: only then may a fixture's teardown still measure.
CALL_PASSED_KEY: pytest.StashKey[bool] = pytest.StashKey()
SKIP_REASON = "perfgate benchmark: run with --perfgate to measure and gate it"


def pytest_addoption(parser: pytest.Parser) -> None:
    # Help: starts lower case, says the default, no full stop (pytest's own style).
    group = parser.getgroup("perfgate", "perfgate: performance-regression gate")
    group.addoption(
        "--perfgate",
        action="store_true",
        default=False,
        help="run the perfgate benchmarks under a profiler and gate them against "
        "their baselines (without it they are skipped)",
    )
    group.addoption(
        "--perfgate-update",
        action="store_true",
        default=False,
        help="record the baselines of HEAD instead of comparing",
    )
    group.addoption(
        "--perfgate-allow-dirty",
        action="store_true",
        default=False,
        help="with --perfgate-update: record even with uncommitted changes",
    )
    add_profiler_option(group.addoption, "perfgate-")
    add_gate_options(group.addoption, "perfgate-")
    add_config_option(group.addoption, "perfgate-")
    group.addoption(
        "--perfgate-out",
        type=given("a directory"),
        default=None,
        metavar="DIR",
        help="where profiles and reports go. Default: perfgate-out",
    )
    group.addoption(
        "--perfgate-json",
        type=given("a file path"),
        default=None,
        metavar="PATH",
        help="results file. Default: <out>/results.json",
    )
    group.addoption(
        "--perfgate-md",
        type=given("a file path"),
        default=None,
        metavar="PATH",
        help="Markdown report. Default: <out>/summary.md (and appended to "
        "$GITHUB_STEP_SUMMARY when set)",
    )
    group.addoption(
        "--perfgate-html",
        type=given("a file path"),
        default=None,
        metavar="PATH",
        help="also write the report as one self-contained HTML page with plots "
        "(the same as `perfgate report RESULTS --format html -o PATH`)",
    )
    group.addoption(
        "--perfgate-ab",
        type=given("a git ref", has_default=False),
        default=None,
        metavar="REF",
        help="same-runner A/B against REF (checked out in a temporary worktree, measured "
        "in alternating processes with this tree); no baseline is read or written",
    )
    # Internal: a session that measures one more process for another (--perfgate-update).
    group.addoption("--perfgate-process", type=int, default=0, help=argparse.SUPPRESS)
    group.addoption("--perfgate-records", default=None, help=argparse.SUPPRESS)
    parser.addini(
        "perfgate_profiler",
        "default profiler for --perfgate (auto, torch, torch_npu, msprof, none)",
        default="",
    )
    parser.addini(
        "perfgate_out",
        "where profiles and reports go, from the ini file's folder (default: perfgate-out "
        "at the project root)",
        default="",
    )
    parser.addini(
        "perfgate_strict",
        "fail also on no-baseline, incomparable and unstable",
        type="bool",
        default=False,
    )
    parser.addini("perfgate_config", "perfgate.yaml or pyproject.toml", default="")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "perfgate(name=None, thresholds=None, steps=None, warmup=None): a perfgate benchmark; "
        "name (safe as a path) and thresholds override the defaults",
    )
    if not config.getoption("perfgate"):
        return
    from perfgate.errors import PerfgateError, os_error_line
    from perfgate.pytest_plugin.session import PerfgateSession

    ini_profiler = str(config.getini("perfgate_profiler") or "")
    if ini_profiler and ini_profiler not in PROFILERS:
        raise pytest.UsageError(
            f"ini option perfgate_profiler: {ini_profiler!r} is not one of {', '.join(PROFILERS)}"
        )
    try:
        session = PerfgateSession.from_config(config)
    except PerfgateError as exc:
        raise pytest.UsageError(f"perfgate: {exc}") from None
    except OSError as exc:  # a path the system refuses (a name past 255 bytes …)
        raise pytest.UsageError(f"perfgate: {os_error_line(exc)}") from None
    config.stash[SESSION_KEY] = session
    config.pluginmanager.register(FailureLog(session), "perfgate-failure-log")
    if getattr(config, "workerinput", None) is None:
        session.clear_partials()


@pytest.hookimpl(tryfirst=True)  # before xdist starts its workers
def pytest_sessionstart(session: pytest.Session) -> None:
    config = session.config
    perfgate_session = config.stash.get(SESSION_KEY, None)
    if (
        perfgate_session is None
        or perfgate_session.measure_only
        or getattr(config, "workerinput", None) is not None
        or config.option.collectonly  # --co measures nothing: no processes, no A/B pairs
    ):
        return
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    write = _shown_lines(reporter.write_line if reporter is not None else print)
    if perfgate_session.ab_ref:
        from perfgate.errors import PerfgateError

        try:
            perfgate_session.run_ab(config, write)
        except PerfgateError as exc:
            raise pytest.UsageError(f"perfgate: {exc}") from None
    elif perfgate_session.update:
        perfgate_session.spawn_processes(config, write)


@pytest.hookimpl(tryfirst=True)  # before -k and -m deselect: names clash across the suite
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    enabled = config.getoption("perfgate")
    benchmarks = [item for item in items if _is_benchmark(item)]
    if not enabled:
        for item in benchmarks:
            if _takes_fixture(item):  # a marked plain test runs as what it is
                item.add_marker(pytest.mark.skip(reason=SKIP_REASON))
        return
    from perfgate.pytest_plugin.session import case_clash, item_benchmark_name

    # Problems fail their test at setup rather than stop the session here: an xdist worker
    # that raised in collection would crash pytest, and every worker collects every test,
    # so each one finds the same clashes.
    named: dict[str, list[pytest.Item]] = {}
    problems: dict[pytest.Item, str] = {}
    for item in benchmarks:
        problem = marker_problem(item)
        if problem is not None:
            problems[item] = problem
            continue
        named.setdefault(item_benchmark_name(item), []).append(item)
    for item, problem in problems.items():
        item.stash[PROBLEM_KEY] = (_refused_name(item, set(named)), problem)
    # Names that differ only in case: the first one collected keeps its name, as in a
    # session of one process (PerfgateSession.register_name); checked here, so that every
    # xdist worker, seeing every test, refuses the same ones.
    first_of_case: dict[str, str] = {}
    for name, holders in named.items():
        first = first_of_case.setdefault(name.lower(), name)
        if first != name:
            for item in holders:
                clash = case_clash(first, named[first][0].nodeid, name, item.nodeid)
                item.stash[PROBLEM_KEY] = (name, f"perfgate: {clash}")
    for name, clashing in named.items():
        if len(clashing) < 2:
            continue
        ids = ", ".join(item.nodeid for item in clashing)
        for item in clashing:
            item.stash[PROBLEM_KEY] = (
                name,
                f"perfgate: benchmark name {name!r} is used by {len(clashing)} tests ({ids}): "
                "a name is a baseline's place, so give each its own "
                "@pytest.mark.perfgate(name=...)",
            )


def _refused_name(item: pytest.Item, taken: set[str]) -> str:
    """The name under which a wrongly declared benchmark's error is reported: the one it
    asks for where that is a name, else its test's default; the test's id where another
    benchmark has that name (a name is one run in the results)."""
    from perfgate.pytest_plugin.session import default_name
    from perfgate.store.keys import is_safe_name, safe_name

    marker = item.get_closest_marker("perfgate")
    asked = marker.kwargs.get("name") if marker is not None else None
    name = asked if isinstance(asked, str) and is_safe_name(asked) else default_name(item)
    return name if name not in taken else (safe_name(item.nodeid) or name)


def marker_problem(item: pytest.Item) -> str | None:
    """What is wrong with how ``item`` is declared as a benchmark, or None."""
    from perfgate.pytest_plugin.fixture import MARKER_KEYS
    from perfgate.store.keys import MAX_NAME, is_safe_name

    marker = item.get_closest_marker("perfgate")
    where = f"perfgate: {item.nodeid}: @pytest.mark.perfgate"
    if not _takes_fixture(item):
        return (
            f"{where} marks a test that does not take the perfgate fixture, so nothing would be "
            "measured or gated; add the `perfgate` argument and call perfgate.run(...)"
        )
    if marker is None:
        return None
    if marker.args:
        return f"{where} takes keyword arguments only ({', '.join(f'{k}=' for k in MARKER_KEYS)})"
    unknown = sorted(set(marker.kwargs) - set(MARKER_KEYS))
    if unknown:
        return f"{where} has no argument {unknown[0]!r} (allowed: {', '.join(MARKER_KEYS)})"
    name = marker.kwargs.get("name")
    if name is not None and (not isinstance(name, str) or not name):
        return f"{where}: name must be a non-empty string, got {name!r}"
    if name is not None and not is_safe_name(name):
        return (
            f"{where}: name {name!r} cannot be used in a baseline path (expected 1 to "
            f"{MAX_NAME} letters, digits, '.', '_' or '-', not starting with '.')"
        )
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    refused = item.stash.get(PROBLEM_KEY, None)
    if refused is None:
        return
    name, problem = refused
    session = item.config.stash.get(SESSION_KEY, None)
    if session is not None:  # in the reports too: a summary must not pass over it
        session.keep_refusal(name, problem.removeprefix("perfgate: "), item.nodeid)
    raise pytest.fail.Exception(_shown(problem), pytrace=False)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Any:
    benchmark = item.stash.get(BENCHMARK_KEY, None)
    try:
        result = yield  # a test that raised has said what went wrong
    except BaseException as exc:
        # ... but the reports must say it too: a crash before perfgate.run, a SystemExit or
        # pytest.fail in the step were left out of them, and the summary said pass.
        if benchmark is not None:
            benchmark.keep_crash(exc)
        raise
    if benchmark is not None and not benchmark.measured and _takes_it_itself(item):
        _measured_nothing(item, benchmark)
    return result


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Any:
    result = yield
    benchmark = item.stash.get(BENCHMARK_KEY, None)
    # A test that has the fixture through one of its own fixtures may measure in that
    # fixture's teardown (after a yield): only then is "nothing measured" known.
    if (
        benchmark is not None
        and not benchmark.measured
        and not _takes_it_itself(item)
        and item.stash.get(CALL_PASSED_KEY, False)  # a failed or skipped test said its own
    ):
        _measured_nothing(item, benchmark)
    return result


def _takes_it_itself(item: pytest.Item) -> bool:
    """Whether the test function's own arguments name the perfgate fixture."""
    info = getattr(item, "_fixtureinfo", None)
    return "perfgate" in getattr(info, "argnames", ("perfgate",))


def _measured_nothing(item: pytest.Item, benchmark: Benchmark) -> None:
    reason = (
        f"{item.nodeid} took the perfgate fixture but measured nothing, so nothing was "
        "gated; call perfgate.run(step_fn) or perfgate.command([...])"
    )
    benchmark.keep_failure(reason)
    raise pytest.fail.Exception(_shown(f"perfgate: {reason}"), pytrace=False)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    benchmark = item.stash.get(BENCHMARK_KEY, None)
    if report.when == "call":
        item.stash[CALL_PASSED_KEY] = report.passed
    if report.skipped and hasattr(report, "wasxfail"):  # failed, as an xfail mark expects
        if benchmark is not None:
            benchmark.expected_to_fail()
        session = item.config.stash.get(SESSION_KEY, None)
        if session is not None:
            session.drop_refusal(item.nodeid)
    # The verdict's failure, in whatever phase it came (a fixture may run the benchmark).
    gate_failure = benchmark.gate_failure if benchmark is not None else None
    raised = call.excinfo.value if call.excinfo is not None else None
    if report.when == "setup" and report.failed and raised is not None:
        _keep_setup_failure(item, benchmark, raised)
    if benchmark is not None and benchmark.pending_baseline is not None:
        _settle_baseline(benchmark, report)
    if report.failed and gate_failure is not None and _raised_by(raised, gate_failure):
        report.user_properties.append(GATE_FAILURE)  # xdist sends it to the controller too
    return report


def _settle_baseline(benchmark: Benchmark, report: pytest.TestReport) -> None:
    """--perfgate-update: write the baseline its test measured once the test has passed;
    none for a test that failed, skipped or xfailed after measuring (they were written)."""
    from perfgate.errors import PerfgateError

    if report.failed:
        benchmark.keep_baseline_unwritten(
            f"its test failed in {report.when} (see the test's failure); fix it and record again"
        )
    elif report.skipped:
        benchmark.expected_to_fail()  # skipped or xfailed: in no report, as any skipped test
    elif report.when != "setup":  # passed its call (or a teardown that measured)
        try:
            benchmark.write_baseline()
        except PerfgateError as exc:
            report.outcome = "failed"
            report.longrepr = _shown(f"perfgate: {exc}")


def _keep_setup_failure(
    item: pytest.Item, benchmark: Benchmark | None, raised: BaseException
) -> None:
    """A benchmark whose fixtures failed (a checkpoint that would not load, a scope mismatch)
    goes into the reports as an ``error``, as a crash in its test does: it was in none."""
    session = item.config.stash.get(SESSION_KEY, None)
    if session is None or not _takes_fixture(item) or PROBLEM_KEY in item.stash:
        return  # not a benchmark, or refused already with its own reason
    from perfgate.pytest_plugin.fixture import exception_line
    from perfgate.pytest_plugin.session import item_benchmark_name

    reason = f"{item.nodeid} failed in setup: {exception_line(raised)}"
    if benchmark is not None:  # its own fixture was set up before another one failed
        benchmark.keep_failure(reason)
    else:
        session.keep_refusal(item_benchmark_name(item), reason, item.nodeid)


def _raised_by(raised: BaseException | None, cause: BaseException) -> bool:
    """Whether ``raised`` is ``cause``, or was raised for it (``raise … from`` it, or while
    handling it): a test that wraps the verdict's failure failed for the verdict."""
    seen: set[int] = set()
    while raised is not None and id(raised) not in seen:
        if raised is cause:
            return True
        seen.add(id(raised))
        raised = raised.__cause__ or raised.__context__
    return False


# What marks a test report whose failure is a benchmark's verdict (pytest_runtest_makereport).
GATE_FAILURE = ("perfgate", "failed by its verdict")


class FailureLog:
    """Keeps the tests pytest failed for other reasons than a benchmark's verdict in the
    session (registered as a plugin: report hooks are given no config). Under xdist the
    controller sees every worker's reports."""

    def __init__(self, session: PerfgateSession) -> None:
        self.session = session

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.failed and GATE_FAILURE not in report.user_properties:
            self._keep(report.nodeid, report.when)

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            self._keep(report.nodeid or "(collection)", "collect")

    def _keep(self, test: str, when: str) -> None:
        self.session.failed_elsewhere.append({"test": test, "when": when})


def _is_benchmark(item: pytest.Item) -> bool:
    """A test that takes the fixture, or that its own marker declares one (a mistake when
    it does not take the fixture: :func:`marker_problem`). A module's or class's
    ``pytestmark`` sets the defaults of the benchmarks in it and leaves its plain tests be."""
    own = getattr(item, "own_markers", ())
    return _takes_fixture(item) or any(mark.name == "perfgate" for mark in own)


def _takes_fixture(item: pytest.Item) -> bool:
    return "perfgate" in getattr(item, "fixturenames", ())


@pytest.fixture
def perfgate(request: pytest.FixtureRequest) -> Benchmark:
    """A perfgate benchmark: ``perfgate.run(step_fn, steps=20, warmup=3)`` for an in-process
    step loop, or ``perfgate.command([...])`` for a script profiled from outside (msprof).

    The result is compared with the baseline of this benchmark; a regression fails the test
    with the report.
    """
    session = request.config.stash.get(SESSION_KEY, None)
    if session is None:
        pytest.skip(SKIP_REASON)
    from perfgate.pytest_plugin.fixture import Benchmark

    benchmark = Benchmark(session, request)
    request.node.stash[BENCHMARK_KEY] = benchmark
    return benchmark


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    perfgate_session = config.stash.get(SESSION_KEY, None)
    if perfgate_session is None:
        return
    from perfgate.errors import PerfgateError

    worker = getattr(config, "workerinput", None)
    perfgate_session.interrupted = exitstatus == pytest.ExitCode.INTERRUPTED
    try:
        if worker is not None:
            # An xdist worker has no terminal: hand the results to the controller.
            perfgate_session.write_partial(str(worker["workerid"]))
        else:
            perfgate_session.write_reports()
            html = perfgate_session.html_path
            if html and perfgate_session.results and not perfgate_session.measure_only:
                write_html(perfgate_session.json_path, html)
    except PerfgateError as exc:
        perfgate_session.report_error = str(exc)
        # A gate whose results were not written has not gated: never a green build.
        session.exitstatus = pytest.ExitCode.INTERNAL_ERROR


def write_html(results: Path, target: Path) -> None:
    """The HTML report of the results file the session just wrote."""
    from perfgate.errors import PerfgateError
    from perfgate.report.html import render_results_html
    from perfgate.sides import load_results_file
    from perfgate.store.atomic import atomic_write

    page = render_results_html(load_results_file(results))
    try:
        atomic_write(target, page.encode("utf-8"))
    except OSError as exc:
        raise PerfgateError(
            f"{target}: cannot write the HTML report ({exc.strerror or exc})"
        ) from None


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    session = config.stash.get(SESSION_KEY, None)
    # xdist workers hand their results over in pytest_sessionfinish; the controller reports.
    if session is None or getattr(config, "workerinput", None) is not None:
        return
    if session.results or session.report_error:
        terminalreporter.section("perfgate")
    write = _shown_lines(terminalreporter.write_line)
    session.report(write)
    html = session.html_path
    if html and session.results and not session.report_error:
        write(f"html:    {html}")
    if session.report_error:
        write(f"perfgate: error: {session.report_error}", red=True)


def _shown_lines(write: Callable[..., Any]) -> Callable[..., None]:
    """``write`` (a terminal reporter's ``write_line``) with names from profiles, paths and
    notes shown as text: no escape sequence or workflow command of theirs reaches the
    terminal or the CI log (:func:`~perfgate.report.format.terminal_text`)."""

    def shown(line: str, **markup: Any) -> None:
        write(_shown(line), **markup)

    return shown


def _shown(text: str) -> str:
    """:func:`~perfgate.report.format.terminal_text`, imported when a perfgate session
    prints (without --perfgate the plugin imports nothing heavier than pytest)."""
    from perfgate.report.format import terminal_text

    return terminal_text(text)

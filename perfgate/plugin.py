"""The pytest plugin: ``pytest --perfgate``. A thin shell over :mod:`perfgate.session`.

Registered through the ``pytest11`` entry point. Without ``--perfgate`` it is inert: tests
that use the ``perfgate`` fixture or marker are skipped with a reason, and nothing heavier
than pytest is imported.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from perfgate.bench import Benchmark
    from perfgate.session import PerfgateSession

PROFILERS = ("auto", "torch", "torch_npu", "msprof", "none")
SESSION_KEY: pytest.StashKey[PerfgateSession] = pytest.StashKey()
SKIP_REASON = "perfgate benchmark: run with --perfgate to measure and gate it"


def _profiler(value: str) -> str:
    if value not in PROFILERS:
        raise argparse.ArgumentTypeError(
            f"{value!r} is not a profiler perfgate knows (choose from {', '.join(PROFILERS)})"
        )
    return value


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
    group.addoption(
        "--perfgate-profiler",
        type=_profiler,
        default=None,
        metavar="NAME",
        help=f"profiler: {' | '.join(PROFILERS)}. Default: the config's "
        "profiler, else auto (torch_npu on an NPU, torch elsewhere)",
    )
    group.addoption(
        "--perfgate-baseline-ref",
        default=None,
        metavar="REF",
        help="look baselines up from REF instead of the merge-base with the baseline branch",
    )
    group.addoption(
        "--perfgate-config",
        default=None,
        metavar="FILE",
        help="perfgate.yaml or pyproject.toml. Default: the one at the rootdir",
    )
    group.addoption(
        "--perfgate-strict",
        action="store_true",
        default=None,
        help="fail also on no-baseline, incomparable and unstable",
    )
    group.addoption(
        "--perfgate-out",
        default=None,
        metavar="DIR",
        help="where profiles and reports go. Default: perfgate-out",
    )
    group.addoption(
        "--perfgate-json",
        default=None,
        metavar="PATH",
        help="results file. Default: <out>/results.json",
    )
    group.addoption(
        "--perfgate-md",
        default=None,
        metavar="PATH",
        help="Markdown report. Default: <out>/summary.md (and appended to "
        "$GITHUB_STEP_SUMMARY when set)",
    )
    parser.addini(
        "perfgate_profiler",
        "default profiler for --perfgate (auto, torch, torch_npu, msprof, none)",
        default="",
    )
    parser.addini("perfgate_out", "where profiles and reports go", default="perfgate-out")
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
    from perfgate.errors import PerfgateError
    from perfgate.session import PerfgateSession

    ini_profiler = str(config.getini("perfgate_profiler") or "")
    if ini_profiler and ini_profiler not in PROFILERS:
        raise pytest.UsageError(
            f"ini option perfgate_profiler: {ini_profiler!r} is not one of {', '.join(PROFILERS)}"
        )
    try:
        session = PerfgateSession.from_config(config)
    except PerfgateError as exc:
        raise pytest.UsageError(f"perfgate: {exc}") from None
    config.stash[SESSION_KEY] = session
    if getattr(config, "workerinput", None) is None:
        session.clear_partials()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    enabled = config.getoption("perfgate")
    for item in items:
        if not _is_benchmark(item):
            continue
        if not enabled:
            item.add_marker(pytest.mark.skip(reason=SKIP_REASON))
            continue
        marker = item.get_closest_marker("perfgate")
        if marker is not None and marker.args:
            raise pytest.UsageError(
                f"{item.nodeid}: @pytest.mark.perfgate takes keyword arguments only "
                "(name=, thresholds=, steps=, warmup=)"
            )


def _is_benchmark(item: pytest.Item) -> bool:
    names = getattr(item, "fixturenames", ())
    return "perfgate" in names or item.get_closest_marker("perfgate") is not None


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
    from perfgate.bench import Benchmark

    return Benchmark(session, request)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    perfgate_session = config.stash.get(SESSION_KEY, None)
    worker = getattr(config, "workerinput", None)
    if perfgate_session is not None and worker is not None:
        # An xdist worker has no terminal: hand the results to the controller.
        perfgate_session.write_partial(str(worker["workerid"]))


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    session = config.stash.get(SESSION_KEY, None)
    # xdist workers hand their results over in pytest_sessionfinish; the controller reports.
    if session is not None and getattr(config, "workerinput", None) is None:
        session.finish(terminalreporter)

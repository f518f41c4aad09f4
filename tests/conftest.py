"""What many test files share: pytester, throwaway git repositories built one way, and the
``--fuzz`` option (the mutation fuzzing of the readers at length, tests/test_fuzz_readers.py)."""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import os
import pkgutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import git
import pytest

pytest_plugins = ["pytester"]

# Most of the suite's time is Python processes starting: pytester's and the plugin's own,
# `perfgate ab`'s, the Action's steps. With PYTHONDONTWRITEBYTECODE (set on some CI images)
# each of them compiled perfgate again (1-1.5 s of a 6-8 s `pytest --perfgate` run on a
# 2-vCPU runner). One bytecode cache outside every repository under test keeps their trees
# clean and compiles each file once.
os.environ["PYTHONPYCACHEPREFIX"] = os.path.join(
    tempfile.gettempdir(), f"perfgate-tests-pycache-{getattr(os, 'getuid', lambda: 0)()}"
)
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

# An identity and no user or system config: commits (and their shas, with fixed dates) do
# not depend on the machine.
GIT_ENV = {
    "GIT_AUTHOR_NAME": "Perf Gate",
    "GIT_AUTHOR_EMAIL": "perfgate@example.invalid",
    "GIT_COMMITTER_NAME": "Perf Gate",
    "GIT_COMMITTER_EMAIL": "perfgate@example.invalid",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
}


class GitRepo:
    """A git repository on branch ``main`` for a test: write files, commit them."""

    def __init__(self, path: Path) -> None:
        path.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.repo = git.Repo.init(path)
        # Whatever init.defaultBranch says on this machine, the branch is main.
        self.repo.git.symbolic_ref("HEAD", "refs/heads/main")
        with self.repo.config_writer() as config:
            config.set_value("user", "name", GIT_ENV["GIT_AUTHOR_NAME"])
            config.set_value("user", "email", GIT_ENV["GIT_AUTHOR_EMAIL"])

    def write(self, name: str, text: str) -> Path:
        target = self.path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        return target

    def commit(self, message: str, *paths: str) -> str:
        """Commit ``paths`` (all changes when none are named); the new commit's sha."""
        if paths:
            self.repo.index.add(list(paths))
        else:
            self.repo.git.add("-A")
        return str(self.repo.index.commit(message).hexsha)

    @property
    def head(self) -> str:
        return str(self.repo.head.commit.hexsha)


@pytest.fixture
def git_repo(tmp_path: Path) -> Iterator[GitRepo]:
    """An empty git repository on ``main`` in ``tmp_path/repo``."""
    repo = GitRepo(tmp_path / "repo")
    yield repo
    repo.repo.close()


@pytest.fixture
def needs_torch() -> None:
    """Skip a test that runs a torch benchmark where torch is not installed.

    Looked up, not imported: pytester restores ``sys.modules`` after each test, and torch
    imported inside one test and imported again in the next crashes the process (a
    segmentation fault while collecting garbage, seen running tests/test_plugin.py alone).
    """
    if importlib.util.find_spec("torch") is None:
        pytest.skip("the benchmark under test runs torch")


# What a `pytest --perfgate` run imports that cannot be imported twice in one process (C
# extensions: numpy's, torch's), and perfgate itself.
_RUN_IMPORTS = ("numpy", "pandas", "scipy.special", "scipy.stats", "pyarrow.csv", "orjson", "torch")
_loaded_for_runs = False


@pytest.fixture
def in_process_runs() -> None:
    """Import, once in this process, what pytester's in-process runs of the plugin import
    (a module of such tests: ``pytestmark = pytest.mark.usefixtures("in_process_runs")``).

    ``pytester.runpytest`` runs pytest in this process (a fresh Python per run cost 5 s of
    imports: pandas, scipy, torch), and when the run ends it drops the modules the run
    imported; torch imported again by the next run crashes the process. Modules loaded
    before the run are kept: loaded here, each run costs its own work. A test that needs a
    process of its own (what gets imported, an interrupt, a setting read at import) uses
    ``runpytest_subprocess``.
    """
    global _loaded_for_runs
    if _loaded_for_runs:
        return
    for name in _RUN_IMPORTS:
        with contextlib.suppress(ImportError):  # optional extras (pyarrow, orjson, torch)
            importlib.import_module(name)
    import perfgate

    for module in pkgutil.walk_packages(perfgate.__path__, "perfgate."):
        if not module.name.endswith("__main__"):  # the CLI itself, which would run
            importlib.import_module(module.name)
    _loaded_for_runs = True


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--fuzz",
        action="store",
        type=int,
        nargs="?",
        const=1000,
        default=None,
        metavar="CASES",
        help="fuzz every reader with CASES random mutations (default 1000) instead of the "
        "CI suite's fixed cases (tests/test_fuzz_readers.py)",
    )


# The files whose tests start Python processes (pytester, `perfgate ab`, the Action's
# steps, long simulations): most of the suite's time, in tests of 10-70 s. They run first,
# and pytest-xdist's workers steal pending tests from each other (below), so that a run does
# not end with one worker on a queue of long tests while the other has nothing left to do.
LONG_TEST_FILES = (
    "test_plugin.py",
    "test_hardening.py",
    "test_ab.py",
    "test_terminal.py",
    "test_plugin_msprof.py",
    "test_verdict_quality.py",
    "test_action.py",
    "test_fuzz_readers.py",
    "test_report_html.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        name = item.path.name
        return LONG_TEST_FILES.index(name) if name in LONG_TEST_FILES else len(LONG_TEST_FILES)

    items.sort(key=rank)  # stable: each file's own order is kept


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``-n 2``: work stealing instead of xdist's default ``load``, which deals out the first
    quarter of the tests (here: all the long ones) round-robin up front; one worker then ran
    long tests for minutes after the other had finished. A ``--dist`` asked for is kept."""
    if config.getvalue("dist") != "load":
        return None
    from xdist.scheduler import WorkStealingScheduling  # type: ignore[import-untyped]

    return WorkStealingScheduling(config, log)

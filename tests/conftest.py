"""What many test files share: pytester, throwaway git repositories built one way, and the
``--fuzz`` option (the mutation fuzzing of the readers at length, tests/test_fuzz_readers.py)."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator
from pathlib import Path

import git
import pytest

pytest_plugins = ["pytester"]

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

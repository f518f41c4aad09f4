"""Helpers the GitHub Action (``action.yml``) runs as ``python -m perfgate.action.<module>``.

Each module reads the action's inputs from ``PERFGATE_*`` environment variables (the action
maps every input through ``env:``) and the runner's own ``GITHUB_*`` variables, so it runs
the same way on a runner and in a test. Shared here: reading inputs, writing step outputs and
the job summary, the event payload, workflow-command annotations, and the overall verdict.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import traceback
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from perfgate.errors import PerfgateError
from perfgate.verdict import Verdict, fails, parse_verdict

# The overall verdicts the action reports (its `verdict` output).
PASS = Verdict.PASS.value
REGRESSION = Verdict.REGRESSION.value
ERROR = Verdict.ERROR.value

# pytest exit codes (the perfgate plugin's contract): 0 all passed, 1 a benchmark regressed.
PYTEST_OK = 0
PYTEST_FAILED = 1
PYTEST_EXIT_MEANINGS = {
    2: "interrupted or usage error",
    3: "internal error",
    4: "usage error",
    5: "no tests were collected",
}

_TRUE = {"true", "yes", "on", "1"}
_FALSE = {"false", "no", "off", "0"}


class ActionError(Exception):
    """An input or environment the action cannot work with: one line that says what to fix."""


def env_input(name: str, default: str = "", environ: Mapping[str, str] | None = None) -> str:
    """The value of environment variable ``name``, stripped; ``default`` when unset or empty."""
    value = (environ if environ is not None else os.environ).get(name, "").strip()
    return value or default


def flag_input(name: str, default: bool, environ: Mapping[str, str] | None = None) -> bool:
    """A boolean input: true/false (also yes/no, on/off, 1/0)."""
    value = env_input(name, "", environ).lower()
    if not value:
        return default
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ActionError(f"{name}={value!r}: expected true or false")


def choice_input(
    name: str, choices: Iterable[str], default: str, environ: Mapping[str, str] | None = None
) -> str:
    """An input that must be one of ``choices``."""
    allowed = list(choices)
    value = env_input(name, default, environ).lower()
    if value not in allowed:
        raise ActionError(f"{name}={value!r}: expected one of {', '.join(allowed)}")
    return value


def set_output(name: str, value: str) -> None:
    """Set step output ``name`` (appended to ``$GITHUB_OUTPUT``; printed when that is unset)."""
    path = os.environ.get("GITHUB_OUTPUT")
    if not path:
        print(f"output {name}={value}")
        return
    if "\n" in value:
        delimiter = f"perfgate_{uuid.uuid4().hex}"
        _append("GITHUB_OUTPUT", path, f"{name}<<{delimiter}\n{value}\n{delimiter}\n")
    else:
        _append("GITHUB_OUTPUT", path, f"{name}={value}\n")


def _append(variable: str, path: str, text: str) -> None:
    """Append ``text`` to the runner's file that ``$variable`` names; one
    :class:`ActionError` line where it cannot be (a directory, a missing folder)."""
    try:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(text)
    except OSError as exc:
        raise ActionError(
            f"{variable}={path}: cannot append to it ({exc.strerror or exc}); the runner sets "
            "it to a file in a directory that exists"
        ) from None


def write_text(path: Path, text: str) -> None:
    """Write a report atomically (a reader sees the old file or the new one); a failure is
    one :class:`ActionError` line, and nothing is left half-written."""
    from perfgate.store.atomic import atomic_write

    try:
        atomic_write(path, text.encode("utf-8"))
    except OSError as exc:
        message = f"{path}: cannot write ({exc.strerror or exc}); nothing was written"
        raise ActionError(message) from None


def append_summary(
    markdown: str, whole_at: str = "the whole report is summary.md in the perfgate artifact"
) -> None:
    """Append Markdown to the job summary (``$GITHUB_STEP_SUMMARY``), when there is one, cut
    to the room GitHub allows (``whole_at``: where the whole report is)."""
    from perfgate.report.markdown import job_summary_part

    path = os.environ.get("GITHUB_STEP_SUMMARY")
    if not path:
        return
    markdown = job_summary_part(path, markdown, whole_at)
    _append("GITHUB_STEP_SUMMARY", path, markdown if markdown.endswith("\n") else markdown + "\n")


def annotate(level: str, message: str) -> None:
    """A workflow command (``::error::``, ``::warning::``, ``::notice::``) on stdout."""
    escaped = message.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    print(f"::{level}::{escaped}", flush=True)


def load_event() -> dict[str, Any]:
    """The webhook payload of the event that started the workflow (``$GITHUB_EVENT_PATH``)."""
    path = os.environ.get("GITHUB_EVENT_PATH")
    if not path or not Path(path).is_file():
        return {}
    try:
        event = json.loads(Path(path).read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ActionError(f"GITHUB_EVENT_PATH={path}: not valid JSON ({exc.msg})") from None
    except UnicodeDecodeError:
        raise ActionError(f"GITHUB_EVENT_PATH={path}: not valid JSON (not UTF-8 text)") from None
    except OSError as exc:
        raise ActionError(f"GITHUB_EVENT_PATH={path}: cannot be read ({exc.strerror})") from None
    except RecursionError:
        raise ActionError(
            f"GITHUB_EVENT_PATH={path}: JSON nested too deep to be a webhook payload"
        ) from None
    return event if isinstance(event, dict) else {}


def git_output(cwd: Path, *args: str) -> str | None:
    """The stripped output of a git command in ``cwd``; None when it fails (not a checkout,
    no git)."""
    try:
        done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=False)
    except OSError:
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def is_shallow_checkout(cwd: Path) -> bool:
    """Whether ``cwd`` is in a shallow clone (``actions/checkout`` without ``fetch-depth: 0``)."""
    return git_output(cwd, "rev-parse", "--is-shallow-repository") == "true"


def remember_default_branch(cwd: Path, event: Mapping[str, Any]) -> None:
    """Point ``origin/HEAD`` at the repository's default branch named in the event payload,
    when the checkout has no ``origin/HEAD`` (``actions/checkout`` sets none; ``git clone``
    does). perfgate's baseline branch defaults to ``origin/HEAD``, so the plugin, the CLI
    and the action's own steps then agree on it, whatever the branch is called."""
    repository = event.get("repository")
    name = repository.get("default_branch") if isinstance(repository, dict) else None
    if not isinstance(name, str) or not name:
        return
    if git_output(cwd, "symbolic-ref", "--quiet", "refs/remotes/origin/HEAD"):
        return  # the clone's own: keep it
    target = f"refs/remotes/origin/{name}"
    if git_output(cwd, "remote", "get-url", "origin") is None:
        return
    if git_output(cwd, "check-ref-format", target) is None:
        return
    git_output(cwd, "symbolic-ref", "refs/remotes/origin/HEAD", target)


def pull_request_number(event: Mapping[str, Any]) -> int | None:
    """The pull request's number for a ``pull_request`` (or ``_target``) event, else None."""
    pull = event.get("pull_request")
    if isinstance(pull, dict) and isinstance(pull.get("number"), int):
        return int(pull["number"])
    return None


def overall_verdict(
    runs: Iterable[Mapping[str, Any]] | None,
    exit_code: int,
    *,
    strict: bool = False,
    failed_elsewhere: Sequence[object] | None = None,
) -> str:
    """One verdict for the job from pytest's exit code and the results' run verdicts.

    ``error`` when the run did not complete (an exit code other than 0 or 1, no results or
    results of no run, a run whose verdict is ``error`` or unknown, tests that pytest
    failed for other reasons than a verdict — ``failed_elsewhere``, from the results file;
    None for a file that does not say —, or exit 1 with no failing verdict to explain it);
    else ``regression`` when a run's verdict fails the build (:func:`perfgate.verdict.fails`:
    a regression, or with ``strict`` an undecided verdict); else ``pass``.
    """
    if runs is None or exit_code not in (PYTEST_OK, PYTEST_FAILED):
        return ERROR
    try:
        verdicts = [parse_verdict(run.get("verdict"), "verdict") for run in runs]
    except ValueError:
        return ERROR
    if not verdicts:
        return ERROR  # nothing was measured: a gate that judged nothing must not pass
    if Verdict.ERROR in verdicts:
        return ERROR
    if failed_elsewhere:  # a regression must not hide a broken test behind it
        return ERROR
    if any(fails(v, strict) for v in verdicts):
        return REGRESSION
    if exit_code == PYTEST_FAILED:
        return ERROR
    return PASS


def run_main(main: Callable[[], int]) -> None:
    """Run a module's ``main`` and exit with its status; an :class:`ActionError` (or a
    perfgate error, e.g. a bad configuration) becomes one ``::error::`` line and status 2, as
    does a bug (after its traceback), never 1 nor a bare traceback."""
    try:
        status = main()
    except (ActionError, PerfgateError) as exc:
        annotate("error", f"perfgate: {exc}")
        status = 2
    except MemoryError:
        annotate("error", "perfgate: out of memory: the input is too large for this runner")
        status = 2
    except Exception as exc:  # a bug: said as one annotation, the traceback in the log
        traceback.print_exc()
        annotate(
            "error",
            f"perfgate: internal error: {type(exc).__name__} (a bug in perfgate; please report "
            "it with the traceback in the step's log)",
        )
        status = 2
    sys.exit(status)

"""Run a command under msprof and read what it wrote (docs/formats.md §5.4).

:func:`run_under_msprof` runs::

    msprof --output=<out_dir> <MSPROF_OPTIONS…> <python> -m perfgate.profilers.msprof \\
        --exit-status=<out_dir>/app_exit_status -- <command…>

The application goes positionally after the options, as msprof's own system tests do
(docs/formats.md §5.4). It is wrapped in this module's ``__main__`` because msprof does not
pass the application's exit status on: msprof logs "An exception has occurred in process App"
and still exits 0 (``RunningMode::WaitRunningProcess``, msprof collector source). The wrapper
runs the command, records its status and exits with it, so a failed benchmark is an error.

The command's steps come from :mod:`perfgate.marks`: the runner points
``PERFGATE_STEP_MARKS`` at ``<out_dir>/step_marks.jsonl`` and :func:`load_msprof_run` lays
those windows over the device tasks (msprof exports of PyTorch eager mode have no step trace).
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from perfgate.errors import PerfgateError
from perfgate.marks import STEP_MARKS_ENV, STEP_MARKS_NOTE
from perfgate.profilers.environment import check_msprof_environment

if TYPE_CHECKING:
    from perfgate.model import Profile

# Task-level collection: op_summary with OP Type / Task Type / shapes (task-time l1), per-task
# PMU columns (aic-mode task-based, PipeUtilization) and task_time with copies; host API
# tables for the CANN/runtime side. Every flag is in msprof's option table (docs/formats.md
# §5.4; the collector's LONG_OPTIONS).
MSPROF_OPTIONS: tuple[str, ...] = (
    "--ascendcl=on",
    "--runtime-api=on",
    "--task-time=l1",
    "--aic-mode=task-based",
    "--aic-metrics=PipeUtilization",
)
MARKS_FILE = "step_marks.jsonl"
LOG_FILE = "msprof.log"
EXIT_STATUS_FILE = "app_exit_status"
_LOG_TAIL_LINES = 4
_LOG_ERROR_LINES = 3
_LOG_LINE_CHARS = 200
_LOG_ERROR = re.compile(r"\[ERROR\]|\[WARNING\]|unrecognized option|Traceback|Error:")
_KILL_GRACE_S = 10.0


@dataclass(frozen=True)
class MsprofRun:
    """What one msprof run left behind.

    Attributes:
        prof_dirs: the ``PROF_*`` directories this run wrote (one per profiled process).
        marks_path: the step marks file the command was pointed at (it may not exist).
        returncode: msprof's exit status.
        log_path: msprof's and the command's output.
    """

    prof_dirs: list[Path]
    marks_path: Path
    returncode: int
    log_path: Path

    @property
    def out_dir(self) -> Path:
        """The ``--output`` directory."""
        return self.log_path.parent


def run_under_msprof(
    command: Sequence[str],
    out_dir: Path,
    *,
    options: Sequence[str] = MSPROF_OPTIONS,
    env: Mapping[str, str] | None = None,
    timeout: float | None = None,
    cwd: Path | None = None,
) -> MsprofRun:
    """Profile ``command`` with msprof into ``out_dir``.

    Args:
        command: the program and its arguments (e.g. ``[python, "train.py", "--steps", "20"]``).
        out_dir: msprof's ``--output`` directory; created; ``msprof.log``, the step marks and
            the ``PROF_*`` directories go there.
        options: msprof collection options (default :data:`MSPROF_OPTIONS`).
        env: the environment for msprof and the command (default ``os.environ``).
        timeout: seconds before msprof and the command are killed.
        cwd: working directory of msprof and the command.

    Raises:
        PerfgateError: the environment cannot run msprof (see
            :func:`~perfgate.profilers.environment.check_msprof_environment`), the command or
            msprof exits non-zero or times out (the message names the command, the exit code
            and the end of the log), or msprof wrote no ``PROF_*`` directory.
    """
    command = [str(part) for part in command]
    if not command:
        raise PerfgateError("run_under_msprof: the command to profile is empty")
    base_env = dict(os.environ if env is None else env)
    msprof = check_msprof_environment(base_env)
    out = Path(out_dir).resolve()
    marks = out / MARKS_FILE
    status = out / EXIT_STATUS_FILE
    log = out / LOG_FILE
    try:
        out.mkdir(parents=True, exist_ok=True)
        for stale in (marks, status):
            stale.unlink(missing_ok=True)
        log.touch()
    except OSError as exc:
        raise PerfgateError(
            f"{out}: cannot write msprof's output there ({exc.strerror or exc}); give "
            "--perfgate-out a folder this runner can write"
        ) from None
    before = set(_prof_dirs(out))
    wrapped = [
        sys.executable,
        "-m",
        "perfgate.profilers.msprof",
        f"--exit-status={status}",
        "--",
        *command,
    ]
    argv = [msprof, f"--output={out}", *options, *wrapped]
    child_env = {**base_env, STEP_MARKS_ENV: str(marks)}
    shown = shlex.join(command)
    with log.open("wb") as handle:
        handle.write(f"$ {shlex.join(argv)}\n".encode())
        handle.flush()
        returncode = _run(argv, handle, child_env, cwd, timeout, shown, log)
    app_status = _read_status(status)
    if app_status not in (None, 0):
        raise PerfgateError(
            f"the profiled command failed (it {exit_text(app_status)}): {shown}; "
            f"end of {log}: {_log_tail(log)}"
        )
    if returncode != 0:
        raise PerfgateError(
            f"msprof failed (it {exit_text(returncode)}) profiling: {shown}; "
            f"end of {log}: {_log_tail(log)}"
        )
    if app_status is None:
        raise PerfgateError(
            f"msprof exited without running the command: {shown}; end of {log}: {_log_tail(log)}"
        )
    prof_dirs = sorted(set(_prof_dirs(out)) - before)
    if not prof_dirs:
        raise PerfgateError(
            f"msprof wrote nothing: no PROF_* directory in {out} after profiling {shown}; "
            f"see {log} (ends: {_log_tail(log)})"
        )
    return MsprofRun(prof_dirs=prof_dirs, marks_path=marks, returncode=returncode, log_path=log)


def _run(
    argv: list[str],
    handle: Any,
    env: dict[str, str],
    cwd: Path | None,
    timeout: float | None,
    shown: str,
    log: Path,
) -> int:
    """Run msprof with its output in ``handle``; kill its whole process group on timeout."""
    try:
        # A session of its own: a timeout kills msprof and everything it started.
        proc = subprocess.Popen(
            argv, stdout=handle, stderr=subprocess.STDOUT, env=env, cwd=cwd, start_new_session=True
        )
    except OSError as exc:
        raise PerfgateError(f"cannot run {argv[0]}: {exc.strerror or exc}") from None
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        raise PerfgateError(
            f"msprof run timed out after {timeout:g} s and was stopped: {shown}; "
            f"end of {log}: {_log_tail(log)}"
        ) from None
    except BaseException:
        kill_group(proc)
        raise


def exit_text(code: int) -> str:
    """``exited with 3``, or ``was killed by signal 11 (SIGSEGV)`` for a negative status."""
    if code >= 0:
        return f"exited with {code}"
    try:
        name = f" ({signal.Signals(-code).name})"
    except ValueError:
        name = ""
    return f"was killed by signal {-code}{name}"


def kill_group(proc: subprocess.Popen[Any]) -> None:
    """Stop msprof and everything it started: TERM, a grace period, then KILL for stragglers."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=_KILL_GRACE_S)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def _prof_dirs(out: Path) -> list[Path]:
    return [p for p in out.iterdir() if p.is_dir() and p.name.startswith("PROF_")]


def _read_status(path: Path) -> int | None:
    try:
        return int(path.read_text(encoding="utf-8").strip())
    except (OSError, ValueError):
        return None


def _log_tail(log: Path) -> str:
    """The log's error lines and its last lines, on one line.

    msprof prints its usage after a rejected option, so the last lines alone would miss why.
    """
    try:
        text = log.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "(log unreadable)"
    lines = [line.strip() for line in text.splitlines()[1:] if line.strip()]  # 1: our "$ argv"
    errors = [line for line in lines if _LOG_ERROR.search(line)][:_LOG_ERROR_LINES]
    picked = dict.fromkeys([*errors, *lines[-_LOG_TAIL_LINES:]])
    short = [ln if len(ln) <= _LOG_LINE_CHARS else ln[:_LOG_LINE_CHARS] + "…" for ln in picked]
    return " | ".join(short) or "(empty)"


# --------------------------------------------------------------------------- reading


def kept_run(path: Path) -> MsprofRun | None:
    """The msprof run ``perfgate.command`` kept at ``path`` (``perfgate-out/profiles/<name>``:
    its ``PROF_*`` directories with the step marks beside them), so that ``perfgate inspect``
    of it reads what the gate read; None for any other path."""
    marks = path / MARKS_FILE
    if not path.is_dir() or not marks.is_file():
        return None
    prof_dirs = sorted(_prof_dirs(path))
    if not prof_dirs:
        return None
    return MsprofRun(prof_dirs=prof_dirs, marks_path=marks, returncode=0, log_path=path / LOG_FILE)


def clear_kept_run(path: Path) -> None:
    """Remove what an earlier msprof run left in ``path``: the kept profile is this run's
    (``PROF_*`` directories of earlier sessions would be read with it)."""
    if not path.is_dir():
        return
    for prof in _prof_dirs(path):
        shutil.rmtree(prof, ignore_errors=True)
    for name in (MARKS_FILE, EXIT_STATUS_FILE, LOG_FILE):
        (path / name).unlink(missing_ok=True)


def load_msprof_run(run: MsprofRun) -> Profile:
    """The profile of a run: its ``PROF_*`` exports, with steps from the step marks.

    Each ``PROF_*`` directory is read by the msprof export reader and several are merged (one
    per process: :func:`~perfgate.ingest.assemble.merge_profiles`). When the command marked its
    steps, their windows replace the reader's steps
    (:func:`~perfgate.ingest.assemble.with_step_marks`); without marks the reader's steps stay.
    """
    from perfgate.ingest import load_profile
    from perfgate.ingest.assemble import merge_profiles, with_step_marks

    if not run.prof_dirs:
        raise PerfgateError(f"{run.out_dir}: the msprof run has no PROF_* directory to read")
    profile = merge_profiles([load_profile(prof) for prof in run.prof_dirs], run.out_dir)
    if not run.marks_path.exists():
        return profile
    return with_step_marks(profile, run.marks_path)


# --------------------------------------------------------------------------- app wrapper


def _wrapper_main(args: list[str]) -> int:
    """``python -m perfgate.profilers.msprof --exit-status=FILE -- COMMAND…``.

    Runs COMMAND, writes its exit status to FILE (a signal ``N`` as ``-N``), exits with it.
    """
    if len(args) < 3 or not args[0].startswith("--exit-status=") or args[1] != "--":
        print(
            "usage: python -m perfgate.profilers.msprof --exit-status=FILE -- COMMAND [ARG…]",
            file=sys.stderr,
        )
        return 2
    status_path = Path(args[0].split("=", 1)[1])
    command = args[2:]
    try:
        proc = subprocess.Popen(command)
    except OSError as exc:
        print(f"perfgate: cannot run {command[0]}: {exc.strerror or exc}", file=sys.stderr)
        _write_status(status_path, 127)
        return 127

    def forward(signum: int, _frame: object) -> None:
        # msprof stops the application with a signal: pass it on to the command.
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signum)

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, forward)
    code = proc.wait()
    _write_status(status_path, code)
    return code if code >= 0 else 128 - code


def _write_status(path: Path, code: int) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(f"{code}\n", encoding="utf-8")
    os.replace(tmp, path)


__all__ = [
    "MSPROF_OPTIONS",
    "STEP_MARKS_NOTE",
    "MsprofRun",
    "load_msprof_run",
    "run_under_msprof",
]


if __name__ == "__main__":
    sys.exit(_wrapper_main(sys.argv[1:]))

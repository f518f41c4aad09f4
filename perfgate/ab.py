"""Same-runner A/B: the base commit and the working tree measured on this runner, in
alternating fresh processes, and judged on the paired differences.

The base is checked out in a temporary git worktree. Each pair runs one pytest process per
side, back to back, in ABBA order (base first in even pairs, the working tree first in odd
ones), so what drifts on the runner — neighbours, clocks, the time of day — hits both sides
alike and cancels in the pair's difference. Every process measures ``statistics.rounds``
rounds of every selected benchmark. No baseline is read or written: the verdict needs none.

The worktree is removed whatever happens, Ctrl-C included.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

from perfgate.analysis.compare import Comparison, compare_runs
from perfgate.errors import PerfgateError
from perfgate.gate import store_root
from perfgate.profilers.runner import measuring_command, measuring_env
from perfgate.records import RunRecord, merge_processes, read_json, validate_run
from perfgate.rules import Settings
from perfgate.store.git import current_commit, resolve

BASE, HEAD = "base", "head"


class AbError(PerfgateError):
    """An A/B run that cannot go on: an unknown or unbuildable base, a failing session."""


@dataclass
class AbRun:
    """What an A/B run measured and decided."""

    base_sha: str
    head_sha: str
    pairs: int
    head_dirty: bool = False  # the tree measured has uncommitted changes
    head_branch: str | None = None
    comparisons: list[Comparison] = field(default_factory=list)
    records: dict[str, dict[str, RunRecord]] = field(default_factory=dict)  # side → name →
    seconds: float = 0.0
    session_seconds: dict[str, list[float]] = field(default_factory=dict)


@contextlib.contextmanager
def _interrupts_are_exceptions() -> Iterator[None]:
    """SIGTERM (a cancelled CI job) unwinds like Ctrl-C, so ``finally`` blocks run."""

    def stop(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGTERM, stop)
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def worktree(repo_dir: Path, sha: str) -> Iterator[Path]:
    """A detached git worktree of ``sha``, removed on the way out (also on Ctrl-C)."""
    parent = Path(tempfile.mkdtemp(prefix="perfgate-ab-"))
    path = parent / "base"
    added = subprocess.run(
        ["git", "-C", str(repo_dir), "worktree", "add", "--quiet", "--detach", str(path), sha],
        capture_output=True,
        text=True,
        check=False,
    )
    if added.returncode != 0:
        parent.rmdir()
        raise AbError(f"cannot check out {sha[:12]} in a worktree: {added.stderr.strip()}")
    try:
        with _interrupts_are_exceptions():
            yield path
    finally:
        subprocess.run(
            ["git", "-C", str(repo_dir), "worktree", "remove", "--force", str(path)],
            capture_output=True,
            check=False,
        )
        subprocess.run(
            ["git", "-C", str(repo_dir), "worktree", "prune"], capture_output=True, check=False
        )
        if parent.exists():
            import shutil

            shutil.rmtree(parent, ignore_errors=True)


def _python_path(checkout: Path, environ: dict[str, str]) -> str:
    """The checkout (and its src/ folder) first on PYTHONPATH, so each side imports its own
    project code, not whichever tree is installed."""
    entries = [str(checkout)]
    if (checkout / "src").is_dir():
        entries.insert(0, str(checkout / "src"))
    if environ.get("PYTHONPATH"):
        entries.append(environ["PYTHONPATH"])
    return os.pathsep.join(entries)


def _read_records(folder: Path) -> dict[str, RunRecord]:
    records: dict[str, RunRecord] = {}
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        record = validate_run(read_json(path, "A/B record"), str(path))
        records[record["benchmark"]] = record
    return records


def repository_top(repo_dir: Path) -> Path:
    """The top level of the git work tree holding ``repo_dir`` (where the sessions' pytest
    finds its configuration); ``repo_dir`` itself outside one."""
    done = subprocess.run(
        ["git", "-C", str(repo_dir), "rev-parse", "--show-toplevel"],
        capture_output=True,
        text=True,
        check=False,
    )
    top = done.stdout.strip()
    return Path(top) if done.returncode == 0 and top else repo_dir


def run_ab(
    repo_dir: Path,
    ref: str,
    pytest_args: Sequence[str],
    settings: Settings,
    *,
    pairs: int,
    out_dir: Path,
    xdist: bool = False,
    say: Callable[[str], None] = print,
) -> AbRun:
    """Measure ``ref`` (the base) and the working tree in ``pairs`` ABBA pairs of fresh
    pytest processes on this runner, and compare every benchmark on the paired differences.

    Raises:
        AbError: ``ref`` is unknown, or a session of either side could not run its tests
            (a usage error, a base that does not import: pytest's exit 2 to 4, said here
            with the session's tail). Failing tests do not stop it: a benchmark that
            measured nothing at the base is missing there, and says why it may be.
    """
    if pairs < 2:
        raise AbError(f"an A/B run needs at least 2 pairs (got {pairs})")
    base_sha = resolve(repo_dir, ref)
    head = current_commit(repo_dir, store=store_root(repo_dir, settings))
    top = repository_top(repo_dir)
    # The pytest arguments name paths relative to where the user stands in the checkout.
    where = Path.cwd().resolve()
    relative = where.relative_to(top) if where.is_relative_to(top) else Path()
    out_dir = out_dir.resolve()  # the sessions run in two checkouts
    run = AbRun(
        base_sha=base_sha,
        head_sha=head.sha,
        pairs=pairs,
        head_dirty=head.dirty,
        head_branch=head.branch,
    )
    started = time.perf_counter()
    with worktree(repo_dir, base_sha) as base_tree:
        checkouts = {BASE: base_tree, HEAD: top}
        arguments = {HEAD: list(pytest_args)}
        # A path given whole (/work/repo/tests/…) names this tree's file: the base's
        # sessions must run the base's copy of it, or both sides measure this tree.
        pytest_args = _relative_to_tree(pytest_args, top, top / relative)
        base_args, new_paths = _base_arguments(pytest_args, top / relative, base_tree / relative)
        if new_paths:
            say(
                f"perfgate ab: {', '.join(new_paths)} not in the base {ref}: its benchmarks are "
                "new (no-baseline)"
            )
        if base_args is not None:
            arguments[BASE] = base_args
        failed_at: set[str] = set()  # sides whose sessions had failing tests
        for pair in range(pairs):
            # This tree first: a mistake in the arguments (a path that is nowhere, a -k
            # that selects nothing) is said of this tree, after one session, not blamed on
            # the base after all of them.
            order = (HEAD, BASE) if pair % 2 == 0 else (BASE, HEAD)
            for side in order:
                if side not in arguments:
                    continue  # the base has none of the paths asked for
                records = out_dir / side / str(pair) / "records"
                env = measuring_env()
                env["PYTHONPATH"] = _python_path(checkouts[side], env)
                say(f"perfgate ab: pair {pair + 1} of {pairs}, {side} ({checkouts[side]})")
                session_started = time.perf_counter()
                done = subprocess.run(
                    measuring_command(arguments[side], pair, records, xdist),
                    cwd=checkouts[side] / relative,
                    env=env,
                    capture_output=True,
                    text=True,
                    check=False,
                )
                run.session_seconds.setdefault(side, []).append(
                    round(time.perf_counter() - session_started, 2)
                )
                # 1: some tests failed — a test broken at the base (that the change under
                # review may fix) is no reason to stop; a benchmark that did not measure
                # there is missing below. 5: no test among the paths asked for.
                if done.returncode == 1:
                    failed_at.add(side)
                if done.returncode not in (0, 1, 5):
                    # pytest writes a usage error (a bad config, an unknown path) to
                    # stderr only: the tail of both, or the reason is lost.
                    tail = "\n".join(
                        line
                        for stream in (done.stdout, done.stderr)
                        for line in stream.strip().splitlines()[-8:]
                    )
                    what = f"the base {ref} ({base_sha[:12]})" if side == BASE else "this tree"
                    raise AbError(
                        f"the benchmarks of {what} did not run (pytest exited with "
                        f"{done.returncode}):\n{tail}"
                    )
                if side == HEAD and pair == 0 and not _read_records(records):
                    raise AbError(
                        "no perfgate benchmark ran on this tree (pytest exited with "
                        f"{done.returncode}): nothing to compare; check the paths and -k"
                    )
    run.seconds = round(time.perf_counter() - started, 2)
    by_side = {
        side: [_read_records(out_dir / side / str(p) / "records") for p in range(pairs)]
        for side in (BASE, HEAD)
    }
    names = sorted(set().union(*(r.keys() for r in by_side[HEAD])))
    if not names:
        raise AbError("no perfgate benchmark ran on this tree: nothing to compare")
    for name in names:
        sides: dict[str, RunRecord] = {}
        for side in (BASE, HEAD):
            found = [r[name] for r in by_side[side] if name in r]
            if not found:
                sides = {}
                break
            sides[side] = merge_processes(found[0], found[1:])
        if not sides:
            run.comparisons.append(_missing_on_base(name, base_sha, ref, BASE in failed_at))
            # What this tree measured of it stays in the results, as a no-baseline run's.
            found = [r[name] for r in by_side[HEAD] if name in r]
            run.records.setdefault(HEAD, {})[name] = merge_processes(found[0], found[1:])
            continue
        run.records.setdefault(BASE, {})[name] = sides[BASE]
        run.records.setdefault(HEAD, {})[name] = sides[HEAD]
        run.comparisons.append(
            compare_runs(
                sides[BASE],
                sides[HEAD],
                settings.rules_for(name),
                baseline_info={
                    "commit": base_sha,
                    "how": f"A/B on this runner, {pairs} pairs, base {ref}",
                    "mode": "ab",
                },
                current_info={"commit": head.sha, "dirty": head.dirty, "mode": "ab"},
                paired=True,
            )
        )
    return run


def _relative_to_tree(pytest_args: Sequence[str], top: Path, where: Path) -> list[str]:
    """``pytest_args`` with each absolute path inside the checkout ``top`` (a ``::`` node id
    included) made relative to ``where``, the folder the sessions start in."""
    made: list[str] = []
    for arg in pytest_args:
        path, sep, rest = arg.partition("::")
        if not arg.startswith("-") and os.path.isabs(path):
            resolved = Path(path).resolve()
            if resolved.is_relative_to(top.resolve()):
                arg = os.path.relpath(resolved, where.resolve()) + sep + rest
        made.append(arg)
    return made


def _base_arguments(
    pytest_args: Sequence[str], head_dir: Path, base_dir: Path
) -> tuple[list[str] | None, list[str]]:
    """The pytest arguments for the base's sessions, and the test paths left out of them:
    those of this tree (a directory or a ``.py`` file, ``::`` node ids included, that git
    tracks or would track) that the base does not have — a pull request that adds a
    benchmark file. None for the arguments when no path asked for is on the base: its
    sessions would collect nothing asked for (or, with no path left, everything)."""
    new: list[str] = []
    paths = 0
    for arg in pytest_args:
        if arg.startswith("-"):
            continue
        path = arg.split("::", 1)[0]
        if not (path.endswith(".py") or (head_dir / path).is_dir()):
            continue
        if not (head_dir / path).exists():
            continue
        paths += 1
        if not (base_dir / path).exists() and _in_tree(head_dir, path):
            new.append(arg)
    if not new:
        return list(pytest_args), []
    if len(new) == paths:
        return None, new
    return [arg for arg in pytest_args if arg not in new], new


def _in_tree(where: Path, path: str) -> bool:
    """Whether git tracks ``path`` (relative to ``where``) or would (untracked, not ignored)."""
    done = subprocess.run(
        [
            "git",
            "-C",
            str(where),
            "ls-files",
            "--cached",
            "--others",
            "--exclude-standard",
            "--",
            path,
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    return done.returncode == 0 and bool(done.stdout.strip())


def _missing_on_base(name: str, base_sha: str, ref: str, tests_failed: bool) -> Comparison:
    from perfgate.verdict import Verdict

    said = f"the base {ref} measured no benchmark {name!r}: a new benchmark, nothing to compare"
    if tests_failed:  # or one that fails there: say it rather than call it new
        said += " (or one that fails at the base: tests failed in its sessions)"
    return Comparison(
        benchmark=name,
        verdict=Verdict.NO_BASELINE,
        baseline={"commit": base_sha, "how": f"A/B, base {ref}", "mode": "ab"},
        current={"mode": "ab"},
        notes=[said],
    )

"""The action's baseline step: on a push to the baseline branch, record the baselines of the
measured commit (``perfgate baseline update --from RESULTS``), commit them as a bot and push,
retrying a bounded number of times when another push got there first (fetch, rebase, push).

Baselines are recorded only on a ``push`` to the baseline branch, of the pushed commit;
every other event is refused with a message, whatever the inputs say.

Inputs (environment): ``PERFGATE_UPDATE_BASELINES`` (``auto``: on a push to the baseline
branch; ``never``; ``always`` is accepted as ``auto``, with a warning),
``PERFGATE_BASELINE_BRANCH`` (default: the perfgate configuration's ``baseline.branch``, else
the repository's default branch), ``PERFGATE_VERDICT`` and
``PERFGATE_RESULTS_PATH`` (the benchmark step's outputs), ``PERFGATE_TOKEN`` (used for the push
when the checkout kept no credentials). Runner variables: ``GITHUB_EVENT_NAME``,
``GITHUB_REF``, ``GITHUB_SHA``, ``GITHUB_EVENT_PATH``, ``GITHUB_SERVER_URL``. Output:
``baseline-commit``.
"""

from __future__ import annotations

import argparse
import base64
import os
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from perfgate.action import (
    ERROR,
    ActionError,
    annotate,
    append_summary,
    choice_input,
    env_input,
    git_output,
    load_event,
    remember_default_branch,
    run_main,
    set_output,
)
from perfgate.config import load_settings, project_directory
from perfgate.errors import PerfgateError
from perfgate.sides import load_results_file
from perfgate.store.git import default_branch

BOT_NAME = "github-actions[bot]"
BOT_EMAIL = "41898282+github-actions[bot]@users.noreply.github.com"
SUBJECT = "perfgate: baselines for "
# The hidden temporary files of the store's writers (perfgate.store.atomic), never committed.
TEMPORARY_FILES = ":(exclude,glob)**/.*.tmp"


def bot_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for git commands: the bot as author and committer, no prompts."""
    env = dict(os.environ if base is None else base)
    env.update(
        GIT_AUTHOR_NAME=BOT_NAME,
        GIT_AUTHOR_EMAIL=BOT_EMAIL,
        GIT_COMMITTER_NAME=BOT_NAME,
        GIT_COMMITTER_EMAIL=BOT_EMAIL,
        GIT_TERMINAL_PROMPT="0",
    )
    return env


def git(
    repo: Path, *args: str, env: Mapping[str, str] | None = None, check: bool = True
) -> subprocess.CompletedProcess[str]:
    """Run one git command in ``repo``; an :class:`ActionError` with git's message on failure
    when ``check``."""
    done = subprocess.run(
        ["git", *args], cwd=repo, env=env, capture_output=True, text=True, check=False
    )
    if check and done.returncode != 0:
        message = (done.stderr or done.stdout).strip().splitlines()
        raise ActionError(f"git {args[0]} failed: {message[-1] if message else done.returncode}")
    return done


def with_token(repo: Path, remote: str, token: str, env: dict[str, str]) -> dict[str, str]:
    """``env`` plus an Authorization header for an https remote, the way actions/checkout sets
    one, when a token is given and the checkout kept no credentials of its own. The header is
    passed in the environment (``GIT_CONFIG_*``, git >= 2.31), never written to .git/config."""
    url = git(repo, "remote", "get-url", remote, check=False).stdout.strip()
    persisted = git(repo, "config", "--get-regexp", r"^http\..*\.extraheader$", check=False)
    if not token or not url.startswith(("https://", "http://")) or persisted.stdout.strip():
        return env
    server = env.get("GITHUB_SERVER_URL", "https://github.com").rstrip("/")
    basic = base64.b64encode(f"x-access-token:{token}".encode()).decode()
    count = int(env.get("GIT_CONFIG_COUNT", "0") or 0)
    return {
        **env,
        "GIT_CONFIG_COUNT": str(count + 1),
        f"GIT_CONFIG_KEY_{count}": f"http.{server}/.extraheader",
        f"GIT_CONFIG_VALUE_{count}": f"AUTHORIZATION: basic {basic}",
    }


def commit_and_push(
    repo: Path,
    paths: Sequence[str],
    message: str,
    branch: str,
    *,
    remote: str = "origin",
    attempts: int = 5,
    backoff: float = 2.0,
    env: Mapping[str, str] | None = None,
) -> str | None:
    """Commit ``paths`` and push to ``branch``; on a rejected push fetch, rebase and push
    again, up to ``attempts`` pushes in all, waiting ``backoff`` seconds, doubling, between.
    Returns the pushed commit, or None when there was nothing to commit."""
    env = bot_env(env)
    # Not a writer's hidden temporary file (one left by a writer that was killed): it is
    # no baseline, and the gate never reads it.
    git(repo, "add", "--all", "--", *paths, TEMPORARY_FILES, env=env)
    if git(repo, "diff", "--cached", "--quiet", env=env, check=False).returncode == 0:
        return None
    measured = git(repo, "rev-parse", "HEAD", env=env).stdout.strip()
    git(repo, "commit", "--quiet", "--no-verify", "-m", message, env=env)
    for attempt in range(1, attempts + 1):
        pushed = git(repo, "push", remote, f"HEAD:refs/heads/{branch}", env=env, check=False)
        if pushed.returncode == 0:
            sha = git(repo, "rev-parse", "HEAD", env=env).stdout.strip()
            print(f"perfgate: pushed {sha[:12]} to {branch} (attempt {attempt}/{attempts})")
            return sha
        said = (pushed.stderr or pushed.stdout).strip()
        if not _lost_a_race(said):
            # A protected branch, a token without contents: write …: no retry mends that,
            # and git's own reason is the line to read.
            raise ActionError(
                f"could not push the baselines to {branch}: {_refusal(said)} (the token needs "
                "contents: write, and a protected branch must let it push: "
                "docs/github-action.md)"
            )
        if attempt == attempts:
            raise ActionError(
                f"could not push the baselines to {branch} after {attempts} attempts: "
                f"{_refusal(said)}"
            )
        delay = backoff * 2 ** (attempt - 1)
        print(
            f"perfgate: push rejected (attempt {attempt}/{attempts}): {branch} moved on; "
            f"fetching and putting the baseline commit on top in {delay:g} s",
            flush=True,
        )
        time.sleep(delay)
        if git(repo, "fetch", "--quiet", remote, branch, env=env, check=False).returncode:
            continue
        on_branch = git(
            repo, "merge-base", "--is-ancestor", measured, "FETCH_HEAD", env=env, check=False
        )
        if on_branch.returncode != 0:
            # Force-pushed away: replaying would put the removed commit back on the branch.
            print(
                f"perfgate: not recording baselines: the measured commit {measured[:12]} is no "
                f"longer on {branch} (force-pushed away?); its baselines would describe code "
                "the branch no longer has"
            )
            return None
        # Only the baseline commit moves onto the branch's new tip. Baselines are one file
        # per commit, so a conflict means the same commit was recorded twice (a re-run): the
        # newer recording wins, as in the store itself.
        rebased = git(
            repo, "rebase", "--quiet", "-X", "theirs", "--onto", "FETCH_HEAD", "HEAD~1",
            env=env, check=False,
        )  # fmt: skip
        if rebased.returncode != 0:
            git(repo, "rebase", "--abort", env=env, check=False)
            raise ActionError(f"could not rebase the baselines onto {remote}/{branch}")
    return None  # not reached: the last attempt returns or raises


def _no_such_branch(cwd: Path, branch: str, remote: str = "origin") -> bool:
    """Whether ``remote`` (asked now) has no branch ``branch``; False where it cannot be
    asked."""
    heads = git_output(cwd, "ls-remote", "--heads", remote, f"refs/heads/{branch}")
    return heads == ""


def _lost_a_race(said: str) -> bool:
    """Whether git refused a push because the branch moved on (someone pushed first)."""
    return any(
        words in said for words in ("[rejected]", "fetch first", "non-fast-forward", "stale info")
    ) and not any(words in said for words in ("GH006", "protected branch", "[remote rejected]"))


def _refusal(said: str) -> str:
    """git's reason for a refused push: its ``remote:`` / ``error:`` / ``fatal:`` lines that
    say something (not its hints)."""
    lines = [line.strip() for line in said.splitlines() if line.strip()]
    telling = [
        line
        for line in lines
        if line.startswith(("remote: error", "error:", "fatal:", "! [remote rejected]", "!"))
        or "GH006" in line
    ]
    return "; ".join(dict.fromkeys(telling or lines[-1:])) or "git push failed"


def decide(
    mode: str, event_name: str, ref: str, baseline_branch: str, verdict: str
) -> tuple[str | None, str]:
    """The branch to commit baselines to, or None and why not.

    Only a ``push`` to the baseline branch records, whatever ``mode`` says: any other event
    (``pull_request_target``, ``workflow_run``, ``schedule``, ``issue_comment``,
    ``workflow_dispatch`` …) may have checked out code nobody reviewed, or not the branch's
    own commit, and a baseline is what the branch's code measured.
    """
    if mode == "never":
        return None, "update-baselines is 'never'"
    if event_name != "push":
        return None, (
            f"baselines are recorded only on a push to {baseline_branch}, and this run's "
            f"event is {event_name or 'unknown'}"
        )
    if not ref.startswith("refs/heads/"):
        return None, f"{ref or 'this ref'} is not a branch"
    branch = ref.removeprefix("refs/heads/")
    if branch != baseline_branch:
        return None, f"not a push to {baseline_branch} ({event_name} on {branch})"
    if verdict in ("", ERROR):
        return None, "the benchmark run did not complete"
    return branch, ""


def record(results: Path, cwd: Path) -> None:
    """Write the baselines of HEAD from a results file with perfgate's own CLI."""
    command = [sys.executable, "-m", "perfgate", "baseline", "update", "--from", str(results)]
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, check=False)
    sys.stdout.write(done.stdout)
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines()
        raise ActionError(
            "perfgate baseline update failed: " + (lines[-1] if lines else str(done.returncode))
        )


def main(argv: Sequence[str] | None = None) -> int:
    """Record, commit and push the baselines when this run should."""
    parser = argparse.ArgumentParser(prog="python -m perfgate.action.commit_baselines")
    parser.add_argument("--remote", default="origin")
    parser.add_argument("--attempts", type=int, default=5, help="pushes to try in all")
    parser.add_argument("--backoff", type=float, default=2.0, help="first wait, seconds")
    args = parser.parse_args(argv)
    cwd = Path.cwd()
    # The project's settings and store, as pytest --perfgate and the CLI take them from here
    # (working-directory: bench/ with the settings at the top).
    project = project_directory(cwd)
    settings = load_settings(None, root=project)
    mode = choice_input("PERFGATE_UPDATE_BASELINES", ("auto", "always", "never"), "auto")
    event_name = env_input("GITHUB_EVENT_NAME")
    if mode == "always":
        annotate(
            "warning",
            "perfgate: update-baselines 'always' is no longer honoured: baselines are recorded "
            "only on a push to the baseline branch (set baseline-branch to choose it)",
        )
    remember_default_branch(cwd, load_event())
    # refs/heads/main names the branch main (a ref where a branch name is asked).
    given = env_input("PERFGATE_BASELINE_BRANCH").removeprefix("refs/heads/")
    baseline_branch = given or settings.baseline.branch
    if not baseline_branch:
        try:
            baseline_branch = default_branch(cwd)
        except PerfgateError:
            if mode != "never" and event_name == "push":
                raise  # this run may record: where to, git must say
            # A job without a checkout (shards' artifacts merged on a schedule) records
            # nothing; it has no repository to ask, and must not fail for that.
            baseline_branch = "the default branch"
    branch, why_not = decide(
        mode,
        event_name,
        env_input("GITHUB_REF"),
        baseline_branch,
        env_input("PERFGATE_VERDICT"),
    )
    if branch is None:
        if event_name not in ("push", "pull_request") and mode != "never":
            annotate("notice", f"perfgate: not recording baselines: {why_not}")
        elif event_name == "push" and mode != "never" and given and _no_such_branch(cwd, given):
            # A typo (origin/main, Main): no push ever records, and no one would be told.
            annotate(
                "warning",
                f"perfgate: not recording baselines: baseline-branch {given!r} is no branch "
                f"of the repository (pushes to it record baselines; {why_not})",
            )
        else:
            print(f"perfgate: not recording baselines: {why_not}")
        return 0
    results = Path(env_input("PERFGATE_RESULTS_PATH", "perfgate-out/results.json"))
    if not results.is_file():
        raise ActionError(f"{results}: no results file to record baselines from")
    head = git(cwd, "log", "-1", "--format=%H%n%s").stdout.splitlines()
    if len(head) > 1 and head[1].startswith(SUBJECT):
        print("perfgate: HEAD is itself a baseline commit: not recording baselines of it")
        return 0
    pushed = env_input("GITHUB_SHA")
    if pushed and pushed != head[0]:
        raise ActionError(
            f"HEAD is {head[0][:12]}, but the push to {branch} was {pushed[:12]}: baselines "
            "are recorded only for the pushed commit (check out the push's own ref in the job "
            "that records baselines)"
        )
    measured = load_results_file(results).get("commit")
    if measured and measured != head[0]:
        raise ActionError(
            f"{results} measured {str(measured)[:12]}, but HEAD is {head[0][:12]}: "
            "record baselines from a checkout of the measured commit"
        )

    record(results, cwd)
    env = with_token(cwd, args.remote, env_input("PERFGATE_TOKEN"), dict(os.environ))
    sha = commit_and_push(
        cwd,
        [str(Path(project).resolve() / settings.baseline.dir)],
        f"{SUBJECT}{head[0]}\n\nRecorded by the perfgate action from {results.name}.\n\n[skip ci]",
        branch,
        remote=args.remote,
        attempts=max(1, args.attempts),
        backoff=args.backoff,
        env=env,
    )
    if sha is None:
        annotate("notice", "perfgate: the baselines were already committed; nothing to push")
    set_output("baseline-commit", sha or "")
    report_new_change_points(Path(project), results)
    return 0


def report_new_change_points(cwd: Path, results: Path) -> None:
    """After recording: the change points and creep that the new baselines complete, on the
    job summary (docs/history.md). History is a report: a problem reading it only warns."""
    from perfgate.errors import PerfgateError
    from perfgate.gate import history_along_main
    from perfgate.report.history import new_findings_markdown

    settings = load_settings(None, root=cwd)
    try:
        runs = load_results_file(results)["runs"]
        histories = [history_along_main(cwd, settings, r["benchmark"], r["env"]) for r in runs]
    except PerfgateError as exc:
        annotate("warning", f"perfgate: no history of the main line: {exc}")
        return
    append_summary(new_findings_markdown(histories))


if __name__ == "__main__":
    run_main(main)

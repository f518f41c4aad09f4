"""The action's benchmark step: run ``pytest`` (or merge shards' results), then set the step
outputs and write the job summary. Never fails the step for a regression or a failed run:
the action's last step (:mod:`perfgate.action.fail_job`) does, after the summary, artifacts,
comment and baselines are done.

Inputs (environment): ``PERFGATE_PYTEST_ARGS`` (shell-quoted, default ``--perfgate``),
``PERFGATE_OUTPUT_DIR`` (default ``perfgate-out``), ``PERFGATE_CANN_ENV`` (``auto``, ``none``
or a script to source first), ``PERFGATE_MERGE`` (glob patterns of results files: merge them
instead of running pytest). Outputs: ``verdict``, ``exit-code``, ``results-path``,
``summary-path``, ``html-path``, ``output-dir`` (absolute paths).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shlex
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from perfgate.action import (
    ERROR,
    PYTEST_EXIT_MEANINGS,
    REGRESSION,
    ActionError,
    annotate,
    append_summary,
    choice_input,
    env_input,
    git_output,
    is_shallow_checkout,
    load_event,
    overall_verdict,
    pull_request_number,
    remember_default_branch,
    run_main,
    set_output,
    write_text,
)
from perfgate.action.merge_results import merge_files
from perfgate.report import markdown as md
from perfgate.report.format import inert, visible
from perfgate.verdict import Verdict

# Where CANN's installers put the environment script: as root, then as the installing user
# (a self-hosted runner's usual case); the toolkit layout of CANN 8.0, then the cann/ of 8.5.
STANDARD_CANN_ENVS = (
    "/usr/local/Ascend/ascend-toolkit/set_env.sh",
    "/usr/local/Ascend/cann/set_env.sh",
    "~/Ascend/ascend-toolkit/set_env.sh",
    "~/Ascend/cann/set_env.sh",
)
HTML_REPORT = "report.html"  # in the output directory, uploaded with the artifact
# The exit-code output when pytest was not started (not one of pytest's own codes).
PYTEST_NOT_RUN = -1


def cann_script(value: str, standard: Sequence[str] = STANDARD_CANN_ENVS) -> Path | None:
    """The CANN environment script to source: ``auto`` is the first of the standard places
    that holds one (none there: none), ``none`` (or empty) is none, anything else is a path
    that must exist."""
    if value in ("", "none"):
        return None
    if value == "auto":
        found = (Path(p).expanduser() for p in standard)
        return next((path for path in found if path.is_file()), None)
    path = Path(value)
    if not path.is_file():
        raise ActionError(f"cann-env: {value} does not exist (use 'auto' or 'none')")
    return path


def pytest_command(
    python: str, pytest_args: str, out_dir: Path, cann: Path | None
) -> tuple[list[str], Path, Path]:
    """The command line that runs the benchmarks, and where it writes results and Markdown.

    The action's report paths come last so they win over any in ``pytest_args``.
    """
    try:
        user_args = shlex.split(pytest_args)
    except ValueError as exc:
        raise ActionError(f"pytest-args: {exc} in {pytest_args!r}") from None
    results, summary = out_dir / "results.json", out_dir / "summary.md"
    command = [python, "-m", "pytest", *user_args]
    command += ["--perfgate-out", str(out_dir), "--perfgate-json", str(results)]
    command += ["--perfgate-md", str(summary), "--perfgate-html", str(out_dir / HTML_REPORT)]
    if cann is not None:
        # Source the script in the shell that then becomes pytest: its exports reach pytest.
        prelude = '. "$1" || { echo "perfgate: sourcing $1 failed" >&2; exit 2; }; shift; exec "$@"'
        command = ["bash", "-c", prelude, "perfgate-cann-env", str(cann), *command]
    return command, results, summary


def _baseline_store(cwd: Path) -> Path | None:
    """The project's baseline store (its settings' ``baseline.dir``), or None where the
    settings cannot be read here (the benchmark run then says why)."""
    from perfgate.config import load_settings, project_directory
    from perfgate.errors import PerfgateError

    try:
        project = Path(project_directory(cwd)).resolve()
        return project / load_settings(None, root=project).baseline.dir
    except PerfgateError:
        return None


def not_the_pull_request(cwd: Path, event: Mapping[str, Any], measured: object) -> str | None:
    """Why this ``pull_request_target`` run does not judge its pull request, when it measured
    neither the pull request's head nor a merge of it (such a run checks out the base branch
    unless told otherwise); else None. (A ``pull_request`` run checks out the merge.)"""
    if os.environ.get("GITHUB_EVENT_NAME") != "pull_request_target":
        return None
    pull = event.get("pull_request")
    head = (pull.get("head") or {}).get("sha") if isinstance(pull, dict) else None
    if not isinstance(head, str) or not isinstance(measured, str) or measured == head:
        return None
    parents = (git_output(cwd, "rev-list", "--parents", "-n", "1", measured) or "").split()
    if head in parents[1:]:
        return None  # the merge commit of the pull request (refs/pull/N/merge)
    return (
        f"it measured {measured[:12]}, which is neither the pull request's head "
        f"{head[:12]} nor a merge of it (pull_request_target checks out the base branch "
        "unless told otherwise): it does not judge the pull request"
    )


def run_benchmarks(command: Sequence[str]) -> int:
    """Run pytest with the job summary hidden from it: this step writes the summary once,
    also when pytest could not."""
    env = {k: v for k, v in os.environ.items() if k != "GITHUB_STEP_SUMMARY"}
    # A line break in an argument would start a line the runner reads as a command.
    print(inert("perfgate: " + visible(shlex.join(command))), flush=True)
    try:
        return subprocess.run(command, env=env, check=False).returncode
    except OSError as exc:
        raise ActionError(f"cannot run {command[0]}: {exc.strerror}") from None


def read_runs(results: Path) -> list[dict[str, Any]] | None:
    """The runs of a results file; None when it is missing or unreadable."""
    runs = read_document(results).get("runs")
    return runs if isinstance(runs, list) else None


def read_document(results: Path) -> dict[str, Any]:
    """A results file's document as it is; empty when it is missing or unreadable."""
    if not results.is_file():
        return {}
    try:
        document = json.loads(results.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError):
        return {}
    return document if isinstance(document, dict) else {}


def failed_tests(document: Mapping[str, Any]) -> list[str] | None:
    """The tests pytest failed for other reasons than a benchmark's verdict, as the results
    file lists them (``when`` added where it is not the test itself); None where it does not
    say (a file of another version)."""
    listed = document.get("failed_elsewhere")
    if not isinstance(listed, list):
        return None
    tests = []
    for entry in listed:
        if isinstance(entry, dict):
            test, when = str(entry.get("test")), str(entry.get("when"))
            tests.append(test if when == "call" else f"{test} ({when})")
    return tests


def _code_list(items: Sequence[str], shown: int = 5) -> str:
    """The first ``shown`` of ``items`` as Markdown code, and how many more there are."""
    more = f" and {len(items) - shown} more" if len(items) > shown else ""
    return ", ".join(map(md.code, items[:shown])) + more


def problem_note(
    exit_code: int,
    runs: list[dict[str, Any]] | None,
    results: Path,
    failed: Sequence[str] | None = None,
) -> str:
    """Why the verdict is ``error``, in one sentence."""
    if exit_code not in (0, 1):
        meaning = PYTEST_EXIT_MEANINGS.get(exit_code, "failed")
        return f"pytest exited with {exit_code} ({meaning}); see the job log"
    if runs == []:
        return f"{results} holds no benchmark runs: nothing was measured, so nothing was gated"
    if runs is None:
        return (
            f"no perfgate results were written to {results}: are there benchmarks, and is "
            "--perfgate among pytest-args?"
        )
    errored = [str(run.get("benchmark")) for run in runs if run.get("verdict") == ERROR]
    if errored:
        return "benchmarks that could not be measured: " + ", ".join(map(md.code, errored))
    if failed:
        shown = _code_list(failed)
        return f"pytest failed {len(failed)} test(s) for other reasons than a verdict: {shown}"
    known = {v.value for v in Verdict}
    unjudged = [str(run.get("benchmark")) for run in runs if run.get("verdict") not in known]
    if unjudged:  # e.g. merged shards written by another tool or version
        return f"runs without a known verdict in {results}: " + ", ".join(map(md.code, unjudged))
    return "pytest reported failed tests, but no benchmark regressed; see the job log"


def expand(patterns: str) -> list[Path]:
    """The files that whitespace-separated glob patterns match, sorted, each once."""
    found: dict[str, None] = {}
    try:
        words = shlex.split(patterns)
    except ValueError as exc:  # an unclosed quote
        raise ActionError(f"merge: cannot split {patterns!r} into patterns ({exc})") from None
    for pattern in words:
        for match in sorted(glob.glob(pattern, recursive=True)):
            found.setdefault(match)
    if not found:
        raise ActionError(f"merge: no results files match {patterns!r}")
    return [Path(name) for name in found]


def merge_inputs(patterns: str, outputs: Sequence[Path]) -> list[Path]:
    """The shards' results files that ``patterns`` name (none without patterns); an error
    where one of them is one of the action's own ``outputs``, which are deleted before the
    run (a left-over report must not pass for this run's): merged, a shard downloaded there
    would be gone, or a stale report merged as a shard."""
    if not patterns:
        return []
    paths = expand(patterns)
    written = {output.resolve(): output for output in outputs}
    for path in paths:
        if path.resolve() in written:
            raise ActionError(
                f"merge: {path} is a shard to merge and also this action's own output "
                f"({written[path.resolve()].name} in output-dir, replaced on every run); "
                "download the shards' results into another directory, or set output-dir"
            )
    return paths


SHALLOW_NOTE = (
    "this checkout is a shallow clone, so the baselines of earlier commits cannot be found "
    "and the gate would be silently off; the benchmarks were not run. Set `fetch-depth: 0` "
    "on actions/checkout"
)


def ab_base(cwd: Path, event: Mapping[str, Any]) -> str:
    """The base of a pull request's A/B run: the merge-base of HEAD and the target branch
    (``origin/<base ref>`` of the event, fetched by ``fetch-depth: 0``)."""
    ref = _base_ref(event)
    if ref is None:
        raise ActionError("mode: ab needs a pull_request event naming its base branch")
    sha = git_output(cwd, "merge-base", "HEAD", f"origin/{ref}")
    if not sha:
        raise ActionError(
            f"mode: ab: no merge-base of HEAD and origin/{ref} (check out with fetch-depth: 0)"
        )
    return sha


def baseline_changes(cwd: Path, event: Mapping[str, Any]) -> list[str]:
    """The files of the baseline store a pull request changes (``D baselines/…``), from the
    merge-base with its target branch to HEAD; empty for other events, or where git cannot
    tell. Baselines are read from the checkout: a pull request that deletes or edits them
    changes what it is judged against."""
    ref = _base_ref(event)
    if ref is None:
        return []
    merge_base = git_output(cwd, "merge-base", "HEAD", f"origin/{ref}")
    if not merge_base:
        return []
    store = _baseline_store(cwd)
    if store is None:
        return []  # pytest says what is wrong with the configuration
    listed = git_output(
        cwd, "diff", "--name-status", "--no-renames", merge_base, "HEAD", "--", str(store)
    )
    return [" ".join(line.split("\t")) for line in (listed or "").splitlines() if line]


def _base_ref(event: Mapping[str, Any]) -> str | None:
    """The branch a pull request event targets, or None for other events."""
    pull = event.get("pull_request")
    base = pull.get("base") if isinstance(pull, dict) else None
    ref = base.get("ref") if isinstance(base, dict) else None
    return ref if isinstance(ref, str) and ref else None


def html_report_line() -> str:
    """Where the HTML report is: in the artifact of this workflow run."""
    server = os.environ.get("GITHUB_SERVER_URL", "https://github.com").rstrip("/")
    repository, run = os.environ.get("GITHUB_REPOSITORY"), os.environ.get("GITHUB_RUN_ID")
    where = "this run's artifact"
    if repository and run:
        where = f"the artifact of [this run]({server}/{repository}/actions/runs/{run})"
    return f"\n📈 Plots, timelines and the advisor's hints: `{HTML_REPORT}` in {where}.\n"


def main(argv: Sequence[str] | None = None) -> int:
    """Run (or merge), then write outputs and the job summary."""
    parser = argparse.ArgumentParser(prog="python -m perfgate.action.run_benchmarks")
    parser.add_argument("--python", default=sys.executable, help="the interpreter that runs pytest")
    args = parser.parse_args(argv)
    out_dir = Path(env_input("PERFGATE_OUTPUT_DIR", "perfgate-out")).resolve()
    store = _baseline_store(Path.cwd())
    if store is not None and out_dir.is_relative_to(store):
        # The push's baseline commit adds the store whole: the reports and raw profiles
        # would be committed to the baseline branch with the baselines.
        raise ActionError(
            f"output-dir {out_dir}: is inside the baseline store {store}, which the baseline "
            "commit adds whole; name a directory outside it (default perfgate-out)"
        )
    results, summary = out_dir / "results.json", out_dir / "summary.md"
    merge_patterns = env_input("PERFGATE_MERGE")
    # Before anything is deleted: a shard that is one of the outputs would be lost.
    paths = merge_inputs(merge_patterns, (results, summary, out_dir / HTML_REPORT))
    # Self-hosted runners keep their workspace: a report left by an earlier run must not
    # pass for this one's.
    for stale in (results, summary, out_dir / HTML_REPORT):
        try:
            stale.unlink(missing_ok=True)
        except OSError as exc:  # e.g. a file where the output directory should be
            raise ActionError(
                f"output-dir {out_dir}: cannot be used ({exc.strerror}); name a directory"
            ) from None
    cwd = Path.cwd()
    remember_default_branch(cwd, load_event())

    note = None
    if paths:
        # The shards compared; merging needs no history.
        merge_files(paths, results, summary)
        print(f"perfgate: merged {len(paths)} results files into {results}")
        from perfgate.report.html import render_results_html
        from perfgate.sides import load_results_file

        write_text(out_dir / HTML_REPORT, render_results_html(load_results_file(results)))
        exit_code = 0
    elif is_shallow_checkout(cwd):
        # Measuring would end in no-baseline and a green build: an error, before the run.
        exit_code, note = PYTEST_NOT_RUN, SHALLOW_NOTE
    else:
        pytest_args = env_input("PERFGATE_PYTEST_ARGS", "--perfgate")
        mode = choice_input("PERFGATE_MODE", ("stored", "ab"), "stored")
        event = load_event()
        if mode == "ab" and pull_request_number(event) is not None:
            base = ab_base(cwd, event)
            print(f"perfgate: A/B against the merge-base {base[:12]}", flush=True)
            pytest_args = f"{pytest_args} --perfgate-ab={base}"
        elif branch := env_input("PERFGATE_BASELINE_BRANCH"):
            # The action's baseline-branch: the branch its pushes record is the one the gate
            # reads (it read baseline.branch, else the default branch: pull requests into
            # the input's branch passed as no-baseline).
            pytest_args = f"{pytest_args} {shlex.quote('--perfgate-baseline-branch=' + branch)}"
        event_name = os.environ.get("GITHUB_EVENT_NAME")
        if mode == "ab" and pull_request_number(event) is None and event_name != "push":
            # (A push records baselines, as it should; any other event deserves a word.)
            annotate(
                "notice",
                f"perfgate: mode 'ab' measures a pull request against its merge-base; this "
                f"'{event_name or 'unknown'}' run has none, so it is compared with the stored "
                "baselines",
            )
        command, results, summary = pytest_command(
            args.python,
            pytest_args,
            out_dir,
            cann_script(env_input("PERFGATE_CANN_ENV", "auto")),
        )
        exit_code = run_benchmarks(command)

    document = read_document(results)
    runs = read_runs(results)
    failed = failed_tests(document)
    verdict = overall_verdict(
        runs, exit_code, strict=document.get("strict") is True, failed_elsewhere=failed
    )
    markdown = summary.read_text(encoding="utf-8") if summary.is_file() else ""
    elsewhere = not_the_pull_request(cwd, load_event(), document.get("commit"))
    if elsewhere and verdict != ERROR:
        # pull_request_target checks out the base branch by default: a green comment on
        # the pull request would be the base's verdict.
        verdict, note = ERROR, elsewhere
    if verdict == ERROR:
        note = note or problem_note(exit_code, runs, results, failed)
        annotate("error", f"perfgate: {note}")
        # The note is perfgate's own Markdown; names in it are quoted (md.code).
        markdown = f"> [!CAUTION]\n> **perfgate could not gate this run**: {note}\n\n{markdown}"
    elif verdict == REGRESSION:
        names = [str(r.get("benchmark")) for r in runs or [] if r.get("verdict") == REGRESSION]
        # --perfgate-strict fails undecided verdicts too: named with theirs.
        undecided = [
            f"{r.get('benchmark')} ({r.get('verdict')})"
            for r in runs or []
            if r.get("verdict") not in (REGRESSION, Verdict.PASS.value, Verdict.IMPROVEMENT.value)
        ]
        failing = []
        if names:
            failing.append("performance regression in " + ", ".join(names))
        if undecided:
            failing.append("--perfgate-strict fails undecided verdicts: " + ", ".join(undecided))
        annotate("error", "perfgate: " + "; ".join(failing))
    changed = baseline_changes(cwd, load_event()) if not paths else []
    if changed:
        said = (
            f"this pull request changes {len(changed)} file(s) of the baseline store, and the "
            f"gate read the baselines as it leaves them: {_code_list(changed)}. Baselines are "
            "recorded by "
            "the push to the baseline branch; review these changes as you would the code's"
        )
        annotate("warning", f"perfgate: {said}")
        markdown = f"> [!WARNING]\n> {said}\n\n{markdown}"
    if (out_dir / HTML_REPORT).is_file():
        markdown += html_report_line()
    # The pull request comment and the artifact are summary.md: the same words as the job
    # summary, the caution of an error included (it said pass over a failed test).
    write_text(summary, markdown)
    append_summary(markdown)

    shown = "not run" if exit_code == PYTEST_NOT_RUN else str(exit_code)
    print(f"perfgate: verdict {verdict} (pytest exit code {shown})")
    set_output("verdict", verdict)
    set_output("exit-code", str(exit_code))
    set_output("output-dir", str(out_dir))
    set_output("results-path", str(results) if results.is_file() else "")
    set_output("summary-path", str(summary))
    html = out_dir / HTML_REPORT
    set_output("html-path", str(html) if html.is_file() else "")
    return 0


if __name__ == "__main__":
    run_main(main)

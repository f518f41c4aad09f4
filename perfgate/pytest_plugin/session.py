"""State of one ``pytest --perfgate`` session: settings, where things go, the results so far,
and the reports written at the end (results JSON, Markdown, terminal table)."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from perfgate.analysis.compare import Comparison
from perfgate.config import load_settings, with_baseline_branch
from perfgate.errors import PerfgateError, clipped
from perfgate.profilers.runner import measuring_command, measuring_env
from perfgate.records import PytestIdentity, RunRecord
from perfgate.report import markdown as md
from perfgate.report.results import (
    BenchmarkResult,
    recording_warnings,
    results_document,
    results_markdown,
    summary_table,
)
from perfgate.rules import Settings
from perfgate.store.keys import safe_name
from perfgate.verdict import Verdict

INTERRUPTED_NOTE = (
    "the session was interrupted: only the benchmarks that finished are listed, and the "
    "others were not gated"
)


@dataclass
class PerfgateSession:
    settings: Settings
    rootdir: Path
    out_dir: Path
    json_path: Path
    md_path: Path
    profiler: str
    update: bool
    allow_dirty: bool
    strict: bool
    baseline_ref: str | None
    html_path: Path | None = None
    commit: dict[str, Any] = field(default_factory=dict)
    results: list[BenchmarkResult] = field(default_factory=list)
    names: dict[str, str] = field(default_factory=dict)  # benchmark name → test node id
    report_error: str | None = None  # why the reports could not be written
    interrupted: bool = False  # stopped by Ctrl-C: the reports hold what finished
    # Tests (and collections) pytest failed for reasons other than a benchmark's verdict: a
    # job must not read the verdicts alone as the session's outcome.
    failed_elsewhere: list[dict[str, str]] = field(default_factory=list)
    refused_tests: dict[str, str] = field(default_factory=dict)  # node id → name reported
    # Which process of a multi-process measurement this session is (0: the one the user
    # started), and where a measuring-only session leaves each benchmark's record.
    process: int = 0
    records_dir: Path | None = None
    # --perfgate-update: the other processes' record folders, and what went wrong in them.
    process_dirs: list[Path] = field(default_factory=list)
    process_problems: list[str] = field(default_factory=list)
    # --perfgate-ab=REF: the base, and what the A/B run decided, by benchmark.
    ab_ref: str | None = None
    ab_comparisons: dict[str, Comparison] = field(default_factory=dict)
    ab_records: dict[str, RunRecord] = field(default_factory=dict)

    @functools.cached_property
    def repository_top(self) -> Path | None:
        """The top folder of the git work tree (the tests' ids are relative to it)."""
        from perfgate.store.git import work_tree

        return work_tree(self.rootdir)

    @property
    def measure_only(self) -> bool:
        """A session started by another to measure one more process: no gate, no reports."""
        return self.records_dir is not None

    @classmethod
    def from_config(cls, config: pytest.Config) -> PerfgateSession:
        rootdir = project_root(config)
        paths = _Paths(config, rootdir)
        config_file = paths.option_or_ini("perfgate_config")
        settings = with_baseline_branch(
            load_settings(config_file, root=rootdir),
            config.getoption("perfgate_baseline_branch"),
            "--perfgate-baseline-branch",
        )
        out_dir = paths.option_or_ini("perfgate_out") or rootdir / "perfgate-out"
        try:  # now, not in the middle of the first benchmark (which would fail as a test)
            out_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            why = "a file is there" if out_dir.exists() else exc.strerror or str(exc)
            raise PerfgateError(
                f"output directory {out_dir}: cannot be made ({why}); expected a directory "
                "perfgate may write in (--perfgate-out, or perfgate_out in the ini)"
            ) from None
        strict_option = config.getoption("perfgate_strict")
        try:
            strict_ini = config.getini("perfgate_strict")
        except (ValueError, pytest.UsageError) as exc:  # pytest 9 raises the latter
            raise PerfgateError(
                f"ini option perfgate_strict: {exc} (expected true or false)"
            ) from None
        profiler = (
            config.getoption("perfgate_profiler")
            or str(config.getini("perfgate_profiler") or "")
            or settings.profiler
        )
        session = cls(
            settings=settings,
            rootdir=rootdir,
            out_dir=out_dir,
            json_path=paths.option("perfgate_json") or out_dir / "results.json",
            md_path=paths.option("perfgate_md") or out_dir / "summary.md",
            profiler=profiler,
            update=bool(config.getoption("perfgate_update")),
            allow_dirty=bool(config.getoption("perfgate_allow_dirty")),
            strict=bool(strict_option if strict_option is not None else strict_ini),
            baseline_ref=config.getoption("perfgate_baseline_ref"),
            process=int(config.getoption("perfgate_process") or 0),
            html_path=paths.option("perfgate_html"),
        )
        _check_report_paths(
            {
                "--perfgate-json": session.json_path,
                "--perfgate-md": session.md_path,
                "--perfgate-html": session.html_path,
            }
        )
        records = config.getoption("perfgate_records")
        if records:
            session.records_dir = Path(records)
            session.update = False
        else:
            session.ab_ref = config.getoption("perfgate_ab")
        if session.ab_ref and session.update:
            raise PerfgateError(
                "--perfgate-ab compares with a base measured now and writes no baseline: "
                "drop --perfgate-update"
            )
        if session.baseline_ref and config.getoption("perfgate_baseline_branch"):
            raise PerfgateError(
                "give either --perfgate-baseline-ref or --perfgate-baseline-branch, not both "
                "(the ref is where the baselines are looked up from)"
            )
        if session.ab_ref and session.baseline_ref:
            raise PerfgateError(
                "--perfgate-ab compares with a base measured now, not with stored baselines: "
                "drop --perfgate-baseline-ref (or --perfgate-ab)"
            )
        if session.ab_ref and getattr(config.option, "numprocesses", None):
            raise PerfgateError(
                "--perfgate-ab runs its own processes one at a time: drop -n (pytest-xdist)"
            )
        session.commit, why_no_commit = session._commit_info()
        if session.update and not session.commit and not session.measure_only:
            # git's own words: no repository, or one without commits yet.
            raise PerfgateError(
                f"--perfgate-update records the baselines of HEAD, but {why_no_commit}"
            )
        if session.baseline_ref:
            from perfgate.store.git import resolve

            resolve(rootdir, session.baseline_ref)  # an unknown ref is a usage error, now
        if session.update and session.commit.get("dirty") and not session.allow_dirty:
            raise PerfgateError(
                f"{rootdir}: the working tree has uncommitted changes, so HEAD "
                f"{str(session.commit['commit'])[:12]} is not what would be measured; commit "
                "them, or pass --perfgate-allow-dirty to record baselines marked dirty"
            )
        if session.update and not session.measure_only:
            session._check_store_writable()
        return session

    def _check_store_writable(self) -> None:
        """Before anything is measured for it: a store that cannot take the baselines (a
        read-only checkout, a link to nothing, a file in its place) is said now, not after
        every benchmark ran."""
        from perfgate.gate import store_root
        from perfgate.store.baselines import writable_store

        writable_store(store_root(self.rootdir, self.settings))

    def _commit_info(self) -> tuple[dict[str, Any], str]:
        """HEAD's commit, branch and dirtiness, or nothing and why there is none."""
        from perfgate.gate import store_root
        from perfgate.store.git import current_commit

        try:
            info = current_commit(self.rootdir, store=store_root(self.rootdir, self.settings))
        except PerfgateError as exc:
            return {}, str(exc)
        return {"commit": info.sha, "branch": info.branch, "dirty": info.dirty}, ""

    def register_name(self, name: str, nodeid: str) -> None:
        """Benchmark names are baseline paths: two tests may not share one, nor names that
        differ only in case (one folder on macOS and Windows checkouts: one benchmark's
        baselines would be the other's)."""
        other = self.names.get(name)
        if other is not None and other != nodeid:
            raise PerfgateError(
                f"benchmark name {name!r} is used by {other} and {nodeid}; give one of them "
                "@pytest.mark.perfgate(name=...)"
            )
        folded = next(
            (n for n in self.names if n.lower() == name.lower() and n != name),
            None,
        )
        if folded is not None and self.names[folded] != nodeid:
            raise PerfgateError(case_clash(folded, self.names[folded], name, nodeid))
        self.names[name] = nodeid

    def keep_refusal(self, name: str, reason: str, nodeid: str) -> None:
        """A benchmark refused before its test ran (declared wrongly, or its fixtures failed)
        goes into the reports as an ``error``; once, however many tests share its name, saying
        each problem."""
        from perfgate.pytest_plugin.fixture import unmeasured_result

        self.refused_tests[nodeid] = name
        refusal = unmeasured_result(self, name, reason)
        for result in self.results:
            if result.record["benchmark"] == name:
                if is_refusal(result):
                    _say_too(result, refusal)
                return
        self.results.append(refusal)

    def drop_refusal(self, nodeid: str) -> None:
        """The refused test failed as its ``xfail`` mark expects: like any xfailed benchmark,
        in no report."""
        name = self.refused_tests.pop(nodeid, None)
        if name is not None and name not in self.refused_tests.values():
            self.results[:] = [
                r for r in self.results if not (r.record["benchmark"] == name and is_refusal(r))
            ]

    def profile_dir(self, name: str) -> Path:
        path = self.out_dir / "profiles" / name
        path.mkdir(parents=True, exist_ok=True)
        return path

    # ------------------------------------------------------------------ processes

    def spawn_processes(self, config: pytest.Config, write: Any) -> None:
        """``--perfgate-update``: measure the selected benchmarks in ``processes - 1`` more
        pytest processes, one after the other, before this one measures them: a baseline then
        carries the noise between processes, not only between rounds of one."""
        count = self.settings.rules.statistics.processes  # a session's setting (config)
        args = list(config.invocation_params.args)
        # An earlier session's records (more processes then, or one interrupted) must not
        # be merged into this one's baselines: xdist workers find the folders by listing.
        shutil.rmtree(self.out_dir / "processes", ignore_errors=True)
        for process in range(1, count):
            folder = self.out_dir / "processes" / str(process)
            folder.mkdir(parents=True)
            xdist = config.pluginmanager.hasplugin("xdist")
            command = measuring_command(args, process, folder / "records", xdist)
            write(f"perfgate: measuring in process {process + 1} of {count} for the baselines")
            done = subprocess.run(
                command,
                cwd=config.invocation_params.dir,
                env=measuring_env(),
                capture_output=True,
                text=True,
                check=False,
            )
            if done.returncode != 0:
                # pytest's own refusals (an unknown option, an ini error) are on stderr.
                said = (
                    done.stderr.strip().splitlines()[-3:] or done.stdout.strip().splitlines()[-3:]
                )
                problem = (
                    f"process {process + 1} exited with {done.returncode} ({' | '.join(said)})"
                )
                self.process_problems.append(problem)
                # Exit 1: some test failed there (this session will say which); the other
                # codes stop a session before it measures anything.
                effect = (
                    "its failed benchmarks will carry fewer processes"
                    if done.returncode == 1
                    else "it measured nothing: the baselines will carry fewer processes than "
                    "statistics.processes asks"
                )
                write(f"perfgate: warning: {problem}; {effect}")
            self.process_dirs.append(folder / "records")

    def run_ab(self, config: pytest.Config, write: Any) -> None:
        """``--perfgate-ab=REF``: measure REF and this tree in alternating processes now;
        each benchmark's test then reports the verdict of its pairs."""
        from perfgate.ab import run_ab

        assert self.ab_ref is not None
        stats = self.settings.rules.statistics
        out = self.out_dir / "ab"
        shutil.rmtree(out, ignore_errors=True)
        run = run_ab(
            self.rootdir,
            self.ab_ref,
            list(config.invocation_params.args),
            self.settings,
            pairs=stats.ab_pairs,
            out_dir=out,
            xdist=config.pluginmanager.hasplugin("xdist"),
            say=write,
        )
        write(f"perfgate ab: {run.pairs} pairs measured in {run.seconds:.0f} s")
        self.ab_comparisons = {c.benchmark: c for c in run.comparisons}
        self.ab_records = run.records.get("head", {})

    def write_record(self, record: RunRecord) -> None:
        """A measuring-only session leaves each benchmark's record for the one that asked."""
        assert self.records_dir is not None
        _write_text(
            self.records_dir / f"{record['benchmark']}.json",
            json.dumps(record, allow_nan=False),
        )

    def other_processes(self, benchmark: str) -> list[RunRecord]:
        """The records the other processes measured of ``benchmark``."""
        from perfgate.records import read_json, validate_run

        # An xdist worker was not the one that spawned them: the folders are fixed.
        folders = self.process_dirs or sorted((self.out_dir / "processes").glob("*/records"))
        found = []
        for folder in folders:
            path = folder / f"{benchmark}.json"
            if path.is_file():
                record = validate_run(read_json(path, "process record"), str(path))
                # Only what this session's processes measured, of the commit being recorded.
                if record.get("commit") == self.commit.get("commit"):
                    found.append(record)
        return found

    # ------------------------------------------------------------------ xdist

    @property
    def partial_dir(self) -> Path:
        return self.out_dir / ".workers"

    def clear_partials(self) -> None:
        """The controller starts with no worker results, and no reports, of an earlier
        session: a session that measures nothing (every benchmark deselected, or the run
        interrupted before the end) must not leave the last one's verdict to be read as its
        own."""
        if self.partial_dir.is_dir():
            for path in self.partial_dir.glob("*.json"):
                path.unlink()
        if not self.measure_only:
            for report in (self.json_path, self.md_path, self.html_path):
                if report is not None and report.is_file():
                    report.unlink()
            # An earlier update's extra processes: their records and traces beside this
            # session's profiles read as this session's.
            if not self.update:
                shutil.rmtree(self.out_dir / "processes", ignore_errors=True)

    def write_partial(self, worker_id: str) -> None:
        """An xdist worker writes its results for the controller to merge."""
        if not self.results:
            return
        payload = [r.as_dict() for r in self.results]
        target = self.partial_dir / f"{worker_id}.json"
        _write_text(target, json.dumps(payload, allow_nan=False))

    def merge_partials(self) -> None:
        refused = {
            (r.record["benchmark"], r.record["env"]): r for r in self.results if is_refusal(r)
        }
        for path in sorted(self.partial_dir.glob("*.json")) if self.partial_dir.is_dir() else []:
            for run in json.loads(path.read_text(encoding="utf-8")):
                result = BenchmarkResult.from_dict(run)
                # Every worker collects every test and finds the same wrongly declared
                # benchmarks: the tests of one refused name can run on two workers, each
                # with its own words. One run of a name, saying all of them.
                key = (result.record["benchmark"], result.record["env"])
                kept = refused.get(key)
                if kept is not None and is_refusal(result):
                    _say_too(kept, result)
                    continue
                if is_refusal(result):
                    refused[key] = result
                self.results.append(result)
            path.unlink()
        self.results.sort(key=lambda r: r.record["benchmark"])

    # ------------------------------------------------------------------ end of session

    def write_reports(self) -> None:
        if self.measure_only:
            return
        self._write_reports()

    def _write_reports(self) -> None:
        """Write the results JSON and the Markdown report (also to the job summary).

        Raises:
            PerfgateError: a report could not be written (a full disk …); nothing is left
                half-written.
        """
        self.merge_partials()
        if not self.results:
            return
        document = results_document(
            self.results, self.commit, failed_elsewhere=self.failed_elsewhere, strict=self.strict
        )
        _write_text(self.json_path, json.dumps(document, indent=2, allow_nan=False) + "\n")
        markdown = results_markdown(self.results)
        if self.interrupted:
            markdown = f"> **{INTERRUPTED_NOTE}**\n\n{markdown}"
        _write_text(self.md_path, markdown)
        summary = os.environ.get("GITHUB_STEP_SUMMARY")
        if summary:
            try:
                shown = md.job_summary_part(
                    summary, markdown, f"the whole report is {self.md_path}"
                )
                with open(summary, "a", encoding="utf-8") as handle:
                    handle.write(shown)
            except OSError as exc:
                raise PerfgateError(
                    f"$GITHUB_STEP_SUMMARY: {summary}: cannot append to the job summary "
                    f"({exc.strerror or exc}); the results file and report were written"
                ) from None

    def report(self, write: Any) -> None:
        """Print the summary table and where the reports went (``write`` prints a line)."""
        if not self.results:
            return
        for line in summary_table(self.results).splitlines():
            write(line)
        if self.interrupted:
            write(INTERRUPTED_NOTE)
        if self.report_error is None:
            write(f"results: {self.json_path}")
            write(f"report:  {self.md_path}")
        for line in self.settings.misnamed(r.record["benchmark"] for r in self.results):
            write(f"warning: {line}")
        for result in self.results:
            for note in recording_warnings(result):
                write(f"warning: {result.record['benchmark']}: {note}")
        unjudged = [r for r in self.results if r.verdict in (Verdict.NO_BASELINE, Verdict.ERROR)]
        if unjudged and is_shallow_checkout(self.rootdir):
            write(
                "this checkout is a shallow clone: baselines of earlier commits cannot be "
                "found, so the gate is off; fetch the whole history (`fetch-depth: 0` on "
                "actions/checkout, or `git fetch --unshallow`)"
            )
        elif any(r.verdict is Verdict.NO_BASELINE for r in self.results) and not self.commit:
            # --perfgate-update would refuse: baselines are kept by commit.
            write(
                "no baselines without a commit: baselines are kept by git commit, and this "
                "project has none yet (commit it, then record them with `pytest --perfgate "
                "--perfgate-update`)"
            )
        elif any(r.verdict is Verdict.NO_BASELINE for r in self.results):
            write(
                "no baseline yet for some benchmarks on this runner: record them with "
                "`pytest --perfgate --perfgate-update` (on the baseline branch, clean tree)"
            )
            from perfgate.gate import OTHER_ENVIRONMENTS, OTHER_STORES

            for result in self.results:  # another runner's or store's baselines: a mistake
                notes = result.comparison.notes if result.comparison is not None else []
                for note in notes:
                    if OTHER_ENVIRONMENTS in note or OTHER_STORES in note:
                        write(note)


def _say_too(kept: BenchmarkResult, other: BenchmarkResult) -> None:
    """Add ``other``'s notes that ``kept`` lacks to it: two refusals of one name, one run."""
    assert kept.comparison is not None and other.comparison is not None
    notes = kept.comparison.notes
    notes.extend(n for n in other.comparison.notes if n not in notes)


def is_refusal(result: BenchmarkResult) -> bool:
    """Whether ``result`` is the error of a benchmark that measured nothing (refused, or
    crashed before its first step)."""
    from perfgate.gate import holds_measurement

    verdict = result.comparison.verdict if result.comparison is not None else None
    return verdict is Verdict.ERROR and not holds_measurement(result.record)


def project_root(config: pytest.Config) -> Path:
    """Where perfgate's settings, baseline store and default output live.

    pytest's rootdir depends on where pytest was started when no ini file fixes it (the
    common folder of the paths given): from a subfolder of the repository it is that
    subfolder. So the root is the nearest folder from the rootdir up to the top of the git
    repository that holds perfgate's settings; else the rootdir when an ini file fixed it;
    else the top of the repository. Outside git, the rootdir.
    """
    from perfgate.config import project_folder

    return project_folder(Path(config.rootpath), fixed=config.inipath is not None)


class _Paths:
    """Paths from options and the ini file, each resolved where a user would read it: a
    command-line path against the folder pytest was started in, an ini value against the
    ini file's folder (as pytest's own ``paths`` ini values are)."""

    def __init__(self, config: pytest.Config, rootdir: Path) -> None:
        self.config = config
        self.invocation = Path(config.invocation_params.dir)
        self.ini_dir = Path(config.inipath).parent if config.inipath else rootdir

    def option(self, name: str) -> Path | None:
        value = self.config.getoption(name)
        return self.invocation / value if value else None

    def option_or_ini(self, name: str) -> Path | None:
        chosen = self.option(name)
        if chosen is not None:
            return chosen
        value = self.config.getini(name)  # "" when the ini does not set it
        return self.ini_dir / str(value) if value else None


# What each report of perfgate's holds within its first KiB or so.
_REPORT_SIGNS = re.compile(
    r'"format"\s*:\s*"perfgate\.results"|### perfgate|<meta name="generator" content="perfgate'
)


def _written_by_perfgate(path: Path) -> bool:
    """Whether the file at ``path`` is empty or a report perfgate wrote (a results file, a
    Markdown report, an HTML page): one it may replace."""
    try:
        with path.open("rb") as handle:
            head = handle.read(4096).decode("utf-8", "replace")
    except OSError:
        return False
    return not head.strip() or _REPORT_SIGNS.search(head) is not None


def _check_report_paths(paths: dict[str, Path | None]) -> None:
    """Each report can be written, and no two are one file; checked before a benchmark
    runs, not after all of them (when a mistake would cost the whole session)."""
    seen: dict[Path, str] = {}
    for option, path in paths.items():
        if path is None:
            continue
        if path.is_dir():
            raise PerfgateError(f"{option}: {path} is a directory (expected a file to write)")
        existing = next(p for p in (path.parent, *path.parent.parents) if p.exists())
        if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
            why = "is a file" if not existing.is_dir() else "is not writable"
            raise PerfgateError(f"{option}: {path} cannot be written ({existing} {why})")
        same = seen.get(path.resolve())
        if same is not None:
            raise PerfgateError(
                f"{same} and {option} name the same file {path}: one report would replace the other"
            )
        seen[path.resolve()] = option
        if path.is_file() and not _written_by_perfgate(path):
            # The session removes its earlier reports when it starts: never another file
            # (a test module, perfgate.yaml, notes) that the option names by mistake.
            raise PerfgateError(
                f"{option}: {path} exists and is no report perfgate wrote; it would be "
                "replaced (give a new path, or remove the file first)"
            )
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary and (Path(summary).is_dir() or not Path(summary).parent.is_dir()):
        raise PerfgateError(
            f"$GITHUB_STEP_SUMMARY: {summary} is no file perfgate can append the job summary "
            "to (a directory, or in a folder that does not exist)"
        )


def is_shallow_checkout(rootdir: Path) -> bool:
    from perfgate.store.git import is_shallow

    try:
        return is_shallow(rootdir)
    except PerfgateError:
        return False


def _write_text(path: Path, text: str) -> None:
    from perfgate.store.atomic import atomic_write

    try:
        atomic_write(path, text.encode("utf-8"))
    except OSError as exc:
        raise PerfgateError(
            f"{path}: cannot write ({exc.strerror or exc}); nothing was written"
        ) from None


def item_benchmark_name(item: pytest.Item) -> str:
    """The benchmark name of a test: its marker's ``name=``, else :func:`default_name`."""
    marker = item.get_closest_marker("perfgate")
    name = marker.kwargs.get("name") if marker is not None else None
    return str(name) if name is not None else default_name(item)


def default_name(item: pytest.Item) -> str:
    """The benchmark name of a test without a marker's ``name=``: :func:`benchmark_name`."""
    callspec = getattr(item, "callspec", None)
    return benchmark_name(
        item.nodeid,
        getattr(item, "originalname", item.name),
        callspec.id if callspec is not None else None,
    )


# A default repr's address (``<Model object at 0x7f…>``) differs in every process.
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")
_MAX_PARAMS = 64


def identity_of_test(item: pytest.Item, top: Path | None) -> PytestIdentity:
    """Which test measures a benchmark (``test`` in its record): its node id with the file
    relative to ``top`` (the repository's top folder: the same wherever pytest starts), and
    its pytest parameters as text. A baseline of another test under the same name (two
    files, two shards) is then never taken for this one's, and parameters that moved under
    index ids (``shape0``) are said."""
    nodeid = item.nodeid
    path = Path(str(getattr(item, "path", "")))
    if top is not None and "::" in nodeid and path.is_absolute():
        with contextlib.suppress(ValueError):  # a test outside the repository: pytest's id
            nodeid = f"{path.resolve().relative_to(top).as_posix()}::{nodeid.split('::', 1)[1]}"
    identity: PytestIdentity = {"id": clipped(nodeid, 1_000)}
    callspec = getattr(item, "callspec", None)
    if callspec is not None and callspec.params:
        identity["params"] = {
            clipped(str(name), 64): clipped(_ADDRESS.sub("", _shown_param(value)), 200)
            for name, value in list(callspec.params.items())[:_MAX_PARAMS]
        }
    return identity


def _shown_param(value: object) -> str:
    try:
        return repr(value)
    except Exception:  # a repr that raises must not fail the benchmark
        return f"<{type(value).__name__}>"


def case_clash(first: str, first_test: str, name: str, test: str) -> str:
    """Why benchmark ``name`` of ``test`` is refused beside ``first`` of ``first_test``."""
    return (
        f"benchmark names {first!r} ({first_test}) and {name!r} ({test}) differ only in case: "
        "on a case-insensitive file system (macOS, Windows) their baselines would be one "
        "folder; give one of them another @pytest.mark.perfgate(name=...)"
    )


def benchmark_name(nodeid: str, originalname: str, callspec_id: str | None) -> str:
    """The default benchmark name of a test: its function name without ``test_``, plus
    its parameters, safe as a path component (``cnn_train``, ``cnn_train-bs32``)."""
    name = originalname[5:] if originalname.startswith("test_") else originalname
    if callspec_id:
        name = f"{name}-{callspec_id}"
    return safe_name(name) or safe_name(nodeid) or "unnamed"

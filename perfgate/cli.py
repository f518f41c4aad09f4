"""The ``perfgate`` command line: a thin shell over :mod:`perfgate.ingest`,
:mod:`perfgate.analysis` and :mod:`perfgate.report`.

Exit status: 0 success, 1 regression (gating commands), 2 usage, configuration or data
error — one line on stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from perfgate import __version__
from perfgate.errors import PerfgateError, os_error_line
from perfgate.options import add_config_option, add_gate_options, given, positive_int, whole_number
from perfgate.rules import METRICS
from perfgate.verdict import EXIT_ERROR, EXIT_INTERRUPTED, EXIT_OK

if TYPE_CHECKING:
    from perfgate.analysis.compare import Comparison
    from perfgate.records import RunRecord
    from perfgate.rules import Settings

FORMATS = ("table", "json", "md")
# Commits of the main line `perfgate history` walks unless told.
HISTORY_DEPTH = 200


class UsageError(PerfgateError):
    """A command line that cannot work as given (exit 2)."""


class _Parser(argparse.ArgumentParser):
    """argparse that exits with 2 and one line for usage errors (as it does), to stderr."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        self.exit(EXIT_ERROR, f"{self.prog}: error: {message}\n")


def _add_report_options(
    parser: argparse.ArgumentParser,
    *,
    top: int,
    top_help: str,
    formats: tuple[str, ...] = FORMATS,
) -> None:
    """--format, --top and -o: the same for every command that prints a report."""
    parser.add_argument(
        "--format", choices=formats, default="table", help="output format. Default: table"
    )
    parser.add_argument(
        "--top", type=positive_int, default=top, metavar="N", help=f"{top_help}. Default: {top}"
    )
    parser.add_argument(
        "-o",
        "--output",
        type=given("a file"),
        metavar="FILE",
        help="write the report to FILE instead of stdout",
    )


def _repository_options() -> _Parser:
    """--config and --repo: every command that reads the repository's configuration."""
    common = _Parser(add_help=False)
    add_config_option(common.add_argument)
    common.add_argument(
        "--repo",
        type=given("a directory"),
        metavar="DIR",
        default=".",
        help="a folder of the project whose baselines and configuration to use (the nearest "
        "folder up to the repository's top with perfgate's settings, else with a pytest ini "
        "file, else the top: where pytest --perfgate takes them). Default: .",
    )
    return common


def build_parser() -> argparse.ArgumentParser:
    repository = _repository_options()
    parser = _Parser(
        prog="perfgate",
        description="Performance-regression gate for ML models: inspect profiles "
        "(msprof, torch_npu, torch.profiler) and compare them.",
    )
    parser.add_argument("--version", action="version", version=f"perfgate {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    commands.required = True

    inspect = commands.add_parser(
        "inspect",
        help="metrics and top operators of one profile",
        description="Read one profile (directory or trace file; the format is detected) and "
        "print step time, the step breakdown, utilization, copy ratio and the top operators.",
    )
    inspect.add_argument(
        "path",
        type=given("a profile path", has_default=False),
        metavar="PROFILE",
        help="a *_ascend_pt or PROF_* directory, a torch.profiler trace (.json/.json.gz), "
        "a timeline, kernel_details.csv, or an msprof/torch_npu .db",
    )
    _add_report_options(
        inspect, top=10, top_help="operators to list (table and md; json lists all unless given)"
    )
    add_config_option(inspect.add_argument)
    inspect.set_defaults(handler=_cmd_inspect, repo=".")

    compare = commands.add_parser(
        "compare",
        parents=[repository],
        help="compare a run with its baseline and decide: pass or regression",
        description="Compare CURRENT with BASELINE (each a profile directory, a trace, a "
        "baseline file or a results file). With CURRENT alone, the baseline comes from the "
        "store in the repository (merge-base with the baseline branch, then first-parent "
        "ancestors). Exit status: 0 pass, 1 regression, 2 usage or data error.",
    )
    compare.add_argument(
        "sides", nargs="+", type=given("a path", has_default=False), metavar="[BASELINE] CURRENT"
    )
    add_gate_options(compare.add_argument)
    compare.add_argument(
        "--benchmark",
        metavar="NAME",
        help="benchmark name for a profile side (default: the path's name); of a results "
        "file, compare only this benchmark's run",
    )
    compare.add_argument(
        "--env",
        metavar="ENV",
        help="runner environment key for a profile side (default: from the profile, e.g. "
        "ascend910b4-x8, cpu-x86_64); of a results or baseline file, only runs of this env",
    )
    _add_report_options(compare, top=5, top_help="operators to list per benchmark")
    compare.set_defaults(handler=_cmd_compare)

    baseline = commands.add_parser("baseline", help="record, list, show and prune baselines")
    actions = baseline.add_subparsers(dest="action", metavar="ACTION", parser_class=_Parser)
    actions.required = True
    update = actions.add_parser(
        "update",
        parents=[repository],
        help="record the baseline of HEAD from a results file or a profile",
        description="Write baselines/<benchmark>/<env>/<HEAD sha>.json from a results file "
        "(what `pytest --perfgate` writes) or a profile. Refuses a dirty working tree.",
    )
    update.add_argument(
        "--from",
        dest="source",
        type=given("a path", has_default=False),
        required=True,
        metavar="PATH",
        help="a results file, or a profile directory or trace",
    )
    update.add_argument(
        "--benchmark",
        metavar="NAME",
        help="benchmark name for a profile (default: the path's name); of a results file, "
        "record only this benchmark's run",
    )
    update.add_argument(
        "--env",
        metavar="ENV",
        help="runner environment key for a profile; of a results file, only runs of this env",
    )
    update.add_argument(
        "--allow-dirty",
        action="store_true",
        help="record even with uncommitted changes (marked dirty)",
    )
    update.add_argument(
        "--allow-other-commit",
        action="store_true",
        help="record a results file measured at another commit as HEAD's baseline",
    )
    update.set_defaults(handler=_cmd_baseline_update)

    listing = actions.add_parser("list", parents=[repository], help="list the stored baselines")
    listing.set_defaults(handler=_cmd_baseline_list)

    show = actions.add_parser(
        "show", parents=[repository], help="show one baseline: its commit, samples, operators"
    )
    show.add_argument(
        "target",
        type=given("a file or a benchmark name", has_default=False),
        metavar="FILE_OR_BENCHMARK",
        help="a baseline file, or a benchmark name (looked up from HEAD)",
    )
    show.add_argument("--env", metavar="ENV", help="runner environment. Default: the only one")
    show.add_argument(
        "--baseline-ref",
        type=given("a git ref"),
        metavar="REF",
        help="look the baseline up from REF instead of the merge-base with the baseline branch",
    )
    show.add_argument("--format", choices=("table", "json"), default="table", help="Default: table")
    show.set_defaults(handler=_cmd_baseline_show)

    prune = actions.add_parser(
        "prune",
        parents=[repository],
        help="keep the newest N baselines per benchmark and env; drop those of gone commits",
        description="Delete baselines: with --keep N, main-line baselines older than the "
        "newest N per benchmark and env (others stay: open PRs, release branches); with "
        "--unreachable, those of commits that no branch, tag or remote branch of this clone "
        "reaches (squash-merged or force-pushed PR commits, deleted branches). Commit the "
        "deletion as any change of the store.",
    )
    prune.add_argument(
        "--keep",
        type=positive_int,
        metavar="N",
        help="keep the newest N baselines of main-line commits per benchmark and env",
    )
    prune.add_argument(
        "--unreachable",
        action="store_true",
        help="remove baselines of commits that no ref of this clone reaches (fetch the "
        "branches you keep first; refused in a shallow clone)",
    )
    prune.add_argument("--dry-run", action="store_true", help="list what would go; delete nothing")
    prune.set_defaults(handler=_cmd_baseline_prune)

    report = commands.add_parser(
        "report",
        help="render a results file (what pytest --perfgate wrote) as a table, Markdown, "
        "JSON or a self-contained HTML page",
        description="Render the comparisons in a perfgate results file again, e.g. for a job "
        "summary or a PR comment; --format html writes one self-contained page with plots "
        "(open it offline). Exit status as for compare: 0 pass, 1 regression.",
    )
    report.add_argument(
        "results",
        type=given("a file", has_default=False),
        metavar="RESULTS",
        help="a perfgate.results JSON file",
    )
    report.add_argument(
        "--strict",
        action="store_true",
        help="exit 1 also for no-baseline, incomparable and unstable",
    )
    _add_report_options(
        report, top=5, top_help="operators to list per benchmark", formats=(*FORMATS, "html")
    )
    report.set_defaults(handler=_cmd_report)

    ab = commands.add_parser(
        "ab",
        parents=[repository],
        help="same-runner A/B: a base commit against this tree, interleaved, no baseline",
        description="Check out BASE in a temporary git worktree and measure it and this tree "
        "on this runner in alternating fresh pytest processes (ABBA…), then judge every "
        "benchmark on the paired differences. Needs no stored baseline and writes none. "
        "Arguments after -- go to pytest (e.g. -- examples/ -k cnn). Exit status as for "
        "compare: 0 pass, 1 regression, 2 usage or data error.",
    )
    ab.add_argument(
        "--base",
        type=given("a git ref", has_default=False),
        required=True,
        metavar="REF",
        help="the commit to compare with",
    )
    ab.add_argument(
        "--pairs",
        type=_pairs,
        metavar="N",
        help="base/tree process pairs. Default: statistics.ab_pairs (4)",
    )
    ab.add_argument(
        "--strict",
        action="store_true",
        help="exit 1 also for no-baseline, incomparable and unstable",
    )
    ab.add_argument(
        "--out",
        type=given("a directory"),
        metavar="DIR",
        default="perfgate-out/ab",
        help="where the sessions' records and the results file go. Default: perfgate-out/ab",
    )
    _add_report_options(ab, top=5, top_help="operators to list per benchmark")
    ab.add_argument("pytest_args", nargs="*", metavar="-- PYTEST_ARGS")
    ab.set_defaults(handler=_cmd_ab)

    hist = commands.add_parser(
        "history",
        parents=[repository],
        help="a benchmark's metric along the main line, with change points and slow creep",
        description="The metric of BENCHMARK over the baselines of the main line's commits "
        "(first parents of the baseline branch), the centre and spread of each, the change "
        "points PELT finds in it (ruptures) with the commits each entered in, and slow "
        "creep: changes each within the threshold that add up past it (docs/history.md).",
    )
    hist.add_argument("benchmark", metavar="BENCHMARK")
    hist.add_argument("--env", metavar="ENV", help="Default: every env that has baselines")
    hist.add_argument(
        "--metric",
        choices=tuple(METRICS),
        default="step_time",
        help="the metric to follow. Default: step_time",
    )
    hist.add_argument(
        "--max-depth",
        type=positive_int,
        metavar="N",
        help=f"commits of the main line to walk. Default: {HISTORY_DEPTH}",
    )
    hist.add_argument(
        "--format",
        choices=("table", "json", "md", "html", "png"),
        default="table",
        help="output format (png needs -o and one env). Default: table",
    )
    hist.add_argument(
        "-o",
        "--output",
        type=given("a file"),
        metavar="FILE",
        help="write the report to FILE instead of stdout",
    )
    hist.set_defaults(handler=_cmd_history)
    return parser


def _pairs(text: str) -> int:
    """``--pairs``: an A/B run needs two pairs to measure the noise between them."""
    return whole_number(text, 2, " (an A/B run needs 2 pairs)")


def _settings(args: argparse.Namespace) -> Settings:
    from perfgate.config import load_settings, with_baseline_branch

    settings = load_settings(args.config, root=args.repo)
    return with_baseline_branch(
        settings, getattr(args, "baseline_branch", None), "--baseline-branch"
    )


def _cmd_compare(args: argparse.Namespace) -> int:
    from perfgate.analysis.compare import compare_runs
    from perfgate.gate import (
        StoreLookup,
        gate_against_store,
        judging_rules,
        pair_records,
        unmeasured,
    )
    from perfgate.sides import load_side

    if len(args.sides) > 2:
        raise UsageError("compare takes at most two paths: [BASELINE] CURRENT")
    if len(args.sides) == 2 and args.baseline_ref:
        raise UsageError("give either BASELINE or --baseline-ref, not both")
    if args.baseline_ref and args.baseline_branch:
        # The ref is where the walk starts: the branch would be read by nothing.
        raise UsageError("give either --baseline-ref or --baseline-branch, not both")
    settings = _settings(args)
    advisor = settings.advisor
    current = load_side(args.sides[-1], benchmark=args.benchmark, env=args.env, advisor=advisor)
    for line in settings.misnamed(record["benchmark"] for record in current.records):
        _say(f"perfgate: warning: {line}", err=True)
    if len(args.sides) == 1:
        # A results file's runs are looked up as the plugin did, from the commit each was
        # measured at, whatever is checked out now.
        comparisons = gate_against_store(
            current.records,
            settings,
            StoreLookup(
                repo_dir=Path(args.repo),
                baseline_ref=args.baseline_ref,
                strict=bool(args.strict),
                from_measured_commit=current.kind == "results",
            ),
            source=current.path,
        )
        return _render_comparisons(comparisons, args)
    base = load_side(args.sides[0], benchmark=args.benchmark, env=args.env, advisor=advisor)
    comparisons = []
    for baseline_record, current_record in pair_records(base.records, current.records):
        if baseline_record is None:
            raise PerfgateError(
                f"{base.path}: holds no run of benchmark {current_record['benchmark']!r} "
                f"(it has: {', '.join(r['benchmark'] for r in base.records)}); "
                "--benchmark NAME compares one benchmark of a results file"
            )
        if (crashed := unmeasured(current_record)) is not None:
            comparisons.append(crashed)
            continue
        if (crashed := unmeasured(baseline_record)) is not None:
            crashed.notes = [f"the baseline side ({base.path}): {n}" for n in crashed.notes]
            comparisons.append(crashed)
            continue
        rules, look = judging_rules(current_record, settings, current.path)
        comparisons.append(
            compare_runs(
                baseline_record,
                current_record,
                rules,
                look=look,
                baseline_info={
                    "commit": baseline_record.get("commit"),
                    "path": base.path,
                    "how": f"given {base.kind}",
                },
                current_info={"commit": current_record.get("commit"), "path": current.path},
            )
        )
    return _render_comparisons(comparisons, args)


def _render_comparisons(comparisons: Sequence[Comparison], args: argparse.Namespace) -> int:
    """Write the report of ``comparisons`` in ``--format``; the exit status of their verdicts."""
    from perfgate.report.compare import compare_document, render_markdown, render_table
    from perfgate.verdict import exit_status

    if args.format == "json":
        from perfgate.records import json_text

        text = json_text(compare_document(comparisons, top_operators=args.top))
    elif args.format == "md":
        text = render_markdown(comparisons, top=args.top)
    else:
        text = render_table(comparisons, top=args.top)
    _write(text, args.output, document=args.format in ("json", "html"))
    return exit_status((c.verdict for c in comparisons), strict=bool(args.strict))


def _cmd_report(args: argparse.Namespace) -> int:
    from perfgate.report.compare import comparison_from_dict
    from perfgate.sides import load_results_file

    document = load_results_file(Path(args.results))
    # Every comparison is rebuilt (and so checked) before anything is written.
    rebuilt = {
        index: comparison_from_dict(dict(comparison), args.results, f"runs.{index}.comparison.")
        for index, run in enumerate(document["runs"])
        if isinstance(comparison := run.get("comparison"), dict)
    }
    comparisons = list(rebuilt.values())
    if args.format == "html":
        from perfgate.report.html import render_results_html
        from perfgate.verdict import Verdict, exit_status

        if not document["runs"]:
            raise PerfgateError(f"{args.results}: holds no runs (no benchmark was measured)")
        _write(render_results_html(document), args.output, document=True)
        # The same exit status as the other formats: a run's verdict, else its comparison's.
        verdicts = [
            Verdict(run["verdict"]) if run.get("verdict") else rebuilt[index].verdict
            for index, run in enumerate(document["runs"])
            if run.get("verdict") or index in rebuilt
        ]
        return exit_status(verdicts, strict=bool(args.strict))
    if not comparisons and document["runs"] and args.format in ("table", "md"):
        # A --perfgate-update run's file: what it recorded, as its session showed it.
        from perfgate.report.results import BenchmarkResult, results_markdown, summary_table
        from perfgate.verdict import Verdict, exit_status

        results = [BenchmarkResult.from_dict(dict(run)) for run in document["runs"]]
        text = results_markdown(results) if args.format == "md" else summary_table(results)
        _write(text if text.endswith("\n") else text + "\n", args.output)
        verdicts = [Verdict(run["verdict"]) for run in document["runs"] if run.get("verdict")]
        return exit_status(verdicts, strict=bool(args.strict))
    if not comparisons:
        raise PerfgateError(
            f"{args.results}: holds no comparisons (a --perfgate-update run records baselines "
            "only; --format table, md or html show what it recorded)"
        )
    return _render_comparisons(comparisons, args)


def _cmd_baseline_update(args: argparse.Namespace) -> int:
    from perfgate.gate import record_baselines
    from perfgate.sides import load_side

    settings = _settings(args)
    side = load_side(args.source, benchmark=args.benchmark, env=args.env, advisor=settings.advisor)
    if settings.baseline.env != "auto" and side.kind == "profile" and not args.env:
        for record in side.records:
            record["env"] = settings.baseline.env
    paths = record_baselines(
        side.records,
        settings,
        Path(args.repo),
        allow_dirty=args.allow_dirty,
        allow_other_commit=args.allow_other_commit,
        measured_dirty=side.measured_dirty,
    )
    for path in paths:
        _say(f"recorded {path}")
    return EXIT_OK


def _cmd_baseline_list(args: argparse.Namespace) -> int:
    from perfgate.gate import store_root
    from perfgate.report.format import fitted_table
    from perfgate.store.baselines import list_baselines

    root = store_root(Path(args.repo), _settings(args))
    entries = list_baselines(root)
    if not entries:
        _say(f"no baselines under {root}")
        return EXIT_OK
    rows = [
        [e.benchmark, e.env, e.sha[:12], "DAMAGED" if e.problem else e.created or "", str(e.path)]
        for e in entries
    ]
    # The path is the store's layout spelt out: where the terminal is too narrow for it, the
    # layout is said once under the table instead.
    table, dropped = fitted_table(
        rows, ["benchmark", "env", "commit", "created", "path"], optional=["path", "created"]
    )
    _say(table)
    if "path" in dropped:
        _say(f"files: {root}/<benchmark>/<env>/<commit>.json")
    damaged = [e for e in entries if e.problem]
    if not damaged:
        return EXIT_OK
    # The listing goes on past a damaged file (it is how one finds them), but the store is
    # not sound: the gate would stop at that file, so the exit code says so.
    for entry in damaged:
        _say(f"perfgate: error: {entry.problem}", err=True)
    return EXIT_ERROR


def _benchmark_envs(root: Path, benchmark: str, env: str | None) -> list[str]:
    """The runner environments to look in: the one asked for, else every one that holds
    baselines of ``benchmark`` (an error when there is none)."""
    from perfgate.store.baselines import stored_envs

    envs = stored_envs(root, benchmark)
    if not envs:
        raise PerfgateError(f"{root}: no baselines of benchmark {benchmark!r}")
    if env and env not in envs:
        # An empty answer would read as "no history"; a misspelt env is the likelier cause.
        raise PerfgateError(
            f"{root}: no baselines of benchmark {benchmark!r} on env {env!r} "
            f"(its baselines are on: {', '.join(envs)})"
        )
    return [env] if env else envs


def _cmd_baseline_show(args: argparse.Namespace) -> int:
    from perfgate.gate import store_root
    from perfgate.report.baseline import render_baseline
    from perfgate.store.baselines import history, read_baseline
    from perfgate.store.git import baseline_candidates

    settings = _settings(args)
    target = Path(args.target)
    if target.suffix == ".json" and target.is_file():
        record = read_baseline(target)
    else:
        root = store_root(Path(args.repo), settings)
        envs = _benchmark_envs(root, args.target, args.env)
        if len(envs) > 1:
            raise UsageError(
                f"benchmark {args.target!r} has baselines for several envs "
                f"({', '.join(envs)}); choose one with --env"
            )
        candidates = baseline_candidates(
            Path(args.repo),
            baseline_branch=settings.baseline.branch,
            start_ref=args.baseline_ref,
            max_depth=settings.baseline.max_depth,
        )
        found = history(root, args.target, envs[0], candidates, limit=1)
        if not found:
            raise PerfgateError(
                f"{root}: no baseline of {args.target!r} on {envs[0]!r} within "
                f"{settings.baseline.max_depth} commits"
            )
        record = found[0].record
    if args.format == "json":
        from perfgate.records import json_text

        _write(json_text(record), None, document=True)
    else:
        _write(render_baseline(record), None)
    return EXIT_OK


def _cmd_baseline_prune(args: argparse.Namespace) -> int:
    from perfgate.gate import store_root
    from perfgate.store.baselines import prune
    from perfgate.store.git import main_line, reachable_commits

    if args.keep is None and not args.unreachable:
        raise UsageError("baseline prune: say what goes: --keep N, --unreachable, or both")
    settings = _settings(args)
    repo = Path(args.repo)
    root = store_root(repo, settings)
    line = main_line(repo, settings.baseline.branch) if args.keep is not None else []
    reachable = reachable_commits(repo) if args.unreachable else None
    removed = prune(root, args.keep, line, dry_run=args.dry_run, reachable=reachable)
    verb = "would remove" if args.dry_run else "removed"
    for path in removed:
        _say(f"{verb} {path}")
    which = []
    if args.keep is not None:
        which.append(f"main-line ones beyond the newest {args.keep} per benchmark and env")
    if args.unreachable:
        which.append("those of commits that no ref reaches")
    _say(f"{verb} {len(removed)} baseline(s): {' and '.join(which)}")
    return EXIT_OK


def _cmd_history(args: argparse.Namespace) -> int:
    from perfgate.gate import history_along_main, store_root
    from perfgate.report import history as render

    settings = _settings(args)
    if args.format == "png" and not args.output:
        raise UsageError("--format png writes a file: give -o FILE.png")
    root = store_root(Path(args.repo), settings)
    envs = _benchmark_envs(root, args.benchmark, args.env)
    if args.format == "png" and len(envs) > 1:
        raise UsageError(
            f"benchmark {args.benchmark!r} has baselines for several envs ({', '.join(envs)}); "
            "a PNG draws one: choose it with --env"
        )
    depth = args.max_depth or HISTORY_DEPTH
    histories = [
        history_along_main(Path(args.repo), settings, args.benchmark, env, args.metric, depth)
        for env in envs
    ]
    if args.format == "png":
        from perfgate.store.atomic import atomic_write

        if not histories[0].points:  # an empty chart, exit 0, said nothing
            raise PerfgateError(
                f"history of {args.benchmark!r}: {histories[0].note or 'no baselines'}: no "
                "chart to draw"
            )
        target = Path(args.output)
        png = render.render_png(histories[0])
        try:
            # Whole or not at all, as every report: a full disk keeps the chart that was there.
            atomic_write(target, png)
        except OSError as exc:
            raise PerfgateError(f"{target}: cannot write the chart: {exc.strerror}") from None
        return EXIT_OK
    if args.format == "json":
        from perfgate.records import json_text

        text = json_text(render.history_document(histories, depth))
    elif args.format == "md":
        text = render.render_markdown(histories, depth)
    elif args.format == "html":
        text = render.render_html(histories, depth)
    else:
        text = render.render_table(histories, depth)
    _write(text, args.output, document=args.format in ("json", "html"))
    return EXIT_OK


def _cmd_ab(args: argparse.Namespace) -> int:
    from perfgate.ab import run_ab
    from perfgate.report.results import BenchmarkResult, results_document

    # The settings the sessions' pytest takes where it starts (the project's folder, as for
    # every command): the verdict must use the same thresholds.
    settings = _settings(args)
    pairs = args.pairs or settings.rules.statistics.ab_pairs
    out = Path(args.out)
    _clear_ab_output(out)
    run = run_ab(
        Path(args.repo),
        args.base,
        args.pytest_args,
        settings,
        pairs=pairs,
        out_dir=out,
        say=lambda line: _say(line, err=True),
    )
    results = [
        BenchmarkResult(
            record=run.records.get("head", {}).get(c.benchmark) or _empty(c), comparison=c
        )
        for c in run.comparisons
    ]
    # The tree's state as a results file says it (pytest --perfgate does too): baseline
    # update --from refuses a measurement of uncommitted changes by this key.
    document = results_document(
        results, {"commit": run.head_sha, "branch": run.head_branch, "dirty": run.head_dirty}
    )
    document["ab"] = {
        "base": run.base_sha,
        "pairs": run.pairs,
        "seconds": run.seconds,
        "session_seconds": run.session_seconds,
    }
    _write(
        json.dumps(document, indent=2, allow_nan=False) + "\n",
        str(out / "results.json"),
        document=True,
    )
    _say(
        f"perfgate ab: {run.pairs} pairs in {run.seconds:.0f} s "
        f"(base {run.base_sha[:12]}, tree {run.head_sha[:12]}"
        f"{' with uncommitted changes' if run.head_dirty else ''}); "
        f"results: {out / 'results.json'}",
        err=True,
    )
    return _render_comparisons(run.comparisons, args)


_AB_MARK = ".perfgate-ab"


def _clear_ab_output(out: Path) -> None:
    """Empty ``out`` for a new A/B run, and mark it as one's: a folder that holds anything but
    an earlier A/B run's output is refused, never deleted."""
    import shutil

    if out.exists():
        if not out.is_dir():
            raise PerfgateError(f"--out {out}: is a file, not a folder for the A/B run's output")
        if any(out.iterdir()) and not (out / _AB_MARK).is_file():
            raise PerfgateError(
                f"--out {out}: holds files that are not an earlier perfgate ab run's output; "
                "give an empty or new folder (nothing was deleted)"
            )
        shutil.rmtree(out)
    out.mkdir(parents=True)
    (out / _AB_MARK).write_text("perfgate ab output: emptied by the next perfgate ab run\n")


def _empty(comparison: Comparison) -> RunRecord:
    return {"benchmark": comparison.benchmark, "env": "ab", "samples": {}}


def _cmd_inspect(args: argparse.Namespace) -> int:
    from perfgate.analysis.advisor import advise
    from perfgate.analysis.metrics import analyze
    from perfgate.ingest import load_profile
    from perfgate.report.inspect import inspect_json, render_markdown, render_table

    settings = _settings(args)
    profile = load_profile(args.path)
    analysis = analyze(profile)
    hints = advise(profile, analysis, settings.advisor)
    if args.format == "json":
        top = args.top if args.top_given else None
        text = inspect_json(profile, analysis, top=top, hints=hints)
    elif args.format == "md":
        text = render_markdown(profile, analysis, top=args.top, hints=hints)
    else:
        text = render_table(profile, analysis, top=args.top, hints=hints)
    _write(text, args.output, document=args.format in ("json", "html"))
    return EXIT_OK


def _refuse_output_over_input(args: argparse.Namespace) -> None:
    """``-o`` naming a file the command reads (``perfgate report r.json -o r.json``: the
    results file that ``baseline update --from`` reads; the settings) would replace it with
    the report; one inside the baseline store or ``perfgate ab``'s output folder would put
    it among what perfgate keeps there."""
    output = getattr(args, "output", None)
    if output is None:
        return
    repo = Path(getattr(args, "repo", None) or ".")
    if Path(output).exists():
        inputs = [getattr(args, name, None) for name in ("path", "results", "config")]
        inputs += getattr(args, "sides", None) or []
        # The settings the command reads where none is named (the project's).
        from perfgate.config import PYPROJECT, YAML_SETTINGS

        inputs += [repo / name for name in (*YAML_SETTINGS, PYPROJECT)]
        for given_path in inputs:
            if (
                given_path is not None
                and os.path.exists(given_path)
                and os.path.samefile(given_path, output)
            ):
                raise UsageError(
                    f"-o {output} is the file this command reads ({given_path}); write the "
                    "report to another file"
                )
    store = _settings(args).baseline.dir if hasattr(args, "config") else "baselines"
    owned = [(repo / store, "the baseline store")]
    if getattr(args, "out", None):  # perfgate ab empties it, and writes results.json there
        owned.append((Path(args.out), "the A/B run's output folder (--out)"))
    target = Path(output).resolve()
    for folder, what in owned:
        if target.is_relative_to(folder.resolve()):
            raise UsageError(f"-o {output} is inside {what} {folder}; write the report elsewhere")


def _say(line: str, *, err: bool = False) -> None:
    """A line for a person or a CI log, names in it shown as text (:func:`terminal_text`)."""
    from perfgate.report.format import terminal_text

    print(terminal_text(line), file=sys.stderr if err else sys.stdout)


def _write(text: str, output: str | None, *, document: bool = False) -> None:
    """Write a report to ``output``, or to stdout. A ``document`` (JSON, HTML) is written as
    it is; a text or Markdown report for reading has the names from profiles in it shown
    as text (:func:`~perfgate.report.format.terminal_text`): no escape sequence or workflow
    command of theirs reaches a terminal or a CI log."""
    if not document:
        from perfgate.report.format import terminal_text

        text = terminal_text(text)
    if output is None:
        sys.stdout.write(text)
        return
    from perfgate.store.atomic import atomic_write

    target = Path(output)
    try:
        # Whole or not at all: a full disk must not leave half a report over a good one.
        atomic_write(target, text.encode("utf-8"))
    except OSError as exc:
        raise PerfgateError(f"{target}: cannot write the report: {exc.strerror}") from None


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit status."""
    parser = build_parser()
    raw = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(raw)
    args.top_given = any(a == "--top" or a.startswith("--top=") for a in raw)
    from perfgate.ingest.progress import show_progress

    try:
        if getattr(args, "repo", None) is not None:
            from perfgate.config import project_directory

            # Where the plugin would take them from: not bench/baselines/ when run in bench/.
            args.repo = str(project_directory(args.repo))
        _refuse_output_over_input(args)
        # Reading progress is for a person at a terminal: never in a JSON document's stream.
        with show_progress(getattr(args, "format", None) != "json"):
            status: int = args.handler(args)
    except PerfgateError as exc:
        _say(f"perfgate: error: {exc}", err=True)
        return exc.exit_code
    except MemoryError:
        # Not a bug: the input outgrew this machine's memory (or the process's limit).
        print(
            "perfgate: error: out of memory: the input is too large for the memory this "
            "process may use",
            file=sys.stderr,
        )
        return EXIT_ERROR
    except KeyboardInterrupt:
        _say("perfgate: interrupted", err=True)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # `perfgate inspect … | head` closed the pipe: not an error.
        sys.stderr.close()
        return EXIT_OK
    except OSError as exc:  # a path the system refuses (a name past 255 bytes …)
        _say(f"perfgate: error: {os_error_line(exc)}", err=True)
        return EXIT_ERROR
    except Exception as exc:  # a bug: never exit 1, which a CI job reads as a regression
        traceback.print_exc()
        print(
            f"perfgate: internal error: {type(exc).__name__} (a bug in perfgate; please report "
            "it with the traceback above)",
            file=sys.stderr,
        )
        return EXIT_ERROR
    return status


if __name__ == "__main__":
    sys.exit(main())

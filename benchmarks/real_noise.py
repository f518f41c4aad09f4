"""The journey on a real machine: how often unchanged re-runs fail the gate, and how often
real regressions are caught.

In a temporary ``git clone`` of a repository (default: the one this script lives in; the
clone holds its committed HEAD, so the tree is clean and HEAD is a commit, put on a local
``main`` branch so that it is its own baseline commit) and with the
current interpreter (perfgate must be importable; run from the clone, ``python -m pytest``
imports the clone's own ``perfgate/`` first when it has one):

1. ``python -m pytest --perfgate --perfgate-update examples/ -p no:cacheprovider`` records
   baselines of HEAD;
2. ``--reruns K`` unchanged runs of ``python -m pytest --perfgate examples/``;
3. ``--regression-runs N`` runs with each of ``PERFGATE_EXAMPLE_REGRESSION=host_copy``,
   ``slow_op`` and ``idle_gap`` (round-robin, so load drifts hit every scenario alike).

With ``--ab`` the same journey runs as a same-runner A/B comparison instead: no baselines
are recorded, and every run is ``python -m pytest --perfgate --perfgate-ab=HEAD examples/``
(the base, HEAD, is checked out in a worktree by perfgate itself; the head is the clone's
working tree). The environment variable would reach the base and head processes alike, so a
regression scenario edits the working tree instead, uncommitted: in ``examples/models.py``
the line ``REGRESSION = os.environ.get("PERFGATE_EXAMPLE_REGRESSION", "")`` gets the
scenario as its default, so the head has the regression and the base has not; the file is
restored (``git checkout -- examples/models.py``) after the run, also when it fails. The
scenarios are named ``ab unchanged``, ``ab host_copy`` …, and the table gains the wall time
per benchmark (a run's wall time over the benchmarks it judged): the cost of A/B.

After each run it reads the results file (``--perfgate-json PATH``) and counts the
verdicts per benchmark. Only public contracts are used: pytest's exit code (1: tests
failed) and the results JSON (``runs[].benchmark``, ``runs[].verdict``,
``runs[].comparison.metrics[].{name,status,change}``; an A/B run writes the same document,
its comparisons made against the base measured in the pairs), so the script keeps working
when the internals change.

With ``--neighbours N``, N CPU-bound processes (``while True: pass``, the same priority)
run beside every run after the baselines are recorded: a shared runner whose other jobs
keep its cores busy.

    python benchmarks/real_noise.py [REPO] [--reruns 10] [--regression-runs 10]
        [--ab] [--neighbours N] [--pytest-args "-x ..."] [--json OUT] [--keep]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

REGRESSIONS = ("host_copy", "slow_op", "idle_gap")
Json = dict[str, Any]

# --ab: the scenarios' names carry this prefix; the A/B base; the line a scenario edits.
AB_PREFIX = "ab "
AB_BASE = "HEAD"
MODELS = "examples/models.py"
REGRESSION_LINE = 'REGRESSION = os.environ.get("PERFGATE_EXAMPLE_REGRESSION", "")'


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def clone(source: Path, dest: Path, ref: str | None, branch: str) -> str:
    """Clone ``source`` into ``dest`` (committed files only), put HEAD (or ``ref``) on a
    local ``branch`` and return its commit.

    On the baseline branch HEAD is its own merge-base, so the re-runs compare with the
    baselines just recorded, as after ``--perfgate-update`` on ``main``; on another branch
    they would be looked up from the merge-base with ``main`` instead.
    """
    subprocess.run(
        ["git", "clone", "-q", "--no-hardlinks", str(source), str(dest)],
        check=True,
        capture_output=True,
        text=True,
    )
    git(dest, "checkout", "-q", "-B", branch, ref or "HEAD")
    head = git(dest, "rev-parse", "--verify", "HEAD^{commit}")
    if git(dest, "status", "--porcelain", "--untracked-files=no"):
        raise SystemExit(f"the clone of {source} at {head[:12]} is not clean")
    if not (dest / "examples").is_dir():
        raise SystemExit(f"{source} at {head[:12]} has no examples/ directory")
    return head


@contextlib.contextmanager
def regression_edit(clone_dir: Path, scenario: str) -> Iterator[None]:
    """``--ab``: give the working tree's ``examples/models.py`` the regression ``scenario``
    as its default (uncommitted, so the head has it and the base, HEAD, has not), and restore
    the file with ``git checkout`` on the way out, whatever happens.

    Raises:
        SystemExit: the file lacks the exact line :data:`REGRESSION_LINE` (once).
    """
    if scenario not in REGRESSIONS:
        raise ValueError(f"unknown regression scenario {scenario!r}")
    path = clone_dir / MODELS
    text = path.read_text(encoding="utf-8") if path.is_file() else ""
    found = [line for line in text.splitlines() if line == REGRESSION_LINE]
    if len(found) != 1:
        raise SystemExit(
            f"{path}: expected the line {REGRESSION_LINE!r} exactly once (found it "
            f"{len(found)} times), so the {scenario} regression cannot be switched on for "
            "the head alone"
        )
    edited = REGRESSION_LINE.replace('"")', f'"{scenario}")')
    try:
        path.write_text(text.replace(REGRESSION_LINE, edited, 1), encoding="utf-8")
        yield
    finally:
        git(clone_dir, "checkout", "--", MODELS)


@contextlib.contextmanager
def neighbours(count: int) -> Iterator[list[subprocess.Popen[bytes]]]:
    """``count`` CPU-bound processes running beside the block, killed after it."""
    processes = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]
    try:
        yield processes
    finally:
        for process in processes:
            process.kill()
            process.wait()


def run_pytest(
    clone_dir: Path,
    scenario: str,
    index: int,
    extra: Sequence[str],
    update: bool = False,
    timeout: float | None = None,
    ab_ref: str | None = None,
) -> Json:
    """One ``python -m pytest --perfgate`` run (``--perfgate-ab=ab_ref`` when given); its
    exit code, wall time and verdicts."""
    stem = scenario.replace(" ", "-")
    results = clone_dir / "perfgate-journey" / f"{stem}-{index}.json"
    results.parent.mkdir(exist_ok=True)
    argv = [sys.executable, "-m", "pytest", "--perfgate"]
    if update:
        argv.append("--perfgate-update")
    if ab_ref is not None:
        argv.append(f"--perfgate-ab={ab_ref}")
    argv += ["examples/", "-p", "no:cacheprovider", "--perfgate-json", str(results), *extra]
    env = {k: v for k, v in os.environ.items() if k != "PERFGATE_EXAMPLE_REGRESSION"}
    if scenario in REGRESSIONS:
        env["PERFGATE_EXAMPLE_REGRESSION"] = scenario
    load = os.getloadavg()[0]
    started = time.perf_counter()
    done = subprocess.run(
        argv, cwd=clone_dir, env=env, capture_output=True, text=True, timeout=timeout
    )
    wall = time.perf_counter() - started
    run: Json = {
        "scenario": scenario,
        "index": index,
        "exit_code": done.returncode,
        "wall_s": round(wall, 2),
        "loadavg_start": round(load, 2),
        "loadavg_end": round(os.getloadavg()[0], 2),
        "benchmarks": {},
    }
    if results.exists():
        doc = json.loads(results.read_text())
        for record in doc.get("runs", []):
            comparison = record.get("comparison") or {}
            run["benchmarks"][str(record.get("benchmark"))] = {
                "verdict": record.get("verdict"),
                "metrics": {
                    str(m.get("name")): {"status": m.get("status"), "change": m.get("change")}
                    for m in comparison.get("metrics", [])
                },
            }
    else:
        run["error"] = "\n".join((done.stdout + done.stderr).strip().splitlines()[-15:])
    return run


def describe(run: Json) -> str:
    parts = []
    for name, bench in run["benchmarks"].items():
        step = bench["metrics"].get("step_time", {})
        change = step.get("change")
        shown = f" step_time {change:+.1%}" if isinstance(change, (int, float)) else ""
        parts.append(f"{name}={bench['verdict']}{shown}")
    return f"exit {run['exit_code']} {run['wall_s']:.0f}s load {run['loadavg_start']}: " + (
        ", ".join(parts) or run.get("error", "no results")
    )


def summarize(runs: Sequence[Json], per_benchmark: bool = False) -> list[Json]:
    """One row per scenario; ``per_benchmark`` adds the wall time over the benchmarks a run
    judged (the median and maximum over the runs that judged any)."""
    rows = []
    scenarios = list(dict.fromkeys(r["scenario"] for r in runs if r["scenario"] != "update"))
    for scenario in scenarios:
        mine = [r for r in runs if r["scenario"] == scenario]
        benches = list(dict.fromkeys(b for r in mine for b in r["benchmarks"]))
        verdicts = {
            b: dict(Counter(r["benchmarks"][b]["verdict"] for r in mine if b in r["benchmarks"]))
            for b in benches
        }
        walls = [r["wall_s"] for r in mine]
        loads = [r["loadavg_start"] for r in mine]
        row: Json = {
            "scenario": scenario,
            "runs": len(mine),
            "failed_build": sum(r["exit_code"] == 1 for r in mine),
            "other_exit": sum(r["exit_code"] not in (0, 1) for r in mine),
            "verdicts": verdicts,
            "wall_s_median": round(statistics.median(walls), 1),
            "wall_s_max": round(max(walls), 1),
            "loadavg_range": [min(loads), max(loads)],
        }
        if per_benchmark:
            each = [r["wall_s"] / len(r["benchmarks"]) for r in mine if r["benchmarks"]]
            row["wall_s_per_benchmark_median"] = round(statistics.median(each), 1) if each else None
            row["wall_s_per_benchmark_max"] = round(max(each), 1) if each else None
        rows.append(row)
    return rows


def render(rows: Sequence[Json]) -> str:
    """The summary as a Markdown table (with a wall/benchmark column when the rows have it)."""
    per_benchmark = any("wall_s_per_benchmark_median" in row for row in rows)
    head = ["scenario", "runs", "failed the build", "verdicts per benchmark", "wall/run"]
    head += ["wall/benchmark"] if per_benchmark else []
    head += ["load"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        verdicts = "; ".join(
            f"{bench}: " + ", ".join(f"{v} {n}" for v, n in sorted(counts.items()))
            for bench, counts in row["verdicts"].items()
        )
        failed = f"{row['failed_build']}" + (
            f" (+{row['other_exit']} other exit)" if row["other_exit"] else ""
        )
        each = ""
        if per_benchmark:
            median = row.get("wall_s_per_benchmark_median")
            each = (
                f"{median} s (max {row['wall_s_per_benchmark_max']}) | "
                if median is not None
                else "— | "
            )
        lines.append(
            f"| {row['scenario']} | {row['runs']} | {failed} | {verdicts} | "
            f"{row['wall_s_median']} s (max {row['wall_s_max']}) | {each}"
            f"{row['loadavg_range'][0]}–{row['loadavg_range'][1]} |"
        )
    return "\n".join(lines)


def journey_ab(
    clone_dir: Path,
    reruns: int,
    regression_runs: int,
    extra: Sequence[str],
    timeout: float | None,
) -> list[Json]:
    """``--ab``: ``reruns`` unchanged A/B runs against HEAD, then ``regression_runs`` runs of
    each regression (round-robin), each edited into the working tree for its run only."""
    plan = [("unchanged", i) for i in range(reruns)]
    plan += [(s, i) for i in range(regression_runs) for s in REGRESSIONS]
    runs = []
    for scenario, index in plan:
        name = AB_PREFIX + scenario
        edit = (
            regression_edit(clone_dir, scenario)
            if scenario in REGRESSIONS
            else contextlib.nullcontext()
        )
        with edit:
            run = run_pytest(clone_dir, name, index, extra, timeout=timeout, ab_ref=AB_BASE)
        run["mode"] = "ab"
        runs.append(run)
        print(f"{name} {index}: {describe(run)}", file=sys.stderr)
    return runs


def write_json(
    args: argparse.Namespace,
    head: str,
    where: str,
    extra: Sequence[str],
    rows: Sequence[Json],
    runs: Sequence[Json],
    mode: str | None = None,
) -> None:
    """The runs and the summary as JSON (``mode`` is added when given: ``ab``)."""
    doc: Json = {
        "repo": str(Path(args.repo).resolve()),
        "commit": head,
        "perfgate": where,
        "python": sys.executable,
        "branch": args.branch,
        "pytest_args": list(extra),
        "created": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "summary": list(rows),
        "runs": list(runs),
    }
    if mode is not None:
        doc["mode"] = mode
        doc["ab_base"] = AB_BASE
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(doc, indent=1))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("repo", nargs="?", default=str(Path(__file__).resolve().parent.parent))
    parser.add_argument("--reruns", type=int, default=10, help="unchanged re-runs (K)")
    parser.add_argument(
        "--regression-runs", type=int, default=10, help="runs per regression scenario (N)"
    )
    parser.add_argument("--pytest-args", default="", help="extra pytest arguments (one string)")
    parser.add_argument("--json", help="write the runs and the summary here")
    parser.add_argument("--ref", help="check this commit out in the clone (default: HEAD)")
    parser.add_argument(
        "--branch", default="main", help="the baseline branch HEAD is put on in the clone"
    )
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds per run")
    parser.add_argument("--keep", action="store_true", help="keep the temporary clone")
    parser.add_argument(
        "--neighbours",
        type=int,
        default=0,
        help="CPU-bound processes beside the runs (after the baselines are recorded)",
    )
    parser.add_argument(
        "--ab",
        action="store_true",
        help=f"same-runner A/B against {AB_BASE} (--perfgate-ab) instead of stored "
        "baselines: no baselines recorded, regressions edited into the working tree",
    )
    args = parser.parse_args(argv)
    if args.reruns < 0 or args.regression_runs < 0 or args.neighbours < 0:
        parser.error("--reruns, --regression-runs and --neighbours must not be negative")
    extra = shlex.split(args.pytest_args)

    tmp = Path(tempfile.mkdtemp(prefix="perfgate-journey-"))
    clone_dir = tmp / "repo"
    try:
        head = clone(Path(args.repo).resolve(), clone_dir, args.ref, args.branch)
        where = subprocess.run(
            [sys.executable, "-c", "import perfgate; print(perfgate.__file__)"],
            cwd=clone_dir,
            capture_output=True,
            text=True,
        ).stdout.strip()
        print(f"clone {clone_dir} at {head[:12]}; perfgate from {where}", file=sys.stderr)
        if args.ab:
            with neighbours(args.neighbours):
                runs = journey_ab(clone_dir, args.reruns, args.regression_runs, extra, args.timeout)
            rows = summarize(runs, per_benchmark=True)
            print(render(rows))
            if args.json:
                write_json(args, head, where, extra, rows, runs, mode="ab")
            return 0
        plan = [("update", 0)] + [("unchanged", i) for i in range(args.reruns)]
        plan += [(s, i) for i in range(args.regression_runs) for s in REGRESSIONS]

        def run(scenario: str, index: int) -> Json:
            result = run_pytest(
                clone_dir,
                scenario,
                index,
                extra,
                update=scenario == "update",
                timeout=args.timeout,
            )
            print(f"{scenario} {index}: {describe(result)}", file=sys.stderr)
            return result

        runs = [run(*plan[0])]
        if runs[0]["exit_code"] != 0:
            print(runs[0].get("error", ""), file=sys.stderr)
            raise SystemExit("recording the baselines failed")
        with neighbours(args.neighbours):
            runs += [run(scenario, index) for scenario, index in plan[1:]]
        rows = summarize(runs)
        print(render(rows))
        if args.json:
            write_json(args, head, where, extra, rows, runs)
    finally:
        if args.keep:
            print(f"kept {tmp}", file=sys.stderr)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

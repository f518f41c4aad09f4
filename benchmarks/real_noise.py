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

After each run it reads the results file (``--perfgate-json PATH``) and counts the
verdicts per benchmark. Only public contracts are used: pytest's exit code (1: tests
failed) and the results JSON (``runs[].benchmark``, ``runs[].verdict``,
``runs[].comparison.metrics[].{name,status,change}``), so the script keeps working when the
internals change.

    python benchmarks/real_noise.py [REPO] [--reruns 10] [--regression-runs 10]
        [--pytest-args "-x ..."] [--json OUT] [--keep]
"""

from __future__ import annotations

import argparse
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
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REGRESSIONS = ("host_copy", "slow_op", "idle_gap")
Json = dict[str, Any]


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


def run_pytest(
    clone_dir: Path,
    scenario: str,
    index: int,
    extra: Sequence[str],
    update: bool = False,
    timeout: float | None = None,
) -> Json:
    """One ``python -m pytest --perfgate`` run; its exit code, wall time and verdicts."""
    results = clone_dir / "perfgate-journey" / f"{scenario}-{index}.json"
    results.parent.mkdir(exist_ok=True)
    argv = [sys.executable, "-m", "pytest", "--perfgate"]
    if update:
        argv.append("--perfgate-update")
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


def summarize(runs: Sequence[Json]) -> list[Json]:
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
        rows.append(
            {
                "scenario": scenario,
                "runs": len(mine),
                "failed_build": sum(r["exit_code"] == 1 for r in mine),
                "other_exit": sum(r["exit_code"] not in (0, 1) for r in mine),
                "verdicts": verdicts,
                "wall_s_median": round(statistics.median(walls), 1),
                "wall_s_max": round(max(walls), 1),
                "loadavg_range": [min(loads), max(loads)],
            }
        )
    return rows


def render(rows: Sequence[Json]) -> str:
    head = ["scenario", "runs", "failed the build", "verdicts per benchmark", "wall/run", "load"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        verdicts = "; ".join(
            f"{bench}: " + ", ".join(f"{v} {n}" for v, n in sorted(counts.items()))
            for bench, counts in row["verdicts"].items()
        )
        failed = f"{row['failed_build']}" + (
            f" (+{row['other_exit']} other exit)" if row["other_exit"] else ""
        )
        lines.append(
            f"| {row['scenario']} | {row['runs']} | {failed} | {verdicts} | "
            f"{row['wall_s_median']} s (max {row['wall_s_max']}) | "
            f"{row['loadavg_range'][0]}–{row['loadavg_range'][1]} |"
        )
    return "\n".join(lines)


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
    args = parser.parse_args(argv)
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
        plan = [("update", 0)] + [("unchanged", i) for i in range(args.reruns)]
        plan += [(s, i) for i in range(args.regression_runs) for s in REGRESSIONS]
        runs = []
        for scenario, index in plan:
            run = run_pytest(
                clone_dir,
                scenario,
                index,
                extra,
                update=scenario == "update",
                timeout=args.timeout,
            )
            runs.append(run)
            print(f"{scenario} {index}: {describe(run)}", file=sys.stderr)
            if scenario == "update" and run["exit_code"] != 0:
                print(run.get("error", ""), file=sys.stderr)
                raise SystemExit("recording the baselines failed")
        rows = summarize(runs)
        print(render(rows))
        if args.json:
            doc = {
                "repo": str(Path(args.repo).resolve()),
                "commit": head,
                "perfgate": where,
                "python": sys.executable,
                "branch": args.branch,
                "pytest_args": extra,
                "created": time.strftime("%Y-%m-%dT%H:%M:%S"),
                "summary": rows,
                "runs": runs,
            }
            Path(args.json).parent.mkdir(parents=True, exist_ok=True)
            Path(args.json).write_text(json.dumps(doc, indent=1))
    finally:
        if args.keep:
            print(f"kept {tmp}", file=sys.stderr)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

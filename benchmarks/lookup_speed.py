"""How long a baseline lookup takes in a long history with a large store.

Builds, with one ``git fast-import``, a repository of ``--commits`` first-parent commits on
``main`` (default 10,000) with a feature branch on top, and a committed store of
``--benchmarks`` benchmarks × ``--per-benchmark`` baselines (default 100 × 1,000). Then it
times, in this process, after one warm-up call:

* ``candidates``: :func:`perfgate.store.git.baseline_candidates` with ``max_depth`` = the
  whole history;
* ``lookup``: the candidates, then the baselines along them
  (:func:`perfgate.store.baselines.history`, look-back of 8) — for ``near``, a benchmark
  with a baseline every 10th commit (8 found within 80 commits); ``far``, one whose
  baselines are all older than 9,000 commits; ``none``, one with no baseline at all;
* ``gate``: the whole gate (:func:`perfgate.gate.gate_against_store`) for the same three:
  the lookup, the comparison, and for ``none`` the no-baseline report (which looks for the
  benchmark's other runner environments).

Run ``python benchmarks/lookup_speed.py [--commits N] [--benchmarks N] [--per-benchmark N]
[--keep DIR]``; it prints one line per case with the median wall time of ``--repeat`` runs
and their CPU time (this process and git; on a busy machine the wall time grows, the CPU
time does not). The target (issue 11) is under 0.2 s per lookup at 10,000 commits with
100 × 1,000 baselines.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path

from perfgate.analysis.compare import Comparison
from perfgate.gate import StoreLookup, gate_against_store
from perfgate.records import RunRecord
from perfgate.rules import BaselineSettings, Settings
from perfgate.store.baselines import FoundBaseline, history
from perfgate.store.git import baseline_candidates

ENV = "ascend910b4-x8"
IDENTITY = "perfgate-bench <bench@example.invalid> 1700000000 +0000"


def _baseline(benchmark: str, sha: str) -> bytes:
    steps = list(range(20))
    record = {
        "format": "perfgate.baseline",
        "format_version": 1,
        "benchmark": benchmark,
        "env": ENV,
        "commit": sha,
        "branch": "main",
        "samples": {"step": steps, "step_time_us": [1000.0 + s for s in steps]},
        "operators": [],
    }
    return (json.dumps(record, indent=2) + "\n").encode()


def _data(payload: bytes) -> bytes:
    return b"data %d\n" % len(payload) + payload + b"\n"


def build(repo: Path, commits: int, benchmarks: int, per_benchmark: int) -> None:
    """The repository: ``commits`` commits on main, then one commit that adds the store,
    then a feature branch checked out."""
    subprocess.run(["git", "init", "--quiet", "--initial-branch=main", str(repo)], check=True)
    # Commit shas depend only on content, so build the history first, read the shas, then
    # add the store that names them.
    stream: list[bytes] = []
    for i in range(commits):
        stream.append(b"commit refs/heads/main\nmark :%d\n" % (i + 1))
        stream.append(f"author {IDENTITY}\ncommitter {IDENTITY}\n".encode())
        stream.append(_data(f"commit {i}".encode()))
        if i:
            stream.append(b"from :%d\n" % i)
        stream.append(b"M 644 inline model.py\n" + _data(f"VERSION = {i}\n".encode()))
    _fast_import(repo, b"".join(stream))
    shas = _git(repo, "rev-list", "--reverse", "--first-parent", "main").split()
    assert len(shas) == commits

    who = f"author {IDENTITY}\ncommitter {IDENTITY}\n".encode()
    stream = [b"commit refs/heads/main\n", who]
    stream += [_data(b"perfgate: baselines"), f"from {shas[-1]}\n".encode()]
    step = max(1, commits // per_benchmark)
    for b in range(benchmarks):
        name = f"bench{b:03d}"
        # The last benchmark's baselines are all on the oldest commits ("far").
        chosen = shas[:per_benchmark] if b == benchmarks - 1 else shas[b % step :: step]
        for sha in chosen[:per_benchmark]:
            path = f"baselines/{name}/{ENV}/{sha}.json"
            stream.append(f"M 644 inline {path}\n".encode() + _data(_baseline(name, sha)))
    stream += [b"commit refs/heads/feature\n", who]
    stream += [_data(b"feature work"), b"from refs/heads/main\n"]
    stream.append(b"M 644 inline model.py\n" + _data(b"VERSION = 'feature'\n"))
    _fast_import(repo, b"".join(stream))
    _git(repo, "checkout", "--quiet", "feature")


def _fast_import(repo: Path, stream: bytes) -> None:
    subprocess.run(["git", "fast-import", "--quiet"], cwd=repo, input=stream, check=True)


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True)
    return done.stdout


def _current(benchmark: str) -> RunRecord:
    steps: list[float | None] = [float(s) for s in range(20)]
    return {
        "benchmark": benchmark,
        "env": ENV,
        "samples": {"step": steps, "step_time_us": [1000.0 + i for i in range(20)]},
    }


def _cpu() -> float:
    """CPU seconds of this process and its finished children (git): unlike wall time, not
    inflated by other work on a shared machine."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def _timed(action: Callable[[], object], repeat: int) -> tuple[float, float, object]:
    """Median wall and CPU seconds of ``action`` over ``repeat`` calls, after a warm-up."""
    result = action()  # warm-up: imports, git's own caches
    walls, cpus = [], []
    for _ in range(repeat):
        wall, cpu = time.perf_counter(), _cpu()
        result = action()
        walls.append(time.perf_counter() - wall)
        cpus.append(_cpu() - cpu)
    return statistics.median(walls), statistics.median(cpus), result


def _lookup(repo: Path, benchmark: str, depth: int) -> list[FoundBaseline]:
    candidates = baseline_candidates(repo, max_depth=depth)
    return history(repo / "baselines", benchmark, ENV, candidates, limit=8)


def _gate(repo: Path, benchmark: str, settings: Settings) -> list[Comparison]:
    return gate_against_store([_current(benchmark)], settings, StoreLookup(repo_dir=repo))


@contextlib.contextmanager
def _workdir(keep: str | None) -> Iterator[Path]:
    if keep:
        path = Path(keep)
        path.mkdir(parents=True, exist_ok=True)
        yield path
        return
    with tempfile.TemporaryDirectory(prefix="perfgate-lookup-") as tmp:
        yield Path(tmp)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--commits", type=int, default=10_000)
    parser.add_argument("--benchmarks", type=int, default=100)
    parser.add_argument("--per-benchmark", type=int, default=1_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--keep", metavar="DIR", help="build (or reuse) the repository here")
    args = parser.parse_args(argv)

    with _workdir(args.keep) as work:
        repo = work / "repo"
        if not (repo / ".git").is_dir():
            started = time.perf_counter()
            build(repo, args.commits, args.benchmarks, args.per_benchmark)
            print(f"built {repo} in {time.perf_counter() - started:.1f} s", file=sys.stderr)
        settings = Settings(baseline=BaselineSettings(max_depth=args.commits + 1))
        stored = sum(1 for _ in (repo / "baselines").glob("*/*/*.json"))
        print(
            f"{args.commits} commits, {stored} baselines "
            f"({args.benchmarks} benchmarks), median of {args.repeat}"
        )
        depth = args.commits + 1
        cases: list[tuple[str, Callable[[], object]]] = [
            ("candidates", lambda: baseline_candidates(repo, max_depth=depth)),
        ]
        names = {"near": "bench000", "far": f"bench{args.benchmarks - 1:03d}", "none": "nope"}
        for label, name in names.items():
            cases.append((f"lookup {label}", partial(_lookup, repo, name, depth)))
        for label, name in names.items():
            cases.append((f"gate {label}", partial(_gate, repo, name, settings)))
        for label, action in cases:
            seconds, cpu, result = _timed(action, args.repeat)
            detail = ""
            if isinstance(result, list) and result and hasattr(result[0], "verdict"):
                comparison = result[0]
                detail = f"  verdict {comparison.verdict.value}"
                if comparison.baseline.get("distance") is not None:
                    detail += f", baseline {comparison.baseline['distance']} commits back"
            elif isinstance(result, list) and result and hasattr(result[0], "candidate"):
                detail = f"  {len(result)} found, nearest {result[0].candidate.distance} back"
            elif isinstance(result, list):
                detail = f"  {len(result)} {'commits' if label == 'candidates' else 'found'}"
            print(f"{label:<12}{seconds:7.3f} s wall {cpu:7.3f} s CPU{detail}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

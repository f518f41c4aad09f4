"""Measure where step-time noise comes from on this machine: steps, rounds or processes.

Each measurement is a *worker* process (``noise_study.py worker ...``) that imports torch,
builds the workloads, and runs rounds of ``warmup`` + ``steps`` timed steps
(``time.perf_counter_ns`` per step). The orchestrating subcommands start workers and keep
their raw output as JSON:

* ``fresh``    — K fresh processes per workload (one round each), workloads interleaved;
* ``rounds``   — R re-warmed rounds inside one process: per workload, interleaved across
  workloads, with a sleep or a ``gc.collect()`` between rounds;
* ``threads``  — fresh processes of the MLP and the CNN under torch's default threads,
  ``set_num_threads(1)`` and ``set_num_threads(1)`` + pinned to one core, each on the
  machine as it is and beside a busy-loop CPU hog (unpinned, or pinned to core 0);
* ``detect``   — fresh processes of mlp vs mlp_heavy (~4x) and cnn_train vs cnn_train with
  ``PERFGATE_EXAMPLE_REGRESSION=host_copy``, interleaved;
* ``report``   — the tables (Markdown) from the raw JSON files.

Workloads: the three example step functions of ``examples/models.py`` (``cnn_train``,
``transformer_infer``, ``input_pipeline``), ``mlp`` (Linear(256,256)-ReLU-Linear(256,10),
batch 64, SGD) and ``mlp_heavy`` (the same with width 1536: about 4x the time of ``mlp``
with one thread on this machine; width 1024 was 2.5x, four 256-wide layers 3.2x).

Every worker records ``os.getloadavg()`` before and after, its torch thread count and CPU
affinity, and its cost (import, build, wall). Example::

    python benchmarks/noise_study.py fresh --k 10 --out /work/notes/noise/fresh.json
    python benchmarks/noise_study.py report /work/notes/noise
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import random
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats

REPO = Path(__file__).resolve().parent.parent
WORKLOADS = ("cnn_train", "transformer_infer", "input_pipeline", "mlp", "mlp_heavy")
MLP_HEAVY_WIDTH = 1536
StepFn = Callable[[], object]
Json = dict[str, Any]


# ---------------------------------------------------------------------------- worker


def build(name: str) -> StepFn:
    """The step function of one workload (torch is imported here, inside the worker)."""
    sys.path.insert(0, str(REPO / "examples"))
    import models  # type: ignore[import-not-found]  # examples/models.py

    if name == "cnn_train":
        return models.cnn_train_step(16)  # type: ignore[no-any-return]
    if name == "transformer_infer":
        return models.transformer_infer_step(8, 64)  # type: ignore[no-any-return]
    if name == "input_pipeline":
        return models.input_pipeline_step(64)  # type: ignore[no-any-return]
    if name in ("mlp", "mlp_heavy"):
        return mlp_step(256 if name == "mlp" else MLP_HEAVY_WIDTH)
    raise SystemExit(f"unknown workload {name!r} (known: {', '.join(WORKLOADS)})")


def mlp_step(width: int, batch: int = 64) -> StepFn:
    """One SGD training step of Linear(256, width)-ReLU-Linear(width, 10) on a fixed batch."""
    import torch
    from torch import nn

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(256, width), nn.ReLU(), nn.Linear(width, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    inputs = torch.randn(batch, 256)
    labels = torch.randint(0, 10, (batch,))

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        nn.functional.cross_entropy(model(inputs), labels).backward()
        optimizer.step()

    return step


def time_round(step: StepFn, warmup: int, steps: int) -> Json:
    """Re-warm, then time ``steps`` steps; per-step ns, and the round's wall and CPU time."""
    wall0, cpu0 = time.perf_counter_ns(), time.process_time_ns()
    for _ in range(warmup):
        step()
    times, cpu_times = [], []
    for _ in range(steps):
        start, cpu_start = time.perf_counter_ns(), time.process_time_ns()
        step()
        times.append(time.perf_counter_ns() - start)
        cpu_times.append(time.process_time_ns() - cpu_start)
    return {
        "step_ns": times,
        "step_cpu_ns": cpu_times,
        "wall_ns": time.perf_counter_ns() - wall0,
        "cpu_ns": time.process_time_ns() - cpu0,
        "loadavg": list(os.getloadavg()),
    }


def worker(args: argparse.Namespace) -> None:
    """Run in a fresh process; prints one JSON document on stdout."""
    started = time.perf_counter()
    load_start = list(os.getloadavg())
    if args.affinity is not None:
        os.sched_setaffinity(0, {args.affinity})
    import torch

    if args.threads is not None:
        torch.set_num_threads(args.threads)
    imported = time.perf_counter()
    names = args.workloads.split(",")
    steps = {}
    build_s = {}
    for name in names:
        t0 = time.perf_counter()
        steps[name] = build(name)
        build_s[name] = time.perf_counter() - t0
    rounds: dict[str, list[Json]] = {name: [] for name in names}
    order = (
        [(r, n) for r in range(args.rounds) for n in names]
        if args.interleave
        else [(r, n) for n in names for r in range(args.rounds)]
    )
    for index, (_, name) in enumerate(order):
        if index and args.between == "sleep":
            time.sleep(args.sleep_ms / 1e3)
        elif index and args.between == "gc":
            gc.collect()
        rounds[name].append(time_round(steps[name], args.warmup, args.steps))
    doc = {
        "pid": os.getpid(),
        "workloads": names,
        "threads": torch.get_num_threads(),
        "threads_requested": args.threads,
        "affinity": sorted(os.sched_getaffinity(0)),
        "interleave": args.interleave,
        "between": args.between,
        "regression": os.environ.get("PERFGATE_EXAMPLE_REGRESSION", ""),
        "import_s": imported - started,
        "build_s": build_s,
        "loadavg_start": load_start,
        "loadavg_end": list(os.getloadavg()),
        "worker_s": time.perf_counter() - started,
        "rounds": rounds,
    }
    json.dump(doc, sys.stdout)


def spawn(
    workloads: Sequence[str],
    *,
    rounds: int = 1,
    warmup: int = 3,
    steps: int = 20,
    threads: int | None = None,
    affinity: int | None = None,
    interleave: bool = False,
    between: str = "none",
    env: dict[str, str] | None = None,
) -> Json:
    """Start one worker process and return its document, with the parent-side wall time."""
    argv = [
        sys.executable,
        str(Path(__file__).resolve()),
        "worker",
        "--workloads",
        ",".join(workloads),
        "--rounds",
        str(rounds),
        "--warmup",
        str(warmup),
        "--steps",
        str(steps),
        "--between",
        between,
    ]
    if threads is not None:
        argv += ["--threads", str(threads)]
    if affinity is not None:
        argv += ["--affinity", str(affinity)]
    if interleave:
        argv.append("--interleave")
    child_env = {k: v for k, v in os.environ.items() if k != "PERFGATE_EXAMPLE_REGRESSION"}
    child_env.update(env or {})
    t0 = time.perf_counter()
    done = subprocess.run(argv, env=child_env, capture_output=True, text=True, check=True)
    doc: Json = json.loads(done.stdout)
    doc["process_wall_s"] = time.perf_counter() - t0
    return doc


# ---------------------------------------------------------------------------- hog


@contextmanager
def cpu_hog(kind: str) -> Iterator[None]:
    """``none``; ``free``: a busy Python loop in another process; ``core0``: pinned to 0."""
    if kind == "none":
        yield
        return
    code = (
        "import os, sys\nif sys.argv[1] == 'core0': os.sched_setaffinity(0, {0})\nwhile True: pass"
    )
    hog = subprocess.Popen([sys.executable, "-c", code, kind])
    time.sleep(0.5)
    try:
        yield
    finally:
        hog.kill()
        hog.wait()


# ---------------------------------------------------------------------------- orchestrators


def save(path: Path, doc: Json) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))
    print(f"wrote {path}", file=sys.stderr)


def meta(**extra: Any) -> Json:
    import platform

    return {
        "host": platform.node(),
        "cpus": os.cpu_count(),
        "python": sys.version.split()[0],
        "created": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "loadavg_start": list(os.getloadavg()),
        **extra,
    }


def cmd_fresh(args: argparse.Namespace) -> None:
    workloads = args.workloads.split(",")
    doc = meta(kind="fresh", k=args.k, threads=args.threads)
    procs: list[Json] = []
    for k in range(args.k):
        for name in workloads:
            procs.append(spawn([name], threads=args.threads))
            print(f"fresh {k} {name} {procs[-1]['process_wall_s']:.1f}s", file=sys.stderr)
    doc["processes"] = procs
    doc["loadavg_end"] = list(os.getloadavg())
    save(Path(args.out), doc)


def cmd_rounds(args: argparse.Namespace) -> None:
    workloads = args.workloads.split(",")
    doc = meta(kind="rounds", r=args.r, threads=args.threads, replicates=args.replicates)
    procs: list[Json] = []
    for rep in range(args.replicates):
        for variant in ("separate", "interleaved", "sleep", "gc"):
            between = variant if variant in ("sleep", "gc") else "none"
            if variant == "interleaved":
                found = spawn(workloads, rounds=args.r, threads=args.threads, interleave=True)
                found.update(variant=variant, replicate=rep)
                procs.append(found)
            else:
                for name in workloads:
                    found = spawn([name], rounds=args.r, threads=args.threads, between=between)
                    found.update(variant=variant, replicate=rep)
                    procs.append(found)
            print(f"rounds {rep} {variant}", file=sys.stderr)
    doc["processes"] = procs
    doc["loadavg_end"] = list(os.getloadavg())
    save(Path(args.out), doc)


THREAD_CONFIGS: dict[str, dict[str, int | None]] = {
    "default": {"threads": None, "affinity": None},
    "threads1": {"threads": 1, "affinity": None},
    "threads1_pin1": {"threads": 1, "affinity": 1},
}


def cmd_threads(args: argparse.Namespace) -> None:
    workloads = args.workloads.split(",")
    doc = meta(kind="threads", k=args.k, configs=THREAD_CONFIGS, hogs=args.hogs)
    procs: list[Json] = []
    for hog in args.hogs.split(","):
        with cpu_hog(hog):
            for k in range(args.k):
                for config, how in THREAD_CONFIGS.items():
                    for name in workloads:
                        found = spawn([name], threads=how["threads"], affinity=how["affinity"])
                        found.update(config=config, hog=hog)
                        procs.append(found)
                print(f"threads {hog} {k}", file=sys.stderr)
    doc["processes"] = procs
    doc["loadavg_end"] = list(os.getloadavg())
    save(Path(args.out), doc)


DETECT_ARMS: dict[str, tuple[str, str]] = {
    "mlp": ("mlp", ""),
    "mlp_heavy": ("mlp_heavy", ""),
    "cnn_train": ("cnn_train", ""),
    "cnn_train+host_copy": ("cnn_train", "host_copy"),
}


def cmd_detect(args: argparse.Namespace) -> None:
    doc = meta(kind="detect", k=args.k, threads=args.threads)
    procs: list[Json] = []
    for k in range(args.k):
        arms = list(DETECT_ARMS.items())
        random.Random(k).shuffle(arms)
        for arm, (name, regression) in arms:
            env = {"PERFGATE_EXAMPLE_REGRESSION": regression} if regression else None
            found = spawn([name], threads=args.threads, env=env)
            found["arm"] = arm
            procs.append(found)
        print(f"detect {k}", file=sys.stderr)
    doc["processes"] = procs
    doc["loadavg_end"] = list(os.getloadavg())
    save(Path(args.out), doc)


# ---------------------------------------------------------------------------- statistics


def median_us(step_ns: Sequence[int]) -> float:
    return float(np.median(step_ns)) / 1e3


def robust_cv(values: Sequence[float]) -> float:
    x = np.asarray(values, dtype=float)
    med = float(np.median(x))
    return 1.4826 * float(np.median(np.abs(x - med))) / med


def cv(values: Sequence[float]) -> float:
    x = np.asarray(values, dtype=float)
    return float(np.std(x, ddof=1) / np.mean(x)) if len(x) > 1 else math.nan


def log_sd(values: Sequence[float]) -> float:
    """SD of log values: the between-round noise as a multiplicative figure."""
    x = np.log(np.asarray(values, dtype=float))
    return float(np.std(x, ddof=1)) if len(x) > 1 else math.nan


def lag1(values: Sequence[float]) -> float:
    x = np.asarray(values, dtype=float)
    x = x - x.mean()
    denom = float(np.dot(x, x))
    return float(np.dot(x[:-1], x[1:]) / denom) if denom > 0 else math.nan


def spread(medians: Sequence[float]) -> Json:
    m = np.asarray(medians, dtype=float)
    return {
        "n": len(m),
        "median_us": float(np.median(m)),
        "cv": cv(m),
        "robust_cv": robust_cv(m),
        "log_sd": log_sd(m),
        "max_min": float(m.max() / m.min()),
    }


def fmt_us(us: float) -> str:
    return f"{us / 1e3:.2f} ms" if us >= 1000 else f"{us:.0f} µs"


def pct(x: float) -> str:
    return "n/a" if math.isnan(x) else f"{100 * x:.1f}%"


def table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def load_range(procs: Sequence[Json]) -> str:
    ones = [p["loadavg_start"][0] for p in procs] + [p["loadavg_end"][0] for p in procs]
    return f"{min(ones):.2f}–{max(ones):.2f} (median {float(np.median(ones)):.2f})"


def process_rows(procs: Sequence[Json], name: str) -> list[Json]:
    """One row per process: its median, within-round robust CV, lag-1 autocorrelation."""
    rows = []
    for p in procs:
        for r in p["rounds"].get(name, []):
            steps = r["step_ns"]
            rows.append(
                {
                    "median_us": median_us(steps),
                    "robust_cv": robust_cv(steps),
                    "lag1": lag1(steps),
                    "max_min": max(steps) / min(steps),
                    "max_step_us": max(steps) / 1e3,
                    "min_step_us": min(steps) / 1e3,
                    "wall_s": p["process_wall_s"],
                    "import_s": p["import_s"],
                    "cpu_per_wall": r["cpu_ns"] / r["wall_ns"],
                    "load": r["loadavg"][0],
                    "cpu_median_us": median_us(r.get("step_cpu_ns") or [math.nan]),
                }
            )
    return rows


def report_fresh(doc: Json) -> str:
    procs = doc["processes"]
    names = list(dict.fromkeys(n for p in procs for n in p["workloads"]))
    rows = []
    for name in names:
        pr = process_rows(procs, name)
        s = spread([r["median_us"] for r in pr])
        rows.append(
            [
                name,
                s["n"],
                fmt_us(s["median_us"]),
                pct(s["cv"]),
                pct(s["log_sd"]),
                f"{s['max_min']:.2f}",
                pct(float(np.median([r["robust_cv"] for r in pr]))),
                f"{float(np.median([r['lag1'] for r in pr])):.2f}",
                f"{float(np.median([r['wall_s'] for r in pr])):.1f} s",
                f"{float(np.median([r['import_s'] for r in pr])):.1f} s",
                f"{float(np.median([r['cpu_per_wall'] for r in pr])):.2f}",
                pct(log_sd([r["cpu_median_us"] for r in pr])),
            ]
        )
    head = [
        "workload",
        "procs",
        "median of medians",
        "CV of medians",
        "SD log medians",
        "max/min medians",
        "within robust CV (median)",
        "lag-1 (median)",
        "wall/proc",
        "import torch",
        "CPU/wall",
        "SD log CPU-time medians",
    ]
    loads, scaled, detail = [], [], []
    for name in names:
        pr = process_rows(procs, name)
        typical = float(np.median([r["median_us"] for r in pr]))
        loads += [r["load"] for r in pr]
        scaled += [r["median_us"] / typical for r in pr]
        shown = ", ".join(f"{fmt_us(r['median_us'])} ({r['load']:.1f})" for r in pr)
        detail.append(f"- {name}: {shown}")
    rho = stats.spearmanr(loads, scaled)
    return (
        f"threads={doc.get('threads') or 'torch default'}; load average (1 min) seen: "
        f"{load_range(procs)}\n\n{table(head, rows)}\n\nPer-process medians (1-min load "
        f"average after the round), in run order:\n" + "\n".join(detail) + "\n\n"
        f"Spearman ρ between load and median / the workload's median of medians, all "
        f"processes: {float(rho.statistic):.2f} (p = {float(rho.pvalue):.1g})\n"
    )


def between_process_cv(fresh: Json | None, name: str) -> float:
    if fresh is None:
        return math.nan
    return cv([r["median_us"] for r in process_rows(fresh["processes"], name)])


def report_rounds(doc: Json, fresh: Json | None) -> str:
    procs = doc["processes"]
    rows = []
    for variant in ("separate", "interleaved", "sleep", "gc"):
        vp = [p for p in procs if p["variant"] == variant]
        names = list(dict.fromkeys(n for p in vp for n in p["workloads"]))
        for name in names:
            cvs, lsds, ratios, meds, costs = [], [], [], [], []
            for p in vp:
                if name not in p["rounds"]:
                    continue
                rmeds = [median_us(r["step_ns"]) for r in p["rounds"][name]]
                cvs.append(cv(rmeds))
                lsds.append(log_sd(rmeds))
                ratios.append(max(rmeds) / min(rmeds))
                meds.append(float(np.median(rmeds)))
                costs.extend(r["wall_ns"] / 1e9 for r in p["rounds"][name])
            between = between_process_cv(fresh, name)
            mean_cv = float(np.mean(cvs))
            rows.append(
                [
                    variant,
                    name,
                    len(cvs),
                    ", ".join(fmt_us(m) for m in meds),
                    ", ".join(pct(c) for c in cvs),
                    ", ".join(pct(c) for c in lsds),
                    pct(log_sd([r["median_us"] for r in process_rows(fresh["processes"], name)]))
                    if fresh
                    else "n/a",
                    ", ".join(f"{r:.2f}" for r in ratios),
                    pct(between),
                    f"{mean_cv / between:.2f}" if between == between else "n/a",
                    f"{float(np.median(costs)):.3f} s",
                ]
            )
    head = [
        "variant",
        "workload",
        "processes",
        "median of round medians (per process)",
        "CV of round medians (per process)",
        "SD log round medians (per process)",
        "SD log medians, fresh",
        "max/min round medians",
        "between-process CV (fresh)",
        "in-process CV / between-process CV",
        "cost per round",
    ]
    return (
        f"R={doc['r']} rounds of (3 warm-up + 20 timed steps); threads="
        f"{doc.get('threads') or 'torch default'}; load average seen: {load_range(procs)}\n\n"
        f"{table(head, rows)}\n"
    )


def report_threads(doc: Json) -> str:
    procs = doc["processes"]
    rows = []
    hogs = list(dict.fromkeys(p["hog"] for p in procs))
    names = list(dict.fromkeys(n for p in procs for n in p["workloads"]))
    for name in names:
        for hog in hogs:
            for config in THREAD_CONFIGS:
                cell = [p for p in procs if p["hog"] == hog and p["config"] == config]
                pr = process_rows(cell, name)
                if not pr:
                    continue
                s = spread([r["median_us"] for r in pr])
                lowest = min(r["min_step_us"] for r in pr)
                rows.append(
                    [
                        name,
                        hog,
                        config,
                        s["n"],
                        fmt_us(s["median_us"]),
                        pct(s["cv"]),
                        f"{s['max_min']:.2f}",
                        pct(float(np.median([r["robust_cv"] for r in pr]))),
                        f"{float(np.median([r['max_min'] for r in pr])):.2f}",
                        f"{max(r['max_step_us'] for r in pr) / lowest:.1f}",
                        load_range(cell),
                    ]
                )
    head = [
        "workload",
        "hog",
        "config",
        "procs",
        "median of medians",
        "CV of medians",
        "max/min medians",
        "within robust CV",
        "max/min step within proc (median)",
        "max step / min step (all)",
        "load avg (1 min)",
    ]
    return table(head, rows) + "\n"


def welch_p(a: Sequence[float], b: Sequence[float]) -> float:
    """One-sided Welch t on log values: p of ``b`` > ``a``."""
    res = stats.ttest_ind(np.log(b), np.log(a), equal_var=False, alternative="greater")
    return float(res.pvalue)


def mw_p(a: Sequence[float], b: Sequence[float]) -> float:
    res = stats.mannwhitneyu(b, a, alternative="greater", method="exact")
    return float(res.pvalue)


def split_rates(
    a: Sequence[float], b: Sequence[float] | None, r: int, trials: int, seed: int = 1
) -> Json:
    """Rejection rates at α=0.01 over random r-vs-r picks (``b`` None: split ``a`` in two)."""
    rng = np.random.default_rng(seed)
    hits = {"welch": 0, "mw": 0}
    for _ in range(trials):
        if b is None:
            idx = rng.permutation(len(a))
            x, y = [a[i] for i in idx[:r]], [a[i] for i in idx[r : 2 * r]]
        else:
            x = list(rng.choice(a, r, replace=False))
            y = list(rng.choice(b, r, replace=False))
        hits["welch"] += welch_p(x, y) < 0.01
        hits["mw"] += mw_p(x, y) < 0.01
    return {k: v / trials for k, v in hits.items()}


def report_detect(doc: Json) -> str:
    procs = doc["processes"]
    rows = []
    clocks = ("step_ns", "step_cpu_ns")
    pairs = (("mlp", "mlp_heavy"), ("cnn_train", "cnn_train+host_copy"))
    for (base, cur), clock in ((pair, clock) for clock in clocks for pair in pairs):
        meds: dict[str, list[float]] = {}
        for p in procs:
            for r in p["rounds"][p["workloads"][0]]:
                if clock in r:
                    meds.setdefault(p["arm"], []).append(median_us(r[clock]))
        if base not in meds or cur not in meds:
            continue
        a, b = meds[base], meds[cur]
        sa, sb = spread(a), spread(b)
        ratio = sb["median_us"] / sa["median_us"]
        detect = split_rates(a, b, 5, 500)
        false = split_rates(a, None, 5, 500)
        plus8 = split_rates(a, [x * 1.08 for x in a], 5, 500)
        rows.append(
            [
                f"{base} → {cur}" + (" (CPU time)" if clock == "step_cpu_ns" else " (wall)"),
                f"{len(a)} / {len(b)}",
                f"{fmt_us(sa['median_us'])} → {fmt_us(sb['median_us'])}",
                f"{ratio:.2f}",
                f"{pct(sa['cv'])} / {pct(sb['cv'])}",
                f"{pct(sa['log_sd'])} / {pct(sb['log_sd'])}",
                f"{min(b) / max(a):.2f}",
                f"{welch_p(a, b):.1e} / {mw_p(a, b):.1e}",
                f"{pct(detect['welch'])} / {pct(detect['mw'])}",
                f"{pct(false['welch'])} / {pct(false['mw'])}",
                f"{pct(plus8['welch'])} / {pct(plus8['mw'])}",
            ]
        )
    head = [
        "pair",
        "procs a side",
        "median of medians",
        "ratio",
        "CV of medians (a / b)",
        "SD log medians (a / b)",
        "min(b)/max(a)",
        "p all procs (Welch log / MW)",
        "detect, 5 v 5 (Welch / MW)",
        "false alarm a v a, 5 v 5",
        "+8% (a×1.08), 5 v 5",
    ]
    return (
        f"threads={doc.get('threads') or 'torch default'}; load average seen: "
        f"{load_range(procs)}; one round per fresh process; α=0.01 one-sided; rates over "
        f"500 random 5-vs-5 picks of the measured round medians (without replacement, "
        f"so a v a picks disjoint halves)\n\n{table(head, rows)}\n"
    )


def rounds_needed(sd: float, effect: float, alpha: float = 0.01, power: float = 0.9) -> str:
    """Smallest R a side for a one-sided two-sample t on log round medians (equal SD)."""
    if math.isnan(sd):
        return "n/a"
    delta = math.log(effect)
    for r in range(2, 301):
        df = 2 * r - 2
        nc = delta / (sd * math.sqrt(2 / r))
        crit = stats.t.ppf(1 - alpha, df)
        if 1 - stats.nct.cdf(crit, df, nc) >= power:
            return str(r)
    return "> 300"


def report_power(sds: dict[str, float]) -> str:
    rows = []
    for label, sd in sds.items():
        rows.append(
            [
                label,
                pct(sd),
                rounds_needed(sd, 1.08, power=0.9),
                rounds_needed(sd, 1.08, power=0.99),
                rounds_needed(sd, 4.0, power=0.99),
            ]
        )
    head = [
        "noise case",
        "between-round SD (log)",
        "R a side, +8% at 90% power",
        "+8% at 99% power",
        "4x at 99% power",
    ]
    return (
        "One-sided two-sample t on log round medians, α=0.01 (exact, noncentral t); "
        "Mann–Whitney needs R ≥ 5 a side to reach α=0.01 at all (4 a side: p ≥ 1/70).\n\n"
        + table(head, rows)
        + "\n"
    )


def cmd_report(args: argparse.Namespace) -> None:
    folder = Path(args.folder)

    def load(name: str) -> Json | None:
        path = folder / name
        return json.loads(path.read_text()) if path.exists() else None

    parts = []
    sds: dict[str, float] = {}
    for tag in ("", "_threads1"):
        fresh = load(f"fresh{tag}.json")
        if fresh:
            parts += [f"## 1. Fresh processes{tag}\n", report_fresh(fresh)]
            for name in ("mlp", "cnn_train"):
                medians = [r["median_us"] for r in process_rows(fresh["processes"], name)]
                sds[f"fresh{tag or '_default'} {name}"] = log_sd(medians)
        rounds = load(f"rounds{tag}.json")
        if rounds:
            parts += [f"## 2. In-process rounds{tag}\n", report_rounds(rounds, fresh)]
            for p in rounds["processes"]:
                if p["variant"] != "interleaved":
                    continue
                for name in ("mlp", "cnn_train"):
                    rmeds = [median_us(r["step_ns"]) for r in p["rounds"].get(name, [])]
                    if len(rmeds) < 2:
                        continue
                    key = f"in-process interleaved{tag or '_default'} {name} #{p['replicate']}"
                    sds[key] = log_sd(rmeds)
    threads = load("threads.json")
    if threads:
        parts += ["## 3. Threads and affinity\n", report_threads(threads)]
        for p_hog in ("none", "free"):
            for config in ("default", "threads1", "threads1_pin1"):
                cell = [
                    p for p in threads["processes"] if p["hog"] == p_hog and p["config"] == config
                ]
                medians = [r["median_us"] for r in process_rows(cell, "mlp")]
                if medians:
                    sds[f"mlp {config}, hog {p_hog}"] = log_sd(medians)
    for tag in ("", "_threads1"):
        detect = load(f"detect{tag}.json")
        if detect:
            parts += [f"## 4. Detection{tag}\n", report_detect(detect)]
            for arm in ("mlp", "cnn_train"):
                for clock in ("step_ns", "step_cpu_ns"):
                    medians = [
                        median_us(r[clock])
                        for p in detect["processes"]
                        if p["arm"] == arm
                        for r in p["rounds"][arm]
                        if clock in r
                    ]
                    if len(medians) > 1:
                        sds[f"detect{tag or '_default'} {arm} {clock}"] = log_sd(medians)
    if sds:
        parts += ["## Power\n", report_power(sds)]
    text = "\n".join(parts)
    if args.write:
        Path(args.write).write_text(text)
    print(text)


# ---------------------------------------------------------------------------- main


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("worker", help="(internal) one measuring process")
    w.add_argument("--workloads", required=True)
    w.add_argument("--rounds", type=int, default=1)
    w.add_argument("--warmup", type=int, default=3)
    w.add_argument("--steps", type=int, default=20)
    w.add_argument("--threads", type=int)
    w.add_argument("--affinity", type=int)
    w.add_argument("--interleave", action="store_true")
    w.add_argument("--between", choices=("none", "sleep", "gc"), default="none")
    w.add_argument("--sleep-ms", type=float, default=50.0)
    w.set_defaults(func=worker)
    for name, func in (
        ("fresh", cmd_fresh),
        ("rounds", cmd_rounds),
        ("threads", cmd_threads),
        ("detect", cmd_detect),
    ):
        p = sub.add_parser(name)
        p.add_argument("--out", required=True)
        p.add_argument("--threads", type=int)
        p.add_argument("--k", type=int, default=10)
        p.add_argument("--r", type=int, default=10)
        p.add_argument("--replicates", type=int, default=2)
        default = "mlp,cnn_train" if name == "threads" else ",".join(WORKLOADS)
        p.add_argument("--workloads", default=default)
        p.add_argument("--hogs", default="none,free,core0")
        p.set_defaults(func=func)
    rep = sub.add_parser("report")
    rep.add_argument("folder")
    rep.add_argument("--write")
    rep.set_defaults(func=cmd_report)
    args = parser.parse_args(argv)
    args.func(args)


if __name__ == "__main__":
    main()

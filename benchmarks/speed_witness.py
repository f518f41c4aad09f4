"""Does a fixed reference workload track how fast the machine runs the example models?

A store-mode gate compares a run with a baseline recorded in another session; when the
whole host runs slower (its other tenants, invisible inside the VM), every step time
rises. A reference workload timed beside the benchmarks would witness that only if it
slows as the models do. This script measures it: in one process pinned to one CPU, it
interleaves blocks of three reference workloads (a pure-Python loop, a small numpy matrix
product, a 16 MB copy) with blocks of the three example models' steps, for several phases
of ``--seconds`` each, and prints each workload's median per phase and its change against
the first phase. Phases listed in ``--neighbours`` run beside that many busy-looping
processes.

    python benchmarks/speed_witness.py                       # five quiet phases of 40 s
    python benchmarks/speed_witness.py --neighbours 0 1 0 2 0

Not part of the test suite; the figures are in docs/verdict-quality.md.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _median_us(work: Callable[[], object], calls: int) -> float:
    times = []
    for _ in range(calls):
        start = time.perf_counter_ns()
        work()
        times.append((time.perf_counter_ns() - start) / 1e3)
    return statistics.median(times)


def _workloads() -> dict[str, Callable[[], object]]:
    import numpy as np
    import torch

    sys.path.insert(0, str(REPO / "examples"))
    import models  # type: ignore[import-not-found]  # examples/models.py, random weights

    torch.set_num_threads(1)
    matrix = np.random.default_rng(0).random((160, 160))
    block = np.random.default_rng(1).random(2_000_000)

    def python_loop() -> int:
        total = 0
        for i in range(60_000):
            total += i * i
        return total

    def numpy_matmul() -> None:
        for _ in range(8):
            matrix @ matrix

    def memory_copy() -> float:
        return float(block.copy().sum())

    work: dict[str, Callable[[], object]] = {
        "python loop": python_loop,
        "numpy matmul": numpy_matmul,
        "memory copy": memory_copy,
        "cnn_train": models.cnn_train_step(),
        "transformer_infer": models.transformer_infer_step(),
        "input_pipeline": models.input_pipeline_step(),
    }
    for step in work.values():  # warm up
        for _ in range(3):
            step()
    return work


def _phase(work: dict[str, Callable[[], object]], seconds: float) -> dict[str, float]:
    blocks: dict[str, list[float]] = {name: [] for name in work}
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for name, step in work.items():
            blocks[name].append(_median_us(step, 5))
    return {name: statistics.median(values) for name, values in blocks.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--neighbours", type=int, nargs="+", default=[0, 0, 0, 0, 0])
    parser.add_argument("--seconds", type=float, default=40.0)
    parser.add_argument("--cpu", type=int, default=max(os.sched_getaffinity(0)))
    args = parser.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.sched_setaffinity(0, {args.cpu})
    work = _workloads()
    phases: list[dict[str, float]] = []
    for neighbours in args.neighbours:
        hogs = [
            subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(neighbours)
        ]
        try:
            phases.append(_phase(work, args.seconds))
        finally:
            for hog in hogs:
                hog.kill()
                hog.wait()
        print(f"phase {len(phases)}: {neighbours} neighbour(s), load {os.getloadavg()[0]:.2f}")
    header = ["workload"] + [f"phase {i + 1} ({n})" for i, n in enumerate(args.neighbours)]
    print("\t".join(header))
    for name in work:
        first = phases[0][name]
        cells = [f"{first:,.1f} µs"] + [
            f"{phase[name]:,.1f} ({phase[name] / first - 1:+.1%})" for phase in phases[1:]
        ]
        print("\t".join([name, *cells]))
    return 0


if __name__ == "__main__":
    sys.exit(main())

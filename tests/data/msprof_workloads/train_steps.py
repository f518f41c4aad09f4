"""A tiny benchmark script for perfgate's msprof tests: N steps of real NumPy work.

Each step multiplies 256×256 matrices (about 7 ms on one CI core) and marks itself with
:func:`perfgate.marks.step`, so a profiler run gets real step windows::

    python train_steps.py --steps 12 --warmup 2
"""

from __future__ import annotations

import argparse
import os


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10, help="measured steps")
    parser.add_argument("--warmup", type=int, default=2, help="warm-up steps before them")
    parser.add_argument("--size", type=int, default=256, help="matrix size")
    parser.add_argument("--repeat", type=int, default=8, help="matrix products per step")
    args = parser.parse_args()
    # One BLAS thread: on a small shared runner, BLAS threads oversubscribe the cores and a
    # step's time jumps tenfold; one thread keeps the steps steady. Set before NumPy loads
    # (perfgate imports it too).
    for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(name, "1")
    import numpy as np

    from perfgate.marks import step

    rng = np.random.default_rng(0)
    weights = rng.standard_normal((args.size, args.size)) * 0.01
    activations = rng.standard_normal((args.size, args.size))
    for i in range(args.warmup + args.steps):
        with step(i, warmup=i < args.warmup):
            out = activations
            for _ in range(args.repeat):
                out = np.tanh(out @ weights)
    print(f"ran {args.warmup} warm-up and {args.steps} measured steps")


if __name__ == "__main__":
    main()

"""A training script profiled from outside, the way Ascend teams run msprof:

    msprof --output=prof python examples/train_script.py --steps 20   # by hand, or
    pytest --perfgate examples/test_ascend_command.py                 # through perfgate

Each step is wrapped in ``perfgate.marks.step`` so perfgate knows where steps begin and end
(it also emits an mstx range when torch_npu is loaded). The model is built in code with
random weights; set PERFGATE_EXAMPLE_REGRESSION as for the other examples.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from models import cnn_train_step

from perfgate.marks import step


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--batch", type=int, default=16)
    args = parser.parse_args()
    train_step = cnn_train_step(batch=args.batch)
    for i in range(args.warmup + args.steps):
        with step(i, warmup=i < args.warmup):
            train_step()


if __name__ == "__main__":
    main()

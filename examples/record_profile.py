"""Record a real profile of a small CNN training step on this machine (CPU, or CUDA if present).

    python examples/record_profile.py perfgate-out/cnn_train.json
    perfgate inspect perfgate-out/cnn_train.json

The model is built in code with random weights: nothing is downloaded.
Set PERFGATE_EXAMPLE_REGRESSION=host_copy to add what a real regression often is: the logits
copied to the host every step (watch copy_ratio rise and ``aten::to`` appear).
"""

from __future__ import annotations

import argparse
import os

import torch
from torch import nn

from perfgate.profilers.torch_profiler import record_trace


def build_cnn() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1),
        nn.BatchNorm2d(32),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1),
        nn.BatchNorm2d(64),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(64, 10),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", help="where to write the chrome trace (.json or .json.gz)")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3)
    args = parser.parse_args()

    torch.manual_seed(0)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = build_cnn().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    images = torch.randn(16, 3, 32, 32, device=device)
    labels = torch.randint(0, 10, (16,), device=device)
    host_copy = os.environ.get("PERFGATE_EXAMPLE_REGRESSION") == "host_copy"

    def train_step() -> None:
        optimizer.zero_grad(set_to_none=True)
        logits = model(images)
        loss = nn.functional.cross_entropy(logits, labels)
        loss.backward()
        optimizer.step()
        if host_copy:
            # The regression: a copy of the activations to host memory every step.
            logits.detach().to("cpu", copy=True)

    path = record_trace(train_step, args.out, steps=args.steps, warmup=args.warmup)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()

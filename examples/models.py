"""Small real models for perfgate's example benchmarks, built in code with random weights.

Nothing is downloaded. Each model has one realistic regression that an environment switch
turns on, so you can watch the gate fail:

    PERFGATE_EXAMPLE_REGRESSION=host_copy   about 32 MB of activations are copied to host
                                            memory every step (a debug/logging leftover)
    PERFGATE_EXAMPLE_REGRESSION=slow_op     one layer runs in float64 (a dtype slip)
    PERFGATE_EXAMPLE_REGRESSION=idle_gap    the host sleeps 5 ms every step (a
                                            synchronous log write between steps)
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

import torch
from torch import nn

REGRESSIONS = ("host_copy", "slow_op", "idle_gap")
REGRESSION = os.environ.get("PERFGATE_EXAMPLE_REGRESSION", "")
if REGRESSION not in ("", *REGRESSIONS):
    # A misspelt switch must not run the healthy models: the gate would pass and seem blind.
    raise ValueError(
        f"PERFGATE_EXAMPLE_REGRESSION={REGRESSION!r} is no regression of the examples "
        f"(expected one of {', '.join(REGRESSIONS)}, or unset)"
    )


def _device() -> str:
    """An Ascend NPU when torch_npu is installed and sees one, else CUDA, else the CPU."""
    try:
        import torch_npu  # noqa: F401  (registers torch.npu)

        if torch.npu.is_available():
            return "npu"
    except ImportError:
        pass
    return "cuda" if torch.cuda.is_available() else "cpu"


DEVICE = _device()
HOST_COPY_BYTES = 32 * 2**20


def _inject(step: Callable[[], torch.Tensor]) -> Callable[[], None]:
    """Wrap a step with the regression chosen by PERFGATE_EXAMPLE_REGRESSION, if any."""

    def run() -> None:
        activations = step()
        if REGRESSION == "host_copy":
            # Copies of the activations to host memory, about 32 MB every step.
            for _ in range(max(1, HOST_COPY_BYTES // activations.nbytes)):
                activations.detach().to("cpu", copy=True)
        elif REGRESSION == "idle_gap":
            time.sleep(0.005)

    return run


def cnn_train_step(batch: int = 16) -> Callable[[], None]:
    """One training step of a small CNN (conv, batch norm, pooling, SGD) on 32×32 images."""
    torch.manual_seed(0)
    dtype = torch.float64 if REGRESSION == "slow_op" else torch.float32
    model = nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1),
        nn.BatchNorm2d(32),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1),
        nn.BatchNorm2d(64),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
    ).to(DEVICE)
    head = nn.Linear(64, 10).to(DEVICE, dtype)
    optimizer = torch.optim.SGD([*model.parameters(), *head.parameters()], lr=0.01)
    images = torch.randn(batch, 3, 32, 32, device=DEVICE)
    labels = torch.randint(0, 10, (batch,), device=DEVICE)

    def step() -> torch.Tensor:
        optimizer.zero_grad(set_to_none=True)
        feature_map = model[:3](images)  # conv, batch norm, relu: 16×32×32×32
        logits = head(model[3:](feature_map).to(dtype))
        loss = nn.functional.cross_entropy(logits, labels)
        loss.backward()
        optimizer.step()
        return feature_map

    return _inject(step)


def transformer_infer_step(batch: int = 8, seq: int = 64) -> Callable[[], None]:
    """Inference through one transformer encoder block (attention + MLP) without grad."""
    torch.manual_seed(0)
    dtype = torch.float64 if REGRESSION == "slow_op" else torch.float32
    block = (
        nn.TransformerEncoderLayer(
            d_model=128, nhead=4, dim_feedforward=512, batch_first=True, dropout=0.0
        )
        .to(DEVICE, dtype)
        .eval()
    )
    tokens = torch.randn(batch, seq, 128, device=DEVICE, dtype=dtype)

    @torch.no_grad()
    def step() -> torch.Tensor:
        return block(tokens)

    return _inject(step)


def input_pipeline_step(batch: int = 64) -> Callable[[], None]:
    """A host-side input pipeline feeding an MLP: decode/normalise on the host, copy the
    batch to the device, one training step."""
    torch.manual_seed(0)
    dtype = torch.float64 if REGRESSION == "slow_op" else torch.float32
    model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 10)).to(DEVICE, dtype)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    raw = torch.randint(0, 255, (batch, 256), dtype=torch.uint8)
    labels = torch.randint(0, 10, (batch,), device=DEVICE)

    def step() -> torch.Tensor:
        inputs = (raw.to(dtype) / 255.0).to(DEVICE, non_blocking=True)
        optimizer.zero_grad(set_to_none=True)
        hidden = model[1](model[0](inputs))
        loss = nn.functional.cross_entropy(model[2](hidden), labels)
        loss.backward()
        optimizer.step()
        return hidden

    return _inject(step)

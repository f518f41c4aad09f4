"""perfgate's example benchmarks: run them with ``pytest --perfgate examples/``.

Each test is a benchmark because it uses the ``perfgate`` fixture. Without ``--perfgate``
they are skipped. See examples/models.py for the regressions you can switch on.
"""

from __future__ import annotations

import pytest
from models import cnn_train_step, input_pipeline_step, transformer_infer_step


def test_cnn_train(perfgate):
    perfgate.run(cnn_train_step(batch=16), steps=20, warmup=3, batch=16)


def test_transformer_infer(perfgate):
    perfgate.run(transformer_infer_step(batch=8, seq=64), steps=20, warmup=3, batch=8, seq=64)


@pytest.mark.perfgate(thresholds={"copy_ratio": {"max_increase": "1pt"}})
def test_input_pipeline(perfgate):
    perfgate.run(input_pipeline_step(batch=64), steps=20, warmup=3, batch=64)

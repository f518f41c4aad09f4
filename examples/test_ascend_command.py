"""The msprof way: a whole training script profiled from outside by msprof.

Runs where msprof is on PATH (source the CANN set_env.sh on an Ascend runner); elsewhere it
is skipped, whatever ``--perfgate-profiler`` says (the script is the Ascend team's journey;
the other examples cover step times on any machine).
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parent / "train_script.py"


@pytest.mark.skipif(
    shutil.which("msprof") is None,
    reason="msprof not on PATH: this example runs on an Ascend runner with CANN set up",
)
def test_cnn_train_script(perfgate):
    perfgate.command([sys.executable, str(SCRIPT), "--steps", "20", "--warmup", "3"], batch=16)

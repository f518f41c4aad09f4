"""The example benchmarks' switch: a misspelt regression stops the run instead of measuring
the healthy models (the gate would pass, and seem blind to the regression asked for)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[1]


def _collect(regression: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PERFGATE_EXAMPLE_REGRESSION": regression}
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "examples/",
            "--collect-only",
            "-q",
            "-p",
            "no:cacheprovider",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_a_misspelt_regression_is_a_usage_error_naming_the_known_ones() -> None:
    done = _collect("host-copy")
    assert done.returncode == pytest.ExitCode.USAGE_ERROR
    assert done.stderr.strip() == (
        "ERROR: PERFGATE_EXAMPLE_REGRESSION='host-copy' is no regression of the examples "
        "(expected one of host_copy, slow_op, idle_gap, or unset)"
    )


def test_a_known_regression_collects_the_benchmarks() -> None:
    done = _collect("host_copy")
    assert done.returncode == 0, done.stderr
    assert "examples/test_benchmarks.py::test_cnn_train" in done.stdout

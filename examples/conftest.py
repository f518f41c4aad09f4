"""Lets the example benchmarks import examples/models.py, and checks its regression switch."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))


def pytest_configure(config: pytest.Config) -> None:
    try:
        import models  # noqa: F401  (its import checks PERFGATE_EXAMPLE_REGRESSION)
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None

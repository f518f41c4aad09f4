"""perfgate: a performance-regression gate for ML models in CI.

Importing ``perfgate`` is light (the pytest plugin is loaded by every pytest run): the
DataFrame-based API is imported on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from perfgate.errors import PerfgateError, ProfileError

if TYPE_CHECKING:
    from perfgate.analysis.metrics import analyze
    from perfgate.ingest import load_profile
    from perfgate.model import Category, Profile

__version__ = "0.1.0"

_LAZY = {
    "Category": "perfgate.model",
    "Profile": "perfgate.model",
    "load_profile": "perfgate.ingest",
    "analyze": "perfgate.analysis.metrics",
}

__all__ = [
    "Category",
    "PerfgateError",
    "Profile",
    "ProfileError",
    "__version__",
    "analyze",
    "load_profile",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'perfgate' has no attribute {name!r}")

"""perfgate: a performance-regression gate for ML models in CI."""

from __future__ import annotations

from perfgate.errors import PerfgateError, ProfileError
from perfgate.model import Category, Profile

__version__ = "0.1.0"

__all__ = ["Category", "PerfgateError", "Profile", "ProfileError", "__version__"]

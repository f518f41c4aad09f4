"""Names that become paths in the baseline store: benchmark names and runner keys."""

from __future__ import annotations

import platform
import re
from typing import Any

from perfgate.errors import PerfgateError

_SAFE = re.compile(r"[A-Za-z0-9._-]+")
_UNSAFE_RUN = re.compile(r"[^A-Za-z0-9._-]+")
MAX_NAME = 128


def is_safe_name(value: str) -> bool:
    """Whether ``value`` is usable as one path component of the store, as git keeps it."""
    return (
        bool(_SAFE.fullmatch(value))
        and len(value) <= MAX_NAME
        and not value.startswith(".")  # '.', '..', and '.git' that git never adds
    )


def check_name(value: str, what: str) -> str:
    """``value`` when it is safe as one path component (a benchmark or env name), else an error."""
    if not is_safe_name(value):
        raise PerfgateError(
            f"{what} name {value!r} cannot be used in a baseline path (expected 1 to "
            f"{MAX_NAME} letters, digits, '.', '_' or '-', not starting with '.')"
        )
    return value


def safe_name(text: str, *, lower: bool = False) -> str:
    """``text`` made safe as a path component: runs of other characters become '-',
    leading '.'/'-' go; '' when nothing is left."""
    cleaned = _UNSAFE_RUN.sub("-", text.strip()).strip("-.")[:MAX_NAME].rstrip("-.")
    return cleaned.lower() if lower else cleaned


def slug(text: str) -> str:
    """A safe, lowercase path component: letters, digits, '.', '_' and '-'."""
    return safe_name(text, lower=True) or "unnamed"


_DEVICE_FAMILY = {
    "torch_npu": "ascend",
    "torch_npu_db": "ascend",
    "msprof": "ascend",
    "msprof_db": "ascend",
    "ascend_timeline": "ascend",
    "cluster_step_trace": "ascend",
    "kineto": "gpu",
}


def env_key(fingerprint: dict[str, Any]) -> str:
    """The default runner key: device model and count, e.g. ``ascend910b4-x8``,
    ``nvidia-h100-80gb-hbm3-x1``, or ``cpu-x86_64`` for CPU-only runs."""
    device = str(fingerprint.get("device") or "").strip()
    if device.lower() == "cpu" or fingerprint.get("task_basis") == "cpu":
        machine = fingerprint.get("machine") or platform.machine() or "unknown"
        return slug(f"cpu-{machine}")
    count = fingerprint.get("device_count") or 1
    if not device:
        # The profile names no device model (e.g. a torch_npu text export): its family.
        device = _DEVICE_FAMILY.get(str(fingerprint.get("profiler")), "device")
    return slug(f"{device.replace(' ', '')}-x{count}")

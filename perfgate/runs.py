"""Sides of a comparison: a profile (directory or trace), a baseline file or a results file,
all turned into run records (:mod:`perfgate.analysis.record`).
"""

from __future__ import annotations

import json
import platform
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfgate.errors import PerfgateError

RESULTS_FORMAT = "perfgate.results"
# History: 1 — first version: {format, format_version, commit, branch, dirty, created, runs[]}.
RESULTS_FORMAT_VERSION = 1
BASELINE_FORMAT = "perfgate.baseline"


@dataclass
class Side:
    """One side of a comparison: its records and where they came from."""

    path: str
    kind: str  # profile | baseline | results
    records: list[dict[str, Any]]


def slug(text: str) -> str:
    """A safe path component: lowercase letters, digits, '.', '_' and '-'."""
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "-", text.strip()).strip("-.").lower()
    return cleaned or "unnamed"


def env_key(fingerprint: dict[str, Any]) -> str:
    """The default runner key (DESIGN §5): device model and count, e.g. ``ascend910b4-x8``,
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


_DEVICE_FAMILY = {
    "torch_npu": "ascend",
    "torch_npu_db": "ascend",
    "msprof": "ascend",
    "msprof_db": "ascend",
    "ascend_timeline": "ascend",
    "cluster_step_trace": "ascend",
    "kineto": "gpu",
}


def _read_json_document(path: Path) -> Any | None:
    """A perfgate JSON document (baseline/results), or None when the file is something else."""
    if path.suffix != ".json" or not path.is_file():
        return None
    with path.open("rb") as handle:
        head = handle.read(4096)
    if b'"format"' not in head or b"perfgate." not in head:
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise PerfgateError(
            f"{path}: not valid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"
        ) from None


def load_results_file(path: Path) -> dict[str, Any]:
    """A ``perfgate.results`` document, read and validated (see :func:`read_results`)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PerfgateError(f"{path}: no such results file") from None
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise PerfgateError(
            f"{path}: not valid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"
        ) from None
    if not isinstance(document, dict) or document.get("format") != RESULTS_FORMAT:
        raise PerfgateError(f"{path}: not a {RESULTS_FORMAT} file (key 'format')")
    read_results(path, document)
    return document


def read_results(path: Path, document: dict[str, Any]) -> list[dict[str, Any]]:
    """The run records of a results file, validated."""
    version = document.get("format_version")
    if not isinstance(version, int):
        raise PerfgateError(f"{path}: key 'format_version' is missing (expected an integer)")
    if version > RESULTS_FORMAT_VERSION:
        raise PerfgateError(
            f"{path}: results format_version {version} is newer than this perfgate "
            f"understands ({RESULTS_FORMAT_VERSION}); upgrade perfgate"
        )
    runs = document.get("runs")
    if not isinstance(runs, list) or not all(isinstance(r, dict) for r in runs):
        raise PerfgateError(f"{path}: key 'runs' is missing or not a list of objects")
    for index, run in enumerate(runs):
        for key in ("benchmark", "samples"):
            if key not in run:
                raise PerfgateError(f"{path}: runs[{index}] has no key {key!r}")
        run.setdefault("commit", document.get("commit"))
    return runs


def load_side(path: str | Path, *, benchmark: str | None = None, env: str | None = None) -> Side:
    """Read one side. Profiles are analysed into a record named ``benchmark`` (default: the
    path's name) in runner environment ``env`` (default: from the profile's fingerprint)."""
    path = Path(path)
    document = _read_json_document(path)
    if isinstance(document, dict) and document.get("format") == BASELINE_FORMAT:
        from perfgate.store.baselines import validate_record

        return Side(str(path), "baseline", [validate_record(document, str(path))])
    if isinstance(document, dict) and document.get("format") == RESULTS_FORMAT:
        return Side(str(path), "results", read_results(path, document))

    from perfgate.analysis.metrics import analyze
    from perfgate.analysis.record import fingerprint_from_profile, run_record
    from perfgate.ingest import load_profile

    profile = load_profile(path)
    analysis = analyze(profile)
    fingerprint = fingerprint_from_profile(profile, analysis)
    name = benchmark or slug(path.name.split(".")[0] if path.is_file() else path.name)
    record = run_record(
        profile,
        analysis,
        benchmark=name,
        env=env or env_key(fingerprint),
        fingerprint=fingerprint,
    )
    return Side(str(path), "profile", [record])

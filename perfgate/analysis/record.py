"""An analysed run as a plain, JSON-ready record: what a baseline file and a results file
hold for one benchmark (DESIGN §5). Pure: no file system, no git.
"""

from __future__ import annotations

import math
from typing import Any

from perfgate.analysis.metrics import METRIC_NAMES, RunAnalysis
from perfgate.model import BREAKDOWN_COLUMNS, Profile

# Operators holding at least this share of the step keep their per-step samples in the
# record (for operator-level significance); the rest keep only their averages, so a
# baseline stays tens of KB even with hundreds of operators.
SAMPLED_OPERATOR_MIN_SHARE = 0.005
SAMPLE_COLUMNS = (*METRIC_NAMES, *BREAKDOWN_COLUMNS, "copy_us")


def _number(value: Any) -> Any:
    if isinstance(value, float):
        return None if math.isnan(value) else round(value, 6)
    return value


def fingerprint_from_profile(profile: Profile, analysis: RunAnalysis) -> dict[str, Any]:
    """The environment the profile itself records (runtime details are added by runners)."""
    meta = profile.metadata
    ranks = sorted(int(r) for r in analysis.per_rank["rank"].unique())
    fingerprint: dict[str, Any] = {
        "device": meta.get("device"),
        "device_count": len(ranks) if ranks else None,
        "profiler": profile.source,
        "profiler_level": meta.get("profiler_level"),
        "aic_metrics": meta.get("aic_metrics"),
        "task_basis": meta.get("task_basis"),
        "cann_version": meta.get("cann_version"),
        "torch_npu_version": meta.get("torch_npu_version"),
        "torch_version": meta.get("torch_version"),
    }
    return {k: v for k, v in fingerprint.items() if v not in (None, "")}


def run_record(
    profile: Profile,
    analysis: RunAnalysis,
    *,
    benchmark: str,
    env: str,
    fingerprint: dict[str, Any] | None = None,
    parameters: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The record of one benchmark run (without commit fields; the store adds those)."""
    per_step = analysis.per_step
    samples: dict[str, list[Any]] = {"step": [int(s) for s in per_step["step"]]}
    for column in SAMPLE_COLUMNS:
        samples[column] = [_number(float(v)) for v in per_step[column]]
    operators = []
    op_samples = analysis.operator_samples
    for row in analysis.operators.to_dict("records"):
        entry = {
            "op_type": row["op_type"],
            "core": row["core"],
            "category": row["category"],
            "calls_per_step": _number(float(row["calls_per_step"])),
            "time_per_step_us": _number(float(row["time_per_step_us"])),
            "share": _number(float(row["share"])),
        }
        key = (row["op_type"], row["core"])
        share = float(row["share"]) if row["share"] == row["share"] else 0.0
        if share >= SAMPLED_OPERATOR_MIN_SHARE and key in op_samples.index:
            entry["samples_us"] = [_number(float(v)) for v in op_samples.loc[key]]
        operators.append(entry)
    return {
        "benchmark": benchmark,
        "env": env,
        "fingerprint": fingerprint
        if fingerprint is not None
        else fingerprint_from_profile(profile, analysis),
        "parameters": parameters or {},
        "profile": {"format": profile.source, "path": profile.path},
        "samples": samples,
        "operators": operators,
        "notes": list(analysis.notes),
    }

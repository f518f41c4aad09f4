"""An analysed profile as a run record (:class:`~perfgate.records.RunRecord`): what a
baseline file and a results file hold for one benchmark. Pure: no file system, no git.
"""

from __future__ import annotations

import hashlib
from typing import Any

from perfgate.analysis.advisor import advise
from perfgate.analysis.metrics import METRIC_NAMES, RunAnalysis
from perfgate.analysis.timeline import timeline_strip
from perfgate.model import BREAKDOWN_COLUMNS, Profile
from perfgate.records import (
    MAX_ADVICE,
    MAX_NOTES,
    MAX_OPERATORS,
    MAX_TEXT,
    OperatorEntry,
    RunRecord,
    json_number,
    validate_run,
)
from perfgate.rules import AdvisorSettings

# Operators holding at least this share of the step keep their per-step samples in the
# record (for operator-level significance); the rest keep only their averages, so a
# baseline stays tens of KB even with hundreds of operators.
SAMPLED_OPERATOR_MIN_SHARE = 0.005
SAMPLE_COLUMNS = (*METRIC_NAMES, *BREAKDOWN_COLUMNS, "copy_us")


def _rounded(value: float) -> float | None:
    return json_number(value, 6)


def record_name(name: str) -> str:
    """An operator name as a record keeps it: whole up to :data:`~perfgate.records.MAX_TEXT`
    characters; a longer one (a C++ template kernel: 5,123 characters in a real PyTorch
    trace) keeps its head, where the kernel's own name is, and a digest of the whole, so
    two names stay apart and the same kernel reads the same in the baseline and the run."""
    if len(name) <= MAX_TEXT:
        return name
    digest = hashlib.blake2b(name.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()
    return name[: MAX_TEXT - len(digest) - 2] + "…#" + digest


def _kept_notes(notes: list[str]) -> list[str]:
    """The notes as a record bounds them (:data:`~perfgate.records.MAX_NOTES` of at most
    :data:`~perfgate.records.MAX_TEXT` characters): a cluster of hundreds of ranks or
    exports can say more, and the record must still be written."""
    kept = [n if len(n) <= MAX_TEXT else n[: MAX_TEXT - 1] + "…" for n in notes]
    if len(kept) > MAX_NOTES:
        left_out = len(kept) - (MAX_NOTES - 1)
        kept = [*kept[: MAX_NOTES - 1], f"… and {left_out} more notes (perfgate inspect shows all)"]
    return kept


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
    advisor: AdvisorSettings | None = None,
) -> RunRecord:
    """The record of one benchmark run (without commit fields; the store adds those),
    checked like a record read from a file. ``advisor``: the thresholds of its hints."""
    per_step = analysis.per_step
    samples: dict[str, list[Any]] = {"step": [int(s) for s in per_step["step"]]}
    for column in SAMPLE_COLUMNS:
        samples[column] = [_rounded(v) for v in per_step[column]]
    operators: list[OperatorEntry] = []
    op_samples = analysis.operator_samples
    notes = list(analysis.notes)
    table = analysis.operators  # sorted by time per step, largest first
    if len(table) > MAX_OPERATORS:
        notes.append(
            f"{len(table) - MAX_OPERATORS} of {len(table)} operators, the smallest, are left "
            "out of the record"
        )
        table = table.head(MAX_OPERATORS)
    for row in table.to_dict("records"):
        entry: OperatorEntry = {
            "op_type": record_name(row["op_type"]),
            "core": record_name(row["core"]),
            "category": row["category"],
            "calls_per_step": _rounded(row["calls_per_step"]),
            "time_per_step_us": _rounded(row["time_per_step_us"]),
            "share": _rounded(row["share"]),
        }
        key = (row["op_type"], row["core"])
        share = float(row["share"]) if row["share"] == row["share"] else 0.0
        if share >= SAMPLED_OPERATOR_MIN_SHARE and key in op_samples.index:
            entry["samples_us"] = [_rounded(v) for v in op_samples.loc[key]]
        operators.append(entry)
    record = {
        "benchmark": benchmark,
        "env": env,
        "fingerprint": fingerprint
        if fingerprint is not None
        else fingerprint_from_profile(profile, analysis),
        "parameters": parameters or {},
        "profile": {"format": profile.source, "path": profile.path},
        "samples": samples,
        "operators": operators,
        "notes": _kept_notes(notes),
        "advice": [hint.as_dict() for hint in advise(profile, analysis, advisor)][:MAX_ADVICE],
        "timeline": timeline_strip(profile, analysis),
    }
    return validate_run(record, f"the record of benchmark {benchmark!r}")

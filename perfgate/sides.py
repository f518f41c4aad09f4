"""The sides of a comparison as the CLI is given them: a profile (directory or trace), a
baseline file or a results file, each turned into run records."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from perfgate.errors import PerfgateError
from perfgate.records import (
    BASELINE_FORMAT,
    RESULTS_FORMAT,
    ResultsDocument,
    RunRecord,
    read_json,
    validate_baseline,
    validate_results,
)
from perfgate.rules import AdvisorSettings
from perfgate.store.keys import env_key, slug


@dataclass
class Side:
    """One side of a comparison: its records and where they came from."""

    path: str
    kind: str  # profile | baseline | results
    records: list[RunRecord]
    # A results file measured on a working tree with uncommitted changes ("dirty": true).
    measured_dirty: bool = False


def _perfgate_document(path: Path) -> object | None:
    """A perfgate JSON document (baseline/results), or None when the file is something else
    (a Kineto trace is JSON too: only a ``"format": "perfgate.…"`` near the top counts)."""
    if path.suffix != ".json" or not path.is_file():
        return None
    with path.open("rb") as handle:
        head = handle.read(4096)
    if b'"format"' not in head or b"perfgate." not in head:
        return None
    return read_json(path, "perfgate file")


def load_results_file(path: Path) -> ResultsDocument:
    """A ``perfgate.results`` document, read and validated."""
    return validate_results(read_json(path, "results file"), str(path))


def _chosen(
    path: Path, runs: list[RunRecord], key: Literal["benchmark", "env"], wanted: str | None
) -> list[RunRecord]:
    """The runs whose ``key`` is ``wanted`` (all of them when it is None); an error naming
    what the file holds where none is (an option silently ignored would gate other runs)."""
    if wanted is None:
        return runs
    chosen = [run for run in runs if run[key] == wanted]
    if not chosen:
        held = ", ".join(sorted({str(run[key]) for run in runs})) or "none"
        what = "its runs" if key == "benchmark" else "its runs are of env"
        raise PerfgateError(f"{path}: no run of {key} {wanted!r} ({what}: {held})")
    return chosen


def load_side(
    path: str | Path,
    *,
    benchmark: str | None = None,
    env: str | None = None,
    advisor: AdvisorSettings | None = None,
) -> Side:
    """Read one side. A profile is analysed into a record named ``benchmark`` (default: the
    path's name) in runner environment ``env`` (default: from the profile's fingerprint),
    with the advisor's hints (``advisor``: their thresholds). Of a results file,
    ``benchmark`` and ``env`` keep only the runs of that benchmark and environment; a
    baseline file must be of them."""
    path = Path(path)
    document = _perfgate_document(path)
    if isinstance(document, dict) and document.get("format") == BASELINE_FORMAT:
        baseline = validate_baseline(document, str(path))
        _chosen(path, _chosen(path, [baseline], "benchmark", benchmark), "env", env)
        return Side(str(path), "baseline", [baseline])
    if isinstance(document, dict) and document.get("format") == RESULTS_FORMAT:
        results = validate_results(document, str(path))
        runs: list[RunRecord] = list(results["runs"])
        runs = _chosen(path, _chosen(path, runs, "benchmark", benchmark), "env", env)
        return Side(str(path), "results", runs, measured_dirty=results.get("dirty") is True)
    if document is not None:
        kind = document.get("format") if isinstance(document, dict) else None
        raise PerfgateError(
            f"{path}: key 'format' is {kind!r} (expected {BASELINE_FORMAT!r} or "
            f"{RESULTS_FORMAT!r}, or a profile)"
        )

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
        advisor=advisor,
    )
    return Side(str(path), "profile", [record])

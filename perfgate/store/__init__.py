"""Baselines on disk and the git history that chooses them (README, "Baselines").

:mod:`perfgate.store.git` answers "which commits may serve as baseline, in what order";
:mod:`perfgate.store.baselines` reads and writes the files keyed by those commits.
"""

from __future__ import annotations

from perfgate.records import BASELINE_FORMAT, BASELINE_FORMAT_VERSION
from perfgate.store.baselines import (
    BaselineEntry,
    FoundBaseline,
    baseline_path,
    find_baseline,
    history,
    list_baselines,
    prune,
    read_baseline,
    stored_commits,
    stored_envs,
    validate_record,
    write_baseline,
)
from perfgate.store.git import (
    Candidate,
    CommitInfo,
    Walk,
    baseline_candidates,
    baseline_walk,
    current_commit,
    default_branch,
    is_shallow,
    main_line,
    resolve,
)
from perfgate.store.keys import check_name

__all__ = [
    "BASELINE_FORMAT",
    "BASELINE_FORMAT_VERSION",
    "BaselineEntry",
    "Candidate",
    "CommitInfo",
    "FoundBaseline",
    "Walk",
    "baseline_candidates",
    "baseline_path",
    "baseline_walk",
    "check_name",
    "current_commit",
    "default_branch",
    "find_baseline",
    "history",
    "is_shallow",
    "list_baselines",
    "main_line",
    "prune",
    "read_baseline",
    "resolve",
    "stored_commits",
    "stored_envs",
    "validate_record",
    "write_baseline",
]

"""The step every reader ends with: per-rank parts → one :class:`~perfgate.model.Profile`.

A reader turns each rank directory, export folder or trace file into a :class:`Part`;
:func:`assemble` concatenates the parts' tables, merges their metadata and notes, records the
ranks and the time origin, and builds the Profile (which checks the tables against the
contract). :func:`merge_profiles` and :func:`with_step_marks` reshape profiles already read:
several ``PROF_*`` exports of one run become one profile, and a run's own step marks replace
the export's steps.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from perfgate.errors import ProfileError
from perfgate.ingest.common import concat_frames
from perfgate.marks import STEP_MARKS_NOTE, read_step_marks
from perfgate.model import (
    NO_STEP_MARKS_NOTE,
    STEP_COLUMNS,
    Profile,
    TimeBase,
    empty_steps,
    empty_tasks,
    rebase_times,
)


@dataclass
class Part:
    """What one rank directory, export folder or trace file contributes to a profile.

    Attributes:
        tasks: canonical task rows (``rank`` set).
        steps: canonical step rows (``rank`` set).
        op_statistic: the source's per-operator totals, if it has them.
        metadata: facts this part records (versions, level, …); parts that disagree on a key
            get a note, and the first part's value is kept.
        notes: one line each, for the user.
    """

    tasks: pd.DataFrame = field(default_factory=empty_tasks)
    steps: pd.DataFrame = field(default_factory=empty_steps)
    op_statistic: pd.DataFrame | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def assemble(
    path: str | Path,
    source: str,
    parts: Iterable[Part],
    *,
    time_origin_us: int,
    metadata: Mapping[str, Any] | None = None,
    notes: Iterable[str] = (),
    if_empty: ProfileError | None = None,
) -> Profile:
    """One Profile from the parts a reader read.

    Args:
        path: what the user pointed at.
        source: the format read (``Profile.source``).
        parts: per rank / folder / file, in order.
        time_origin_us: the origin of every ``start_us``/``end_us`` of the parts (one
            :class:`~perfgate.model.TimeBase` per profile).
        metadata: profile-wide facts; they win over the parts' values and are never reported
            as a disagreement. ``ranks`` defaults to the ranks of the tasks and steps.
        notes: profile-wide notes, before the parts' notes.
        if_empty: raised when the parts hold neither tasks nor steps.

    Notes are kept in order, each once; a profile without steps gets
    :data:`~perfgate.model.NO_STEP_MARKS_NOTE`.
    """
    parts = list(parts)
    overrides = dict(metadata or {})
    all_notes = _unique([*notes, *(n for p in parts for n in p.notes)])
    merged = _merge_metadata([p.metadata for p in parts], set(overrides), all_notes)
    tasks = concat_frames([p.tasks for p in parts], empty_tasks())
    steps = concat_frames([p.steps for p in parts], empty_steps())
    if tasks.empty and steps.empty and if_empty is not None:
        raise if_empty
    statistics = [p.op_statistic for p in parts if p.op_statistic is not None]
    merged.update(overrides)
    if "ranks" not in merged:
        merged["ranks"] = sorted({int(r) for r in pd.concat([tasks["rank"], steps["rank"]])})
    merged["time_origin_us"] = time_origin_us
    if steps.empty and NO_STEP_MARKS_NOTE not in all_notes:
        all_notes.append(NO_STEP_MARKS_NOTE)
    return Profile(
        source=source,
        path=str(path),
        tasks=tasks,
        steps=steps,
        metadata=merged,
        notes=all_notes,
        op_statistic=concat_frames(statistics) if statistics else None,
    )


def _unique(lines: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(lines))


def _merge_metadata(
    all_metadata: Sequence[Mapping[str, Any]], skip: set[str], notes: list[str]
) -> dict[str, Any]:
    """The parts' metadata, first value kept; a disagreement adds a note (keys in ``skip`` are
    left out: the caller decides them)."""
    merged: dict[str, Any] = {}
    for metadata in all_metadata:
        for key, value in metadata.items():
            if key in skip:
                continue
            if key not in merged:
                merged[key] = value
            elif merged[key] != value:
                note = f"ranks disagree on {key}: {merged[key]!r} vs {value!r}"
                if note not in notes:
                    notes.append(note)
    return merged


# --------------------------------------------------------------------------- reshaping


def merge_profiles(profiles: Sequence[Profile], path: str | Path) -> Profile:
    """Several profiles of one run (e.g. one ``PROF_*`` export per process) as one.

    The tables move to the largest of the profiles' time origins (each export was read with
    its own time base: the same origin unless an export's times are not epoch µs). Metadata
    is the first profile's, with ``ranks`` the union and ``copy_visible`` true only if every
    profile saw copies. One profile is returned as it is.
    """
    if not profiles:
        raise ValueError("merge_profiles needs at least one profile")
    if len(profiles) == 1:
        return profiles[0]
    origins = [int(p.metadata.get("time_origin_us", 0)) for p in profiles]
    origin = max(origins)
    parts = [
        Part(
            tasks=rebase_times(p.tasks, o, origin),
            steps=rebase_times(p.steps, o, origin),
            op_statistic=p.op_statistic,
            notes=[n for n in p.notes if n != NO_STEP_MARKS_NOTE],
        )
        for p, o in zip(profiles, origins)
    ]
    metadata: dict[str, Any] = {
        **profiles[0].metadata,
        "ranks": sorted({r for p in profiles for r in p.metadata.get("ranks", [])}),
        "copy_visible": all(p.metadata.get("copy_visible", True) for p in profiles),
    }
    return assemble(path, profiles[0].source, parts, time_origin_us=origin, metadata=metadata)


def read_step_marks_for(profile: Profile, marks_path: Path) -> pd.DataFrame:
    """The step marks at ``marks_path`` in ``profile``'s time base.

    The profile's origin when it has times; otherwise the marks choose theirs.
    """
    has_times = profile.tasks["start_us"].notna().any() or (
        profile.steps[["start_us", "end_us"]].notna().any().any()
    )
    clock = TimeBase(int(profile.metadata.get("time_origin_us", 0)) if has_times else None)
    return read_step_marks(marks_path, clock=clock)


def with_step_marks(profile: Profile, marks_path: Path) -> Profile:
    """``profile`` with its steps replaced by the windows the run marked (warm-up flagged).

    The marks (:mod:`perfgate.marks`) are read in the profile's time base; tasks get their
    step from the windows. Marks of other ranks than the tasks' are paired with the task
    ranks in order when the counts match (the marks carry the process's ``RANK``, the tasks
    the device msprof saw). Without a finished mark the profile is returned with a note.

    Raises:
        ProfileError: the marks file is unreadable or holds a line that is not a step mark.
    """
    marks = read_step_marks_for(profile, marks_path)
    if marks.empty:
        profile.notes.append(f"{marks_path}: the command marked no finished step")
        return profile
    notes = [n for n in profile.notes if n != NO_STEP_MARKS_NOTE]
    notes.extend(marks.attrs.get("notes", []))
    steps = marks[[*STEP_COLUMNS, "warmup"]].copy()
    task_ranks = sorted(int(r) for r in profile.tasks["rank"].unique())
    mark_ranks = sorted(int(r) for r in steps["rank"].unique())
    if task_ranks and mark_ranks != task_ranks:
        if len(mark_ranks) == len(task_ranks):
            mapping = dict(zip(mark_ranks, task_ranks))
            steps["rank"] = steps["rank"].map(mapping).astype("int64")
            notes.append(
                f"step marks of rank(s) {mark_ranks} laid over the tasks of device(s) "
                f"{task_ranks}, in order"
            )
        else:
            notes.append(
                f"step marks name rank(s) {mark_ranks} but the tasks ran on device(s) "
                f"{task_ranks}: tasks of unmarked devices are not counted"
            )
    if not profile.steps.empty:
        notes.append(f"the export's own steps ({len(profile.steps)}) were replaced by the marks")
    warmups = int(steps["warmup"].sum())
    notes.append(
        f"{STEP_MARKS_NOTE} ({marks_path.name}: {len(steps) - warmups} step(s), {warmups} warm-up)"
    )
    tasks = profile.tasks.copy()
    # The windows decide which step a task belongs to.
    tasks["step"] = pd.array([pd.NA] * len(tasks), dtype="Int64")
    metadata = {
        **profile.metadata,
        "step_marks": str(marks_path),
        "time_origin_us": int(marks.attrs.get("time_origin_us", 0)),
    }
    return Profile(
        source=profile.source,
        path=profile.path,
        tasks=tasks,
        steps=steps,
        metadata=metadata,
        notes=notes,
        op_statistic=profile.op_statistic,
    )

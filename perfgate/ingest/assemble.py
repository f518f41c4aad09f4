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

import numpy as np
import pandas as pd

from perfgate.errors import ProfileError
from perfgate.ingest.common import concat_frames, distinct_codes, repeated_rows
from perfgate.intervals import union_length_per_group
from perfgate.marks import STEP_MARKS_NOTE, read_step_marks
from perfgate.model import (
    BREAKDOWN_COLUMNS,
    NO_STEP_MARKS_NOTE,
    SOURCE_COLUMN,
    SOURCE_ROW,
    STEP_COLUMNS,
    Profile,
    SourceFile,
    TimeBase,
    empty_steps,
    empty_tasks,
    normalize_op_statistic,
    rebase_times,
    unknown_ints,
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
    tasks = _without_repeated_tasks(
        concat_frames([p.tasks for p in parts], empty_tasks()), all_notes
    )
    steps = concat_frames([p.steps for p in parts], empty_steps())
    if tasks.empty and steps.empty and if_empty is not None:
        raise if_empty
    statistics = [p.op_statistic for p in parts if p.op_statistic is not None]
    op_statistic = _checked_statistic(statistics, path, all_notes)
    merged.update(overrides)
    if "ranks" not in merged:
        merged["ranks"] = sorted(
            {int(r) for table in (tasks, steps) for r in pd.unique(table["rank"].to_numpy())}
        )
    merged["time_origin_us"] = time_origin_us
    if steps.empty and NO_STEP_MARKS_NOTE not in all_notes:
        all_notes.append(NO_STEP_MARKS_NOTE)
    tagged_work = _busy_per_tagged_step(tasks)
    profile = Profile(
        source=source,
        path=str(path),
        tasks=tasks,
        steps=steps,
        metadata=merged,
        notes=all_notes,
        op_statistic=op_statistic,
    )
    _check_steps_hold_their_tasks(steps, tagged_work)
    profile.steps = _without_empty_steps(profile, all_notes)
    # On the tasks as read, which the readers may keep categorical (the same rows and values
    # as profile.tasks, whose text columns are objects).
    _note_stream_overlaps(tasks, all_notes)
    if profile.steps.empty and NO_STEP_MARKS_NOTE not in all_notes:
        all_notes.append(NO_STEP_MARKS_NOTE)
    return profile


# What makes two rows of one profile the same task: a row written twice (msprof-analyze's
# advisor data repeats a MatMulV3 row four times; a fused kernel is listed under two names).
_SAME_TASK = ["rank", "stream", "task_id", "start_us", "dur_us"]


def _without_repeated_tasks(tasks: pd.DataFrame, notes: list[str]) -> pd.DataFrame:
    """``tasks`` with each task once: a row that repeats an earlier one's rank, stream, task
    id, start and duration (all known) is the same task, whatever its name. Between two files
    the readers match tasks themselves (:func:`perfgate.ingest.common.tasks_not_in`); this is
    the same task twice within what they read, which counted twice in the operator table
    (calls per step, µs per step) while the metrics, interval unions, counted it once."""
    if tasks.empty or not set(_SAME_TASK) <= set(tasks.columns):
        return tasks
    repeated = repeated_rows(tasks, _SAME_TASK, "start_us")
    if not repeated.any():
        return tasks
    notes.append(
        f"{int(repeated.sum())} task row(s) repeat an earlier row's stream, task id, start and "
        "duration: each task counted once"
    )
    return tasks.loc[~repeated].reset_index(drop=True)


# A step's tasks may keep the device busy this much longer than the profiler says the step
# lasted (its own rounding) before the two files contradict each other.
_STEP_SLACK = 0.01
_STEP_SLACK_US = 1.0


def _busy_per_tagged_step(tasks: pd.DataFrame) -> dict[tuple[int, int], tuple[float, str]]:
    """(rank, step) → (µs the union of the tasks the source tagged with the step covers, the
    file that tagged them), for tasks whose step the source gave (kernel_details.csv Step Id)."""
    tagged = tasks.loc[tasks["step"].notna()]
    if tagged.empty:
        return {}
    start = pd.to_numeric(tagged["start_us"], errors="coerce").to_numpy(dtype=np.float64)
    end = start + pd.to_numeric(tagged["dur_us"], errors="coerce").to_numpy(dtype=np.float64)
    finite = np.isfinite(start) & np.isfinite(end) & (end >= start)
    ids = pd.DataFrame({"rank": tagged["rank"].to_numpy(), "step": tagged["step"].to_numpy()})
    ok = finite & ids.notna().all(axis=1).to_numpy()
    ids = ids.loc[ok]
    if ids.empty:
        return {}
    group = ids.groupby(["rank", "step"], sort=False).ngroup().to_numpy()
    covered = union_length_per_group(group, start[ok], end[ok], int(group.max()) + 1)
    first = np.unique(group, return_index=True)[1]  # each group's first row, in file order
    sources = tagged[SOURCE_COLUMN].to_numpy()[ok] if SOURCE_COLUMN in tagged.columns else None
    ranks = ids["rank"].to_numpy()[first].tolist()
    steps = ids["step"].to_numpy()[first].tolist()
    files = sources[first].tolist() if sources is not None else [None] * len(first)
    busy: dict[tuple[int, int], tuple[float, str]] = {}
    for rank, step, length, where in zip(ranks, steps, covered.tolist(), files):
        try:
            key = (int(rank), int(step))
        except (TypeError, ValueError, OverflowError):
            continue  # not an id: the table check names it
        busy[key] = (length, where.path if isinstance(where, SourceFile) else "")
    return busy


def _check_steps_hold_their_tasks(
    steps: pd.DataFrame, busy: Mapping[tuple[int, int], tuple[float, str]]
) -> None:
    """A step the profiler gave a length but no window (step_trace_time.csv: the sum of its
    breakdown) cannot be shorter than the time the tasks tagged with it keep the device busy
    (kernel_details.csv Step Id): two files of the export contradict each other, and every
    share of the step would be wrong (docs/formats.md §12)."""
    if not busy or steps.empty or not all(c in steps.columns for c in BREAKDOWN_COLUMNS):
        return
    table = steps.reset_index(drop=True)
    parts = table[list(BREAKDOWN_COLUMNS)].apply(pd.to_numeric, errors="coerce")
    length = parts.sum(axis=1, min_count=len(BREAKDOWN_COLUMNS)).to_numpy(dtype=np.float64)
    no_window = table["start_us"].isna().to_numpy() | table["end_us"].isna().to_numpy()
    for position in np.flatnonzero(no_window & np.isfinite(length)):
        try:
            key = (int(table["rank"].iloc[position]), int(table["step"].iloc[position]))
        except (TypeError, ValueError, OverflowError):
            continue
        if key not in busy:
            continue
        covered, tasks_file = busy[key]
        if covered <= length[position] * (1 + _STEP_SLACK) + _STEP_SLACK_US:
            continue
        source = table[SOURCE_COLUMN].iloc[position] if SOURCE_COLUMN in table.columns else None
        row = table[SOURCE_ROW].iloc[position] if SOURCE_ROW in table.columns else None
        where = f"data row {int(row)}: " if row is not None and not pd.isna(row) else ""
        raise ProfileError(
            source.path if isinstance(source, SourceFile) else tasks_file or "",
            f"{where}step {key[1]} of rank {key[0]} lasts {length[position]:.3f} µs "
            f"(the sum of its breakdown) but its tasks in {Path(tasks_file).name or 'the tasks'} "
            f"keep the device busy {covered:.3f} µs",
            column=source.header("step") if isinstance(source, SourceFile) else "step",
            expected="a step at least as long as the device work tagged with it",
        )


def _note_stream_overlaps(tasks: pd.DataFrame, notes: list[str]) -> None:
    """A note when tasks overlap an earlier task of their stream, or of their name.

    A stream runs its tasks one after another, and a kernel rarely runs concurrently with
    itself: the export lists a task twice (e.g. under task ids or streams two files disagree
    on) or misnames a stream. Operator times then add up to more than the device was busy,
    and an operator's share of the step may pass 100%: the note says why.
    """
    for key, what in (("stream", "their stream"), ("name", "the same name")):
        if key not in tasks.columns or len(tasks) < 2:
            continue
        # One integer per (rank, key as text): sorting and grouping integers, not strings.
        # Arrays of the rows whose key is known (code −1: missing), not a copy of the frame.
        codes, distinct = distinct_codes(tasks[key])
        known = codes >= 0
        if pd.api.types.infer_dtype(distinct, skipna=False) != "string":
            distinct = np.array([str(v) for v in distinct], dtype=object)
        as_text = pd.factorize(distinct)[0]
        group = pd.factorize(
            tasks["rank"].to_numpy(dtype=np.int64)[known] * (len(distinct) + 1)
            + as_text[codes[known]]
        )[0]
        start = tasks["start_us"].to_numpy(dtype=np.float64)[known]
        if (start[1:] >= start[:-1]).all():  # in time order already: the groups' stable sort
            order = np.argsort(group, kind="stable")
        else:
            order = np.lexsort((start, group))
        group, start = group[order], start[order]
        end = start + tasks["dur_us"].to_numpy(dtype=np.float64)[known][order]
        same = group[1:] == group[:-1]
        running = pd.Series(end).groupby(group, sort=False).cummax().to_numpy()
        overlap = np.where(same, running[:-1] - start[1:], 0.0)
        overlapping = overlap > _STEP_SLACK_US
        if overlapping.any():
            notes.append(
                f"{int(overlapping.sum())} task(s) overlap an earlier task of {what} (by up "
                f"to {overlap.max():.3f} µs): tasks listed twice, or streams misnamed; "
                "operator times may add up to more than the device was busy"
            )


def _checked_statistic(
    statistics: Sequence[pd.DataFrame], path: str | Path, notes: list[str]
) -> pd.DataFrame | None:
    """The parts' op_statistic tables as one, checked (docs/formats.md §12); an auxiliary file
    (§10): a value that breaks the checks becomes a note and the totals are not used."""
    table = concat_frames(statistics)
    if table.empty:
        return None
    try:
        return normalize_op_statistic(table, path)
    except ProfileError as exc:
        notes.append(f"{exc}; skipped: the profiler's per-operator totals are not used")
        return None


def _without_empty_steps(profile: Profile, notes: list[str]) -> pd.DataFrame:
    """The profile's steps less the windows in which a rank that has tasks ran none.

    Such a window says nothing about the device: the trace ends in it, or the step was marked
    on a rank whose device work another file lists. Analysed, it would read as 0% utilization
    and 100% free (docs/formats.md §12). A step the profiler gave its own breakdown for is
    kept: the profiler measured it. So are the steps when every one is empty.
    """
    steps, tasks = profile.steps, profile.tasks
    if steps.empty or tasks.empty:
        return steps
    window = steps["start_us"].notna() & steps["end_us"].notna()
    if any(c in steps.columns for c in BREAKDOWN_COLUMNS):
        given = steps[[c for c in BREAKDOWN_COLUMNS if c in steps.columns]].notna().all(axis=1)
        window &= ~given
    if not window.any():
        return steps
    empty = np.zeros(len(steps), dtype=bool)
    untagged = tasks["step"].isna().to_numpy()
    tagged = tasks.loc[~untagged, ["rank", "step"]].drop_duplicates()
    tagged_pairs = set(zip(tagged["rank"].tolist(), tagged["step"].tolist()))
    task_rank = tasks["rank"].to_numpy(dtype=np.int64)
    task_start = tasks["start_us"].to_numpy(dtype=np.float64)
    windows = steps.loc[window]
    for rank, group in windows.groupby("rank"):
        starts = np.sort(task_start[(task_rank == rank) & untagged])
        lo = np.searchsorted(starts, group["start_us"].to_numpy(dtype=np.float64), "left")
        hi = np.searchsorted(starts, group["end_us"].to_numpy(dtype=np.float64), "left")
        has_tagged = np.array([(rank, s) in tagged_pairs for s in group["step"].tolist()])
        positions = np.flatnonzero(window.to_numpy())[(windows["rank"] == rank).to_numpy()]
        empty[positions] = (hi == lo) & ~has_tagged.astype(bool)
    if not empty.any():
        return steps
    if empty.all():
        # Left out, nothing would be left, and the tasks outside every step would be analysed
        # as one window: the work between the steps, read as if it were a step. Kept, the
        # steps give their time, and nothing is claimed about work the profile does not show.
        notes.append(
            "no step window holds a task of its rank: the steps are kept, and the tasks "
            "outside them are not analysed in their place"
        )
        return steps
    left_out = steps.loc[empty]
    listed = ", ".join(
        f"{int(s)} (rank {int(r)})" for r, s in zip(left_out["rank"], left_out["step"])
    )
    notes.append(
        f"step(s) {listed} hold no task of their rank: left out (the trace ends in them or "
        "lists their work elsewhere; their utilization would read 0%)"
    )
    return steps.loc[~empty].reset_index(drop=True)


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
    tasks["step"] = unknown_ints(len(tasks))
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

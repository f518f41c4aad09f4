"""msprof text export (``PROF_*/mindstudio_profiler_output/``) → :class:`Profile`.

Accepted paths: a ``PROF_*`` directory, its ``mindstudio_profiler_output/`` folder, the older
``PROF_*/device_N/summary/`` folder (or ``device_N/``), a directory holding several ``PROF_*``
directories (one per process), or a lone ``op_summary_*.csv``.

What comes from where:

- tasks ← ``op_summary_*.csv`` (:data:`~perfgate.ingest.ascend_csv.TASK_COLUMN_MAP`, ``rank`` =
  ``Device_id``), plus the tasks only ``task_time_*.csv`` lists (events, copies, …; a task in
  both files is counted once: :func:`~perfgate.ingest.common.tasks_not_in`);
- steps ← ``step_trace_*.csv`` (``Iteration ID``; window = ``Iteration End − Iteration Time`` to
  ``Iteration End``) when present, else none (one window);
- ``op_statistic`` ← ``op_statistic_*.csv`` (``rank, op_type, core, count, total_us``).

Time stamps (``Task Start Time(us)``, ``task_start(us)``, ``Iteration End(us)``) are read exactly
by one :class:`~perfgate.model.TimeBase` for the whole profile: epoch µs become µs since
``metadata["time_origin_us"]`` (see :mod:`perfgate.model`).

File names follow msprof's grammar
``{type}[_{device}[_{model}][_{iteration}]][_slice_{n}]_{YYYYmmddHHMMSS}.csv``: slices of one
export are merged, and when a folder holds several exports only the newest is read
(docs/formats.md §5 describes the files and columns).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from perfgate.errors import ProfileError
from perfgate.ingest import FormatReader
from perfgate.ingest.ascend_csv import (
    OP_SUMMARY,
    CsvColumn,
    ascend_tasks,
    read_csv_columns,
    read_op_statistic,
    task_columns,
)
from perfgate.ingest.assemble import Part, assemble
from perfgate.ingest.common import (
    canonical_task_columns,
    concat_frames,
    read_auxiliary,
    tasks_not_in,
)
from perfgate.model import (
    SOURCE_COLUMN,
    STEP_COLUMNS,
    Profile,
    TimeBase,
    empty_steps,
    provenance_columns,
)

SOURCE = "msprof"
OUTPUT_DIR = "mindstudio_profiler_output"
LEGACY_SUMMARY_DIR = "summary"

_EXPORT_FILE = re.compile(
    r"^(?P<kind>op_summary|task_time|op_statistic|step_trace)"
    r"(?:_(?P<ids>\d+(?:_\d+)*))?"
    r"(?:_slice_(?P<slice>\d+))?"
    r"_(?P<stamp>\d{14})\.csv$"
)
_DEVICE_DIR = re.compile(r"^device_(?P<device>\d+)$")
_TASK_KINDS = ("op_summary", "task_time")

# Profiler control tasks: msprof brackets the collection with them; they are not workload work
# (in the real fixture PROFILING_ENABLE runs 15 s before the first kernel).
PROFILER_CONTROL_TASKS = frozenset({"PROFILING_ENABLE", "PROFILING_DISABLE"})

TASK_TIME_COLUMNS = (
    CsvColumn("device_id", "Device_id", "int", header_required=False),
    CsvColumn("name", "kernel_name", "name"),
    CsvColumn("core", "kernel_type", "name"),
    CsvColumn("stream", "stream_id", "text"),
    CsvColumn("task_id", "task_id", "text"),
    CsvColumn("dur_us", "task_time(us)", "float", value_required=True),
    CsvColumn("start_us", "task_start(us)", "time", value_required=True),
)

ITERATION_TIME = "Iteration Time(us)"
STEP_TRACE_COLUMNS = (
    CsvColumn("device_id", "Device_id", "int", header_required=False),
    CsvColumn("step", "Iteration ID", "int", value_required=True),
    CsvColumn("end_us", "Iteration End(us)", "time", value_required=True),
    CsvColumn("iteration_us", ITERATION_TIME, "float", value_required=True),
    CsvColumn("model_id", "Model ID", "int", header_required=False),
)


@dataclass(frozen=True)
class ExportFile:
    """One msprof summary CSV and what its name says."""

    path: Path
    kind: str
    ids: str
    slice: int | None
    stamp: str

    @property
    def device(self) -> int | None:
        """The device id in the file name (older per-device layout), if any."""
        return int(self.ids.split("_")[0]) if self.ids else None


def parse_export_name(path: Path) -> ExportFile | None:
    """An :class:`ExportFile` when ``path``'s name follows msprof's summary file grammar."""
    match = _EXPORT_FILE.match(path.name)
    if match is None:
        return None
    slice_no = match.group("slice")
    return ExportFile(
        path=path,
        kind=match.group("kind"),
        ids=match.group("ids") or "",
        slice=int(slice_no) if slice_no is not None else None,
        stamp=match.group("stamp"),
    )


def newest_export(files: Sequence[ExportFile]) -> tuple[list[ExportFile], list[ExportFile]]:
    """Split one kind's files (same ids) into (the newest export's slices, the older files).

    msprof stamps every file with the time it is written, so the slices of one export can carry
    different stamps. An export starts with its first file (no ``_slice_`` or ``_slice_0``); the
    newest export is the newest such start plus the later-numbered slices stamped no earlier.
    """
    if not files:
        return [], []
    starts = [f for f in files if not f.slice]
    if not starts:  # only _slice_1… left: the lowest-numbered slice opens the export
        lowest = min(f.slice or 0 for f in files)
        starts = [f for f in files if f.slice == lowest]
    first = max(starts, key=lambda f: (f.stamp, f.path.name))
    chosen = [first]
    taken_slices = {first.slice or 0}
    for f in sorted(files, key=lambda f: (f.stamp, f.path.name)):
        if f is first or not f.slice or f.stamp < first.stamp or f.slice in taken_slices:
            continue
        chosen.append(f)
        taken_slices.add(f.slice)
    chosen.sort(key=lambda f: f.slice or 0)
    older = [f for f in files if f not in chosen]
    return chosen, older


# --------------------------------------------------------------------------- detection


def detect(path: Path) -> bool:
    """Whether ``path`` is an msprof text export (see the module docstring)."""
    if path.is_file():
        export = parse_export_name(path)
        return export is not None and export.kind == "op_summary"
    if not path.is_dir():
        return False
    return any(_has_task_files(folder) for folder, _ in _export_folders(path))


def unexported_collections(path: Path) -> list[Path]:
    """The ``PROF_*`` directories at or right under ``path`` that hold msprof's raw data
    (``device_N/``, ``host/``) and no export of it: the profile was collected, not exported."""
    if not path.is_dir():
        return []
    profs = [path] if path.name.startswith("PROF_") else []
    profs += sorted(p for p in _dirs(path) if p.name.startswith("PROF_"))
    return [
        prof
        for prof in profs
        if not _prof_folders(prof)
        and any(_DEVICE_DIR.match(d.name) or d.name == "host" for d in _dirs(prof))
    ]


def _has_task_files(folder: Path) -> bool:
    return any(
        (e := parse_export_name(p)) is not None and e.kind in _TASK_KINDS for p in _files(folder)
    )


def _files(folder: Path) -> list[Path]:
    try:
        return sorted(p for p in folder.iterdir() if p.is_file())
    except OSError:
        return []


def _export_folders(path: Path) -> list[tuple[Path, int | None]]:
    """(folder holding summary CSVs, device id from the directory name) under ``path``."""
    if path.name == OUTPUT_DIR:
        return [(path, None)]
    if path.name == LEGACY_SUMMARY_DIR:
        device = _DEVICE_DIR.match(path.parent.name)
        return [(path, int(device.group("device")) if device else None)]
    device = _DEVICE_DIR.match(path.name)
    if device and (path / LEGACY_SUMMARY_DIR).is_dir():
        return [(path / LEGACY_SUMMARY_DIR, int(device.group("device")))]
    if path.name.startswith("PROF_"):
        return _prof_folders(path)
    prof_dirs = sorted(p for p in _dirs(path) if p.name.startswith("PROF_"))
    if prof_dirs:
        return [folder for prof in prof_dirs for folder in _prof_folders(prof)]
    # A folder of summary CSVs under another name (e.g. copied out of the PROF directory).
    return [(path, None)] if _has_task_files(path) else []


def _prof_folders(prof: Path) -> list[tuple[Path, int | None]]:
    """The merged output folder, or else the older per-device summary folders."""
    merged = prof / OUTPUT_DIR
    if merged.is_dir() and _has_task_files(merged):
        return [(merged, None)]
    folders: list[tuple[Path, int | None]] = []
    for device_dir in sorted(_dirs(prof)):
        match = _DEVICE_DIR.match(device_dir.name)
        summary = device_dir / LEGACY_SUMMARY_DIR
        if match and summary.is_dir():
            folders.append((summary, int(match.group("device"))))
    if not folders and merged.is_dir():
        folders.append((merged, None))
    return folders


def _dirs(path: Path) -> list[Path]:
    try:
        return [p for p in path.iterdir() if p.is_dir()]
    except OSError:
        return []


# --------------------------------------------------------------------------- reading


def read(path: Path) -> Profile:
    """Read an msprof text export into the canonical tables.

    Raises:
        ProfileError: no op_summary/task_time CSV is found, a CSV is truncated or foreign, or
            nothing could be read.
    """
    path = Path(path)
    clock = TimeBase()  # one time origin for every file of the profile
    if path.is_file():
        export = parse_export_name(path)
        if export is None or export.kind != "op_summary":
            raise ProfileError(
                path, "not an msprof summary CSV", expected="op_summary_<YYYYmmddHHMMSS>.csv"
            )
        tasks = canonical_task_columns(_read_op_summary(export, None, clock))
        note = f"read {path.name} alone: tasks only in task_time_*.csv are not shown"
        parts, task_time_read = [Part(tasks=tasks, notes=[note])], False
    else:
        folders = _export_folders(path) if path.is_dir() else []
        readable = [(f, d) for f, d in folders if _has_task_files(f)]
        if not readable:
            where = folders[0][0] if folders else path
            raise ProfileError(
                where,
                "holds no op_summary_*.csv or task_time_*.csv",
                expected="an msprof text export (PROF_*/mindstudio_profiler_output/ "
                "or PROF_*/device_N/summary/)",
            )
        read_folders = [_read_folder(folder, device, clock) for folder, device in readable]
        _check_one_run_per_device(
            [(_prof_dir(folder), part) for (folder, _), (part, _) in zip(readable, read_folders)]
        )
        parts = [part for part, _ in read_folders]
        # op_summary lists kernels only; memcpy / SDMA tasks are seen only through task_time.
        task_time_read = any(seen for _, seen in read_folders)
    return assemble(
        path,
        SOURCE,
        parts,
        time_origin_us=clock.origin_us,
        metadata={"export_type": "text", "copy_visible": task_time_read},
        if_empty=ProfileError(
            path, "holds no device tasks and no steps", expected="op_summary rows"
        ),
    )


def _prof_dir(folder: Path) -> Path:
    """The ``PROF_*`` directory a summary folder belongs to (itself when it is none's)."""
    return next((p for p in (folder, *folder.parents) if p.name.startswith("PROF_")), folder)


def _check_one_run_per_device(parts: Sequence[tuple[Path, Part]]) -> None:
    """Refuse ``PROF_*`` directories that hold the same device: two msprof runs side by side,
    whose tasks merged into one rank would make one long "step" of both."""
    seen: dict[int, Path] = {}
    for prof, part in parts:
        if "rank" not in part.tasks:
            continue
        for rank in sorted(int(r) for r in part.tasks["rank"].dropna().unique()):
            other = seen.setdefault(rank, prof)
            if other != prof:
                raise ProfileError(
                    prof,
                    f"device {rank} is also in {other.name}: two msprof runs in one directory",
                    expected="one PROF_* directory per device (give the path of the run to read)",
                )


def _read_folder(folder: Path, device: int | None, clock: TimeBase) -> tuple[Part, bool]:
    """The newest export in one summary folder, and whether it has task_time files."""
    part = Part()
    by_group: dict[tuple[str, str], list[ExportFile]] = {}
    for p in _files(folder):
        export = parse_export_name(p)
        if export is not None:
            by_group.setdefault((export.kind, export.ids), []).append(export)
    chosen: dict[str, list[ExportFile]] = {}
    for (kind, _), files in sorted(by_group.items()):
        newest, older = newest_export(files)
        chosen.setdefault(kind, []).extend(newest)
        if older:
            part.notes.append(
                f"{folder}: {len(older)} older {kind} export file(s) ignored "
                f"({', '.join(f.path.name for f in older)}); read the export of {newest[0].stamp}"
            )
    op_summary = [_read_op_summary(f, device, clock) for f in chosen.get("op_summary", [])]
    task_time = [_read_task_time(f, device, clock) for f in chosen.get("task_time", [])]
    ops = concat_frames(op_summary)
    if task_time:
        extra = tasks_not_in(concat_frames(task_time), ops)
        part.tasks = canonical_task_columns(concat_frames([ops, extra]))
    else:
        part.tasks = canonical_task_columns(ops)
        part.notes.append(f"{folder}: no task_time_*.csv; non-operator tasks are not shown")
    if not op_summary:
        part.notes.append(f"{folder}: no op_summary_*.csv; tasks from task_time_*.csv only")
    steps = []
    for f in chosen.get("step_trace", []):
        rows, notes = _read_step_trace(f, device, clock)
        steps.append(rows)
        part.notes.extend(notes)
    part.steps = concat_frames(steps, empty_steps())
    statistics = [
        table
        for f in chosen.get("op_statistic", [])
        if (table := _read_op_statistic(f, device, part.notes)) is not None
    ]
    part.op_statistic = concat_frames(statistics) if statistics else None
    return part, bool(task_time)


def _read_op_statistic(
    export: ExportFile, device: int | None, notes: list[str]
) -> pd.DataFrame | None:
    return read_auxiliary(
        lambda p: read_op_statistic(p, _file_rank(export, device)),
        export.path,
        notes,
        "the profiler's per-operator totals are not used",
    )


def _file_rank(export: ExportFile, device: int | None) -> int | None:
    """Rank for rows without Device_id: the device in the file name, else the directory's."""
    return export.device if export.device is not None else device


def _rank_column(raw: pd.DataFrame, fallback: int | None) -> pd.Series:
    if "device_id" in raw.columns and raw["device_id"].notna().all():
        return raw["device_id"].astype("int64")
    default = fallback if fallback is not None else 0
    if "device_id" in raw.columns:
        return raw["device_id"].fillna(default).astype("int64")
    return pd.Series(default, index=raw.index, dtype="int64")


def _read_op_summary(export: ExportFile, device: int | None, clock: TimeBase) -> pd.DataFrame:
    raw = read_csv_columns(
        export.path,
        task_columns(OP_SUMMARY),
        what="an msprof op_summary CSV",
        clock=clock,
        categorical=True,
    )
    tasks, _ = ascend_tasks(raw)
    tasks["rank"] = _rank_column(raw, _file_rank(export, device))
    return tasks


def _read_task_time(export: ExportFile, device: int | None, clock: TimeBase) -> pd.DataFrame:
    raw = read_csv_columns(
        export.path,
        TASK_TIME_COLUMNS,
        what="an msprof task_time CSV",
        clock=clock,
        categorical=True,
    )
    raw = raw[~raw["core"].isin(PROFILER_CONTROL_TASKS)]
    # No op_type column: a non-operator task (kernel_name N/A) is typed by its task type.
    tasks, _ = ascend_tasks(raw)
    tasks["rank"] = _rank_column(raw, _file_rank(export, device))
    return tasks


def _read_step_trace(
    export: ExportFile, device: int | None, clock: TimeBase
) -> tuple[pd.DataFrame, list[str]]:
    """step_trace CSV → steps with windows [Iteration End − Iteration Time, Iteration End].

    With several graphs (``Model ID``) the iterations of the one covering the most time are
    used: iteration ids restart per model and steps must be unique per rank.
    """
    raw = read_csv_columns(
        export.path, STEP_TRACE_COLUMNS, what="an msprof step_trace CSV", clock=clock
    )
    notes: list[str] = []
    raw["rank"] = _rank_column(raw, _file_rank(export, device))
    if "model_id" in raw.columns and raw["model_id"].nunique() > 1:
        totals = raw.groupby(["rank", "model_id"])["iteration_us"].sum().reset_index()
        main = totals.sort_values("iteration_us").drop_duplicates("rank", keep="last")
        raw = raw.merge(main[["rank", "model_id"]], on=["rank", "model_id"])
        notes.append(
            f"{export.path.name}: several Model IDs; steps are the iterations of model "
            f"{', '.join(str(m) for m in main['model_id'])} (the longest-running)"
        )
    raw["start_us"] = raw["end_us"] - raw["iteration_us"]
    if SOURCE_COLUMN in raw.columns and len(raw):
        # The window's start is the end minus the iteration's time: that is the column to name.
        source = (
            raw[SOURCE_COLUMN].iloc[0].renamed(start_us=ITERATION_TIME, duration=ITERATION_TIME)
        )
        raw[SOURCE_COLUMN] = pd.Series([source] * len(raw), index=raw.index, dtype=object)
    return raw[[*STEP_COLUMNS, *provenance_columns(raw)]], notes


READER = FormatReader("msprof", detect, read)

"""torch_npu profiler text export (``*_ascend_pt/ASCEND_PROFILER_OUTPUT/``) → :class:`Profile`.

Accepted paths:

- a ``*_ascend_pt`` directory, or its ``ASCEND_PROFILER_OUTPUT/`` folder;
- a directory holding several ``*_ascend_pt`` directories (one per rank);
- a lone ``kernel_details.csv`` or ``step_trace_time.csv``;
- msprof-analyze's ``cluster_step_trace_time.csv``, or the ``cluster_analysis_output/`` folder
  holding it (source ``cluster_step_trace``): steps only, one row per rank.

What comes from where:

- tasks ← ``kernel_details.csv`` (:data:`~perfgate.ingest.ascend_csv.TASK_COLUMN_MAP`), one row
  per device task, ``step`` from ``Step Id``;
- steps ← ``step_trace_time.csv`` (breakdown columns, no window), with windows
  (``start_us``/``end_us``) from the ``ProfilerStep#N`` events of ``trace_view.json`` when present
  (parsed by :func:`perfgate.ingest.chrome_trace.profiler_step_windows`);
- metadata ← ``profiler_info[_{rank}].json``; ``op_statistic`` ← ``op_statistic.csv``
  (columns ``rank, op_type, core, count, total_us``);
- rank ← ``rank_id`` of ``profiler_info*.json``, else the ``{rank}`` in its file name, else the
  ``Device_id`` column, else 0.

Times: kernel_details.csv and trace_view.json share one :class:`~perfgate.model.TimeBase`, so
epoch µs are µs since ``metadata["time_origin_us"]`` in every table (see :mod:`perfgate.model`).

A directory exported with ``export_type=db`` (only ``.db`` files) is not detected here: the
SQLite reader takes it. docs/formats.md §4 describes the files, columns and quirks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from perfgate.errors import ProfileError
from perfgate.ingest import FormatReader, chrome_trace
from perfgate.ingest.ascend_csv import (
    KERNEL_DETAILS,
    CsvColumn,
    ascend_tasks,
    breakdown_columns,
    fill_missing_preparing,
    read_csv_columns,
    read_header,
    read_op_statistic,
    task_columns,
)
from perfgate.ingest.assemble import Part, assemble
from perfgate.ingest.common import (
    canonical_task_columns,
    concat_frames,
    read_auxiliary,
    read_json_object,
    tasks_not_in,
)
from perfgate.model import (
    BREAKDOWN_COLUMNS,
    STEP_COLUMNS,
    Category,
    Profile,
    TimeBase,
    provenance_columns,
    unknown_ints,
)

SOURCE = "torch_npu"
CLUSTER_SOURCE = "cluster_step_trace"

OUTPUT_DIR = "ASCEND_PROFILER_OUTPUT"
KERNEL_DETAILS_CSV = "kernel_details.csv"
STEP_TRACE_CSV = "step_trace_time.csv"
CLUSTER_STEP_TRACE_CSV = "cluster_step_trace_time.csv"
OP_STATISTIC_CSV = "op_statistic.csv"
TRACE_VIEW_JSON = "trace_view.json"
TEXT_EXPORT_FILES = (KERNEL_DETAILS_CSV, STEP_TRACE_CSV, OP_STATISTIC_CSV)

ONE_WINDOW_STEP = 0
_MAX_RANK = 2**31 - 1

_PROFILER_INFO = re.compile(r"^profiler_info(?:_(?P<rank>\d+))?\.json$")

# File kinds for a lone CSV.
_KERNEL_DETAILS = "kernel_details"
_STEP_TRACE = "step_trace_time"
_CLUSTER = "cluster_step_trace_time"


# --------------------------------------------------------------------------- detection


def detect(path: Path) -> bool:
    """Whether ``path`` is a torch_npu text export (see the module docstring)."""
    if path.is_file():
        return _file_kind(path) is not None
    if not path.is_dir():
        return False
    output = _output_dir(path)
    if output is not None:
        return _is_text_export(output)
    rank_dirs = _rank_dirs(path)
    if rank_dirs:
        return any(_is_text_export(output) for _, output in rank_dirs)
    return (path / CLUSTER_STEP_TRACE_CSV).is_file()


def _output_dir(path: Path) -> Path | None:
    """The ASCEND_PROFILER_OUTPUT folder ``path`` is or holds, if any."""
    if path.name == OUTPUT_DIR:
        return path
    candidate = path / OUTPUT_DIR
    if candidate.is_dir():
        return candidate
    # A copy of the folder under another name (kernel_details.csv shared on its own).
    if any((path / name).is_file() for name in (KERNEL_DETAILS_CSV, STEP_TRACE_CSV)):
        return path
    return None


def _is_text_export(output: Path) -> bool:
    """A text export holds our CSVs; an empty folder is ours too (read() says what is missing),
    but a folder of ``.db`` files alone is the SQLite reader's."""
    try:
        entries = list(output.iterdir())
    except OSError:
        return False
    if not entries:
        return True
    return any((output / name).is_file() for name in TEXT_EXPORT_FILES)


def _rank_dirs(path: Path) -> list[tuple[Path, Path]]:
    """(``*_ascend_pt`` dir, its ASCEND_PROFILER_OUTPUT) for each rank directory under ``path``."""
    found = []
    try:
        children = sorted(p for p in path.iterdir() if p.is_dir())
    except OSError:
        return []
    for child in children:
        output = child / OUTPUT_DIR
        if output.is_dir():
            found.append((child, output))
    return found


def _file_kind(path: Path) -> str | None:
    """Which torch_npu / msprof-analyze CSV a lone file is, from its name or its header."""
    if path.suffix.lower() != ".csv":
        return None
    name = path.name
    if name == CLUSTER_STEP_TRACE_CSV:
        return _CLUSTER
    if name.startswith("kernel_details"):
        return _KERNEL_DETAILS
    if name.startswith("step_trace_time"):
        return _STEP_TRACE
    try:
        header = set(read_header(path))
    except ProfileError:
        return None
    if {"Name", "Accelerator Core", "Duration(us)"} <= header:
        return _KERNEL_DETAILS
    if {"Step", "Computing", "Free"} <= header:
        return _CLUSTER if {"Type", "Index"} <= header else _STEP_TRACE
    return None


# --------------------------------------------------------------------------- reading


def read(path: Path) -> Profile:
    """Read a torch_npu text export into the canonical tables.

    Raises:
        ProfileError: the directory holds no kernel_details.csv / step_trace_time.csv, a file
            is truncated or foreign, two rank directories claim the same rank, or nothing
            (neither tasks nor steps) could be read.
    """
    path = Path(path)
    clock = TimeBase()
    if path.is_file():
        kind = _file_kind(path)
        if kind == _CLUSTER:
            return _read_cluster_step_trace(path)
        if kind == _STEP_TRACE:
            steps, notes = _read_step_trace(path, None)
            return _lone_file_profile(path, _RankData(steps=steps, notes=notes), clock)
        if kind == _KERNEL_DETAILS:
            tasks, notes = _read_kernel_details(path, None, clock)
            return _lone_file_profile(path, _RankData(tasks=tasks, notes=notes), clock)
        raise ProfileError(
            path,
            "not a torch_npu CSV",
            expected=f"{KERNEL_DETAILS_CSV}, {STEP_TRACE_CSV} or {CLUSTER_STEP_TRACE_CSV}",
        )
    if not path.is_dir():
        raise ProfileError(path, "no such file or directory")
    output = _output_dir(path)
    if output is not None:
        rank_dir = output.parent if output.name == OUTPUT_DIR else output
        return _profile(path, [_read_rank_dir(rank_dir, output, clock)], clock)
    rank_dirs = _rank_dirs(path)
    if not rank_dirs and (path / CLUSTER_STEP_TRACE_CSV).is_file():
        # msprof-analyze's cluster_analysis_output/ folder
        return _read_cluster_step_trace(path / CLUSTER_STEP_TRACE_CSV)
    if not rank_dirs:
        raise ProfileError(
            path,
            f"no {OUTPUT_DIR} folder here or in a subdirectory",
            expected="a torch_npu *_ascend_pt directory",
        )
    db_only = [d for d, o in rank_dirs if not _is_text_export(o)]
    if db_only:
        raise ProfileError(
            db_only[0] / OUTPUT_DIR,
            "holds no text export (kernel_details.csv / step_trace_time.csv) while other ranks do",
            expected="every rank exported with the same export_type",
        )
    ranks = [_read_rank_dir(d, o, clock) for d, o in rank_dirs]
    return _profile(path, ranks, clock)


@dataclass
class _RankData(Part):
    """What one ``*_ascend_pt`` directory (or one lone file) contributes, and where."""

    rank: int | None = None
    where: Path | None = None


def _read_rank_dir(rank_dir: Path, output: Path, clock: TimeBase) -> _RankData:
    notes: list[str] = []
    info_path = _profiler_info_path(rank_dir)
    info = (
        read_auxiliary(
            read_json_object, info_path, notes, "versions, profiler level and rank_id not recorded"
        )
        if info_path is not None
        else None
    ) or {}
    rank = _rank_from_info(info, info_path)
    data = _RankData(metadata=_metadata(info), notes=notes, rank=rank, where=rank_dir)
    kernel_details = output / KERNEL_DETAILS_CSV
    step_trace = output / STEP_TRACE_CSV
    op_statistic = output / OP_STATISTIC_CSV
    trace_view = output / TRACE_VIEW_JSON
    if not kernel_details.is_file() and not step_trace.is_file():
        present = sorted(p.name for p in output.iterdir()) if output.is_dir() else []
        problem = (
            f"{OUTPUT_DIR} is empty"
            if not present
            else f"{OUTPUT_DIR} holds neither {KERNEL_DETAILS_CSV} nor {STEP_TRACE_CSV} "
            f"(found: {', '.join(present)})"
        )
        raise ProfileError(
            output,
            problem,
            expected="a finished torch_npu text export (export_type text); "
            "was the profiler's analyse step run?",
        )
    if kernel_details.is_file():
        data.tasks, notes = _read_kernel_details(kernel_details, rank, clock)
        data.notes += notes
    else:
        data.notes.append(
            f"{output.name} has no {KERNEL_DETAILS_CSV}: no per-task data (per-operator "
            f"analysis needs {KERNEL_DETAILS_CSV}; op_statistic.csv gives totals only)"
        )
    if step_trace.is_file():
        data.steps, notes = _read_step_trace(step_trace, rank)
        data.notes += notes
    if trace_view.is_file():
        data.steps, copies = _from_trace_view(trace_view, data.steps, rank, clock)
        if not data.tasks.empty and not copies.empty:
            # Newer kernel_details.csv list the memcpy tasks too: each task once.
            copies = tasks_not_in(copies, data.tasks, one_rank=True)
            data.tasks = concat_frames([data.tasks, copies])
        data.metadata["copy_visible"] = True
    else:
        # kernel_details.csv lists kernels only: memcpy/SDMA tasks are in trace_view.json.
        data.metadata["copy_visible"] = False
    if rank is None:
        # No profiler_info rank: one Device_id across the directory's files is its rank.
        device_ids = pd.unique(
            np.concatenate(
                [
                    table["rank"].dropna().to_numpy(dtype=np.int64)
                    for table in (data.tasks, data.steps)
                ]
            )
        )
        if len(device_ids) == 1:
            rank = data.rank = int(device_ids[0])
            data.tasks["rank"] = rank
            data.steps["rank"] = rank
    if op_statistic.is_file():
        data.op_statistic = read_auxiliary(
            lambda p: read_op_statistic(p, rank),
            op_statistic,
            data.notes,
            "the profiler's per-operator totals are not used",
        )
    return data


def _profile(path: Path, ranks: list[_RankData], clock: TimeBase) -> Profile:
    """Merge the per-rank data into one Profile (ranks resolved, duplicates refused)."""
    _resolve_ranks(ranks)
    for data in ranks:
        data.tasks, data.steps = _one_window_tasks(data.tasks, data.steps)
    return assemble(
        path, SOURCE, ranks, time_origin_us=clock.origin_us, if_empty=_nothing_read(path)
    )


def _lone_file_profile(path: Path, data: _RankData, clock: TimeBase) -> Profile:
    data.where = path
    return _profile(path, [data], clock)


def _nothing_read(path: Path) -> ProfileError:
    return ProfileError(
        path,
        "holds no device tasks and no steps",
        expected=f"rows in {KERNEL_DETAILS_CSV} or {STEP_TRACE_CSV}",
    )


# --------------------------------------------------------------------------- kernel_details


def _read_kernel_details(
    path: Path, rank: int | None, clock: TimeBase
) -> tuple[pd.DataFrame, list[str]]:
    """kernel_details.csv → canonical tasks (``rank`` = ``rank`` if known, else Device_id, else
    filled later)."""
    raw = read_csv_columns(
        path,
        task_columns(KERNEL_DETAILS),
        what="a torch_npu kernel_details.csv",
        clock=clock,
        categorical=True,
    )
    tasks, notes = ascend_tasks(raw)
    _set_rank(tasks, rank)
    return canonical_task_columns(tasks), notes


def _set_rank(frame: pd.DataFrame, rank: int | None) -> None:
    """The rank column: the known rank, else the file's Device_id, else <NA> (filled later)."""
    if rank is not None:
        frame["rank"] = rank
    elif "device_id" in frame.columns:
        frame["rank"] = frame["device_id"]
    else:
        frame["rank"] = unknown_ints(len(frame))


# --------------------------------------------------------------------------- step traces


def _read_step_trace(path: Path, rank: int | None) -> tuple[pd.DataFrame, list[str]]:
    """step_trace_time.csv → steps with breakdown columns and NaN windows."""
    columns = [
        CsvColumn("device_id", "Device_id", "int", header_required=False),
        CsvColumn("step", "Step", "int"),
        *breakdown_columns(),
    ]
    raw = read_csv_columns(path, columns, what="a torch_npu step_trace_time.csv")
    notes = fill_missing_preparing(raw, path)
    _set_rank(raw, rank)
    notes += _number_whole_window(raw, path)
    raw["start_us"] = float("nan")
    raw["end_us"] = float("nan")
    return raw[[*STEP_COLUMNS, *BREAKDOWN_COLUMNS, *provenance_columns(raw)]], notes


def _number_whole_window(steps: pd.DataFrame, path: Path) -> list[str]:
    """An empty ``Step`` cell means no schedule: the whole profile is one step (number 0)."""
    empty = steps["step"].isna()
    if not empty.any():
        return []
    if not empty.all():
        row = int(empty.to_numpy().nonzero()[0][0])
        raise ProfileError(
            path,
            f"data row {row + 1} has no step number while other rows do",
            column="Step",
            expected="a step number in every row, or in none (no schedule)",
        )
    steps["step"] = pd.array([ONE_WINDOW_STEP] * len(steps), dtype="Int64")
    return [
        f"{path.name} has no step numbers (profiled without a schedule): "
        f"the whole profile is one step, numbered {ONE_WINDOW_STEP}"
    ]


def _read_cluster_step_trace(path: Path) -> Profile:
    """cluster_step_trace_time.csv: one step row per ``rank`` row; the ``stage`` rows are
    column-wise maxima over ranks (msprof-analyze ``get_max_data_row``) and are skipped."""
    columns = [
        CsvColumn("step", "Step", "int"),
        CsvColumn("type", "Type", "name", value_required=True),
        CsvColumn("index", "Index", "text", value_required=True),
        *breakdown_columns(),
    ]
    raw = read_csv_columns(path, columns, what="an msprof-analyze cluster_step_trace_time.csv")
    notes = fill_missing_preparing(raw, path)
    ranks = raw[raw["type"].str.lower() == "rank"].copy()
    if ranks.empty:
        raise ProfileError(
            path, "has no row of Type 'rank'", column="Type", expected="rows per rank"
        )
    index = pd.to_numeric(ranks["index"], errors="coerce")
    index = index.where((index.abs() <= _MAX_RANK) & (index == index.round()))
    if index.isna().any():
        bad = ranks.loc[index.isna(), "index"].iloc[0]
        raise ProfileError(
            path, f"rank row with Index {bad!r}", column="Index", expected="an integer rank id"
        )
    ranks["rank"] = index.astype("int64")
    notes += _number_whole_window(ranks, path)
    ranks["start_us"] = float("nan")
    ranks["end_us"] = float("nan")
    steps = ranks[[*STEP_COLUMNS, *BREAKDOWN_COLUMNS, *provenance_columns(ranks)]]
    steps = steps.reset_index(drop=True)
    notes.append(f"{path.name} has steps only: no per-task or per-operator data")
    # No time stamps: origin 0.
    return assemble(path, CLUSTER_SOURCE, [Part(steps=steps, notes=notes)], time_origin_us=0)


def _from_trace_view(
    trace_view: Path, steps: pd.DataFrame, rank: int | None, clock: TimeBase
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Step windows and copy tasks from ``trace_view.json``, read once.

    kernel_details.csv has the kernels; the timeline also has the memcpy / SDMA tasks that
    copy_ratio needs, and the ProfilerStep windows that give the step's wall span.
    """
    timeline = chrome_trace.read(trace_view, clock=clock, tasks="copies")
    windows = timeline.steps.drop_duplicates("step")[["step", "start_us", "end_us"]]
    copies = timeline.tasks.loc[timeline.tasks["category"] == Category.COPY.value].copy()
    if rank is not None:
        copies["rank"] = rank
    return _add_windows(steps, windows, rank), copies


def _add_windows(steps: pd.DataFrame, windows: pd.DataFrame, rank: int | None) -> pd.DataFrame:
    """Put ProfilerStep windows on the step rows (matching on step); steps only in the trace get
    a row without breakdown."""
    if windows.empty:
        return steps
    merged = steps.drop(columns=["start_us", "end_us"]).merge(windows, on="step", how="outer")
    if rank is not None:
        merged["rank"] = rank
    elif steps["rank"].notna().any():
        merged["rank"] = merged["rank"].fillna(steps["rank"].dropna().iloc[0])
    for column in BREAKDOWN_COLUMNS:
        if column not in merged.columns:
            merged[column] = float("nan")
    return merged[[*STEP_COLUMNS, *BREAKDOWN_COLUMNS, *provenance_columns(merged)]]


def _one_window_tasks(tasks: pd.DataFrame, steps: pd.DataFrame) -> tuple[pd.DataFrame, ...]:
    """Tasks without Step Id belong to the one whole-profile step when that is the only step."""
    if (
        len(steps) == 1
        and steps["step"].iloc[0] == ONE_WINDOW_STEP
        and tasks["step"].isna().all()
        and not tasks.empty
    ):
        tasks = tasks.assign(step=pd.array([ONE_WINDOW_STEP] * len(tasks), dtype="Int64"))
    return tasks, steps


# --------------------------------------------------------------------------- ranks, metadata


def _profiler_info_path(rank_dir: Path) -> Path | None:
    # Regular files only: a FIFO of that name would block the reading.
    infos = sorted(
        p
        for p in rank_dir.glob("profiler_info*.json")
        if _PROFILER_INFO.match(p.name) and p.is_file()
    )
    return infos[0] if infos else None


def _rank_from_info(info: dict[str, Any], info_path: Path | None) -> int | None:
    """``rank_id`` (an int or a string; -1 = not distributed), else the file name's rank."""
    value = info.get("rank_id")
    try:
        rank = int(value) if value is not None and not isinstance(value, bool) else -1
    except (TypeError, ValueError, OverflowError):  # text, inf, NaN: no rank
        rank = -1
    if 0 <= rank <= _MAX_RANK and (not isinstance(value, float) or value == rank):
        return rank
    if info_path is not None:
        match = _PROFILER_INFO.match(info_path.name)
        if match and match.group("rank") is not None:
            return int(match.group("rank"))
    return None


def _metadata(info: dict[str, Any]) -> dict[str, Any]:
    """The profiler_info*.json fields perfgate records (docs/formats.md §4.6)."""
    config = info.get("config")
    experimental = config.get("experimental_config") if isinstance(config, dict) else None
    if not isinstance(experimental, dict):
        experimental = {}
    export_type = experimental.get("_export_type")
    if isinstance(export_type, list):
        export_type = ",".join(str(t) for t in export_type)
    candidates = {
        "cann_version": info.get("cann_version"),
        "torch_npu_version": info.get("torch_npu_version"),
        "profiler_level": experimental.get("_profiler_level"),
        "aic_metrics": experimental.get("_aic_metrics"),
        "export_type": export_type,
    }
    return {k: str(v) for k, v in candidates.items() if v not in (None, "")}


def _resolve_ranks(ranks: list[_RankData]) -> None:
    """Give every task/step a rank: the directory's, else the Device_id already in the rows,
    else 0 (one rank) or the directory's position (several ranks, with a note)."""
    several = len(ranks) > 1
    seen: dict[int, Path | None] = {}
    for position, data in enumerate(ranks):
        fallback = position if several else 0
        for table in (data.tasks, data.steps):
            if table["rank"].isna().any():
                table["rank"] = table["rank"].astype("Int64").fillna(fallback)
        if data.rank is None and several:
            data.notes.append(
                f"{data.where}: no profiler_info rank_id or Device_id; rank {fallback} "
                "taken from the directory order"
            )
        if data.rank is None:
            continue
        if data.rank in seen:
            raise ProfileError(
                data.where or "",
                f"rank {data.rank} appears twice (also in {seen[data.rank]})",
                column="rank_id",
                expected="one *_ascend_pt directory per rank",
            )
        seen[data.rank] = data.where


READER = FormatReader("torch_npu", detect, read)

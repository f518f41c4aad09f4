"""Profile path → :class:`~perfgate.model.Profile`, with the format detected from the content.

Every reader is a :class:`Reader`: ``detect(path)`` is cheap (it looks at names and at most the
first bytes of a file) and ``read(path)`` builds the Profile, ending with the one shared
assembly step (:func:`perfgate.ingest.assemble.assemble`). :func:`load_profile` asks the
readers in order; the first that recognises the path reads it. docs/formats.md says what each
reader reads.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import pandas as pd

from perfgate.errors import ProfileError
from perfgate.ingest.progress import reading
from perfgate.model import Profile

EXPECTED_LAYOUTS = (
    "a torch_npu *_ascend_pt directory (ASCEND_PROFILER_OUTPUT/), an msprof PROF_* directory "
    "(mindstudio_profiler_output/ or device_*/summary/), a torch.profiler trace "
    "(.json or .json.gz) or a directory of them, an Ascend trace_view.json / msprof_*.json "
    "timeline, kernel_details.csv / op_summary_*.csv, or an msprof / torch_npu .db"
)


class Reader(Protocol):
    """One profile format family: recognise it, read it."""

    @property
    def name(self) -> str:
        """Short name of the formats read (``torch_npu``, ``msprof``, …)."""
        ...

    def detect(self, path: Path) -> bool:
        """Whether ``path`` is this reader's; cheap, never raises."""
        ...

    def read(self, path: Path) -> Profile:
        """The profile at ``path``; :class:`~perfgate.errors.ProfileError` when it cannot."""
        ...


@dataclass(frozen=True)
class FormatReader:
    """A :class:`Reader` made of a reader module's ``detect`` and ``read`` functions."""

    name: str
    detect: Callable[[Path], bool]
    read: Callable[[Path], Profile]


def readers() -> tuple[Reader, ...]:
    """The readers, most specific layouts first (the order :func:`detect_reader` asks them)."""
    # Imported here so that `import perfgate` stays light.
    from perfgate.ingest import ascend_db, chrome_trace, msprof, torch_npu

    return (torch_npu.READER, msprof.READER, ascend_db.READER, chrome_trace.READER)


def detect_reader(path: Path) -> Reader:
    """The first reader that recognises ``path``.

    Raises:
        ProfileError: no reader does.
    """
    for reader in readers():
        if reader.detect(path):
            return reader
    from perfgate.ingest.msprof import unexported_collections

    raw = unexported_collections(path)
    if raw:  # msprof's automatic export failed, or was left for later
        where = "" if raw == [path] else f" in {', '.join(p.name for p in raw)}"
        raise ProfileError(
            path,
            f"msprof collected data{where} (device_N/, host/) but never exported it",
            expected=f"an export: run `msprof --export=on --output={raw[0]}`"
            + (" for each PROF_* directory" if len(raw) > 1 else "")
            + ", then read it again",
        )
    raise ProfileError(
        path, "not a profile layout perfgate knows" + _what_it_is(path), expected=EXPECTED_LAYOUTS
    )


def _what_it_is(path: Path) -> str:
    """A hint for paths users give ``inspect`` that are no profile: a perfgate results or
    baseline file, a folder of profiles of several benchmarks (``perfgate-out/profiles``) and
    the folder above it (``perfgate-out``)."""
    if path.is_file() and path.suffix == ".json":
        try:
            with path.open("rb") as handle:
                head = handle.read(4096).decode("utf-8", "replace")
        except OSError:
            return ""
        if '"perfgate.results"' in head:
            return f"; it is a perfgate results file: show it with `perfgate report {path}`"
        if '"perfgate.baseline"' in head:
            return (
                "; it is a perfgate baseline: `perfgate baseline show` prints it, and "
                f"`perfgate compare {path} PROFILE` compares a profile with it"
            )
        if '"perfgate.' in head:
            return "; it is one of perfgate's own reports, not a profile"
        return ""
    if not path.is_dir():
        return ""
    folders = _folders(path)
    profiles = _profile_folders(folders)
    if not profiles:  # perfgate-out/ itself: its profiles are one level further down
        for folder in folders[:50]:
            profiles = _profile_folders(_folders(folder))
            if profiles:
                break
    if not profiles:
        return ""
    shown = ", ".join(f"{f.relative_to(path)}/" for f in profiles[:4])
    hint = (
        f"; it holds the profiles of {len(profiles)} folder(s) "
        f"({shown}{', …' if len(profiles) > 4 else ''}): inspect one, e.g. "
        f"`perfgate inspect {profiles[0]}`"
    )
    results = path / "results.json"
    if results.is_file():
        hint += f"; the run's results: `perfgate report {results}`"
    return hint


def _folders(path: Path) -> list[Path]:
    try:
        return sorted(p for p in path.iterdir() if p.is_dir())[:200]
    except OSError:
        return []


def _profile_folders(folders: list[Path]) -> list[Path]:
    return [f for f in folders if any(r.detect(f) for r in readers())]


def load_profile(path: str | Path) -> Profile:
    """Read a profile directory or file into the canonical tables.

    Raises:
        ProfileError: the path is missing, empty, of an unknown layout, or a file in it is
            truncated or has a column that does not hold what the format says.
    """
    path = Path(path)
    if not path.exists():
        if path.is_symlink():
            raise ProfileError(path, "a symbolic link to nothing (its target is missing, or loops)")
        raise ProfileError(path, "no such file or directory")
    if path.is_file() and path.stat().st_size == 0:
        raise ProfileError(path, "file is empty")
    if path.is_dir() and not any(path.iterdir()):
        raise ProfileError(path, "directory is empty", expected=EXPECTED_LAYOUTS)
    from perfgate.profilers.msprof import kept_run, load_msprof_run

    kept = kept_run(path)
    if kept is not None:  # perfgate.command's msprof run: its steps are the marked ones
        return load_msprof_run(kept)
    reader = detect_reader(path)
    # pandas stores inferred text columns in Arrow when pyarrow is installed (the ``fast``
    # extra); the readers work on Python strings, which Arrow storage makes a copy to reach.
    with reading(path), pd.option_context("mode.string_storage", "python"):
        return reader.read(path)

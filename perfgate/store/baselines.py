"""Baseline files: one JSON file per benchmark, runner environment and commit.

Layout: ``<root>/<benchmark>/<env>/<full-commit-sha>.json``. One file per commit means two PRs
never write the same file, and a baseline is found by trying candidate commits in order
(:func:`perfgate.store.git.baseline_candidates`).

A baseline is a :class:`~perfgate.records.BaselineRecord`, validated when it is written and
when it is read: a damaged or hostile file is refused with one line, never half-used.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfgate.errors import NewerFormat, PerfgateError, StoreError
from perfgate.records import (
    BaselineRecord,
    read_json,
    validate_baseline,
)
from perfgate.store.atomic import atomic_write
from perfgate.store.git import Candidate
from perfgate.store.keys import check_name, is_safe_name

# The keys that open every file, in this order.
_HEADER_KEYS = ("format", "format_version", "benchmark", "env", "commit")
# What a baseline file may weigh, written or read. A baseline is tens of KB (a few hundred
# steps, the operator table, per-step samples of the operators that matter); this bound is
# far above any real one and keeps a hostile or runaway results file out of the repository.
MAX_BASELINE_BYTES = 4 * 1024 * 1024
# sha-1 repositories have 40 hex digits, sha-256 ones 64.
_FULL_SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


@dataclass(frozen=True)
class FoundBaseline:
    """A baseline file found for a lookup candidate, with its validated record."""

    path: Path
    record: BaselineRecord
    candidate: Candidate


@dataclass(frozen=True)
class BaselineEntry:
    """One baseline file in a listing; ``created`` is the record's ``created`` key, if any.

    ``problem`` says why a file could not be read as the baseline its place names (``None``
    when it could): a listing shows the damaged file among the others instead of stopping.
    """

    benchmark: str
    env: str
    sha: str
    path: Path
    created: str | None
    problem: str | None = None


def baseline_path(root: Path, benchmark: str, env: str, sha: str) -> Path:
    """Where the baseline of ``benchmark`` on ``env`` at commit ``sha`` lives."""
    check_name(benchmark, "benchmark")
    check_name(env, "env")
    if not _FULL_SHA.fullmatch(sha):
        raise PerfgateError(f"commit {sha!r} is not a full lowercase commit sha")
    return root / benchmark / env / f"{sha}.json"


def validate_record(record: object, source: str) -> BaselineRecord:
    """``record`` when it is a baseline this perfgate can read; else an error naming ``source``."""
    return validate_baseline(record, source)


def _dumps(record: Mapping[str, Any]) -> str:
    """The exact text of a baseline file: the header keys first, then the rest as given."""
    ordered = {key: record[key] for key in _HEADER_KEYS}
    ordered.update((key, value) for key, value in record.items() if key not in ordered)
    try:
        # NaN and Infinity are not JSON; other tools (jq, browsers) would reject the file.
        text = json.dumps(ordered, indent=2, ensure_ascii=False, allow_nan=False)
    except ValueError as exc:
        raise PerfgateError(
            f"baseline {record['benchmark']}/{record['env']}/{record['commit']}: "
            f"cannot store NaN or infinity ({exc})"
        ) from exc
    return text + "\n"


def write_baseline(root: Path, record: dict[str, Any] | BaselineRecord) -> Path:
    """Write ``record`` to its place under ``root`` and return the path.

    The write is atomic: the text goes to a temporary file in the same directory, is flushed
    to disk, then renamed over the target, so a reader sees the old file or the new one and
    never half of one. Concurrent writers of different commits never touch each other's
    files; of the same commit, the last rename wins. An existing file is replaced.
    """
    return write_prepared(*prepare_baseline(root, record))


def prepare_baseline(root: Path, record: dict[str, Any] | BaselineRecord) -> tuple[Path, bytes]:
    """Where ``record`` goes and its bytes, every check done and nothing written: a caller
    writing several baselines checks them all before the first is written."""
    checked = validate_record(record, "baseline record")
    path = baseline_path(root, checked["benchmark"], checked["env"], str(checked.get("commit")))
    data = _dumps(record).encode("utf-8")
    if len(data) > MAX_BASELINE_BYTES:
        raise PerfgateError(
            f"baseline {checked['benchmark']}/{checked['env']}: {_size(len(data))} is more "
            f"than a baseline may hold ({_size(MAX_BASELINE_BYTES)}); the largest part is "
            f"{_largest_part(record)} (measure fewer steps or rounds); nothing was written"
        )
    # Only a regular file is replaced: writing through a link could overwrite a file outside
    # the store, and a FIFO would block the write.
    kind = None
    if path.is_symlink():
        kind = "a symbolic link"
    elif path.is_dir():
        kind = "a directory"
    elif path.exists() and not path.is_file():
        kind = "no regular file (a FIFO, socket or device)"
    if kind is not None:
        raise PerfgateError(
            f"{path}: is {kind} (expected a baseline JSON file or nothing there; remove it); "
            "nothing was written"
        )
    link = _dangling_link_on_the_way(path.parent)
    if link is not None:
        raise PerfgateError(
            f"{link}: is a symbolic link to nothing {_LINK_EXPECTED}; nothing was written"
        )
    return path, data


def writable_store(root: Path) -> None:
    """Refuse a store that cannot take baselines: the first existing folder on the way to
    ``root`` (``root`` itself once it exists) must be a writable directory, and no part of
    the way a symbolic link to nothing.

    Raises:
        PerfgateError: naming the place and what is wrong with it.
    """
    link = _dangling_link_on_the_way(root)
    if link is not None:
        raise PerfgateError(f"{link}: is a symbolic link to nothing {_LINK_EXPECTED}")
    place = root
    while not place.exists() and place != place.parent:
        place = place.parent
    if not place.is_dir():
        raise PerfgateError(f"{place}: is a file {_DIRECTORY_EXPECTED}")
    if not os.access(place, os.W_OK | os.X_OK):
        raise PerfgateError(
            f"{place}: is not writable by this user, so no baseline can be recorded there "
            "(a read-only checkout?)"
        )


def write_prepared(path: Path, data: bytes) -> Path:
    """Write what :func:`prepare_baseline` made (atomically, see :func:`write_baseline`)."""
    try:
        atomic_write(path, data, mode=0o644)  # baselines are shared, readable files
    except OSError as exc:
        raise PerfgateError(
            f"{path}: cannot write the baseline ({exc.strerror or exc}); nothing was written"
        ) from None
    return path


def _size(n: int) -> str:
    return f"{n / 1024 / 1024:.1f} MiB" if n >= 1024 * 1024 else f"{n / 1024:.0f} KiB"


def _largest_part(record: Mapping[str, Any]) -> str:
    """``key 'samples' (3.1 MiB)``: the top-level key whose JSON is longest."""
    sizes = {key: len(json.dumps(value, allow_nan=False)) for key, value in record.items()}
    key = max(sizes, key=lambda k: sizes[k])
    return f"key {key!r} ({_size(sizes[key])})"


def read_baseline(path: Path) -> BaselineRecord:
    """The validated record in the baseline file ``path``."""
    try:
        size = path.stat().st_size
    except OSError:
        size = 0  # read_json names a missing or unreadable file
    if size > MAX_BASELINE_BYTES:
        raise PerfgateError(
            f"{path}: {_size(size)} is more than a baseline may hold "
            f"({_size(MAX_BASELINE_BYTES)}); not a baseline perfgate wrote"
        )
    return validate_baseline(read_json(path, "baseline file"), str(path))


def _read_at(path: Path, benchmark: str, env: str, sha: str) -> BaselineRecord:
    try:
        record = read_baseline(path)
    except NewerFormat as exc:  # written by a newer perfgate: keep it, upgrade this one
        remedy = "upgrade perfgate where it runs (keep the file: a newer perfgate wrote it)"
        raise StoreError(str(exc), path, remedy) from None
    except PerfgateError as exc:  # read_baseline also reads files outside the store
        raise StoreError(str(exc), path) from None
    # A file copied to the wrong place would silently serve the wrong benchmark or commit.
    found = {"benchmark": record["benchmark"], "env": record["env"], "commit": record.get("commit")}
    for key, expected in (("benchmark", benchmark), ("env", env), ("commit", sha)):
        if found[key] != expected:
            raise StoreError(
                f"{path}: key {key!r} is {found[key]!r} but the file's place says {expected!r}",
                path,
            )
    return record


def find_baseline(
    root: Path, benchmark: str, env: str, candidates: Iterable[Candidate]
) -> FoundBaseline | None:
    """The baseline of the first candidate commit that has one, or ``None``."""
    found = history(root, benchmark, env, candidates, limit=1)
    return found[0] if found else None


def history(
    root: Path, benchmark: str, env: str, candidates: Iterable[Candidate], limit: int
) -> list[FoundBaseline]:
    """Up to ``limit`` baselines along the candidate commits, nearest first."""
    check_name(benchmark, "benchmark")
    check_name(env, "env")
    found: list[FoundBaseline] = []
    if limit < 1:
        return found
    # One directory listing, then set lookups: a walk of 10,000 commits costs no more
    # file-system calls than a walk of one.
    stored = stored_commits(root, benchmark, env)
    for candidate in candidates:
        if candidate.sha in stored:
            path = baseline_path(root, benchmark, env, candidate.sha)
            record = _read_at(path, benchmark, env, candidate.sha)
            found.append(FoundBaseline(path=path, record=record, candidate=candidate))
            if len(found) == limit:
                break
    return found


def stored_commits(root: Path, benchmark: str, env: str) -> set[str]:
    """The commits that have a baseline file of ``benchmark`` on ``env`` (one directory
    listing; files are not read)."""
    return {sha for sha, _ in _scan(root / benchmark / env, files=True)}


def stored_envs(root: Path, benchmark: str) -> list[str]:
    """The runner environments that hold at least one baseline of ``benchmark``, sorted
    (directory listings only; files are not read)."""
    check_name(benchmark, "benchmark")
    return sorted(
        env
        for env, path in _scan(root / benchmark, files=False)
        if any(True for _ in _scan(path, files=True))
    )


def stored_baselines(root: Path, benchmark: str, env: str) -> int:
    """How many baseline files of ``benchmark`` on ``env`` the store holds (a directory
    listing).

    Raises:
        StoreError: the store is damaged where it would be listed (a file or a link to
            nothing in a directory's place, a directory in a baseline's).
    """
    return len(stored_commits(root, benchmark, env))


def _scan(directory: Path, *, files: bool) -> Iterable[tuple[str, Path]]:
    """(key, path) of the entries of ``directory`` that fit the store's layout: baseline
    files named by a full sha (``files``), or directories with a safe name."""
    try:
        entries = list(os.scandir(directory))
    except FileNotFoundError:
        link = _dangling_link_on_the_way(directory)
        if link is not None:  # the store (or a part) is a link to nothing: not "no baselines"
            raise StoreError(
                f"{link}: is a symbolic link to nothing {_LINK_EXPECTED}", link, _MEND_LINK
            ) from None
        return []
    except NotADirectoryError:
        # A file where the layout has a directory: its baselines would silently be "none".
        place = _file_on_the_way(directory)
        raise StoreError(f"{place}: is a file {_DIRECTORY_EXPECTED}", place) from None
    except OSError as exc:
        raise StoreError(f"{directory}: cannot be listed ({exc.strerror})", directory) from None
    found = []
    for entry in entries:
        if files:
            stem, dot, suffix = entry.name.rpartition(".")
            if dot and suffix == "json" and _FULL_SHA.fullmatch(stem):
                found.append((stem, _baseline_file(entry)))
        elif is_safe_name(entry.name) and _store_directory(entry):
            found.append((entry.name, Path(entry.path)))
    return found


_DIRECTORY_EXPECTED = "(expected a directory of the baseline store: BENCHMARK/ENV/COMMIT.json)"
_LINK_EXPECTED = (
    "(its target is missing, or loops; expected a directory of the baseline store: "
    "BENCHMARK/ENV/COMMIT.json)"
)


_MEND_LINK = (
    "point the link at the store (is a shared store not mounted on this runner?), or put "
    "the store's directory in its place"
)


def _dangling_link_on_the_way(directory: Path) -> Path | None:
    """The first of ``directory`` and its parents that is a symbolic link to nothing (a
    shared store whose mount is missing on this runner), or None."""
    for place in (*reversed(directory.parents), directory):
        if place.is_symlink() and not place.exists():
            return place
    return None


def _file_on_the_way(directory: Path) -> Path:
    """The first of ``directory`` and its parents that is a file, the one to name when
    listing ``directory`` fails with "not a directory" (``baselines`` itself a file, say)."""
    for place in (*reversed(directory.parents), directory):
        if place.is_file():
            return place
    return directory


def _store_directory(entry: os.DirEntry[str]) -> bool:
    """Whether an entry where the layout has directories is one; a symbolic link there that
    loops or points to nothing is damage (its baselines would be "none" without a word)."""
    try:
        if entry.is_dir():
            return True
        broken = entry.is_symlink() and not os.path.exists(entry.path)
    except OSError:  # a symlink that loops
        broken = True
    if broken:
        message = f"{entry.path}: is a symbolic link to nothing {_LINK_EXPECTED}"
        raise StoreError(message, entry.path, _MEND_LINK)
    return False  # a file beside the benchmarks (a README): not the store's


def _baseline_file(entry: os.DirEntry[str]) -> Path:
    """The path of a store entry named like a baseline, which must be a regular file: a
    directory, a FIFO or a broken link there is damage, not a missing baseline (the gate
    would pass as "no baseline" without a word, or block reading a FIFO)."""
    try:
        regular = entry.is_file()
        kind = "a directory" if entry.is_dir() else None
    except OSError:  # a symlink that loops
        regular, kind = False, None
    if not regular:
        if kind is None:
            kind = (
                "a symbolic link to nothing (its target is missing, or loops)"
                if entry.is_symlink()
                else "no regular file (a FIFO, socket or device)"
            )
        raise StoreError(f"{entry.path}: is {kind} (expected a baseline JSON file)", entry.path)
    return Path(entry.path)


def _layout_files(root: Path) -> list[tuple[str, str, str, Path]]:
    """(benchmark, env, sha, path) of every file that fits the layout; anything else is skipped.

    Skipped: a README at the root, hidden temporary files of writers in progress, names that
    are not a full sha.
    """
    return [
        (benchmark, env, sha, path)
        for benchmark, bench_dir in _scan(root, files=False)
        for env, env_dir in _scan(bench_dir, files=False)
        for sha, path in _scan(env_dir, files=True)
    ]


def list_baselines(root: Path) -> list[BaselineEntry]:
    """Every baseline under ``root``, sorted by benchmark, env, then ``created``.

    ``created`` values are compared as text, which orders ISO 8601 times correctly when they
    share one UTC offset; entries without one come first. Every file is read and validated;
    one that fails is listed with its ``problem``.
    """
    entries = []
    for benchmark, env, sha, path in _layout_files(root):
        try:
            record = _read_at(path, benchmark, env, sha)
        except StoreError as exc:
            entries.append(BaselineEntry(benchmark, env, sha, path, None, str(exc)))
            continue
        entries.append(BaselineEntry(benchmark, env, sha, path, record.get("created")))
    entries.sort(key=lambda e: (e.benchmark, e.env, e.created is not None, e.created or "", e.sha))
    return entries


def prune(
    root: Path,
    keep: int | None,
    main_line: Sequence[str],
    *,
    dry_run: bool = False,
    reachable: AbstractSet[str] | None = None,
) -> list[Path]:
    """Delete old baselines; return the paths removed (or, with ``dry_run``, that would be).

    ``main_line`` is the first-parent history of the baseline branch, newest first, as full
    shas (:func:`perfgate.store.git.main_line`). Per benchmark and env, the ``keep`` baselines
    of main-line commits nearest the branch tip stay and the older main-line ones go
    (``keep`` None: none go for their age).

    Baselines of commits not on the main line (open PRs, ``--baseline-ref`` targets, release
    branches) stay, unless ``reachable`` is given: then the baselines of commits outside it go
    (squash-merged or force-pushed PR commits, deleted branches: no lookup can reach them).
    Pass every commit the repository's refs reach (:func:`perfgate.store.git.reachable_commits`),
    not a truncated history. Files are not read, so a damaged file can be pruned.
    """
    if keep is not None and keep < 1:
        raise PerfgateError(f"prune keep must be at least 1, got {keep}")
    for sha in main_line:
        if not _FULL_SHA.fullmatch(sha):
            raise PerfgateError(f"prune main line: {sha!r} is not a full lowercase commit sha")
    position = {sha: i for i, sha in enumerate(main_line)}
    groups: dict[tuple[str, str], list[tuple[str, Path]]] = {}
    for benchmark, env, sha, path in _layout_files(root):
        groups.setdefault((benchmark, env), []).append((sha, path))
    removed: set[Path] = set()
    for files in groups.values():
        if keep is not None:
            on_main = sorted((position[sha], path) for sha, path in files if sha in position)
            removed.update(path for _, path in on_main[keep:])
        if reachable is not None:
            removed.update(path for sha, path in files if sha not in reachable)
    if not dry_run:
        for path in sorted(removed):
            # Another prune may have removed it already.
            path.unlink(missing_ok=True)
    return sorted(removed)

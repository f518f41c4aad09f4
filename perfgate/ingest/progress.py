"""Progress of reading a profile, on stderr when it is a terminal.

Big profiles (a million tasks: hundreds of MB of CSV and trace) take tens of seconds to read.
A front door that prints for a person (``perfgate inspect`` / ``compare`` in a table or
Markdown) turns progress on with :func:`show_progress`; the bar (tqdm) appears only once a
read has taken :data:`DELAY_S`, names the files and counts the bytes read. Off a terminal,
under ``--format json`` and in the pytest plugin it stays off: nothing is printed.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tqdm import tqdm

DELAY_S = 2.0
MIN_INTERVAL_S = 0.1  # between redraws

_enabled: ContextVar[bool] = ContextVar("perfgate_progress", default=False)


class _Reading:
    """The bar of one profile being read, and how many files reported to it."""

    def __init__(self, bar: tqdm[Any]) -> None:
        self.bar = bar
        self.files = 0

    def file(self, path: Path) -> None:
        self.files += 1
        self.bar.set_postfix(files=self.files, at=path.name, refresh=False)

    def update(self, size: int) -> None:
        self.bar.update(size)


_reading: ContextVar[_Reading | None] = ContextVar("perfgate_progress_reading", default=None)


@contextmanager
def show_progress(enabled: bool = True) -> Iterator[None]:
    """Let the reads inside show progress, when stderr is a terminal."""
    token = _enabled.set(enabled and sys.stderr.isatty())
    try:
        yield
    finally:
        _enabled.reset(token)


@contextmanager
def reading(path: Path) -> Iterator[None]:
    """One profile being read: the bar the files inside report to (none when off)."""
    if not _enabled.get():
        yield
        return
    from tqdm import tqdm

    with tqdm(
        desc=f"reading {path.name}",
        unit="B",
        unit_scale=True,
        unit_divisor=1024,
        delay=DELAY_S,
        mininterval=MIN_INTERVAL_S,
        file=sys.stderr,
        leave=False,
    ) as bar:
        token = _reading.set(_Reading(bar))
        try:
            yield
        finally:
            _reading.reset(token)


def read_whole(path: Path) -> None:
    """``path`` was read whole (a CSV, a database)."""
    state = _reading.get()
    if state is not None:
        try:
            size = path.stat().st_size
        except OSError:
            size = 0
        state.file(path)
        state.update(size)


def tracked(handle: IO[bytes], path: Path) -> IO[bytes]:
    """``handle`` (a stream read in chunks, a trace) reporting the bytes it hands out."""
    state = _reading.get()
    if state is None:
        return handle
    state.file(path)
    return _Tracked(handle, state)  # type: ignore[return-value]


class _Tracked:
    """A read-only binary stream that reports what it reads."""

    def __init__(self, handle: IO[bytes], state: _Reading) -> None:
        self._handle = handle
        self._state = state

    def read(self, size: int = -1) -> bytes:
        data = self._handle.read(size)
        self._state.update(len(data))
        return data

    def __getattr__(self, name: str) -> object:
        return getattr(self._handle, name)

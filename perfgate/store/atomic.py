"""Writing a file so that readers see the old one or the new one, never half of one."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


def atomic_write(path: Path, data: bytes, *, mode: int = 0o644) -> None:
    """Write ``data`` to ``path`` so that a reader sees the old file or the new one, never
    half of one: a temporary file in the same directory, flushed to disk, then renamed over
    the target. On failure (a full disk …) the target is untouched and the temporary file
    removed; the ``OSError`` is the caller's to report.

    A symbolic link stays a link: the file it points at is written. A target that is no
    regular file (``/dev/stdout``, a named pipe) is written in place: a rename would put a
    file where the device or pipe was."""
    if path.is_symlink():
        path = Path(os.path.realpath(path))
    if path.exists() and not path.is_file() and not path.is_dir():
        with path.open("wb") as stream:
            stream.write(data)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    # A unique temporary name per writer; the leading dot keeps it out of listings.
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.stem}.", suffix=".tmp", dir=path.parent)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        # mkstemp creates 0600.
        tmp.chmod(mode)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def _fsync_dir(directory: Path) -> None:
    # Makes the rename itself durable on POSIX; directories cannot be opened on Windows.
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

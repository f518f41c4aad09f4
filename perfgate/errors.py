"""The one user-facing error type.

Everything a user can cause (a bad path, a foreign file, a column that changed meaning, a bad
option) raises a :class:`PerfgateError`. The front ends catch it once, print ``error: <message>``
on one line and exit with status 2. Anything else escaping is a bug in perfgate.
"""

from __future__ import annotations

import math
import reprlib
from pathlib import Path


class PerfgateError(Exception):
    """A user-facing error: its message is one line that says what to fix."""

    exit_code = 2


class Interrupted(PerfgateError):
    """Ctrl-C (SIGINT) while perfgate wrote something: the message says what was written
    before it. Exit status 130, as a shell gives a command that SIGINT ended."""

    exit_code = 130


class ProfileError(PerfgateError):
    """A profile file or directory that cannot be read as what it claims to be.

    The message always names the file, and the column or key when one is at fault, and
    what was expected there.
    """

    def __init__(
        self,
        path: str | Path,
        problem: str,
        *,
        column: str | None = None,
        expected: str | None = None,
    ) -> None:
        self.path = str(path)
        self.problem = problem
        self.column = column
        self.expected = expected
        parts = [f"{self.path}:"]
        if column is not None:
            parts.append(f"column {column!r}:")
        parts.append(problem)
        message = " ".join(parts)
        if expected is not None:
            message += f" (expected {expected})"
        super().__init__(message)


class StoreError(PerfgateError):
    """A file in the baseline store that is no baseline perfgate can use (damaged, cut short,
    edited into something else, or in another benchmark's or commit's place): the gate
    cannot judge against it, and must not take it for a missing baseline."""

    # What to do about it, for the verdict's note; a file of a newer format is no damage.
    REPAIR = (
        "restore it from git, or delete it and record that commit's baseline again "
        "(pytest --perfgate --perfgate-update on it)"
    )

    def __init__(self, message: str, path: str | Path, remedy: str = REPAIR) -> None:
        super().__init__(message)
        self.path = str(path)
        self.remedy = remedy


class NewerFormat(PerfgateError):
    """A file perfgate wrote in a newer format than this version reads."""


class ConfigError(PerfgateError):
    """A configuration file or option with an unknown key or a bad value."""


class _BoundedRepr(reprlib.Repr):
    """Values as messages show them, bounded: a hostile file's value may be an integer of
    10,000 digits (``repr`` refuses it) or an alias bomb whose full text would not fit in
    memory."""

    def __init__(self) -> None:
        super().__init__()
        self.maxlevel = 3
        self.maxdict = self.maxlist = self.maxtuple = self.maxset = 6
        self.maxstring = self.maxother = self.maxlong = 60

    def repr_int(self, x: int, level: int) -> str:
        if x.bit_length() > 128:
            return f"<an integer of about {x.bit_length() * math.log10(2):.0f} digits>"
        return super().repr_int(x, level)


shown = _BoundedRepr().repr
"""A value as a message shows it, bounded (``shown(10**5000)`` does not raise)."""


def clipped(message: object, limit: int = 120) -> str:
    """A message (a parser's, an exception's) on one line, at most ``limit`` characters."""
    text = " ".join(str(message).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def os_error_line(exc: OSError) -> str:
    """An error of the system about a path the user gave, as one line naming it (a name past
    255 bytes, a path through a file …); not a bug, so no traceback."""
    where = f"{clipped(str(exc.filename), 120)}: " if exc.filename else ""
    return f"{where}{exc.strerror or exc}"

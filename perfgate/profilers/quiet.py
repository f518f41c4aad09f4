"""Keep the profilers' own chatter out of the test output.

Kineto (inside torch.profiler and torch_npu's profiler) logs from C++ straight to the
process's stderr, e.g. ``USDT:2026-12-03 09:41:12 9720:9720 SyncActivityProfilerHandler.cpp:52]
profiler_start`` at every start and stop; ``KINETO_LOG_LEVEL`` does not silence those lines.
:func:`quiet_profiler` sends file descriptor 2 to a temporary file while a profiler runs,
then writes back everything but Kineto's informational lines (errors stay), so what the
benchmark itself writes to stderr still shows, and the profiler's warnings from Python
(``warnings``) are not raised as test warnings.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
import warnings
from collections.abc import Iterator

# Kineto's log line: "<SEVERITY>:<date> <time> <pid>:<tid> <file>.cpp:<line>] <message>".
KINETO_LINE = re.compile(
    rb"^(?:USDT|INFO|STAGE|VERBOSE|WARNING):\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \d+:\d+ "
    rb"[\w./-]+:\d+\] "
)
_PROFILER_MODULES = r"torch\.(?:profiler|autograd\.profiler)|torch_npu\.profiler"


def _write_all(fd: int, data: bytes) -> None:
    while data:
        written = os.write(fd, data)
        data = data[written:]


@contextlib.contextmanager
def quiet_profiler(drop: re.Pattern[bytes] = KINETO_LINE) -> Iterator[None]:
    """Run the body with stderr (fd 2) captured; afterwards write back the lines that do
    not match ``drop``. Without a usable fd 2 the body runs as it is."""
    try:
        saved = os.dup(2)
    except OSError:
        yield
        return
    with contextlib.suppress(Exception):
        sys.stderr.flush()
    with tempfile.TemporaryFile() as captured, warnings.catch_warnings():
        warnings.filterwarnings("ignore", module=_PROFILER_MODULES)
        os.dup2(captured.fileno(), 2)
        try:
            yield
        finally:
            with contextlib.suppress(Exception):
                sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            captured.seek(0)
            lines = captured.read().splitlines(keepends=True)
            kept = b"".join(line for line in lines if not drop.match(line))
            if kept:
                _write_all(2, kept)


__all__ = ["KINETO_LINE", "quiet_profiler"]

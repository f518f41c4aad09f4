"""Profile path → :class:`~perfgate.model.Profile`, with the format detected from the content.

Each reader module exposes ``detect(path) -> bool`` (cheap: looks at names and at most the
first bytes of a file) and ``read(path) -> Profile``. :func:`load_profile` asks them in order;
the first that recognises the path reads it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from perfgate.errors import ProfileError
from perfgate.model import Profile

EXPECTED_LAYOUTS = (
    "a torch_npu *_ascend_pt directory (ASCEND_PROFILER_OUTPUT/), an msprof PROF_* directory "
    "(mindstudio_profiler_output/ or device_*/summary/), a torch.profiler trace "
    "(.json or .json.gz), an Ascend trace_view.json / msprof_*.json timeline, "
    "kernel_details.csv / op_summary_*.csv, or an msprof / torch_npu .db"
)


def _readers() -> list[ModuleType]:
    # Imported here so that `import perfgate` stays light; order matters: the most specific
    # layouts first.
    import perfgate.ingest.ascend_db as ascend_db
    import perfgate.ingest.chrome_trace as chrome_trace
    import perfgate.ingest.msprof as msprof
    import perfgate.ingest.torch_npu as torch_npu

    return [torch_npu, msprof, ascend_db, chrome_trace]


def detect_reader(path: Path) -> Callable[[Path], Profile]:
    """The ``read`` function of the first reader that recognises ``path``."""
    for reader in _readers():
        if reader.detect(path):
            read: Callable[[Path], Profile] = reader.read
            return read
    raise ProfileError(path, "not a profile layout perfgate knows", expected=EXPECTED_LAYOUTS)


def load_profile(path: str | Path) -> Profile:
    """Read a profile directory or file into the canonical tables.

    Raises:
        ProfileError: the path is missing, empty, of an unknown layout, or a file in it is
            truncated or has a column that does not hold what the format says.
    """
    path = Path(path)
    if not path.exists():
        raise ProfileError(path, "no such file or directory")
    if path.is_file() and path.stat().st_size == 0:
        raise ProfileError(path, "file is empty")
    if path.is_dir() and not any(path.iterdir()):
        raise ProfileError(path, "directory is empty", expected=EXPECTED_LAYOUTS)
    return detect_reader(path)(path)

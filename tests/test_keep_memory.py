"""``measure: {keep_memory}``: glibc's malloc keeps what a step frees for the next step.

Each case runs in a Python of its own: the setting holds for the rest of a process."""

from __future__ import annotations

import ctypes
import json
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="glibc's malloc, as Linux runners have it"
)

# An 8 MiB block, as a step's activations: glibc's own first threshold (128 KiB) maps it
# with mmap, and mallinfo2's hblks counts such blocks while they are allocated.
SCRIPT = textwrap.dedent(
    """
    import ctypes, json, sys
    from perfgate.profilers import runner

    class MallInfo2(ctypes.Structure):
        _fields_ = [(name, ctypes.c_size_t) for name in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
            "uordblks", "fordblks", "keepcost")]

    libc = ctypes.CDLL(None)
    libc.malloc.restype = ctypes.c_void_p
    libc.free.argtypes = (ctypes.c_void_p,)
    libc.mallinfo2.restype = MallInfo2
    with runner.pinned(None, False, keep_memory=sys.argv[1] == "keep") as pinning:
        before = libc.mallinfo2().hblks  # blocks the imports hold
        block = libc.malloc(8 * 2**20)
        mapped = libc.mallinfo2().hblks - before
        libc.free(block)
    with runner.pinned(None, False) as later:  # a later benchmark of the same process
        pass
    print(json.dumps({"mapped": mapped, "malloc": pinning.malloc, "later": later.malloc,
                      "fingerprint": pinning.fingerprint()}))
    """
)


def _run(mode: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, mode], capture_output=True, text=True, check=True
    )
    result: dict[str, object] = json.loads(done.stdout)
    return result


def test_kept_memory_is_not_mapped_afresh_and_the_fingerprint_says_so() -> None:
    kept = _run("keep")
    assert kept["mapped"] == 0  # from the heap, which keeps it for the next step
    assert kept["malloc"] == kept["later"] == "kept"  # it holds for the process
    assert kept["fingerprint"] == {"malloc": "kept"}
    system = _run("system")
    assert system["mapped"] == 1  # glibc's own thresholds: a fresh mapping
    assert system["malloc"] == system["later"] == "system"
    assert system["fingerprint"] == {"malloc": "system"}


class _Musl:
    """A C library with mallopt but not glibc's (musl has no gnu_get_libc_version)."""

    def __init__(self, name: object) -> None:
        self.mallopt = lambda *args: 1


@pytest.mark.parametrize(
    "library",
    [_Musl, lambda name: (_ for _ in ()).throw(TypeError("no CDLL(None)"))],
    ids=["musl", "windows"],
)
def test_another_c_library_keeps_its_own_malloc_and_says_system(
    monkeypatch: pytest.MonkeyPatch, library: object
) -> None:
    from perfgate.profilers import runner

    monkeypatch.setattr(runner, "_memory_kept", False)  # as in a fresh process
    monkeypatch.setattr(ctypes, "CDLL", library)
    assert runner.keep_freed_memory() is False
    with runner.pinned(None, False, keep_memory=True) as pinning:
        assert pinning.malloc == "system"

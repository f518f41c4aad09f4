"""The torch.profiler path on CPU: the same Kineto trace whether perfgate drives the autograd
profiler itself (CPU only, no ``torch._inductor`` import) or torch.profiler.profile does.

Each case runs in its own Python process: whether ``torch._inductor`` got imported is only
observable in a process that had not imported it before (the test worker may have).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

RECORD_BOTH = """
import json, sys
from pathlib import Path

import torch

from perfgate.ingest import load_profile
from perfgate.profilers import torch_profiler

IMPORT_INDUCTOR_FIRST = {import_inductor_first}
if IMPORT_INDUCTOR_FIRST:
    import torch._inductor  # a benchmark that compiles: torch.profiler must run as is

# Which profiler record_trace started: torch.profiler.profile counts its starts.
started = []
real_profile = torch.profiler.profile
def counted_profile(*args, **kwargs):
    started.append(1)
    return real_profile(*args, **kwargs)
torch.profiler.profile = counted_profile

out = Path(sys.argv[1])
weights = torch.randn(96, 96)

def step():
    for _ in range(3):
        torch.mm(weights, weights)
    torch.relu(weights)

inductor_before = "torch._inductor" in sys.modules
torch_profiler.record_trace(step, out / "perfgate.json", steps=4, warmup=2)
inductor_after = "torch._inductor" in sys.modules
torch_profiler_started = len(started)
torch_profiler._record_with_torch_profiler(
    torch, step, out / "torch_profiler.json", 4, 2, True, False
)

summary = {{
    "inductor_before": inductor_before,
    "inductor_after": inductor_after,
    "torch_profiler_started": torch_profiler_started,
}}
for name in ("perfgate", "torch_profiler"):
    trace = json.loads((out / f"{{name}}.json").read_text())
    events = trace["traceEvents"]
    profile = load_profile(out / f"{{name}}.json")
    summary[name] = {{
        "header": sorted(key for key in trace if key not in ("traceEvents", "trace_id",
                                                             "baseTimeNanoseconds")),
        "record_shapes": trace.get("record_shapes"),
        "steps": sorted(e["name"] for e in events if e.get("name", "").startswith("ProfilerStep#")),
        "cpu_ops": sorted(
            {{e["name"] for e in events if e.get("cat") == "cpu_op" and e.get("ph") == "X"}}
        ),
        "mm_calls": sum(e.get("name") == "aten::mm" for e in events if e.get("ph") == "X"),
        "steps_read": int(profile.steps["step"].nunique()),
        "task_basis": profile.metadata.get("task_basis"),
    }}
print(json.dumps(summary))
"""


def _record_both(tmp_path: Path, *, import_inductor_first: bool) -> dict[str, object]:
    script = tmp_path / "record.py"
    script.write_text(
        textwrap.dedent(RECORD_BOTH.format(import_inductor_first=import_inductor_first))
    )
    done = subprocess.run(
        [sys.executable, str(script), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    summary: dict[str, object] = json.loads(done.stdout.splitlines()[-1])
    return summary


@pytest.mark.slow
def test_on_cpu_perfgate_records_torch_profilers_trace_without_importing_inductor(
    tmp_path: Path, needs_torch: None
) -> None:
    summary = _record_both(tmp_path, import_inductor_first=False)
    # torch.profiler.profile imports torch._inductor when it starts (2 s per process on
    # this machine); perfgate's CPU path does not.
    assert summary["inductor_before"] is False
    assert summary["inductor_after"] is False
    assert summary["torch_profiler_started"] == 0
    ours, theirs = summary["perfgate"], summary["torch_profiler"]
    assert ours == theirs
    assert isinstance(ours, dict)
    # Warm-up steps 0 and 1 are not in the trace; 4 annotated steps are, 3 mm calls each.
    assert ours["steps"] == ["ProfilerStep#2", "ProfilerStep#3", "ProfilerStep#4", "ProfilerStep#5"]
    assert ours["mm_calls"] == 12
    assert {"aten::mm", "aten::relu"} <= set(ours["cpu_ops"])
    assert ours["steps_read"] == 4
    assert ours["task_basis"] == "cpu"
    assert ours["record_shapes"] == 1


@pytest.mark.slow
def test_a_benchmark_that_imported_inductor_gets_torch_profiler_as_is(
    tmp_path: Path, needs_torch: None
) -> None:
    summary = _record_both(tmp_path, import_inductor_first=True)
    assert summary["inductor_before"] is True
    assert summary["torch_profiler_started"] == 1
    assert summary["perfgate"] == summary["torch_profiler"]


STEP_THAT_RAISES = """
import sys
import torch
from perfgate.profilers.torch_profiler import record_trace

calls = 0

def step():
    global calls
    calls += 1
    if calls == int(sys.argv[2]):
        raise ValueError("the benchmark's own error")
    torch.mm(torch.ones(8, 8), torch.ones(8, 8))

try:
    record_trace(step, sys.argv[1] + "/failed.json", steps=3, warmup=2)
except ValueError as error:
    print("raised:", error)
record_trace(step, sys.argv[1] + "/again.json", steps=2, warmup=1)
print("recorded again")
"""


@pytest.mark.slow
@pytest.mark.parametrize("failing_call", [1, 4], ids=["in a warm-up step", "in a profiled step"])
def test_a_step_that_raises_leaves_its_error_alone_and_the_profiler_usable(
    tmp_path: Path, failing_call: int, needs_torch: None
) -> None:
    done = subprocess.run(
        [sys.executable, "-c", STEP_THAT_RAISES, str(tmp_path), str(failing_call)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["raised: the benchmark's own error", "recorded again"]
    # Stopping a profiler that was only prepared made torch warn "disableProfiler called but
    # no active profiling session found" on the benchmark's stderr.
    assert done.stderr == ""
    assert (tmp_path / "again.json").is_file()

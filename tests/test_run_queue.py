"""The run-queue wait that witnesses a step-time rise on a busy runner: measured for real,
with a CPU-bound neighbour pinned to the same CPU as the timed thread."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from perfgate.profilers.measure import RunQueueClock, Timing

pytestmark = pytest.mark.skipif(
    RunQueueClock.open() is None or not hasattr(os, "sched_setaffinity"),
    reason="the kernel does not report the run-queue wait (/proc/thread-self/schedstat)",
)


def _spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


@pytest.fixture
def one_cpu() -> Iterator[int]:
    """This process on one CPU; restored after."""
    before = os.sched_getaffinity(0)
    cpu = min(before)
    os.sched_setaffinity(0, {cpu})
    try:
        yield cpu
    finally:
        os.sched_setaffinity(0, before)


def test_a_quiet_sleeping_step_waits_for_no_cpu(one_cpu: int) -> None:
    timing = Timing(cpu_time_us=[], run_queue_us=[])
    timing.measure(lambda: time.sleep(0.02), steps=10, warmup=1, rounds=2)
    assert timing.run_queue_us is not None and len(timing.run_queue_us) == 20
    table = timing.table()
    assert len(table["run_queue_us"]) == len(table["step_time_us"]) == 20
    # Sleeping is no waiting for a CPU: the steps waited far less than they slept (a wake-up
    # takes a few µs; on a CI runner whose other jobs share the CPU, up to a time slice, so
    # the steps are long and the bound is on the sum).
    assert all(q >= 0 for q in timing.run_queue_us)
    assert sum(timing.run_queue_us) < 0.25 * sum(timing.step_time_us)


def test_a_neighbour_on_the_same_cpu_shows_as_run_queue_wait(one_cpu: int) -> None:
    neighbour = subprocess.Popen(
        [sys.executable, "-c", "while True: pass"],
        preexec_fn=lambda: os.sched_setaffinity(0, {one_cpu}),
    )
    try:
        time.sleep(0.2)  # the neighbour is running
        timing = Timing(cpu_time_us=[], run_queue_us=[])
        timing.measure(lambda: _spin(0.004), steps=10, warmup=1, rounds=2)
    finally:
        neighbour.kill()
        neighbour.wait()
    assert timing.run_queue_us is not None
    wall, queued = sum(timing.step_time_us), sum(timing.run_queue_us)
    # Two runnable threads on one CPU: about half of the wall time is spent waiting for it
    # (the scheduler's slices make it coarse, so the bound is loose).
    assert queued > 0.25 * wall
    assert queued < wall

"""The timed rounds and the garbage collector: each round starts from a collected heap, and
what was alive before the rounds is frozen while they run (a full collection with torch
imported took 0.17 s a round), then handed back."""

from __future__ import annotations

import gc
import weakref
from typing import Any

import pytest

from perfgate.profilers.measure import Timing


class Node:
    def __init__(self) -> None:
        self.other: Any = self  # a reference cycle: only the collector frees it


def test_rounds_run_frozen_and_collected_and_hand_the_heap_back() -> None:
    before = Node()
    dead_before = weakref.ref(before)
    del before  # garbage from before the rounds: the first collection frees it
    made_in_warmup: list[weakref.ref[Node]] = []
    seen: list[tuple[int, bool, bool]] = []
    calls = 0

    def step() -> None:
        nonlocal calls
        calls += 1
        if calls % 3 != 0:  # warm-up steps (2 of each round's 3 calls before timing)
            made_in_warmup.append(weakref.ref(Node()))
        else:
            seen.append(
                (
                    gc.get_freeze_count(),
                    dead_before() is None,
                    all(ref() is None for ref in made_in_warmup),
                )
            )

    timing = Timing()
    timing.measure(step, steps=1, warmup=2, rounds=3)
    assert len(seen) == 3 and timing.rounds == [0, 1, 2]
    for frozen, old_garbage_freed, warmup_garbage_freed in seen:
        assert frozen > 1000  # the test process's own objects, modules and all
        assert old_garbage_freed and warmup_garbage_freed
    assert gc.get_freeze_count() == 0


def test_a_step_that_raises_leaves_nothing_frozen() -> None:
    def step() -> None:
        raise RuntimeError("the benchmark's own error")

    with pytest.raises(RuntimeError, match="own error"):
        Timing().measure(step, steps=3, warmup=0, rounds=2)
    assert gc.get_freeze_count() == 0

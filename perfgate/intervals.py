"""Interval arithmetic over numpy arrays: every fraction of time is a union, never a sum.

Two kernels on two streams that overlap for 10 µs are 10 µs of busy device, not 20.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pandas as pd

FloatArray = npt.NDArray[np.float64]


def merge(starts: npt.ArrayLike, ends: npt.ArrayLike) -> tuple[FloatArray, FloatArray]:
    """Merge intervals ``[start, end)`` into disjoint, sorted intervals.

    Touching intervals (one ends where the next starts) merge into one.
    """
    s = np.asarray(starts, dtype=np.float64)
    e = np.asarray(ends, dtype=np.float64)
    if s.size == 0:
        return s, e
    order = np.argsort(s, kind="stable")
    s, e = s[order], e[order]
    running_end = np.maximum.accumulate(e)
    # A new merged interval starts where a start lies beyond everything seen so far.
    new_block = np.empty(s.size, dtype=bool)
    new_block[0] = True
    new_block[1:] = s[1:] > running_end[:-1]
    merged_starts = s[new_block]
    # running_end never decreases: a block ends where it stands at the block's last interval.
    # (Times may be negative: relative to a time origin, perfgate.model.)
    last = np.append(np.flatnonzero(new_block)[1:] - 1, s.size - 1)
    merged_ends = running_end[last]
    return merged_starts, merged_ends


def clip(
    starts: npt.ArrayLike, ends: npt.ArrayLike, lo: float, hi: float
) -> tuple[FloatArray, FloatArray]:
    """Clip intervals to the window ``[lo, hi)``, dropping those that fall outside it."""
    s = np.clip(np.asarray(starts, dtype=np.float64), lo, hi)
    e = np.clip(np.asarray(ends, dtype=np.float64), lo, hi)
    keep = e > s
    return s[keep], e[keep]


def union_length(starts: npt.ArrayLike, ends: npt.ArrayLike) -> float:
    """Total length covered by the union of the intervals."""
    s, e = merge(starts, ends)
    return float(np.sum(e - s))


def union_length_per_group(
    groups: npt.ArrayLike, starts: npt.ArrayLike, ends: npt.ArrayLike, n_groups: int
) -> FloatArray:
    """:func:`union_length` of each group's intervals at once (``groups`` numbers them from 0
    to ``n_groups - 1``): one sort and a running maximum per group, no loop over groups."""
    g = np.asarray(groups, dtype=np.intp)
    s = np.asarray(starts, dtype=np.float64)
    e = np.asarray(ends, dtype=np.float64)
    out = np.zeros(n_groups)
    if s.size == 0:
        return out
    order = np.lexsort((s, g))
    block_group, lengths = merged_lengths_by_group(g[order], s[order], e[order])
    out += np.bincount(block_group, weights=lengths, minlength=n_groups)
    return out


def merged_lengths_by_group(
    groups: npt.NDArray[np.intp], starts: FloatArray, ends: FloatArray
) -> tuple[npt.NDArray[np.intp], FloatArray]:
    """The merged intervals of each group, as (their group, their length) in order, for
    intervals sorted by (group, start) (at least one). As :func:`merge` does for one group: a
    merged interval starts where a start lies beyond every end before it in its group, and
    ends at the running maximum of the ends."""
    running_end = pd.Series(ends).groupby(groups, sort=False).cummax().to_numpy()
    new_block = np.empty(starts.size, dtype=bool)
    new_block[0] = True
    new_block[1:] = (groups[1:] != groups[:-1]) | (starts[1:] > running_end[:-1])
    block = np.flatnonzero(new_block)
    last = np.append(block[1:] - 1, starts.size - 1)
    return groups[block], running_end[last] - starts[block]

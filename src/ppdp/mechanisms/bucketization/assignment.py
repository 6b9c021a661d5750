"""Record assignment for one-size and two-size settings (Wang et al. 2011, §4.1 and §4.3).

- :func:`round_robin_assign` — Round-Robin Assignment (RRA): the t-th record of x_i goes to
  bucket ``(o_1 + … + o_{i−1} + t) mod b``; valid for a one-size setting iff Lemma 2 holds.
- :func:`record_partition` — RecordPartition: split T into T1 (for B1) and T2 (for B2):
  T1 first takes a_i1 = min(⌊f'_i S1⌋ b1, o_i) records of each x_i, T2 the rest; then
  |T1| − s(B1) records are moved from T1 to T2 without exceeding a_i2 in T2. The paper lets
  any value with room take the moves; we deal them out one record per value per pass, in
  value order (a water-filling), which reproduces Example 3 (one record of each of x9…x14)
  and keeps the parts balanced. RRA on (T1, B1) and (T2, B2) then gives a valid assignment
  whenever PC, FC and CC hold (the sufficiency proof of Theorem 3).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from ...errors import InfeasibleError
from .plan import SizeClass, classes_to_counts, round_robin_counts
from .validity import two_size_check


def round_robin_assign(o, b: int, offset: int = 0) -> np.ndarray:
    """RRA (§4.1) of ``o[i]`` records per value to ``b`` buckets → counts matrix (b × m)."""
    return round_robin_counts(np.asarray(o, dtype=np.int64), int(b), offset)


def _water_fill(room: np.ndarray, d: int) -> np.ndarray:
    """Distribute ``d`` unit moves over values with capacity ``room``, one per value per pass, in order."""
    room = np.asarray(room, dtype=np.int64)
    if d <= 0:
        return np.zeros_like(room)
    if int(room.sum()) < d:
        raise InfeasibleError("record partition: not enough room in T2 (FC fails)")
    lo, hi = 0, int(room.max())  # largest level L with Σ min(room, L) ≤ d
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if int(np.minimum(room, mid).sum()) <= d:
            lo = mid
        else:
            hi = mid - 1
    moved = np.minimum(room, lo)
    rest = d - int(moved.sum())
    if rest:
        more = np.flatnonzero(room > lo)[:rest]
        moved[more] += 1
    return moved


@dataclass(frozen=True, eq=False)
class RecordPartition:
    """The partition {T1, T2} of §4.3 for ⟨B1(S1, b1), B2(S2, b2)⟩ (per-value record counts)."""

    S1: int
    b1: int
    S2: int
    b2: int
    a1: np.ndarray      # a_i1 = min(u_i1, o_i)
    a2: np.ndarray      # a_i2 = min(u_i2, o_i)
    moved: np.ndarray   # records of x_i moved from T1 to T2
    o1: np.ndarray      # records of x_i in T1 (for B1)
    o2: np.ndarray      # records of x_i in T2 (for B2)

    @property
    def classes(self) -> list[SizeClass]:
        return [SizeClass(self.S1, self.b1, self.o1), SizeClass(self.S2, self.b2, self.o2)]

    @cached_property
    def counts(self) -> np.ndarray:
        """The assignment: RRA on (T1, B1) then (T2, B2) → counts matrix ((b1 + b2) × m), B1's buckets first."""
        return classes_to_counts(self.classes, len(self.o1))


def record_partition(o, fprime, S1: int, b1: int, S2: int, b2: int) -> RecordPartition:
    """RecordPartition(T, B1, B2) of §4.3; raises :class:`InfeasibleError` if the setting is not valid."""
    o = np.asarray(o, dtype=np.int64)
    chk = two_size_check(o, fprime, S1, b1, S2, b2)
    if not chk.valid:
        failed = [name for name, ok in (("PC", chk.pc), ("FC(S1)", chk.fc1), ("FC(S2)", chk.fc2), ("CC", chk.cc)) if not ok]
        raise InfeasibleError(f"⟨({S1}, {b1}), ({S2}, {b2})⟩ is not a valid bucket setting: {', '.join(failed)} fail(s)")
    a1, a2 = chk.a1, chk.a2
    o1 = a1.copy()
    o2 = o - a1                      # ≤ a2 by PC
    d = int(o1.sum()) - int(S1) * int(b1)   # ≥ 0 by FC(S1)
    room = np.minimum(o1, a2 - o2)   # what x_i can still move without exceeding a_i2 in T2
    moved = _water_fill(room, d)
    o1 = o1 - moved
    o2 = o2 + moved
    return RecordPartition(int(S1), int(b1), int(S2), int(b2), a1, a2, moved, o1, o2)


def two_size_assign(o, fprime, S1: int, b1: int, S2: int, b2: int) -> np.ndarray:
    """Counts matrix of a valid two-size setting: RecordPartition then RRA on each part."""
    return record_partition(o, fprime, S1, b1, S2, b2).counts


__all__ = ["round_robin_assign", "record_partition", "two_size_assign", "RecordPartition"]

"""Validity of one-size and two-size bucket settings in O(m) (Wang et al. 2011, §4.1–4.2).

- One size (Lemma 2 / arXiv Lemma 4.13(4)): b buckets of size S are valid for counts o iff
  |T| = S·b and o_i ≤ ⌊f'_i S⌋·b for every value x_i.
- Two sizes (Theorem 3 / arXiv Theorem 4.17): with u_ij = ⌊f'_i S_j⌋·b_j and
  a_ij = min(u_ij, o_i), ⟨B1(S1, b1), B2(S2, b2)⟩ is valid iff
  PC: a_i1 + a_i2 ≥ o_i for all i;  FC: Σ_i a_ij ≥ S_j b_j for j = 1, 2;  CC: |T| = S1 b1 + S2 b2.

⌊f'·S⌋ is :func:`~ppdp.mechanisms.bucketization.plan.privacy_cap`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .plan import privacy_cap


def one_size_valid(o, fprime, S: int) -> bool:
    """Lemma 2(4): b = |T|/S buckets of size S are valid iff S divides |T| and o_i ≤ ⌊f'_i S⌋·b."""
    o = np.asarray(o, dtype=np.int64)
    n = int(o.sum())
    S = int(S)
    if S <= 0 or n % S:
        return False
    b = n // S
    return bool((o <= privacy_cap(fprime, S) * b).all())


@dataclass(frozen=True)
class TwoSizeCheck:
    """The quantities of Theorem 3 for one two-size setting."""

    u1: np.ndarray
    u2: np.ndarray
    a1: np.ndarray
    a2: np.ndarray
    pc: bool
    fc1: bool
    fc2: bool
    cc: bool

    @property
    def valid(self) -> bool:
        return self.pc and self.fc1 and self.fc2 and self.cc


def two_size_check(o, fprime, S1: int, b1: int, S2: int, b2: int) -> TwoSizeCheck:
    """u_ij, a_ij and the PC / FC / CC conditions of Theorem 3 (O(m))."""
    o = np.asarray(o, dtype=np.int64)
    S1, b1, S2, b2 = int(S1), int(b1), int(S2), int(b2)
    u1 = privacy_cap(fprime, S1) * b1
    u2 = privacy_cap(fprime, S2) * b2
    a1 = np.minimum(u1, o)
    a2 = np.minimum(u2, o)
    pc = bool((a1 + a2 >= o).all())
    fc1 = bool(a1.sum() >= S1 * b1)
    fc2 = bool(a2.sum() >= S2 * b2)
    cc = bool(int(o.sum()) == S1 * b1 + S2 * b2) and b1 >= 0 and b2 >= 0
    return TwoSizeCheck(u1, u2, a1, a2, pc, fc1, fc2, cc)


def two_size_valid(o, fprime, S1: int, b1: int, S2: int, b2: int) -> bool:
    """Theorem 3: ⟨B1(S1, b1), B2(S2, b2)⟩ is valid iff PC, FC and CC hold."""
    return two_size_check(o, fprime, S1, b1, S2, b2).valid


__all__ = ["one_size_valid", "two_size_valid", "two_size_check", "TwoSizeCheck"]

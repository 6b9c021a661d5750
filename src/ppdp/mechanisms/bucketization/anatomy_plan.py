"""Anatomy's group creation (Xiao & Tao 2006), the baseline of Wang et al. 2011 (Remark 1, §7).

Group-creation: hash the records by SA value; while at least ℓ hash buckets are non-empty,
remove one record from each of the ℓ largest buckets (ties: lower value index first) and make
them a group. Residue-assignment: each of the (fewer than ℓ, at most one per value) remaining
records goes to a group that does not hold its value — a different group for each residual
record when possible. Groups have ℓ distinct values (ℓ + 1 after a residue), so every share is
≤ 1/ℓ. Eligibility (Xiao & Tao, Lemma 1 / Remark 1 of Wang et al.): at most |T|/ℓ records may
share an SA value, i.e. max_i f_i ≤ 1/ℓ.

Computed on the counts only: consecutive identical groups are produced in one step (the ℓ
largest stay the ℓ largest while the ℓ-th exceeds the (ℓ+1)-th), so the loop runs far fewer
times than there are groups.

:func:`anatomy_mse_from_sizes` is what the paper plots for "Anatomy" in Figure 4: the MSE of
splitting |T| records into groups of sizes ℓ and ℓ + 1, ignoring eligibility.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from ...errors import InfeasibleError, PpdpError
from .plan import BucketSetting


def anatomy_eligible(o, l: int) -> bool:  # noqa: E741
    """max_i o_i ≤ |T| / ℓ."""
    o = np.asarray(o, dtype=np.int64)
    return bool(int(o.max()) * int(l) <= int(o.sum()))


def _last_valid(ok, hi: int) -> int:
    """Largest k in [1, hi] with ok(k) (ok monotone: true up to some k, false after; ok(1) true)."""
    lo = 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if ok(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


def group_creation_types(o: np.ndarray, l: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # noqa: E741
    """Group-creation on the counts, many groups per step: ``(sets, multiplicity, rest)`` —
    0/1 rows (the ℓ values of a group) with how many groups take them, and the residual counts.

    Each step of the rule (take one record from each of the ℓ largest, ties by lower index)
    is simulated in batches:

    - no tie at the ℓ-th place: the same ℓ values stay the largest for (ℓ-th − (ℓ+1)-th) steps;
    - a tie: the a values above the tied level L are taken every step, and the t tied values
      (index order) are taken r = ℓ − a at a time in cyclic order — the rule's tie-break makes
      it a round robin — for as many steps k as the a values stay above the tied ones and the
      tied ones above every other value; the k groups are then P = t/gcd(r, t) distinct sets.

    The loop runs O(m²) times at most, independent of N (the one-group-per-step loop took
    minutes at 10^7 rows when counts tie). The multiset of groups is the rule's; their order
    is by batch."""
    o = np.asarray(o, dtype=np.int64)
    m = len(o)
    rest = o.copy()
    idx = np.arange(m)
    sets: list[np.ndarray] = []
    mult: list[int] = []

    def emit(members, k: int) -> None:
        row = np.zeros(m, dtype=np.int64)
        row[members] = 1
        sets.append(row)
        mult.append(int(k))

    while int((rest > 0).sum()) >= l:
        order = np.lexsort((idx, -rest))          # largest first, ties by value index
        L = int(rest[order[l - 1]])
        nxt = int(rest[order[l]]) if m > l else 0
        if nxt < L:                                # the ℓ largest stay the ℓ largest for L − nxt groups
            top = order[:l]
            rest[top] -= L - nxt
            emit(top, L - nxt)
            continue
        best = None
        for h, with_lower in ((L, True), (L + 1, True), (L, False)):
            upper = np.flatnonzero(rest == h)
            lower = np.flatnonzero(rest == h - 1) if with_lower else upper[:0]
            if not len(upper) or (len(lower) and lower.max() > upper.min()):
                continue
            A = np.flatnonzero(rest > h)
            B = np.concatenate([lower, upper])     # index order: the lower level first
            a, t, p0 = len(A), len(B), len(lower)
            r = l - a
            if not 1 <= r <= t:
                continue
            out = rest[(rest < h - 1) if with_lower else (rest < h)]
            L2 = int(out.max()) if len(out) else 0
            a_min = int(rest[A].min()) if a else None

            def ok(k: int, r=r, t=t, h=h, L2=L2, a_min=a_min, p0=p0) -> bool:
                D = p0 + (k - 1) * r                # decrements the block has had before the last step
                if h - (-(-D // t)) <= L2:          # its lowest level stays above every other value
                    return False
                return a_min is None or a_min - (k - 1) > h - D // t

            if not ok(1):
                continue
            k = _last_valid(ok, t * (h - L2) // r + 2)
            if best is None or k > best[0]:
                best = (k, A, B, r, t, p0)
        if best is None:                           # one step of the rule itself
            top = order[:l]
            rest[top] -= 1
            emit(top, 1)
            continue
        k, A, B, r, t, p0 = best
        P = t // math.gcd(r, t)
        for u in range(min(P, k)):
            picks = B[(p0 + u * r + np.arange(r)) % t]
            emit(np.concatenate([A, picks]), k // P + (1 if u < k % P else 0))
        rest[A] -= k
        q = np.arange(t)

        def dec(D: int) -> np.ndarray:
            return D // t + (q < D % t)

        rest[B] -= dec(p0 + k * r) - dec(p0)
    if not sets:
        return np.zeros((0, m), dtype=np.int64), np.zeros(0, dtype=np.int64), rest
    return np.asarray(sets), np.asarray(mult, dtype=np.int64), rest


def group_creation(o: np.ndarray, l: int) -> tuple[np.ndarray, np.ndarray]:  # noqa: E741
    """Group-creation step: (groups × m) 0/1 counts and the residual counts (< ℓ values, ≤ 1 each).
    Dense (one row per group): for small tables; :func:`group_creation_types` is the compact form."""
    sets, mult, rest = group_creation_types(o, l)
    return np.repeat(sets, mult, axis=0), rest


def anatomy_setting(o, l: int, labels: Sequence[str] | None = None) -> BucketSetting:  # noqa: E741
    """Anatomy's ℓ-diverse groups for SA counts ``o`` → :class:`BucketSetting` (method "anatomy").

    Raises :class:`InfeasibleError` when some value has frequency > 1/ℓ (not eligible).
    """
    o = np.asarray(o, dtype=np.int64)
    if isinstance(l, bool) or not isinstance(l, (int, np.integer)) or l < 1:
        raise PpdpError(f"ℓ must be a whole number ≥ 1, got {l!r}")
    l = int(l)  # noqa: E741
    n = int(o.sum())
    if n <= 0:
        raise PpdpError("the table is empty: no groups to form")
    if not anatomy_eligible(o, l):
        bad = np.flatnonzero(o * l > n)
        name = (lambda i: repr(labels[i])) if labels is not None else (lambda i: f"#{i}")
        shown = ", ".join(f"{name(i)} (f = {o[i] / n:.4g})" for i in bad[:10])
        raise InfeasibleError(f"Anatomy with ℓ = {l} needs every SA frequency ≤ 1/ℓ = {1 / l:.4g} "
                              f"(eligibility of ℓ-diversity); too frequent: {shown}")
    sets, mult, rest = group_creation_types(o, l)
    G = int(mult.sum())
    # residue assignment: each remaining record to the first group without its value, a group
    # not yet given a residue if possible; a chosen group is split off its type
    rows = [r.copy() for r in sets]
    mults = [int(k) for k in mult]
    used = [False] * len(rows)
    for v in np.flatnonzero(rest > 0).tolist():
        for _ in range(int(rest[v])):              # at most one per value (eligibility)
            cand = [i for i in range(len(rows)) if mults[i] and rows[i][v] == 0 and not used[i]]
            if not cand:
                cand = [i for i in range(len(rows)) if mults[i] and rows[i][v] == 0]
            if not cand:
                raise InfeasibleError("Anatomy residue assignment failed: every group already holds the value")
            i = cand[0]
            if used[i] or mults[i] == 1:
                rows[i][v] += 1
                used[i] = True
            else:
                one = rows[i].copy()
                one[v] += 1
                rows.insert(i, one)
                mults.insert(i, 1)
                used.insert(i, True)
                mults[i + 1] -= 1
    types = np.asarray(rows, dtype=np.int64).reshape(len(rows), len(o))
    multiplicity = np.asarray(mults, dtype=np.int64)
    sizes = types.sum(axis=1)
    info = {"l": l, "groups": G, "residues": int(rest.sum()), "size_l": int(multiplicity[sizes == l].sum()),
            "size_l_plus_1": int(multiplicity[sizes == l + 1].sum())}
    return BucketSetting(types, "anatomy", None, info, multiplicity)


def anatomy_sizes(n: int, l: int) -> dict[int, int]:  # noqa: E741
    """Group sizes of ℓ or ℓ + 1 for n records: ⌊n/ℓ⌋ groups, n mod ℓ of them of size ℓ + 1
    (spread as evenly as possible when n mod ℓ exceeds the number of groups)."""
    n, l = int(n), int(l)  # noqa: E741
    if l < 1 or n < 1:
        raise PpdpError(f"need n ≥ 1 and ℓ ≥ 1, got n = {n}, ℓ = {l}")
    G = max(1, n // l)
    q, r = divmod(n, G)
    return {q: G - r, **({q + 1: r} if r else {})}


def anatomy_mse_from_sizes(n: int, l: int) -> float:  # noqa: E741
    """MSE = Σ(|g| − 1)² / (n − 1) of groups of sizes ℓ / ℓ + 1 for n records — the paper's
    "Anatomy" curve of Figure 4, computed from sizes only (eligibility ignored; label it so)."""
    sizes = anatomy_sizes(n, l)
    loss = sum(c * (s - 1) ** 2 for s, c in sizes.items())
    return 0.0 if n <= 1 else loss / (n - 1)


__all__ = ["anatomy_setting", "group_creation", "group_creation_types", "anatomy_eligible", "anatomy_sizes", "anatomy_mse_from_sizes"]

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

from typing import Sequence

import numpy as np

from ...errors import InfeasibleError, PpdpError
from .plan import BucketSetting


def anatomy_eligible(o, l: int) -> bool:  # noqa: E741
    """max_i o_i ≤ |T| / ℓ."""
    o = np.asarray(o, dtype=np.int64)
    return bool(int(o.max()) * int(l) <= int(o.sum()))


def group_creation(o: np.ndarray, l: int) -> tuple[np.ndarray, np.ndarray]:  # noqa: E741
    """Group-creation step: (groups × m) 0/1 counts and the residual counts (< ℓ values, ≤ 1 each)."""
    m = len(o)
    rest = o.copy()
    idx = np.arange(m)
    sets: list[np.ndarray] = []
    mult: list[int] = []
    while int((rest > 0).sum()) >= l:
        order = np.lexsort((idx, -rest))          # largest first, ties by value index
        top = order[:l]
        nxt = int(rest[order[l]]) if m > l else 0
        steps = max(1, int(rest[top[-1]]) - nxt)   # the ℓ largest stay the ℓ largest for this many groups
        rest[top] -= steps
        sets.append(top)
        mult.append(steps)
    G = int(sum(mult))
    counts = np.zeros((G, m), dtype=np.int64)
    starts = np.concatenate(([0], np.cumsum(mult)[:-1]))
    for k, (s, c) in enumerate(zip(sets, mult)):
        counts[starts[k]:starts[k] + c, s] = 1
    return counts, rest


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
    counts, rest = group_creation(o, l)
    G = counts.shape[0]
    # residue assignment: each remaining record to a group without its value, distinct groups if possible
    used = np.zeros(G, dtype=bool)
    for v in np.flatnonzero(rest > 0).tolist():
        for _ in range(int(rest[v])):              # at most one per value (eligibility)
            free = np.flatnonzero((counts[:, v] == 0) & ~used)
            if len(free) == 0:
                free = np.flatnonzero(counts[:, v] == 0)
            if len(free) == 0:
                raise InfeasibleError("Anatomy residue assignment failed: every group already holds the value")
            g = int(free[0])
            counts[g, v] += 1
            used[g] = True
    sizes = counts.sum(axis=1)
    info = {"l": l, "groups": G, "residues": int(rest.sum()), "size_l": int((sizes == l).sum()),
            "size_l_plus_1": int((sizes == l + 1).sum())}
    return BucketSetting(counts, "anatomy", None, info)


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


__all__ = ["anatomy_setting", "group_creation", "anatomy_eligible", "anatomy_sizes", "anatomy_mse_from_sizes"]

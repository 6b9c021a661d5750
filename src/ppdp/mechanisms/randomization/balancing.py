"""SDR Phase 1, Balancing (Chaytor & Wang, extended version, Figure 10, Examples 6–7).

Works on SA counts only (a plan): the result is a (groups × |SA|) count matrix; rows are
assigned to groups afterwards (:func:`assign_rows`).

Definitions. f_max is the largest frequency of an SA' value in T; T is λ-balanced w.r.t. SA'
when every SA' value has frequency ≤ |T|/λ; λ = ⌊|T|/f_max⌋.

SA' = SA. T0 = T; while T0 is not empty, with α_1 ≥ α_2 ≥ … the frequencies in T0 (ties:
smaller code first),
    h = min(α_λ, ⌊|T0|/λ − α_{λ+1}⌋)                                    (eq 22)
(the largest h that leaves T0 − g λ-balanced: after removing h of each of the λ most
frequent values the largest frequency is max(α_1 − h, α_{λ+1}) and the size |T0| − λh);
h = 0 ⇒ the group is all of T0, otherwise it holds h records of each of the λ most frequent
values.

SA' ≠ SA. T' = records of SA' values, T'' = the rest. Balance T' with λ' = ⌊|T'|/f_max⌋ (the
seed's Example 7 uses λ' = 3 for |T'| = 30, f_max = 8), then give group g_j
⌊|g_j|·|T''|/|T'|⌋ records of T'', taking T'' value by value (most frequent first), the
residue to the last group.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...errors import InfeasibleError
from ...kernels.transition import counting_order


@dataclass(frozen=True)
class BalancePlan:
    groups: np.ndarray          # (t × m) SA counts of the initial groups, after distributing T''
    before: np.ndarray          # (t × m) the same before distributing T'' (= groups when SA' = SA)
    hs: tuple[int, ...]         # h of each iteration (0 for a final "all of T0" group)
    lam: int                    # λ = ⌊|T|/f_max⌋
    lam_prime: int              # λ' = ⌊|T'|/f_max⌋ (= λ when SA' = SA)
    f_max: int


def _order(counts: np.ndarray) -> np.ndarray:
    """Codes by descending count, ties by ascending code."""
    return np.lexsort((np.arange(len(counts)), -counts))


def balance_counts(counts: np.ndarray, lam: int) -> tuple[np.ndarray, list[int]]:
    """Phase 1 with SA' = SA on a λ-balanced count vector: (groups × m, h per iteration)."""
    T0 = np.asarray(counts, dtype=np.int64).copy()
    m = len(T0)
    if lam < 1 or T0.max(initial=0) * lam > T0.sum():
        raise InfeasibleError(f"balancing needs a {lam}-balanced table")
    groups, hs = [], []
    while True:
        size = int(T0.sum())
        if size == 0:
            break
        order = _order(T0)
        a_lam = int(T0[order[lam - 1]]) if lam <= m else 0
        a_next = int(T0[order[lam]]) if lam < m else 0
        h = min(a_lam, (size - lam * a_next) // lam)
        if h <= 0:
            g = T0.copy()
            h = 0
        else:
            g = np.zeros(m, dtype=np.int64)
            g[order[:lam]] = h
        groups.append(g)
        hs.append(h)
        T0 -= g
    return np.array(groups, dtype=np.int64).reshape(-1, m), hs


def distribute(groups: np.ndarray, extra: np.ndarray) -> np.ndarray:
    """Add the records of ``extra`` (counts of T'') to the groups proportionally to their size:
    ⌊|g_j|·|T''|/|T'|⌋ each, value by value (most frequent first), the residue to the last."""
    total_p = int(groups.sum())
    total_pp = int(extra.sum())
    sizes = groups.sum(axis=1)
    d = sizes * total_pp // total_p
    d[-1] += total_pp - d.sum()
    order = _order(extra)
    cv = np.concatenate([[0], np.cumsum(extra[order])])     # value boundaries in the T'' sequence
    cg = np.concatenate([[0], np.cumsum(d)])                # group boundaries
    lo = np.maximum(cg[:-1, None], cv[None, :-1])
    hi = np.minimum(cg[1:, None], cv[None, 1:])
    add = np.zeros_like(groups)
    add[:, order] = np.maximum(hi - lo, 0)
    return groups + add


def balance(counts: np.ndarray, sa_prime: np.ndarray) -> BalancePlan:
    """Phase 1 for the SA counts of T and the SA' mask (both cases of the seed)."""
    counts = np.asarray(counts, dtype=np.int64)
    sa_prime = np.asarray(sa_prime, dtype=bool) & (counts > 0)
    if not sa_prime.any():
        raise InfeasibleError("SA' is empty: no sensitive value has relative frequency ≤ rho1")
    f_max = int(counts[sa_prime].max())
    N = int(counts.sum())
    lam = N // f_max
    t_prime = np.where(sa_prime, counts, 0)
    t_pp = counts - t_prime
    lam_p = int(t_prime.sum()) // f_max
    before, hs = balance_counts(t_prime, lam_p)
    groups = distribute(before, t_pp) if t_pp.sum() > 0 else before
    return BalancePlan(groups=groups, before=before, hs=tuple(hs), lam=lam, lam_prime=lam_p, f_max=f_max)


def assign_rows(sa_codes: np.ndarray, plan: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Sub-table of every row for a (J × m) count plan whose column sums are the SA counts:
    rows of each SA value, in random order, fill the sub-tables in order — equivalently, each
    value's sub-table labels are shuffled and given to its rows in row order (O(N): a shuffle of
    narrow labels and a counting sort by value, :func:`~ppdp.kernels.transition.counting_order`;
    the sub-table ids in the narrowest integer type)."""
    n = len(sa_codes)
    J, m = plan.shape
    dt = np.uint8 if J <= 1 << 8 else np.int32
    labels = np.repeat(np.tile(np.arange(J, dtype=dt), m), plan.T.ravel())  # value by value, sub-tables in order
    start = 0
    for end in np.cumsum(plan.sum(axis=0)).tolist():  # each value's labels in random order (narrow: cache-friendly)
        if end - start > 1:
            rng.shuffle(labels[start:end])
        start = end
    out = np.empty(n, dtype=dt)
    out[counting_order(sa_codes, m)] = labels  # the rows of each value in row order get its labels
    return out

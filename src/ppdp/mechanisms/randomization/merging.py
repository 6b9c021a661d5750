"""SDR Phase 2, Merging: initial groups → sub-tables (the seeds leave this open; SPEC §2.3).

Objective. In a sub-table with n records, m SA values and amplification γ, the reconstructed
count x̂ = (y − n q)/p of each of its m values is unbiased with variance
Var(y)/p², Var(y) = n_x k(1−k) + (n − n_x) q(1−q), k = p + q = γ/(m−1+γ). Summed over the
sub-table's values (Σ n_x = n):

    E(n, m, γ) = n · (m−1)(2γ + m − 2) / (γ − 1)²

(values outside the sub-table's domain are known to be absent and cost nothing). Sub-tables
are perturbed independently, so E_total = Σ_j E(n_j, m_j, γ_j) is the expected squared error of
the reconstructed SA counts of the whole table, summed over the SA values; the same per-row
factor governs every QI-restricted count. γ_j = ρ2(1−ρ1j)/(ρ1j(1−ρ2)) with ρ1j the largest
relative frequency of an SA' value in the sub-table; a sub-table with ρ1j ≥ ρ2 cannot be
randomized at all (E = ∞).

Strategies (``merge=``):
- ``"objective"`` (default): first merge every infeasible group (ρ1j ≥ ρ2) with the partner
  that gives the smallest merged E; then repeatedly merge the pair with the largest decrease
  of E_total ("most similar" = cheapest to merge) while some merge decreases it.
- ``"none"``: the initial groups are the sub-tables (infeasible groups still merged).
- ``"min-size"``: merge the smallest sub-table with the partner whose SA domain overlaps it
  most (Jaccard), until every sub-table has ≥ ``min_size`` records.
Merging two λ-balanced groups keeps λ-balance (the merged frequency of a value is at most
(n_a + n_b)/λ), so every strategy keeps the balance Phase 1 achieved.
"""

from __future__ import annotations

import numpy as np

from ...kernels.transition import gamma_for

STRATEGIES = ("objective", "none", "min-size")


def subtable_stats(C: np.ndarray, sa_prime: np.ndarray):
    """(n_j, m_j, ρ1j) of count rows C (… × m)."""
    C = np.asarray(C)
    n = C.sum(axis=-1)
    m = (C > 0).sum(axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        rho = np.where(n > 0, (C * sa_prime).max(axis=-1) / np.maximum(n, 1), 0.0)
    return n, m, rho


def error_of(n, m, gamma):
    """E(n, m, γ) = n (m−1)(2γ+m−2)/(γ−1)²; ∞ when γ ≤ 1 (cannot randomize)."""
    n, m, gamma = (np.asarray(v, dtype=float) for v in (n, m, gamma))
    with np.errstate(divide="ignore", invalid="ignore"):
        e = n * (m - 1) * (2 * gamma + m - 2) / (gamma - 1) ** 2
    return np.where(gamma > 1, e, np.inf)


def counts_error(C: np.ndarray, sa_prime: np.ndarray, rho2: float) -> np.ndarray:
    n, m, rho = subtable_stats(C, sa_prime)
    with np.errstate(divide="ignore"):
        g = np.where(rho > 0, gamma_for(np.maximum(rho, 1e-300), rho2), np.inf)
    e = error_of(n, m, g)
    return np.where(np.isinf(g), 0.0, e)  # no SA' value: nothing to protect (not produced by Phase 1)


def _merge_rows(C, a, b):
    C = C.copy()
    C[a] += C[b]
    return np.delete(C, b, axis=0)


def _pair_cost(C, i, sa_prime, rho2):
    """E of C[i] merged with every row (∞ on the diagonal)."""
    merged = C + C[i]
    e = counts_error(merged, sa_prime, rho2)
    e[i] = np.inf
    return e


def _fix_infeasible(C, sa_prime, rho2):
    while len(C) > 1:
        e = counts_error(C, sa_prime, rho2)
        bad = np.flatnonzero(np.isinf(e))
        if len(bad) == 0:
            break
        i = int(bad[0])
        cost = _pair_cost(C, i, sa_prime, rho2)
        _, _, rho = subtable_stats(C + C[i], sa_prime)
        rho[i] = np.inf
        j = int(np.lexsort((rho, cost))[0])  # smallest merged E, else the lowest merged ρ1
        C = _merge_rows(C, min(i, j), max(i, j))
    return C


def merge_objective(C, sa_prime, rho2):
    C = _fix_infeasible(np.asarray(C, dtype=np.int64), sa_prime, rho2)
    e = counts_error(C, sa_prime, rho2)
    J = len(C)
    merged_e = np.full((J, J), np.inf)
    for i in range(J):
        merged_e[i] = _pair_cost(C, i, sa_prime, rho2)
    while len(C) > 1:
        delta = merged_e - e[:, None] - e[None, :]
        k = int(np.argmin(delta))
        a, b = divmod(k, len(C))
        if not delta[a, b] < -1e-9 * max(1.0, float(e.sum())):
            break
        a, b = min(a, b), max(a, b)
        C = _merge_rows(C, a, b)
        merged_e = np.delete(np.delete(merged_e, b, axis=0), b, axis=1)
        e = counts_error(C, sa_prime, rho2)
        row = _pair_cost(C, a, sa_prime, rho2)
        merged_e[a] = row
        merged_e[:, a] = row
    return C


def merge_min_size(C, sa_prime, rho2, min_size):
    C = _fix_infeasible(np.asarray(C, dtype=np.int64), sa_prime, rho2)
    while len(C) > 1:
        n = C.sum(axis=1)
        i = int(np.argmin(n))
        if n[i] >= min_size:
            break
        dom = C > 0
        inter = (dom & dom[i]).sum(axis=1)
        union = (dom | dom[i]).sum(axis=1)
        jac = inter / union
        jac[i] = -1
        j = int(np.argmax(jac))
        C = _merge_rows(C, min(i, j), max(i, j))
    return C


def merge(C, sa_prime, rho2, strategy="objective", min_size=1000) -> np.ndarray:
    """Sub-table count plan (J' × m) from the initial groups C (J × m)."""
    if strategy == "objective":
        out = merge_objective(C, sa_prime, rho2)
    elif strategy == "none":
        out = _fix_infeasible(np.asarray(C, dtype=np.int64), sa_prime, rho2)
    elif strategy == "min-size":
        out = merge_min_size(C, sa_prime, rho2, min_size)
    else:  # validated by the mechanism
        raise ValueError(f"unknown merge strategy {strategy!r}")
    return out

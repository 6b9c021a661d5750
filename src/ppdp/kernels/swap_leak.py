"""What A' (Fu, Wang, Wang & Wong 2014) guarantees without conditioning on its secret id draw.

The release of a table D is the map *person → published SA* (the worst case: every person has
distinct NSA values). A' draws the tuple ids itself, so the release law is a mixture over the
id draw σ: for every value v, a uniformly random bijection from v's holders to the f_v decoy
groups holding v, independent across values; then every person publishes a value drawn
uniformly from its group. The groups' value sets come from the SA counts alone
(:func:`~ppdp.kernels.transition.decoy_group_types`).

A **swap neighbour** D' (Fu et al.'s Definition 2) exchanges the values s ≠ s' of two people t
(holding s) and t̆ (holding s'); the counts do not change. For every pair of values this module
bounds the total-variation distance between the release laws of D and D' — the largest
advantage of any test, on the whole release, that tells D from D' — from both sides:

- **upper** U(s, s') = E[1 − (|A ∩ B| / ℓ')²], A uniform over the f_s groups holding s and B
  over the f_s' groups holding s' (independent). Coupling: give every other person the same
  group in D and D' and let t̆ take t's s-slot and t take t̆'s s'-slot; then only t and t̆
  differ, t publishing from A and t̆ from B in D and the other way round in D', and
  TV(Unif(A) ⊗ Unif(B), Unif(B) ⊗ Unif(A)) = 1 − |A ∩ B|²/ℓ'². The TV of two mixtures under a
  coupling is at most the expected TV of the coupled components.
- **lower** L(s, s') = TV(T[s], T[s']), T[s, v] = g[s, v]/(ℓ' f_s) (g = number of groups holding
  both): the law of the one published value of t (a test that looks at t alone).

The certificate's figures are order statistics of these: for each value s the (ℓ'−1)-th
smallest over the other present values s' — the ℓ'−1 partner values that hide s best, as
Definition 3 asks for ℓ'−1 neighbours — and the largest of those over s. Both are functions of
the SA counts (in domain order: the schedule breaks ties between equal counts by code) and ℓ'
only, never of the draw.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from scipy import sparse

from .transition import decoy_group_types

#: group types up to which :func:`swap_bounds` works on dense matrices
DENSE_TYPES = 2048


def swap_bounds(counts, l_prime: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(present, lower, upper, g)``: the codes of the values with tuples, the k × k matrices
    L(s, s') ≤ TV(release of D, release of its (s, s') swap neighbour) ≤ U(s, s') between them
    (module docstring) and g[s, s'], the number of groups holding both. Cost O(K²·k) for the K
    group types of the schedule (dense up to :data:`DENSE_TYPES` types, sparse beyond)."""
    counts = np.asarray(counts, dtype=np.int64)
    lp = int(l_prime)
    sets, weights = decoy_group_types(counts, lp)
    present = np.flatnonzero(counts > 0)
    fp = counts[present].astype(np.float64)
    k = len(present)
    pos = np.full(len(counts), -1, dtype=np.int64)
    pos[present] = np.arange(k)
    local = pos[sets]  # every value of a group has tuples
    K = len(weights)
    w = np.asarray(weights, dtype=np.float64)
    if K <= DENSE_TYPES:
        M = np.zeros((K, k))
        M[np.arange(K)[:, None], local] = 1.0
        overlap = M @ M.T  # |A ∩ B| between the group types
        Mn = M * w[:, None]  # groups of each type holding s
        S = Mn.T @ (overlap ** 2) @ Mn  # Σ_{A∋s, B∋s'} |A ∩ B|²
        C = Mn.T @ M  # g[s, s']: groups holding both
    else:
        Ms = sparse.csr_matrix((np.ones(K * lp), local.ravel(), np.arange(0, K * lp + 1, lp)), shape=(K, k))
        ov = (Ms @ Ms.T).tocsr()
        ov.data **= 2
        Mns = sparse.csr_matrix(Ms.multiply(w[:, None]))
        S = np.asarray((Mns.T @ ov @ Mns).todense())
        C = np.asarray((Mns.T @ Ms).todense())
    upper = 1.0 - S / (lp * lp * np.outer(fp, fp))
    T = C / (lp * fp)[:, None]
    lower = np.empty((k, k))
    for i in range(k):  # O(k³): k is the number of present values (≤ a few hundred)
        lower[i] = 0.5 * np.abs(T - T[i]).sum(axis=1)
    np.clip(upper, 0.0, 1.0, out=upper)
    np.fill_diagonal(upper, 0.0)
    np.fill_diagonal(lower, 0.0)
    return present, lower, upper, C


def best_partners(bound: np.ndarray, l_prime: int) -> float:
    """max over s of the (ℓ'−1)-th smallest ``bound[s, s']`` over s' ≠ s (1 with < ℓ' values)."""
    k = len(bound)
    if k < l_prime:
        return 1.0
    b = bound.astype(np.float64, copy=True)
    np.fill_diagonal(b, np.inf)
    return float(np.sort(b, axis=1)[:, int(l_prime) - 2].max())


def diverted_leak(counts, l_prime: int) -> dict:
    """The A' leak figures from the SA counts (on the domain, in its order) and ℓ':

    - ``closed_fraction``: the share of tuples whose value v lies in a *closed block* — every
      group holding any value of V has exactly the ℓ' values V (so they have equal counts);
      such a tuple publishes uniformly from V whatever the draw, and swapping it with any
      holder of another value of V leaves the release law unchanged: Definition 3 holds end
      to end for these tuples;
    - ``swap_advantage``: an upper bound, for every person, on the advantage of telling the
      table from its swap with a holder of each of the ℓ'−1 values that hide the person's
      value best: max_s of the (ℓ'−1)-th smallest U(s, ·) (0 exactly when every value lies
      in a closed block);
    - ``swap_advantage_lower``: the same order statistic of L — the advantage is at least this
      for some person against all but ℓ'−2 partner values;
    - ``max_posterior``: the largest posterior P(true v | published u) = g[v, u]/(ℓ' f_u) of
      an adversary whose prior for a person is the table's frequencies (≤ 1/ℓ' always).
    """
    return dict(_leak(tuple(int(x) for x in np.asarray(counts, dtype=np.int64)), int(l_prime)))


@lru_cache(maxsize=64)
def _leak(counts_key: tuple, lp: int) -> dict:
    counts = np.asarray(counts_key, dtype=np.int64)
    if int(counts.sum()) // lp == 0:
        decoy_group_types(counts, lp)  # the schedule's own checks (N a multiple of ℓ', eligibility)
        return {"closed_fraction": 0.0, "swap_advantage": 1.0, "swap_advantage_lower": 1.0, "max_posterior": 1.0}
    present, lower, upper, C = swap_bounds(counts, lp)
    fp = counts[present].astype(np.float64)
    # closed block: v meets exactly ℓ' values (itself included), each in all of v's groups and v in all of theirs
    closed = ((C > 0).sum(axis=1) == lp) & np.all((C == 0) | ((C == fp[:, None]) & (C == fp[None, :])), axis=1)
    post = float((C / (lp * fp)[None, :]).max())
    return {"closed_fraction": float(fp[closed].sum() / fp.sum()), "swap_advantage": best_partners(upper, lp),
            "swap_advantage_lower": best_partners(lower, lp), "max_posterior": post}


__all__ = ["DENSE_TYPES", "best_partners", "diverted_leak", "swap_bounds"]

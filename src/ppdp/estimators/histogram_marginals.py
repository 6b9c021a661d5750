"""Model-free intervals for a cube inferred from noisy marginals (``marginals``, ``dp`` when it
chose them).

The released cells are a graphical model's fit (private-pgm); its error on a box that no
measured marginal contains is the model's bias, which no replay of the mechanism on the model's
own fit can see. The measured marginals (``marginals.parquet``) bound every box count whatever
the data, and each is a sum of independent discrete Laplace draws of known ε:

* **upper**: for every measured marginal S, c(Q) ≤ c_S(Q_S), the count of the box's projection
  onto S (the box lies inside the projection's cylinder);
* **lower** (Bonferroni): for every measured marginal B, c(Q) ≥ c_B(Q_B) − Σ_{k ∉ B constrained}
  c(Q_B ∩ ¬A_k), where A_k is the box's range on dimension k and c(Q_B ∩ ¬A_k) ≤
  c_S(Q_{S∖k} × ¬A_k) for every measured S ∋ k with S ∖ {k} ⊆ B (the smallest is taken); and
  c(Q) ≥ 0.

Each term is a noisy marginal sum, c_S(·) = y_S(·) − e with e a sum of k iid discrete Laplace
draws (k the marginal cells summed); its one-sided bound is y_S ± the exact quantile of e
(:func:`ppdp.kernels.noise_quantiles.halfwidths`). With M noisy terms in a query's bounds, each
one-sided at α/M (Bonferroni), every term holds at once with probability ≥ 1 − α, and then so
does [max lower, min upper] — whatever the data and whatever the model: a confidence interval
at ``level`` that is conservative (wide where the box cuts every marginal; exact up to the noise
where it lies inside one). A query over several boxes adds its boxes' bounds, its M the terms of
all of them.
"""

from __future__ import annotations

import numpy as np

from ..kernels.grid import box_sums, summed_area
from ..kernels.noise import discrete_laplace_fourth_cumulant, discrete_laplace_variance
from ..kernels.noise_quantiles import halfwidths

__all__ = ["marginal_epsilons", "marginal_bounds"]


def marginal_epsilons(ledger, n_sets: int) -> list[float]:
    """ε of each measured marginal, in ledger order (the ledger's ``marginal (…)`` steps)."""
    eps = [float(s.epsilon) for s in ledger if str(s.what).startswith("marginal (")]
    if len(eps) != n_sets:
        raise ValueError(f"the ledger lists {len(eps)} marginal measurements, the release ships {n_sets}")
    return eps


class _Terms:
    """The noisy terms of every box: value, cells summed, ε, and the term's role."""

    def __init__(self, n_boxes: int):
        self.n = n_boxes
        self.value: list[np.ndarray] = []
        self.cells: list[np.ndarray] = []
        self.eps: list[float] = []

    def add(self, value, cells, eps) -> int:
        self.value.append(np.asarray(value, np.float64))
        self.cells.append(np.asarray(cells, np.int64))
        self.eps.append(float(eps))
        return len(self.value) - 1


def marginal_bounds(shape, measured, epsilons, lo, hi, owner, n_queries: int, level: float):
    """(lower, upper, M) per query from the measured marginals (module docstring); ``measured``
    [(dimension set, noisy array)], ``lo``/``hi`` the queries' boxes (inclusive), ``owner`` the
    query of each box. M: the noisy terms each query's bounds read (each one-sided at (1−level)/M)."""
    shape = tuple(int(n) for n in shape)
    lo = np.asarray(lo, np.int64)
    hi = np.asarray(hi, np.int64)
    nb, d = lo.shape if lo.ndim == 2 else (0, len(shape))
    full = np.asarray(shape, np.int64) - 1
    constrained = (lo > 0) | (hi < full[None, :]) if nb else np.zeros((0, d), bool)
    sats = [summed_area(y) for _, y in measured]
    sets = [tuple(s) for s, _ in measured]
    terms = _Terms(nb)

    def proj_sum(i, blo, bhi):
        s = sets[i]
        return box_sums(sats[i], blo[:, list(s)], bhi[:, list(s)])

    def vol(blo, bhi, dims):
        return np.prod([bhi[:, j] - blo[:, j] + 1 for j in dims], axis=0) if dims else np.ones(len(blo), np.int64)

    # upper: every measured marginal's projection
    upper_ids = [terms.add(proj_sum(i, lo, hi), vol(lo, hi, s), epsilons[i]) for i, s in enumerate(sets)]
    # lower: per base B, c_B(Q_B) minus, per constrained k ∉ B, the smallest complement bound
    lower_plans = []  # (base term id, [(k, [complement term ids])])
    for b, base in enumerate(sets):
        base_id = terms.add(proj_sum(b, lo, hi), vol(lo, hi, base), epsilons[b])
        comps = []
        for k in range(d):
            if k in base:
                continue
            ids = []
            for i, s in enumerate(sets):
                if k not in s or not set(s) - {k} <= set(base):
                    continue
                rest = [j for j in s if j != k]
                wide_lo, wide_hi = lo.copy(), hi.copy()
                wide_lo[:, k], wide_hi[:, k] = 0, full[k]
                value = proj_sum(i, wide_lo, wide_hi) - proj_sum(i, lo, hi)
                cells = vol(lo, hi, rest) * (shape[k] - (hi[:, k] - lo[:, k] + 1))
                ids.append(terms.add(value, cells, epsilons[i]))
            comps.append((k, ids))
        lower_plans.append((base_id, comps))
    # the terms that carry noise in each box (an empty complement is exactly 0), then M per query
    T = len(terms.value)
    cells = np.stack(terms.cells) if T else np.zeros((0, nb), np.int64)
    value = np.stack(terms.value) if T else np.zeros((0, nb))
    used = np.zeros((T, nb), bool)
    for t in upper_ids:
        used[t] = True
    for base_id, comps in lower_plans:
        ok = np.ones(nb, bool)  # a base is usable when every constrained k ∉ B has a complement bound
        for k, ids in comps:
            ok &= ~constrained[:, k] | bool(ids)
        used[base_id] |= ok
        for k, ids in comps:
            for t in ids:
                used[t] |= ok & constrained[:, k]
    noisy = used & (cells > 0)
    m_query = np.bincount(owner, weights=noisy.sum(axis=0), minlength=n_queries) if nb else np.zeros(n_queries)
    m_query = np.maximum(m_query, 1)
    alpha = 1.0 - level
    # one-sided halfwidth of every used term at (1 − level)/M of its query
    h = np.zeros((T, nb))
    eps_t = np.asarray(terms.eps, np.float64)
    tt, bb = np.nonzero(noisy)
    if len(tt):
        mq = m_query[owner[bb]]
        kc = cells[tt, bb].astype(np.float64)
        e = eps_t[tt]
        v = np.array([discrete_laplace_variance(x) for x in eps_t])[tt]
        c4 = np.array([discrete_laplace_fourth_cumulant(x) for x in eps_t])[tt]
        for mval in np.unique(mq):
            sel = mq == mval
            two_sided = 1.0 - 2.0 * alpha / float(mval)
            x, _ = halfwidths(kc[sel] * v[sel], kc[sel] * c4[sel], 1.0, kc[sel].astype(np.int64), e[sel], two_sided)
            h[tt[sel], bb[sel]] = x
    up = np.full(nb, np.inf)
    for t in upper_ids:
        up = np.minimum(up, value[t] + h[t])
    low = np.zeros(nb)
    for base_id, comps in lower_plans:
        cand = value[base_id] - h[base_id]
        for k, ids in comps:
            if not ids:
                cand = np.where(constrained[:, k], -np.inf, cand)
                continue
            sub = np.min(np.stack([value[t] + h[t] for t in ids]), axis=0)
            cand = cand - np.where(constrained[:, k], np.maximum(sub, 0.0), 0.0)
        low = np.maximum(low, cand)
    up = np.maximum(up, 0.0)
    low = np.minimum(low, up)
    lower = np.bincount(owner, weights=low, minlength=n_queries).astype(np.float64) if nb else np.zeros(n_queries)
    upper = np.bincount(owner, weights=up, minlength=n_queries).astype(np.float64) if nb else np.zeros(n_queries)
    return lower, upper, m_query.astype(np.int64)

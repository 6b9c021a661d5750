"""The empirical-Bayes counts of uniform-channel releases (``"eb"``): :func:`eb_shrink` per row,
:func:`eb_fit` per workload with the parent of each row chosen by marginal likelihood."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import ParameterError
from .channel import UniformSetup
from .eb_rows import EBCounts, EBEntries, eb_rows

EB_SHRINK_ROWS = 1 << 15
EB_STRENGTHS = ("likelihood", "adjusted", "moments")
#: :class:`EmpiricalBayes`'s ``strength="auto"`` (its default) per mechanism, each chosen on
#: EDU and ADULT point queries with OCC held out (the variant with the lowest mean relative
#: error over the 1–10 and 11–100 bins of that mechanism's cells; kept at ``moments`` where no
#: variant gained more than 1%): SDR 1.141 adjusted against 1.208 moments; uniform and global
#: within 0.5% of moments (docs/sdr.md)
EB_AUTO_STRENGTH = {"sdr": "adjusted"}
EB_COVARIANCES = ("exact", "diagonal")
EB_PARENTS = ("average", "select")



def eb_loglik(Y: np.ndarray, p: np.ndarray, q: np.ndarray, member: np.ndarray, prior: np.ndarray,
              strength: str = "moments", covariance: str = "diagonal") -> np.ndarray:
    """Each row's log marginal likelihood under ``prior`` at its fitted strength, as
    ``eb_shrink(..., return_ll=True)`` returns it, without the prediction and its projection."""
    R = eb_rows(Y, p, q, member, prior, covariance)
    return R.fit(strength, loglik=True)[2]


def eb_shrink(Y: np.ndarray, p: np.ndarray, q: np.ndarray, member: np.ndarray, prior: np.ndarray,
              return_ll: bool = False, strength: str = "moments", covariance: str = "diagonal") -> Any:
    """Empirical-Bayes counts per row of published counts (many rows at once).

    Model (Fay & Herriot 1979; the Dirichlet-multinomial of small-area estimation): a row holds
    the published counts y of the n = Σy records meeting a QI predicate in one group, randomized
    by T = q·J + p·I on the group's domain (m_r values). Their true counts x are a draw of
    n records from a distribution θ that varies around the group's distribution π⁰ (``prior``,
    estimated from all the group's rows): θ ~ Dirichlet(α·π⁰), so E[x] = n·π⁰ and
    Var(x_k) = n·π⁰_k(1−π⁰_k)·ρ with ρ = (n+α)/(1+α) ∈ [1, n] (ρ = n: no pooling).

    - the inversion x̃ = (y − n·q)/p is unbiased for x given the table, with channel variance
      Var(x̃_k | x) = [x_k·a(1−a) + (n−x_k)·b(1−b)]/p² (a = p + q, b = q), whose average over
      the prior is σ²_k = n[π⁰_k·a(1−a) + (1−π⁰_k)·b(1−b)]/p², and whose sum over k is exactly
      n[a(1−a) + (m_r−1)·b(1−b)]/p² whatever x;
    - ρ of the row, by the method of moments: E Σ_k (x̃_k − nπ⁰_k)² = Σ_k σ²_k + n(1 − Σπ⁰²)·ρ,
      solved and cut to [1, n] — each row's own heterogeneity, from its own m_r components
      (the estimate of one predicate does not depend on the other queries of a workload);
    - the best linear predictor x̂_k = nπ⁰_k + w_k(x̃_k − nπ⁰_k), w_k = τ²_k/(τ²_k + σ²_k),
      τ²_k = n·π⁰_k(1−π⁰_k)·ρ̂: heavy shrinkage where the channel noise swamps the signal
      (small p, large n with rare values), none where it does not;
    - projected onto {x ≥ 0, Σx = n} (:func:`norm_sub`).

    ``return_ll``: also return each row's log marginal likelihood of x̃ under the fitted prior in
    the normal approximation, −½ Σ_k [log(σ²_k + τ²_k) + (x̃_k − nπ⁰_k)²/(σ²_k + τ²_k)] (used to
    choose between parents, :func:`eb_fit`).

    ``strength``: ``"moments"`` (above, the default); ``"likelihood"`` — ρ maximising that
    marginal likelihood over [1, n] (Fay & Herriot's maximum likelihood); ``"adjusted"`` — the
    likelihood times ρ − 1, the between-predicate variance component (Li & Lahiri 2010), which
    keeps ρ̂ off full shrinkage. ``covariance``: ``"diagonal"`` (above, the default) or
    ``"exact"`` — the components are not independent: Cov(x̃ | x) = [nq·I + p(1−p)·diag(x) −
    nq²·11ᵀ − pq(x1ᵀ + 1xᵀ)]/p² and Cov(x) = nρ(diag π⁰ − π⁰π⁰ᵀ), so the marginal covariance V
    of d = x̃ − nπ⁰ (Σd = 0) acts on d's subspace as D − nρ·π⁰π⁰ᵀ with
    D = diag(nq/p² + n(1−p)π⁰/p + nρπ⁰); the predictor is nπ⁰ + Cov(x)·V⁺d and the likelihood
    −½(log pdet V + dᵀV⁺d), both in O(m) per row (Sherman–Morrison, then the constraint by a
    Lagrange multiplier).

    Consistent (as n grows with the group fixed, w → 1 unless the row follows π⁰, where the
    shrinkage is right); biased towards n·π⁰ for a predicate whose SA distribution departs
    from its group's."""
    if strength not in EB_STRENGTHS:
        raise ParameterError(f"strength must be one of {EB_STRENGTHS}, got {strength!r}", param="strength")
    if covariance not in EB_COVARIANCES:
        raise ParameterError(f"covariance must be one of {EB_COVARIANCES}, got {covariance!r}", param="covariance")
    member = np.asarray(member, dtype=bool)
    Xs, lls = [], []
    for a in range(0, max(len(member), 1), EB_SHRINK_ROWS):  # rows are independent: bounded temporaries
        b = a + EB_SHRINK_ROWS
        R = eb_rows(Y[a:b], p[a:b], q[a:b], member[a:b], prior[a:b], covariance)
        _, X, ll = R.fit(strength, loglik=return_ll, predict=True)
        Xs.append(X)
        lls.append(ll)
    X = Xs[0] if len(Xs) == 1 else np.concatenate(Xs)
    return (X, lls[0] if len(lls) == 1 else np.concatenate(lls)) if return_ll else X


def eb_fit(S: "UniformSetup", strength: str = "moments", covariance: str = "diagonal",
           parents: str = "select") -> np.ndarray:
    """The empirical-Bayes counts (U, J, m) of every distinct predicate and group of ``S``, each
    row shrunk (:func:`eb_shrink`) towards the parent that explains its published counts best.

    Candidate parents of a row whose predicate constrains k ≥ 2 QI attributes: the group's
    distribution π⁰ over all its rows; the SA distribution π_c of the rows meeting each of the
    predicate's single-attribute conditions c (each itself estimated by :func:`eb_shrink`
    towards π⁰ — thousands of rows, so precise); and their combination under conditional
    independence of the attributes given the SA, ∝ Π_c π_c / (π⁰)^(k−1). A predicate on one
    attribute has π⁰ only. The row takes the candidate with the largest normal marginal
    likelihood of its inversion (``eb_shrink(..., return_ll=True)``): each candidate's
    heterogeneity ρ is fitted first, so a parent that does not fit is not chosen (model choice
    by marginal likelihood, empirical Bayes). With the best parent selected at the diagonal
    covariance the candidates are compared at the method-of-moments ρ (a closed form per
    candidate), and the chosen parent's counts are then fitted at ``strength``: on SDR's OCC,
    EDU and ADULT point queries the errors are those of comparing them at ``strength`` to within
    0.5% in every bin (docs/sdr.md), and the 24-point likelihood grid runs once per row instead
    of once per candidate. Everything depends on the predicate's own
    counts and its sub-predicates', never on the other queries of the workload. The chosen
    parents are kept in ``S`` for the bootstrap."""
    if parents not in EB_PARENTS:
        raise ParameterError(f"parents must be one of {EB_PARENTS}, got {parents!r}", param="parents")
    U, J, m = S.Y.shape
    pi0 = S.parent
    rows, grp = S.rows
    p, q, member = S.p[grp], S.q[grp], S.member[grp]
    # single-attribute conditions of the multi-attribute predicates
    keys: dict[tuple[str, bytes], int] = {}
    singles: list[dict] = []
    cond: list[list[int]] = []
    for mk in S.reps:
        ids: list[int] = []
        if len(mk) >= 2:
            for c in sorted(mk):
                k = (c, np.packbits(mk[c]).tobytes())
                if k not in keys:
                    keys[k] = len(singles)
                    singles.append({c: mk[c]})
                ids.append(keys[k])
        cond.append(ids)
    if parents == "select":
        return _eb_select(S, pi0, singles, cond, strength, covariance)
    # Bayesian model averaging over the candidate parents (equal prior weights)
    cands = [np.broadcast_to(pi0, (U, J, m))]
    if singles:
        pis = _single_parents(S, pi0, singles, strength, covariance)
        idx, has, nk = condition_index(cond)
        kmax = idx.shape[1]
        logs = np.log(np.maximum(pis, 1e-300))  # (S, J, m)
        lg = np.where(has[:, :, None, None], logs[np.maximum(idx, 0)], 0.0).sum(axis=1)
        lg = lg - np.maximum(nk - 1, 0)[:, None, None] * np.log(np.maximum(pi0, 1e-300))[None]
        lg = np.where(S.member[None], lg, -np.inf)
        e = np.where(S.member[None], np.exp(lg - lg.max(axis=2, keepdims=True)), 0.0)
        prod = e / np.maximum(e.sum(axis=2, keepdims=True), 1e-300)
        cands.append(np.where((nk >= 2)[:, None, None], prod, pi0[None]))
        for i in range(kmax):
            cands.append(np.where(has[:, i, None, None], pis[np.maximum(idx[:, i], 0)], pi0[None]))
    prior = np.ascontiguousarray(cands[0]).reshape(U * J, m).copy()
    acc, bll = eb_shrink(rows, p, q, member, prior, return_ll=True, strength=strength, covariance=covariance)
    lse = bll.copy()  # a running log-sum-exp: the weight of candidate c ∝ exp(ll_c)
    for cand in cands[1:]:
        cr = np.ascontiguousarray(cand).reshape(U * J, m)
        X, ll = eb_shrink(rows, p, q, member, cr, return_ll=True, strength=strength, covariance=covariance)
        new = np.logaddexp(lse, ll)
        acc = acc * np.exp(lse - new)[:, None] + X * np.exp(ll - new)[:, None]
        lse = new
        better = ll > bll  # the most likely parent: the one the bootstrap re-fits with
        prior = np.where(better[:, None], cr, prior)
        bll = np.where(better, ll, bll)
    S.eb_prior = prior
    return acc.reshape(U, J, m)


def _eb_select(S: "UniformSetup", pi0: np.ndarray, singles: list[dict], cond: list[list[int]],
               strength: str, covariance: str) -> np.ndarray:
    """:func:`eb_fit` with the best parent selected: each candidate parent other than the
    sub-table's distribution π⁰ differs from π⁰ only for the predicates it applies to (the
    combination: two conditions or more; a condition's distribution: the predicates with that
    many conditions), and a row whose candidate is π⁰ keeps its choice (its likelihood there is
    the first one's, which the best so far is never below), so each candidate is built and its
    likelihood computed for those predicates' rows only; one prediction, at the chosen parents."""
    U, J, m = S.Y.shape
    rows, grp = S.rows
    p, q, member = S.p[grp], S.q[grp], S.member[grp]
    # at the diagonal covariance the candidates are compared at the method-of-moments strength
    # (one closed form per candidate, not a likelihood grid); the chosen parent's counts are
    # then fitted at the requested strength
    sel = "moments" if covariance == "diagonal" else strength
    if covariance == "diagonal":
        base = EBCounts(rows, p, q, member)  # the counts' entries once for every candidate

        def loglik(pr: np.ndarray, r: np.ndarray | None = None) -> np.ndarray:
            return EBEntries(base if r is None else base.subset(r), pr).fit(sel, loglik=True)[2]
    else:
        def loglik(pr: np.ndarray, r: np.ndarray | None = None) -> np.ndarray:
            if r is None:
                return eb_loglik(rows, p, q, member, pr, sel, covariance)
            return eb_loglik(rows[r], p[r], q[r], member[r], pr, sel, covariance)

    prior = np.repeat(pi0[None], U, axis=0).reshape(U * J, m)  # a new, writable array
    bll = loglik(prior)

    def consider(us: np.ndarray, cand: np.ndarray) -> None:
        r = (us[:, None] * J + np.arange(J)[None, :]).ravel()
        cr = np.ascontiguousarray(cand).reshape(len(r), m)
        ll = loglik(cr, r)
        better = ll > bll[r]
        prior[r[better]] = cr[better]
        bll[r[better]] = ll[better]

    if singles:
        pis = _single_parents(S, pi0, singles, strength, covariance)
        idx, has, nk = condition_index(cond)
        kmax = idx.shape[1]
        log_pi0 = np.log(np.maximum(pi0, 1e-300))
        step = max(1, EB_SHRINK_ROWS // max(J, 1))  # predicates per block: rows are independent

        def logs(i: np.ndarray) -> np.ndarray:  # the log-distributions of single conditions i
            return np.log(np.maximum(pis[i], 1e-300))
        # their combination under conditional independence, ∝ Π_c π_c / (π⁰)^(k−1), for k ≥ 2
        u2_all = np.flatnonzero(nk >= 2)
        for s0 in range(0, len(u2_all), step):
            u2 = u2_all[s0:s0 + step]
            lg = logs(idx[u2, 0])  # the conditions' log-distributions summed in order (as a sum over them)
            for i in range(1, kmax):
                lg = lg + np.where(has[u2, i, None, None], logs(np.maximum(idx[u2, i], 0)), 0.0)
            lg = lg - np.maximum(nk[u2] - 1, 0)[:, None, None] * log_pi0[None]
            lg = np.where(S.member[None], lg, -np.inf)
            e = np.where(S.member[None], np.exp(lg - lg.max(axis=2, keepdims=True)), 0.0)
            del lg
            consider(u2, e / np.maximum(e.sum(axis=2, keepdims=True), 1e-300))
            del e
        for i in range(kmax):
            ui_all = np.flatnonzero(has[:, i])
            for s0 in range(0, len(ui_all), step):
                ui = ui_all[s0:s0 + step]
                consider(ui, pis[idx[ui, i]])
    S.eb_prior = prior
    return eb_shrink(rows, p, q, member, prior, strength=strength, covariance=covariance).reshape(U, J, m)


def condition_index(cond: list[list[int]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each predicate's single-attribute conditions as a padded (U, kmax) index (−1: none), its
    mask and the number of conditions per predicate."""
    idx = np.full((len(cond), max(len(c) for c in cond)), -1, dtype=np.int64)
    for u, ids in enumerate(cond):
        idx[u, : len(ids)] = ids
    has = idx >= 0
    return idx, has, has.sum(axis=1)


def _single_parents(S: "UniformSetup", pi0: np.ndarray, singles: list[dict], strength: str,
                    covariance: str) -> np.ndarray:
    """(len(singles), J, m): the SA distribution of the rows meeting each single-attribute
    condition in each sub-table, each estimated by :func:`eb_shrink` towards the sub-table's π⁰,
    a block of conditions at a time (their counts and temporaries stay small)."""
    J, m = pi0.shape
    out = np.empty((len(singles), J, m))
    step = max(1, EB_SHRINK_ROWS // max(J, 1))
    for a in range(0, len(singles), step):
        part = singles[a:a + step]
        Ys = S.predicate_counts(part)
        gs = np.tile(np.arange(J), len(part))
        Xs = eb_shrink(Ys.reshape(-1, m), S.p[gs], S.q[gs], S.member[gs], np.tile(pi0, (len(part), 1)),
                       strength=strength, covariance=covariance).reshape(len(part), J, m)
        np.divide(Xs, np.maximum(Xs.sum(axis=2, keepdims=True), 1e-300), out=out[a:a + len(part)])
    return out



def eb_priors(S: UniformSetup) -> np.ndarray:
    """(U·J, m): the parent distribution :func:`eb_fit` chose for every (predicate, group) row of ``S``."""
    if S.eb_prior is None:
        eb_fit(S)
    assert S.eb_prior is not None
    return S.eb_prior

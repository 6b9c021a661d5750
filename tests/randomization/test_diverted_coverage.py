"""A' full-transition intervals (``variance="rebuilt"``, :mod:`ppdp.estimators.diverted_variance`).

- the closed form's second moments against the mechanism itself: over seeded releases of one
  table, the empirical variance of e_P·w and of e_P·w − ρ e·(w − sel) (the true transition's w)
  against :func:`linear_noise_variance` at the true counts;
- coverage, tested statistically on a table the estimator was not tuned on (ADULT, 6,000 rows,
  120 point queries; the benchmark is EDU): releases are the independent units (the queries of
  one release share its randomness), c_r = coverage within release r, c̄ its mean over R = 80
  releases. Calibration (400 + 300 other seeds, this code): full-iterative c̄ = 0.963–0.965 with
  sd(c_r) = 0.022–0.024, full-closed 0.958–0.961 (sd 0.025–0.027), full-closed on the 22 counts
  > 100 0.943–0.947 (sd 0.045–0.064); so SE(c̄) ≤ 0.0027 / 0.0031 / 0.0071 and each band below
  lies ≥ 3.7 SE from the calibrated value (false alarm < 2e-4 each, normal approximation of a
  mean of 80 independent terms). The previous closed form (``variance="fixed"``, T̂ held fixed)
  gives 0.989 on the counts > 100 here (sd 0.026, 80 releases): the last band rejects it.
"""

from __future__ import annotations

import numpy as np
import pytest

import ppdp
from ppdp.estimators.diverted_variance import GroupTypes, TransitionDraws, linear_noise_variance
from ppdp.kernels.transition import diverted_matrix
from ppdp.queries import split_masks
from ppdp.queries.workloads import point_workload


def _published_by_predicate(rel, wl, sa: str, m: int, n_pred: int) -> np.ndarray:
    """(n_pred, m) published SA counts among the rows of each NSA predicate (the point workload
    pairs predicate k with every SA value: queries k·m … k·m + m − 1)."""
    _, masks = rel.resolve(wl)
    rest, _ = split_masks(masks, sa, m)
    pub = rel.column_codes(sa).astype(np.int64)
    Y = np.zeros((n_pred, m))
    for k in range(n_pred):
        keep = np.ones(len(pub), dtype=bool)
        for col, vm in rest[k * m].items():
            keep &= vm[rel.column_codes(col)]
        Y[k] = np.bincount(pub[keep], minlength=m)
    return Y


@pytest.mark.slow
def test_linear_noise_variance_is_the_mechanisms():
    """300 releases of a 5,000-row EDU sample, 6 predicates × 17 SA values, T from the true
    counts: Var(e_P·w) (the per-row draws and the decoy slots filled without replacement) and
    Var(e_P·w − ρ e·v) (the part the published counts carry removed) against the closed form.
    An empirical variance from 300 draws has relative sd ≈ 0.08 (normal); the queries of one
    predicate share its rows, so the median ratio over the 102 queries is taken as a median of
    6 near-independent groups (sd ≈ 0.04) and asserted within ±0.12 of 1 (measured 1.05 and
    1.03), every predicate's median within ±0.3 (3.7 sd; measured 0.93–1.13)."""
    t = ppdp.datasets.load("edu", n=5000, seed=0)
    sa, lp = t.sa, 4
    m = len(t.domain(sa))
    wl = point_workload(t, 6 * m, seed=0)
    X = ppdp.queries.answer_exact(t, wl).astype(float).reshape(6, m)
    f = t.counts(sa).astype(np.int64)
    T = diverted_matrix(f, lp)
    W = np.linalg.pinv(T)
    types = GroupTypes(f, lp)
    rho = X.sum(axis=1) / f.sum()
    S1, S2 = [], []
    for s in range(300):
        rel = ppdp.publish(t, ppdp.Diverted(lp), seed=7000 + s)
        eP = _published_by_predicate(rel, wl, sa, m, 6) - X @ T  # (6, m)
        e = rel.published_counts(sa) - f
        S1.append(eP @ W)  # e_P·w for every (predicate, value): w = W e_s
        S2.append(eP @ W - rho[:, None] * (e @ (W - np.eye(m)))[None, :])
    sel = np.tile(np.eye(m), (6, 1))
    Xq = np.repeat(X, m, axis=0)
    w = sel @ W.T
    n = Xq.sum(axis=1)
    v2 = linear_noise_variance(Xq, w, sel, n, types, T)
    v1 = linear_noise_variance(Xq, w, sel, np.zeros_like(n), types, T)  # ρ = 0: Var(e_P·w)
    for S, v in ((S1, v1), (S2, v2)):
        ratio = (np.array(S).reshape(300, -1).var(axis=0, ddof=1) / v).reshape(6, m)
        assert abs(np.median(ratio) - 1) < 0.12, np.median(ratio)
        assert (np.abs(np.median(ratio, axis=1) - 1) < 0.3).all(), np.median(ratio, axis=1)
    # the correction is real: on the predicate with the largest share ρ of the rows, most of it
    big = int(np.argmax(rho))
    assert rho[big] > 0.5 and np.median((v2 / v1).reshape(6, m)[big]) < 1 - rho[big] / 2


def test_transition_draws_follow_the_mechanism():
    """The simulated published counts have the mechanism's law given the counts: mean f and
    Var f'_s = f_s(1 − 1/ℓ') (50 draws: the mean variance ratio over the values within ±0.2)."""
    t = ppdp.datasets.load("edu", n=5000, seed=0)
    f = t.counts(t.sa).astype(np.int64)
    T = diverted_matrix(f, 4)
    d = TransitionDraws(f, 4, T)
    assert (d.F.sum(axis=1) == f.sum()).all()
    live = f > 20
    assert abs((d.F.var(axis=0, ddof=1)[live] / (f[live] * 0.75)).mean() - 1) < 0.2
    assert np.abs(d.F.mean(axis=0) - f)[live].max() < 4 * np.sqrt(f[live].max()) / np.sqrt(len(d.F)) * 1.5
    again = TransitionDraws(f, 4, T)
    assert np.array_equal(d.E, again.E)  # seeded from the counts


@pytest.fixture(scope="module")
def adult_runs():
    t = ppdp.datasets.load("adult", n=6000, seed=0)
    wl = point_workload(t, 120, seed=0)
    true = ppdp.queries.answer_exact(t, wl)
    fi, fc = [], []
    for s in range(80):
        rel = ppdp.publish(t, ppdp.Diverted(4), seed=1000 + s)
        e = rel.estimate(wl)  # the default: full-iterative, variance="rebuilt"
        c = rel.estimate(wl, estimator="full-closed")
        assert "rebuilt" in e.method and (e.lower <= e.estimate).all() and (e.estimate <= e.upper).all()
        assert np.isfinite(e.se).all() and np.isfinite(c.se).all()
        fi.append((e.lower <= true) & (true <= e.upper))
        fc.append((c.lower <= true) & (true <= c.upper))
    return true, np.array(fi, dtype=float), np.array(fc, dtype=float)


@pytest.mark.slow
def test_diverted_default_coverage(adult_runs):
    true, fi, fc = adult_runs
    c_fi, c_fc = fi.mean(), fc.mean()
    big = fc[:, true > 100].mean(axis=1).mean()
    assert 0.93 <= c_fi <= 0.975, (c_fi, fi.mean(axis=1).std(ddof=1))
    assert 0.925 <= c_fc <= 0.975, (c_fc, fc.mean(axis=1).std(ddof=1))
    assert 0.91 <= big <= 0.975, big

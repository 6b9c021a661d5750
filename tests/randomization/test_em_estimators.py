"""EM (iterative Bayesian update) and Norm-Sub on uniform perturbation, SDR and global
randomization A: hand-computed steps and fixed points, non-negativity, known totals kept,
agreement with the inversion on large counts, and the estimator contract."""

import numpy as np
import pytest

import ppdp
from ppdp.errors import ParameterError
from ppdp.estimators.randomized import EM, EmpiricalBayes, NormSub, norm_sub, uniform_em
from ppdp.queries import answer_exact
from ppdp.table import Table

# m = 2, γ = 3: retention 3/4, q = 1/4, p = 1/2
P2, Q2 = np.array([0.5]), np.array([0.25])
MEMBER2 = np.ones((1, 2), dtype=bool)


def test_em_one_step_by_hand():
    # y = (25, 15), x⁰ = y: d = q·n + p·x = (22.5, 17.5); x¹_i = x_i (q Σ y/d + p y_i/d_i)
    x, it = uniform_em(np.array([[25.0, 15.0]]), P2, Q2, MEMBER2, tol=1e-12, max_iter=1)
    r = np.array([25 / 22.5, 15 / 17.5])
    assert it.tolist() == [1]
    assert np.allclose(x[0], [25, 15] * (0.25 * r.sum() + 0.5 * r))
    assert np.allclose(x[0], [26.190476, 13.809524])


def test_em_fixed_points_by_hand():
    # interior: the inversion (30, 10) is the MLE and a fixed point; EM converges to it
    x, it = uniform_em(np.array([[25.0, 15.0]]), P2, Q2, MEMBER2, tol=1e-10)
    assert np.allclose(x[0], [30, 10], atol=1e-6) and 1 < it[0] < 10_000
    # (30, 10) is a fixed point: x T = (25, 15) = y, so every ratio y/d is 1 and x¹ = x (q·2 + p) = x
    assert np.allclose(np.array([30.0, 10.0]) @ np.array([[0.75, 0.25], [0.25, 0.75]]), [25, 15])
    # boundary: the inversion (50, −10) is infeasible; the MLE (40, 0) is EM's limit and Norm-Sub's answer
    x, _ = uniform_em(np.array([[35.0, 5.0]]), P2, Q2, MEMBER2, tol=1e-10)
    assert np.allclose(x[0], [40, 0], atol=1e-3)
    assert np.allclose(norm_sub(np.array([[50.0, -10.0]]), MEMBER2, np.array([40.0])), [[40, 0]])


def test_norm_sub_projection():
    member = np.array([[True, True, True, False], [True, True, True, True], [True, True, False, False]])
    X = np.array([[5.0, -1.0, 2.0, 99.0], [3.0, 3.0, 3.0, 3.0], [-2.0, -3.0, 0.0, 0.0]])
    out = norm_sub(X, member, np.array([6.0, 12.0, 0.0]))
    # row 0: δ = −0.5 → (4.5, 0, 1.5); outside the domain stays 0; row 1 unchanged; row 2 total 0
    assert np.allclose(out, [[4.5, 0, 1.5, 0], [3, 3, 3, 3], [0, 0, 0, 0]])


def _table(n=3000, seed=0, m=6):
    rng = np.random.default_rng(seed)
    probs = np.array([0.3, 0.2, 0.15, 0.15, 0.12, 0.08])[:m]
    cols = {"a": rng.integers(0, 4, n), "b": rng.integers(0, 3, n), "s": rng.choice(m, size=n, p=probs / probs.sum())}
    doms = {"a": list("pqrs"), "b": list("xyz"), "s": [f"v{i}" for i in range(m)]}
    return Table(cols, doms, quasi=("a", "b"), sensitive=("s",))


MECHS = [ppdp.UniformPerturbation(0.2, 0.5), ppdp.SDR(0.2, 0.5), ppdp.GlobalRandomization(3)]
POINT = [f"a = '{a}' AND b = '{b}' AND s = 'v{v}'" for a in "pqrs" for b in "xyz" for v in range(6)]


@pytest.mark.parametrize("mech", MECHS, ids=lambda m: m.name)
@pytest.mark.parametrize("est", ["em", "norm-sub"])
def test_non_negative_and_totals_kept(mech, est):
    t = _table()
    for seed in range(3):
        rel = ppdp.publish(t, mech, seed=seed)
        x = rel.answer(POINT, estimator=est)
        assert x.min() >= 0
        # per QI cell the estimates over all SA values add up to the cell's (exactly known) size
        cells = x.reshape(12, 6).sum(axis=1)
        sizes = answer_exact(t, [f"a = '{a}' AND b = '{b}'" for a in "pqrs" for b in "xyz"])
        assert np.allclose(cells, sizes)
        wl = ["a = 'p'", "s IN ('v0','v1','v2','v3','v4','v5')", "b = 'y' AND s IN ('v1', 'v2')"]
        got = rel.answer(wl, estimator=est)
        assert np.allclose(got[:2], answer_exact(t, wl[:2]))
        # a value set is the sum of its values
        assert np.isclose(got[2], rel.answer(["b = 'y' AND s = 'v1'", "b = 'y' AND s = 'v2'"], estimator=est).sum())


def test_inversion_goes_negative_control():
    """Control: on these releases the inversion does give negative counts (so the test above has power)."""
    t = _table()
    assert min(ppdp.publish(t, m, seed=0).answer(POINT, estimator="inversion").min() for m in MECHS) < 0


@pytest.mark.parametrize("mech", MECHS, ids=lambda m: m.name)
def test_agrees_with_inversion_on_large_counts(mech):
    t = _table(n=200_000, seed=1)
    rel = ppdp.publish(t, mech, seed=0)
    wl = [f"a = '{a}' AND s = 'v{v}'" for a in "pqrs" for v in range(6)]
    inv = rel.answer(wl, estimator="inversion")
    assert inv.min() > 500  # every inverted count is far inside the simplex
    assert np.allclose(rel.answer(wl, estimator="norm-sub"), inv)  # nothing to project
    em = rel.answer(wl, estimator=EM(tol=1e-9))
    assert np.allclose(em, inv, rtol=1e-5)  # the interior MLE is the inversion


def test_em_iterations_and_tolerance():
    rel = ppdp.publish(_table(), ppdp.SDR(0.2, 0.5), seed=0)
    est, its = EM().answer_with_iterations(rel, POINT)
    assert its.shape == (len(POINT),) and its.min() >= 1
    est1, its1 = EM(max_iter=1).answer_with_iterations(rel, POINT)
    assert its1.max() == 1 and not np.allclose(est1, est)
    _, its_tight = EM(tol=1e-6).answer_with_iterations(rel, POINT)
    assert np.median(its_tight) > np.median(its)
    assert NormSub().answer_with_iterations(rel, POINT)[1].max() == 0


@pytest.mark.parametrize("mech", MECHS, ids=lambda m: m.name)
def test_contract(mech):
    rel = ppdp.publish(_table(n=500), mech, seed=0)
    for est in ("em", "norm-sub", EM(tol=1e-3), NormSub()):
        assert rel.answer([], estimator=est).shape == (0,)
        one = rel.answer(["a = 'p' AND s = 'v0'"], estimator=est)
        assert one.shape == (1,) and one.dtype == np.float64
        assert np.isclose(rel.count("a = 'p' AND s = 'v0'", estimator=est), one[0])
    with pytest.raises(ParameterError):
        EM(tol=0)
    with pytest.raises(ParameterError):
        EM(max_iter=0)


def test_not_for_diverted():
    rel = ppdp.publish(_table(n=600), ppdp.Diverted(3), seed=0)
    for est in ("em", "norm-sub"):
        with pytest.raises(ParameterError):
            rel.answer(["s = 'v0'"], estimator=est)


# ----------------------------------------------------------------------------- empirical Bayes
def test_eb_shrink_by_hand():
    from ppdp.estimators.randomized import eb_shrink
    # m = 2, p = 1/2, q = 1/4 (a = 3/4, b = 1/4), y = (25, 15), n = 40, π⁰ = (0.5, 0.5):
    # x̃ = (30, 10), Σσ² = 40·(3/16 + 3/16)/(1/4) = 60, dev = 2·10² = 200, het = 40·(1 − 1/2) = 20
    # → ρ = (200 − 60)/20 = 7; τ² = 40·¼·7 = 70, σ² = 30 each → w = 0.7, x̂ = 20 ± 0.7·10 = (27, 13)
    x = eb_shrink(np.array([[25.0, 15.0]]), P2, Q2, MEMBER2, np.array([[0.5, 0.5]]))
    assert np.allclose(x, [[27.0, 13.0]])
    # a row that looks like its parent (dev below the channel noise) is shrunk fully: ρ = 1,
    # τ² = 10, w = 1/4 — and the estimate keeps the known total
    x = eb_shrink(np.array([[21.0, 19.0]]), P2, Q2, MEMBER2, np.array([[0.5, 0.5]]))
    assert np.allclose(x, [[20.5, 19.5]]) and np.isclose(x.sum(), 40)


@pytest.mark.parametrize("mech", MECHS, ids=lambda m: m.name)
def test_eb_contract(mech):
    """Non-negative, the known totals per predicate kept (the empirical-Bayes counts alone,
    ``guard="off"``; the guard moves single counts towards Norm-Sub's or EM's, so the default's
    totals are near, not at, n_P), one predicate's answer independent of the other queries of
    the workload, and the whole table's counts left at their maximum-likelihood values (the
    parent of the whole table is itself)."""
    t = _table(6000, seed=3)
    rel = ppdp.publish(t, mech, seed=2)
    est = rel.answer(POINT, estimator="eb")
    assert est.min() >= 0
    n_pred = answer_exact(t, [q.rsplit(" AND s", 1)[0] for q in POINT[::6]])
    pure = rel.answer(POINT, estimator=EmpiricalBayes(guard="off"))
    assert pure.min() >= 0 and np.allclose(pure.reshape(-1, 6).sum(axis=1), n_pred)
    assert np.all(np.abs(est.reshape(-1, 6).sum(axis=1) - n_pred) <= 0.2 * n_pred)
    assert np.allclose(rel.answer(POINT[6:12], estimator="eb"), est[6:12])
    big = [f"s = 'v{v}'" for v in range(6)]  # SA-only: every row of the table
    assert np.allclose(rel.answer(big, estimator=EmpiricalBayes(guard="off")), rel.answer(big, estimator="mle"), atol=0.5)
    # guarded: each count between the estimators the guard reads (MLE = the parent here, Norm-Sub, EM)
    alts = np.stack([rel.answer(big, estimator=e) for e in ("mle", "norm-sub", "em")])
    guarded = rel.answer(big, estimator="eb")
    slack = 0.5 + 2e-3 * alts.max(axis=0)  # SDR: per sub-table, so between the sums only up to a little
    assert (alts.min(axis=0) - slack <= guarded).all() and (guarded <= alts.max(axis=0) + slack).all()
    E = rel.estimate(POINT, estimator="eb")
    assert np.array_equal(E.estimate, est) and (E.lower <= est).all() and (est <= E.upper).all()
    assert "closed form" in E.method


def test_eb_defaults():
    t = _table(3000, seed=1)
    for mech, name in [(ppdp.UniformPerturbation(0.2, 0.5), "eb"), (ppdp.GlobalRandomization(3), "eb"),
                       (ppdp.SDR(0.2, 0.5), "eb")]:
        assert mech.default_estimator == name
        rel = ppdp.publish(t, mech, seed=0)
        assert np.array_equal(rel.answer(POINT[:12]), rel.answer(POINT[:12], estimator=name))


# ----------------------------------------------------------------------------- empirical Bayes options
def _one_row(seed=1, m=5, n=200, p=0.3):
    rng = np.random.default_rng(seed)
    q = (1 - p) / m
    x = rng.multinomial(n, [0.4, 0.3, 0.15, 0.1, 0.05])
    T = q * np.ones((m, m)) + p * np.eye(m)
    y = sum(rng.multinomial(xi, T[i]) for i, xi in enumerate(x)).astype(float)
    return y[None], np.array([p]), np.array([q]), np.ones((1, m), dtype=bool), np.array([[0.35, 0.3, 0.2, 0.1, 0.05]])


def test_eb_exact_covariance_against_the_dense_algebra():
    """covariance='exact': the Sherman–Morrison and Lagrange solve equals the pseudo-inverse of the
    dense m × m marginal covariance V = Σ + T of the inversion, and the log pseudo-determinant
    is the sum of the logs of V's non-zero eigenvalues (V·1 = 0: the total is known)."""
    from ppdp.estimators.randomized import EBRows

    Y, p, q, member, prior = _one_row()
    n, P0, rho = Y.sum(), prior[0], 7.0
    m = Y.shape[1]
    R = EBRows(Y, p, q, member, prior)
    z, logdet = R._exact(np.array([rho]))
    pp, qq = p[0], q[0]
    one = np.ones(m)
    Sig = (n * qq * np.eye(m) + pp * (1 - pp) * n * np.diag(P0) - n * qq**2 * np.outer(one, one)
           - pp * qq * n * (np.outer(P0, one) + np.outer(one, P0))) / pp**2
    V = Sig + n * rho * (np.diag(P0) - np.outer(P0, P0))
    assert np.abs(V @ one).max() < 1e-9
    assert np.allclose(z[0], np.linalg.pinv(V) @ R.d[0])
    ev = np.linalg.eigvalsh(V)
    assert np.isclose(logdet[0], np.log(ev[ev > 1e-9]).sum())
    assert np.allclose(np.diag(Sig), R.sig2[0])  # the diagonal model's variances are V's diagonal


def test_eb_likelihood_strength_maximises_the_likelihood():
    """strength='likelihood' / 'adjusted': the grid-and-parabola maximiser is within 1e-3 of the
    maximum over a 2,001-point grid of the (adjusted) normal marginal likelihood."""
    from ppdp.estimators.eb_rows import eb_rows

    rng = np.random.default_rng(0)
    for cov in ("diagonal", "exact"):
        for s in range(5):
            Y, p, q, member, prior = _one_row(seed=s, n=int(rng.integers(50, 2000)))
            R = eb_rows(Y, p, q, member, prior, cov)
            grid = np.exp(np.linspace(0, np.log(Y.sum()), 2001))
            for adjusted in (False, True):
                def obj(r):
                    return R.loglik(r)[0] + (np.log(max(r[0] - 1, 1e-300)) if adjusted else 0.0)

                rho = R.likelihood_rho(adjusted=adjusted)
                best = max(obj(np.array([g])) for g in grid)
                assert 1 <= rho[0] <= Y.sum() and obj(rho) >= best - 1e-3
                # the adjustment keeps the between-predicate variance ρ − 1 off 0
                assert not adjusted or rho[0] > 1


@pytest.mark.parametrize("opts", [dict(strength="likelihood", covariance="exact", parents="average"),
                                  dict(strength="adjusted", covariance="diagonal", parents="select"),
                                  dict(strength="moments", covariance="diagonal", parents="select"),
                                  dict(strength="likelihood", covariance="diagonal", parents="average")],
                         ids=lambda o: "-".join(o.values()))
def test_eb_options_contract(opts):
    """Every option set: non-negative, the known totals kept, a predicate's answer independent of the
    rest of the workload, interval holding the estimate."""
    from ppdp.estimators.randomized import EmpiricalBayes

    t = _table(6000, seed=3)
    rel = ppdp.publish(t, ppdp.UniformPerturbation(0.2, 0.5), seed=2)
    e = EmpiricalBayes(**opts, guard="off")  # the empirical-Bayes counts of these options alone
    est = rel.answer(POINT, estimator=e)
    assert est.min() >= 0
    n_pred = answer_exact(t, [q.rsplit(" AND s", 1)[0] for q in POINT[::6]])
    assert np.allclose(est.reshape(-1, 6).sum(axis=1), n_pred)
    assert np.allclose(rel.answer(POINT[6:12], estimator=e), est[6:12])
    E = rel.estimate(POINT, estimator=e)
    assert (E.lower <= est + 1e-9).all() and (est <= E.upper + 1e-9).all()


def test_eb_bad_options():
    from ppdp.estimators.randomized import EmpiricalBayes, eb_shrink

    with pytest.raises(ParameterError):
        EmpiricalBayes(strength="median")
    Y, p, q, member, prior = _one_row()
    with pytest.raises(ParameterError):
        eb_shrink(Y, p, q, member, prior, covariance="full")


@pytest.mark.parametrize("mech, strength", [(ppdp.SDR(0.1, 0.3), "adjusted"),
                                            (ppdp.UniformPerturbation(0.2, 0.5), "moments"),
                                            (ppdp.GlobalRandomization(4), "moments")],
                         ids=["sdr", "uniform", "global"])
def test_eb_auto_strength_is_the_mechanisms_choice(mech, strength):
    """The default estimator (eb, strength='auto') is the strength chosen for the release's
    mechanism, and differs from the other choice on the same release (the option is live)."""
    from ppdp.estimators.randomized import EB_AUTO_STRENGTH, EmpiricalBayes

    assert EB_AUTO_STRENGTH.get(mech.name, "moments") == strength
    rel = ppdp.publish(_table(6000, seed=3), mech, seed=2)
    default = rel.estimate(POINT)
    chosen = rel.estimate(POINT, estimator=EmpiricalBayes(strength=strength))
    other = rel.estimate(POINT, estimator=EmpiricalBayes(strength="moments" if strength == "adjusted" else "adjusted"))
    assert np.array_equal(default.estimate, chosen.estimate) and np.array_equal(default.se, chosen.se)
    assert not np.allclose(default.estimate, other.estimate)


def test_eb_diagonal_likelihood_grid_equals_the_row_form():
    """The diagonal likelihood on the whole ρ grid, each block of rows over its domain entries only
    (and :meth:`EBEntries.loglik`, which is one of its points), equals the masked whole-row form
    point by point — rows of sub-tables with a few of the m values, rows without records, and
    degenerate priors (π⁰ = 0 or 1) included."""
    from ppdp.estimators.randomized import EB_GRID, EBCounts, EBEntries

    rng = np.random.default_rng(5)
    R_, m = 300, 7
    member = rng.random((R_, m)) < 0.5
    member[np.arange(R_), rng.integers(0, m, R_)] = True
    Y = np.where(member, rng.poisson(rng.choice([0.0, 0.5, 20.0], size=(R_, 1)), size=(R_, m)), 0).astype(float)
    prior = rng.dirichlet(np.ones(m), size=R_)
    prior[:5] = np.eye(m)[rng.integers(0, m, 5)]
    p = rng.uniform(0.2, 0.8, R_)
    q = (1 - p) / member.sum(axis=1)
    ent = EBEntries(EBCounts(Y, p, q, member), prior)
    rhos = np.exp(np.log(np.maximum(ent.n, 1.0))[:, None] * np.linspace(0, 1, EB_GRID)[None, :])
    rt = np.ascontiguousarray(rhos.T)
    grid = np.concatenate([ent._loglik_grid(blk, rt[:, r0:r1]) for r0, r1, blk in ent._blocks()], axis=1).T
    n, P0 = (Y * member).sum(axis=1), prior * member
    a, b = (p + q)[:, None], q[:, None]
    d = np.where(member, (Y - (n * q)[:, None]) / p[:, None] - n[:, None] * P0, 0.0)
    sig2 = np.where(member, n[:, None] * (P0 * a * (1 - a) + (1 - P0) * b * (1 - b)) / p[:, None] ** 2, 0.0)
    t = n[:, None] * P0 * (1 - P0)

    def dense(rho):  # the masked whole-row form
        V = sig2 + t * rho[:, None]
        live = member & (V > 0)
        Vs = np.where(live, V, 1.0)
        return -0.5 * np.where(live, np.log(Vs) + d**2 / Vs, 0.0).sum(axis=1)

    ref = np.stack([dense(rhos[:, j]) for j in range(EB_GRID)], axis=1)
    assert np.allclose(ent.loglik(rhos[:, 3]), ref[:, 3], rtol=1e-12, atol=1e-9)
    assert (ent.n == 0).any()
    assert np.allclose(grid, ref, rtol=1e-12, atol=1e-9)

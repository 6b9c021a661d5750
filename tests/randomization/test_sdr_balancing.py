"""SDR Phase 1 (Balancing): Examples 6 and 7 of Chaytor & Wang group by group, Lemmas 1–5 as
property tests, and Phase 2 merging invariants."""

import numpy as np
from hypothesis import given, strategies as st

from ppdp.mechanisms.randomization.balancing import assign_rows, balance, balance_counts
from ppdp.mechanisms.randomization.merging import counts_error, error_of, merge, subtable_stats
from ppdp.mechanisms.randomization.uniform import sa_prime_mask

FIG9 = np.array([12, 8, 6, 5, 4, 3, 1, 1, 1, 1])  # x1..x10, |T| = 42


def test_example_6_groups():
    plan = balance(FIG9, sa_prime_mask(FIG9, 1 / 3))
    assert plan.lam == 3 and plan.f_max == 12
    assert plan.groups.tolist() == [
        [6, 6, 6, 0, 0, 0, 0, 0, 0, 0],
        [4, 0, 0, 4, 4, 0, 0, 0, 0, 0],
        [2, 2, 0, 0, 0, 2, 0, 0, 0, 0],
        [0, 0, 0, 1, 0, 1, 1, 0, 0, 0],
        [0, 0, 0, 0, 0, 0, 0, 1, 1, 1],
    ]
    assert plan.hs == (6, 4, 2, 1, 1)


def test_example_7_groups():
    sap = sa_prime_mask(FIG9, 1 / 4)
    assert sap.tolist() == [False] + [True] * 9  # 12/42 > 1/4
    plan = balance(FIG9, sap)
    assert plan.lam_prime == 3 and plan.f_max == 8
    assert plan.before.tolist() == [
        [0, 5, 5, 5, 0, 0, 0, 0, 0, 0],
        [0, 3, 0, 0, 3, 3, 0, 0, 0, 0],
        [0, 0, 1, 0, 1, 0, 1, 0, 0, 0],
        [0, 0, 0, 0, 0, 0, 0, 1, 1, 1],
    ]
    assert plan.groups.tolist() == [
        [6, 5, 5, 5, 0, 0, 0, 0, 0, 0],
        [3, 3, 0, 0, 3, 3, 0, 0, 0, 0],
        [1, 0, 1, 0, 1, 0, 1, 0, 0, 0],
        [2, 0, 0, 0, 0, 0, 0, 1, 1, 1],
    ]


counts_st = st.lists(st.integers(0, 40), min_size=2, max_size=12).filter(lambda c: np.count_nonzero(c) >= 2)


def _trace(counts, lam):
    """Replay the balancing loop, returning (T0 before, h, group) per iteration."""
    groups, hs = balance_counts(counts, lam)
    T0 = np.array(counts)
    out = []
    for g, h in zip(groups, hs):
        out.append((T0.copy(), h, g))
        T0 = T0 - g
    assert not T0.any()
    return out


@given(counts_st)
def test_lemmas_1_to_4(counts):
    c = np.array(counts)
    lam = int(c.sum() // c.max())
    for T0, h, g in _trace(c, lam):
        size = T0.sum()
        a = np.sort(T0)[::-1]
        a_lam = a[lam - 1]
        if h > 0:
            # Lemma 1: h ≤ α_λ (there are h records of each of the λ most frequent values)
            assert h <= a_lam and (T0 - g >= 0).all()
            rest = T0 - g
            # Lemma 2: T0 − g stays λ-balanced
            assert rest.max() * lam <= rest.sum()
            # Lemma 3: h is maximal — h + 1 would break Lemma 1 or Lemma 2
            if h + 1 <= a_lam:
                order = np.lexsort((np.arange(len(T0)), -T0))
                bigger = T0.copy()
                bigger[order[:lam]] -= h + 1
                assert bigger.max() * lam > bigger.sum()
        else:
            assert (g == T0).all()  # h = 0: the group is all of T0
        # Lemma 4: every group is λ-balanced
        assert g.max() * lam <= g.sum() and size > 0


@given(counts_st, st.floats(0.05, 0.6))
def test_lemma_5_bound_when_sa_prime_differs(counts, rho1):
    c = np.array(counts)
    sap = sa_prime_mask(c, rho1)
    if not sap.any():
        return
    plan = balance(c, sap)
    # T'' distributed proportionally: every record accounted for, SA' part unchanged
    assert (plan.groups.sum(axis=0) == c).all()
    assert ((plan.groups - plan.before)[:, sap] == 0).all()
    lp, lam = plan.lam_prime, plan.lam
    t_p = c[sap].sum()
    t_pp = c.sum() - t_p
    if lp < 2 or t_pp == 0:
        return
    beta = 1.0 / (1.0 - 1.0 / lp)
    for gb, ga in zip(plan.before, plan.groups):
        f = gb[sap]
        f = f[f > 0]
        whole = (gb.sum() * t_pp) % t_p == 0
        bound = beta / lam if whole else beta / (lam - beta)
        if not whole and lam <= beta:
            continue  # the bound is vacuous
        assert f.max() / ga.sum() <= bound + 1e-12


@given(counts_st, st.floats(0.05, 0.6), st.sampled_from(["objective", "none", "min-size"]))
def test_merging_keeps_records_feasibility_and_balance(counts, rho1, strategy):
    c = np.array(counts)
    rho2 = min(0.95, rho1 + 0.3)
    sap = sa_prime_mask(c, rho1)
    if not sap.any():
        return
    plan = balance(c, sap)
    C = merge(plan.groups, sap, rho2, strategy, min_size=10)
    assert (C.sum(axis=0) == c).all()
    n, m, rho = subtable_stats(C, sap)
    assert (rho < rho2).all() and (rho > 0).all() and (m >= 2).all()
    if strategy == "objective":
        assert counts_error(C, sap, rho2).sum() <= counts_error(merge(plan.groups, sap, rho2, "none"), sap, rho2).sum() + 1e-6
    if (plan.groups == plan.before).all():  # SA' = SA: merged groups stay λ-balanced
        assert (C.max(axis=1) * plan.lam_prime <= C.sum(axis=1)).all()


def test_error_formula_against_direct_variance():
    n_x = np.array([7, 5, 3, 2])
    gamma = 3.5
    m = len(n_x)
    s = m - 1 + gamma
    p, q = (gamma - 1) / s, 1 / s
    k = p + q
    var = (n_x * k * (1 - k) + (n_x.sum() - n_x) * q * (1 - q)) / p**2
    assert np.isclose(var.sum(), error_of(n_x.sum(), m, gamma))


def test_assign_rows_follows_plan():
    rng = np.random.default_rng(0)
    plan = balance(FIG9, sa_prime_mask(FIG9, 1 / 3)).groups
    sa = np.repeat(np.arange(10), FIG9)
    rng.shuffle(sa)
    sub = assign_rows(sa, plan, rng)
    got = np.zeros_like(plan)
    np.add.at(got, (sub, sa), 1)
    assert (got == plan).all()

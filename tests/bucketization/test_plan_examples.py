"""Worked examples of Wang, Wang, Fu, Wong (2011) and unit tests of the F'-privacy planners."""

import numpy as np
import pytest

from ppdp.errors import InfeasibleError, PpdpError
from ppdp.mechanisms.bucketization.anatomy_plan import (group_creation, anatomy_eligible, anatomy_mse_from_sizes,
                                                        anatomy_setting, anatomy_sizes)
from ppdp.mechanisms.bucketization.assignment import record_partition, round_robin_assign, two_size_assign
from ppdp.mechanisms.bucketization.multi_size import multi_size_bucketing
from ppdp.mechanisms.bucketization.optimal import optimal_bucketing
from ppdp.mechanisms.bucketization.plan import BucketSetting, check_setting, min_bucket_size, privacy_cap
from ppdp.claims.fprivacy import fprime_thresholds
from ppdp.mechanisms.bucketization.two_size import gamma_list, gamma_params, two_size_bucketing, two_size_search
from ppdp.mechanisms.bucketization.validity import one_size_valid, two_size_check, two_size_valid

# Example 3 (arXiv: Example 4.20): 50 records, f'_i = 2 f_i + 0.05
EX3_O = np.array([1] * 8 + [6] * 4 + [9] * 2)
EX3_F = np.array([0.09] * 8 + [0.29] * 4 + [0.41] * 2)


# ------------------------------------------------------------------ Example 4 (Γ list)
def test_example4_gamma_list():
    assert gamma_params(28, 2, 4) == (14, 0, 2, 1, 7)  # b1⁰, b2⁰, Δ1, Δ2, k
    assert gamma_list(28, 2, 4) == [(14, 0), (12, 1), (10, 2), (8, 3), (6, 4), (4, 5), (2, 6), (0, 7)]


def test_gamma_list_is_all_feasible_pairs():
    for n in range(1, 80):
        for s1 in range(1, 9):
            for s2 in range(s1 + 1, 11):
                want = [(b1, (n - b1 * s1) // s2) for b1 in range(n // s1, -1, -1) if (n - b1 * s1) % s2 == 0]
                assert gamma_list(n, s1, s2) == want, (n, s1, s2)


# ------------------------------------------------------------------ Example 3 / Figure 1
def test_example3_a_values_and_moves():
    chk = two_size_check(EX3_O, EX3_F, 4, 9, 14, 1)
    assert chk.pc and chk.fc1 and chk.fc2 and chk.cc
    assert chk.u1.tolist() == [0] * 8 + [9] * 4 + [9] * 2
    assert chk.a1.tolist() == [0] * 8 + [6] * 4 + [9] * 2
    assert chk.u2.tolist() == [1] * 8 + [4] * 4 + [5] * 2
    assert chk.a2.tolist() == [1] * 8 + [4] * 4 + [5] * 2
    part = record_partition(EX3_O, EX3_F, 4, 9, 14, 1)
    assert int(part.a1.sum()) == 42                       # |T1| before moving; s(B1) = 36
    assert part.moved.tolist() == [0] * 8 + [1] * 6       # one record of each of x9 … x14
    assert part.o1.tolist() == [0] * 8 + [5] * 4 + [8] * 2
    assert part.o2.tolist() == [1] * 14


def test_example3_figure1_assignment():
    counts = two_size_assign(EX3_O, EX3_F, 4, 9, 14, 1)
    # Figure 1: nine buckets of size 4 (values are 1-based x_i), then one bucket of size 14
    fig_b1 = [[9, 10, 12, 13], [9, 11, 12, 14], [9, 11, 13, 14], [9, 11, 13, 14], [9, 11, 13, 14],
              [10, 11, 13, 14], [10, 12, 13, 14], [10, 12, 13, 14], [10, 12, 13, 14]]
    got = [sorted((np.flatnonzero(row) + 1).tolist()) for row in counts]
    assert got[:9] == fig_b1
    assert got[9] == list(range(1, 15))
    assert counts.max() == 1
    assert check_setting(counts, EX3_O, EX3_F) == []


def test_record_partition_rejects_invalid_setting():
    with pytest.raises(InfeasibleError, match="not a valid bucket setting"):
        record_partition(EX3_O, EX3_F, 4, 10, 14, 1)       # CC fails (54 ≠ 50)
    with pytest.raises(InfeasibleError, match="PC"):
        record_partition(EX3_O, EX3_F, 5, 10, 6, 0)        # x1…x8 cannot go into size-5 buckets


# ------------------------------------------------------------------ thresholds
def test_thresholds_default_and_clipping():
    o = np.array([10, 30, 60])
    fp = fprime_thresholds(o, ["a", "b", "c"], theta=2, floor=0.05)
    assert fp == pytest.approx([0.25, 0.65, 1.0])


def test_thresholds_overrides_and_sensitive():
    o = np.array([10, 30, 60])
    fp = fprime_thresholds(o, ["a", "b", "c"], theta=2, floor=0.05, overrides={"b": 0.5}, sensitive=["a", "b"])
    assert fp.tolist() == [0.25, 0.5, 1.0]
    fp = fprime_thresholds(o, ["a", "b", "c"], theta=1, floor=0.0, sensitive=["a"])
    assert fp.tolist() == [0.1, 1.0, 1.0]


def test_thresholds_lemma1_infeasible_names_values():
    o = np.array([10, 30, 60])
    with pytest.raises(InfeasibleError, match=r"'b'.*Lemma 1|Lemma 1.*'b'"):
        fprime_thresholds(o, ["a", "b", "c"], overrides={"b": 0.2})
    with pytest.raises(InfeasibleError) as e:
        fprime_thresholds(o, ["a", "b", "c"], theta=0.5, floor=0.0)
    assert "'b'" in str(e.value) and "'c'" in str(e.value) and "'a'" in str(e.value)
    # exactly f' = f is feasible
    assert fprime_thresholds(o, ["a", "b", "c"], overrides={"b": 0.3})[1] == 0.3


@pytest.mark.parametrize("overrides", [{"zz": 0.5}, {"a": 0.0}, {"a": 1.5}, {"a": float("nan")}, {"a": True}])
def test_thresholds_bad_overrides(overrides):
    with pytest.raises(InfeasibleError):
        fprime_thresholds(np.array([10, 30, 60]), ["a", "b", "c"], overrides=overrides)


def test_thresholds_bad_parameters():
    o = np.array([10, 30, 60])
    for kw in ({"theta": 0}, {"theta": -1}, {"floor": -0.1}, {"floor": 2}, {"sensitive": ["nope"]}):
        with pytest.raises(PpdpError):
            fprime_thresholds(o, ["a", "b", "c"], **kw)
    with pytest.raises(PpdpError):
        fprime_thresholds(np.array([0, 0]), ["a", "b"])


# ------------------------------------------------------------------ caps, M, validity
def test_privacy_cap_agrees_with_division():
    f = np.array([0.29, 0.09, 0.41, 1.0, 0.1, 0.3, 1 / 3, 0.07])
    for S in range(1, 201):
        cap = privacy_cap(f, S)
        assert (cap / S <= f).all() and ((cap + 1) / S > f).all()
    assert privacy_cap(0.29, 100) == 29          # 0.29 * 100 == 28.999999999999996 in floating point


def test_min_bucket_size():
    assert min_bucket_size(EX3_O, EX3_F) == 3          # ⌈1/0.41⌉
    assert min_bucket_size(np.array([0, 5]), np.array([1.0, 0.5])) == 2   # absent values do not count
    assert min_bucket_size(np.array([5, 5]), np.array([0.5, 0.5])) == 2


def test_one_size_validity_lemma2():
    o = np.array([4, 4, 4])
    f = np.array([1 / 3, 1 / 3, 1 / 3])
    assert one_size_valid(o, f, 3)
    assert not one_size_valid(o, f, 2)      # cap 0
    assert not one_size_valid(o, f, 5)      # 5 does not divide 12
    assert one_size_valid(o, f, 6)          # cap 2 · 2 buckets ≥ 4
    assert two_size_valid(o, f, 3, 4, 6, 0) and two_size_valid(o, f, 3, 2, 6, 1)


def test_round_robin_assign():
    counts = round_robin_assign(np.array([5, 5, 5, 5, 8, 8]), 9)
    assert counts.sum(axis=1).tolist() == [4] * 9
    assert counts.sum(axis=0).tolist() == [5, 5, 5, 5, 8, 8]
    assert counts.max() == 1


# ------------------------------------------------------------------ planners on small inputs
def test_two_size_on_example3_is_valid_and_optimal_among_two_sizes():
    s = two_size_bucketing(EX3_O, EX3_F, max_bucket=20)
    assert isinstance(s, BucketSetting) and s.method == "two-size"
    assert check_setting(s.counts, EX3_O, EX3_F) == []
    res = {p: two_size_search(EX3_O, EX3_F, 20, p) for p in ("full", "loss", "none")}
    assert len({(r.S1, r.b1, r.S2, r.b2, r.loss) for r in res.values()}) == 1
    assert s.loss == res["full"].loss
    assert s.mse(50) == pytest.approx(s.loss / 49)


def test_single_size_range_and_infeasible_range():
    o = np.array([3, 3])
    f = np.array([0.5, 0.5])
    s = two_size_bucketing(o, f, max_bucket=2)        # M = M' = 2: Lemma 2 decides
    assert s.size_histogram() == {2: 3}
    o = np.array([3, 4])
    f = np.array([0.5, 4 / 7])
    with pytest.raises(InfeasibleError, match="no valid bucket setting"):
        two_size_bucketing(o, f, max_bucket=2)         # 7 records cannot fill buckets of size 2
    with pytest.raises(InfeasibleError):
        multi_size_bucketing(o, f, max_bucket=2)


def test_planners_reject_bad_input():
    with pytest.raises(PpdpError):
        two_size_bucketing(np.array([0, 0]), np.array([0.5, 0.5]))
    with pytest.raises(InfeasibleError, match="Lemma 1"):
        two_size_bucketing(np.array([1, 9]), np.array([0.5, 0.5]))
    with pytest.raises(PpdpError):
        two_size_search(np.array([5, 5]), np.array([0.5, 0.5]), pruning="fast")
    with pytest.raises(PpdpError):
        two_size_bucketing(np.array([5, 5]), np.array([0.5]))


def test_multi_and_optimal_on_example3():
    two = two_size_bucketing(EX3_O, EX3_F, max_bucket=20)
    multi = multi_size_bucketing(EX3_O, EX3_F, max_bucket=20)
    opt = optimal_bucketing(EX3_O, EX3_F, max_bucket=20, time_limit=20)
    assert opt.proven_optimal is True and opt.method == "optimal"
    assert opt.loss <= multi.loss <= two.loss
    for s in (two, multi, opt):
        assert check_setting(s.counts, EX3_O, EX3_F) == []


def test_planners_when_rare_values_need_large_buckets():
    # In the spirit of Example 5: ten values with 5 records fit only buckets of size ≥ 14, one
    # value (f' = 1) fits anywhere; every planner must still return a valid setting.
    o = np.array([5] * 10 + [20])
    f = np.array([1 / 14] * 10 + [1.0])
    two = two_size_bucketing(o, f, max_bucket=30)
    multi = multi_size_bucketing(o, f, max_bucket=30)
    opt = optimal_bucketing(o, f, max_bucket=30, time_limit=20)
    assert opt.loss <= multi.loss <= two.loss
    for s in (two, multi, opt):
        assert check_setting(s.counts, o, f) == []


# ------------------------------------------------------------------ Anatomy
def test_anatomy_groups():
    o = np.array([4, 3, 3, 2])
    s = anatomy_setting(o, 3)
    assert s.method == "anatomy"
    assert check_setting(s.counts, o, np.full(4, 1 / 3)) == []
    assert (s.counts <= 1).all()
    assert set(s.size_histogram()) <= {3, 4}
    assert s.counts.sum() == 12


def test_anatomy_matches_naive_simulation():
    rng = np.random.default_rng(1)
    tried = 0
    for _ in range(300):
        m = int(rng.integers(2, 8))
        o = rng.integers(0, 12, size=m)
        l = int(rng.integers(1, m + 1))  # noqa: E741
        if o.sum() == 0 or not anatomy_eligible(o, l):
            continue
        tried += 1
        rest = o.copy()                        # naive: one group at a time, the ℓ largest (ties by index)
        groups = []
        while (rest > 0).sum() >= l:
            top = np.lexsort((np.arange(m), -rest))[:l]
            rest[top] -= 1
            groups.append(sorted(top.tolist()))
        created, residue = group_creation(o, l)
        # the same groups as the one-at-a-time rule (the batched planner orders them by batch)
        assert sorted(sorted(np.flatnonzero(r).tolist()) for r in created) == sorted(groups)
        assert residue.tolist() == rest.tolist() and residue.max() <= 1 and (residue > 0).sum() < l
        s = anatomy_setting(o, l)
        assert check_setting(s.counts, o, np.full(m, 1 / l)) == []
        assert (s.counts <= 1).all() and s.n_buckets == len(groups)
        assert s.sizes.min() >= l
    assert tried > 50


def test_anatomy_eligibility_error():
    with pytest.raises(InfeasibleError, match=r"1/ℓ.*'c'"):
        anatomy_setting(np.array([1, 1, 5]), 2, labels=["a", "b", "c"])


def test_anatomy_mse_from_sizes():
    assert anatomy_sizes(10, 3) == {3: 2, 4: 1}
    assert anatomy_mse_from_sizes(10, 3) == pytest.approx((2 * 4 + 9) / 9)
    assert anatomy_sizes(12, 4) == {4: 3}
    assert anatomy_sizes(5, 3) == {5: 1}

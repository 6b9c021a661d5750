"""The planners on the bundled OCC and EDU tables at θ = 8 (Wang et al. 2011, §7.2.1 / Figure 4)."""

import math

import numpy as np
import pytest

import ppdp
from ppdp.errors import InfeasibleError
from ppdp.mechanisms.bucketization.anatomy_plan import anatomy_eligible, anatomy_mse_from_sizes, anatomy_setting
from ppdp.mechanisms.bucketization.multi_size import multi_size_bucketing
from ppdp.mechanisms.bucketization.optimal import optimal_bucketing
from ppdp.mechanisms.bucketization.plan import check_setting
from ppdp.claims.fprivacy import fprime_thresholds
from ppdp.mechanisms.bucketization.two_size import two_size_bucketing, two_size_search


def _counts(name):
    t = ppdp.datasets.load(name)
    return t.counts(t.sa), t.domain(t.sa)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["occ", "edu"])
def test_mse_ordering_at_theta_8(name):
    o, labels = _counts(name)
    n = int(o.sum())
    fp = fprime_thresholds(o, labels, theta=8)
    l = math.ceil(1 / fp.min())  # noqa: E741   ℓ = ⌈1/min f'⌉ (Remark 1)
    anatomy = anatomy_mse_from_sizes(n, l)
    two = two_size_bucketing(o, fp)
    multi = multi_size_bucketing(o, fp)
    opt = optimal_bucketing(o, fp, time_limit=60)
    for s in (two, multi, opt):
        assert check_setting(s.counts, o, fp) == []
        assert s.sizes.max() <= 50
    assert anatomy > two.mse(n) >= multi.mse(n) >= opt.mse(n)
    # the paper's observation: ℓ-diversity is not even eligible here (max f > 1/ℓ)
    assert not anatomy_eligible(o, l)
    with pytest.raises(InfeasibleError):
        anatomy_setting(o, l)


@pytest.mark.parametrize("name", ["occ", "edu"])
def test_pruning_variants_agree_on_real_data(name):
    o, labels = _counts(name)
    for theta in (2, 8, 32):
        fp = fprime_thresholds(o, labels, theta=theta)
        got = {p: two_size_search(o, fp, 50, p) for p in ("full", "loss", "none")}
        assert len({(r.S1, r.b1, r.S2, r.b2, r.loss) for r in got.values()}) == 1


def test_two_size_search_does_no_work_proportional_to_table_size():
    o, labels = _counts("edu")
    f = o / o.sum()
    fp = np.minimum(1.0, 8 * f + 0.02)
    small = two_size_search(np.round(f * 1e5).astype(np.int64), fp)
    big = two_size_search(np.round(f * 1e9).astype(np.int64), fp)
    assert big.stats["pairs_tested"] == small.stats["pairs_tested"] == 0   # no scanning of Γ at all
    assert big.stats["size_pairs"] <= small.stats["size_pairs"] + 50 * 49 // 2

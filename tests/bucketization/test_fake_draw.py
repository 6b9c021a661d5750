"""The fakes' draw (:func:`~ppdp.mechanisms.bucketization.fakes.draw_fakes`): each bucket's σ
fakes are a uniformly random σ-subset of its eligible values — absent from the bucket, not
forbidden, holdable by a real record under the thresholds — tested by a chi-square of the
subsets drawn over many identical buckets (fixed seeds), and exactly σ distinct eligible values
in every bucket on random matrices."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import stats

import ppdp
from ppdp.errors import InfeasibleError
from ppdp.mechanisms.bucketization.fakes import draw_fakes


@pytest.mark.parametrize("sigma,eligible", [(1, [1, 0, 1, 1, 0, 1]), (2, [1, 1, 0, 1, 1, 1, 0]), (3, [1, 1, 1, 1, 1, 0])])
def test_every_subset_of_the_eligible_values_is_equally_likely(sigma, eligible):
    el = np.array(eligible, dtype=bool)
    counts = np.where(el, 0, 1)[None, :].repeat(60_000, axis=0)       # real values where not eligible
    fake = draw_fakes(counts, sigma, np.random.default_rng(11))
    assert (fake.sum(axis=1) == sigma).all() and not (fake & ~el).any()
    subsets = list(itertools.combinations(np.flatnonzero(el).tolist(), sigma))
    code = {s: i for i, s in enumerate(subsets)}
    drawn = np.bincount([code[tuple(np.flatnonzero(r).tolist())] for r in fake[:20_000]], minlength=len(subsets))
    p = stats.chisquare(drawn).pvalue
    assert p > 1e-3, (drawn, p)
    # the control: a draw that favours the first eligible value is rejected by the same test
    biased = drawn.copy()
    biased[0] += 400
    biased[-1] -= 400
    assert stats.chisquare(biased).pvalue < 1e-3


def test_sigma_distinct_eligible_values_in_every_bucket():
    rng = np.random.default_rng(5)
    for _ in range(300):
        nb, m, sigma = int(rng.integers(1, 30)), int(rng.integers(1, 12)), int(rng.integers(1, 4))
        counts = rng.choice([0, 0, 0, 1, 2], size=(nb, m))
        forbidden = rng.random((nb, m)) < 0.2
        eligible = (counts == 0) & ~forbidden
        if (eligible.sum(axis=1) < sigma).any():
            with pytest.raises(InfeasibleError):
                draw_fakes(counts, sigma, rng, forbidden)
            continue
        fake = draw_fakes(counts, sigma, rng, forbidden)
        assert (fake.sum(axis=1) == sigma).all() and not (fake & ~eligible).any()


@pytest.mark.parametrize("sigma", [1, 2, 3])
def test_typed_draw_equals_the_bucket_by_bucket_draw(sigma):
    """The typed draw (each fake its type's eligible value at a drawn rank) takes the same
    random numbers and gives the same fakes as the draw over the buckets × m matrix."""
    from ppdp.mechanisms.bucketization.apply import draw_plan_fakes, draw_plan_fakes_typed
    from ppdp.mechanisms.bucketization.plan import SACounts

    t = ppdp.datasets.load("occ", n=20_000, seed=4)
    plan = ppdp.FPrivacy(theta=8.0, fake_values=sigma).plan(SACounts.of_table(t))
    types = np.asarray(plan.types)
    type_of = np.random.default_rng(1).permutation(np.repeat(np.arange(len(types)), plan.multiplicity))
    block = 257
    fb, fc = draw_plan_fakes_typed(plan, type_of, np.random.default_rng(9), block=block)
    rng = np.random.default_rng(9)
    dense = np.concatenate([draw_plan_fakes(plan, types[type_of[lo:lo + block]], rng)
                            for lo in range(0, len(type_of), block)])
    b, c = np.nonzero(dense)
    assert np.array_equal(fb, b) and np.array_equal(fc, c)
    assert (np.bincount(fb, minlength=len(type_of)) == sigma).all() and not (types[type_of[fb], fc] > 0).any()


def test_published_fakes_are_uniform_over_each_bucket_kinds_eligible_values():
    """Through ``ppdp.publish``: in an OCC release (θ = 8, σ = 1), buckets with the same real
    counts (hence the same eligible values, read with the publication rule from the files) get
    their fake uniformly among those values — a χ² over every such kind with ≥ 100 buckets — and
    the same statistic rejects a draw that puts every tenth fake on the kind's first eligible
    value (the control)."""
    from scipy import stats

    t = ppdp.datasets.load("occ", n=20000, seed=0)
    rel = ppdp.publish(t, ppdp.FPrivacy(theta=8, fake_values=1), seed=5)
    fake = rel.custodian_fake_matrix()
    real = np.where(fake, 0, rel.observed_counts())
    eligible = (real == 0) & ~rel.fake_excluded()
    assert not (fake & ~eligible).any()
    kind = np.unique(np.concatenate([real, eligible], axis=1), axis=0, return_inverse=True)[1].ravel()

    def pvalue(fk):
        chi, dof = 0.0, 0
        for k in np.unique(kind):
            g = np.flatnonzero(kind == k)
            if len(g) < 100:
                continue
            el = eligible[g[0]]
            cnt = fk[g][:, el].sum(axis=0)
            exp = cnt.sum() / el.sum()
            chi += float(((cnt - exp) ** 2 / exp).sum())
            dof += int(el.sum()) - 1
        assert dof >= 10  # enough kinds to test
        return stats.chi2.sf(chi, dof)

    assert pvalue(fake) > 1e-3
    biased = fake.copy()
    for r in np.flatnonzero(biased.any(axis=1))[::10]:
        biased[r] = False
        biased[r, np.flatnonzero(eligible[r])[0]] = True
    assert pvalue(biased) < 1e-3

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

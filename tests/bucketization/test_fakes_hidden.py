"""Fake values are indistinguishable from real ones in the files (issue 11, item 3).

The adversary's identification rule: a value listed once in bucket g (ST count 1) whose share
1/|g| would exceed its published threshold f'_x cannot be a real record's, so it is a fake —
with certainty. Before the fix fakes were drawn without regard to the thresholds and the rule
identified 84% of them on EDU and OCC (θ = 8, σ = 1 or 2; measured through ``ppdp.publish``,
seed 1: EDU σ=1 173,981 of 205,194 = 84.8%, σ=2 84.9%; OCC σ=1 31,468 of 37,530 = 83.8%, σ=2
83.9%). Fakes are now drawn only where a real record could hold them, so the rule identifies
none (0 of every release's fakes); chance — the share of fakes among the count-1 values, what a
guess achieves — is printed beside it.

Power control: the same buckets with fakes re-drawn the old way (uniform over the absent
values, thresholds ignored) — the rule then identifies ≥ 80% of them again.

A stronger receiver also reads the real SA totals off the thresholds (f'_x = θ·o_x/N + b)
and propagates certain conclusions (``receiver_posterior``): it identifies no fake with
certainty either (printed).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

import ppdp
from ppdp.claims import claim_of
from ppdp.mechanisms.bucketization.apply import st_table
from ppdp.mechanisms.bucketization.fakes import draw_fakes
from ppdp.releases.bucketized import BucketizedRelease

_TABLES: dict = {}


def _table(name):
    if name not in _TABLES:
        _TABLES[name] = ppdp.datasets.load(name)
    return _TABLES[name]


def identified(release) -> np.ndarray:
    """The adversary's rule from the files alone: count-1 values with 1/|g| > f'_x."""
    obs = release.observed_counts()
    sizes = release.bucket_sizes()
    thr = claim_of(release.manifest).threshold_array(release.domains[release.sa])
    return (obs == 1) & (1.0 / sizes[:, None] > thr[None, :] + 1e-9)


@pytest.mark.parametrize("name", ["edu", "occ"])
@pytest.mark.parametrize("sigma", [1, 2])
def test_threshold_rule_identifies_no_fake(name, sigma):
    t = _table(name)
    rel = ppdp.publish(t, ppdp.FPrivacy(theta=8, fake_values=sigma), seed=1)
    assert "fake" not in rel.tables["st"].column_names  # never published
    fake = rel.custodian_fake_matrix()  # the custodian side knows the truth
    assert fake is not None and int(fake.sum()) == sigma * rel.bucket_sizes().size
    obs = rel.observed_counts()
    chance = fake.sum() / (obs == 1).sum()
    hit = identified(rel)
    rate = (hit & fake).sum() / fake.sum()
    # a stronger receiver: SA totals read off the thresholds, certain conclusions propagated
    claim = claim_of(rel.manifest)
    post = rel.posterior(claim.revealed_totals(rel.domains[rel.sa], rel.manifest["n_published"]))
    sure_fake = (obs == 1) & (post <= 1e-12)
    # power control: the same buckets, fakes drawn the old way (thresholds ignored)
    real = np.where(fake, 0, obs)
    old = draw_fakes(real, sigma, np.random.default_rng(7))
    st, _ = st_table(real, old, np.random.default_rng(8), rel.sa, rel.domains[rel.sa])
    ids = rel.buckets()["ids"]
    st = st.set_column(0, "bid", pa.array(np.asarray(ids)[st.column("bid").to_numpy()], pa.int64()))
    control = BucketizedRelease(rel.manifest, {"qit": rel.tables["qit"], "st": st})
    old_rate = (identified(control) & old).sum() / old.sum()
    print(f"{name} σ={sigma}: fakes {int(fake.sum()):,}; threshold rule identifies {int((hit & fake).sum()):,} "
          f"({rate:.1%}), flags {int(hit.sum())} values; chance (fakes among count-1 values) {chance:.1%}; "
          f"totals-aware receiver certain of {int(sure_fake.sum())} fakes; control (fakes drawn ignoring thresholds) "
          f"identified {old_rate:.1%}")
    assert hit.sum() == 0 and rate <= chance
    assert sure_fake.sum() == 0
    assert old_rate >= 0.8  # the test has power: the old draw is caught by the same rule
    assert ppdp.verify(rel).ok  # files only: every count-1 value is one a real record could hold
    assert not ppdp.verify(control).ok  # … which the old draw breaks


def test_estimator_correction_is_exactly_unbiased_under_the_threshold_rule():
    """A real OCC release with σ = 2 (fakes drawn under the rule): for each of its first 150
    buckets, the receiver's corrected counts ĉ (no fake flag; the rule read from the files),
    averaged over every σ-subset the rule could have drawn, equal the real counts exactly."""
    import itertools

    from ppdp.estimators.bucketized import correct_counts

    t = ppdp.datasets.load("occ", n=4000, seed=3)
    rel = ppdp.publish(t, ppdp.FPrivacy(theta=8, fake_values=2), seed=4)
    obs = rel.observed_counts()
    fake = rel.custodian_fake_matrix()
    real = np.where(fake, 0, obs)
    excluded = rel.fake_excluded()  # the rule, from the files alone
    assert not (fake & excluded).any()
    checked = 0
    for g in range(min(150, len(real))):
        eligible = np.flatnonzero((real[g] == 0) & ~excluded[g])
        if len(eligible) <= 2:  # D_g would be empty for every draw (no unbiased correction exists)
            continue
        mean = np.zeros(real.shape[1])
        subsets = list(itertools.combinations(eligible.tolist(), 2))
        for sub in subsets:
            o = real[g:g + 1].astype(float).copy()
            o[0, list(sub)] += 1
            chat, sat = correct_counts(o, 2, excluded[g:g + 1])
            assert sat == 0
            mean += chat[0]
        np.testing.assert_allclose(mean / len(subsets), real[g], atol=1e-9)
        checked += 1
    assert checked >= 100


def test_values_revealed_absent_are_never_fakes():
    """A value held by no record has threshold f' = b under the formula, which tells a receiver
    its total is 0: such a value is never drawn as a fake (it would be recognisable)."""
    rng = np.random.default_rng(0)
    import pandas as pd

    df = pd.DataFrame({"q": rng.choice(["a", "b", "c"], 400), "s": rng.choice(["x", "y", "z", "w"], 400)})
    t = ppdp.Table.from_pandas(df, quasi=["q"], sensitive=["s"], domains={"s": ["x", "y", "z", "w", "v"]})
    rel = ppdp.publish(t, ppdp.FPrivacy(theta=2, floor=0.3, fake_values=1), seed=1)
    assert "v" not in rel.custodian["fake"].values()
    assert ppdp.verify(rel).ok

"""The bucketization layout of the Spark and streaming engines (no session needed, nor PySpark):
published buckets from the typed
plan and a keyed permutation, a range at a time — the same types, ST, fakes, certificate and
disclosure as from the arrays of one entry per bucket, and the same in a pickled (executor)
copy."""

import pickle

import numpy as np
import pytest

import ppdp
from ppdp.kernels.rng import publication_rng
from ppdp.mechanisms.bucketization.apply import st_range_typed
from ppdp.mechanisms.bucketization.plan import SACounts
from ppdp.engines import blocks as S
from ppdp.releases.bucketized import bucket_disclosure, receiver_posterior, typed_disclosure, types_disclosure


def _plan(mech, n, seed):
    t = ppdp.datasets.load("occ", n=n, seed=seed)
    sa = t.sa
    counts = np.bincount(t.codes(sa), minlength=len(t.domain(sa)))
    return mech.plan(SACounts(sa, tuple(t.domain(sa)), counts))


PLANS = [(ppdp.Anatomy(3), 3000, 1), (ppdp.Anatomy(4), 5000, 2), (ppdp.FPrivacy(theta=8, fake_values=1), 4000, 3),
         (ppdp.FPrivacy(theta=8, fake_values=2), 6000, 4), (ppdp.FPrivacy(theta=4), 3000, 5)]


def _whole(layout):
    """Each published bucket's type, gathered over the ranges (for the comparison only)."""
    return np.concatenate([layout.type_of(*layout.bounds(r)) for r in range(layout.n_ranges)])


@pytest.mark.parametrize("mech,n,seed", PLANS, ids=lambda x: getattr(x, "name", str(x)))
@pytest.mark.parametrize("seeded", [True, False])
def test_the_layout_matches_the_arrays_of_one_entry_per_bucket(mech, n, seed, seeded, monkeypatch):
    plan = _plan(mech, n, seed)
    m = len(plan.labels)
    monkeypatch.setattr(S, "ST_RANGE_CELLS", 5 * m)  # 5 buckets per range
    streams = S.PartitionStreams(seed if seeded else None, publication_rng(seed if seeded else None))
    layout = S.TypedLayout(plan, streams)
    assert layout.step == 5 and layout.n_buckets == plan.n_buckets
    type_of = _whole(layout)
    # the published buckets of each type are as many as its multiplicity: a relabelling of the planner's
    assert np.array_equal(np.bincount(type_of, minlength=len(plan.types)), plan.multiplicity)
    planner = layout.relabel.inverse(np.arange(layout.n_buckets))
    assert np.array_equal(np.sort(planner), np.arange(layout.n_buckets))
    assert np.array_equal(type_of, np.repeat(np.arange(len(plan.types)), plan.multiplicity)[planner])
    # the certificate's bucket statistics from the types, as from one size per bucket
    assert S.typed_certificate(plan) == plan.certificate()
    labels = list(plan.labels)
    if plan.fake_values == 0:  # the disclosure from the types and multiplicities, as from each bucket's type
        assert types_disclosure(layout.types, layout.mult, labels, layout.first_of) == typed_disclosure(plan.types, type_of, labels)
    else:  # the ranges' fakes are the ST's: the streamed disclosure as from the whole matrices
        obs = np.concatenate([o for o, _ in layout.chunks()])
        sizes = plan.types.sum(axis=1)[type_of]
        thr = np.asarray(plan.thresholds)
        whole = bucket_disclosure(receiver_posterior(obs, sizes, plan.fake_values, thr), sizes, labels)
        rel = S.plan_release(layout, S.typed_certificate(plan), [], {plan.sa: labels}, {}, disclose=False)
        assert rel.disclosure() == whole
        assert np.all((obs - plan.types[type_of]).sum(axis=1) == plan.fake_values)
    # an executor's copy (pickled: the plan without its claim, the relabelling rebuilt from the key)
    copy = pickle.loads(pickle.dumps(layout))
    assert copy._relabel is None and np.array_equal(_whole(copy), type_of)
    for r in (0, layout.n_ranges - 1):
        lo, hi = layout.bounds(r)
        st, fake = copy.st_range(r)
        assert st.equals(st_range_typed(plan, type_of[lo:hi], lo, streams.get(S.ST_STAGE, r))[0])
        f1, f2 = layout.fakes(r), copy.fakes(r)  # drawn again, as the ST's writer drew them
        assert (f1 is None and f2 is None and fake is None) or (np.array_equal(f1, f2) and np.array_equal(f1, fake))
        if f1 is not None:  # the ST's count-1 rows of values the bucket's type lacks are the fakes
            bid, code = np.nonzero(f1)
            sa = st.column(plan.sa).combine_chunks().indices.to_numpy()
            in_st = set(zip(st.column("bid").to_numpy().tolist(), sa.tolist()))
            assert all((int(b) + lo, int(c)) in in_st for b, c in zip(bid, code))


def test_a_tie_at_the_largest_posterior_names_the_first_published_buckets_value():
    """Anatomy: every type is tied at 1/ℓ; the value named is the first value of the first
    published bucket's type — found by scanning the ranges, as typed_disclosure finds it."""
    plan = _plan(ppdp.Anatomy(3), 3000, 1)
    post = plan.types / plan.types.sum(axis=1)[:, None]
    assert len({int(np.flatnonzero(p == p.max())[0]) for p in post}) > 1  # the tied types name different values
    for seed in range(5):
        layout = S.TypedLayout(plan, S.PartitionStreams(seed, publication_rng(seed)))
        first = int(layout.type_of(0, 1)[0])
        d = types_disclosure(layout.types, layout.mult, plan.labels, layout.first_of)
        assert d["max_posterior_value"] == plan.labels[int(np.flatnonzero(post[first] == post[first].max())[0])]

"""The disclosure of a bucketized release streamed over ranges of buckets
(:func:`~ppdp.releases.bucketized.streamed_disclosure`, the Spark engine's) equals
the one computed over the whole n_buckets × m posterior (:func:`receiver_posterior` +
:func:`bucket_disclosure`, what ``disclosure_of`` derives from the files): on arbitrary count
matrices (the receiver's fake inference propagates between buckets and values), and on the ST
of random small plans written a range of buckets at a time with σ > 0 fakes; for σ = 0 the
disclosure from the bucket types alone (:func:`typed_disclosure`) equals it too."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

import ppdp
from ppdp.claims import disclosure_of
from ppdp.errors import InfeasibleError
from ppdp.mechanisms.bucketization.apply import st_range_typed, streamed_disclosure
from ppdp.mechanisms.bucketization.plan import SACounts
from ppdp.releases import bucket_streams as S
from ppdp.releases import bucketized as B
from ppdp.releases.bucketized import BucketizedRelease, bucket_disclosure, receiver_posterior, typed_disclosure


def _chunked(obs, sizes, cuts):
    bounds = [0, *sorted(set(c for c in cuts if 0 < c < len(sizes))), len(sizes)]
    return lambda: ((obs[a:b], sizes[a:b]) for a, b in zip(bounds, bounds[1:]))


@st.composite
def matrices(draw):
    nb = draw(st.integers(1, 9))
    m = draw(st.integers(1, 6))
    obs = np.array(draw(st.lists(st.sampled_from([0, 0, 1, 1, 1, 2, 3]), min_size=nb * m, max_size=nb * m)),
                   dtype=np.int64).reshape(nb, m)
    sizes = np.array(draw(st.lists(st.integers(1, 8), min_size=nb, max_size=nb)), dtype=np.int64)
    thr = np.array(draw(st.lists(st.sampled_from([0.1, 0.2, 0.25, 1 / 3, 0.5, 1.0]), min_size=m, max_size=m)))
    sigma = draw(st.integers(0, 2))
    totals = draw(st.one_of(st.none(), st.lists(st.integers(-1, 6), min_size=m, max_size=m)))
    cuts = draw(st.lists(st.integers(0, nb), max_size=4))
    return obs, sizes, thr, sigma, None if totals is None else np.array(totals, dtype=np.int64), cuts


@settings(max_examples=400, deadline=None)
@given(matrices())
def test_streamed_equals_whole_posterior_on_any_counts(case):
    obs, sizes, thr, sigma, totals, cuts = case
    labels = [f"v{i}" for i in range(obs.shape[1])]
    whole = bucket_disclosure(receiver_posterior(obs, sizes, sigma, thr, None, totals), sizes, labels)
    assert streamed_disclosure(_chunked(obs, sizes, cuts), sigma, thr, labels, totals) == whole


def test_streamed_follows_propagation_between_buckets_and_values():
    """A chain: bucket 0's fake is known (value 0 has no fake), so bucket 0's other count-1
    value is fake, which uses up value 1's only fake, so bucket 1's value 1 is real …"""
    obs = np.array([[1, 1, 0], [0, 1, 1], [1, 0, 1]], dtype=np.int64)
    sizes = np.array([1, 1, 1])
    thr = np.ones(3)
    totals = np.array([2, 1, 1])
    labels = ["a", "b", "c"]
    whole = bucket_disclosure(receiver_posterior(obs, sizes, 1, thr, None, totals), sizes, labels)
    assert whole["records_certain"] == 3
    for cuts in ([], [1], [1, 2]):
        assert streamed_disclosure(_chunked(obs, sizes, cuts), 1, thr, labels, totals) == whole


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**31), sigma=st.integers(0, 2), per_range=st.integers(1, 7),
       theta=st.sampled_from([4.0, 8.0, 16.0]), n=st.integers(60, 600))
def test_ranges_st_and_streamed_disclosure_equal_the_whole_st(seed, sigma, per_range, theta, n):
    """Random small plans: the ST written a range of buckets at a time (each range its own
    generator) is a valid ST of the plan with σ fakes per bucket, and the streamed disclosure
    equals ``disclosure_of`` of a release holding that ST whole."""
    rng = np.random.default_rng(seed)
    table = ppdp.datasets.load("occ", n=n, seed=seed % 1000)
    try:
        plan = ppdp.FPrivacy(theta=theta, fake_values=sigma).plan(SACounts.of_table(table))
    except ppdp.PpdpError:  # infeasible at this size
        return
    types = np.asarray(plan.types, dtype=np.int64)
    K, m = types.shape
    perm = rng.permutation(int(np.sum(plan.multiplicity)))
    type_of = np.empty(len(perm), dtype=np.int32)
    type_of[perm] = np.repeat(np.arange(K, dtype=np.int32), plan.multiplicity)
    parts, fakes = [], []
    for r, lo in enumerate(range(0, len(type_of), per_range)):
        t = type_of[lo:lo + per_range]
        try:
            st_r, fake = st_range_typed(plan, t, lo, np.random.default_rng([seed, r]))
        except InfeasibleError:  # too few values for σ fakes in some bucket (every engine refuses it)
            return
        parts.append(st_r)
        fakes.append(np.zeros((len(t), m), bool) if fake is None else fake)
    stt = pa.concat_tables(parts)
    fake = np.concatenate(fakes)
    assert (fake.sum(axis=1) == sigma).all() and not (fake & (types[type_of] > 0)).any()
    sizes = plan.type_sizes[type_of]
    sb = stt.column("bid").to_numpy()
    assert (np.diff(sb) >= 0).all() and np.array_equal(np.bincount(sb, weights=stt.column("count").to_numpy()),
                                                         sizes + sigma)
    # a release holding the whole ST (the QIT: each bucket's rows, QI values irrelevant here)
    qit = pa.table({"age": pa.array(np.zeros(int(sizes.sum()), np.int32)).dictionary_encode(),
                    "bid": pa.array(np.repeat(np.arange(len(sizes)), sizes))})
    schema = {"quasi": ["age"], "sensitive": [plan.sa], "domains": {"age": ["0"], plan.sa: list(plan.labels)}}
    manifest = {"schema": schema, "n_input": plan.n_records, "n_published": plan.n_records, "dropped": 0,
                "certificate": plan.certificate(sizes)}
    rel = BucketizedRelease(manifest, {"qit": qit, "st": stt})
    whole = disclosure_of(rel)
    claim = ppdp.claims.claim_of(manifest)
    known = claim.revealed_totals(list(plan.labels), plan.n_records)
    obs = types[type_of] + fake
    streamed = streamed_disclosure(_chunked(obs, sizes, list(range(0, len(sizes), per_range))), sigma,
                                   rel.thresholds(), plan.labels, known)
    assert streamed == whole
    if sigma == 0:  # the O(types + buckets) form the Spark engine states for σ = 0
        assert typed_disclosure(types, type_of, plan.labels) == whole


@settings(max_examples=200, deadline=None)
@given(matrices(), st.integers(1, 30), st.integers(0, 2**31))
def test_distinct_rows_equal_the_replay_over_chunks(case, repeat, seed):
    """Buckets with the same (observed counts, size) row reach the same state, so the inference
    on the distinct rows with their multiplicities (the default) states the same disclosure and
    contradictions as the replay of every round over every chunk (no distinct rows held), on
    matrices whose rows repeat in any order; and the hash of the rows is exact."""
    obs, sizes, thr, sigma, totals, cuts = case
    rng = np.random.default_rng(seed)
    pick = rng.integers(0, len(sizes), len(sizes) * repeat)  # many buckets, few distinct rows
    obs, sizes = obs[pick], sizes[pick]
    cuts = [c * repeat for c in cuts]
    labels = [f"v{i}" for i in range(obs.shape[1])]
    held = B.streamed_inference(_chunked(obs, sizes, cuts), max(sigma, 1), thr, labels, totals)
    old = S.DISTINCT_CELLS
    try:
        S.DISTINCT_CELLS = 0
        replay = B.streamed_inference(_chunked(obs, sizes, cuts), max(sigma, 1), thr, labels, totals)
    finally:
        S.DISTINCT_CELLS = old
    assert held[0] == replay[0]
    assert held[1]["contradictions"] == replay[1]["contradictions"]
    assert held[1]["bad_buckets"] == replay[1]["bad_buckets"]
    assert np.array_equal(held[1]["bad_values"], replay[1]["bad_values"])
    x = np.concatenate([obs, sizes[:, None]], axis=1)
    first, inv = S.unique_rows(x)
    assert np.array_equal(x[first][inv], x) and len(first) == len(np.unique(x, axis=0))


def test_distinct_rows_give_up_beyond_the_limit():
    """More distinct rows than the limit: None (the rounds are then replayed over the chunks)."""
    obs = np.arange(40, dtype=np.int64).reshape(20, 2) % 7
    sizes = np.arange(20, dtype=np.int64) + 1
    chunks = _chunked(obs, sizes, [5, 10])
    assert S._distinct_buckets(chunks, 2, 10) is None
    got = S._distinct_buckets(chunks, 2, 20)
    assert got is not None and got[2].sum() == 20 and sorted(got[3].tolist()) == list(range(20))

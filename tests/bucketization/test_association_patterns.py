"""Negative associations without n_buckets × m matrices: the forbidden fakes held as a few
distinct patterns (:func:`~ppdp.releases.bucketized.association_patterns`) equal the
association-by-association mask; the typed fake draw with patterns gives the same fakes as the
bucket-by-bucket draw; the receiver's fake inference streamed with patterns (distinct rows, or
replayed over chunks) equals the whole-matrix inference; and a release with negative
associations verified over ranges of buckets gives the same report as the matrix path —
honest, tampered (a fake moved onto a value an association forbids), from the files, with the
source and with the custodian file — without building a bucket × value matrix."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ppdp
import ppdp.releases.bucket_streams as S
import ppdp.releases.bucketized as B
from ppdp.mechanisms.bucketization.apply import draw_plan_fakes, draw_plan_fakes_typed
from ppdp.mechanisms.bucketization.plan import SACounts
from ppdp.releases.bucketized import ForbiddenFakes, association_patterns
from ppdp.releases.custodian import load_custodian

sys.path.insert(0, str(Path(__file__).parent))
import test_streamed_disclosure as SD  # noqa: E402


def _mask_by_hand(bid, nb, qi, domains, sa, assoc):
    """The definition: x forbidden in g when g holds a record with z, for each (column, z, x)."""
    out = np.zeros((nb, len(domains[sa])), dtype=bool)
    for col, z, x in assoc:
        holders = set(bid[np.asarray(qi[col]) == list(domains[col]).index(z)].tolist())
        for g in holders:
            out[g, list(domains[sa]).index(x)] = True
    return out


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 2**31), n_assoc=st.integers(0, 150), sort=st.booleans(), block=st.integers(1, 64))
def test_patterns_equal_the_mask_by_hand(seed, n_assoc, sort, block):
    """Any number of associations (more than 64 holders: several words of bits), repeated
    (column, z) pairs, QIT rows grouped by bucket or not, any block size."""
    rng = np.random.default_rng(seed)
    nb = int(rng.integers(1, 30))
    n = int(rng.integers(nb, 200))
    bid = np.concatenate([np.arange(nb), rng.integers(0, nb, n - nb)])
    if sort:
        bid = np.sort(bid)
    domains = {"a": [f"a{i}" for i in range(int(rng.integers(1, 5)))],
               "b": [f"b{i}" for i in range(int(rng.integers(1, 90)))],
               "s": [f"s{i}" for i in range(int(rng.integers(1, 8)))]}
    qi = {c: rng.integers(0, len(domains[c]), n) for c in ("a", "b")}
    assoc = [(str(c), str(rng.choice(domains[str(c)])), str(rng.choice(domains["s"])))
             for c in rng.choice(["a", "b"], n_assoc)]
    fp = association_patterns(bid, nb, qi, domains, "s", assoc, block=block)
    assert np.array_equal(fp.dense(), _mask_by_hand(bid, nb, qi, domains, "s", assoc))
    assert len(np.unique(fp.rows, axis=0)) == len(fp.rows)          # distinct patterns
    g = rng.integers(0, nb, 50)
    x = rng.integers(0, len(domains["s"]), 50)
    assert np.array_equal(fp.at(g, x), fp.dense()[g, x])


def test_unknown_association_is_one_clear_error():
    dom = {"a": ["u", "v"], "s": ["x", "y"]}
    qi = {"a": np.array([0, 1])}
    for bad in (("b", "u", "x"), ("a", "w", "x"), ("a", "u", "z")):
        with pytest.raises(ppdp.errors.SchemaError, match="negative association"):
            association_patterns(np.array([0, 0]), 1, qi, dom, "s", [bad])


@pytest.mark.parametrize("seed", range(4))
def test_typed_draw_with_patterns_equals_the_bucket_by_bucket_draw(seed):
    table = ppdp.datasets.load("occ", n=3000, seed=seed)
    plan = ppdp.FPrivacy(theta=8, fake_values=1 + seed % 2).plan(SACounts.of_table(table))
    types = np.asarray(plan.types, dtype=np.int64)
    rng = np.random.default_rng(seed)
    type_of = rng.permutation(np.repeat(np.arange(len(types)), plan.multiplicity))
    nb, m = len(type_of), types.shape[1]
    rows = np.unique(np.vstack([np.zeros(m, bool), rng.random((4, m)) < 0.05]), axis=0)
    forbidden = ForbiddenFakes(rng.integers(0, len(rows), nb).astype(np.int32), rows)
    block = [7, 1 << 16][seed % 2]
    fb, fc = draw_plan_fakes_typed(plan, type_of, np.random.default_rng(9), forbidden, block=block)
    r = np.random.default_rng(9)
    dense = np.concatenate([draw_plan_fakes(plan, types[type_of[lo:lo + block]], r, forbidden.dense(lo, lo + block))
                            for lo in range(0, nb, block)])
    b, c = np.nonzero(dense)
    assert np.array_equal(fb, b) and np.array_equal(fc, c)
    assert not forbidden.at(fb, fc).any() and not (types[type_of][fb, fc] > 0).any()


@st.composite
def patterns(draw, nb: int, m: int):
    """A few forbidden-value patterns (rows) and each bucket's pattern."""
    n_pat = draw(st.integers(1, 3))
    rows = np.array(draw(st.lists(st.booleans(), min_size=n_pat * m, max_size=n_pat * m))).reshape(n_pat, m)
    of = np.array(draw(st.lists(st.integers(0, n_pat - 1), min_size=nb, max_size=nb)), dtype=np.int32)
    return rows, of


@st.composite
def matrices_with_patterns(draw):
    obs, sizes, thr, sigma, totals, cuts = draw(SD.matrices())
    rows, of = draw(patterns(*obs.shape))
    return obs, sizes, thr, max(sigma, 1), totals, rows, of, cuts


@settings(max_examples=300, deadline=None)
@given(matrices_with_patterns(), st.integers(1, 8), st.integers(0, 2**31))
def test_streamed_inference_with_patterns_equals_the_whole_matrix(case, repeat, seed):
    obs, sizes, thr, sigma, totals, rows, of, cuts = case
    rng = np.random.default_rng(seed)
    pick = rng.integers(0, len(sizes), len(sizes) * repeat)
    obs, sizes, of = obs[pick], sizes[pick], of[pick]
    forbidden = ForbiddenFakes(of, rows)
    bounds = [0, *sorted({c * repeat for c in cuts if 0 < c * repeat < len(sizes)}), len(sizes)]

    def chunks():
        return ((obs[a:b], sizes[a:b]) for a, b in zip(bounds, bounds[1:]))

    labels = [f"v{i}" for i in range(obs.shape[1])]
    whole_post = B.receiver_posterior(obs, sizes, sigma, thr, forbidden.dense(), totals)
    whole = B.fake_inference(obs, sizes, thr, forbidden.dense(), totals)
    for cells in (S.DISTINCT_CELLS, 0):
        old = S.DISTINCT_CELLS
        try:
            S.DISTINCT_CELLS = cells
            d, inf = B.streamed_inference(chunks, sigma, thr, labels, totals, forbidden=forbidden)
        finally:
            S.DISTINCT_CELLS = old
        assert d == B.bucket_disclosure(whole_post, sizes, labels)
        assert inf is not None
        assert (inf["contradictions"], inf["bad_buckets"]) == (whole["contradictions"], whole["bad_buckets"])
        assert np.array_equal(inf["bad_values"], whole["bad_values"])


# ------------------------------------------------------------------ releases


def _report(d, *source, **kw):
    r = ppdp.verify(d, *source, **kw)
    return (r.ok, list(r.checks), dict(r.facts), list(r.problems))


def _both(d, monkeypatch, source=None, custodian=None):
    """The reports (files; with the source; with the custodian file) by matrices and by
    ranges of buckets, which must be equal."""
    out = {}
    for cells in (1 << 62, 0):
        monkeypatch.setattr(B, "DENSE_CELLS", cells)
        assert ppdp.load_release(d).rowwise() == (cells == 0)
        out[cells] = (_report(d), None if source is None else _report(d, source),
                      None if custodian is None else _report(d, custodian=custodian))
    assert out[0] == out[1 << 62]
    return out[0]


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    t = ppdp.datasets.load("occ", n=4000, seed=3)
    sex, occ = t.domain("sex"), t.domain(t.sensitive[0])
    country = t.domain("country_of_birth") if "country_of_birth" in t.quasi else None
    assoc = [["sex", sex[0], occ[0]], ["sex", sex[1], occ[1]]]
    if country is not None:
        assoc.append(["country_of_birth", country[0], occ[2]])
    rel = ppdp.publish(t, ppdp.FPrivacy(theta=8, fake_values=2, negative_associations=assoc), seed=1)
    d = rel.save(tmp_path_factory.mktemp("assoc") / "rel")
    return d, t, assoc


def test_release_with_associations_takes_the_range_path(published, monkeypatch):
    d, t, assoc = published
    rep = _both(d, monkeypatch, source=t, custodian=d.with_name(d.name + ".custodian.json"))
    assert all(r[0] is True for r in rep), rep
    rel = ppdp.load_release(d)
    rel.custodian = load_custodian(d.with_name(d.name + ".custodian.json"))
    fake = rel.custodian_fake_matrix()
    assert fake is not None and fake.sum() == 2 * rel.buckets()["n_buckets"]
    assert not (fake & rel.forbidden_fakes()).any() and rel.forbidden_fakes().any()
    # control: without the associations the same publication injects fakes they forbid
    plain = ppdp.publish(t, ppdp.FPrivacy(theta=8, fake_values=2), seed=1)
    pf = plain.custodian_fake_matrix()
    forbid = B.negative_association_mask(plain.buckets()["qb"], plain.buckets()["n_buckets"],
                                         {c: plain.codes("qit", c) for c in plain.quasi}, plain.domains, plain.sa, assoc)
    assert pf is not None and (pf & forbid).sum() > 10


def test_range_path_builds_no_bucket_by_value_matrix(published, monkeypatch):
    d, t, _ = published
    monkeypatch.setattr(B, "DENSE_CELLS", 0)

    def refuse(*a, **k):
        raise AssertionError("an n_buckets × m matrix was built")

    for name in ("observed_counts", "fake_excluded", "forbidden_fakes", "custodian_fake_matrix", "published_fake_matrix",
                 "real_counts", "real_counts_from_files", "fake_inference", "posterior"):
        monkeypatch.setattr(B.BucketizedRelease, name, refuse)
    monkeypatch.setattr(B, "negative_association_mask", refuse)
    assert ppdp.verify(d).ok
    assert ppdp.verify(d, t).ok


def test_fake_moved_onto_a_forbidden_value_is_caught_either_way(published, tmp_path, monkeypatch):
    """The custodian's fake of one bucket relabelled (in the ST and the custodian file) to a
    value an association forbids there and that the bucket lacks: both paths report it, with
    the custodian file as a broken publication rule."""
    src, t, _ = published
    d = tmp_path / "rel"
    shutil.copytree(src, d)
    cpath = d.with_name("rel.custodian.json")
    kept = load_custodian(src.with_name(src.name + ".custodian.json"))
    kept["fake"] = kept["fake"].to_json()      # the inline form, for the edit below
    cpath.write_text(json.dumps(kept))
    rel = ppdp.load_release(d)
    rel.custodian = kept
    b = rel.buckets()
    forb = rel.forbidden_fakes()
    obs = rel.observed_counts()
    fake = rel.custodian_fake_matrix()
    thr = rel.thresholds()
    cap_ok = B.fake_candidates(b["sizes"], thr)
    cand = np.argwhere(forb & (obs == 0) & cap_ok)
    g, x = (int(v) for v in cand[0])
    old_x = int(np.flatnonzero(fake[g])[0])
    labels = rel.domains[rel.sa]
    gid = int(b["ids"][g])
    stt = pq.read_table(d / "st.parquet").to_pandas()
    row = np.flatnonzero((stt.bid.to_numpy() == gid) & (stt[rel.sa].astype(str).to_numpy() == labels[old_x]))[0]
    stt[rel.sa] = stt[rel.sa].astype(str)
    stt.loc[row, rel.sa] = labels[x]
    like = pq.read_table(d / "st.parquet")
    stt[rel.sa] = pd.Categorical(stt[rel.sa], categories=list(labels))
    pq.write_table(pa.Table.from_pandas(stt, preserve_index=False, schema=like.schema), d / "st.parquet")
    c = json.loads(cpath.read_text())
    fk = c["fake"]
    for i, (fb, fv) in enumerate(zip(fk["bid"], fk["value"])):
        if int(fb) == gid and str(fv) == labels[old_x]:
            fk["value"][i] = labels[x]
    cpath.write_text(json.dumps(c))
    rep = _both(d, monkeypatch, custodian=cpath)
    assert rep[2][0] is not True
    assert any("break the publication rule" in p for p in rep[2][3]), rep[2][3]


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**31), dense=st.booleans())
def test_learning_per_bucket_type_equals_learning_per_bucket(seed, dense):
    """The associations learned from the bucket types (ê summed over (z, type) pairs) are those
    learned from the per-bucket counts, with the same support, confidence and expected count
    (the (z, type) pairs counted in a dense table, or sorted)."""
    from ppdp.kernels import associations as A

    rng = np.random.default_rng(seed)
    T, m = int(rng.integers(1, 6)), int(rng.integers(2, 6))
    types = rng.integers(0, 4, (T, m))
    types[types.sum(axis=1) == 0, 0] = 1
    type_of = rng.integers(0, T, int(rng.integers(1, 40)))
    sizes = types[type_of].sum(axis=1)
    bid = rng.permutation(np.repeat(np.arange(len(type_of)), sizes))
    domains = {"a": [f"a{i}" for i in range(int(rng.integers(1, 6)))], "b": ["u", "v"]}
    qi = {c: rng.integers(0, len(domains[c]), len(bid)) for c in domains}
    labels = [f"s{i}" for i in range(m)]
    args = (qi, domains, labels, int(rng.integers(1, 5)), float(rng.choice([0.0, 0.1, 0.3])),
            float(rng.choice([0.5, 2.0])))
    per_bucket = A.learn_negative_associations(bid, types[type_of], *args)
    old = A.DENSE_PAIRS
    try:
        A.DENSE_PAIRS = old if dense else 0
        typed = A.learn_negative_associations(bid, types, *args, bucket_type=type_of)
    finally:
        A.DENSE_PAIRS = old
    assert [(d["column"], d["value"], d["sa_value"], d["support"]) for d in typed] == \
        [(d["column"], d["value"], d["sa_value"], d["support"]) for d in per_bucket]
    for a, b in zip(typed, per_bucket):
        assert a["confidence"] == pytest.approx(b["confidence"], abs=1e-12)
        assert a["expected"] == pytest.approx(b["expected"], rel=1e-12)


@pytest.fixture(scope="module")
def learned_releases(tmp_path_factory):
    """Anatomy with learning on an Adult sample (σ = 1 and σ = 0), saved."""
    t = ppdp.datasets.load("adult", n=20000, seed=0)
    out = {}
    for sigma in (1, 0):
        mech = ppdp.Anatomy(l=4, fake_values=sigma, learn_associations=True, association_confidence=0.02,
                            association_expected=10.0)
        rel = ppdp.publish(t, mech, seed=2)
        out[sigma] = rel.save(tmp_path_factory.mktemp(f"learn{sigma}") / "rel")
    return out


def _edit_learned(src, dst, edit):
    shutil.copytree(src, dst)
    kept = load_custodian(src.with_name(src.name + ".custodian.json"))
    if kept.get("fake") is not None:
        kept["fake"] = kept["fake"].to_json()      # the inline form (no sidecar to carry along)
    dst.with_name(dst.name + ".custodian.json").write_text(json.dumps(kept))
    m = json.loads((dst / "manifest.json").read_text())
    edit(m["certificate"]["negative_associations_learned"])
    (dst / "manifest.json").write_text(json.dumps(m))
    return dst, dst.with_name(dst.name + ".custodian.json")


@pytest.mark.parametrize("sigma", [1, 0])
def test_learned_list_is_re_derived(learned_releases, tmp_path, monkeypatch, sigma):
    """The learned associations are learned again from the QIT and the buckets' real counts
    (the custodian file's fakes for σ > 0; the files alone for σ = 0) — by matrices and by
    ranges of buckets alike — and a list with one dropped or one added fails; without the
    custodian file a σ > 0 list is stated as not re-derived."""
    src = learned_releases[sigma]
    cust = src.with_name(src.name + ".custodian.json") if sigma else None
    honest = _both(src, monkeypatch, custodian=cust)
    learned = json.loads((src / "manifest.json").read_text())["certificate"]["negative_associations_learned"]
    assert len(learned) >= 10
    checked = honest[2] if sigma else honest[0]
    assert checked[0] is True and checked[2]["negative_associations_learned"] == f"{len(learned)} listed, re-derived"
    if sigma:
        assert honest[0][0] is True and "not re-derived" in honest[0][2]["negative_associations_learned"]
    t = ppdp.datasets.load("adult", n=20000, seed=0)
    extra = ["sex", t.domain("sex")[0], t.domain(t.sensitive[0])[0]]
    assert extra not in learned
    for k, edit in enumerate([lambda a: a.pop(0), lambda a: a.append(list(extra))]):
        d, c = _edit_learned(src, tmp_path / f"e{k}", edit)
        rep = _both(d, monkeypatch, custodian=c if sigma else None)
        bad = rep[2] if sigma else rep[0]
        assert bad[0] is not True
        assert any("learned negative associations differ" in p for p in bad[3]), bad[3]


def test_real_bucket_types_equal_the_real_counts(learned_releases, monkeypatch):
    from ppdp.releases.custodian import load_custodian as load

    d = learned_releases[1]
    rel = ppdp.load_release(d)
    rel.custodian = load(d.with_name(d.name + ".custodian.json"))
    real = rel.real_counts_from_files()
    types, type_of = rel.real_bucket_types()
    assert np.array_equal(types[type_of], real) and len(np.unique(types, axis=0)) == len(types)
    # a forced hash collision (every row hashed alike) falls back to the sorting unique
    for module in (B, S):
        monkeypatch.setattr(module, "row_hash_multipliers", lambda width: np.zeros(width, dtype=np.uint64))
    types, type_of = rel.real_bucket_types()
    assert np.array_equal(types[type_of], real)

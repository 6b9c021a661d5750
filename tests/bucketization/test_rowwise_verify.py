"""Verify from the files alone of a release with unidentified fakes (σ > 0) above
``DENSE_CELLS`` works over ranges of buckets — the fakes' placement (the receiver's fake
inference), the room for σ fakes, the count bounds, the share tests — instead of
n_buckets × m matrices: the same report (ok, checks, facts, problems) as the matrix path, on
honest releases (F'-privacy and ℓ-diversity, random small tables and settings) and on the
bucketized tamper corpus plus random edits of the ST (a fake moved to a value the rule
forbids there, a value relabelled, a count changed, rows dropped, duplicated or moved to
another bucket). The threshold is forced to 0 so the range path runs on small data."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import ppdp
import ppdp.releases.bucketized as B
from ppdp.claims.fprivacy import privacy_cap
from ppdp.errors import PpdpError, ReleaseError

sys.path.insert(0, str(Path(__file__).parent))
import test_tamper_files as T  # noqa: E402


def _report(d, *source):
    try:
        r = ppdp.verify(d, *source)
    except ReleaseError as e:
        return ("refused", str(e))
    return (r.ok, list(r.checks), dict(r.facts), list(r.problems))


def _both(d, monkeypatch, expect_rowwise=None, source=None):
    """The report (from the files; and with the source table when given) with the matrices and
    over ranges of buckets, which must be equal."""
    out = {}
    for cells in (1 << 62, 0):
        monkeypatch.setattr(B, "DENSE_CELLS", cells)
        if expect_rowwise is not None and cells == 0:
            assert ppdp.load_release(d).rowwise() == expect_rowwise
        out[cells] = _report(d) if source is None else (_report(d), _report(d, source))
    assert out[0] == out[1 << 62]
    return out[0]


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    t = ppdp.datasets.load("edu", n=3000, seed=0)
    rel = ppdp.publish(t, ppdp.FPrivacy(theta=8, fake_values=1), seed=1)
    d = rel.save(tmp_path_factory.mktemp("rowwise") / "rel")
    return d, t


def test_honest_release_takes_the_range_path(saved, monkeypatch):
    d, _ = saved
    rep = _both(d, monkeypatch, expect_rowwise=True)
    assert rep[0] is True and "unidentified" in rep[2]["fake_values"]


@pytest.mark.parametrize("name", [n for n, c in T.CASES.items() if c[1] != "custodian"])
def test_tamper_corpus_same_report(saved, tmp_path, monkeypatch, name):
    d, _ = T._fresh(saved, tmp_path, name)
    T.CASES[name][0](d, saved[1])
    _both(d, monkeypatch, source=saved[1])


def _st(d):
    return pq.read_table(d / "st.parquet")


def _write_st(d, df, like):
    pq.write_table(pa.Table.from_pandas(df, preserve_index=False, schema=like.schema), d / "st.parquet")


def _edit(d, rng, kind):
    """A random edit of the ST that keeps its rows in bucket order (so the range path runs)."""
    t = _st(d)
    st = t.to_pandas()
    sa = [c for c in st.columns if c not in ("bid", "count")][0]
    dom = list(st[sa].cat.categories)
    thr = ppdp.load_release(d).thresholds()
    size = st.groupby("bid")["count"].sum() - int(ppdp.load_release(d).fake_values)
    i = int(rng.integers(len(st)))
    if kind == "forbidden fake":  # a count-1 value turned into one no real record of its bucket could hold
        ones = np.flatnonzero(st["count"].to_numpy() == 1)
        for i in rng.permutation(ones):
            g = st.bid.iloc[i]
            present = set(st[sa][st.bid == g])
            bad = [x for k, x in enumerate(dom) if x not in present and privacy_cap(thr[k], max(int(size[g]), 1)) < 1]
            if bad:
                st.loc[i, sa] = bad[0]
                break
        else:  # (ℓ-diversity: every bucket holds ≥ ℓ records, so no value is forbidden)
            return _edit(d, rng, "relabel")
    elif kind == "relabel":
        g = st.bid.iloc[i]
        absent = [x for x in dom if x not in set(st[sa][st.bid == g])]
        st.loc[i, sa] = absent[int(rng.integers(len(absent)))] if absent else dom[(dom.index(st[sa].iloc[i]) + 1) % len(dom)]
    elif kind == "count":
        st.loc[i, "count"] = max(1, int(st["count"].iloc[i]) + int(rng.choice([-1, 1, 2])))
    elif kind == "drop":
        st = st.drop(index=st.index[i])
    elif kind == "duplicate":  # a row written over the next one of its bucket (the row count kept)
        same = np.flatnonzero(st.bid.to_numpy()[1:] == st.bid.to_numpy()[:-1])
        if not len(same):
            return _edit(d, rng, "count")
        i = int(same[int(rng.integers(len(same)))])
        st.iloc[i + 1] = st.iloc[i]
    elif kind == "move to the next bucket":  # a row moved to the following bucket (rows stay in bucket order)
        nxt = st.bid[st.bid > st.bid.iloc[i]]
        if not len(nxt):
            return _edit(d, rng, "count")
        row = st.iloc[[i]].copy()
        row["bid"] = int(nxt.iloc[0])
        j = int(np.flatnonzero(st.bid.to_numpy() == nxt.iloc[0])[0])
        st = pd_concat([st.iloc[:j].drop(index=st.index[i]), row, st.iloc[j:]])
    _write_st(d, st, t)


def pd_concat(parts):
    import pandas as pd
    return pd.concat(parts)


KINDS = ["forbidden fake", "relabel", "count", "drop", "duplicate", "move to the next bucket"]


@pytest.mark.parametrize("seed", range(6))
def test_random_releases_and_edits_same_report(tmp_path, monkeypatch, seed):
    rng = np.random.default_rng(seed)
    name = ["edu", "occ"][seed % 2]
    t = ppdp.datasets.load(name, n=int(rng.integers(300, 1500)), seed=seed)
    sigma = int(rng.integers(1, 4))
    mech = (ppdp.FPrivacy(theta=float(rng.choice([4.0, 8.0, 16.0])), fake_values=sigma) if seed % 3
            else ppdp.Anatomy(l=int(rng.integers(2, 4)), fake_values=sigma))
    try:
        rel = ppdp.publish(t, mech, seed=seed)
    except PpdpError:
        pytest.skip("infeasible at this size")
    src = rel.save(tmp_path / "src")
    rep = _both(src, monkeypatch, expect_rowwise=True)
    assert rep[0] is True, rep
    must = {"drop", "duplicate", "move to the next bucket"} | ({"forbidden fake"} if isinstance(mech, ppdp.FPrivacy) else set())
    for k, kind in enumerate(KINDS):
        d = tmp_path / f"e{k}"
        shutil.copytree(src, d)
        _edit(d, rng, kind)
        rep = _both(d, monkeypatch, expect_rowwise=True)
        assert rep[0] is not True or kind not in must, kind  # (a count-1 value relabelled may be another valid release)


def test_range_path_builds_no_bucket_by_value_matrix(saved, monkeypatch):
    """Above DENSE_CELLS, verify from the files never calls the matrix builders."""
    d, _ = saved
    monkeypatch.setattr(B, "DENSE_CELLS", 0)

    def refuse(*a, **k):
        raise AssertionError("an n_buckets × m matrix was built")

    for name in ("observed_counts", "fake_excluded", "custodian_fake_matrix", "published_fake_matrix", "real_counts",
                 "real_counts_from_files", "fake_inference", "posterior"):
        monkeypatch.setattr(B.BucketizedRelease, name, refuse)
    assert ppdp.verify(d).ok


def test_streamed_contradictions_equal_fake_inference():
    """On arbitrary counts, thresholds, totals and cuts into chunks: the contradictions of
    :func:`streamed_inference` are those of :func:`fake_inference` on the whole matrix."""
    rng = np.random.default_rng(7)
    for _ in range(400):
        nb, m = int(rng.integers(1, 10)), int(rng.integers(1, 7))
        obs = rng.choice([0, 0, 1, 1, 1, 2, 3], size=(nb, m)).astype(np.int64)
        sizes = rng.integers(1, 9, nb)
        thr = rng.choice([0.1, 0.2, 0.25, 1 / 3, 0.5, 1.0], size=m)
        totals = None if rng.random() < 0.3 else rng.integers(-1, 7, m)
        cuts = sorted(set(rng.integers(1, nb + 1, int(rng.integers(0, 4))).tolist()) | {0, nb})
        whole = B.fake_inference(obs, sizes, thr, None, totals)
        _, got = B.streamed_inference(lambda: ((obs[a:b], sizes[a:b]) for a, b in zip(cuts, cuts[1:])), 1, thr,
                                      [f"v{i}" for i in range(m)], totals)
        assert got is not None
        assert (got["contradictions"], got["bad_buckets"]) == (whole["contradictions"], whole["bad_buckets"])
        assert np.array_equal(got["bad_values"], whole["bad_values"])

"""A file-level tamper corpus for the bucketized family (issue 12, item 2).

A release is saved (F'-privacy on EDU-3000, θ = 8, σ = 1 fake value per bucket, so buckets of
one, fakes and a non-trivial disclosure are all present) and each case below edits the saved
files — Parquet or manifest — or the custodian-side file. Each case says where it is caught:

- ``files``: ``ppdp.verify(dir)`` on the files alone;
- ``source``: only with the source table (``ppdp.verify(dir, table)``);
- ``custodian``: only with the custodian-side file (``ppdp.verify(dir, custodian=path)``);
- ``undetectable``: by design, with the reason — the test proves each such edit really passes
  every verify, so the list cannot hide a miss.

The summary line prints tamperings / detectable / caught.
"""

from __future__ import annotations

import json
import shutil

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import ppdp
from ppdp.releases.readme import render_readme
from ppdp.errors import ReleaseError
from ppdp.releases.custodian import load_custodian

SA = "education"


def _st(d):
    return pq.read_table(d / "st.parquet").to_pandas()


def _qit(d):
    return pq.read_table(d / "qit.parquet").to_pandas()


def _write(d, name, df, schema=None):
    pq.write_table(pa.Table.from_pandas(df, preserve_index=False, schema=schema), d / f"{name}.parquet")


def _manifest(d, edit):
    m = json.loads((d / "manifest.json").read_text())
    edit(m)
    (d / "manifest.json").write_text(json.dumps(m))
    (d / "README.md").write_text(render_readme(m))  # a tamperer rewrites the generated README too


def _custodian(d, edit):
    p = d.with_name(d.name + ".custodian.json")
    c = json.loads(p.read_text())
    edit(c)
    p.write_text(json.dumps(c))


def _fakes(d):
    c = json.loads(d.with_name(d.name + ".custodian.json").read_text())["fake"]
    return set(zip(c["bid"], c["value"]))


def _row(st, d, fake: bool, min_count=1):
    fk = _fakes(d)
    is_fake = np.array([(b, str(v)) in fk for b, v in zip(st.bid, st[SA].astype(str))])
    ok = (is_fake == fake) & (st["count"].to_numpy() >= min_count)
    return int(np.flatnonzero(ok)[0])


# ------------------------------------------------------------------------------ the edits
def st_count_up(d, t):
    st = _st(d)
    st.loc[0, "count"] += 1
    _write(d, "st", st)


def st_count_down(d, t):
    st = _st(d)
    i = int(np.flatnonzero(st["count"].to_numpy() >= 2)[0])
    st.loc[i, "count"] -= 1
    _write(d, "st", st)


def st_count_zero(d, t):
    st = _st(d)
    st.loc[0, "count"] = 0
    _write(d, "st", st)


def st_count_negative(d, t):
    st = _st(d)
    st.loc[0, "count"] = -1
    _write(d, "st", st)


def st_count_float(d, t):
    st = _st(d)
    st["count"] = st["count"].astype(float)
    _write(d, "st", st)


def st_row_dropped(d, t):
    _write(d, "st", _st(d).iloc[1:])


def st_row_duplicated(d, t):
    st = _st(d)
    _write(d, "st", pa.concat_tables([pa.Table.from_pandas(st, preserve_index=False),
                                      pa.Table.from_pandas(st.iloc[:1], preserve_index=False)]).to_pandas())


def st_label_outside_domain(d, t):
    st = _st(d)
    st[SA] = st[SA].astype(str)
    st.loc[0, SA] = "Astronaut"
    _write(d, "st", st)


def st_bucket_concentrated(d, t):
    """One bucket's real values all turned into its most frequent one (totals kept)."""
    st = _st(d)
    sizes = st.groupby("bid")["count"].sum()
    g = sizes[sizes >= 6].index[0]
    rows = st.index[st.bid == g]
    top = st.loc[rows, "count"].idxmax()
    st.loc[top, "count"] = int(st.loc[rows, "count"].sum())
    _write(d, "st", st.drop(index=[r for r in rows if r != top]))


def st_bid_unknown(d, t):
    st = _st(d)
    st.loc[0, "bid"] = 10**9
    _write(d, "st", st)


def qit_row_moved(d, t):
    """One QIT row moved to another bucket."""
    q = _qit(d)
    other = q.bid[q.bid != q.bid.iloc[0]].iloc[0]
    q.loc[0, "bid"] = other
    _write(d, "qit", q)


def qit_rows_swapped(d, t):
    """Two QIT rows of different buckets exchange their buckets (sizes unchanged)."""
    q = _qit(d)
    j = int(np.flatnonzero(q.bid.to_numpy() != q.bid.iloc[0])[0])
    q.loc[0, "bid"], q.loc[j, "bid"] = q.bid.iloc[j], q.bid.iloc[0]
    _write(d, "qit", q)


def qit_row_dropped(d, t):
    _write(d, "qit", _qit(d).iloc[1:])


def qit_qi_label_edited(d, t):
    q = _qit(d)
    q["sex"] = q["sex"].astype(str)
    q.loc[0, "sex"] = "Female" if q.loc[0, "sex"] != "Female" else "Male"
    _write(d, "qit", q)


def bucket_ids_relabelled(d, t):
    """Every bucket id shifted consistently in both files (and the custodian file)."""
    q, st = _qit(d), _st(d)
    q["bid"] += 1000
    st["bid"] += 1000
    _write(d, "qit", q)
    _write(d, "st", st)
    _custodian(d, lambda c: c["fake"].update(bid=[b + 1000 for b in c["fake"]["bid"]]))


def bucket_id_changed_in_qit(d, t):
    """One whole bucket renamed in the QIT only: its ST rows point at no QIT row."""
    q = _qit(d)
    q.loc[q.bid == q.bid.iloc[0], "bid"] = 10**9
    _write(d, "qit", q)


def extra_column_row_id(d, t):
    q = _qit(d)
    q["row_id"] = np.arange(len(q))
    _write(d, "qit", q)


def fake_flag_published(d, t):
    st = _st(d)
    fk = _fakes(d)
    st["fake"] = [(b, str(v)) in fk for b, v in zip(st.bid, st[SA].astype(str))]
    _write(d, "st", st)


def source_added_as_parquet(d, t):
    pq.write_table(pa.Table.from_pandas(t.to_pandas(), preserve_index=False), d / "source.parquet")


def fakes_removed_sigma_zeroed(d, t):
    """The fake rows dropped and σ set to 0 in params and certificate (a real σ = 0 release
    would disclose more than the manifest states)."""
    st = _st(d)
    fk = _fakes(d)
    _write(d, "st", st[[(b, str(v)) not in fk for b, v in zip(st.bid, st[SA].astype(str))]])

    def edit(m):
        m["params"]["fake_values"] = 0
        m["certificate"]["fake_values"] = 0
    _manifest(d, edit)


def fakes_removed(d, t):
    st = _st(d)
    fk = _fakes(d)
    _write(d, "st", st[[(b, str(v)) not in fk for b, v in zip(st.bid, st[SA].astype(str))]])


def fake_turned_real(d, t):
    """A fake's count raised to 2 and a real count-2 value of the same bucket lowered to 1
    (per-bucket totals kept): the fake now poses as a real value. The lowered value is one
    whose total the thresholds reveal (f' < 1) and that is nowhere a fake: its listed total
    then falls below its real total. (With values whose totals nothing reveals, the edit can
    be another valid release.)"""
    st = _st(d)
    fk = _fakes(d)
    thr = json.loads((d / "manifest.json").read_text())["certificate"]["thresholds"]
    faked = {v for _, v in fk}
    is_fake = np.array([(b, str(v)) in fk for b, v in zip(st.bid, st[SA].astype(str))])
    pinned = np.array([thr.get(str(v), 1.0) < 1 and str(v) not in faked for v in st[SA].astype(str)])
    for g in st.bid.unique():
        rows = st.index[st.bid == g]
        f = [r for r in rows if is_fake[r]]
        two = [r for r in rows if not is_fake[r] and st.loc[r, "count"] == 2 and pinned[r]]
        if f and two:
            st.loc[f[0], "count"] += 1
            st.loc[two[0], "count"] -= 1
            break
    else:
        raise AssertionError("no bucket with a fake and a pinned real count-2 value")
    _write(d, "st", st)


def custodian_fake_moved(d, t):
    """The custodian file names a real value listed more than once as the fake (and the fake as
    real). (Swapping the fake with a real count-1 value of its bucket gives another valid fake
    placement: only the source table's SA totals tell them apart.)"""
    st = _st(d)
    fk = _fakes(d)
    c = json.loads(d.with_name(d.name + ".custodian.json").read_text())
    i = next(i for i, (b, v) in enumerate(zip(c["fake"]["bid"], c["fake"]["value"]))
             if ((st.bid == b) & (st[SA].astype(str) != v) & (st["count"] >= 2)).any())
    b0, v0 = c["fake"]["bid"][i], c["fake"]["value"][i]
    real = st[(st.bid == b0) & (st[SA].astype(str) != v0) & (st["count"] >= 2)]
    c["fake"]["value"][i] = str(real[SA].iloc[0])
    assert (b0, v0) in fk
    d.with_name(d.name + ".custodian.json").write_text(json.dumps(c))


def thresholds_all_one(d, t):
    _manifest(d, lambda m: m["certificate"].update(thresholds={k: 1.0 for k in m["certificate"]["thresholds"]}))


def threshold_one_raised(d, t):
    def edit(m):
        thr = m["certificate"]["thresholds"]
        k = min(thr, key=thr.get)
        thr[k] = 1.0
    _manifest(d, edit)


def theta_in_params(d, t):
    _manifest(d, lambda m: m["params"].update(theta=16.0))


def theta_in_params_and_certificate(d, t):
    def edit(m):
        m["params"]["theta"] = 16.0
        m["certificate"]["theta"] = 16.0
    _manifest(d, edit)


def theta_forged_from_listed_totals(d, t):
    """θ raised to 16 everywhere and the thresholds recomputed from the totals the ST lists
    (fakes included — all a forger without the source has)."""
    st = _st(d)
    tot = st.groupby(st[SA].astype(str))["count"].sum()

    def edit(m):
        n = m["n_published"]
        m["params"]["theta"] = m["certificate"]["theta"] = 16.0
        m["certificate"]["thresholds"] = {k: min(1.0, 16.0 * tot.get(k, 0) / n + 0.02) for k in m["certificate"]["thresholds"]}
    _manifest(d, edit)


def claim_weakened_truthfully(d, t):
    """θ raised to 16 and the thresholds re-derived from the source's true counts: the files
    satisfy the stricter θ = 8 thresholds, hence also these — a true, weaker claim."""
    o = t.counts(t.sa)
    dom = t.domain(t.sa)

    def edit(m):
        n = m["n_published"]
        m["params"]["theta"] = m["certificate"]["theta"] = 16.0
        m["certificate"]["thresholds"] = {lab: min(1.0, 16.0 * (int(c) / n) + 0.02) for lab, c in zip(dom, o)}
        m["disclosure"] = None  # recomputed below
    _manifest(d, edit)
    m = json.loads((d / "manifest.json").read_text())
    rel = ppdp.load_release(d)
    m["disclosure"] = ppdp.claims.disclosure_of(rel)
    (d / "manifest.json").write_text(json.dumps(m))
    (d / "README.md").write_text(render_readme(m))  # a tamperer rewrites the generated README too


def floor_in_params_and_certificate(d, t):
    def edit(m):
        m["params"]["floor"] = m["certificate"]["floor"] = 0.05
    _manifest(d, edit)


def disclosure_overstated(d, t):
    _manifest(d, lambda m: m["disclosure"].update(records_certain=m["disclosure"]["records_certain"] + 1))


def disclosure_posterior_lowered(d, t):
    _manifest(d, lambda m: m["disclosure"].update(max_posterior=0.1))


def n_published_edited(d, t):
    def edit(m):
        m["n_published"] += 1
        m["n_input"] += 1
    _manifest(d, edit)


def max_bucket_lowered(d, t):
    _manifest(d, lambda m: m["params"].update(max_bucket=2))


def negative_association_dropped_from_certificate(d, t):
    _manifest(d, lambda m: m["certificate"].update(negative_associations=[["sex", "Male", "Children"]]))


def sa_value_relabelled_within_bucket(d, t):
    """A real value x with count c ≥ 2 relabelled to another value absent from its bucket, x
    having fewer than c fakes in the release: x's listed total then falls below the total its
    threshold reveals. (With c fakes of x or more, the edited ST can describe another valid
    assignment of the fakes — the files alone cannot always tell; the custodian file can.)"""
    st = _st(d)
    st[SA] = st[SA].astype(str)
    dom = t.domain(t.sa)
    fakes_of = pd.Series([v for _, v in _fakes(d)]).value_counts()
    short = st["count"].to_numpy() > st[SA].map(fakes_of).fillna(0).to_numpy()
    i = int(np.flatnonzero((st["count"].to_numpy() >= 2) & short)[0])
    present = set(st[SA][st.bid == st.bid[i]])
    st.loc[i, SA] = next(v for v in dom if v not in present)
    _write(d, "st", st)


def counts_swapped_between_buckets(d, t):
    """One record of x moves from bucket g1 to g2 and one of y from g2 to g1, in the ST only
    (per-bucket and per-value totals kept, every share within its threshold, no fake touched)."""
    st = _st(d)
    st[SA] = st[SA].astype(str)
    fk = _fakes(d)
    thr = json.loads((d / "manifest.json").read_text())["certificate"]["thresholds"]
    size = st.groupby("bid")["count"].sum() - 1  # σ = 1
    real = {(b, v): i for i, (b, v) in enumerate(zip(st.bid, st[SA])) if (b, v) not in fk}
    by_bucket: dict = {}
    for (b, v), i in real.items():
        by_bucket.setdefault(b, {})[v] = i
    buckets = [b for b, vals in by_bucket.items() if len(vals) >= 2]
    for g1 in buckets:
        for g2 in buckets:
            if g1 == g2 or size[g1] != size[g2]:
                continue
            for x in by_bucket[g1]:
                for y in by_bucket[g1]:
                    if x == y or x not in by_bucket[g2] or y not in by_bucket[g2]:
                        continue
                    i, j = by_bucket[g1][x], by_bucket[g2][y]
                    i2, j2 = by_bucket[g2][x], by_bucket[g1][y]
                    S = size[g1]
                    if st["count"][i] >= 2 and st["count"][j] >= 2 and (st["count"][i2] + 1) / S <= thr[x] \
                            and (st["count"][j2] + 1) / S <= thr[y]:
                        st.loc[i, "count"] -= 1
                        st.loc[i2, "count"] += 1
                        st.loc[j, "count"] -= 1
                        st.loc[j2, "count"] += 1
                        _write(d, "st", st)
                        return
    raise AssertionError("no pair of buckets to swap in")


def disclosure_removed(d, t):
    _manifest(d, lambda m: m.pop("disclosure"))


#: name → (edit, where it is caught, reason when undetectable by design)
CASES = {
    "st count +1": (st_count_up, "files", None),
    "st count −1": (st_count_down, "files", None),
    "st count 0": (st_count_zero, "files", None),
    "st count negative": (st_count_negative, "files", None),
    "st count as float": (st_count_float, "files", None),
    "st row dropped": (st_row_dropped, "files", None),
    "st row duplicated": (st_row_duplicated, "files", None),
    "st label outside the domain": (st_label_outside_domain, "files", None),
    "st bucket concentrated on one value": (st_bucket_concentrated, "files", None),
    "st bid unknown": (st_bid_unknown, "files", None),
    "qit row moved to another bucket": (qit_row_moved, "files", None),
    "qit row dropped": (qit_row_dropped, "files", None),
    "qit bucket id changed (qit only)": (bucket_id_changed_in_qit, "files", None),
    "qit extra column row_id": (extra_column_row_id, "files", None),
    "st fake flag published": (fake_flag_published, "files", None),
    "raw source added as source.parquet": (source_added_as_parquet, "files", None),
    "fakes removed": (fakes_removed, "files", None),
    "fakes removed, σ set to 0": (fakes_removed_sigma_zeroed, "files", None),
    "thresholds raised to 1.0": (thresholds_all_one, "files", None),
    "one threshold raised to 1.0": (threshold_one_raised, "files", None),
    "params.theta changed": (theta_in_params, "files", None),
    "theta changed in params and certificate": (theta_in_params_and_certificate, "files", None),
    "theta and thresholds forged from the listed totals": (theta_forged_from_listed_totals, "files", None),
    "floor changed in params and certificate": (floor_in_params_and_certificate, "files", None),
    "disclosure removed from the manifest": (disclosure_removed, "files", None),
    "disclosure overstated": (disclosure_overstated, "files", None),
    "disclosure max posterior lowered": (disclosure_posterior_lowered, "files", None),
    "n_published / n_input edited": (n_published_edited, "files", None),
    "params.max_bucket lowered": (max_bucket_lowered, "files", None),
    "certificate negative association added": (negative_association_dropped_from_certificate, "files", None),
    "qit QI label edited": (qit_qi_label_edited, "source", None),
    "fake turned real (count 2, a real value lowered to 1)": (fake_turned_real, "files", None),
    "custodian file names a real value as the fake": (custodian_fake_moved, "custodian", None),
    "st value relabelled within its bucket": (sa_value_relabelled_within_bucket, "files", None),
    "bucket ids relabelled consistently": (
        bucket_ids_relabelled, "undetectable",
        "bucket ids are arbitrary labels (the writer draws them at random); renaming them in every file changes "
        "nothing the release states"),
    "qit rows swapped between buckets": (
        qit_rows_swapped, "undetectable",
        "which person sits in which bucket is exactly what the release hides; a swap keeps every size, share and QI "
        "multiset, so it is another valid bucketization of the same table"),
    "st counts swapped between buckets": (
        counts_swapped_between_buckets, "undetectable",
        "moving one x from g1 to g2 and one y back keeps every bucket total, value total and share within the "
        "thresholds: the files describe another valid bucketization; the release carries no row-level commitment"),
    "claim weakened truthfully (θ 8 → 16 from the true counts)": (
        claim_weakened_truthfully, "undetectable",
        "the files meet the θ = 8 thresholds, hence the larger θ = 16 ones: the edited claim is true (and weaker)"),
}


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    t = ppdp.datasets.load("edu", n=3000, seed=0)
    rel = ppdp.publish(t, ppdp.FPrivacy(theta=8, fake_values=1), seed=1)
    base = tmp_path_factory.mktemp("tamper")
    d = rel.save(base / "rel")
    assert ppdp.verify(d).ok and ppdp.verify(d, t).ok
    assert ppdp.verify(d, t, custodian=d.with_name("rel.custodian.json")).ok
    return d, t


def _fresh(saved, tmp_path, name):
    src, t = saved
    d = tmp_path / "rel"
    shutil.copytree(src, d)
    # the custodian file in its inline form (fakes listed in the JSON; still read), for the edits below
    kept = load_custodian(src.with_name(src.name + ".custodian.json"))
    kept["fake"] = kept["fake"].to_json()
    d.with_name(d.name + ".custodian.json").write_text(json.dumps(kept))
    return d, t


def _verdicts(d, t) -> dict[str, bool]:
    """ok per verify mode (a crash is a failure of the test, not a verdict)."""
    cust = d.with_name(d.name + ".custodian.json")
    def ok(*args, **kw) -> bool:
        try:
            return ppdp.verify(*args, **kw).ok
        except ReleaseError:  # refused at load (e.g. row counts against the manifest): caught
            return False

    return {"files": ok(d), "source": ok(d, t), "custodian": ok(d, custodian=cust), "source+custodian": ok(d, t, custodian=cust)}


_RESULTS: dict[str, tuple[str, bool]] = {}


@pytest.mark.parametrize("name", list(CASES))
def test_tampering(saved, tmp_path, name):
    edit, where, why = CASES[name]
    d, t = _fresh(saved, tmp_path, name)
    edit(d, t)
    ok = _verdicts(d, t)
    if where == "undetectable":
        assert why and all(ok.values()), f"{name}: listed as undetectable but caught ({ok}); update the corpus"
        _RESULTS[name] = (where, True)
        return
    strongest = ok["source+custodian"]
    caught_where = not ok[where]
    _RESULTS[name] = (where, caught_where and not strongest)
    assert not strongest, f"{name}: verify accepts it even with the source table and the custodian file"
    assert caught_where, f"{name}: expected to be caught by verify with {where}, verdicts {ok}"
    if where != "files":  # say honestly that the files alone do not reveal it
        assert ok["files"], f"{name}: the files alone catch it; list it as 'files'"


def test_corpus_summary():
    """Runs last in this module: tamperings / detectable / caught (and the undetectable ones)."""
    assert len(CASES) >= 25
    if len(_RESULTS) < len(CASES):
        pytest.skip("run with the whole module for the summary")
    undetectable = [n for n, (w, _) in _RESULTS.items() if w == "undetectable"]
    detectable = [n for n, (w, _) in _RESULTS.items() if w != "undetectable"]
    caught = [n for n in detectable if _RESULTS[n][1]]
    by = {w: sum(1 for n in detectable if _RESULTS[n][0] == w) for w in ("files", "source", "custodian", "source+custodian")}
    print(f"\nbucketized tamper corpus: {len(CASES)} tamperings, {len(detectable)} detectable, {len(caught)} caught "
          f"(files alone {by['files']}, with the source {by['source']}, with the custodian file {by['custodian']}, "
          f"with both {by['source+custodian']}); undetectable by design: {len(undetectable)}")
    for n in undetectable:
        print(f"  undetectable: {n} — {CASES[n][2]}")
    assert len(caught) == len(detectable)

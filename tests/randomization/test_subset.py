"""k-subset selection under ε-LDP: the channel's formulas and draw, the choice of k, the claim
against (ρ1, ρ2)-privacy, publish → save → load → verify → query → audit through the API and
the CLI, tampering caught by verify, unbiasedness of the inversion against a real table's true
counts, bad input."""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

import ppdp
from ppdp.audit.posterior import audit_release
from ppdp.claims import state_disclosure
from ppdp.cli import cli
from ppdp.errors import ParameterError
from ppdp.kernels.subset import (draw_subsets, inclusion_probabilities, optimal_k, posterior_bound, rare_variance,
                                 set_count_moments)
from ppdp.kernels.transition import gamma_for, posterior_retained
from ppdp.queries.workload import Workload
from ppdp.queries.workloads import point_workload


@pytest.fixture(scope="module")
def occ():
    return ppdp.datasets.load("occ", n=20_000, seed=0)


@pytest.fixture(scope="module")
def release(occ):
    return ppdp.publish(occ, ppdp.SubsetSelection(rho1=0.1, rho2=0.3), seed=5)


# ------------------------------------------------------------------------------- the channel
def test_report_probabilities_by_enumeration():
    """P(Y | x) of every k-set from the sampler's definition: e^ε/Z if x ∈ Y else 1/Z; p and q
    and the LDP ratio follow; the draw matches them (binomial tolerance, fixed seed)."""
    m, k, eps = 6, 2, 1.1
    sets = list(itertools.combinations(range(m), k))
    Z = sum(math.exp(eps) if 0 in s else 1.0 for s in sets)
    p, q = inclusion_probabilities(m, k, eps)
    assert sum(math.exp(eps) / Z for s in sets if 0 in s) == pytest.approx(p)
    assert sum((math.exp(eps) if 0 in s else 1.0) / Z for s in sets if 1 in s) == pytest.approx(q)
    rng = np.random.default_rng(0)
    n = 200_000
    Y = draw_subsets(np.zeros(n, dtype=np.int64), m, k, eps, rng)
    assert (np.diff(Y, axis=1) > 0).all()
    freq = {s: 0 for s in sets}
    for s, c in zip(*np.unique(Y, axis=0, return_counts=True)):
        freq[tuple(int(v) for v in s)] = int(c)
    for s in sets:
        want = (math.exp(eps) if 0 in s else 1.0) / Z
        assert abs(freq[s] / n - want) < 5 * math.sqrt(want * (1 - want) / n), s


def test_set_count_moments_against_simulation():
    m, k, eps, S = 10, 3, 1.35, np.array([2, 5, 7])
    rng = np.random.default_rng(1)
    n = 100_000
    for x, which in ((5, 0), (1, 2)):
        Y = draw_subsets(np.full(n, x), m, k, eps, rng)
        hits = np.isin(Y, S).sum(axis=1)
        mom = set_count_moments(m, k, eps, len(S))
        mean, var = mom[which], mom[which + 1]
        assert abs(hits.mean() - mean) < 5 * math.sqrt(var / n)
        assert hits.var() == pytest.approx(var, rel=0.03)


def test_optimal_k_is_the_variance_minimiser_near_m_over_e_plus_one():
    for m, eps in ((46, math.log(gamma_for(0.1, 0.3))), (17, math.log(4.0)), (2, 1.0), (100, 0.5), (8, 3.0)):
        k = optimal_k(m, eps)
        assert rare_variance(m, k, eps) == min(rare_variance(m, j, eps) for j in range(1, m))
        assert abs(k - m / (math.exp(eps) + 1)) <= 1.0
    assert optimal_k(46, math.log(gamma_for(0.1, 0.3))) == 9
    # against uniform perturbation (k = 1) at the same ε on OCC's 46 occupations: 3.3× less variance
    eps = math.log(gamma_for(0.1, 0.3))
    assert rare_variance(46, 1, eps) / rare_variance(46, 9, eps) == pytest.approx(3.32, abs=0.01)


def test_guarantee_matches_rho1_rho2_privacy():
    """ε = ln γ(ρ1, ρ2): a prior-ρ1 value's worst posterior is exactly ρ2, as under uniform perturbation."""
    for rho1, rho2 in ((0.1, 0.3), (0.2, 0.5), (0.05, 0.4)):
        g = float(gamma_for(rho1, rho2))
        assert posterior_bound(rho1, math.log(g)) == pytest.approx(rho2)
        assert posterior_bound(rho1, math.log(g)) == pytest.approx(posterior_retained(rho1, g))
    assert math.log(gamma_for(0.1, 0.3)) == pytest.approx(1.3499, abs=1e-4)
    # brute force: the largest posterior of value 0 over every report of a 5-value channel
    m, k, eps = 5, 2, math.log(gamma_for(0.1, 0.3))
    prior = np.array([0.1, 0.0001, 0.0001, 0.0001, 0.8997])
    best = max(prior[0] * (math.exp(eps) if 0 in s else 1) / sum(prior[v] * (math.exp(eps) if v in s else 1) for v in range(m))
               for s in itertools.combinations(range(m), k))
    assert best <= 0.3 + 1e-12 and best == pytest.approx(0.3, abs=1e-3)


# ------------------------------------------------------------------------------- end to end
def test_publish_save_load_verify_query(release, occ, tmp_path):
    c = release.certificate
    assert c["model"] == "local differential privacy" and c["k"] == 9 and c["m"] == 46
    assert c["epsilon"] == pytest.approx(math.log(gamma_for(0.1, 0.3)))
    assert c["posterior_at_rho1"] == pytest.approx(0.3)
    assert release.family == "ldp" and release.data.num_rows == 9 * occ.n_rows
    assert release.manifest["disclosure"]["records_certain"] == 0
    assert 0 < release.manifest["disclosure"]["max_posterior"] < 1
    release.save(tmp_path / "r")
    rep = ppdp.verify(tmp_path / "r", occ)
    assert rep.ok, rep.problems
    loaded = ppdp.load_release(tmp_path / "r")
    wl = point_workload(occ, 300, seed=1)
    assert np.allclose(loaded.answer(wl), release.answer(wl))
    E = loaded.estimate(wl)
    assert E.kind == "confidence" and (E.lower <= E.estimate).all() and (E.estimate <= E.upper).all()
    assert (E.estimate >= 0).all()
    res = audit_release(loaded, occ)
    assert res.ok and res.n_violations == 0


def test_unbiased_inversion_against_true_counts(occ):
    """The inversion's mean over 30 releases equals the true counts (|mean − truth| ≤ 4 se of the
    mean, se from the closed-form variance), on OCC's real counts."""
    wl = point_workload(occ, 92, seed=3)
    true = ppdp.queries.answer_exact(occ, wl)
    mech = ppdp.SubsetSelection(rho1=0.1, rho2=0.3)
    ests, ses = [], []
    for s in range(30):
        E = ppdp.publish(occ, mech, seed=100 + s).estimate(wl, estimator="inversion")
        ests.append(E.estimate)
        ses.append(E.se)
    ests, ses = np.array(ests), np.array(ses)
    z = (ests.mean(axis=0) - true) / (ses.mean(axis=0) / math.sqrt(len(ests)))
    assert np.abs(z).max() < 4.5, z
    # the closed-form se is the spread across releases (within sampling error of 30 draws)
    ratio = ests.std(axis=0, ddof=1) / ses.mean(axis=0)
    assert 0.8 < float(np.median(ratio)) < 1.2


def test_cli_publish_verify_query_audit(tmp_path):
    r = CliRunner()
    out = str(tmp_path / "rel")
    res = r.invoke(cli, ["publish", "subset", "--dataset", "occ", "-n", "3000", "--rho1", "0.2", "--rho2", "0.5",
                         "--out", out])  # no seed: fit for publication, verify exits 0
    assert res.exit_code == 0, res.output
    res = r.invoke(cli, ["verify", out, "--dataset", "occ", "-n", "3000"])
    assert res.exit_code == 0 and "verify: OK" in res.output, res.output
    res = r.invoke(cli, ["query", out, "WHERE sex = 'Female' AND occupation = '2'"])
    assert res.exit_code == 0 and "estimate" in res.output, res.output
    res = r.invoke(cli, ["audit", out, "--out", str(tmp_path / "aud")])
    assert res.exit_code == 0 and "no violations" in res.output, res.output
    man = json.loads((tmp_path / "rel" / "manifest.json").read_text())
    assert man["certificate"]["epsilon"] == pytest.approx(math.log(4.0))


@pytest.mark.parametrize("args,flag", [(["--rho1", "0.1"], "--rho1"), (["--rho1", "0.3", "--rho2", "0.2"], "--rho2"),
                                       (["--epsilon", "1", "--rho1", "0.1", "--rho2", "0.3"], "--epsilon"),
                                       (["--epsilon", "1", "--k", "46"], "--k"), (["--epsilon", "-1"], "--epsilon")])
def test_bad_input(args, flag, tmp_path):
    res = CliRunner().invoke(cli, ["publish", "subset", "--dataset", "occ", "-n", "500", *args, "--out", str(tmp_path / "x")])
    assert res.exit_code == 2 and flag in res.output and "Traceback" not in res.output, res.output
    assert not (tmp_path / "x").exists()


def test_bad_parameters_in_python():
    with pytest.raises(ParameterError):
        ppdp.SubsetSelection(rho1=0.1)
    with pytest.raises(ParameterError):
        ppdp.SubsetSelection(epsilon=1.0, k=0)


# ------------------------------------------------------------------------------- tampering
def _rewrite(d, fn):
    t = pq.read_table(d / "data.parquet")
    pq.write_table(fn(t), d / "data.parquet")


def _tampered(release, tmp_path, name, edit_manifest=None, edit_data=None):
    d = tmp_path / name
    release.save(d)
    if edit_manifest:
        m = json.loads((d / "manifest.json").read_text())
        edit_manifest(m)
        (d / "manifest.json").write_text(json.dumps(m))
    if edit_data:
        _rewrite(d, edit_data)
    return d


def _swap_sa(t, fn):
    col = t.column("occupation").combine_chunks()
    codes = col.indices.to_numpy(zero_copy_only=False).copy()
    new = pa.DictionaryArray.from_arrays(pa.array(fn(codes)), col.dictionary)
    return t.set_column(t.schema.get_field_index("occupation"), "occupation", new)


def test_tampering_is_caught(release, occ, tmp_path):
    def k_up(m):
        m["certificate"]["k"] = 10
    def eps_down(m):
        m["certificate"]["epsilon"] = 1.0
    def repeat_value(t):  # one report holds a value twice
        return _swap_sa(t, lambda c: np.concatenate([[c[1]], c[1:]]))
    def unrandomized(t):  # every report made to hold the record's value? here: reports shifted to one value
        def f(c):
            c = c.reshape(-1, 9)
            c[:, 0] = 0
            c.sort(axis=1)
            return c.ravel()
        return _swap_sa(t, f)
    def drop_record(t):
        return t.slice(0, t.num_rows - 9)
    for name, em, ed in (("k", k_up, None), ("eps", eps_down, None), ("dup", None, repeat_value),
                         ("unrand", None, unrandomized), ("drop", None, drop_record)):
        d = _tampered(release, tmp_path, name, em, ed)
        try:
            rep = ppdp.verify(d, occ)
        except ppdp.errors.ReleaseError:
            continue  # refused to load: caught
        assert not rep.ok, name


def test_source_fit_catches_an_unrandomized_report(occ, tmp_path):
    """A release whose reports always hold the record's own value (p = 1 instead of the declared
    p) passes the file checks but fails the fit against the source (control: the honest release fits)."""
    mech = ppdp.SubsetSelection(rho1=0.1, rho2=0.3)
    rel = ppdp.publish(occ, mech, seed=9)
    assert ppdp.verify(rel, occ).ok
    x = np.asarray(occ.codes(occ.sa), dtype=np.int64)
    rng = np.random.default_rng(0)
    Y = draw_subsets(x, 46, 9, 50.0, rng)  # ε = 50: the own value always reported
    bad = ppdp.publish(occ, mech, seed=9)
    order = np.argsort(np.asarray(bad.data.column("record").to_numpy())[::9])  # records in order already
    assert (order == np.arange(len(order))).all()
    # the honest release's QI rows with reports of the true values: rebuild the SA column record by record
    rec_qi = np.stack([bad.column_codes(c)[::9] for c in occ.quasi], axis=1)
    src_qi = np.stack([np.asarray(occ.codes(c)) for c in occ.quasi], axis=1)
    s_order = np.lexsort(src_qi.T[::-1])
    r_order = np.lexsort(rec_qi.T[::-1])
    Yr = np.empty_like(Y)
    Yr[r_order] = Y[s_order]
    col = bad.data.column("occupation").combine_chunks()
    bad.tables["data"] = bad.data.set_column(bad.data.schema.get_field_index("occupation"), "occupation",
                                             pa.DictionaryArray.from_arrays(pa.array(Yr.ravel().astype(np.int16)),
                                                                            col.dictionary))
    bad.__dict__.pop("_ldp_cache", None)
    state_disclosure(bad)  # the manifest states what these files disclose: only the fit can tell
    rep = ppdp.verify(bad, occ)
    assert not rep.ok and any("fit the declared channel" in p for p in rep.problems), rep.problems


def test_a_row_in_evaluate(tmp_path):
    """``ppdp.evaluate`` compares subset selection with uniform perturbation at the same (ρ1, ρ2):
    one row each, with the claim, the audited largest posterior (≤ ρ2 on the prior-≤ρ1 values) and the error."""
    from ppdp.evaluate import evaluate

    t = ppdp.datasets.load("occ", n=20_000, seed=0)
    res = evaluate(t, ["uniform:rho1=0.1,rho2=0.3", "subset:rho1=0.1,rho2=0.3"], workload="point", n_queries=600,
                   trials=2, out_dir=tmp_path / "ev", progress=False)
    models = res["models"] if isinstance(res, dict) else res.models
    row = models.set_index("name").loc["subset"]
    assert row["family"] == "ldp" and "local differential privacy" in row["claim"]
    assert row["records_certain"] == 0 and 0 < row["max_posterior"] < 1
    assert np.isfinite(row["mean_rel_err"])
    assert (tmp_path / "ev" / "report.html").exists()


def test_readme_recipe_reproduces_the_inversion(release, tmp_path):
    """The release README's SQL recipe, run with DuckDB on data.parquet, gives ppdp's inversion."""
    import os
    import re

    duckdb = pytest.importorskip("duckdb")
    d = tmp_path / "r"
    release.save(d)
    text = (d / "README.md").read_text()
    sql = re.findall(r"```sql\n(.*?)```", text, flags=re.S)[0]
    assert "\"age\" = '" in sql and "\"occupation\" = '" in sql
    for qi, lab, v in (("sex", "Female", "2"), ("race", "White", "19"), ("education", "Bachelors degree(BA AB BS)", "8")):
        s = re.sub(r"\"age\" = '[^']*'", f"\"{qi}\" = '{lab}'", sql)
        s = re.sub(r"\"occupation\" = '[^']*'", f"\"occupation\" = '{v}'", s)
        cwd = os.getcwd()
        os.chdir(d)
        try:
            got = float(duckdb.sql(s).fetchall()[0][0])
        finally:
            os.chdir(cwd)
        want = release.count(f"{qi} = '{lab}' AND occupation = '{v}'", estimator="inversion")
        assert got == pytest.approx(want, rel=1e-9, abs=1e-9)


def test_value_sets_and_queries_without_the_sensitive_attribute(release, occ):
    """A query on QI only is the exact record count (zero variance); an IN over several values
    is the sum of the per-value estimates, with the set's own variance (covariances included)."""
    E = release.estimate(["sex = 'Female'", "sex = 'Female' AND occupation IN ('2', '8', '19')"], estimator="inversion")
    n_f = float(ppdp.queries.answer_exact(occ, ["sex = 'Female'"])[0])
    assert E.estimate[0] == pytest.approx(n_f) and E.se[0] == pytest.approx(0.0, abs=1e-3)
    parts = release.answer([f"sex = 'Female' AND occupation = '{v}'" for v in ("2", "8", "19")], estimator="inversion")
    assert E.estimate[1] == pytest.approx(parts.sum())
    _, var_in, _, var_out = set_count_moments(46, 9, release.certificate["epsilon"], 3)
    p, q = inclusion_probabilities(46, 9, release.certificate["epsilon"])
    x = min(max(E.estimate[1], 0.0), n_f)
    assert E.se[1] == pytest.approx(math.sqrt(x * var_in + (n_f - x) * var_out) / (p - q))


def test_safe_by_default_disclosure(release, occ, tmp_path):
    """The refusal of ``publish`` reads the claim's disclosure: none with certainty, so a release
    declaring sensitive values passes; a manifest understating the largest posterior fails verify."""
    rel = ppdp.publish(occ, ppdp.SubsetSelection(epsilon=2.0), seed=1, sensitive_values=["2", "8"])
    d = rel.manifest["disclosure"]
    assert d["records_certain"] == 0 and d["sensitive_values"] == ["2", "8"] and not d.get("disclosure_allowed")
    assert ppdp.verify(rel, occ).ok

    def understate(m):
        m["disclosure"]["max_posterior"] = m["disclosure"]["max_posterior"] / 2
    rep = ppdp.verify(_tampered(release, tmp_path, "disc", understate), occ)
    assert not rep.ok and any("understates" in p for p in rep.problems), rep.problems


def test_eb_is_workload_independent_and_uses_parents(release, occ):
    """The default's estimate of a query does not depend on the other queries of the workload (its
    predicate's parents are its own sub-predicates, fitted from the release whatever else is asked),
    and its parents are not all the whole table (a two- or three-condition predicate on OCC is
    explained better by a sub-predicate's distribution)."""
    from ppdp.estimators.subset import SubsetSetup
    from ppdp.estimators.subset_eb import WIDEN, PredicateLattice, lattice_fit, ordered_columns

    wl = point_workload(occ, 600, seed=4)
    full = release.estimate(wl).estimate
    m = len(occ.domain(occ.sa))
    for part in (slice(0, m), slice(2 * m, 5 * m), slice(len(wl) - m, None)):
        sub = Workload(list(wl)[part])
        assert np.allclose(release.estimate(sub).estimate, full[part], rtol=1e-9, atol=1e-9)
    S = SubsetSetup(release, wl)
    ordered = ordered_columns(release)
    assert ordered["age"] and not ordered["sex"]
    L = PredicateLattice(S.reps, ordered, WIDEN)
    assert L.level.max() >= 2 and (L.parents[L.level >= 2] >= 0).sum() > 0
    # wider parents: an age condition widened by each half-width, same level, fitted in an earlier wave
    has = np.flatnonzero((L.wider >= 0).any(axis=1))
    assert len(has) > 0 and all("age" in L.masks[u] for u in has)
    for u in has:
        for w in L.wider[u][L.wider[u] >= 0]:
            assert L.level[w] == L.level[u] and L.wave[w] < L.wave[u]
            assert (L.masks[w]["age"] >= L.masks[u]["age"]).all() and L.masks[w]["age"].sum() > L.masks[u]["age"].sum()
    idx = release.support_index(sorted({c for mk in L.masks for c in mk}))
    C = np.asarray(idx.sums(L.masks), dtype=np.float64)
    X, chosen = lattice_fit(C, C.sum(axis=1) / S.k, S.p, S.q, S.whole_table(), L)
    multi = L.level >= 2
    assert (chosen[multi] != -1).mean() > 0.3  # most multi-condition predicates leave the whole table
    assert np.allclose(X.sum(axis=1), C.sum(axis=1) / S.k) and (X >= 0).all()


def test_eb_siblings_are_the_column_s_other_values_and_closer_than_the_table(release, occ):
    """A one-condition predicate selecting one value of an unordered column is offered, as parents,
    the column's other values (each fitted towards the whole table), never an ordered column's;
    where the marginal likelihood picks one, that sibling's distribution is closer to the
    predicate's TRUE distribution than the whole table's is (OCC sample, summed L1 distance)."""
    from ppdp.estimators.subset import SubsetSetup
    from ppdp.estimators.subset_eb import (WIDEN, PredicateLattice, lattice_fit, ordered_columns, sibling_distributions,
                                           siblings_of)

    wl = point_workload(occ, 600, seed=4)
    S = SubsetSetup(release, wl)
    ordered = ordered_columns(release)
    L = PredicateLattice(S.reps, ordered, WIDEN)
    masks, index = siblings_of(L, ordered)
    served = np.flatnonzero((index >= 0).any(axis=1))
    assert len(served) > 0
    for u in served:
        ((c, own),) = L.masks[u].items()
        assert L.level[u] == 1 and not ordered[c] and own.sum() == 1
        sib = [masks[j] for j in index[u][index[u] >= 0]]
        assert all(list(mk) == [c] and mk[c].sum() == 1 for mk in sib)
        cover = own.astype(int) + sum(mk[c].astype(int) for mk in sib)
        assert (cover == 1).all()  # every other value once, its own not
    # the fit with the siblings: which predicates take one, and how close their prior is to the truth
    idx = release.support_index(sorted({c for mk in L.masks for c in mk}))
    C = np.asarray(idx.sums(L.masks + masks), dtype=np.float64)
    C, Cs = C[: len(L.masks)], C[len(L.masks):]
    pi0 = S.whole_table()
    dist = sibling_distributions(Cs, S.k, S.p, S.q, pi0)
    P = np.zeros(C.shape)
    _, chosen = lattice_fit(C, C.sum(axis=1) / S.k, S.p, S.q, pi0, L, prior_out=P, siblings=(dist, index))
    took = np.flatnonzero(chosen == -3)
    assert len(took) > 0 and set(took) <= set(served)
    sa = occ.codes(occ.sa)
    gain = []
    for u in took:
        ((c, own),) = L.masks[u].items()
        truth = np.bincount(sa[own[occ.codes(c)]], minlength=len(pi0)).astype(float)
        truth /= truth.sum()
        gain.append(np.abs(pi0 - truth).sum() - np.abs(P[u] - truth).sum())
    assert np.mean(gain) > 0


def test_a_query_selecting_every_value_is_its_records(release, occ):
    """A query with no condition on the sensitive attribute counts its predicate's records, which
    the release gives exactly (each report holds k values): every estimator returns that count
    with a zero-width interval, the guarded default included (it lowers counts value by value)."""
    from ppdp.queries.parser import parse_where

    q, d = occ.quasi, occ.domain
    wl = Workload([parse_where(f"{q[0]} = '{d(q[0])[0]}'"),
                   parse_where(f"{q[0]} IN ('{d(q[0])[0]}', '{d(q[0])[1]}') AND {q[1]} = '{d(q[1])[0]}'"),
                   parse_where(f"{q[1]} = '{d(q[1])[-1]}'")])
    true = ppdp.queries.answer_exact(occ, wl)
    assert (true > 0).all()
    for est in (None, "norm-sub", "mle", "inversion", "full-mle"):
        E = release.estimate(wl, estimator=est)
        assert np.allclose(E.estimate, true), est
        assert np.allclose(E.lower, true) and np.allclose(E.upper, true), est

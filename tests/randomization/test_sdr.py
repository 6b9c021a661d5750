"""SDR release: posterior audit (exact, from the published parameters, on OCC and EDU; and by
simulation), unbiased reconstruction, verify, SDR vs uniform, bad input (API and CLI)."""

import numpy as np
import pytest
from click.testing import CliRunner

import ppdp
from ppdp.claims import disclosure_of
from ppdp.releases.readme import render_readme
from ppdp.cli import cli
from ppdp.errors import PpdpError
from ppdp.mechanisms.randomization.uniform import posterior_retained
from ppdp.queries import answer_exact
from ppdp.table import Table

SETTINGS = [(0.1, 0.3), (0.1, 0.5), (0.2, 0.5), (0.2, 0.8), (0.3, 0.8)]


@pytest.fixture(scope="module")
def real():
    return {name: ppdp.datasets.load(name) for name in ("occ", "edu")}


@pytest.mark.parametrize("name", ["occ", "edu"])
def test_posterior_audit_real(real, name):
    t = real[name]
    counts = t.counts(t.sa)
    for rho1, rho2 in SETTINGS:
        mech = ppdp.SDR(rho1, rho2)
        rel = ppdp.publish(t, mech, seed=0)
        plan = mech.plan(t.counts(t.sa))  # the sub-tables' true SA counts (counts only, deterministic)
        C, sap = plan.counts, plan.sa_prime
        sts = rel.certificate["subtables"]
        assert len(sts) == len(C) and (C.sum(axis=0) == counts).all()
        sub = rel.data.column("subtable").to_numpy()
        for j, st in enumerate(sts):
            assert st["n"] == C[j].sum() == (sub == j).sum()
            assert st["m"] == np.count_nonzero(C[j])
            prior = C[j][sap] / C[j].sum()  # every SA' value, its prior inside the sub-table
            post = posterior_retained(prior, st["gamma"])
            assert post.max() <= rho2 + 1e-12, (name, rho1, rho2, j)
            assert np.isclose(st["rho1"], prior.max())
        rep = ppdp.verify(rel, t)
        assert rep.ok, rep.problems


def _small(n=600, seed=0, m=6):
    rng = np.random.default_rng(seed)
    probs = np.array([0.3, 0.2, 0.15, 0.15, 0.12, 0.08])[:m]
    sa = rng.choice(m, size=n, p=probs / probs.sum())
    cols = {"rid": np.arange(n), "a": rng.integers(0, 4, n), "b": rng.integers(0, 3, n), "s": sa}
    doms = {"rid": [str(i) for i in range(n)], "a": list("pqrs"), "b": list("xyz"), "s": [f"v{i}" for i in range(m)]}
    return Table(cols, doms, quasi=("rid", "a", "b"), sensitive=("s",))


def test_posterior_by_simulation():
    """Empirical P(X = x | Y = x) per sub-table matches the exact posterior and stays ≤ ρ2."""
    t = _small()
    rho1, rho2 = 0.2, 0.5
    mech = ppdp.SDR(rho1, rho2)
    plan = mech.plan(t.counts(t.sa))
    C, sap = plan.counts, plan.sa_prime
    J, m = C.shape
    hits = np.zeros((J, m))
    seen = np.zeros((J, m))
    src = t.codes("s")
    for seed in range(60):
        rel = ppdp.publish(t, mech, seed=seed)
        rid = rel.column_codes("rid")
        y = rel.column_codes("s")
        sub = rel.data.column("subtable").to_numpy()
        np.add.at(seen, (sub, y), 1)
        np.add.at(hits, (sub, y), (src[rid] == y))
    sts = rel.certificate["subtables"]
    checked = 0
    for j, st in enumerate(sts):
        for x in np.flatnonzero(sap & (C[j] > 0)):
            exact = posterior_retained(C[j, x] / C[j].sum(), st["gamma"])
            emp = hits[j, x] / seen[j, x]
            se = np.sqrt(exact * (1 - exact) / seen[j, x])
            assert exact <= rho2 + 1e-12
            assert abs(emp - exact) <= 4.5 * se + 1e-9, (j, x, emp, exact)
            assert emp <= rho2 + 4.5 * se
            checked += 1
    assert checked >= 6


@pytest.mark.slow
def test_reconstruction_unbiased():
    t = _small(n=800, seed=3)
    wl = ["s = 'v0'", "s IN ('v1', 'v4')", "a = 'p' AND s = 'v2'", "a IN ('q','r') AND b = 'y' AND s IN ('v3','v5')",
          "b = 'z'", "a = 's' AND s IN ('v0','v1','v2')"]
    exact = answer_exact(t, wl)
    reps = 150
    est = np.array([ppdp.publish(t, ppdp.SDR(0.2, 0.6), seed=s).answer(wl, estimator="inversion") for s in range(reps)])
    se = est.std(axis=0, ddof=1) / np.sqrt(reps)
    z = (est.mean(axis=0) - exact) / np.maximum(se, 1e-9)
    assert np.all(np.abs(z) < 4), z
    assert np.allclose(est[:, 4], exact[4])  # no SA predicate: the QI count is exact


def test_sdr_beats_uniform_on_sa_counts(real):
    t = real["edu"]
    wl = [f"education = '{v}'" for v in t.domain("education")]
    exact = answer_exact(t, wl)
    err = {}
    for mech in (ppdp.SDR(0.1, 0.5), ppdp.UniformPerturbation(0.1, 0.5)):
        e = ppdp.publish(t, mech, seed=7).answer(wl)
        err[mech.name] = np.abs(e - exact).mean()
    assert err["sdr"] < err["uniform"]


def test_verify_catches_tampering(real, tmp_path):
    t = real["edu"]
    rel = ppdp.publish(t, ppdp.SDR(0.1, 0.5), seed=1)
    rel.save(tmp_path / "r")
    loaded = ppdp.releases.base.load_release(tmp_path / "r")
    assert ppdp.verify(loaded, t).ok
    st = loaded.certificate["subtables"][0]
    st["gamma"] *= 1.5                       # a weaker randomization than ρ1j allows
    rep = ppdp.verify(loaded)
    assert not rep.ok and any("γ_j" in p or "retention" in p for p in rep.problems)
    st["gamma"] /= 1.5
    st["rho1"] *= 0.5                        # understate ρ1j consistently (γ, p, q re-derived)
    from ppdp.mechanisms.randomization.uniform import gamma_for, perturbation_params
    st["gamma"] = float(gamma_for(st["rho1"], 0.5))
    st["retention"], st["p"], st["q"] = (float(v) for v in perturbation_params(st["m"], st["gamma"]))
    loaded.manifest["disclosure"] = disclosure_of(loaded)  # … restates the disclosure of the new model
    loaded.shipped_readme = render_readme(loaded.manifest)  # a consistent tamperer rewrites the README too
    assert ppdp.verify(loaded).ok            # the files alone cannot see this …
    rep = ppdp.verify(loaded, t)             # … the source table can (feasibility LP)
    assert not rep.ok and any("feasib" in p or "understated" in p for p in rep.problems)


def test_data_layout(real):
    t = real["occ"].sample(3000, seed=0)[0]
    rel = ppdp.publish(t, ppdp.SDR(0.1, 0.5), seed=2)
    assert rel.data.column_names == [*t.quasi, "subtable", t.sa]
    assert rel.manifest["n_published"] == t.n_rows and rel.manifest["dropped"] == 0
    keys = {"id", "domain", "m", "rho1", "gamma", "p", "q", "n"}
    assert all(keys <= set(st) for st in rel.certificate["subtables"])


def _one_value_table():
    return Table({"a": np.array([0, 1, 0]), "s": np.zeros(3, int)}, {"a": ["x", "y"], "s": ["only"]}, quasi=("a",), sensitive=("s",))


def _no_sa_prime_table():
    return Table({"a": np.array([0, 1, 0, 1]), "s": np.array([0, 0, 1, 1])}, {"a": ["x", "y"], "s": ["u", "v"]},
                 quasi=("a",), sensitive=("s",))


@pytest.mark.parametrize("make", [lambda: ppdp.SDR(0.5, 0.5), lambda: ppdp.SDR(0.6, 0.3), lambda: ppdp.SDR(0, 0.5),
                                  lambda: ppdp.SDR(0.1, 1.0), lambda: ppdp.SDR(-0.1, 0.5), lambda: ppdp.SDR(0.1, 0.5, merge="bogus")])
def test_bad_parameters(make):
    with pytest.raises(PpdpError):
        make()


@pytest.mark.parametrize("table, what", [(_one_value_table, "single value"), (_no_sa_prime_table, "SA' is empty")])
def test_bad_tables(table, what):
    with pytest.raises(PpdpError, match=what):
        ppdp.publish(table(), ppdp.SDR(0.1, 0.5), seed=0)


@pytest.mark.parametrize("args, msg", [
    (["--rho1", "0.5", "--rho2", "0.3"], "rho1 < rho2"),
    (["--rho1", "0", "--rho2", "0.3"], "must be a finite number in (0, 1)"),
    (["--rho1", "0.1", "--rho2", "1.5"], "must be a finite number in (0, 1)"),
])
def test_cli_bad_input(tmp_path, args, msg):
    out = tmp_path / "rel"
    res = CliRunner().invoke(cli, ["publish", "sdr", "--dataset", "edu", "-n", "500", *args, "--seed", "0", "-o", str(out)])
    assert res.exit_code == 2 and "error:" in res.output and msg in res.output
    assert not out.exists() and not list(tmp_path.iterdir())


def test_cli_bad_tables(tmp_path):
    for make, msg in ((_one_value_table, "single value"), (_no_sa_prime_table, "SA' is empty")):
        path = tmp_path / f"{make.__name__}.csv"
        make().to_csv(path)
        out = tmp_path / "rel"
        res = CliRunner().invoke(cli, ["publish", "sdr", str(path), "--quasi", "a", "--sensitive", "s", "--rho1", "0.1", "--rho2", "0.5", "-o", str(out)])
        assert res.exit_code == 2 and msg in res.output, res.output
        assert not out.exists()


def test_cli_publish_verify_query(tmp_path):
    out = tmp_path / "rel"
    r = CliRunner().invoke(cli, ["publish", "sdr", "--dataset", "edu", "-n", "4000", "--rho1", "0.1", "--rho2", "0.5", "--seed", "3", "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert "verify: OK" in r.output
    r = CliRunner().invoke(cli, ["verify", str(out), "--dataset", "edu", "-n", "4000"])
    assert r.exit_code == 1 and "verify: OK" in r.output and "NOT fit for publication" in r.output, r.output  # seeded
    r = CliRunner().invoke(cli, ["query", str(out), "sex = 'Female' AND education = 'Children'"])
    assert r.exit_code == 0 and float(r.output.splitlines()[1].split()[0]) >= 0

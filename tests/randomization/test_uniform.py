"""Uniform perturbation: parameters, retention mode, posterior bound, unbiased reconstruction,
the perturbation kernel's distribution, bad input."""

import numpy as np
import pytest
from click.testing import CliRunner

import ppdp
from ppdp.cli import cli
from ppdp.errors import PpdpError
from ppdp.mechanisms.randomization.uniform import (gamma_for, gamma_from_retention, perturb_local, perturbation_params,
                                                   posterior_retained)
from ppdp.queries import answer_exact
from ppdp.table import Table


def test_formulas():
    g = gamma_for(1 / 3, 2 / 3)
    assert g == pytest.approx(4.0)
    ret, p, q = perturbation_params(10, g)
    assert ret == pytest.approx(4 / 13) and q == pytest.approx(1 / 13) and p == pytest.approx(3 / 13)
    assert posterior_retained(1 / 3, g) == pytest.approx(2 / 3)
    assert gamma_from_retention(10, ret) == pytest.approx(g)
    # a brute-force Bayes posterior over a 4-value domain agrees with the closed form
    prior = np.array([0.1, 0.2, 0.3, 0.4])
    r, p, q = perturbation_params(4, 5.0)
    P = np.full((4, 4), q) + np.eye(4) * p       # P[x, y] = Pr[Y = y | X = x]
    post = prior[:, None] * P / (prior @ P)[None, :]
    assert np.allclose(np.diag(post), posterior_retained(prior, 5.0))
    assert (post.max(axis=1) == np.diag(post)).all()


def test_perturb_kernel_distribution():
    rng = np.random.default_rng(0)
    n, m, keep = 200_000, 5, 0.4
    local = np.full(n, 2)
    out = perturb_local(local, np.full(n, m), np.full(n, keep), rng)
    freq = np.bincount(out, minlength=m) / n
    expect = np.full(m, (1 - keep) / (m - 1))
    expect[2] = keep
    assert np.all(np.abs(freq - expect) < 5 * np.sqrt(expect * (1 - expect) / n))


@pytest.mark.parametrize("name", ["occ", "edu"])
def test_posterior_audit_and_verify(name):
    t = ppdp.datasets.load(name)
    prior = t.counts(t.sa) / t.n_rows
    for rho1, rho2 in [(0.1, 0.3), (0.1, 0.5), (0.2, 0.5), (0.2, 0.8), (0.3, 0.8)]:
        rel = ppdp.publish(t, ppdp.UniformPerturbation(rho1, rho2), seed=0)
        c = rel.certificate
        sap = prior <= rho1
        assert posterior_retained(prior[sap], c["gamma"]).max() <= rho2 + 1e-12
        assert c["m"] == len(t.domain(t.sa))
        assert ppdp.verify(rel, t).ok


def test_retention_mode():
    t = ppdp.datasets.load("occ", n=5000)
    rel = ppdp.publish(t, ppdp.UniformPerturbation(retention=0.25), seed=0)
    c = rel.certificate
    assert c["retention"] == pytest.approx(0.25) and c["q"] == pytest.approx(0.75 / 45)
    assert ppdp.verify(rel, t).ok
    with pytest.raises(PpdpError, match="no information"):
        ppdp.publish(t, ppdp.UniformPerturbation(retention=1 / 46), seed=0)


def test_reconstruction_unbiased():
    rng = np.random.default_rng(1)
    n = 700
    t = Table({"a": rng.integers(0, 3, n), "s": rng.choice(5, n, p=[0.35, 0.25, 0.2, 0.12, 0.08])},
              {"a": ["x", "y", "z"], "s": list("ABCDE")}, quasi=("a",), sensitive=("s",))
    wl = ["s = 'A'", "s IN ('D', 'E')", "a = 'x' AND s = 'C'", "a IN ('y', 'z') AND s IN ('A', 'E')"]
    exact = answer_exact(t, wl)
    est = np.array([ppdp.publish(t, ppdp.UniformPerturbation(0.2, 0.6), seed=s).answer(wl, estimator="inversion")
                    for s in range(200)])
    z = (est.mean(0) - exact) / (est.std(0, ddof=1) / np.sqrt(len(est)))
    assert np.all(np.abs(z) < 4), z


@pytest.mark.parametrize("kw", [dict(rho1=0.5, rho2=0.4), dict(rho1=0.0, rho2=0.4), dict(rho1=0.1, rho2=1.0),
                                dict(rho1=0.1), dict(retention=1.0), dict(retention=0.3, rho1=0.1, rho2=0.5)])
def test_bad_parameters(kw):
    with pytest.raises(PpdpError):
        ppdp.UniformPerturbation(**kw)


def test_bad_tables():
    one = Table({"a": np.array([0, 1]), "s": np.zeros(2, int)}, {"a": ["x", "y"], "s": ["only"]}, quasi=("a",), sensitive=("s",))
    with pytest.raises(PpdpError, match="single value"):
        ppdp.publish(one, ppdp.UniformPerturbation(0.1, 0.5))
    even = Table({"a": np.array([0, 1]), "s": np.array([0, 1])}, {"a": ["x", "y"], "s": ["u", "v"]}, quasi=("a",), sensitive=("s",))
    with pytest.raises(PpdpError, match="SA' is empty"):
        ppdp.publish(even, ppdp.UniformPerturbation(0.1, 0.5))


def test_cli(tmp_path):
    out = tmp_path / "u"
    r = CliRunner().invoke(cli, ["publish", "uniform", "--dataset", "occ", "-n", "2000", "--retention", "0.3", "--seed", "0", "-o", str(out)])
    assert r.exit_code == 0 and "verify: OK" in r.output, r.output
    bad = tmp_path / "bad"
    r = CliRunner().invoke(cli, ["publish", "uniform", "--dataset", "occ", "-n", "2000", "--rho1", "0.4", "--rho2", "0.2", "-o", str(bad)])
    assert r.exit_code == 2 and "error:" in r.output and not bad.exists()

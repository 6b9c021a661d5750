"""The parametric bootstrap of the histogram estimators (ppdp.estimators.histogram): the replay
spends the certificate's budget and reproduces the mechanism, the intervals are reproducible
and cached, the bootstrap agrees with the closed form where one exists, its intervals cover
(statistical tests with fixed seeds and stated false-alarm rates), and ``ppdp query`` prints
them. The full coverage study is ``benchmarks/bench_coverage_histogram.py``."""

from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner
from scipy import stats

import ppdp
from ppdp.claims import claim_of
from ppdp.cli import cli
from ppdp.estimators.histogram import (BOOTSTRAP_REPLICATES, CellsEstimator, UniformEstimator, integer_truth,
                                       release_seed)
from ppdp.kernels.grid import box_sums, cube_codes, declared_domains, dense_counts, summed_area
from ppdp.mechanisms.histogram import (ConsistentHierarchy, DefaultHistogram, DPCube, HierarchicalKDTree,
                                       KroneckerLeastSquares)
from ppdp.queries import as_workload, parse_where

AGE = {"age": [17, 22, 27, 32, 37, 42, 47, 52, 57, 62, 67, 72, 91]}
HOURS = {"hours_per_week": [1, 10, 20, 30, 35, 40, 41, 45, 50, 60, 80, 100]}
DIMS = ["age", "hours_per_week"]
WL = as_workload([parse_where("age >= 32 AND age < 47 AND hours_per_week >= 35 AND hours_per_week < 45"),
                  parse_where("age >= 17"),
                  parse_where("age >= 62 AND age < 72 AND hours_per_week < 30"),
                  parse_where("age >= 22 AND age < 27")])


@pytest.fixture(scope="module")
def adult():
    return ppdp.datasets.load("adult", n=4000, seed=1)


def _truth(rel, table, wl):
    p = rel.manifest["params"]
    declared, _ = declared_domains(p["dims"], p.get("bins"), p.get("domains"))
    spec, codes = cube_codes(table, p["dims"], p.get("bins"), declared)
    lo, hi, owner = rel.query_boxes(wl)
    return np.bincount(owner, weights=box_sums(summed_area(dense_counts(codes, spec.shape)), lo, hi), minlength=len(wl))


def test_integer_truth_keeps_runs():
    rng = np.random.default_rng(0)
    x = rng.normal(0.3, 2.0, size=(7, 9))
    xi = integer_truth(x)
    assert xi.dtype.kind == "i"
    assert np.all(np.abs(np.cumsum(xi.ravel()) - np.cumsum(x.ravel())) <= 0.5 + 1e-9)
    assert np.all(np.abs(xi.sum(axis=1) - x.sum(axis=1)) <= 1 + 1e-9)


@pytest.mark.parametrize("mech", [DefaultHistogram(0.3, DIMS, bins={**AGE, **HOURS}),  # agrid branch
                                  DPCube(1.0, DIMS, bins={**AGE, **HOURS}),
                                  HierarchicalKDTree(1.0, DIMS, bins={**AGE, **HOURS}),
                                  ConsistentHierarchy(1.0, DIMS, bins={**AGE, **HOURS})])
def test_replay_spends_the_certificates_budget(adult, mech):
    """A replay of the release's own counts (given the same generator) is the release: same
    plan, same ledger, same files — the bootstrap re-runs the mechanism, not an imitation."""
    rel = ppdp.publish(adult, mech, seed=11)
    claim = claim_of(rel.manifest)
    p = rel.manifest["params"]
    declared, _ = declared_domains(p["dims"], p.get("bins"), p.get("domains"))
    spec, codes = cube_codes(adult, p["dims"], p.get("bins"), declared)
    from ppdp.kernels.rng import publication_rng

    cells, parts = mech.replay(dense_counts(codes, spec.shape), claim.noisy_total, claim.ledger, publication_rng(11))
    if cells is not None:
        np.testing.assert_array_equal(np.asarray(cells, float).ravel(), rel.cell_index()[1])
    if parts is not None:
        lo, hi, y = rel.partition_boxes()
        np.testing.assert_array_equal(parts[0], lo)
        np.testing.assert_array_equal(parts[2], y)


def test_bootstrap_is_reproducible_and_cached(adult):
    rel = ppdp.publish(adult, DefaultHistogram(0.3, DIMS, bins={**AGE, **HOURS}), seed=3)
    assert rel.certificate["choice"]["algorithm"] == "agrid"
    e1 = rel.estimate(WL)
    assert e1.method.startswith(f"parametric bootstrap over the mechanism's randomness: {BOOTSTRAP_REPLICATES} ")
    assert np.all(np.isfinite(e1.se)) and np.all(e1.se > 0)
    assert np.all((e1.lower < e1.estimate) & (e1.estimate < e1.upper))
    est = CellsEstimator()
    a = est.bootstrap_errors(rel, WL)
    assert est.bootstrap_errors(rel, WL[:2]).shape == (BOOTSTRAP_REPLICATES, 2)
    np.testing.assert_array_equal(est.bootstrap_errors(rel, WL), a)  # cached replicates, same answers
    # another release object with the same content: the same seed, the same interval
    twin = ppdp.publish(adult, DefaultHistogram(0.3, DIMS, bins={**AGE, **HOURS}), seed=3)
    assert release_seed(twin) == release_seed(rel)
    np.testing.assert_allclose(twin.estimate(WL).se, e1.se, rtol=1e-6)
    # a vectorised workload gives the single-query answers
    one = rel.estimate(WL[2:3])
    np.testing.assert_allclose(one.se, e1.se[2:3], rtol=1e-6)


def test_bootstrap_matches_the_closed_form_on_kron(adult):
    """kron is linear in its noise, so its bootstrap errors are draws of the noise itself: R·se²/σ²
    ~ χ²(R) with σ the closed form (sums of many discrete Laplace draws: normal). Two-sided at
    1e-4 per query, 4 queries: false-alarm ≤ 4e-4. A bootstrap at ε/2 or 2ε (variance ×4, ÷4)
    falls far outside."""
    rel = ppdp.publish(adult, KroneckerLeastSquares(1.0, DIMS, bins={**AGE, **HOURS}), seed=5)
    closed = rel.estimate(WL)
    assert closed.method.startswith("closed form")
    err = CellsEstimator().bootstrap_errors(rel, WL)
    R = err.shape[0]
    stat = (err**2).sum(axis=0) / closed.se**2
    lo, hi = stats.chi2.ppf(0.5e-4, R), stats.chi2.isf(0.5e-4, R)
    assert np.all((stat > lo) & (stat < hi)), (stat, lo, hi)


@pytest.mark.slow
def test_bootstrap_intervals_cover(adult):
    """Coverage of the shipped interval (consistency: its default ``cells`` estimator on
    post-processed cells gets the bootstrap) over 60 fixed-seed releases, 4 fixed queries. Each
    query's hits are Binomial(60, p) across independent releases; the test fails when a query
    holds the truth fewer than the 1e-4 quantile of Binomial(60, 0.93) times: false-alarm ≤ 4e-4
    while the coverage is ≥ 0.93 (the benchmark's band). Intervals half as wide (se off by 2,
    coverage ~0.68) fail it with probability > 0.999."""
    mech = ConsistentHierarchy(1.0, ["age", "sex"], bins=AGE, domains="adult")
    wl = as_workload([parse_where("age >= 32 AND age < 47"), parse_where("sex = 'Female'"),
                      parse_where("age >= 62 AND sex = 'Male'"), parse_where("age >= 22 AND age < 27 AND sex = 'Female'")])
    hits = np.zeros(len(wl))
    truth = None
    for s in range(60):
        rel = ppdp.publish(adult, mech, seed=1000 + s)
        if truth is None:
            truth = _truth(rel, adult, wl)
        e = rel.estimate(wl)
        hits += (truth >= e.lower) & (truth <= e.upper)
    floor = stats.binom.ppf(1e-4, 60, 0.93)
    assert np.all(hits >= floor), (hits, floor)


def test_uniform_and_kdtree_get_intervals(adult):
    rel = ppdp.publish(adult, HierarchicalKDTree(1.0, DIMS, bins={**AGE, **HOURS}), seed=2)
    e = rel.estimate(WL)
    assert np.all(np.isfinite(e.se)) and e.method.startswith("model-free bounds") and e.kind == "confidence"
    assert np.all((e.lower >= 0) & (e.lower <= e.upper))
    dc = ppdp.publish(adult, DPCube(1.0, DIMS, bins={**AGE, **HOURS}), seed=2)
    for name in ("uniform", "ls-eb"):
        assert np.all(np.isfinite(dc.estimate(WL, estimator=name).se))
    # ls-eb keeps its shrunk estimate and takes the interval of the unbiased least squares
    eb, ls = dc.estimate(WL, estimator="ls-eb"), dc.estimate(WL, estimator="ls")
    assert np.array_equal(eb.lower, ls.lower) and np.array_equal(eb.upper, ls.upper)
    assert dc.estimate(WL, estimator="cells").method.startswith("closed form")
    assert np.all(UniformEstimator().bootstrap_errors(dc, WL).shape == (BOOTSTRAP_REPLICATES, len(WL)))


def test_cli_query_prints_the_interval(tmp_path):
    run = CliRunner().invoke
    out = tmp_path / "agrid"
    r = run(cli, ["publish", "agrid", "--dataset", "adult", "-n", "3000", "--dims", "age", "sex", "-e", "0.5",
                  "--domains", "adult", "--seed", "4", "-o", str(out)])
    assert r.exit_code == 0, r.output
    q = run(cli, ["query", str(out), "age BETWEEN 30 AND 45 AND sex = 'Female'"])
    assert q.exit_code == 0, q.output
    assert "not quantified" not in q.output and "parametric bootstrap" in q.output, q.output
    row = q.output.splitlines()[1].split()
    assert all(np.isfinite(float(v)) for v in row[:4]), q.output

"""Coverage contract of the histogram family: every interval an estimator reports holds the real
table's true count at its level.

Parametrised over the registry: every histogram-family mechanism × every histogram estimator
that reads its release. Each case publishes ``RELEASES`` independent releases (``ppdp.publish``,
seeds 0..R−1) of the bundled Adult table — a 2-D cube (age × hours_per_week in public bins) for
every mechanism (6 × 6 coarser bins for ``agrid``, whose bootstrap is the slowest), the 4-D cube age × education_num × hours_per_week × sex (declared domains) for
the ``dp`` default at ε = 0.5 (its marginals branch) — asks a fixed workload of random range
queries with ``level`` = 0.95 and compares the intervals with the exact counts of the table.

Pass: the coverage, overall and over the queries whose true count is > 100, is at least
0.95 − 3σ, σ the larger of the binomial standard error of R·Q Bernoulli trials and the
standard error of the per-release coverage across the R independent releases (the queries of one
release share its noise); ``certain`` intervals must cover every time; no estimator may answer
without an interval. A new mechanism or estimator enters the grid by registering and must meet
its level on the real table, or this suite fails.

The marginals-branch interval reads only the measured marginals, not the graphical model, so the
4-D cases lower the model's inference iterations (the estimate, not the interval, depends on
them) to keep the suite fast, and the parametric bootstrap (adaptive grids, the consistent
hierarchy) runs 20 replicates; ``benchmarks/bench_coverage_histogram.py`` runs the full defaults.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import ppdp
from ppdp.kernels.grid import box_sums, cube_codes, declared_domains, dense_counts, summed_area
from ppdp.estimators import histogram as histogram_estimators
from ppdp.mechanisms.histogram import strategies
from ppdp.queries import as_workload
from ppdp.queries.workloads import range_workload
from ppdp.registry import estimators, mechanisms

pytestmark = pytest.mark.slow

RELEASES = 50
N_QUERIES = 100
LEVEL = 0.95
AGE = [17, 22, 27, 32, 37, 42, 47, 52, 57, 62, 67, 72, 91]
HOURS = [1, 10, 20, 30, 35, 40, 41, 45, 50, 60, 80, 100]
CUBE_2D = dict(dims=["age", "hours_per_week"], bins={"age": AGE, "hours_per_week": HOURS})
CUBE_4D = dict(dims=["age", "education_num", "hours_per_week", "sex"], domains="adult")
#: replicates of the parametric bootstrap (post-processed cells of agrid / consistency) in this suite:
#: its interval is estimate ± t(R)·se, so fewer replicates widen it by t(R), not narrow it
BOOTSTRAP_REPLICATES = 20


def _histogram_mechanisms() -> list[str]:
    return sorted(n for n, c in mechanisms().items() if c.__module__.startswith("ppdp.mechanisms.histogram"))


def _cases():
    """(mechanism, cube, params, estimator) for every estimator that reads the mechanism's release
    (decided on a release of a 1,000-row sample: which files a mechanism writes does not depend
    on the data)."""
    warnings.simplefilter("ignore")
    small = ppdp.datasets.load("adult", n=1000, seed=1)
    out = []
    iterations, strategies.MARGINAL_ITERATIONS = strategies.MARGINAL_ITERATIONS, 1  # the files, not the fit
    for mech in _histogram_mechanisms():
        kw = dict(CUBE_2D, epsilon=1.0)
        if mech == "agrid":  # its bootstrap replays a Python loop over grid boxes: 6 × 6 keeps the suite fast
            kw = dict(dims=CUBE_2D["dims"], bins={"age": AGE[::2], "hours_per_week": [1, 20, 35, 41, 50, 80, 100]}, epsilon=1.0)
        if mech == "marginals":
            kw = dict(dims=["age", "hours_per_week", "sex"], bins=CUBE_2D["bins"], domains="adult", epsilon=1.0)
        rel = ppdp.publish(small, mechanisms()[mech](**kw), seed=0)
        out += [(mech, "2d", kw, e) for e, cls in sorted(estimators("histogram").items()) if cls().supports(rel)]
    strategies.MARGINAL_ITERATIONS = iterations
    out.append(("dp", "4d", dict(CUBE_4D, epsilon=0.5), "cells"))
    return out


CASES = _cases()


@pytest.fixture(scope="module")
def adult():
    return ppdp.datasets.load("adult")


def _truth(rel, table, wl):
    p = rel.manifest["params"]
    declared, _ = declared_domains(p["dims"], p.get("bins"), p.get("domains"))
    spec, codes = cube_codes(table, p["dims"], p.get("bins"), declared)
    lo, hi, owner = rel.query_boxes(wl)
    return np.bincount(owner, weights=box_sums(summed_area(dense_counts(codes, spec.shape)), lo, hi), minlength=len(wl))


def _floor(hits: np.ndarray) -> tuple[float, float]:
    """(coverage, its pass floor) of a (releases × queries) hit matrix (module docstring)."""
    n = hits.size
    if n == 0:
        return 1.0, 0.0
    per = np.array([h.mean() for h in hits if h.size])
    sig = max(np.sqrt(LEVEL * (1 - LEVEL) / n), per.std(ddof=1) / np.sqrt(len(per)) if len(per) > 1 else 0.0)
    return float(np.concatenate([h.ravel() for h in hits]).mean()), LEVEL - 3 * sig


@pytest.mark.parametrize(("mech", "cube", "kw", "est_name"), CASES, ids=[f"{m}-{c}-{e}" for m, c, _, e in CASES])
def test_coverage_of_true_counts(adult, monkeypatch, mech, cube, kw, est_name):
    warnings.simplefilter("ignore")
    monkeypatch.setattr(strategies, "MARGINAL_ITERATIONS", 1 if cube == "4d" else 100)
    monkeypatch.setattr(histogram_estimators, "BOOTSTRAP_REPLICATES", BOOTSTRAP_REPLICATES)
    cls = mechanisms()[mech]
    est = estimators("histogram")[est_name]()
    probe = ppdp.publish(adult, cls(**kw), seed=0)
    assert est.supports(probe)
    wl = as_workload(range_workload({d: probe.domains[d] for d in probe.dims}, probe.dims, N_QUERIES, seed=7))
    truth = _truth(probe, adult, wl)
    hits, hits_big, kinds = [], [], set()
    for seed in range(RELEASES):
        rel = probe if seed == 0 else ppdp.publish(adult, cls(**kw), seed=seed)
        e = rel.estimate(wl, estimator=est, level=LEVEL)
        kinds.add(e.kind)
        assert e.kind != "none" and np.all(np.isfinite(e.lower)) and np.all(np.isfinite(e.upper)), e.method
        h = (truth >= e.lower - 1e-9) & (truth <= e.upper + 1e-9)
        if e.kind == "certain":
            assert h.all(), f"certain bounds missed {int((~h).sum())} true counts (release seed {seed})"
        hits.append(h)
        hits_big.append(h[truth > 100])
    cov, floor = _floor(np.array(hits))
    cov_big, floor_big = _floor(np.array(hits_big, dtype=object) if len({len(x) for x in hits_big}) > 1
                                else np.array(hits_big))
    assert cov >= floor, f"{mech}/{est_name} on {cube}: coverage {cov:.3f} < {floor:.3f} ({e.method})"
    assert cov_big >= floor_big, f"{mech}/{est_name} on {cube}: coverage {cov_big:.3f} for counts > 100 < {floor_big:.3f}"

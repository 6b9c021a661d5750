"""Empirical DP audit of every registered ε-DP mechanism, through ``ppdp.publish``.

Neighbouring tables over a small declared domain (D and D plus one record in the target cell);
each mechanism is published hundreds of times on each, with distinct seeds, and
:func:`ppdp.audit.empirical_dp.empirical_epsilon` takes a 99% Clopper–Pearson lower bound on the
privacy loss of the most revealing output event (the target cell's estimate under each histogram
estimator, a marginal, the noisy total, the structure chosen). That bound must not exceed the
claimed ε. The power control publishes the same mechanism at 5× the claimed ε and requires the
same audit to flag it.

The longer version (more runs, tighter bounds, JSON): ``python benchmarks/bench_dp_audit.py``.
"""

from __future__ import annotations

import pytest

from ppdp.audit.empirical_dp import audit_mechanism, build_audited, clopper_pearson, dp_mechanisms, neighbouring_tables

EPSILON = 1.0


@pytest.fixture(scope="module")
def tables():
    return neighbouring_tables()


def test_every_epsilon_dp_mechanism_is_audited():
    """The audit covers the registry: a new ε-DP mechanism without an audit set-up fails here."""
    names = dp_mechanisms()
    assert {"laplace", "cells", "dp", "dpcube", "kdtree", "agrid", "marginals", "kron"} <= set(names)
    for n in names:
        build_audited(n, EPSILON)


def test_clopper_pearson_bounds():
    lo, hi = clopper_pearson(0, 10, 0.025)
    assert lo == 0.0 and hi == pytest.approx(1 - 0.025 ** (1 / 10))
    lo, hi = clopper_pearson(10, 10, 0.025)
    assert hi == 1.0 and lo == pytest.approx(0.025 ** (1 / 10))


@pytest.mark.slow
@pytest.mark.parametrize("name", dp_mechanisms())
def test_empirical_epsilon_within_claim(name, tables):
    res = audit_mechanism(name, EPSILON, EPSILON, n_runs=300, n_calibration=150, seed=1, tables=tables)
    assert res.epsilon_lower <= EPSILON, res.to_dict()


@pytest.mark.slow
@pytest.mark.parametrize("name", dp_mechanisms())
def test_power_control_flags_five_times_the_budget(name, tables):
    """The same audit on the mechanism run at 5ε while ε is claimed: it must be caught."""
    res = audit_mechanism(name, 5 * EPSILON, EPSILON, n_runs=200, n_calibration=100, seed=2, tables=tables)
    assert res.violates, res.to_dict()

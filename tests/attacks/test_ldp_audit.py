"""Empirical local-DP audit of the ε-LDP mechanisms, through ``ppdp.publish``.

Local DP bounds, for one record, the ratio of the probabilities of any report under two of its
true values. Two tables of two records over an 8-value declared domain differ in the second
record's value (v1 vs v2; the first record holds v0 in both); each mechanism is published
hundreds of times on each with distinct seeds, and
:func:`ppdp.audit.empirical_dp.empirical_epsilon` takes a 99% Clopper–Pearson lower bound on the
privacy loss of the most revealing event among the released reports (how many reports hold v1
and not v2, hold v1, hold v2). The bound must not exceed the claimed ε; the power control
publishes at 4× the claimed ε and requires the audit to flag it.
"""

from __future__ import annotations

import pandas as pd
import pytest

import ppdp
from ppdp import registry
from ppdp.audit.empirical_dp import empirical_epsilon
from ppdp.table import Table

EPSILON = 1.0
DOMAIN = [f"v{i}" for i in range(8)]
LDP = [n for n, c in registry.mechanisms().items() if "local differential privacy" in c.claim_model]


def _tables():
    def t(second):
        df = pd.DataFrame({"g": ["a", "a"], "s": ["v0", second]})
        return Table.from_pandas(df, quasi=["g"], sensitive=["s"], domains={"g": ["a"], "s": DOMAIN})
    return t("v1"), t("v2")


def _audit(name: str, eps_published: float, n_runs: int, n_cal: int, seed: int):
    mech = registry.mechanism(name)(epsilon=eps_published)

    def publish_once(table, s):
        rel = ppdp.publish(table, mech, seed=s)
        Y = rel.reports()
        v1, v2 = DOMAIN.index("v1"), DOMAIN.index("v2")
        has1, has2 = (Y == v1).any(axis=1), (Y == v2).any(axis=1)
        return [float((has1 & ~has2).sum()), float(has1.sum()), float(has2.sum())], str(rel.certificate["k"])

    a, b = _tables()
    return empirical_epsilon(publish_once, a, b, mechanism=name, epsilon_claimed=EPSILON, n_runs=n_runs,
                             n_calibration=n_cal, alpha=0.01, seed=seed,
                             feature_names=("reports with v1 and not v2", "reports with v1", "reports with v2"))


def test_every_ldp_mechanism_is_audited():
    assert "subset" in LDP


@pytest.mark.slow
@pytest.mark.parametrize("name", LDP)
def test_empirical_epsilon_within_claim(name):
    res = _audit(name, EPSILON, 600, 300, seed=1)
    assert res.epsilon_lower <= EPSILON, res.to_dict()


@pytest.mark.slow
@pytest.mark.parametrize("name", LDP)
def test_power_control_flags_four_times_the_budget(name):
    res = _audit(name, 4 * EPSILON, 400, 200, seed=2)
    assert res.violates, res.to_dict()

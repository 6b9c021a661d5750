"""Attacks on a real table the bundled ones do not resemble (the gauntlet's Toronto arrests file,
read through its reviewed schema: two colours, five age bins, seven check counts), through
``ppdp.publish``.

On such a coarse table every record with a target's label ties as its nearest record, so the
linkability attack's tie-break decides whole groups of targets at once. A single shared draw
made the ε = 1 default histogram "beat" its bound (success 0.048 [0.032, 0.070] on the published
half against 0.000 on the held-back half, bound e^ε × 0.008 = 0.021); the attack now counts the
expected success over random tie-breaks, which is the same on both halves. Power control: the
same attack flags an exact-count release whose certificate understates ε.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import ppdp
from ppdp.audit.attacks import attack_release, split_control
from ppdp.schema import bin_edges, load_schema, public_domains, read_table

GAUNTLET = Path(__file__).resolve().parents[1] / "gauntlet"
DIMS = ["colour", "age", "checks"]


@pytest.fixture(scope="module")
def arrests():
    sch = load_schema(GAUNTLET / "schemas" / "arrests.toml")
    t = read_table(GAUNTLET / "data" / "arrests.tsv", sch)
    dom = public_domains(t, sch, t.column_names)
    edges = {d: list(e) for d in DIMS if (e := bin_edges(t.domain(d))) is not None}
    train, control = split_control(t, seed=0)
    rel = ppdp.publish(train, ppdp.registry.mechanism("dp")(epsilon=1.0, dims=DIMS, bins=edges,
                                                            domains={d: dom[d] for d in DIMS if d not in edges}), seed=0)
    return train, control, rel


def _link(rep):
    t = rep.table
    return t[t["attack"] == "linkability"].iloc[0]


def test_linkability_on_a_coarse_real_table_does_not_swing_with_the_tie_break(arrests):
    train, control, rel = arrests
    rows = [_link(attack_release(rel, train, control, n_attacks=500, seed=s)) for s in range(3)]
    for r in rows:
        assert not r["beats_bound"], r.to_dict()
        lo, hi = r["control_lo"], r["control_hi"]
        assert lo - 0.01 <= r["success"] <= hi + 0.01, r.to_dict()  # the published half is linked no more than the held-back one
    succ = [r["success"] for r in rows]
    assert max(succ) - min(succ) < 0.01, succ  # one shared tie-break gave 0.000 to 0.072 over attack seeds


def test_linkability_power_control_flags_exact_counts_claiming_a_small_epsilon():
    t = ppdp.datasets.load("adult", n=600, seed=0)
    train, control = split_control(t, seed=0)
    rel = ppdp.publish(train, ppdp.CellHistogram(epsilon=200.0, dims=["age", "hours_per_week", "occupation"], domains="adult"),
                       seed=3)
    honest = _link(attack_release(rel, train, control, n_attacks=300, seed=0))
    assert not honest["beats_bound"]  # ε = 200 allows it
    assert honest["success"] > 3 * honest["control"]  # the exact cells link the published records, not the held-back ones
    rel.manifest["certificate"]["epsilon"] = 0.01
    r = _link(attack_release(rel, train, control, n_attacks=300, seed=0))
    assert bool(r["beats_bound"]) and r["success_lo"] > r["bound"], r.to_dict()
    assert np.isclose(r["success"], honest["success"])


def test_qi_adversary_on_a_binary_randomized_release_stays_within_rho2():
    """Titanic (binary survived, 38% yes) under uniform perturbation at the custodian's ρ1 = 0.4,
    ρ2 = 0.7: the adversary who links each passenger to the published rows with the same
    quasi-identifiers never passes ρ2 on the SA' value; power control: the same release whose
    certificate claims ρ2 = 0.4 is caught."""
    from ppdp.audit.certain import adversary_disclosure

    sch = load_schema(GAUNTLET / "schemas" / "titanic.toml")
    t = read_table(GAUNTLET / "data" / "titanic.csv", sch)
    rel = ppdp.publish(t, ppdp.registry.mechanism("uniform")(rho1=0.4, rho2=0.7), seed=0)
    adv = adversary_disclosure(rel, t)
    assert adv["linked"] == t.n_rows and adv["bound"]["yes"] == pytest.approx(0.7) and adv["bound"]["no"] == 1.0
    assert adv["records_certain"] == 0 and adv["records_above_bound"] == 0, adv
    yes = int(np.sum(t.codes("survived") == list(t.domain("survived")).index("yes")))
    rel.manifest["certificate"]["rho2"] = 0.4
    tampered = adversary_disclosure(rel, t)
    assert tampered["per_value_above_bound"].get("yes", 0) > 0.2 * yes, tampered

"""A' (ℓ'-diverted privacy) tested end to end: the certificate's swap bound is a function of the
table's SA counts and ℓ' (never of the secret draw) and bounds the advantage of an adversary who
tells the table from its swap neighbour.

- fast: the certificate's figures are identical on 20 publishes of each of six tables of
  different group structures; on tiny tables every id draw is enumerated and, for every pair of
  values, L ≤ exact total-variation distance ≤ U (hypothesis over random count vectors too);
  verify re-derives the figures and rejects tampered ones;
- slow: through ``ppdp.publish`` with distinct seeds, the best test's advantage (95%
  Clopper–Pearson) on the certificate's binding swap stays within the bound, and the test has
  power: it finds an advantage at least the lower bound where there is one.
  ``benchmarks/bench_diverted_swap.py`` runs the same with 1,500 publishes per table.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ppdp
from ppdp.audit.swap_audit import (binding_pair, exact_release_law, exact_swap_tv, measure_swap_advantage, person_table,
                                   swapped)
from ppdp.kernels.swap_leak import best_partners, diverted_leak, swap_bounds

#: name → (SA codes, domain size, ℓ'): different group structures
TABLES = {
    "xxyz": ([0, 0, 1, 2], 3, 2),
    "all-distinct": ([0, 1, 2, 3, 4, 5], 6, 3),
    "one-dominant": ([0, 0, 0, 1, 2, 3], 4, 2),
    "three-pairs": ([0, 0, 1, 1, 2, 2], 3, 2),
    "three-levels": ([0, 0, 0, 1, 1, 2], 3, 2),
    "l3-uneven": ([0, 0, 1, 2, 3, 4], 5, 3),
}
FIGURES = ("closed_fraction", "swap_advantage", "swap_advantage_lower", "max_posterior", "sa_counts")


@pytest.mark.parametrize("name", list(TABLES))
def test_the_figures_are_the_same_on_every_publish(name):
    sa, m, lp = TABLES[name]
    t = person_table(sa, m)
    seen, published = set(), set()
    for seed in range(20):
        r = ppdp.publish(t, ppdp.Diverted(lp), seed=1000 + seed)
        cert = r.manifest["certificate"]
        seen.add(repr([cert[k] for k in FIGURES] + [r.manifest["disclosure"]["max_posterior"]]))
        published.add(tuple(r.published_counts("s")))
    print(f"{name}: {sorted(seen)} on 20 publishes ({len(published)} distinct published count vectors)")
    assert len(seen) == 1
    assert len(published) > 1  # the draws differ (the control: the figures would have moved before)
    assert ppdp.verify(r, t).ok and ppdp.verify(r).ok


def all_pairs_exact(sa, lp):
    counts = np.bincount(sa)
    present, lower, upper, _ = swap_bounds(counts, lp)
    exact = np.zeros_like(upper)
    laws = {}
    for i, s in enumerate(present):
        for j, s2 in enumerate(present):
            if i < j:
                a, b = list(sa).index(s), list(sa).index(s2)
                laws.setdefault(tuple(sa), exact_release_law(sa, counts, lp))
                q = exact_release_law(swapped(sa, a, b), counts, lp)
                p = laws[tuple(sa)]
                exact[i, j] = exact[j, i] = 0.5 * sum(abs(p.get(k, 0.0) - q.get(k, 0.0)) for k in set(p) | set(q))
    return lower, exact, upper


@pytest.mark.parametrize("name", list(TABLES))
def test_bounds_against_every_id_draw_enumerated(name):
    sa, m, lp = TABLES[name]
    lower, exact, upper = all_pairs_exact(sa, lp)
    assert np.all(lower <= exact + 1e-12) and np.all(exact <= upper + 1e-12)
    leak = diverted_leak(np.bincount(sa, minlength=m), lp)
    assert best_partners(lower, lp) <= best_partners(exact, lp) + 1e-12 <= leak["swap_advantage"] + 2e-12
    assert leak["swap_advantage_lower"] == pytest.approx(best_partners(lower, lp))
    print(f"{name}: certificate {leak['swap_advantage']:.4f}, exact order statistic {best_partners(exact, lp):.4f}, "
          f"lower {leak['swap_advantage_lower']:.4f}")


def test_exact_small_cases():
    # x,x,y,z: groups {x,y}, {x,z}; the bound is exact (0.375), the one-person lower bound 0.25
    assert diverted_leak([2, 1, 1], 2)["swap_advantage"] == pytest.approx(0.375)
    assert exact_swap_tv([0, 0, 1, 2], [2, 1, 1], 2, 0, 2) == pytest.approx(0.375)
    # closed blocks: 0 exactly, and the exact law agrees
    assert diverted_leak([1] * 6, 3)["swap_advantage"] == 0.0
    assert exact_swap_tv(list(range(6)), [1] * 6, 3, 0, 1) == 0.0
    # three pairs: a strict bound (0.5625 against the exact 0.4375)
    assert diverted_leak([2, 2, 2], 2)["swap_advantage"] == pytest.approx(0.5625)
    assert exact_swap_tv([0, 0, 1, 1, 2, 2], [2, 2, 2], 2, 0, 2) == pytest.approx(0.4375)
    s, s2, up, low = binding_pair([2, 1, 1], 2)
    assert (up, low) == (pytest.approx(0.375), pytest.approx(0.25))


@st.composite
def small_tables(draw):
    lp = draw(st.integers(2, 3))
    n = lp * draw(st.integers(2, 6 // lp if lp == 3 else 3))
    m = draw(st.integers(lp, n))
    counts = np.zeros(m, dtype=np.int64)
    cap = n // lp
    for _ in range(n):
        room = np.flatnonzero(counts < cap)
        counts[room[draw(st.integers(0, len(room) - 1))]] += 1
    return [v for v in range(m) for _ in range(counts[v])], lp


@settings(max_examples=25, deadline=None)
@given(small_tables())
def test_bounds_hold_on_random_tiny_tables(table):
    sa, lp = table
    lower, exact, upper = all_pairs_exact(sa, lp)
    assert np.all(lower <= exact + 1e-12) and np.all(exact <= upper + 1e-12)


def test_verify_rejects_tampered_figures():
    occ = ppdp.datasets.load("occ", n=3000, seed=0)
    r = ppdp.publish(occ, ppdp.Diverted(3), seed=1)
    cert = r.manifest["certificate"]
    assert ppdp.verify(r).ok and ppdp.verify(r, occ).ok
    counts = dict(cert["sa_counts"]["occupation"])
    big, small = max(counts, key=counts.get), min(counts, key=counts.get)
    swapped_counts = {**counts, big: counts[small], small: counts[big]}  # same figures' inputs up to order
    for key, value in (("swap_advantage", cert["swap_advantage"] / 2), ("swap_advantage_lower", 0.0),
                       ("closed_fraction", 1.0), ("sa_counts", {"occupation": swapped_counts})):
        forged = type(r)({**r.manifest, "certificate": {**cert, key: value}}, r.tables)
        assert not ppdp.verify(forged).ok, key
        assert not ppdp.verify(forged, occ).ok, key
    # a forger who restates the figures from forged counts is caught by the published counts' exact law
    from ppdp.claims.diverted import DivertedClaim

    dom = r.domains["occupation"]
    forged_cert = DivertedClaim.derive(3, ["occupation"], r.manifest["n_published"], r.manifest["dropped"],
                                       [[swapped_counts.get(str(v), 0) for v in dom]], [dom]).to_certificate()
    forged = type(r)({**r.manifest, "certificate": forged_cert}, r.tables)
    rep = ppdp.verify(forged)
    assert not rep.ok and any("do not fit" in p for p in rep.problems), rep.problems


@pytest.mark.slow
def test_measured_advantage_within_the_bound_through_publish():
    """500 publishes of each table and of its neighbour (200 calibrate the test, 300 measure it);
    the benchmark runs 1,500."""
    rows = []
    for name in ("xxyz", "all-distinct", "three-pairs"):
        sa, m, lp = TABLES[name]
        res = measure_swap_advantage(sa, m, lp, runs=500, calibration=200, seed=7, exact=True)
        rows.append(res)
        ex = res.exact
        print(f"{name}: bound {res.certificate['swap_advantage']:.4f} (lower {res.pair_lower:.4f}, exact TV {ex['exact_tv']:.4f}); "
              f"best test {ex['advantage']:.3f} [{ex['advantage_lower']:.3f}, {ex['advantage_upper']:.3f}]; blind test "
              f"{res.advantage:.3f} [{res.advantage_lower:.3f}, {res.advantage_upper:.3f}] ({res.view}); stable {res.stable}")
        assert res.stable
        assert res.within_bound  # neither test's 95% lower bound exceeds the certificate's figure
        assert ex["advantage_lower"] <= ex["exact_tv"] <= ex["advantage_upper"]  # the measurement finds the exact advantage
        assert ex["advantage_upper"] >= res.pair_lower  # power: at least the advantage the lower bound proves
    assert rows[0].exact["advantage_lower"] > 0.2  # x,x,y,z is told apart: 0 would be a vacuous figure

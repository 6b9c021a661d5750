"""A' (ℓ'-diverted privacy) attacked end to end: how well can an adversary tell a table from its
swap neighbour, measured through :func:`ppdp.publish`, against the certificate's bound.

The adversary knows every row of the table except which of two people, t (holding s) and t̆
(holding s'), holds which value: the table D or its swap neighbour D' (Fu et al. 2014,
Definition 2). Every person has a distinct NSA value, so a release is the map person →
published SA (the worst case). The certificate's ``swap_advantage`` bounds, for every person t
and the ℓ'−1 partner values that hide t's value best, the total-variation distance between the
release laws of D and D' — the advantage P[test says D | D] − P[test says D | D'] of any test
(:mod:`ppdp.kernels.swap_leak`).

The measurement (:func:`measure_swap_advantage`) publishes D and D' ``runs`` times each with
distinct seeds; the first ``calibration`` publishes of each choose the test (the event "the
release falls in a cell seen more often under D than under D'", for two views of the release:
the pair (t's, t̆'s published values) and the whole release; the view is chosen on held-out
calibration publishes, as a sparse view's in-sample gain is biased upwards), the rest estimate
its advantage,
with a one-sided 95% Clopper–Pearson bound on each side (Bonferroni over the two
probabilities). The event is fixed before the test publishes are drawn, so the estimate is
unbiased for that test's advantage, which is at most the total-variation distance.

:func:`exact_release_law` enumerates every id draw of A' on a tiny table (from the
mechanism's definition: a uniformly random bijection from each value's holders to the groups
holding it, then a uniform draw inside each group), so that the bounds can be checked exactly.
"""

from __future__ import annotations

import itertools
import time
from collections import Counter
from dataclasses import asdict, dataclass, field

import numpy as np

from ..api import publish
from ..kernels.swap_leak import swap_bounds
from ..kernels.transition import decoy_group_values
from ..mechanisms.randomization.diverted import Diverted
from ..table import Table
from .empirical_dp import clopper_pearson

__all__ = ["SwapAudit", "binding_pair", "exact_release_law", "exact_swap_tv", "measure_swap_advantage", "person_table",
           "swapped"]

#: the certificate's figures that must not change from one publish of a table to the next
STABLE_KEYS = ("closed_fraction", "swap_advantage", "swap_advantage_lower", "max_posterior", "sa_counts")


def person_table(sa, m: int) -> Table:
    """A table of len(sa) people with distinct NSA values ``p0, p1, …`` and SA codes ``sa`` on a
    domain of m values ``v0 … v{m−1}``."""
    n = len(sa)
    return Table({"name": np.arange(n), "s": np.asarray(sa)},
                 {"name": [f"p{i}" for i in range(n)], "s": [f"v{i}" for i in range(m)]}, quasi=["name"], sensitive=["s"])


def swapped(sa, a: int, b: int) -> list:
    """``sa`` with the values of people a and b exchanged (the swap neighbour)."""
    out = list(sa)
    out[a], out[b] = out[b], out[a]
    return out


def binding_pair(counts, l_prime: int) -> tuple[int, int, float, float]:
    """``(s, s', upper, lower)``: the value s attaining the certificate's ``swap_advantage`` and its
    (ℓ'−1)-th best partner s' (the pair whose bound U(s, s') is the certificate's figure), with
    U(s, s') and L(s, s')."""
    present, lower, upper, _ = swap_bounds(np.asarray(counts, dtype=np.int64), l_prime)
    b = upper.copy()
    np.fill_diagonal(b, np.inf)
    order = np.argsort(b, axis=1, kind="stable")[:, l_prime - 2]
    kth = b[np.arange(len(b)), order]
    i = int(np.argmax(kth))
    j = int(order[i])
    return int(present[i]), int(present[j]), float(upper[i, j]), float(lower[i, j])


def exact_release_law(sa, counts, l_prime: int) -> dict:
    """P(person → published code) of A' on a table whose N is a multiple of ℓ' (no dropped row):
    every id draw (one bijection per value from its holders to its groups), then the uniform
    draw inside each person's group. Tiny tables only (Π f_v! · ℓ'^N terms)."""
    groups = [tuple(int(x) for x in g) for g in decoy_group_values(np.asarray(counts, dtype=np.int64), l_prime)]
    vals = [v for v in range(len(counts)) if counts[v]]
    holders = {v: [i for i, s in enumerate(sa) if s == v] for v in vals}
    perms = [list(itertools.permutations([j for j, g in enumerate(groups) if v in g])) for v in vals]
    w = 1.0 / float(np.prod([len(p) for p in perms])) / l_prime ** len(sa)
    law: dict = {}
    for choice in itertools.product(*perms):
        grp: list = [()] * len(sa)
        for v, ch in zip(vals, choice):
            for i, j in zip(holders[v], ch):
                grp[i] = groups[j]
        for out in itertools.product(*grp):
            law[out] = law.get(out, 0.0) + w
    return law


def exact_swap_tv(sa, counts, l_prime: int, a: int, b: int) -> float:
    """The exact total-variation distance between the release laws of ``sa`` and of its swap of
    people a and b (tiny tables only)."""
    p, q = exact_release_law(sa, counts, l_prime), exact_release_law(swapped(sa, a, b), counts, l_prime)
    return 0.5 * sum(abs(p.get(k, 0.0) - q.get(k, 0.0)) for k in set(p) | set(q))


@dataclass
class SwapAudit:
    """One measured swap: the table, the swapped people and values, the certificate's figures
    (the same on every publish, ``stable``), the bound for this pair, and the measured advantage."""

    sa: list
    l_prime: int
    person: int
    partner: int
    values: tuple
    runs: int
    calibration: int
    view: str
    hits_table: int
    hits_neighbour: int
    advantage: float
    advantage_lower: float
    advantage_upper: float
    pair_upper: float
    pair_lower: float
    certificate: dict
    stable: bool
    seeds: dict = field(default_factory=dict)
    wall_s: float = 0.0
    cpu_s: float = 0.0
    exact: dict | None = None  # the most powerful test from the exact laws (tiny tables), on the same publishes

    @property
    def within_bound(self) -> bool:
        """No measured advantage's lower confidence bound exceeds the certificate's bound."""
        lows = [self.advantage_lower] + ([self.exact["advantage_lower"]] if self.exact else [])
        return max(lows) <= self.certificate["swap_advantage"] + 1e-12

    def to_dict(self) -> dict:
        return {**asdict(self), "within_bound": self.within_bound}


def _views(release, persons: tuple[int, int]) -> dict:
    d = release.tables["data"].to_pydict()
    out = {k: int(v[1:]) for k, v in zip(d["name"], d["s"])}  # label v{code} → code
    full = tuple(out[f"p{i}"] for i in range(len(out)))
    return {"pair": tuple(out[f"p{i}"] for i in persons), "full": full}


def _chosen_test(cal1: dict, cal2: dict, calibration: int) -> tuple[str, set]:
    """The view and event of the calibration publishes' best test: each view's event is built on
    one half of the calibration publishes and scored on the other (a sparse view's in-sample gain
    is biased upwards), then the chosen view's event is rebuilt on all of them."""
    def event(h1: Counter, h2: Counter) -> set:
        return {k for k in set(h1) | set(h2) if h1[k] > h2[k]}

    best: tuple[str, float] = ("pair", -2.0)
    for name in ("pair", "full"):
        a1, a2 = cal1[name + "@a"], cal2[name + "@a"]
        b1, b2 = cal1[name + "@b"], cal2[name + "@b"]
        e = event(a1, a2)
        gain = (sum(b1[k] for k in e) - sum(b2[k] for k in e)) / max(sum(b1.values()), 1)
        if gain > best[1]:
            best = (name, gain)
    return best[0], event(cal1[best[0]], cal2[best[0]])


def measure_swap_advantage(sa, m: int, l_prime: int, person: int | None = None, partner: int | None = None, *,
                           runs: int = 1500, calibration: int = 500, seed: int = 0, alpha: float = 0.05,
                           exact: bool = False) -> SwapAudit:
    """Publish ``sa`` and its swap neighbour ``runs`` times each (seeds ``seed + i`` and
    ``seed + 10**6 + i``) and measure the best test's advantage (module docstring). Without
    ``person``/``partner``, the swap is the certificate's binding pair (:func:`binding_pair`):
    the first holder of s and the first holder of s'.

    ``exact`` (tiny tables): the most powerful test too, {releases more likely under the table
    than under the neighbour} from the two exact laws (:func:`exact_release_law`) — what an
    adversary who knows the mechanism and every other row computes — measured on the same
    publishes (``exact_*`` fields)."""
    counts = np.bincount(np.asarray(sa), minlength=m)
    s, s2, up, low = binding_pair(counts, l_prime)
    if person is None or partner is None:
        person, partner = list(sa).index(s), list(sa).index(s2)
    else:
        present, lower, upper, _ = swap_bounds(counts, l_prime)
        pos = {int(v): i for i, v in enumerate(present)}
        i, j = pos[int(sa[person])], pos[int(sa[partner])]
        up, low = float(upper[i, j]), float(lower[i, j])
    persons = (int(person), int(partner))
    t0, c0 = time.perf_counter(), time.process_time()
    hist: dict = {}
    certs = set()
    cert: dict = {}
    for side, table_sa, base in (("table", list(sa), seed), ("neighbour", swapped(sa, *persons), seed + 10**6)):
        t = person_table(table_sa, m)
        cal: dict = {k: Counter() for k in ("pair", "full", "pair@a", "full@a", "pair@b", "full@b")}
        test: list = []
        for i in range(runs):
            r = publish(t, Diverted(l_prime), seed=base + i)
            c = r.manifest["certificate"]
            certs.add(repr([c[k] for k in STABLE_KEYS]))
            cert = {k: c[k] for k in STABLE_KEYS}
            v = _views(r, persons)
            if i < calibration:
                half = "@a" if i < calibration // 2 else "@b"
                for view in ("pair", "full"):
                    cal[view][v[view]] += 1
                    cal[view + half][v[view]] += 1
            else:
                test.append(v)
        hist[side] = (cal, test)
    (cal1, test1), (cal2, test2) = hist["table"], hist["neighbour"]
    name, event = _chosen_test(cal1, cal2, calibration)
    k1, k2, adv, lo, hi = _advantage(test1, test2, name, event, alpha)
    ex = None
    if exact:
        p = exact_release_law(list(sa), counts, l_prime)
        q = exact_release_law(swapped(sa, *persons), counts, l_prime)
        best = {k for k in set(p) | set(q) if p.get(k, 0.0) > q.get(k, 0.0)}
        ex = {"exact_tv": sum(p.get(k, 0.0) - q.get(k, 0.0) for k in best), **dict(zip(
            ("hits_table", "hits_neighbour", "advantage", "advantage_lower", "advantage_upper"),
            _advantage(test1, test2, "full", best, alpha)))}
    return SwapAudit(list(int(x) for x in sa), l_prime, persons[0], persons[1], (int(sa[persons[0]]), int(sa[persons[1]])),
                     runs, calibration, name, k1, k2, adv, lo, hi, up, low, cert, len(certs) == 1,
                     {"table": [seed, seed + runs - 1], "neighbour": [seed + 10**6, seed + 10**6 + runs - 1]},
                     time.perf_counter() - t0, time.process_time() - c0, ex)


def _advantage(test1: list, test2: list, view: str, event: set, alpha: float) -> tuple[int, int, float, float, float]:
    """(hits under the table, hits under the neighbour, advantage, its lower and upper bounds):
    one-sided Clopper–Pearson bounds at α/2 on each probability (Bonferroni), so each side of
    [lower, upper] holds with probability ≥ 1 − α."""
    n = len(test1)
    k1 = sum(v[view] in event for v in test1)
    k2 = sum(v[view] in event for v in test2)
    lo1, hi1 = clopper_pearson(k1, n, alpha / 2)
    lo2, hi2 = clopper_pearson(k2, n, alpha / 2)
    return k1, k2, (k1 - k2) / n, max(lo1 - hi2, -1.0), min(hi1 - lo2, 1.0)

"""Seeded workload generators (SPEC §3). Each returns a :class:`Workload` whose ``meta``
records the generator, its parameters and seed, so a run can be repeated.

- :func:`anatomy_workload` (Xiao & Tao 2006, as used by Wang et al. §7.2.2): qd QI
  attributes (qd uniform in 1..#QI) plus the SA; each predicate is a random value set of size
  b = ⌈|A| · s^{1/(qd+1)}⌉ for expected selectivity s; queries with true answer 0 are redrawn.
- :func:`point_workload` (Fu et al. §9.1): random NSA equalities A1=v1 ∧ … ∧ Ad=vd taken from
  a random row (so the NSA part is non-empty), each combined with every SA value.
- :func:`range_workload` (Xiao et al., DPCube §6.3): random axis-aligned ranges on the given
  dimensions (inclusive code ranges, written as BETWEEN on labels).
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from ..errors import PpdpError
from .model import Predicate, Query
from .workload import Workload, answer_exact


def _in(col: str, domain: Sequence[str], codes: np.ndarray) -> Predicate:
    return Predicate(col, "in", tuple(domain[int(i)] for i in np.sort(codes)))


def anatomy_workload(table, n_queries: int = 5000, selectivity: float = 0.01, seed: int = 0,
                     quasi: Sequence[str] | None = None, sensitive: str | None = None,
                     max_redraws: int = 50) -> Workload:
    if not 0 < selectivity <= 1:
        raise PpdpError(f"selectivity must be in (0, 1], got {selectivity}")
    qi = list(quasi or table.quasi)
    sa = sensitive or table.sa
    if not qi:
        raise PpdpError("the anatomy workload needs at least one quasi-identifier")
    rng = np.random.default_rng(seed)

    def draw(k: int) -> list[Query]:
        out = []
        for _ in range(k):
            qd = int(rng.integers(1, len(qi) + 1))
            attrs = [qi[i] for i in np.sort(rng.choice(len(qi), size=qd, replace=False))] + [sa]
            preds = []
            for a in attrs:
                dom = table.domain(a)
                b = min(len(dom), max(1, math.ceil(len(dom) * selectivity ** (1.0 / (qd + 1)))))
                preds.append(_in(a, dom, rng.choice(len(dom), size=b, replace=False)))
            out.append(Query(tuple(preds)))
        return out

    queries = draw(n_queries)
    for _ in range(max_redraws):
        ans = answer_exact(table, queries)
        zero = np.flatnonzero(ans == 0)
        if len(zero) == 0:
            break
        fresh = draw(len(zero))
        for i, q in zip(zero, fresh):
            queries[i] = q
    else:
        raise PpdpError("could not draw non-empty queries; selectivity too small for this table")
    return Workload(queries, {"generator": "anatomy", "n_queries": n_queries, "selectivity": selectivity,
                              "seed": seed, "quasi": qi, "sensitive": sa})


def point_workload(table, n_queries: int = 5000, max_dims: int = 3, seed: int = 0,
                   attributes: Sequence[str] | None = None, sensitive: str | None = None) -> Workload:
    """⌈n_queries / |SA|⌉ NSA conjunctions, each combined with every SA value (truncated to n_queries)."""
    sa = sensitive or table.sa
    attrs = list(attributes or table.quasi)
    if not attrs:
        raise PpdpError("the point workload needs at least one non-sensitive attribute")
    rng = np.random.default_rng(seed)
    sa_dom = table.domain(sa)
    queries: list[Query] = []
    while len(queries) < n_queries:
        d = int(rng.integers(1, min(max_dims, len(attrs)) + 1))
        chosen = [attrs[i] for i in np.sort(rng.choice(len(attrs), size=d, replace=False))]
        row = int(rng.integers(table.n_rows))
        base = [Predicate(a, "eq", (table.domain(a)[int(table.codes(a)[row])],)) for a in chosen]
        for v in sa_dom:
            queries.append(Query(tuple(base) + (Predicate(sa, "eq", (v,)),)))
    return Workload(queries[:n_queries], {"generator": "point", "n_queries": n_queries, "max_dims": max_dims,
                                          "seed": seed, "attributes": attrs, "sensitive": sa})


def range_workload(domains: dict, dims: Sequence[str], n_queries: int = 2000, seed: int = 0) -> Workload:
    """Uniformly random inclusive ranges [lo, hi] on each dimension's code order."""
    rng = np.random.default_rng(seed)
    queries = []
    for _ in range(n_queries):
        preds = []
        for d in dims:
            dom = domains[d]
            a, b = np.sort(rng.integers(0, len(dom), size=2))
            preds.append(Predicate(d, "between", low=dom[a], high=dom[b]))
        queries.append(Query(tuple(preds)))
    return Workload(queries, {"generator": "range", "n_queries": n_queries, "dims": list(dims), "seed": seed})

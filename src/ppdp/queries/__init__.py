"""Count queries, the SQL WHERE-subset parser, exact answers and workload generators (SPEC §3)."""

from __future__ import annotations

from typing import Iterable

import numpy as np

from .engine import CountIndex, split_masks
from .model import Predicate, Query, Resolver, Workload
from .parser import parse_where


def as_workload(queries) -> Workload:
    """Accept a Query, a WHERE string, a list of either, or a Workload."""
    if isinstance(queries, Workload):
        return queries
    if isinstance(queries, (Query, str)):
        queries = [queries]
    return Workload([q if isinstance(q, Query) else parse_where(q) for q in queries])


def resolve(workload: Iterable[Query], table_or_domains, numeric=None) -> list[dict[str, np.ndarray]]:
    from ..table import Table

    if isinstance(table_or_domains, Table):
        t = table_or_domains
        domains = t.domains
        numeric = {c: t.numeric_values(c) for c in t.column_names}
    else:
        domains = table_or_domains
    return Resolver(domains, numeric).all(workload)


def answer_exact(table, queries) -> np.ndarray:
    """Exact counts of a workload on a Table (vectorised; float64 array of integers)."""
    wl = as_workload(queries)
    masks = resolve(wl, table)
    cols = sorted({c for m in masks for c in m})
    index = CountIndex({c: table.codes(c) for c in cols}, {c: len(table.domain(c)) for c in cols}, np.zeros(table.n_rows, dtype=np.int64), 1)
    return index.sums(masks)[:, 0]


__all__ = ["Predicate", "Query", "Resolver", "Workload", "CountIndex", "parse_where", "answer_exact", "as_workload", "resolve", "split_masks"]

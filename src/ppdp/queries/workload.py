"""A workload: a list of queries with the parameters that generated it, its JSON-lines file,
and exact answers on a table (SPEC §3). The generators live in :mod:`.workloads`."""

from __future__ import annotations

import json
from typing import Iterable, Mapping

import numpy as np

from ..errors import QueryError
from .engine import CountIndex
from .model import Query, Resolver
from .parser import parse_where


class Workload(list):
    """A list of queries plus the parameters that generated it (saved as JSON lines)."""

    def __init__(self, queries: Iterable[Query] = (), meta: Mapping | None = None):
        super().__init__(queries)
        self.meta = dict(meta or {})

    def save(self, path) -> None:
        with open(path, "w") as f:
            f.write(json.dumps({"workload": self.meta}) + "\n")
            for q in self:
                f.write(json.dumps(q.to_json()) + "\n")

    @classmethod
    def load(cls, path) -> "Workload":
        queries, meta = [], {}
        try:
            with open(path) as f:
                for i, line in enumerate(f, 1):
                    line = line.strip()
                    if not line:
                        continue
                    try:
                        d = json.loads(line)
                        if "workload" in d:
                            meta = d["workload"]
                        elif "where" in d:
                            queries.append(parse_where(d["where"]))
                        else:
                            queries.append(Query.from_json(d))
                    except (json.JSONDecodeError, KeyError, TypeError) as e:
                        raise QueryError(f"{path}: line {i} is not a query ({e})") from None
        except OSError as e:
            raise QueryError(f"cannot read workload {path}: {e}") from None
        return cls(queries, meta)


def as_workload(queries) -> Workload:
    """Accept a Query, a WHERE string, a list of either, or a Workload."""
    if isinstance(queries, Workload):
        return queries
    if isinstance(queries, (Query, str)):
        queries = [queries]
    return Workload([q if isinstance(q, Query) else parse_where(q) for q in queries])


def resolve(workload: Iterable[Query], table_or_domains, numeric=None) -> list[dict[str, np.ndarray]]:
    """Domain masks of every query, against a Table or a ``column → labels`` mapping."""
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
    index = CountIndex({c: table.codes(c) for c in cols}, {c: len(table.domain(c)) for c in cols},
                       np.zeros(table.n_rows, dtype=np.int64), 1)
    return index.sums(masks)[:, 0]

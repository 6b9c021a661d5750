"""A workload: a list of queries with the parameters that generated it, its JSON-lines file,
and exact answers on a table (SPEC §3). The generators live in :mod:`.workloads`."""

from __future__ import annotations

import json
import os
from typing import Iterable, Mapping

import numpy as np

from ..errors import QueryError
from .engine import CountIndex
from .model import Query, Resolver
from .parser import MAX_QUERY_CHARS, parse_where

#: longest workload line accepted (characters)
MAX_LINE_CHARS = 4 * MAX_QUERY_CHARS


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
        """Read a JSON-lines workload (UTF-8): an optional ``{"workload": {...}}`` line, then one
        query per line, ``{"predicates": [...]}`` or ``{"where": "..."}``."""
        if not isinstance(path, (str, os.PathLike)):
            raise QueryError(f"a workload path is a string or path, got {type(path).__name__}")
        queries, meta = [], {}
        try:
            with open(path, encoding="utf-8") as f:
                for i, line in enumerate(f, 1):
                    line = line.strip()
                    if not line:
                        continue
                    if len(line) > MAX_LINE_CHARS:
                        raise QueryError(f"workload {str(path)!r}: line {i} is {len(line):,} characters long "
                                         f"(at most {MAX_LINE_CHARS:,})")
                    try:
                        d = json.loads(line)
                    except json.JSONDecodeError as e:
                        raise QueryError(f"workload {str(path)!r}: line {i} is not JSON ({e.msg})") from None
                    except RecursionError:
                        raise QueryError(f"workload {str(path)!r}: line {i} nests too deeply") from None
                    if not isinstance(d, dict):
                        raise QueryError(f"workload {str(path)!r}: line {i} is not a query (a JSON object)")
                    try:
                        if "workload" in d:
                            if not isinstance(d["workload"], dict):
                                raise QueryError("the workload header is a JSON object")
                            meta = d["workload"]
                        elif "where" in d:
                            queries.append(parse_where(d["where"]))
                        else:
                            queries.append(Query.from_json(d))
                    except QueryError as e:
                        raise QueryError(f"workload {str(path)!r}: line {i}: {e}") from None
        except UnicodeDecodeError as e:
            raise QueryError(f"workload {str(path)!r} is not UTF-8 text (byte offset {e.start} of a line)") from None
        except OSError as e:
            raise QueryError(f"cannot read workload {str(path)!r}: {e.strerror or e}") from None
        return cls(queries, meta)


def as_workload(queries) -> Workload:
    """Accept a Query, a WHERE string, a list of either, or a Workload."""
    if isinstance(queries, Workload):
        return queries
    if isinstance(queries, (Query, str)):
        queries = [queries]
    if not isinstance(queries, (list, tuple)):
        raise QueryError(f"a query is a WHERE string or a ppdp Query (or a list of them), got {type(queries).__name__}")
    out = []
    for q in queries:
        if isinstance(q, Query):
            out.append(q)
        elif isinstance(q, str):
            out.append(parse_where(q))
        else:
            raise QueryError(f"a query is a WHERE string or a ppdp Query, got {type(q).__name__}")
    return Workload(out)


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

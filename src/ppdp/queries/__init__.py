"""Count queries, the SQL WHERE-subset parser, exact answers and workload generators (SPEC §3).

Inside the package the imports point one way: ``model`` (predicates, queries, resolution) <
``parser`` (SQL → model) < ``workload`` (lists of queries, their files, exact answers) <
``workloads`` (seeded generators); ``engine`` (the vectorised count index) stands alone.
"""

from __future__ import annotations

from .engine import CountIndex, split_masks
from .model import Predicate, Query, Resolver
from .parser import parse_where
from .workload import Workload, answer_exact, as_workload, resolve

__all__ = ["Predicate", "Query", "Resolver", "Workload", "CountIndex", "parse_where", "answer_exact", "as_workload",
           "resolve", "split_masks"]

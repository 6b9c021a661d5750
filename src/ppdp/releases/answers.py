"""The "answers" release family: noisy answers to a fixed workload of count queries (the
Laplace baseline of Fu et al. 2014, §9.4).

``answers.parquet``: ``where`` (the query's WHERE text), ``query`` (its exact JSON form, the
lookup key) and ``count`` (the noisy answer, float64 holding integers). Only the workload the
release was made for can be answered (estimator ``"lookup"``).
"""

from __future__ import annotations

import json

import numpy as np

from ..claims import claim_of
from ..errors import ReleaseError
from ..queries import Query, as_workload
from .base import Release, VerifyReport, register_family


def query_key(q: Query) -> str:
    """The exact, canonical text of a query (its JSON form with sorted keys)."""
    return json.dumps(q.to_json(), sort_keys=True, separators=(",", ":"))


@register_family("answers")
class AnswersRelease(Release):
    FILES = {"answers": ("where", "query", "count")}
    @property
    def answers(self):
        if "answers" not in self.tables:
            raise ReleaseError("an answers release needs answers.parquet")
        return self.tables["answers"]

    def counts(self) -> np.ndarray:
        return np.asarray(self.answers.column("count").to_numpy(), dtype=np.float64)

    def keys(self) -> list[str]:
        return [str(k) for k in self.answers.column("query").to_pylist()]

    def lookup(self, workload) -> np.ndarray:
        """The published noisy answer of every query of ``workload`` (a ReleaseError naming a
        query the release does not hold)."""
        from ..errors import QueryError

        table = dict(zip(self.keys(), self.counts()))
        out = []
        for q in as_workload(workload):
            k = query_key(q)
            if k not in table:
                raise QueryError(f"this release answers only its own workload; {str(q)!r} is not in it")
            out.append(table[k])
        return np.asarray(out, dtype=np.float64)

    def _verify(self, rep: VerifyReport, table) -> None:
        if not rep.check("answers" in self.tables, "answers.parquet present", "answers.parquet is missing"):
            return
        cols = set(self.answers.column_names)
        if not rep.check({"where", "query", "count"} <= cols, "answers.parquet has where, query, count",
                         f"answers.parquet columns {sorted(cols)} lack where/query/count"):
            return
        keys = self.keys()
        rep.check(len(set(keys)) == len(keys), "every query is answered once", "answers.parquet repeats a query")
        try:
            qs = [Query.from_json(json.loads(k)) for k in keys]
            self.resolve(qs)
        except (ValueError, KeyError, TypeError) as e:
            raise ReleaseError(f"answers.parquet holds a query this release's schema cannot resolve: {e}") from None
        rep.checks.append("every query resolves against the published domains")
        claim_of(self.manifest).check(self, rep, table)

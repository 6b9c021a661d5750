"""The "ldp" release family: one ε-locally differentially private report per record.

``data.parquet`` holds k rows per published record, in record order: ``record`` (0 … n − 1,
each repeated k times), the record's QI labels as they were (the same on its k rows) and, in
the sensitive column, the k distinct values of its report in ascending order (the order
carries nothing). Records are in random order. Written by k-subset selection
(:mod:`ppdp.mechanisms.randomization.subset`); the claim is
:class:`~ppdp.claims.ldp.LDPClaim`; the estimators are :mod:`ppdp.estimators.subset`.

What a receiver computes from the files: per QI predicate, the support count of every value
(the reports that hold it) and the number of records — the answer path's count index keys each
of the k rows by its value, so that one pass gives both (:meth:`LDPRelease.support_index`).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from ..claims import claim_of
from ..errors import ReleaseError
from ..kernels.subset import posterior_bound
from ..queries import CountIndex
from ..table import code_counts
from .base import Release, VerifyReport, register_family

#: the column that numbers the records
RECORD = "record"


@register_family("ldp")
class LDPRelease(Release):
    FILES = {"data": (RECORD, "{quasi}", "{sensitive}")}

    @property
    def data(self):
        return self.tables["data"]

    @property
    def sensitive(self) -> list[str]:
        return list(self.schema["sensitive"])

    @property
    def claim(self):
        return claim_of(self.manifest)

    @property
    def k(self) -> int:
        return int(self.manifest["certificate"]["k"])

    def _cache(self) -> dict:
        cache = self.__dict__.get("_ldp_cache")
        if cache is None:
            cache = self.__dict__["_ldp_cache"] = {}
        return cache

    def column_codes(self, column: str) -> np.ndarray:
        """Codes of a data column in the narrowest type of its domain (cached, read-only)."""
        key = ("codes", column, id(self.tables.get("data")))
        cache = self._cache()
        if key not in cache:
            cache[key] = self.narrow_codes("data", column)
        return cache[key]

    def reports(self) -> np.ndarray:
        """(n, k) codes: every record's report (checked by verify: k distinct ascending values)."""
        y = self.column_codes(self.sensitive[0])
        k = self.k
        if len(y) % k:
            raise ReleaseError(f"data.parquet has {len(y)} rows, not a multiple of k = {k}")
        return np.asarray(y).reshape(-1, k)

    def support_counts(self) -> np.ndarray:
        """Per value, the number of reports that hold it (int64)."""
        sa = self.sensitive[0]
        return code_counts(self.column_codes(sa), len(self.domains[sa]))

    def support_index(self, columns: Sequence[str]) -> CountIndex:
        """The answer path's count index (cached per column set): the rows (k per record) keyed by
        their value over the QI ``columns``; a predicate's sums are its support counts, and their
        total is k × its records."""
        cols = tuple(sorted(columns))
        key = ("index", cols, id(self.tables.get("data")))
        cache = self._cache()
        if key not in cache:
            sa = self.sensitive[0]
            cache[key] = CountIndex({c: self.column_codes(c) for c in cols}, {c: len(self.domains[c]) for c in cols},
                                    self.column_codes(sa), len(self.domains[sa]))
        return cache[key]

    def largest_posterior(self, epsilon: float, k: int) -> tuple[float, str | None]:
        """The largest posterior of any value for any record, and its value: with the prior π the
        whole-table distribution reconstructed from the support counts (clipped at 0), a report Y
        gives v ∈ Y the posterior π_v e^ε / (1 + (e^ε − 1) π(Y)) (and v ∉ Y less than π_v)."""
        sa = self.sensitive[0]
        m = len(self.domains[sa])
        n = int(self.manifest.get("n_published", 0) or 0)
        if n == 0 or len(self.column_codes(sa)) != n * k:
            return 0.0, None
        from ..kernels.subset import inclusion_probabilities

        p, q = inclusion_probabilities(m, k, epsilon)
        prior = np.clip((self.support_counts() - n * q) / (p - q), 0, None)
        prior = prior / prior.sum() if prior.sum() > 0 else np.full(m, 1.0 / m)
        g = float(np.exp(epsilon))
        Y = self.reports()
        best = np.zeros(m)
        for lo in range(0, len(Y), 1 << 20):
            pr = prior[Y[lo:lo + (1 << 20)]]
            post = pr * g / (1.0 + (g - 1.0) * pr.sum(axis=1, keepdims=True))
            np.maximum.at(best, Y[lo:lo + (1 << 20)].ravel(), post.ravel())
        v = int(np.argmax(best))
        # never above the ε-LDP bound of the value's prior (equal only when the rest of the report has prior 0)
        return float(min(best[v], posterior_bound(prior[v], epsilon))), str(self.domains[sa][v])

    def qi_rows_match(self, table) -> bool:
        """The published QI rows (one per record) are the source's (multisets)."""
        qi = list(self.schema["quasi"])
        if any(c not in table.column_names or list(table.domain(c)) != list(self.domains[c]) for c in qi):
            return False
        n = int(self.manifest["n_published"])
        if table.n_rows != n:
            return False
        if not qi:
            return True
        k = self.k
        dims = [len(self.domains[c]) for c in qi]
        if float(np.prod(dims, dtype=float)) >= 2**62:
            pub = np.stack([self.column_codes(c)[::k].astype(np.int64) for c in qi], axis=1)
            src = np.stack([np.asarray(table.codes(c), dtype=np.int64) for c in qi], axis=1)
            return bool(np.array_equal(np.unique(pub, axis=0, return_counts=True)[1],
                                       np.unique(src, axis=0, return_counts=True)[1])
                        and np.array_equal(np.unique(pub, axis=0), np.unique(src, axis=0)))
        pub_key = np.ravel_multi_index([self.column_codes(c)[::k].astype(np.int64) for c in qi], dims)
        src_key = np.ravel_multi_index([np.asarray(table.codes(c), dtype=np.int64) for c in qi], dims)
        return bool(np.array_equal(np.sort(pub_key), np.sort(src_key)))

    def check_reports(self, rep: VerifyReport, k: int) -> None:
        """The file's format for k values per report: n_published·k rows, ``record`` = 0 … n − 1
        each k times in order, the k values of a record distinct and ascending, its QI labels the
        same on its k rows."""
        n = int(self.manifest["n_published"])
        rows = self.data.num_rows
        if not rep.check(rows == n * k, "data.parquet has k rows per published record",
                         f"data.parquet has {rows} rows, not k × n_published = {k} × {n}"):
            return
        rec = np.asarray(self.data.column(RECORD).to_numpy(), dtype=np.int64)
        rep.check(bool(np.array_equal(rec, np.repeat(np.arange(n, dtype=np.int64), k))),
                  "record = 0 … n − 1, each on k consecutive rows", "the record column is not 0 … n − 1, each k times in order")
        Y = self.reports().astype(np.int64)
        rep.check(bool((np.diff(Y, axis=1) > 0).all()) if k > 1 else True,
                  "every report holds k distinct values in ascending order",
                  "some report repeats a value or is not in ascending order")
        same = all(bool((self.column_codes(c).reshape(-1, k) == self.column_codes(c)[::k, None]).all())
                   for c in self.schema["quasi"])
        rep.check(same, "every record's QI labels are the same on its k rows", "a record's QI labels differ between its rows")

    def _verify(self, rep: VerifyReport, table) -> None:
        if not self.check_data_file(rep):
            return
        sens = list(self.schema.get("sensitive", []))
        declared = [*self.schema.get("quasi", []), *sens]
        absent = [c for c in declared if c not in self.data.column_names or c not in self.domains]
        if not rep.check(len(sens) == 1 and not absent, "one sensitive column; every schema column has a domain and a data column",
                         f"schema columns without a domain or a data.parquet column: {absent or sens}"):
            return
        cols = set(self.data.column_names)
        expected = {*declared, RECORD}
        if not rep.check(cols == expected, "data.parquet holds exactly record, the QI and the sensitive columns",
                         f"data.parquet columns {sorted(cols)} != {sorted(expected)}"):
            return
        for c in declared:
            self.column_codes(c)  # raises ReleaseError on a label outside the domain
        rep.checks.append("every published label lies in its domain")
        self.claim.check(self, rep, table)


__all__ = ["LDPRelease", "RECORD"]

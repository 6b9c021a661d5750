"""The "randomized" release family (SPEC §5): ``data.parquet`` holds the published QI/NSA
columns unchanged, the randomized SA column(s) and, for SDR, a ``subtable`` column.

Mechanisms of this family (uniform perturbation, SDR, A') register an estimator and a
verifier by mechanism name with :func:`register_mechanism`; estimation and verification
are written once per mechanism, in the mechanism's own module.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from .base import Release, VerifyReport, register_family

# mechanism name -> (estimator(release, workload, masks) -> ndarray, verifier(release, report, table))
_MECHANISMS: dict[str, tuple[Callable, Callable]] = {}


def register_mechanism(name: str, estimator: Callable, verifier: Callable) -> None:
    _MECHANISMS[name] = (estimator, verifier)


def _lookup(name: str):
    if name not in _MECHANISMS:
        import ppdp.mechanisms.randomization  # noqa: F401  (registers the mechanisms)
    from ..errors import ReleaseError

    if name not in _MECHANISMS:
        raise ReleaseError(f"no estimator for randomized mechanism {name!r}")
    return _MECHANISMS[name]


@register_family("randomized")
class RandomizedRelease(Release):
    @property
    def data(self):
        return self.tables["data"]

    def column_codes(self, column: str) -> np.ndarray:
        return self.codes("data", column)

    def answer(self, workload, **options) -> np.ndarray:
        """Estimated counts; ``options`` go to the mechanism's estimator (e.g. ``method="closed"`` for A')."""
        wl, masks = self.resolve(workload)
        estimator, _ = _lookup(self.manifest["mechanism"])
        return np.asarray(estimator(self, wl, masks, **options), dtype=np.float64)

    def _verify(self, rep: VerifyReport, table) -> None:
        rep.check("data" in self.tables, "data.parquet present", "data.parquet is missing")
        if "data" not in self.tables:
            return
        rep.check(self.data.num_rows == int(self.manifest["n_published"]), "data.parquet has n_published rows",
                  f"data.parquet has {self.data.num_rows} rows, the manifest says {self.manifest['n_published']}")
        for c in self.data.column_names:
            if c in self.domains:
                self.column_codes(c)  # raises ReleaseError on a label outside the domain
        rep.checks.append("every published label lies in its domain")
        _, verifier = _lookup(self.manifest["mechanism"])
        verifier(self, rep, table)

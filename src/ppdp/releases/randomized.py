"""The "randomized" release family (SPEC §5): ``data.parquet`` holds the published QI/NSA
columns unchanged, the randomized SA column(s) and, for SDR, a ``subtable`` column.

What a receiver knows is the release's :class:`~ppdp.kernels.transition.TransitionModel`
(one per sensitive attribute), built here from the typed claim and the files by
:meth:`RandomizedRelease.transition_models`: uniform perturbation and global randomization A
(one group, m × m uniform matrix), SDR (one uniform group per sub-table) and A' (the
receiver-side m × m matrix of the decoy schedule re-run on the published counts). The
estimators (:mod:`ppdp.estimators.randomized`) and the audit read this one model; ``verify``
checks the file format here and the claim through :meth:`Claim.check`.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from ..claims import claim_of
from ..claims.diverted import DivertedClaim
from ..claims.retention import RetentionClaim
from ..claims.rho import RhoClaim
from ..errors import ReleaseError
from ..kernels.transition import TransitionModel, receiver_counts
from .base import Release, VerifyReport, register_family


@register_family("randomized")
class RandomizedRelease(Release):
    FILES = {"data": ("{quasi}", "{sensitive}", "subtable?")}
    @property
    def data(self):
        return self.tables["data"]

    @property
    def sensitive(self) -> list[str]:
        return list(self.schema["sensitive"])

    def column_codes(self, column: str) -> np.ndarray:
        return self.codes("data", column)

    @property
    def claim(self):
        """The typed privacy claim of the certificate."""
        return claim_of(self.manifest)

    def published_counts(self, attribute: str) -> np.ndarray:
        """Counts of each published value of a sensitive attribute (int64)."""
        return np.bincount(self.column_codes(attribute), minlength=len(self.domains[attribute])).astype(np.int64)

    def transition_models(self, counts: Sequence[np.ndarray] | None = None) -> tuple[TransitionModel, ...]:
        """The public randomization model of every sensitive attribute.

        ``counts`` (A' only, one vector per SA) replaces the receiver's counts in the decoy
        schedule — for analysis (what knowing the true counts would change); a receiver has
        only the published counts."""
        claim = self.claim
        sas = self.sensitive
        if isinstance(claim, DivertedClaim):
            lp = claim.l_prime
            if counts is None:
                counts = [receiver_counts(self.published_counts(s), lp) for s in sas]
            if len(counts) != len(sas):
                raise ReleaseError(f"{len(counts)} count vectors given for {len(sas)} sensitive attributes")
            return tuple(TransitionModel.diverted(s, np.asarray(c), lp) for s, c in zip(sas, counts))
        sa = sas[0]
        m = len(self.domains[sa])
        if isinstance(claim, RhoClaim) and claim.is_sdr:
            pos = {lab: i for i, lab in enumerate(self.domains[sa])}
            sts = claim.subtables
            try:
                domains = [[pos[lab] for lab in st["domain"]] for st in sts]
            except KeyError as e:
                raise ReleaseError(f"an SDR sub-table's domain holds {e.args[0]!r}, not a value of {sa!r}") from None
            return (TransitionModel.subtables(sa, m, domains, [float(st["gamma"]) for st in sts],
                                              [int(st["n"]) for st in sts]),)
        if isinstance(claim, (RhoClaim, RetentionClaim)):
            return (TransitionModel.uniform(sa, m, float(claim.gamma), kind="uniform"),)
        raise ReleaseError(f"a randomized release with a {claim.model!r} claim has no transition model")

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
        claim = self.claim
        expected = set(self.schema["quasi"]) | set(self.sensitive)
        if isinstance(claim, RhoClaim) and claim.is_sdr:
            expected.add("subtable")
        cols = set(self.data.column_names)
        rep.check(cols == expected, "data.parquet holds exactly the NSA and SA columns",
                  f"data.parquet columns {sorted(cols)} != {sorted(expected)}")
        claim.check(self, rep, table)

"""ℓ'-diverted zero-differential privacy (Fu, Wang, Wang & Wong 2014; SPEC §2.4).

Mechanism A' puts every tuple in a decoy group of ℓ' distinct SA values built from
Π_{id,S}(D) only and publishes a value drawn uniformly from its group (p = q = 1/ℓ'), so that
neighbouring tables give identical output distributions (Theorem 1); the groups are never
published. N is made a multiple of ℓ' by removing N mod ℓ' random rows, reported.

``check`` re-derives from ``params`` and the files: ℓ' = params.l_prime, p = q = 1/ℓ',
n_published a multiple of ℓ', dropped = n_input mod ℓ', n_groups = N/ℓ', the groups absent,
the sensitive attributes those of the schema, ℓ' ≤ every SA domain; with the source table:
eligibility (max count ≤ N/ℓ'), the domains, and each NSA column = the source's minus the
dropped rows. ``bound()``: no adversary's posterior of a value exceeds 1/ℓ' given the group.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from ..kernels.transition import close
from . import Claim


@dataclass(frozen=True)
class DivertedClaim(Claim):
    model = "l'-diverted zero-differential privacy"

    l_prime: int
    sensitive: tuple
    n_groups: int
    p: float
    q: float
    dropped_reason: str = ""
    groups_published: bool = False

    @classmethod
    def derive(cls, l_prime: int, sensitive, n_published: int, dropped: int) -> "DivertedClaim":
        lp = int(l_prime)
        return cls(lp, tuple(sensitive), int(n_published) // lp, 1.0 / lp, 1.0 / lp,
                   f"N mod ℓ' = {dropped} random row(s) removed so that N is a multiple of ℓ'", False)

    def to_certificate(self) -> dict[str, Any]:
        return {"model": self.model, "l_prime": self.l_prime, "sensitive": list(self.sensitive), "n_groups": self.n_groups,
                "dropped_reason": self.dropped_reason, "p": self.p, "q": self.q, "groups_published": self.groups_published}

    @classmethod
    def from_certificate(cls, cert: Mapping[str, Any]) -> "DivertedClaim":
        lp = cert["l_prime"]
        if isinstance(lp, bool) or not isinstance(lp, int):
            raise TypeError(f"l_prime must be an integer, got {lp!r}")
        return cls(lp, tuple(cert.get("sensitive", ())), int(cert["n_groups"]), float(cert["p"]), float(cert["q"]),
                   str(cert.get("dropped_reason", "")), bool(cert.get("groups_published", False)))

    def check(self, release, report, source=None) -> None:
        m = release.manifest
        cert = m.get("certificate", {})
        lp = self.l_prime
        if not report.check(lp >= 2, "certificate l_prime is an integer ≥ 2", f"certificate l_prime is {lp!r}"):
            return
        report.check(m.get("params", {}).get("l_prime") == lp, "params.l_prime equals certificate.l_prime",
                     f"params.l_prime {m.get('params', {}).get('l_prime')!r} != certificate.l_prime {lp}")
        report.check(close(self.p, 1 / lp) and close(self.q, 1 / lp), "p = q = 1/ℓ'",
                     f"certificate p, q = ({self.p}, {self.q}), not 1/ℓ' = {1 / lp}")
        N, n_in, dropped = int(m["n_published"]), int(m["n_input"]), int(m["dropped"])
        report.check(N % lp == 0, "n_published is a multiple of ℓ'", f"n_published {N} is not a multiple of ℓ' = {lp}")
        report.check(dropped == n_in % lp, "dropped = n_input mod ℓ' (< ℓ')", f"dropped {dropped} != n_input mod ℓ' = {n_in % lp}")
        report.check(self.n_groups == N // lp, "n_groups = n_published / ℓ'", f"n_groups {self.n_groups} != {N // lp}")
        report.check(not self.groups_published and not any(k in cert or k in m for k in ("groups", "decoy_groups")),
                     "the decoy groups are not published", "the release publishes its decoy groups")
        sas = list(release.schema["sensitive"])
        report.check(bool(sas) and sas == list(self.sensitive), "sensitive attributes match the certificate",
                     f"schema sensitive {sas} != certificate {list(self.sensitive)}")
        for s in sas:
            report.check(lp <= len(release.domains[s]), f"ℓ' ≤ number of values of {s}",
                         f"ℓ' = {lp} exceeds the {len(release.domains[s])} values of {s!r}")
        report.facts["l_prime"] = lp
        report.facts["dropped"] = dropped
        self.agrees_with(DivertedClaim.derive(lp, sas, N, dropped), report)
        if source is None:
            return
        for s in sas:
            if s not in source.column_names:
                report.problems.append(f"the source table lacks the sensitive column {s!r}")
                continue
            c = source.counts(s)
            report.check(int(c.max()) <= N // lp, f"source eligible for ℓ' on {s} (max count ≤ N/ℓ')",
                         f"source not eligible: {s} has a value occurring {int(c.max())} times > N/ℓ' = {N // lp}")
            report.check(list(source.domain(s)) == list(release.domains[s]), f"domain of {s} matches the source",
                         f"the domain of {s} differs from the source table's")
        for c in release.schema["quasi"]:  # NSA values are published unchanged, minus the dropped rows
            if c not in source.column_names or list(source.domain(c)) != list(release.domains[c]):
                report.problems.append(f"NSA column {c!r} does not match the source table")
                continue
            diff = source.counts(c) - np.bincount(release.codes("data", c), minlength=len(release.domains[c]))
            report.check(bool((diff >= 0).all()) and int(diff.sum()) == dropped, f"NSA column {c} = source minus the dropped rows",
                         f"NSA column {c!r} is not the source column minus {dropped} dropped rows")

    def bound(self) -> Mapping[str, Any]:
        return {"posterior": 1.0 / self.l_prime, "name": f"1/ℓ' = 1/{self.l_prime}"}

    def statement(self) -> str:
        return (f"ℓ'-diverted zero-differential privacy with ℓ' = {self.l_prime}: each published sensitive value is drawn "
                f"uniformly from a hidden decoy group of {self.l_prime} distinct values built from the counts alone, so "
                "neighbouring tables give the same output distribution and no value's posterior exceeds 1/ℓ' given its group.")


__all__ = ["DivertedClaim"]

"""ℓ'-diverted zero-differential privacy (Fu, Wang, Wang & Wong 2014; SPEC §2.4).

Mechanism A' puts every tuple in a decoy group of ℓ' distinct SA values built from
Π_{id,S}(D) and publishes a value drawn uniformly from its group (p = q = 1/ℓ'); the groups
are never published. N is made a multiple of ℓ' by removing N mod ℓ' random rows, reported.

What holds (docs/diverted.md, "What A' guarantees end to end"): Theorem 1 — neighbours
(one person's SA swapped with a member of the same decoy group) give identical output
distributions — holds *given the secret id draw*. The swap partners depend on that draw, so
unconditionally it holds only for the tuples whose value lies in a closed block (every group
holding it has the same ℓ' values); no decoy-group construction can do better (the x,x,y,z
table with ℓ' = 2 has no valid construction at all). The claim states this and quantifies
the rest from the published counts (:func:`~ppdp.kernels.transition.diverted_leak`):
``closed_fraction``, ``swap_advantage`` (a lower bound on the two-unknown adversary's
advantage) and ``max_posterior`` (≤ 1/ℓ', adversary with the table's frequencies as prior).

``check`` re-derives from ``params`` and the files: ℓ' = params.l_prime, p = q = 1/ℓ',
n_published a multiple of ℓ', dropped = n_input mod ℓ', n_groups = N/ℓ', the groups absent,
the sensitive attributes those of the schema, ℓ' ≤ every SA domain, the leak figures from the
published counts; with the source table: eligibility (max count ≤ N/ℓ'), the domains, and each
NSA column = the source's minus the dropped rows (and the release's goodness of fit,
:meth:`~ppdp.releases.randomized.RandomizedRelease.check_source_fit`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from ..kernels.transition import close, diverted_leak, largest_posterior, receiver_counts
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
    guarantee: str = "conditional on the secret id draw"
    closed_fraction: float = 0.0
    swap_advantage: float = 1.0
    max_posterior: float = 1.0

    @classmethod
    def derive(cls, l_prime: int, sensitive, n_published: int, dropped: int, published_counts=()) -> "DivertedClaim":
        """The claim from ℓ', the SAs, the sizes and the published counts of every SA (the leak
        figures come from the receiver's counts, so that verify re-derives them from the files)."""
        lp = int(l_prime)
        leaks = [diverted_leak(receiver_counts(np.asarray(c, dtype=np.int64), lp), lp) for c in published_counts]
        closed = min((x["closed_fraction"] for x in leaks), default=0.0)
        adv = max((x["swap_advantage"] for x in leaks), default=1.0)
        post = max((x["max_posterior"] for x in leaks), default=1.0)
        return cls(lp, tuple(sensitive), int(n_published) // lp, 1.0 / lp, 1.0 / lp,
                   f"N mod ℓ' = {dropped} random row(s) removed so that N is a multiple of ℓ'", False,
                   "conditional on the secret id draw", round(closed, 9), round(adv, 9), round(post, 9))

    def to_certificate(self) -> dict[str, Any]:
        return {"model": self.model, "l_prime": self.l_prime, "sensitive": list(self.sensitive), "n_groups": self.n_groups,
                "dropped_reason": self.dropped_reason, "p": self.p, "q": self.q, "groups_published": self.groups_published,
                "guarantee": self.guarantee, "closed_fraction": self.closed_fraction,
                "swap_advantage": self.swap_advantage, "max_posterior": self.max_posterior}

    @classmethod
    def from_certificate(cls, cert: Mapping[str, Any]) -> "DivertedClaim":
        lp = cert["l_prime"]
        if isinstance(lp, bool) or not isinstance(lp, int):
            raise TypeError(f"l_prime must be an integer, got {lp!r}")
        return cls(lp, tuple(cert.get("sensitive", ())), int(cert["n_groups"]), float(cert["p"]), float(cert["q"]),
                   str(cert.get("dropped_reason", "")), bool(cert.get("groups_published", False)),
                   str(cert["guarantee"]), float(cert["closed_fraction"]), float(cert["swap_advantage"]),
                   float(cert["max_posterior"]))

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
        report.facts["unconditional ℓ'-diverted privacy (closed blocks)"] = f"{self.closed_fraction:.2%} of the tuples"
        report.facts["swap advantage (lower bound)"] = round(self.swap_advantage, 6)
        pub = [release.published_counts(s) for s in sas]
        self.agrees_with(DivertedClaim.derive(lp, sas, N, dropped, pub), report)
        self.check_disclosure(release, report)
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
            diff = source.counts(c) - release.published_counts(c)
            report.check(bool((diff >= 0).all()) and int(diff.sum()) == dropped, f"NSA column {c} = source minus the dropped rows",
                         f"NSA column {c!r} is not the source column minus {dropped} dropped rows")

    def bound(self) -> Mapping[str, Any]:
        return {"posterior": 1.0 / self.l_prime, "name": f"1/ℓ' = 1/{self.l_prime}"}

    def disclosure(self, release) -> dict[str, Any]:
        """No record's SA follows from the files with certainty (every published value comes from a
        group of ℓ' distinct values); the largest posterior of the receiver's transition model
        with the receiver's counts as prior (≤ 1/ℓ')."""
        post = 0.0
        for model, sa in zip(release.transition_models(), release.sensitive):
            y = release.published_counts(sa)
            post = max(post, largest_posterior(model.single, y, receiver_counts(y, self.l_prime)))
        n = int(release.manifest.get("n_published", 0) or 0)
        return {"records_certain": 0, "n_records": n, "share_certain": 0.0, "per_value": {}, "max_posterior": post}

    def statement(self) -> str:
        return (f"ℓ'-diverted zero-differential privacy with ℓ' = {self.l_prime}, conditional on the secret id draw: each "
                f"published sensitive value is drawn uniformly from a hidden decoy group of {self.l_prime} distinct values, so "
                f"given the draw, swapping a person's value with a member of its group leaves the output distribution "
                f"unchanged. Without conditioning this holds for the {self.closed_fraction:.1%} of tuples in closed blocks; "
                f"for the others an adversary who knows every row but which of two people holds which value can tell the "
                f"tables apart with advantage at least {self.swap_advantage:.3g}. An adversary whose prior is the table's "
                f"frequencies reaches a posterior of at most {self.max_posterior:.3g} (≤ 1/ℓ').")


__all__ = ["DivertedClaim"]

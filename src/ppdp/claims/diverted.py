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
the rest (:func:`~ppdp.kernels.swap_leak.diverted_leak`) from the table's SA counts after the
dropped rows (``sa_counts``, published: every swap neighbour has the same counts, and the
release's own counts estimate them without bias, Theorem 3) and ℓ' — never from the secret
draw, so the figures are the same on every publish of the same table:
``closed_fraction``; ``swap_advantage``, an upper bound on the total-variation distance between
the release laws of the table and of its swap with a holder of each of the ℓ'−1 values that
hide a person's value best, for every person (the advantage of any test on the whole release);
``swap_advantage_lower``, a lower bound on the same order statistic; ``max_posterior`` (≤ 1/ℓ',
adversary with the table's frequencies as prior).

``check`` re-derives from ``params`` and the files: ℓ' = params.l_prime, p = q = 1/ℓ',
n_published a multiple of ℓ', dropped = n_input mod ℓ', n_groups = N/ℓ', the groups absent,
the sensitive attributes those of the schema, ℓ' ≤ every SA domain, ``sa_counts`` on each SA's
domain summing to N with every count ≤ N/ℓ', no published value outside the values with tuples,
each published count within its exact Binomial(ℓ'·f_v, 1/ℓ') law (Bonferroni, at FIT_ALPHA),
the leak figures from ``sa_counts`` and ℓ'; with the source table: eligibility (max count ≤ N/ℓ'),
the domains, ``sa_counts`` = the source's counts minus the dropped rows, and each NSA column =
the source's minus the dropped rows (and the release's goodness of fit,
:meth:`~ppdp.releases.randomized.RandomizedRelease.check_source_fit`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np
from scipy import stats

from ..kernels.swap_leak import diverted_leak
from ..kernels.transition import FIT_ALPHA, close, largest_posterior, receiver_counts
from . import Claim

#: the guarantee as the certificate states it
GUARANTEE = "conditional on the secret id draw; unconditionally bounded by swap_advantage"


def _counts_on(domain, by_label: Mapping[str, Any]) -> np.ndarray:
    """A count vector in domain order from a {label: count} mapping (absent labels: 0)."""
    return np.array([int(by_label.get(str(v), 0)) for v in domain], dtype=np.int64)


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
    guarantee: str = GUARANTEE
    closed_fraction: float = 0.0
    swap_advantage: float = 1.0
    swap_advantage_lower: float = 1.0
    max_posterior: float = 1.0
    sa_counts: tuple = ()  # one {label: count} dict per SA: the counts after the dropped rows

    @classmethod
    def derive(cls, l_prime: int, sensitive, n_published: int, dropped: int, sa_counts=(), domains=None) -> "DivertedClaim":
        """The claim from ℓ', the SAs, the sizes and the SA counts of the published table (the
        source minus the dropped rows, one vector per SA on its domain, whose labels ``domains``
        gives; codes as labels when None). The leak figures are a function of these counts and ℓ'
        only — the same on every publish of the same table (when no row is dropped)."""
        lp = int(l_prime)
        vecs = [np.asarray(c, dtype=np.int64) for c in sa_counts]
        doms = [list(range(len(c))) for c in vecs] if domains is None else [list(d) for d in domains]
        leaks = [diverted_leak(c, lp) for c in vecs]
        closed = min((x["closed_fraction"] for x in leaks), default=0.0)
        adv = max((x["swap_advantage"] for x in leaks), default=1.0)
        low = max((x["swap_advantage_lower"] for x in leaks), default=1.0)
        post = max((x["max_posterior"] for x in leaks), default=1.0)
        counts = tuple({str(v): int(k) for v, k in zip(d, c) if k} for d, c in zip(doms, vecs))
        return cls(lp, tuple(sensitive), int(n_published) // lp, 1.0 / lp, 1.0 / lp,
                   f"N mod ℓ' = {dropped} random row(s) removed so that N is a multiple of ℓ'", False,
                   GUARANTEE, round(closed, 9), round(adv, 9), round(low, 9), round(post, 9), counts)

    def to_certificate(self) -> dict[str, Any]:
        return {"model": self.model, "l_prime": self.l_prime, "sensitive": list(self.sensitive), "n_groups": self.n_groups,
                "dropped_reason": self.dropped_reason, "p": self.p, "q": self.q, "groups_published": self.groups_published,
                "guarantee": self.guarantee, "closed_fraction": self.closed_fraction,
                "swap_advantage": self.swap_advantage, "swap_advantage_lower": self.swap_advantage_lower,
                "max_posterior": self.max_posterior,
                "sa_counts": {s: dict(c) for s, c in zip(self.sensitive, self.sa_counts)}}

    @classmethod
    def from_certificate(cls, cert: Mapping[str, Any]) -> "DivertedClaim":
        lp = cert["l_prime"]
        if isinstance(lp, bool) or not isinstance(lp, int):
            raise TypeError(f"l_prime must be an integer, got {lp!r}")
        sens = tuple(cert.get("sensitive", ()))
        raw = cert.get("sa_counts", {})
        if not isinstance(raw, Mapping) or not all(isinstance(raw.get(s, {}), Mapping) for s in sens):
            raise TypeError("sa_counts must map every sensitive attribute to {label: count}")
        counts = tuple({str(k): v for k, v in raw.get(s, {}).items()} for s in sens)
        return cls(lp, sens, int(cert["n_groups"]), float(cert["p"]), float(cert["q"]),
                   str(cert.get("dropped_reason", "")), bool(cert.get("groups_published", False)),
                   str(cert["guarantee"]), float(cert["closed_fraction"]), float(cert["swap_advantage"]),
                   float(cert.get("swap_advantage_lower", 1.0)), float(cert["max_posterior"]), counts)

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
        report.facts["swap advantage (upper bound)"] = round(self.swap_advantage, 6)
        counts = self._checked_counts(release, sas, N, report)
        if counts is None:
            return
        self.agrees_with(DivertedClaim.derive(lp, sas, N, dropped, counts, [release.domains[s] for s in sas]), report)
        self.check_disclosure(release, report)
        if source is None:
            return
        for s, c_pub in zip(sas, counts):
            if s not in source.column_names:
                report.problems.append(f"the source table lacks the sensitive column {s!r}")
                continue
            c = source.counts(s)
            report.check(int(c.max()) <= N // lp, f"source eligible for ℓ' on {s} (max count ≤ N/ℓ')",
                         f"source not eligible: {s} has a value occurring {int(c.max())} times > N/ℓ' = {N // lp}")
            if not report.check(list(source.domain(s)) == list(release.domains[s]), f"domain of {s} matches the source",
                                f"the domain of {s} differs from the source table's"):
                continue
            diff = c - c_pub
            report.check(bool((diff >= 0).all()) and int(diff.sum()) == dropped,
                         f"sa_counts of {s} = the source's counts minus the dropped rows",
                         f"the certificate's sa_counts of {s!r} are not the source's counts minus {dropped} dropped row(s)")
        for c in release.schema["quasi"]:  # NSA values are published unchanged, minus the dropped rows
            if c not in source.column_names or list(source.domain(c)) != list(release.domains[c]):
                report.problems.append(f"NSA column {c!r} does not match the source table")
                continue
            diff = source.counts(c) - release.published_counts(c)
            report.check(bool((diff >= 0).all()) and int(diff.sum()) == dropped, f"NSA column {c} = source minus the dropped rows",
                         f"NSA column {c!r} is not the source column minus {dropped} dropped rows")

    def _checked_counts(self, release, sas, N: int, report) -> list[np.ndarray] | None:
        """The certificate's ``sa_counts`` as vectors on each SA's domain, after checking them
        against the files: labels of the domain, Σ = N, every count ≤ N/ℓ', and no published
        value outside the values with tuples (a value no tuple holds is in no decoy group)."""
        lp = self.l_prime
        if not report.check(len(self.sa_counts) == len(sas) and all(isinstance(c, Mapping) for c in self.sa_counts),
                            "sa_counts given for every sensitive attribute",
                            "the certificate lacks sa_counts for every sensitive attribute"):
            return None
        out = []
        for s, by_label in zip(sas, self.sa_counts):
            dom = [str(v) for v in release.domains[s]]
            vals = list(by_label.values())
            ok = (set(by_label) <= set(dom) and all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in vals))
            if not report.check(ok, f"sa_counts of {s} are positive integers on its domain",
                                f"the certificate's sa_counts of {s!r} are not positive integer counts of its domain's labels"):
                return None
            report.check([v for v in dom if v in by_label] == list(by_label), f"sa_counts of {s} in domain order",
                         f"the certificate's sa_counts of {s!r} are not in the order of its domain (the decoy schedule "
                         "breaks ties by that order)")
            c = _counts_on(dom, by_label)
            report.check(int(c.sum()) == N and int(c.max(initial=0)) <= N // lp,
                         f"sa_counts of {s} sum to n_published, each ≤ N/ℓ'",
                         f"the certificate's sa_counts of {s!r} sum to {int(c.sum())} (n_published {N}) "
                         f"or exceed N/ℓ' = {N // lp}")
            stray = (release.published_counts(s) > 0) & (c == 0)
            report.check(not stray.any(), f"every published value of {s} has tuples in sa_counts",
                         f"{s}: {int(stray.sum())} published value(s) have no tuple in the certificate's sa_counts, "
                         "which no decoy group can produce")
            y = release.published_counts(s).astype(np.int64)
            # f'_v is exactly Binomial(ℓ'·f_v, 1/ℓ'): each of v's f_v groups publishes ℓ' uniform draws from ℓ' values
            live = c > 0
            p_two = 2 * np.minimum(stats.binom.cdf(y[live], lp * c[live], 1 / lp), stats.binom.sf(y[live] - 1, lp * c[live], 1 / lp))
            worst = float(np.min(p_two, initial=1.0)) * max(int(live.sum()), 1)
            report.check(worst > FIT_ALPHA, f"published counts of {s} fit sa_counts (exact binomial per value, Bonferroni)",
                         f"{s}: the published counts do not fit the certificate's sa_counts (exact binomial test, "
                         f"Bonferroni p = {worst:.3g} ≤ {FIT_ALPHA:g})")
            out.append(c)
        return out

    def bound(self) -> Mapping[str, Any]:
        return {"posterior": 1.0 / self.l_prime, "name": f"1/ℓ' = 1/{self.l_prime}"}

    def disclosure(self, release) -> dict[str, Any]:
        """No record's SA follows from the files with certainty (every published value comes from a
        group of ℓ' distinct values); the largest posterior P(true v | published u) of an adversary
        whose prior is the table's frequencies, from the certificate's ``sa_counts`` (the same on
        every publish; the receiver's counts from the published ones when they are absent)."""
        post = 0.0
        for i, sa in enumerate(release.sensitive):
            by_label = self.sa_counts[i] if i < len(self.sa_counts) else None
            c = _counts_on([str(v) for v in release.domains[sa]], by_label) if isinstance(by_label, Mapping) else None
            if c is not None and int(c.sum()) > 0 and int(c.sum()) % self.l_prime == 0 and c.max() <= c.sum() // self.l_prime:
                post = max(post, diverted_leak(c, self.l_prime)["max_posterior"])
            else:
                y = release.published_counts(sa)
                post = max(post, largest_posterior(release.transition_models()[i].single, y, receiver_counts(y, self.l_prime)))
        n = int(release.manifest.get("n_published", 0) or 0)
        return {"records_certain": 0, "n_records": n, "share_certain": 0.0, "per_value": {}, "max_posterior": post}

    def statement(self) -> str:
        return (f"ℓ'-diverted zero-differential privacy with ℓ' = {self.l_prime}, conditional on the secret id draw: each "
                f"published sensitive value is drawn uniformly from a hidden decoy group of {self.l_prime} distinct values, so "
                f"given the draw, swapping a person's value with a member of its group leaves the output distribution "
                f"unchanged. Without conditioning this holds for the {self.closed_fraction:.1%} of tuples in closed blocks. "
                f"For every person there {'is 1 other sensitive value' if self.l_prime == 2 else f'are {self.l_prime - 1} other sensitive values'} "
                f"such that an adversary who knows every "
                f"row except which of that person and a holder of one of them holds which value tells the two tables apart, "
                f"from the whole release, with advantage (total-variation distance between the two release distributions) "
                f"at most {self.swap_advantage:.3g}; for some person it is at least {self.swap_advantage_lower:.3g}. These "
                f"figures depend only on the table's sensitive-value counts (published) and ℓ', never on the secret draw. An "
                f"adversary whose prior is the table's frequencies reaches a posterior of at most {self.max_posterior:.3g} "
                f"(≤ 1/ℓ').")


__all__ = ["DivertedClaim"]

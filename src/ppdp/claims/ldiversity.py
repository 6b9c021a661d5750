"""The ℓ-diversity claim of an Anatomy release (Xiao & Tao 2006).

Claim: every bucket holds at least ℓ distinct SA values and no value more than |g|/ℓ times,
so the adversary's posterior of any value is at most 1/ℓ. The per-value bound 1/ℓ is written
as ``thresholds`` (the form every bucketized certificate shares); ``verify`` re-derives it
from ``params.l`` alone — no SA statistics are needed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Mapping

import numpy as np

from ..validation import FrozenDict
from . import Claim
from .fprivacy import SHARE_BLOCK, THRESHOLD_TOL, check_bucket_shares, threshold_array


@dataclass(frozen=True)
class LDiversityClaim(Claim):
    """ℓ-diversity: ≥ ℓ distinct values per bucket, every share ≤ 1/ℓ."""

    model: ClassVar[str] = "l-diversity"

    l: int  # noqa: E741
    thresholds: FrozenDict  # SA label → 1/ℓ

    @classmethod
    def derive(cls, labels, l: int) -> "LDiversityClaim":  # noqa: E741
        return cls(int(l), FrozenDict({str(lab): 1.0 / int(l) for lab in labels}))

    def threshold_array(self, labels) -> np.ndarray:
        return threshold_array(self.thresholds, labels)

    def to_certificate(self) -> dict[str, Any]:
        return {"model": self.model, "l": self.l, "thresholds": {k: float(v) for k, v in self.thresholds.items()}}

    @classmethod
    def from_certificate(cls, cert: Mapping[str, Any]) -> "LDiversityClaim":
        ell = cert["l"]
        if isinstance(ell, bool) or not isinstance(ell, int) or ell < 1:
            raise ValueError(f"l must be a whole number ≥ 1, got {ell!r}")
        return cls(ell, FrozenDict({str(k): float(v) for k, v in dict(cert["thresholds"]).items()}))

    def check(self, release, report, source=None) -> None:
        params = release.manifest.get("params", {})
        report.check(params.get("l") == self.l, "certificate ℓ = params.l",
                     f"certificate l = {self.l!r} but params.l = {params.get('l')!r}")
        dom = list(release.domains[release.sa])
        thr = threshold_array(self.thresholds, dom)
        want = 1.0 / self.l
        ok = np.isclose(thr, want, rtol=THRESHOLD_TOL, atol=THRESHOLD_TOL)
        report.check(bool(ok.all()) and len(self.thresholds) == len(dom), "certificate thresholds = 1/ℓ for every SA value",
                     f"certificate thresholds are not 1/ℓ = {want:.6g} for every SA value "
                     f"({int((~ok).sum())} differ or are missing)")
        counts, unknown = check_bucket_shares(release, report, np.full(len(dom), want), what="ℓ-diversity")
        sizes = release.bucket_sizes()
        if counts is None and unknown:  # unidentified fakes, over ranges of buckets (as below)
            distinct = np.concatenate([(obs > 0).sum(axis=1) - unknown for obs, _ in release.bucket_ranges()()]
                                      or [np.zeros(0, np.int64)])
            over = any(bool((np.where(obs == 1, 0, obs) * self.l > size[:, None]).any())
                       for obs, size in release.bucket_ranges()())
        elif counts is None:  # known real counts, tested on the ST rows
            sb, _, cnt = release.sparse_real_rows()
            distinct = np.zeros(len(sizes), dtype=np.int64)
            over = False
            for a in range(0, len(sb), SHARE_BLOCK):  # block by block: O(block) temporaries, not O(rows)
                bsb, bcnt = sb[a:a + SHARE_BLOCK], cnt[a:a + SHARE_BLOCK]
                pos = bcnt > 0
                distinct += np.bincount(bsb if pos.all() else bsb[pos], minlength=len(sizes))
                over = over or bool((bcnt.astype(np.int64) * self.l > sizes[bsb]).any())
        else:
            # with σ unidentified fakes per bucket, at least (values listed) − σ of them are real
            distinct = (counts > 0).sum(axis=1) - unknown
            real_test = np.where(counts == 1, 0, counts) if unknown else counts
            over = bool((real_test * self.l > sizes[:, None]).any())
        report.check(bool((distinct >= self.l).all()) and not over,
                     f"ℓ-diversity (Anatomy): each bucket ≥ ℓ = {self.l} distinct values, share ≤ 1/ℓ",
                     f"{int((distinct < self.l).sum())} bucket(s) hold fewer than ℓ = {self.l} distinct values "
                     "or a share > 1/ℓ")
        self.check_disclosure(release, report)

    def disclosure(self, release) -> dict[str, Any]:
        """Records whose SA the files disclose with certainty, and the largest posterior."""
        return release.disclosure(None)

    def bound(self) -> Mapping[str, Any]:
        return {"name": f"1/ℓ = 1/{self.l}", "posterior": self.thresholds}

    def statement(self) -> str:
        return (f"ℓ-diversity with ℓ = {self.l}: every bucket holds at least {self.l} distinct sensitive values and "
                f"none more than 1/{self.l} of its records, so no value is inferred with a probability above 1/{self.l}.")


__all__ = ["LDiversityClaim"]

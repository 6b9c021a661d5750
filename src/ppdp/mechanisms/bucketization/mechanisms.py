"""F'-privacy bucketization and Anatomy as ppdp mechanisms (SPEC §2.1, §5).

``_publish`` is statistics → plan → apply: the SA counts (:class:`SACounts`) give the claim
(thresholds f'_i, :mod:`ppdp.claims.fprivacy`, or 1/ℓ) and a bucket setting; ``plan(stats)``
returns them as a public :class:`BucketizationPlan`, which ``apply.apply_plan`` applies to the
rows in memory (the Spark engine applies the very same plan object).
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from ...claims.fprivacy import FPrivacyClaim
from ...claims.ldiversity import LDiversityClaim
from ...errors import InfeasibleError
from ...releases.bucketized import revealed_absent
from ...validation import Flag, FrozenDict, Integer, LabelMap, Labels, Optional, Options, Real, Triples
from ..base import Mechanism
from .anatomy_plan import anatomy_setting
from .apply import apply_plan
from .associations import LEARNING_KEY, learning_settings
from .fakes import planning_thresholds
from .multi_size import multi_size_bucketing
from .optimal import optimal_bucketing
from .plan import BucketizationPlan, SACounts, min_bucket_size
from .two_size import two_size_bucketing

METHODS = ("multi-size", "two-size", "optimal")


class _Bucketized(Mechanism):
    """Shared by FPrivacy and Anatomy: SA counts → :class:`BucketizationPlan` → apply."""
    family = "bucketized"
    _cli_names = {"overrides": "--override", "negative_associations": "--negative-association",
                  "sensitive_values": "--sensitive-value"}

    family = "bucketized"
    default_estimator = "anatomy"
    fake_values: int
    negative_associations: tuple[tuple[str, str, str], ...] | None
    learn_associations: bool
    association_support: int
    association_confidence: float
    association_expected: float
    publish_fake_flag: bool

    def plan(self, stats: SACounts) -> BucketizationPlan:
        """The public plan from the sufficient statistics (the SA counts)."""
        raise NotImplementedError

    def claim(self, stats: SACounts):
        """The typed claim the release makes for SA counts ``stats``."""
        raise NotImplementedError

    def details(self) -> dict:
        """The certificate's descriptive entries beyond the claim and the bucket statistics:
        the negative-association learning settings (associations.py)."""
        return {LEARNING_KEY: learning_settings(self.learn_associations, self.association_support,
                                                self.association_confidence, self.association_expected)}

    def plan_for_counts(self, stats: SACounts, counts) -> BucketizationPlan:
        """The plan of a given bucket setting (counts matrix n_buckets × m, e.g. hand-built or
        computed elsewhere) under this mechanism's claim; InfeasibleError if it violates it."""
        claim = self.claim(stats)
        return self._plan_of(stats, claim.threshold_array(stats.labels), counts, claim, self.details())

    def _plan_of(self, stats: SACounts, thresholds, counts, claim, details, multiplicity=None) -> BucketizationPlan:
        return BucketizationPlan(stats.sa, stats.labels, stats.counts, thresholds, counts, claim, self.fake_values,
                                 tuple(self.negative_associations or ()), details, multiplicity)

    def _publish(self, table, rng: np.random.Generator):
        return apply_plan(self.plan(SACounts.of_table(table)), table, rng)


class FPrivacy(_Bucketized):
    """F'-privacy bucketization (Wang, Wang, Fu, Wong 2011): f'_i = min(1, θ·f_i + floor),
    overridable per SA label; buckets of several sizes chosen to minimise Σ(|g|−1)².

    ``method``: "multi-size" (Algorithm 2, default), "two-size" (Algorithm 1, optimal among
    two-size settings) or "optimal" (exact MILP with ``time_limit`` seconds).
    ``sensitive_values``: if given, only these SA labels get thresholds; the others f' = 1.
    ``fake_values`` σ: fake SA values injected into every bucket (§6), avoiding values that a
    negative association (QI column, QI label, SA label) would let an adversary exclude.
    The associations are *given* (``negative_associations``, the custodian's background
    knowledge) and, with ``learn_associations=True``, also *learned* from the bucketized table
    as §6 describes, with thresholds ``association_support`` (records with the QI value),
    ``association_confidence`` (largest share of the SA value among them, as T* shows it) and
    ``association_expected`` (smallest count expected under independence); see
    :mod:`~ppdp.mechanisms.bucketization.associations`. Fakes are drawn only where a real record
    could hold them under the thresholds, and which values are fake is kept in the
    custodian-side file (with the learned associations), never published.
    """

    name = "fprivacy"
    claim_model = "F'-privacy"
    paper = "Wang, Wang, Fu, Wong 2011"
    theta: float
    floor: float
    overrides: FrozenDict | None
    method: str
    max_bucket: int
    sensitive_values: tuple[str, ...] | None
    time_limit: float
    _parameter_constraints = {
        "theta": Real(0, None, closed="neither"),
        "floor": Real(0, 1),
        "overrides": Optional(LabelMap(Real(0, 1, closed="right"), metavar="LABEL=F'")),
        "method": Options(*METHODS),
        "max_bucket": Integer(2, None),
        "fake_values": Integer(0, None),
        "negative_associations": Optional(Triples()),
        "learn_associations": Flag(),
        "association_support": Integer(1, None),
        "association_confidence": Real(0, 1, closed="left"),
        "association_expected": Real(0, None, closed="neither"),
        "sensitive_values": Optional(Labels()),
        "time_limit": Real(0, None, closed="neither"),
    }
    _parameter_help = {
        "theta": "Privacy coefficient θ in f'_i = min(1, θ·f_i + b).",
        "floor": "The constant b in f'_i = min(1, θ·f_i + b).",
        "overrides": "Set one SA value's threshold f' (repeatable).",
        "method": "Bucketing: multi-size (Algorithm 2), two-size (Algorithm 1) or optimal (MILP).",
        "max_bucket": "Largest bucket size M'.",
        "fake_values": "σ fake SA values injected into every bucket.",
        "negative_associations": "Given negative association (your background knowledge, used as is): never inject "
                                 "SA_VALUE as a fake into a bucket holding COLUMN=VALUE (repeatable).",
        "learn_associations": "Also learn negative associations from the bucketized table (privacy-laws paper §6) "
                              "and keep fakes clear of them; the learned list goes into the certificate and the "
                              "custodian file.",
        "association_support": "Learning: a QI value z needs at least this many records.",
        "association_confidence": "Learning: (z, x) is negative when x's share among z's records, as the buckets "
                                  "show it, is at most this.",
        "association_expected": "Learning: … and z's records would hold at least this many x under independence.",
        "sensitive_values": "Only these SA values are sensitive; the others get f' = 1 (repeatable; default: all).",
        "time_limit": "Seconds for method optimal (MILP).",
    }

    def __init__(self, theta: float = 8.0, floor: float = 0.02, overrides: Mapping[str, float] | None = None,
                 method: str = "multi-size", max_bucket: int = 50, fake_values: int = 0,
                 negative_associations: Sequence[Sequence[str]] | None = None,
                 sensitive_values: Sequence[str] | None = None, time_limit: float = 60.0,
                 learn_associations: bool = False, association_support: int = 20, association_confidence: float = 0.0,
                 association_expected: float = 5.0):
        self._set_params(locals())

    def claim(self, stats: SACounts) -> FPrivacyClaim:
        """The F'-privacy claim (thresholds f') for SA counts ``stats`` (InfeasibleError: Lemma 1)."""
        return FPrivacyClaim.derive(stats.labels, stats.counts, self.theta, self.floor, self.overrides,
                                    self.sensitive_values)

    def plan(self, stats: SACounts) -> BucketizationPlan:
        claim = self.claim(stats)
        fprime = claim.threshold_array(stats.labels)
        o = np.asarray(stats.counts)
        # with σ fakes, plan with stricter thresholds where the smallest buckets would leave no room
        # for fakes a real record could hold (fakes.planning_thresholds); the claim stays f'
        plan_fp = planning_thresholds(o, fprime, self.fake_values,
                                      ~revealed_absent(claim, stats.labels, stats.n), min_bucket_size(o, fprime))
        if self.method == "two-size":
            setting = two_size_bucketing(o, plan_fp, max_bucket=self.max_bucket)
        elif self.method == "multi-size":
            setting = multi_size_bucketing(o, plan_fp, max_bucket=self.max_bucket)
        else:
            setting = optimal_bucketing(o, plan_fp, max_bucket=self.max_bucket, time_limit=self.time_limit)
        details = self.details()
        if self.method == "optimal":
            details["proven_optimal"] = bool(setting.proven_optimal)
        return self._plan_of(stats, fprime, setting.types, claim, details, setting.multiplicity)

    def details(self) -> dict:
        return {"method": self.method, **super().details()}


_ASSOCIATION_PARAMS = ("negative_associations", "learn_associations", "association_support", "association_confidence",
                       "association_expected")


class Anatomy(_Bucketized):
    """Anatomy (Xiao & Tao 2006): ℓ-diverse buckets of ℓ (or ℓ+1) distinct SA values; the
    baseline of Wang et al. 2011. Eligible only when every SA frequency is ≤ 1/ℓ."""

    name = "anatomy"
    claim_model = "l-diversity"
    paper = "Xiao & Tao 2006"
    l: int
    _parameter_constraints = {
        "l": Integer(2, None),
        "fake_values": FPrivacy._parameter_constraints["fake_values"],
        **{k: FPrivacy._parameter_constraints[k] for k in _ASSOCIATION_PARAMS},
    }
    _parameter_help = {"l": "ℓ: every bucket holds ℓ (or ℓ+1) distinct SA values.",
                       **{k: FPrivacy._parameter_help[k] for k in ("fake_values", *_ASSOCIATION_PARAMS)}}

    def __init__(self, l: int, fake_values: int = 0,  # noqa: E741
                 negative_associations: Sequence[Sequence[str]] | None = None, learn_associations: bool = False,
                 association_support: int = 20, association_confidence: float = 0.0, association_expected: float = 5.0):
        self._set_params(locals())

    def plan(self, stats: SACounts) -> BucketizationPlan:
        o = np.asarray(stats.counts)
        distinct = int((o > 0).sum())
        if self.l > distinct:
            raise InfeasibleError(f"ℓ = {self.l} is larger than the number of SA values present ({distinct}); "
                                  "no bucket can hold ℓ distinct values")
        setting = anatomy_setting(o, self.l, stats.labels)
        claim = self.claim(stats)
        return self._plan_of(stats, claim.threshold_array(stats.labels), setting.types, claim, self.details(),
                             setting.multiplicity)

    def claim(self, stats: SACounts) -> LDiversityClaim:
        return LDiversityClaim.derive(stats.labels, self.l)


__all__ = ["FPrivacy", "Anatomy", "METHODS"]

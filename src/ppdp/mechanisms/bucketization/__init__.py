"""F'-privacy bucketization (Wang, Wang, Fu, Wong 2011) and the Anatomy baseline (Xiao & Tao 2006).

Planning (pure functions of the SA counts): ``plan`` (:class:`SACounts`, :class:`BucketSetting`,
:class:`BucketizationPlan`), ``two_size``, ``multi_size``, ``optimal``, ``anatomy_plan``; the
thresholds f' and the claim are in :mod:`ppdp.claims.fprivacy`. Release side: ``mechanisms``
(FPrivacy, Anatomy: ``plan(stats)``), ``apply`` (rows → buckets, the ST, the one manifest
builder), ``fakes`` (σ fake values).
"""

from .anatomy_plan import anatomy_mse_from_sizes, anatomy_setting
from .assignment import record_partition, round_robin_assign
from .apply import apply_plan, release_from_plan, st_table
from .mechanisms import Anatomy, FPrivacy
from .multi_size import multi_size_bucketing
from .optimal import optimal_bucketing
from .plan import BucketizationPlan, BucketSetting, SACounts, privacy_cap
from ...claims.fprivacy import fprime_thresholds
from .two_size import two_size_bucketing, two_size_search
from .validity import one_size_valid, two_size_valid

__all__ = ["FPrivacy", "Anatomy", "SACounts", "BucketizationPlan", "apply_plan", "release_from_plan", "st_table",
           "BucketSetting", "privacy_cap", "fprime_thresholds", "one_size_valid", "two_size_valid",
           "round_robin_assign", "record_partition", "two_size_bucketing", "two_size_search",
           "multi_size_bucketing", "optimal_bucketing", "anatomy_setting", "anatomy_mse_from_sizes"]

"""F'-privacy bucketization (Wang, Wang, Fu, Wong 2011) and the Anatomy baseline (Xiao & Tao 2006).

Planning (pure functions of the SA counts): ``thresholds``, ``plan``, ``two_size``,
``multi_size``, ``optimal``, ``anatomy_plan``. Release side: ``mechanisms`` (FPrivacy,
Anatomy), ``apply`` (rows → buckets), ``fakes`` (σ fake values and the estimator correction).
"""

from .anatomy_plan import anatomy_mse_from_sizes, anatomy_setting
from .assignment import record_partition, round_robin_assign
from .mechanisms import Anatomy, FPrivacy, publish_setting
from .multi_size import multi_size_bucketing
from .optimal import optimal_bucketing
from .plan import BucketSetting, privacy_cap
from .thresholds import fprime_thresholds
from .two_size import two_size_bucketing, two_size_search
from .validity import one_size_valid, two_size_valid

__all__ = ["FPrivacy", "Anatomy", "publish_setting",
           "BucketSetting", "privacy_cap", "fprime_thresholds", "one_size_valid", "two_size_valid",
           "round_robin_assign", "record_partition", "two_size_bucketing", "two_size_search",
           "multi_size_bucketing", "optimal_bucketing", "anatomy_setting", "anatomy_mse_from_sizes"]

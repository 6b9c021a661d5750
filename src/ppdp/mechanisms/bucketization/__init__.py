"""F'-privacy bucketization (Wang, Wang, Fu, Wong 2011) and the Anatomy baseline (Xiao & Tao 2006).

Planning (pure functions of the SA counts): ``thresholds``, ``plan``, ``two_size``,
``multi_size``, ``optimal``, ``anatomy_plan``. Release side: ``mechanisms`` (FPrivacy,
Anatomy), ``apply`` (rows → buckets), ``fakes`` (σ fake values and the estimator correction).
"""

from .mechanisms import Anatomy, FPrivacy, publish_setting

__all__ = ["FPrivacy", "Anatomy", "publish_setting"]

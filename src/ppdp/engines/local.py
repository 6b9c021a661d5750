"""The embedded engine (SPEC §6): apply a mechanism's public plan to an in-memory Table.

One small function per row-wise family, ``apply_<family>(plan, table, rng) -> Release``. An
engine has no manifest or check logic of its own: the family's plan knows its claim and the
family's shared builder writes the manifest, so a release applied here and one applied by
:mod:`ppdp.engines.spark` from the same plan pass the same ``verify``.
"""

from __future__ import annotations

import numpy as np

from ..errors import PpdpError
from ..mechanisms.bucketization.apply import apply_plan
from ..mechanisms.bucketization.plan import BucketizationPlan


def apply_bucketized(plan: BucketizationPlan, table, rng: np.random.Generator | int | None = None):
    """Apply a :class:`BucketizationPlan` (``FPrivacy.plan`` / ``Anatomy.plan``) to ``table``:
    rows → buckets by (SA code, random rank within the SA value), σ fake values per bucket,
    QIT and ST. ``rng``: a Generator, a seed, or None (OS entropy). The caller stamps the
    mechanism, parameters and seed (``ppdp.api.stamp_manifest``), as ``ppdp.publish`` does."""
    if not isinstance(plan, BucketizationPlan):
        raise PpdpError(f"apply_bucketized needs a BucketizationPlan, got {type(plan).__name__}")
    return apply_plan(plan, table, np.random.default_rng(rng))


__all__ = ["apply_bucketized"]

"""The embedded engine (SPEC §6): apply a mechanism's public plan in memory.

One small function per row-wise family. An engine has no manifest or check logic of its own
and calls no private names: it takes a typed plan (built by ``mechanism.plan(stats)`` from
sufficient statistics) and the per-row inputs; the family's plan knows its claim and the
family's shared builder writes the manifest, so a release applied here and one applied by
:mod:`ppdp.engines.spark` from the same plan pass the same ``verify``.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from ..errors import PpdpError
from ..mechanisms.bucketization.apply import apply_plan
from ..mechanisms.bucketization.plan import BucketizationPlan
from ..mechanisms.randomization.diverted import DivertedPlan
from ..mechanisms.randomization.sdr import SDRPlan
from ..mechanisms.randomization.uniform import UniformPlan


# ------------------------------------------------------------------------------ bucketized family
def apply_bucketized(plan: BucketizationPlan, table, rng: np.random.Generator | int | None = None):
    """Apply a :class:`BucketizationPlan` (``FPrivacy.plan`` / ``Anatomy.plan``) to ``table``:
    rows → buckets by (SA code, random rank within the SA value), σ fake values per bucket,
    QIT and ST. ``rng``: a Generator, a seed, or None (OS entropy). The caller stamps the
    mechanism, parameters and seed (``ppdp.api.stamp_manifest``), as ``ppdp.publish`` does."""
    if not isinstance(plan, BucketizationPlan):
        raise PpdpError(f"apply_bucketized needs a BucketizationPlan, got {type(plan).__name__}")
    return apply_plan(plan, table, np.random.default_rng(rng))


# ------------------------------------------------------------------------------ randomized family
def apply_randomized(plan, sa_codes: np.ndarray | Sequence[np.ndarray], rng: np.random.Generator):
    """Apply a randomized-family plan per row (vectorised):

    - :class:`~ppdp.mechanisms.randomization.uniform.UniformPlan` → published SA codes;
    - :class:`~ppdp.mechanisms.randomization.sdr.SDRPlan` → (sub-table of every row, published codes);
    - :class:`~ppdp.mechanisms.randomization.diverted.DivertedPlan` (``sa_codes``: one array per
      SA, the kept rows) → one array of published codes per SA.

    The draws are the ones ``ppdp.publish`` makes, in the same order, so a seeded run gives
    the same values."""
    if isinstance(plan, DivertedPlan):
        return plan.apply([np.asarray(c, dtype=np.int64) for c in sa_codes], rng)
    if isinstance(plan, (UniformPlan, SDRPlan)):
        return plan.apply(np.asarray(sa_codes, dtype=np.int64), rng)
    raise PpdpError(f"apply_randomized needs a randomized-family plan, got {type(plan).__name__}")


__all__ = ["apply_bucketized", "apply_randomized"]

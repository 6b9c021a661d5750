"""Fake SA values against corruption and negative-association attacks (Wang et al. 2011, §6).

Injection. Every bucket g receives σ fake SA values, distinct within the bucket, drawn
uniformly without replacement from its *eligible* set
    E_g = {x : x is not a real value of g} minus {x : (z, x) is a learned negative
          association and some record of g has the QI value z}.

The receiver's estimator subtracts the expected fake contribution without knowing which
values are fake (:func:`ppdp.estimators.bucketized.correct_counts`); the forbidden set is
:func:`ppdp.releases.bucketized.negative_association_mask` (the associations are published).
"""

from __future__ import annotations

import numpy as np

from ...errors import InfeasibleError


def draw_fakes(counts: np.ndarray, sigma: int, rng: np.random.Generator, forbidden: np.ndarray | None = None) -> np.ndarray:
    """σ distinct fake values per bucket: a boolean (n_buckets × m) matrix, True = injected.

    Each bucket's fakes are a uniformly random σ-subset of its eligible values (absent from
    the bucket, not forbidden). Raises :class:`InfeasibleError` when a bucket has fewer
    than σ eligible values.
    """
    counts = np.asarray(counts)
    nb, m = counts.shape
    fake = np.zeros((nb, m), dtype=bool)
    if sigma == 0 or nb == 0:
        return fake
    eligible = counts == 0
    if forbidden is not None:
        eligible &= ~forbidden
    n_el = eligible.sum(axis=1)
    short = np.flatnonzero(n_el < sigma)
    if len(short):
        raise InfeasibleError(
            f"{len(short)} bucket(s) cannot receive {sigma} distinct fake values (e.g. a bucket of size "
            f"{int(counts[short[0]].sum())} has only {int(n_el[short[0]])} eligible absent SA values); "
            f"lower fake_values or drop negative associations")
    keys = np.where(eligible, rng.random((nb, m)), np.inf)
    chosen = np.argpartition(keys, sigma - 1, axis=1)[:, :sigma]
    fake[np.repeat(np.arange(nb), sigma), chosen.ravel()] = True
    return fake


__all__ = ["draw_fakes"]

"""Fake SA values against corruption and negative-association attacks (Wang et al. 2011, §6),
and the matching correction of Anatomy's estimator.

Injection. Every bucket g receives σ fake SA values, distinct within the bucket, drawn
uniformly without replacement from its *eligible* set
    E_g = {x : x is not a real value of g} minus {x : (z, x) is a learned negative
          association and some record of g has the QI value z}.

Estimator correction. A receiver sees, per bucket, the observed counts c^obs_g(x) (real
counts plus one per fake) but not which values are fake. Let D_g = E_g minus the fakes: the
eligible values that do *not* appear in g. D_g is computable from the release (the values
unseen in g, minus those a negative association forbids — the associations are public, as
they are learned from the release itself), and |E_g| = |D_g| + σ is fixed by the real data.
With p = σ/|E_g|, each x ∈ E_g is a fake with probability p, so for a value set S
    F_g(S) = #fakes in S,   E[F_g(S)] = p·|S ∩ E_g|,   |S ∩ D_g| = |S ∩ E_g| − F_g(S),
and F̂_g(S) = σ·|S ∩ D_g| / |D_g| has E[F̂_g(S)] = p/(1−p)·(1−p)·|S ∩ E_g| = E[F_g(S)].
Hence the corrected count ĉ_g(x) = c^obs_g(x) − σ·[x ∈ D_g]/|D_g| is unbiased for the real
count c_g(x) (over the draw of the fakes), and Σ_x ĉ_g(x) = |g|. Unseen values get a small
negative weight; that is the price of unbiasedness without the fake flag.
When D_g is empty (σ = |E_g|: every eligible value was used) the fakes cannot be told
apart from real count-1 values by any rule; the correction then spreads σ evenly over the
bucket's count-1 values (biased in that corner; :func:`correct_counts` reports how many
such saturated buckets there are).
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from ...errors import InfeasibleError, SchemaError


def negative_association_mask(bid: np.ndarray, n_buckets: int, qi_codes: Mapping[str, np.ndarray],
                              domains: Mapping[str, Sequence[str]], sa: str,
                              associations: Sequence[Sequence[str]] | None) -> np.ndarray:
    """Boolean (n_buckets × m): True where SA value x must not be injected into bucket g
    because g holds a record with a QI value z and (z, x) is a negative association."""
    sa_dom = list(domains[sa])
    forbid = np.zeros((n_buckets, len(sa_dom)), dtype=bool)
    for assoc in associations or ():
        col, z, x = (str(a) for a in assoc)
        if col not in qi_codes:
            raise SchemaError(f"negative association {list(assoc)}: {col!r} is not a quasi-identifier ({sorted(qi_codes)})")
        dom = list(domains[col])
        if z not in dom:
            raise SchemaError(f"negative association {list(assoc)}: {z!r} is not a value of {col!r}")
        if x not in sa_dom:
            raise SchemaError(f"negative association {list(assoc)}: {x!r} is not a value of {sa!r}")
        holders = np.unique(bid[qi_codes[col] == dom.index(z)])
        forbid[holders, sa_dom.index(x)] = True
    return forbid


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


def correct_counts(observed: np.ndarray, sigma: int, forbidden: np.ndarray | None = None) -> tuple[np.ndarray, int]:
    """Unbiased real-count estimates ĉ_g(x) from the observed ST counts (module docstring).

    ``observed`` (n_buckets × m) = real counts + one per fake. Returns ``(ĉ, n_saturated)``.
    """
    obs = np.asarray(observed, dtype=np.float64)
    if sigma == 0:
        return obs.copy(), 0
    unseen = obs == 0
    if forbidden is not None:
        unseen &= ~forbidden
    n_unseen = unseen.sum(axis=1)
    est = obs.copy()
    ok = n_unseen > 0
    est[ok] -= sigma * unseen[ok] / n_unseen[ok, None]
    sat = ~ok
    if sat.any():  # every eligible value used: spread σ over the count-1 values
        ones = obs[sat] == 1
        est[sat] -= sigma * ones / np.maximum(ones.sum(axis=1), 1)[:, None]
    return est, int(sat.sum())

"""The negative associations an adversary learns from a bucketized table (Wang, Wang, Fu,
Wong 2011, §6): the rule of :mod:`ppdp.mechanisms.bucketization.associations`, shared by the
writer (which keeps the fakes clear of them) and verify (which learns them again from the
buckets' real counts)."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

#: largest (QI value × bucket or type) table :func:`learn_negative_associations` counts densely
#: (beyond, it sorts the pairs)
DENSE_PAIRS = 1 << 24


def learn_negative_associations(bid: np.ndarray, counts: np.ndarray, qi_codes: Mapping[str, np.ndarray],
                                domains: Mapping[str, Sequence[str]], sa_labels: Sequence[str], support: int,
                                confidence: float, expected: float,
                                bucket_type: np.ndarray | None = None) -> list[dict[str, Any]]:
    """The negative associations an adversary learns from the bucketized table (module doc).

    ``bid``: each record's bucket; ``counts[g, x]``: real records of SA value x in bucket g (no
    fakes) — or, with ``bucket_type``, ``counts[t, x]`` per bucket type t and
    ``bucket_type[g]`` the type of bucket g (a bucket's shares are its type's, so ê(z, x) sums
    over (z, type) pairs: no per-bucket matrix); ``qi_codes``: column → each record's code;
    ``domains``: column → labels. Returns one dict per association: column, value, sa_value,
    support, confidence, expected (sorted by column, value, SA value)."""
    counts = np.asarray(counts, dtype=np.float64)
    bid = np.asarray(bid)
    n_types, m = counts.shape
    sizes = counts.sum(axis=1)
    share = np.divide(counts, sizes[:, None], out=np.zeros_like(counts), where=sizes[:, None] > 0)
    if bucket_type is None:
        mult = np.ones(n_types)
        row_type = bid.astype(np.int64)
    else:
        bucket_type = np.asarray(bucket_type, dtype=np.int64)
        mult = np.bincount(bucket_type, minlength=n_types).astype(np.float64)
        row_type = bucket_type[bid]
    n = float(sizes @ mult)
    freq = (mult @ counts) / n if n else np.zeros(m)
    out: list[dict[str, Any]] = []
    for col, codes in qi_codes.items():
        k = len(domains[col])
        # ê(z, x) = Σ over (z, bucket or type) pairs of (records with z there) · share(bucket or type, x)
        key = np.asarray(codes, dtype=np.int64) * n_types
        key += row_type
        if k * n_types <= DENSE_PAIRS:
            pairs = np.bincount(key, minlength=k * n_types).reshape(k, n_types).astype(np.float64)
            n_z = pairs.sum(axis=1)
            est = pairs @ share
        else:
            pair, cnt = np.unique(key, return_counts=True)
            n_z = np.bincount(pair // n_types, weights=cnt, minlength=k).astype(np.float64)
            est = np.zeros((k, m))
            np.add.at(est, pair // n_types, cnt[:, None] * share[pair % n_types])
        del key
        conf = np.divide(est, n_z[:, None], out=np.ones_like(est), where=n_z[:, None] > 0)
        exp_ = n_z[:, None] * freq[None, :]
        hit = (n_z[:, None] >= support) & (conf <= confidence + 1e-12) & (exp_ >= expected)
        for z, x in zip(*np.nonzero(hit)):
            out.append({"column": col, "value": str(domains[col][z]), "sa_value": str(sa_labels[x]),
                        "support": int(n_z[z]), "confidence": float(conf[z, x]), "expected": float(exp_[z, x])})
    return out


__all__ = ["learn_negative_associations", "DENSE_PAIRS"]

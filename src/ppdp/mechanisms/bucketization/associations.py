"""Negative associations learned from the bucketized table (Wang, Wang, Fu, Wong 2011, §6).

§6 of the privacy-laws paper: an adversary may learn from the published table T* that a
record with a non-sensitive value z is unlikely to have the sensitive value x (a *negative
association*, the attack of Kifer 2009 and Li & Li 2008) and use it to exclude x — in
particular to recognise a fake value x injected into a bucket that holds a record with z. The
remedy: "the publisher can first learn the negative association from T* and inject only those
fake values into a bucket that cannot be removed using the learnt negative association".

What is learned, exactly as an adversary would from T* (the buckets before fakes are added):
for every quasi-identifier column c, value z of c and sensitive value x,

- support  n_z = |{r : r.c = z}| — records with z (QIT rows: public);
- the adversary's estimate of the records with z and x, reading each bucket g's share of x
  (count_g(x)/|g|, from ST) as each of its records' probability of x:
  ê(z, x) = Σ_{r : r.c = z} count_{g(r)}(x) / |g(r)|;
- confidence  ĉ(z ⇒ x) = ê(z, x) / n_z, and the count expected if z and x were independent,
  n_z · f_x (f_x: x's relative frequency).

(c, z, x) is learned as a negative association when **n_z ≥ support**, **ĉ ≤ confidence**
and **n_z · f_x ≥ expected** — z is common enough to learn from, x is rare among the records
with z, and x's absence is not merely what chance would give a rare value (without the
expected-count condition every rare x would be "negatively associated" with every z, and no
bucket could take it as a fake). The three thresholds are the mechanism parameters
``association_support``, ``association_confidence``, ``association_expected``; learning is
on with ``learn_associations=True``.

What is given: ``negative_associations`` (COLUMN, VALUE, SA_VALUE) triples from the
custodian's own background knowledge are used as they are. The fakes of a bucket avoid the
union of both (``fakes.py``); the certificate lists the given ones (``negative_associations``),
the learned ones (``negative_associations_learned``) and the thresholds
(``negative_association_learning``), and the custodian file lists the learned ones with their
support, confidence and expected count. The learned list is read off T*, so stating it
publishes nothing beyond what the release shows: a fake never breaks a learned association,
so the published table (with fakes) shows the same absences.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Sequence

import numpy as np

#: the certificate entry holding the thresholds (always present for bucketized mechanisms)
LEARNING_KEY = "negative_association_learning"
#: the certificate entry listing the learned triples
LEARNED_KEY = "negative_associations_learned"


def learning_settings(enabled: bool, support: int, confidence: float, expected: float) -> dict[str, Any]:
    """The certificate's description of the learning (enabled and its three thresholds)."""
    return {"enabled": bool(enabled), "support": int(support), "confidence": float(confidence),
            "expected": float(expected)}


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


def with_learned_associations(plan, bid: np.ndarray, counts, qi_codes: Mapping[str, np.ndarray],
                              domains: Mapping[str, Sequence[str]], bucket_type: np.ndarray | None = None):
    """The writer's hook (``apply.apply_plan``), between assigning records to buckets and
    drawing fakes: when the plan's ``negative_association_learning`` is enabled, learn the
    associations from the buckets and return ``(plan with the learned triples in its
    certificate details, all triples the fakes must respect, custodian-file entry)``; else
    ``(plan, given triples, {})``. ``counts``: the per-bucket SA counts (n_buckets × m) — or
    per bucket type, with ``bucket_type`` (:func:`learn_negative_associations`)."""
    settings = (plan.details or {}).get(LEARNING_KEY) or {}
    given = tuple(plan.negative_associations)
    if not settings.get("enabled"):
        return plan, given, {}
    learned = learn_negative_associations(bid, counts, qi_codes, domains, plan.labels, settings["support"],
                                          settings["confidence"], settings["expected"], bucket_type)
    triples = [[a["column"], a["value"], a["sa_value"]] for a in learned]
    details = {**dict(plan.details), LEARNED_KEY: triples}
    plan = dataclasses.replace(plan, details=details)
    union = tuple(dict.fromkeys([*given, *(tuple(t) for t in triples)]))
    custodian = {LEARNED_KEY: {"thresholds": {k: settings[k] for k in ("support", "confidence", "expected")},
                               "learned_from": "the bucketized table before fake values (Wang et al. 2011, §6)",
                               "associations": learned}}
    return plan, union, custodian


__all__ = ["learn_negative_associations", "with_learned_associations", "learning_settings", "LEARNING_KEY", "LEARNED_KEY"]

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

from ...kernels.associations import learn_negative_associations

#: the certificate entry holding the thresholds (always present for bucketized mechanisms)
LEARNING_KEY = "negative_association_learning"
#: the certificate entry listing the learned triples
LEARNED_KEY = "negative_associations_learned"


def learning_settings(enabled: bool, support: int, confidence: float, expected: float) -> dict[str, Any]:
    """The certificate's description of the learning (enabled and its three thresholds)."""
    return {"enabled": bool(enabled), "support": int(support), "confidence": float(confidence),
            "expected": float(expected)}


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

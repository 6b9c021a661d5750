"""Helpers for the bucketized-release tests: random small tables, random valid bucket
settings (independent of the planners), and a brute-force Anatomy estimator."""

from __future__ import annotations

import itertools

import numpy as np

from ppdp.api import stamp_manifest
from ppdp.claims import state_disclosure
from ppdp.engines.local import apply_bucketized
from ppdp.mechanisms.bucketization import FPrivacy, SACounts
from ppdp.table import Table


def random_table(rng: np.random.Generator, n: int, m: int, qi_sizes=(3, 4)) -> Table:
    cols = {f"q{k}": rng.integers(0, s, n) for k, s in enumerate(qi_sizes)}
    sa = rng.integers(0, m, n)
    sa[:2] = [0, 1]  # at least two SA values
    cols["s"] = sa
    doms = {f"q{k}": [f"a{k}_{v}" for v in range(s)] for k, s in enumerate(qi_sizes)}
    doms["s"] = [f"x{v}" for v in range(m)]
    return Table(cols, doms, quasi=list(doms)[:-1], sensitive=["s"])


def random_counts(rng: np.random.Generator, sa_codes: np.ndarray, m: int, n_buckets: int) -> np.ndarray:
    """A random setting: each record to a random bucket, no bucket empty."""
    n = len(sa_codes)
    n_buckets = max(1, min(n_buckets, n))
    b = rng.integers(0, n_buckets, n)
    b[rng.permutation(n)[:n_buckets]] = np.arange(n_buckets)
    counts = np.zeros((n_buckets, m), dtype=np.int64)
    np.add.at(counts, (b, sa_codes), 1)
    return counts


def max_shares(counts: np.ndarray) -> np.ndarray:
    """The smallest thresholds the setting satisfies (so it is valid by construction)."""
    return (counts / counts.sum(axis=1, keepdims=True)).max(axis=0).clip(1e-3, 1.0)


def publish_counts(table: Table, counts: np.ndarray, rng: np.random.Generator, fake_values: int = 0,
                   negative_associations=None, thresholds=None):
    """Publish a hand-built bucket setting under F'-privacy whose thresholds are given as
    per-value overrides (default: :func:`max_shares`, raised to 1/(smallest bucket) when there
    are fakes so that every absent value may be a fake), through the public plan → local apply."""
    labels = table.domain(table.sa)
    if thresholds is None:
        thr = max_shares(counts)
        if fake_values:
            thr = np.maximum(thr, 1.0 / counts.sum(axis=1).min())
    else:
        thr = np.asarray(thresholds, dtype=float)
    mech = FPrivacy(overrides={lab: float(f) for lab, f in zip(labels, thr)}, fake_values=fake_values,
                    negative_associations=negative_associations)
    plan = mech.plan_for_counts(SACounts.of_table(table), counts)
    release = apply_bucketized(plan, table, rng)
    state_disclosure(release, allow_disclosure=True)  # hand-built settings may disclose every record
    return stamp_manifest(release, mech, 0)


def brute_estimates(release, queries) -> np.ndarray:
    """Σ_g n_g(P)·ĉ_g(S)/|g| with loops over queries, buckets and rows (fake-corrected counts
    computed value by value, without the fake flag)."""
    qit = release.tables["qit"].to_pandas()
    st = release.tables["st"].to_pandas()
    sa = release.schema["sensitive"][0]
    dom = list(release.domains[sa])
    sigma = int(release.certificate["fake_values"])
    assoc = release.certificate.get("negative_associations") or []
    thr = {x: float(release.certificate["thresholds"].get(x, 1.0)) for x in dom}
    out = []
    for q in queries:
        preds = {p.column: set(p.values) for p in q.predicates}
        total = 0.0
        for g, rows in qit.groupby("bid"):
            size = len(rows)
            meet = sum(all(str(r[c]) in v for c, v in preds.items() if c != sa) for _, r in rows.iterrows())
            obs = {x: 0 for x in dom}
            for _, r in st[st.bid == g].iterrows():
                obs[str(r[sa])] += int(r["count"])
            forbidden = {x for col, z, x in assoc if (rows[col].astype(str) == z).any()}
            # the publication rule: a fake is a value a real record of g could hold (1/|g| ≤ f'_x)
            forbidden |= {x for x in dom if not 1.0 / size <= thr[x]}
            unseen = [x for x in dom if obs[x] == 0 and x not in forbidden]
            chat = dict(obs)
            if sigma and unseen:
                for x in unseen:
                    chat[x] -= sigma / len(unseen)
            elif sigma:
                ones = [x for x in dom if obs[x] == 1]
                for x in ones:
                    chat[x] -= sigma / len(ones)
            c_s = sum(chat[x] for x in dom if sa not in preds or x in preds[sa])
            total += meet * c_s / size
        out.append(total)
    return np.array(out)


def eligible_subsets(counts_row: np.ndarray, sigma: int):
    """Every possible σ-subset of absent values of one bucket (for exact expectations)."""
    absent = np.flatnonzero(counts_row == 0)
    return list(itertools.combinations(absent.tolist(), sigma))

"""What an adversary who knows each person's quasi-identifiers learns, record by record, from a
bucketized or randomized release — counted from the files and the source rows, not from the
claim's own disclosure formula (the figure :func:`ppdp.claims.state_disclosure` refuses on).

- **bucketized** (F'-privacy, Anatomy): the adversary finds the QIT rows carrying the target's
  quasi-identifiers; not knowing which of them is the target, its posterior of value x is the
  mean over those rows of their bucket's published share of x (fake values included: a
  receiver cannot tell them apart).
- **randomized** (uniform, SDR, global, A'): the adversary finds the published rows carrying the
  target's quasi-identifiers and, for each, the posterior of x given that row's published value
  (:func:`ppdp.audit.audit_release`'s per-class posterior, the model's own channel); its
  posterior of x is the mean over those rows.

A record's value is **disclosed with certainty** when the adversary's posterior of its true
value is 1, and is **above the bound** when it exceeds the claim's posterior bound for that value
(``claim_of(manifest).bound()``; values the claim bounds nothing for have bound 1). Where the
declared sensitive values are several but not all, a record holding one of them is **certain in
the set** when the adversary's posterior that it holds *some* declared value is 1 (the protected
fact itself, e.g. "had an affair", though no single value is certain).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from ..errors import ReleaseError

__all__ = ["adversary_disclosure"]

CERTAIN = 1 - 1e-9


def _labels(table, column: str) -> np.ndarray:
    return np.asarray(table.domain(column), dtype=object)[table.codes(column)].astype(str)


def _keys(release_cols: Mapping[str, np.ndarray], target_cols: Mapping[str, np.ndarray], quasi: Sequence[str]):
    """(key of each release row, key of each target row): one integer per QI tuple, -1 for a
    target tuple the release does not hold."""
    rel = pd.DataFrame({c: release_cols[c] for c in quasi})
    tg = pd.DataFrame({c: target_cols[c] for c in quasi})
    both = pd.concat([rel, tg], ignore_index=True)
    codes = both.groupby(list(quasi), sort=False, dropna=False).ngroup().to_numpy()
    rk, tk = codes[:len(rel)], codes[len(rel):]
    present = np.zeros(codes.max() + 1 if len(codes) else 0, bool)
    present[rk] = True
    return rk, np.where(present[tk], tk, -1)


def _bounds(release, labels: list[str], prior: np.ndarray) -> np.ndarray:
    """The claim's posterior bound per value (as :mod:`ppdp.audit.attacks` reads it); 1 where it bounds nothing."""
    from ..claims import claim_of

    b = claim_of(release.manifest).bound()
    post = b.get("posterior")
    if isinstance(post, Mapping):
        return np.array([float(post.get(x, 1.0)) for x in labels])
    if isinstance(post, (int, float)):
        if b.get("prior_at_most") is not None:  # (ρ1, ρ2): ρ2 for the SA' values only
            sap = b.get("sa_prime")
            mask = (np.isin(labels, [str(v) for v in sap]) if sap is not None
                    else prior <= float(b["prior_at_most"]) + 1e-12)
            return np.where(mask, float(post), 1.0)
        return np.full(len(labels), float(post))
    if b.get("gamma") is not None:  # global randomization: the retention model's posterior of a kept value
        g = float(b["gamma"])
        return prior * g / (1 + (g - 1) * prior)
    return np.ones(len(labels))


def _row_posteriors_bucketized(release, sa: str, labels: list[str]) -> tuple[dict[str, np.ndarray], np.ndarray]:
    qit, st = release.tables["qit"], release.tables["st"]
    qbid = np.asarray(qit.column("bid").to_numpy(), dtype=np.int64)
    sbid = np.asarray(st.column("bid").to_numpy(), dtype=np.int64)
    cnt = np.asarray(st.column("count").to_numpy(), dtype=float) if "count" in st.column_names else np.ones(len(sbid))
    pos = {x: i for i, x in enumerate(labels)}
    sval = np.asarray([pos[str(v)] for v in st.column(sa).to_pylist()], dtype=np.int64)
    ub, sb = np.unique(np.concatenate([qbid, sbid]), return_inverse=True)
    S = np.zeros((len(ub), len(labels)))
    np.add.at(S, (sb[len(qbid):], sval), cnt)
    S /= np.maximum(S.sum(axis=1, keepdims=True), 1e-300)
    cols = {c: np.asarray(qit.column(c).to_numpy(zero_copy_only=False), dtype=object).astype(str)
            for c in qit.column_names if c != "bid"}
    return cols, S[sb[:len(qbid)]]


def _row_posteriors_randomized(release, table, sa: str, labels: list[str]) -> tuple[dict[str, np.ndarray], np.ndarray]:
    from .posterior import audit_release

    res = audit_release(release, table)
    cl = res.classes
    data = release.tables["data"]
    cols = {c: np.asarray(data.column(c).to_numpy(zero_copy_only=False), dtype=object).astype(str)
            for c in data.column_names}
    y = cols[sa]
    # the audit's record class of a published row: its published value (and SDR's sub-table)
    key_rows = (np.char.add(np.char.add("T", cols["subtable"].astype(str)), np.char.add(" y=", y.astype(str)))
                if "subtable" in cols else np.char.add("y=", y.astype(str)))
    cls_key = cl["class"].astype(str)
    if not np.isin(key_rows, cls_key.to_numpy()).all():
        raise ReleaseError(f"cannot map the published rows of mechanism {release.manifest.get('mechanism')!r} to the "
                           "audit's record classes")
    kcodes, kuniq = pd.factorize(pd.concat([cls_key, pd.Series(key_rows)], ignore_index=True))
    ck, rk = kcodes[:len(cls_key)], kcodes[len(cls_key):]
    pos = {x: i for i, x in enumerate(labels)}
    vcode = np.asarray([pos[str(v)] for v in cl["value"]], dtype=np.int64)
    P = np.zeros((len(kuniq), len(labels)))
    P[ck, vcode] = cl["posterior"].to_numpy(float)
    return cols, P[rk]


def adversary_disclosure(release, table, sensitive_values: Sequence[str] | None = None) -> dict[str, Any]:
    """Records of ``table`` (the rows ``release`` was published from) whose sensitive value an
    adversary who knows their quasi-identifiers learns with certainty, or with a posterior above
    the claim's bound (module doc); per declared sensitive value (``sensitive_values``; None:
    the manifest's declaration, else every value) and in total, with the largest posterior."""
    fam = release.manifest.get("family", getattr(release, "family", None))
    sch = release.schema
    sa = sch["sensitive"][0]
    labels = [str(x) for x in release.domains[sa]]
    if fam == "bucketized":
        cols, rowpost = _row_posteriors_bucketized(release, sa, labels)
    elif fam == "randomized":
        cols, rowpost = _row_posteriors_randomized(release, table, sa, labels)
    else:
        raise ReleaseError(f"no record-level posterior for a {fam!r} release")
    quasi = [c for c in sch["quasi"] if c in cols and c in table.column_names]
    target = {c: _labels(table, c) for c in quasi}
    rk, tk = _keys(cols, target, quasi)
    n_keys = int(max(rk.max(initial=-1), tk.max(initial=-1))) + 1
    P = np.zeros((n_keys, len(labels)))
    np.add.at(P, rk, rowpost)
    P /= np.maximum(np.bincount(rk, minlength=n_keys), 1)[:, None]
    pos = {x: i for i, x in enumerate(labels)}
    true_lab = _labels(table, sa)
    known = np.asarray([x in pos for x in true_lab]) & (tk >= 0)
    tv = np.asarray([pos.get(x, 0) for x in true_lab], dtype=np.int64)
    post = np.where(known, P[np.maximum(tk, 0), tv], 0.0)
    prior = np.bincount(tv[known], minlength=len(labels)) / max(int(known.sum()), 1)
    bound = _bounds(release, labels, prior)
    if sensitive_values is None:
        d = release.manifest.get("disclosure") or {}
        sensitive_values = d.get("sensitive_values")
    sens = np.ones(len(labels), bool) if sensitive_values is None else np.isin(labels, [str(v) for v in sensitive_values])
    judged = known & sens[tv]
    certain = judged & (post >= CERTAIN)
    above = judged & (post > bound[tv] + 1e-9)
    per_certain = np.bincount(tv[certain], minlength=len(labels))
    per_above = np.bincount(tv[above], minlength=len(labels))
    mp = float(post[judged].max()) if judged.any() else float("nan")
    # the declared values as one fact ("holds one of them"), when they are at least two and not every value
    set_certain = 0
    if 2 <= int(sens.sum()) < len(labels):
        p_set = np.where(known, P[np.maximum(tk, 0)][:, sens].sum(axis=1), 0.0)
        set_certain = int((judged & (p_set >= CERTAIN)).sum())
    return {"n_records": int(len(tv)), "linked": int(known.sum()), "records_certain": int(certain.sum()),
            "records_above_bound": int(above.sum()), "records_certain_in_set": set_certain, "max_posterior": mp,
            "max_posterior_value": labels[int(tv[judged][np.argmax(post[judged])])] if judged.any() else None,
            "per_value_certain": {labels[i]: int(k) for i, k in enumerate(per_certain) if k},
            "per_value_above_bound": {labels[i]: int(k) for i, k in enumerate(per_above) if k},
            "bound": {labels[i]: float(b) for i, b in enumerate(bound)},
            "sensitive_values": None if sensitive_values is None else [str(v) for v in sensitive_values]}

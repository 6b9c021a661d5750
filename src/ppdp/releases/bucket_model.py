"""The receiver's model of a bucketized release (Wang et al. 2011 §3, §6; Xiao & Tao 2006): the
descriptive statistics of a list of bucket sizes, the public fake-value rule
(:func:`fake_candidates`), the negative associations that forbid fakes (:class:`ForbiddenFakes`),
the receiver's posterior over each bucket's values and its inference of which published values
are fake (:func:`receiver_posterior`, :func:`fake_inference`), and what a posterior discloses
(:func:`bucket_disclosure`). Dense: one row per bucket. The streamed and row-wise forms of the
same computations are :mod:`ppdp.releases.bucket_streams`; the release class is
:mod:`ppdp.releases.bucketized`.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from ..claims.fprivacy import privacy_cap
from ..errors import SchemaError


#: posteriors within this of 1 count as certainty
CERTAIN_TOL = 1e-12


def bucket_statistics(sizes: np.ndarray, n_rows: int, multiplicity: np.ndarray | None = None) -> dict[str, Any]:
    """Loss, MSE, n_buckets and the size histogram of a list of bucket sizes (Def. 3);
    ``multiplicity``: how many buckets have each size of the list (one each when None — e.g.
    the sizes of a typed plan's bucket types and their multiplicities)."""
    sizes = np.asarray(sizes, dtype=np.int64)
    w = np.ones(len(sizes), dtype=np.int64) if multiplicity is None else np.asarray(multiplicity, dtype=np.int64)
    sizes, w = sizes[w > 0], w[w > 0]
    loss = int((w * (sizes - 1) ** 2).sum())
    if len(sizes) and 0 <= int(sizes.min()) and int(sizes.max()) <= 1 << 20:  # sizes are small: count them
        hist = np.bincount(sizes, weights=w if multiplicity is not None else None).astype(np.int64)
        uniq = np.flatnonzero(hist)
        cnt = hist[uniq]
    else:
        uniq, at = np.unique(sizes, return_inverse=True)
        cnt = np.bincount(at.ravel(), weights=w, minlength=len(uniq)).astype(np.int64)
    return {
        "loss": loss,
        "mse": loss / (n_rows - 1) if n_rows > 1 else 0.0,
        "n_buckets": int(w.sum()),
        "bucket_sizes": {str(int(s)): int(c) for s, c in zip(uniq, cnt)},
    }


class ForbiddenFakes:
    """Which SA values the negative associations forbid as fakes, bucket by bucket, held as a
    few distinct patterns: bucket g's forbidden values are ``rows[of[g]]`` (``of``: one small
    integer per bucket; ``rows``: patterns × m booleans, pairwise distinct) — no
    n_buckets × m matrix."""

    def __init__(self, of: np.ndarray, rows: np.ndarray):
        self.of, self.rows = of, np.asarray(rows, dtype=bool)

    def dense(self, lo: int = 0, hi: int | None = None) -> np.ndarray:
        """(buckets lo … hi − 1) × m: True where a fake of that value is forbidden."""
        return self.rows[self.of[lo:hi]]

    def at(self, bucket: np.ndarray, code: np.ndarray) -> np.ndarray:
        """Is value ``code`` forbidden as a fake of (dense) ``bucket``, elementwise."""
        return self.rows[self.of[np.asarray(bucket, dtype=np.int64)], np.asarray(code, dtype=np.int64)]


def association_patterns(bid: np.ndarray, n_buckets: int, qi_codes: Mapping[str, np.ndarray],
                         domains: Mapping[str, Sequence[str]], sa: str,
                         associations: Sequence[Sequence[str]] | None, block: int = 1 << 22) -> ForbiddenFakes:
    """The SA values that must not be injected into each bucket g because g holds a record
    with a QI value z and (z, x) is a negative association (Wang et al. 2011, §6), as
    :class:`ForbiddenFakes`. One pass over the QIT rows per QI column named by an
    association, a block at a time: each row's (column, z) holders as bits, OR-ed per bucket;
    the distinct bit sets are then mapped to their forbidden values. Used by the writer, by
    verify and by the estimator's correction."""
    sa_dom = list(domains[sa])
    m = len(sa_dom)
    holders: dict[tuple[str, int], int] = {}         # (column, code of z) → bit
    forbid_of: list[np.ndarray] = []                  # bit → the SA values it forbids
    for assoc in associations or ():
        col, z, x = (str(a) for a in assoc)
        if col not in qi_codes:
            raise SchemaError(f"negative association {list(assoc)}: {col!r} is not a quasi-identifier ({sorted(qi_codes)})")
        dom = list(domains[col])
        if z not in dom:
            raise SchemaError(f"negative association {list(assoc)}: {z!r} is not a value of {col!r}")
        if x not in sa_dom:
            raise SchemaError(f"negative association {list(assoc)}: {x!r} is not a value of {sa!r}")
        bit = holders.setdefault((col, dom.index(z)), len(holders))
        if bit == len(forbid_of):
            forbid_of.append(np.zeros(m, dtype=bool))
        forbid_of[bit][sa_dom.index(x)] = True
    n_words = -(-len(holders) // 64)
    words = np.zeros((max(n_words, 1), n_buckets), dtype=np.uint64)
    bid = np.asarray(bid)
    for col in dict.fromkeys(c for c, _ in holders):
        lut = np.zeros((n_words, len(domains[col])), dtype=np.uint64)
        for (name, zc), bit in holders.items():
            if name == col:
                lut[bit // 64, zc] |= np.uint64(1) << np.uint64(bit % 64)
        codes = qi_codes[col]
        for a in range(0, len(bid), block):
            rows_z = np.asarray(codes[a:a + block])
            for w in range(n_words):
                v = lut[w][rows_z]
                nz = v != 0
                np.bitwise_or.at(words[w], bid[a:a + block][nz], v[nz])
    if n_words <= 1:
        of, uniq = pd.factorize(words[0], sort=True)
        bits = uniq[:, None]
    else:
        bits, of = np.unique(words.T, axis=0, return_inverse=True)
    shifts = np.arange(64, dtype=np.uint64)
    rows = np.zeros((len(bits), m), dtype=bool)
    for b in range(len(holders)):
        rows[((bits[:, b // 64] >> shifts[b % 64]) & np.uint64(1)).astype(bool)] |= forbid_of[b]
    rows, back = np.unique(rows, axis=0, return_inverse=True)   # bit sets forbidding the same values
    of = back.ravel()[np.asarray(of).ravel()]
    return ForbiddenFakes(of.astype(np.int32 if len(rows) < 1 << 31 else np.int64), rows)


def negative_association_mask(bid: np.ndarray, n_buckets: int, qi_codes: Mapping[str, np.ndarray],
                              domains: Mapping[str, Sequence[str]], sa: str,
                              associations: Sequence[Sequence[str]] | None) -> np.ndarray:
    """Boolean (n_buckets × m): True where SA value x must not be injected into bucket g
    (:func:`association_patterns` expanded to one row per bucket)."""
    return association_patterns(bid, n_buckets, qi_codes, domains, sa, associations).dense()


def fake_candidates(sizes: np.ndarray, thresholds: np.ndarray, forbidden: np.ndarray | None = None) -> np.ndarray:
    """Boolean (n_buckets × m): values a fake of bucket g may take apart from being absent from
    g — a real record of g could hold it under the published thresholds (a count-1 value has
    share 1/|g|, so ``privacy_cap(f'_x, |g|) ≥ 1``) and no negative association forbids it.
    The writer draws fakes from these (minus g's real values); the estimator and verify read
    the same rule from the files."""
    sizes = np.asarray(sizes, dtype=np.int64)
    thr = np.asarray(thresholds, dtype=np.float64)
    size, at = np.unique(np.maximum(sizes, 1), return_inverse=True)  # a few distinct sizes
    ok = (privacy_cap(thr[None, :], size[:, None]) >= 1)[at.ravel()]
    if forbidden is not None:
        ok &= ~np.asarray(forbidden, dtype=bool)
    return ok


def revealed_absent(claim, labels, n: int) -> np.ndarray:
    """Values the claim's public thresholds reveal to be held by no record (an F'-privacy
    threshold f'_x = b means o_x = 0): a fake of such a value would be recognisable, so the
    publication rule excludes them."""
    totals = getattr(claim, "revealed_totals", None)
    if totals is None:
        return np.zeros(len(labels), dtype=bool)
    return np.asarray(totals(list(labels), int(n))) == 0


def receiver_posterior(observed: np.ndarray, sizes: np.ndarray, sigma: int, thresholds: np.ndarray,
                       forbidden: np.ndarray | None = None, known_totals: np.ndarray | None = None,
                       fake: np.ndarray | None = None) -> np.ndarray:
    """P(a record of bucket g has SA value x | the files), (n_buckets × m), for a receiver who
    knows the publication rule but not which values are fake.

    - ``fake`` given (the flag was published): the real shares, exactly.
    - A value listed with count ≥ 2 is real (a fake is listed once, and never beside a real
      record of its value): share c/|g|.
    - Count-1 values: r_g = |g| − Σ_{c≥2} c of them are real, the rest fake. Certainly real: a
      value the rule forbids as a fake (negative association); certainly fake: a value no real
      record could hold (1/|g| > f'_x). ``known_totals`` (m, −1 = unknown): real SA totals o_x a
      receiver can read elsewhere (F'-privacy thresholds θ·o_x/N + b reveal them), so the
      number of fakes of x, F_x = listed total − o_x, is known; certain conclusions are
      propagated between values (F_x fakes left among x's undecided appearances: none → all
      real, as many → all fake) and buckets (fakes left in g: none → real, as many → fake)
      until nothing changes.
    - The undecided count-1 values of g are exchangeable under the rule (each could be real or
      fake), so each is real with probability (real left)/(undecided) — the uniform-prior
      posterior; a receiver with a non-uniform prior over SA values weights them differently.
    """
    obs = np.asarray(observed, dtype=np.int64)
    sizes = np.asarray(sizes, dtype=np.int64)
    size = np.maximum(sizes, 1)[:, None].astype(np.float64)
    if fake is not None:
        real = np.where(fake, 0, obs)
        return real / size
    if sigma == 0:
        return obs / size
    inf = fake_inference(obs, sizes, thresholds, forbidden, known_totals)
    undecided, known_real = inf["undecided"], inf["known_real"]
    und_g = undecided.sum(axis=1)
    real_left = inf["n_real_ones"] - known_real.sum(axis=1)
    p = np.divide(real_left, und_g, out=np.zeros(len(und_g), np.float64), where=und_g > 0).clip(0.0, 1.0)
    expected = np.where(obs >= 2, obs, 0) + known_real + undecided * p[:, None]
    return expected / size


def fake_inference(observed: np.ndarray, sizes: np.ndarray, thresholds: np.ndarray,
                   forbidden: np.ndarray | None = None, known_totals: np.ndarray | None = None) -> dict[str, Any]:
    """What a receiver concludes with certainty about the count-1 values (see
    :func:`receiver_posterior`): ``known_real``, ``known_fake``, ``undecided`` (boolean
    n_buckets × m), ``n_real_ones`` (r_g), ``n_fake`` (σ_g) and ``contradictions``: buckets or
    values whose fake count cannot be met (more certain fakes than σ_g, or fewer candidates;
    a known total o_x that the listed appearances cannot realise). A release the writer made
    has none (its true fake draw is one consistent assignment); verify reports any."""
    obs = np.asarray(observed, dtype=np.int64)
    sizes = np.asarray(sizes, dtype=np.int64)
    multi = obs >= 2
    ones = obs == 1
    thr = np.asarray(thresholds, dtype=np.float64)
    can_be_real = privacy_cap(thr[None, :], np.maximum(sizes, 1)[:, None]) >= 1
    can_be_fake = can_be_real if forbidden is None else can_be_real & ~np.asarray(forbidden, dtype=bool)
    known_fake = ones & ~can_be_real
    known_real = ones & can_be_real & ~can_be_fake
    n_real_ones = sizes - np.where(multi, obs, 0).sum(axis=1)  # r_g
    n_fake = ones.sum(axis=1) - n_real_ones  # σ_g (σ in a well-formed release)
    known_x = np.zeros(obs.shape[1], bool)
    f_x = np.full(obs.shape[1], -1, np.int64)
    if known_totals is not None:
        tot = np.asarray(known_totals, dtype=np.int64)
        known_x = tot >= 0
        f_x = np.where(known_x, obs.sum(axis=0) - tot, -1)
    for _ in range(64):  # unit propagation of certain conclusions (a few rounds in practice)
        before = int(known_fake.sum() + known_real.sum())
        undecided = ones & ~known_fake & ~known_real
        und_g = undecided.sum(axis=1)
        fakes_left = n_fake - known_fake.sum(axis=1)
        known_real |= undecided & (fakes_left <= 0)[:, None]
        known_fake |= undecided & ((fakes_left >= und_g) & (fakes_left > 0))[:, None]
        if known_x.any():
            undecided = ones & ~known_fake & ~known_real
            und_x = undecided.sum(axis=0)
            left_x = f_x - known_fake.sum(axis=0)
            known_real |= undecided & (known_x & (left_x <= 0))[None, :]
            known_fake |= undecided & (known_x & (left_x >= und_x) & (left_x > 0))[None, :]
        if int(known_fake.sum() + known_real.sum()) == before:
            break
    undecided = ones & ~known_fake & ~known_real
    kf_g, und_g = known_fake.sum(axis=1), undecided.sum(axis=1)
    bad_g = (n_fake < kf_g) | (n_fake > kf_g + und_g)
    kf_x, und_x = known_fake.sum(axis=0), undecided.sum(axis=0)
    bad_x = known_x & ((f_x < kf_x) | (f_x > kf_x + und_x))
    return {"known_real": known_real, "known_fake": known_fake, "undecided": undecided, "n_real_ones": n_real_ones,
            "n_fake": n_fake, "contradictions": int(bad_g.sum() + bad_x.sum()), "bad_buckets": int(bad_g.sum()),
            "bad_values": np.flatnonzero(bad_x)}


def bucket_disclosure(posterior: np.ndarray, sizes: np.ndarray, labels) -> dict[str, Any]:
    """What a bucketized release discloses, from the receiver's posterior (:func:`receiver_posterior`):
    the records whose SA value it discloses with certainty (every record of a bucket whose
    posterior of one value is 1), in total and per SA value, and the largest posterior reached."""
    post = np.asarray(posterior, dtype=np.float64)
    sizes = np.asarray(sizes, dtype=np.int64)
    n = int(sizes.sum())
    labels = list(labels)
    if post.size == 0:
        return {"records_certain": 0, "n_records": n, "share_certain": 0.0, "per_value": {}, "max_posterior": 0.0,
                "max_posterior_value": None, "buckets_certain": 0}
    best = post.argmax(axis=1)
    top = post[np.arange(len(best)), best]
    certain = (top >= 1.0 - CERTAIN_TOL) & (sizes > 0)
    per = np.bincount(best[certain], weights=sizes[certain], minlength=len(labels)).astype(np.int64)
    flat = int(np.argmax(post))
    g, x = divmod(flat, post.shape[1])
    total = int(per.sum())
    return {"records_certain": total, "n_records": n, "share_certain": (total / n) if n else 0.0,
            "per_value": {labels[i]: int(per[i]) for i in np.flatnonzero(per)},
            "max_posterior": float(min(1.0, post[g, x])), "max_posterior_value": labels[x],
            "buckets_certain": int(certain.sum())}


__all__ = ["bucket_statistics", "ForbiddenFakes", "association_patterns", "negative_association_mask", "fake_candidates", "revealed_absent", "receiver_posterior", "fake_inference", "bucket_disclosure", "CERTAIN_TOL"]

"""The "bucketized" release family (SPEC §5; Wang et al. 2011 §3, Xiao & Tao 2006).

Files (exactly these; verify refuses any other file or column):
- ``qit.parquet``: the QI columns (labels, dictionary-encoded) and ``bid`` (int64);
- ``st.parquet``: ``bid``, the SA column (labels), ``count`` (int64). A bucket's real values
  carry their counts; each of its σ fake values appears once with count 1. Which values are
  fake is never published: the custodian-side file (``Release.custodian["fake"]``, saved
  beside the release) lists them for ``verify``.

Certificate: the typed claim (``model`` "F'-privacy" with ``thresholds``, θ, b, overrides,
sensitive values — :mod:`ppdp.claims.fprivacy` — or "l-diversity" with ``l`` and
``thresholds`` = 1/ℓ — :mod:`ppdp.claims.ldiversity`), plus the descriptive statistics
``loss`` = Σ(|g|−1)², ``mse`` = loss/(N−1), ``n_buckets``, ``bucket_sizes`` (size → number of
buckets), ``fake_values`` (σ), ``negative_associations`` and, for F'-privacy, ``method`` /
``proven_optimal``. The manifest's ``disclosure`` states what the files disclose
(:func:`bucket_disclosure`).

The fake-value rule (public, so a receiver can apply it): a fake value x of bucket g is absent
from g's real values, is not excluded by a published negative association (g holds a record
with QI value z and (z, x) is one), and could be held by a real record of g under the
published thresholds: a value listed once in a bucket of |g| QIT rows has share 1/|g|, so
x must satisfy 1/|g| ≤ f'_x (:func:`fake_candidates`). A count-1 value is then never
recognisable as fake by the thresholds: every count-1 value of a well-formed release is one a
real record could hold, and verify rejects any that is not.

This module is the public model a receiver knows: the decoded buckets, the observed and (as
far as the files show them) real counts, the receiver's posterior, and the file-format checks
of ``verify``. The claim re-checks itself (``Claim.check``); the estimators live in
:mod:`ppdp.estimators.bucketized`.
"""

from __future__ import annotations

import functools
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa

from ..claims import claim_of
from ..claims.fprivacy import privacy_cap
from ..errors import ReleaseError, SchemaError
from ..kernels.associations import learn_negative_associations
from ..kernels.transition import sorted_runs
from ..queries.engine import LazyColumns
from .base import Release, VerifyReport, dictionary_codes, labels_to_codes, register_family
from .custodian import fake_list

#: the files and columns of the format (beyond the QI columns and the SA column)
QIT_COLUMNS = ("bid",)
ST_COLUMNS = ("bid", "count")
FILES = ("qit", "st")
#: posteriors within this of 1 count as certainty
CERTAIN_TOL = 1e-12


#: n_buckets × m above which verify's fake checks and the disclosure (σ > 0) work on the ST rows
#: and on ranges of buckets instead of n_buckets × m matrices (:meth:`BucketizedRelease.rowwise`)
DENSE_CELLS = 1 << 25
#: cells (buckets × m) of one bucket range
RANGE_CELLS = 1 << 20
#: ST rows per block of the row-wise checks
ROW_BLOCK = 1 << 22


def _custodian_stamp(custodian: Mapping[str, Any] | None) -> str | None:
    """What a custodian entry says about the fakes, as a short key (a cache stamp)."""
    spec = (custodian or {}).get("fake")
    if spec is None:
        return None
    try:
        return fake_list(spec).digest()
    except ReleaseError:
        return repr(spec)


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


#: certificate ``negative_association_learning`` key → mechanism parameter
_LEARNING_PARAMS = {"enabled": "learn_associations", "support": "association_support",
                    "confidence": "association_confidence", "expected": "association_expected"}


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


def same_rows(a: Sequence[Any], b: Sequence[Any], dims: Sequence[int]) -> bool:
    """Whether two sets of code columns hold the same rows as multisets: one bincount per side
    over the mixed-radix cell index when the cube has ≤ 2^28 cells, else a sort per side. A
    column may be given as a callable returning it (decoded one at a time, then dropped). The
    cell index is int32 below 2^31 cells (4 bytes a row), counted a block at a time."""
    a = [c if callable(c) else (lambda c=c: c) for c in a]
    b = [c if callable(c) else (lambda c=c: c) for c in b]
    cells = float(np.prod(np.asarray(dims, dtype=float)))
    kd = np.int32 if cells < 2.0**31 else np.int64

    def key(cols):
        k = None
        for c, d in zip(cols, dims):
            col = np.asarray(c())
            if k is None:
                k = col.astype(kd)
            else:
                k *= kd(d)
                k += col
            del col
        return k

    if cells >= 2.0**62:  # pragma: no cover - astronomically large QI cubes
        sa_ = np.stack([c() for c in a], axis=1).astype(np.int64)
        sb_ = np.stack([c() for c in b], axis=1).astype(np.int64)
        return bool(np.array_equal(sa_[np.lexsort(sa_.T[::-1])], sb_[np.lexsort(sb_.T[::-1])]))
    ka = key(a)
    if cells <= 1 << 28:  # one count array: + each row of a, − each row of b, a block at a time
        count = blocked_bincount(ka, int(cells))
        n_a = len(ka)
        del ka
        kb = key(b)
        if len(kb) != n_a:
            return False
        for s in range(0, len(kb), 1 << 23):
            c = np.bincount(kb[s:s + (1 << 23)], minlength=len(count))
            if len(c) > len(count):  # a row of b outside a's cells
                return False
            count -= c
        return not bool(count.any())
    ka.sort()
    kb = key(b)
    if len(kb) != len(ka):
        return False
    kb.sort()
    return bool(np.array_equal(ka, kb))


def st_values_distinct(sb: np.ndarray, sc: np.ndarray, n_buckets: int, m: int) -> bool:
    """Whether no (bucket ``sb``, value ``sc``) pair repeats among the ST rows. Rows grouped by
    bucket with m ≤ 64 values: each bucket's values as a 64-bit set (OR per bucket, then a
    popcount = its number of rows), a block of whole buckets at a time, O(rows); otherwise a
    sort of the narrow pair keys."""
    if m <= 64 and len(sb) and all(bool((np.diff(sb[a:a + DISCLOSURE_BLOCK + 1]) >= 0).all())
                                   for a in range(0, len(sb), DISCLOSURE_BLOCK)):
        one = np.uint64(1)
        for a, b in bucket_blocks(sb):
            bsb = sb[a:b]
            starts = np.flatnonzero(np.concatenate(([True], bsb[1:] != bsb[:-1])))
            bits = np.left_shift(one, sc[a:b].astype(np.uint64))
            rows = np.diff(np.append(starts, len(bsb)))
            if not np.array_equal(np.bitwise_count(np.bitwise_or.reduceat(bits, starts)), rows):
                return False
        return True
    pair: Any = sb.astype(np.int32 if n_buckets * m < 2**31 else np.int64)  # narrow key, sorted in place
    pair *= m
    pair += sc
    pair.sort()
    return not bool((pair[1:] == pair[:-1]).any())


#: rows per block of :func:`cell_runs` (the codes of a block of every column stay in cache)
CELL_BLOCK = 1 << 20


def cell_runs(blocks, dims: Sequence[int], n: int) -> tuple[np.ndarray, np.ndarray] | None:
    """The distinct rows of ``n`` rows of code columns and their multiplicities: ``(cells,
    counts)``, the sorted mixed-radix cells (domain sizes ``dims``, the first column most
    significant) and how many rows hold each. The rows come as blocks (lists of per-column code
    arrays, or callables returning them); each block's cells are written into one narrow array
    (int32 below 2^31 cells, else int64), which is sorted in place and run-length encoded: 4
    bytes a row, no count array over the cube. None when the blocks do not hold ``n`` rows or a
    cell lies outside the cube; for a cube of ≥ 2^63 cells use :func:`same_rows`."""
    cells = float(np.prod(np.asarray(dims, dtype=float)))
    k = np.empty(n, dtype=np.int32 if cells < 2.0**31 else np.int64)
    pos = 0
    for cols in blocks:
        kb: Any = None
        for col, d in zip(cols, dims):  # a column may be a callable (decoded when its turn comes)
            col = np.asarray(col() if callable(col) else col)
            if kb is None:
                if pos + len(col) > n:
                    return None
                kb = k[pos:pos + len(col)]
                kb[...] = col
            else:
                if len(col) != len(kb):
                    return None
                kb *= d
                kb += col
            del col
        pos += 0 if kb is None else len(kb)
    if pos != n:
        return None
    if not n:
        return k, np.zeros(0, np.int64)
    k.sort()
    if int(k[0]) < 0 or int(k[-1]) >= cells:
        return None
    return sorted_runs(k)


def dense_ids(bid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(bid, return_inverse=True)`` in O(N + max id) by counting when the ids are
    non-negative and not sparse (a writer's ids are a permutation of 0 … n_buckets − 1), by
    sorting otherwise."""
    bid = np.asarray(bid)
    if len(bid) and int(bid.min()) >= 0 and int(bid.max()) < 2 * len(bid) + 1024:
        present = np.bincount(bid) > 0
        ids = np.flatnonzero(present)
        rank = np.cumsum(present) - 1
        return ids.astype(np.int64), rank[bid].astype(np.int64)
    ids, inv = np.unique(bid, return_inverse=True)
    return ids, np.asarray(inv, dtype=np.int64).ravel()


DISCLOSURE_BLOCK = 1 << 22  # ST rows per block of :func:`sparse_disclosure` (whole buckets per block)


def bucket_blocks(sb: np.ndarray, block: int = DISCLOSURE_BLOCK):
    """``(start, stop)`` row ranges of about ``block`` rows over the bucket-sorted ST rows
    ``sb``, each ending at a bucket boundary (a bucket larger than ``block`` is one range)."""
    n, a = len(sb), 0
    while a < n:
        b = a + block
        if b >= n:
            b = n
        else:
            e = int(np.searchsorted(sb, sb[b], side="left"))
            b = e if e > a else int(np.searchsorted(sb, sb[b], side="right"))
        yield a, b
        a = b


def sparse_disclosure(sb: np.ndarray, sc: np.ndarray, real: np.ndarray, sizes: np.ndarray, labels,
                      fake: np.ndarray | None = None) -> dict[str, Any] | None:
    """:func:`bucket_disclosure` of the exact real shares, from the ST rows (dense bucket ``sb``,
    SA code ``sc``, real count — or the listed count and the published ``fake`` flag, a fake row
    counting 0) when they are grouped by bucket — the same result without the n_buckets × m
    posterior, block by block of whole buckets (memory O(block), not O(rows)); None when the
    rows are not grouped (then use the dense form)."""
    sizes = np.asarray(sizes, dtype=np.int64)
    labels = list(labels)
    m, nb = len(labels), len(sizes)
    n = int(sizes.sum())
    if nb * m == 0:
        return {"records_certain": 0, "n_records": n, "share_certain": 0.0, "per_value": {}, "max_posterior": 0.0,
                "max_posterior_value": None, "buckets_certain": 0}
    for a in range(1, len(sb), DISCLOSURE_BLOCK):  # grouped by bucket: sb non-decreasing
        if not bool((np.diff(sb[a - 1:a + DISCLOSURE_BLOCK]) >= 0).all()):
            return None
    denom = np.maximum(sizes, 1)
    top = np.zeros(nb)
    best = np.zeros(nb, dtype=np.int64)
    mx, flat = 0.0, 0
    for a, b in bucket_blocks(sb):
        bsb, bsc = sb[a:b], sc[a:b]
        breal = real[a:b] if fake is None else np.where(fake[a:b], 0, real[a:b])
        post = breal / denom[bsb]
        del breal
        starts = np.flatnonzero(np.concatenate(([True], bsb[1:] != bsb[:-1])))
        owner = bsb[starts]
        top[owner] = np.maximum.reduceat(post, starts)
        at_max = post == top[bsb]
        best[owner] = np.minimum.reduceat(np.where(at_max, bsc, m), starts)  # first value at the maximum
        del at_max
        pm = float(post.max())
        if pm > 0 and pm >= mx:
            hit = post == pm
            k = int((bsb[hit].astype(np.int64) * m + bsc[hit]).min())
            flat = k if pm > mx else min(flat, k)
            mx = pm
    best[top == 0] = 0
    certain = (top >= 1.0 - CERTAIN_TOL) & (sizes > 0)
    per = np.bincount(best[certain], weights=sizes[certain], minlength=m).astype(np.int64)
    total = int(per.sum())
    return {"records_certain": total, "n_records": n, "share_certain": (total / n) if n else 0.0,
            "per_value": {labels[i]: int(per[i]) for i in np.flatnonzero(per)},
            "max_posterior": float(min(1.0, mx)), "max_posterior_value": labels[flat % m],
            "buckets_certain": int(certain.sum())}


def typed_disclosure(types: np.ndarray, type_of: np.ndarray, labels) -> dict[str, Any]:
    """:func:`sparse_disclosure` of a release without fakes whose bucket g holds the real counts
    ``types[type_of[g]]`` (buckets in dense order): the same result from the bucket types,
    O(n_types·m + n_buckets) (:func:`types_disclosure`)."""
    types = np.asarray(types, dtype=np.int64)
    type_of = np.asarray(type_of)

    def first_of(kinds: np.ndarray) -> int:
        return int(type_of[np.flatnonzero(np.isin(type_of, kinds))[0]])

    return types_disclosure(types, np.bincount(type_of, minlength=len(types)), labels, first_of)


def types_disclosure(types: np.ndarray, multiplicity: np.ndarray, labels, first_of) -> dict[str, Any]:
    """:func:`typed_disclosure` from the bucket types and their multiplicities, O(n_types·m):
    the buckets' order matters only to name the value at the largest posterior when tied types
    name different values — ``first_of(kinds)`` gives the type of the first bucket (in dense
    order) whose type is among ``kinds``."""
    types = np.asarray(types, dtype=np.int64)
    mult = np.asarray(multiplicity, dtype=np.int64)
    labels = list(labels)
    K, m = types.shape
    size_k = types.sum(axis=1)
    n = int((size_k * mult).sum())
    if int(mult.sum()) * m == 0:
        return {"records_certain": 0, "n_records": n, "share_certain": 0.0, "per_value": {}, "max_posterior": 0.0,
                "max_posterior_value": None, "buckets_certain": 0}
    post = types / np.maximum(size_k, 1)[:, None]
    best = post.argmax(axis=1)                         # the first value at the maximum
    top = post[np.arange(K), best]
    live = mult > 0
    certain = (top >= 1.0 - CERTAIN_TOL) & (size_k > 0) & live
    per = np.bincount(best[certain], weights=(size_k * mult)[certain], minlength=m).astype(np.int64)
    total = int(per.sum())
    mx = float(top[live].max())
    tied = np.flatnonzero(live & (top == mx))
    first_value = (post[tied] == mx).argmax(axis=1)    # each tied type's first value at the maximum
    x = int(first_value[0]) if (first_value == first_value[0]).all() else int(
        first_value[np.flatnonzero(tied == first_of(tied))[0]])
    return {"records_certain": total, "n_records": n, "share_certain": (total / n) if n else 0.0,
            "per_value": {labels[i]: int(per[i]) for i in np.flatnonzero(per)},
            "max_posterior": float(min(1.0, mx)), "max_posterior_value": labels[x],
            "buckets_certain": int(mult[certain].sum())}


def _chunks(col) -> list[np.ndarray]:
    """The chunks of an Arrow integer column (or a NumPy array) as NumPy arrays (zero-copy when
    the chunk allows)."""
    if isinstance(col, pa.ChunkedArray):
        return [c.to_numpy(zero_copy_only=False) for c in col.chunks]
    if isinstance(col, pa.Array):
        return [col.to_numpy(zero_copy_only=False)]
    return [np.asarray(col)]



def narrow_ints(col, limit: int | None = None) -> np.ndarray:
    """An integer column as one NumPy array, int32 when its values (or ``limit``) fit, else int64;
    filled a chunk at a time."""
    parts = _chunks(col)
    n = sum(len(p) for p in parts)
    lo = min((int(p.min()) for p in parts if len(p)), default=0)
    hi = max((int(p.max()) for p in parts if len(p)), default=0) if limit is None else limit
    out = np.empty(n, dtype=np.int32 if -2**31 <= lo and hi < 2**31 else np.int64)
    pos = 0
    for p in parts:
        out[pos:pos + len(p)] = p
        pos += len(p)
    return out


def blocked_bincount(x: np.ndarray, minlength: int, weights: np.ndarray | None = None,
                     block: int = 1 << 20) -> np.ndarray:
    """``np.bincount`` a block at a time (int64, or float64 with weights): np.bincount copies
    narrow input to intp and weights to float64 first, O(rows) bytes; here O(block + bins)
    (blocks of at least ``minlength`` rows, so the per-block bins cost no more than the block)."""
    block = max(block, minlength)
    if len(x) <= block:
        c = np.bincount(x, weights, minlength=minlength)
        return c if weights is None else c.astype(np.float64, copy=False)
    out = np.zeros(minlength, dtype=np.int64 if weights is None else np.float64)
    for a in range(0, len(x), block):
        c = np.bincount(x[a:a + block], None if weights is None else weights[a:a + block], minlength=minlength)
        if len(c) > minlength:
            out = np.concatenate([out, np.zeros(len(c) - minlength, out.dtype)])
            minlength = len(c)
        out[:len(c)] += c
    return out


def dense_ids_chunked(bid) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """:func:`dense_ids` of an Arrow (or NumPy) id column a chunk at a time: the distinct ids
    (int64), the dense index of every row (int32 when < 2^31 ids) and, when the ids are not
    sparse, the lookup table id → dense index (−1 for an absent id) for :func:`dense_lookup`."""
    parts = _chunks(bid)
    n = sum(len(p) for p in parts)
    if not n:
        return np.zeros(0, np.int64), np.zeros(0, np.int32), None
    lo = min(int(p.min()) for p in parts if len(p))
    hi = max(int(p.max()) for p in parts if len(p))
    if lo < 0 or hi >= 2 * n + 1024:  # sparse or negative ids: sort
        ids, inv = dense_ids(np.concatenate(parts))
        return ids, inv.astype(np.int32 if len(ids) < 2**31 else np.int64), None
    present = np.zeros(hi + 1, dtype=bool)
    for p in parts:
        present[p] = True
    ids = np.flatnonzero(present)
    rank: Any = np.cumsum(present, dtype=np.int32 if len(ids) < 2**31 else np.int64)  # no int64 temporary below 2^31 ids
    rank -= 1
    rank[~present] = -1
    del present
    out = np.empty(n, dtype=rank.dtype)
    pos = 0
    for p in parts:
        out[pos:pos + len(p)] = rank[p]
        pos += len(p)
    return ids.astype(np.int64), out, rank


def dense_lookup(ids: np.ndarray, bid, rank: np.ndarray | None = None, block: int = DISCLOSURE_BLOCK) -> np.ndarray | None:
    """The dense index (position in the sorted ``ids``) of every id of an Arrow (or NumPy) id
    column, int32 when < 2^31 ids, a block at a time — through the lookup table ``rank``
    (:func:`dense_ids_chunked`) when given, else by binary search; None when an id is not in
    ``ids``."""
    parts = _chunks(bid)
    n = sum(len(p) for p in parts)
    out = np.empty(n, dtype=np.int32 if len(ids) < 2**31 else np.int64)
    if n and not len(ids):
        return None
    pos = 0
    for p in parts:
        for a in range(0, len(p), block):
            q = p[a:a + block]
            if rank is not None:
                if len(q) and (int(q.min()) < 0 or int(q.max()) >= len(rank)):
                    return None
                d = rank[q]
                if len(d) and int(d.min()) < 0:
                    return None
            else:
                d = np.minimum(np.searchsorted(ids, q), len(ids) - 1)
                if not np.array_equal(ids[d], q):
                    return None
            out[pos:pos + len(q)] = d
            pos += len(q)
    return out


def streamed_disclosure(chunks, sigma: int, thresholds: np.ndarray, labels,
                        known_totals: np.ndarray | None = None, max_rounds: int = 64) -> dict[str, Any]:
    """``bucket_disclosure(receiver_posterior(obs, sizes, σ, thresholds, None, known_totals), sizes,
    labels)`` (:mod:`ppdp.releases.bucketized`; no negative association) without the
    n_buckets × m matrices: ``chunks()`` yields ``(obs, sizes)`` — the observed ST counts
    (buckets × m) and the QIT sizes of consecutive buckets in dense order — the same ones at
    every call, a bounded number of buckets at a time (:func:`streamed_inference`)."""
    return streamed_inference(chunks, sigma, thresholds, labels, known_totals, max_rounds)[0]


def streamed_inference(chunks, sigma: int, thresholds: np.ndarray, labels, known_totals: np.ndarray | None = None,
                       max_rounds: int = 64, forbidden: ForbiddenFakes | None = None
                       ) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """``(disclosure, contradictions)``: :func:`streamed_disclosure`, and for σ ≠ 0 the
    ``contradictions``, ``bad_buckets`` and ``bad_values`` of :func:`fake_inference` at the
    same final state (None for σ = 0), over the chunks of buckets that ``chunks()`` yields;
    ``forbidden``: the values negative associations forbid as fakes (the ``forbidden`` of
    :func:`fake_inference`, a pattern per bucket; none when None).

    The receiver's fake inference is a propagation over buckets (local to a bucket) and values
    (the totals per value over all buckets). A bucket's conclusions depend only on its own row
    (observed counts, size, forbidden pattern) and on the per-value conclusions, so buckets with the same row
    reach the same state: for σ ≠ 0 one pass collects the distinct rows with their
    multiplicities and first bucket (:func:`_distinct_buckets`; a typed plan's buckets are a
    few bucket types × fake sets), and the rounds run on those in memory. When there are more
    than :data:`DISTINCT_CELLS` cells of distinct rows, pass p replays, per chunk, the p completed rounds
    (their per-value conclusions are recorded: O(rounds·m)), counts the certain conclusions
    and states the disclosure and the contradictions of that state, then runs round p's bucket
    step and sums what the value step needs; the propagation has converged when a pass finds
    no new conclusion (the rounds of :func:`~ppdp.releases.bucketized.fake_inference`, same
    arithmetic). Memory O(chunk + rounds·m); passes = rounds + 2."""
    labels = list(labels)
    m = len(labels)
    thr = np.asarray(thresholds, dtype=np.float64)
    pattern_of = None if forbidden is None else forbidden.of
    distinct = _distinct_buckets(chunks, m, DISTINCT_CELLS // (m + 2), pattern_of) if sigma else None

    def source():  # (observed counts, sizes, multiplicity or None, bucket index, forbidden or None) of each row
        if distinct is not None:
            obs, sizes, w, at, pat = distinct
            yield obs, sizes, w, at, None if forbidden is None else forbidden.rows[pat]
            return
        nb = 0
        for obs, sizes in chunks():
            sizes = np.asarray(sizes, dtype=np.int64)
            yield (np.asarray(obs, dtype=np.int64), sizes, None, nb + np.arange(len(sizes)),
                   None if forbidden is None else forbidden.dense(nb, nb + len(sizes)))
            nb += len(sizes)

    steps: list[tuple[np.ndarray, np.ndarray]] = []   # (real, fake) conclusions of each value step
    known_x = np.zeros(m, bool) if known_totals is None else np.asarray(known_totals, dtype=np.int64) >= 0
    f_x = np.full(m, -1, np.int64)
    counts: list[int] = []
    for p in range(max_rounds + 1):
        acc = _DisclosureSum(m)
        n_known, und_x, kf_x, listed = 0, np.zeros(m, np.int64), np.zeros(m, np.int64), np.zeros(m, np.int64)
        bad_g, now_kf_x, now_und_x = 0, np.zeros(m, np.int64), np.zeros(m, np.int64)  # the state of this pass
        for obs, sizes, w, at, forb in source():
            if sigma == 0:
                acc.add(obs / np.maximum(sizes, 1)[:, None].astype(np.float64), sizes, w, at)
                continue
            listed += _column_sums(obs, w)
            st = _FakeState(obs, sizes, thr, forb)
            for real_x, fake_x in steps:
                st.bucket_step()
                st.value_step(real_x, fake_x)
            n_known += _weighted_total(st.kf.sum(axis=1) + st.kr.sum(axis=1), w)
            acc.add(st.posterior(), sizes, w, at)
            undecided = st.ones & ~st.kf & ~st.kr
            kf_g, und_g = st.kf.sum(axis=1), undecided.sum(axis=1)
            bad_g += _weighted_total((st.n_fake < kf_g) | (st.n_fake > kf_g + und_g), w)
            now_kf_x += _column_sums(st.kf, w)
            now_und_x += _column_sums(undecided, w)
            st.bucket_step()
            und_x += _column_sums(st.ones & ~st.kf & ~st.kr, w)
            kf_x += _column_sums(st.kf, w)
        counts.append(n_known)
        if sigma == 0 or p == max_rounds or (p and counts[p] == counts[p - 1]):
            if sigma == 0:
                return acc.result(labels), None
            if p == 0 and known_totals is not None:
                f_x = np.where(known_x, listed - np.asarray(known_totals, dtype=np.int64), -1)
            bad_x = known_x & ((f_x < now_kf_x) | (f_x > now_kf_x + now_und_x))
            return acc.result(labels), {"contradictions": int(bad_g + bad_x.sum()), "bad_buckets": bad_g,
                                        "bad_values": np.flatnonzero(bad_x)}
        if p == 0 and known_totals is not None:
            f_x = np.where(known_x, listed - np.asarray(known_totals, dtype=np.int64), -1)
        left_x = f_x - kf_x
        steps.append((known_x & (left_x <= 0), known_x & (left_x >= und_x) & (left_x > 0)))
    raise AssertionError("unreachable")  # pragma: no cover


#: cells (rows × (m + 1)) of the distinct (observed counts, size) bucket rows the receiver's fake
#: inference keeps in memory (:func:`streamed_inference`); beyond, it replays its rounds over the
#: chunks of buckets
DISTINCT_CELLS = 1 << 21


def _column_sums(a: np.ndarray, w: np.ndarray | None) -> np.ndarray:
    """Σ over buckets of ``a`` (rows × m), each row counted ``w`` times (once when None)."""
    return a.sum(axis=0) if w is None else w @ a.astype(np.int64)


def _weighted_total(v: np.ndarray, w: np.ndarray | None) -> int:
    return int(v.sum()) if w is None else int(w @ v.astype(np.int64))


@functools.lru_cache(maxsize=64)
def _row_hash_multipliers(width: int) -> np.ndarray:
    """Odd 64-bit multipliers of a row hash of ``width`` columns (fixed: the hash is checked)."""
    return np.asarray(np.random.default_rng(0x5EED).integers(1, 1 << 62, size=width), dtype=np.uint64) * 2 + 1


def _unique_rows(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(first, inverse)`` of the distinct rows of the int64 matrix ``x``: a row hash
    (wrapping arithmetic), checked exactly, with the sorting ``np.unique`` by rows on a
    collision."""
    mult = _row_hash_multipliers(x.shape[1])
    h = (x.astype(np.uint64) * mult[None, :]).sum(axis=1, dtype=np.uint64)
    _, first, inv = np.unique(h, return_index=True, return_inverse=True)
    if not np.array_equal(x[first][inv.ravel()], x):
        _, first, inv = np.unique(x, axis=0, return_index=True, return_inverse=True)
    return first, inv.ravel()


def _distinct_buckets(chunks, m: int, limit: int, pattern_of: np.ndarray | None = None):
    """``(observed counts, sizes, multiplicity, first bucket index, pattern)`` of the distinct
    bucket rows (observed counts, size and, when ``pattern_of`` is given, the bucket's pattern
    of forbidden fakes; else pattern 0) over every chunk (one pass), or None when there are
    more than ``limit`` (0: always None)."""
    held: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []   # (rows with the size last, count, first)
    n_held, nb = 0, 0

    def merge(parts):
        x = np.concatenate([p[0] for p in parts])
        first, inv = _unique_rows(x)
        cnt = np.bincount(inv, weights=np.concatenate([p[1] for p in parts]), minlength=len(first)).astype(np.int64)
        at = np.full(len(first), np.iinfo(np.int64).max, dtype=np.int64)
        np.minimum.at(at, inv, np.concatenate([p[2] for p in parts]))
        return x[first], cnt, at

    if limit <= 0:
        return None
    for obs, sizes in chunks():
        sizes = np.asarray(sizes, dtype=np.int64)
        pat = (np.zeros(len(sizes), np.int64) if pattern_of is None
               else np.asarray(pattern_of[nb:nb + len(sizes)], dtype=np.int64))
        x = np.concatenate([np.asarray(obs, dtype=np.int64).reshape(len(sizes), m), sizes[:, None], pat[:, None]],
                           axis=1)
        held.append(merge([(x, np.ones(len(x), np.int64), nb + np.arange(len(x), dtype=np.int64))]))
        nb += len(sizes)
        n_held += len(held[-1][0])
        if n_held > limit:
            held = [merge(held)]
            n_held = len(held[0][0])
            if n_held > limit:
                return None
    if not held:
        e = np.zeros(0, np.int64)
        return np.zeros((0, m), np.int64), e, e, e, e
    x, cnt, at = merge(held) if len(held) > 1 else held[0]
    return np.ascontiguousarray(x[:, :m]), x[:, m].copy(), cnt, at, x[:, m + 1].copy()


class _FakeState:
    """The receiver's certain conclusions about a chunk's count-1 values (``kr`` real, ``kf``
    fake), as :func:`~ppdp.releases.bucketized.fake_inference` draws them (``forbidden``: the
    values negative associations forbid as fakes, chunk × m, or None)."""

    def __init__(self, obs: np.ndarray, sizes: np.ndarray, thr: np.ndarray, forbidden: np.ndarray | None = None):
        self.obs, self.sizes = obs, sizes
        self.ones = obs == 1
        can_be_real = fake_candidates(sizes, thr)
        self.kf = self.ones & ~can_be_real  # no real record could hold it
        self.kr = np.zeros_like(self.ones) if forbidden is None else self.ones & can_be_real & forbidden
        self.n_real_ones = sizes - np.where(obs >= 2, obs, 0).sum(axis=1)  # r_g
        self.n_fake = self.ones.sum(axis=1) - self.n_real_ones           # σ_g

    def bucket_step(self) -> None:
        undecided = self.ones & ~self.kf & ~self.kr
        und_g = undecided.sum(axis=1)
        fakes_left = self.n_fake - self.kf.sum(axis=1)
        self.kr |= undecided & (fakes_left <= 0)[:, None]
        self.kf |= undecided & ((fakes_left >= und_g) & (fakes_left > 0))[:, None]

    def value_step(self, real_x: np.ndarray, fake_x: np.ndarray) -> None:
        undecided = self.ones & ~self.kf & ~self.kr
        self.kr |= undecided & real_x[None, :]
        self.kf |= undecided & fake_x[None, :]

    def posterior(self) -> np.ndarray:
        """:func:`receiver_posterior` of the chunk in this state."""
        undecided = self.ones & ~self.kf & ~self.kr
        und_g = undecided.sum(axis=1)
        real_left = self.n_real_ones - self.kr.sum(axis=1)
        p = np.divide(real_left, und_g, out=np.zeros(len(und_g), np.float64), where=und_g > 0).clip(0.0, 1.0)
        expected = np.where(self.obs >= 2, self.obs, 0) + self.kr + undecided * p[:, None]
        return expected / np.maximum(self.sizes, 1)[:, None].astype(np.float64)


class _DisclosureSum:
    """:func:`bucket_disclosure` summed over consecutive chunks of
    buckets (the first bucket and value at the largest posterior, as ``argmax`` finds them)."""

    def __init__(self, m: int):
        self.m, self.n, self.nb, self.certain = m, 0, 0, 0
        self.per = np.zeros(m, dtype=np.float64)
        self.mx, self.at = -np.inf, (0, 0)

    def add(self, post: np.ndarray, sizes: np.ndarray, w: np.ndarray | None = None, at: np.ndarray | None = None) -> None:
        """Add buckets with posteriors ``post`` and sizes ``sizes``; ``w``: how many buckets each
        row stands for (one when None); ``at``: each row's (first) bucket index (the next ones
        when None)."""
        sizes = np.asarray(sizes, dtype=np.int64)
        w = np.ones(len(sizes), np.int64) if w is None else np.asarray(w, dtype=np.int64)
        at = self.nb + np.arange(len(sizes)) if at is None else np.asarray(at, dtype=np.int64)
        self.n += int(sizes @ w)
        self.nb += int(w.sum())
        if post.size == 0:
            return
        best = post.argmax(axis=1)
        top = post[np.arange(len(best)), best]
        certain = (top >= 1.0 - CERTAIN_TOL) & (sizes > 0)
        self.per += np.bincount(best[certain], weights=(sizes * w)[certain], minlength=self.m)
        self.certain += int(w[certain].sum())
        mx = top.max()
        if mx > self.mx:  # the first bucket, then the first value, at the largest posterior
            tie = np.flatnonzero(top == mx)
            r = tie[np.argmin(at[tie])]
            self.mx, self.at = float(mx), (int(at[r]), int(best[r]))

    def result(self, labels: list) -> dict[str, Any]:
        n = self.n
        if self.nb * self.m == 0:
            return {"records_certain": 0, "n_records": n, "share_certain": 0.0, "per_value": {}, "max_posterior": 0.0,
                    "max_posterior_value": None, "buckets_certain": 0}
        per = self.per.astype(np.int64)
        total = int(per.sum())
        return {"records_certain": total, "n_records": n, "share_certain": (total / n) if n else 0.0,
                "per_value": {labels[i]: int(per[i]) for i in np.flatnonzero(per)},
                "max_posterior": float(min(1.0, self.mx)), "max_posterior_value": labels[self.at[1]],
                "buckets_certain": self.certain}



@register_family("bucketized")
class BucketizedRelease(Release):
    FILES = {"qit": ("{quasi}", "bid"), "st": ("bid", "{sensitive}", "count", "fake?")}
    def __init__(self, manifest: Mapping[str, Any], tables: Mapping[str, pa.Table],
                 custodian: Mapping[str, Any] | None = None):
        super().__init__(manifest, tables, custodian)
        self._decoded: dict[str, Any] | None = None

    # ------------------------------------------------------------ structure
    @property
    def sa(self) -> str:
        sens = self.schema.get("sensitive", [])
        if len(sens) != 1:
            raise ReleaseError(f"a bucketized release has one sensitive attribute, the manifest lists {sens}")
        return sens[0]

    @property
    def quasi(self) -> list[str]:
        return list(self.schema.get("quasi", []))

    @property
    def fake_values(self) -> int:
        """σ, the number of fake SA values in every bucket (from the certificate)."""
        try:
            return int(self.certificate.get("fake_values", 0))
        except (TypeError, ValueError):
            raise ReleaseError(f"certificate fake_values {self.certificate.get('fake_values')!r} is not a number") from None

    @property
    def fake_flag_published(self) -> bool:
        return "fake" in self._table("st", []).column_names

    @property
    def negative_associations(self) -> list[list[str]]:
        # given (negative_associations) and learned from the buckets (negative_associations_learned, §6)
        given = self.certificate.get("negative_associations") or []
        learned = self.certificate.get("negative_associations_learned") or []
        return [list(map(str, a)) for a in [*given, *learned]]

    def _table(self, name: str, columns: list[str]) -> pa.Table:
        if name not in self.tables:
            raise ReleaseError(f"{name}.parquet is missing")
        t = self.tables[name]
        missing = [c for c in columns if c not in t.column_names]
        if missing:
            raise ReleaseError(f"{name}.parquet lacks column(s) {missing}")
        return t

    def buckets(self) -> dict[str, Any]:
        """Decoded release: dense bucket index per QIT row (``qb``) and per ST row (``sb``), SA
        code (``sc``) and count (``count``) per ST row, bucket sizes, the ids (``ids``: published
        bucket id of each dense index) and, if published, the fake flag per ST row. Indices and
        counts are int32 when they fit (4 bytes a row, not 8), decoded a Parquet chunk at a time
        (no int64 copy of a whole column)."""
        key = (id(self.tables.get("qit")), id(self.tables.get("st")), id(self.manifest.get("schema")))
        if self._decoded is not None and self._decoded.get("key") == key:
            return self._decoded  # (decoded again when a table is replaced)
        qit = self._table("qit", self.quasi + ["bid"])
        st = self._table("st", ["bid", self.sa, "count"])
        ids, qb, rank = dense_ids_chunked(qit.column("bid"))
        sb = dense_lookup(ids, st.column("bid"), rank)
        del rank
        if sb is None:
            raise ReleaseError("st.parquet names bucket ids that no QIT row has")
        sc = self.narrow_codes("st", self.sa)
        cnt = narrow_ints(st.column("count"))
        m = len(self.domains[self.sa])
        nb = len(ids)
        fake = None
        if "fake" in st.column_names:
            fake = st.column("fake").to_numpy(zero_copy_only=False).astype(bool)
        self._decoded = {"qb": qb, "sb": sb, "sc": sc, "count": cnt, "fake_rows": fake, "n_buckets": nb,
                         "sizes": blocked_bincount(qb, nb), "m": m, "ids": ids, "key": key}
        return self._decoded

    def lazy_codes(self, table: str, columns: Sequence[str]) -> LazyColumns:
        """Column → :meth:`narrow_codes`, each decoded when asked for and not kept (a pass over
        the columns holds one at a time)."""
        return LazyColumns(columns, lambda c: self.narrow_codes(table, c))

    def narrow_codes(self, table: str, column: str) -> np.ndarray:
        """:meth:`codes` of a dictionary-encoded column in the narrowest signed type of 2 bytes or
        more (int16 up to 2^15 labels, else int32), a chunk at a time (no combined copy)."""
        col = self._table(table, [column]).column(column)
        chunks = col.chunks if isinstance(col, pa.ChunkedArray) else [col]
        dom = self.domains[column]
        if not all(pa.types.is_dictionary(c.type) and c.null_count == 0 for c in chunks):
            return self.codes(table, column)
        out = np.empty(len(col), dtype=np.int16 if len(dom) <= 1 << 15 else np.int32)
        pos = 0
        for c in chunks:
            lut = labels_to_codes(c.dictionary.cast(pa.string()), dom, column).astype(out.dtype)
            idx = c.indices.to_numpy(zero_copy_only=False)
            out[pos:pos + len(idx)] = dictionary_codes(lut, idx)
            pos += len(idx)
        return out

    def check_labels(self, table: str, column: str) -> None:
        """ReleaseError unless every label of the column lies in its domain: for a dictionary
        column, its dictionary's labels and in-range indices (no pass of gathers over the rows)."""
        col = self._table(table, [column]).column(column)
        chunks = col.chunks if isinstance(col, pa.ChunkedArray) else [col]
        if not all(pa.types.is_dictionary(c.type) and c.null_count == 0 for c in chunks):
            self.codes(table, column)
            return
        for c in chunks:
            labels_to_codes(c.dictionary.cast(pa.string()), self.domains[column], column)
            idx = c.indices.to_numpy(zero_copy_only=False)
            if len(idx) and (int(idx.min()) < 0 or int(idx.max()) >= len(c.dictionary)):
                raise ReleaseError(f"column {column!r} has dictionary indices outside its dictionary")

    def code_block(self, table: str, columns: Sequence[str], start: int, length: int) -> list[np.ndarray]:
        """The codes of rows ``start`` … ``start + length − 1`` of each column (dictionary chunks
        decoded through their dictionary; O(length) memory)."""
        out = []
        for c in columns:
            col = self._table(table, [c]).column(c).slice(start, length)
            parts = []
            for ch in col.chunks:
                if pa.types.is_dictionary(ch.type) and ch.null_count == 0:
                    lut = labels_to_codes(ch.dictionary.cast(pa.string()), self.domains[c], c)
                    lut = lut.astype(np.int16 if len(self.domains[c]) <= 1 << 15 else np.int32)
                    idx = ch.indices.to_numpy(zero_copy_only=False)
                    parts.append(dictionary_codes(lut, idx))
                else:
                    parts.append(labels_to_codes(ch, self.domains[c], c))
            out.append(np.concatenate(parts) if len(parts) != 1 else parts[0])
        return out

    def adopt_writer_decoding(self, sizes: np.ndarray, types: np.ndarray | None = None,
                              type_of: np.ndarray | None = None) -> bool:
        """For the writer, whose files are in the dense form already — QIT ``bid`` = 0 … n_buckets − 1
        in id order with ``sizes[g]`` rows each (none empty), one Arrow chunk per column, the ST's SA
        dictionary = the domain: :meth:`buckets` then views the Arrow columns (zero-copy) instead
        of decoding them again, and, given the bucket ``types`` (real counts, n_types × m) and
        each bucket's type, :meth:`disclosure` reads them (σ = 0: O(n_types·m + n_buckets)).
        Returns whether it did (else :meth:`buckets` decodes as usual)."""
        sizes = np.asarray(sizes, dtype=np.int64)
        qit, st = self.tables.get("qit"), self.tables.get("st")
        if qit is None or st is None or "fake" in st.column_names or (len(sizes) and int(sizes.min()) < 1):
            return False
        cols = [qit.column("bid"), st.column("bid"), st.column(self.sa), st.column("count")]
        if any(c.num_chunks != 1 for c in cols) or not pa.types.is_dictionary(cols[2].type):
            return False
        sa_col = cols[2].chunk(0)
        if sa_col.dictionary.to_pylist() != [str(x) for x in self.domains[self.sa]]:
            return False
        qb, sb, cnt = (c.chunk(0).to_numpy(zero_copy_only=False) for c in (cols[0], cols[1], cols[3]))
        sc = sa_col.indices.to_numpy(zero_copy_only=False)
        if len(qb) != int(sizes.sum()) or (len(qb) and (int(qb[0]) != 0 or int(qb[-1]) != len(sizes) - 1)):
            return False
        key = (id(self.tables.get("qit")), id(self.tables.get("st")), id(self.manifest.get("schema")))
        self._decoded = {"qb": qb, "sb": sb, "sc": sc, "count": cnt, "fake_rows": None, "n_buckets": len(sizes),
                         "sizes": sizes, "m": len(self.domains[self.sa]), "ids": np.arange(len(sizes), dtype=np.int64),
                         "key": key}
        if types is not None and type_of is not None:
            t = np.asarray(types, dtype=np.int64)
            if t.shape[1:] == (self._decoded["m"],) and np.array_equal(t.sum(axis=1)[type_of], sizes):
                self._decoded.update(types=t, type_of=np.asarray(type_of))
        return True

    def sparse_real_rows(self) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """The ST rows as (dense bucket, SA code, real count) when the real counts are known
        without a matrix — σ = 0, a published fake flag or the custodian file's fakes (fakes
        count 0) — else None. The
        row form of :meth:`real_counts_from_files`: O(ST rows) memory, never n_buckets × m."""
        b = self.buckets()
        if b["fake_rows"] is not None:
            return b["sb"], b["sc"], np.where(b["fake_rows"], 0, b["count"])
        fr = self.custodian_fake_rows()
        if fr is not None:  # the custodian file's fakes (count 1 each when they pass verify)
            return b["sb"], b["sc"], np.where(fr, 0, b["count"])
        if self.fake_values == 0:
            return b["sb"], b["sc"], b["count"]
        return None

    def real_totals_from_files(self) -> np.ndarray | None:
        """Column sums of :meth:`real_counts_from_files` (the real SA totals), from the rows when
        possible."""
        rows = self.sparse_real_rows()
        if rows is None:  # σ ≠ 0 and no fake known: the real counts are not in the files
            return None
        _, sc, cnt = rows
        return blocked_bincount(sc, self.buckets()["m"], weights=cnt).astype(np.int64)

    def bucket_sizes(self) -> np.ndarray:
        """|g| per bucket (QIT rows), in dense bucket order."""
        return self.buckets()["sizes"]

    def observed_counts(self) -> np.ndarray:
        """ST counts per (bucket, SA code), fakes included (int64, n_buckets × m)."""
        b = self.buckets()
        obs = np.zeros((b["n_buckets"], b["m"]), dtype=np.int64)
        np.add.at(obs, (b["sb"], b["sc"]), b["count"])
        return obs

    def thresholds(self) -> np.ndarray:
        """The claim's per-value bound (f'_x, or 1/ℓ) in SA-domain order; 1 where none is stated."""
        claim: Any = claim_of(self.manifest)  # FPrivacyClaim or LDiversityClaim
        thr = claim.threshold_array(self.domains[self.sa])
        return np.where(np.isnan(thr), 1.0, thr)

    def published_fake_matrix(self) -> np.ndarray | None:
        """True where a published ``fake`` column marks a fake value (a leak: the format has no
        such column and verify rejects it); None without the column."""
        b = self.buckets()
        if b["fake_rows"] is None:
            return None
        fake = np.zeros((b["n_buckets"], b["m"]), dtype=bool)
        fr = b["fake_rows"]
        fake[b["sb"][fr], b["sc"][fr]] = True
        return fake

    def custodian_fake_matrix(self) -> np.ndarray | None:
        """True where the custodian-side file (``custodian["fake"]``: a
        :class:`~ppdp.releases.custodian.FakeList`, or the older inline ``{"bid": [...], "value":
        [...]}``) lists a fake value; None when the custodian file is not loaded or lists none."""
        pos, codes = self.custodian_fake_cells()
        if pos is None:
            return None
        b = self.buckets()
        fake = np.zeros((b["n_buckets"], b["m"]), dtype=bool)
        fake[pos, codes] = True
        return fake

    def custodian_fake_cells(self) -> tuple[np.ndarray, np.ndarray] | tuple[None, None]:
        """The custodian file's fakes as (dense bucket index, SA code) pairs, checked: every
        bucket id is one a QIT row has, every value lies in the SA domain, no pair twice;
        ``(None, None)`` when the custodian file is not loaded or lists none."""
        spec = (self.custodian or {}).get("fake")
        if spec is None:
            return None, None
        fakes = fake_list(spec)
        b = self.buckets()
        ids = b["ids"]
        pos = np.minimum(np.searchsorted(ids, fakes.bid), max(len(ids) - 1, 0))
        if len(fakes) and (len(ids) == 0 or not np.array_equal(ids[pos], fakes.bid)):
            raise ReleaseError("the custodian file names fake values in bucket ids that no QIT row has")
        codes = fakes.codes_in(self.domains[self.sa], repr(self.sa))
        key = np.sort(pos.astype(np.int64) * b["m"] + codes)
        if len(key) > 1 and not np.all(key[1:] != key[:-1]):
            raise ReleaseError("the custodian file lists a fake value twice in one bucket")
        return pos, codes

    def custodian_fake_rows(self) -> np.ndarray | None:
        """True for the ST rows that the custodian file lists as fakes (one bool per ST row, a
        block of rows at a time; no n_buckets × m matrix); None without the custodian file's
        fakes. A listed fake without an ST row is not marked (verify counts those)."""
        spec = (self.custodian or {}).get("fake")
        if spec is None:
            return None
        stamp = _custodian_stamp(self.custodian)
        b = self.buckets()
        cached = b.get("custodian_rows")
        if cached is not None and cached[0] == stamp:
            return cached[1]
        pos, codes = self.custodian_fake_cells()
        assert pos is not None and codes is not None
        m = b["m"]
        keys = np.sort(pos.astype(np.int64) * m + codes)
        sb, sc = b["sb"], b["sc"]
        out = np.zeros(len(sb), dtype=bool)
        if len(keys):
            for a in range(0, len(sb), ROW_BLOCK):
                key = sb[a:a + ROW_BLOCK].astype(np.int64) * m
                key += sc[a:a + ROW_BLOCK]
                i = np.minimum(np.searchsorted(keys, key), len(keys) - 1)
                out[a:a + len(key)] = keys[i] == key
        b["custodian_rows"] = (stamp, out)
        return out

    def cell_excluded(self, bucket: np.ndarray, code: np.ndarray) -> np.ndarray:
        """:meth:`fake_excluded` at the cells (dense bucket, SA code) given, without the
        n_buckets × m matrix."""
        thr = self.thresholds()
        sizes = np.maximum(self.bucket_sizes(), 1)
        absent = revealed_absent(claim_of(self.manifest), self.domains[self.sa], int(self.manifest.get("n_published", 0)))
        out = ~(privacy_cap(thr[code], sizes[bucket]) >= 1) | absent[code]
        if self.negative_associations:
            out |= self.forbidden_patterns().at(bucket, code)
        return out

    def range_excluded(self, sizes: np.ndarray, lo: int = 0) -> np.ndarray:
        """:meth:`fake_excluded` of the range of dense buckets ``lo`` … ``lo + len(sizes) − 1``,
        whose QIT sizes are ``sizes`` (buckets × m)."""
        thr = self.thresholds()
        excluded = ~fake_candidates(sizes, thr)
        absent = revealed_absent(claim_of(self.manifest), self.domains[self.sa], int(self.manifest.get("n_published", 0)))
        excluded[:, absent] = True
        if self.negative_associations:
            excluded |= self.forbidden_patterns().dense(lo, lo + len(sizes))
        return excluded

    def bucket_ranges(self, cells: int = RANGE_CELLS, drop: np.ndarray | None = None):
        """``chunks()`` for :func:`streamed_disclosure`: the
        observed counts (buckets × m, int64) and sizes of consecutive dense bucket ranges, from
        the ST rows (which must be in bucket order: :meth:`rows_in_bucket_order`); ``drop``:
        ST rows not counted (one bool per row: the custodian's fakes give the real counts)."""
        b = self.buckets()
        sb, sc, cnt, m, nb = b["sb"], b["sc"], b["count"], b["m"], b["n_buckets"]
        step = max(1, cells // max(m, 1))
        los = np.arange(0, nb, step, dtype=np.int64)
        bounds = np.searchsorted(sb, np.append(los, nb))

        def chunks():
            for i, lo in enumerate(los.tolist()):
                hi = min(nb, lo + step)
                a, z = int(bounds[i]), int(bounds[i + 1])
                key = (sb[a:z].astype(np.int64) - lo) * m + sc[a:z]
                w = cnt[a:z] if drop is None else np.where(drop[a:z], 0, cnt[a:z])
                obs = np.bincount(key, weights=w, minlength=(hi - lo) * m).astype(np.int64).reshape(hi - lo, m)
                yield obs, b["sizes"][lo:hi]

        return chunks

    def rows_in_bucket_order(self) -> bool:
        """Are the ST rows grouped by bucket in dense order (as every ppdp engine writes them)?"""
        b = self.buckets()
        if "st_sorted" not in b:
            sb = b["sb"]
            b["st_sorted"] = all(bool((np.diff(sb[a:a + ROW_BLOCK + 1]) >= 0).all())
                                 for a in range(0, max(len(sb) - 1, 0), ROW_BLOCK))
        return bool(b["st_sorted"])

    def rowwise(self) -> bool:
        """Are the σ > 0 checks and the disclosure done from the rows and by bucket ranges
        (no n_buckets × m matrix)? For large releases whose ST rows are in bucket order (the
        negative associations' forbidden values as :meth:`forbidden_patterns`)."""
        b = self.buckets()
        return (b["n_buckets"] * b["m"] > DENSE_CELLS and b["fake_rows"] is None
                and self.rows_in_bucket_order())

    def fake_matrix(self) -> np.ndarray | None:
        """Which values are fake, as far as known: the custodian file's list, else a published
        ``fake`` column; None when neither is at hand."""
        fake = self.custodian_fake_matrix()
        return fake if fake is not None else self.published_fake_matrix()

    def real_counts_from_files(self) -> np.ndarray | None:
        """The exact real counts (n_buckets × m) when they are known — σ = 0, or the fakes known
        from the custodian file (or a published flag) — else None."""
        obs = self.observed_counts()
        fake = self.fake_matrix()
        if fake is not None:
            obs[fake & (obs == 1)] = 0
            return obs
        return obs if self.fake_values == 0 else None

    def real_bucket_types(self) -> tuple[np.ndarray, np.ndarray] | None:
        """The buckets' real SA counts as ``(types, type_of)``: the distinct count rows (T × m)
        and each bucket's row (``real[g] = types[type_of[g]]``), when the real counts are known
        (σ = 0, or the fakes from the custodian file or a published flag), else None. Over
        ranges of buckets, no n_buckets × m matrix, when the ST rows are in bucket order: a
        row hash per bucket, factorized, then every bucket compared with its type's row (a
        hash collision falls back to the sorting ``np.unique``)."""
        b = self.buckets()
        fr = None
        if self.fake_values:
            fr = self.custodian_fake_rows()
            if fr is None:
                fr = b["fake_rows"]
            if fr is None:
                return None
        if not self.rows_in_bucket_order():
            real = self.real_counts_from_files()
            if real is None:
                return None
            first, inv = _unique_rows(real.astype(np.int64))
            return real[first].astype(np.int64), inv
        m, nb = b["m"], b["n_buckets"]
        mult = _row_hash_multipliers(m)
        type_of = np.empty(nb, dtype=np.int64)
        known = pd.Index(np.zeros(0, dtype=np.uint64))
        types = np.zeros((16, m), dtype=np.int64)   # the rows of the types met so far (grown by doubling)
        lo = 0
        for real, _ in self.bucket_ranges(drop=fr)():  # one pass: each range's new rows become types
            h = (real.astype(np.uint64) * mult[None, :]).sum(axis=1, dtype=np.uint64)
            codes, uniq = pd.factorize(h)
            ids = known.get_indexer(uniq)
            new = np.flatnonzero(ids < 0)
            if len(new):
                ids[new] = len(known) + np.arange(len(new))
                known = known.append(pd.Index(uniq[new]))
                while len(types) < len(known):
                    types = np.concatenate([types, np.zeros_like(types)])
                first = np.full(len(uniq), len(codes), dtype=np.int64)
                np.minimum.at(first, codes, np.arange(len(codes), dtype=np.int64))
                types[ids[new]] = real[first[new]]
            t = ids[codes]
            if not np.array_equal(types[t], real):  # a hash collision
                dense = self.real_counts_from_files()
                assert dense is not None
                first, inv = np.unique(dense, axis=0, return_index=True, return_inverse=True)[1:]
                return dense[first].astype(np.int64), inv.ravel()
            type_of[lo:lo + len(real)] = t
            lo += len(real)
        return types[:len(known)], type_of

    def real_counts(self) -> tuple[np.ndarray, int]:
        """``(counts, unknown)``: the exact real counts and 0 when known; otherwise the observed
        counts and σ, the number of each bucket's count-1 values that are fake but unidentified."""
        exact = self.real_counts_from_files()
        if exact is not None:
            return exact, 0
        return self.observed_counts(), self.fake_values

    def fake_excluded(self) -> np.ndarray:
        """(n_buckets × m) True where the publication rule forbids a fake value (beyond being
        absent from the bucket): no real record could hold it, or a negative association."""
        forbidden = self.forbidden_fakes() if self.negative_associations else None
        excluded = ~fake_candidates(self.bucket_sizes(), self.thresholds(), forbidden)
        absent = revealed_absent(claim_of(self.manifest), self.domains[self.sa], int(self.manifest.get("n_published", 0)))
        excluded[:, absent] = True
        return excluded

    def posterior(self, known_totals: np.ndarray | None = None) -> np.ndarray:
        """The receiver's posterior P(x | a record of g) from the published files alone
        (:func:`receiver_posterior`; the custodian file is not used)."""
        forbidden = self.forbidden_fakes() if self.fake_values and self.negative_associations else None
        return receiver_posterior(self.observed_counts(), self.bucket_sizes(), self.fake_values, self.thresholds(),
                                  forbidden, known_totals, self.published_fake_matrix())

    def streamed(self, thresholds: np.ndarray, known_totals: np.ndarray | None = None) -> tuple[dict[str, Any], dict[str, Any] | None]:
        """:func:`streamed_inference` over :meth:`bucket_ranges` (for :meth:`rowwise` releases):
        the disclosure and the fake inference's contradictions, computed once for both."""
        b = self.buckets()
        thr = np.asarray(thresholds, dtype=np.float64)
        stamp = (b["key"], self.fake_values, thr.tobytes(),
                 None if known_totals is None else np.asarray(known_totals, dtype=np.int64).tobytes())
        cached = self.__dict__.get("_streamed_cache")
        if cached is not None and cached[0] == stamp:
            return cached[1]
        forbidden = self.forbidden_patterns() if self.fake_values and self.negative_associations else None
        out = streamed_inference(self.bucket_ranges(), self.fake_values, thr, self.domains[self.sa], known_totals,
                                 forbidden=forbidden)
        self.__dict__["_streamed_cache"] = (stamp, out)
        return out

    def fake_contradictions(self, thresholds: np.ndarray, known_totals: np.ndarray | None = None) -> dict[str, Any]:
        """``contradictions``, ``bad_buckets`` and ``bad_values`` of :meth:`fake_inference`; for
        :meth:`rowwise` releases (σ ≠ 0) over ranges of buckets, no n_buckets × m matrix."""
        if self.fake_values != 0 and self.rowwise():
            inf = self.streamed(thresholds, known_totals)[1]
            assert inf is not None
            return inf
        return self.fake_inference(thresholds, known_totals)

    def fake_inference(self, thresholds: np.ndarray | None = None, known_totals: np.ndarray | None = None) -> dict[str, Any]:
        """The receiver's certain conclusions about the count-1 values (:func:`fake_inference`)."""
        forbidden = self.forbidden_fakes() if self.negative_associations else None
        thr = self.thresholds() if thresholds is None else thresholds
        return fake_inference(self.observed_counts(), self.bucket_sizes(), thr, forbidden, known_totals)

    def disclosure(self, known_totals: np.ndarray | None = None) -> dict[str, Any]:
        """What the files disclose (:func:`bucket_disclosure` of :meth:`posterior`); from the ST
        rows when the receiver's posterior is the exact share (σ = 0 or a published fake flag)."""
        b = self.buckets()
        stamp = (b["key"], None if known_totals is None else np.asarray(known_totals).tobytes(),
                 repr(self.certificate), _custodian_stamp(self.custodian))
        cached = self.__dict__.get("_disclosure_cache")
        if cached is not None and cached[0] == stamp:  # publish states it twice (the writer, then ppdp.publish)
            return dict(cached[1])
        d = None
        if self.fake_values == 0 and b.get("types") is not None:  # the writer's bucket types
            d = typed_disclosure(b["types"], b["type_of"], self.domains[self.sa])
        elif self.fake_values == 0 or b["fake_rows"] is not None:
            d = sparse_disclosure(b["sb"], b["sc"], b["count"], b["sizes"], self.domains[self.sa], fake=b["fake_rows"])
        elif self.rowwise():  # the receiver's fake inference replayed over ranges of buckets
            d = dict(self.streamed(self.thresholds(), known_totals)[0])
        if d is None:
            d = bucket_disclosure(self.posterior(known_totals), self.bucket_sizes(), self.domains[self.sa])
        self.__dict__["_disclosure_cache"] = (stamp, dict(d))
        return d

    def forbidden_fakes(self) -> np.ndarray:
        """(n_buckets × m) True where a published negative association forbids a fake value."""
        return self.forbidden_patterns().dense()

    def forbidden_patterns(self, qb: np.ndarray | None = None, n_buckets: int = 0) -> ForbiddenFakes:
        """The values the published negative associations forbid as fakes, per bucket, as
        :class:`ForbiddenFakes` (:func:`association_patterns`: one pass over the QIT columns
        they name); ``qb``, ``n_buckets``: the dense bucket of each QIT row and their number
        when the caller has them (else from :meth:`buckets`, which decodes the ST too)."""
        assoc = self.negative_associations
        stamp = (id(self.tables.get("qit")), id(self.tables.get("st")), repr(assoc))
        cached = self.__dict__.get("_forbidden")
        if cached is None or cached[0] != stamp:
            nb = n_buckets
            if qb is None:
                b = self.buckets()
                qb, nb = b["qb"], b["n_buckets"]
            cached = (stamp, association_patterns(qb, nb, self.lazy_codes("qit", self.quasi), self.domains, self.sa,
                                                  assoc))
            self.__dict__["_forbidden"] = cached
        return cached[1]

    # ---------------------------------------------------------------- verify
    def _verify(self, rep: VerifyReport, table) -> None:
        """File-format checks and the descriptive statistics, then the claim's own check."""
        cert = self.certificate
        for key in ("loss", "mse", "n_buckets", "bucket_sizes", "fake_values"):
            rep.check(key in cert, f"certificate has {key!r}", f"certificate lacks {key!r}")
        if rep.problems:
            return
        self._verify_layout(rep)
        params = self.manifest.get("params", {})
        for key in ("fake_values", "negative_associations", "method"):
            if key in params:
                want = params[key] if key != "negative_associations" else [list(a) for a in params[key] or []]
                rep.check(cert.get(key) == want, f"certificate {key} = params.{key}",
                          f"certificate {key} = {cert.get(key)!r} but params.{key} = {params[key]!r}")
        learning = cert.get("negative_association_learning")
        if learning is not None or any(k in params for k in _LEARNING_PARAMS.values()):
            want_l = {k: params.get(p) for k, p in _LEARNING_PARAMS.items()}
            rep.check(isinstance(learning, dict) and {k: learning.get(k) for k in _LEARNING_PARAMS} == want_l,
                      "certificate negative_association_learning = the params' learning settings",
                      f"certificate negative_association_learning = {learning!r} but the params say {want_l!r}")
            learned = cert.get("negative_associations_learned")
            rep.check((learned is not None) == bool(want_l["enabled"]),
                      "learned negative associations are listed exactly when learning is on",
                      "the certificate's negative_associations_learned does not match learn_associations")
        if "method" in cert:
            rep.check(("proven_optimal" in cert) == (cert["method"] == "optimal"),
                      "proven_optimal is stated for the optimal method only",
                      "certificate proven_optimal does not match its method")
        b = self.buckets()
        for c in self.quasi:
            self.check_labels("qit", c)  # raises ReleaseError on a label outside the domain
        rep.checks.append("every published label lies in its domain")
        m, sizes = b["m"], b["sizes"]
        n = len(b["qb"])
        if "max_bucket" in params and len(sizes):
            rep.check(int(sizes.max()) <= int(params["max_bucket"]), "every bucket holds ≤ max_bucket records",
                      f"a bucket holds {int(sizes.max())} records, more than params.max_bucket = {params['max_bucket']}")
        sigma = self.fake_values
        rep.check(sigma >= 0, "σ ≥ 0", f"certificate fake_values = {sigma} is negative")
        rep.check(n == int(self.manifest["n_published"]), "QIT has n_published rows",
                  f"qit.parquet has {n} rows, the manifest says n_published = {self.manifest['n_published']}")
        # ST rows: one per (bucket, value), positive counts
        rep.check(st_values_distinct(b["sb"], b["sc"], len(sizes), m), "each SA value appears at most once per bucket in ST",
                  "st.parquet repeats an SA value within a bucket (fake values must be distinct and absent from the real values)")
        rep.check(bool((b["count"] >= 1).all()), "ST counts are ≥ 1", "st.parquet has counts < 1")
        st_tot = blocked_bincount(b["sb"], len(sizes), weights=b["count"]).astype(np.int64)
        rep.check(np.array_equal(st_tot, sizes + sigma), "ST counts per bucket = QIT size + σ",
                  f"{int((st_tot != sizes + sigma).sum())} bucket(s) have ST total ≠ |g| + σ")
        del st_tot
        rowwise = self.rowwise()
        if rowwise:  # the same checks from the ST rows, no n_buckets × m matrix
            self._verify_fakes_rowwise(rep, sigma)
            fake = None
        else:
            fake = self.custodian_fake_matrix() if sigma or self.custodian else None
        if not rowwise and (sigma or fake is not None):  # the fake-value checks on (n_buckets × m) matrices
            obs = self.observed_counts()
            excluded = self.fake_excluded()
            ones = obs == 1
        if not rowwise and sigma:  # σ of each bucket's count-1 values are fake: there must be room for them
            room = (ones & ~excluded).sum(axis=1)
            rep.check(bool((room >= sigma).all()), f"every bucket lists ≥ σ = {sigma} values that may be fake",
                      f"{int((room < sigma).sum())} bucket(s) list fewer than σ = {sigma} count-1 values that the "
                      "publication rule allows as fakes")
        if fake is not None:
            rep.facts["fake_values"] = "checked against the custodian file"
            real = np.where(fake, 0, obs)
            n_fake = fake.sum(axis=1)
            rep.check(bool((obs[fake] == 1).all()), "custodian-listed fake values are listed once in ST",
                      f"{int((obs[fake] != 1).sum())} custodian-listed fake value(s) are not count-1 ST entries")
            rep.check(bool((n_fake == sigma).all()), f"every bucket has exactly σ = {sigma} fake values",
                      f"{int((n_fake != sigma).sum())} bucket(s) do not have exactly {sigma} fake values")
            rep.check(np.array_equal(real.sum(axis=1), sizes), "QIT bucket sizes = ST real counts per bucket",
                      f"{int((real.sum(axis=1) != sizes).sum())} bucket(s) have QIT size ≠ ST real count")
            rep.check(not (fake & excluded).any(), "every fake value is one a real record could hold (thresholds, "
                      "negative associations)",
                      f"{int((fake & excluded).sum())} fake value(s) break the publication rule (a real record could not "
                      "hold them under the thresholds, or a negative association forbids them)")
        elif sigma and not rowwise:
            rep.facts["fake_values"] = (f"σ = {sigma} per bucket, unidentified (no custodian file given; "
                                        "the real counts are bounded, not known)")
        # recompute the descriptive statistics
        # recompute the descriptive statistics
        stats = bucket_statistics(sizes, n)
        for key in ("loss", "n_buckets"):
            rep.check(int(cert[key]) == stats[key], f"certificate {key} recomputed",
                      f"certificate {key} = {cert[key]}, recomputed {stats[key]}")
        rep.check(abs(float(cert["mse"]) - stats["mse"]) <= 1e-9 * max(1.0, stats["mse"]), "certificate mse recomputed",
                  f"certificate mse = {cert['mse']}, recomputed {stats['mse']}")
        rep.check({str(k): int(v) for k, v in cert["bucket_sizes"].items()} == stats["bucket_sizes"],
                  "certificate bucket_sizes recomputed", f"certificate bucket_sizes {cert['bucket_sizes']} ≠ recomputed {stats['bucket_sizes']}")
        rep.facts.update(n_buckets=stats["n_buckets"], loss=stats["loss"], mse=round(stats["mse"], 6),
                         bucket_sizes=stats["bucket_sizes"])
        if isinstance(learning, dict) and learning.get("enabled"):
            self._verify_learned(rep, learning, cert.get("negative_associations_learned") or [])
        if table is not None:
            self._verify_source(rep, table)
        # the model part: the typed claim re-derives itself from params, the files and the source
        # (to move into Release.verify once every family writes a typed claim)
        claim_of(self.manifest).check(self, rep, table)

    def _verify_learned(self, rep: VerifyReport, learning: Mapping[str, Any], learned: Sequence[Sequence[str]]) -> None:
        """The learned negative associations re-derived: learned again, as the writer did, from
        the QIT and the buckets' real counts (:meth:`real_bucket_types`) with the certificate's
        thresholds, they must be the certificate's list. Without the real counts (σ > 0 and no
        custodian file) the list is stated as not re-derived."""
        rt = self.real_bucket_types()
        if rt is None:
            rep.facts["negative_associations_learned"] = (
                f"{len(learned)} listed, not re-derived (the fakes are not identified: give the custodian file)")
            return
        types, type_of = rt
        qi_codes = self.lazy_codes("qit", self.quasi)  # a column decoded when the learning reaches it
        again = learn_negative_associations(self.buckets()["qb"], types, qi_codes, self.domains, self.domains[self.sa],
                                            int(learning["support"]), float(learning["confidence"]),
                                            float(learning["expected"]), bucket_type=type_of)
        want = [[a["column"], a["value"], a["sa_value"]] for a in again]
        have = [[str(x) for x in a] for a in learned]
        missing = [a for a in want if a not in have]
        extra = [a for a in have if a not in want]
        rep.check(not missing and not extra, "learned negative associations re-derived from the buckets' real counts",
                  f"the certificate's learned negative associations differ from those learned again from the buckets' "
                  f"real counts: {len(missing)} missing (e.g. {missing[:1]}), {len(extra)} not learned (e.g. {extra[:1]})")
        rep.facts["negative_associations_learned"] = f"{len(learned)} listed, re-derived"

    def _verify_fakes_rowwise(self, rep: VerifyReport, sigma: int) -> None:
        """The fake-value checks of :meth:`_verify` (room for σ fakes per bucket, over ranges of
        buckets; with the custodian file: each listed fake a count-1 ST entry, exactly σ per
        bucket, QIT sizes = real counts, every fake one a real record could hold, from the ST
        rows a block at a time and the custodian file's (bucket, value) pairs) — O(ST rows +
        fakes) memory."""
        b = self.buckets()
        sb, cnt, nb, sizes = b["sb"], b["count"], b["n_buckets"], b["sizes"]
        if sigma:  # over ranges of buckets (repeated ST pairs add up, as in the matrix)
            short, lo = 0, 0
            for obs, size in self.bucket_ranges()():
                short += int((((obs == 1) & ~self.range_excluded(size, lo)).sum(axis=1) < sigma).sum())
                lo += len(size)
            rep.check(not short, f"every bucket lists ≥ σ = {sigma} values that may be fake",
                      f"{short} bucket(s) list fewer than σ = {sigma} count-1 values that the "
                      "publication rule allows as fakes")
        if not self.custodian or self.custodian.get("fake") is None:
            if sigma:
                rep.facts["fake_values"] = (f"σ = {sigma} per bucket, unidentified (no custodian file given; "
                                            "the real counts are bounded, not known)")
            return
        pos, codes = self.custodian_fake_cells()
        assert pos is not None and codes is not None
        fr = self.custodian_fake_rows()
        assert fr is not None
        rep.facts["fake_values"] = "checked against the custodian file"
        listed_once = 0
        real = np.zeros(nb, dtype=np.int64)
        for a in range(0, len(sb), ROW_BLOCK):
            f, k = fr[a:a + ROW_BLOCK], cnt[a:a + ROW_BLOCK]
            listed_once += int((f & (k == 1)).sum())
            real += blocked_bincount(sb[a:a + ROW_BLOCK], nb, weights=np.where(f, 0, k)).astype(np.int64)
        rep.check(listed_once == len(pos), "custodian-listed fake values are listed once in ST",
                  f"{len(pos) - listed_once} custodian-listed fake value(s) are not count-1 ST entries")
        n_fake = np.bincount(pos, minlength=nb)
        rep.check(bool((n_fake == sigma).all()), f"every bucket has exactly σ = {sigma} fake values",
                  f"{int((n_fake != sigma).sum())} bucket(s) do not have exactly {sigma} fake values")
        rep.check(np.array_equal(real, sizes), "QIT bucket sizes = ST real counts per bucket",
                  f"{int((real != sizes).sum())} bucket(s) have QIT size ≠ ST real count")
        bad = int(self.cell_excluded(pos, codes).sum())
        rep.check(not bad, "every fake value is one a real record could hold (thresholds, negative associations)",
                  f"{bad} fake value(s) break the publication rule (a real record could not hold them under the "
                  "thresholds, or a negative association forbids them)")

    def _verify_layout(self, rep: VerifyReport) -> None:
        """Only the files and columns the format defines: qit = QI columns + bid, st = bid, SA,
        count. A ``fake`` column would publish which values are fake; any other file or column
        (a row id, the source table …) is not part of a release."""
        extra_files = sorted(set(self.tables) - set(FILES))
        rep.check(not extra_files, "only qit.parquet and st.parquet",
                  f"the release holds file(s) the format does not define: {', '.join(f + '.parquet' for f in extra_files)}")
        want = {"qit": [*self.quasi, *QIT_COLUMNS], "st": [ST_COLUMNS[0], self.sa, *ST_COLUMNS[1:]]}
        for name, cols in want.items():
            if name not in self.tables:
                continue
            have = self.tables[name].column_names
            extra = [c for c in have if c not in cols]
            if "fake" in extra and name == "st":
                rep.check(False, "st.parquet does not say which values are fake",
                          "st.parquet publishes which values are fake (a 'fake' column); the custodian file keeps that")
                extra.remove("fake")
            rep.check(not extra, f"{name}.parquet has only the format's columns",
                      f"{name}.parquet has column(s) the format does not define: {extra}")
            rep.check(len(set(have)) == len(have), f"{name}.parquet has no repeated column",
                      f"{name}.parquet repeats a column")
        for name, col in (("qit", "bid"), ("st", "bid"), ("st", "count")):
            t = self.tables.get(name)
            if t is not None and col in t.column_names:
                typ = t.schema.field(col).type
                rep.check(pa.types.is_integer(typ), f"{name}.{col} is an integer column",
                          f"{name}.parquet column {col!r} has type {typ}, not an integer type")

    def _verify_source(self, rep: VerifyReport, table) -> None:
        """Every input row exactly once: QI multiset of the QIT = the table's; SA counts equal."""
        sa = self.sa
        cols = self.quasi
        for c in cols + [sa]:
            if c not in table.column_names:
                rep.check(False, "source table has the release's columns", f"the source table lacks column {c!r}")
                return
            if list(table.domain(c)) != list(self.domains[c]):
                rep.check(False, f"source domain of {c!r} matches", f"the source table's domain of {c!r} differs from the release's")
                return
        if cols:
            dims = [len(self.domains[c]) for c in cols]
            n_q, n_t = len(self._table("qit", cols)), table.n_rows
            if n_q != n_t:
                same = False
            elif float(np.prod(np.asarray(dims, dtype=float))) < 2.0**63:  # each side's sorted cells with their counts
                runs_t = cell_runs(([table.codes(c)[a:a + CELL_BLOCK] for c in cols] for a in range(0, n_t, CELL_BLOCK)),
                                   dims, n_t)
                runs_q = cell_runs(([(lambda c=c, a=a: self.code_block("qit", [c], a, CELL_BLOCK)[0]) for c in cols]
                                    for a in range(0, n_q, CELL_BLOCK)), dims, n_q) if runs_t is not None else None
                same = runs_t is not None and runs_q is not None and all(np.array_equal(x, y) for x, y in zip(runs_t, runs_q))
                del runs_t, runs_q
            else:
                same = same_rows([(lambda c=c: self.narrow_codes("qit", c)) for c in cols], [table.codes(c) for c in cols], dims)
            rep.check(same,
                      "QIT rows = the source table's QI rows (as a multiset)",
                      "the QIT's QI rows differ from the source table's (some input row is missing or duplicated)")
        src_counts = table.counts(sa)
        real_tot = self.real_totals_from_files()
        if real_tot is not None:
            rep.check(np.array_equal(real_tot, src_counts), "ST real SA counts = the source table's",
                      "the ST's real SA counts differ from the source table's")
        else:  # fakes unidentifiable: published counts cover the table's, with exactly σ per bucket extra
            b = self.buckets()  # the listed totals per value, from the ST rows (no n_buckets × m matrix)
            obs_tot = blocked_bincount(b["sc"], b["m"], weights=b["count"]).astype(np.int64)
            extra = self.fake_values * int(self.buckets()["n_buckets"])
            rep.check(bool((obs_tot >= src_counts).all()) and int(obs_tot.sum() - src_counts.sum()) == extra,
                      "ST SA counts = the source table's plus σ fakes per bucket",
                      "the ST's SA counts do not cover the source table's plus σ fakes per bucket")


__all__ = ["BucketizedRelease", "streamed_disclosure", "streamed_inference", "bucket_statistics", "cell_runs", "dense_ids", "st_values_distinct", "typed_disclosure", "types_disclosure", "same_rows", "sparse_disclosure", "bucket_blocks", "negative_association_mask", "association_patterns", "ForbiddenFakes", "fake_candidates", "receiver_posterior",
           "bucket_disclosure", "revealed_absent", "fake_inference"]

"""Estimators of the bucketized family (F'-privacy, Anatomy).

Anatomy's estimator (Xiao & Tao 2006): est(P ∧ S) = Σ_g n_g(P)·ĉ_g(S)/|g|, with n_g(P) the
QIT rows of g meeting the QI predicate and ĉ_g(S) the ST count of g on the SA predicate,
corrected for fake values without using the fake flag (Wang et al. 2011, §6; see
:func:`correct_counts`). Its interval (``Release.estimate``) is the release's certain bounds
(:mod:`~ppdp.estimators.bucket_bounds`, ``kind="certain"``); the interval of the uniform
within-bucket assignment model is :meth:`AnatomyEstimator.uniform_assignment_estimate`. Evaluation: every term of the estimate and of its variance
(:class:`AnatomyEstimator`) is Σ_g n_g(P)·f(g, S), f a function of the bucket's published
weights and the SA predicate; buckets with equal size, ST counts and fake rule are one
*type* (:func:`bucket_types`; a F'-privacy or Anatomy plan has few), so each term is
Σ_t n_t(P)·f(t, S): one :class:`~ppdp.queries.CountIndex` of QIT rows keyed by their bucket's
type gives n_t(P) for all queries and groups, and f(t, S) is a (queries × types) matrix
product. Releases with more than :data:`MAX_TYPES` types use per-row weights
w[row, x] = ĉ_{g(row)}(x)/|g(row)| and per-pair variance keys instead
(:func:`anatomy_index`, ``AnatomyEstimator.estimate_by_rows``), the same numbers.

Fake-value correction. A receiver sees, per bucket, the observed counts c^obs_g(x) (real
counts plus one per fake) but not which values are fake. Let E_g be the values eligible as
fakes (not real in g, holdable by a real record of g under the published thresholds —
1/|g| ≤ f'_x — and not forbidden by a published negative association: the publication rule
of :func:`~ppdp.releases.bucketized.fake_candidates`) and D_g = E_g minus
the fakes: the eligible values that do *not* appear in g — computable from the release —
with |E_g| = |D_g| + σ. With p = σ/|E_g|, each x ∈ E_g is a fake with probability p, so for a
value set S, F̂_g(S) = σ·|S ∩ D_g|/|D_g| has E[F̂_g(S)] = p·|S ∩ E_g| = E[F_g(S)]. Hence
ĉ_g(x) = c^obs_g(x) − σ·[x ∈ D_g]/|D_g| is unbiased for the real count (over the draw of the
fakes), and Σ_x ĉ_g(x) = |g|. Unseen values get a small negative weight: the price of
unbiasedness without the fake flag. When D_g is empty (σ = |E_g|) the fakes cannot be told
apart from real count-1 values by any rule; the correction then spreads σ evenly over the
bucket's count-1 values (biased in that corner; :func:`correct_counts` counts such buckets).
"""

from __future__ import annotations

import weakref
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
from scipy import sparse

from ..claims import claim_of
from ..queries import CountIndex, split_masks
from ..queries.engine import LazyColumns
from ..releases.bucketized import fake_candidates, revealed_absent
from .base import Estimates, Estimator
from .bucket_bounds import BoundProfiles, BucketOrder, bound_reducer


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


def _ragged(lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For items with ``lengths``: (item of each expanded slot, position within its item)."""
    lengths = np.asarray(lengths, dtype=np.int64)
    item = np.repeat(np.arange(len(lengths)), lengths)
    offsets = np.cumsum(lengths) - lengths
    return item, np.arange(int(lengths.sum()), dtype=np.int64) - offsets[item]


def bucket_entries(release) -> dict:
    """The per-bucket SA weights the estimator reads, sparse over (bucket, SA value) entries:
    ``bucket``, ``value``, ``p`` = ĉ_g(x)/|g| (the corrected share, module doc) and, with fakes,
    ``u`` = [x ∈ D_g]/|D_g| and ``c`` = σ·E_g²/(|D_g|·(E_g − 1)·|g|) per entry's bucket (the
    fake-draw variance, :class:`AnatomyEstimator`); entries sorted by bucket."""
    b = release.buckets()
    nb, m = b["n_buckets"], b["m"]
    sizes = np.maximum(b["sizes"], 1).astype(np.float64)
    sigma = release.fake_values
    if sigma == 0:
        order = np.argsort(b["sb"], kind="stable")
        g, x = b["sb"][order], b["sc"][order]
        p = b["count"][order] / sizes[g]
        return {"bucket": g, "value": x, "p": p, "u": None, "c": None, "n_buckets": nb, "m": m}
    excluded = release.fake_excluded()
    obs = release.observed_counts()
    p_dense, u, c = bucket_profiles(obs, b["sizes"], sigma, excluded)
    g, x = np.nonzero((p_dense != 0) | (u != 0))
    return {"bucket": g, "value": x, "p": p_dense[g, x], "u": u[g, x], "c": c[g], "n_buckets": nb, "m": m}


def bucket_profiles(obs: np.ndarray, sizes: np.ndarray, sigma: int, excluded: np.ndarray | None):
    """Dense per-bucket (or per-bucket-type) weights of :class:`AnatomyEstimator` from the
    observed ST counts ``obs`` (k × m), the sizes |g| and, with fakes, the values the
    publication rule excludes as fakes: ``(p, u, c)`` — p = ĉ_g(x)/|g| (k × m), and with
    σ > 0 u = [x ∈ D_g]/|D_g| (k × m) and c = σ·E_g²/(|D_g|·(E_g − 1)·|g|) (k,), the
    fake-draw variance factor (saturated buckets: module doc); u, c None when σ = 0."""
    obs = np.asarray(obs)
    sizes = np.maximum(np.asarray(sizes), 1).astype(np.float64)
    if sigma == 0:
        return obs / sizes[:, None], None, None
    nb = obs.shape[0]
    if excluded is None:
        excluded = np.zeros(obs.shape, dtype=bool)
    chat, _ = correct_counts(obs, sigma, excluded)
    unseen = (obs == 0) & ~excluded
    n_unseen = unseen.sum(axis=1).astype(np.float64)
    u = np.divide(unseen, n_unseen[:, None], out=np.zeros(unseen.shape), where=n_unseen[:, None] > 0)
    big_e = n_unseen + sigma
    c = np.divide(sigma * big_e ** 2, n_unseen * np.maximum(big_e - 1, 1) * sizes,
                  out=np.zeros(nb), where=n_unseen > 0)
    # saturated buckets (D_g empty): the fakes are σ of the U_g count-1 values, the receiver
    # cannot tell which; with the real ones an exchangeable r_g-subset (r_g = U_g − σ), the
    # count of S among them is hypergeometric: variance σ·r_g/(U_g − 1)·q(1 − q), q = |S ∩ ones|/U_g
    sat = n_unseen == 0
    if sat.any():
        ones = obs[sat] == 1
        n_ones = ones.sum(axis=1).astype(np.float64)
        u[sat] = np.divide(ones, n_ones[:, None], out=np.zeros(ones.shape), where=n_ones[:, None] > 0)
        c[sat] = np.divide(sigma * (n_ones - sigma), np.maximum(n_ones - 1, 1) * sizes[sat],
                           out=np.zeros(len(n_ones)), where=n_ones > sigma)
    return chat / sizes[:, None], u, c


#: releases whose buckets fall into more SA-profile types than this are answered per row
#: (:func:`anatomy_index`); below it, per type (:func:`bucket_types`)
MAX_TYPES = (1 << 15) - 1  # (type ids stay int16)


def bucket_types(release) -> dict | None:
    """Buckets grouped into *types*: buckets with the same size, the same observed ST counts
    and (with fakes) the same values excluded as fakes have the same weights p, u, c
    (:func:`bucket_profiles`) — every term of :class:`AnatomyEstimator` is a sum over buckets
    of n_g(P) times a function of g's weights and S, so it is the same sum over types of
    n_t(P) = the QIT rows meeting P in buckets of type t. Returns ``type`` (per bucket),
    ``row_type`` (per QIT row, narrow int), the per-type ``p``, ``u``, ``c`` (T × m, T × m,
    T), ``multi`` ([|g| > 1] per type), ``n_types`` and the types' ``obs`` (observed counts,
    T × m), ``sizes`` and ``excluded`` (values excluded as fakes, T × m, None when σ = 0);
    None when there are more than
    :data:`MAX_TYPES` types or the ST rows are not one positive count per (bucket, value).

    The types come from a random linear signature of each bucket's counts (one bincount) and
    are then checked exactly against one representative bucket per type, so two different
    profiles never share a type (a signature collision gives None, the per-row path)."""
    cache = _INDEX.setdefault(release, {})
    if "types" in cache:
        return cache["types"]
    cache["types"] = out = _bucket_types(release)
    return out


def bucket_rows(release) -> dict:
    """The decoded buckets the per-type path reads: ``sizes``, ``n_rows`` (QIT rows),
    ``n_buckets``, ``m``, the ST rows' SA codes ``sc`` and ``count``, and ``st_block(r0, r1)``:
    (sc, count) of ST rows r0 … r1 − 1; dense bucket order = sorted published ids, as
    ``release.buckets()``. When both files list their rows grouped by sorted bucket id and
    name the same buckets (the writer's layout), read from the ``bid`` columns a chunk at a
    time, with ``n_ent`` (ST rows per bucket, in order): then no per-row array is kept — ``qb``,
    ``sb``, ``sc`` and ``count`` are decoded only when asked for (the per-type path reads the
    ST a block at a time through ``st_block``). Else ``release.buckets()``."""
    cache = _INDEX.setdefault(release, {})
    if "rows" in cache:
        return cache["rows"]
    qit, st = release.tables.get("qit"), release.tables.get("st")
    out: Any = None
    if (qit is not None and st is not None and "bid" in qit.column_names and "bid" in st.column_names
            and "count" in st.column_names and release.sa in st.column_names and "fake" not in st.column_names
            and qit.num_rows and st.num_rows and callable(getattr(release, "code_block", None))):
        q = _sorted_runs(qit.column("bid"))
        s = _sorted_runs(st.column("bid")) if q is not None else None
        if q is not None and s is not None and len(q[0]) == len(s[0]) and _same_ids(q[1], s[1]):
            n, n_st = qit.num_rows, st.num_rows
            sizes, n_ent = _run_lengths(q[0], n), _run_lengths(s[0], n_st)
            del q, s
            out = _Rows(sizes=sizes, n_rows=n, n_ent=n_ent, n_st=n_st, n_buckets=len(sizes),
                        m=len(release.domains[release.sa]), st_block=_st_reader(release))
    if out is None:
        out = dict(release.buckets())
        out["n_rows"] = len(out["qb"])
        sc, cnt = out["sc"], out["count"]
        out["st_block"] = lambda r0, r1: (sc[r0:r1], cnt[r0:r1])
    cache["rows"] = out
    return out


def _st_reader(release):
    """(SA codes, counts) of ST rows r0 … r1 − 1, decoded from the Arrow columns."""
    st = release.tables["st"]
    count = st.column("count")
    ref = weakref.ref(release)  # held in the release's (weakly keyed) cache: no strong reference

    def block(r0: int, r1: int):
        rel = ref()
        assert rel is not None
        sc = rel.code_block("st", [rel.sa], r0, r1 - r0)[0]
        parts = [c.to_numpy(zero_copy_only=False) for c in count.slice(r0, r1 - r0).chunks]
        return sc, (parts[0] if len(parts) == 1 else np.concatenate(parts))
    return block


class _Rows(dict):
    """:func:`bucket_rows` of the writer's layout: the per-row arrays — bucket indices ``qb``
    (QIT) and ``sb`` (ST), the ST's ``sc`` and ``count`` — are built only when asked for (the
    per-type path never reads them whole)."""

    def __missing__(self, key):
        if key in ("qb", "sb"):
            lengths = self["sizes"] if key == "qb" else self["n_ent"]
            total = self["n_rows"] if key == "qb" else self["n_st"]
            return np.repeat(np.arange(self["n_buckets"], dtype=np.int32 if total < 2 ** 31 else np.int64), lengths)
        if key in ("sc", "count"):
            return self["st_block"](0, self["n_st"])[0 if key == "sc" else 1]
        raise KeyError(key)


#: rows (QIT or ST) handled at once by the chunked passes of the per-type path
_ROW_BLOCK = 1 << 21


def _sorted_runs(col) -> tuple[np.ndarray, np.ndarray | None] | None:
    """An integer id column read a chunk at a time: None unless its ids are non-decreasing;
    else (first row of each run of equal ids — int32 below 2^31 rows —, the run ids, or None
    when the runs are 0, 1, 2, … — the writer's dense ids — so no id array is kept)."""
    chunks = col.chunks if isinstance(col, pa.ChunkedArray) else [col]
    n = sum(len(c) for c in chunks)
    pos_t = np.int32 if n < 2 ** 31 else np.int64
    starts: list[np.ndarray] = []
    ids: list[np.ndarray] = []
    dense = True
    n_runs = 0
    prev = None
    pos = 0
    for ch in chunks:
        arr = ch.to_numpy(zero_copy_only=False) if isinstance(ch, pa.Array) else np.asarray(ch)
        if not np.issubdtype(arr.dtype, np.integer):
            return None
        for a in range(0, len(arr), _ROW_BLOCK):
            x = arr[a:a + _ROW_BLOCK]
            if not len(x):
                continue
            if prev is not None and x[0] < prev:
                return None
            if (x[1:] < x[:-1]).any():
                return None
            new = np.flatnonzero(x[1:] != x[:-1]) + 1
            if prev is None or x[0] != prev:
                new = np.concatenate([[0], new])
            first = x[new]
            if dense and not np.array_equal(first, np.arange(n_runs, n_runs + len(first))):
                dense = False
                ids = [np.arange(n_runs, dtype=np.int64)]
            if not dense:
                ids.append(first.astype(np.int64))
            starts.append((new + (pos + a)).astype(pos_t))
            n_runs += len(new)
            prev = x[-1]
        pos += len(arr)
    if not starts:
        return None
    return np.concatenate(starts), (None if dense else np.concatenate(ids))


def _run_lengths(starts: np.ndarray, n: int) -> np.ndarray:
    """Lengths of the runs starting at ``starts`` in ``n`` rows (the starts' integer type)."""
    out = np.empty(len(starts), dtype=starts.dtype)
    np.subtract(starts[1:], starts[:-1], out=out[:-1])
    out[-1] = n - starts[-1]
    return out


def _same_ids(a: np.ndarray | None, b: np.ndarray | None) -> bool:
    """Two run-id sequences of :func:`_sorted_runs` (of the same length) are equal."""
    if a is None or b is None:
        return a is None and b is None
    return bool(np.array_equal(a, b))


def excluded_fakes(release, sizes: np.ndarray) -> np.ndarray:
    """``release.fake_excluded()`` for buckets of the given sizes, but for the negative
    associations (the rest of the publication rule depends on |g| alone): values no real
    record of a bucket of that size could hold, and values the claim reveals absent."""
    excluded = ~fake_candidates(sizes, release.thresholds(), None)
    absent = revealed_absent(claim_of(release.manifest), release.domains[release.sa],
                             int(release.manifest.get("n_published", 0)))
    excluded[:, absent] = True
    return excluded


def _bucket_blocks(n_ent: np.ndarray, block: int = _ROW_BLOCK):
    """(first bucket, end bucket, first ST row, end ST row) of consecutive blocks of buckets
    holding about ``block`` ST rows each (the ST rows grouped by bucket, ``n_ent`` per bucket)."""
    nb = len(n_ent)
    ends = np.cumsum(n_ent, dtype=np.int64)
    g0 = 0
    while g0 < nb:
        r0 = int(ends[g0 - 1]) if g0 else 0
        g1 = int(np.searchsorted(ends, r0 + block, side="right"))
        g1 = min(max(g1, g0 + 1), nb)
        yield g0, g1, r0, int(ends[g1 - 1])
        g0 = g1


def _bucket_types(release) -> dict | None:
    b = bucket_rows(release)
    nb, m = b["n_buckets"], b["m"]
    sizes = b["sizes"]
    sigma = release.fake_values
    n_ent = b.get("n_ent")
    read = b["st_block"]
    if n_ent is None:  # release.buckets(): its ST rows grouped by bucket (a stable sort when not)
        sb, sc, cnt = b["sb"], b["sc"], b["count"]
        if (sb[1:] < sb[:-1]).any():
            order = np.argsort(sb, kind="stable")
            sb, sc, cnt = sb[order], sc[order], cnt[order]
        n_ent = np.bincount(sb, minlength=nb)
        del sb

        def read(r0, r1, sc=sc, cnt=cnt):
            return sc[r0:r1], cnt[r0:r1]
    if nb == 0 or len(n_ent) != nb or not n_ent.all():
        return None
    rng = np.random.default_rng(20061101)
    h_val = rng.integers(1, 2 ** 63, size=m, dtype=np.uint64) | np.uint64(1)
    h_size = np.uint64(rng.integers(1, 2 ** 63) | 1)
    h_exc = rng.integers(1, 2 ** 63, size=m, dtype=np.uint64)
    pattern_of = None
    if sigma and release.negative_associations:  # the excluded values depend on each bucket's records
        forbidden = release.forbidden_patterns(b["qb"], nb)  # (the writer's layout: qb without decoding the ST)
        pattern_of = forbidden.of
        h_pattern = forbidden.rows.astype(np.uint64) @ h_exc
    # one pass over the ST, a block of buckets at a time:
    # - one ST row per (bucket, value) — else the exactness check below does not hold: each
    #   bucket's values as a bit set (m ≤ 64), else a sort;
    # - the signature: a random linear hash of (size, counts, excluded values) in wrapping uint64
    #   arithmetic (exact and order-free, so equal profiles get equal signatures), numbered by
    #   first appearance (as one factorization of every bucket's signature would number them);
    # - the exact check: same size, same number of ST rows, each ST row's count equal to its
    #   type's representative's (the type's first bucket: in this block or an earlier one, its
    #   counts recorded when met) count of that value (with one row per (bucket, value), the
    #   counts are then equal).
    narrow = np.int16 if MAX_TYPES < 2 ** 15 else np.int32
    type_of = np.empty(nb, dtype=narrow)
    known = pd.Index(np.zeros(0, dtype=np.uint64))
    pow2 = np.left_shift(np.uint64(1), np.arange(min(m, 64), dtype=np.uint64))
    rep_list: list[int] = []
    rep_obs = np.zeros((min(nb, MAX_TYPES), m), dtype=np.int64)
    flat = rep_obs.ravel()
    idx_t = np.int32 if rep_obs.size < 2 ** 31 else np.int64
    for g0, g1, r0, r1 in _bucket_blocks(n_ent):
        sc, cnt = read(r0, r1)
        if len(cnt) and int(cnt.min()) < 1:
            return None
        ne = n_ent[g0:g1]
        local = np.zeros(g1 - g0, dtype=np.int64)
        np.cumsum(ne[:-1], out=local[1:])
        if m <= 64:
            if not np.array_equal(np.bitwise_count(np.bitwise_or.reduceat(pow2[sc], local)), ne):
                return None
        else:
            key = np.repeat(np.arange(g1 - g0, dtype=np.int64), ne) * m + sc
            if len(np.unique(key)) != len(key):
                return None
            del key
        sig = np.add.reduceat(h_val[sc] * cnt.astype(np.uint64), local)
        sig += sizes[g0:g1].astype(np.uint64) * h_size
        if pattern_of is not None:
            sig += h_pattern[pattern_of[g0:g1]]
        codes, uniq = pd.factorize(sig)
        ids = known.get_indexer(uniq)
        new = np.flatnonzero(ids < 0)
        if len(new):
            if len(known) + len(new) > MAX_TYPES:
                return None
            ids[new] = len(known) + np.arange(len(new))
            known = known.append(pd.Index(uniq[new]))
            # the new types' representatives: their first bucket here (factorize numbers by first appearance)
            first = np.full(len(uniq), -1, dtype=np.int64)
            first[codes[::-1]] = np.arange(len(codes) - 1, -1, -1)
            reps = first[new]
            rep_list.extend((reps + g0).tolist())
            item, k = _ragged(ne[reps])
            rows = local[reps][item] + k
            rep_obs[ids[new][item], sc[rows]] = cnt[rows]
        t = ids[codes].astype(narrow)
        type_of[g0:g1] = t
        rep = np.asarray(rep_list, dtype=np.int64)
        if not (np.array_equal(sizes[rep][t], sizes[g0:g1]) and np.array_equal(n_ent[rep][t], ne)):
            return None
        idx = np.repeat(t.astype(idx_t), ne)
        idx *= m
        idx += sc
        if not np.array_equal(flat[idx], cnt):
            return None
        del idx
    n_types = len(known)
    rep = np.asarray(rep_list, dtype=np.int64)  # one bucket per type: its first
    rep_obs = rep_obs[:n_types]
    excluded = None
    if sigma:  # the rule reads the bucket's size (in its type) and its forbidden pattern
        excluded = excluded_fakes(release, sizes[rep])
        if pattern_of is not None:
            if not np.array_equal(pattern_of, pattern_of[rep[type_of]]):
                return None
            excluded |= forbidden.rows[pattern_of[rep]]
    p, u, c = bucket_profiles(rep_obs, sizes[rep], sigma, excluded)
    if isinstance(b, _Rows):  # the writer's layout: QIT rows grouped by bucket in dense order
        row_type = np.repeat(type_of, sizes)
    else:
        row_type = type_of[b["qb"]]
    return {"type": type_of, "row_type": row_type, "p": p, "u": u, "c": c,
            "multi": (sizes[rep] > 1).astype(np.float64), "n_types": n_types,
            "obs": rep_obs, "sizes": sizes[rep], "excluded": excluded}


def _qit_codes(release, column: str) -> np.ndarray:
    """A QIT column's codes in a narrow integer type (dictionary chunks decoded through their
    dictionary, no int32 copy of the whole column when int16 holds the domain)."""
    narrow_codes = getattr(release, "narrow_codes", None)
    return narrow_codes("qit", column) if narrow_codes is not None else release.codes("qit", column)


def _qit_loader(release):
    """``column → codes`` of the release's QIT for a cached index's lazy columns, holding the
    release weakly (the per-release cache is keyed weakly by the release: a strong reference
    from its values would keep every release and its indexes alive)."""
    ref = weakref.ref(release)

    def load(column: str) -> np.ndarray:
        rel = ref()
        if rel is None:  # pragma: no cover - the index outlived its release
            raise ValueError("the release of this index is gone")
        return _qit_codes(rel, column)
    return load


def qit_key(release, cols: tuple[str, ...]) -> np.ndarray:
    """The QIT rows' combined key over ``cols`` (row-major over their domains, as
    :func:`~ppdp.queries.engine.combine`), built a column at a time in place: the key (int32
    when the product of the domain sizes allows) and one column's narrow codes at a time."""
    dims = [len(release.domains[c]) for c in cols]
    key = None
    for c, d in zip(cols, dims):
        codes = _qit_codes(release, c)
        if key is None:
            key = np.array(codes, dtype=np.int32 if float(np.prod(dims, dtype=float)) < 2 ** 31 else np.int64)
        else:
            np.multiply(key, d, out=key, casting="unsafe")
            np.add(key, codes, out=key, casting="unsafe")
        del codes
    assert key is not None
    return key


#: queries per block of the per-type variance terms (their queries × types products)
_TERM_ROWS = 256

# per release object (a release's files do not change once loaded): its entries and indexes
_INDEX: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _built_index(release, name: str, cols: tuple[str, ...]):
    """The release's cached count indexes of kind ``name`` (column tuple → index), and the
    smallest one over a superset of ``cols`` (its groupings derive the smaller ones), or None."""
    built = _INDEX.setdefault(release, {}).setdefault(name, {})
    fits = [ix for c, ix in built.items() if set(cols) <= set(c)]
    return built, (min(fits, key=lambda ix: len(ix.columns)) if fits else None)


#: largest (combinations × keys) of one variance index over every QI column; beyond it the
#: variance index is built per set of constrained columns
_MAX_INDEX_CELLS = 60_000_000
#: releases of more records build the variance index per set of constrained columns
_MAX_ROWS_ONE_INDEX = 500_000


def _tri(m: int) -> tuple[np.ndarray, np.ndarray]:
    """The pairs (x ≤ x') of an m-value domain, in a fixed order."""
    return np.triu_indices(m)


def anatomy_index(release, variance: bool = False, columns=None, pairs: np.ndarray | None = None) -> CountIndex:
    """Per-QI-combination weights of a bucketized release (rows of a bucket expanded over the
    bucket's entries without a loop), over ``columns`` (default: every QI column). Without
    ``variance``: Σ_rows ĉ_g(x)/|g| (m keys, the estimate). With it, 3m + 2·m(m+1)/2 keys: the
    estimate's weights; the linear parts of the variance, Σ_rows p_g(x)·[|g| > 1]
    (assignment) and Σ_rows c_g·u_g(x) (fakes); and the quadratic parts
    Σ_rows p_g(x)p_g(x')·[|g| > 1] and Σ_rows c_g·u_g(x)u_g(x') for x ≤ x'
    (:class:`AnatomyEstimator`); ``pairs`` (indices into :func:`_tri`'s pairs, default all)
    keeps only those pairs' quadratic keys — a workload whose SA predicates never hold two
    values x, x' together needs no key for (x, x')."""
    cache = _INDEX.setdefault(release, {})
    e = cache.get("entries")
    if e is None:
        e = cache["entries"] = bucket_entries(release)
    b = release.buckets()
    nb = e["n_buckets"]
    domains = release.domains
    quasi = list(release.quasi if columns is None else columns)
    n = len(b["qb"])
    if quasi:
        dims = [len(domains[c]) for c in quasi]
        prod = float(np.prod(dims, dtype=np.float64))
        if prod < 2 ** 62:  # the rows' combined key a column at a time (no int64 codes per column kept)
            qkey = qit_key(release, tuple(quasi))
        else:  # pragma: no cover - astronomically large domains
            qkey = np.ravel_multi_index([release.codes("qit", c).astype(np.int64) for c in quasi], dims)
        if prod <= max(4 * n, 1 << 20):  # dense: count the present combinations
            present = np.zeros(int(prod), dtype=np.int64)
            present[qkey] = 1
            uniq = np.flatnonzero(present)
            inv = (np.cumsum(present) - 1)[qkey]
        else:
            uniq, inv = np.unique(qkey, return_inverse=True)
        combo = dict(zip(quasi, np.unravel_index(uniq, dims)))
    else:
        uniq, inv, combo = np.zeros(1, dtype=np.int64), np.zeros(n, dtype=np.int64), {}
    inv = inv.ravel().astype(np.int64)
    n_c = len(uniq)
    if n > 2_000_000:  # large: every row is its own item (a sort of the items costs more than it saves)
        ig, ic, mult = b["qb"].astype(np.int64), inv, np.ones(n, dtype=np.int64)
    else:  # distinct (bucket, combination) items with their multiplicity
        items, mult = np.unique(b["qb"].astype(np.int64) * n_c + inv, return_counts=True)
        ig, ic = np.divmod(items, n_c)
    # items → buckets (n_c × nb), times per-bucket weights (nb × keys, sparse; built once per release)
    A = sparse.csr_matrix((mult.astype(np.float64), (ic, ig)), shape=(n_c, nb))
    per_bucket = _bucket_weights(release, e, b["sizes"], variance, pairs)
    # in blocks of keys: the sparse product's result is as large as W itself, so bound the peak
    W = np.empty((n_c, per_bucket.shape[1]))
    pb = per_bucket.tocsc()
    for k0 in range(0, pb.shape[1], 16):
        W[:, k0:k0 + 16] = (A @ pb[:, k0:k0 + 16]).toarray()
    return CountIndex(combo, {c: len(domains[c]) for c in quasi}, W)


#: ordered entry pairs enumerated at once when building the quadratic keys (bounds memory)
_PAIR_CHUNK = 4_000_000


def _entry_pairs(g: np.ndarray, x: np.ndarray, nb: int, wanted: np.ndarray):
    """Pairs (e1, e2) of entries of the same bucket with x[e1] ≤ x[e2] and ``wanted``
    (m × m) at (x[e1], x[e2]); entries sorted by bucket. Enumerated over chunks of buckets so
    memory stays bounded by :data:`_PAIR_CHUNK` ordered pairs, not Σ_g entries_g²."""
    n_ent = np.bincount(g, minlength=nb).astype(np.int64)
    start = np.cumsum(n_ent) - n_ent
    sq = n_ent ** 2
    cum = np.cumsum(sq)
    out1, out2 = [], []
    lo = 0
    while lo < nb:
        base = cum[lo - 1] if lo else 0
        hi = int(np.searchsorted(cum, base + _PAIR_CHUNK, side="right"))
        hi = min(max(hi, lo + 1), nb)
        gb, k2 = _ragged(sq[lo:hi])  # every ordered pair of these buckets' entries
        gb += lo
        a, bb = np.divmod(k2, n_ent[gb])
        e1, e2 = start[gb] + a, start[gb] + bb
        keep = wanted[x[e1], x[e2]]
        out1.append(e1[keep])
        out2.append(e2[keep])
        lo = hi
    if not out1:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    return np.concatenate(out1), np.concatenate(out2)


def _bucket_weights(release, e: dict, sizes: np.ndarray, variance: bool,
                    pairs: np.ndarray | None = None) -> "sparse.csr_matrix":
    """Per-bucket weights (nb × keys, sparse), the keys of :func:`anatomy_index`; cached."""
    cache = _INDEX.setdefault(release, {})
    key = ("bucket_weights", variance, None if pairs is None or not variance else pairs.tobytes())
    if key in cache:
        return cache[key]
    nb, m = e["n_buckets"], e["m"]
    g, x, p = e["bucket"], e["value"], e["p"]
    blocks = [sparse.csr_matrix((p, (g, x)), shape=(nb, m))]
    if variance:
        has_fake = e["u"] is not None
        multi = (sizes[g] > 1).astype(np.float64)  # a bucket of one record has no assignment to draw
        blocks.append(sparse.csr_matrix((p * multi, (g, x)), shape=(nb, m)))
        if has_fake:
            blocks.append(sparse.csr_matrix((e["c"] * e["u"], (g, x)), shape=(nb, m)))
        ti, tj = _tri(m)
        if pairs is None:
            pairs = np.arange(len(ti))
        pair_id = np.full((m, m), -1, dtype=np.int64)
        pair_id[ti[pairs], tj[pairs]] = np.arange(len(pairs))
        n_pairs = len(pairs)
        if np.array_equal(ti[pairs], tj[pairs]):  # only x = x': each needed entry with itself
            e1 = e2 = np.flatnonzero(pair_id[x, x] >= 0)
        else:
            e1, e2 = _entry_pairs(g, x, nb, pair_id >= 0)
        gb, col = g[e1], pair_id[x[e1], x[e2]]
        blocks.append(sparse.csr_matrix((p[e1] * p[e2] * multi[e1], (gb, col)), shape=(nb, n_pairs)))
        if has_fake:
            blocks.append(sparse.csr_matrix((e["c"][e1] * e["u"][e1] * e["u"][e2], (gb, col)), shape=(nb, n_pairs)))
    out = sparse.hstack(blocks, format="csr")
    cache[key] = out
    return out


class AnatomyEstimator(Estimator):
    """Anatomy's estimator Σ_g n_g(P)·ĉ_g(S)/|g| with the fake-value correction (module doc).

    Interval (:meth:`estimate`): the certain bounds (:mod:`~ppdp.estimators.bucket_bounds`).
    Model-based uncertainty (:meth:`uniform_assignment_estimate`, closed form). The files fix each bucket's QI rows and SA
    multiset but not which record holds which value. Model: given the buckets, each record of
    bucket g holds a value of S independently with probability p_g(S) = ĉ_g(S)/|g| (Anatomy's
    uniform-assignment assumption, Xiao & Tao 2006, drawn with replacement). Then the count of
    P ∧ S is a sum of independent Bernoulli terms over the rows meeting P, with mean the
    estimate and variance Σ_rows∈P p_g(S)(1 − p_g(S)). Drawing the assignment *without*
    replacement (a random permutation of the bucket's values, which keeps the release exactly
    as published) gives the hypergeometric variance, smaller by the factor
    (|g| − n_g(P))/(|g| − 1) per bucket; that factor needs n_g(P)², which is not linear in the
    rows, so it is replaced by 1 − π_P, π_P the share of all records meeting P (its value when
    the other records of a bucket meet P at the overall rate; exact for P = all records,
    where the count of S is known and se = 0); a bucket of one record has no assignment to draw.
    Fakes, in a bucket with unseen eligible values (D_g non-empty): see below. In a
    *saturated* bucket (D_g empty: the fakes are all of E_g, fixed by the table) the receiver
    cannot tell which σ of its U_g count-1 values are fake; taking the real ones as an
    exchangeable subset (the uniform prior of
    :func:`~ppdp.releases.bucketized.receiver_posterior`), the count of S among them is
    hypergeometric with variance σ·(U_g − σ)/(U_g − 1)·q(1 − q), q = |S ∩ ones_g|/U_g. With σ fakes, the correction's error over the writer's draw of the fakes (a
    uniform σ-subset of the eligible values E_g) adds, per bucket, (n_g(P)/|g|)²·σ·k(E−k)/
    ((E−σ)(E−1)) with k = |S ∩ E_g| estimated by |S ∩ D_g|·E/|D_g|; n_g(P)² is bounded by
    n_g(P)·|g| (conservative) to keep it linear in the rows. Buckets are independent; the
    interval is the normal one, estimate ± z·se. Assumption the interval does not cover: a
    QI–SA association inside buckets (the estimator's bias then is not in the se)."""

    name = "anatomy"
    family = "bucketized"

    def _index(self, release, variance: bool = False, columns: tuple[str, ...] | None = None,
               pairs: np.ndarray | None = None) -> CountIndex:
        cache = _INDEX.setdefault(release, {})
        key = (variance, columns, None if pairs is None else pairs.tobytes())
        if key not in cache:
            cache[key] = anatomy_index(release, variance, columns, pairs)
        return cache[key]

    def _variance_sums(self, release, rest, pairs: np.ndarray | None = None) -> np.ndarray:
        """R (queries × keys) of the variance index with the quadratic keys of ``pairs``: one
        index over every QI column when it is small enough, else one per set of constrained
        columns (built once, cached); ``pairs`` None: every pair."""
        m = len(release.domains[release.sa])
        n_lin = 3 * m if release.fake_values else 2 * m
        n_pairs = m * (m + 1) // 2 if pairs is None else len(pairs)
        n_keys = n_lin + n_pairs * (2 if release.fake_values else 1)
        if len(release.buckets()["qb"]) <= _MAX_ROWS_ONE_INDEX:
            base = self._index(release, True, None, pairs)
            if base.n * n_keys <= _MAX_INDEX_CELLS:
                return base.sums(rest)
        out = np.zeros((len(rest), n_keys))
        by_cols: dict[tuple[str, ...], list[int]] = {}
        for i, mk in enumerate(rest):
            by_cols.setdefault(tuple(sorted(mk)), []).append(i)
        # larger column sets first: a set whose superset's index is already built (this call or
        # an earlier one) is answered from it (grouping its combinations), not from the rows again
        cache = _INDEX.setdefault(release, {})
        pkey = None if pairs is None else pairs.tobytes()
        for cols, idx in sorted(by_cols.items(), key=lambda kv: -len(kv[0])):
            index = cache.get((True, cols, pkey))
            if index is None:
                supers = [ix for k, ix in list(cache.items())
                          if isinstance(ix, CountIndex) and isinstance(k, tuple) and len(k) == 3 and k[0] is True
                          and k[2] == pkey and isinstance(k[1], tuple) and set(cols) <= set(k[1])]
                index = min(supers, key=lambda ix: ix.n) if supers else self._index(release, True, cols, pairs)
            out[idx] = index.sums([rest[i] for i in idx])
        return out

    @staticmethod
    def _needed_pairs(sel: np.ndarray, m: int) -> np.ndarray | None:
        """The pairs (x ≤ x', :func:`_tri` order) some query's SA predicate holds together; None
        (every pair, the index shared by all workloads) when most pairs are needed."""
        ti, tj = _tri(m)
        s = sel.astype(np.float64)
        need = (s.T @ s)[ti, tj] > 0
        if need.sum() * 2 >= len(ti) or not need.any():
            return None
        return np.flatnonzero(need)

    def answer(self, release, workload) -> np.ndarray:
        _, masks = release.resolve(workload)
        rest, sel = split_masks(masks, release.sa, len(release.domains[release.sa]))
        types = bucket_types(release)
        if types is not None:
            return self._type_terms(release, types, rest, sel, variance=False)[0]
        return (self._index(release).sums(rest) * sel).sum(axis=1)

    def _type_index(self, release, types: dict, cols: tuple[str, ...]) -> CountIndex:
        """QIT rows counted per (combination of ``cols``, bucket type): an index over a superset
        of the columns already built is reused (its groupings derive the smaller ones). The
        rows' combined key is computed a column at a time (:func:`qit_key`), never holding
        every column's codes at once."""
        built, found = _built_index(release, "type_index", cols)
        if found is not None:
            return found
        sizes = {c: len(release.domains[c]) for c in cols}
        key = qit_key(release, cols) if cols else None
        index = CountIndex(LazyColumns(cols, _qit_loader(release)), sizes, types["row_type"],
                           n_keys=types["n_types"], row_key=key)
        built[cols] = index
        return index

    def _type_terms(self, release, types: dict, rest, sel: np.ndarray, variance: bool = True):
        """The estimate and, with ``variance``, the variance terms of :meth:`estimate` as sums
        over bucket types: (est, lin_a, quad_a, lin_f, quad_f, Σ_rows∈P Σ_x p_g(x)), each
        over queries (:func:`bucket_types`). The index hands over each chunk of queries' type
        counts n_t(P) as it makes them, and only these terms are kept (with thousands of types
        the (queries × types) counts would be a workload's largest array)."""
        cols = tuple(sorted(set().union(*(set(mk) for mk in rest))))
        p, u, c, multi = types["p"], types["u"], types["c"], types["multi"]
        selp = sel.astype(np.float64)
        p_sum = p.sum(axis=1)

        def terms(queries: np.ndarray, N: np.ndarray) -> np.ndarray:
            out = np.zeros((len(queries), 6 if variance else 1))
            # a block of queries at a time: the (queries × types) products stay small (reused memory)
            for a in range(0, len(queries), _TERM_ROWS):
                b = min(len(queries), a + _TERM_ROWS)
                n, s = N[a:b], selp[queries[a:b]]
                sp = s @ p.T  # p_t(S) per query and type
                t = n * sp
                out[a:b, 0] = t.sum(axis=1)
                if not variance:
                    continue
                out[a:b, 1] = t @ multi
                t *= sp
                out[a:b, 2] = t @ multi
                if u is not None:
                    su = s @ u.T
                    t = n * su
                    out[a:b, 3] = t @ c
                    t *= su
                    out[a:b, 4] = t @ c
                out[a:b, 5] = n @ p_sum
            return out

        got = self._type_index(release, types, cols).sums(rest, reduce=terms, width=6 if variance else 1)
        return tuple(got[:, k] for k in range(got.shape[1]))

    def estimate(self, release, workload, level: float = 0.95) -> Estimates:
        """Anatomy's estimate with the release's certain bounds as its interval
        (``kind="certain"``, :mod:`~ppdp.estimators.bucket_bounds`): the count lies in
        [lower, upper] whatever the within-bucket assignment, so ``level`` does not apply.
        The estimate is clipped to the bounds (without fakes it always lies in them). No
        standard error is given (NaN): the model of :meth:`uniform_assignment_estimate` ignores
        the QI–SA association inside buckets, which on real tables makes errors of several of
        its standard errors, and no model of that association is claimed here."""
        _, masks = release.resolve(workload)
        rest, sel = split_masks(masks, release.sa, len(release.domains[release.sa]))
        prof, order = self._bound_profiles(release)
        cols = tuple(sorted(set().union(*(set(mk) for mk in rest)))) if rest else ()
        got = self._bucket_index(release, order, cols).sums(rest, reduce=bound_reducer(sel, prof, order), width=3)
        est, lower, upper = got[:, 0], got[:, 1], got[:, 2]
        dropped = int(release.manifest.get("dropped", 0) or 0)
        upper = upper + dropped
        est = np.clip(est, lower, upper)
        method = ("certain bounds: per bucket, the records meeting the QI and SA predicates lie in "
                  "[max(0, n_g(P) + c_g(S) - |g|), min(n_g(P), c_g(S))], summed over buckets"
                  + (", c_g(S) over every choice of the fake values the release allows" if release.fake_values else "")
                  + (f", plus the {dropped} dropped records on the upper side" if dropped else "")
                  + "; the count lies within them whatever the within-bucket assignment (no level applies); "
                  "estimate: Anatomy's estimator (uniform within-bucket assignment), clipped to the bounds; "
                  "no standard error (the within-bucket QI-SA association is not modelled)")
        nan = np.full(est.shape, np.nan)
        return Estimates(est, nan, lower, upper, method, level, kind="certain")

    def _bound_profiles(self, release) -> tuple[BoundProfiles, BucketOrder]:
        """The buckets' profiles for the bounds (per bucket type when :func:`bucket_types`
        finds them, else one per bucket) and the type-grouped bucket order (cached)."""
        cache = _INDEX.setdefault(release, {})
        if "bounds" not in cache:
            types = bucket_types(release)
            if types is not None:
                prof = BoundProfiles.build(types["obs"], types["sizes"], types["excluded"], types["p"], types["type"])
            else:
                b = release.buckets()
                obs, sizes = release.observed_counts(), b["sizes"]
                excluded = release.fake_excluded() if release.fake_values else None
                p, _, _ = bucket_profiles(obs, sizes, release.fake_values, excluded)
                prof = BoundProfiles.build(obs, sizes, excluded, p, np.arange(b["n_buckets"]))
            cache["bounds"] = (prof, BucketOrder(prof.profile, prof.n_profiles, prof.size))
        return cache["bounds"]

    def _bucket_index(self, release, order: BucketOrder, cols: tuple[str, ...]) -> CountIndex:
        """QIT rows counted per (combination of ``cols``, bucket), the buckets numbered in
        ``order``; an index over a superset of the columns already built is reused."""
        built, found = _built_index(release, "bucket_index", cols)
        if found is not None:
            return found
        sizes = {c: len(release.domains[c]) for c in cols}
        rank = order.rank
        keys = rank.astype(np.int32 if len(rank) < 2 ** 31 else np.int64)[bucket_rows(release)["qb"]]
        key = qit_key(release, cols) if cols else None
        index = CountIndex(LazyColumns(cols, _qit_loader(release)), sizes, keys,
                           n_keys=order.n_columns, row_key=key)
        built[cols] = index
        return index

    def uniform_assignment_estimate(self, release, workload, level: float = 0.95) -> Estimates:
        """Anatomy's estimate with the closed-form se and normal interval of the uniform
        within-bucket assignment model (class doc). Valid only under that model: on real
        tables, where QI and SA are associated inside buckets, it covers far below ``level``
        (tests/contract/test_coverage_bucketized.py shows it failing); :meth:`estimate` reports
        the certain bounds instead."""
        types = bucket_types(release)
        if types is None:
            return self.estimate_by_rows(release, workload, level)
        _, masks = release.resolve(workload)
        rest, sel = split_masks(masks, release.sa, len(release.domains[release.sa]))
        est, lin_a, quad_a, lin_f, quad_f, covered = self._type_terms(release, types, rest, sel)
        return self._finish(release, est, lin_a, quad_a, lin_f, quad_f, covered, level)

    def _finish(self, release, est, lin_a, quad_a, lin_f, quad_f, covered, level: float) -> Estimates:
        # finite-population factor 1 − π_P (π_P: share of all records meeting the QI predicate)
        pi = np.clip(covered / max(float(bucket_rows(release)["n_rows"]), 1.0), 0.0, 1.0)
        var = np.maximum(lin_a - quad_a, 0.0) * (1.0 - pi) + np.maximum(lin_f - quad_f, 0.0)
        var[var < 1e-9 * np.maximum(np.abs(est), 1.0)] = 0.0
        method = ("closed form: Anatomy's estimator under uniform within-bucket assignment (independent draws from each "
                  "bucket's published SA distribution, finite-population factor 1 − π_P for a random permutation)"
                  + (", plus the fake-value correction's variance over the draw of the fakes" if release.fake_values else "")
                  + "; normal interval")
        return Estimates.normal(est, np.sqrt(var), method, level)

    def estimate_by_rows(self, release, workload, level: float = 0.95) -> Estimates:
        """:meth:`uniform_assignment_estimate` through the per-row index (:func:`anatomy_index`, quadratic keys per
        SA pair): the path for releases with too many bucket types, and the reference the
        per-type path is tested against."""
        _, masks = release.resolve(workload)
        m = len(release.domains[release.sa])
        rest, sel = split_masks(masks, release.sa, m)
        needed = self._needed_pairs(sel, m)
        ti, tj = _tri(m)
        pairs = np.arange(len(ti)) if needed is None else needed
        R = self._variance_sums(release, rest, needed)
        ti, tj = ti[pairs], tj[pairs]
        both = (sel[:, ti] & sel[:, tj]) * np.where(ti == tj, 1.0, 2.0)
        n_p = len(ti)
        est = (R[:, :m] * sel).sum(axis=1)
        lin_a = (R[:, m:2 * m] * sel).sum(axis=1)
        if release.fake_values:
            lin_f = (R[:, 2 * m:3 * m] * sel).sum(axis=1)
            quad_a = (R[:, 3 * m:3 * m + n_p] * both).sum(axis=1)
            quad_f = (R[:, 3 * m + n_p:] * both).sum(axis=1)
        else:  # no fakes: the index has no fake keys
            quad_a = (R[:, 2 * m:] * both).sum(axis=1)
            lin_f = quad_f = np.zeros(len(est))
        return self._finish(release, est, lin_a, quad_a, lin_f, quad_f, R[:, :m].sum(axis=1), level)


def query_row_masks(release, workload) -> tuple[np.ndarray, np.ndarray]:
    """(rows, sel) of a workload on a bucketized release: ``rows[q, r]`` whether QIT row r meets
    query q's QI predicates, ``sel[q, x]`` whether SA value x meets its SA predicate. With a drawn
    assignment ``a`` (:func:`draw_assignment`) the query's count in that table is
    ``(rows & sel[:, a]).sum(axis=1)`` — what a coverage test compares the interval with."""
    masks = release.resolve(workload)[1]
    n = len(release.buckets()["qb"])
    rows = np.ones((len(masks), n), dtype=bool)
    sel = np.ones((len(masks), len(release.domains[release.sa])), dtype=bool)
    for i, mk in enumerate(masks):
        for c, v in mk.items():
            if c == release.sa:
                sel[i] = v
            else:
                rows[i] &= v[release.codes("qit", c)]
    return rows, sel


def draw_assignment(release, rng: np.random.Generator) -> np.ndarray:
    """One table from the model :class:`AnatomyEstimator`'s interval assumes, for a release
    whose fakes are known (σ = 0, or the custodian file): the SA code of every QIT row, each
    bucket's real values assigned to its rows by a uniformly random permutation — a table of
    which this release is a valid output. In a saturated bucket (every eligible value used as
    a fake) which count-1 values are real is redrawn too (an exchangeable subset). Used to
    test the interval's coverage (tests/bucketization/test_uncertainty.py)."""
    b = release.buckets()
    real = release.real_counts_from_files()
    if real is None:
        raise ValueError("the real counts are needed (σ = 0 or the custodian file)")
    real = real.copy()
    if release.fake_values:
        obs = release.observed_counts()
        sat = np.flatnonzero(((obs == 0) & ~release.fake_excluded()).sum(axis=1) == 0)
        ones = obs[sat] == 1
        k = (real[sat] * ones).sum(axis=1)
        keys = np.where(ones, rng.random(ones.shape), np.inf)
        rank = np.argsort(np.argsort(keys, axis=1), axis=1)
        real[sat] = np.where(ones, (rank < k[:, None]).astype(real.dtype), real[sat])
    nb, m = real.shape
    vals = np.repeat(np.tile(np.arange(m), nb), real.ravel())  # bucket-major
    owner = np.repeat(np.arange(nb), real.sum(axis=1))
    perm = np.lexsort((rng.random(len(vals)), owner))
    order = np.argsort(b["qb"], kind="stable")
    sa = np.empty(len(vals), dtype=np.int64)
    sa[order] = vals[perm]
    return sa


__all__ = ["AnatomyEstimator", "draw_assignment", "correct_counts", "anatomy_index", "bucket_entries"]

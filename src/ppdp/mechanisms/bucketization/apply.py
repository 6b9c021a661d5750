"""Apply a bucket setting to the rows of a table (the per-row, vectorised step of SPEC §6).

A plan is a counts matrix ``counts[j, i]`` = number of records with SA code ``i`` that go
to bucket ``j`` (Wang et al. 2011, §4.3: RecordPartition + round-robin assignment produce
exactly such a matrix). Applying it needs no Python loop over rows:

1. every row gets a random key; rows are ordered by (SA code, key), so within an SA value
   the order is a uniformly random permutation (the row's *rank within its SA value*);
2. the k-th row of SA value ``i`` in that order goes to the bucket whose cumulative count
   range for ``i`` contains k (``np.repeat`` of bucket ids by ``counts[:, i]``);
3. bucket ids are relabelled by a random permutation so that ids reveal nothing about the
   order in which the planner produced the buckets.

The sensitive table needs no rows at all (:func:`st_table`: the relabelled counts plus the
fake values), and the manifest is built by one function (:func:`release_from_plan`) that
every engine calls; :func:`apply_plan` is the in-memory (NumPy) apply of a
:class:`~ppdp.mechanisms.bucketization.plan.BucketizationPlan` to a :class:`~ppdp.table.Table`.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import pyarrow as pa

from ...claims import disclosure_of
from ...errors import PpdpError, SchemaError
from ...releases.base import codes_to_labels
from ...releases.bucketized import BucketizedRelease, negative_association_mask, revealed_absent
from .associations import with_learned_associations
from .fakes import draw_fakes
from .plan import BucketizationPlan


def assign_buckets(sa_codes: np.ndarray, counts: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Bucket id (int64) of every row, and the counts matrix in the relabelled id order.

    ``counts`` is (n_buckets × m); its column sums must equal the SA counts of ``sa_codes``.
    Returns ``(bid, counts_relabelled)`` with ``counts_relabelled[bid]`` describing bucket ``bid``.
    """
    sa_codes = np.asarray(sa_codes)
    counts = np.asarray(counts, dtype=np.int64)
    n_buckets, m = counts.shape
    observed = np.bincount(sa_codes, minlength=m)
    if len(observed) != m or not np.array_equal(counts.sum(axis=0), observed):
        raise PpdpError("the bucket setting does not match the table's SA counts (plan and data disagree)")
    if (counts < 0).any():
        raise PpdpError("the bucket setting has negative counts")
    # 1. random rank within SA value
    order = grouped_random_order(sa_codes, rng)
    # 2. deal the rows of SA value i to buckets by the cumulative counts of column i
    plan_bucket = np.repeat(np.tile(np.arange(n_buckets, dtype=np.int64), m), counts.T.ravel())
    bid_plan = np.empty(len(sa_codes), dtype=np.int64)
    bid_plan[order] = plan_bucket
    # 3. relabel bucket ids at random
    perm = rng.permutation(n_buckets).astype(np.int64)
    relabelled = np.empty_like(counts)
    relabelled[perm] = counts
    return perm[bid_plan], relabelled


def assign_typed(sa_codes: np.ndarray, types: np.ndarray, multiplicity: np.ndarray, rng: np.random.Generator,
                 block: int = 1 << 22) -> tuple[np.ndarray, np.ndarray]:
    """:func:`assign_buckets` for a typed setting (``types`` with ``multiplicity``) without the
    dense matrix: the same random draws and the same bucket ids, in O(N + n_types·m) memory.

    Returns ``(bid, type_of)``: the published bucket id of every row (int32 below 2^31 buckets,
    else int64) and the type of
    every published bucket (``types[type_of]`` is the relabelled counts matrix)."""
    sa_codes = np.asarray(sa_codes)
    types = np.asarray(types, dtype=np.int64)
    mult = np.asarray(multiplicity, dtype=np.int64)
    K, m = types.shape
    observed = np.bincount(sa_codes, minlength=m)
    if len(observed) != m or not np.array_equal((types * mult[:, None]).sum(axis=0), observed):
        raise PpdpError("the bucket setting does not match the table's SA counts (plan and data disagree)")
    if (types < 0).any() or (mult < 0).any():
        raise PpdpError("the bucket setting has negative counts")
    n_buckets = int(mult.sum())
    # 1. random rank within SA value
    order = grouped_random_order(sa_codes, rng)
    # 2. the sorted rows of value i fill the buckets in planner order, counts[j, i] each: a
    #    (value, type) segment covers mult_k·types[k, i] consecutive positions
    first_bucket = np.cumsum(mult) - mult
    seg_len = (types * mult[:, None]).T.ravel()          # value-major, like the dense apply
    seg_start = np.cumsum(seg_len) - seg_len
    live = np.flatnonzero(seg_len)
    s_start, s_type, s_value = seg_start[live], live % K, live // K
    s_per, s_first = types[s_type, s_value], first_bucket[s_type]
    # 3. relabel bucket ids at random
    perm = rng.permutation(n_buckets).astype(np.int64)
    n = len(sa_codes)
    bid = np.empty(n, dtype=np.int32 if n_buckets < 1 << 31 else np.int64)  # the ids in 4 bytes a row
    for lo in range(0, n, block):
        p = np.arange(lo, min(n, lo + block), dtype=np.int64)
        s = np.searchsorted(s_start, p, side="right") - 1
        bid[order[lo:lo + len(p)]] = perm[s_first[s] + (p - s_start[s]) // s_per[s]]
    del order
    type_of = np.empty(n_buckets, dtype=np.int64)
    type_of[perm] = np.repeat(np.arange(K, dtype=np.int64), mult)
    return bid, type_of


#: rows per block of the gathers in :func:`grouped_random_order` (O(block) wide temporaries)
ORDER_BLOCK = 1 << 22


def _nondecreasing(x: np.ndarray) -> bool:
    return all(bool((np.diff(x[a:a + ORDER_BLOCK + 1]) >= 0).all()) for a in range(0, len(x), ORDER_BLOCK))


def grouped_random_order(groups: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A row order sorted by ``groups`` (non-negative ints) with a uniformly random order
    inside each group: the order of the distinct keys group·N + π(row), π a random permutation
    (``rng.permutation(N)``, drawn over int32 values below 2^31 rows: the same permutation).

    For groups below 2^32 the same order comes from stable radix sorts of the groups taken in
    π⁻¹ order — one pass of 16-bit digits below 2^16 (SA codes), two (low, then high digit)
    below 2^32 (bucket ids) — in O(N) time with int32 row indices, narrow digits gathered a
    block at a time and no int64 key (3× faster than sorting the keys, a third of the memory).
    Returns int32 positions below 2^31 rows, else int64."""
    n = len(groups)
    groups = np.asarray(groups)
    idx = np.int32 if n < 1 << 31 else np.int64
    pi = rng.permutation(np.arange(n, dtype=idx))
    if n > ORDER_BLOCK and groups.dtype.kind in "ui" and _nondecreasing(groups):
        # already grouped (the ST's bucket-major rows): sort each block of whole groups by its
        # (group, π) keys — the same order, in O(block) temporaries
        out = np.empty(n, dtype=idx)
        a = 0
        while a < n:
            b = min(n, a + ORDER_BLOCK)
            if b < n:
                e = int(np.searchsorted(groups[a:b], groups[b], side="left")) + a
                b = e if e > a else a + int(np.searchsorted(groups[a:], groups[b], side="right"))
            key = (groups[a:b] - groups[a]).astype(np.int64)
            key *= n
            key += pi[a:b]
            out[a:b] = np.argsort(key) + a
            a = b
        return out
    if n and groups.dtype.kind in "ui" and int(groups.min()) >= 0 and int(groups.max()) < 1 << 32:
        top = int(groups.max())
        inv = np.empty(n, dtype=idx)
        for a in range(0, n, ORDER_BLOCK):
            inv[pi[a:a + ORDER_BLOCK]] = np.arange(a, min(n, a + ORDER_BLOCK), dtype=idx)
        del pi

        def digits(rows, shift, dtype):  # groups[rows] >> shift, narrow, a block at a time
            out = np.empty(n, dtype=dtype)
            for a in range(0, n, ORDER_BLOCK):
                g = groups[rows[a:a + ORDER_BLOCK]]
                out[a:a + len(g)] = (g >> shift) & 0xFFFF if shift or top >= 1 << 16 else g
            return out

        if top < 1 << 16:
            o = np.argsort(digits(inv, 0, np.uint8 if top < 1 << 8 else np.uint16), kind="stable")
            return inv[o]
        o = np.argsort(digits(inv, 0, np.uint16), kind="stable").astype(idx)  # low digit first (LSD radix)
        rows = np.empty(n, dtype=idx)
        for a in range(0, n, ORDER_BLOCK):
            rows[a:a + ORDER_BLOCK] = inv[o[a:a + ORDER_BLOCK]]
        high = digits(rows, 16, np.uint16)
        del rows
        o = o[np.argsort(high, kind="stable")]
        del high
        return inv[o]
    key = np.asarray(groups, dtype=np.int64) * max(n, 1)
    key += pi
    del pi
    # the keys are distinct, so any sort gives the same order; a stable (merge) sort is far
    # faster when the groups are already in order (the ST's bucket-major rows)
    presorted = n > 1 and bool((np.diff(groups) >= 0).all()) if n < 1 << 30 else False
    return np.argsort(key, kind="stable" if presorted else None)


def dictionary_column(codes: np.ndarray, domain: Sequence[str]) -> pa.DictionaryArray:
    """Codes as an Arrow dictionary column with int16 indices up to 32,768 labels (else int32):
    2 bytes a row instead of 4. (Not int8: pandas would then view the indices zero-copy and
    read-only, and a DataFrame of the release could not be edited in place.)"""
    idx = np.int16 if len(domain) <= 1 << 15 else np.int32
    return pa.DictionaryArray.from_arrays(pa.array(np.asarray(codes).astype(idx, copy=False)),
                                          pa.array([str(x) for x in domain], pa.string()))


def st_table_typed(types: np.ndarray, type_of: np.ndarray, fake_bid: np.ndarray, fake_code: np.ndarray,
                   rng: np.random.Generator, sa: str, labels) -> tuple[pa.Table, dict]:
    """:func:`st_table` for a typed setting (``types[type_of]`` is the relabelled counts matrix)
    and fakes given as (bucket, value) pairs: the same rows and the same random draws, without
    an n_buckets × m matrix."""
    types = np.asarray(types, dtype=np.int64)
    nz_type, nz_code = np.nonzero(types)                  # per type, its values in code order
    nnz = np.bincount(nz_type, minlength=len(types))
    off = np.cumsum(nnz) - nnz
    per_bucket = nnz[type_of]
    n_rows = int(per_bucket.sum())
    ix = np.int32 if max(n_rows, len(type_of), types.size) < 1 << 31 else np.int64  # 4-byte row arrays
    rb = np.repeat(np.arange(len(type_of), dtype=ix), per_bucket)   # bucket-major
    k = np.repeat(type_of.astype(ix), per_bucket)
    j: np.ndarray = np.arange(n_rows, dtype=ix)
    j -= np.repeat((np.cumsum(per_bucket) - per_bucket).astype(ix), per_bucket)
    pos: np.ndarray = off.astype(ix)[k]
    pos += j
    del j
    rc = nz_code[pos].astype(np.int16 if types.shape[1] <= 1 << 15 else np.int64)
    del pos
    cnt_dtype = np.int32 if int(types.max(initial=0)) < 1 << 31 else np.int64
    rcount = types.astype(cnt_dtype)[k, rc]
    del k
    if len(fake_bid):
        rb = np.concatenate([rb, np.asarray(fake_bid).astype(rb.dtype)])
        rc = np.concatenate([rc, np.asarray(fake_code).astype(rc.dtype)])
        rcount = np.concatenate([rcount, np.ones(len(fake_bid), dtype=rcount.dtype)])
    st_order = grouped_random_order(rb, rng)  # value order inside a bucket is random
    st = {"bid": pa.array(rb[st_order], pa.int64())}
    del rb
    st[sa] = dictionary_column(rc[st_order], labels)
    del rc
    st["count"] = pa.array(rcount[st_order], pa.int64())
    del rcount, st_order
    labels = [str(x) for x in labels]
    custodian = ({"fake": {"bid": np.asarray(fake_bid, dtype=np.int64).tolist(),
                           "value": [labels[c] for c in np.asarray(fake_code).tolist()]}} if len(fake_bid) else {})
    return pa.table(st), custodian


def st_table(counts: np.ndarray, fake: np.ndarray, rng: np.random.Generator, sa: str,
             labels) -> tuple[pa.Table, dict]:
    """st.parquet from the counts and fake matrices alone (no rows needed): one row per
    (bucket, value) with its count, each fake a count-1 row, random value order in a bucket.

    Returns ``(st, custodian)``: the ST (``bid``, SA, ``count`` — nothing says which values are
    fake) and the custodian-side entry ``{"fake": {"bid": [...], "value": [...]}}`` (empty when
    there are no fakes) that ``verify(..., custodian=path)`` reads."""
    rb, rc = np.nonzero(counts)
    fb, fc = np.nonzero(fake)
    st_bid = np.concatenate([rb, fb]).astype(np.int64)
    st_code = np.concatenate([rc, fc])
    st_count = np.concatenate([counts[rb, rc], np.ones(len(fb), dtype=np.int64)]).astype(np.int64)
    st_order = grouped_random_order(st_bid, rng)  # value order inside a bucket is random
    st = {"bid": pa.array(st_bid[st_order], pa.int64()),
          sa: codes_to_labels(st_code[st_order], labels),
          "count": pa.array(st_count[st_order], pa.int64())}
    labels = [str(x) for x in labels]
    custodian = {"fake": {"bid": fb.astype(np.int64).tolist(), "value": [labels[c] for c in fc.tolist()]}} if len(fb) else {}
    return pa.table(st), custodian


def release_from_plan(plan: BucketizationPlan, relabelled: np.ndarray, qit: pa.Table, st: pa.Table,
                      quasi: Sequence[str], domains: Mapping[str, Sequence[str]],
                      numeric: Mapping[str, np.ndarray | None], extra: Mapping | None = None,
                      custodian: Mapping | None = None) -> BucketizedRelease:
    """The release (manifest + files) of an applied plan; the one manifest builder of every engine.

    ``relabelled``: the counts matrix in published bucket order, or just the bucket sizes in
    that order (a 1-D array); ``numeric``: numeric value of
    each label (or None) per published column, for BETWEEN queries; ``custodian``: what only
    the custodian keeps (which values are fake), saved beside the release, never in it."""
    sa = plan.sa
    published = (*quasi, sa)
    schema = {"quasi": list(quasi), "sensitive": [sa], "domains": {c: list(domains[c]) for c in published}}
    if any(numeric.get(c) is not None for c in published):
        schema["numeric"] = {c: (None if numeric.get(c) is None else np.asarray(numeric[c]).tolist()) for c in published}
    manifest = {"schema": schema, "n_input": plan.n_records, "n_published": plan.n_records, "dropped": 0,
                **dict(extra or {}), "certificate": plan.certificate(rel if (rel := np.asarray(relabelled)).ndim == 1 else rel.sum(axis=1))}
    release = BucketizedRelease(manifest, {"qit": qit, "st": st}, custodian)
    # what the files disclose (ppdp.publish re-states it and refuses a release disclosing every record)
    release.manifest["disclosure"] = disclosure_of(release)
    return release


def draw_plan_fakes(plan: BucketizationPlan, relabelled: np.ndarray, rng: np.random.Generator,
                    forbidden: np.ndarray | None = None) -> np.ndarray:
    """The plan's σ fake values per bucket, drawn only where a real record could hold them
    under the plan's thresholds (and not ``forbidden`` by a negative association); see
    :mod:`~ppdp.mechanisms.bucketization.fakes`."""
    absent = revealed_absent(plan.claim, plan.labels, plan.n_records)
    if absent.any():
        extra = np.zeros(np.shape(relabelled), dtype=bool)
        extra[:, absent] = True
        forbidden = extra if forbidden is None else (np.asarray(forbidden, bool) | extra)
    return draw_fakes(relabelled, plan.fake_values, rng, forbidden, plan.thresholds)


def draw_plan_fakes_typed(plan: BucketizationPlan, type_of: np.ndarray, rng: np.random.Generator,
                          forbidden: np.ndarray | None = None, block: int = 1 << 16) -> tuple[np.ndarray, np.ndarray]:
    """:func:`draw_plan_fakes` for a typed setting, a block of buckets at a time (the same
    random draws): the fakes as (bucket ids, value codes)."""
    if plan.fake_values == 0 or len(type_of) == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    bids, codes = [], []
    for lo in range(0, len(type_of), block):
        hi = min(len(type_of), lo + block)
        dense = plan.types[type_of[lo:hi]]
        f = draw_plan_fakes(plan, dense, rng, None if forbidden is None else forbidden[lo:hi])
        b, c = np.nonzero(f)
        bids.append(b.astype(np.int64) + lo)
        codes.append(c.astype(np.int64))
    return np.concatenate(bids), np.concatenate(codes)


def apply_plan(plan: BucketizationPlan, table, rng: np.random.Generator) -> BucketizedRelease:
    """Apply ``plan`` to the rows of ``table`` in memory: rows → buckets, σ fake values per
    bucket, QIT (rows grouped by bucket, random order inside) and ST. Works on the typed plan:
    memory O(N) plus O(n_buckets) for the bucket types, never n_buckets × m."""
    sa = plan.sa
    if table.sa != sa or tuple(table.domain(sa)) != plan.labels:
        raise SchemaError(f"the plan is for SA {sa!r} with {len(plan.labels)} labels; the table's SA is "
                          f"{table.sa!r} with {len(table.domain(table.sa))}")
    for c in table.quasi:
        table.codes(c)  # SchemaError on an unknown column
    assert plan.multiplicity is not None
    bid, type_of = assign_typed(table.codes(sa), plan.types, plan.multiplicity, rng)
    forbidden = None
    # given + learned (associations.py, §6) negative associations; the learned ones go into the certificate
    # (the per-bucket counts are expanded from the types only when learning is on)
    plan, associations, learned = with_learned_associations(plan, bid, lambda: plan.types[type_of],
                                                            {c: table.codes(c) for c in table.quasi}, table.domains)
    if associations:  # validated even when σ = 0
        forbidden = negative_association_mask(bid, len(type_of), {c: table.codes(c) for c in table.quasi},
                                              table.domains, sa, associations)
    fake_bid, fake_code = draw_plan_fakes_typed(plan, type_of, rng, forbidden)
    del forbidden
    qit_order = grouped_random_order(bid, rng)  # grouped by (random) bucket id, random inside
    qit = {c: dictionary_column(table.codes(c)[qit_order], table.domain(c)) for c in table.quasi}
    qit["bid"] = pa.array(bid[qit_order], pa.int64())
    del qit_order, bid
    st, custodian = st_table_typed(plan.types, type_of, fake_bid, fake_code, rng, sa, table.domain(sa))
    custodian.update(learned)
    numeric = {c: table.numeric_values(c) for c in (*table.quasi, sa)}
    sizes = plan.type_sizes[type_of]
    return release_from_plan(plan, sizes, pa.table(qit), st, table.quasi, table.domains, numeric, custodian=custodian)


__all__ = ["assign_buckets", "assign_typed", "st_table_typed", "draw_plan_fakes_typed", "dictionary_column", "grouped_random_order", "st_table", "release_from_plan", "draw_plan_fakes", "apply_plan"]

"""Apply a bucket setting to the rows of a table (the per-row, vectorised step of SPEC §6).

A plan is a counts matrix ``counts[j, i]`` = number of records with SA code ``i`` that go
to bucket ``j`` (Wang et al. 2011, §4.3: RecordPartition + round-robin assignment produce
exactly such a matrix), stored as bucket types with multiplicities. Applying it needs no
Python loop over rows and no sort of the rows by bucket (:func:`apply_plan`):

1. bucket ids are drawn by a random permutation, so that ids reveal nothing about the order
   in which the planner produced the buckets;
2. the QIT is laid out bucket by bucket in id order, each bucket's SA values in a random
   order of its own (:func:`qit_template`);
3. the rows of SA value ``i``, in a uniformly random order (:func:`value_random_order`), fill
   the template's places of value ``i`` in order.

Every assignment of records to buckets that the counts allow is then equally likely, and so
is every order inside a bucket. (:func:`assign_buckets` / :func:`assign_typed` give the same
distribution by dealing the rows of each value to buckets by the cumulative counts.)

The sensitive table needs no rows at all (:func:`st_table`: the relabelled counts plus the
fake values), and the manifest is built by one function (:func:`release_from_plan`) that
every engine calls; :func:`apply_plan` is the in-memory (NumPy) apply of a
:class:`~ppdp.mechanisms.bucketization.plan.BucketizationPlan` to a :class:`~ppdp.table.Table`.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa

from ...claims import disclosure_of
from ...errors import PpdpError, SchemaError
from ...releases.base import codes_to_labels
from ...releases.bucketized import (BucketizedRelease, ForbiddenFakes, association_patterns, revealed_absent,
                                   streamed_disclosure)
from ...releases.custodian import FakeList
from .associations import with_learned_associations
from .fakes import check_room, draw_fakes, eligible_fakes, fake_ranks
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


def counting_order(keys: np.ndarray, n_keys: int, block: int = ORDER_BLOCK) -> tuple[np.ndarray, np.ndarray]:
    """The positions of ``keys`` (non-negative ints below ``n_keys``) in key order, equal keys
    in their order (a stable counting sort), and the count of each key. Positions are int32
    below 2^31 rows, else int64. A block at a time — a radix argsort of the block's narrow
    keys, then each key's run written at its place — so no int64 array of N is made."""
    n = len(keys)
    out = np.empty(n, dtype=np.int32 if n < 1 << 31 else np.int64)
    kd = np.uint8 if n_keys <= 1 << 8 else np.uint16 if n_keys <= 1 << 16 else np.int64
    per_block = []
    for a in range(0, n, block):
        c = np.bincount(keys[a:a + block], minlength=n_keys)
        if len(c) != n_keys:
            raise PpdpError(f"a key ≥ {n_keys} in a counting sort")
        per_block.append(c)
    counts = np.sum(per_block, axis=0, dtype=np.int64) if per_block else np.zeros(n_keys, np.int64)
    nxt = np.cumsum(counts) - counts  # where each key's next row goes
    for i, a in enumerate(range(0, n, block)):
        k = np.asarray(keys[a:a + block]).astype(kd, copy=False)
        o = np.argsort(k, kind="stable")
        c = per_block[i]
        dest = np.repeat(nxt - (np.cumsum(c) - c), c)
        dest += np.arange(len(k))
        o += a
        out[dest] = o
        nxt += c
        del k, o, dest
    return out, np.asarray(counts, dtype=np.int64)


#: rows per pile (on average over the table) of :func:`value_random_order`
PILE_ROWS = 1 << 16


def value_random_order(codes: np.ndarray, m: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Rows sorted by ``codes`` (below ``m``) with a uniformly random order inside each value,
    and the count of each value.

    Cache-friendly (Rao 1961, Sandelius 1962): every row draws one of P piles of its value
    uniformly (P a power of two, so the draw is exact), a counting sort by (value, pile) puts
    the piles in order, and each pile — small enough for the cache — is shuffled by
    Fisher–Yates. Uniform piles, each uniformly shuffled, give a uniform order. Positions are
    int32 below 2^31 rows."""
    n = len(codes)
    piles = 1
    while 2 * piles * m <= 1 << 16 and 2 * piles * PILE_ROWS <= n:  # piles of ≥ PILE_ROWS rows on average
        piles *= 2
    if piles == 1:
        order, counts = counting_order(codes, m)
    else:
        key = np.empty(n, dtype=np.uint16)
        for a in range(0, n, ORDER_BLOCK):
            c = np.asarray(codes[a:a + ORDER_BLOCK]).astype(np.uint16)
            c *= piles
            c += rng.integers(0, piles, size=len(c), dtype=np.uint16)
            key[a:a + len(c)] = c
        order, counts = counting_order(key, m * piles)
        del key
    ends = np.cumsum(counts)
    for a, b in zip((ends - counts).tolist(), ends.tolist()):
        if b - a > 1:
            rng.shuffle(order[a:b])
    return order, counts.reshape(m, piles).sum(axis=1)


def shuffle_segments(out: np.ndarray, starts: np.ndarray, width: int, rows, rng: np.random.Generator,
                     block: int = ORDER_BLOCK) -> None:
    """Segments of ``width`` values, each in a uniformly random order of its own
    (``Generator.permuted``): ``rows(a, b)`` gives segments a … b − 1 as a (b − a) × width
    array, written to ``out[starts[i] : starts[i] + width]``; a block of segments at a time."""
    k = len(starts)
    step = max(1, block // max(width, 1))
    col = np.arange(width, dtype=np.int64)
    for a in range(0, k, step):
        r = np.array(rows(a, min(k, a + step)))
        rng.permuted(r, axis=1, out=r)
        out[starts[a:a + step].astype(np.int64)[:, None] + col] = r


def by_width(widths: np.ndarray):
    """``(w, ids)`` for every width w > 0 present in ``widths``: the positions holding it, in
    increasing order (int32)."""
    top = int(widths.max(initial=0))
    ids, count = counting_order(widths, top + 1)
    ends = np.cumsum(count)
    for w in np.flatnonzero(count).tolist():
        if w > 0:
            yield w, ids[int(ends[w] - count[w]):int(ends[w])]


def dictionary_column(codes: np.ndarray, domain: Sequence[str]) -> pa.DictionaryArray:
    """Codes as an Arrow dictionary column with int16 indices up to 32,768 labels (else int32):
    2 bytes a row instead of 4. (Not int8: pandas would then view the indices zero-copy and
    read-only, and a DataFrame of the release could not be edited in place.)"""
    idx = np.int16 if len(domain) <= 1 << 15 else np.int32
    return pa.DictionaryArray.from_arrays(pa.array(np.asarray(codes).astype(idx, copy=False)),
                                          pa.array([str(x) for x in domain], pa.string()))


def st_table_typed(types: np.ndarray, type_of: np.ndarray, fake_bid: np.ndarray, fake_code: np.ndarray,
                   rng: np.random.Generator, sa: str, labels, first_bid: int = 0,
                   with_custodian: bool = True) -> tuple[pa.Table, dict]:
    """:func:`st_table` for a typed setting (``types[type_of]`` is the relabelled counts matrix)
    and fakes given as (bucket, value) pairs, without an n_buckets × m matrix: the ST rows of
    the buckets of one type are that type's values (and each bucket's fakes) in a random order
    of their own (:func:`shuffle_segments`), written in place — O(ST rows), no sort.

    Every bucket's fakes are σ values it lacks (:func:`draw_plan_fakes_typed`), so a row's
    count is its type's count of the value, or 1 for a fake. ``first_bid``: the published id of
    ``type_of[0]`` (a range of buckets, :func:`st_range_typed`); ``with_custodian=False`` leaves
    the custodian entry empty (a caller that writes the fakes itself)."""
    types = np.asarray(types, dtype=np.int64)
    type_of = np.asarray(type_of)
    K, m = types.shape
    nb = len(type_of)
    fake_bid = np.asarray(fake_bid, dtype=np.int64)
    fake_code = np.asarray(fake_code, dtype=np.int64)
    sigma = len(fake_bid) // nb if nb else 0
    if len(fake_bid) != sigma * nb or (sigma and not np.array_equal(fake_bid, np.repeat(np.arange(nb), sigma))):
        raise PpdpError("fake values must be σ per bucket, listed bucket by bucket")
    nnz = (types > 0).sum(axis=1)
    width = nnz[type_of] + sigma                       # ST rows of each bucket
    st_start = np.cumsum(width) - width
    n_rows = int(width.sum())
    code_dt = np.int16 if m <= 1 << 15 else np.int32
    st_code = np.empty(n_rows, dtype=code_dt)
    fakes = fake_code.astype(code_dt).reshape(nb, sigma)
    for w, ids in by_width(width):                     # the buckets of w ST rows, in id order
        of_w = np.flatnonzero(nnz + sigma == w)         # their types, each one's values in a row
        content = np.stack([np.flatnonzero(types[k]).astype(code_dt) for k in of_w])
        local = np.zeros(K, dtype=np.int64)
        local[of_w] = np.arange(len(of_w))
        t = type_of[ids]

        def rows(a, b, ids=ids, t=t, content=content, local=local):
            real = content[local[t[a:b]]]
            return np.concatenate([real, fakes[ids[a:b]]], axis=1) if sigma else real

        shuffle_segments(st_code, st_start[ids], w, rows, rng)
    # count of each row: its type's count of the value, 1 for a fake (a value the type lacks)
    table = np.maximum(types, 1).ravel()
    st_count = np.empty(n_rows, dtype=np.int64)
    tk = np.repeat(type_of.astype(np.int32 if K * m < 1 << 31 else np.int64), width)
    for a in range(0, n_rows, ORDER_BLOCK):
        key = tk[a:a + ORDER_BLOCK] * m
        key += st_code[a:a + ORDER_BLOCK]
        st_count[a:a + len(key)] = table[key]
    del tk
    st = {"bid": pa.array(np.repeat(np.arange(first_bid, first_bid + nb, dtype=np.int64), width), pa.int64()),
          sa: dictionary_column(st_code, labels), "count": pa.array(st_count, pa.int64())}
    del st_code, st_count
    custodian = ({"fake": FakeList(fake_bid + first_bid, fake_code.astype(code_dt), tuple(str(x) for x in labels))}
                 if len(fake_bid) and with_custodian else {})
    return pa.table(st), custodian


def st_range_typed(plan: BucketizationPlan, type_of: np.ndarray, first_bid: int,
                   rng: np.random.Generator) -> tuple[pa.Table, np.ndarray | None]:
    """The ST rows of the published buckets ``first_bid`` … ``first_bid + len(type_of) − 1`` (of
    types ``type_of``) and their fakes (a boolean (buckets × m) matrix, None when σ = 0): the
    fakes drawn first from ``rng`` (:func:`draw_plan_fakes`), then the rows' order
    (:func:`st_table_typed`). An ST written a range of buckets at a time, each range with its
    own generator, is never held whole."""
    types = np.asarray(plan.types, dtype=np.int64)
    fake = draw_plan_fakes(plan, types[type_of], rng) if plan.fake_values and len(type_of) else None
    fb, fc = (np.zeros(0, np.int64), np.zeros(0, np.int64)) if fake is None else np.nonzero(fake)
    st, _ = st_table_typed(types, type_of, fb, fc, rng, plan.sa, plan.labels, first_bid=first_bid,
                           with_custodian=False)
    return st, fake


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
    custodian = {"fake": FakeList(fb, fc, tuple(str(x) for x in labels))} if len(fb) else {}
    return pa.table(st), custodian


def published_schema(quasi: Sequence[str], sa: str, domains: Mapping[str, Sequence[str]],
                     numeric: Mapping[str, np.ndarray | None]) -> dict:
    """The manifest's ``schema`` of a bucketized release (every engine's): roles, domains and,
    when any column has them, the numeric value of each label."""
    published = (*quasi, sa)
    schema: dict = {"quasi": list(quasi), "sensitive": [sa], "domains": {c: list(domains[c]) for c in published}}
    if any(numeric.get(c) is not None for c in published):
        schema["numeric"] = {c: (None if numeric.get(c) is None else np.asarray(numeric[c]).tolist()) for c in published}
    return schema


def release_from_plan(plan: BucketizationPlan, relabelled: np.ndarray, qit: pa.Table, st: pa.Table,
                      quasi: Sequence[str], domains: Mapping[str, Sequence[str]],
                      numeric: Mapping[str, np.ndarray | None], extra: Mapping | None = None,
                      custodian: Mapping | None = None, type_of: np.ndarray | None = None) -> BucketizedRelease:
    """The release (manifest + files) of an applied plan; the one manifest builder of every engine.

    ``relabelled``: the counts matrix in published bucket order, or just the bucket sizes in
    that order (a 1-D array); ``numeric``: numeric value of
    each label (or None) per published column, for BETWEEN queries; ``custodian``: what only
    the custodian keeps (which values are fake), saved beside the release, never in it."""
    schema = published_schema(quasi, plan.sa, domains, numeric)
    manifest = {"schema": schema, "n_input": plan.n_records, "n_published": plan.n_records, "dropped": 0,
                **dict(extra or {}), "certificate": plan.certificate(rel if (rel := np.asarray(relabelled)).ndim == 1 else rel.sum(axis=1))}
    release = BucketizedRelease(manifest, {"qit": qit, "st": st}, custodian)
    if rel.ndim == 1:  # the writer's files are in the dense form: no second decoding for the disclosure
        release.adopt_writer_decoding(rel, plan.types if type_of is not None else None, type_of)
    # what the files disclose (ppdp.publish re-states it and refuses a release disclosing every record)
    release.manifest["disclosure"] = disclosure_of(release)
    return release


def _plan_forbidden(plan: BucketizationPlan, shape: tuple[int, ...], forbidden: np.ndarray | None) -> np.ndarray | None:
    """``forbidden`` (a negative association), plus the values the claim reveals to be absent."""
    absent = revealed_absent(plan.claim, plan.labels, plan.n_records)
    if absent.any():
        extra = np.zeros(shape, dtype=bool)
        extra[:, absent] = True
        forbidden = extra if forbidden is None else (np.asarray(forbidden, bool) | extra)
    return forbidden


def draw_plan_fakes(plan: BucketizationPlan, relabelled: np.ndarray, rng: np.random.Generator,
                    forbidden: np.ndarray | None = None) -> np.ndarray:
    """The plan's σ fake values per bucket, drawn only where a real record could hold them
    under the plan's thresholds (and not ``forbidden`` by a negative association); see
    :mod:`~ppdp.mechanisms.bucketization.fakes`."""
    return draw_fakes(relabelled, plan.fake_values, rng, _plan_forbidden(plan, np.shape(relabelled), forbidden),
                      plan.thresholds)


def draw_plan_fakes_typed(plan: BucketizationPlan, type_of: np.ndarray, rng: np.random.Generator,
                          forbidden: ForbiddenFakes | None = None, block: int = 1 << 16) -> tuple[np.ndarray, np.ndarray]:
    """:func:`draw_plan_fakes` for a typed setting, a block of buckets at a time (the same
    random draws as bucket by bucket): the fakes as (bucket ids, value codes), ascending. The
    eligible values of a bucket depend on its type and, with negative associations, on its
    pattern of forbidden values (:class:`~ppdp.releases.bucketized.ForbiddenFakes`), so each
    fake is its (type, pattern)'s eligible value at a rank drawn by
    :func:`~ppdp.mechanisms.bucketization.fakes.fake_ranks` (O(buckets · σ), no buckets × m
    matrix)."""
    sigma = plan.fake_values
    if sigma == 0 or len(type_of) == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    types = np.asarray(plan.types, dtype=np.int64)
    if forbidden is None:
        kind, pattern = np.asarray(type_of, dtype=np.int64), None
        kinds = np.arange(len(types))
    else:  # a kind per (type, forbidden pattern) that occurs
        key = np.asarray(type_of, dtype=np.int64) * len(forbidden.rows) + forbidden.of
        kind, uniq = pd.factorize(key, sort=True)
        kinds, pattern = uniq // len(forbidden.rows), forbidden.rows[uniq % len(forbidden.rows)]
    kt = types[kinds]
    eligible = eligible_fakes(kt, _plan_forbidden(plan, kt.shape, pattern), plan.thresholds)
    n_el = eligible.sum(axis=1)
    per_kind = np.bincount(kind, minlength=len(kt))
    used = per_kind > 0
    check_room(kt.sum(axis=1)[used], n_el[used], sigma, per_kind[used])
    value_at = np.argsort(~eligible, axis=1, kind="stable")  # each kind's eligible values first, ascending
    bids, codes = [], []
    for lo in range(0, len(kind), block):
        t = np.asarray(kind[lo:lo + block], dtype=np.int64)
        c = np.sort(value_at[t[:, None], fake_ranks(n_el[t], sigma, rng)], axis=1)
        bids.append(np.repeat(np.arange(lo, lo + len(t), dtype=np.int64), sigma))
        codes.append(c.ravel().astype(np.int64))
    return np.concatenate(bids), np.concatenate(codes)


def qit_template(types: np.ndarray, type_of: np.ndarray, starts: np.ndarray, n: int,
                 rng: np.random.Generator) -> np.ndarray:
    """The SA value of every QIT row: bucket ``g`` (of type ``type_of[g]``) at rows
    ``starts[g]`` onwards, its values in a random order of its own. uint8 codes up to 256
    values (uint16 up to 2^16)."""
    types = np.asarray(types, dtype=np.int64)
    K, m = types.shape
    out = np.empty(n, dtype=np.uint8 if m <= 1 << 8 else np.uint16 if m <= 1 << 16 else np.int32)
    sizes = types.sum(axis=1)
    for w, ids in by_width(sizes[type_of]):
        of_w = np.flatnonzero(sizes == w)                          # the types of this size …
        content = np.stack([np.repeat(np.arange(m, dtype=out.dtype), types[k]) for k in of_w])
        local = np.zeros(K, dtype=np.int64)
        local[of_w] = np.arange(len(of_w))                         # … and each one's row of content
        t = type_of[ids]
        shuffle_segments(out, starts[ids], w, lambda a, b: content[local[t[a:b]]], rng)
    return out


def packed_gather(columns: Sequence[np.ndarray], sizes: Sequence[int], order: np.ndarray,
                  block: int = ORDER_BLOCK) -> list[np.ndarray]:
    """``[c[order] for c in columns]`` (codes below ``sizes``) as int16 arrays (int32 above 2^15
    labels), with one random-access gather per 64 bits of codes instead of one per column: the
    codes are packed side by side into uint32/uint64 words, the words gathered, then unpacked,
    all a block at a time."""
    bits = [max(1, (int(d) - 1).bit_length()) for d in sizes]
    groups: list[list[int]] = []
    used = 64
    for i, b in enumerate(bits):
        if used + b > 64:
            groups.append([])
            used = 0
        groups[-1].append(i)
        used += b
    n = len(order)
    out: list[np.ndarray] = [np.empty(0)] * len(columns)
    for g in groups:
        width = sum(bits[i] for i in g)
        wd: Any = np.uint32 if width <= 32 else np.uint64
        word: Any = np.zeros(len(columns[g[0]]), dtype=wd)
        shift = 0
        shifts = []
        for i in g:
            shifts.append(shift)
            for a in range(0, len(word), block):
                w: Any = np.asarray(columns[i][a:a + block]).astype(wd)
                w <<= wd(shift)
                word[a:a + block] |= w
            shift += bits[i]
        got: Any = np.empty(n, dtype=wd)
        for a in range(0, n, block):
            got[a:a + block] = word[order[a:a + block]]
        del word
        for i, sh in zip(g, shifts):
            col = np.empty(n, dtype=np.int16 if sizes[i] <= 1 << 15 else np.int32)
            mask = wd((1 << bits[i]) - 1)
            for a in range(0, n, block):
                w = got[a:a + block] >> wd(sh)
                w &= mask
                col[a:a + len(w)] = w
            out[i] = col
        del got
    return out


def apply_plan(plan: BucketizationPlan, table, rng: np.random.Generator) -> BucketizedRelease:
    """Apply ``plan`` to the rows of ``table`` in memory: rows → buckets, σ fake values per
    bucket, QIT (rows grouped by bucket, random order inside) and ST. Works on the typed plan:
    memory O(N) plus O(n_buckets) for the bucket types, never n_buckets × m.

    The QIT is made without sorting rows by bucket: bucket ids are drawn at random (the
    planner's bucket j is published as ``perm[j]``), the buckets laid out in id order with
    each bucket's SA values in a random order of their own (:func:`qit_template`), and the
    rows of each SA value, in a uniformly random order (:func:`value_random_order`), fill that
    value's QIT rows in order. So every assignment of records to buckets that the plan's
    counts allow is equally likely, as is every order inside a bucket — the distribution of
    :func:`assign_typed` + :func:`grouped_random_order`, in O(N) with int32 row indices."""
    sa = plan.sa
    if table.sa != sa or tuple(table.domain(sa)) != plan.labels:
        raise SchemaError(f"the plan is for SA {sa!r} with {len(plan.labels)} labels; the table's SA is "
                          f"{table.sa!r} with {len(table.domain(table.sa))}")
    for c in table.quasi:
        table.codes(c)  # SchemaError on an unknown column
    assert plan.multiplicity is not None
    types = np.asarray(plan.types, dtype=np.int64)
    mult = np.asarray(plan.multiplicity, dtype=np.int64)
    if (types < 0).any() or (mult < 0).any():
        raise PpdpError("the bucket setting has negative counts")
    K, m = types.shape
    n_buckets = int(mult.sum())
    sa_codes = table.codes(sa)
    n = len(sa_codes)
    # bucket ids at random: planner bucket j is published as perm[j]
    perm = rng.permutation(n_buckets).astype(np.int64)
    type_of = np.empty(n_buckets, dtype=np.int32 if K < 1 << 31 else np.int64)
    type_of[perm] = np.repeat(np.arange(K, dtype=type_of.dtype), mult)
    sizes = plan.type_sizes[type_of]
    if int(sizes.sum()) != n:
        raise PpdpError("the bucket setting does not match the table's SA counts (plan and data disagree)")
    starts = np.cumsum(sizes) - sizes
    del perm
    template = qit_template(types, type_of, starts, n, rng)
    slots, _ = counting_order(template, m)             # QIT rows of each SA value, in row order
    del template
    rows, observed = value_random_order(sa_codes, m, rng)
    if not np.array_equal((types * mult[:, None]).sum(axis=0), observed):
        raise PpdpError("the bucket setting does not match the table's SA counts (plan and data disagree)")
    qit_order = np.empty(n, dtype=rows.dtype)          # the source row of every QIT row
    for a in range(0, n, ORDER_BLOCK):
        qit_order[slots[a:a + ORDER_BLOCK]] = rows[a:a + ORDER_BLOCK]
    del slots, rows
    qi_codes = dict(zip(table.quasi, packed_gather([table.codes(c) for c in table.quasi],
                                                   [len(table.domain(c)) for c in table.quasi], qit_order)))
    del qit_order
    bid = np.repeat(np.arange(n_buckets, dtype=np.int64), sizes)  # QIT rows grouped by id, in id order
    forbidden = None
    # given + learned (associations.py, §6) negative associations; the learned ones go into the certificate
    # (the per-bucket counts are expanded from the types only when learning is on)
    plan, associations, learned = with_learned_associations(plan, bid, types, qi_codes, table.domains, type_of)
    if associations:  # validated even when σ = 0
        forbidden = association_patterns(bid, n_buckets, qi_codes, table.domains, sa, associations)
    fake_bid, fake_code = draw_plan_fakes_typed(plan, type_of, rng, forbidden)
    del forbidden
    qit = {c: dictionary_column(qi_codes.pop(c), table.domain(c)) for c in table.quasi}
    qit["bid"] = pa.array(bid, pa.int64())
    del bid
    st, custodian = st_table_typed(types, type_of, fake_bid, fake_code, rng, sa, table.domain(sa))
    custodian.update(learned)
    numeric = {c: table.numeric_values(c) for c in (*table.quasi, sa)}
    return release_from_plan(plan, sizes, pa.table(qit), st, table.quasi, table.domains, numeric, custodian=custodian,
                             type_of=type_of)


__all__ = ["assign_buckets", "assign_typed", "st_table_typed", "st_range_typed", "streamed_disclosure", "counting_order", "value_random_order",
           "shuffle_segments", "qit_template", "packed_gather", "draw_plan_fakes_typed", "dictionary_column", "grouped_random_order", "st_table", "release_from_plan", "draw_plan_fakes", "apply_plan"]

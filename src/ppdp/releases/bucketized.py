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

from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa

from ..claims import claim_of
from ..claims.fprivacy import privacy_cap
from ..errors import ReleaseError
from ..kernels.associations import learn_negative_associations
from ..queries.engine import LazyColumns
from .base import Release, VerifyReport, dictionary_codes, labels_to_codes, register_family
from .custodian import fake_list
from .bucket_model import (CERTAIN_TOL, ForbiddenFakes, association_patterns, bucket_disclosure, bucket_statistics,
                           fake_candidates, fake_inference, negative_association_mask, receiver_posterior,
                           revealed_absent)
from .bucket_streams import (CELL_BLOCK, blocked_bincount, bucket_blocks, cell_runs, dense_ids, dense_ids_chunked, dense_lookup,
                             narrow_ints, row_hash_multipliers, same_rows, sparse_disclosure, st_values_distinct,
                             streamed_disclosure, streamed_inference, typed_disclosure, types_disclosure,
                             unique_rows)

#: the files and columns of the format (beyond the QI columns and the SA column)
QIT_COLUMNS = ("bid",)
ST_COLUMNS = ("bid", "count")
FILES = ("qit", "st")

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


#: certificate ``negative_association_learning`` key → mechanism parameter
_LEARNING_PARAMS = {"enabled": "learn_associations", "support": "association_support",
                    "confidence": "association_confidence", "expected": "association_expected"}



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
            first, inv = unique_rows(real.astype(np.int64))
            return real[first].astype(np.int64), inv
        m, nb = b["m"], b["n_buckets"]
        mult = row_hash_multipliers(m)
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
           "bucket_disclosure", "revealed_absent", "fake_inference", "CERTAIN_TOL"]

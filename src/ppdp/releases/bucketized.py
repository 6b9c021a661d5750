"""The "bucketized" release family (SPEC §5; Wang et al. 2011 §3, Xiao & Tao 2006).

Files:
- ``qit.parquet``: the QI columns (labels, dictionary-encoded) and ``bid`` (int64);
- ``st.parquet``: ``bid``, the SA column (labels), ``count`` (int64) and ``fake`` (bool; a
  real publication strips it — see ``publish_fake_flag``). A bucket's real values carry
  their counts; each of its σ fake values appears once with count 1.

Certificate: ``thresholds`` (SA label → f'), ``loss`` = Σ(|g|−1)², ``mse`` = loss/(N−1),
``n_buckets``, ``bucket_sizes`` (size → number of buckets), ``fake_values`` (σ),
``negative_associations``, and per mechanism ``method`` / ``proven_optimal`` (F'-privacy) or
``l`` (Anatomy).

Estimator (Anatomy's, Xiao & Tao 2006): est(P ∧ S) = Σ_g n_g(P)·ĉ_g(S)/|g|, with n_g(P) the
QIT rows of g meeting the QI predicate and ĉ_g(S) the ST count of g on the SA predicate,
corrected for fakes without using the fake flag (see ``ppdp.mechanisms.bucketization.fakes``).
It is evaluated as per-row weights w[row, x] = ĉ_{g(row)}(x)/|g(row)| summed over rows with the
same QI values, on the shared :class:`~ppdp.queries.CountIndex`.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np
import pyarrow as pa

from ..errors import ReleaseError
from .base import Release, VerifyReport, codes_to_labels, register_family


def bucket_statistics(sizes: np.ndarray, n_rows: int) -> dict[str, Any]:
    """Loss, MSE, n_buckets and the size histogram of a list of bucket sizes (Def. 3)."""
    sizes = np.asarray(sizes, dtype=np.int64)
    loss = int(((sizes - 1) ** 2).sum())
    uniq, cnt = np.unique(sizes, return_counts=True)
    return {
        "loss": loss,
        "mse": loss / (n_rows - 1) if n_rows > 1 else 0.0,
        "n_buckets": int(len(sizes)),
        "bucket_sizes": {str(int(s)): int(c) for s, c in zip(uniq, cnt)},
    }


def build_tables(table, bid: np.ndarray, counts: np.ndarray, fake: np.ndarray, rng: np.random.Generator,
                 publish_fake_flag: bool = True) -> dict[str, pa.Table]:
    """qit / st Arrow tables from the per-row bucket ids, the (relabelled) counts matrix
    (n_buckets × m) and the fake matrix (n_buckets × m, True = injected fake)."""
    from ..mechanisms.bucketization.apply import grouped_random_order

    sa = table.sa
    qit_order = grouped_random_order(bid, rng)  # grouped by (random) bucket id, random inside
    qit = {c: codes_to_labels(table.codes(c)[qit_order], table.domain(c)) for c in table.quasi}
    qit["bid"] = pa.array(bid[qit_order], pa.int64())
    return {"qit": pa.table(qit), "st": st_table(counts, fake, rng, sa, table.domain(sa), publish_fake_flag)}


def st_table(counts: np.ndarray, fake: np.ndarray, rng: np.random.Generator, sa: str, labels,
             publish_fake_flag: bool = True) -> pa.Table:
    """st.parquet from the counts and fake matrices alone (no rows needed): one row per
    (bucket, value) with its count, each fake a count-1 row, random value order in a bucket."""
    from ..mechanisms.bucketization.apply import grouped_random_order

    rb, rc = np.nonzero(counts)
    fb, fc = np.nonzero(fake)
    st_bid = np.concatenate([rb, fb]).astype(np.int64)
    st_code = np.concatenate([rc, fc])
    st_count = np.concatenate([counts[rb, rc], np.ones(len(fb), dtype=np.int64)]).astype(np.int64)
    st_fake = np.concatenate([np.zeros(len(rb), bool), np.ones(len(fb), bool)])
    st_order = grouped_random_order(st_bid, rng)  # value order inside a bucket is random
    st = {"bid": pa.array(st_bid[st_order], pa.int64()),
          sa: codes_to_labels(st_code[st_order], labels),
          "count": pa.array(st_count[st_order], pa.int64())}
    if publish_fake_flag:
        st["fake"] = pa.array(st_fake[st_order], pa.bool_())
    return pa.table(st)


@register_family("bucketized")
class BucketizedRelease(Release):
    def __init__(self, manifest: Mapping[str, Any], tables: Mapping[str, pa.Table]):
        super().__init__(manifest, tables)
        self._index = None

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

    def _table(self, name: str, columns: list[str]) -> pa.Table:
        if name not in self.tables:
            raise ReleaseError(f"{name}.parquet is missing")
        t = self.tables[name]
        missing = [c for c in columns if c not in t.column_names]
        if missing:
            raise ReleaseError(f"{name}.parquet lacks column(s) {missing}")
        return t

    def buckets(self) -> dict[str, Any]:
        """Decoded release: dense bucket index per QIT row and per ST row, sizes, observed
        counts matrix (n_buckets × m) and, if published, the fake matrix."""
        qit = self._table("qit", self.quasi + ["bid"])
        st = self._table("st", ["bid", self.sa, "count"])
        qbid = qit.column("bid").to_numpy().astype(np.int64)
        ids, qb = np.unique(qbid, return_inverse=True)
        sbid = st.column("bid").to_numpy().astype(np.int64)
        sb = np.searchsorted(ids, sbid)
        sb_clip = np.minimum(sb, max(len(ids) - 1, 0))
        if len(sbid) and (len(ids) == 0 or not np.array_equal(ids[sb_clip], sbid)):
            raise ReleaseError("st.parquet names bucket ids that no QIT row has")
        sc = self.codes("st", self.sa)
        cnt = st.column("count").to_numpy().astype(np.int64)
        m = len(self.domains[self.sa])
        nb = len(ids)
        fake = None
        if "fake" in st.column_names:
            fake = st.column("fake").to_numpy(zero_copy_only=False).astype(bool)
        return {"qb": qb.ravel(), "sb": sb_clip, "sc": sc, "count": cnt, "fake_rows": fake, "n_buckets": nb,
                "sizes": np.bincount(qb.ravel(), minlength=nb), "m": m}

    # ------------------------------------------------------------ estimator
    def _build_index(self):
        from ..mechanisms.bucketization.fakes import correct_counts, negative_association_mask
        from ..queries import CountIndex
        from scipy import sparse

        b = self.buckets()
        nb, m = b["n_buckets"], b["m"]
        obs = np.zeros((nb, m), dtype=np.float64)
        np.add.at(obs, (b["sb"], b["sc"]), b["count"])
        sigma = int(self.certificate.get("fake_values", 0))
        qi_codes = {c: self.codes("qit", c) for c in self.quasi}
        forbidden = None
        assoc = self.certificate.get("negative_associations") or []
        if sigma and assoc:
            forbidden = negative_association_mask(b["qb"], nb, qi_codes, self.domains, self.sa, assoc)
        chat, _ = correct_counts(obs, sigma, forbidden)
        cw = chat / np.maximum(b["sizes"], 1)[:, None]
        # rows with identical QI values are interchangeable for every query: sum their weights
        n = len(b["qb"])
        if self.quasi:
            dims = [len(self.domains[c]) for c in self.quasi]
            key = np.ravel_multi_index([qi_codes[c].astype(np.int64) for c in self.quasi], dims)
            uniq, inv = np.unique(key, return_inverse=True)
            combo = dict(zip(self.quasi, np.unravel_index(uniq, dims)))
        else:
            uniq, inv, combo = np.zeros(1), np.zeros(n, dtype=np.int64), {}
        P = sparse.csr_matrix((np.ones(n), (inv.ravel(), b["qb"])), shape=(len(uniq), nb))
        W = np.asarray(P @ cw)
        return CountIndex(combo, {c: len(self.domains[c]) for c in self.quasi}, W)

    def answer(self, workload) -> np.ndarray:
        from ..queries import split_masks

        wl, masks = self.resolve(workload)
        if self._index is None:
            self._index = self._build_index()
        rest, sel = split_masks(masks, self.sa, len(self.domains[self.sa]))
        return (self._index.sums(rest) * sel).sum(axis=1)

    # ---------------------------------------------------------------- verify
    def _verify(self, rep: VerifyReport, table) -> None:
        cert = self.certificate
        for key in ("thresholds", "loss", "mse", "n_buckets", "bucket_sizes", "fake_values"):
            rep.check(key in cert, f"certificate has {key!r}", f"certificate lacks {key!r}")
        if rep.problems:
            return
        sa, dom = self.sa, self.domains[self.sa]
        b = self.buckets()
        for c in self.quasi:
            self.codes("qit", c)  # raises ReleaseError on a label outside the domain
        rep.checks.append("every published label lies in its domain")
        nb, m, sizes = b["n_buckets"], b["m"], b["sizes"]
        n = len(b["qb"])
        sigma = int(cert["fake_values"])
        rep.check(n == int(self.manifest["n_published"]), "QIT has n_published rows",
                  f"qit.parquet has {n} rows, the manifest says n_published = {self.manifest['n_published']}")
        # ST rows: one per (bucket, value), positive counts
        pair = b["sb"] * m + b["sc"]
        rep.check(len(np.unique(pair)) == len(pair), "each SA value appears at most once per bucket in ST",
                  "st.parquet repeats an SA value within a bucket (fake values must be distinct and absent from the real values)")
        rep.check(bool((b["count"] >= 1).all()), "ST counts are ≥ 1", "st.parquet has counts < 1")
        obs = np.zeros((nb, m), dtype=np.int64)
        np.add.at(obs, (b["sb"], b["sc"]), b["count"])
        fake = np.zeros((nb, m), dtype=bool)
        thr = np.array([float(cert["thresholds"].get(lab, np.nan)) for lab in dom])
        rep.check(not np.isnan(thr).any(), "a threshold for every SA value",
                  f"certificate lacks thresholds for {[lab for lab, t in zip(dom, thr) if np.isnan(t)][:5]}")
        if b["fake_rows"] is not None:
            fr = b["fake_rows"]
            rep.check(bool((b["count"][fr] == 1).all()), "fake values have count 1", "a fake ST row has count ≠ 1")
            fake[b["sb"][fr], b["sc"][fr]] = True
            real = obs.copy()
            real[fake] = 0
            n_fake = fake.sum(axis=1)
            rep.check(bool((n_fake == sigma).all()), f"every bucket has exactly σ = {sigma} fake values",
                      f"{int((n_fake != sigma).sum())} bucket(s) do not have exactly {sigma} fake values")
            rep.check(np.array_equal(real.sum(axis=1), sizes), "QIT bucket sizes = ST real counts per bucket",
                      f"{int((real.sum(axis=1) != sizes).sum())} bucket(s) have QIT size ≠ ST real count")
            ambiguous = np.zeros(nb, dtype=np.int64)
        else:
            # fake flag stripped: a count-1 value whose share 1/|g| would exceed f' must be a fake
            real = obs.copy()
            tol = 1e-9
            amb = (obs == 1) & (1.0 / np.maximum(sizes, 1)[:, None] > thr[None, :] + tol)
            real[amb] = 0
            ambiguous = amb.sum(axis=1)
            rep.check(bool((ambiguous <= sigma).all()), "fake flag absent: values over threshold number ≤ σ per bucket",
                      f"{int((ambiguous > sigma).sum())} bucket(s) have more over-threshold count-1 values than σ = {sigma}")
            rep.check(np.array_equal(obs.sum(axis=1), sizes + sigma), "ST counts per bucket = QIT size + σ",
                      f"{int((obs.sum(axis=1) != sizes + sigma).sum())} bucket(s) have ST total ≠ |g| + σ")
            rep.facts["fake_flag"] = "absent (published without it)"
        # privacy: every real share ≤ f'
        over = real / np.maximum(sizes, 1)[:, None] > thr[None, :]  # Pr(x | t, g) = |g, x|/|g| ≤ f' (Def. 2)
        rep.check(not over.any(), "every bucket's SA shares ≤ f' (F'-privacy)",
                  f"{int(over.any(axis=1).sum())} bucket(s) exceed a threshold, e.g. value {dom[int(np.argwhere(over)[0][1])]!r}"
                  if over.any() else None)
        if "l" in cert:
            ell = int(cert["l"])
            distinct = (real > 0).sum(axis=1)
            rep.check(bool((distinct >= ell).all()) and not (real * ell > sizes[:, None]).any(),
                      f"ℓ-diversity (Anatomy): each bucket ≥ ℓ = {ell} distinct values, share ≤ 1/ℓ",
                      f"{int((distinct < ell).sum())} bucket(s) hold fewer than ℓ = {ell} distinct values or a share > 1/ℓ")
        # fakes respect the negative associations
        assoc = cert.get("negative_associations") or []
        if assoc and fake.any():
            from ..mechanisms.bucketization.fakes import negative_association_mask

            qi_codes = {c: self.codes("qit", c) for c in self.quasi}
            forb = negative_association_mask(b["qb"], nb, qi_codes, self.domains, sa, assoc)
            rep.check(not (fake & forb).any(), "no fake value contradicts a negative association",
                      f"{int((fake & forb).sum())} fake value(s) sit in a bucket holding a negatively associated QI value")
        # recompute the utility certificate
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
        if table is not None:
            self._verify_source(rep, table, real)

    def _fake_flag_published(self) -> bool:
        return "fake" in self.tables["st"].column_names

    def _observed_totals(self) -> np.ndarray:
        m = len(self.domains[self.sa])
        return np.bincount(self.codes("st", self.sa), weights=self.tables["st"].column("count").to_numpy(),
                           minlength=m).astype(np.int64)

    def _verify_source(self, rep: VerifyReport, table, real: np.ndarray) -> None:
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
            pub = np.sort(np.ravel_multi_index([self.codes("qit", c).astype(np.int64) for c in cols], dims))
            src = np.sort(np.ravel_multi_index([table.codes(c).astype(np.int64) for c in cols], dims))
            rep.check(np.array_equal(pub, src), "QIT rows = the source table's QI rows (as a multiset)",
                      "the QIT's QI rows differ from the source table's (some input row is missing or duplicated)")
        src_counts = table.counts(sa)
        if self._fake_flag_published():
            rep.check(np.array_equal(real.sum(axis=0), src_counts), "ST real SA counts = the source table's",
                      "the ST's real SA counts differ from the source table's")
        else:  # fakes unidentifiable: published counts cover the table's, with exactly σ per bucket extra
            obs_tot = self._observed_totals()
            extra = int(self.certificate["fake_values"]) * int(len(np.unique(self.tables["qit"].column("bid").to_numpy())))
            rep.check(bool((obs_tot >= src_counts).all()) and int(obs_tot.sum() - src_counts.sum()) == extra,
                      "ST SA counts = the source table's plus σ fakes per bucket",
                      "the ST's SA counts do not cover the source table's plus σ fakes per bucket")

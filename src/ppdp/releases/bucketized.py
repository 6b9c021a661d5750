"""The "bucketized" release family (SPEC §5; Wang et al. 2011 §3, Xiao & Tao 2006).

Files:
- ``qit.parquet``: the QI columns (labels, dictionary-encoded) and ``bid`` (int64);
- ``st.parquet``: ``bid``, the SA column (labels), ``count`` (int64) and ``fake`` (bool; a
  real publication strips it — see ``publish_fake_flag``). A bucket's real values carry
  their counts; each of its σ fake values appears once with count 1.

Certificate: the typed claim (``model`` "F'-privacy" with ``thresholds``, θ, b, overrides,
sensitive values — :mod:`ppdp.claims.fprivacy` — or "l-diversity" with ``l`` and
``thresholds`` = 1/ℓ — :mod:`ppdp.claims.ldiversity`), plus the descriptive statistics
``loss`` = Σ(|g|−1)², ``mse`` = loss/(N−1), ``n_buckets``, ``bucket_sizes`` (size → number of
buckets), ``fake_values`` (σ), ``negative_associations`` and, for F'-privacy, ``method`` /
``proven_optimal``.

This module is the public model a receiver knows: the decoded buckets, the observed and (as
far as the files show them) real counts, and the file-format checks of ``verify``. The claim
re-checks itself (``Claim.check``); the estimators live in :mod:`ppdp.estimators.bucketized`.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np
import pyarrow as pa

from ..claims import claim_of
from ..errors import ReleaseError, SchemaError
from .base import Release, VerifyReport, register_family


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


def negative_association_mask(bid: np.ndarray, n_buckets: int, qi_codes: Mapping[str, np.ndarray],
                              domains: Mapping[str, Sequence[str]], sa: str,
                              associations: Sequence[Sequence[str]] | None) -> np.ndarray:
    """Boolean (n_buckets × m): True where SA value x must not be injected into bucket g
    because g holds a record with a QI value z and (z, x) is a negative association
    (Wang et al. 2011, §6). Used by the writer, by verify and by the estimator's correction."""
    sa_dom = list(domains[sa])
    forbid = np.zeros((n_buckets, len(sa_dom)), dtype=bool)
    for assoc in associations or ():
        col, z, x = (str(a) for a in assoc)
        if col not in qi_codes:
            raise SchemaError(f"negative association {list(assoc)}: {col!r} is not a quasi-identifier ({sorted(qi_codes)})")
        dom = list(domains[col])
        if z not in dom:
            raise SchemaError(f"negative association {list(assoc)}: {z!r} is not a value of {col!r}")
        if x not in sa_dom:
            raise SchemaError(f"negative association {list(assoc)}: {x!r} is not a value of {sa!r}")
        holders = np.unique(bid[qi_codes[col] == dom.index(z)])
        forbid[holders, sa_dom.index(x)] = True
    return forbid


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
        return [list(map(str, a)) for a in self.certificate.get("negative_associations") or []]

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
        if self._decoded is not None:
            return self._decoded
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
        self._decoded = {"qb": qb.ravel(), "sb": sb_clip, "sc": sc, "count": cnt, "fake_rows": fake, "n_buckets": nb,
                         "sizes": np.bincount(qb.ravel(), minlength=nb), "m": m}
        return self._decoded

    def bucket_sizes(self) -> np.ndarray:
        """|g| per bucket (QIT rows), in dense bucket order."""
        return self.buckets()["sizes"]

    def observed_counts(self) -> np.ndarray:
        """ST counts per (bucket, SA code), fakes included (int64, n_buckets × m)."""
        b = self.buckets()
        obs = np.zeros((b["n_buckets"], b["m"]), dtype=np.int64)
        np.add.at(obs, (b["sb"], b["sc"]), b["count"])
        return obs

    def fake_matrix(self) -> np.ndarray | None:
        """True where the published fake flag marks a fake value; None when the flag is stripped."""
        b = self.buckets()
        if b["fake_rows"] is None:
            return None
        fake = np.zeros((b["n_buckets"], b["m"]), dtype=bool)
        fr = b["fake_rows"]
        fake[b["sb"][fr], b["sc"][fr]] = True
        return fake

    def real_counts_from_files(self) -> np.ndarray | None:
        """The real counts (n_buckets × m) when the files show them exactly — σ = 0 or the fake
        flag published — else None."""
        obs = self.observed_counts()
        fake = self.fake_matrix()
        if fake is not None:
            obs[fake] = 0
            return obs
        return obs if self.fake_values == 0 else None

    def real_counts(self, thresholds: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """Real counts for the privacy test, and (fake flag stripped, σ > 0) the number of
        count-1 values per bucket whose share 1/|g| would exceed ``thresholds``: those must be
        fakes and are removed; the others are kept (the test is then conservative)."""
        exact = self.real_counts_from_files()
        if exact is not None:
            return exact, None
        obs = self.observed_counts()
        sizes = self.bucket_sizes()
        amb = (obs == 1) & (1.0 / np.maximum(sizes, 1)[:, None] > np.asarray(thresholds)[None, :] + 1e-9)
        obs[amb] = 0
        return obs, amb.sum(axis=1)

    def forbidden_fakes(self) -> np.ndarray:
        """(n_buckets × m) True where a published negative association forbids a fake value."""
        b = self.buckets()
        qi_codes = {c: self.codes("qit", c) for c in self.quasi}
        return negative_association_mask(b["qb"], b["n_buckets"], qi_codes, self.domains, self.sa,
                                         self.negative_associations)

    # ---------------------------------------------------------------- verify
    def _verify(self, rep: VerifyReport, table) -> None:
        """File-format checks and the descriptive statistics, then the claim's own check."""
        cert = self.certificate
        for key in ("loss", "mse", "n_buckets", "bucket_sizes", "fake_values"):
            rep.check(key in cert, f"certificate has {key!r}", f"certificate lacks {key!r}")
        if rep.problems:
            return
        params = self.manifest.get("params", {})
        for key in ("fake_values", "negative_associations", "method"):
            if key in params:
                want = params[key] if key != "negative_associations" else [list(a) for a in params[key] or []]
                rep.check(cert.get(key) == want, f"certificate {key} = params.{key}",
                          f"certificate {key} = {cert.get(key)!r} but params.{key} = {params[key]!r}")
        if "publish_fake_flag" in params:
            flagged = "fake" in self.tables["st"].column_names
            rep.check(bool(params["publish_fake_flag"]) == flagged, "the fake flag is published iff params.publish_fake_flag",
                      f"params.publish_fake_flag = {params['publish_fake_flag']!r} but st.parquet "
                      f"{'has' if flagged else 'lacks'} the 'fake' column")
        if "method" in cert:
            rep.check(("proven_optimal" in cert) == (cert["method"] == "optimal"),
                      "proven_optimal is stated for the optimal method only",
                      "certificate proven_optimal does not match its method")
        b = self.buckets()
        for c in self.quasi:
            self.codes("qit", c)  # raises ReleaseError on a label outside the domain
        rep.checks.append("every published label lies in its domain")
        m, sizes = b["m"], b["sizes"]
        n = len(b["qb"])
        if "max_bucket" in params and len(sizes):
            rep.check(int(sizes.max()) <= int(params["max_bucket"]), "every bucket holds ≤ max_bucket records",
                      f"a bucket holds {int(sizes.max())} records, more than params.max_bucket = {params['max_bucket']}")
        sigma = self.fake_values
        rep.check(n == int(self.manifest["n_published"]), "QIT has n_published rows",
                  f"qit.parquet has {n} rows, the manifest says n_published = {self.manifest['n_published']}")
        # ST rows: one per (bucket, value), positive counts
        pair = b["sb"] * m + b["sc"]
        rep.check(len(np.unique(pair)) == len(pair), "each SA value appears at most once per bucket in ST",
                  "st.parquet repeats an SA value within a bucket (fake values must be distinct and absent from the real values)")
        rep.check(bool((b["count"] >= 1).all()), "ST counts are ≥ 1", "st.parquet has counts < 1")
        obs = self.observed_counts()
        fake = self.fake_matrix()
        if fake is not None:
            fr = b["fake_rows"]
            rep.check(bool((b["count"][fr] == 1).all()), "fake values have count 1", "a fake ST row has count ≠ 1")
            real = obs.copy()
            real[fake] = 0
            n_fake = fake.sum(axis=1)
            rep.check(bool((n_fake == sigma).all()), f"every bucket has exactly σ = {sigma} fake values",
                      f"{int((n_fake != sigma).sum())} bucket(s) do not have exactly {sigma} fake values")
            rep.check(np.array_equal(real.sum(axis=1), sizes), "QIT bucket sizes = ST real counts per bucket",
                      f"{int((real.sum(axis=1) != sizes).sum())} bucket(s) have QIT size ≠ ST real count")
            assoc = self.negative_associations
            if assoc and fake.any():
                forb = self.forbidden_fakes()
                rep.check(not (fake & forb).any(), "no fake value contradicts a negative association",
                          f"{int((fake & forb).sum())} fake value(s) sit in a bucket holding a negatively associated QI value")
        else:
            rep.check(np.array_equal(obs.sum(axis=1), sizes + sigma), "ST counts per bucket = QIT size + σ",
                      f"{int((obs.sum(axis=1) != sizes + sigma).sum())} bucket(s) have ST total ≠ |g| + σ")
            rep.facts["fake_flag"] = "absent (published without it)"
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
        if table is not None:
            self._verify_source(rep, table)
        # the model part: the typed claim re-derives itself from params, the files and the source
        # (to move into Release.verify once every family writes a typed claim)
        claim_of(self.manifest).check(self, rep, table)

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
            pub = np.sort(np.ravel_multi_index([self.codes("qit", c).astype(np.int64) for c in cols], dims))
            src = np.sort(np.ravel_multi_index([table.codes(c).astype(np.int64) for c in cols], dims))
            rep.check(np.array_equal(pub, src), "QIT rows = the source table's QI rows (as a multiset)",
                      "the QIT's QI rows differ from the source table's (some input row is missing or duplicated)")
        src_counts = table.counts(sa)
        real = self.real_counts_from_files()
        if real is not None:
            rep.check(np.array_equal(real.sum(axis=0), src_counts), "ST real SA counts = the source table's",
                      "the ST's real SA counts differ from the source table's")
        else:  # fakes unidentifiable: published counts cover the table's, with exactly σ per bucket extra
            obs_tot = self.observed_counts().sum(axis=0)
            extra = self.fake_values * int(self.buckets()["n_buckets"])
            rep.check(bool((obs_tot >= src_counts).all()) and int(obs_tot.sum() - src_counts.sum()) == extra,
                      "ST SA counts = the source table's plus σ fakes per bucket",
                      "the ST's SA counts do not cover the source table's plus σ fakes per bucket")


__all__ = ["BucketizedRelease", "bucket_statistics", "negative_association_mask"]

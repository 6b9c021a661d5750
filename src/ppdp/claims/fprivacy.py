"""The F'-privacy claim of a bucketized release (Wang, Wang, Fu, Wong 2011, §3).

Claim: for every bucket g and SA value x, the adversary's posterior Pr(x | t ∈ g) =
|g, x|/|g| is at most f'_x (Definition 2), with the thresholds

    f'_i = min(1, θ·f_i + b)   (f_i = o_i/|T|, the SA frequencies of the input table),

overridden per label by ``overrides``, and f'_i = 1 for values outside ``sensitive_values``
when that set is given. Lemma 1: a bucketization meeting them exists iff f'_i ≥ f_i.

The thresholds are derived once at publish time from the parameters and the SA counts o_i
(:func:`fprime_thresholds`, which the planners import from here) and written in the manifest
as the certificate. ``verify`` re-derives them from ``params`` and the SA counts: from the
published files when the real counts can be read there (no fake values, or the fake flag is
published), from the source table when given; otherwise it reports that they cannot be
re-derived — a threshold is never taken on trust.

:func:`privacy_cap` is ⌊f'·S⌋ computed so that it agrees exactly with the test c/S ≤ f'.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar, Collection, Mapping, Sequence, cast

import numpy as np

from ..errors import InfeasibleError
from ..validation import FrozenDict
from . import Claim

#: relative tolerance when comparing re-derived thresholds with the certificate's
THRESHOLD_TOL = 1e-12
#: tolerance of the share test |g, x|/|g| ≤ f'
SHARE_TOL = 1e-9


def privacy_cap(fprime, size) -> np.ndarray:
    """Largest count ``c`` with ``c / size ≤ f'`` (float division), i.e. ``⌊f'·size⌋``, broadcast.

    Computed as ``⌊f'·S⌋`` and corrected by one in either direction where the product is off
    by a rounding error, so ``cap / S ≤ f' < (cap + 1) / S`` holds in floating point (a
    decimal threshold such as 0.29 allows 29 records of 100 although 0.29·100 < 29 in binary).
    """
    f = np.asarray(fprime, dtype=np.float64)
    s = np.asarray(size, dtype=np.float64)
    c = np.floor(f * s)
    c = np.where((c + 1.0) / np.where(s > 0, s, 1.0) <= f, c + 1.0, c)
    c = np.where((c > 0) & (c / np.where(s > 0, s, 1.0) > f), c - 1.0, c)
    c = np.clip(c, 0.0, s)
    return c.astype(np.int64)


def _is_number(v) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_))


def fprime_thresholds(counts: np.ndarray, labels: Sequence[str], theta: float = 8.0, floor: float = 0.02,
                      overrides: Mapping[str, float] | None = None,
                      sensitive: Collection[str] | None = None) -> np.ndarray:
    """Thresholds f'_i (float64, one per label) for SA counts ``counts`` (o_i, in label order).

    Raises :class:`InfeasibleError` for an override naming an unknown label or outside (0, 1],
    an unknown label in ``sensitive``, bad θ / b, or when some f'_i < f_i (Lemma 1).
    """
    o = np.asarray(counts, dtype=np.int64)
    labels = [str(x) for x in labels]
    if o.ndim != 1 or len(o) != len(labels):
        raise InfeasibleError(f"need one SA count per label: {o.shape} counts for {len(labels)} labels")
    if (o < 0).any():
        raise InfeasibleError("SA counts must be non-negative")
    n = int(o.sum())
    if n <= 0:
        raise InfeasibleError("the table is empty: no thresholds to compute")
    if not _is_number(theta) or not math.isfinite(theta) or theta <= 0:
        raise InfeasibleError(f"theta must be a finite number > 0, got {theta!r}")
    if not _is_number(floor) or not math.isfinite(floor) or not 0 <= floor <= 1:
        raise InfeasibleError(f"floor b must be a number in [0, 1], got {floor!r}")
    index = {lab: i for i, lab in enumerate(labels)}

    f = o / n
    fp = np.minimum(1.0, float(theta) * f + float(floor))
    if sensitive is not None:
        sens = {str(s) for s in sensitive}
        unknown = sorted(sens - index.keys())
        if unknown:
            raise InfeasibleError(f"sensitive values not in the SA domain: {', '.join(map(repr, unknown))}")
        mask = np.array([lab not in sens for lab in labels], dtype=bool)
        fp[mask] = 1.0
    if overrides:
        bad_label = sorted(str(k) for k in overrides if str(k) not in index)
        if bad_label:
            raise InfeasibleError(f"threshold overrides name values not in the SA domain: {', '.join(map(repr, bad_label))}"
                                  f" (known: {', '.join(map(repr, labels[:10]))}{', …' if len(labels) > 10 else ''})")
        for k, v in overrides.items():
            if not _is_number(v) or not math.isfinite(v) or not 0 < v <= 1:
                raise InfeasibleError(f"threshold override for {str(k)!r} must be a number in (0, 1], got {v!r}")
            fp[index[str(k)]] = float(v)

    # Lemma 1: feasible iff f'_i ≥ f_i, i.e. o_i ≤ cap(f'_i, |T|) (one bucket holding the whole table)
    bad = np.flatnonzero(o > privacy_cap(fp, n))
    if len(bad):
        shown = ", ".join(f"{labels[i]!r} (f = {f[i]:.4g} > f' = {fp[i]:.4g})" for i in bad[:10])
        more = f" and {len(bad) - 10} more" if len(bad) > 10 else ""
        raise InfeasibleError(f"F'-privacy is infeasible (Lemma 1 needs f'_i ≥ f_i for every value): {shown}{more}; "
                              "raise these thresholds")
    return fp


# ---------------------------------------------------------------------------- shared checks
def threshold_array(thresholds: Mapping[str, float], labels: Sequence[str]) -> np.ndarray:
    """Thresholds in label order (NaN where a label has none)."""
    return np.array([float(thresholds.get(lab, np.nan)) for lab in labels], dtype=np.float64)


SHARE_BLOCK = 1 << 22  # ST rows per block of check_bucket_shares


def check_bucket_shares(release, report, thresholds: np.ndarray, what: str = "F'-privacy") -> tuple[np.ndarray | None, int]:
    """Every bucket's real SA share |g, x|/|g| ≤ the bound of x (Definition 2).

    Returns ``(counts, unknown)`` (``release.real_counts()``): the exact real counts and 0 when
    the fakes are known — ``(None, 0)`` when they were tested row by row
    (``release.sparse_real_rows()``: σ = 0 or a published fake flag) —  (σ = 0, or the custodian file), else the observed counts and σ. With
    unidentified fakes, a value listed ≥ 2 times is real and its share is tested; a value
    listed once is either real or a fake, and the publication rule draws fakes only where a
    real record could hold them, so each count-1 value must satisfy 1/|g| ≤ its bound."""
    dom = release.domains[release.sa]
    thr = np.asarray(thresholds, dtype=np.float64)
    rows = release.sparse_real_rows() if hasattr(release, "sparse_real_rows") else None
    if rows is not None:  # the real counts are known: test the ST rows, no n_buckets × m matrix
        sb, sc, cnt = rows
        sizes = np.maximum(release.bucket_sizes(), 1)
        bound = thr + SHARE_TOL
        bad_b, bad_c = [], []
        for a in range(0, len(sb), SHARE_BLOCK):  # block by block: O(block) temporaries, not O(rows)
            over = np.flatnonzero(cnt[a:a + SHARE_BLOCK] / sizes[sb[a:a + SHARE_BLOCK]] > bound[sc[a:a + SHARE_BLOCK]])
            if len(over):
                bad_b.append(np.asarray(sb[a + over], dtype=np.int64))
                bad_c.append(np.asarray(sc[a + over], dtype=np.int64))
        if bad_b:
            ob, oc = np.concatenate(bad_b), np.concatenate(bad_c)
            report.check(False, f"every bucket's SA shares ≤ its bound ({what})",
                         f"{len(np.unique(ob))} bucket(s) exceed a threshold, e.g. value {dom[int(oc[np.argmin(ob)])]!r}")
        else:
            report.check(True, f"every bucket's SA shares ≤ its bound ({what})", None)
        return None, 0
    if getattr(release, "rowwise", lambda: False)():  # fakes unidentified, over ranges of buckets
        return None, _check_range_shares(release, report, thr, what)
    counts, unknown = release.real_counts()
    sizes = np.maximum(release.bucket_sizes(), 1)
    test = counts
    if unknown:
        ones = counts == 1
        bad = ones & (privacy_cap(thr[None, :], sizes[:, None]) < 1)
        report.check(not bad.any(), "every value listed once could be a real record's (fakes are drawn only where a "
                     "real record could hold them)",
                     f"{int(bad.sum())} value(s) listed once in a bucket whose size makes their share 1/|g| exceed the "
                     f"bound, e.g. {dom[int(np.argwhere(bad)[0][1])]!r}: neither a real record nor a fake can be there"
                     if bad.any() else None)
        test = np.where(ones, 0, counts)
    over = test / sizes[:, None] > thr[None, :] + SHARE_TOL
    report.check(not over.any(), f"every bucket's SA shares ≤ its bound ({what})",
                 f"{int(over.any(axis=1).sum())} bucket(s) exceed a threshold, e.g. value "
                 f"{dom[int(np.argwhere(over)[0][1])]!r}" if over.any() else None)
    return counts, unknown


def _check_range_shares(release, report, thr: np.ndarray, what: str) -> int:
    """The unidentified-fakes tests of :func:`check_bucket_shares` over
    ``release.bucket_ranges()`` (the same checks and messages; the first offending bucket and
    value in bucket order, as ``np.argwhere`` finds them on the matrix). Returns σ."""
    dom = release.domains[release.sa]
    unknown = release.fake_values
    n_bad, n_over, bad_at, over_at = 0, 0, None, None
    for obs, size in release.bucket_ranges()():
        size = np.maximum(size, 1)
        test = obs
        if unknown:
            ones = obs == 1
            sizes, at = np.unique(size, return_inverse=True)  # a few distinct sizes
            bad = ones & (privacy_cap(thr[None, :], sizes[:, None]) < 1)[at.ravel()]
            if bad.any():
                n_bad += int(bad.sum())
                bad_at = bad_at if bad_at is not None else int(np.argwhere(bad)[0][1])
            test = np.where(ones, 0, obs)
        over = test / size[:, None] > thr[None, :] + SHARE_TOL
        if over.any():
            n_over += int(over.any(axis=1).sum())
            over_at = over_at if over_at is not None else int(np.argwhere(over)[0][1])
    if unknown:
        report.check(not n_bad, "every value listed once could be a real record's (fakes are drawn only where a "
                     "real record could hold them)",
                     f"{n_bad} value(s) listed once in a bucket whose size makes their share 1/|g| exceed the "
                     f"bound, e.g. {dom[bad_at]!r}: neither a real record nor a fake can be there"
                     if n_bad else None)
    report.check(not n_over, f"every bucket's SA shares ≤ its bound ({what})",
                 f"{n_over} bucket(s) exceed a threshold, e.g. value {dom[over_at]!r}" if n_over else None)
    return unknown


def rederivation_counts(release, report, source=None) -> np.ndarray | None:
    """The real SA counts o_i the thresholds are derived from: from the source table when
    given, else from the files when they show the real counts (σ = 0, or the fakes listed by
    the custodian file); otherwise None (the caller then checks the thresholds against the
    bounds the files put on the counts, :func:`check_thresholds_against_bounds`)."""
    sa, dom = release.sa, list(release.domains[release.sa])
    if source is not None:
        if sa in source.column_names and list(source.domain(sa)) == dom:
            return np.asarray(source.counts(sa), dtype=np.int64)
        report.check(False, "SA counts from the source table",
                     f"the thresholds cannot be re-derived from the source table: its {sa!r} column is missing or "
                     "has another domain")
        return None
    return release.real_totals_from_files()


def count_bounds(release) -> tuple[np.ndarray, np.ndarray]:
    """Bounds ``(lo, hi)`` on the real SA counts o_x that the files give when the fakes are not
    identified: o_x ≤ the listed total of x, and o_x ≥ that minus the count-1 appearances of x
    that the publication rule allows as fakes."""
    if getattr(release, "rowwise", lambda: False)():  # over ranges of buckets, no n_buckets × m matrix
        m = release.buckets()["m"]
        hi = np.zeros(m, dtype=np.int64)
        may = np.zeros(m, dtype=np.int64)
        lo = 0
        for obs, size in release.bucket_ranges()():
            hi += obs.sum(axis=0)
            may += ((obs == 1) & ~release.range_excluded(size, lo)).sum(axis=0)
            lo += len(size)
        return hi - may, hi
    obs = release.observed_counts()
    may_be_fake = (obs == 1) & ~release.fake_excluded()
    hi = obs.sum(axis=0)
    return hi - may_be_fake.sum(axis=0), hi


def implied_counts(thresholds: np.ndarray, labels: Sequence[str], n: int, theta: float, floor: float,
                   overrides: Mapping[str, float] | None = None,
                   sensitive: Collection[str] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The real counts o_x that thresholds f'_x = θ·o_x/N + b reveal (a receiver can invert the
    formula wherever f'_x < 1 and x is neither overridden nor outside the sensitive values):
    ``(o, tol)`` with o = −1 where the formula does not reveal the count (float; ``tol`` is the
    rounding error of the inversion)."""
    thr = np.asarray(thresholds, dtype=np.float64)
    labels = [str(x) for x in labels]
    ov = {str(k) for k in (overrides or {})}
    sens = None if sensitive is None else {str(x) for x in sensitive}
    formula = np.array([lab not in ov and (sens is None or lab in sens) for lab in labels], dtype=bool)
    formula &= thr < 1.0 - 1e-12
    o = np.full(len(labels), -1.0)
    tol = np.zeros(len(labels))
    if n > 0 and theta > 0:
        o = np.where(formula, (thr - float(floor)) * n / float(theta), -1.0)
        tol = np.maximum(1e-6, 8.0 * np.spacing(np.maximum(thr, float(floor))) * n / float(theta))
    return o, tol


def known_totals(claim: "FPrivacyClaim", labels: Sequence[str], n: int) -> np.ndarray:
    """The real SA counts a receiver reads off the F'-privacy thresholds (int64, −1 where the
    thresholds do not reveal one, or where the inversion is not a whole number)."""
    o, tol = implied_counts(claim.threshold_array(labels), labels, n, claim.theta, claim.floor, claim.overrides,
                            claim.sensitive_values)
    r = np.rint(o)
    ok = (o >= 0) & (np.abs(o - r) <= tol) & (tol < 0.5)
    return np.where(ok, r, -1).astype(np.int64)


def check_thresholds_against_bounds(release, report, thr: np.ndarray, params: Mapping[str, Any]) -> None:
    """Without the source table or the custodian file the real counts are not in the files, but
    they are bounded (:func:`count_bounds`): every threshold must be min(1, θ·o_x/N + b) (or its
    override, or 1 for a value outside the sensitive values) for some o_x within the bounds;
    where the formula is invertible, o_x = (f'_x − b)·N/θ must be a whole number in range, and
    the counts together must make up N. A raised threshold, an edited θ or b fails this."""
    dom = list(release.domains[release.sa])
    n = int(release.manifest.get("n_published", 0))
    theta: Any = params.get("theta")
    floor: Any = params.get("floor")
    if not (_is_number(theta) and _is_number(floor)) or theta <= 0 or n <= 0:
        report.check(False, "thresholds checked against params", "params lacks a usable theta / floor")
        return
    lo, hi = count_bounds(release)
    overrides = {str(k): float(v) for k, v in (params.get("overrides") or {}).items() if _is_number(v)}
    sens = params.get("sensitive_values")
    sens = None if sens is None else {str(x) for x in sens}
    bad: list[str] = []
    for i, lab in enumerate(dom):
        if lab in overrides:
            if not math.isclose(thr[i], overrides[lab], rel_tol=THRESHOLD_TOL, abs_tol=THRESHOLD_TOL):
                bad.append(f"{lab!r}: certificate {thr[i]:.6g}, override {overrides[lab]:.6g}")
        elif sens is not None and lab not in sens:
            if thr[i] != 1.0:
                bad.append(f"{lab!r}: certificate {thr[i]:.6g}, a value outside the sensitive values has 1")
    o, tol = implied_counts(thr, dom, n, float(theta), float(floor), overrides, sens)
    formula = np.array([lab not in overrides and (sens is None or lab in sens) for lab in dom], dtype=bool)
    clipped = formula & (thr >= 1.0 - 1e-12)
    inverted = formula & ~clipped
    for i in np.flatnonzero(inverted).tolist():
        r = round(float(o[i]))
        if (tol[i] < 0.5 and abs(o[i] - r) > tol[i]) or not (lo[i] - tol[i] <= o[i] <= hi[i] + tol[i]):
            bad.append(f"{dom[i]!r}: certificate {thr[i]:.6g} implies o = {o[i]:.6g} records, the files allow "
                       f"{int(lo[i])}..{int(hi[i])} whole records")
    for i in np.flatnonzero(clipped).tolist():
        if float(theta) * float(hi[i]) / n + float(floor) < 1.0 - 1e-12:
            bad.append(f"{dom[i]!r}: certificate 1, but θ·o/N + b < 1 for every count the files allow (≤ {int(hi[i])})")
    fixed = inverted
    lo_sum = float(np.rint(o[fixed]).sum() + lo[~fixed].sum())
    hi_sum = float(np.rint(o[fixed]).sum() + hi[~fixed].sum())
    if not lo_sum <= n <= hi_sum:
        bad.append(f"the counts the thresholds imply cannot make up N = {n} (between {lo_sum:.0f} and {hi_sum:.0f})")
    report.check(not bad, "certificate thresholds = min(1, θ·f + b) for SA counts within the files' bounds "
                 "(fakes unidentified)",
                 f"certificate thresholds are not what params give for any SA counts the files allow: {'; '.join(bad[:3])}"
                 + (f" and {len(bad) - 3} more" if len(bad) > 3 else ""))
    report.facts["thresholds"] = ("checked against the files' bounds on the SA counts (exact re-derivation needs the "
                                  "source table or the custodian file)")


def check_fake_placement(release, report, thr: np.ndarray, totals: np.ndarray | None) -> None:
    """With unidentified fakes: some choice of σ fakes per bucket among the count-1 values must
    agree with the publication rule and with the real SA totals ``totals`` (from the source
    table, or those the thresholds reveal; −1 = unknown) — certain conclusions are propagated
    (``release.fake_contradictions``: over ranges of buckets for large releases) and any
    contradiction is a problem."""
    inf = release.fake_contradictions(thr, totals)
    dom = release.domains[release.sa]
    bad = [dom[i] for i in inf["bad_values"][:3]]
    report.check(inf["contradictions"] == 0, "the fake values can be placed consistently with the SA totals",
                 f"no placement of σ fakes per bucket agrees with the files and the SA totals: {inf['bad_buckets']} "
                 f"bucket(s) and {len(inf['bad_values'])} value(s) contradict it" + (f", e.g. {bad}" if bad else ""))


def _same_thresholds(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.isclose(a, b, rtol=THRESHOLD_TOL, atol=THRESHOLD_TOL)


def _param_agrees(report, params: Mapping[str, Any], key: str, value: Any, label: str | None = None) -> None:
    label = label or key
    if key not in params:
        report.check(False, f"params has {key!r}", f"params lacks {key!r} (the claim's {label} cannot be re-derived)")
        return
    p = params[key]
    if isinstance(p, (Mapping, list, tuple)) and not p and not value:
        p = value  # an empty mapping / list states the same as none
    same = (p == value) if not (_is_number(p) and _is_number(value)) else math.isclose(float(p), float(value), rel_tol=1e-12)
    report.check(bool(same), f"certificate {label} = params.{key}",
                 f"certificate {label} = {value!r} but params.{key} = {p!r}")


def _frozen_map(v) -> FrozenDict | None:
    return None if v is None else FrozenDict({str(k): float(x) for k, x in dict(v).items()})


def _plain(v):
    if isinstance(v, Mapping):
        return {str(k): _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    return v


# ---------------------------------------------------------------------------- the claim
@dataclass(frozen=True)
class FPrivacyClaim(Claim):
    """F'-privacy: every bucket's share of x is ≤ f'_x, f' = min(1, θ·f + b) with overrides."""

    model: ClassVar[str] = "F'-privacy"

    thresholds: FrozenDict           # SA label → f'
    theta: float
    floor: float
    overrides: FrozenDict | None = None
    sensitive_values: tuple[str, ...] | None = None

    # ------------------------------------------------------------------ derive
    @classmethod
    def derive(cls, labels: Sequence[str], counts, theta: float, floor: float,
               overrides: Mapping[str, float] | None = None,
               sensitive_values: Sequence[str] | None = None) -> "FPrivacyClaim":
        """The claim for SA counts ``counts`` (in label order); InfeasibleError when Lemma 1 fails."""
        fp = fprime_thresholds(counts, labels, theta=theta, floor=floor, overrides=overrides, sensitive=sensitive_values)
        return cls(FrozenDict({str(lab): float(f) for lab, f in zip(labels, fp)}), float(theta), float(floor),
                   _frozen_map(overrides) if overrides else None,
                   None if sensitive_values is None else tuple(str(s) for s in sensitive_values))

    def threshold_array(self, labels: Sequence[str]) -> np.ndarray:
        return threshold_array(self.thresholds, labels)

    # ------------------------------------------------------------------ manifest form
    def to_certificate(self) -> dict[str, Any]:
        return {"model": self.model, "thresholds": _plain(self.thresholds), "theta": self.theta, "floor": self.floor,
                "overrides": _plain(self.overrides) if self.overrides else None,
                "sensitive_values": None if self.sensitive_values is None else list(self.sensitive_values)}

    @classmethod
    def from_certificate(cls, cert: Mapping[str, Any]) -> "FPrivacyClaim":
        sens = cert.get("sensitive_values")
        return cls(cast(FrozenDict, _frozen_map(cert["thresholds"])), float(cert["theta"]), float(cert["floor"]),
                   _frozen_map(cert.get("overrides")) if cert.get("overrides") else None,
                   None if sens is None else tuple(str(s) for s in sens))

    # ------------------------------------------------------------------ verify
    def check(self, release, report, source=None) -> None:
        params = release.manifest.get("params", {})
        _param_agrees(report, params, "theta", self.theta, "θ")
        _param_agrees(report, params, "floor", self.floor, "b (floor)")
        _param_agrees(report, params, "overrides", _plain(self.overrides) if self.overrides else None)
        _param_agrees(report, params, "sensitive_values",
                      None if self.sensitive_values is None else list(self.sensitive_values))
        dom = list(release.domains[release.sa])
        thr = self.threshold_array(dom)
        missing = [lab for lab, t in zip(dom, thr) if np.isnan(t)]
        report.check(not missing, "a threshold for every SA value", f"certificate lacks thresholds for {missing[:5]}")
        extra = sorted(set(self.thresholds) - set(dom))
        report.check(not extra, "thresholds name only SA values", f"certificate thresholds name unknown values {extra[:5]}")
        if missing:
            return
        o = rederivation_counts(release, report, source)
        if o is None and source is None:
            check_thresholds_against_bounds(release, report, thr, params)
        if release.real_totals_from_files() is None:  # fakes unidentified: can they be placed at all?
            totals = (o if o is not None and source is not None
                      else self.revealed_totals(dom, int(release.manifest.get("n_published", 0))))
            check_fake_placement(release, report, thr, totals)
        if o is not None and int(o.sum()) > 0 and all(k in params for k in ("theta", "floor")):
            try:
                derived = fprime_thresholds(o, dom, theta=params["theta"], floor=params["floor"],
                                            overrides=params.get("overrides"), sensitive=params.get("sensitive_values"))
            except InfeasibleError as e:
                report.check(False, "thresholds re-derived from params", f"the thresholds cannot be re-derived: {e}")
            else:
                ok = _same_thresholds(derived, thr)
                bad = [dom[i] for i in np.flatnonzero(~ok)]
                report.check(bool(ok.all()), "certificate thresholds = min(1, θ·f + b) with overrides, re-derived",
                             f"certificate thresholds differ from those re-derived from params and the SA counts for "
                             f"{len(bad)} value(s), e.g. {bad[0]!r}: certificate {thr[dom.index(bad[0])]:.6g}, "
                             f"re-derived {derived[dom.index(bad[0])]:.6g}" if bad else None)
                thr = np.where(ok, thr, np.minimum(thr, derived))  # the share test uses the stricter bound
        check_bucket_shares(release, report, thr)
        self.check_disclosure(release, report)

    def disclosure(self, release) -> dict[str, Any]:
        """Records whose SA the files disclose with certainty and the largest posterior, for a
        receiver who also reads the real SA counts off the thresholds (θ·o_x/N + b)."""
        dom = list(release.domains[release.sa])
        n = int(release.manifest.get("n_published", 0))
        return release.disclosure(self.revealed_totals(dom, n))

    def revealed_totals(self, labels: Sequence[str], n: int) -> np.ndarray:
        """The real SA counts the thresholds reveal to any receiver (−1 where they do not)."""
        return known_totals(self, labels, n)

    # ------------------------------------------------------------------ audit / words
    def bound(self) -> Mapping[str, Any]:
        return {"name": "f'_x (certificate thresholds)", "posterior": self.thresholds}

    def statement(self) -> str:
        how = f"f'_x = min(1, {self.theta:g}·f_x + {self.floor:g})"
        if self.overrides:
            how += f", overridden for {', '.join(sorted(self.overrides))}"
        if self.sensitive_values is not None:
            how += "; f'_x = 1 for values not listed as sensitive"
        return (f"F'-privacy: in every bucket, the share of each sensitive value x is at most its threshold "
                f"f'_x ({how}), so no adversary who knows a person's QI values infers x with a probability above f'_x.")


__all__ = ["FPrivacyClaim", "fprime_thresholds", "privacy_cap", "threshold_array", "check_bucket_shares",
           "rederivation_counts", "count_bounds", "implied_counts", "known_totals", "check_thresholds_against_bounds",
           "THRESHOLD_TOL", "SHARE_TOL"]

"""Optimal two-size bucketing, Algorithm 1 of Wang, Wang, Fu, Wong (2011), §5.1.

For every pair of sizes M ≤ S1 < S2 ≤ M' the feasible pairs (b1, b2) with S1 b1 + S2 b2 = |T|
form the list Γ(S1, S2) (Lemma 4, eqs 7–10): pair t is (b1⁰ − tΔ1, b2⁰ + tΔ2), t = 0..k, with
Δ1 = LCM/S1, Δ2 = LCM/S2 and k = ⌊b1⁰/Δ1⌋. Loss grows with t by D = Δ2(S2−1)² − Δ1(S1−1)² > 0
(Lemma 5), so the first valid pair of Γ(S1, S2) is the best one for (S1, S2).

Three search strategies, all returning the same setting (same tie-breaking: sizes in
(S1, S2) order, a later pair replaces the best only if strictly better):

- ``pruning="none"`` ("No-pruning" of §7.3): scan Γ(S1, S2) sequentially from t = 0 and stop at
  the first valid pair (Theorem 3 tested at each pair; evaluated in vectorised chunks).
- ``pruning="loss"`` ("Loss-pruning", §5.1.2): the same scan over the prefix Γ′ of pairs whose
  loss is below the best loss so far (Lemma 6); pairs of sizes whose Γ′ is empty are skipped.
- ``pruning="full"`` (Algorithm 1 with privacy-based pruning, §5.1.3): the valid pairs of Γ′
  are found without scanning. FC(S1) holds on a suffix and FC(S2) on a prefix of Γ′ (Lemma 7);
  for each size S the largest b with Σ_i min(⌊f'_i S⌋ b, o_i) ≥ S b is found once by binary
  search, which gives both ends in O(1) per pair. PC(x_i) fails on one contiguous interval of
  Γ′: in fact PC(x_i) ⇔ u_i1 + u_i2 ≥ o_i (because a_ij = min(u_ij, o_i) and u_ij ≥ 0), which is
  linear in t — so eq (15) holds on the whole of Γ′, not only on Γ′(x_i), and the failing
  interval of x_i is a prefix (slope ⌊f'_i S2⌋Δ2 − ⌊f'_i S1⌋Δ1 > 0, eq 16) or a suffix (slope < 0)
  of Γ′ with a closed-form end. The valid pairs are [lo, hi] (from FC) minus the union of the
  failing intervals; sweeping them left to right, the first valid pair is the largest prefix
  end + 1, if it is ≤ the smallest suffix start − 1. This costs O(m) per (S1, S2) and does no
  work proportional to |T| (Theorem 4's O(m log |T|) becomes O(m) plus one O(m log |T|)
  binary search per size). Pairs (S1, S2) are processed a row (fixed S1) at a time, vectorised
  over S2; Γ′ is cut by the best loss at the start of the row and the row's results are then
  taken in S2 order with strict improvement, which returns exactly the sequential answer.
  Both pruned variants also stop once N(S1−1)²/S1 — a lower bound of the loss of any setting
  whose smallest size is ≥ S1 — reaches the best loss.

One-size settings are the pairs with b2 = 0 or b1 = 0, which Γ contains (the first pair of
Γ(S1, S2) has b2 = 0 when S1 divides |T|, the last has b1 = 0 when S2 divides |T|). When
M = M' only one size exists and Lemma 2 decides.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from ...errors import InfeasibleError, PpdpError
from .assignment import record_partition
from .plan import BucketSetting, SizeClass, min_bucket_size, privacy_cap
from .validity import one_size_valid

PRUNING = ("full", "loss", "none")


# ---------------------------------------------------------------- Γ(S1, S2), Lemma 4
def gamma_params(n: int, S1: int, S2: int) -> tuple[int, int, int, int, int] | None:
    """(b1⁰, b2⁰, Δ1, Δ2, k) of Γ(S1, S2) for |T| = n (eqs 7–9), or None if Γ is empty."""
    n, S1, S2 = int(n), int(S1), int(S2)
    g = math.gcd(S1, S2)
    if n % g:
        return None
    s1, s2, ng = S1 // g, S2 // g, n // g
    b2 = (ng % s1) * pow(s2, -1, s1) % s1 if s1 > 1 else 0   # min b2 ≥ 0 with S2 b2 ≡ n (mod S1), eq 7
    if S2 * b2 > n:
        return None
    b1 = (n - S2 * b2) // S1
    d1, d2 = s2, s1                                           # eq 8: Δ1 = LCM/S1, Δ2 = LCM/S2
    return b1, b2, d1, d2, b1 // d1                           # eq 9: k = ⌊b1⁰/Δ1⌋


def gamma_list(n: int, S1: int, S2: int) -> list[tuple[int, int]]:
    """Γ(S1, S2) written out (Lemma 4, eq 10) — for small n only (examples, tests)."""
    p = gamma_params(n, S1, S2)
    if p is None:
        return []
    b1, b2, d1, d2, k = p
    return [(b1 - t * d1, b2 + t * d2) for t in range(k + 1)]


# ---------------------------------------------------------------- results
@dataclass
class TwoSizeResult:
    """The best two-size setting ⟨(S1, b1), (S2, b2)⟩ found (b2 = 0 for a one-size setting)."""

    S1: int
    b1: int
    S2: int
    b2: int
    loss: int
    M: int
    M_prime: int
    pruning: str
    stats: dict = field(default_factory=dict)

    @property
    def classes(self) -> list[tuple[int, int]]:
        return [(s, b) for s, b in ((self.S1, self.b1), (self.S2, self.b2)) if b > 0]

    def as_dict(self) -> dict:
        return {"S1": self.S1, "b1": self.b1, "S2": self.S2, "b2": self.b2, "loss": self.loss, "M": self.M,
                "M_prime": self.M_prime, "pruning": self.pruning, **self.stats}


# ---------------------------------------------------------------- helpers
def _fc_bounds(o: np.ndarray, caps: np.ndarray, sizes: np.ndarray, n: int) -> np.ndarray:
    """For each size S: the largest b ∈ [0, n // S] with Σ_i min(⌊f'_i S⌋·b, o_i) ≥ S·b.

    The left side minus S·b is concave in b and 0 at b = 0, so FC holds exactly on [0, Bmax]
    (Lemma 7); a binary search over all sizes at once finds Bmax.
    """
    lo = np.zeros(len(sizes), dtype=np.int64)
    hi = n // sizes
    while (lo < hi).any():
        mid = (lo + hi + 1) // 2
        ok = np.minimum(caps * mid[None, :], o[:, None]).sum(axis=0) >= sizes * mid
        lo = np.where(ok, mid, lo)
        hi = np.where(ok, hi, mid - 1)
    return lo


def _ceil_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return -((-a) // b)


def _scan_first_valid(o, c1, c2, S1, S2, b10, b20, d1, d2, t_end, counter) -> int | None:
    """First t ∈ [0, t_end] whose pair of Γ(S1, S2) satisfies Theorem 3 (sequential order,
    evaluated in growing vectorised chunks)."""
    m = len(o)
    t0, chunk, limit = 0, 8, max(64, (1 << 21) // max(m, 1))
    while t0 <= t_end:
        t = np.arange(t0, min(t_end, t0 + chunk - 1) + 1, dtype=np.int64)
        b1 = b10 - t * d1
        b2 = b20 + t * d2
        a1 = np.minimum(c1[None, :] * b1[:, None], o[None, :])
        a2 = np.minimum(c2[None, :] * b2[:, None], o[None, :])
        ok = (a1 + a2 >= o[None, :]).all(axis=1) & (a1.sum(axis=1) >= S1 * b1) & (a2.sum(axis=1) >= S2 * b2)
        if ok.any():
            first = int(np.argmax(ok))
            counter["pairs_tested"] += first + 1
            return t0 + first
        counter["pairs_tested"] += len(t)
        t0 += len(t)
        chunk = min(chunk * 2, limit)
    return None


def prepare_counts(o, fprime, max_bucket, M=None):
    o = np.asarray(o, dtype=np.int64)
    fprime = np.asarray(fprime, dtype=np.float64)
    if o.ndim != 1 or fprime.shape != o.shape:
        raise PpdpError(f"need one threshold per SA value: counts {o.shape}, thresholds {fprime.shape}")
    if (o < 0).any():
        raise PpdpError("SA counts must be non-negative")
    n = int(o.sum())
    if n <= 0:
        raise PpdpError("the table is empty: no bucket setting to plan")
    if isinstance(max_bucket, bool) or not isinstance(max_bucket, (int, np.integer)) or max_bucket < 1:
        raise PpdpError(f"max_bucket must be a whole number ≥ 1, got {max_bucket!r}")
    present = o > 0
    bad = np.flatnonzero(present & (o > privacy_cap(fprime, n)))
    if len(bad):
        raise InfeasibleError(f"F'-privacy is infeasible: f'_i < f_i for value(s) {bad[:10].tolist()} (Lemma 1)")
    if M is None:
        M = min_bucket_size(o, fprime)
    return o[present], fprime[present], n, int(M), int(min(max_bucket, n))


def no_setting_error(M, Mp, max_bucket) -> InfeasibleError:
    return InfeasibleError(f"no valid bucket setting with sizes in [M, M'] = [{M}, {Mp}] "
                           f"(M = min_i ⌈1/f'_i⌉; max_bucket = {max_bucket}); raise max_bucket or the thresholds")


# ---------------------------------------------------------------- search
def search_present(o: np.ndarray, f: np.ndarray, n: int, M: int, Mp: int, pruning: str) -> TwoSizeResult | None:
    """Algorithm 1 on present values (o > 0). Returns None if no valid setting in [M, Mp]."""
    stats = {"size_pairs": 0, "size_pairs_pruned_by_loss": 0, "size_pairs_with_valid": 0, "pairs_tested": 0,
             "rows_cut_by_bound": 0}
    if M > Mp:
        return None
    if M == Mp:  # a single size: Lemma 2
        if one_size_valid(o, f, M):
            return TwoSizeResult(M, n // M, M, 0, (n // M) * (M - 1) ** 2, M, Mp, pruning, stats)
        return None
    sizes = np.arange(M, Mp + 1, dtype=np.int64)
    caps = privacy_cap(f[:, None], sizes[None, :])                 # m × K: ⌊f'_i S⌋
    sq = (sizes - 1) ** 2
    best_loss: int | None = None
    best: tuple[int, int, int, int] | None = None
    bmax = _fc_bounds(o, caps, sizes, n) if pruning == "full" else None

    for r, S1 in enumerate(sizes[:-1].tolist()):
        if pruning != "none" and best_loss is not None and n * (S1 - 1) ** 2 >= best_loss * S1:
            stats["rows_cut_by_bound"] = len(sizes) - 1 - r
            break
        c1 = caps[:, r]
        S2 = sizes[r + 1:]
        stats["size_pairs"] += len(S2)
        # Γ(S1, S2) for every S2 of the row: b2⁰ = min b2 ≥ 0 with S1 | n − S2·b2 (eq 7)
        cand = np.arange(S1, dtype=np.int64)
        ok = (n - S2[:, None] * cand[None, :]) % S1 == 0
        has = ok.any(axis=1)
        b20 = np.argmax(ok, axis=1).astype(np.int64)
        has &= S2 * b20 <= n
        g = np.gcd(S1, S2)
        d1, d2 = S2 // g, S1 // g
        b10 = np.where(has, (n - S2 * b20) // S1, 0)
        k = b10 // d1
        L0 = b10 * (S1 - 1) ** 2 + b20 * sq[r + 1:]
        D = d2 * sq[r + 1:] - d1 * (S1 - 1) ** 2                 # > 0 (Lemma 5)
        if pruning == "none" or best_loss is None:
            kp = k.copy()
        else:
            alive = L0 < best_loss
            stats["size_pairs_pruned_by_loss"] += int((has & ~alive).sum())
            has &= alive
            kp = np.minimum(k, (best_loss - L0 - 1) // D)        # Lemma 6 / eq 11 with strict '<'
        idx = np.flatnonzero(has)
        if len(idx) == 0:
            continue
        if pruning == "full":
            assert bmax is not None  # computed when pruning == "full"
            t_first = _first_valid_full(o, c1, caps[:, r + 1:][:, idx], S1, b10[idx], b20[idx], d1[idx], d2[idx],
                                        kp[idx], bmax[r], bmax[r + 1:][idx])
        else:
            t_first = np.full(len(idx), -1, dtype=np.int64)
            for j, jj in enumerate(idx.tolist()):
                t = _scan_first_valid(o, c1, caps[:, r + 1 + jj], S1, int(S2[jj]), int(b10[jj]), int(b20[jj]),
                                      int(d1[jj]), int(d2[jj]), int(kp[jj]), stats)
                t_first[j] = -1 if t is None else t
        found = t_first >= 0
        stats["size_pairs_with_valid"] += int(found.sum())
        for j in np.flatnonzero(found).tolist():                 # S2 order, strict improvement
            jj = idx[j]
            t = int(t_first[j])
            loss = int(L0[jj]) + t * int(D[jj])
            if best_loss is None or loss < best_loss:
                best_loss = loss
                best = (S1, int(b10[jj]) - t * int(d1[jj]), int(S2[jj]), int(b20[jj]) + t * int(d2[jj]))
    if best is None:
        return None
    assert best_loss is not None  # set together with best
    return TwoSizeResult(*best, best_loss, M, Mp, pruning, stats)


def _first_valid_full(o, c1, c2, S1, b10, b20, d1, d2, kp, bmax1, bmax2) -> np.ndarray:
    """First valid t in Γ′ = [0, kp] for a row of size pairs (S1, S2_j), or −1 (privacy-based pruning)."""
    # FC(S1): b1⁰ − tΔ1 ≤ Bmax(S1)  ⇔ t ≥ ⌈(b1⁰ − Bmax(S1)) / Δ1⌉   (a suffix of Γ′)
    lo = np.maximum(0, _ceil_div(b10 - bmax1, d1))
    # FC(S2): b2⁰ + tΔ2 ≤ Bmax(S2)  ⇔ t ≤ ⌊(Bmax(S2) − b2⁰) / Δ2⌋   (a prefix of Γ′)
    hi = np.minimum(kp, (bmax2 - b20) // d2)
    # PC(x_i) ⇔ u_i1 + u_i2 ≥ o_i ⇔ base + t·slope ≥ 0 (linear in t): fails on a prefix or a suffix
    base = c1[:, None] * b10[None, :] + c2 * b20[None, :] - o[:, None]     # m × P
    slope = c2 * d2[None, :] - c1[:, None] * d1[None, :]
    neg = base < 0
    pos_s = slope > 0
    neg_s = slope < 0
    safe = np.where(slope == 0, 1, np.abs(slope))
    # failing prefix [0, first − 1]: slope > 0 and base < 0 → first = ⌈−base / slope⌉
    first = np.where(pos_s & neg, _ceil_div(-base, safe), 0)
    # failing suffix [last + 1, ∞): slope < 0 → last = ⌊base / −slope⌋ (−1 if base < 0)
    last = np.where(neg_s, np.where(neg, -1, base // safe), np.iinfo(np.int64).max)
    # slope = 0 and base < 0: fails everywhere
    never = ((slope == 0) & neg).any(axis=0)
    lo = np.maximum(lo, first.max(axis=0))       # the sweep over prefix intervals
    hi = np.minimum(hi, last.min(axis=0))        # … and over suffix intervals
    return np.where((lo <= hi) & ~never, lo, -1)


def two_size_search(o, fprime, max_bucket: int = 50, pruning: str = "full", M: int | None = None) -> TwoSizeResult:
    """Algorithm 1 (TwoSizeBucketing) on SA counts ``o`` and thresholds ``fprime``: the optimal
    two-size setting with sizes in [M, M'] (M = min_i ⌈1/f'_i⌉, M' = max_bucket), without
    materialising the assignment. Raises :class:`InfeasibleError` if there is none."""
    if pruning not in PRUNING:
        raise PpdpError(f"pruning must be one of {', '.join(PRUNING)}; got {pruning!r}")
    op, fp, n, M, Mp = prepare_counts(o, fprime, max_bucket, M)
    t0 = time.perf_counter()
    res = search_present(op, fp, n, M, Mp, pruning)
    if res is None:
        raise no_setting_error(M, Mp, max_bucket)
    res.stats["search_seconds"] = time.perf_counter() - t0
    return res


def two_size_classes(o, fprime, res: TwoSizeResult) -> list[SizeClass]:
    """RecordPartition (§4.3) of the records between the two classes of ``res``."""
    part = record_partition(o, fprime, res.S1, res.b1, res.S2, res.b2)
    return [c for c in part.classes if c.b > 0]


def two_size_bucketing(o, fprime, max_bucket: int = 50, pruning: str = "full") -> BucketSetting:
    """TwoSizeBucketing (Algorithm 1) → the optimal two-size :class:`BucketSetting` with its
    assignment (RecordPartition + round robin, §4.3)."""
    res = two_size_search(o, fprime, max_bucket, pruning)
    from .plan import make_setting

    classes = two_size_classes(o, fprime, res)
    return make_setting(classes, len(np.asarray(o)), "two-size", None, res.as_dict())


__all__ = ["two_size_bucketing", "two_size_search", "prepare_counts", "search_present", "no_setting_error", "gamma_params", "gamma_list", "TwoSizeResult", "PRUNING"]

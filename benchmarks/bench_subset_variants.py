"""Variants of the subset-selection default (`eb`) tried for the bins above 100 and not adopted,
against the default re-fitted the same way, paired per release (docs/subset.md).

    python benchmarks/bench_subset_variants.py [--data occ] [--rho 0.1,0.3] [--seeds 10]

The lattice is re-fitted here by one plain function (the strength on the likelihood grid of
:func:`ppdp.estimators.eb_rows.rho_grid`, without the parabola step of the shipped fit) so that
every variant differs from ``base`` — the shipped rule (parents, wider parents, siblings on
unordered columns, guard, full-report switch) — in one thing only:

- ``2c``: the prior variance of each count τ² = ρ·nπ(1 − π) + κ·(nπ)² (a multiplicative part
  beside the Dirichlet-multinomial one), ρ and κ per predicate by normal marginal likelihood, for
  the parent choice and the fit;
- ``lowrank1``, ``lowrank2``: a one-condition predicate on a column of ≥ 4 values also offered the
  rank-1 / rank-2 model of that column's value × SA table (the inverted counts of every value,
  their departure from n_a·π⁰ scaled by 1/√n_a, truncated SVD);
- ``siblings-ordered``: siblings offered on ordered columns too; ``no-siblings``: none;
- ``guard<k>σ``: the guard only where the shrunk count is at most k inversion standard deviations;
- ``2c>c``: per query, ``2c``'s count where Norm-Sub's is above c (30, 100), the default's elsewhere.

Writes benchmarks/results/subset_variants_<data>_<rho1>_<rho2>.json."""

from __future__ import annotations

import argparse
import time

import numpy as np

import ppdp
from _common import load_average, provenance, write_result
from bench_randomized_defaults import load
from ppdp.estimators.eb_rows import eb_terms, rho_grid
from ppdp.estimators.subset import LARGE, SubsetSetup, full_report_fit, norm_sub
from ppdp.estimators.subset_eb import WIDEN, PredicateLattice, ordered_columns, sibling_distributions, siblings_of
from ppdp.estimators.uniform import GUARD_PULL
from ppdp.metrics import relative_error
from ppdp.queries.workloads import point_workload

BINS = {"zero": (0, 0), "1-10": (1, 10), "11-100": (11, 100), "101-1000": (101, 1000), ">1000": (1001, np.inf)}
KAPPAS = np.concatenate([[0.0], np.logspace(-3.5, 0.5, 17)])


def fit(inv, n, P, p, q, kappas=(0.0,)):
    """(prediction, log likelihood) per row: prior variance ρ·t + κ·μ², (ρ, κ) on the grid."""
    mu, d, sig2, t = eb_terms(inv * (p - q) + n[:, None] * q, n[:, None], P, p - q, q)
    rhos, _ = rho_grid(n)
    best = np.full(len(n), -np.inf)
    br, bk = np.ones(len(n)), np.zeros(len(n))
    for kap in kappas:
        for g in range(rhos.shape[0]):
            V = sig2 + rhos[g][:, None] * t + kap * mu**2
            ll = -0.5 * (np.log(V) + d**2 / V).sum(axis=1)
            up = ll > best
            best[up], br[up], bk[up] = ll[up], rhos[g][up], kap
    tau2 = br[:, None] * t + bk[:, None] * mu**2
    return mu + tau2 / (tau2 + sig2) * d, best


def lattice(C, n, p, q, pi0, L, kappas=(0.0,), level1=()):
    """The lattice's counts, each predicate shrunk towards the candidate of largest likelihood;
    ``level1``: further candidate arrays (U, m) for one-condition predicates (NaN rows: none)."""
    U, m = C.shape
    inv = (C - n[:, None] * q) / (p - q)
    X, dist = np.zeros((U, m)), np.zeros((U, m))
    log_pi0 = np.log(np.maximum(pi0, 1e-300))
    for d in range(1, int(L.level.max(initial=0)) + 1):
        for wv in range(int(L.wave.max(initial=0)) + 1):
            us = np.flatnonzero((L.level == d) & (L.wave == wv))
            if not len(us):
                continue
            cands = [np.repeat(pi0[None], len(us), 0)]
            if d >= 2:
                lg = -(d - 1) * log_pi0[None, :]
                for i in range(d):
                    lg = lg + np.log(np.maximum(dist[L.singles[us, i]], 1e-300))
                e = np.exp(lg - lg.max(axis=1, keepdims=True))
                cands.append(e / e.sum(axis=1, keepdims=True))
                cands += [dist[L.parents[us, i]] for i in range(d)]
            if d == 1:
                cands += [c[us] for c in level1]
            for i in range(L.wider.shape[1]):
                w = L.wider[us, i]
                cands.append(np.where((w >= 0)[:, None], dist[np.maximum(w, 0)], np.nan))
            best, pred = np.full(len(us), -np.inf), np.zeros((len(us), m))
            for P in cands:
                ok = np.flatnonzero(~np.isnan(P[:, 0]))
                if not len(ok):
                    continue
                pr, ll = fit(inv[us[ok]], n[us[ok]], P[ok], p, q, kappas)
                up = ll > best[ok]
                best[ok[up]], pred[ok[up]] = ll[up], pr[up]
            Xd = norm_sub(pred, n[us])
            X[us] = Xd
            tot = Xd.sum(axis=1, keepdims=True)
            dist[us] = np.where(tot > 0, Xd / np.maximum(tot, 1e-300), pi0[None, :])
    return X


def sibling_arrays(S, L, idx, ordered, pi0):
    masks, index = siblings_of(L, ordered)
    if not masks:
        return []
    dist = sibling_distributions(np.asarray(idx.sums(masks), dtype=np.float64), S.k, S.p, S.q, pi0)
    return [np.where((index[:, j] >= 0)[:, None], dist[np.maximum(index[:, j], 0)], np.nan) for j in range(index.shape[1])]


def lowrank(S, L, pi0, r):
    out = np.full((len(L.masks), S.m), np.nan)
    cache: dict = {}
    for u, mk in enumerate(L.masks):
        if len(mk) != 1:
            continue
        ((c, mask),) = mk.items()
        V = len(mask)
        if V < 4:
            continue
        if c not in cache:
            Cc = np.asarray(S.release.support_index([c]).sums([{c: np.eye(V, dtype=bool)[a]} for a in range(V)]), dtype=float)
            na = Cc.sum(1) / S.k
            w = np.sqrt(np.maximum(na, 1))[:, None]
            R = ((Cc - na[:, None] * S.q) / (S.p - S.q) - na[:, None] * pi0[None]) / w
            Uu, sv, Vt = np.linalg.svd(R, full_matrices=False)
            cache[c] = na[:, None] * pi0[None] + w * ((Uu[:, :r] * sv[:r]) @ Vt[:r])
        z = cache[c][mask].sum(0)
        z = np.maximum(z, 1e-3 * z.sum() / S.m)
        out[u] = z / z.sum()
    return out


def finish(S, L, Xl, full, guard_sd=None):
    plain = norm_sub(S.inversion(), S.n)
    X = plain.copy()
    has = L.of >= 0
    X[has] = Xl[L.of[has]]
    cond = X <= LARGE
    if guard_sd is not None:
        x = np.clip(X, 0, S.n[:, None])
        sd = np.sqrt(x * S.p * (1 - S.p) + (S.n[:, None] - x) * S.q * (1 - S.q)) / (S.p - S.q)
        cond = X <= guard_sd * sd
    low = (plain < X) & cond
    X = np.where(low, X + GUARD_PULL * (plain - X), X)
    big = plain > LARGE
    return S.per_query(np.where(big, full, X))


def run(data: str, rho: tuple[float, float], seeds: int) -> dict:
    t = load(data)
    wl = point_workload(t, 5000, seed=0)
    true = ppdp.queries.answer_exact(t, wl)
    per: dict[str, list] = {}
    for s in range(seeds):
        rel = ppdp.publish(t, ppdp.SubsetSelection(rho1=rho[0], rho2=rho[1]), seed=s)
        S = SubsetSetup(rel, wl)
        ordered = ordered_columns(rel)
        L = PredicateLattice(S.reps, ordered, WIDEN)
        idx = rel.support_index(sorted({c for mk in L.masks for c in mk}))
        C = np.asarray(idx.sums(L.masks), dtype=np.float64)
        n, pi0 = C.sum(axis=1) / S.k, S.whole_table()
        full = full_report_fit(S, only=np.asarray((norm_sub(S.inversion(), S.n) > LARGE).any(axis=1)))[0]
        sib = sibling_arrays(S, L, idx, ordered, pi0)
        sib_all = sibling_arrays(S, L, idx, {}, pi0)
        args = (C, n, S.p, S.q, pi0, L)
        base = lattice(*args, level1=sib)
        res = {"base": finish(S, L, base, full),
               "2c": finish(S, L, lattice(*args, kappas=KAPPAS, level1=sib), full),
               "lowrank1": finish(S, L, lattice(*args, level1=sib + [lowrank(S, L, pi0, 1)]), full),
               "lowrank2": finish(S, L, lattice(*args, level1=sib + [lowrank(S, L, pi0, 2)]), full),
               "siblings-ordered": finish(S, L, lattice(*args, level1=sib_all), full),
               "no-siblings": finish(S, L, lattice(*args), full)}
        for k in (1, 2, 3):
            res[f"guard{k}σ"] = finish(S, L, base, full, guard_sd=k)
        # per query from a public quantity: 2c's count where Norm-Sub's is above c, the default's elsewhere
        plain_q = S.per_query(norm_sub(S.inversion(), S.n))
        for c in (30, 100):
            res[f"2c>{c}"] = np.where(plain_q > c, res["2c"], res["base"])
        for name, est in res.items():
            re = relative_error(true, est)
            per.setdefault(name, []).append({b: float(np.abs(est[true == 0]).mean()) if b == "zero" else
                                             float(re[(true >= lo) & (true <= hi)].mean()) for b, (lo, hi) in BINS.items()})
        print(s, flush=True)
    out: dict = {}
    for name, rows in per.items():
        out[name] = {}
        for b in BINS:
            d = np.array([r[b] - e[b] for r, e in zip(rows, per["base"])])
            out[name][b] = {"mean": float(np.mean([r[b] for r in rows])), "minus_base": float(d.mean()),
                            "paired_se": float(d.std(ddof=1) / np.sqrt(len(d))) if len(d) > 1 else float("nan")}
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default="occ")
    ap.add_argument("--rho", default="0.1,0.3")
    ap.add_argument("--seeds", type=int, default=10)
    a = ap.parse_args()
    rho = tuple(float(x) for x in a.rho.split(","))
    load0 = load_average()
    w0, c0 = time.perf_counter(), time.process_time()
    res = run(a.data, rho, a.seeds)  # type: ignore[arg-type]
    for name, cell in res.items():
        print(f"{name:17s}", " ".join(f"{b}={c['mean']:.4f}({c['minus_base']:+.4f}±{c['paired_se']:.4f})" for b, c in cell.items()))
    print(write_result(f"subset_variants_{a.data.replace('gauntlet:', '')}_{rho[0]:g}_{rho[1]:g}",
                       {"data": a.data, "rho": rho, "release_seeds": list(range(a.seeds)), "workload": "point, 5000 queries, seed 0",
                        "metric": "zero: MAE; bins: mean relative error; minus_base: paired difference from the re-fitted default",
                        "variants": res, "wall_s": time.perf_counter() - w0, "cpu_s": time.process_time() - c0,
                        "load_average_before": load0, "load_average_after": load_average(), **provenance(seed=0)}))


if __name__ == "__main__":
    main()

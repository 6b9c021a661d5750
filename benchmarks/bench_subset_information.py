"""How much the full subset reports can give over their support counts, on OCC point queries.

For every predicate of the point workload (its true distribution π over the 46 occupations and
n_P records), the asymptotic variance of a count x_v = n_P·π_v under k-subset selection at
ε = ln γ(ρ1, ρ2): the inversion's exact variance n_P·(π_v p(1 − p) + (1 − π_v) q(1 − q))/(p − q)²
(the counts' efficient variance: the counts identify π exactly) and the full-report MLE's,
n_P·[I(π)⁻¹]_vv with I the Fisher information of one report on the simplex, by Monte Carlo over
--draws reports per predicate (predicates whose largest count is ≤ 100 keep the inversion's).
Each is turned into the expected mean relative error per true-count bin, E|Z|·sd/x with
E|Z| = √(2/π); also the inversion's figure for every k (the optimal-k check) and for optimized
unary encoding (Wang et al. 2017).

    python benchmarks/bench_subset_information.py [--rho 0.1,0.3] [--draws 150000]

Writes benchmarks/results/subset_information_<rho1>_<rho2>.json."""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

import ppdp
from _common import load_average, provenance, write_result
from ppdp.kernels.subset import draw_subsets, inclusion_probabilities, optimal_k
from ppdp.kernels.transition import gamma_for
from ppdp.queries.workloads import point_workload

BINS = {"1-10": (1, 10), "11-100": (11, 100), "101-1000": (101, 1000), ">1000": (1001, np.inf)}


def full_report_variance(pi: np.ndarray, k: int, eps: float, draws: int, seed: int) -> np.ndarray:
    """Per value, [I(π)⁻¹]_vv for one report (Monte Carlo Fisher information on the simplex)."""
    m = len(pi)
    rng = np.random.default_rng(seed)
    S = draw_subsets(rng.choice(m, size=draws, p=pi), m, k, eps, rng)
    a = math.expm1(eps)
    G = np.zeros((draws, m))
    np.put_along_axis(G, S, 1.0, axis=1)
    G *= (a / (1 + a * pi[S].sum(axis=1)))[:, None]
    j0 = int(np.argmax(pi))
    keep = [j for j in range(m) if j != j0]
    H = G[:, keep] - G[:, [j0]]  # the score of the free shares (π_j0 = 1 − the others)
    C = np.linalg.pinv(H.T @ H / draws, hermitian=True)
    var = np.empty(m)
    var[keep] = np.diag(C)
    var[j0] = C.sum()
    return var


def mre(V: np.ndarray, X: np.ndarray) -> dict:
    c = math.sqrt(2 / math.pi)
    return {b: float((c * np.sqrt(V[(X >= lo) & (X <= hi)]) / X[(X >= lo) & (X <= hi)]).mean()) for b, (lo, hi) in BINS.items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rho", default="0.1,0.3")
    ap.add_argument("--draws", type=int, default=150_000)
    a = ap.parse_args()
    r1, r2 = (float(x) for x in a.rho.split(","))
    eps = math.log(float(gamma_for(r1, r2)))
    load0, w0, c0 = load_average(), time.perf_counter(), time.process_time()
    t = ppdp.datasets.load("occ")
    m = len(t.domain(t.sa))
    wl = point_workload(t, 5000, seed=0)
    true = ppdp.queries.answer_exact(t, wl).astype(float)
    P = len(true) // m  # the workload is whole blocks of every SA value per predicate (the last one cut)
    X = true[:P * m].reshape(P, m)
    n = X.sum(axis=1, keepdims=True)
    pi = X / n
    k = optimal_k(m, eps)
    p, q = inclusion_probabilities(m, k, eps)
    V_inv = n * (pi * p * (1 - p) + (1 - pi) * q * (1 - q)) / (p - q) ** 2
    V_full = V_inv.copy()
    for i in range(P):
        if X[i].max() > 100:
            pr = np.maximum(pi[i], 1e-6)
            V_full[i] = n[i, 0] * full_report_variance(pr / pr.sum(), k, eps, a.draws, seed=i)
    per_k = {}
    for kk in range(1, m):
        pk, qk = inclusion_probabilities(m, kk, eps)
        per_k[kk] = mre(n * (pi * pk * (1 - pk) + (1 - pi) * qk * (1 - qk)) / (pk - qk) ** 2, X)
    e = math.exp(eps)
    po, qo = 0.5, 1 / (e + 1)
    out = {"data": "occ", "workload": "point, 5000 queries, seed 0 (whole predicate blocks)", "rho": [r1, r2],
           "epsilon": eps, "k": k, "draws_per_predicate": a.draws, "metric": "expected mean relative error E|Z|·sd/x per true-count bin",
           "inversion": mre(V_inv, X), "full_report_mle": mre(V_full, X), "inversion_per_k": per_k,
           "optimized_unary_encoding": mre(n * (pi * po * (1 - po) + (1 - pi) * qo * (1 - qo)) / (po - qo) ** 2, X),
           "wall_s": time.perf_counter() - w0, "cpu_s": time.process_time() - c0, "load_average_before": load0,
           "load_average_after": load_average(), **provenance(seed=0)}
    print({k_: {b: round(v, 4) for b, v in out[k_].items()} for k_ in ("inversion", "full_report_mle", "optimized_unary_encoding")})
    print(write_result(f"subset_information_{r1}_{r2}", out))


if __name__ == "__main__":
    main()

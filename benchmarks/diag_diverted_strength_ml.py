"""Does the marginal likelihood support a strength per coordinate for A' ``full-eb``? Pooled over
a fixed, public family of predicates of a release — every one-way and every two-way QI marginal —
the log marginal likelihood of their published counts under ``full-eb``'s prior with one strength ρ
per predicate (τ = 0; ρ flat on its log grid) and with a strength per coordinate, log ρ_j ~
N(log ρ_c, τ²) around a per-predicate centre ρ_c (flat on a 16-point sub-grid). Differences to τ = 0
in natural-log units: positive = the per-coordinate prior is supported (docs/sdr.md, "Why EDU's two
cells stay lost").

    python benchmarks/diag_diverted_strength_ml.py --data edu gauntlet:gss_vocab occ [--releases 2]
    python benchmarks/diag_diverted_strength_ml.py --data gauntlet:slid_fr gauntlet:islr_wage --ways 3 \
        --taus 0 0.25 0.5 1 2 --suffix _3way

Writes benchmarks/results/diag_diverted_strength_ml<suffix>.json."""

from __future__ import annotations

import argparse
import itertools
import time

import numpy as np
from scipy.special import logsumexp

import ppdp
from _common import provenance, write_result
from bench_randomized_defaults import cells
from ppdp.estimators import diverted_eb
from ppdp.estimators.diverted_eb import EBTransition
from ppdp.estimators.diverted_variance import receiver_parts
from ppdp.mechanisms.randomization.diverted import receiver_counts

TAUS = (0.0, 0.5, 1.0, 2.0, 4.0)
H_STEP = 4


def pooled_log_likelihood(model: EBTransition, Y: np.ndarray, taus=TAUS, chunk: int = 512) -> dict:
    """Σ over the predicates ``Y`` (rows, m; published counts) of the log marginal likelihood, per τ."""
    n = Y.sum(axis=1)
    Y, n = Y[n > 0], n[n > 0]
    out = dict.fromkeys(taus, 0.0)
    for a in range(0, len(n), chunk):
        for tau, v in _log_likelihood(model, Y[a:a + chunk], n[a:a + chunk], taus).items():
            out[tau] += v
    return out


def _log_likelihood(model: EBTransition, Y: np.ndarray, n: np.ndarray, taus) -> dict:
    c = (model.inversion(Y) - n[:, None] * model.pi) @ model.P
    G = diverted_eb.RHO_GRID
    t = np.linspace(0.0, 1.0, G)
    grid = np.exp(t[None, :] * np.log(n)[:, None])
    fpc = np.clip(1.0 - n / model.N, 0.0, 1.0)
    v = n[:, None, None] * (grid[:, :, None] * (1.0 + model.q[None, None, :]) + fpc[:, None, None] * model.lam[None, None, :])
    ell = -0.5 * (np.log(v) + c[:, None, :] ** 2 / v)  # (predicates, grid, coordinates)
    out = {}
    hs = np.arange(0, G, H_STEP)
    for tau in taus:
        if tau == 0:
            out[tau] = float((logsumexp(ell.sum(axis=2), axis=1) - np.log(G)).sum())
            continue
        d = (t[None, None, :] - t[hs][None, :, None]) * np.log(n)[:, None, None]
        lk = -d**2 / (2 * tau**2)
        lk -= logsumexp(lk, axis=2, keepdims=True)
        inner = logsumexp(ell[:, None, :, :] + lk[:, :, :, None], axis=2)
        out[tau] = float((logsumexp(inner.sum(axis=2), axis=1) - np.log(len(hs))).sum())
    return out


def release_model(rel) -> tuple[EBTransition, np.ndarray]:
    """The receiver's ``EBTransition`` of a release's first SA (as ``full-eb`` builds it) and its
    published SA codes."""
    lp = int(rel.claim.l_prime)
    sa = rel.schema["sensitive"][0]
    T = rel.transition_models()[0].single.matrix
    f = receiver_counts(rel.published_counts(sa), lp)
    draws = receiver_parts(rel, 0, f, lp, T)[1]
    f = f.astype(np.float64)
    return EBTransition(T, f / f.sum(), None if draws is None else draws.E, f.sum()), rel.column_codes(sa).astype(np.int64)


def release_log_likelihoods(rel, taus=TAUS, ways_list=(1, 2)) -> dict:
    """Per ``ways`` (1, 2, …): the pooled log marginal likelihood of the release's one- (two-, …) way
    QI marginals per τ — public quantities only."""
    model, code = release_model(rel)
    return {ways: pooled_log_likelihood(model, marginals(rel, model.m, code, ways), taus) for ways in ways_list}


def marginals(rel, K: int, code: np.ndarray, ways: int) -> np.ndarray:
    qs = list(rel.schema["quasi"])
    cols = list(itertools.combinations(qs, ways))
    out = []
    for cs in cols:
        key = np.zeros(len(code), dtype=np.int64)
        size = 1
        for col in cs:
            d = len(rel.domains[col])
            key = key * d + rel.column_codes(col).astype(np.int64)
            size *= d
        out.append(np.bincount(key * K + code, minlength=size * K).reshape(-1, K).astype(np.float64))
    return np.concatenate(out)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", nargs="+", default=["edu"])
    ap.add_argument("--releases", type=int, default=2)
    ap.add_argument("--ways", type=int, nargs="+", default=[1, 2], help="the marginals pooled (1, 2, 3, …)")
    ap.add_argument("--taus", type=float, nargs="+", default=list(TAUS), help="must include 0")
    ap.add_argument("--suffix", default="", help="appended to the result file's name")
    a = ap.parse_args()
    c0, w0 = time.process_time(), time.perf_counter()
    res: dict = {"taus": a.taus, "ways": a.ways, "tables": {}}
    for data in a.data:
        label, t, mech = [c for c in cells(data, 100_000) if c[0].startswith("diverted")][0]
        rows = []
        for s in range(a.releases):
            rel = ppdp.publish(t, mech, seed=s)
            for ways, L in release_log_likelihoods(rel, tuple(a.taus), tuple(a.ways)).items():
                row = {"seed": s, "ways": ways, "vs_tau0": {str(k): v - L[0.0] for k, v in L.items()}}
                rows.append(row)
                print(data, s, f"{ways}-way", {k: round(v, 1) for k, v in row["vs_tau0"].items()}, flush=True)
        res["tables"][data] = {"cell": label, "rows": rows}
    res["cpu_s"], res["wall_s"] = time.process_time() - c0, time.perf_counter() - w0
    res.update(provenance(seed=0))
    print(write_result("diag_diverted_strength_ml" + a.suffix, res))


if __name__ == "__main__":
    main()

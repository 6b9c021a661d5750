"""Why A' ``full-eb`` loses bins on EDU (ℓ' = 4): the split between two values that share nearly
every decoy group is not identified by the release, and the estimators differ only in where
they land in that direction.

The A' cell of ``bench_randomized_defaults.py`` (same sample, workload and release seeds). Per
release and estimator: the per-bin errors, the share of the zero and 1–10 bins that comes from
queries on the two values of the transition's worst-shown direction (the largest generalised
eigenvalue λ of ``EBTransition``: channel noise over prior spread), and, for the predicates whose
true count of the first value ``a`` is 0 (resp. 1–10), the estimates of ``a``, of its partner
``b`` and of their sum against the truth — the sum is identified, the split is not. The
"mirror": on the same predicates, the error of each estimator on ``b``'s queries (an estimator
that lands nearer the truth on ``a`` by leaning one way in the unidentified direction pays it
on ``b``). Identifiability: per predicate the non-centrality h²·Σ_v (T[a, v] − T[b, v])²/ŷ_v of
the test between "its h rows of b hold b" and "they hold a" (ŷ = the expected published counts
under the default's fit); below ~1 no test on the release tells them apart.

Also two candidates tried: ``full-eb`` with the prior strength ρ integrated over its grid
(posterior mean under a flat prior on log ρ) instead of the maximum-marginal-likelihood ρ̂, and
with a strength per coordinate (a log-normal scale mixture around ρ̂, sd ``TAU``); that scale chosen
per release (``full-eb (tau ML)``: τ̂ from ``TAU_GRID`` by the log marginal likelihood of the
release's one- and two-way QI marginals pooled, public quantities only) or fixed at 0.5; and a
two-point strength per coordinate (ρ̂, or no pooling with probability w, ŵ per release likewise).

    python benchmarks/diag_diverted_unidentified.py --data edu --releases 10
    python benchmarks/diag_diverted_unidentified.py --data gauntlet:slid_fr --releases 10 --suffix _tau

Writes benchmarks/results/diag_diverted_unidentified_<data><suffix>.json."""

from __future__ import annotations

import argparse
import functools
import time

import numpy as np

import ppdp
from _common import provenance, write_result
from bench_randomized_defaults import BINS, bin_errors, cells
from diag_diverted_strength_ml import release_log_likelihoods
from ppdp.estimators import diverted_eb
from ppdp.estimators.diverted_eb import EBTransition
from ppdp.queries.workloads import point_workload

ESTIMATORS = ("full-eb", "full-eb (rho averaged)", "full-eb (rho per coordinate)", "full-eb (tau 0.5)", "full-eb (tau ML)",
              "full-eb (spike ML)", "full-iterative", "iterative", "closed", "full-closed")
#: the per-coordinate variant: log ρ_j ~ N(log ρ̂, TAU²) around the predicate's fitted strength
TAU = 2.0
#: "full-eb (tau ML)": τ per release from this grid, by the log marginal likelihood of the release's
#: one- and two-way QI marginals pooled (τ = 0 is ``full-eb``)
TAU_GRID = (0.0, 0.25, 0.5, 1.0)
#: "full-eb (spike ML)": each coordinate's strength is the predicate's ρ or, with probability w, n (no
#: pooling in that direction); w per release from this grid by the same pooled marginal likelihood
SPIKE_GRID = (0.0, 0.01, 0.03, 0.1, 0.3)


def _grid_terms(self, Xt, n, mu=None):
    """The terms every variant below shares with ``EBTransition.fit``: the prior mean μ, the
    coordinates c of the departure from it, n floored at 1, log ρ and ρ on the strength grid, and
    each coordinate's marginal variance v (rows, grid, coordinates)."""
    mu = n[:, None] * self.pi if mu is None else mu
    c = (Xt - mu) @ self.P
    nn = np.maximum(n, 1.0)
    lg = np.linspace(0.0, 1.0, diverted_eb.RHO_GRID)[None, :] * np.log(nn)[:, None]
    grid = np.exp(lg)
    fpc = np.clip(1.0 - n / self.N, 0.0, 1.0) if self.N > 0 else np.ones(len(n))
    v = nn[:, None, None] * (grid[:, :, None] * (1.0 + self.q[None, None, :]) + fpc[:, None, None] * self.lam[None, None, :])
    return mu, c, nn, lg, grid, v


def fit_averaged(self, Xt, n, mu=None):
    """``EBTransition.fit`` with the shrinkage factors averaged over the ρ grid, weights ∝ the
    marginal likelihood (a flat prior on log ρ), and −2 log of the averaged likelihood returned."""
    mu, c, nn, _, grid, v = _grid_terms(self, Xt, n, mu)
    nll = np.log(v).sum(axis=2) + (c[:, None, :] ** 2 / v).sum(axis=2)
    lo = nll.min(axis=1)
    w = np.exp(-(nll - lo[:, None]) / 2)
    gg = nn[:, None, None] * grid[:, :, None] / v
    g = np.einsum("rg,rgj->rj", w, gg) / w.sum(axis=1)[:, None]
    rho = np.exp((w * np.log(grid)).sum(axis=1) / w.sum(axis=1))
    best = lo - 2 * np.log(w.sum(axis=1) / w.shape[1])
    return mu + (c * g) @ self.U.T, rho, best


def fit_per_coordinate(self, Xt, n, mu=None, tau=None):
    """``EBTransition.fit`` with a strength per coordinate: each coordinate's shrinkage factor
    averaged over the ρ grid with weights ∝ its own likelihood times a log-normal prior (sd
    ``tau``, default ``TAU``) around the predicate's maximum-marginal-likelihood ρ̂ (a scale mixture: a
    direction in which the predicate deviates far from the prior is shrunk less)."""
    tau = TAU if tau is None else tau
    mu, c, nn, lg, grid, v = _grid_terms(self, Xt, n, mu)
    nll = np.log(v).sum(axis=2) + (c[:, None, :] ** 2 / v).sum(axis=2)
    j = np.argmin(nll, axis=1)
    rows = np.arange(len(n))
    ll = -0.5 * (np.log(v) + c[:, None, :] ** 2 / v) - ((lg - lg[rows, j][:, None]) ** 2 / (2 * tau**2))[:, :, None]
    w = np.exp(ll - ll.max(axis=1, keepdims=True))
    gg = nn[:, None, None] * grid[:, :, None] / v
    g = (w * gg).sum(axis=1) / w.sum(axis=1)
    return mu + (c * g) @ self.U.T, grid[rows, j], nll[rows, j]


def _spike_parts(self, Xt, n, mu):
    mu, c, nn, _, grid, v = _grid_terms(self, Xt, n, mu)
    ell = -0.5 * (np.log(v) + c[:, None, :] ** 2 / v)  # (rows, grid, coordinates)
    return mu, c, nn, grid, v, ell


def fit_spike(self, Xt, n, mu=None, w=0.0):
    """``EBTransition.fit`` with a two-point strength per coordinate: the predicate's ρ (profiled
    over the grid) with probability 1 − w, n (the direction not pooled) with probability w; each
    coordinate's shrinkage factor is the posterior mix of the two."""
    mu, c, nn, grid, v, ell = _spike_parts(self, Xt, n, mu)
    top = ell[:, -1:, :]  # ρ = n
    mix = np.logaddexp(np.log1p(-w) + ell, np.log(w) + top) if w > 0 else ell
    j = np.argmax(mix.sum(axis=2), axis=1)
    rows = np.arange(len(n))
    a, b = np.log1p(-w) + ell[rows, j], (np.log(w) + top[:, 0]) if w > 0 else np.full_like(ell[rows, j], -np.inf)
    p_top = 1.0 / (1.0 + np.exp(np.clip(a - b, -700, 700)))
    g = (1 - p_top) * nn[:, None] * grid[rows, j][:, None] / v[rows, j] + p_top * nn[:, None] * grid[:, -1:] / v[:, -1]
    return mu + (c * g) @ self.U.T, grid[rows, j], -2 * mix[rows, j].sum(axis=1)


def select_spike(rel, grid=SPIKE_GRID) -> tuple[float, dict]:
    """ŵ of a release: the pooled log marginal likelihood (ρ flat on its grid) of its one- and
    two-way QI marginals under the two-point prior, maximised over ``grid``."""
    from diag_diverted_strength_ml import marginals, release_model
    from scipy.special import logsumexp

    model, code = release_model(rel)
    tot = dict.fromkeys(grid, 0.0)
    per: dict = {}
    for ways in (1, 2):
        Y = marginals(rel, model.m, code, ways)
        n = Y.sum(axis=1)
        Y, n = Y[n > 0], n[n > 0]
        ell = _spike_parts(model, model.inversion(Y), n, None)[5]
        for w in grid:
            mix = np.logaddexp(np.log1p(-w) + ell, np.log(w) + ell[:, -1:, :]) if w > 0 else ell
            L = float((logsumexp(mix.sum(axis=2), axis=1) - np.log(ell.shape[1])).sum())
            per.setdefault(f"{ways}-way", {})[str(w)] = L
            tot[w] += L
    best = max(grid, key=lambda w: tot[w])
    return float(best), {k: {w: L - d["0.0"] for w, L in d.items()} for k, d in per.items()}


def select_tau(rel, grid=TAU_GRID) -> tuple[float, dict]:
    """τ̂ of a release: the grid point with the highest log marginal likelihood of its one- and
    two-way QI marginals, pooled (``diag_diverted_strength_ml.release_log_likelihoods``)."""
    L = release_log_likelihoods(rel, grid)
    tot = {tau: L[1][tau] + L[2][tau] for tau in grid}
    best = max(grid, key=lambda tau: tot[tau])
    return float(best), {f"{ways}-way": {str(tau): v - L[ways][0.0] for tau, v in L[ways].items()} for ways in L}


def answer(rel, wl, name, tau_hat=0.0, w_hat=0.0):
    fits = {"full-eb (rho averaged)": fit_averaged, "full-eb (rho per coordinate)": fit_per_coordinate}
    taus = {"full-eb (tau 0.5)": 0.5, "full-eb (tau ML)": tau_hat}
    if name == "full-eb (spike ML)":
        if w_hat == 0:
            return rel.answer(wl, estimator="full-eb")
        fits[name] = functools.partialmethod(fit_spike, w=w_hat)
    if name in taus:
        if taus[name] == 0:
            return rel.answer(wl, estimator="full-eb")
        fits[name] = functools.partialmethod(fit_per_coordinate, tau=taus[name])
    if name not in fits:
        return rel.answer(wl, estimator=name)
    orig = EBTransition.fit
    EBTransition.fit = fits[name]  # type: ignore[method-assign]
    try:
        return rel.answer(wl, estimator="full-eb")
    finally:
        EBTransition.fit = orig  # type: ignore[method-assign]


def run(data: str, releases: int, n_queries: int, estimators=ESTIMATORS) -> dict:
    label, t, mech = [c for c in cells(data, 100_000) if c[0].startswith("diverted")][0]
    sa = t.sensitive[0]
    dom = list(t.domains[sa])
    wl = point_workload(t, n_queries, seed=0)
    true = ppdp.queries.answer_exact(t, wl)
    sav = np.array([dom.index([p.values[0] for p in q.predicates if p.column == sa][0]) for q in wl])
    key = [tuple((p.column, p.values) for p in q.predicates if p.column != sa) for q in wl]
    pos = {(k, s): i for i, (k, s) in enumerate(zip(key, sav))}
    out: dict = {"cell": label, "sa": sa, "releases": [], "channel": None}
    for r in range(releases):
        rel = ppdp.publish(t, mech, seed=r)
        T = rel.transition_models()[0].single.matrix
        f = rel.published_counts(sa).astype(np.float64)
        model = EBTransition(T, f / f.sum())
        j = int(np.argmax(model.lam))
        u = np.zeros(len(dom))
        u[model.support] = model.U[:, j]
        a, b = (int(x) for x in np.argsort(-np.abs(u))[:2])
        if t.counts(sa)[a] > t.counts(sa)[b]:
            a, b = b, a  # a: the smaller of the two
        est = {}
        cpu = {}
        tau_hat, tau_ll, tau_cpu = 0.0, {}, 0.0
        if "full-eb (tau ML)" in estimators:
            c0 = time.process_time()
            tau_hat, tau_ll = select_tau(rel)
            tau_cpu = time.process_time() - c0
        w_hat, w_ll = 0.0, {}
        if "full-eb (spike ML)" in estimators:
            c0 = time.process_time()
            w_hat, w_ll = select_spike(rel)
            tau_cpu += time.process_time() - c0
        for e in estimators:
            c0 = time.process_time()
            est[e] = answer(rel, wl, e, tau_hat, w_hat)
            cpu[e] = time.process_time() - c0
        row: dict = {"seed": r, "pair": [dom[a], dom[b]], "cpu_s": cpu, "bins": {e: bin_errors(v, true) for e, v in est.items()},
                     "tau_hat": tau_hat, "tau_log_likelihood_vs_0": tau_ll, "tau_cpu_s": tau_cpu,
                     "w_hat": w_hat, "w_log_likelihood_vs_0": w_ll}
        for lo, hi, name in ((0, 0, "zero"), (1, 10, "1-10")):
            m = (true >= lo) & (true <= hi)
            row.setdefault("pair_share", {})[name] = {}
            for e, v in est.items():
                err = np.abs(v - true) if lo == 0 else np.abs(v - true) / np.maximum(true, 1)
                row["pair_share"][name][e] = float(err[m & np.isin(sav, [a, b])].sum() / max(err[m].sum(), 1e-12))
            qa = [i for i in np.flatnonzero(m & (sav == a)) if (key[i], b) in pos]
            qb = np.array([pos[(key[i], b)] for i in qa], dtype=np.int64)
            qa = np.array(qa, dtype=np.int64)
            if not len(qa):
                continue
            block: dict = {"predicates": len(qa), "true_a": float(true[qa].mean()), "true_b": float(true[qb].mean())}
            for e, v in est.items():
                block[e] = {"a": float(v[qa].mean()), "b": float(v[qb].mean()), "sum": float((v[qa] + v[qb]).mean()),
                            "mre_b": float((np.abs(v[qb] - true[qb]) / np.maximum(true[qb], 1)).mean()),
                            "mae_a": float(np.abs(v[qa] - true[qa]).mean())}
            # identifiability of the split: the non-centrality of "b's rows hold b" against "they hold a"
            nP = np.array([sum(true[pos[(key[i], s)]] for s in range(len(dom)) if (key[i], s) in pos) for i in qa])
            yhat = np.stack([[est["full-eb"][pos[(key[i], s)]] if (key[i], s) in pos else 0.0 for s in range(len(dom))]
                             for i in qa]) @ T
            delta = T[a] - T[b]
            nc = true[qb] ** 2 * ((delta[None, :] ** 2) / np.maximum(yhat, 1.0)).sum(axis=1)
            block["noncentrality"] = {"median": float(np.median(nc)), "share_below_1": float((nc < 1).mean()),
                                      "n_P_median": float(np.median(nP))}
            row.setdefault("pair_predicates", {})[name] = block
        if r == 0:
            out["channel"] = {"lambda_sorted": np.sort(model.lam).tolist(), "pair": [dom[a], dom[b]],
                              "counts": [int(t.counts(sa)[a]), int(t.counts(sa)[b])], "N_over_lp": t.n_rows / mech.get_params()["l_prime"],
                              "T_a": T[a].tolist(), "T_b": T[b].tolist(), "max_abs_row_difference": float(np.abs(T[a] - T[b]).max())}
        out["releases"].append(row)
        print(f"release {r}: pair {dom[a]!r} / {dom[b]!r}, tau ML {tau_hat}, w ML {w_hat} ({tau_cpu:.1f} s)", flush=True)
    # summary: mean ± se over releases, paired differences to full-eb
    R = len(out["releases"])
    summ: dict = {}
    for e in estimators:
        summ[e] = {}
        for bn in BINS:
            k = "mae" if bn == "zero" else "mre"
            v = np.array([x["bins"][e][bn][k] for x in out["releases"]])
            d = v - np.array([x["bins"]["full-eb"][bn][k] for x in out["releases"]])
            summ[e][bn] = {k: float(v.mean()), "vs_full_eb": float(d.mean()),
                           "vs_full_eb_se": float(d.std(ddof=1) / np.sqrt(R)) if R > 1 else float("nan")}
        summ[e]["cpu_s_per_release"] = float(np.mean([x["cpu_s"][e] for x in out["releases"]]))
    out["summary"] = summ
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default="edu")
    ap.add_argument("--releases", type=int, default=10)
    ap.add_argument("--queries", type=int, default=5000)
    ap.add_argument("--estimators", nargs="+", default=list(ESTIMATORS), choices=ESTIMATORS,
                    help="the first is the reference of the paired differences; full-eb must be among them")
    ap.add_argument("--suffix", default="", help="appended to the result file's name")
    a = ap.parse_args()
    c0, w0 = time.process_time(), time.perf_counter()
    res = run(a.data, a.releases, a.queries, tuple(a.estimators))
    res["cpu_s"], res["wall_s"] = time.process_time() - c0, time.perf_counter() - w0
    res.update(provenance(seed=0))
    for e, row in res["summary"].items():
        print(f"{e:<30}" + "".join(f"{bn}: {row[bn]['mae' if bn == 'zero' else 'mre']:.3f} ({row[bn]['vs_full_eb']:+.3f}±{row[bn]['vs_full_eb_se']:.3f})  "
                                   for bn in BINS) + f"cpu {row['cpu_s_per_release']:.2f}")
    print(write_result(f"diag_diverted_unidentified_{a.data.replace('gauntlet:', '')}{a.suffix}", res))


if __name__ == "__main__":
    main()

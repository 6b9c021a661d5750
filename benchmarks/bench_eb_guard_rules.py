"""Rules for the guard of the default empirical-Bayes estimator (``EmpiricalBayes(guard="on")``), tried
against the cells of benchmarks/bench_randomized_defaults.py: is the guarded default beaten by another
estimator ppdp ships in any count bin, on OCC (the table the guard was set on) and on EDU and Adult
(the check tables)?

Every cell (uniform perturbation and SDR at (0.1, 0.3), global randomization A at ℓ' = 5 on a
100,000-row sample; 5,000 point queries, workload seed 0; releases 0–9) is fitted once: per
(predicate, sub-table, value) count the empirical-Bayes count alone (``guard="off"``), Norm-Sub's,
EM's and MLE's, with the public quantities a rule may read (n_P,j, the channel's p and q, the
inversion, the chosen parent and the fitted strength ρ). Each rule maps those to the guarded counts;
the queries add them up as the estimators do, and a rule is *beaten* in a bin where an alternative
(inversion, MLE, EM, Norm-Sub, the counts alone) is lower by more than 2 paired standard errors
over the releases (MRE; MAE on zero counts) — the criterion of bench_randomized_defaults.py.

    python benchmarks/bench_eb_guard_rules.py [--data occ edu adult] [--releases 10]

Writes benchmarks/results/eb_guard_rules.json."""

from __future__ import annotations

import argparse
import time

import numpy as np

import ppdp
from _common import provenance, write_result
from bench_randomized_defaults import BINS, cells
from ppdp.estimators.channel import EM_TOL, MAX_ITER, UniformSetup, norm_sub, uniform_em, uniform_mle
from ppdp.estimators.eb_rows import eb_rows
from ppdp.estimators.empirical_bayes import EB_AUTO_STRENGTH, eb_fit
from ppdp.estimators.uniform import GUARD_PULL, GUARD_Z
from ppdp.queries.workloads import point_workload


def harvest(t, mech, wl, seed: int) -> dict:
    """The counts of one release (every row of the workload's distinct predicates) and the rule's inputs."""
    rel = ppdp.publish(t, mech, seed=seed)
    S = UniformSetup(rel, rel.resolve(wl)[1], rel.transition_models()[0])
    strength = EB_AUTO_STRENGTH.get(mech.name, "moments")  # the default's options
    X = eb_fit(S, strength=strength)
    rows, grp = S.rows
    p, q, mem = S.p[grp], S.q[grp], S.member[grp]
    U, J, m = S.Y.shape
    n = rows.sum(axis=1)
    inv = np.where(mem, (rows - (n * q)[:, None]) / p[:, None], 0.0)
    x = np.clip(X.reshape(U * J, m), 0.0, n[:, None])
    a, b = (p + q)[:, None], q[:, None]
    rho = eb_rows(rows, p, q, mem, S.eb_prior, "diagonal").rho(strength)
    P0 = S.eb_prior
    tau2 = n[:, None] * P0 * (1 - P0) * rho[:, None]
    sig2 = n[:, None] * (P0 * a * (1 - a) + (1 - P0) * b * (1 - b)) / p[:, None] ** 2
    return {"X": X.reshape(U * J, m), "ns": norm_sub(inv, mem, n),
            "em": uniform_em(rows, p, q, mem, EM_TOL, MAX_ITER)[0], "mle": uniform_mle(rows, p, q, mem),
            "se": np.sqrt(np.maximum(x * a * (1 - a) + (n[:, None] - x) * b * (1 - b), 0.0)) / p[:, None],
            "w": np.divide(tau2, tau2 + sig2, out=np.ones_like(tau2), where=tau2 + sig2 > 0),
            "n": n, "p": p, "q": q, "mem": mem, "inversion": S.inversion().sum(axis=1), "inv": inv, "S": S}


def per_query(h: dict, X: np.ndarray) -> np.ndarray:
    S = h["S"]
    return S.per_query(X.reshape(S.Y.shape)).sum(axis=1)


def guard(h: dict, pull=None, em=None) -> np.ndarray:
    """The guard's form: x = x_EB − pull·max(x_EB − x_NS, 0), then EM's count where ``em``; ``pull``
    (per count) defaults to GUARD_PULL, ``em`` to x_NS ≥ GUARD_Z·se."""
    X, ns, se = h["X"], h["ns"], h["se"]
    pull = GUARD_PULL if pull is None else pull
    out = X - pull * np.maximum(X - ns, 0.0)
    strong = (ns >= GUARD_Z * se) if em is None else em
    out = np.where(h["mem"] & strong & (se > 0), h["em"], out)
    return np.where(h["mem"], out, 0.0)


def _z(h, v):
    return np.divide(v, h["se"], out=np.full_like(v, np.inf), where=h["se"] > 0)


def _sure_em(h, z0: float) -> np.ndarray:
    """EM's count at x_NS ≥ z0·se only if, summed over those counts of the release (weighted 1/x_NS², the
    relative error's scale), Stein's unbiased risk of the shrunk count w²σ² + (x_EB − y)² − (1 − w)²σ²
    (y the inversion, σ the channel's se) exceeds the inversion's σ²."""
    strong = h["mem"] & (h["ns"] >= z0 * h["se"]) & (h["se"] > 0)
    if not strong.any():
        return strong
    w, se2 = h["w"][strong], h["se"][strong] ** 2
    sure = w**2 * se2 + (h["X"][strong] - h["inv"][strong]) ** 2 - (1 - w) ** 2 * se2
    wt = 1.0 / np.maximum(h["ns"][strong], 1.0) ** 2
    return strong if float((wt * (sure - se2)).sum()) > 0 else np.zeros_like(strong)


#: the rules tried: the default's guard, then each family with its settings
RULES = {
    "default (pull 1/2, EM at z >= 6)": lambda h: guard(h),
    "pull only where x_NS < 1 se": lambda h: guard(h, pull=np.where(_z(h, h["ns"]) < 1, GUARD_PULL, 0.0)),
    "pull only where x_NS < 3 se": lambda h: guard(h, pull=np.where(_z(h, h["ns"]) < 3, GUARD_PULL, 0.0)),
    "pull only where x_EB - x_NS > 1 se": lambda h: guard(h, pull=np.where(_z(h, h["X"] - h["ns"]) > 1, GUARD_PULL, 0.0)),
    "pull 1/2 (1 - w), w the shrinkage weight at the fitted strength": lambda h: guard(h, pull=GUARD_PULL * (1 - h["w"])),
    "pull 1/2 (x_EB - x_NS)/x_EB": lambda h: guard(h, pull=GUARD_PULL * np.divide(np.maximum(h["X"] - h["ns"], 0), h["X"],
                                                                                     out=np.zeros_like(h["X"]), where=h["X"] > 0)),
    "pull only where x_EB < 2 se": lambda h: guard(h, pull=np.where(_z(h, h["X"]) < 2, GUARD_PULL, 0.0)),
    "pull only where x_EB < 3 se": lambda h: guard(h, pull=np.where(_z(h, h["X"]) < 3, GUARD_PULL, 0.0)),
    "pull only where x_EB < 5 se": lambda h: guard(h, pull=np.where(_z(h, h["X"]) < 5, GUARD_PULL, 0.0)),
    "pull only where x_NS = 0": lambda h: guard(h, pull=np.where(h["ns"] <= 0, GUARD_PULL, 0.0)),
    "no pull where x_NS < 1/2 se and x_EB > 1 se": lambda h: guard(h, pull=np.where(
        (_z(h, h["ns"]) < 0.5) & (_z(h, h["X"]) > 1), 0.0, GUARD_PULL)),
    "pull only where the channel keeps p <= 0.26": lambda h: guard(h, pull=np.where(h["p"][:, None] <= 0.26, GUARD_PULL, 0.0)),
    "pull only where the zero count's noise sd sqrt(n q(1-q))/p >= 8": lambda h: guard(h, pull=np.where(
        (np.sqrt(h["n"] * h["q"] * (1 - h["q"])) / h["p"])[:, None] >= 8, GUARD_PULL, 0.0)),
    "EM also at z >= 5 where x_NS >= 1,000": lambda h: guard(h, em=(h["ns"] >= GUARD_Z * h["se"])
                                                         | ((h["ns"] >= 5 * h["se"]) & (h["ns"] >= 1000))),
    "EM at z >= 4": lambda h: guard(h, em=h["ns"] >= 4 * h["se"]),
    "pull only, never EM": lambda h: guard(h, em=np.zeros_like(h["mem"])),
    "EM at z >= 6 where the release's unbiased risk (SURE) of the shrinkage there exceeds the channel's":
        lambda h: guard(h, em=_sure_em(h, 6.0)),
    "EM at z >= 3 where the release's unbiased risk (SURE) of the shrinkage there exceeds the channel's":
        lambda h: guard(h, em=_sure_em(h, 3.0)),
    "pull only where x_NS < 1 se; SURE's EM at z >= 6": lambda h: guard(
        h, pull=np.where(_z(h, h["ns"]) < 1, GUARD_PULL, 0.0), em=_sure_em(h, 6.0)),
    "pull only where x_NS < 2 se; SURE's EM at z >= 6": lambda h: guard(
        h, pull=np.where(_z(h, h["ns"]) < 2, GUARD_PULL, 0.0), em=_sure_em(h, 6.0)),
    "pull only where x_NS < 3 se; SURE's EM at z >= 6": lambda h: guard(
        h, pull=np.where(_z(h, h["ns"]) < 3, GUARD_PULL, 0.0), em=_sure_em(h, 6.0)),
    "pull 1/2 (1 - w); SURE's EM at z >= 6": lambda h: guard(h, pull=GUARD_PULL * (1 - h["w"]), em=_sure_em(h, 6.0)),
    "both: no pull where x_NS < 1/2 se and x_EB > 1 se; EM also at z >= 5 where x_NS >= 1,000": lambda h: guard(
        h, pull=np.where((_z(h, h["ns"]) < 0.5) & (_z(h, h["X"]) > 1), 0.0, GUARD_PULL),
        em=(h["ns"] >= GUARD_Z * h["se"]) | ((h["ns"] >= 5 * h["se"]) & (h["ns"] >= 1000))),
}


def bin_errors(est: np.ndarray, true: np.ndarray) -> dict:
    out = {}
    for b, (lo, hi) in BINS.items():
        m = (true >= lo) & (true <= hi)
        e = np.abs(est - true)[m]
        out[b] = float(e.mean()) if lo == 0 else float((e / true[m]).mean())
    return out


def run(tables: list[str], releases: int, n_queries: int) -> dict:
    res: dict = {r: {} for r in RULES}
    for data in tables:
        for label, t, mech in cells(data, 100_000)[:3]:
            wl = point_workload(t, n_queries, seed=0)
            true = ppdp.queries.answer_exact(t, wl)
            per: dict = {r: [] for r in RULES}
            for s in range(releases):
                h = harvest(t, mech, wl, s)
                alts = {"inversion": bin_errors(h["inversion"], true), "mle": bin_errors(per_query(h, h["mle"]), true),
                        "em": bin_errors(per_query(h, h["em"]), true), "norm-sub": bin_errors(per_query(h, h["ns"]), true),
                        "eb(guard=off)": bin_errors(per_query(h, h["X"]), true)}
                for r, fn in RULES.items():
                    per[r].append({"rule": bin_errors(per_query(h, fn(h)), true), **alts})
            for r in RULES:
                rows = per[r]
                beaten = []
                for b in BINS:
                    for n in rows[0]:
                        if n == "rule":
                            continue
                        d = np.array([x["rule"][b] - x[n][b] for x in rows])
                        diff, se = float(d.mean()), float(d.std(ddof=1) / np.sqrt(len(d)))
                        if diff > 2 * se and diff > 0:
                            beaten.append({"bin": b, "by": n, "diff": diff, "se": se})
                res[r][f"{data} {label}"] = {"error": {b: float(np.mean([x["rule"][b] for x in rows])) for b in BINS},
                                             "beaten": beaten}
            print(data, label, flush=True)
    for r in RULES:
        occ = sum(len(v["beaten"]) for k, v in res[r].items() if k.startswith("occ"))
        chk = sum(len(v["beaten"]) for k, v in res[r].items() if not k.startswith("occ"))
        res[r]["beaten cells"] = {"occ": occ, "check": chk}
        print(f"{r[:70]:<70} beaten: OCC {occ:>2}, check tables {chk:>2}")
    return res


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", nargs="+", default=["occ", "edu", "adult"])
    ap.add_argument("--releases", type=int, default=10)
    ap.add_argument("--queries", type=int, default=5000)
    ap.add_argument("--out", default="eb_guard_rules")
    a = ap.parse_args()
    c0, w0 = time.process_time(), time.perf_counter()
    res = {"tables": a.data, "workload": f"point, {a.queries} queries, seed 0", "release_seeds": list(range(a.releases)),
           "metric": "per true-count bin: MRE (MAE on zero counts), mean over releases; beaten: an alternative "
                     "lower by > 2 paired standard errors", "rules": run(a.data, a.releases, a.queries)}
    res["cpu_s"], res["wall_s"] = time.process_time() - c0, time.perf_counter() - w0
    res.update(provenance(seed=0))
    print(write_result(a.out, res))


if __name__ == "__main__":
    main()

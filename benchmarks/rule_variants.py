"""Variants of the default's rule for sim_dp_rule.py: each (rest, shape, n_hat, draw) → (alg, ε used);
draw(ε_b) returns a fresh noisy coarse table of the real cube."""
from __future__ import annotations

import math

import numpy as np

from ppdp.claims import dp_rule as R


def _pick(pred):
    c = {k: v for k, v in pred.items() if k != "cells"}
    return min(c, key=lambda k: (c[k], k))


def v3(rest, shape, n_hat, draw):
    """The rule before the guard (the first probe only)."""
    keep = R._guard_wanted
    R._guard_wanted = lambda *a: False
    try:
        return current(rest, shape, n_hat, draw)
    finally:
        R._guard_wanted = keep


def current(rest, shape, n_hat, draw):
    """The rule as shipped (:func:`ppdp.claims.dp_rule.dp_choice`, the guard included)."""
    if not R.probe_needed(rest, shape, n_hat):
        return "kron", rest
    eb = rest * R.PROBE_FRACTION
    probe = [int(v) for v in draw(eb).ravel()]
    if R.guard_needed(rest, shape, n_hat, probe):
        probe += [int(v) for v in draw(rest * R.GUARD_FRACTION, R.GUARD_BLOCKS).ravel()]
    ch = R.dp_choice(rest, shape, n_hat, probe)
    alg = ch["algorithm"] + (str(ch["way"]) if "way" in ch else "")
    return alg, rest - ch["epsilon_probe"]


def fit1(y, way):
    """The probe's maximum-entropy fit of one table (dp_rule fits a batch)."""
    return R._ipf(np.asarray(y, dtype=np.float64)[None], way)[0]


def q1(r, ms):
    """The probe's statistic of one residual table (dp_rule takes a batch)."""
    return float(R._qform(np.asarray(r, dtype=np.float64)[None], ms)[0])


def null_of(y, way, ms, draw, replicates):
    """(T of ``y``, the null's T over ``replicates`` tables ``draw(base, rng)`` around its fit), the
    rule's seed."""
    fit = fit1(y, way)
    rng = np.random.default_rng(R.PROBE_SEED + way)
    base = np.maximum(fit, 0.0)
    return q1(y - fit, ms), [q1(z - fit1(z, way), ms) for z in (draw(base, rng) for _ in range(replicates))]


def probe_multi(ys, ebs, shape, n_hat, way, replicates=R.PROBE_REPLICATES):
    """probe_bias on the precision-weighted mean of stage tables (weights ε_k²)."""
    w = np.array([e * e for e in ebs]) / sum(e * e for e in ebs)
    y = sum(wk * yk for wk, yk in zip(w, ys))
    edges = R.probe_edges(shape)
    ms = [R._coverage(int(n), tuple(e)) for n, e in zip(shape, edges)]
    t, null = null_of(y, way, ms, lambda base, rng: base + sum(wk * np.rint(rng.laplace(0.0, 1.0 / ek, y.shape))
                                                               for wk, ek in zip(w, ebs)), replicates)
    noise = float(np.mean(null))
    var = float(np.var(null, ddof=1)) * (1.0 + 1.0 / replicates) + 1e-12
    excess = t - noise
    prior = (R.MARGINAL_BIAS[int(way)] * max(float(n_hat), 0.0) * R.box_fraction(shape)) ** 2
    pvar = max(prior * prior, 1e-12)
    pooled = (prior / pvar + excess / var) / (1.0 / pvar + 1.0 / var)
    post_sd = math.sqrt(1.0 / (1.0 / pvar + 1.0 / var))
    z = pooled / post_sd
    expected = pooled * 0.5 * math.erfc(-z / math.sqrt(2.0)) + post_sd * math.exp(-0.5 * z * z) / math.sqrt(2.0 * math.pi)
    return {"pooled": pooled, "pooled_sd": post_sd, "expected": max(expected, 0.0), "bias": math.sqrt(max(expected, 0.0))}


def _preds(e, shape, n_hat, est):
    return R.predicted_errors(e, shape, n_hat, {w: v["bias"] for w, v in est.items()})


def _p_wrong(e, shape, n_hat, est):
    """P(the best prediction is not the best) between the two smallest, the squared biases normal."""
    pred = _preds(e, shape, n_hat, est)
    c = sorted(((v, k) for k, v in pred.items() if k != "cells"))
    (v1, k1), (v2, k2) = c[0], c[1]
    sd = math.sqrt(sum(est[int(k[-1])]["pooled_sd"] ** 2 for k in (k1, k2) if k.startswith("marginals")))
    if sd <= 0:
        return 0.0
    return 0.5 * math.erfc((v2 * v2 - v1 * v1) / sd / math.sqrt(2.0))


def make_seq(f1=0.05, f2=0.15, alpha=0.2, single=False):
    def rule(rest, shape, n_hat, draw):
        if not R.probe_needed(rest, shape, n_hat):
            return "kron", rest
        d = len(shape)
        e1 = rest * f1
        ys, ebs = [draw(e1)], [e1]
        est = {w: probe_multi(ys, ebs, shape, n_hat, w) for w in R.MARGINAL_WAYS if w < d}
        e_left = rest - e1
        if not single and _p_wrong(rest * (1 - f1 - f2), shape, n_hat, est) > alpha:
            e2 = rest * f2
            ys.append(draw(e2))
            ebs.append(e2)
            e_left -= e2
            est = {w: probe_multi(ys, ebs, shape, n_hat, w) for w in R.MARGINAL_WAYS if w < d}
        return _pick(_preds(e_left, shape, n_hat, est)), e_left
    return rule


single05 = make_seq(0.05, single=True)
single10 = make_seq(0.10, single=True)
single20 = make_seq(0.20, single=True)
seq = make_seq(0.05, 0.15, 0.2)
seq10 = make_seq(0.05, 0.10, 0.2)
seq25 = make_seq(0.05, 0.25, 0.2)


# ---------------------------------------------------------------- two resolutions: a coarse lower bound
def edges_at(shape, blocks):
    return R._block_edges(shape, blocks)


def table_at(x, blocks):
    return R._block_table(x, R._block_edges(x.shape, blocks))


def excess_at(y, shape, eb, way, blocks, replicates=R.PROBE_REPLICATES):
    edges = edges_at(shape, blocks)
    ms = [R._coverage(int(n), tuple(e)) for n, e in zip(shape, edges)]
    t, null = null_of(y, way, ms, lambda base, rng: np.rint(base + rng.laplace(0.0, 1.0 / eb, y.shape)), replicates)
    return t - float(np.mean(null)), float(np.std(null, ddof=1))


def make_two(f4=0.05, f2=0.02, z=2.0, beta1=None):
    def rule(rest, shape, n_hat, draw):
        if not R.probe_needed(rest, shape, n_hat):
            return "kron", rest
        old = dict(R.MARGINAL_BIAS)
        if beta1 is not None:
            R.MARGINAL_BIAS[1] = beta1
        try:
            d = len(shape)
            e4, e2 = rest * f4, rest * f2
            y4 = draw(e4)
            y2 = draw(e2, 2) if f2 > 0 else None
            biases = {}
            for w in R.MARGINAL_WAYS:
                if w >= d:
                    continue
                b2 = R.probe_bias(y4, shape, e4, n_hat, w)["bias"] ** 2
                if y2 is not None:
                    ex, sd = excess_at(y2, shape, e2, w, 2)
                    b2 = max(b2, ex - z * sd)
                biases[w] = math.sqrt(b2)
            e_left = rest - e4 - e2
            return _pick(R.predicted_errors(e_left, shape, n_hat, biases)), e_left
        finally:
            R.MARGINAL_BIAS.update(old)
    return rule


two = make_two()
two_b10 = make_two(beta1=0.10)
two_b07 = make_two(beta1=0.07)
two_33 = make_two(0.03, 0.02)
two_b07_33 = make_two(0.03, 0.02, beta1=0.07)
two_55 = make_two(0.05, 0.05)
two_55_b07 = make_two(0.05, 0.05, beta1=0.07)
two_55_b10 = make_two(0.05, 0.05, beta1=0.10)
two_55_z1 = make_two(0.05, 0.05, z=1.0)


def make_guard(f1=0.05, f2=0.10, z=2.0, zu=2.0):
    """Stage 1 as the rule; when the 1-way model is chosen but would lose to the runner-up with its
    squared bias at the posterior's upper bound (pooled + zu·sd), a second probe of the 2-block table
    (f2 of ε): its lower confidence bound (excess − z·sd) on the models' squared biases."""
    def rule(rest, shape, n_hat, draw):
        if not R.probe_needed(rest, shape, n_hat):
            return "kron", rest
        d = len(shape)
        e1 = rest * f1
        y1 = draw(e1)
        est = {w: R.probe_bias(y1, shape, e1, n_hat, w) for w in R.MARGINAL_WAYS if w < d}
        e_left = rest - e1
        biases = {w: v["bias"] for w, v in est.items()}
        pred = R.predicted_errors(e_left, shape, n_hat, biases)
        best = _pick(pred)
        if best == "marginals1":
            up = max(est[1]["pooled"] + zu * est[1]["pooled_sd"], 0.0)
            e_after = rest - e1 - rest * f2
            pu = R.predicted_errors(e_after, shape, n_hat, {**biases, 1: math.sqrt(up)})
            runner = min(v for k, v in pu.items() if k not in ("cells", "marginals1"))
            if pu["marginals1"] > runner:
                e2 = rest * f2
                y2 = draw(e2, 2)
                e_left = e_after
                for w in biases:
                    ex, sd = excess_at(y2, shape, e2, w, 2)
                    biases[w] = math.sqrt(max(biases[w] ** 2, ex - z * sd))
                pred = R.predicted_errors(e_left, shape, n_hat, biases)
                best = _pick(pred)
        return best, e_left
    return rule


guard = make_guard()
guard15 = make_guard(f2=0.15)
guard_z1 = make_guard(z=1.0)

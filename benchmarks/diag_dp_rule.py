"""Diagnosis of the default's predictions for the marginal models: pure model bias (the maximum-
entropy fit of the exact marginals), bias + inference floor (private-pgm on noise-free marginals),
against the rule's prior and floor; the noise part from the measured MAE of the candidates' runs.

``PYTHONPATH=src nice python benchmarks/diag_dp_rule.py --cube gss4d`` → stdout (JSON line last).
``--coarsen 2x1x2,4x1x4`` instead: the inference floor of private-pgm (500 iterations, noise-free
2-way marginals) on the cube with adjacent cells of each dimension summed in blocks of the given
sizes (the experiment that set the floor's law, on Adult).
"""
from __future__ import annotations

import argparse
import itertools
import json
import math

import numpy as np

import ppdp
from bench_dp_default import CUBES, load
from ppdp.claims import dp_rule as R
from ppdp.mechanisms.histogram import MarginalsModel


def boxes(shape, k, seed):
    rng = np.random.default_rng(seed)
    lo, hi = [], []
    for n in shape:
        a = rng.integers(0, n, k)
        b = rng.integers(0, n, k)
        lo.append(np.minimum(a, b))
        hi.append(np.maximum(a, b) + 1)
    return np.array(lo).T, np.array(hi).T


def answer(cube, lo, hi):
    p = cube.astype(np.float64)
    for ax in range(cube.ndim):
        p = np.cumsum(p, axis=ax)
        p = np.concatenate([np.zeros_like(p.take([0], axis=ax)), p], axis=ax)
    out = np.zeros(len(lo))
    for corner in itertools.product((0, 1), repeat=cube.ndim):
        idx = tuple(np.where(c, hi[:, i], lo[:, i]) for i, c in enumerate(corner))
        sign = (-1) ** (cube.ndim - sum(corner))
        out += sign * p[idx]
    return out


def ipf(x, way, sweeps=200):
    fit = np.full(x.shape, x.sum() / x.size)
    d = x.ndim
    for _ in range(sweeps):
        for s in itertools.combinations(range(d), way):
            other = tuple(i for i in range(d) if i not in s)
            t, c = x.sum(axis=other, keepdims=True), fit.sum(axis=other, keepdims=True)
            fit = fit * np.divide(t, c, out=np.zeros_like(t, dtype=float), where=c > 0)
    return fit


def pgm_noise_free(x, way, iters=500):
    """private-pgm's mirror descent on the exact ``way``-marginals of ``x`` (tiny stddev)."""
    import warnings

    from mbi import Domain, LinearMeasurement, estimation

    names = [f"d{i}" for i in range(x.ndim)]
    ms = []
    for s in itertools.combinations(range(x.ndim), way):
        other = tuple(i for i in range(x.ndim) if i not in s)
        ms.append(LinearMeasurement(x.sum(axis=other).astype(float).ravel(), tuple(names[i] for i in s), stddev=0.01))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = estimation.MirrorDescent().estimate(Domain(names, x.shape), ms, iters=iters)
    return np.asarray(m.project(names).datavector(flatten=False), float)


def coarsen(x0, spec):
    x = x0
    for ax, f in enumerate(int(v) for v in spec.split("x")):
        if f > 1:
            x = np.add.reduceat(x, np.arange(0, x.shape[ax], f), axis=ax)
    return x


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cube", required=True)
    ap.add_argument("--pgm", default="1,2", help="ways to run private-pgm on noise-free marginals")
    ap.add_argument("--coarsen", default="", help="block sizes per dimension, e.g. 2x1x2,4x1x4")
    a = ap.parse_args()
    table, domains = load(a.cube)
    dims = CUBES[a.cube][2]
    _, x = MarginalsModel(1.0, dims, way=1, domains=domains)._dense_cube(table)
    if a.coarsen:
        for spec in a.coarsen.split(","):
            y = coarsen(x, spec)
            lo, hi = boxes(y.shape, 2000, 7)
            t = answer(y, lo, hi)
            ah = float(y.sum()) * R.box_fraction(y.shape)
            b = float(np.abs(answer(ipf(y, 2), lo, hi) - t).mean())
            p = float(np.abs(answer(pgm_noise_free(y, 2), lo, hi) - t).mean())
            fl = math.sqrt(max(p * p - b * b, 0.0)) / ah
            print(json.dumps({"cube": a.cube, "blocks": spec, "shape": list(y.shape), "cells": int(y.size),
                              "maxent_rel": b / ah, "pgm_rel": p / ah, "floor_rel": fl,
                              "floor_over_sqrt_cells": fl / math.sqrt(y.size),
                              "predicted_floor": R.inference_floor(y.shape, 2)}), flush=True)
        return
    shape = x.shape
    lo, hi = boxes(shape, 2000, 7)
    truth = answer(x, lo, hi)
    n = float(x.sum())
    a_hat = n * R.box_fraction(shape)
    out = {"cube": a.cube, "shape": list(shape), "n": n, "cells": int(x.size), "A_hat": a_hat,
           "true_mean_box": float(truth.mean()), "occupied_share": float((x > 0).mean())}
    for way in (1, 2):
        if way >= len(shape):
            continue
        fit = ipf(x, way)
        b = float(np.abs(answer(fit, lo, hi) - truth).mean())
        row = {"maxent_bias": b, "maxent_rel": b / a_hat, "prior_bias": R.MARGINAL_BIAS[way] * a_hat,
               "prior_floor": R.inference_floor(shape, way) * a_hat}
        if str(way) in a.pgm.split(","):
            rel = ppdp.publish(table, MarginalsModel(1e3, dims, way=way, domains=domains), seed=0,
                               allow_low_utility=True)
            e = float(np.abs(answer(rel.noisy_cells(), lo, hi) - truth).mean())
            row["pgm_noisefree"] = e
            row["pgm_floor_rel"] = math.sqrt(max(e * e - b * b, 0.0)) / a_hat
        for eps in (0.05, 0.1, 0.5, 1.0):
            row[f"pred_noise_{eps}"] = R.marginal_noise(eps, shape, way)
        out[f"way{way}"] = row
    out["kron_pred"] = {e: R.kron_mae(e, shape) for e in (0.05, 0.1, 0.5, 1.0)}
    print(json.dumps(out))


if __name__ == "__main__":
    main()

"""The default ε-DP histogram's choice by predicted error (``ppdp.claims.dp_rule``): the choice is
the smallest prediction, the closed forms agree with the explicit least squares and with the
error measured on the real Adult table, and the choice is re-derived by verify."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import numpy as np
import pytest

import ppdp
from ppdp.claims.dp_rule import (DP_CELL_SIGNAL, GUARD_FRACTION, PROBE_FRACTION, box_fraction, dp_choice, guard_bound,
                                 guard_needed, guard_shape, guard_table, identity_mae, inference_floor, kron_mae,
                                 marginals_mae, predicted_errors, probe_bias, probe_edges, probe_needed, probe_shape,
                                 probe_table)
from ppdp.datasets.domains import public_domains
from ppdp.errors import PpdpError
from ppdp.kernels.grid import cube_codes, declared_domains, dense_counts
from ppdp.kernels.strategies import kron_strategy
from ppdp.mechanisms.histogram import CellHistogram, DefaultHistogram, KroneckerLeastSquares
from ppdp.queries.workload import answer_exact
from ppdp.queries.workloads import range_workload

SHAPES = [(74, 99), (74, 16, 99, 2), (74, 16, 99), (91, 17, 46, 2), (5, 4, 3, 7), (20, 9, 6, 12), (2, 2, 2)]
EPSILONS = (0.01, 0.05, 0.1, 0.5, 1.0, 4.0)
TOTALS = (300, 8_802, 48_842, 10**6, 10**9)


@pytest.fixture(scope="module")
def adult():
    return ppdp.datasets.load("adult", n=4000, seed=1)


def _uniform_probe(shape, n):
    """Probe counts of a cube whose rows are spread evenly (no interaction: no model bias)."""
    k = probe_shape(shape)
    sizes = [np.diff(e) for e in probe_edges(shape)]
    cells = np.ones(k)
    for ax, sz in enumerate(sizes):
        sh = [1] * len(k)
        sh[ax] = len(sz)
        cells = cells * (sz / sz.sum()).reshape(sh)
    return [int(v) for v in np.rint(n * cells).ravel()]


def test_choice_is_the_smallest_predicted_error_in_three_or_more_dimensions():
    for shape, e, n in itertools.product(SHAPES, (0.05, 0.5, 4.0), (8_802, 10**6)):
        probe = _uniform_probe(shape, n) if probe_needed(e, shape, n) else None
        ch = dp_choice(e, shape, n, probe)
        pred = ch["predicted_mae"]
        e_rest = e - ch["epsilon_probe"]
        assert math.isclose(ch["epsilon_probe"], e * (PROBE_FRACTION + GUARD_FRACTION * ("guard" in ch)) if probe else 0.0)
        biases = None if probe is None else {int(k[-1]): v["bias"] for k, v in ch.get("guard", ch["bias"]).items()}
        assert pred == predicted_errors(e_rest, shape, n, biases)
        # the identity's closed form is never below kron's (kron's design contains the identity)
        assert pred["cells"] >= pred["kron"] * (1 - 1e-9), (shape, e)
        if len(shape) <= 2:
            want = "kron" if n * e / math.prod(shape) >= DP_CELL_SIGNAL else "agrid"
            assert ch["algorithm"] == want and probe is None
            continue
        got = ch["algorithm"] + str(ch.get("way", ""))
        best = min((v, k) for k, v in pred.items() if k != "cells")[1]
        assert got == best, (shape, e, n, pred)


def test_the_probe_is_spent_only_when_a_model_can_win_and_is_required_then():
    # kron's error falls as 1/ε, a model keeps its bias: with much budget no model is in
    # contention and nothing is spent; with little, the probe is spent
    assert not probe_needed(16.0, (5, 4, 3), 48_842) and not probe_needed(1.0, (74, 16, 99, 2), 48_842)
    assert probe_needed(0.05, (74, 16, 99, 2), 48_842) and probe_needed(0.5, (74, 16, 99, 2), 48_842)
    with pytest.raises(PpdpError, match="bias probe"):
        dp_choice(0.05, (74, 16, 99, 2), 48_842)
    with pytest.raises(PpdpError, match="no budget on a probe"):
        dp_choice(16.0, (5, 4, 3), 48_842, [1, 2])
    with pytest.raises(PpdpError, match="counts"):
        dp_choice(0.05, (74, 16, 99, 2), 48_842, [1, 2, 3])


@pytest.fixture(scope="module")
def adult4d_coarse():
    full = ppdp.datasets.load("adult")
    dims = ["age", "education_num", "hours_per_week", "sex"]
    declared, _ = declared_domains(dims, None, public_domains("adult", dims))
    spec, codes = cube_codes(full, dims, None, declared)
    return spec.shape, dense_counts(codes, spec.shape)


def test_the_probe_sees_the_models_bias_on_the_real_table(adult4d_coarse):
    # measured on Adult 4-D, 2,000 random boxes: the 1-way (independence) model's bias is 260 and
    # the 2-way maximum-entropy model's 22 (docs/dp-histograms.md); the probe's estimate from a
    # well-measured coarse table (ε_b = 1) is within 30% of those, and from a probe that is almost
    # all noise (ε_b = 0.001) it stays at the prior instead of following the noise
    shape, x = adult4d_coarse
    y = probe_table(x)
    rng = np.random.default_rng(3)
    n = int(x.sum())
    for eps_b, want1, want2 in ((1.0, 260.0, 22.0), (0.001, None, None)):
        noisy = np.rint(y + rng.laplace(0, 1 / eps_b, y.shape))
        b1, b2 = (probe_bias(noisy, shape, eps_b, n, w) for w in (1, 2))
        if want1 is None:
            assert 0.7 < b1["bias"] / b1["prior"] < 1.3 and 0.7 < b2["bias"] / b2["prior"] < 1.3, (b1, b2)
        else:
            assert 0.7 < b1["bias"] / want1 < 1.3 and 0.7 < b2["bias"] / want2 < 1.3, (b1, b2)
    # deterministic: the same probe gives the same estimate (verify re-derives it)
    assert probe_bias(noisy, shape, 0.001, n, 1) == probe_bias(noisy, shape, 0.001, n, 1)


def test_the_probe_is_not_biased_upwards_when_the_noise_swamps_small_cells(adult4d_coarse):
    # Adult 4-D at ε = 0.1 (ε_b = 0.005, Laplace scale 200 per coarse cell, many coarse cells far
    # below it): the median estimate over 15 probes stays within 25% of the noise-free statistic
    # of the 1-way model (≈ 223). Clipping the noisy cells before the fit read the clipped mass as
    # bias: the median was 387 (1.7×), since the null replicates, drawn around the smooth fit, were
    # clipped less. Control: a uniform table (no model bias) keeps the estimate near the prior's
    # floor of evidence, far below the real table's.
    shape, x = adult4d_coarse
    y = probe_table(x).astype(np.float64)
    n = int(x.sum())
    exact = math.sqrt(probe_bias(y, shape, 1e6, n, 1)["statistic"])
    rng = np.random.default_rng(11)
    eps_b = 0.005
    est = [probe_bias(np.rint(y + rng.laplace(0, 1 / eps_b, y.shape)), shape, eps_b, n, 1)["bias"]
           for _ in range(15)]
    assert 0.75 < float(np.median(est)) / exact < 1.25, (np.median(est), exact)
    flat = np.asarray(_uniform_probe(shape, n), dtype=np.float64).reshape(y.shape)
    assert math.sqrt(max(probe_bias(flat, shape, 1e6, n, 1)["statistic"], 0.0)) < 0.05 * exact


def test_the_inference_floor_grows_with_the_cube():
    # κ₂·√cells of a random box's count (set on Adult 3-D / 4-D and coarsenings): 420 cells
    # (HealthInsurance 4-D) ≈ 0.0025, the Adult 4-D cube ≈ 0.058; the 1-way model has none
    assert inference_floor((5, 4, 3, 7), 2) == pytest.approx(0.0025, rel=0.05)
    assert inference_floor((74, 16, 99, 2), 2) == pytest.approx(0.058, rel=0.02)
    assert inference_floor((74, 16, 99, 2), 1) == 0.0
    a = marginals_mae(0.1, (5, 4, 3, 7), 8802, 2, bias=0.0)
    assert a["bias"] == pytest.approx(inference_floor((5, 4, 3, 7), 2) * 8802 * box_fraction((5, 4, 3, 7)))


def test_closed_forms_agree_with_the_explicit_least_squares():
    # kron: mean sd of the least-squares answer over every box of a small cube, from the explicit
    # normal equations (continuous-Laplace variance 2/ε_s² per step) against the closed form
    shape, e = (6, 5, 3), 0.7
    strat = kron_strategy(shape)
    mats = [s.matrix() for s in strat]
    a_full = mats[0][0]
    w_full = mats[0][1]
    for a, w in mats[1:]:
        a_full, w_full = np.kron(a_full, a), np.kron(w_full, w)
    cov = 2.0 / e**2 * np.linalg.inv(a_full.T @ (a_full * (w_full**2)[:, None]))
    sds = []
    for r in itertools.product(*[[(lo, hi) for lo in range(n) for hi in range(n)] for n in shape]):
        q = np.zeros(shape)
        q[tuple(slice(min(lo, hi), max(lo, hi) + 1) for lo, hi in r)] = 1.0
        sds.append(math.sqrt(q.ravel() @ cov @ q.ravel()))
    assert math.isclose(kron_mae(e, shape), math.sqrt(2 / math.pi) * float(np.mean(sds)), rel_tol=0.02)
    # identity: √(2/π)·√2/ε·Π E√len, and the share of the cube a random box covers
    lens = [np.mean([abs(a - b) + 1 for a in range(n) for b in range(n)]) for n in shape]
    assert math.isclose(box_fraction(shape), math.prod(ln / n for ln, n in zip(lens, shape)), rel_tol=1e-9)
    sq = [np.mean([math.sqrt(abs(a - b) + 1) for a in range(n) for b in range(n)]) for n in shape]
    want = math.sqrt(2 / math.pi) * math.sqrt(2.0) / e * math.prod(sq)
    assert math.isclose(identity_mae(e, shape), want, rel_tol=1e-9)
    # a marginal model's prediction: √(noise² + bias²), the bias proportional to N̂
    m1, m2 = marginals_mae(e, shape, 1000, 2), marginals_mae(e, shape, 2000, 2)
    assert math.isclose(m2["bias"], 2 * m1["bias"]) and math.isclose(m1["noise"], m2["noise"])
    assert math.isclose(m1["mae"], math.hypot(m1["noise"], m1["bias"]))


def test_predictions_of_the_data_independent_strategies_match_the_real_table(adult):
    dims = ["age", "education_num", "sex"]
    rel = ppdp.publish(adult, KroneckerLeastSquares(0.5, dims, domains="adult"), seed=0)
    doms = {d: list(rel.domains[d]) for d in dims}
    errs = {"kron": [], "cells": []}
    for s in range(3):
        wl = range_workload(doms, dims, 300, seed=50 + s)
        truth = answer_exact(adult, wl)
        for name, mech in (("kron", KroneckerLeastSquares), ("cells", CellHistogram)):
            r = ppdp.publish(adult, mech(0.5, dims, domains="adult"), seed=s)
            errs[name].append(float(np.abs(r.answer(wl) - truth).mean()))
    shape = rel.shape
    assert 0.85 < np.mean(errs["kron"]) / kron_mae(0.5, shape) < 1.15, errs
    assert 0.85 < np.mean(errs["cells"]) / identity_mae(0.5, shape) < 1.15, errs


@pytest.mark.parametrize("eps,want", [pytest.param(0.05, "marginals", marks=pytest.mark.slow), (4.0, "kron")])
def test_the_default_records_its_predictions_and_verify_re_derives_them(adult, eps, want):
    dims = ["age", "education_num", "sex"]
    rel = ppdp.publish(adult, DefaultHistogram(eps, dims, domains="adult"), seed=2)
    ch = rel.certificate["choice"]
    assert ch["algorithm"] == want
    assert set(ch["predicted_mae"]) == {"cells", "kron", "marginals1", "marginals2"}
    assert ppdp.verify(rel).ok and ppdp.verify(rel, adult).ok
    rel.manifest["certificate"]["choice"]["predicted_mae"]["kron"] *= 1.5
    assert not ppdp.verify(rel).ok
    # the bias probe (ε ≥ 3-D with a model in contention): in the ledger, in the choice, read by verify
    rel = ppdp.publish(adult, DefaultHistogram(eps, dims, domains="adult"), seed=2)
    ch = rel.certificate["choice"]
    whats = [s["what"] for s in rel.certificate["ledger"]]
    if ch["epsilon_probe"] > 0:
        assert whats[1].startswith("bias probe") and len(ch["probe"]) == math.prod(ch["probe_shape"])
        rel.manifest["certificate"]["choice"]["probe"][0] += 1000  # another probe, the same recorded choice
        rep = ppdp.verify(rel)
        assert not rep.ok
        rel.manifest["certificate"]["choice"]["probe"] = "tampered"
        assert not ppdp.verify(rel).ok
    else:
        assert not any(w.startswith("bias probe") for w in whats) and "probe" not in ch


def test_a_tampered_choice_fails_verify_and_a_replay_keeps_the_recorded_strategy(adult):
    dims = ["age", "education_num", "sex"]
    mech = DefaultHistogram(0.2, dims, domains="adult")
    rel = ppdp.publish(adult, mech, seed=4)
    ch = rel.certificate["choice"]
    assert ch["epsilon_probe"] > 0 and ppdp.verify(rel).ok
    # replay (parametric bootstrap): the probe drawn afresh, the strategy the ledger records
    from ppdp.claims.dp import DPClaim
    claim = DPClaim.from_certificate(rel.certificate)
    x = np.zeros(rel.shape, np.int64)
    x[0, 0, 0] = 5_000
    cells, _ = mech.replay(x, claim.noisy_total, claim.ledger, np.random.default_rng(0))
    assert cells.shape == tuple(rel.shape)
    other = "kron" if ch["algorithm"] != "kron" else "marginals"
    rel.manifest["certificate"]["choice"]["algorithm"] = other
    assert not ppdp.verify(rel).ok


def test_a_tampered_bias_estimate_fails_verify(adult):
    # the probe's pooled estimate and its sd (whose expectation of max(B², 0) is the bias the
    # prediction uses) are part of the choice verify re-derives from the probe's counts
    rel = ppdp.publish(adult, DefaultHistogram(0.2, ["age", "education_num", "sex"], domains="adult"), seed=4)
    ch = rel.certificate["choice"]
    assert ch["epsilon_probe"] > 0 and ppdp.verify(rel).ok
    est = dict(ch["bias"]["marginals1"])
    assert est["bias"] ** 2 >= max(est["pooled"], 0.0) and est["pooled_sd"] > 0
    for key in ("pooled", "pooled_sd", "bias"):
        rel.manifest["certificate"]["choice"]["bias"]["marginals1"][key] = est[key] * 0.5 + 1.0
        assert not ppdp.verify(rel).ok, key
        rel.manifest["certificate"]["choice"]["bias"]["marginals1"][key] = est[key]
    assert ppdp.verify(rel).ok


@pytest.fixture(scope="module")
def fair():
    """statsmodels' ``fair`` (6,366 rows) as the gauntlet writes it, 4-D age × yrs_married ×
    religious × educ in its reviewed schema's domains; the 1-way model's bias there is 0.38 of a
    random box's count (docs/dp-histograms.md)."""
    from ppdp.schema import read_table

    g = Path(__file__).resolve().parents[1] / "gauntlet"
    t = read_table(g / "data" / "fair.tsv", g / "schemas" / "fair.toml")
    dims = ["age", "yrs_married", "religious", "educ"]
    dom = {d: list(t.domain(d)) for d in dims}
    declared, _ = declared_domains(dims, None, dom)
    spec, codes = cube_codes(t, dims, None, declared)
    return t, dims, dom, dense_counts(codes, spec.shape)


def test_the_guard_is_spent_when_the_1way_choice_is_unsafe_and_raises_its_bias_only_on_evidence(fair):
    # Fair's shape and size at ε = 0.1: a first probe with no interaction leaves the 1-way model
    # chosen on the prior, which is not safe against the 2-way model: the guard is wanted, and a
    # choice without its counts is refused. A guard table with no interaction (control) has a lower
    # bound of 0 and keeps the 1-way model; the real table's 2-block counts bound the 1-way model's
    # bias far above the prior and take the 2-way model.
    _, _, _, x = fair
    shape, n, e = x.shape, int(x.sum()), 0.1 * 0.99
    p1 = _uniform_probe(shape, n)
    assert guard_needed(e, shape, n, p1)
    with pytest.raises(PpdpError, match="guard"):
        dp_choice(e, shape, n, p1)
    assert not guard_needed(0.05 * 0.99, (74, 16, 99, 2), 48_842, _uniform_probe((74, 16, 99, 2), 48_842))
    flat = _uniform_probe(shape, n)
    k1 = math.prod(probe_shape(shape))
    calm = dp_choice(e, shape, n, p1 + [int(v) for v in np.rint(
        np.full(guard_shape(shape), n / math.prod(guard_shape(shape)))).ravel()])
    assert calm["guard"]["marginals1"]["lower"] == 0.0 and calm["algorithm"] == "marginals" and calm["way"] == 1
    assert calm["guard"]["marginals1"]["bias"] == pytest.approx(calm["bias"]["marginals1"]["bias"])
    real = dp_choice(e, shape, n, flat[:k1] + [int(v) for v in guard_table(x).ravel()])
    g1 = real["guard"]["marginals1"]
    assert g1["lower"] > 3 * real["bias"]["marginals1"]["bias"] ** 2 and (real["algorithm"], real["way"]) == ("marginals", 2)
    assert math.isclose(real["epsilon_probe"], e * (PROBE_FRACTION + GUARD_FRACTION))
    # deterministic (verify re-derives it)
    assert guard_bound(guard_table(x), shape, e * GUARD_FRACTION, 1) == guard_bound(guard_table(x), shape, e * GUARD_FRACTION, 1)


def test_the_guard_is_in_the_ledger_verify_re_derives_it_and_a_replay_follows_it(fair):
    table, dims, dom, _ = fair
    mech = DefaultHistogram(0.1, dims, domains=dom)
    rel = ppdp.publish(table, mech, seed=0, allow_low_utility=True)
    ch = rel.certificate["choice"]
    whats = [s["what"] for s in rel.certificate["ledger"]]
    assert whats[1].startswith("bias probe:") and whats[2].startswith("bias probe (guard)")
    k1, k2 = math.prod(ch["probe_shape"]), math.prod(ch["guard_shape"])
    assert len(ch["probe"]) == k1 + k2 and (ch["algorithm"], ch["way"]) == ("marginals", 2)
    assert ppdp.verify(rel).ok and ppdp.verify(rel, table).ok
    from ppdp.claims.dp import DPClaim
    claim = DPClaim.from_certificate(rel.certificate)
    cells, _ = mech.replay(np.ones(rel.shape, np.int64), claim.noisy_total, claim.ledger, np.random.default_rng(1))
    assert cells.shape == tuple(rel.shape)
    rel.manifest["certificate"]["choice"]["probe"][k1] += 1000  # another guard count, the same recorded choice
    assert not ppdp.verify(rel).ok
    rel.manifest["certificate"]["choice"]["probe"][k1] -= 1000
    assert ppdp.verify(rel).ok
    rel.manifest["certificate"]["choice"]["guard"]["marginals1"]["lower"] *= 0.5
    assert not ppdp.verify(rel).ok

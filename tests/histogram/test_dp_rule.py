"""The default ε-DP histogram's choice by predicted error (``ppdp.claims.dp_rule``): the choice is
the smallest prediction, the closed forms agree with the explicit least squares and with the
error measured on the real Adult table, and the choice is re-derived by verify."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

import ppdp
from ppdp.claims.dp_rule import (DP_CELL_SIGNAL, box_fraction, dp_choice, identity_mae, kron_mae, marginals_mae,
                                 predicted_errors)
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


def test_choice_is_the_smallest_predicted_error_in_three_or_more_dimensions():
    for shape, e, n in itertools.product(SHAPES, EPSILONS, TOTALS):
        ch = dp_choice(e, shape, n)
        pred = ch["predicted_mae"]
        assert pred == predicted_errors(e, shape, n)
        # the identity's closed form is never below kron's (kron's design contains the identity)
        assert pred["cells"] >= pred["kron"] * (1 - 1e-9), (shape, e)
        if len(shape) <= 2:
            want = "kron" if n * e / math.prod(shape) >= DP_CELL_SIGNAL else "agrid"
            assert ch["algorithm"] == want
            continue
        got = ch["algorithm"] + str(ch.get("way", ""))
        best = min((v, k) for k, v in pred.items() if k != "cells")[1]
        assert got == best, (shape, e, n, pred)


def test_more_budget_or_more_rows_never_moves_away_from_the_data_independent_strategy():
    # kron's error falls as 1/ε and does not depend on N; a model's bias grows with N and does
    # not fall with ε: once kron wins it keeps winning as ε or N̂ grows
    for shape in SHAPES[1:]:
        for n in TOTALS:
            picks = [dp_choice(e, shape, n)["algorithm"] for e in (0.01, 0.05, 0.1, 0.5, 1.0, 4.0, 16.0)]
            if "kron" in picks:
                assert all(p == "kron" for p in picks[picks.index("kron"):]), (shape, n, picks)
        for e in EPSILONS:
            picks = [dp_choice(e, shape, n)["algorithm"] for n in TOTALS]
            if "kron" in picks:
                assert all(p == "kron" for p in picks[picks.index("kron"):]), (shape, e, picks)
    assert dp_choice(1.0, (74, 16, 99, 2), 10**9)["algorithm"] == "kron"
    assert dp_choice(0.01, (74, 16, 99, 2), 48_842)["way"] == 1


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

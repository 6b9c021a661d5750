"""The contract every registered mechanism keeps, parametrised over ``registry.mechanisms()``.

A mechanism defined anywhere is picked up here automatically; it must also have an entry in
:data:`EXAMPLES` (parameters + a small bundled table), otherwise ``test_has_an_example``
fails — a new mechanism cannot slip through untested.

Checked: immutability (also of nested values), ``get_params`` and JSON round trips, seed
reproducibility (byte-identical files), publish → save → load → verify, bad parameters derived
from the constraints raise ParameterError, empty and single-query workloads.
"""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import pytest

import ppdp
from ppdp import registry
from ppdp.errors import ParameterError
from ppdp.queries import Workload, parse_where
from ppdp.validation import (Constraint, Edges, Flag, FrozenDict, Integer, LabelMap, Labels, Optional, Options, Real,
                             Text, Triples)

EDU_LABELS = ("Bachelors degree(BA AB BS)", "Masters degree(MA MS MEng MEd MSW MBA)")

#: mechanism name → (parameters exercising nested values where the mechanism has them, (dataset, rows))
EXAMPLES: dict[str, tuple[dict, tuple[str, int]]] = {
    "fprivacy": (dict(theta=8.0, floor=0.02, overrides={EDU_LABELS[0]: 1.0}, fake_values=1,
                      negative_associations=[["sex", "Female", EDU_LABELS[1]]], sensitive_values=list(EDU_LABELS)),
                 ("edu", 3000)),
    "anatomy": (dict(l=5, fake_values=1, negative_associations=[["sex", "Male", "2"]]), ("occ", 3000)),
    "uniform": (dict(rho1=0.1, rho2=0.5), ("occ", 3000)),
    "diverted": (dict(l_prime=3), ("occ", 3000)),
    "sdr": (dict(rho1=0.1, rho2=0.5, merge="min-size", min_size=500), ("edu", 3000)),
    "cells": (dict(epsilon=1.0, dims=["age", "sex"], bins={"age": [17, 30, 50, 91]}, domains={"sex": ["Female", "Male"]}),
              ("adult", 3000)),
    "dpcube": (dict(epsilon=1.0, dims=["age", "hours_per_week"], bins={"age": [17, 25, 35, 45, 55, 65, 91]},
                    domains="adult"), ("adult", 3000)),
    "dpcube-paper": (dict(epsilon=1.0, dims=["age", "hours_per_week"], bins={"age": [17, 25, 35, 45, 55, 65, 91]},
                          alpha1_fraction=0.25, xi0=50.0, domains="adult"), ("adult", 3000)),
    "kdtree": (dict(epsilon=1.0, dims=["age", "sex"], depth=3, domains="adult"), ("adult", 3000)),
    "consistency": (dict(epsilon=1.0, dims=["age", "sex"], fanout="binary", domains="adult"), ("adult", 3000)),
    "kron": (dict(epsilon=1.0, dims=["age", "hours_per_week"], bins={"age": [17, 25, 35, 45, 55, 65, 91]},
                  domains="adult"), ("adult", 3000)),
    "agrid": (dict(epsilon=1.0, dims=["age", "hours_per_week"], alpha=0.4, c=8.0, profile=0.1, domains="adult"),
              ("adult", 3000)),
    "marginals": (dict(epsilon=1.0, dims=["age", "sex", "race"], way=2, domains="adult"), ("adult", 3000)),
    "dp": (dict(epsilon=1.0, dims=["age", "hours_per_week"], domains="adult"), ("adult", 3000)),  # → agrid
    "global": (dict(l_prime=5), ("occ", 3000)),
    "subset": (dict(rho1=0.1, rho2=0.3), ("occ", 3000)),
    "laplace": (dict(epsilon=0.5, queries=["sex = 'Female'", "age BETWEEN 30 AND 40"]), ("occ", 3000)),
}

MECHANISMS = registry.mechanisms()
NAMES = list(MECHANISMS)
_TABLES: dict = {}


def _example(name):
    if name not in EXAMPLES:
        pytest.fail(f"mechanism {name!r} has no entry in tests/contract/test_contract.py EXAMPLES "
                    "(example parameters + a small bundled table): add one")
    params, (ds, n) = EXAMPLES[name]
    if (ds, n) not in _TABLES:
        _TABLES[ds, n] = ppdp.datasets.load(ds, n=n, seed=0)
    return MECHANISMS[name], copy.deepcopy(params), _TABLES[ds, n]


def _publish(name, seed=7):
    cls, params, table = _example(name)
    return ppdp.publish(table, cls(**params), seed=seed), table


# ------------------------------------------------------------------------- coverage
@pytest.mark.parametrize("name", NAMES)
def test_has_an_example(name):
    cls, params, table = _example(name)
    assert set(params) <= set(cls._parameter_constraints)
    assert cls.name == name and cls.family and cls.claim_model and cls.paper


def test_examples_are_registered():
    assert set(EXAMPLES) <= set(NAMES), f"examples for mechanisms that are not registered: {set(EXAMPLES) - set(NAMES)}"


# ---------------------------------------------------------------------- immutability
def _assert_deeply_frozen(value, where):
    assert not isinstance(value, (list, dict, set, bytearray)), f"{where} is a mutable {type(value).__name__}"
    if isinstance(value, FrozenDict):
        with pytest.raises(TypeError):
            value["__new__"] = 1  # type: ignore[index]
        with pytest.raises(AttributeError):
            value._d = {}
        for k, v in value.items():
            _assert_deeply_frozen(v, f"{where}[{k!r}]")
    elif isinstance(value, tuple):
        with pytest.raises(TypeError):
            value[0] = None  # type: ignore[index]
        for i, v in enumerate(value):
            _assert_deeply_frozen(v, f"{where}[{i}]")


@pytest.mark.parametrize("name", NAMES)
def test_immutable(name):
    cls, params, _ = _example(name)
    m = cls(**params)
    for p in cls._parameter_constraints:
        with pytest.raises(AttributeError):
            setattr(m, p, getattr(m, p))
        with pytest.raises(AttributeError):
            delattr(m, p)
        _assert_deeply_frozen(getattr(m, p), f"{name}.{p}")
    with pytest.raises(AttributeError):
        m.something_new = 1
    # mutating what was passed in does not reach the mechanism
    before = m.get_params()
    for v in params.values():
        if isinstance(v, list):
            v.append(v[0] if v else "x")
        elif isinstance(v, dict):
            v["__added__"] = next(iter(v.values()))
    assert m.get_params() == before


# ---------------------------------------------------------------------- round trips
@pytest.mark.parametrize("name", NAMES)
def test_get_params_round_trip(name):
    cls, params, _ = _example(name)
    m = cls(**params)
    p = m.get_params()
    assert set(p) == set(cls._parameter_constraints)
    assert type(m)(**p) == m
    again = json.loads(json.dumps(p))
    assert again == p
    assert type(m)(**again) == m and hash(type(m)(**again)) == hash(m)


# ---------------------------------------------------------------------- publishing
def _files(d: Path) -> dict[str, bytes]:
    return {f.name: f.read_bytes() for f in sorted(d.iterdir())}


@pytest.mark.parametrize("name", NAMES)
def test_seed_reproducible_and_verifiable(name, tmp_path):
    a, table = _publish(name, seed=11)
    b, _ = _publish(name, seed=11)
    a.save(tmp_path / "a")
    b.save(tmp_path / "b")
    fa, fb = _files(tmp_path / "a"), _files(tmp_path / "b")
    assert "manifest.json" in fa and any(f.endswith(".parquet") for f in fa)
    assert fa.keys() == fb.keys()
    for f in fa:
        assert fa[f] == fb[f], f"{name}: {f} differs between two publishes with the same seed"
    loaded = ppdp.load_release(tmp_path / "a")
    assert loaded.manifest["mechanism"] == name and loaded.manifest["family"] == MECHANISMS[name].family
    assert loaded.manifest["params"] == MECHANISMS[name](**EXAMPLES[name][0]).get_params()
    rep = ppdp.verify(tmp_path / "a", table)
    assert rep.ok, rep.problems
    assert ppdp.verify(loaded).ok


@pytest.mark.parametrize("name", NAMES)
def test_workload_shapes(name):
    rel, table = _publish(name)
    assert rel.answer(Workload([])).shape == (0,)
    if rel.family == "answers":  # a batch of noisy answers serves only its own queries
        query = parse_where(rel.answers.column("where")[0].as_py())
    else:
        col = rel.schema["quasi"][0]
        query = parse_where(f"{col} = '{rel.domains[col][0]}'")
    est = rel.answer(Workload([query]))
    assert est.shape == (1,) and math.isfinite(float(est[0]))


# ------------------------------------------------------------- tampered claim (placeholder)
# A "tampered claim fails verify" contract test belongs here once every family's claim lives
# in ppdp/claims/ (edit one field of manifest["certificate"] → verify reports a problem).


# ---------------------------------------------------------------------- bad parameters
def bad_values(con: Constraint) -> list[tuple[str, object]]:
    """Values that ``con`` must refuse, derived from its type and range."""
    if isinstance(con, Optional):
        return bad_values(con.inner)
    if isinstance(con, (Real, Integer)):
        out = [("nan", math.nan), ("inf", math.inf), ("-inf", -math.inf), ("bool", True), ("text", "1"),
               ("list", [1])]
        if isinstance(con, Integer):
            out.append(("fractional", 2.5))
            out.append(("float", float(con.lo if con.lo is not None else 0) + 3.0))
        if con.lo is not None:
            out.append(("below range", con.lo - 1))
            if con.closed in ("right", "neither"):
                out.append(("open lower end", con.lo))
        if con.hi is not None:
            out.append(("above range", con.hi + 1))
            if con.closed in ("left", "neither"):
                out.append(("open upper end", con.hi))
        return out
    if isinstance(con, Options):
        return [("unknown option", "no-such-option"), ("number", 1), ("bool", True)]
    if isinstance(con, Flag):
        return [("int", 1), ("text", "yes"), ("none", None)]
    if isinstance(con, Text):
        return [("empty", ""), ("number", 5)]
    if isinstance(con, Labels):
        out = [("number", 5), ("empty label", [""]), ("mapping", {"a": 1}), ("bool item", [True])]
        if con.distinct:
            out.append(("repeated", ["a", "a"]))
        if con.min_len > 0:
            out.append(("too short", []))
        return out
    if isinstance(con, Edges):
        return [("text", "x"), ("list", [1, 2]), ("one edge", {"d": [1]}), ("decreasing", {"d": [2, 1]}),
                ("nan edge", {"d": [0, math.nan]})]
    if isinstance(con, LabelMap):
        return [("text", "x"), ("list", [1, 2])] + [(f"value {d}", {"k": v}) for d, v in bad_values(con.values)
                                                    if not isinstance(v, (list, dict))]
    if isinstance(con, Triples):
        return [("text", "x"), ("pair", [["a", "b"]]), ("number", 5)]
    pytest.fail(f"no bad values known for constraint {type(con).__name__}: extend bad_values()")


def _bad_cases():
    for name, cls in MECHANISMS.items():
        for p, con in cls._parameter_constraints.items():
            for what, v in bad_values(con):
                yield pytest.param(name, p, v, id=f"{name}-{p}-{what}")


@pytest.mark.parametrize("name, param, value", list(_bad_cases()))
def test_bad_parameter_raises(name, param, value):
    cls, params, _ = _example(name)
    params[param] = value
    with pytest.raises(ParameterError) as e:
        cls(**params)
    assert (e.value.param or "").split("[")[0] == param, (e.value.param, str(e.value))


@pytest.mark.parametrize("name", NAMES)
def test_unknown_parameter_raises(name):
    cls, params, _ = _example(name)
    with pytest.raises((ParameterError, TypeError)):
        cls(**params, no_such_parameter=1)

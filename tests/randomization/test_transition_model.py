"""The randomized family's joints: one transition model, typed claims re-derived by verify,
the audit's bound taken from the claim, estimator objects, plans, no upward imports."""

import ast
import json
from pathlib import Path

import numpy as np
import pytest

import ppdp
from ppdp.audit import audit_release
from ppdp.claims import claim_of
from ppdp.claims.diverted import DivertedClaim
from ppdp.claims.retention import RetentionClaim
from ppdp.claims.rho import RhoClaim
from ppdp.errors import ParameterError
from ppdp.estimators.randomized import FullIterative, Inversion
from ppdp.kernels.transition import TransitionModel, perturbation_params
from ppdp.releases.base import load_release

SRC = Path(ppdp.__file__).parent


@pytest.fixture(scope="module")
def edu():
    return ppdp.datasets.load("edu", n=6000, seed=0)


def test_sdr_rho2_tampering_fails_verify_and_audit_bound_is_the_verified_rho2(edu, tmp_path):
    rel = ppdp.publish(edu, ppdp.SDR(0.1, 0.3), seed=0)
    rel.save(tmp_path / "r")
    loaded = load_release(tmp_path / "r")
    assert ppdp.verify(loaded, edu).ok
    claim = claim_of(loaded.manifest)
    assert isinstance(claim, RhoClaim) and claim.is_sdr
    assert claim.bound()["posterior"] == loaded.manifest["params"]["rho2"] == 0.3
    res = audit_release(loaded, edu)
    assert set(res.summary["bound"].dropna()) == {0.3}
    # the tampering: certificate rho2 0.3 → 0.9
    m = json.loads((tmp_path / "r" / "manifest.json").read_text())
    m["certificate"]["rho2"] = 0.9
    (tmp_path / "r" / "manifest.json").write_text(json.dumps(m))
    bad = load_release(tmp_path / "r")
    for rep in (ppdp.verify(bad), ppdp.verify(bad, edu)):
        assert not rep.ok and any("rho2" in p for p in rep.problems), rep.problems


@pytest.mark.parametrize("mech", [ppdp.UniformPerturbation(0.1, 0.5), ppdp.UniformPerturbation(retention=0.3),
                                  ppdp.GlobalRandomization(5), ppdp.SDR(0.1, 0.5), ppdp.Diverted(3)])
def test_publish_save_load_verify_and_claim_roundtrip(edu, mech, tmp_path):
    rel = ppdp.publish(edu, mech, seed=1)
    assert ppdp.verify(rel, edu).ok
    rel.save(tmp_path / "r")
    loaded = load_release(tmp_path / "r")
    rep = ppdp.verify(loaded, edu)
    assert rep.ok, rep.problems
    claim = claim_of(loaded.manifest)
    # UniformPerturbation(retention=…) states the retention model, not (ρ1, ρ2)
    assert claim.model == ("retention" if mech.get_params().get("retention") else mech.claim_model)
    assert type(claim).from_certificate(claim.to_certificate()) == claim
    assert claim.statement()
    est = loaded.answer(["education = 'Children'"])
    assert est.shape == (1,) and np.isfinite(est).all()
    assert loaded.answer([]).shape == (0,)


def test_global_randomization_is_retention_one_over_l_prime(edu):
    rel = ppdp.publish(edu, ppdp.GlobalRandomization(5), seed=0)
    claim = claim_of(rel.manifest)
    assert isinstance(claim, RetentionClaim) and claim.retention == pytest.approx(0.2)
    assert claim.bound()["posterior"] is None
    same = ppdp.publish(edu, ppdp.UniformPerturbation(retention=0.2), seed=0)
    assert rel.data.equals(same.data)
    rel.manifest["params"]["l_prime"] = 4  # the claim no longer matches the parameters
    assert not ppdp.verify(rel).ok
    with pytest.raises(ParameterError):
        ppdp.GlobalRandomization(1)


def test_uniform_claim_tampering(edu):
    rel = ppdp.publish(edu, ppdp.UniformPerturbation(0.1, 0.5), seed=0)
    rel.manifest["certificate"]["gamma"] *= 2
    assert not ppdp.verify(rel).ok
    rel = ppdp.publish(edu, ppdp.UniformPerturbation(0.1, 0.5), seed=0)
    rel.manifest["certificate"]["rho2"] = 0.9
    assert not ppdp.verify(rel).ok


def test_diverted_claim_tampering(edu):
    rel = ppdp.publish(edu, ppdp.Diverted(3), seed=0)
    assert isinstance(claim_of(rel.manifest), DivertedClaim)
    rel.manifest["certificate"]["p"] = 0.5
    assert not ppdp.verify(rel).ok
    rel.manifest["certificate"]["p"] = 1 / 3
    rel.manifest["certificate"]["l_prime"] = 2
    assert not ppdp.verify(rel).ok
    rel.manifest["certificate"]["l_prime"] = "3"
    assert not ppdp.verify(rel).ok


def test_one_transition_model(edu):
    m = len(edu.domain(edu.sa))
    uni = ppdp.publish(edu, ppdp.UniformPerturbation(0.1, 0.5), seed=0).transition_models()[0]
    g = uni.single
    assert g.is_uniform and g.matrix.shape == (m, m) and np.allclose(g.matrix.sum(axis=1), 1)
    ret, p, q = perturbation_params(m, g.matrix[0, 0] / g.q)
    assert g.p == pytest.approx(float(p)) and g.q == pytest.approx(float(q))
    sdr_rel = ppdp.publish(edu, ppdp.SDR(0.1, 0.5), seed=0)
    sdr = sdr_rel.transition_models()[0]
    assert sdr.group_column == "subtable" and len(sdr.groups) == len(sdr_rel.certificate["subtables"])
    for grp, st in zip(sdr.groups, sdr_rel.certificate["subtables"]):
        assert grp.m == st["m"] and grp.p == pytest.approx(st["p"]) and grp.q == pytest.approx(st["q"])
        assert np.allclose(grp.matrix.sum(axis=1), 1)
    div_rel = ppdp.publish(edu, ppdp.Diverted(3), seed=0)
    div = div_rel.transition_models()[0]
    f = div_rel.published_counts(edu.sa)
    T = div.single.matrix
    assert np.allclose(T.sum(axis=1), 1) and not div.single.is_uniform
    counts = edu.counts(edu.sa)
    assert isinstance(TransitionModel.diverted(edu.sa, counts, 3).single.matrix, np.ndarray)
    assert f.sum() == div_rel.manifest["n_published"]
    # the posterior of the model is a distribution over true values for every published value
    post = div.single.posterior(f / f.sum())
    assert np.allclose(post.sum(axis=1)[f > 0], 1)


def test_estimator_objects(edu):
    rel = ppdp.publish(edu, ppdp.Diverted(3), seed=0)
    wl = ["sex = 'Female' AND education = 'Children'", "education = 'Children'"]
    est, iters = FullIterative().answer_with_iterations(rel, wl)
    assert np.array_equal(est, rel.answer(wl, estimator="full-iterative")) and iters.dtype.kind == "i"
    assert np.array_equal(rel.answer(wl, estimator=FullIterative(tol=0.01)), est)
    assert np.array_equal(rel.answer(wl), rel.answer(wl, estimator="full-eb"))  # the default
    with pytest.raises(ParameterError):
        rel.answer(wl, estimator=Inversion())  # inversion is for uniform/SDR/global releases
    with pytest.raises(ParameterError):
        FullIterative(tol=0)
    with pytest.raises(ParameterError):
        FullIterative(transition_counts=[[1, -2]])
    uni = ppdp.publish(edu, ppdp.UniformPerturbation(0.1, 0.5), seed=0)
    assert np.array_equal(uni.answer(wl), uni.answer(wl, estimator="eb"))  # the default


def test_plans_from_counts(edu):
    counts = edu.counts(edu.sa)
    plan = ppdp.SDR(0.1, 0.5).plan(counts, edu.domain(edu.sa))
    assert (plan.counts.sum(axis=0) == counts).all() and plan.claim.is_sdr
    with pytest.raises(Exception):
        plan.counts[0, 0] = 1  # read-only
    up = ppdp.UniformPerturbation(0.1, 0.5).plan(counts)
    assert up.claim == RhoClaim.uniform(0.1, 0.5, len(counts))
    kept = counts.copy()
    kept[np.argmax(kept)] -= counts.sum() % 3  # N a multiple of ℓ'
    dp = ppdp.Diverted(3).plan([kept])
    assert len(dp.schedules[0][0]) == dp.counts[0].sum()


def _imports(path: Path) -> set[str]:
    mods = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            mods.add("." * node.level + (node.module or ""))
        elif isinstance(node, ast.Import):
            mods.update(a.name for a in node.names)
    return mods


def test_no_upward_imports():
    low = [SRC / "releases" / "randomized.py", SRC / "kernels" / "transition.py",
           *(SRC / "claims" / n for n in ("rho.py", "retention.py", "diverted.py"))]
    for f in low:
        bad = [m for m in _imports(f) if any(k in m for k in ("mechanisms", "estimators", "engines", "audit"))]
        assert not bad, (f, bad)
    for name in ("randomized", "channel", "eb_rows", "empirical_bayes", "uniform", "diverted"):
        est = _imports(SRC / "estimators" / f"{name}.py")
        assert not [m for m in est if "mechanisms" in m or "engines" in m], name

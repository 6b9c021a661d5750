"""The Laplace answer baseline as a registered mechanism, and the local engine applying the
randomized plans exactly as publish does."""

import numpy as np
import pytest

import ppdp
from ppdp.claims import claim_of
from ppdp.claims.laplace import LaplaceAnswersClaim
from ppdp.engines.local import apply_randomized
from ppdp.errors import ParameterError, QueryError
from ppdp.registry import mechanism


@pytest.fixture(scope="module")
def edu():
    return ppdp.datasets.load("edu", n=4000, seed=0)


def test_registered_and_exported():
    for name, cls in [("global", "GlobalRandomization"), ("laplace", "LaplaceBaseline"), ("uniform", "UniformPerturbation"),
                      ("sdr", "SDR"), ("diverted", "Diverted")]:
        assert mechanism(name).__name__ == cls and getattr(ppdp, cls) is mechanism(name)
        assert mechanism(name)._parameter_help and mechanism(name).default_estimator


def test_laplace_release(edu, tmp_path):
    wl = ["sex = 'Female'", "sex = 'Male' AND education = 'Children'"]
    rel = ppdp.publish(edu, ppdp.LaplaceBaseline(1.0, queries=wl), seed=3)
    claim = claim_of(rel.manifest)
    assert isinstance(claim, LaplaceAnswersClaim) and claim.epsilon == 1.0 and claim.n_queries == 2
    est = rel.answer(wl)
    assert est.shape == (2,) and (est == np.round(est)).all()
    assert rel.answer(list(reversed(wl)))[0] == est[1]
    with pytest.raises(QueryError):
        rel.answer(["sex = 'Male'"])
    rel.save(tmp_path / "r")
    loaded = ppdp.load_release(tmp_path / "r")
    assert ppdp.verify(loaded, edu).ok and np.array_equal(loaded.answer(wl), est)
    loaded.manifest["certificate"]["epsilon"] = 10.0
    assert not ppdp.verify(loaded).ok
    # default workload: one query per SA value
    d = ppdp.publish(edu, ppdp.LaplaceBaseline(0.5), seed=0)
    assert d.answers.num_rows == len(edu.domain(edu.sa))
    with pytest.raises(ParameterError):
        ppdp.LaplaceBaseline(0)
    # the release's noise is laplace_answers' noise: same seed, same numbers
    from ppdp.mechanisms.randomization.laplace import laplace_answers
    again = laplace_answers(ppdp.answer_exact(edu, wl), 1.0, 2, np.random.default_rng(np.random.SeedSequence(3)))
    assert np.array_equal(again, est)


@pytest.mark.parametrize("mech", [ppdp.UniformPerturbation(0.1, 0.5), ppdp.SDR(0.1, 0.5)])
def test_local_engine_applies_the_same_plan(edu, mech):
    counts = edu.counts(edu.sa)
    plan = mech.plan(counts, edu.domain(edu.sa))
    a = apply_randomized(plan, edu.codes(edu.sa), np.random.default_rng(7))
    b = plan.apply(edu.codes(edu.sa), np.random.default_rng(7))
    for x, y in zip(a if isinstance(a, tuple) else (a,), b if isinstance(b, tuple) else (b,)):
        assert np.array_equal(x, y)
    # the published SA values of a seeded publish are the engine's output (rows shuffled afterwards)
    rel = ppdp.publish(edu, mech, seed=7)
    y = a[1] if isinstance(a, tuple) else a
    assert np.array_equal(np.sort(rel.column_codes(edu.sa)), np.sort(y))

"""Coverage contract of the ldp family, measured against a real table's true counts.

The same contract as tests/contract/test_coverage_randomized.py, for every mechanism of the
ldp family × every estimator of that family: :data:`RELEASES` independent releases
(``ppdp.publish`` with seeds 0, 1, …) of a fixed real subset of OCC (:data:`ROWS` rows, seed
0), whose own exact counts are the truth; a fixed set of point queries answered with
``release.estimate(level=0.95)``; the share of intervals holding the true count, overall and for
true counts > 100, may fall at most 3 standard errors below 0.95 (the releases are the
independent units: the spread of the per-release coverage over √releases, floored at the
binomial standard error of all pairs). ``test_check_has_power`` shows the same check rejects
the default estimator's intervals shrunk to 60% of their half-width.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import ppdp
from ppdp import registry
from ppdp.queries.workloads import point_workload

LEVEL = 0.95
RELEASES = 40
ROWS = 20_000
QUERIES = 120
PARAMS = {"subset": dict(rho1=0.1, rho2=0.3)}
LDP = [n for n, c in registry.mechanisms().items() if getattr(c, "family", "") == "ldp"]

_DATA: dict = {}
_RELEASES: dict = {}


def _data():
    if not _DATA:
        table = ppdp.datasets.load("occ", n=ROWS, seed=0)
        wl = point_workload(table, QUERIES, seed=0)
        _DATA.update(table=table, wl=wl, true=ppdp.queries.answer_exact(table, wl))
    return _DATA


def _releases(mech: str) -> list:
    if mech not in _RELEASES:
        d = _data()
        m = registry.mechanism(mech)(**PARAMS[mech])
        _RELEASES[mech] = [ppdp.publish(d["table"], m, seed=s) for s in range(RELEASES)]
    return _RELEASES[mech]


def coverage_check(H: np.ndarray) -> tuple[float, float, bool]:
    per = H.mean(axis=1)
    cov = float(H.mean())
    se = max(float(per.std(ddof=1)) / math.sqrt(len(per)), math.sqrt(LEVEL * (1 - LEVEL) / H.size))
    return cov, se, cov >= LEVEL - 3 * se


def _hits(mech: str, est, narrow: float = 1.0) -> np.ndarray:
    d = _data()
    out = []
    for rel in _releases(mech):
        E = rel.estimate(d["wl"], estimator=est, level=LEVEL)
        assert E.kind == "confidence" and E.method and np.isfinite(E.lower).all() and np.isfinite(E.upper).all()
        lo, hi = E.lower, E.upper
        if narrow != 1.0:
            mid = (lo + hi) / 2
            lo, hi = mid - narrow * (mid - lo), mid + narrow * (hi - mid)
        out.append((lo <= d["true"]) & (d["true"] <= hi))
    return np.array(out)


def test_every_mechanism_has_params():
    assert LDP and set(LDP) <= set(PARAMS), f"add parameters for {sorted(set(LDP) - set(PARAMS))} to PARAMS"
    assert len(registry.estimators("ldp")) >= 2


@pytest.mark.slow
@pytest.mark.parametrize("mech,est", [(m, e) for m in LDP for e in registry.estimators("ldp")])
def test_coverage_of_true_counts(mech, est):
    d = _data()
    big = d["true"] > 100
    assert big.sum() >= 20 and (~big).sum() >= 20
    H = _hits(mech, est)
    for label, sub in (("overall", slice(None)), ("counts > 100", big)):
        cov, se, ok = coverage_check(H[:, sub])
        assert ok, f"{mech}/{est}: coverage {label} {cov:.3f} ± {se:.3f} over {RELEASES} releases, below {LEVEL}"


@pytest.mark.slow
def test_check_has_power():
    for mech in LDP:
        assert not coverage_check(_hits(mech, None, narrow=0.6))[2], f"{mech}: the check passes intervals at 60% of their width"

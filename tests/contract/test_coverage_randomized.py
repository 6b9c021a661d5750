"""Coverage contract of the randomized family, measured against a real table's true counts.

Parametrised over the registry: every mechanism of the randomized family × every estimator of
that family that applies to it and reports intervals. Each case publishes :data:`RELEASES`
independent releases (``ppdp.publish`` with seeds 0, 1, …) of a fixed real subset of OCC
(:data:`ROWS` rows, seed 0) — the subset's own exact counts are the truth, never draws from an
estimator's model — answers a fixed set of point queries with ``release.estimate(level=0.95)``
and checks the share of intervals holding the true count, overall and for true counts > 100.

Tolerance: the releases are the independent units (the queries of one release share its
randomness), so the coverage's standard error is the spread of the per-release coverage over
√releases, floored at the binomial standard error of all release × query pairs; a case fails
when its coverage is more than 3 standard errors below 0.95. ``test_check_has_power`` shows the
same check rejects intervals shrunk to 60% of their half-width.

A new randomized mechanism needs parameters in :data:`PARAMS` (``test_every_mechanism_has_params``);
a new estimator of the family is picked up by the parametrisation.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import ppdp
from ppdp import registry
from ppdp.queries.workloads import point_workload

LEVEL = 0.95
RELEASES = 50
ROWS = 20_000
QUERIES = 120
#: mechanism → its parameters in this contract (the privacy settings of docs/sdr.md and docs/diverted.md)
PARAMS = {"uniform": dict(rho1=0.1, rho2=0.3), "sdr": dict(rho1=0.1, rho2=0.3),
          "global": dict(l_prime=4), "diverted": dict(l_prime=4)}
#: estimator options that keep a case within seconds: EM's default interval is the linear one
#: whatever its bootstrap replicates (they give only its ``se``), so the bootstrap is skipped
OPTIONS: dict[str, dict] = {"em": dict(replicates=0)}

RANDOMIZED = [n for n, c in registry.mechanisms().items() if getattr(c, "family", "") == "randomized"]


def _cases() -> list[tuple[str, str]]:
    out = []
    for mech in RANDOMIZED:
        for name, cls in registry.estimators("randomized").items():
            if not cls.mechanisms or mech in cls.mechanisms:
                out.append((mech, name))
    return out


_DATA: dict = {}


def _data():
    if not _DATA:
        table = ppdp.datasets.load("occ", n=ROWS, seed=0)
        wl = point_workload(table, QUERIES, seed=0)
        _DATA.update(table=table, wl=wl, true=ppdp.queries.answer_exact(table, wl))
    return _DATA


_RELEASES: dict = {}


def _releases(mech: str) -> list:
    if mech not in _RELEASES:
        d = _data()
        m = registry.mechanism(mech)(**PARAMS[mech])
        _RELEASES[mech] = [ppdp.publish(d["table"], m, seed=s) for s in range(RELEASES)]
    return _RELEASES[mech]


def coverage_check(hits: np.ndarray, sub: np.ndarray | None = None) -> tuple[float, float, bool]:
    """(coverage, its standard error, whether it is within 3 standard errors of LEVEL or above)
    for a releases × queries hit matrix (``sub``: the queries to count)."""
    H = hits if sub is None else hits[:, sub]
    per = H.mean(axis=1)
    cov = float(H.mean())
    se = max(float(per.std(ddof=1)) / math.sqrt(len(per)), math.sqrt(LEVEL * (1 - LEVEL) / H.size))
    return cov, se, cov >= LEVEL - 3 * se


def _hits(mech: str, est, narrow: float = 1.0) -> np.ndarray:
    d = _data()
    out = []
    for rel in _releases(mech):
        E = rel.estimate(d["wl"], estimator=est, level=LEVEL)
        assert E.level == LEVEL and E.method
        if E.kind != "confidence":
            pytest.fail(f"{mech}/{est}: interval kind {E.kind!r}, not a {LEVEL} confidence interval: {E.method}")
        assert np.isfinite(E.lower).all() and np.isfinite(E.upper).all()
        lo, hi = E.lower, E.upper
        if narrow != 1.0:
            mid = (lo + hi) / 2
            lo, hi = mid - narrow * (mid - lo), mid + narrow * (hi - mid)
        out.append((lo <= d["true"]) & (d["true"] <= hi))
    return np.array(out)


def test_every_mechanism_has_params():
    assert set(RANDOMIZED) <= set(PARAMS), f"add parameters for {sorted(set(RANDOMIZED) - set(PARAMS))} to PARAMS"
    assert len(_cases()) >= 2 * len(RANDOMIZED)


@pytest.mark.slow
@pytest.mark.parametrize("mech,est", _cases())
def test_coverage_of_true_counts(mech, est):
    d = _data()
    big = d["true"] > 100
    assert big.sum() >= 20 and (~big).sum() >= 20  # both parts of the query set are large enough to test
    H = _hits(mech, registry.estimator("randomized", est)(**OPTIONS.get(est, {})))
    for label, sub in (("overall", None), ("counts > 100", big)):
        cov, se, ok = coverage_check(H, sub)
        assert ok, f"{mech}/{est}: coverage {label} {cov:.3f} ± {se:.3f} over {RELEASES} releases, below {LEVEL}"


#: interval options that are not an estimator's default, checked like the defaults
#: (estimator, options, the mechanisms it applies to)
VARIANTS = [("eb", dict(interval="profile"), ("uniform", "sdr", "global"))]


@pytest.mark.slow
@pytest.mark.parametrize("est,opts,mech", [(e, o, m) for e, o, ms in VARIANTS for m in ms])
def test_coverage_of_interval_variants(est, opts, mech):
    d = _data()
    H = _hits(mech, registry.estimator("randomized", est)(**opts))
    for label, sub in (("overall", None), ("counts > 100", d["true"] > 100)):
        cov, se, ok = coverage_check(H, sub)
        assert ok, f"{mech}/{est} {opts}: coverage {label} {cov:.3f} ± {se:.3f} over {RELEASES} releases, below {LEVEL}"


@pytest.mark.slow
def test_check_has_power():
    """Control: the default estimator's intervals shrunk to 60% of their half-width fail the check."""
    for mech in ("sdr", "uniform"):
        H = _hits(mech, None, narrow=0.6)
        assert not coverage_check(H)[2], f"{mech}: the check passes intervals at 60% of their width"

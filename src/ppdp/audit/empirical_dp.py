"""Empirical differential-privacy audit: a statistical lower bound on a mechanism's ε.

An ε-DP mechanism M satisfies P[M(D) ∈ E] ≤ e^ε · P[M(D′) ∈ E] for every pair of neighbouring
tables D, D′ (one record added or removed) and every output event E. The audit runs the
mechanism many times on such a pair through :func:`ppdp.publish`, as a user would, and looks for
the event whose probabilities are furthest apart (in the spirit of Jagielski, Ullman & Oprea 2020
and Bichsel et al. 2021, "DP-Sniper"):

1. **Calibration.** ``n_calibration`` releases of each table; every candidate event — a released
   quantity (the target cell's estimate under each histogram estimator, a marginal, the noisy
   total) above or below a threshold, or the structure the mechanism chose (strategy,
   number of partitions) — is scored by its pessimistic log ratio, and the best event and
   direction are kept.
2. **Measurement.** ``n_runs`` fresh releases of each table; with Clopper–Pearson bounds
   ``p_lo`` (lower, on the event's probability under the table where it is likelier) and ``q_hi``
   (upper, under the other), each one-sided at ``alpha / 2``,
   ``epsilon_lower = ln(p_lo / q_hi)`` is a lower bound on the mechanism's true privacy loss
   with confidence ``1 − alpha``. A mechanism whose ``epsilon_lower`` exceeds its claimed ε
   violates its claim (up to that confidence).

Only public outputs are read (the release's answers and its manifest), never an internal draw:
the audit sees what a receiver sees. The calibration and measurement runs are separate, so the
event is not fitted to the runs that bound it.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Callable, Sequence

import numpy as np
from scipy import stats

__all__ = ["DPAuditResult", "audit_mechanism", "build_audited", "clopper_pearson", "dp_mechanisms", "empirical_epsilon", "neighbouring_tables",
           "release_features"]


@dataclass(frozen=True)
class DPAuditResult:
    """One audit: the event kept, its counts over ``n_runs`` per table, the lower bound."""

    mechanism: str
    epsilon_claimed: float
    epsilon_lower: float
    event: str
    hits_likelier: int
    hits_other: int
    n_runs: int
    n_calibration: int
    alpha: float

    @property
    def violates(self) -> bool:
        return self.epsilon_lower > self.epsilon_claimed

    def to_dict(self) -> dict:
        return {**asdict(self), "violates": self.violates}


def clopper_pearson(k: int, n: int, alpha: float) -> tuple[float, float]:
    """One-sided Clopper–Pearson bounds (lower, upper), each at confidence ``1 − alpha``."""
    lo = 0.0 if k == 0 else float(stats.beta.ppf(alpha, k, n - k + 1))
    hi = 1.0 if k == n else float(stats.beta.ppf(1 - alpha, k + 1, n - k))
    return lo, hi


def release_features(release, queries: Sequence[str], estimators: Sequence[str] = ()) -> tuple[list[float], str]:
    """The public quantities of one release the audit looks at: the answers to ``queries`` under
    the release's default estimator, the first query's answer under each of ``estimators`` the
    release supports, the noisy total when the certificate states one; and the structure the
    mechanism chose (the strategy and the number of partitions) as one string."""
    x = [float(v) for v in release.answer(list(queries))]
    for name in estimators:
        try:
            x.append(float(release.answer(list(queries[:1]), estimator=name)[0]))
        except ValueError:  # the estimator does not read this release
            x.append(float("nan"))
    cert = release.manifest.get("certificate", {})
    total = cert.get("noisy_total")
    x.append(float(total) if total is not None else float("nan"))
    choice = cert.get("choice") or {}
    structure = json.dumps([choice.get("algorithm"), cert.get("n_partitions"), cert.get("depth")], default=str)
    return x, structure


def _runs(publish_once: Callable[[object, int], tuple[list[float], str]], table, seeds) -> tuple[np.ndarray, np.ndarray]:
    xs, ss = [], []
    for s in seeds:
        x, st = publish_once(table, int(s))
        xs.append(x)
        ss.append(st)
    return np.asarray(xs, dtype=np.float64), np.asarray(ss)


def _candidate_events(x: np.ndarray, s: np.ndarray, n_thresholds: int = 41) -> list[tuple[str, int, object]]:
    events: list[tuple[str, int, object]] = []
    for j in range(x.shape[1]):
        vals = x[:, j][np.isfinite(x[:, j])]
        if len(vals) == 0:
            continue
        thresholds = np.unique(np.quantile(vals, np.linspace(0, 1, n_thresholds)))
        for t in thresholds:
            events.append((">=", j, float(t)))
            events.append(("<=", j, float(t)))
    for v in np.unique(s):
        events.append(("==", -1, str(v)))
    return events


def _hits(event, x: np.ndarray, s: np.ndarray) -> np.ndarray:
    op, j, t = event
    if op == ">=":
        return x[:, j] >= t
    if op == "<=":
        return x[:, j] <= t
    return s == t


def empirical_epsilon(
    publish_once: Callable[[object, int], tuple[list[float], str]],
    table,
    neighbour,
    *,
    mechanism: str,
    epsilon_claimed: float,
    n_runs: int = 400,
    n_calibration: int = 200,
    alpha: float = 0.01,
    seed: int = 0,
    feature_names: Sequence[str] = (),
) -> DPAuditResult:
    """Lower-bound the privacy loss of ``publish_once`` between ``table`` and ``neighbour``.

    ``publish_once(table, seed)`` publishes once with the given seed (distinct seeds, drawn from
    ``seed``) and returns :func:`release_features`. The bound holds with confidence ``1 − alpha``
    (two one-sided Clopper–Pearson bounds at ``alpha / 2``)."""
    ss = np.random.SeedSequence(seed)
    seeds = ss.generate_state(2 * (n_runs + n_calibration), dtype=np.uint64) >> np.uint64(2)
    cal_a, cal_b, run_a, run_b = np.split(seeds, np.cumsum([n_calibration, n_calibration, n_runs]))
    xa, sa = _runs(publish_once, table, cal_a)
    xb, sb = _runs(publish_once, neighbour, cal_b)
    best = None
    for event in _candidate_events(np.vstack([xa, xb]), np.concatenate([sa, sb])):
        ka, kb = int(_hits(event, xa, sa).sum()), int(_hits(event, xb, sb).sum())
        for k1, k2, direction in ((ka, kb, 0), (kb, ka, 1)):
            lo, _ = clopper_pearson(k1, n_calibration, alpha / 2)
            _, hi = clopper_pearson(k2, n_calibration, alpha / 2)
            score = np.log(max(lo, 1e-300)) - np.log(hi)
            if best is None or score > best[0]:
                best = (score, event, direction)
    assert best is not None
    _, event, direction = best
    ya, ta = _runs(publish_once, table, run_a)
    yb, tb = _runs(publish_once, neighbour, run_b)
    ka, kb = int(_hits(event, ya, ta).sum()), int(_hits(event, yb, tb).sum())
    k1, k2 = (ka, kb) if direction == 0 else (kb, ka)
    lo, _ = clopper_pearson(k1, n_runs, alpha / 2)
    _, hi = clopper_pearson(k2, n_runs, alpha / 2)
    lower = float(np.log(max(lo, 1e-300)) - np.log(hi))
    op, j, t = event
    what = feature_names[j] if 0 <= j < len(feature_names) else ("structure" if j < 0 else f"feature {j}")
    likelier = "the table" if direction == 0 else "the neighbour"
    desc = f"{what} {op} {t:.6g}" if isinstance(t, float) else f"{what} {op} {t}"
    return DPAuditResult(mechanism, float(epsilon_claimed), lower, f"{desc} (likelier under {likelier})", k1, k2, n_runs, n_calibration, alpha)


# ---------------------------------------------------------------------------------------------
# The standard audit of a registered mechanism: neighbouring tables over a 4 × 3 declared domain

AUDIT_DOMAINS = {"a": ["a0", "a1", "a2", "a3"], "b": ["b0", "b1", "b2"]}
AUDIT_TARGET = "a = 'a0' AND b = 'b0'"
AUDIT_QUERIES = (AUDIT_TARGET, "a = 'a0'", "b = 'b0'")
AUDIT_ESTIMATORS = ("cells", "uniform")
AUDIT_FEATURES = ("target cell", "margin a = a0", "margin b = b0", "target cell (cells estimator)",
                  "target cell (uniform estimator)", "noisy total")


def dp_mechanisms() -> list[str]:
    """The registered mechanisms whose claim is ε-differential privacy."""
    from ..registry import mechanisms

    return sorted(n for n, m in mechanisms().items() if "epsilon" in m.claim_model.lower() and "zero" not in m.claim_model.lower())


def neighbouring_tables(n: int = 40, seed: int = 20261128):
    """Two tables that differ in one record (added in the target cell a0 × b0), over the
    declared domain :data:`AUDIT_DOMAINS`."""
    import pandas as pd

    from ..table import Table

    rng = np.random.default_rng(seed)
    df = pd.DataFrame({c: rng.choice(v, n) for c, v in AUDIT_DOMAINS.items()})
    plus = pd.concat([df, pd.DataFrame({"a": ["a0"], "b": ["b0"]})], ignore_index=True)
    cols = list(AUDIT_DOMAINS)
    return Table.from_pandas(df, quasi=cols, domains=AUDIT_DOMAINS), Table.from_pandas(plus, quasi=cols, domains=AUDIT_DOMAINS)


def build_audited(name: str, epsilon: float):
    """The registered mechanism ``name`` at ``epsilon`` over the audit's declared domain (a
    histogram of both columns, or noisy answers to the target query)."""
    from ..errors import ParameterError
    from ..registry import mechanisms

    cls = mechanisms()[name]
    params = cls._parameter_constraints
    if "dims" in params:
        return cls(epsilon=epsilon, dims=list(AUDIT_DOMAINS), domains=AUDIT_DOMAINS)
    if "queries" in params:
        return cls(epsilon=epsilon, queries=[AUDIT_TARGET])
    raise ParameterError(f"no audit set-up for the epsilon-DP mechanism {name!r}")


def audit_mechanism(name: str, epsilon_published: float, epsilon_claimed: float, *, n_runs: int, n_calibration: int,
                    seed: int, alpha: float = 0.01, tables=None) -> DPAuditResult:
    """Audit ``name`` published at ``epsilon_published`` against the claim ``epsilon_claimed``
    (equal for a real audit; larger published than claimed for a power control)."""
    from ..api import publish

    mech = build_audited(name, epsilon_published)
    d, d_plus = tables if tables is not None else neighbouring_tables()

    def publish_once(table, s):
        # the low-utility refusal reads only the released noisy counts (post-processing): the
        # audit publishes through it so that every run yields a release
        rel = publish(table, mech, seed=s, allow_low_utility=True)
        if rel.family == "answers":
            x, st = release_features(rel, AUDIT_QUERIES[:1])
            return [x[0], np.nan, np.nan, np.nan, np.nan, x[1]], st
        return release_features(rel, AUDIT_QUERIES, AUDIT_ESTIMATORS)

    return empirical_epsilon(publish_once, d, d_plus, mechanism=name, epsilon_claimed=epsilon_claimed, n_runs=n_runs,
                             n_calibration=n_calibration, alpha=alpha, seed=seed, feature_names=AUDIT_FEATURES)

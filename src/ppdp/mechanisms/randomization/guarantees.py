"""Utility and privacy guarantees of mechanism A' (Fu, Wang, Wang & Wong, §6), as functions
and plots.

A value s with true count f_s is published f'_s ~ Binomial(ℓ'·f_s, 1/ℓ') times (§5), so:

- **utility** (Lemma 4, eq 3–5): by Chebyshev, Pr[|f'_s − f_s| ≥ ε f_s] ≤ 1/(ℓ' ε² f_s²);
  asking this bound to be ≤ T_E gives the frequency threshold T_f with 1/(ℓ' ε² T_E) = T_f²
  (:func:`utility_threshold`). Example 1: T_E = 0.02, ℓ' = 10, ε = 0.2 → T_f = √125 ≈ 11.2,
  which the paper reports as 11. Its second case ("ϵ = 0.001, or ε = 0.02 then T_f = 49") is
  inconsistent: ε = ℓ'·ϵ gives ε = 0.01, not 0.02, and neither value yields 49 (ε = 0.02 →
  T_f ≈ 111.8, ε = 0.01 → T_f ≈ 223.6; T_f = 49 would need ε ≈ 0.0456).
  **The paper's Chebyshev step has a slip.** Inequality (1) reads Pr[|X̄_n − μ| ≥ ϵ] ≤
  σ²/(ϵ² n) with the Bernoulli variance σ² = p(1−p), but the paper then writes p(1−p)/(ϵ² n²):
  one factor n = ℓ'f_s too many. Done right, Pr[|f'_s − f_s| ≥ ε f_s] ≤ (1 − 1/ℓ')/(ε² f_s), so
  T_f = (1 − 1/ℓ')/(ε² T_E) (:func:`utility_threshold_chebyshev`): 1,125 instead of 11 for
  Example 1. The published bound is violated by the exact Binomial — at f_s = 11, ℓ' = 10,
  ε = 0.2 the probability of a relative error ≥ 0.2 is about 0.5, not ≤ 0.02 (tests show it).
  :func:`utility_threshold` keeps Lemma 4 as published (SPEC §2.4);
  :func:`utility_threshold_exact` gives the smallest count whose exact Binomial error
  probability is ≤ T_E.
- **privacy** (Definition 5): s has an (ε, T_P) guarantee with T_P = Pr[|f'_s − f_s| > ε f_s]
  = 1 − Σ_{x=⌈(1−ε)f_s⌉}^{⌊(1+ε)f_s⌋} Binom(ℓ' f_s, 1/ℓ')(x) (:func:`privacy_guarantee`).
  Example 2: f_s = 5, ℓ' = 10, ε = 0.3 → T_P ≈ 0.48.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

from ...errors import PpdpError

__all__ = ["utility_threshold", "utility_threshold_chebyshev", "utility_threshold_exact", "utility_error_bound", "utility_error_probability", "privacy_guarantee",
           "plot_utility_thresholds", "plot_privacy_guarantee"]

_EPS = 1e-9  # guards ⌈0.7·10⌉ against 7.000000000000001


def _check(l_prime, epsilon):
    if not isinstance(l_prime, (int, np.integer)) or l_prime < 2:
        raise PpdpError(f"ℓ' must be an integer ≥ 2, got {l_prime!r}")
    if not np.all(np.asarray(epsilon, dtype=float) > 0):
        raise PpdpError(f"ε must be > 0, got {epsilon!r}")


def utility_threshold(epsilon, T_E, l_prime: int):
    """T_f = √(1/(ℓ' ε² T_E)) (Lemma 4): counts ≥ T_f have relative error ≥ ε with probability ≤ T_E."""
    _check(l_prime, epsilon)
    T_E = np.asarray(T_E, dtype=float)
    if not np.all((T_E > 0) & (T_E <= 1)):
        raise PpdpError(f"T_E must be in (0, 1], got {T_E!r}")
    return np.sqrt(1.0 / (l_prime * np.asarray(epsilon, float) ** 2 * T_E))


def utility_threshold_chebyshev(epsilon, T_E, l_prime: int):
    """T_f = (1 − 1/ℓ')/(ε² T_E): Lemma 4 with the Chebyshev step done right (see the module doc)."""
    _check(l_prime, epsilon)
    T_E = np.asarray(T_E, dtype=float)
    if not np.all((T_E > 0) & (T_E <= 1)):
        raise PpdpError(f"T_E must be in (0, 1], got {T_E!r}")
    return (1 - 1 / l_prime) / (np.asarray(epsilon, float) ** 2 * T_E)


def utility_threshold_exact(epsilon: float, T_E: float, l_prime: int, f_max: int = 10**6) -> int:
    """Smallest f such that Pr[|f'_s − f_s| ≥ ε f_s] ≤ T_E (exact Binomial) for every count ≥ f
    up to ``f_max`` (the probability is not monotone at small f because of rounding)."""
    _check(l_prime, epsilon)
    f = np.arange(1, f_max + 1)
    p = _beyond(f, epsilon, l_prime, strict=False)
    bad = np.flatnonzero(p > T_E)
    if len(bad) and bad[-1] == len(f) - 1:
        raise PpdpError(f"no count up to {f_max} has the ({epsilon}, {T_E}) utility guarantee")
    return int(bad[-1] + 2) if len(bad) else 1


def utility_error_bound(f_s, epsilon, l_prime: int, corrected: bool = False):
    """Bound on Pr[|f'_s − f_s| ≥ ε f_s] (capped at 1): the paper's eq 3, 1/(ℓ' ε² f_s²), or with
    ``corrected=True`` the true Chebyshev bound (1 − 1/ℓ')/(ε² f_s)."""
    _check(l_prime, epsilon)
    f = np.asarray(f_s, dtype=float)
    e2 = np.asarray(epsilon, float) ** 2
    if corrected:
        return np.minimum(1.0, (1 - 1 / l_prime) / (e2 * f))
    return np.minimum(1.0, 1.0 / (l_prime * e2 * f ** 2))


def _beyond(f_s, epsilon, l_prime, strict=True):
    """Pr[|f'_s − f_s| > ε f_s] (strict) or ≥ ε f_s, f'_s ~ Binomial(ℓ' f_s, 1/ℓ')."""
    f = np.asarray(f_s, dtype=np.int64)
    if strict:  # inside = [⌈(1−ε)f⌉, ⌊(1+ε)f⌋]
        lo, hi = np.ceil((1 - epsilon) * f - _EPS), np.floor((1 + epsilon) * f + _EPS)
    else:  # inside = ((1−ε)f, (1+ε)f)
        lo, hi = np.floor((1 - epsilon) * f + _EPS) + 1, np.ceil((1 + epsilon) * f - _EPS) - 1
    n = l_prime * f
    p = 1.0 / l_prime
    return 1.0 - (stats.binom.cdf(hi, n, p) - stats.binom.cdf(lo - 1, n, p))


def privacy_guarantee(f_s, l_prime: int, epsilon: float = 0.3):
    """T_P of Definition 5: Pr[f'_s outside [⌈(1−ε)f_s⌉, ⌊(1+ε)f_s⌋]], f'_s ~ Binom(ℓ' f_s, 1/ℓ')."""
    _check(l_prime, epsilon)
    return _beyond(f_s, epsilon, l_prime, strict=True)


def utility_error_probability(f_s, l_prime: int, epsilon: float):
    """Exact Pr[|f'_s − f_s| ≥ ε f_s] from the Binomial — what the utility bounds bound."""
    _check(l_prime, epsilon)
    return _beyond(f_s, epsilon, l_prime, strict=False)


def plot_utility_thresholds(ax=None, l_primes=(5, 10), epsilons=(0.05, 0.1, 0.2), T_E=None):
    """Figure 1: T_f against T_E (Lemma 4) for several ℓ' and ε."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(5.5, 4))
    T_E = np.linspace(0.005, 0.2, 200) if T_E is None else np.asarray(T_E, float)
    for lp in l_primes:
        for e in epsilons:
            line, = ax.plot(T_E, utility_threshold(e, T_E, lp), label=f"ℓ'={lp}, ε={e} (Lemma 4 as published)")
            ax.plot(T_E, utility_threshold_chebyshev(e, T_E, lp), ls="--", color=line.get_color(),
                    label=f"ℓ'={lp}, ε={e} (Chebyshev corrected)")
    ax.set_yscale("log")
    ax.set_xlabel("T_E (probability of a relative error ≥ ε)")
    ax.set_ylabel("T_f (smallest count with the guarantee)")
    ax.set_title("Utility guarantee (Lemma 4)")
    ax.legend(fontsize=7)
    return ax


def plot_privacy_guarantee(ax=None, l_primes=(2, 5, 10), epsilon=0.3, f_max=30):
    """Figure 2: T_P (probability of a relative error > ε) for small counts f_s = 1..f_max."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(5.5, 4))
    f = np.arange(1, f_max + 1)
    for lp in l_primes:
        ax.plot(f, privacy_guarantee(f, lp, epsilon), marker="o", ms=3, label=f"ℓ'={lp}")
    ax.set_xlabel("true count f_s")
    ax.set_ylabel(f"T_P = Pr[relative error > {epsilon}]")
    ax.set_title("Privacy for small counts (Definition 5)")
    ax.set_ylim(0, 1)
    ax.legend()
    return ax


def example_1() -> dict:
    """The numbers of Example 1, both cases, as the formula gives them."""
    return {"case 1 (ε=0.2)": float(utility_threshold(0.2, 0.02, 10)),
            "case 2 read as ε=0.02": float(utility_threshold(0.02, 0.02, 10)),
            "case 2 read as ε=ℓ'·0.001=0.01": float(utility_threshold(0.01, 0.02, 10)),
            "ε that would give T_f=49": math.sqrt(1 / (10 * 0.02 * 49 ** 2)),
            "case 1, Chebyshev corrected": float(utility_threshold_chebyshev(0.2, 0.02, 10)),
            "case 1, exact Binomial": utility_threshold_exact(0.2, 0.02, 10)}

"""The differential inference demonstration (Wang et al. 2011, §2.1, Theorem 2).

Two count queries with true answers x (e.g. "women aged 30 in zip Z") and y ≤ x ("… who
have HIV") answered under ε-differential privacy with Laplace noise of scale b = 1/ε give
X = x + ξ1 and Y = y + ξ2. Theorem 2 (a second-order Taylor expansion) says

    E[Y/X] ≈ (y/x)(1 + 2b²/x²),   var[Y/X] ≈ (2b²/x²)(1 + (y/x)²),

so for a large x the ratio of the two noisy answers estimates y/x well: a differentially
private answer still lets the adversary infer that a person of the group has HIV with
probability ≈ y/x. The paper's worked numbers: ε = 0.1, x = 100 → E[Y/X] = 1.02·y/x;
x = 1000 → 1.0002·y/x.

:func:`differential_inference` checks this by Monte-Carlo and also gives the value the
expansion approximates: since ξ1 and ξ2 are independent, E[Y/X] = y·E[1/X], and E[1/X]
(a principal value: 1/X has no mean in the strict sense because the Laplace density is
positive at X = 0) is computed by numerical integration. The next term of the expansion is
24b⁴/x⁴ (E[ξ⁴] = 24b⁴), so at x = 100, ε = 0.1 the exact factor is ≈ 1.023, which the
paper rounds to 1.02.

The Monte-Carlo draws continuous Laplace noise with NumPy: it simulates the adversary's
view of the theorem, it does not publish anything (releases use the hardened sampler).
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import pandas as pd
from scipy import integrate

from ..errors import PpdpError


def theorem2(x: float, y: float, epsilon: float) -> tuple[float, float]:
    """Theorem 2's (E[Y/X], var[Y/X])."""
    b = 1.0 / epsilon
    return (y / x) * (1 + 2 * b * b / (x * x)), (2 * b * b / (x * x)) * (1 + (y / x) ** 2)


def exact_inverse_mean(x: float, b: float) -> float:
    """Principal value of E[1/(x + ξ)] for ξ ~ Laplace(0, b), x > 0, by quadrature.

    PV ∫ f(u)/u du = ∫_0^∞ (f(u) − f(−u))/u du with f the density of X = x + ξ."""
    def f(u):
        return math.exp(-abs(u - x) / b) / (2 * b)

    def g(u):
        return (f(u) - f(-u)) / u if u > 0 else (1.0 / (b * b)) * math.exp(-x / b)  # limit at 0 is 2f'(0)

    a, _ = integrate.quad(g, 0.0, x, limit=400, epsabs=1e-14, epsrel=1e-12)
    c, _ = integrate.quad(g, x, math.inf, limit=400, epsabs=1e-14, epsrel=1e-12)
    return a + c


def differential_inference(epsilon: float = 0.1, xs: Sequence[float] = (50, 100, 200, 500, 1000, 10000),
                           ratio: float = 0.99, n_samples: int = 2_000_000, seed: int = 0) -> pd.DataFrame:
    """Monte-Carlo of Y/X vs Theorem 2 for each true answer x (y = ratio·x).

    Columns: factors are E[Y/X] / (y/x): ``theorem2_factor`` (1 + 2b²/x²),
    ``fourth_order_factor`` (+ 24b⁴/x⁴), ``exact_factor`` (quadrature), ``mc_factor`` ± ``mc_se``;
    ``theorem2_var`` vs ``mc_var``; ``mc_within_3se_of_exact`` / ``..._of_theorem2``."""
    if epsilon <= 0:
        raise PpdpError(f"epsilon must be > 0, got {epsilon}")
    if not 0 < ratio <= 1:
        raise PpdpError(f"ratio y/x must be in (0, 1], got {ratio}")
    b = 1.0 / epsilon
    rng = np.random.default_rng(seed)
    rows = []
    for x in xs:
        x = float(x)
        y = ratio * x
        mean2, var2 = theorem2(x, y, epsilon)
        X = x + rng.laplace(0.0, b, n_samples)
        Y = y + rng.laplace(0.0, b, n_samples)
        R = Y / X
        mc_mean, mc_sd = float(R.mean()), float(R.std(ddof=1))
        se = mc_sd / math.sqrt(n_samples) / ratio
        exact = x * exact_inverse_mean(x, b)
        mc_factor = mc_mean / ratio
        rows.append({
            "epsilon": epsilon, "b": b, "x": x, "y": y, "y_over_x": ratio,
            "theorem2_factor": mean2 / ratio, "fourth_order_factor": 1 + 2 * b**2 / x**2 + 24 * b**4 / x**4,
            "exact_factor": exact, "mc_factor": mc_factor, "mc_se": se,
            "theorem2_var": var2, "mc_var": mc_sd**2, "p_x_negative": 0.5 * math.exp(-x / b),
            "mc_within_3se_of_exact": abs(mc_factor - exact) <= 3 * se,
            "mc_within_3se_of_theorem2": abs(mc_factor - mean2 / ratio) <= 3 * se,
            "n_samples": n_samples, "seed": seed,
        })
    return pd.DataFrame(rows)


def plot_differential(df: pd.DataFrame):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4))
    a1.errorbar(df["x"], df["mc_factor"] - 1, yerr=2 * df["mc_se"], fmt="o", label="Monte-Carlo (±2 s.e.)")
    a1.plot(df["x"], df["theorem2_factor"] - 1, "-", label="Theorem 2: 2b²/x²")
    a1.plot(df["x"], df["exact_factor"] - 1, "--", label="exact (quadrature)")
    a1.set_xscale("log"); a1.set_yscale("log")
    a1.set_xlabel("true answer x"); a1.set_ylabel("E[Y/X]/(y/x) − 1")
    a1.legend(fontsize=8); a1.grid(alpha=.3)
    a2.plot(df["x"], df["theorem2_var"], "-", label="Theorem 2 variance")
    a2.plot(df["x"], df["mc_var"], "o", label="Monte-Carlo variance")
    a2.set_xscale("log"); a2.set_yscale("log")
    a2.set_xlabel("true answer x"); a2.set_ylabel("var[Y/X]")
    a2.legend(fontsize=8); a2.grid(alpha=.3)
    fig.suptitle(f"Differential inference, ε = {df['epsilon'].iloc[0]}, y/x = {df['y_over_x'].iloc[0]}")
    return fig

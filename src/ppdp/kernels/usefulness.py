"""(ε, δ)-usefulness of Xiao, Xiong, Fan & Goryczka (DPCube) and the Laplace sums behind it.

Every noisy count of the paper is a true count plus Lap(1/α) noise, so a query error is a sum
of Laplace variables. This module makes the paper's utility statements callable:

* :func:`laplace_sum_pdf` / :func:`laplace_sum_cdf` / :func:`laplace_sum_sf` — the density
  f_n(z, α) of Σ_{i=1..n} Ñ_i(α), Ñ_i i.i.d. Lap(1/α) (Theorem 3.3, eq 2), and its
  distribution function. Evaluated exactly through a finite mixture: expanding eq 2's
  (|z| + v/2α)^{n−1} binomially and integrating term by term gives

      f_n(z, α) = Σ_{k=0}^{n−1} w_k · g_{n−k, α}(|z|),   w_k = C(n−1+k, k) 2^{−(n+k)},

  g_{a, α} the Gamma(shape a, rate α) density and w_k the negative-binomial(n, ½) pmf
  (Σ w_k = ½ per side). So P(S > t) = Σ_k w_k Q(n−k, αt) for t ≥ 0 (Q the regularised upper
  incomplete gamma function). Sums of positive terms in log space: no cancellation, no
  overflow for n in the tens of thousands.
* :func:`empirical_delta`, :func:`useful_epsilon`, :func:`is_useful` — Definition 3.5 on
  observed errors (trials × queries): a mechanism is (ε, δ)-useful for a class of queries if
  with probability ≥ 1 − δ *every* query of the class is answered within ε.
* :func:`lemma41_bound` (Lemma 4.1), :func:`abs_laplace_sum_cdf` (its exact counterpart:
  Σ|Ñ_i| ~ Gamma(m, b)), :func:`theorem42_alpha` / :func:`theorem42_delta` (Theorem 4.2, the
  cell histogram), :func:`cell_histogram_delta` (the proof's event evaluated exactly),
  :func:`single_query_delta` (one query of s cells, exact by Theorem 3.3).
* :func:`eq32_max_gamma` / :func:`uniform_delta` (Theorem 4.4, eq 32: the uniform estimate on
  γ-smooth data), :func:`eq33_uniform_error_bound` (eq 33), :func:`eq34_uniform_error` (eq 34,
  exact, via the mixture above).

The paper's noise is the continuous Laplace distribution; the library's releases draw the
discrete Laplace distribution (``ppdp.kernels.noise``), whose tail P(|Z| > t) = 2p^{⌊t⌋+1}/(1+p)
≤ e^{−αt} (p = e^{−α}) — so Lemma 4.1 and Theorem 4.2 hold for it as stated, while the exact
functions here describe the continuous noise (variance 2/α² vs 1/(2 sinh²(α/2)) ≈ 2/α² − 1/6).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special, stats

from ..errors import ParameterError

__all__ = [
    "laplace_sum_pdf", "laplace_sum_logpdf", "laplace_sum_cdf", "laplace_sum_sf", "laplace_sum_mean_abs",
    "empirical_delta", "useful_epsilon", "is_useful",
    "lemma41_bound", "abs_laplace_sum_cdf", "theorem42_alpha", "theorem42_delta", "cell_histogram_delta",
    "single_query_delta", "eq32_max_gamma", "uniform_delta", "eq33_uniform_error_bound", "eq34_uniform_error",
    "laplace_combination_mean_abs", "eq35_ls_error",
]

#: largest (terms × points) block evaluated at once
_BLOCK = 1 << 22


def _count(n, what: str = "n") -> int:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ParameterError(f"{what} must be a whole number ≥ 1, got {n!r}", param=what)
    return int(n)


def _positive(x, what: str) -> float:
    try:
        v = float(x)
    except (TypeError, ValueError):
        raise ParameterError(f"{what} must be a positive number, got {x!r}", param=what) from None
    if not (v > 0 and math.isfinite(v)):
        raise ParameterError(f"{what} must be a positive finite number, got {x!r}", param=what)
    return v


def _probability(x, what: str) -> float:
    v = _positive(x, what)
    if not v < 1:
        raise ParameterError(f"{what} must lie in (0, 1), got {x!r}", param=what)
    return v


def _mixture(n: int):
    """log w_k and the Gamma shapes a_k = n − k, k = 0 … n−1."""
    k = np.arange(n, dtype=np.float64)
    return stats.nbinom.logpmf(k, n, 0.5), n - k


def _blocks(t: np.ndarray, n: int):
    step = max(1, _BLOCK // n)
    for i in range(0, t.size, step):
        yield slice(i, i + step)


def laplace_sum_logpdf(z, n: int, alpha: float) -> np.ndarray:
    """log f_n(z, α): log density of the sum of ``n`` i.i.d. Lap(1/α) variables (Theorem 3.3)."""
    n, alpha = _count(n), _positive(alpha, "alpha")
    z = np.asarray(z, dtype=np.float64)
    t = np.abs(z).ravel()
    logw, a = _mixture(n)
    out = np.empty(t.size)
    base = logw + a * math.log(alpha) - special.gammaln(a)  # per term, independent of z
    for sl in _blocks(t, n):
        x = t[sl, None]
        terms = base[None, :] + special.xlogy(a[None, :] - 1, x) - alpha * x
        out[sl] = special.logsumexp(terms, axis=1)
    return out.reshape(z.shape)


def laplace_sum_pdf(z, n: int, alpha: float) -> np.ndarray:
    """f_n(z, α) of Theorem 3.3 (eq 2), exact and vectorised over ``z``."""
    return np.exp(laplace_sum_logpdf(z, n, alpha))


def _upper_tail(t: np.ndarray, n: int, alpha: float) -> np.ndarray:
    """P(S > t) for t ≥ 0: Σ_k w_k Q(n − k, αt)."""
    logw, a = _mixture(n)
    w = np.exp(logw)
    out = np.empty(t.size)
    for sl in _blocks(t, n):
        out[sl] = special.gammaincc(a[None, :], alpha * t[sl, None]) @ w
    return out


def laplace_sum_sf(z, n: int, alpha: float) -> np.ndarray:
    """P(S > z), S the sum of ``n`` i.i.d. Lap(1/α) variables (accurate in the upper tail)."""
    n, alpha = _count(n), _positive(alpha, "alpha")
    z = np.asarray(z, dtype=np.float64)
    flat = z.ravel()
    tail = _upper_tail(np.abs(flat), n, alpha)
    return np.where(flat >= 0, tail, 1.0 - tail).reshape(z.shape)


def laplace_sum_cdf(z, n: int, alpha: float) -> np.ndarray:
    """P(S ≤ z), S the sum of ``n`` i.i.d. Lap(1/α) variables (accurate in the lower tail)."""
    n, alpha = _count(n), _positive(alpha, "alpha")
    z = np.asarray(z, dtype=np.float64)
    flat = z.ravel()
    tail = _upper_tail(np.abs(flat), n, alpha)
    return np.where(flat < 0, tail, 1.0 - tail).reshape(z.shape)


def laplace_sum_mean_abs(n: int, alpha: float) -> float:
    """E|S| for the sum of ``n`` i.i.d. Lap(1/α) variables: 2 Σ_k w_k (n − k)/α."""
    n, alpha = _count(n), _positive(alpha, "alpha")
    logw, a = _mixture(n)
    return float(2 * np.exp(logw) @ a / alpha)


# ------------------------------------------------------------ Definition 3.5
def _errors(errors) -> np.ndarray:
    e = np.abs(np.asarray(errors, dtype=np.float64))
    if e.ndim == 1:
        e = e[:, None]
    if e.ndim != 2 or e.shape[0] == 0 or e.shape[1] == 0:
        raise ParameterError("errors must be a non-empty (trials × queries) array", param="errors")
    if not np.isfinite(e).all():
        raise ParameterError("errors must be finite", param="errors")
    return e


def empirical_delta(errors, eps: float) -> float:
    """Observed δ of Definition 3.5: the fraction of trials (rows of ``errors``, one release
    each) in which some query (column) is answered with absolute error > ``eps``."""
    e = _errors(errors)
    eps = float(eps)
    return float(np.mean(e.max(axis=1) > eps))


def useful_epsilon(errors, delta: float) -> float:
    """The smallest ε for which the observed releases are (ε, δ)-useful for the workload: the
    ⌈(1 − δ)·T⌉-th smallest of the T per-trial maximum errors."""
    e = _errors(errors)
    delta = _probability(delta, "delta")
    worst = np.sort(e.max(axis=1))
    k = max(1, math.ceil((1 - delta) * len(worst) - 1e-12))
    return float(worst[k - 1])


def is_useful(errors, eps: float, delta: float) -> bool:
    """Definition 3.5 on observed errors: in at least a 1 − δ fraction of the trials every query
    is answered within ``eps``."""
    return empirical_delta(errors, eps) <= _probability(delta, "delta")


# ------------------------------------------------------------ Lemma 4.1, Theorem 4.2
def lemma41_bound(eps, m: int, b: float) -> np.ndarray:
    """Lemma 4.1: P[Σ_{i=1..m} |Ñ_i| ≤ ε] ≥ 1 − m·exp(−ε/(m b)), Ñ_i i.i.d. Lap(b) (may be < 0:
    then the lemma says nothing)."""
    m, b = _count(m, "m"), _positive(b, "b")
    return 1.0 - m * np.exp(-np.asarray(eps, dtype=np.float64) / (m * b))


def abs_laplace_sum_cdf(eps, m: int, b: float) -> np.ndarray:
    """P[Σ_{i=1..m} |Ñ_i| ≤ ε] exactly: |Ñ_i| ~ Exp(mean b), so the sum is Gamma(m, scale b)."""
    m, b = _count(m, "m"), _positive(b, "b")
    return special.gammainc(m, np.maximum(np.asarray(eps, dtype=np.float64), 0.0) / b)


def theorem42_alpha(eps: float, delta: float, m: int) -> float:
    """Theorem 4.2: the cell histogram with α ≥ m·ln(m/δ)/ε is (ε, δ)-useful for linear
    counting queries on a cube of ``m`` cells."""
    m, eps, delta = _count(m, "m"), _positive(eps, "eps"), _probability(delta, "delta")
    return m * math.log(m / delta) / eps


def theorem42_delta(alpha, eps, m: int) -> np.ndarray:
    """The δ Theorem 4.2's proof guarantees for budget α and error ε: m·exp(−εα/m) (≥ 1: none)."""
    m = _count(m, "m")
    return m * np.exp(-np.asarray(eps, dtype=np.float64) * np.asarray(alpha, dtype=np.float64) / m)


def cell_histogram_delta(alpha, eps, m: int) -> np.ndarray:
    """P[Σ_{i=1..m} |Ñ_i(α)| > ε], the event Theorem 4.2's proof bounds, exactly (Gamma tail). It
    bounds the δ of the cell histogram for *every* 0/1 linear counting query at once, since
    |Σ_{i∈Q} Ñ_i| ≤ Σ_i |Ñ_i|."""
    m = _count(m, "m")
    return special.gammaincc(m, np.maximum(np.asarray(eps, dtype=np.float64) * np.asarray(alpha, dtype=np.float64), 0.0))


def single_query_delta(eps, s: int, alpha: float) -> np.ndarray:
    """P[|Σ_{i=1..s} Ñ_i(α)| > ε]: the exact δ of one query of ``s`` cells on the cell
    histogram (Theorem 3.3)."""
    return 2.0 * laplace_sum_sf(np.abs(np.asarray(eps, dtype=np.float64)), s, alpha)


# ------------------------------------------------------------ Theorem 4.4 (eq 32, 33), eq 34
def _query_in_partition(s: int, n_p: int) -> tuple[int, int]:
    s, n_p = _count(s, "s"), _count(n_p, "n_p")
    if s > n_p:
        raise ParameterError(f"the query size s = {s} exceeds the partition size n_p = {n_p}", param="s")
    return s, n_p


def eq32_max_gamma(eps, delta: float, s: int, n_p: int, alpha2: float) -> np.ndarray:
    """Eq 32: the uniform estimate of a query of ``s`` cells inside a partition of ``n_p`` cells
    is (ε, δ)-useful on γ-smooth data if γ ≤ (ε + s·ln δ/(α2 n_p)) / min(s, n_p − s).

    Returns that largest γ (negative: no γ works; +inf when s = n_p and ε suffices for the
    noise alone, −inf when it does not)."""
    s, n_p = _query_in_partition(s, n_p)
    delta, alpha2 = _probability(delta, "delta"), _positive(alpha2, "alpha2")
    num = np.asarray(eps, dtype=np.float64) + s * math.log(delta) / (alpha2 * n_p)
    k = min(s, n_p - s)
    if k == 0:
        return np.where(num >= 0, np.inf, -np.inf)
    return num / k


def uniform_delta(gamma, eps, s: int, n_p: int, alpha2: float) -> np.ndarray:
    """The δ of Theorem 4.4 for given γ and ε: exp(−(ε − min(s, n_p − s)γ)·α2 n_p/s), capped at 1
    (eq 32 solved for δ)."""
    s, n_p = _query_in_partition(s, n_p)
    alpha2 = _positive(alpha2, "alpha2")
    slack = np.asarray(eps, dtype=np.float64) - min(s, n_p - s) * np.asarray(gamma, dtype=np.float64)
    return np.minimum(1.0, np.exp(-slack * alpha2 * n_p / s))


def eq33_uniform_error_bound(gamma, s: int, n_p: int, alpha2: float) -> np.ndarray:
    """Eq 33: E(ε_H) ≤ γ·min(s, n_p − s) + s/(α2 n_p)."""
    s, n_p = _query_in_partition(s, n_p)
    alpha2 = _positive(alpha2, "alpha2")
    return np.asarray(gamma, dtype=np.float64) * min(s, n_p - s) + s / (alpha2 * n_p)


def eq34_uniform_error(eta, s: int, alpha1: float) -> np.ndarray:
    """Eq 34, exactly: E|η + S|, S the sum of ``s`` i.i.d. Lap(1/α1) variables, η the observed
    inconsistency between the subcube and the cell histograms.

    For symmetric S, d/dη E|η + S| = 2F(η) − 1, so E|η + S| = E|S| + |η| − 2∫_0^{|η|} P(S > t) dt,
    and ∫_0^h Q(a, αt) dt = h·Q(a, αh) + (a/α)·P(a + 1, αh)."""
    s, alpha1 = _count(s, "s"), _positive(alpha1, "alpha1")
    eta = np.asarray(eta, dtype=np.float64)
    h = np.abs(eta).ravel()
    logw, a = _mixture(s)
    w = np.exp(logw)
    integral = np.empty(h.size)
    for sl in _blocks(h, s):
        x = h[sl, None]
        integral[sl] = (x * special.gammaincc(a[None, :], alpha1 * x)
                        + a[None, :] / alpha1 * special.gammainc(a[None, :] + 1, alpha1 * x)) @ w
    out = laplace_sum_mean_abs(s, alpha1) + h - 2 * integral
    return out.reshape(eta.shape)


# ------------------------------------------------------------ eq 35
def laplace_combination_mean_abs(coefs, alphas, counts=None) -> float:
    """E|Σ_j c_j Σ_{i=1..k_j} Ñ_{ji}| for independent Ñ_{ji} ~ Lap(1/α_j) (``counts`` k_j, default 1).

    For a symmetric X, E|X| = (2/π) ∫_0^∞ (1 − φ(t))/t² dt with the real characteristic
    function φ(t) = Π_j (1 + (c_j t/α_j)²)^{−k_j}; one adaptive quadrature after scaling t by
    the standard deviation (1 − φ by expm1, so no cancellation near t = 0)."""
    from scipy import integrate

    c = np.abs(np.asarray(coefs, dtype=np.float64)).ravel()
    a = np.asarray(alphas, dtype=np.float64).ravel()
    k = np.ones_like(c) if counts is None else np.asarray(counts, dtype=np.float64).ravel()
    if not (c.shape == a.shape == k.shape) or not len(c):
        raise ParameterError("coefs, alphas and counts must have the same non-zero length", param="coefs")
    if not ((a > 0) & np.isfinite(a)).all() or not ((k >= 0) & np.isfinite(k)).all() or not np.isfinite(c).all():
        raise ParameterError("alphas must be positive, counts ≥ 0, coefficients finite", param="alphas")
    scale = c / a
    sd = float(np.sqrt(2 * (k * scale**2).sum()))
    if sd == 0:
        return 0.0
    r = scale / sd

    def integrand(u):
        return -np.expm1(-(k * np.log1p((r * u) ** 2)).sum()) / (u * u) if u > 0 else float((k * r**2).sum())

    head = integrate.quad(integrand, 0, 1, limit=200, epsabs=0, epsrel=1e-10)[0]
    tail = integrate.quad(integrand, 1, np.inf, limit=200, epsabs=0, epsrel=1e-10)[0]
    return 2 * sd / math.pi * (head + tail)


def eq35_ls_error(alpha1: float, alpha2: float, n_p: int, s: int, weights: tuple[float, float] | None = None) -> float:
    """Eq 35: E|error| of the least-squares estimate of a query of ``s`` cells inside a
    partition of ``n_p`` cells from the cell histogram (noise Lap(1/α1)) and the partition count
    (Lap(1/α2)).

    ``weights`` None is the paper's unweighted H⁺: error = s/(n_p+1)·Ñ(α2) + (n_p+1−s)/(n_p+1)·Σ_s Ñ(α1)
    − s/(n_p+1)·Σ_{n_p−s} Ñ(α1). ``weights=(v1, v2)`` (the two noise variances) is the
    variance-weighted estimate, the same form with w = v1/(v2 + n_p v1) in place of 1/(n_p+1)."""
    s, n_p = _query_in_partition(s, n_p)
    alpha1, alpha2 = _positive(alpha1, "alpha1"), _positive(alpha2, "alpha2")
    if weights is None:
        w = 1.0 / (n_p + 1)
    else:
        v1, v2 = (_positive(v, "weights") for v in weights)
        w = v1 / (v2 + n_p * v1)
    return laplace_combination_mean_abs([s * w, 1 - s * w, s * w], [alpha2, alpha1, alpha1], [1, s, n_p - s])

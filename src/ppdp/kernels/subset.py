"""The k-subset selection channel (Ye & Barg 2018; Wang, Wu & Hu 2016), shared by the mechanism,
its claim, its estimators and the audit.

A record with value x on a domain of m values reports a set Y of k distinct values: a set that
holds x with probability proportional to e^ε, one that does not with probability proportional
to 1. Every set of size k is a possible report, so P(Y | x) / P(Y | x') ≤ e^ε for every pair of
true values: the channel is ε-locally differentially private. Equivalently, Y holds x with
probability ``p`` = k·e^ε / (k·e^ε + m − k), the other k − 1 (or k) values drawn uniformly
without replacement from the m − 1 values other than x; and a value v ≠ x lies in Y with
probability ``q`` = k((k − 1)e^ε + m − k) / ((m − 1)(k·e^ε + m − k)).

Over n records of which x_v hold v, the support count c_v (reports holding v) has mean
q·n + (p − q)·x_v and, the records being independent, variance x_v·p(1 − p) + (n − x_v)·q(1 − q):
the unbiased estimate is x̂_v = (c_v − n·q)/(p − q). The k that minimises the variance of a
rare value's estimate, q(1 − q)/(p − q)² per record, is close to m/(e^ε + 1) (Ye & Barg 2018,
Wang et al. 2016); :func:`optimal_k` finds it exactly. k = 1 is randomized response on m
values (uniform perturbation with γ = e^ε).

With γ = e^ε, a value of prior π has posterior at most πγ / (1 + (γ − 1)π) after any report
— the bound uniform perturbation with amplification γ reaches — so ε = ln γ(ρ1, ρ2) gives
(ρ1, ρ2)-privacy (Evfimievski, Gehrke & Srikant 2003), for every prior, not only the table's.
"""

from __future__ import annotations

import math

import numpy as np

#: records drawn per vectorised step of :func:`draw_subsets`
DRAW_BLOCK = 1 << 20


def inclusion_probabilities(m: int, k: int, epsilon: float) -> tuple[float, float]:
    """(p, q): the probability that the report holds the record's own value, and any other one."""
    e = math.exp(float(epsilon))
    den = k * e + m - k
    p = k * e / den
    q = k * ((k - 1) * e + m - k) / ((m - 1) * den)
    return float(p), float(q)


def rare_variance(m: int, k: int, epsilon: float) -> float:
    """q(1 − q)/(p − q)²: the variance, per record, of the unbiased count of a value no record holds."""
    p, q = inclusion_probabilities(m, k, epsilon)
    return q * (1 - q) / (p - q) ** 2


def optimal_k(m: int, epsilon: float) -> int:
    """The k in 1 … m − 1 with the smallest :func:`rare_variance` (the smallest such k on a tie)."""
    if m < 2:
        raise ValueError("subset selection needs at least two values")
    ks = np.arange(1, m)
    v = np.array([rare_variance(m, int(k), epsilon) for k in ks])
    return int(ks[int(np.argmin(v + 1e-12 * ks))])


def posterior_bound(prior, epsilon: float):
    """The largest posterior of a value of prior π after any report of an ε-LDP channel: πe^ε/(1 + (e^ε − 1)π)."""
    g = math.exp(float(epsilon))
    prior = np.asarray(prior, dtype=float)
    return prior * g / (1.0 + (g - 1.0) * prior)


def _floyd(n: int, M: int, kk: int, rng: np.random.Generator) -> np.ndarray:
    """(n, kk): for each of n rows a uniform kk-subset of 0 … M − 1 (Floyd's algorithm, a step per
    slot for all rows at once: O(n·kk²) comparisons, no n × M array)."""
    S = np.empty((n, kk), dtype=np.int64)
    for j, i in enumerate(range(M - kk, M)):
        t = rng.integers(0, i + 1, size=n)
        if j:
            dup = (S[:, :j] == t[:, None]).any(axis=1)
            t = np.where(dup, i, t)
        S[:, j] = t
    return S


def draw_subsets(x: np.ndarray, m: int, k: int, epsilon: float, rng: np.random.Generator) -> np.ndarray:
    """(n, k) int: every record's report, its values sorted ascending (the order carries nothing).
    ``x``: the true codes in 0 … m − 1."""
    x = np.asarray(x)
    n = len(x)
    out = np.empty((n, k), dtype=np.int64)
    p, _ = inclusion_probabilities(m, k, epsilon)
    for lo in range(0, n, DRAW_BLOCK):
        xb = x[lo:lo + DRAW_BLOCK].astype(np.int64)
        b = len(xb)
        keep = rng.random(b) < p
        S = np.empty((b, k), dtype=np.int64)
        nk = int(keep.sum())
        S[~keep] = _floyd(b - nk, m - 1, k, rng)  # k values among the m − 1 others
        if k > 1:
            S[keep, 1:] = _floyd(nk, m - 1, k - 1, rng)  # the own value and k − 1 others
        S[keep, 0] = -1
        S = np.where(S >= xb[:, None], S + 1, S)  # index among the others → value
        S[keep, 0] = xb[keep]
        S.sort(axis=1)
        out[lo:lo + b] = S
    return out


def hypergeometric_moments(draws, population: int, successes) -> tuple[np.ndarray, np.ndarray]:
    """Mean and variance of the number of successes in ``draws`` draws without replacement."""
    d = np.asarray(draws, dtype=float)
    K = np.asarray(successes, dtype=float)
    M = float(population)
    f = K / M if M > 0 else np.zeros_like(K)
    var = d * f * (1 - f) * (M - d) / (M - 1) if M > 1 else np.zeros_like(d * f)
    return d * f, var


def set_count_moments(m: int, k: int, epsilon: float, s) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """For a set S of s values: the mean and variance of |Y ∩ S| for a record whose value lies in S
    (``mean_in``, ``var_in``) and for one whose value does not (``mean_out``, ``var_out``)."""
    p, _ = inclusion_probabilities(m, k, epsilon)
    s = np.asarray(s, dtype=float)

    def mix(a_mean, a_var, b_mean, b_var):  # with probability p the first, else the second
        mean = p * a_mean + (1 - p) * b_mean
        second = p * (a_var + a_mean**2) + (1 - p) * (b_var + b_mean**2)
        return mean, second - mean**2

    # own value in S: 1 + hypergeometric(k − 1 of the m − 1 others, s − 1 of them in S), or hypergeometric(k, s − 1)
    km1_in = hypergeometric_moments(k - 1, m - 1, np.maximum(s - 1, 0))
    k_in = hypergeometric_moments(k, m - 1, np.maximum(s - 1, 0))
    mean_in, var_in = mix(1 + km1_in[0], km1_in[1], k_in[0], k_in[1])
    km1_out = hypergeometric_moments(k - 1, m - 1, s)
    k_out = hypergeometric_moments(k, m - 1, s)
    mean_out, var_out = mix(km1_out[0], km1_out[1], k_out[0], k_out[1])
    return mean_in, var_in, mean_out, var_out


__all__ = ["DRAW_BLOCK", "draw_subsets", "hypergeometric_moments", "inclusion_probabilities", "optimal_k",
           "posterior_bound", "rare_variance", "set_count_moments"]

"""Data-independent measurement strategies for range queries and their least-squares inference
(the matrix mechanism, Li, Miklau, Hay, McGregor & Rastogi 2010/2015; per-dimension strategies
combined by Kronecker products as in HDMM, McKenna, Miklau, Hay & Machanavajjhala 2018).

One dimension of n cells gets a two-level strategy: the n single cells with weight ``a`` and
the blocks of ``b`` consecutive cells with weight ``c = 1 − a`` (a = 1: the identity). The
weights sum to 1, so every cell is covered with total weight 1: measuring a level with
ε·weight costs that share of ε (parallel composition over the disjoint cells or blocks of a
level; sequential over the levels). Several dimensions: the Kronecker product — every pair
(level of dim 1, level of dim 2, …) is one measurement of the disjoint boxes it defines, with
ε·Π weights; the shares again sum to 1.

Design rule (public: the domain sizes only, never the data). The per-dimension (b, a) minimises
the expected standard deviation of the answer to a uniformly random range [lo, hi] of that
dimension, E_q √(qᵀG⁻¹q) with G = a²I + c²BᵀB (the Gram matrix of the weighted strategy; the
weights sum to 1, so the sensitivity is 1), over a fixed grid of candidates (b ∈ :data:`BLOCK_CANDIDATES`, a ∈ {0.05, 0.10, …, 1}). For a
d-dimensional range (product of independent per-dimension ranges) the standard deviation of
the least-squares answer is the product of the per-dimension factors times √(2)/ε, so the
per-dimension choices are jointly optimal within the template. The criterion is the class of
all range queries, not any particular workload.

Least squares. With weights ∝ ε_step² (the inverse variance of continuous Laplace noise
of the same ε; the discrete Laplace variance differs by < 1% for ε_step ≤ 0.3 and the
estimate is unbiased with any weights) the normal matrix is ε²·⊗G_i and
x̂ = ⊗(G_i⁻¹A_iᵀD_i²) y: one small dense matrix per dimension applied along its axis (mode
products), never a matrix over the whole domain. The variance of qᵀx̂ for a box query uses the
true (discrete Laplace) variance v_s of every step s: Σ_s v_s·Π_i w_{i,s}⁴·‖B_{i,s}G_i⁻¹q_i‖²
(``ppdp.estimators.histogram``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Sequence

import numpy as np

__all__ = ["DimStrategy", "design_dimension", "kron_strategy", "mode_product", "expected_range_sd",
           "BLOCK_CANDIDATES", "WEIGHT_GRID"]

#: block sizes tried for the coarse level of a dimension
BLOCK_CANDIDATES = (2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 16, 20, 24, 32, 48, 64, 96, 128)
#: leaf weights tried (1.0: the identity strategy)
WEIGHT_GRID = tuple(round(0.05 * k, 2) for k in range(1, 21))
#: ranges evaluated per dimension at most (all of them up to n = 128; beyond, an even grid)
_MAX_GRID = 129


@dataclass(frozen=True)
class DimStrategy:
    """One dimension's strategy: ``block`` (0: none, identity), the leaf and block weights and the
    design criterion's value (E √(qᵀG⁻¹q) over all ranges, weights normalised to sum 1)."""

    n: int
    block: int
    leaf_weight: float
    score: float

    @property
    def levels(self) -> list[tuple[np.ndarray, float]]:
        """(start index of every node, weight) per level, coarse level first."""
        out = []
        if self.block:
            out.append((np.arange(0, self.n, self.block), round(1.0 - self.leaf_weight, 10)))
        out.append((np.arange(self.n), self.leaf_weight))
        return out

    def matrix(self) -> tuple[np.ndarray, np.ndarray]:
        """(A, row weights): the stacked 0/1 level matrices (coarse first) and each row's weight."""
        rows, wts = [], []
        for starts, w in self.levels:
            ends = np.append(starts[1:], self.n)
            m = np.zeros((len(starts), self.n))
            for r, (a, z) in enumerate(zip(starts, ends)):
                m[r, a:z] = 1.0
            rows.append(m)
            wts.append(np.full(len(starts), w))
        return np.vstack(rows), np.concatenate(wts)

    def gram_inverse(self) -> np.ndarray:
        A, w = self.matrix()
        return np.linalg.inv(A.T @ (A * (w**2)[:, None]))


def _ranges(n: int) -> tuple[np.ndarray, np.ndarray]:
    pts = np.unique(np.round(np.linspace(0, n - 1, min(n, _MAX_GRID))).astype(np.int64))
    lo, hi = np.meshgrid(pts, pts, indexing="ij")
    keep = lo <= hi
    return lo[keep], hi[keep]


def _score(n: int, block: int, a: float, lo: np.ndarray, hi: np.ndarray) -> float:
    """E √(qᵀG⁻¹q) over the ranges (lo, hi) for the two-level strategy, in closed form per
    block: G restricted to a block of s cells is a²I + c²11ᵀ, whose inverse is
    (I − c²/(a² + c²s)·11ᵀ)/a²; a range overlapping k cells of the block adds (k − c²k²/(a²+c²s))/a²."""
    if not block or a >= 1.0:
        return float(np.sqrt(hi - lo + 1.0).mean())
    c = 1.0 - a
    starts = np.arange(0, n, block)
    ends = np.minimum(starts + block, n)  # exclusive
    size = (ends - starts).astype(np.float64)

    def part(k, s):  # a range covering k of the s cells of one block
        return k - c * c * k * k / (a * a + c * c * s)

    g = np.concatenate([[0.0], np.cumsum(part(size, size))])
    jl, jh = lo // block, hi // block
    same = jl == jh
    v = np.where(same, part(hi - lo + 1.0, size[jl]),
                 part(ends[jl] - lo + 0.0, size[jl]) + part(hi - starts[jh] + 1.0, size[jh])
                 + (g[jh] - g[np.minimum(jl + 1, len(size))]).clip(0))
    v = v / (a * a)
    return float(np.sqrt(v).mean())


@lru_cache(maxsize=256)
def design_dimension(n: int) -> DimStrategy:
    """The per-dimension strategy of the documented design rule (module docstring)."""
    n = int(n)
    lo, hi = _ranges(n)
    best = DimStrategy(n, 0, 1.0, _score(n, 0, 1.0, lo, hi))
    for b in BLOCK_CANDIDATES:
        if b > n // 2:
            break
        for a in WEIGHT_GRID[:-1]:
            sc = _score(n, b, a, lo, hi)
            if sc < best.score * (1 - 1e-9):
                best = DimStrategy(n, b, a, sc)
    return best


def kron_strategy(shape: Sequence[int]) -> tuple[DimStrategy, ...]:
    return tuple(design_dimension(int(n)) for n in shape)


def mode_product(x: np.ndarray, m: np.ndarray, axis: int) -> np.ndarray:
    """x ×_axis m: apply the matrix ``m`` (rows × x.shape[axis]) along ``axis``."""
    return np.moveaxis(np.tensordot(m, x, axes=([1], [axis])), 0, axis)


def expected_range_sd(strategies: Sequence[DimStrategy], epsilon: float) -> float:
    """Predicted mean standard deviation of the least-squares answer to a uniformly random box
    (independent uniform ranges per dimension), continuous-Laplace approximation: √2/ε·Π score."""
    return math.sqrt(2.0) / float(epsilon) * math.prod(s.score for s in strategies)

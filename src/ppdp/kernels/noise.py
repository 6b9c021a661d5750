"""Hardened noise for counts, and privacy-budget accounting.

Why not ``count + rng.laplace(1/ε)``
-------------------------------------
Mironov (2012) showed that the textbook Laplace sampler in floating point leaks the input:
``x + b·log(U)`` can only produce a sparse, *x-dependent* set of doubles, so the low-order
bits of a released value tell neighbouring inputs apart (often with certainty), whatever ε
says. ppdp never releases a floating-point Laplace draw.

What ppdp does instead
----------------------
Counts have sensitivity 1 and are integers, so we add **discrete Laplace** (two-sided
geometric) noise Z with ``P(Z = k) = (1 − p)/(1 + p) · p^{|k|}``, ``p = e^{−ε}`` (Ghosh,
Roughgarden & Sundararajan 2009; Canonne, Kamath & Steinke 2020). Adding it to a
sensitivity-1 integer count is ε-differentially private: the pmf ratio of neighbouring
outputs is exactly ``p^{±1}``. It is sampled as the difference of two independent
geometric variables ``G1 − G2`` (failures before the first success, success probability
``1 − p``) drawn with NumPy's integer-valued geometric generator. The released value is an
integer: there are no low-order mantissa bits to inspect, so the Mironov attack has nothing
to read.

The ε floor (documented, enforced)
----------------------------------
NumPy draws a geometric variate by inversion of a double-precision standard exponential E:
``G = ceil(E / ε)``. E takes values on a grid of spacing at most ~8.5e-16 (53-bit mantissas
over the ziggurat's widest layer), so the interval ``((k−1)ε, kε]`` that yields ``G = k``
holds about ``ε / 8.5e-16`` grid points: each point mass is off by a relative ~1e-15/ε. At
ε = 1e-6 that is ~1e-9 (privacy loss ≤ ε + 2e-9, within 0.2% of ε at the floor); as ε
shrinks the error grows, near ε ≈ 1e-15 whole integers become unreachable (an infinite
likelihood ratio) and below ε ≈ 1e-19 the draw saturates at the int64 maximum so that
G1 − G2 = 0: the "noisy" count would be the exact count. ppdp therefore refuses every draw
with ε < :data:`EPSILON_FLOOR` = 1e-6 (a :class:`~ppdp.errors.ParameterError` naming the
measurement), long before any of this, and ``verify`` rejects a certificate whose ledger
spends less than the floor on a measurement. The floor is far below any useful budget: at
ε = 1e-6 the noise standard deviation is 1.4 million. ``tests/histogram/test_noise.py``
checks the realised distribution against the exact pmf, at the floor included (binned χ²
and residues mod 2, 3, 10: no lattice artefacts).

Goodness of fit (``verify`` with the source table)
--------------------------------------------------
:func:`noise_fit_test` tests whether residuals (published − true) are independent discrete
Laplace draws of a declared ε, with a Chernoff bound on the sufficient statistic Σ|r|: its
false-alarm probability is at most the given α whatever the sample size (no asymptotics);
noise-free counts (Σ|r| = 0, probability tanh(ε/2)^m) and noise of the wrong scale fall in
one of its two tails.

Budget accounting: spending and drawing are one call
----------------------------------------------------
:class:`Budget` is the only way a mechanism gets noisy counts: :meth:`Budget.measure` charges
the ledger and draws the noise in one call (the ``measure`` operator of Ektelo, Zhang et al.
2018), so no code can spend ε without drawing or draw without spending. A measurement is a
planned :class:`Step` (ε, what it measures) applied to counts of disjoint parts of the data
(cells, partitions, the nodes of one tree level): they compose in parallel (Theorem 3.2 of
Xiao et al.), the steps sequentially (Theorem 3.1). The ledger (one :class:`Spend` per step)
goes into the release's claim and ``verify`` re-adds it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..errors import ParameterError, PpdpError

#: Samplers ``verify`` accepts as hardened against the floating-point attack, and whether
#: their values are integers (then every released raw count must be an integer).
SAMPLERS = {"discrete-laplace/geometric-difference": {"integer": True}}
HARDENED_SAMPLERS = tuple(SAMPLERS)
SAMPLER = HARDENED_SAMPLERS[0]


#: the smallest ε a single draw may use (see the module docstring: below it NumPy's double-precision
#: geometric draw drifts from the discrete Laplace pmf, and far below it the noise vanishes)
EPSILON_FLOOR = 1e-6


def check_floor(epsilon: float, what: str = "a measurement") -> float:
    """``epsilon`` (already a finite float > 0) when ≥ :data:`EPSILON_FLOOR`, else ParameterError."""
    if epsilon < EPSILON_FLOOR:
        raise ParameterError(f"ε = {epsilon:g} for {what} is below the noise sampler's floor {EPSILON_FLOOR:g} "
                             f"(below it the draw is not a faithful discrete Laplace; see ppdp.kernels.noise): "
                             f"raise epsilon", param="epsilon")
    return epsilon


def sampler_is_integer(name: str) -> bool:
    """True when the (hardened) sampler ``name`` draws integer noise."""
    return bool(SAMPLERS.get(name, {}).get("integer", False))


def check_epsilon(epsilon) -> float:
    """``epsilon`` as a finite float > 0 (PpdpError otherwise)."""
    try:
        e = float(epsilon)
    except (TypeError, ValueError):
        raise PpdpError(f"epsilon must be a number, got {epsilon!r}") from None
    if not math.isfinite(e) or e <= 0:
        raise PpdpError(f"epsilon must be a finite number > 0, got {epsilon!r}")
    return e


def discrete_laplace(rng: np.random.Generator, epsilon: float, size) -> np.ndarray:
    """Integer noise with pmf ∝ exp(−ε|k|) (sensitivity 1), as int64, via G1 − G2.

    The sampler itself: it spends nothing. Mechanisms draw through :meth:`Budget.measure`.
    ``epsilon`` below :data:`EPSILON_FLOOR` is refused (ParameterError)."""
    e = check_floor(check_epsilon(epsilon), "a discrete Laplace draw")
    q = -math.expm1(-e)  # success probability 1 − e^{−ε}, accurate for small ε
    g1 = rng.geometric(q, size=size).astype(np.int64)
    g2 = rng.geometric(q, size=size).astype(np.int64)
    return g1 - g2  # NumPy's geometric counts trials (≥ 1); the offsets cancel


def discrete_laplace_pmf(k: np.ndarray, epsilon: float) -> np.ndarray:
    """Exact pmf of the discrete Laplace distribution at integers ``k``."""
    p = math.exp(-check_epsilon(epsilon))
    return (1 - p) / (1 + p) * np.power(p, np.abs(np.asarray(k, dtype=float)))


def discrete_laplace_variance(epsilon: float) -> float:
    """Var Z = 2p/(1−p)², p = e^{−ε} (→ 2/ε² as ε → 0, the continuous Laplace variance)."""
    e = check_epsilon(epsilon)
    return 2 * math.exp(-e) / math.expm1(-e) ** 2  # libm's exp: the figures certificates state


def discrete_laplace_variances(epsilon) -> np.ndarray:
    """:func:`discrete_laplace_variance` elementwise over an array of (valid) ε (NumPy's exp: may
    differ from the scalar form in the last bit)."""
    e = np.asarray(epsilon, dtype=np.float64)
    return 2 * np.exp(-e) / np.expm1(-e) ** 2


def discrete_laplace_fourth_cumulant(epsilon: float) -> float:
    """κ4(Z) = v(1 + 3v), v = :func:`discrete_laplace_variance` (ε). Z = G1 − G2 with G geometric
    (failures before the first success, P(G = k) = (1 − p)p^k), whose cumulants are those of the
    negative binomial with one success: κ2(G) = μ(1 + μ), κ4(G) = κ2(G)(1 + 6κ2(G)), μ = p/(1 − p).
    Z is symmetric, so its even cumulants are twice G's: v = 2κ2(G) and κ4 = v(1 + 3v). Excess
    kurtosis κ4/v² = 3 + 1/v: the continuous Laplace's 3 plus the lattice's 1/v."""
    v = discrete_laplace_variance(epsilon)
    return v * (1.0 + 3.0 * v)


def discrete_laplace_fourth_cumulants(epsilon) -> np.ndarray:
    """:func:`discrete_laplace_fourth_cumulant` elementwise over an array of (valid) ε."""
    v = discrete_laplace_variances(epsilon)
    return v * (1.0 + 3.0 * v)


def discrete_laplace_mean_abs(epsilon: float) -> float:
    """E|Z| = 2p/((1−p)(1+p))."""
    p = math.exp(-check_epsilon(epsilon))
    return 2 * p / ((1 - p) * (1 + p))


# ---------------------------------------------------------------------------- the budget
@dataclass(frozen=True)
class Step:
    """One planned measurement: its ε, what it measures, and over which disjoint parts the
    release's files let ``verify`` count (``"cells"``, ``"partitions"``; None: not published)."""

    epsilon: float
    what: str
    over: str | None = None
    #: the number of disjoint parts when it follows from public quantities (e.g. a data-independent tree level)
    parts: int | None = None


@dataclass(frozen=True)
class Spend:
    """One ledger entry: ε spent once on ``parallel_over`` disjoint parts (parallel composition)."""

    epsilon: float
    what: str
    parallel_over: int

    def to_json(self) -> dict:
        return {"epsilon": self.epsilon, "what": self.what,
                "composition": "parallel" if self.parallel_over > 1 else "single", "parts": int(self.parallel_over)}

    @classmethod
    def from_json(cls, entry) -> "Spend":
        spend = cls(float(entry["epsilon"]), str(entry["what"]), int(entry["parts"]))
        if entry.get("composition") != spend.to_json()["composition"]:
            raise ValueError(f"ledger entry {spend.what!r}: composition {entry.get('composition')!r} does not match "
                             f"its {spend.parallel_over} part(s)")
        return spend


def _integer_counts(counts) -> np.ndarray:
    c = np.asarray(counts)
    if c.dtype.kind not in "iu":
        raise PpdpError("a measurement needs integer counts (sensitivity-1 counts of records)")
    return c.astype(np.int64)


class Budget:
    """An ε budget, its ledger, and the one operator that spends it: :meth:`measure`.

    Overspending raises :class:`PpdpError` before any noise is drawn.
    """

    def __init__(self, total: float):
        self._total = check_epsilon(total)
        self._ledger: list[Spend] = []

    @property
    def total(self) -> float:
        return self._total

    @property
    def ledger(self) -> tuple[Spend, ...]:
        return tuple(self._ledger)

    @property
    def spent(self) -> float:
        return math.fsum(s.epsilon for s in self._ledger)

    @property
    def remaining(self) -> float:
        return self._total - self.spent

    def _charge(self, step: Step, parallel_over: int) -> float:
        e = check_floor(check_epsilon(step.epsilon), step.what)
        if self.spent + e > self._total * (1 + 1e-9):
            raise PpdpError(f"budget exceeded: spending ε={e:g} on {step.what} would bring the total to "
                            f"{self.spent + e:g} > {self._total:g}")
        self._ledger.append(Spend(e, step.what, int(parallel_over)))
        return e

    def measure(self, rng: np.random.Generator, counts, step: Step, parallel_over: int | None = None) -> np.ndarray:
        """Charge ``step`` and return ``counts`` (integers, one per disjoint part) plus
        independent discrete Laplace noise of parameter ``step.epsilon`` (int64)."""
        c = _integer_counts(counts)
        e = self._charge(step, c.size if parallel_over is None else parallel_over)
        return c + discrete_laplace(rng, e, c.shape)

    def measure_parts(self, rng: np.random.Generator, parts, step: Step, parallel_over: int | None = None) -> list[np.ndarray]:
        """One step over several arrays of disjoint counts (e.g. the slices of every box of a
        tree level): charged once, noise drawn array by array in order."""
        arrays = [_integer_counts(p) for p in parts]
        n = sum(a.size for a in arrays) if parallel_over is None else parallel_over
        e = self._charge(step, n)
        return [a + discrete_laplace(rng, e, a.shape) for a in arrays]

    def measure_sparse(self, rng: np.random.Generator, idx: np.ndarray, cnt: np.ndarray, n_cells: int,
                       step: Step) -> tuple[np.ndarray, np.ndarray, int]:
        """Noisy counts of all ``n_cells`` cells of which only those ≥ a threshold τ are kept
        (Cormode, Procopiuc, Srivastava & Tran 2012), without touching the empty cells one by
        one: the non-empty cells (``idx``, ``cnt``) are noised and filtered, the empty cells
        that pass are drawn directly (their number from the binomial tail, their values from
        the memoryless geometric tail) — the distribution of noising every cell and then
        filtering. τ = :func:`sparse_threshold` (ε, ``n_cells``): public quantities only.
        Returns (sorted linear indices, noisy counts, τ)."""
        cnt = _integer_counts(cnt)
        eps = self._charge(step, n_cells)
        nonempty = np.asarray(idx, dtype=np.int64)
        m0 = n_cells - len(nonempty)
        p = math.exp(-eps)
        tau = sparse_threshold(eps, n_cells)
        noisy = cnt + discrete_laplace(rng, eps, len(cnt))
        keep = noisy >= tau
        kept_idx, noisy = nonempty[keep], noisy[keep]
        k = int(rng.binomial(m0, p**tau / (1 + p)))  # P(Z ≥ τ) = p^τ/(1+p)
        chosen = np.zeros(0, dtype=np.int64)
        taken = set(nonempty.tolist())
        while len(chosen) < k:
            cand = rng.integers(0, n_cells, size=2 * (k - len(chosen)) + 16)
            fresh = [c for c in dict.fromkeys(cand.tolist()) if c not in taken][: k - len(chosen)]
            taken.update(fresh)
            chosen = np.concatenate([chosen, np.asarray(fresh, dtype=np.int64)])
        extra_vals = tau + rng.geometric(-math.expm1(-eps), size=k).astype(np.int64) - 1
        all_idx = np.concatenate([kept_idx, chosen])
        all_cnt = np.concatenate([noisy, extra_vals])
        order = np.argsort(all_idx)
        return all_idx[order], all_cnt[order], tau

    def to_json(self) -> list[dict]:
        return [s.to_json() for s in self._ledger]

    @staticmethod
    def total_of(ledger) -> float:
        """Sequential composition of a ledger (Spend objects or their JSON): the sum of its steps' ε."""
        return math.fsum(float(s.epsilon if isinstance(s, Spend) else s["epsilon"]) for s in ledger)


#: the expected number of empty cells a sparse release may let through (a public constant: the
#: threshold must not depend on the data, e.g. on the number of rows or of non-empty cells)
SPARSE_SPURIOUS_TARGET = 2**20


def sparse_threshold(epsilon: float, n_cells: int) -> int:
    """τ of a sparse cell histogram: the smallest integer ≥ 1 for which the expected number of
    cells passing with a true count of 0, at most ``n_cells``·P(Z ≥ τ) = n_cells·p^τ/(1+p), is
    ≤ :data:`SPARSE_SPURIOUS_TARGET`. Public: a function of ε and the cube size only."""
    e = check_epsilon(epsilon)
    p = math.exp(-e)
    n = max(int(n_cells), 1)
    tau = max(1, math.ceil(math.log(n / (SPARSE_SPURIOUS_TARGET * (1 + p))) / e) - 1)
    while tau > 1 and n * p ** (tau - 1) / (1 + p) <= SPARSE_SPURIOUS_TARGET:
        tau -= 1
    while n * p**tau / (1 + p) > SPARSE_SPURIOUS_TARGET:
        tau += 1
    return tau


# ------------------------------------------------------------------- goodness of fit
def _abs_log_mgf(t: float, p: float) -> float:
    """log E[e^{t|Z|}] for discrete Laplace Z with p = e^{−ε} (needs p·e^t < 1): tilting by e^{t|Z|}
    turns p into p' = p·e^t, so E[e^{t|Z|}] = (1−p)/(1+p) · (1+p')/(1−p')."""
    q = p * math.exp(t)
    return math.log((1 - p) / (1 + p)) + math.log((1 + q) / (1 - q))


def noise_fit_test(residuals, epsilon: float, alpha: float = 1e-6) -> tuple[bool, str]:
    """Are ``residuals`` (published − true counts) independent discrete Laplace draws of
    parameter ``epsilon``? Two-sided Chernoff test on S = Σ|r| (the sufficient statistic of the
    scale): P(S ≥ s) ≤ min_{t>0} M(t)^m e^{−ts} and P(S ≤ s) ≤ min_{t>0} M(−t)^m e^{ts}, M the
    moment generating function of |Z|. The optimal t is closed-form: the tilted law is discrete
    Laplace with p' = e^{−ε}·e^{±t} whose mean |Z|, 2p'/(1−p'²), equals s/m, i.e.
    p' = (√(1+a²) − 1)/a for a = s/m. Rejects when either bound is ≤ α/2, so the false-alarm
    probability is ≤ α for every m (a bound, not an asymptotic approximation).

    Returns (consistent, a one-line description with the bound)."""
    r = np.abs(np.asarray(residuals, dtype=np.float64)).ravel()
    m = r.size
    if m == 0:
        return True, "no counts to test"
    e = check_epsilon(epsilon)
    p = math.exp(-e)
    s = float(r.sum())
    a = s / m
    mu = discrete_laplace_mean_abs(e)
    if not math.isfinite(a):
        return False, f"{m} count(s): non-finite residuals"
    if a == 0:
        log_b = m * math.log((1 - p) / (1 + p))  # P(S = 0), exactly
    else:
        q = (math.sqrt(1 + a * a) - 1) / a if a < 1e8 else 1 - 1 / a  # the tilted p' (0 < p' < 1)
        t = math.log(q / p)  # > 0: upper tail; < 0: lower tail
        log_b = min(0.0, m * _abs_log_mgf(t, p) - t * s)
    ok = log_b > math.log(alpha / 2)
    tail = "upper" if a > mu else "lower"
    return ok, (f"{m} count(s): mean |published − true| = {a:.4g}, expected {mu:.4g} at ε = {e:g}; "
                f"{tail}-tail probability ≤ {math.exp(log_b):.3g} (rejected at ≤ {alpha / 2:g})")

"""The exact multi-size bucket setting ("Optimal" of Wang et al. 2011, §7.2; SPEC §2.1) as a MILP.

Variables, for every size S ∈ [M, M']: b_S ≥ 0 (number of buckets of size S, integer) and
n_{i,S} ≥ 0 (records of x_i in buckets of size S)::

    minimise   Σ_S b_S (S − 1)²
    subject to Σ_S n_{i,S} = o_i                  (every record placed)
               Σ_i n_{i,S} = S · b_S              (the buckets of size S are full)
               n_{i,S} ≤ ⌊f'_i S⌋ · b_S           (Lemma 2(4): round robin inside the class is valid)

Solved with HiGHS through :func:`scipy.optimize.milp` with a time limit and ``mip_rel_gap = 0``.
Only the b_S are declared integer: for integer b the constraints on n form a bipartite
transportation polytope with integer capacities (totally unimodular), so an integer n exists
whenever a real one does — the relaxation of n is exact and keeps the MILP small. The
integer n is then recovered by a max-flow (values → sizes) and each size class is assigned by
round robin. The multi-size heuristic (Algorithm 2) is solved first and its loss is added as
an upper-bound constraint (SciPy's ``milp`` takes no starting solution); if HiGHS stops at the
time limit without proving optimality the better of its incumbent and the heuristic is
returned with ``proven_optimal=False`` and the gap in ``info``.
"""

from __future__ import annotations

import time

import numpy as np
from scipy import sparse
from scipy.optimize import Bounds, LinearConstraint, milp
from scipy.sparse.csgraph import maximum_flow

from ...errors import PpdpError
from .multi_size import multi_size_classes
from .plan import BucketSetting, SizeClass, classes_loss, make_setting, privacy_cap
from .two_size import prepare_counts


def _integer_split(o: np.ndarray, caps: np.ndarray, sizes: np.ndarray, b: np.ndarray) -> np.ndarray | None:
    """Integer n (m × K) with row sums o, column sums S·b and n ≤ cap·b, by max-flow; None if none."""
    m, K = caps.shape
    src, sink = 0, 1 + m + K
    rows, cols, cap = [], [], []
    rows += [src] * m
    cols += list(range(1, m + 1))
    cap += o.tolist()
    ii, ss = np.nonzero((caps * b[None, :]) > 0)
    rows += (1 + ii).tolist()
    cols += (1 + m + ss).tolist()
    cap += np.minimum(caps[ii, ss] * b[ss], o[ii]).tolist()
    rows += list(range(1 + m, 1 + m + K))
    cols += [sink] * K
    cap += (sizes * b).tolist()
    if max(cap) >= 2 ** 31:
        raise PpdpError("the optimal MILP's assignment step supports tables of up to 2^31 − 1 rows")
    g = sparse.csr_matrix((np.asarray(cap, dtype=np.int32), (rows, cols)), shape=(sink + 1, sink + 1))
    res = maximum_flow(g, src, sink)
    if int(res.flow_value) != int(o.sum()):
        return None
    flow = res.flow.tocoo()
    n = np.zeros((m, K), dtype=np.int64)
    sel = (flow.row >= 1) & (flow.row <= m) & (flow.col > m) & (flow.col < sink) & (flow.data > 0)
    n[flow.row[sel] - 1, flow.col[sel] - 1 - m] = flow.data[sel]
    return n


def optimal_classes(o, fprime, max_bucket: int = 50, time_limit: float = 60.0,
                    upper_bound: list[SizeClass] | None = None) -> tuple[list[SizeClass], bool, dict]:
    """Solve the MILP; returns (size classes, proven_optimal, info). ``upper_bound``: a known valid
    solution (default: the multi-size heuristic's)."""
    o_full = np.asarray(o, dtype=np.int64)
    f_full = np.asarray(fprime, dtype=np.float64)
    op, fp, n, M, Mp = prepare_counts(o_full, f_full, max_bucket)
    present = np.flatnonzero(o_full > 0)
    t0 = time.perf_counter()
    if upper_bound is None:
        upper_bound, _ = multi_size_classes(o_full, f_full, max_bucket)
    ub = classes_loss(upper_bound)
    t_heur = time.perf_counter() - t0

    sizes = np.arange(M, Mp + 1, dtype=np.int64)
    K, m = len(sizes), len(op)
    caps = privacy_cap(fp[:, None], sizes[None, :])           # m × K
    nv = K + m * K                                             # x = [b_S (K) | n_{i,S} (m·K, row-major in i)]
    c = np.zeros(nv)
    c[:K] = (sizes - 1) ** 2
    n_idx = (K + np.arange(m)[:, None] * K + np.arange(K)[None, :])   # m × K variable index of n_{i,S}

    A_rows, A_cols, A_vals, lo, hi = [], [], [], [], []
    r = 0
    # Σ_S n_{i,S} = o_i
    for i in range(m):
        A_rows += [r] * K
        A_cols += n_idx[i].tolist()
        A_vals += [1.0] * K
        lo.append(op[i]); hi.append(op[i]); r += 1
    # Σ_i n_{i,S} − S b_S = 0
    for s in range(K):
        A_rows += [r] * (m + 1)
        A_cols += n_idx[:, s].tolist() + [s]
        A_vals += [1.0] * m + [-float(sizes[s])]
        lo.append(0.0); hi.append(0.0); r += 1
    # n_{i,S} − cap b_S ≤ 0 (only where cap > 0 and the bound can bind; cap = 0 ⇒ n = 0 by bounds)
    ii, ss = np.nonzero(caps > 0)
    bind = caps[ii, ss] * (n // sizes[ss]) > 0
    ii, ss = ii[bind], ss[bind]
    k = len(ii)
    A_rows += np.repeat(np.arange(r, r + k), 2).tolist()
    A_cols += np.stack([n_idx[ii, ss], ss], axis=1).ravel().tolist()
    A_vals += np.stack([np.ones(k), -caps[ii, ss].astype(float)], axis=1).ravel().tolist()
    lo += [-np.inf] * k; hi += [0.0] * k; r += k
    # the heuristic's loss as an upper bound
    A_rows += [r] * K
    A_cols += list(range(K))
    A_vals += c[:K].tolist()
    lo.append(-np.inf); hi.append(float(ub)); r += 1

    A = sparse.csr_matrix((A_vals, (A_rows, A_cols)), shape=(r, nv))
    ub_var = np.empty(nv)
    ub_var[:K] = n // sizes
    ub_var[K:] = np.where(caps > 0, op[:, None], 0).ravel()
    integrality = np.zeros(nv)
    integrality[:K] = 1
    t1 = time.perf_counter()
    res = milp(c, integrality=integrality, bounds=Bounds(np.zeros(nv), ub_var),
               constraints=LinearConstraint(A, lo, hi),
               options={"time_limit": float(time_limit), "mip_rel_gap": 0.0, "presolve": False})
    t_milp = time.perf_counter() - t1
    info = {"M": M, "M_prime": Mp, "n_sizes": K, "n_values": m, "n_variables": nv, "n_integer": K,
            "n_constraints": r, "solver": "HiGHS (scipy.optimize.milp)", "status": int(res.status),
            "message": str(res.message), "time_limit": float(time_limit), "milp_seconds": t_milp,
            "heuristic_seconds": t_heur, "heuristic_loss": ub}
    gap = getattr(res, "mip_gap", None)
    info["mip_gap"] = None if gap is None or not np.isfinite(gap) else float(gap)
    dual = getattr(res, "mip_dual_bound", None)
    info["lower_bound"] = None if dual is None or not np.isfinite(dual) else float(dual)
    proven = res.status == 0

    classes = None
    if res.x is not None:
        b = np.rint(res.x[:K]).astype(np.int64)
        nm = _integer_split(op, caps, sizes, b)
        if nm is not None:
            cand = []
            for s in np.flatnonzero(b > 0).tolist():
                nn = np.zeros(len(o_full), dtype=np.int64)
                nn[present] = nm[:, s]
                cand.append(SizeClass(int(sizes[s]), int(b[s]), nn))
            classes = cand
    if classes is None or classes_loss(classes) > ub:   # no incumbent (time limit) — keep the heuristic's
        info["returned"] = "heuristic (multi-size) solution"
        proven = proven and classes is not None and classes_loss(classes) == ub
        classes = upper_bound
    else:
        info["returned"] = "MILP solution"
    info["loss"] = classes_loss(classes)
    if proven:
        info["mip_gap"] = 0.0
    return classes, bool(proven), info


def optimal_bucketing(o, fprime, max_bucket: int = 50, time_limit: float = 60.0) -> BucketSetting:
    """The exact multi-size setting by MILP (HiGHS) → :class:`BucketSetting` with ``method="optimal"``;
    ``proven_optimal`` is False (and ``info`` has the gap) when the time limit stopped the solver."""
    classes, proven, info = optimal_classes(o, fprime, max_bucket, time_limit)
    return make_setting(classes, len(np.asarray(o)), "optimal", proven, info)


__all__ = ["optimal_bucketing", "optimal_classes"]

"""The "histogram" release family (SPEC §5): DPCube, the cell histogram and the baselines.

Files:

* ``cells.parquet`` — one int column per dimension (cell index) + ``count`` (the noisy cell
  histogram; all m cells when dense, the cells ≥ the threshold when sparse; empty when the
  mechanism releases no cell level);
* ``partitions.parquet`` — ``pid``, ``<dim>_lo``, ``<dim>_hi`` (inclusive cell indices),
  ``count`` (noisy partition counts; empty for the cell histogram).

Certificate: ``epsilon``, ``epsilon_cells`` (α1), ``epsilon_partitions`` (α2),
``epsilon_other`` (tree structure / inner levels of a baseline; 0 for DPCube and cells),
``sampler``, ``bins``, ``shape``, ``storage``, ``ledger`` (every ε spent and on what).

Estimators (``answer(workload, estimator=…)``): ``"cells"`` (the noisy cells as they are),
``"uniform"`` (each partition's count spread evenly over its cells), ``"ls"`` (weighted least
squares over both histograms, weights = inverse noise variances; Xiao et al.'s H⁺ is the
α1 = α2 case), ``"ls-eb"`` (the same least squares plus the partitions' uniformity as a
prior: penalty Σ(x_c − x̄_p)²/τ_p with τ_p the within-partition variance of the noisy cells
beyond the noise variance, an empirical-Bayes estimate — see docs/dpcube.md). Partitions are disjoint, so the least-squares problem splits by partition
and has a closed form: every cell of partition p moves by the same
δ_p = (y_p − Σ_{c∈p} y_c)·v1/(v2 + n_p·v1). Range queries are answered for the whole
workload from one summed-area table of the estimated cells (2^d look-ups per box).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from ..errors import QueryError, ReleaseError, SchemaError
from ..queries.model import _is_number, _normalise
from .base import Release, VerifyReport, register_family

ESTIMATORS = ("cells", "uniform", "ls", "ls-eb")
_TOL = 1e-9


@register_family("histogram")
class HistogramRelease(Release):
    # ------------------------------------------------------------- building
    @classmethod
    def build(cls, spec, table, budget, epsilons, cells=None, partitions=None, estimator="cells", extra=None):
        dims = list(spec.dims)
        shape = spec.shape
        eps_c, eps_p = float(epsilons[0]), float(epsilons[1])
        storage = (extra or {}).get("storage", "dense")
        if cells is None:
            cell_cols = {d: np.zeros(0, np.int32) for d in dims}
            cell_counts = np.zeros(0, np.int64)
        elif isinstance(cells, tuple):
            idx, cell_counts = cells
            cell_cols = dict(zip(dims, (np.asarray(a, np.int32) for a in np.unravel_index(idx, shape))))
        else:
            arr = np.asarray(cells)
            grids = np.indices(shape).reshape(len(shape), -1)
            cell_cols = {d: grids[i].astype(np.int32) for i, d in enumerate(dims)}
            cell_counts = arr.reshape(-1)
        cells_t = pa.table({**{d: pa.array(v) for d, v in cell_cols.items()}, "count": pa.array(cell_counts)})
        if partitions is None:
            lo = hi = np.zeros((0, len(dims)), np.int64)
            pc = np.zeros(0, np.int64)
        else:
            lo, hi, pc = partitions
        pcols: dict[str, Any] = {"pid": pa.array(np.arange(len(lo), dtype=np.int64))}
        for i, d in enumerate(dims):
            pcols[f"{d}_lo"] = pa.array(np.asarray(lo[:, i], np.int32))
            pcols[f"{d}_hi"] = pa.array(np.asarray(hi[:, i], np.int32))
        pcols["count"] = pa.array(np.asarray(pc))
        cert = {
            "epsilon": budget.total,
            "epsilon_cells": eps_c,
            "epsilon_partitions": eps_p,
            "epsilon_other": budget.total - eps_c - eps_p,
            "sampler": _sampler(),
            "bins": spec.bins,
            "dims": dims,
            "shape": list(shape),
            "storage": storage,
            "estimator": estimator,
            "n_cells": spec.n_cells,
            "n_partitions": int(len(lo)),
            "ledger": budget.to_json(),
        }
        cert.update({k: v for k, v in (extra or {}).items() if k != "storage"})
        manifest = {
            "schema": {"quasi": dims, "sensitive": [],
                       "domains": {d: list(lab) for d, lab in zip(dims, spec.labels)},
                       "numeric": {d: (None if nv is None else list(nv)) for d, nv in zip(dims, spec.numeric)}},
            "n_input": table.n_rows,
            "n_published": table.n_rows,
            "dropped": 0,
            "certificate": cert,
        }
        return cls(manifest, {"cells": cells_t, "partitions": pa.table(pcols)})

    # --------------------------------------------------------------- access
    @property
    def dims(self) -> list[str]:
        return list(self.certificate["dims"])

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(int(s) for s in self.certificate["shape"])

    def cell_index(self) -> tuple[list[np.ndarray], np.ndarray]:
        t = self.tables["cells"]
        idx = [t.column(d).to_numpy().astype(np.int64) for d in self.dims]
        return idx, t.column("count").to_numpy().astype(np.float64)

    def partition_boxes(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        t = self.tables["partitions"]
        lo = np.stack([t.column(f"{d}_lo").to_numpy().astype(np.int64) for d in self.dims], axis=1) if t.num_rows else np.zeros((0, len(self.dims)), np.int64)
        hi = np.stack([t.column(f"{d}_hi").to_numpy().astype(np.int64) for d in self.dims], axis=1) if t.num_rows else np.zeros((0, len(self.dims)), np.int64)
        return lo, hi, t.column("count").to_numpy().astype(np.float64)

    def noisy_cells(self) -> np.ndarray:
        """The released cell histogram as a dense float array (zeros where not released)."""
        from ..mechanisms.histogram.cube import DENSE_MAX_CELLS

        if int(np.prod(self.shape, dtype=np.int64)) > DENSE_MAX_CELLS:
            raise ReleaseError("this cube is too large for a dense array; answer queries instead")
        idx, cnt = self.cell_index()
        if not len(cnt):
            raise ReleaseError("this release has no cell histogram (estimator 'cells'/'ls' unavailable); use 'uniform'")
        out = np.zeros(self.shape, np.float64)
        out[tuple(idx)] = cnt
        return out

    def estimate_cells(self, estimator: str | None = None) -> np.ndarray:
        """Estimated count of every cell (dense float array) under ``estimator``."""
        from ..mechanisms.histogram.cube import paint
        from ..mechanisms.noise import discrete_laplace_variance

        est = estimator or self.certificate.get("estimator", "cells")
        cache = self.__dict__.setdefault("_est_cache", {})
        if est in cache:
            return cache[est]
        if est not in ESTIMATORS:
            raise QueryError(f"unknown estimator {est!r}; choose one of {list(ESTIMATORS)}")
        if est == "cells":
            out = self.noisy_cells()
        else:
            lo, hi, yp = self.partition_boxes()
            if not len(yp):
                raise ReleaseError(f"this release has no partitions; estimator {est!r} needs them (use 'cells')")
            n_p = np.prod(hi - lo + 1, axis=1).astype(np.float64)
            if est == "uniform":
                out = paint(self.shape, lo, hi, yp / n_p, dtype=np.float64)
            else:
                y = self.noisy_cells()
                pid = paint(self.shape, lo, hi)
                v1 = discrete_laplace_variance(self.certificate["epsilon_cells"])
                v2 = discrete_laplace_variance(self.certificate["epsilon_partitions"])
                sums = np.bincount(pid.ravel(), weights=y.ravel(), minlength=len(yp))
                delta = (yp - sums) * v1 / (v2 + n_p * v1)
                out = y + delta[pid]
                if est == "ls-eb":
                    # same partition totals; deviations from the partition mean shrunk by
                    # τ_p/(τ_p + v1), τ_p = max(0, within-partition variance of y − v1)
                    mean_y = sums / n_p
                    var_y = np.bincount(pid.ravel(), weights=(y * y).ravel(), minlength=len(yp)) / n_p - mean_y**2
                    tau = np.maximum(var_y - v1, 0.0)
                    shrink = tau / (tau + v1)
                    total = sums + n_p * delta
                    out = (total / n_p)[pid] + (y - mean_y[pid]) * shrink[pid]
        cache[est] = out
        return out

    # ------------------------------------------------------------ answering
    def answer(self, workload, estimator: str | None = None) -> np.ndarray:
        from ..queries import as_workload

        wl = as_workload(workload)
        if self.certificate.get("storage") == "sparse":
            return self._answer_sparse(wl, estimator)
        lo, hi, owner = self.query_boxes(wl)
        return self.answer_boxes(lo, hi, estimator, owner, len(wl))

    def answer_boxes(self, lo, hi, estimator=None, owner=None, n_queries=None) -> np.ndarray:
        """Sums of the estimated cells over boxes (inclusive cell indices, shape (B, d)).

        With ``owner`` (query number of each box) the box sums are added per query.
        """
        from ..mechanisms.histogram.cube import box_sums, summed_area

        cache = self.__dict__.setdefault("_sat_cache", {})
        est = estimator or self.certificate.get("estimator", "cells")
        if est not in cache:
            cache[est] = summed_area(self.estimate_cells(est))
        sums = box_sums(cache[est], lo, hi) if len(lo) else np.zeros(0)
        if owner is None:
            return sums
        return np.bincount(owner, weights=sums, minlength=n_queries).astype(np.float64)

    def query_boxes(self, wl) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Translate queries into boxes on the cube: (lo, hi, owner query index).

        A BETWEEN / = predicate is one cell range; an IN on a non-contiguous set becomes
        several ranges (the query is the sum of the boxes of their product).
        """
        dims, shape = self.dims, self.shape
        pos = {d: i for i, d in enumerate(dims)}
        labels = [self.domains[d] for d in dims]
        lookups = [{lab: i for i, lab in enumerate(lab_)} for lab_ in labels]
        numeric = self.numeric
        nums = [numeric.get(d) for d in dims]
        sorted_num = [nv is not None and bool(np.all(np.diff(nv) > 0)) for nv in nums]
        Q, D = len(wl), len(dims)
        lo = np.zeros((Q, D), np.int64)
        hi = np.tile(np.asarray(shape, np.int64) - 1, (Q, 1))
        empty = np.zeros(Q, bool)
        multi: dict[int, dict[int, list[tuple[int, int]]]] = {}
        # numeric BETWEENs are collected and located with one searchsorted per dimension
        num_q: list[list[int]] = [[] for _ in dims]
        num_lo: list[list[float]] = [[] for _ in dims]
        num_hi: list[list[float]] = [[] for _ in dims]
        for qi, q in enumerate(wl):
            for p in q.predicates:
                j = pos.get(p.column)
                if j is None:
                    raise QueryError(f"{p.column!r} is not a dimension of this histogram; its dimensions are {dims}")
                r = None
                if p.kind == "between":
                    if not p.closed_range:
                        pass  # open or one-sided range: the general mask path below
                    elif sorted_num[j] and _is_number(p.low) and _is_number(p.high):
                        num_q[j].append(qi)
                        num_lo[j].append(float(p.low))
                        num_hi[j].append(float(p.high))
                        continue
                    else:
                        a, b = lookups[j].get(_normalise(p.low)), lookups[j].get(_normalise(p.high))
                        if a is not None and b is not None:
                            r = (min(a, b), max(a, b))
                elif p.kind == "eq" and len(p.values) == 1:
                    a = lookups[j].get(_normalise(p.values[0]))
                    if a is not None:
                        r = (a, a)
                if r is None:  # general path: the predicate's mask over the domain → runs
                    runs = _runs(p.mask(labels[j], nums[j]))
                    if len(runs) == 1:
                        r = runs[0]
                    elif not runs:
                        r = (1, 0)
                    else:
                        multi.setdefault(qi, {})[j] = runs
                        continue
                lo[qi, j] = max(lo[qi, j], r[0])
                hi[qi, j] = min(hi[qi, j], r[1])
        for j in range(D):
            if num_q[j]:
                qs = np.asarray(num_q[j], np.int64)
                a = np.searchsorted(nums[j], np.asarray(num_lo[j]), "left")
                b = np.searchsorted(nums[j], np.asarray(num_hi[j]), "right") - 1
                lo[qs, j] = np.maximum(lo[qs, j], a)
                hi[qs, j] = np.minimum(hi[qs, j], b)
        empty |= np.any(lo > hi, axis=1)
        keep = ~empty
        if multi:
            keep[list(multi)] = False
        boxes_lo, boxes_hi, owner = [lo[keep]], [hi[keep]], [np.flatnonzero(keep)]
        for qi, per_dim in multi.items():
            if empty[qi]:
                continue
            import itertools

            choices = [per_dim.get(j, [(int(lo[qi, j]), int(hi[qi, j]))]) for j in range(D)]
            for combo in itertools.product(*choices):
                a = np.array([c[0] for c in combo])
                b = np.array([c[1] for c in combo])
                a, b = np.maximum(a, lo[qi]), np.minimum(b, hi[qi])
                if np.all(a <= b):
                    boxes_lo.append(a[None])
                    boxes_hi.append(b[None])
                    owner.append(np.array([qi]))
        return np.concatenate(boxes_lo), np.concatenate(boxes_hi), np.concatenate(owner).astype(np.int64)

    def _answer_sparse(self, wl, estimator):
        from ..queries import CountIndex

        if estimator not in (None, "cells"):
            raise QueryError("a sparse cell histogram is answered with the 'cells' estimator only")
        _, masks = self.resolve(wl)
        for m in masks:
            for c in m:
                if c not in self.dims:
                    raise QueryError(f"{c!r} is not a dimension of this histogram; its dimensions are {self.dims}")
        idx, cnt = self.cell_index()
        index = CountIndex(dict(zip(self.dims, idx)), dict(zip(self.dims, self.shape)), cnt[:, None])
        return index.sums(masks)[:, 0]

    # --------------------------------------------------------------- verify
    def _verify(self, rep: VerifyReport, table) -> None:
        from ..mechanisms.histogram.cube import DENSE_MAX_CELLS, cover_counts, cube_codes
        from ..mechanisms.noise import HARDENED_SAMPLERS, Budget

        c = self.certificate
        for k in ("epsilon", "epsilon_cells", "epsilon_partitions", "sampler", "bins", "dims", "shape", "ledger"):
            if not rep.check(k in c, f"certificate has {k!r}", f"certificate lacks {k!r}"):
                return
        eps, e1, e2, eo = (float(c["epsilon"]), float(c["epsilon_cells"]), float(c["epsilon_partitions"]),
                           float(c.get("epsilon_other", 0.0)))
        rep.check(eps > 0 and e1 >= 0 and e2 >= 0 and eo >= -_TOL * eps, "budgets are non-negative, ε > 0",
                  f"bad budgets: ε={eps}, α1={e1}, α2={e2}, other={eo}")
        rep.check(abs(e1 + e2 + eo - eps) <= _TOL * max(eps, 1), "α1 + α2 (+ structure) = α",
                  f"epsilon_cells {e1} + epsilon_partitions {e2} + epsilon_other {eo} != epsilon {eps}")
        if self.manifest.get("mechanism") == "dpcube":
            rep.check(abs(e1 + e2 - eps) <= _TOL * max(eps, 1) and e1 > 0 and e2 > 0, "DPCube: α1 + α2 = α, both > 0",
                      f"DPCube certificate: α1 {e1} + α2 {e2} != α {eps}")
        led = Budget.total_of(c["ledger"])
        rep.check(abs(led - eps) <= _TOL * max(eps, 1), "ledger adds up to ε (sequential composition)",
                  f"the ledger spends {led}, the certificate says ε = {eps}")
        rep.check(c["sampler"] in HARDENED_SAMPLERS, "noise sampler is hardened (discrete Laplace)",
                  f"sampler {c['sampler']!r} is not one of the hardened samplers {list(HARDENED_SAMPLERS)}")
        dims, shape = list(c["dims"]), tuple(int(s) for s in c["shape"])
        rep.check(list(self.domains) == dims and tuple(len(self.domains[d]) for d in dims) == shape,
                  "shape matches the published domains", f"shape {shape} does not match the domains of {dims}")
        m = int(np.prod(shape, dtype=np.int64))
        # cells
        ct = self.tables.get("cells")
        pt = self.tables.get("partitions")
        if not rep.check(ct is not None and pt is not None, "cells.parquet and partitions.parquet present",
                         "cells.parquet or partitions.parquet is missing"):
            return
        if not rep.check(all(d in ct.column_names for d in dims) and "count" in ct.column_names,
                         "cells.parquet has a column per dimension and 'count'", "cells.parquet lacks columns"):
            return
        idx, _ = self.cell_index()
        in_range = all(len(i) == 0 or (i.min() >= 0 and i.max() < s) for i, s in zip(idx, shape))
        rep.check(in_range, "cell indices within the cube", "cells.parquet has cell indices outside the cube")
        if e1 > 0 and in_range:
            lin = np.ravel_multi_index(idx, shape) if len(idx[0]) else np.zeros(0, np.int64)
            rep.check(len(np.unique(lin)) == len(lin), "each cell released once", "cells.parquet repeats cells")
            if c.get("storage", "dense") == "dense":
                rep.check(len(lin) == m, "dense storage: every cell released (no cell may be left out)",
                          f"cells.parquet has {len(lin)} rows, the cube has {m} cells")
        elif e1 == 0:
            rep.check(ct.num_rows == 0, "no cell budget, no cells", "cells released without a cell budget")
        # partitions
        lo, hi, _ = self.partition_boxes()
        if e2 > 0:
            ok = rep.check(len(lo) > 0 and bool(np.all(lo <= hi)) and bool(np.all(lo >= 0)) and bool(np.all(hi < np.asarray(shape))),
                           "partition boxes are well-formed and inside the cube", "partitions.parquet has malformed or out-of-range boxes")
            if ok and m <= DENSE_MAX_CELLS:
                cov = cover_counts(shape, lo, hi)
                rep.check(bool(np.all(cov == 1)), "partitions tile the cube (disjoint and covering)",
                          f"partitions do not tile the cube: {int(np.sum(cov == 0))} cells uncovered, "
                          f"{int(np.sum(cov > 1))} covered more than once")
        else:
            rep.check(len(lo) == 0, "no partition budget, no partitions", "partitions released without a partition budget")
        rep.facts.update({"epsilon": eps, "epsilon_cells": e1, "epsilon_partitions": e2, "n_cells": m,
                          "n_partitions": int(len(lo)), "sampler": c["sampler"]})
        if table is not None:
            try:
                binned = {d: b for d, b in c["bins"].items()
                          if b and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in b)}
                spec, _ = cube_codes(table, dims, binned)
            except SchemaError as e:
                rep.check(False, "source table has the dimensions and covers the bins", str(e))
                return
            rep.check(spec.shape == shape, "cell domain sizes match the source table",
                      f"the source table gives a cube of shape {spec.shape}, the release has {shape}")
            rep.check([list(x) for x in spec.labels] == [list(self.domains[d]) for d in dims],
                      "cell labels match the source table", "the source table's cell labels differ from the release's")


def _runs(mask: np.ndarray) -> list[tuple[int, int]]:
    m = np.asarray(mask, bool).astype(np.int8)
    d = np.diff(np.concatenate([[0], m, [0]]))
    starts, ends = np.flatnonzero(d == 1), np.flatnonzero(d == -1) - 1
    return list(zip(starts.tolist(), ends.tolist()))


def _sampler() -> str:
    from ..mechanisms.noise import SAMPLER

    return SAMPLER


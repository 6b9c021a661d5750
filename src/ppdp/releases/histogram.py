"""The "histogram" release family (SPEC §5): DPCube, the cell histogram and the baselines.

Files:

* ``cells.parquet`` — one int column per dimension (cell index) + ``count`` (the noisy cell
  histogram; all m cells when dense, the cells ≥ the threshold when sparse; empty when the
  mechanism releases no cell level);
* ``partitions.parquet`` — ``pid``, ``<dim>_lo``, ``<dim>_hi`` (inclusive cell indices),
  ``count`` (noisy partition counts; empty for the cell histogram);
* ``marginals.parquet`` (the mechanisms that measure marginals: ``marginals``, ``dp`` when it
  chose them) — ``set`` (the measured marginal's number, in the order of
  :func:`ppdp.claims.dp.marginal_sets`), ``cell`` (the cell's index in C order within that
  marginal), ``count`` (its noisy count, as measured): the measurements the released cells are
  inferred from (post-processing, no further budget); the model-free intervals read them.

No exact row count: ``n_input`` and ``n_published`` are the noisy total of the released counts
(:func:`ppdp.claims.dp.published_total`), re-derived by ``verify`` from the files; the family
says so (:attr:`HistogramRelease.n_is_estimate`) and the common verify then does not compare
them with the source table's row count (the goodness-of-fit test of the claim does better).

Certificate: the ε-DP claim (:class:`~ppdp.claims.dp.DPClaim`: ``model``, ``epsilon``,
``epsilon_cells`` (α1), ``epsilon_partitions`` (α2), ``epsilon_other`` (tree structure of a
baseline), ``sampler``, ``ledger``, and ``depth``/``levels``/``epsilon_per_level`` for the tree
mechanisms) plus the public cube model: ``bins``, ``dims``, ``shape``, ``storage``,
``n_cells``, ``n_partitions`` (and descriptive extras of a mechanism, e.g. DPCube's
``split_rule``).

The release is data and its public model only: the estimators that turn it into answers
(cells, uniform, least squares) are objects of :mod:`ppdp.estimators.histogram`, used through
``release.answer(workload, estimator=…)``. Queries become boxes on the cube
(:meth:`HistogramRelease.query_boxes`), answered from one summed-area table of the estimated
cells (2^d look-ups per box).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from ..claims import claim_of
from ..claims.dp import marginal_sets, published_total
from ..errors import QueryError, ReleaseError
from ..kernels import grid
from ..kernels.grid import DENSE_MAX_CELLS, cover_counts
from ..queries.model import check_bins, integer_bounds, is_number, normalise_label
from ..schema import bin_edges
from ..table import MISSING_LABEL, domain_numeric_values
from .base import Release, VerifyReport, register_family


@register_family("histogram")
class HistogramRelease(Release):
    """A noisy data cube: its public model (``dims``, ``shape``, ``bins``, the released cells
    and partitions) and the box form of queries; answering goes through the estimators."""

    #: ``n_input`` / ``n_published`` are an ε-DP estimate, not the exact number of rows
    n_is_estimate = True
    FILES = {"cells": ("{quasi}", "count"), "partitions": ("pid", "{quasi}_lo", "{quasi}_hi", "count"),
             "marginals": ("set", "cell", "count")}

    # ------------------------------------------------------------- building
    @classmethod
    def build(cls, spec, claim, cells=None, partitions=None, extra=None, marginals=None):
        """The release of a cube ``spec`` with the claim ``claim`` (a DPClaim): ``cells`` a dense
        array or (linear indices, counts) when sparse, ``partitions`` (lo, hi, counts),
        ``marginals`` the measured noisy marginals (arrays in the order of
        :func:`ppdp.claims.dp.marginal_sets`)."""
        dims = list(spec.dims)
        shape = spec.shape
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
        cert = {**claim.to_certificate(), "bins": spec.bins, "dims": dims, "shape": list(shape), "storage": storage,
                "n_cells": spec.n_cells, "n_partitions": int(len(lo))}
        cert.update({k: v for k, v in (extra or {}).items() if k != "storage"})
        n_hat = published_total(np.asarray(cell_counts), np.asarray(pc))  # never the exact N
        manifest = {
            "schema": {"quasi": dims, "sensitive": [],
                       "domains": {d: list(lab) for d, lab in zip(dims, spec.labels)},
                       "numeric": {d: (None if nv is None else list(nv)) for d, nv in zip(dims, spec.numeric)}},
            "n_input": n_hat,
            "n_published": n_hat,
            "dropped": 0,
            "certificate": cert,
        }
        tables = {"cells": cells_t, "partitions": pa.table(pcols)}
        if marginals is not None:
            sets, cell, cnt = [], [], []
            for i, m in enumerate(marginals):
                m = np.asarray(m).ravel()
                sets.append(np.full(m.size, i, np.int32))
                cell.append(np.arange(m.size, dtype=np.int64))
                cnt.append(m.astype(np.int64))
            tables["marginals"] = pa.table({"set": pa.array(np.concatenate(sets) if sets else np.zeros(0, np.int32)),
                                            "cell": pa.array(np.concatenate(cell) if cell else np.zeros(0, np.int64)),
                                            "count": pa.array(np.concatenate(cnt) if cnt else np.zeros(0, np.int64))})
        return cls(manifest, tables)

    # --------------------------------------------------------------- access
    @property
    def dims(self) -> list[str]:
        return list(self.certificate["dims"])

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(int(s) for s in self.certificate["shape"])

    @property
    def bins(self) -> dict:
        """Dimension → its bin edges (binned numeric) or its labels (as in the source table)."""
        return dict(self.certificate["bins"])

    def cell_index(self) -> tuple[list[np.ndarray], np.ndarray]:
        t = self.tables["cells"]
        idx = [t.column(d).to_numpy().astype(np.int64) for d in self.dims]
        return idx, t.column("count").to_numpy().astype(np.float64)

    def partition_boxes(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        t = self.tables["partitions"]
        lo = np.stack([t.column(f"{d}_lo").to_numpy().astype(np.int64) for d in self.dims], axis=1) if t.num_rows else np.zeros((0, len(self.dims)), np.int64)
        hi = np.stack([t.column(f"{d}_hi").to_numpy().astype(np.int64) for d in self.dims], axis=1) if t.num_rows else np.zeros((0, len(self.dims)), np.int64)
        return lo, hi, t.column("count").to_numpy().astype(np.float64)

    @property
    def storage(self) -> str:
        return self.certificate.get("storage", "dense")

    @property
    def has_cells(self) -> bool:
        """True when the release holds a cell histogram (a sparse one may hold no row)."""
        return self.tables["cells"].num_rows > 0 or self.storage == "sparse"

    @property
    def has_partitions(self) -> bool:
        return self.tables["partitions"].num_rows > 0

    def marginal_sets(self) -> list[tuple[int, ...]]:
        """The dimension sets of the measured marginals (empty when the mechanism measured none)."""
        mech = self.manifest.get("mechanism")
        params = self.manifest.get("params") or {}
        way = params.get("way") if mech == "marginals" else (self.certificate.get("choice") or {}).get("way")
        if way is None or (mech == "dp" and (self.certificate.get("choice") or {}).get("algorithm") != "marginals"):
            return []
        return marginal_sets(len(self.shape), int(way))

    def measured_marginals(self) -> list[tuple[tuple[int, ...], np.ndarray]] | None:
        """The noisy marginals as measured: [(dimension set, integer array over those dimensions)],
        or None when the release holds none (a mechanism that measures no marginals, or a release
        written before they were shipped)."""
        t = self.tables.get("marginals")
        sets = self.marginal_sets()
        if t is None or not sets:
            return None
        sid = t.column("set").to_numpy().astype(np.int64)
        cell = t.column("cell").to_numpy().astype(np.int64)
        cnt = t.column("count").to_numpy().astype(np.float64)
        out = []
        for i, m in enumerate(sets):
            shape = tuple(self.shape[j] for j in m)
            arr = np.zeros(int(np.prod(shape, dtype=np.int64)), np.float64)
            sel = sid == i
            if int(sel.sum()) != arr.size:
                raise ReleaseError(f"marginals.parquet holds {int(sel.sum())} cells of marginal {i}, its shape {shape} "
                                   f"has {arr.size}")
            arr[cell[sel]] = cnt[sel]
            out.append((m, arr.reshape(shape)))
        return out

    def noisy_cells(self) -> np.ndarray:
        """The released cell histogram as a dense float array (zeros where not released)."""
        if int(np.prod(self.shape, dtype=np.int64)) > DENSE_MAX_CELLS:
            raise ReleaseError("this cube is too large for a dense array; answer queries instead")
        idx, cnt = self.cell_index()
        if not len(cnt):
            raise ReleaseError("this release has no cell histogram; use an estimator on its partitions ('uniform')")
        out = np.zeros(self.shape, np.float64)
        out[tuple(idx)] = cnt
        return out

    # ------------------------------------------------------------ queries as boxes
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
        nums: list[Any] = [numeric.get(d) for d in dims]  # value arrays (None: not numeric)
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
        a: Any; b: Any  # reused below: label positions, then cell-index arrays
        edges = [bin_edges(labels[j]) for j in range(D)]
        for qi, q in enumerate(wl):
            for p in q.predicates:
                j = pos.get(p.column)
                if j is None:
                    raise QueryError(f"{p.column!r} is not a dimension of this histogram; its dimensions are {dims}")
                r = None
                if p.kind == "between":
                    ej = edges[j]
                    if ej is not None:  # unit bins of an integer column: the bins the bounds name
                        p = integer_bounds(p, ej)
                    check_bins(p, edges[j])  # a numeric range must not cut a bin
                    if not p.closed_range:
                        pass  # open or one-sided range: the general mask path below
                    elif sorted_num[j] and is_number(p.low) and is_number(p.high):
                        num_q[j].append(qi)
                        num_lo[j].append(float(p.low))
                        num_hi[j].append(float(p.high))
                        continue
                    else:
                        a, b = lookups[j].get(normalise_label(p.low)), lookups[j].get(normalise_label(p.high))
                        if a is not None and b is not None:
                            r = (min(a, b), max(a, b))
                elif p.kind == "eq" and len(p.values) == 1:
                    a = lookups[j].get(normalise_label(p.values[0]))
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

    # --------------------------------------------------------------- verify
    def _verify(self, rep: VerifyReport, table) -> None:
        """File format and the cube model; the ε-DP claim is re-derived by its claim object."""
        c = self.certificate
        for k in ("dims", "shape", "bins"):
            if not rep.check(k in c, f"certificate has {k!r}", f"certificate lacks {k!r}"):
                return
        dims, shape = list(c["dims"]), tuple(int(s) for s in c["shape"])
        rep.check(list(self.domains) == dims and tuple(len(self.domains[d]) for d in dims) == shape,
                  "shape matches the published domains", f"shape {shape} does not match the domains of {dims}")
        m = int(np.prod(shape, dtype=np.int64))
        ct = self.tables.get("cells")
        pt = self.tables.get("partitions")
        if not rep.check(ct is not None and pt is not None, "cells.parquet and partitions.parquet present",
                         "cells.parquet or partitions.parquet is missing"):
            return
        assert ct is not None and pt is not None
        extra_files = sorted(set(self.tables) - set(self.FILES))
        rep.check(not extra_files, "only the files the format defines (cells, partitions, marginals)",
                  f"the release holds files the histogram format does not define: {[f + '.parquet' for f in extra_files]}")
        cell_cols = [*dims, "count"]
        part_cols = ["pid", *(f"{d}_{e}" for d in dims for e in ("lo", "hi")), "count"]
        for name, t, want in (("cells", ct, cell_cols), ("partitions", pt, part_cols)):
            if not rep.check(set(t.column_names) >= set(want), f"{name}.parquet has the columns {want}",
                             f"{name}.parquet lacks columns {sorted(set(want) - set(t.column_names))}"):
                return
            rep.check(set(t.column_names) == set(want) and len(t.column_names) == len(want),
                      f"{name}.parquet has no other column",
                      f"{name}.parquet has columns the format does not define: {sorted(set(t.column_names) - set(want))}")
            kinds = {c: t.schema.field(c).type for c in want}
            bad = [c for c, ty in kinds.items() if not (pa.types.is_integer(ty) or (c == "count" and pa.types.is_floating(ty)))]
            if not rep.check(not bad, f"{name}.parquet columns are numbers (integer indices, numeric counts)",
                             f"{name}.parquet columns of the wrong type: {bad}"):
                return
        if pt.num_rows:
            pid = pt.column("pid").to_numpy(zero_copy_only=False)
            rep.check(bool(np.array_equal(pid, np.arange(pt.num_rows))), "partition ids are 0..P−1 in order",
                      "partitions.parquet's pid column is not 0..P−1 in order")
        seed = self.manifest.get("seed")
        seeded = seed is not None and seed != "os-entropy"
        rep.check(not (seeded and self.manifest.get("fit_for_publication") is True),
                  "a seeded release is not marked fit for publication",
                  f"the manifest carries a seed ({seed!r}) and says fit_for_publication: anyone with the seed can "
                  f"replay the noise")
        # cells
        idx, _ = self.cell_index()
        in_range = all(len(i) == 0 or (i.min() >= 0 and i.max() < s) for i, s in zip(idx, shape))
        rep.check(in_range, "cell indices within the cube", "cells.parquet has cell indices outside the cube")
        if in_range and ct.num_rows:
            lin = np.ravel_multi_index(idx, shape)
            rep.check(len(np.unique(lin)) == len(lin), "each cell released once", "cells.parquet repeats cells")
        # the measured marginals: one row per cell of each marginal the mechanism measured
        mt = self.tables.get("marginals")
        if mt is not None:
            sets = self.marginal_sets()
            n_want = sum(int(np.prod([shape[j] for j in m_], dtype=np.int64)) for m_ in sets)
            ok = rep.check(bool(sets) and set(mt.column_names) == {"set", "cell", "count"},
                           "marginals.parquet: the measured marginals of a mechanism that measures them",
                           "marginals.parquet in a release whose mechanism measured no marginals, or with other columns")
            if ok:
                try:
                    self.measured_marginals()
                    sid = mt.column("set").to_numpy()
                    key = sid.astype(np.int64) * (max(n_want, 1) + 1) + mt.column("cell").to_numpy().astype(np.int64)
                    good = mt.num_rows == n_want and len(np.unique(key)) == n_want
                except (ReleaseError, IndexError, ValueError):
                    good = False
                rep.check(good, f"marginals.parquet holds every cell of the {len(sets)} measured marginals once",
                          f"marginals.parquet does not hold every cell of the {len(sets)} measured marginals once "
                          f"({mt.num_rows} rows, {n_want} expected)")
        # partitions
        lo, hi, _ = self.partition_boxes()
        if len(lo):
            ok = rep.check(bool(np.all(lo <= hi)) and bool(np.all(lo >= 0)) and bool(np.all(hi < np.asarray(shape))),
                           "partition boxes are well-formed and inside the cube", "partitions.parquet has malformed or out-of-range boxes")
            if ok and m <= DENSE_MAX_CELLS:
                cov = cover_counts(shape, lo, hi)
                rep.check(bool(np.all(cov == 1)), "partitions tile the cube (disjoint and covering)",
                          f"partitions do not tile the cube: {int(np.sum(cov == 0))} cells uncovered, "
                          f"{int(np.sum(cov > 1))} covered more than once")
        rep.facts.update({"n_cells": m, "n_partitions": int(len(lo))})
        rep.check(c.get("n_cells") == m and c.get("n_partitions") == int(len(lo)),
                  "certificate n_cells / n_partitions match the files",
                  f"certificate n_cells {c.get('n_cells')} / n_partitions {c.get('n_partitions')}, the files give {m} / {len(lo)}")
        params = self.manifest.get("params", {})
        rep.check(list(params.get("dims") or []) == dims, "dimensions as requested (params.dims)",
                  f"the certificate's dims {dims} differ from params.dims {params.get('dims')}")
        asked = params.get("bins") or {}
        bins = c["bins"] if isinstance(c["bins"], dict) else {}
        wrong = [d for d, e in asked.items() if [float(x) for x in bins.get(d) or []] != [float(x) for x in e]]
        rep.check(not wrong, "bin edges as requested (params.bins)",
                  f"the certificate's bins of {wrong} differ from params.bins")
        unbinned = [d for d in dims if d not in asked and list(bins.get(d) or []) != list(self.domains.get(d, []))]
        rep.check(not unbinned, "value-by-value dimensions list their published labels as bins",
                  f"the certificate's bins of {unbinned} are not their published labels")
        given_num = self.schema.get("numeric") or {}
        wrong_num = []
        for d in dims:
            edges = asked.get(d)
            if edges and MISSING_LABEL in self.domains.get(d, []):
                want_num = None  # bins and the missing cell: no number for every cell
            else:
                want_num = ([float(x) for x in edges[:-1]] if edges else
                            (None if (nv := domain_numeric_values(self.domains.get(d, []))) is None else nv.tolist()))
            got = given_num.get(d)
            if (want_num is None) != (got is None) or (want_num is not None and got is not None and (
                    len(got) != len(want_num) or not np.allclose(np.asarray(got, float), want_num, rtol=0, atol=0))):
                wrong_num.append(d)
        rep.check(not wrong_num, "the numeric value of every cell follows from its label or bin",
                  f"schema.numeric of {wrong_num} does not follow from the published labels / bins")
        storage = "sparse" if m > grid.DENSE_MAX_CELLS else "dense"  # read at call time: the limit is a module setting
        rep.check(c.get("storage", "dense") == storage, f"{storage} storage for a cube of {m} cells",
                  f"storage {c.get('storage')!r} for a cube of {m} cells (expected {storage!r})")
        if "fanout" in params or "fanout" in c:
            rep.check(c.get("fanout") == params.get("fanout"), "tree fanout as requested (params.fanout)",
                      f"the certificate's fanout {c.get('fanout')!r} is not params.fanout {params.get('fanout')!r}")
        # the privacy claim: re-derived from params and checked against the files
        claim_of(self.manifest).check(self, rep, table)  # with the source: the goodness-of-fit test


def _runs(mask: np.ndarray) -> list[tuple[int, int]]:
    m = np.asarray(mask, bool).astype(np.int8)
    d = np.diff(np.concatenate([[0], m, [0]]))
    starts, ends = np.flatnonzero(d == 1), np.flatnonzero(d == -1) - 1
    return list(zip(starts.tolist(), ends.tolist()))


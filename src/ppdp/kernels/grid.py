"""The data cube (base cuboid) of a Table over chosen dimensions, box arithmetic on it, and
the data-independent trees over its cells.

A cube has one axis per dimension; a dimension's cells are declared labels
(``domains={"sex": ["Female", "Male"]}``, numeric labels used value by value) or explicit bins
(``bins={"age": [17, 20, 30, …]}``), so the cell domain is fixed in advance (public) instead
of read off the data: :func:`declared_domains` resolves the declaration (a bundled table's
documented schema included) and :func:`cube_codes` maps the rows onto it. A value outside the
declared labels or bins is an error, never dropped and never a new cell.

Storage rule: a cube of m ≤ ``DENSE_MAX_CELLS`` (2^24 ≈ 16.8 M) cells is a dense int64
array; beyond that only the non-empty cells are held (sparse: linear cell index → count).

Boxes are inclusive cell-index ranges ``lo[d] ≤ i_d ≤ hi[d]``; sums over many boxes come
from one summed-area table (prefix sums along every axis) by inclusion–exclusion over the
2^d corners, vectorised over all boxes.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from ..errors import PpdpError, SchemaError
from ..schema import label_numbers
from ..table import MISSING_LABEL, Binning, domain_numeric_values

DENSE_MAX_CELLS = 2**24


@dataclass(frozen=True)
class CubeSpec:
    """Dimensions, their cell labels, numeric value of each cell (or None) and the bins used."""

    dims: tuple[str, ...]
    labels: tuple[tuple[str, ...], ...]
    numeric: tuple[tuple[float, ...] | None, ...]
    bins: dict  # dim → list of edges (binned) or list of labels (as in the table)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(len(x) for x in self.labels)

    @property
    def n_cells(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def dense(self) -> bool:
        return self.n_cells <= DENSE_MAX_CELLS


def check_dims(dims) -> tuple[str, ...]:
    if isinstance(dims, str):
        dims = [dims]
    dims = tuple(str(d) for d in dims)
    if not dims:
        raise PpdpError("dims must name at least one column")
    if len(set(dims)) != len(dims):
        raise PpdpError(f"dims has repeated columns: {list(dims)}")
    return dims


def check_bins(bins, dims) -> dict:
    """Normalise ``bins`` to dim → tuple of float edges (validated)."""
    out = {}
    for d, edges in (bins or {}).items():
        if d not in dims:
            raise PpdpError(f"bins given for {d!r}, which is not one of the dims {list(dims)}")
        try:
            out[d] = [float(e) for e in edges]
        except (TypeError, ValueError):
            raise PpdpError(f"bins for {d!r} must be numbers, got {edges!r}") from None
        Binning(tuple(out[d]))  # validates (≥ 2 finite, strictly increasing)
    return out


def declared_domains(dims: Sequence[str], bins, domains) -> tuple[dict[str, list[str]], list[str]]:
    """The declared label domain of every dimension that ``domains`` covers and ``bins`` does
    not, and the dimensions declared by neither (their domain would have to be read off the
    rows). ``domains``: None, a mapping dimension → labels, or the name of a bundled table whose
    documented schema gives them (:func:`ppdp.datasets.public_domains`)."""
    from ..datasets import public_domains

    bins = bins or {}
    if domains is None:
        given: Mapping = {}
    elif isinstance(domains, str):
        doc = public_domains(domains)
        given = {d: doc[d] for d in dims if d in doc}
    else:
        given = domains
    out = {d: [str(x) for x in given[d]] for d in dims if d in given and d not in bins}
    # a binned dimension declared with its missing cell: its bins' labels and MISSING_LABEL
    out.update({d: [str(x) for x in given[d]] for d in dims if d in given and d in bins
                and list(given[d]) == [*Binning(tuple(float(e) for e in bins[d])).labels, MISSING_LABEL]})
    undeclared = [d for d in dims if d not in bins and d not in out]
    return out, undeclared


def cube_codes(table, dims: Sequence[str], bins: Mapping[str, Sequence[float]] | None = None,
               domains: Mapping[str, Sequence[str]] | None = None):
    """(CubeSpec, list of per-row cell index arrays) for ``table`` over ``dims``: a dimension's
    cells are its ``bins``, else its declared ``domains`` labels (rows holding another label are
    an error), else (only for callers that do not need a public domain) the table's domain."""
    if table.n_rows == 0:
        raise PpdpError("the input table is empty")
    known = set(table.column_names)
    for d in dims:
        if d not in known:
            raise SchemaError(f"unknown dimension {d!r}; the table has {sorted(known)}")
    labels: list = []
    numeric: list[tuple[float, ...] | None] = []
    used_bins: dict[str, list] = {}
    codes: list = []
    for d in dims:
        if bins and d in bins:
            nv = label_numbers(table.domain(d), table.numeric_values(d))
            if nv is None:
                raise SchemaError(f"bins given for {d!r}, but its values are not numeric (e.g. "
                                  f"{[x for x in table.domain(d) if x != MISSING_LABEL][:3]})")
            b = Binning(tuple(bins[d]))
            vals = nv[table.codes(d)]
            miss = np.isnan(vals)
            with_missing = domains is not None and d in domains and MISSING_LABEL in list(domains[d])
            c = np.zeros(len(vals), dtype=np.int64)
            if miss.any():
                if not with_missing:
                    raise SchemaError(f"column {d!r} has {int(miss.sum())} missing value(s), but its declared cells are "
                                      "its bins only: declare the missing cell (missing = \"category\" for the column, "
                                      "or --missing category) or leave those rows out (missing = \"drop\")")
                c[~miss] = b.codes(vals[~miss], d)
                c[miss] = len(b.labels)
            else:
                c[:] = b.codes(vals, d)
            codes.append(c)
            if with_missing:
                labels.append((*b.labels, MISSING_LABEL))
                numeric.append(None)
            else:
                labels.append(tuple(b.labels))
                numeric.append(tuple(float(e) for e in b.edges[:-1]))
            used_bins[d] = list(b.edges)
        elif domains and d in domains:
            declared = [str(x) for x in domains[d]]
            if len(set(declared)) != len(declared) or not declared:
                raise SchemaError(f"the declared domain of {d!r} must list distinct labels, got {declared[:5]}…")
            pos = {lab: i for i, lab in enumerate(declared)}
            remap = np.asarray([pos.get(lab, -1) for lab in table.domain(d)], dtype=np.int64)
            c = remap[table.codes(d)] if len(remap) else np.zeros(0, np.int64)
            if np.any(c < 0):
                bad = sorted({table.domain(d)[i] for i in np.unique(table.codes(d)[c < 0])})
                raise SchemaError(f"column {d!r}: {int(np.sum(c < 0))} row(s) hold value(s) outside its declared "
                                  f"domain, e.g. {bad[:3]}; add them to the domain or recode them")
            codes.append(c)
            labels.append(tuple(declared))
            nv = domain_numeric_values(declared)
            numeric.append(None if nv is None else tuple(float(v) for v in nv))
            used_bins[d] = list(declared)
        else:
            codes.append(table.codes(d).astype(np.int64))
            labels.append(tuple(table.domain(d)))
            nv = table.numeric_values(d)
            numeric.append(None if nv is None else tuple(float(v) for v in nv))
            used_bins[d] = list(table.domain(d))
    return CubeSpec(tuple(dims), tuple(labels), tuple(numeric), used_bins), [np.asarray(c, dtype=np.int64) for c in codes]


def linear_index(codes: Sequence[np.ndarray], shape: Sequence[int]) -> np.ndarray:
    return np.ravel_multi_index([np.asarray(c, dtype=np.int64) for c in codes], tuple(shape))


def dense_counts(codes: Sequence[np.ndarray], shape: Sequence[int], weights: np.ndarray | None = None) -> np.ndarray:
    """Dense int64 count array of the cube; ``weights``: rows each code row stands for (a table of
    distinct label combinations with their counts, as the Spark engine aggregates them)."""
    m = int(np.prod(shape, dtype=np.int64))
    if weights is None:
        return np.bincount(linear_index(codes, shape), minlength=m).astype(np.int64).reshape(tuple(shape))
    w = np.asarray(weights, dtype=np.int64)
    x = np.zeros(m, dtype=np.int64)
    np.add.at(x, linear_index(codes, shape), w)
    return x.reshape(tuple(shape))


def sparse_counts(codes: Sequence[np.ndarray], shape: Sequence[int],
                  weights: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(sorted linear indices of non-empty cells, their counts); ``weights`` as in :func:`dense_counts`."""
    if weights is None:
        idx, cnt = np.unique(linear_index(codes, shape), return_counts=True)
        return idx, cnt.astype(np.int64)
    idx, inv = np.unique(linear_index(codes, shape), return_inverse=True)
    cnt = np.bincount(inv.ravel(), weights=np.asarray(weights, dtype=np.float64), minlength=len(idx))
    keep = cnt > 0
    return idx[keep], np.rint(cnt[keep]).astype(np.int64)


# ---------------------------------------------------------------------------- boxes
def summed_area(a: np.ndarray) -> np.ndarray:
    """Prefix sums with a zero border: S[i1..id] = Σ a[:i1, …, :id] (float64)."""
    s = np.zeros(tuple(n + 1 for n in a.shape), dtype=np.float64)
    s[tuple(slice(1, None) for _ in a.shape)] = a
    for ax in range(a.ndim):
        np.cumsum(s, axis=ax, out=s)
    return s


def box_sums(sat: np.ndarray, lo: np.ndarray, hi: np.ndarray, lead: int = 0) -> np.ndarray:
    """Sums over boxes (rows of lo, hi: inclusive cell indices, shape (B, d)) by inclusion–exclusion;
    ``lead`` leading axes of ``sat`` are a stack of summed-area tables (out: those axes × B)."""
    lo = np.asarray(lo, dtype=np.int64)
    hi = np.asarray(hi, dtype=np.int64) + 1
    d = sat.ndim - lead
    out = np.zeros(sat.shape[:lead] + (len(lo),), dtype=np.float64)
    for corner in range(1 << d):
        idx: list[Any] = [slice(None)] * lead
        sign = 1
        for ax in range(d):
            if corner >> ax & 1:
                idx.append(lo[:, ax])
                sign = -sign
            else:
                idx.append(hi[:, ax])
        out += sign * sat[tuple(idx)]
    return out


def box_volumes(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    return np.prod(np.asarray(hi, dtype=np.int64) - np.asarray(lo, dtype=np.int64) + 1, axis=1)


def paint(shape: Sequence[int], lo: np.ndarray, hi: np.ndarray, values=None, dtype=np.int64) -> np.ndarray:
    """Array of ``shape`` with each box filled by ``values[b]`` (default: its box number).

    Cells covered by no box hold −1 (for box numbers) or 0.
    """
    out = np.full(tuple(shape), -1 if values is None else 0, dtype=dtype)
    for b in range(len(lo)):
        sl = tuple(slice(int(a), int(z) + 1) for a, z in zip(lo[b], hi[b]))
        out[sl] = b if values is None else values[b]
    return out


def cover_counts(shape: Sequence[int], lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """How many boxes cover each cell (a d-dimensional difference array, then prefix sums)."""
    diff = np.zeros(tuple(n + 1 for n in shape), dtype=np.int64)
    lo = np.asarray(lo, dtype=np.int64)
    hi = np.asarray(hi, dtype=np.int64) + 1
    d = len(shape)
    for corner in range(1 << d):
        idx, sign = [], 1
        for ax in range(d):
            if corner >> ax & 1:
                idx.append(hi[:, ax])
                sign = -sign
            else:
                idx.append(lo[:, ax])
        np.add.at(diff, tuple(idx), sign)
    for ax in range(d):
        np.cumsum(diff, axis=ax, out=diff)
    return diff[tuple(slice(0, n) for n in shape)]


# ---------------------------------------------------------------------------- trees
def tree_levels(shape, fanout: str = "quad") -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Data-independent tree down to single cells: per level (lo, hi, parent index).

    ``fanout="quad"``: every box is halved on every dimension with more than one cell at once
    (up to 2^d children: the quadtree of 2-D data, Cormode et al. 2012); ``"binary"``: a box
    is halved on its widest dimension only (ties → earlier), a binary kd-tree. Halves: the
    lower one gets ⌊ext/2⌋ cells.

    The tree depends only on the shape: the last few are kept (read-only arrays), so the
    claim's plan, the measurement and every bootstrap replay of a release build it once.
    """
    if fanout not in ("quad", "binary"):
        raise PpdpError(f"fanout must be 'quad' or 'binary', got {fanout!r}")
    return list(_tree_levels(tuple(int(n) for n in shape), fanout))


@functools.lru_cache(maxsize=4)
def _tree_levels(shape: tuple[int, ...], fanout: str) -> tuple[tuple[np.ndarray, np.ndarray, np.ndarray], ...]:
    levels = _build_tree_levels(shape, fanout)
    for arrays in levels:
        for a in arrays:
            a.setflags(write=False)
    return tuple(levels)


def _build_tree_levels(shape_t: tuple[int, ...], fanout: str) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    shape = np.asarray(shape_t, np.int64)
    D = len(shape)
    lo, hi, parent = np.zeros((1, D), np.int64), (shape - 1)[None, :], np.full(1, -1)
    levels = [(lo, hi, parent)]
    while True:
        ext = hi - lo + 1
        split = np.flatnonzero(ext.max(axis=1) > 1)
        if not len(split):
            return levels
        e = ext[split]
        if fanout == "quad":
            cut = e > 1
        else:
            cut = np.zeros_like(e, bool)
            cut[np.arange(len(split)), e.argmax(axis=1)] = True
        mid = lo[split] + e // 2 - 1  # last cell of the lower half
        new_lo, new_hi, new_parent = [], [], []
        for corner in range(1 << D):  # child = choice of lower/upper half per cut dimension
            upper = np.array([(corner >> ax) & 1 for ax in range(D)], bool)
            ok = np.all(cut | ~upper[None, :], axis=1)  # uncut dimensions only take "lower" (= whole)
            c_lo, c_hi = lo[split].copy(), hi[split].copy()
            for ax in range(D):
                sel = cut[:, ax]
                if upper[ax]:
                    c_lo[sel, ax] = mid[sel, ax] + 1
                else:
                    c_hi[sel, ax] = mid[sel, ax]
            new_lo.append(c_lo[ok])
            new_hi.append(c_hi[ok])
            new_parent.append(split[ok])
        lo, hi, parent = np.concatenate(new_lo), np.concatenate(new_hi), np.concatenate(new_parent)
        levels.append((lo, hi, parent))


def tree_counts(x: np.ndarray, levels: list[tuple[np.ndarray, np.ndarray, np.ndarray]]) -> list[np.ndarray]:
    """Exact (int64) counts of every node of ``levels`` (:func:`tree_levels`) over the integer
    cube ``x``: a single-cell node reads its cell, every other node sums its children's counts
    (bottom up, O(nodes); the same counts as :func:`box_counts` of each level's boxes)."""
    x = np.asarray(x)
    out: list[np.ndarray] = [np.empty(0, np.int64)] * len(levels)
    for lv in range(len(levels) - 1, -1, -1):
        lo, hi, _ = levels[lv]
        c = np.zeros(len(lo), np.int64)
        leaf = np.flatnonzero(np.all(lo == hi, axis=1))
        if len(leaf):
            c[leaf] = x[tuple(lo[leaf].T)]
        if lv + 1 < len(levels):
            child_parent = levels[lv + 1][2]
            c += np.rint(np.bincount(child_parent, weights=out[lv + 1], minlength=len(lo))).astype(np.int64)
        out[lv] = c
    return out


def tree_height(shape: Sequence[int], fanout: str = "quad") -> int:
    """Number of levels of :func:`tree_levels` (root included), without building the tree:
    a quadtree halves every dimension at once, 1 + max_d ⌈log2 n_d⌉ levels; a binary tree
    one dimension per level, and its deepest path (the upper halves, ⌈n/2⌉ cells) halves
    every dimension in turn, 1 + Σ_d ⌈log2 n_d⌉ levels."""
    if fanout not in ("quad", "binary"):
        raise PpdpError(f"fanout must be 'quad' or 'binary', got {fanout!r}")
    halvings = [math.ceil(math.log2(int(n))) if int(n) > 1 else 0 for n in shape]
    return 1 + (max(halvings, default=0) if fanout == "quad" else sum(halvings))


def box_counts(sat: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Exact (int64) counts over boxes from the summed-area table ``sat`` of an integer cube."""
    return np.rint(box_sums(sat, lo, hi)).astype(np.int64)

"""The empirical-Bayes counts of the "ldp" family's default (``"eb"``, :class:`~ppdp.estimators.subset.SubsetEB`):
each QI predicate's inverted support counts shrunk towards the estimated SA distribution of its
best parent — a predicate with one of its conditions dropped or (on an ordered column) widened,
its conditions combined, for a condition on one value of an unordered column another value of
that column (a sibling), or the whole table — chosen by
marginal likelihood, through the randomized family's empirical-Bayes fit
(:class:`~ppdp.estimators.eb_rows.EBEntries`, :class:`~ppdp.estimators.eb_rows.EBStrength`).

The support counts c of a predicate's n_P records have E[c_v] = q·n_P + (p − q)·x_v and
Var(c_v | x) = x_v·p(1 − p) + (n_P − x_v)·q(1 − q): the uniform channel's moments with p − q for its
p and q for its q, so the uniform channel's terms (``eb_terms``) hold as they are once n_P is given
(a report holds k values: n_P = Σc/k, not Σc).

The predicates form a lattice under dropping conditions and widening them: every predicate of
the workload, every one of its sub-predicates (its conditions' non-empty subsets) and, for a
condition on an ordered (numeric) column that holds one run of values [lo, hi], the predicate
with it widened to [lo − h, hi + h] for h in :data:`WIDEN` (age 30 → ages 26–34 and 18–42) is
fitted, one level (number of conditions) at a time from one condition up, a wider predicate
before a narrower one. A predicate is shrunk towards whichever of π⁰, its wider predicates'
fitted distributions and, with d ≥ 2 conditions, its d parents' fitted distributions and its
single conditions' fitted distributions combined under conditional independence gives its
inversion the largest normal marginal likelihood (each at its own fitted strength). A parent
has more records than its child, so its fitted distribution is the less noisy, and it is far
closer to the child's than the whole table's (docs/subset.md). A one-condition predicate that
selects one value of an unordered column (sex, race, education on OCC) has no parent but the
whole table; it is also offered its siblings, every other value of that column, each fitted
towards π⁰ alone (:func:`siblings_of`, :data:`SIBLINGS`), the one of largest marginal likelihood
taken when it beats the others. A predicate's counts depend on
its own support counts and those of the predicates it was derived from (or its column's other
values), never on the other queries of a workload; the lattice of a workload of 5,000 point queries on OCC (81 predicates
of one to three conditions) holds 333 predicates, whose support counts and fit cost 0.10–0.14
CPU second."""

from __future__ import annotations

from itertools import combinations
from typing import Mapping, Sequence

import numpy as np

from .channel import norm_sub
from .eb_rows import EBCounts, EBEntries


#: the strength ρ of each predicate's shrinkage, and the strength its candidate parents are compared at
#: (:data:`~ppdp.estimators.empirical_bayes.EB_STRENGTHS`): maximum marginal likelihood for both (OCC, 5
#: releases, against the method of moments: 1–10 2.936 vs 2.968, 101–1,000 0.4707 vs 0.4727 at (0.1, 0.3),
#: the other bins within noise; docs/subset.md)
STRENGTH = "likelihood"


#: half-widths of the windows an ordered condition is widened by to make a wider parent (:class:`PredicateLattice`):
#: set on OCC, (0.1, 0.3), releases 0–2, among (1), (2), (4), (8), (16), (1, 3), (4, 12), (2, 6, 18) — (4, 12) the
#: lowest in 1–10, 11–100 and 101–1,000 (−0.11, −0.014, −0.002 against none); checked on Adult and EDU (docs/subset.md)
WIDEN: tuple[int, ...] = (4, 12)


#: a one-condition predicate that selects one value of an unordered column of at most this many values is also
#: offered the distributions of the column's other values (its siblings, each fitted towards π⁰) as parents
#: (:func:`siblings_of`; OCC, (0.1, 0.3), releases 0–4: zero MAE −0.6, 1–10 −0.14, 11–100 −0.03; docs/subset.md).
#: The bound caps the candidates per predicate (a cost bound, not tuned: the largest such column of OCC, Adult
#: and EDU, country of birth, has 42–43 values)
SIBLINGS = 128


class PredicateLattice:
    """The predicates of a workload closed under dropping conditions and, on ordered (numeric)
    columns, under widening a condition that is one run of values [lo, hi] to [lo − h, hi + h]
    for each h of ``widen``. ``masks`` (U,) each predicate's QI masks, ``level`` (U,) its number
    of conditions, ``parents`` (U, dmax) the index of the predicate with its i-th condition
    dropped (−1: none, or the whole table for a one-condition predicate), ``singles`` (U, dmax)
    its conditions as one-condition predicates, ``wider`` (U, w) the predicates with one of its
    conditions widened (−1: none), ``wave`` (U,) the order within a level that fits a wider
    predicate first, ``of`` (R,) each given predicate's index (−1: no condition)."""

    def __init__(self, reps: Sequence[Mapping[str, np.ndarray]], ordered: Mapping[str, bool] | None = None,
                 widen: Sequence[int] = ()):
        ordered = ordered or {}
        cond_id: dict[tuple[str, bytes], int] = {}
        conds: list[tuple[str, np.ndarray]] = []

        def cid(c: str, mask: np.ndarray) -> int:
            key = (c, np.packbits(mask).tobytes())
            if key not in cond_id:
                cond_id[key] = len(conds)
                conds.append((c, mask))
            return cond_id[key]

        tuples: list[tuple[int, ...]] = []
        index: dict[tuple[int, ...], int] = {}
        wider: dict[int, list[tuple[int, ...]]] = {}
        rep_t = []
        for mk in reps:
            rep_t.append(tuple(cid(c, np.asarray(mk[c], dtype=bool)) for c in sorted(mk)))
        original = {i for t in rep_t for i in t}
        widened: dict[int, list[int]] = {}

        def widenings(i: int) -> list[int]:
            if i not in widened:
                out: list[int] = []
                c, mk = conds[i]
                on = np.flatnonzero(mk)
                if i in original and ordered.get(c) and 0 < len(on) < len(mk) and on[-1] - on[0] + 1 == len(on):
                    for h in widen:
                        w = np.zeros(len(mk), dtype=bool)
                        w[max(0, on[0] - h): on[-1] + h + 1] = True
                        j = cid(c, w)
                        if j != i and j not in out:
                            out.append(j)
                widened[i] = out
            return widened[i]

        queue = [t for t in rep_t if t]
        while queue:
            t = queue.pop()
            if t in index:
                continue
            for size in range(1, len(t) + 1):
                for sub in combinations(t, size):
                    if sub not in index:
                        if sub != t:
                            queue.append(sub)
            index[t] = len(tuples)
            tuples.append(t)
            ws = []
            for i in range(len(t)):
                for j in widenings(t[i]):
                    w = t[:i] + (j,) + t[i + 1:]
                    ws.append(w)
                    queue.append(w)
            wider[index[t]] = ws
        self.of = np.array([index[t] if t else -1 for t in rep_t], dtype=np.int64)
        U = len(tuples)
        self.level = np.array([len(t) for t in tuples], dtype=np.int64)
        dmax = int(self.level.max()) if U else 1
        self.parents = np.full((U, dmax), -1, dtype=np.int64)
        self.singles = np.full((U, dmax), -1, dtype=np.int64)
        for u, t in enumerate(tuples):
            if len(t) >= 2:
                self.parents[u, : len(t)] = [index[t[:i] + t[i + 1:]] for i in range(len(t))]
                self.singles[u, : len(t)] = [index[(i,)] for i in t]
        wmax = max([len(v) for v in wider.values()] + [0])
        self.wider = np.full((U, max(wmax, 1)), -1, dtype=np.int64)
        for u, ws in wider.items():
            self.wider[u, : len(ws)] = [index[w] for w in ws]
        # a wider predicate holds more values in one condition: fitted before the narrower one
        width = np.array([sum(int(conds[i][1].sum()) for i in t) for t in tuples], dtype=np.int64)
        self.wave = np.zeros(U, dtype=np.int64)
        for u in np.argsort(-width, kind="stable").tolist():
            wu = self.wider[u][self.wider[u] >= 0]
            if len(wu):
                self.wave[u] = 1 + int(self.wave[wu].max())
        self.masks = [{conds[i][0]: conds[i][1] for i in t} for t in tuples]


def lattice_fit(C: np.ndarray, n: np.ndarray, p: float, q: float, pi0: np.ndarray, L: PredicateLattice,
                strength: str = STRENGTH, select: str = STRENGTH, parents: bool = True,
                prior_out: np.ndarray | None = None,
                siblings: tuple[np.ndarray, np.ndarray] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The empirical-Bayes counts (U, m) of every predicate of the lattice ``L`` from its support
    counts ``C`` (U, m) and records ``n`` (U,) through the subset channel's inclusion
    probabilities (p, q), and each predicate's chosen parent (U,): its index in ``L``, −1 the
    whole table π⁰, −2 the combination of its single conditions, −3 a sibling. The candidates are compared
    at the ``select`` strength, the chosen one fitted at ``strength``
    (:data:`~ppdp.estimators.empirical_bayes.EB_STRENGTHS`).

    Candidates of a predicate: π⁰; with d ≥ 2 conditions each parent's fitted distribution (its
    counts normalised) and its d single conditions' fitted distributions π_c combined under
    conditional independence of the conditions given the SA value, ∝ Π_c π_c / (π⁰)^(d−1) (as
    the uniform channel's :func:`~ppdp.estimators.empirical_bayes.eb_fit`); each wider
    predicate's fitted distribution; with ``siblings`` = (distributions (T, m), index (U, s) into
    them, −1 none), a one-condition predicate's siblings' distributions (:func:`siblings_of`).
    ``parents=False``: every predicate shrunk towards π⁰ (the comparison of docs/subset.md). ``prior_out`` (U, m), if given, receives each predicate's chosen
    prior distribution (the experiments of ``benchmarks/bench_subset_floor.py``)."""
    U, m = C.shape
    counts = EBCounts(C, np.full(U, p - q), np.full(U, q), np.ones((U, m), dtype=bool), n=n)
    X = np.zeros((U, m))
    dist = np.zeros((U, m))
    chosen = np.full(U, -1, dtype=np.int64)
    log_pi0 = np.log(np.maximum(pi0, 1e-300))
    for d in range(1, int(L.level.max(initial=0)) + 1):
        for wv in range(int(L.wave.max(initial=0)) + 1):
            us = np.flatnonzero((L.level == d) & (L.wave == wv))
            if not len(us):
                continue
            sub = counts.subset(us)
            prior = np.repeat(pi0[None, :], len(us), axis=0)
            if parents:
                best = EBEntries(sub, prior).fit(select, loglik=True)[2]
                cands: list[tuple[np.ndarray, np.ndarray]] = []  # (candidate index or −2 per row, its distribution)
                if d >= 2:
                    lg = -(d - 1) * log_pi0[None, :]
                    for i in range(d):
                        lg = lg + np.log(np.maximum(dist[L.singles[us, i]], 1e-300))
                    e = np.exp(lg - lg.max(axis=1, keepdims=True))
                    cands.append((np.full(len(us), -2), e / e.sum(axis=1, keepdims=True)))
                    cands += [(L.parents[us, i], dist[L.parents[us, i]]) for i in range(d)]
                if siblings is not None and d == 1:
                    sd, si = siblings
                    cands += [(np.where(si[us, j] >= 0, -3, -1), sd[np.maximum(si[us, j], 0)]) for j in range(si.shape[1])]
                cands += [(L.wider[us, i], dist[np.maximum(L.wider[us, i], 0)]) for i in range(L.wider.shape[1])]
                for tag, cand in cands:
                    r = np.flatnonzero(tag != -1)
                    if not len(r):
                        continue
                    ll = EBEntries(sub.subset(r) if len(r) < len(us) else sub, cand[r]).fit(select, loglik=True)[2]
                    better = ll > best[r]
                    rb = r[better]
                    prior[rb] = cand[rb]
                    best[rb] = ll[better]
                    chosen[us[rb]] = tag[rb]
            if prior_out is not None:
                prior_out[us] = prior
            Xd = EBEntries(sub, prior).fit(strength, predict=True)[1]
            X[us] = Xd
            tot = Xd.sum(axis=1, keepdims=True)
            dist[us] = np.where(tot > 0, Xd / np.maximum(tot, 1e-300), pi0[None, :])
    return X, chosen


def ordered_columns(release) -> dict[str, bool]:
    """The QI columns whose domain order is their values' (numeric, strictly increasing)."""
    out = {}
    for c, v in release.numeric.items():
        out[c] = v is not None and len(v) > 1 and bool(np.all(np.diff(np.asarray(v, dtype=float)) > 0))
    return out


def siblings_of(L: PredicateLattice, ordered: Mapping[str, bool], limit: int = SIBLINGS) -> tuple[list, np.ndarray]:
    """The sibling predicates of the lattice's one-condition predicates that select one value of an
    unordered column of at most ``limit`` values — one predicate per value of each such column —
    and (U, s) each lattice predicate's siblings (the column's other values) as indices into them,
    −1 none."""
    offset: dict[str, int] = {}
    masks: list[dict[str, np.ndarray]] = []
    own: dict[int, tuple[int, int, int]] = {}
    for u, mk in enumerate(L.masks):
        if len(mk) != 1:
            continue
        ((c, mask),) = mk.items()
        on = np.flatnonzero(mask)
        V = len(mask)
        if len(on) != 1 or ordered.get(c) or V > limit or V < 2:
            continue
        if c not in offset:
            offset[c] = len(masks)
            eye = np.eye(V, dtype=bool)
            masks += [{c: eye[a]} for a in range(V)]
        own[u] = (offset[c], V, int(on[0]))
    width = max([V - 1 for _, V, _ in own.values()] + [1])
    index = np.full((len(L.masks), width), -1, dtype=np.int64)
    for u, (off, V, a) in own.items():
        index[u, : V - 1] = off + np.delete(np.arange(V), a)
    return masks, index


def sibling_distributions(Cs: np.ndarray, k: int, p: float, q: float, pi0: np.ndarray,
                          strength: str = STRENGTH) -> np.ndarray:
    """(T, m): the siblings' distributions from their support counts ``Cs`` (T, m), each shrunk
    towards the whole table's π⁰ only (so that it does not depend on the predicate it serves) and
    normalised; π⁰ for a sibling without records."""
    ns = Cs.sum(axis=1) / k
    counts = EBCounts(Cs, np.full(len(ns), p - q), np.full(len(ns), q), np.ones(Cs.shape, dtype=bool), n=ns)
    Xs = EBEntries(counts, np.repeat(pi0[None, :], len(ns), axis=0)).fit(strength, predict=True)[1]
    tot = Xs.sum(axis=1, keepdims=True)
    return np.where(tot > 0, Xs / np.maximum(tot, 1e-300), pi0[None, :])


def parent_eb(S, strength: str = STRENGTH, parents: bool = True, widen: Sequence[int] = WIDEN,
              siblings: bool = True) -> np.ndarray:
    """(U, m): the empirical-Bayes counts of every predicate of a
    :class:`~ppdp.estimators.subset.SubsetSetup` ``S`` (module doc): its lattice's support counts
    from the release's count index, π⁰ the whole table's distribution; a predicate without a QI
    condition (the whole table) is its own Norm-Sub. ``strength``, ``parents``: :func:`lattice_fit`'s;
    ``widen``: :class:`PredicateLattice`'s, on the release's ordered columns (:func:`ordered_columns`);
    ``siblings``: offer a one-condition predicate's siblings (:func:`siblings_of`), each fitted
    towards π⁰."""
    ordered = ordered_columns(S.release)
    L = PredicateLattice(S.reps, ordered, widen)
    inv = S.inversion()
    X = norm_sub(inv, np.ones(inv.shape, dtype=bool), S.n)
    if not len(L.level):
        return X
    sib_masks, sib_index = siblings_of(L, ordered) if siblings and parents else ([], None)
    idx = S.release.support_index(sorted({c for mk in L.masks for c in mk}))
    C = np.asarray(idx.sums(L.masks + sib_masks), dtype=np.float64)
    C, Cs = C[: len(L.masks)], C[len(L.masks):]
    pi0 = S.whole_table()
    sib = None
    if sib_index is not None and len(sib_masks):
        sib = (sibling_distributions(Cs, S.k, S.p, S.q, pi0, strength), sib_index)
    Xl, _ = lattice_fit(C, C.sum(axis=1) / S.k, S.p, S.q, pi0, L, strength, strength, parents, siblings=sib)
    has = L.of >= 0
    X[has] = Xl[L.of[has]]
    return X


__all__ = ["SIBLINGS", "PredicateLattice", "lattice_fit", "parent_eb", "sibling_distributions", "siblings_of"]

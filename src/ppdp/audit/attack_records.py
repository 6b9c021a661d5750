"""What an attacker holds: a release turned into records, next to the training records it was
published from and held-back control records (the setting of Giomi et al. 2023).

The attacks of :mod:`ppdp.audit.attacks` compare records. A release is turned into the records
an attacker would use, one documented rule per family:

- **bucketized** (F'-privacy, Anatomy): the QIT rows as published, each given a sensitive value
  drawn without replacement from its bucket's ST values (fake values included: a receiver cannot
  tell them apart), so a bucket's records carry exactly its published multiset in a random order.
- **randomized** (uniform, SDR, global, A'): the published rows — quasi-identifiers as they are
  and the perturbed sensitive value.
- **ldp** (subset selection): each record's quasi-identifiers with one value drawn uniformly
  from the k values it reported.
- **histogram** (ε-DP cubes): records over the histogram's dimensions, as many per cell as the
  reconstruction (:func:`reconstruct_cells`: non-negative least squares over every released
  count — cells, partitions, marginals — rounded to integers) puts there.

The training and control records are mapped into the same columns: the label of every
quasi-identifier and the sensitive attribute (a histogram: every dimension, binned by the
release's public bins). Codes index one joint vocabulary per column, so labels that only the
control holds are kept (they never match a released label).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..errors import ReleaseError

__all__ = ["AttackData", "attack_data", "reconstruct_cells", "RECONSTRUCT_MAX_CELLS"]

#: the largest cube the least-squares reconstruction solves (larger cubes use their released cells)
RECONSTRUCT_MAX_CELLS = 1 << 18


@dataclass
class AttackData:
    """Records over ``columns`` as integer codes: ``train`` (published), ``control`` (held
    back), ``synth`` (the attacker's records derived from the release). ``numeric[j]``: the
    value of each code of column j (NaN for a non-number), or None for a categorical column.
    ``secret``: the column attribute inference targets."""

    family: str
    columns: list[str]
    labels: list[list[str]]
    numeric: list[np.ndarray | None]
    train: np.ndarray
    control: np.ndarray
    synth: np.ndarray
    secret: int
    notes: list[str] = field(default_factory=list)
    #: histogram only: (reconstructed counts, train counts, control counts) per cell
    cells: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None


class _Vocab:
    """One code space per column over release, training and control labels."""

    def __init__(self, labels):
        self.labels = [str(x) for x in labels]
        self.pos = {x: i for i, x in enumerate(self.labels)}

    def encode(self, values) -> np.ndarray:
        vals = np.asarray(values, dtype=object)
        uniq, inv = np.unique(vals.astype(str), return_inverse=True)
        for u in uniq:
            if u not in self.pos:
                self.pos[u] = len(self.labels)
                self.labels.append(u)
        return np.asarray([self.pos[u] for u in uniq], dtype=np.int64)[inv]

    def numeric(self) -> np.ndarray | None:
        vals = []
        for x in self.labels:
            try:
                vals.append(float(x))
            except ValueError:
                vals.append(math.nan)
        arr = np.asarray(vals)
        return arr if np.isfinite(arr).sum() >= max(2, 0.9 * len(arr)) else None


def _table_labels(table, column: str) -> np.ndarray:
    return np.asarray(table.domain(column), dtype=object)[table.codes(column)]


def attack_data(release, train, control, seed: int = 0) -> AttackData:
    """The records of :class:`AttackData` for ``release`` published from ``train``, with the
    held-back ``control`` (both :class:`ppdp.Table`; see the module doc for each family)."""
    fam = release.manifest.get("family", getattr(release, "family", None))
    rng = np.random.default_rng(seed)
    if fam == "histogram":
        return _histogram_data(release, train, control)
    if fam not in ("bucketized", "randomized", "ldp"):
        raise ReleaseError(f"no record-level attack applies to a {fam!r} release (it publishes no records or counts "
                           "over records)")
    sch = release.schema
    sa = sch["sensitive"][0]
    quasi = [c for c in sch["quasi"] if c in train.column_names and c in control.column_names]
    missing = [c for c in [*quasi, sa] if c not in train.column_names or c not in control.column_names]
    if missing:
        raise ReleaseError(f"the training or control table lacks the release's column(s) {missing}")
    cols = [*quasi, sa]
    vocab = [_Vocab(release.domains.get(c, [])) for c in cols]
    if fam == "bucketized":
        synth_labels = _bucketized_records(release, quasi, sa, rng)
    elif fam == "ldp":
        synth_labels = _ldp_records(release, cols, rng)
    else:
        data = release.tables["data"]
        synth_labels = {c: np.asarray(data.column(c).to_numpy(zero_copy_only=False), dtype=object) for c in cols}
    synth = np.stack([v.encode(synth_labels[c]) for v, c in zip(vocab, cols)], axis=1)
    tr = np.stack([v.encode(_table_labels(train, c)) for v, c in zip(vocab, cols)], axis=1)
    co = np.stack([v.encode(_table_labels(control, c)) for v, c in zip(vocab, cols)], axis=1)
    what = {"bucketized": "QIT rows with a sensitive value drawn from their bucket",
            "ldp": "each record's QI row with one value drawn from its reported subset"}.get(fam, "the published rows")
    notes = [f"attacker's records: {what}"
             f" ({len(synth):,}); training records {len(tr):,}, control records {len(co):,}"]
    return AttackData(fam, cols, [v.labels for v in vocab], [v.numeric() for v in vocab], tr, co, synth, len(cols) - 1,
                      notes)


def _ldp_records(release, cols, rng) -> dict[str, np.ndarray]:
    """One row per record of a subset-selection release (k rows each): its QI values and one of
    its k reported values, drawn uniformly."""
    data = release.tables["data"]
    rec = np.asarray(data.column("record").to_numpy(zero_copy_only=False))
    order = np.lexsort((rng.random(len(rec)), rec))  # by record, random inside
    first = order[np.flatnonzero(np.r_[True, rec[order][1:] != rec[order][:-1]])]
    return {c: np.asarray(data.column(c).to_numpy(zero_copy_only=False), dtype=object)[first] for c in cols}


def _bucketized_records(release, quasi, sa, rng) -> dict[str, np.ndarray]:
    """QIT rows, each with an SA value drawn without replacement from its bucket's ST values."""
    qit, st = release.tables["qit"], release.tables["st"]
    qbid = np.asarray(qit.column("bid").to_numpy(), dtype=np.int64)
    sbid = np.asarray(st.column("bid").to_numpy(), dtype=np.int64)
    cnt = np.asarray(st.column("count").to_numpy(), dtype=np.int64) if "count" in st.column_names else np.ones(len(sbid), np.int64)
    svals = np.asarray(st.column(sa).to_numpy(zero_copy_only=False), dtype=object)
    ebid = np.repeat(sbid, cnt)  # one entry per ST value (fakes included)
    evals = np.repeat(svals, cnt)
    eorder = np.lexsort((rng.random(len(ebid)), ebid))  # by bucket, random inside
    ebid, evals = ebid[eorder], evals[eorder]
    qorder = np.lexsort((rng.random(len(qbid)), qbid))
    qb = qbid[qorder]
    # the k-th QIT row of bucket b takes the k-th shuffled ST value of b
    q_rank = np.arange(len(qb)) - np.searchsorted(qb, qb, side="left")
    e_start = np.searchsorted(ebid, qb, side="left")
    e_end = np.searchsorted(ebid, qb, side="right")
    if np.any(e_start + q_rank >= e_end):
        raise ReleaseError("a bucket has fewer ST values than QIT rows; cannot draw its records")
    out = {c: np.asarray(qit.column(c).to_numpy(zero_copy_only=False), dtype=object)[qorder] for c in quasi}
    out[sa] = evals[e_start + q_rank]
    return out


# ------------------------------------------------------------------------------ histograms
def _cube_of(release, table):
    """The cell index of every row of ``table`` in ``release``'s cube (its public bins/domains)."""
    from ..kernels.grid import cube_codes

    bins, domains = {}, {}
    for d in release.dims:
        b = release.bins.get(d)
        if isinstance(b, list) and b and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in b):
            bins[d] = [float(x) for x in b]
            if list(release.domains[d])[-1:] == ["(missing)"]:
                domains[d] = list(release.domains[d])
        else:
            domains[d] = list(release.domains[d])
    _, codes = cube_codes(table, release.dims, bins or None, domains or None)
    return codes


def reconstruct_cells(release) -> tuple[np.ndarray, str]:
    """The attacker's integer count per cell (flat, C order): non-negative least squares over
    every released count — cells (weighted by their ε), partitions (box sums, weighted by their
    ε) and measured marginals — rounded to the nearest integer. A cube larger than
    :data:`RECONSTRUCT_MAX_CELLS` takes its released cells clipped at 0 and rounded."""
    import scipy.sparse as sp

    shape = release.shape
    n = int(np.prod(shape, dtype=np.int64))
    cert = release.certificate
    idx, cnt = release.cell_index()
    if n > RECONSTRUCT_MAX_CELLS:
        if not len(cnt):
            raise ReleaseError(f"a cube of {n:,} cells without released cells: too large to reconstruct")
        out = np.zeros(n)
        out[np.ravel_multi_index(idx, shape)] = cnt
        return np.rint(np.clip(out, 0, None)), "released cells clipped at 0 and rounded (cube too large for least squares)"
    rows, cols, vals, y = [], [], [], []
    r = 0
    if len(cnt):
        w = float(cert.get("epsilon_cells") or 1.0) or 1.0
        lin = np.ravel_multi_index(idx, shape)
        rows.append(np.arange(len(lin)) + r)
        cols.append(lin)
        vals.append(np.full(len(lin), w))
        y.append(cnt * w)
        r += len(lin)
    lo, hi, pc = release.partition_boxes()
    if len(pc):
        w = float(cert.get("epsilon_partitions") or 1.0) or 1.0
        grids = np.indices(shape).reshape(len(shape), -1)
        for i in range(len(pc)):  # a few hundred boxes at most
            inside = np.all((grids >= lo[i][:, None]) & (grids <= hi[i][:, None]), axis=0)
            c = np.flatnonzero(inside)
            rows.append(np.full(len(c), r))
            cols.append(c)
            vals.append(np.full(len(c), w))
            y.append(np.array([pc[i] * w]))
            r += 1
    marg = release.measured_marginals()
    if marg:
        grids = np.indices(shape).reshape(len(shape), -1)
        for dims, arr in marg:
            sub = np.ravel_multi_index(tuple(grids[j] for j in dims), arr.shape)
            rows.append(sub + r)
            cols.append(np.arange(n))
            vals.append(np.ones(n))
            y.append(arr.ravel().astype(float))
            r += arr.size
    if r == 0:
        raise ReleaseError("the release holds no counts to reconstruct from")
    A = sp.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(r, n))
    x = _nnls(A, np.concatenate(y))
    what = ", ".join(k for k, v in (("cells", len(cnt)), ("partitions", len(pc)), ("marginals", bool(marg))) if v)
    return np.rint(np.clip(x, 0, None)), f"non-negative least squares over the released {what}, rounded"


def _nnls(A, y: np.ndarray, iters: int = 400) -> np.ndarray:
    """min ||Ax − y||² over x ≥ 0 by accelerated projected gradient (Beck & Teboulle 2009), from
    the column-normalised back-projection; step 1/L with L = ||A||² by power iteration."""
    At = A.T.tocsr()
    colsum = np.asarray(abs(A).sum(axis=0)).ravel()
    x = np.clip(At @ y / np.maximum(colsum * np.asarray(abs(A).max(axis=0).todense()).ravel(), 1e-12), 0, None)
    v = np.random.default_rng(0).random(A.shape[1])
    for _ in range(30):
        v = At @ (A @ v)
        v /= max(np.linalg.norm(v), 1e-300)
    L = float(np.linalg.norm(At @ (A @ v))) * 1.01 or 1.0
    z, t = x.copy(), 1.0
    for _ in range(iters):
        x_new = np.clip(z - (At @ (A @ z - y)) / L, 0, None)
        t_new = (1 + math.sqrt(1 + 4 * t * t)) / 2
        z = x_new + ((t - 1) / t_new) * (x_new - x)
        x, t = x_new, t_new
    return x


def _histogram_data(release, train, control) -> AttackData:
    dims = list(release.dims)
    shape = release.shape
    x_hat, how = reconstruct_cells(release)
    tr_codes, co_codes = _cube_of(release, train), _cube_of(release, control)
    tr = np.stack(tr_codes, axis=1)
    co = np.stack(co_codes, axis=1)
    lin = np.repeat(np.arange(len(x_hat)), x_hat.astype(np.int64))
    synth = np.stack(np.unravel_index(lin, shape), axis=1).astype(np.int64) if len(lin) else np.zeros((0, len(dims)), np.int64)
    n_cells = len(x_hat)
    tc = np.bincount(np.ravel_multi_index(tr_codes, shape), minlength=n_cells)
    cc = np.bincount(np.ravel_multi_index(co_codes, shape), minlength=n_cells)
    sens = [c for c in train.sensitive if c in dims]
    secret = dims.index(sens[0]) if sens else len(dims) - 1
    labels = [list(release.domains[d]) for d in dims]
    numeric = []
    for d, lab in zip(dims, labels):
        v = _Vocab(lab).numeric()
        b = release.bins.get(d)
        if v is None and isinstance(b, list) and b and all(isinstance(x, (int, float)) for x in b):
            v = np.asarray([float(e) for e in b[:len(lab)]] + [math.nan] * max(0, len(lab) - len(b)))
        numeric.append(v)
    notes = [f"attacker's records: {len(synth):,} drawn from the reconstructed cells ({how}); the secret is "
             f"{dims[secret]!r}" + ("" if sens else " (no sensitive dimension: the last one)")]
    return AttackData("histogram", dims, labels, numeric, tr, co, synth, secret, notes, cells=(x_hat, tc, cc))

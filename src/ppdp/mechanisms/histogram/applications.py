"""Applications of a released histogram (Xiao et al. §5, §6.4): classification on synthesised
data vs a private interactive ID3 (Friedman & Schuster 2010), and record-linkage blocking
(reduction ratio, eq 36)."""

from __future__ import annotations

import math

import numpy as np

from ...kernels.grid import paint
from ...kernels.noise import discrete_laplace


# ----------------------------------------------------------------- classification
def synthesize(release, estimator=None) -> tuple[np.ndarray, np.ndarray]:
    """Weighted synthetic records from a histogram release: (cell index matrix (k, d), weights).

    Every cell with a positive estimated count (``estimator``: None for the mechanism's
    default, a name or an estimator object) becomes one record weighted by that count
    (negative estimates are clipped to 0) — equivalent to replicating records.
    """
    est = np.maximum(release.estimator(estimator).cells(release), 0.0)
    nz = np.flatnonzero(est.ravel() > 0)
    idx = np.stack(np.unravel_index(nz, est.shape), axis=1)
    return idx, est.ravel()[nz]


def tree_accuracy(X_train, y_train, X_test, y_test, weights=None, seed: int = 0) -> float:
    """Accuracy of an entropy-criterion decision tree (ID3-like) on integer-coded features."""
    from sklearn.tree import DecisionTreeClassifier

    if len(X_train) == 0 or (weights is not None and weights.sum() <= 0):
        majority = 0
        return float(np.mean(y_test == majority))
    clf = DecisionTreeClassifier(criterion="entropy", random_state=seed)
    clf.fit(X_train, y_train, sample_weight=weights)
    return float(np.mean(clf.predict(X_test) == y_test))


def private_id3(X: np.ndarray, y: np.ndarray, sizes: list[int], n_classes: int, epsilon: float,
                rng: np.random.Generator, depth: int | None = None):
    """Differentially private interactive ID3 after Friedman & Schuster (2010).

    Budget ε' = ε/(2(d+1)) per query along a root-to-leaf path (d = depth): each node asks a
    noisy count (ε'); it becomes a leaf when no attribute is left or the noisy count is too
    small to be useful (N_t/(max|A|·|C|) < √2/ε'), and a leaf asks noisy class counts (ε');
    otherwise an attribute is chosen by the exponential mechanism (ε') with the information
    gain score (sensitivity log2(N+1) + 1/ln 2). Nodes of one level hold disjoint records, so
    their queries compose in parallel. Returns a predict(X) function.

    Note: an interactive baseline, not a release: its noisy counts use the hardened sampler
    directly (its composition is the one stated above, not a :class:`~ppdp.kernels.noise.Budget`
    ledger), and the exponential mechanism samples with floating-point weights.
    """
    d = depth if depth is not None else X.shape[1]
    eps_q = epsilon / (2 * (d + 1))
    max_a = max(sizes)

    def noisy(counts):
        return counts + discrete_laplace(rng, eps_q, counts.shape)

    def build(rows, attrs, level):
        n_noisy = float(noisy(np.array([len(rows)]))[0])
        if not attrs or level >= d or n_noisy / (max_a * n_classes) < math.sqrt(2) / eps_q:
            cc = noisy(np.bincount(y[rows], minlength=n_classes))
            return ("leaf", int(np.argmax(cc)))
        scores = []
        for a in attrs:
            t = np.bincount(X[rows, a] * n_classes + y[rows], minlength=sizes[a] * n_classes).reshape(sizes[a], n_classes)
            tj = t.sum(1, keepdims=True)
            with np.errstate(divide="ignore", invalid="ignore"):
                h = np.where(t > 0, t * np.log2(np.where(tj > 0, t / tj, 1)), 0.0)
            scores.append(h.sum())  # −(conditional entropy)·N_t: higher is better
        sens = math.log2(max(n_noisy, 1) + 1) + 1 / math.log(2)
        logits = eps_q * np.asarray(scores) / (2 * sens)
        p = np.exp(logits - logits.max())
        a = attrs[int(rng.choice(len(attrs), p=p / p.sum()))]
        children = {}
        for v in range(sizes[a]):
            children[v] = build(rows[X[rows, a] == v], [b for b in attrs if b != a], level + 1)
        return ("split", a, children)

    tree = build(np.arange(len(y)), list(range(X.shape[1])), 0)

    return lambda Xq: predict_multiway(tree, Xq)


def predict_multiway(tree, Xq) -> np.ndarray:
    """Classes of the rows ``Xq`` (integer codes) under a multiway tree of nodes
    ``("leaf", class)`` and ``("split", attribute, {value: child})``; vectorised per node."""
    Xq = np.asarray(Xq, np.int64)
    out = np.zeros(len(Xq), dtype=np.int64)
    stack = [(tree, np.arange(len(Xq)))]
    while stack:
        node, idx = stack.pop()
        if node[0] == "leaf":
            out[idx] = node[1]
            continue
        _, a, ch = node
        for v, sub in ch.items():
            stack.append((sub, idx[Xq[idx, a] == v]))
    return out


# ---------------------------------------------------------------------- blocking
def reduction_ratio(block_of_1: np.ndarray, block_of_2: np.ndarray, n_blocks: int) -> float:
    """1 − Σ n_i m_i / (n·m) (Xiao et al. eq 36): n_i, m_i = records of each data set in block i."""
    n_i = np.bincount(block_of_1, minlength=n_blocks).astype(float)
    m_i = np.bincount(block_of_2, minlength=n_blocks).astype(float)
    return float(1 - (n_i * m_i).sum() / (len(block_of_1) * len(block_of_2)))


def blocks_of(release, cell_codes: list[np.ndarray]) -> tuple[np.ndarray, int]:
    """Block (partition id) of every record whose cell indices are ``cell_codes``; the blocks
    are the release's partitions (or its cells when it has none)."""
    shape = release.shape
    lo, hi, _ = release.partition_boxes()
    if len(lo):
        pid = paint(shape, lo, hi)
        return pid[tuple(cell_codes)], len(lo)
    return np.ravel_multi_index(cell_codes, shape), int(np.prod(shape))

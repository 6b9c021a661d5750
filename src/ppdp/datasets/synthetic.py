"""A synthetic generator for scale runs (SPEC §1).

It reproduces a table's one-way marginals and its QI×SA two-way marginals at any size: the
SA is drawn from its marginal, and each other column independently from its conditional
distribution given the SA (so every column × SA table matches in expectation; QI×QI
dependence beyond what flows through the SA is not kept — say so when results depend on it).
Rows are produced in chunks, so 10^9 rows can be streamed to Parquet in bounded memory.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import numpy as np
import pyarrow.parquet as pq

from ..errors import PpdpError
from ..table import Table, code_dtype


class SyntheticModel:
    """The fitted marginals: P(SA) and P(column | SA) for every other column."""

    def __init__(self, table: Table, sensitive: str | None = None):
        self.sa = sensitive or table.sa
        self.template = table
        sa_codes = table.codes(self.sa)
        m = len(table.domain(self.sa))
        self.sa_p = np.bincount(sa_codes, minlength=m) / table.n_rows
        self.cond: dict[str, np.ndarray] = {}
        for c in table.column_names:
            if c == self.sa:
                continue
            d = len(table.domain(c))
            joint = np.bincount(sa_codes.astype(np.int64) * d + table.codes(c), minlength=m * d).reshape(m, d)
            with np.errstate(invalid="ignore", divide="ignore"):
                cdf = np.cumsum(joint, axis=1) / joint.sum(axis=1, keepdims=True)
            self.cond[c] = np.nan_to_num(cdf, nan=1.0)

    #: rows drawn per vectorised step of :meth:`sample` (bounds its temporaries: ~20 bytes a row)
    block_rows: int = 1 << 24

    def sample(self, n: int, rng: np.random.Generator) -> Table:
        """``n`` rows, drawn ``block_rows`` at a time straight into narrow code arrays (so a
        10^8-row table needs its 1 byte per cell plus one block of temporaries)."""
        t = self.template
        names = t.column_names
        out = {c: np.empty(n, dtype=code_dtype(len(t.domain(c)))) for c in names}
        for lo in range(0, n, self.block_rows):
            hi = min(n, lo + self.block_rows)
            self._draw(hi - lo, rng, {c: a[lo:hi] for c, a in out.items()})
        return Table(out, {c: t.domain(c) for c in names}, t.quasi, t.sensitive,
                     numeric={c: t.numeric_values(c) for c in names})

    def _draw(self, n: int, rng: np.random.Generator, out: dict[str, np.ndarray]) -> None:
        sa = rng.choice(len(self.sa_p), size=n, p=self.sa_p)
        order = np.argsort(sa, kind="stable")
        bounds = np.searchsorted(sa[order], np.arange(len(self.sa_p) + 1))
        for c, cdf in self.cond.items():
            u = rng.random(n)
            dst = out[c]
            for v in range(len(self.sa_p)):  # one vectorised draw per SA value
                rows = order[bounds[v] : bounds[v + 1]]
                if len(rows):
                    dst[rows] = np.minimum(np.searchsorted(cdf[v], u[rows], side="right"), cdf.shape[1] - 1)
        out[self.sa][:] = sa


#: the synthetic data's own stream: SeedSequence(seed) with this spawn key, so a table drawn with
#: ``seed=s`` never shares its random numbers with a publication seeded with ``s`` (which would
#: make the published noise depend on the data — the source-fit check of verify then fails)
DATA_STREAM = (0x53594E,)


def data_rng(seed: int) -> np.random.Generator:
    """The generator of synthetic rows for ``seed`` (independent of ``publication_rng(seed)``)."""
    return np.random.default_rng(np.random.SeedSequence(int(seed), spawn_key=DATA_STREAM))


def synthetic_chunks(table: Table, n: int, seed: int = 0, chunk_rows: int = 5_000_000,
                     sensitive: str | None = None) -> Iterator[Table]:
    """Yield tables of at most ``chunk_rows`` rows, ``n`` rows in all."""
    if n <= 0:
        raise PpdpError(f"n must be positive, got {n}")
    model = SyntheticModel(table, sensitive)
    rng = data_rng(seed)
    done = 0
    while done < n:
        k = min(chunk_rows, n - done)
        yield model.sample(k, rng)
        done += k


def synthetic(table: Table, n: int, seed: int = 0, sensitive: str | None = None) -> Table:
    """A synthetic table of ``n`` rows with the marginals of ``table`` (see module docstring)."""
    if n <= 0:
        raise PpdpError(f"n must be positive, got {n}")
    return SyntheticModel(table, sensitive).sample(int(n), data_rng(seed))


def write_synthetic(table: Table, n: int, path: str | Path, seed: int = 0, chunk_rows: int = 5_000_000) -> Path:
    """Stream ``n`` synthetic rows to one Parquet file (row group per chunk)."""
    path = Path(path)
    writer = None
    try:
        for chunk in synthetic_chunks(table, n, seed, chunk_rows):
            at = chunk.to_arrow()
            if writer is None:
                writer = pq.ParquetWriter(path, at.schema, compression="zstd")
            writer.write_table(at)
    finally:
        if writer is not None:
            writer.close()
    return path

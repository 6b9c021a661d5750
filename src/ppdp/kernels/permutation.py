"""A keyed pseudorandom permutation of ``[0, n)`` that any process can evaluate, forwards and
backwards, from a small key drawn from a generator — no array of n entries.

:class:`KeyedPermutation` draws its key from a :class:`numpy.random.Generator` (the
publication's randomness: AES-128-CTR keyed from the OS CSPRNG without a seed, PCG64 with one,
:mod:`ppdp.kernels.rng`), so every process that builds it from the same generator state holds
the same permutation:

- **n ≤ explicit_max** (2^16 by default): a uniformly random permutation drawn with
  ``rng.permutation(n)`` and held (with its inverse) as two arrays of n entries — exact, and
  small by the bound.
- **Larger n**: a Feistel network over ``[0, 2^b)``, b the bits of n − 1 (so 2^b < 2n), of
  ``rounds`` (10, as NIST SP 800-38G's FF1) rounds on halves of ⌈b/2⌉ and ⌊b/2⌋ bits. Round i
  maps the halves (L, R) to (R, L xor F_i[R]) (the halves' widths swap), where each round
  function F_i is a table of 2^(bits of R) values drawn from ``rng``: a uniformly random
  function for a seeded PCG64 stream, a pseudorandom one (AES-128-CTR output, as secure as the
  key) without a seed. Cycle-walking (re-applying the network while the image is ≥ n)
  restricts the permutation of ``[0, 2^b)`` to one of ``[0, n)``; it ends because the network
  is a permutation, after fewer than 2 applications per id on average (n > 2^b / 2). The key is
  the tables: ``rounds · 2^⌈b/2⌉`` values of 2 bytes (b ≤ 32), about 120 KiB at n = 2^25 and
  1.3 MiB at n = 2^32 — O(√n), not O(n); n above 2^40 is refused.

Without the key, the Feistel permutation is a *pseudorandom* permutation, not an exactly
uniformly random one: its key has at most ``rounds · 2^⌈b/2⌉ · ⌈b/2⌉`` bits, far fewer than the log2(n!)
needed to reach every permutation of n ids, so the permutations it yields are a small
(key-indexed) family. With uniformly random tables every id's image is uniform on
``[0, 2^b)`` after two rounds, and a Feistel network of 5 or more rounds with uniformly random
round functions is provably indistinguishable from a uniformly random permutation by an
observer of q ≪ 2^(b/2) ids' images (Luby–Rackoff; Patarin, CRYPTO 2004); no bound covers an
observer of most of the permutation, and FF1's ten rounds are a margin, not a proof. The
tests check the bijection, the inverse and, with a fixed seed, where ids go over many keys
(χ²).

Evaluation is vectorised over NumPy arrays of ids: ``rounds`` gathers and xors per application,
no Python loop per id.
"""

from __future__ import annotations

import numpy as np

from ..errors import PpdpError

#: sizes up to which the permutation is drawn exactly and held as arrays
EXPLICIT_MAX = 1 << 16
#: rounds of the Feistel network (as NIST SP 800-38G's FF1)
ROUNDS = 10
#: the largest size served (tables of 2^20 entries per round)
MAX_SIZE = 1 << 40


class KeyedPermutation:
    """A permutation of ``[0, n)`` keyed by draws from ``rng`` (see the module docs):
    :meth:`forward` and :meth:`inverse` map arrays of ids."""

    def __init__(self, n: int, rng: np.random.Generator, *, explicit_max: int = EXPLICIT_MAX, rounds: int = ROUNDS):
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
            raise PpdpError(f"a permutation's size must be a non-negative integer, got {n!r}")
        if n > MAX_SIZE:
            raise PpdpError(f"a keyed permutation of {n:,} ids is beyond the supported {MAX_SIZE:,}")
        if isinstance(rounds, bool) or not isinstance(rounds, (int, np.integer)) or rounds < 1:
            raise PpdpError(f"rounds must be a positive integer, got {rounds!r}")
        self.n = int(n)
        self._fwd: np.ndarray | None = None
        self._inv: np.ndarray | None = None
        self._tables: list[np.ndarray] | None = None
        if self.n <= explicit_max:
            self._fwd = rng.permutation(self.n).astype(np.int64)
            self._inv = np.empty_like(self._fwd)
            self._inv[self._fwd] = np.arange(self.n, dtype=np.int64)
            return
        bits = max(2, (self.n - 1).bit_length())
        self.widths = ((bits + 1) // 2, bits // 2)  # the halves' bits: left, right (the right at most the left)
        dt = np.uint16 if self.widths[0] <= 16 else np.uint32
        # round i maps (L, R) to (R, L xor F_i[R]): F_i reads the current right half's bits and
        # writes the left's; the widths swap every round
        self._tables = [rng.integers(0, 1 << self.widths[i % 2], size=1 << self.widths[1 - i % 2], dtype=dt)
                        for i in range(int(rounds))]

    @property
    def nbytes(self) -> int:
        """Bytes of the key (tables, or the explicit arrays)."""
        held = [a for a in (self._fwd, self._inv, *(self._tables or ())) if a is not None]
        return int(sum(a.nbytes for a in held))

    def _ids(self, ids) -> np.ndarray:
        a = np.asarray(ids)
        if a.size and not np.issubdtype(a.dtype, np.integer):
            raise PpdpError(f"ids must be integers, got {a.dtype}")
        a = a.astype(np.int64)
        if a.size and (int(a.min()) < 0 or int(a.max()) >= self.n):
            raise PpdpError(f"ids must lie in [0, {self.n:,})")
        return a

    def _feistel(self, x: np.ndarray, decrypt: bool) -> np.ndarray:
        """One application of the network (or of its inverse) to ids in ``[0, 2^b)``: the
        halves as narrow unsigned arrays, each round a gather and an in-place xor."""
        tables = self._tables
        assert tables is not None
        wl, wr = self.widths if not decrypt or len(tables) % 2 == 0 else self.widths[::-1]
        left = (x >> wr).astype(tables[0].dtype)
        right = (x & ((1 << wr) - 1)).astype(tables[0].dtype)
        f = np.empty_like(left)
        for t in (tables[::-1] if decrypt else tables):
            if decrypt:  # (L', R') = (R, L xor F(R))  →  (L, R) = (R' xor F(L'), L')
                np.take(t, left, out=f)
                np.bitwise_xor(right, f, out=right)
            else:
                np.take(t, right, out=f)
                np.bitwise_xor(left, f, out=left)
            left, right = right, left
            wl, wr = wr, wl
        return (left.astype(np.int64) << wr) | right

    def _walk(self, x: np.ndarray, decrypt: bool) -> np.ndarray:
        y = self._feistel(x, decrypt)
        out = np.flatnonzero(y >= self.n)
        while out.size:  # cycle-walking: a few passes, each over the ids still outside [0, n)
            y[out] = self._feistel(y[out], decrypt)
            out = out[y[out] >= self.n]
        return y

    def forward(self, ids) -> np.ndarray:
        """The images of ``ids`` (int64, same shape)."""
        x = self._ids(ids)
        if self._fwd is not None:
            return self._fwd[x]
        return self._walk(x.ravel(), False).reshape(x.shape)

    def inverse(self, ids) -> np.ndarray:
        """The preimages of ``ids``: ``inverse(forward(x)) == x``."""
        y = self._ids(ids)
        if self._inv is not None:
            return self._inv[y]
        return self._walk(y.ravel(), True).reshape(y.shape)


__all__ = ["EXPLICIT_MAX", "KeyedPermutation", "MAX_SIZE", "ROUNDS"]

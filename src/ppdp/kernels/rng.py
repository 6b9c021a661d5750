"""The random generator of a publication (SPEC §6: "a cryptographically secure generator by
default; an explicit seed makes a run reproducible and the release is then marked not fit for
publication").

- **No seed** (a release meant to be handed out): a NumPy :class:`~numpy.random.Generator` over
  an AES-128 counter-mode bit generator (``randomgen.AESCounter``) whose 128-bit key comes from
  the operating system's CSPRNG (:mod:`secrets`). AES in counter mode is the core of NIST
  SP 800-90A's CTR_DRBG; predicting its output, or recovering the key from it, is as hard as
  breaking AES. NumPy's own bit generators (PCG64, PCG64DXSM, Philox with a short key, MT19937)
  are statistical generators: PCG64's state has been recovered from its raw output
  (Bouillaguet, Martinez and Sauvage 2020), and nothing in their design rules out such attacks.
  A release exposes a function of the draws and the data, never raw output, but the privacy
  claims assume the draws are unpredictable to the receiver, so the generator should be one
  whose unpredictability is a standard assumption. AESCounter uses AES-NI where the CPU has
  it (as fast as PCG64 here: ~6 ns per double) and a portable AES otherwise. ``randomgen`` is
  maintained by a NumPy developer and plugs into ``numpy.random.Generator``, so every
  mechanism keeps calling the same Generator methods.
- **A seed** (a reproducible test run): NumPy's default PCG64 seeded through
  ``SeedSequence(seed)``, exactly as before, so seeded figures and tests stay reproducible.
  Such a release is marked ``fit_for_publication: false`` and the seed is kept only in the
  custodian-side file: whoever knows it can replay the randomisation.
"""

from __future__ import annotations

import secrets

import numpy as np

from ..errors import PpdpError

#: the bit generator of unseeded publications, for the manifest and the docs
CSPRNG_NAME = "AES-128-CTR (randomgen.AESCounter), 128-bit key from the OS CSPRNG"


def secure_generator() -> np.random.Generator:
    """A Generator over AES-128 in counter mode, keyed with 128 bits from :mod:`secrets`."""
    try:
        from randomgen import AESCounter
    except ModuleNotFoundError:  # a hard dependency: say how to fix a broken install
        raise PpdpError("publication without a seed needs the 'randomgen' package (pip install randomgen)") from None
    return np.random.Generator(AESCounter(key=secrets.randbits(128), counter=0))


def publication_rng(seed: int | None = None) -> np.random.Generator:
    """The generator of one publication: :func:`secure_generator` without ``seed``, else the
    reproducible PCG64 stream of ``seed`` (a non-negative integer)."""
    if seed is None:
        return secure_generator()
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise PpdpError(f"seed must be a non-negative integer, got {seed!r}")
    return np.random.default_rng(np.random.SeedSequence(int(seed)))


def full_width_seed(rng: np.random.Generator) -> int:
    """A signed 64-bit seed drawn from ``rng`` (the full width of a JVM ``long``, e.g. for
    Spark's ``rand(seed)``)."""
    return int(rng.integers(-(2**63), 2**63, dtype=np.int64))

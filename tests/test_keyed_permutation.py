"""The keyed pseudorandom permutation (ppdp.kernels.permutation): a bijection of [0, n) for any
n, its inverse, reproducible from the generator, bounded key, and where ids go over many keys."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from ppdp.errors import PpdpError
from ppdp.kernels.permutation import EXPLICIT_MAX, MAX_SIZE, KeyedPermutation
from ppdp.kernels.rng import publication_rng


def _check_bijection(p: KeyedPermutation, n: int) -> np.ndarray:
    x = np.arange(n)
    y = p.forward(x)
    assert y.dtype == np.int64 and y.shape == (n,)
    assert np.array_equal(np.sort(y), x)          # a permutation of [0, n)
    assert np.array_equal(p.inverse(y), x)        # inverse ∘ forward = id
    assert np.array_equal(p.forward(p.inverse(x)), x)
    return y


@pytest.mark.parametrize("n", [0, 1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 64, 127, 1000, 1023, 1024, 1025, 4097])
@pytest.mark.parametrize("explicit_max", [0, EXPLICIT_MAX])
def test_a_bijection_with_its_inverse_for_small_and_power_of_two_sizes(n, explicit_max):
    _check_bijection(KeyedPermutation(n, np.random.default_rng(n), explicit_max=explicit_max), n)


@pytest.mark.parametrize("n", [EXPLICIT_MAX + 1, 1 << 17, (1 << 18) - 1, 300_001])
def test_a_bijection_beyond_the_explicit_sizes(n):
    p = KeyedPermutation(n, np.random.default_rng(7))
    assert p._tables is not None  # the Feistel network, not an array of n entries
    _check_bijection(p, n)


@settings(max_examples=60, deadline=None)
@given(n=st.integers(0, 5000), seed=st.integers(0, 2**32 - 1), rounds=st.sampled_from([1, 2, 3, 4, 10]),
       explicit=st.booleans())
def test_a_bijection_for_random_sizes_rounds_and_keys(n, seed, rounds, explicit):
    p = KeyedPermutation(n, np.random.default_rng(seed), explicit_max=EXPLICIT_MAX if explicit else 0, rounds=rounds)
    y = _check_bijection(p, n)
    if n:  # any array of ids (repeats, any shape) maps as the ids do
        ids = np.random.default_rng(seed).integers(0, n, size=(3, 7))
        assert np.array_equal(p.forward(ids), y[ids]) and p.forward(ids).shape == (3, 7)
        assert np.array_equal(p.inverse(y[ids]), ids)


def test_the_same_generator_state_gives_the_same_permutation():
    n = 100_003
    a, b = (KeyedPermutation(n, np.random.default_rng(5)).forward(np.arange(n)) for _ in range(2))
    assert np.array_equal(a, b)
    assert not np.array_equal(a, KeyedPermutation(n, np.random.default_rng(6)).forward(np.arange(n)))
    # an unseeded publication's generator (AES-128-CTR, OS key): a bijection, and a fresh key each time
    c, d = (KeyedPermutation(n, publication_rng(None)).forward(np.arange(n)) for _ in range(2))
    assert np.array_equal(np.sort(c), np.arange(n)) and not np.array_equal(c, d)


def test_the_key_is_small():
    assert KeyedPermutation(1 << 26, np.random.default_rng(0)).nbytes <= 10 * (1 << 13) * 2  # 10 tables of ≤ 2^13 int16
    assert KeyedPermutation(EXPLICIT_MAX, np.random.default_rng(0)).nbytes == 2 * 8 * EXPLICIT_MAX
    big = KeyedPermutation(1 << 40, np.random.default_rng(0))
    x = np.random.default_rng(1).integers(0, 1 << 40, size=10_000)
    assert np.array_equal(big.inverse(big.forward(x)), x) and big.nbytes <= 10 * (1 << 20) * 4


def test_bad_input_is_refused():
    p = KeyedPermutation(10, np.random.default_rng(0), explicit_max=0)
    for bad in ([10], [-1], np.array([0.5])):
        with pytest.raises(PpdpError):
            p.forward(bad)
        with pytest.raises(PpdpError):
            p.inverse(bad)
    for n in (-1, True, 2.5, MAX_SIZE + 1):
        with pytest.raises(PpdpError):
            KeyedPermutation(n, np.random.default_rng(0))
    with pytest.raises(PpdpError):
        KeyedPermutation(10, np.random.default_rng(0), rounds=0)
    assert KeyedPermutation(0, np.random.default_rng(0)).forward(np.zeros(0, np.int64)).size == 0


def _p_value(counts: np.ndarray) -> float:
    expected = np.full(len(counts), counts.sum() / len(counts))
    return float(stats.chisquare(counts, expected).pvalue)


@pytest.mark.parametrize("n", [10, 37, 100])
def test_where_an_id_goes_is_uniform_over_keys(n):
    """The Feistel path forced at small n (the worst case: few bits per half): over 6,000 keys
    drawn from one seeded stream, the images of ids 0 and n − 1 are uniform on [0, n) (χ², a
    false-alarm rate of 1e-6 per test)."""
    rng = np.random.default_rng(2024)
    keys = 6000
    img = np.array([KeyedPermutation(n, rng, explicit_max=0).forward([0, n - 1]) for _ in range(keys)])
    for col in img.T:
        assert _p_value(np.bincount(col, minlength=n)) > 1e-6
    # and the pair (image of 0, image of n − 1): uniform over the ordered pairs of distinct ids, in 4 × 4 blocks
    block = np.minimum(img * 4 // n, 3)
    pairs = np.bincount(block[:, 0] * 4 + block[:, 1], minlength=16).astype(float)
    sizes = np.bincount(np.minimum(np.arange(n) * 4 // n, 3), minlength=4).astype(float)
    expected = np.outer(sizes, sizes) - np.diag(sizes)   # ordered pairs of distinct ids per block pair
    expected = expected.ravel() / expected.sum() * keys
    assert float(stats.chisquare(pairs, expected).pvalue) > 1e-6


def test_a_large_permutation_spreads_ids_uniformly():
    """Beyond the explicit sizes: over 2,000 keys the image of id 0 (16 equal bins) and, for one
    key, the images of 2^16 consecutive ids (64 bins) are uniform (χ², 1e-6)."""
    n = (1 << 20) + 3
    rng = np.random.default_rng(99)
    first = np.array([int(KeyedPermutation(n, rng).forward([0])[0]) for _ in range(2000)])
    assert _p_value(np.bincount(first * 16 // n, minlength=16)) > 1e-6
    y = KeyedPermutation(n, rng).forward(np.arange(1 << 16))
    assert _p_value(np.bincount(y * 64 // n, minlength=64)) > 1e-6

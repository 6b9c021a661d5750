"""Corruption attack (Wang et al. 2011, §6): closed form vs brute force, and on a release."""

import itertools
from collections import Counter

import numpy as np
from hypothesis import given, strategies as st

from ppdp.audit import corruption_posterior, corruption_table


def brute_force(real_values, known_values, sigma, m):
    """Average over every equally likely choice of which listed count-1 values are the σ fakes."""
    listed = Counter(real_values)
    fakes_pool = [v for v in range(m) if v not in listed]
    fakes = fakes_pool[:sigma]  # the actual fakes; the adversary only sees the listing
    shown = listed + Counter(fakes)
    known = Counter(known_values)
    left = len(real_values) - len(known_values)
    cand = [v for v, c in shown.items() if c == 1 and known[v] == 0]
    post = np.zeros(m)
    hyps = list(itertools.combinations(cand, sigma))
    for h in hyps:
        rem = shown - Counter(h) - known
        for v, c in rem.items():
            post[v] += c / left
    return post / len(hyps)


@given(st.lists(st.integers(0, 5), min_size=2, max_size=7), st.integers(0, 6), st.integers(0, 3), st.randoms())
def test_closed_form_equals_brute_force(values, q, sigma, rnd):
    m = 10
    q = min(q, len(values) - 1)
    known = rnd.sample(values, q)
    sigma = min(sigma, m - len(set(values)))
    real = np.bincount(values, minlength=m)[None, :]
    kn = np.bincount(known, minlength=m)[None, :] if known else np.zeros((1, m), int)
    fake = np.zeros((1, m), int)
    fake[0, [v for v in range(m) if v not in set(values)][:sigma]] = 1
    got = corruption_posterior(real, kn, fake)[0]
    np.testing.assert_allclose(got, brute_force(values, known, sigma, m), atol=1e-12)


def test_all_but_one_bound():
    # a bucket of 5 distinct values, 4 known: certainty 1 without fakes, 1/(1+σ) with σ fakes
    real = np.array([[1, 1, 1, 1, 1, 0, 0, 0]])
    known = np.array([[1, 1, 1, 1, 0, 0, 0, 0]])
    assert corruption_posterior(real, known).max() == 1.0
    for s in (1, 2, 3):
        fake = np.zeros_like(real)
        fake[0, 5:5 + s] = 1
        assert corruption_posterior(real, known, fake).max() == 1 / (1 + s)


def test_table_on_release(toy, make_rr):
    rel = make_rr(toy, 3, seed=3)
    tab = corruption_table(rel, sigma=2, seed=0).set_index("q")
    # q = 0: distinct values, 1/|g| without fakes; with fakes each listed value is real w.p. 3/5
    assert np.isclose(tab.loc["0", "max_posterior_no_fakes"], 1 / 3)
    assert np.isclose(tab.loc["0", "max_posterior_with_fakes"], (3 / 5) / 3)
    last = tab.loc["all but one"]
    assert last["max_posterior_no_fakes"] == 1.0
    assert np.isclose(last["max_posterior_with_fakes"], 1 / 3) and last["bound_all_but_one"] == 1 / 3
    # posterior without fakes grows with q
    assert (np.diff(tab.loc[["0", "1", "2"], "mean_max_posterior_no_fakes"].to_numpy()) > 0).all()


def test_table_uses_release_fakes(toy, make_rr):
    rel = make_rr(toy, 3, seed=3, fake_values=1)
    last = corruption_table(rel, seed=0).set_index("q").loc["all but one"]
    assert np.isclose(last["max_posterior_with_fakes"], 0.5) and last["sigma"] == 1

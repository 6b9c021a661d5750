import numpy as np
import pandas as pd
import pytest

import ppdp


def small_table(n=600, m=8, seed=0):
    rng = np.random.default_rng(seed)
    p = rng.dirichlet(np.full(m, 3.0))
    df = pd.DataFrame({"age": rng.integers(20, 30, n).astype(str), "sex": rng.choice(["F", "M"], n),
                       "dis": rng.choice([f"d{i}" for i in range(m)], n, p=p)})
    return ppdp.Table.from_pandas(df, quasi=["age", "sex"], sensitive=["dis"])


def round_robin_release(table, ell: int, seed: int = 0, fake_values: int = 0):
    """An ℓ-diverse bucketized release built without the bucketing planner: records sorted by
    SA value are dealt round-robin into N // ℓ buckets (distinct values when every SA count
    ≤ N // ℓ); thresholds f' = 1/ℓ for every value."""
    from ppdp.api import publish  # noqa: F401  (common manifest fields are added below)
    from ppdp.mechanisms.bucketization.mechanisms import publish_setting

    codes = np.sort(table.codes(table.sa))
    nb = table.n_rows // ell
    m = len(table.domain(table.sa))
    counts = np.bincount((np.arange(len(codes)) % nb) * m + codes, minlength=nb * m).reshape(nb, m)
    rng = np.random.default_rng(seed)
    rel = publish_setting(table, counts, np.full(m, 1.0 / ell), {"method": "round-robin (test)"}, rng, fake_values)
    rel.manifest.update(format="ppdp-release/1", family="bucketized", mechanism="test-round-robin", params={"l": ell},
                        seed=seed, fit_for_publication=False, library_version=ppdp.__version__)
    return rel


@pytest.fixture(scope="session")
def toy():
    return small_table()


@pytest.fixture(scope="session")
def make_rr():
    return round_robin_release

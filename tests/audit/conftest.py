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
    ≤ N // ℓ), published as an Anatomy(ℓ) plan (thresholds 1/ℓ) through the local engine."""
    from ppdp.api import stamp_manifest
    from ppdp.engines.local import apply_bucketized
    from ppdp.mechanisms.bucketization import SACounts

    codes = np.sort(table.codes(table.sa))
    nb = table.n_rows // ell
    m = len(table.domain(table.sa))
    counts = np.bincount((np.arange(len(codes)) % nb) * m + codes, minlength=nb * m).reshape(nb, m)
    rng = np.random.default_rng(seed)
    mech = ppdp.Anatomy(ell, fake_values=fake_values)
    plan = mech.plan_for_counts(SACounts.of_table(table), counts)
    return stamp_manifest(apply_bucketized(plan, table, rng), mech, seed)


@pytest.fixture(scope="session")
def toy():
    return small_table()


@pytest.fixture(scope="session")
def make_rr():
    return round_robin_release

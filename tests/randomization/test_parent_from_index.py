"""The empirical-Bayes parent distribution read from the count index's total (no pass over the
rows) equals the one counted from the rows, exactly, for every uniform-channel mechanism."""

import numpy as np
import pytest

import ppdp
from ppdp.estimators.randomized import UniformSetup, parent_distribution
from ppdp.queries.workloads import anatomy_workload


@pytest.mark.parametrize("mech", [ppdp.SDR(0.1, 0.3), ppdp.UniformPerturbation(0.1, 0.3), ppdp.GlobalRandomization(4)],
                         ids=["sdr", "uniform", "global"])
def test_parent_from_index_equals_rows(mech):
    t = ppdp.datasets.load("edu", n=4000, seed=2)
    rel = ppdp.publish(t, mech, seed=1)
    model = rel.transition_models()[0]
    _, masks = rel.resolve(anatomy_workload(t, 80, 0.05, seed=1))
    S = UniformSetup(rel, masks, model)
    np.testing.assert_array_equal(S.parent, parent_distribution(rel, model))

"""Write every uniform-channel estimator's estimates and intervals on a fixed workload as CSVs, for
``scripts/compare_results.py`` before and after a change to the randomized estimators.

    python scripts/dump_randomized_estimates.py OUT_DIR

OCC, a 60,000-row sample (seed 0); 1,500 point queries (seed 0); uniform perturbation and SDR at
(0.1, 0.3) and global randomization A (ℓ' = 5), each published with seed 0; inversion, MLE, EM,
Norm-Sub (closed form and bootstrap), empirical Bayes (the default, guard off, bootstrap with the
basic interval, the linear interval, and every strength × covariance × parents option). One CSV per
mechanism and estimator (estimate, se, lower, upper)."""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

import pandas as pd

import ppdp
from ppdp.estimators.randomized import EM, MLE, EmpiricalBayes, Inversion, NormSub
from ppdp.queries.workloads import point_workload


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    t = ppdp.datasets.load("occ", n=60000, seed=0)
    wl = point_workload(t, 1500, seed=0)
    mechs = {"uniform": ppdp.UniformPerturbation(0.1, 0.3), "sdr": ppdp.SDR(0.1, 0.3),
             "global": ppdp.GlobalRandomization(5)}
    ests = {"inversion": Inversion(), "mle": MLE(), "em": EM(), "norm-sub": NormSub(),
            "norm-sub-boot": NormSub(replicates=20), "eb-default": EmpiricalBayes(),
            "eb-guardoff": EmpiricalBayes(guard="off"), "eb-boot-basic": EmpiricalBayes(replicates=20, interval="basic"),
            "eb-linear": EmpiricalBayes(interval="linear")}
    for s, c, pa in itertools.product(("moments", "likelihood", "adjusted"), ("diagonal", "exact"), ("select", "average")):
        ests[f"eb-{s}-{c}-{pa}"] = EmpiricalBayes(strength=s, covariance=c, parents=pa)
    for mn, mech in mechs.items():
        rel = ppdp.publish(t, mech, seed=0)
        for en, e in ests.items():
            r = rel.estimate(wl, estimator=e)
            pd.DataFrame({"estimate": r.estimate, "se": r.se, "lower": r.lower, "upper": r.upper}).to_csv(
                out / f"{mn}_{en}.csv", index=False)
    print(f"{len(mechs) * len(ests)} files in {out}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(Path(sys.argv[1]))

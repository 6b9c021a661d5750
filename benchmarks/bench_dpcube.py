"""DPCube speed checks → benchmarks/results/dpcube.json.

Targets (issue 6): publish on the 2-D Adult cube (age × hours_per_week) ≤ 0.5 s; 100,000
range queries answered ≤ 1 s; a 4-D Adult cube (age, education, hours_per_week, sex)
publishes ≤ 5 s. Each timing is the median of repeated runs (after one warm-up).
"""

from __future__ import annotations

import json
import time

import numpy as np

import ppdp
from _common import provenance, timed, write_result
from ppdp.mechanisms.histogram import DPCube
from ppdp.queries.workloads import range_workload


def main() -> dict:
    t = ppdp.datasets.load("adult")
    dims2 = ["age", "hours_per_week"]
    dims4 = ["age", "education", "hours_per_week", "sex"]
    res = {**provenance(seed=0), "data": "adult (48,842 rows, bundled)", "results": {}}
    for eps in (0.1, 1.0):
        s = timed(lambda: ppdp.publish(t, DPCube(eps, dims2), seed=0))
        res["results"][f"publish_2d_eps{eps}"] = {"seconds": s, "target": 0.5, "ok": s <= 0.5}
        s4 = timed(lambda: ppdp.publish(t, DPCube(eps, dims4), seed=0), repeat=3)
        res["results"][f"publish_4d_eps{eps}"] = {"seconds": s4, "target": 5.0, "ok": s4 <= 5.0,
                                                  "cells": int(np.prod([len(t.domain(d)) for d in dims4]))}
    rel = ppdp.publish(t, DPCube(0.5, dims2), seed=0)
    wl = range_workload(t.domains, dims2, 100_000, seed=1)
    rel.answer(wl[:10])
    t0 = time.perf_counter()
    rel.answer(wl)
    end_to_end = time.perf_counter() - t0
    lo, hi, _ = rel.query_boxes(wl)
    boxes = timed(lambda: rel.answer_boxes(lo, hi))
    res["results"]["answer_100k_queries"] = {"seconds_end_to_end_from_Query_objects": end_to_end,
                                             "seconds_boxes_only": boxes, "target": 1.0, "ok": end_to_end <= 1.0}
    write_result("dpcube", res)
    return res


if __name__ == "__main__":
    print(json.dumps(main(), indent=2))

"""SIGKILL at random moments while a large release is saved (issue [verify], "Must show").

A synthetic OCC table of N rows (``ppdp.datasets.synthetic``) is published once; then a forked
child saves the release to one target and is killed with SIGKILL after a delay drawn
uniformly from [0, 1.2 × the measured save time], ``--kills`` times. After every kill the target
must be absent or a complete release that loads and verifies; at the end one more (normal) run
must leave no stale temporary directory. Writes ``benchmarks/results/kill_publish.json``.

    python benchmarks/bench_kill_publish.py --rows 10000000 --kills 50
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import random
import shutil
import signal
import tempfile
import time
from pathlib import Path

import ppdp
from ppdp.datasets.synthetic import synthetic
from ppdp.errors import ReleaseError
from ppdp.releases.base import custodian_path, load_release
from ppdp.releases.storage import stale_temps

from _common import provenance, write_result


def _save(rel, target):
    rel.save(target)
    os._exit(0)


def _clear(target: Path) -> None:
    if target.is_dir():
        shutil.rmtree(target)
    if custodian_path(target).exists():
        custodian_path(target).unlink()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--kills", type=int, default=50)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    t0 = time.perf_counter()
    table = synthetic(ppdp.datasets.load("occ"), a.rows, seed=a.seed)
    rel = ppdp.publish(table, ppdp.UniformPerturbation(retention=0.5), seed=a.seed)
    publish_s = time.perf_counter() - t0
    parent = Path(tempfile.mkdtemp(prefix="ppdp-kill-"))
    target = parent / "rel"
    ctx = mp.get_context("fork")
    t1 = time.perf_counter()
    p = ctx.Process(target=_save, args=(rel, target))
    p.start()
    p.join()
    save_s = time.perf_counter() - t1
    assert p.exitcode == 0 and ppdp.verify(target).ok
    rng = random.Random(a.seed)
    res = {"kills": 0, "absent": 0, "complete_at_target": 0, "partial_at_target": 0, "stale_temps_seen_after_kills": 0}
    delays = []
    for _ in range(a.kills):
        _clear(target)
        p = ctx.Process(target=_save, args=(rel, target))
        p.start()
        delay = rng.uniform(0, 1.2 * save_s)
        delays.append(delay)
        time.sleep(delay)
        os.kill(p.pid, signal.SIGKILL)
        p.join()
        res["kills"] += 1
        if not os.path.lexists(target):
            res["absent"] += 1
        else:
            try:
                ok = ppdp.verify(load_release(target)).ok
            except ReleaseError:
                ok = False
            res["complete_at_target" if ok else "partial_at_target"] += 1
        res["stale_temps_seen_after_kills"] += len(stale_temps(target))
    _clear(target)
    rel.save(target)  # the next run
    res["stale_temps_after_next_run"] = sum(n.startswith(".") for n in os.listdir(parent))
    res["final_release_verifies"] = ppdp.verify(target).ok
    shutil.rmtree(parent)
    out = {**provenance(a.seed, benchmark="kill_publish", rows=a.rows, kills=a.kills, mechanism="uniform(retention=0.5)",
                        dataset="synthetic OCC"),
           "publish_seconds": publish_s, "save_seconds": save_s, "kill_delay_range_s": [0, 1.2 * save_s], **res}
    print(out)
    print(write_result("kill_publish", out))


if __name__ == "__main__":
    main()

"""Compare two `ppdp reproduce` output directories number by number.

    python scripts/compare_results.py OLD_DIR NEW_DIR

Every CSV of OLD_DIR is read with its NEW_DIR counterpart (provenance comment lines skipped);
columns that measure time are ignored; numbers are compared to 1e-9 relative. Prints one line
per file and exits 1 if any file differs.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd

TIME_WORDS = ("time", "second", "runtime")


def compare(old: Path, new: Path) -> bool:
    same = True
    for f in sorted(old.rglob("*.csv")):
        g = new / f.relative_to(old)
        if not g.exists():
            print(f"MISSING {g}")
            same = False
            continue
        a, b = pd.read_csv(f, comment="#"), pd.read_csv(g, comment="#")
        if list(a.columns) != list(b.columns) or len(a) != len(b):
            print(f"SHAPE {f.relative_to(old)}: {a.shape} vs {b.shape}")
            same = False
            continue
        cols = [c for c in a.columns if not any(w in c.lower() for w in TIME_WORDS)]
        bad = []
        for c in cols:
            x, y = a[c], b[c]
            if x.dtype.kind in "fi" and y.dtype.kind in "fi":
                if not np.allclose(x.fillna(-9e9), y.fillna(-9e9), rtol=1e-9, atol=1e-12):
                    bad.append(c)
            elif not x.astype(str).equals(y.astype(str)):
                bad.append(c)
        ignored = [c for c in a.columns if c not in cols]
        print(f"{'SAME' if not bad else 'DIFF'} {f.relative_to(old)}" + (f" {bad}" if bad else "")
              + (f" (ignored timing columns {ignored})" if ignored else ""))
        same &= not bad
    return same


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    sys.exit(0 if compare(Path(sys.argv[1]), Path(sys.argv[2])) else 1)

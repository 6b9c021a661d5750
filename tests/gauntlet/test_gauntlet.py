"""The real-data gauntlet (tests/gauntlet/README.md): every public table under data/ taken end to end
through the CLI with nothing edited by hand — schema infer (checked against the reviewed schema
under schemas/), evaluate with one model per family, publish every family, verify each release
against the source, GROUP BY and range queries, audit, export, and the export README's recipe
run in an interpreter without ppdp.

A step listed in ``gauntlet_steps.KNOWN`` is a known bug: it must fail with that error (an
xfail), and passing makes the test fail (strict) until the entry is removed. A mechanism the
table is not eligible for must refuse it as documented (``refused``). Anything else that fails
fails the test.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location("gauntlet_steps", Path(__file__).with_name("gauntlet_steps.py"))
g = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("gauntlet_steps", g)
_spec.loader.exec_module(g)


def test_tables_are_as_documented():
    """At least 8 tables, each at most 20,000 rows, the data well under 5 MB, every table listed
    in the README with its source and licence."""
    assert len(g.TABLES) >= 8
    readme = (g.HERE / "README.md").read_text(encoding="utf-8")
    total = 0
    for name, cfg in g.TABLES.items():
        path = g.DATA / cfg["file"]
        total += path.stat().st_size
        assert f"`{cfg['file']}`" in readme, name
        assert (g.SCHEMAS / f"{name}.toml").exists(), name
    assert total < 5 * 2**20


#: the table the default run takes through the gauntlet (every family publishes on it); the
#: others are the slow set's
FAST_TABLES = ("anes96",)


@pytest.mark.parametrize("table", [pytest.param(t, marks=() if t in FAST_TABLES else pytest.mark.slow) for t in g.TABLES])
def test_gauntlet(table, tmp_path):
    res = g.run_table(table, tmp_path)
    print("\n" + g.format_table([res]))
    for s in res.steps:
        if s.status != "pass":
            print(f"  {s.name}: {s.status} {s.detail}")
    bad = [s for s in res.steps if s.status in ("FAIL", "XPASS")]
    assert not bad, "\n".join(
        f"{s.name}: " + ("passes now: remove its KNOWN entry" if s.status == "XPASS" else s.detail) for s in bad)
    assert any(s.status == "pass" for s in res.steps if s.name.startswith("publish:"))
    xfails = [s for s in res.steps if s.status == "xfail"]
    if xfails:
        pytest.xfail("; ".join(sorted({g.known(table, s.name)[1] for s in xfails})))

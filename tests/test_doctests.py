"""The examples in docstrings run as tests: every module of ``src/ppdp`` whose source holds a
``>>>`` example is imported and its doctests run (a new example is picked up by being written)."""

from __future__ import annotations

import doctest
import importlib
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"


def _modules_with_examples() -> list[str]:
    out = []
    for p in sorted((SRC / "ppdp").rglob("*.py")):
        if ">>>" not in p.read_text(encoding="utf-8"):
            continue
        parts = list(p.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out.append(".".join(parts))
    return out


MODULES = _modules_with_examples()


def test_the_examples_are_found():
    assert {"ppdp", "ppdp.metrics", "ppdp.provenance"} <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    tests = [t for t in finder.find(module, name) if t.examples]
    assert tests, f"{name}: '>>>' in the source but no doctest found"
    failures = []
    for t in tests:
        result = runner.run(t, out=failures.append)
        assert result.failed == 0, f"{t.name}:\n" + "".join(failures)

"""docs/mechanisms.md is the generated table of the registry (``python scripts/gen_docs.py``)."""

import importlib.util
from pathlib import Path

from ppdp import registry

ROOT = Path(__file__).resolve().parents[2]


def _gen():
    spec = importlib.util.spec_from_file_location("gen_docs", ROOT / "scripts" / "gen_docs.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_committed_mechanisms_page_is_current():
    text = _gen().render()
    committed = (ROOT / "docs" / "mechanisms.md").read_text()
    assert committed == text, "docs/mechanisms.md is out of date: run `python scripts/gen_docs.py`"


def test_page_lists_every_mechanism_and_parameter():
    text = _gen().render()
    for name, cls in registry.mechanisms().items():
        assert f"## {name}\n" in text and f"`ppdp.{cls.__name__}`" in text
        for p in cls._parameter_constraints:
            assert f"| `{p}` |" in text


def test_readme_points_to_the_generated_page():
    assert "docs/mechanisms.md" in (ROOT / "README.md").read_text()

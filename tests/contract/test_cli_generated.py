"""The publish commands are generated from the registry: one per mechanism, one option per
parameter (from its constraint), errors naming the flag, and a new class gets a command."""

import inspect
import json

import pytest
from click.testing import CliRunner

import ppdp
from safe_declarations import protected

from ppdp import registry
from ppdp.cli import cli
from ppdp.cli.publish import _make_command, build_mechanism, option_names, publish
from ppdp.errors import ParameterError
from ppdp.mechanisms.base import Mechanism
from ppdp.validation import Integer, Labels, Optional, Real


def test_one_command_per_mechanism():
    assert set(publish.commands) == set(registry.mechanisms())


@pytest.mark.parametrize("name", list(registry.mechanisms()))
def test_every_parameter_is_an_option(name):
    cls = registry.mechanism(name)
    cmd = publish.commands[name]
    by_dest = {p.name: p for p in cmd.params}
    for p in cls._parameter_constraints:
        assert "p_" + p in by_dest, f"{name}: no option for {p}"
        opt = by_dest["p_" + p]
        assert option_names(cls, p)[0].split("/")[0] in opt.opts
        required = cls.param_defaults()[p] is inspect.Parameter.empty
        assert opt.required == (required and not opt.multiple), p
    for common in ("input_path", "dataset", "quasi", "sensitive", "missing", "n_rows", "seed", "out"):
        assert common in by_dest
    r = CliRunner().invoke(cli, ["publish", name, "--help"])
    assert r.exit_code == 0 and "--out" in r.output


class Toy(Mechanism):  # no ``name`` in the class body: not registered
    family = "randomized"
    claim_model = "toy"
    _parameter_constraints = {"k": Integer(1, None), "rate": Optional(Real(0, 1)), "cols": Labels()}
    _parameter_help = {"k": "How many.", "rate": "A rate.", "cols": "Columns."}
    _cli_names = {"k": ("--k", "-k")}

    def __init__(self, k: int, cols, rate=None):
        self._set_params(locals())


def test_a_new_class_gets_a_command():
    Toy.name = "toy"
    try:
        cmd = _make_command(Toy)
        assert {"-k", "--k", "--rate", "--cols"} <= {o for p in cmd.params for o in getattr(p, "opts", [])}
        m = build_mechanism(Toy, {"p_k": 3, "p_rate": None, "p_cols": ("a,b", "c")})
        assert m == Toy(3, ["a", "b", "c"])
        with pytest.raises(ParameterError, match=r"^-k must be a whole number ≥ 1|^--k must be a whole number ≥ 1"):
            build_mechanism(Toy, {"p_k": 0, "p_cols": ("a",)})
    finally:
        del Toy.name


def test_a_flag_clashing_with_the_input_options_is_refused():
    class Clash(Toy):
        _parameter_constraints = {**Toy._parameter_constraints}
        _cli_names = {"k": "--seed"}

    Clash.name = "clash"
    with pytest.raises(TypeError, match="--seed is taken"):
        _make_command(Clash)


def test_several_values_after_one_flag(tmp_path):
    out = tmp_path / "c"
    r = CliRunner().invoke(cli, ["publish", "cells", "--dataset", "adult", "-n", "2000", "--dims", "age", "sex",
                                 "-e", "1", "--seed", "0", "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert json.loads((out / "manifest.json").read_text())["params"]["dims"] == ["age", "sex"]


def test_parameter_error_names_the_flag(tmp_path):
    r = CliRunner().invoke(cli, ["publish", "diverted", "--dataset", "occ", "-n", "500", "--l-prime", "1",
                                 "-o", str(tmp_path / "x")])
    assert r.exit_code == 2 and "error: --l-prime must be a whole number ≥ 2" in r.output
    r = CliRunner().invoke(cli, ["publish", "sdr", "--dataset", "edu", "-n", "500", "--rho1", "0.5", "--rho2", "0.3",
                                 "-o", str(tmp_path / "x")])
    assert r.exit_code == 2 and "error: --rho2: " in r.output
    assert not (tmp_path / "x").exists()


def test_summary_printed_after_publish(tmp_path):
    declared = protected(ppdp.datasets.load("edu", n=2000, seed=0))  # the custodian's protected EDU values
    r = CliRunner().invoke(cli, ["publish", "fprivacy", "--dataset", "edu", "-n", "2000", "--seed", "0",
                                 "--sensitive-value", ",".join(declared), "-o", str(tmp_path / "f")])
    assert r.exit_code == 0, r.output
    assert "verify: OK" in r.output and "mse" in r.output and "n_buckets" in r.output


def test_mechanisms_command():
    r = CliRunner().invoke(cli, ["mechanisms"])
    assert r.exit_code == 0
    assert all(name in r.output for name in registry.mechanisms())

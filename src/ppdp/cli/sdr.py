"""``ppdp publish sdr`` and ``ppdp publish uniform`` (SPEC §2.3)."""

from __future__ import annotations

import click

from . import publish
from .common import finish_publish, input_options, out_option, seed_option


@publish.command("sdr")
@input_options
@click.option("--rho1", type=float, required=True, help="Prior threshold ρ1: values with relative frequency ≤ ρ1 are protected (SA').")
@click.option("--rho2", type=float, required=True, help="Posterior bound ρ2 > ρ1.")
@click.option("--merge", "merge", type=click.Choice(["objective", "none", "min-size"]), default="objective", show_default=True,
              help="Phase 2: merge initial groups while the expected squared count error falls, not at all, or to --min-size.")
@click.option("--min-size", type=int, default=1000, show_default=True, help="Smallest sub-table for --merge min-size.")
@seed_option
@out_option
def sdr_cmd(table, rho1, rho2, merge, min_size, seed, out):
    """Small-domain randomization under (ρ1, ρ2)-privacy: ppdp publish sdr --dataset edu --rho1 0.1 --rho2 0.5 -o REL"""
    from ..api import publish as do_publish
    from ..mechanisms.randomization import SDR

    finish_publish(do_publish(table, SDR(rho1, rho2, merge=merge, min_size=min_size), seed=seed), out)


@publish.command("uniform")
@input_options
@click.option("--rho1", type=float, default=None, help="Prior threshold ρ1 (with --rho2).")
@click.option("--rho2", type=float, default=None, help="Posterior bound ρ2 (with --rho1).")
@click.option("--retention", type=float, default=None, help="Or: probability that a record keeps its own SA value (e.g. 1/ℓ').")
@seed_option
@out_option
def uniform_cmd(table, rho1, rho2, retention, seed, out):
    """Uniform perturbation of the whole SA domain: --rho1 R1 --rho2 R2, or --retention P (global randomization)."""
    from ..api import publish as do_publish
    from ..mechanisms.randomization import UniformPerturbation

    finish_publish(do_publish(table, UniformPerturbation(rho1=rho1, rho2=rho2, retention=retention), seed=seed), out)

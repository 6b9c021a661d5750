"""``ppdp publish diverted``: mechanism A' (ℓ'-diverted zero-differential privacy, SPEC §2.4)."""

from __future__ import annotations

from pathlib import Path

import click

from . import publish
from .common import finish_publish, load_table, out_option, seed_option


@publish.command("diverted")
@click.argument("args", nargs=-1, metavar="[INPUT] [SA …]")
@click.option("--dataset", type=click.Choice(["adult", "occ", "edu"]), help="Use a bundled table instead of INPUT.")
@click.option("--quasi", multiple=True, help="Non-sensitive column to publish (repeatable; default: the dataset's).")
@click.option("--sensitive", multiple=True,
              help="Sensitive column(s): repeat the option, list several after it (--sensitive age occupation) "
                   "or separate with commas. Each is randomized with its own decoy groups.")
@click.option("--l-prime", "l_prime", type=int, required=True, help="ℓ' ≥ 2: the size of every decoy group.")
@click.option("--missing", type=click.Choice(["error", "category"]), default="error", show_default=True,
              help="Missing values ('?' or empty): an error, or an explicit category.")
@click.option("-n", "--rows", "n_rows", type=int, default=None, help="Use a seeded sample of this many rows (OCC-n / EDU-n).")
@seed_option
@out_option
def diverted(args, dataset, quasi, sensitive, l_prime, missing, n_rows, seed, out):
    """Publish with mechanism A' (Fu, Wang, Wang & Wong): every SA value is replaced by a value
    drawn uniformly from its tuple's decoy group of ℓ' distinct values (groups built from tuple
    ids and SA values only, never published). N mod ℓ' random rows are dropped and reported."""
    from .. import Diverted, publish as do_publish
    from ..errors import PpdpError

    input_path, extra = None, []
    for a in args:  # INPUT is the first positional that is a file; the rest are further SA names
        if input_path is None and dataset is None and Path(a).is_file():
            input_path = a
        else:
            extra.append(a)
    if extra and not sensitive:
        raise PpdpError(f"unexpected argument(s) {extra}; SA columns go after --sensitive")
    sas = [c.strip() for s in (*sensitive, *extra) for c in s.split(",") if c.strip()]
    if input_path is None and dataset is None and args:
        raise PpdpError(f"input file {args[0]!r} not found")
    mech = Diverted(l_prime)
    if dataset is not None and sas and not quasi:  # a default quasi column named as SA becomes sensitive
        from ..datasets import DATASETS

        quasi = tuple(c for c in DATASETS[dataset]["quasi"] if c not in sas)
    table = load_table(input_path, dataset, quasi, sas, missing, n_rows)
    release = do_publish(table, mech, seed=seed)
    m = release.manifest
    if m["dropped"]:
        click.echo(f"dropped {m['dropped']} random row(s): N = {m['n_input']} is not a multiple of ℓ' = {l_prime} "
                   f"(N mod ℓ' = {m['dropped']}); {m['n_published']} rows published")
    finish_publish(release, out)

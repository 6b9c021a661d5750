"""``ppdp publish dpcube|cells|kdtree|consistency``: differentially private histograms."""

from __future__ import annotations

import click

from ..errors import PpdpError
from . import publish
from .common import finish_publish, load_table, out_option, seed_option


def _parse_bins(specs) -> dict:
    bins = {}
    for s in specs:
        if "=" not in s:
            raise PpdpError(f"--bins takes dim=e0,e1,..., got {s!r}")
        dim, edges = s.split("=", 1)
        try:
            bins[dim.strip()] = [float(e) for e in edges.split(",") if e.strip()]
        except ValueError:
            raise PpdpError(f"--bins {s!r}: edges must be numbers") from None
    return bins


def _histogram_options(f):
    f = click.option("--bins", "bins", multiple=True, metavar="DIM=E0,E1,...",
                     help="Explicit bin edges for a numeric dimension (repeatable).")(f)
    f = click.option("--epsilon", "-e", type=float, required=True, help="Total privacy budget ε (> 0).")(f)
    f = click.option("--dims", required=True, multiple=True, help="Histogram dimension (repeatable, or several after one --dims).")(f)
    f = click.option("-n", "--rows", "n_rows", type=int, default=None, help="Use a seeded sample of N rows (as `ppdp verify -n`).")(f)
    f = click.option("--dataset", type=click.Choice(["adult", "occ", "edu"]), help="Use a bundled table instead of INPUT.")(f)
    f = click.argument("positional", metavar="[INPUT] [DIM...]", nargs=-1)(f)
    return seed_option(out_option(f))


def _table(input_path, dataset, dims, n_rows):
    from ..table import Table

    if (input_path is None) == (dataset is None):
        raise PpdpError("give exactly one input: a CSV/Parquet path or --dataset adult|occ|edu")
    if n_rows is not None and n_rows <= 0:
        raise PpdpError(f"-n must be positive, got {n_rows}")
    if dataset is not None:
        return load_table(None, dataset, (), (), n_rows=n_rows)
    t = Table.read(input_path, quasi=list(dims), missing="category")
    return t.sample(n_rows, 0)[0] if n_rows is not None else t


def _dims(dims) -> list[str]:
    out = []
    for d in dims:
        out += [x for x in d.replace(",", " ").split() if x]
    return out


def _split_positional(positional):
    """``--dims age hours`` leaves ``hours`` positional: a .csv/.parquet path is INPUT, the rest dims."""
    inputs = [p for p in positional if p.lower().endswith((".csv", ".parquet", ".pq"))]
    if len(inputs) > 1:
        raise PpdpError(f"give one input file, got {inputs}")
    return (inputs[0] if inputs else None), [p for p in positional if p not in inputs]


def _run(mech_factory, positional, dataset, dims, epsilon, bins, n_rows, seed, out):
    from ..api import publish as _publish

    input_path, more_dims = _split_positional(positional)
    dims = _dims(dims) + more_dims
    mech = mech_factory(epsilon, dims, _parse_bins(bins))
    t = _table(input_path, dataset, dims, n_rows)
    rel = _publish(t, mech, seed=seed)
    finish_publish(rel, out)
    c = rel.certificate
    click.echo(f"  cube {c['shape']} over {c['dims']}; ε = {c['epsilon']:g} (cells {c['epsilon_cells']:g}, "
               f"partitions {c['epsilon_partitions']:g}); {c['n_partitions']} partitions; sampler {c['sampler']}")


@publish.command("dpcube")
@_histogram_options
@click.option("--alpha1-fraction", type=float, default=None, help="α1/α for phase I (default: the documented rule).")
@click.option("--xi0", type=float, default=None,
              help="kd-tree threshold ξ0 on the de-noised variance of a box's cells (default: off).")
@click.option("--count-threshold", type=float, default=None,
              help="θ: boxes whose noisy total is ≤ θ·sd(partition noise) are not split (default: the documented rule).")
def dpcube_cmd(positional, dataset, dims, epsilon, bins, n_rows, seed, out, alpha1_fraction, xi0, count_threshold):
    """DPCube two-phase histogram (Xiao et al.): ppdp publish dpcube --dataset adult --dims age hours_per_week -e 0.5 -o REL"""
    from ..mechanisms.histogram import DPCube

    _run(lambda e, d, b: DPCube(e, d, alpha1_fraction=alpha1_fraction, xi0=xi0,
                                        count_threshold=count_threshold, bins=b),
         positional, dataset, dims, epsilon, bins, n_rows, seed, out)


@publish.command("cells")
@_histogram_options
def cells_cmd(positional, dataset, dims, epsilon, bins, n_rows, seed, out):
    """Cell histogram (Algorithm 1): a noisy count for every cell of the cube."""
    from ..mechanisms.histogram import CellHistogram

    _run(lambda e, d, b: CellHistogram(e, d, bins=b), positional, dataset, dims, epsilon, bins, n_rows, seed, out)


@publish.command("kdtree")
@_histogram_options
@click.option("--depth", type=int, default=None, help="Number of split levels (default: the documented rule).")
def kdtree_cmd(positional, dataset, dims, epsilon, bins, n_rows, seed, out, depth):
    """Hierarchical kd-tree baseline (noisy medians + noisy leaves, Inan et al. 2010 style)."""
    from ..mechanisms.histogram import HierarchicalKDTree

    _run(lambda e, d, b: HierarchicalKDTree(e, d, depth=depth, bins=b), positional, dataset, dims, epsilon, bins, n_rows, seed, out)


@publish.command("consistency")
@_histogram_options
def consistency_cmd(positional, dataset, dims, epsilon, bins, n_rows, seed, out):
    """Hierarchical histogram with constrained inference (Hay et al. 2010) baseline."""
    from ..mechanisms.histogram import ConsistentHierarchy

    _run(lambda e, d, b: ConsistentHierarchy(e, d, bins=b), positional, dataset, dims, epsilon, bins, n_rows, seed, out)

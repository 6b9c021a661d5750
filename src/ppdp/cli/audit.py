"""``ppdp audit``: the adversary's best posterior per record class vs the model's bound, the
differential-inference demonstration and the corruption attack."""

from __future__ import annotations

import click

from . import cli
from .common import DATASET_NAMES, file_options, check_out_dir, load_release_and_source


@cli.command()
@click.argument("release", required=False, type=click.Path(exists=True, file_okay=False))
@click.option("--input", "input_path", type=click.Path(exists=True, dir_okay=False), help="Source table (CSV/Parquet): exact priors.")
@click.option("--dataset", type=click.Choice(DATASET_NAMES), help="Source table is a bundled dataset.")
@click.option("-n", "--rows", "n_rows", type=int, default=None, help="The source was a seeded sample of this many rows.")
@click.option("--differential-inference", "differential", is_flag=True,
              help="Instead of auditing a release: Monte-Carlo of Theorem 2 (Wang et al. 2011) for Laplace answers.")
@click.option("--epsilon", type=float, default=0.1, show_default=True, help="With --differential-inference: ε.")
@click.option("--samples", type=int, default=2_000_000, show_default=True, help="With --differential-inference: Monte-Carlo draws per x.")
@click.option("--sigma", type=int, default=None, help="Corruption attack: fake values per bucket (default: the release's own).")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--sensitive-value", "sensitive_value", multiple=True,
              help="Judge against these sensitive values (repeatable or commas; default: those the release's publisher "
                   "declared, else every value).")
@click.option("--attacks", "attacks", is_flag=True,
              help="Also run the attacks that do not assume the model (singling out, linkability, attribute inference, "
                   "and reconstruction for histograms; Giomi et al. 2023) on the source's records against held-back "
                   "control records, each next to the claim's bound; exit 1 when one beats its bound.")
@click.option("--control", "control_path", type=click.Path(exists=True, dir_okay=False),
              help="With --attacks: records of the same population held back from the release (CSV/Parquet, read like "
                   "--input). Default with --dataset NAME -n N: N rows of NAME outside the seeded sample.")
@click.option("--attack-targets", "attack_targets", type=int, default=500, show_default=True,
              help="With --attacks: targets (predicates) per attack on each of the training and control parts.")
@click.option("--out", "-o", "out", required=True, type=click.Path(file_okay=False), help="Output directory.")
@file_options
def audit(release, input_path, dataset, n_rows, differential, epsilon, samples, sigma, seed, out, sensitive_value=(),
          attacks=False, control_path=None, attack_targets=500, **file_spec):
    """Audit a RELEASE: best posterior per record class vs the bound, and the records whose
    sensitive value it discloses with certainty (exit 1 on either); writes audit_summary.csv, audit_classes.csv, posterior.png, report.html."""
    from ..audit import audit_release, corruption_table, differential_inference, write_audit, write_differential
    from ..errors import PpdpError

    import math

    if not math.isfinite(epsilon) or epsilon <= 0:
        raise PpdpError(f"--epsilon must be a finite number > 0, got {epsilon}")
    if samples < 2:
        raise PpdpError(f"--samples must be at least 2 (a Monte-Carlo variance needs two draws), got {samples}")
    if sigma is not None and sigma < 0:
        raise PpdpError(f"--sigma must be ≥ 0, got {sigma}")
    if (control_path or attack_targets != 500) and not attacks:
        raise PpdpError("--control and --attack-targets go with --attacks")
    if attacks and attack_targets < 10:
        raise PpdpError(f"--attack-targets must be at least 10, got {attack_targets}")
    if differential:
        if release:
            raise PpdpError("--differential-inference takes no RELEASE")
        check_out_dir(out)
        df = differential_inference(epsilon, n_samples=samples, seed=seed)
        path = _written(lambda: write_differential(df, out), out)
        for _, r in df.iterrows():
            click.echo(f"x = {r['x']:>7g}: Theorem 2 ×{r['theorem2_factor']:.6f}, exact ×{r['exact_factor']:.6f}, "
                       f"Monte-Carlo ×{r['mc_factor']:.6f} ± {r['mc_se']:.6f}; var {r['theorem2_var']:.3g} vs MC {r['mc_var']:.3g}")
        click.echo(f"report: {path}")
        return
    if not release:
        raise PpdpError("give a RELEASE directory (or --differential-inference)")
    check_out_dir(out)
    rel, table = load_release_and_source(release, input_path, dataset, n_rows, **file_spec)
    attack_rep = _attacks(rel, table, dataset, n_rows, control_path, attack_targets, seed, file_spec) if attacks else None
    declared = [x.strip() for v in sensitive_value for x in str(v).split(",") if x.strip()] or None
    res = audit_release(rel, table, declared)
    corr = corruption_table(rel, sigma=sigma if sigma is not None else None, seed=seed) if res.family == "bucketized" else None
    path = _written(lambda: write_audit(res, rel, out, release_path=str(release), corruption=corr, attacks=attack_rep), out)
    s = res.summary
    worst = s.assign(r=s["max_posterior"] / s["bound"]).sort_values("r", ascending=False).head(5)
    click.echo(f"audit of {release}: {res.family}/{res.mechanism}, bound {res.bound_name}")
    click.echo(res.headline())
    for n in res.notes:
        click.echo(f"  note: {n}")
    for _, r in worst.iterrows():
        click.echo(f"  {str(r['value'])[:30]:30s} max posterior {r['max_posterior']:.4f}  bound {r['bound']:.4f}  violations {r['violations']}")
    if attack_rep is not None:
        from ..audit.attacks import format_table

        click.echo(attack_rep.headline())
        for line in format_table(attack_rep):
            click.echo(line)
    click.echo(f"report: {path}")
    raise SystemExit(0 if res.ok and (attack_rep is None or attack_rep.ok) else 1)


def _attacks(rel, table, dataset, n_rows, control_path, targets, seed, file_spec):
    """--attacks: the release attacked with the source's records against held-back control records."""
    from ..audit.attacks import attack_release, dataset_control
    from ..errors import PpdpError
    from .common import release_source

    if table is None:
        raise PpdpError("--attacks needs the source table the release was published from (--input or --dataset)")
    if control_path:
        control = release_source(rel.schema, control_path, None, None, missing_values=rel.manifest.get("missing_values"),
                                 **file_spec)
    elif dataset and n_rows:
        control = dataset_control(dataset, int(n_rows))
    else:
        raise PpdpError("--attacks needs held-back control records: --control FILE, or --dataset NAME with -n N "
                        "(the rows outside the seeded sample)")
    return attack_release(rel, table, control, n_attacks=targets, seed=seed)


def _written(write, out):
    """Run a writer; an OS error (unwritable, full disk …) is one clear error naming --out."""
    from ..errors import PpdpError

    try:
        return write()
    except OSError as e:
        raise PpdpError(f"--out {str(out)!r}: cannot write the audit ({e.strerror or e})") from None

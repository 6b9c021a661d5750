"""``ppdp publish fprivacy`` and ``ppdp publish anatomy`` (SPEC §2.1, §5)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ..errors import PpdpError
from . import publish
from .common import finish_publish, input_options, out_option, seed_option


def _overrides(items) -> dict[str, float] | None:
    out = {}
    for item in items:
        label, sep, value = item.rpartition("=")
        if not sep or not label:
            raise PpdpError(f"--override takes LABEL=F', got {item!r}")
        try:
            out[label] = float(value)
        except ValueError:
            raise PpdpError(f"--override {item!r}: {value!r} is not a number") from None
    return out or None


def _associations(items) -> list[list[str]] | None:
    out = []
    for item in items:
        left, sep, sa_value = item.rpartition(":")
        col, sep2, qi_value = left.partition("=")
        if not sep or not sep2 or not col or not qi_value or not sa_value:
            raise PpdpError(f"--negative-association takes COLUMN=VALUE:SA_VALUE, got {item!r}")
        out.append([col, qi_value, sa_value])
    return out or None


def _fresh_out(out) -> None:
    if Path(out).exists():
        raise PpdpError(f"{out!r} exists; choose a new release directory")


def _fake_options(f):
    f = click.option("--keep-fake-flag/--strip-fake-flag", "fake_flag", default=True, show_default=True,
                     help="Keep the 'fake' column in st.parquet (needed to verify fakes; a real publication strips it).")(f)
    f = click.option("--negative-association", "assoc", multiple=True, metavar="COLUMN=VALUE:SA_VALUE",
                     help="Learned negative association: never inject SA_VALUE as a fake into a bucket holding COLUMN=VALUE (repeatable).")(f)
    f = click.option("--fake-values", type=int, default=0, show_default=True, help="σ fake SA values injected into every bucket.")(f)
    return f


def _publish_with_progress(table, mech, seed, seconds: float):
    """Run publish while a progress bar shows elapsed time against the solver's time limit."""
    import threading
    import time

    from tqdm import tqdm

    from ..api import publish as do_publish

    done = threading.Event()

    def tick():
        start = time.monotonic()
        with tqdm(total=round(seconds), desc="optimal (MILP, time limit)", unit="s", file=sys.stderr, leave=False) as bar:
            while not done.wait(0.5):
                bar.n = min(round(time.monotonic() - start), round(seconds))
                bar.refresh()

    th = threading.Thread(target=tick, daemon=True)
    th.start()
    try:
        return do_publish(table, mech, seed=seed)
    finally:
        done.set()
        th.join()


@publish.command("fprivacy")
@input_options
@click.option("--theta", type=float, default=8.0, show_default=True, help="Privacy coefficient θ in f'_i = min(1, θ·f_i + b).")
@click.option("--floor", type=float, default=0.02, show_default=True, help="The constant b in f'_i = min(1, θ·f_i + b).")
@click.option("--override", "overrides", multiple=True, metavar="LABEL=F'", help="Set one SA value's threshold (repeatable).")
@click.option("--sensitive-value", "sensitive_values", multiple=True,
              help="Only these SA values are sensitive; the others get f' = 1 (repeatable; default: all).")
@click.option("--method", type=click.Choice(["multi-size", "two-size", "optimal"]), default="multi-size", show_default=True)
@click.option("--max-bucket", type=int, default=50, show_default=True, help="Largest bucket size M'.")
@click.option("--time-limit", type=float, default=60.0, show_default=True, help="Seconds for --method optimal (MILP).")
@_fake_options
@seed_option
@out_option
def fprivacy_cmd(table, theta, floor, overrides, sensitive_values, method, max_bucket, time_limit, fake_values, assoc,
                 fake_flag, seed, out):
    """F'-privacy bucketization (Wang et al. 2011): ppdp publish fprivacy --dataset edu --theta 8 -o REL"""
    from ..api import publish as do_publish
    from ..mechanisms.bucketization import FPrivacy

    _fresh_out(out)
    mech = FPrivacy(theta=theta, floor=floor, overrides=_overrides(overrides), method=method, max_bucket=max_bucket,
                    fake_values=fake_values, negative_associations=_associations(assoc),
                    sensitive_values=list(sensitive_values) or None, time_limit=time_limit, publish_fake_flag=fake_flag)
    if method == "optimal":
        release = _publish_with_progress(table, mech, seed, time_limit)
    else:
        release = do_publish(table, mech, seed=seed)
    finish_publish(release, out)
    _summary(release)


@publish.command("anatomy")
@input_options
@click.option("--l", "ell", type=int, required=True, help="ℓ: every bucket holds ℓ (or ℓ+1) distinct SA values.")
@_fake_options
@seed_option
@out_option
def anatomy_cmd(table, ell, fake_values, assoc, fake_flag, seed, out):
    """Anatomy (Xiao & Tao 2006), ℓ-diverse buckets: ppdp publish anatomy --dataset occ --l 10 -o REL"""
    from ..api import publish as do_publish
    from ..mechanisms.bucketization import Anatomy

    _fresh_out(out)
    mech = Anatomy(ell, fake_values=fake_values, negative_associations=_associations(assoc), publish_fake_flag=fake_flag)
    release = do_publish(table, mech, seed=seed)
    finish_publish(release, out)
    _summary(release)


def _summary(release) -> None:
    c = release.manifest["certificate"]
    extra = ""
    if "proven_optimal" in c:
        extra = ", proven optimal" if c["proven_optimal"] else ", NOT proven optimal (time limit)"
    click.echo(f"  buckets: {c['n_buckets']:,}, loss {c['loss']:,}, MSE {c['mse']:.4f}{extra}")

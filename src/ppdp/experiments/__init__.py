"""Reproductions of the seed papers' experiments (``ppdp reproduce <paper>``).

Each module exposes ``run(out_dir: Path, quick: bool) -> Path`` that writes CSV + PNG per
figure and a ``summary.md``, and returns the summary's path.
"""

EXPERIMENTS = {
    "privacy-laws": "ppdp.experiments.privacy_laws",
    "small-count": "ppdp.experiments.small_count",
    "sdr": "ppdp.experiments.sdr",
    "dpcube": "ppdp.experiments.dpcube",
}

"""Randomization mechanisms: uniform perturbation (global randomization), SDR and A'.

Each module registers its estimator and verifier with ppdp.releases.randomized.
"""
from .uniform import UniformPerturbation  # noqa: F401
from .diverted import Diverted  # noqa: E402,F401
from .sdr import SDR  # noqa: F401

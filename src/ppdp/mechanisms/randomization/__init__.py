"""Randomization mechanisms: uniform perturbation, global randomization A, SDR, A' and the
Laplace answer baseline. Defining each class registers it (:mod:`ppdp.registry`)."""
from .uniform import GlobalRandomization, UniformPerturbation  # noqa: F401
from .diverted import Diverted  # noqa: E402,F401
from .sdr import SDR  # noqa: F401
from .laplace import LaplaceBaseline  # noqa: F401
from .subset import SubsetSelection  # noqa: E402,F401

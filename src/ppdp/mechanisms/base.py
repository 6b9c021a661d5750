"""Mechanisms are small immutable parameter objects (scikit-learn style): every parameter is
given to ``__init__`` and validated there; ``ppdp.publish(table, mechanism, seed)`` is the
only verb. A mechanism implements ``_publish(table, rng) -> Release`` and fills in the
family-specific parts of the manifest (``certificate`` and the files); ``publish`` adds the
common fields.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from ..errors import PpdpError


class Mechanism:
    name: ClassVar[str] = "abstract"
    family: ClassVar[str] = "abstract"

    def get_params(self) -> dict[str, Any]:
        """Parameters as given to ``__init__`` (JSON-serialisable)."""
        return {k: v for k, v in vars(self).items() if not k.startswith("_")}

    def _publish(self, table, rng: np.random.Generator):
        raise NotImplementedError

    def __setattr__(self, key, value):
        if getattr(self, "_frozen", False):
            raise AttributeError(f"{type(self).__name__} is immutable; make a new one")
        object.__setattr__(self, key, value)

    def _freeze(self) -> None:
        object.__setattr__(self, "_frozen", True)

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({args})"


def check_positive(name: str, value, integer: bool = False, minimum=None) -> None:
    ok = isinstance(value, (int, np.integer)) if integer else isinstance(value, (int, float, np.integer, np.floating))
    if not ok or isinstance(value, bool) or value != value:
        raise PpdpError(f"{name} must be a {'whole ' if integer else ''}number, got {value!r}")
    if (value <= 0 and minimum is None) or (minimum is not None and value < minimum):
        raise PpdpError(f"{name} must be {'> 0' if minimum is None else f'≥ {minimum}'}, got {value!r}")

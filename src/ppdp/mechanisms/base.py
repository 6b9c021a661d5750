"""Mechanisms are small immutable parameter objects (scikit-learn style).

A mechanism class declares ``name`` (its one registry name), ``family`` (the release family
it writes), ``_parameter_constraints`` (one :mod:`ppdp.validation` constraint per ``__init__``
parameter) and ``_parameter_help`` (one line per parameter, used by the generated CLI). Its
``__init__`` takes every parameter explicitly and calls ``self._set_params(locals())``: the
values are validated and normalised there, once, and stored immutably. Cross-parameter rules
go in ``_check_params``. Defining a class with a ``name`` registers it (:mod:`ppdp.registry`).

``ppdp.publish(table, mechanism, seed)`` is the only verb; a mechanism implements
``_publish(table, rng) -> Release``.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from ..registry import register_mechanism
from ..validation import Parametrized


class Mechanism(Parametrized):
    name: ClassVar[str] = ""
    family: ClassVar[str] = ""
    #: the privacy model the release claims (the certificate's ``model``)
    claim_model: ClassVar[str] = ""
    #: the paper (authors, year) the mechanism comes from
    paper: ClassVar[str] = ""
    #: the estimator ``release.answer`` uses when none is named
    default_estimator: ClassVar[str] = ""
    #: CLI spellings that differ from ``--kebab-case`` of the parameter: name → flag(s)
    #: (a Flag parameter may give "--on/--off")
    _cli_names: ClassVar[dict[str, str | tuple[str, ...]]] = {}

    def __init_subclass__(cls, **kw: Any):
        super().__init_subclass__(**kw)
        if cls.__dict__.get("name"):
            cls._check_constraint_table()
            register_mechanism(cls)

    def _publish(self, table, rng: np.random.Generator):
        raise NotImplementedError

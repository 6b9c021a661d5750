"""Mechanism A' for ℓ'-diverted zero-differential privacy (Fu, Wang, Wang & Wong, "Small
Count Privacy and Large Count Utility in Data Publishing"), SPEC §2.4.

Publishing (``Diverted(l_prime)``):

1. eligibility: every SA value occurs at most ⌊N/ℓ'⌋ times (a clear error otherwise);
2. N mod ℓ' rows chosen at random are removed (reported as ``dropped``) so N is a multiple of ℓ';
3. plan (:class:`DivertedPlan`, from the SA counts alone): the decoy schedule — Anatomy's group
   creation (Xiao & Tao 2006): repeatedly take the ℓ' SA buckets with the most remaining
   tuples (ties: smaller SA code first) (:func:`~ppdp.kernels.transition.decoy_schedule`);
4. apply (:meth:`DivertedPlan.apply`, per row): every row gets a random tuple id independent of
   its content, value s's k-th tuple by id goes to the k-th group holding s (the groups'
   value sets depend on the counts only, never on the id draw) — drawn directly as its
   effect, a uniformly random bijection from each value's rows to its groups — and its published SA is
   drawn uniformly from its group's ℓ' values (p = q = 1/ℓ', Theorem 1); the rows are
   shuffled and only D' and ℓ' are published — never the groups — with the certificate, whose
   leak figures come from the SA counts after the dropped rows (published as ``sa_counts``)
   and ℓ', never from the draw (:mod:`ppdp.kernels.swap_leak`).
Several sensitive attributes are randomized independently, each with its own groups (§7.2).

The claim is :class:`~ppdp.claims.diverted.DivertedClaim`; the estimators (4-state and full
transition) are in :mod:`ppdp.estimators.randomized`, the receiver's transition model in
:meth:`ppdp.releases.randomized.RandomizedRelease.transition_models`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from ...claims.diverted import DivertedClaim
from ...errors import InfeasibleError, SchemaError
from ...kernels.transition import (decoy_schedule, diverted_matrix, groups_of_rows, random_groups_of_rows,  # noqa: F401
                                   randomize_in_groups, receiver_counts)
from ...releases.randomized import RandomizedRelease
from ...validation import Integer
from ..base import Mechanism
from .uniform import dictionary_column, gather_columns, schema_of

__all__ = ["Diverted", "DivertedPlan", "decoy_groups", "decoy_schedule", "randomize_in_groups", "receiver_counts",
           "transition_matrix"]

#: T[x, y] = P(published y | true x) of the decoy schedule on given counts (kernels.transition)
transition_matrix = diverted_matrix


def decoy_groups(sa_codes: np.ndarray, ids: np.ndarray, l_prime: int, n_values: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Decoy groups as a function of Π_{id,S}(D) only.

    Returns ``(group_of_row, group_values)``: the group index of every row and the (G, ℓ')
    SA codes of every group. Value s's k-th tuple by id goes to the k-th group (in creation
    order) that holds s — Anatomy's "smallest id first".
    """
    sa = np.asarray(sa_codes)
    counts = np.bincount(sa, minlength=n_values or (int(sa.max()) + 1 if len(sa) else 1))
    v, g = decoy_schedule(counts, l_prime, narrow=True)
    return groups_of_rows(sa, ids, v, g, l_prime, len(counts))


@dataclass(frozen=True, eq=False)
class DivertedPlan:
    """The A' plan: per sensitive attribute, the decoy schedule ``(values, groups)`` built
    from its SA counts (after the dropped rows) — one slot per tuple, G = N/ℓ' groups, narrow
    (SA codes in the codes' dtype, int32 groups)."""

    l_prime: int
    counts: tuple  # one count vector per SA
    schedules: tuple  # one (values, groups) pair per SA

    def apply(self, sa_codes: list[np.ndarray], rng: np.random.Generator) -> list[np.ndarray]:
        """Published codes of every SA (per row, vectorised): random ids, groups, uniform draw."""
        out = []
        for own, counts, (v, g) in zip(sa_codes, self.counts, self.schedules):
            # random tuple ids, independent of the tuple contents and drawn afresh for every SA,
            # so that the SAs' decoy groups are independent (§7.2, the tensor-product model):
            # drawn as their effect, a uniformly random bijection from each value's rows to the
            # groups holding it (random_groups_of_rows; no id array)
            grp, gvals = random_groups_of_rows(own, v, g, self.l_prime, len(counts), rng)
            out.append(randomize_in_groups(grp, gvals, own, rng))
            del grp, gvals
        return out


def _kept(codes: np.ndarray, idx: np.ndarray | None) -> np.ndarray:
    """A column's narrow codes on the kept rows (``idx`` None: every row is kept, no copy)."""
    return codes if idx is None else codes[idx]


# -------------------------------------------------------------------------- mechanism
class Diverted(Mechanism):
    """A' with parameter ℓ' (``l_prime`` ≥ 2): ℓ'-diverted zero-differential privacy."""

    name = "diverted"
    family = "randomized"
    default_estimator = "full-eb"

    claim_model = "l'-diverted zero-differential privacy"
    paper = "Fu, Wang, Wang, Wong 2014"
    l_prime: int
    _parameter_constraints = {"l_prime": Integer(2, None)}
    _parameter_help = {"l_prime": "ℓ' ≥ 2: the size of every decoy group."}

    def __init__(self, l_prime: int):
        self._set_params(locals())

    def check_eligible(self, table) -> None:
        """Raise unless every SA has ≥ ℓ' values and max count ≤ ⌊N/ℓ'⌋ (SPEC §2.4)."""
        lp = self.l_prime
        if not table.sensitive:
            raise SchemaError("A' needs at least one sensitive attribute")
        n_keep = (table.n_rows // lp) * lp
        if n_keep == 0:
            raise InfeasibleError(f"the table has {table.n_rows} rows, fewer than ℓ' = {lp}")
        for sa in table.sensitive:
            dom = table.domain(sa)
            if lp > len(dom):
                raise InfeasibleError(f"ℓ' = {lp} exceeds the {len(dom)} values of the sensitive attribute {sa!r}")
            counts = table.counts(sa)
            worst = int(np.argmax(counts))
            if counts[worst] > n_keep // lp:
                most = table.n_rows // int(counts[worst])
                advice = (f"choose --l-prime {most} or less" if most >= 2 else
                          f"no ℓ' ≥ 2 fits, as {dom[worst]!r} holds more than half the rows: protect another "
                          "sensitive column, or use `ppdp publish global` or `ppdp publish uniform`, which have no "
                          "such eligibility condition")
                raise InfeasibleError(
                    f"table not eligible for ℓ' = {lp}: {sa} = {dom[worst]!r} occurs {int(counts[worst])} times, "
                    f"more than N/ℓ' = {n_keep // lp} (N = {n_keep} after dropping {table.n_rows - n_keep} rows); "
                    f"{advice}")

    def plan(self, counts: list[np.ndarray]) -> DivertedPlan:
        """The plan from the SA counts (one vector per sensitive attribute, after the dropped rows)."""
        cs = tuple(np.asarray(c, dtype=np.int64) for c in counts)
        return DivertedPlan(self.l_prime, cs, tuple(decoy_schedule(c, self.l_prime, narrow=True) for c in cs))

    def _publish(self, table, rng: np.random.Generator):
        lp = self.l_prime
        self.check_eligible(table)
        n_in = table.n_rows
        n_drop = n_in % lp
        keep = np.ones(n_in, dtype=bool)
        if n_drop:
            keep[rng.choice(n_in, size=n_drop, replace=False)] = False
        n = n_in - n_drop
        itype = np.int32 if n_in < 1 << 31 else np.int64
        idx = np.flatnonzero(keep).astype(itype) if n_drop else None  # None: every row is kept
        del keep
        own = [_kept(table.codes(sa), idx) for sa in table.sensitive]
        plan = self.plan([np.bincount(o, minlength=len(table.domain(sa))) for o, sa in zip(own, table.sensitive)])
        published = dict(zip(table.sensitive, plan.apply(own, rng)))
        plan_counts = plan.counts  # the SA counts after the dropped rows: the claim's leak figures come from them
        del own, plan
        shuffle = rng.permutation(np.arange(n, dtype=itype))  # the same permutation as rng.permutation(n)
        src_order = shuffle if idx is None else idx[shuffle]  # source rows in published order
        del idx
        cols = [*table.quasi, *table.sensitive]
        src_cols = [c for c in cols if c not in published]
        codes = dict(zip(src_cols, gather_columns([table.codes(c) for c in src_cols], src_order)))
        codes.update(zip(table.sensitive, gather_columns([published[c] for c in table.sensitive], shuffle)))
        del shuffle, src_order
        arrays = [dictionary_column(codes.pop(c), table.domain(c)) for c in cols]
        data = pa.Table.from_arrays(arrays, names=cols)
        claim = DivertedClaim.derive(lp, table.sensitive, n, n_drop, plan_counts, [table.domain(sa) for sa in table.sensitive])
        manifest = {"schema": schema_of(table, table.sensitive), "n_input": n_in, "n_published": n, "dropped": n_drop,
                    "certificate": claim.to_certificate()}
        return RandomizedRelease(manifest, {"data": data})

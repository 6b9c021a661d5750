"""The "randomized" release family (SPEC §5): ``data.parquet`` holds the published QI/NSA
columns unchanged, the randomized SA column(s) and, for SDR, a ``subtable`` column.

What a receiver knows is the release's :class:`~ppdp.kernels.transition.TransitionModel`
(one per sensitive attribute), built here from the typed claim and the files by
:meth:`RandomizedRelease.transition_models`: uniform perturbation and global randomization A
(one group, m × m uniform matrix), SDR (one uniform group per sub-table) and A' (the
receiver-side m × m matrix of the decoy schedule re-run on the published counts). The
estimators (:mod:`ppdp.estimators.randomized`) and the audit read this one model; ``verify``
checks the file format here and the claim through :meth:`Claim.check`.
"""

from __future__ import annotations

from typing import Callable, Sequence, cast

import numpy as np

from ..claims import claim_of
from ..claims.diverted import DivertedClaim
from ..claims.retention import RetentionClaim
from ..claims.rho import RhoClaim
from ..errors import ReleaseError
from ..queries import CountIndex
from ..kernels.transition import (FIT_ALPHA, TransitionModel, cell_pair_runs, decoy_group_types, pair_runs, pairs_fit,
                                  receiver_counts, row_groups)
from ..table import code_counts, code_dtype
from .base import Release, VerifyReport, register_family


@register_family("randomized")
class RandomizedRelease(Release):
    FILES = {"data": ("{quasi}", "{sensitive}", "subtable?")}
    @property
    def data(self):
        return self.tables["data"]

    @property
    def sensitive(self) -> list[str]:
        return list(self.schema["sensitive"])

    def column_codes(self, column: str) -> np.ndarray:
        """Codes of a data column in the narrowest integer type of its domain (cached per release
        and data table; read-only), decoded a dictionary chunk at a time."""
        key = ("codes", column, id(self.tables.get("data")))
        cache = self._answer_cache()
        if key not in cache:
            cache[key] = self.narrow_codes("data", column)
        return cache[key]

    def _answer_cache(self) -> dict:
        cache = self.__dict__.get("_answer_cache_dict")
        if cache is None:
            cache = self.__dict__["_answer_cache_dict"] = {}
        return cache

    def group_ids(self, model: TransitionModel) -> np.ndarray:
        """Per published row, the index of its group in ``model`` (the SDR sub-table; 0 for a
        one-group model), checked against the model (cached)."""
        key = ("groups", model.group_column, len(model.groups), id(self.tables.get("data")))
        cache = self._answer_cache()
        if key not in cache:
            if model.group_column is None:
                sub = np.zeros(self.data.num_rows, dtype=np.int64)
            else:
                sub = np.asarray(self.data.column(model.group_column).to_numpy(), dtype=np.int64)
                if sub.size and (sub.min() < 0 or sub.max() >= len(model.groups)):
                    raise ReleaseError(f"data.parquet has {model.group_column} ids outside the model's "
                                       f"{len(model.groups)} groups")
            sub.setflags(write=False)
            cache[key] = sub
        return cache[key]

    def joint_index(self, columns: Sequence[str]):
        """The answer path's count index for A' (cached per release and column set): rows keyed
        by the combination of their published SA values (row-major over the SA domains) over
        the NSA ``columns``."""
        cols = tuple(sorted(columns))
        key = ("joint", cols, id(self.tables.get("data")))
        cache = self._answer_cache()
        if key not in cache:
            sizes = [len(self.domains[s]) for s in self.sensitive]
            if len(sizes) > 1:
                keys = np.ravel_multi_index([self.column_codes(s).astype(np.int64) for s in self.sensitive], sizes)
            else:  # one SA: its narrow codes are the keys (no int64 copy)
                keys = self.column_codes(self.sensitive[0])
            cache[key] = CountIndex({c: self.column_codes(c) for c in cols}, {c: len(self.domains[c]) for c in cols},
                                    keys, int(np.prod(sizes)))
        return cache[key]

    def value_index(self, model: TransitionModel, columns: Sequence[str]):
        """The answer path's count index (cached per release and column set): rows keyed by
        their (group, published SA value) pair over the NSA ``columns``, so that one pass gives,
        per QI predicate, the published SA counts of every group. Only the pairs of the
        model's domains are keys (in the order of ``model.membership().ravel()``'s True
        entries): SDR's sub-table domains are disjoint, so there are m keys, not J·m."""
        cols = tuple(sorted(columns))
        key = ("index", model.attribute, model.group_column, len(model.groups), cols, id(self.tables.get("data")))
        cache = self._answer_cache()
        if key not in cache:
            m = model.n_values
            y = self.column_codes(model.attribute)
            member = model.membership().ravel()
            K = int(member.sum())
            pair = (np.cumsum(member) - 1).astype(code_dtype(K))
            keys = np.empty(len(y), dtype=pair.dtype)  # narrow keys, built a block at a time (no int64 of N)
            for lo, sub in self._group_blocks(model):
                k = y[lo:lo + len(sub)].astype(np.int64)
                k += sub * m
                if not member[k].all():
                    raise ReleaseError("a published SA value lies outside its sub-table's domain")
                keys[lo:lo + len(sub)] = pair[k]
            cache[key] = CountIndex({c: self.column_codes(c) for c in cols}, {c: len(self.domains[c]) for c in cols},
                                    keys, K)
        return cache[key]

    def _group_blocks(self, model: TransitionModel, block: int = 1 << 22):
        """(first row, int64 group ids) of every block of rows — the ``model``'s group column
        (checked against its groups), or zeros for a one-group model."""
        n = self.data.num_rows
        if model.group_column is None:
            for lo in range(0, n, block):
                yield lo, np.zeros(min(block, n - lo), dtype=np.int64)
            return
        pos = 0
        for ch in self.data.column(model.group_column).chunks:
            sub = ch.to_numpy(zero_copy_only=False)
            if len(sub) and (sub.min() < 0 or sub.max() >= len(model.groups)):
                raise ReleaseError(f"data.parquet has {model.group_column} ids outside the model's {len(model.groups)} groups")
            for a in range(0, len(sub), block):
                yield pos + a, sub[a:a + block].astype(np.int64)
            pos += len(sub)

    @property
    def claim(self):
        """The typed privacy claim of the certificate."""
        return claim_of(self.manifest)

    def published_counts(self, attribute: str) -> np.ndarray:
        """Counts of each published value of a sensitive attribute (or of any data column with a
        domain; int64; counted once per release and data table)."""
        key = ("counts", attribute, id(self.tables.get("data")))
        cache = self._answer_cache()
        if key not in cache:
            cache[key] = code_counts(self.column_codes(attribute), len(self.domains[attribute]))
        return cache[key].copy()

    def transition_models(self, counts: Sequence[np.ndarray] | None = None) -> tuple[TransitionModel, ...]:
        """The public randomization model of every sensitive attribute.

        ``counts`` (A' only, one vector per SA) replaces the receiver's counts in the decoy
        schedule — for analysis (what knowing the true counts would change); a receiver has
        only the published counts."""
        claim = self.claim
        sas = self.sensitive
        if isinstance(claim, DivertedClaim):
            lp = claim.l_prime
            if counts is None:
                counts = [receiver_counts(self.published_counts(s), lp) for s in sas]
            if len(counts) != len(sas):
                raise ReleaseError(f"{len(counts)} count vectors given for {len(sas)} sensitive attributes")
            return tuple(TransitionModel.diverted(s, np.asarray(c), lp) for s, c in zip(sas, counts))
        sa = sas[0]
        m = len(self.domains[sa])
        if isinstance(claim, RhoClaim) and claim.is_sdr:
            pos = {lab: i for i, lab in enumerate(self.domains[sa])}
            sts = claim.subtables
            try:
                domains = [[pos[lab] for lab in st["domain"]] for st in sts]
            except KeyError as e:
                raise ReleaseError(f"an SDR sub-table's domain holds {e.args[0]!r}, not a value of {sa!r}") from None
            return (TransitionModel.subtables(sa, m, domains, [float(st["gamma"]) for st in sts],
                                              [int(st["n"]) for st in sts]),)
        if isinstance(claim, (RhoClaim, RetentionClaim)):
            assert claim.gamma is not None  # the SDR claim was handled above
            return (TransitionModel.uniform(sa, m, float(claim.gamma), kind="uniform"),)
        raise ReleaseError(f"a randomized release with a {claim.model!r} claim has no transition model")

    def _verify(self, rep: VerifyReport, table) -> None:
        if not self.check_data_file(rep):
            return
        declared = [*self.schema.get("quasi", []), *self.schema.get("sensitive", [])]
        absent = [c for c in declared if c not in self.data.column_names or c not in self.domains]
        if not rep.check(bool(self.schema.get("sensitive")) and not absent, "every schema column has a domain and a data column",
                         f"schema columns without a domain or a data.parquet column: {absent or 'no sensitive attribute'}"):
            return
        rep.check(self.data.num_rows == int(self.manifest["n_published"]), "data.parquet has n_published rows",
                  f"data.parquet has {self.data.num_rows} rows, the manifest says {self.manifest['n_published']}")
        for c in self.data.column_names:
            if c in self.domains:
                self.column_codes(c)  # raises ReleaseError on a label outside the domain
        rep.checks.append("every published label lies in its domain")
        claim = self.claim
        expected = set(self.schema["quasi"]) | set(self.sensitive)
        if isinstance(claim, RhoClaim) and claim.is_sdr:
            expected.add("subtable")
        cols = set(self.data.column_names)
        rep.check(cols == expected, "data.parquet holds exactly the NSA and SA columns",
                  f"data.parquet columns {sorted(cols)} != {sorted(expected)}")
        claim.check(self, rep, table)
        if table is not None and not rep.problems:
            self.check_source_fit(rep, table)

    def source_fit(self, table) -> dict[str, dict]:
        """Per sensitive attribute, the goodness of fit of the published SA against the declared
        randomization given the source table (:func:`~ppdp.kernels.transition.randomization_fit`:
        Hoeffding bounds on W = Σ a_g[y], false-alarm rate ≤ ``FIT_ALPHA`` = 1e-6 per attribute).
        Rows are matched through their NSA combination only (the release is shuffled). Computed
        once per source table (the same code arrays)."""
        qi = list(self.schema["quasi"])
        for c in qi:
            if c not in table.column_names or list(table.domain(c)) != list(self.domains[c]):
                raise ReleaseError(f"the NSA column {c!r} of the source table does not match the release's")
        src = [table.codes(c) for c in [*qi, *self.sensitive] if c in table.column_names]
        stamp = (id(self.tables.get("data")), repr(self.manifest.get("certificate")), repr(self.manifest.get("dropped")),
                 repr(self.schema))  # the fit depends on the files and the claim, not only the source
        cached = getattr(self, "_fit_cache", None)
        if cached is not None and cached[2] == stamp and len(cached[0]) == len(src) and all(x is y for x, y in zip(cached[0], src)):
            return cached[1]
        pair_counts = self._pair_counts(table, qi)
        claim = self.claim
        out: dict[str, dict] = {}
        for model in self.transition_models():
            sa = model.attribute
            labels = list(self.domains[sa])
            if sa not in table.column_names or list(table.domain(sa)) != labels:
                raise ReleaseError(f"the sensitive column {sa!r} of the source table does not match the release's domain")
            xs, yp = table.codes(sa), self.column_codes(sa)  # narrow codes: no int64 copies
            m = len(labels)
            pairs, pair_n, ppairs, ppair_n = pair_counts(xs, yp, m)
            if isinstance(claim, DivertedClaim):
                sets = None
                if int(self.manifest.get("dropped", 0)) == 0 and len(xs) % claim.l_prime == 0:
                    counts = np.bincount(xs, minlength=m)
                    if counts.max(initial=0) <= len(xs) // claim.l_prime:
                        sets = np.unique(decoy_group_types(counts, claim.l_prime)[0], axis=0)  # from the schedule's runs: no per-slot work
                fit = pairs_fit(pairs, pair_n, ppairs, ppair_n, m, "decoy", l_prime=claim.l_prime, decoy_sets=sets)
            elif model.kind == "sdr":
                subs = [(grp.domain, float(grp.matrix[0, 0]), float(cast(float, grp.q))) for grp in model.groups]
                fit = pairs_fit(pairs, pair_n, ppairs, ppair_n, m, "subtables", subtables=subs)
            else:
                one = model.single
                fit = pairs_fit(pairs, pair_n, ppairs, ppair_n, m, "uniform", retention=float(one.matrix[0, 0]), q=float(cast(float, one.q)))
            out[sa] = fit
        self._fit_cache = (src, out, stamp)
        return out

    def _pair_counts(self, table, qi: list[str]) -> Callable[[np.ndarray, np.ndarray, int], tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
        """``(xs, yp, m) → (pairs, pair_n, ppairs, ppair_n)``: the (NSA combination, SA value)
        pairs of the source rows (true codes ``xs``) and of the published rows (codes ``yp``)
        with their row counts, keyed alike on both sides (:func:`~ppdp.kernels.transition.pairs_fit`).
        Keys are the mixed-radix cell of the NSA codes times m plus the value, one narrow key per
        row sorted in place (:func:`~ppdp.kernels.transition.cell_pair_runs`); for a cube of
        ≥ 2^63 (cell, value) entries, the ids of :func:`~ppdp.kernels.transition.row_groups`
        (a sort of the rows) and :func:`~ppdp.kernels.transition.pair_runs`."""
        dims = [len(self.domains[c]) for c in qi]
        src, pub = [table.codes(c) for c in qi], [self.column_codes(c) for c in qi]

        def runs(xs: np.ndarray, yp: np.ndarray, m: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
            s = cell_pair_runs(src, dims, xs, m)
            p = cell_pair_runs(pub, dims, yp, m)
            if s is None or p is None:
                gs, gp = row_groups(src, pub, dims)
                G = int(max(gs.max(initial=-1), gp.max(initial=-1))) + 1
                s, p = pair_runs(gs, xs, m, G), pair_runs(gp, yp, m, G)
            return s[0], s[1], p[0], p[1]
        return runs

    def qi_rows_match(self, table) -> bool:
        """The published NSA rows are the source's NSA rows minus the dropped rows (multisets):
        from the group sizes of the fit (:meth:`source_fit`), no further pass over the rows."""
        qi = list(self.schema["quasi"])
        if any(c not in table.column_names or list(table.domain(c)) != list(self.domains[c]) for c in qi):
            return False
        fit = next(iter(self.source_fit(table).values()))
        return int(fit["group_excess"]) == 0 and int(fit["group_deficit"]) == int(self.manifest.get("dropped", 0))

    def check_source_fit(self, rep: VerifyReport, table) -> None:
        """verify with the source: the published SA must fit the declared randomization (an
        unrandomized or under-randomized SA column fails; false-alarm rate ≤ 1e-6 per SA)."""
        if not rep.check(self.qi_rows_match(table), "published NSA rows = the source's NSA rows minus the dropped rows (multiset)",
                         "the published NSA rows are not the source's NSA rows minus the dropped rows"):
            return
        fits = self.source_fit(table)
        for sa, fit in fits.items():
            lo, hi = fit["lower"] - fit["slack"], fit["upper"] + fit["slack"]
            rep.facts[f"source fit of {sa}"] = (f"W = {fit['W']:.1f}, accepted range [{lo:.1f}, {hi:.1f}] "
                                                f"(n = {fit['n']}, false-alarm rate ≤ {FIT_ALPHA:g})")
            rep.check(fit["ok"], f"published {sa} fits the declared randomization given the source (false alarm ≤ {FIT_ALPHA:g})",
                      f"the published {sa} does not fit the declared randomization given the source: W = {fit['W']:.1f} "
                      f"outside [{lo:.1f}, {hi:.1f}] (n = {fit['n']}; an unrandomized or less randomized column than declared)")

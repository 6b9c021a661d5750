"""Attacks that do not assume the model, next to each claim's bound (SPEC §4).

The method is Giomi et al. (2023), "A Unified Framework for Quantifying Privacy Risk in
Synthetic Data" (the method of the ``anonymeter`` package): every attack is run twice, on
records of the **training** part the release was published from and on **control** records
held back from it, and the privacy risk is the success the release adds over what the
population already gives away,

    risk = (success_train − success_control) / (1 − success_control),

with 95% Wilson intervals on both success rates and the risk's interval by error propagation
(risk and interval clipped to [0, 1]: an attack that does worse on the training records than on
the control ones shows risk 0).
The attacks (:mod:`ppdp.audit.attack_records` says which records an attacker takes from each
release family):

- **singling out** (multivariate): predicates (equalities on categorical columns, half-lines
  toward the record's value on numeric ones, 3 columns) built from random attacker records and
  kept when they match exactly one attacker record; success = the predicate matches exactly
  one training (control) record. A control part of another size than the training part is
  subsampled to it (larger) or its success rescaled from the predicate's match rate p to
  n·p·(1−p)^(n−1) (smaller).
- **linkability**: the quasi-identifiers split into two halves (alternately); for a target the
  nearest attacker record (Gower distance) on each half; success = both halves point at the
  same record (identical copies count as one record). Where several records tie as nearest the
  attacker picks one at random and the success counted is its probability, |A ∩ B| / (|A|·|B|)
  for the two tied sets (one shared tie-break would decide every target with the same labels
  together, and a coarse table would swing between 0 and a whole group's share).
- **attribute inference**: the nearest attacker record on every column but the secret (the
  sensitive attribute) gives the guess; success = the guess is the target's value.
- **reconstruction** (histograms): the reconstructed cell counts x̂ (least squares, rounded)
  against the training table's counts n: the share of records reconstructed exactly on every
  dimension Σ min(x̂, n) / N; control: the same against the control table's counts.

**Formal bounds** (the claim's, never estimated from the attack itself except ε-DP's factor):

- attribute inference on a posterior-bounded release: a guess of value x is right with
  probability at most the claim's posterior bound B_x (f'_x; 1/ℓ; ρ2 for SA' values; 1/ℓ';
  for global randomization the model's πγ/(1 + (γ−1)π)), so success ≤ Σ_x (guesses of x)·B_x /
  targets (B_x = 1 for a value the claim does not bound);
- singling out and linkability on bucketized and randomized releases: **none** (the models bound
  the sensitive value's posterior; the quasi-identifiers are published as they are);
- every attack on an ε-DP release: success on a record in the input ≤ e^ε × success on it left
  out (the per-record privacy-loss bound, Dwork & Roth 2014; for singling out a heuristic
  reading of Cohen & Nissim 2020); the control stands for "left out", and the bound uses its
  upper interval end: min(1, e^ε · control_hi).

An attack **beats its bound** when the lower end of its 95% interval on the training records
lies above the bound — evidence, at that confidence, that the release does not keep its claim.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd

from ..errors import PpdpError, ReleaseError
from .attack_records import AttackData, attack_data

__all__ = ["AttackOutcome", "AttackReport", "ATTACKS", "BEATS_RULE", "attack_release", "attack_mechanism", "dataset_control",
           "format_table", "split_control",
           "wilson", "singling_out", "linkability", "inference", "reconstruction"]

ATTACKS = ("singling out", "linkability", "attribute inference", "reconstruction")
BEATS_RULE = ("an attack beats its bound when the lower end of its 95% Wilson interval on the training records lies "
              "above the model's bound")
Z95 = 1.959963984540054


def wilson(k: float, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of k successes in n trials."""
    if n <= 0:
        return math.nan, math.nan
    p = k / n
    den = 1 + z * z / n
    c = (p + z * z / (2 * n)) / den
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return max(0.0, c - h), min(1.0, c + h)


@dataclass
class AttackOutcome:
    """One attack on one release: successes on training and control targets, the risk, the bound."""

    attack: str
    n_train: int
    k_train: float
    n_control: int
    k_control: float
    bound: float | None = None
    bound_name: str = ""
    note: str = ""

    @property
    def train(self) -> float:
        return self.k_train / self.n_train if self.n_train else math.nan

    @property
    def control(self) -> float:
        return self.k_control / self.n_control if self.n_control else math.nan

    @property
    def train_ci(self) -> tuple[float, float]:
        return wilson(self.k_train, self.n_train)

    @property
    def control_ci(self) -> tuple[float, float]:
        return wilson(self.k_control, self.n_control)

    @property
    def risk(self) -> float:
        t, c = self.train, self.control
        if not (t == t and c == c):
            return math.nan
        return 0.0 if c >= 1 else max(0.0, (t - c) / (1 - c))  # below the control: the release adds nothing

    @property
    def risk_ci(self) -> tuple[float, float]:
        """Error propagation of the two Wilson half-widths (as Giomi et al. 2023), clipped to [0, 1]."""
        t, c = self.train, self.control
        if not (t == t and c == c) or c >= 1:
            return math.nan, math.nan
        st = (self.train_ci[1] - self.train_ci[0]) / (2 * Z95)
        sc = (self.control_ci[1] - self.control_ci[0]) / (2 * Z95)
        sr = math.sqrt((st / (1 - c)) ** 2 + (sc * (1 - t) / (1 - c) ** 2) ** 2)
        r = (t - c) / (1 - c)
        return min(1.0, max(0.0, r - Z95 * sr)), min(1.0, max(0.0, r + Z95 * sr))

    @property
    def beats(self) -> bool:
        """The attack's lower 95% end on the training records lies above the bound."""
        return self.bound is not None and self.train_ci[0] > self.bound + 1e-12

    def row(self) -> dict:
        tl, th = self.train_ci
        cl, ch = self.control_ci
        rl, rh = self.risk_ci
        return {"attack": self.attack, "targets": self.n_train, "success": self.train, "success_lo": tl, "success_hi": th,
                "control": self.control, "control_lo": cl, "control_hi": ch, "risk": self.risk, "risk_lo": rl,
                "risk_hi": rh, "bound": math.nan if self.bound is None else self.bound, "bound_name": self.bound_name,
                "beats_bound": self.beats, "note": self.note}


@dataclass
class AttackReport:
    """Every attack on one release (:func:`attack_release`)."""

    family: str
    mechanism: str
    outcomes: list[AttackOutcome]
    notes: list[str] = field(default_factory=list)
    seed: int = 0

    @property
    def table(self) -> pd.DataFrame:
        return pd.DataFrame([o.row() for o in self.outcomes])

    @property
    def beaten(self) -> list[AttackOutcome]:
        return [o for o in self.outcomes if o.beats]

    @property
    def ok(self) -> bool:
        return not self.beaten

    def headline(self) -> str:
        if self.beaten:
            return ("ATTACK BEATS THE BOUND: " + "; ".join(
                f"{o.attack} {o.train:.3f} [{o.train_ci[0]:.3f}, {o.train_ci[1]:.3f}] > bound {o.bound:.3f}"
                for o in self.beaten))
        worst = max(self.outcomes, key=lambda o: o.risk if o.risk == o.risk else -1, default=None)
        tail = f"; highest risk: {worst.attack} {worst.risk:.3f}" if worst is not None and worst.risk == worst.risk else ""
        return f"attacks: no attack beats its bound ({BEATS_RULE}){tail}"

    def to_dict(self) -> dict:
        return {"family": self.family, "mechanism": self.mechanism, "seed": self.seed, "rule": BEATS_RULE,
                "notes": self.notes, "attacks": [{**asdict(o), **o.row()} for o in self.outcomes]}


# ----------------------------------------------------------------------------- distances
def _gower_scales(data: AttackData, targets: np.ndarray, cols: list[int], pool: np.ndarray) -> list[float | None]:
    """Each column's Gower range over the pool and the targets (None: categorical, or one value)."""
    scale: list[float | None] = []
    for j in cols:
        nv = data.numeric[j]
        if nv is None:
            scale.append(None)
            continue
        vals = np.concatenate([nv[pool[:, j]], nv[targets[:, j]]])
        rng_ = float(np.nanmax(vals) - np.nanmin(vals)) if np.isfinite(vals).any() else 0.0
        scale.append(rng_ if rng_ > 0 else None)
    return scale


def _gower_chunks(data: AttackData, targets: np.ndarray, cols: list[int], pool: np.ndarray, scale):
    """(slice, Gower distances of those targets to every pool record), in chunks of ~4M entries."""
    step = max(1, 4_000_000 // max(len(pool), 1))
    for s in range(0, len(targets), step):
        t = targets[s:s + step]
        d = np.zeros((len(t), len(pool)))
        for j, sc in zip(cols, scale):
            if sc is None:
                d += t[:, j][:, None] != pool[:, j][None, :]
            else:
                nv = data.numeric[j]
                assert nv is not None
                diff = np.abs(nv[t[:, j]][:, None] - nv[pool[:, j]][None, :]) / sc
                d += np.where(np.isnan(diff), 1.0, np.minimum(diff, 1.0))
        yield slice(s, s + len(t)), d


def _gower_nn(data: AttackData, targets: np.ndarray, cols: list[int], pool: np.ndarray, rng) -> np.ndarray:
    """Index into ``pool`` of each target's nearest record on ``cols`` (Gower distance: a
    mismatch on a categorical column, |Δ|/range on a numeric one); ties broken by a random
    priority of the pool's records."""
    if not len(pool):
        raise ReleaseError("the release gives the attacker no record")
    scale = _gower_scales(data, targets, cols, pool)
    prio = rng.random(len(pool)) * 1e-6
    out = np.empty(len(targets), np.int64)
    for sl, d in _gower_chunks(data, targets, cols, pool, scale):
        out[sl] = np.argmin(d + prio[None, :], axis=1)
    return out


def _nearest_sets(data: AttackData, targets: np.ndarray, cols: list[int], pool: np.ndarray, scale):
    """(slice, boolean matrix: pool records at the least Gower distance from each target)."""
    for sl, d in _gower_chunks(data, targets, cols, pool, scale):
        yield sl, d <= d.min(axis=1, keepdims=True) + 1e-12


def _targets(records: np.ndarray, n: int, rng) -> np.ndarray:
    return records[rng.choice(len(records), size=min(n, len(records)), replace=False)]


# ----------------------------------------------------------------------------- the attacks
def inference(data: AttackData, n_attacks: int, rng) -> tuple[AttackOutcome, np.ndarray]:
    """Attribute inference (module doc); also returns the guesses on the training targets."""
    aux = [j for j in range(len(data.columns)) if j != data.secret]
    res = []
    for recs in (data.train, data.control):
        tg = _targets(recs, n_attacks, rng)
        nn = _gower_nn(data, tg, aux, data.synth, rng)
        guess = data.synth[nn, data.secret]
        res.append((len(tg), float(np.sum(guess == tg[:, data.secret])), guess))
    (nt, kt, g), (nc, kc, _) = res
    return AttackOutcome("attribute inference", nt, kt, nc, kc, note=f"secret {data.columns[data.secret]!r} from "
                         f"{len(aux)} other column(s)"), g


def linkability(data: AttackData, n_attacks: int, rng) -> AttackOutcome:
    """Linkability (module doc): the non-secret columns split alternately into two halves. A
    half's nearest records may tie (coarse columns: every record with the target's label); the
    attacker picks one of them at random, so a target's success is the probability that the two
    picks are the same record, |A ∩ B| / (|A|·|B|) for the tied sets A and B — its expectation
    over the tie-breaks, not one shared draw (one draw decides every target with the same
    labels at once, which makes the successes of those targets move together)."""
    aux = [j for j in range(len(data.columns)) if j != data.secret]
    if len(aux) < 2:
        return AttackOutcome("linkability", 0, 0, 0, 0, note="needs at least two non-secret columns")
    a, b = aux[0::2], aux[1::2]
    pool, _ = np.unique(data.synth, axis=0, return_inverse=True)  # identical copies are one record
    if not len(pool):
        raise ReleaseError("the release gives the attacker no record")
    res = []
    for recs in (data.train, data.control):
        tg = _targets(recs, n_attacks, rng)
        k = 0.0
        sets_b = dict((sl.start, m) for sl, m in _nearest_sets(data, tg, b, pool, _gower_scales(data, tg, b, pool)))
        for sl, ma in _nearest_sets(data, tg, a, pool, _gower_scales(data, tg, a, pool)):
            mb = sets_b[sl.start]
            k += float(np.sum((ma & mb).sum(axis=1) / (ma.sum(axis=1) * mb.sum(axis=1))))
        res.append((len(tg), k))
    halves = f"{'+'.join(data.columns[j] for j in a)} | {'+'.join(data.columns[j] for j in b)}"
    return AttackOutcome("linkability", res[0][0], res[0][1], res[1][0], res[1][1],
                         note=f"halves {halves}; ties broken at random (expected success)")


def _match_counts(records: np.ndarray, data: AttackData, cols: np.ndarray, vals: np.ndarray, ops: np.ndarray) -> np.ndarray:
    """How many of ``records`` each predicate matches: predicate i constrains columns cols[i]
    (−1: unused) to vals[i] with op 0 (=), 1 (≥) or 2 (≤), ops on numeric values."""
    out = np.zeros(len(cols), np.int64)
    num = [data.numeric[j] if data.numeric[j] is not None else None for j in range(len(data.columns))]
    step = max(1, 2_000_000 // max(len(records), 1))
    for s in range(0, len(cols), step):
        c, v, o = cols[s:s + step], vals[s:s + step], ops[s:s + step]
        ok = np.ones((len(c), len(records)), bool)
        for k in range(c.shape[1]):
            for j in np.unique(c[:, k]):
                if j < 0:
                    continue
                sel = c[:, k] == j
                rv = records[:, j]
                eq = rv[None, :] == v[sel, k][:, None]
                if num[j] is not None:
                    nv = num[j]
                    x, t = nv[rv][None, :], nv[v[sel, k]][:, None]
                    m = np.where(o[sel, k][:, None] == 1, x >= t, np.where(o[sel, k][:, None] == 2, x <= t, eq))
                else:
                    m = eq
                ok[sel] &= m
        out[s:s + step] = ok.sum(axis=1)
    return out


def singling_out(data: AttackData, n_attacks: int, rng, n_cols: int = 3, max_tries: int = 10) -> AttackOutcome:
    """Multivariate singling out (module doc)."""
    d = len(data.columns)
    k = min(n_cols, d)
    kept_c: list[np.ndarray] = []
    kept_v: list[np.ndarray] = []
    kept_o: list[np.ndarray] = []
    seen: set = set()
    for _ in range(max_tries):
        m = max(4 * n_attacks, 200)
        base = data.synth[rng.integers(0, len(data.synth), m)]
        cols = np.argsort(rng.random((m, d)), axis=1)[:, :k]
        vals = np.take_along_axis(base, cols, axis=1)
        ops = np.zeros_like(cols)
        isnum = np.array([data.numeric[j] is not None for j in range(d)])
        ops = np.where(isnum[cols], rng.integers(1, 3, cols.shape), 0)
        order = np.argsort(cols, axis=1)  # a canonical form, so a predicate is counted once
        cols, vals, ops = (np.take_along_axis(a, order, axis=1) for a in (cols, vals, ops))
        uniq = _match_counts(data.synth, data, cols, vals, ops) == 1
        before = len(kept_c)
        for c, v, o in zip(cols[uniq], vals[uniq], ops[uniq]):
            key = (tuple(c), tuple(v), tuple(o))
            if key not in seen:
                seen.add(key)
                kept_c.append(c)
                kept_v.append(v)
                kept_o.append(o)
        if len(kept_c) >= n_attacks or len(kept_c) - before < max(1, n_attacks // 50):  # the release holds no more
            break
    if not kept_c:
        return AttackOutcome("singling out", 0, 0, 0, 0, note="no predicate singles out an attacker record")
    c, v, o = (np.asarray(x[:n_attacks]) for x in (kept_c, kept_v, kept_o))
    n = len(c)
    kt = float(np.sum(_match_counts(data.train, data, c, v, o) == 1))
    ctrl, note = data.control, f"{k}-column predicates"
    if len(ctrl) > len(data.train):
        ctrl = ctrl[rng.choice(len(ctrl), len(data.train), replace=False)]
    cc = _match_counts(ctrl, data, c, v, o)
    if len(ctrl) < len(data.train):  # rescale the control's singling-out probability to the training size
        p = cc / len(ctrl)
        nt = len(data.train)
        kc = float(np.sum(nt * p * (1 - p) ** (nt - 1)))
        note += f"; control success rescaled from {len(ctrl):,} to {nt:,} records"
    else:
        kc = float(np.sum(cc == 1))
    return AttackOutcome("singling out", n, kt, n, kc, note=note)


def reconstruction(data: AttackData) -> AttackOutcome:
    """Reconstruction from a histogram (module doc)."""
    if data.cells is None:
        raise ReleaseError("reconstruction applies to histogram releases")
    x, tc, cc = data.cells
    nt, nc = int(tc.sum()), int(cc.sum())
    kt = float(np.minimum(x, tc).sum())
    kc = float(np.minimum(x, cc).sum()) * (nt / nc if nc else 0.0)  # the control's matches on the training scale
    return AttackOutcome("reconstruction", nt, kt, nt, kc,
                         note=f"{int(x.sum()):,} reconstructed records over {len(x):,} cells; exact match on "
                              f"{', '.join(data.columns)}")


# ----------------------------------------------------------------------------- bounds
def _posterior_bounds(release, data: AttackData) -> tuple[np.ndarray | None, str]:
    """B_x per code of the secret column (1 where the claim bounds nothing), and its name; None
    for a claim without a posterior bound."""
    from ..claims import claim_of

    b = claim_of(release.manifest).bound()
    labels = data.labels[data.secret]
    post = b.get("posterior")
    name = str(b.get("name", ""))
    prior = np.bincount(data.train[:, data.secret], minlength=len(labels)) / max(len(data.train), 1)
    if isinstance(post, Mapping):
        return np.array([float(post.get(x, 1.0)) for x in labels]), name
    if isinstance(post, (int, float)):
        if b.get("prior_at_most") is not None:  # (ρ1, ρ2): ρ2 for the SA' values only
            sap = b.get("sa_prime")
            mask = np.isin(labels, list(sap)) if sap is not None else prior <= float(b["prior_at_most"]) + 1e-12
            return np.where(mask, float(post), 1.0), name
        return np.full(len(labels), float(post)), name
    if b.get("gamma") is not None:  # global randomization: the model's exact posterior of a kept value
        g = float(b["gamma"])
        return prior * g / (1 + (g - 1) * prior), "πγ/(1+(γ−1)π) (retention model)"
    return None, name


def _bounds(release, data: AttackData, outcome: AttackOutcome, guesses: np.ndarray | None) -> None:
    cert = release.manifest.get("certificate") or {}
    eps = cert.get("epsilon") if data.family == "histogram" else None
    if eps is not None:
        f = math.exp(float(eps))
        outcome.bound = min(1.0, f * outcome.control_ci[1]) if outcome.n_control else None
        outcome.bound_name = f"e^ε × control upper end (ε = {float(eps):g})"
        return
    if data.family == "ldp" and outcome.attack == "attribute inference":
        from ..claims import claim_of

        # ε-local DP: posterior odds ≤ e^ε × prior odds, the prior being what the attacker infers
        # without the record's report — the control's success (its upper end)
        g = math.exp(float(claim_of(release.manifest).bound()["epsilon"]))
        c = outcome.control_ci[1] if outcome.n_control else None
        outcome.bound = None if c is None else float(c * g / (1 + (g - 1) * c))
        outcome.bound_name = "cγ/(1+(γ−1)c), c = control upper end, γ = e^ε (ε-local DP)"
        return
    if outcome.attack == "attribute inference" and guesses is not None:
        bx, name = _posterior_bounds(release, data)
        if bx is not None:
            outcome.bound = float(np.mean(bx[guesses])) if len(guesses) else None
            outcome.bound_name = f"Σ guesses × posterior bound ({name})"
            return
    outcome.bound = None
    outcome.bound_name = ("none: the model publishes the quasi-identifiers as they are" if outcome.attack != "attribute inference"
                          else "none: the claim bounds no posterior")


# ----------------------------------------------------------------------------- entry points
def attack_release(release, train, control, n_attacks: int = 500, seed: int = 0) -> AttackReport:
    """Run every attack that applies to ``release`` (published from the table ``train``) with
    the held-back ``control`` table; ``n_attacks`` targets (predicates) per part."""
    if isinstance(n_attacks, bool) or not isinstance(n_attacks, (int, np.integer)) or n_attacks < 10:
        raise PpdpError(f"n_attacks must be a whole number ≥ 10, got {n_attacks!r}")
    data = attack_data(release, train, control, seed)
    rng = np.random.default_rng(seed)
    outs: list[AttackOutcome] = []
    so = singling_out(data, n_attacks, rng)
    _bounds(release, data, so, None)
    outs.append(so)
    lk = linkability(data, n_attacks, rng)
    _bounds(release, data, lk, None)
    outs.append(lk)
    inf, guesses = inference(data, n_attacks, rng)
    _bounds(release, data, inf, guesses)
    outs.append(inf)
    if data.family == "histogram":
        rc = reconstruction(data)
        _bounds(release, data, rc, None)
        outs.append(rc)
    notes = [*data.notes, BEATS_RULE]
    return AttackReport(data.family, str(release.manifest.get("mechanism", "?")), outs, notes, seed)


def split_control(table, n: int | None = None, seed: int = 0):
    """(training part, control part): two disjoint seeded halves of ``table`` (at most ``n``
    rows each) — publish the first, hold the second back."""
    if table.n_rows < 20:
        raise PpdpError(f"attacks need at least 20 rows to split into training and control, got {table.n_rows}")
    half = table.n_rows // 2 if n is None else min(int(n), table.n_rows // 2)
    perm = np.random.default_rng(seed).permutation(table.n_rows)
    return table.take(np.sort(perm[:half])), table.take(np.sort(perm[half:2 * half]))


def attack_mechanism(table, mechanism, n_rows: int | None = 2000, n_attacks: int = 500, seed: int = 0,
                     sensitive_values=None) -> AttackReport:
    """Publish ``mechanism`` on a training half of ``table`` (at most ``n_rows`` rows, seeded),
    hold the other half back as control, and run :func:`attack_release`."""
    from ..api import publish

    train, control = split_control(table, n_rows, seed)
    rel = publish(train, mechanism, seed=seed, allow_disclosure=True,
                  sensitive_values=None if getattr(mechanism, "family", "") == "histogram" else sensitive_values)
    rep = attack_release(rel, train, control, n_attacks=n_attacks, seed=seed)
    rep.notes.insert(0, f"published from a training part of {train.n_rows:,} rows; {control.n_rows:,} rows held back "
                        f"as control (seed {seed})")
    return rep


def dataset_control(name: str, n: int, seed: int = 0):
    """The rows of the bundled table ``name`` that its seeded sample of ``n`` rows
    (:func:`ppdp.datasets.load` with ``n``, ``seed``: the same draw as ``Table.sample``) left
    out — at most ``n`` of them, seeded — as held-back control records."""
    from ..datasets import load

    full = load(name)
    if n >= full.n_rows:
        raise PpdpError(f"-n {n}: the sample is the whole table {name!r} ({full.n_rows:,} rows); no row is left for a "
                        "control part (give a smaller -n or --control)")
    drawn = np.random.default_rng(seed).choice(full.n_rows, size=n, replace=False)
    rest = np.setdiff1d(np.arange(full.n_rows), drawn)
    pick = np.sort(np.random.default_rng([seed, 1]).choice(rest, size=min(n, len(rest)), replace=False))
    return full.take(pick)


def format_table(rep: AttackReport) -> list[str]:
    """The attack table as terminal lines: success, control and risk with their 95% intervals,
    the bound and the verdict."""
    def ci(v, lo, hi):
        return "–" if v != v else f"{v:.3f} [{lo:.3f}, {hi:.3f}]"

    lines = [f"  {'attack':20s} {'success [95% CI]':22s} {'control [95% CI]':22s} {'risk [95% CI]':22s} bound"]
    for o in rep.outcomes:
        r = o.row()
        bound = f"{o.bound:.3f} ({o.bound_name})" if o.bound is not None else o.bound_name
        verdict = "  BEATS THE BOUND" if o.beats else ""
        lines.append(f"  {o.attack:20s} {ci(r['success'], r['success_lo'], r['success_hi']):22s} "
                     f"{ci(r['control'], r['control_lo'], r['control_hi']):22s} "
                     f"{ci(r['risk'], r['risk_lo'], r['risk_hi']):22s} {bound}{verdict}")
    return lines

"""Compare models side by side on one table (``ppdp evaluate``; SPEC §3, §5).

Every model is published ``trials`` times (seeded), every release answers ONE shared
workload through its own estimator (``Release.answer``), and the run writes

- ``workload.jsonl``: the workload (re-loadable with ``ppdp.Workload.load``);
- ``results.csv``: model, params, trial, query_id, true, estimate;
- ``summary.csv``: per model and selectivity bin: mean / median / 95th-percentile relative
  error, mean absolute error, the bucketization MSE (certificate ``mse``) where it applies,
  publish and query time; a model that cannot publish this table is a row with its error;
- ``runs.csv`` / ``models.csv``: per release, and per model: the claim in words, the largest
  posterior the audit finds, the records disclosed with certainty, ε, the error with its
  interval over trials (:func:`model_table`);
- ``report.html``: the report that decides (:mod:`ppdp.report.evaluation`): privacy next to
  error, a privacy-vs-error plot, one sentence per parameter, per-ε tables and plots for the
  differentially private models, and a recommendation by the rule :data:`RULE`
  (:func:`recommend`).

Differentially private histograms may leave out ``dims`` (the workload's columns: the range
workload's ``dims``, else the declared quasi-identifiers and sensitive attribute) and
``epsilon`` (``epsilons=[…]`` runs them once per value).

Models are written ``name:key=value,key=value`` (``fprivacy:theta=8``, ``dpcube:epsilon=1,
dims=age+sex``): the name is a registered mechanism (:func:`ppdp.registry.mechanisms`, the same
names as ``ppdp publish <name>``), and every parameter is checked against the mechanism's
constraints when the spec is parsed, before any work.
"""

from __future__ import annotations

import inspect
import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd

from . import metrics, registry
from .errors import ParameterError, PpdpError
from .provenance import machine_info
from .table import MISSING_LABEL

WORKLOADS = ("anatomy", "point", "range")

# selectivity bins (fraction of the table) plus the small-count set (true count ≤ 10)
SELECTIVITY_EDGES = (0.0, 0.001, 0.005, 0.01, 0.05, 1.0)
SMALL_COUNT = 10


# ----------------------------------------------------------------------------- model specs
@dataclass(frozen=True)
class ModelSpec:
    """A parsed ``name:key=value,…`` model: ``label`` is the spec as written (normalised)."""

    name: str
    params: dict = field(default_factory=dict)

    @property
    def label(self) -> str:
        if not self.params:
            return self.name
        return self.name + ":" + ",".join(f"{k}={_show(v)}" for k, v in self.params.items())

    def mechanism_class(self):
        return _mechanism_class(self.name)

    def build(self):
        """The mechanism object (its own ``__init__`` validates the values)."""
        return self.mechanism_class()(**self.params)


def _show(v) -> str:
    if isinstance(v, (list, tuple)):
        return "+".join(str(x) for x in v)
    if isinstance(v, dict):
        return json.dumps(v, separators=(",", ":"))
    return str(v)


def model_classes() -> dict[str, type]:
    """Model name → mechanism class: the registry's mechanisms."""
    return registry.mechanisms()


def _mechanism_class(name: str):
    cls = model_classes().get(str(name).strip().lower())
    if cls is None:
        raise ParameterError(f"unknown model {name!r}; valid models: {', '.join(model_classes())}", param="model")
    return cls


def _split_top(text: str, sep: str = ",") -> list[str]:
    """Split on ``sep`` outside brackets/braces/quotes (so JSON values may contain commas)."""
    cur: list[str]
    parts, depth, quote, cur = [], 0, None, []
    for ch in text:
        if quote:
            quote = None if ch == quote else quote
        elif ch in "\"'":
            quote = ch
        elif ch in "[{(":
            depth += 1
        elif ch in "]})":
            depth -= 1
        elif ch == sep and depth == 0:
            parts.append("".join(cur))
            cur = []
            continue
        cur.append(ch)
    parts.append("".join(cur))
    return [p.strip() for p in parts if p.strip()]


def parse_value(text: str):
    """``8`` → int, ``0.1`` → float, ``true``/``false``/``none``, JSON ``{…}``/``[…]``,
    ``a+b+c`` → list of strings, anything else → the string."""
    t = text.strip()
    low = t.lower()
    if low in ("true", "false"):
        return low == "true"
    if low in ("none", "null"):
        return None
    if t[:1] in "[{":
        try:
            return json.loads(t)
        except json.JSONDecodeError as e:
            raise PpdpError(f"malformed JSON value {t!r}: {e}") from None
    for conv in (int, float):
        try:
            return conv(t)
        except ValueError:
            pass
    if "+" in t:
        return [p.strip() for p in t.split("+") if p.strip()]
    return t


def parse_model_spec(spec: str, epsilon_later: bool = False) -> ModelSpec:
    """Parse ``name[:key=value,…]`` and validate it completely: the name against the registry,
    the parameter names and values against the mechanism's constraints (and its cross-parameter
    rules), so that a bad spec is a :class:`ParameterError` before any work."""
    name, _, rest = str(spec).strip().partition(":")
    name = name.strip().lower()
    if name not in model_classes():
        raise ParameterError(f"unknown model {name!r} in {spec!r}; valid models: {', '.join(model_classes())}", param="model")
    params: dict[str, Any] = {}
    for item in _split_top(rest):
        key, eq, val = item.partition("=")
        key = key.strip()
        if not eq or not key:
            raise ParameterError(f"model parameter {item!r} in {spec!r} is not key=value", param="model")
        if key in params:
            raise ParameterError(f"parameter {key!r} given twice in {spec!r}", param=key)
        params[key] = parse_value(val)
    out = ModelSpec(name, params)
    check_model_spec(out, spec, epsilon_later)
    return out


def check_model_spec(spec: ModelSpec, text: str | None = None, epsilon_later: bool = False):
    """Build the spec's mechanism once (validating every value); a ParameterError names the spec."""
    cls = _mechanism_class(spec.name)
    where = f" in {text or spec.label!r}"
    valid = list(cls._parameter_constraints)
    unknown = [k for k in spec.params if k not in valid]
    if unknown:
        raise ParameterError(f"model {spec.name!r} has no parameter {', '.join(map(repr, unknown))}{where}; "
                             f"valid parameters: {', '.join(valid)}", param=unknown[0])
    missing = [k for k, d in cls.param_defaults().items() if d is inspect.Parameter.empty and k not in spec.params]
    filled: dict[str, Any] = {}
    if cls.family == "histogram" and "dims" in missing:  # taken from the workload when the run starts
        missing.remove("dims")
        filled["dims"] = ["_dims_from_the_workload"]
    if "epsilon" in missing and epsilon_later:  # from --epsilons (evaluate checks that it is given)
        missing.remove("epsilon")
        filled["epsilon"] = 1.0
    if missing:
        raise ParameterError(f"model {spec.name!r} needs {', '.join(missing)}{where}", param=missing[0])
    try:
        return cls(**{**filled, **spec.params})
    except PpdpError as e:  # construction checks parameters only
        raise ParameterError(f"{e}{where}", param=getattr(e, "param", None)) from None


# ------------------------------------------------------------------------------- workload
def make_workload(table, kind: str, n_queries: int, seed: int, selectivity: float = 0.01, dims: Sequence[str] | None = None):
    from .queries.workloads import anatomy_workload, point_workload, range_workload

    if kind == "anatomy":
        return anatomy_workload(table, n_queries, selectivity, seed=seed)
    if kind == "point":
        return point_workload(table, n_queries, seed=seed)
    if kind == "range":
        d = list(dims) if dims else list(table.quasi)[:3]
        unknown = [c for c in d if c not in table.column_names]
        if unknown:
            raise PpdpError(f"unknown range dimension(s) {unknown}; the table has {table.column_names}")
        return range_workload({c: list(table.domain(c)) for c in d}, d, n_queries, seed=seed)
    raise PpdpError(f"unknown workload {kind!r}; choose one of {', '.join(WORKLOADS)}")


def sql_workload(table, statements: Sequence[str]):
    """Count statements in ``ppdp query``'s SQL (a condition, ``WHERE …`` or ``SELECT … COUNT(*)
    … GROUP BY …``) as a workload on ``table``: each statement expanded into its conjunctive
    queries on the table's domains (one per group with GROUP BY), as ``query_table`` expands it."""
    from .queries.sql import QueryError, expand, parse_statement
    from .queries.workload import Workload

    domains = {c: [str(v) for v in table.domain(c)] for c in table.column_names}
    numeric = {c: table.numeric_values(c) for c in table.column_names}
    queries: list = []
    for i, text in enumerate(statements):
        try:
            queries += expand(parse_statement(text), domains, numeric).queries
        except QueryError as e:
            raise QueryError(f"--workload: statement {i + 1}: {e}") from None
    if not queries:
        raise QueryError("--workload: the statements select no group of the table")
    return Workload(queries, meta={"generator": f"{len(statements)} SQL count statement(s)", "statements": list(statements)})


def selectivity_bin(true: np.ndarray, n_rows: int) -> np.ndarray:
    """Label of each query's selectivity bin (true / N)."""
    return metrics.selectivity_bin(true, n_rows, SELECTIVITY_EDGES)


# -------------------------------------------------------------------------------- running
@dataclass
class Evaluation:
    """What a run produced: long results, the summary, per-run records, the privacy of each
    model, the per-model error with intervals over trials, the recommendation, and the files."""

    results: pd.DataFrame
    summary: pd.DataFrame
    runs: pd.DataFrame
    out_dir: Path
    meta: dict
    models: pd.DataFrame = field(default_factory=pd.DataFrame)
    recommendation: dict = field(default_factory=dict)
    #: with ``attacks=True``: one row per (model, attack) (:func:`attack_rows`)
    attacks: pd.DataFrame = field(default_factory=pd.DataFrame)


def trial_seeds(seed: int, trials: int) -> list[int]:
    """Independent publish seeds per trial, derived from the run seed."""
    return [int(s.generate_state(1)[0]) for s in np.random.SeedSequence(seed).spawn(trials)]


def workload_columns(wl) -> list[str]:
    """The columns the workload's queries constrain, in first-use order."""
    cols: dict[str, None] = {}
    for q in wl:
        for p in q.predicates:
            cols.setdefault(p.column, None)
    return list(cols)


def expand_epsilons(specs: Sequence[ModelSpec], epsilons: Sequence[float] | None) -> list[ModelSpec]:
    """Each model with an ``epsilon`` parameter once per ε in ``epsilons`` (models without one
    unchanged), so ``--epsilons 0.1,1`` turns ``dpcube`` into ``dpcube:epsilon=0.1`` and
    ``dpcube:epsilon=1``."""
    if not epsilons:
        return list(specs)
    out: list[ModelSpec] = []
    for spec in specs:
        if "epsilon" in spec.mechanism_class()._parameter_constraints and "epsilon" not in spec.params:
            for e in epsilons:
                out.append(ModelSpec(spec.name, {"epsilon": float(e), **spec.params}))
        else:
            out.append(spec)
    return out


def _fill_histogram(spec: ModelSpec, wl_dims: Sequence[str], public_domains, table=None) -> tuple[dict, list[str]]:
    """A differentially private histogram's parameters completed for this run: ``dims`` from
    the workload (the columns its queries constrain — for the anatomy workload the table's
    declared quasi-identifiers and sensitive attribute), ``domains`` from the declared public
    domains when the spec names neither domains nor bins. Returns (params, what was filled)."""
    params = dict(spec.params)
    filled: list[str] = []
    if spec.mechanism_class().family != "histogram":
        return params, filled
    if "dims" not in params:
        params["dims"] = list(wl_dims)
        filled.append("dims=" + "+".join(wl_dims))
    dims = params["dims"] if isinstance(params["dims"], list) else [params["dims"]]
    if isinstance(public_domains, str):  # a bundled table's documented domains
        if "domains" not in params and not params.get("bins"):
            params["domains"] = public_domains
            filled.append(f"domains={public_domains}")
        return params, filled
    binned: dict[str, list[float]] = {}
    if table is not None and "bins" not in params and "domains" not in params:
        from .schema import bin_edges  # binned columns: their (public) edges, as `ppdp publish --schema` does

        declared = public_domains or {}  # a binned column declared with its missing cell: its bin labels + (missing) as domain
        binned = {d: list(e) for d in dims if d in table.column_names and d not in declared
                  and (e := bin_edges(table.domain(d))) is not None}
        if binned:
            params["bins"] = binned
            filled.append("bins of " + "+".join(binned))
    if public_domains is not None and "domains" not in params:
        doms = {d: list(public_domains[d]) for d in dims if d in public_domains and d not in binned}
        if doms:
            params["domains"] = doms
            filled.append("domains=declared")
    if "dims" not in spec.params and table is not None:
        _check_filled_cube(spec, dims, params, table)
    return params, filled


#: a histogram whose dims the run fills from the workload is refused above this many cells
FILLED_MAX_CELLS = 1 << 20


def _check_filled_cube(spec: ModelSpec, dims: Sequence[str], params: dict, table) -> None:
    """Dims filled from the workload (every quasi-identifier and the sensitive attribute of a
    wide table) can make a cube of millions of cells over a few thousand rows: every cell noise,
    minutes and gigabytes to build. Refused with the way out (the model's own dims)."""
    sizes = []
    doms: dict = params["domains"] if isinstance(params.get("domains"), dict) else {}
    for d in dims:
        if d in (params.get("bins") or {}):
            k = len(params["bins"][d]) - 1 + (MISSING_LABEL in table.domain(d))
        elif d in doms:
            k = len(doms[d])
        elif d in table.column_names:
            k = len(table.domain(d))
        else:
            return
        sizes.append(max(int(k), 1))
    cells = math.prod(sizes)
    if cells > FILLED_MAX_CELLS:
        few = ",".join(list(dims)[:2] + list(dims)[-1:]) if len(dims) > 3 else ",".join(dims)
        raise PpdpError(f"the histogram over every column the workload queries ({'+'.join(dims)}) has {cells:,} cells "
                        f"for {table.n_rows:,} rows (more than {FILLED_MAX_CELLS:,}): every cell would be noise and "
                        "building it would take minutes; evaluate a workload over fewer columns (--workload range "
                        f"--dims {few}: every model is then judged on them, the histogram built over them)")


def _privacy_of(rel, table, sensitive_values=None) -> dict[str, Any]:
    """The claim in words, the largest posterior the audit finds (over every value, over the
    values the claim bounds, and over the declared sensitive values), the records disclosed with
    certainty (the manifest's ``disclosure``) and those among them whose value is a declared
    sensitive one (what ``publish`` refuses), for one release."""
    from .audit import audit_release
    from .claims import claim_of, exposed_values

    out: dict[str, Any] = {"claim": "", "bound": "", "max_posterior": math.nan, "max_posterior_protected": math.nan,
                           "max_posterior_sensitive": math.nan, "records_certain": math.nan,
                           "records_certain_sensitive": math.nan, "records_certain_in_set": math.nan,
                           "disclosed_values": "", "epsilon": math.nan}
    try:
        out["claim"] = claim_of(rel.manifest).statement()
    except Exception as e:  # a claim that cannot state itself is shown as such
        out["claim"] = f"(claim not stated: {type(e).__name__})"
    cert = rel.manifest.get("certificate") or {}
    for key in ("epsilon", "total_epsilon"):
        if isinstance(cert.get(key), (int, float)):
            out["epsilon"] = float(cert[key])
            break
    d = rel.manifest.get("disclosure") or {}
    if d.get("records_certain") is not None:
        out["records_certain"] = float(d["records_certain"])
        exposed = exposed_values(d, d.get("sensitive_values"))
        out["records_certain_sensitive"] = float(sum(exposed.values()))
        out["disclosed_values"] = "+".join(sorted(exposed, key=lambda v: -exposed[v]))
        in_set = d.get("sensitive_set")  # records known to hold *one of* the declared values (ppdp.claims)
        out["records_certain_in_set"] = float(in_set.get("records_certain") or 0) if isinstance(in_set, dict) else 0.0
    try:
        a = audit_release(rel, table, sensitive_values)
        out["bound"] = a.bound_name
        out["max_posterior_sensitive"] = a.max_posterior_sensitive
        if len(a.summary):
            post = a.summary["max_posterior"].to_numpy(dtype=float)
            out["max_posterior"] = float(np.nanmax(post))
            bounded = a.summary["bound"].notna().to_numpy() if "bound" in a.summary else np.zeros(len(post), bool)
            if bounded.any() and not bounded.all():  # the claim protects some values only (ρ1, sensitive_values)
                out["max_posterior_protected"] = float(np.nanmax(post[bounded]))
    except Exception as e:  # a family the audit cannot handle: the claim still stands
        out["bound"] = f"(audit failed: {type(e).__name__}: {e})"
    return out


def evaluate(table, models: Sequence[str | ModelSpec], workload: "str | Sequence[Any]" = "anatomy", n_queries: int = 5000, trials: int = 3,
             seed: int = 0, out_dir: str | Path | None = None, selectivity: float = 0.01, dims: Sequence[str] | None = None,
             verify: bool = True, progress: bool = True, dataset_info: dict | None = None,
             epsilons: Sequence[float] | None = None, public_domains=None, max_posterior: float | None = None,
             level: float = 0.95, sensitive_values: Sequence[str] | None = None, attacks: bool = False,
             attack_rows: int = 2000) -> Evaluation:
    """Publish every model ``trials`` times and answer one shared workload (see module doc).

    ``epsilons``: run every model that takes an ε (and does not fix one) once per value.
    ``public_domains``: the declared public domains (column → labels, or a bundled table's
    name) given to differentially private histograms that declare none; by default the bundled
    table's documented domains when ``dataset_info['dataset']`` names one.
    ``sensitive_values``: the SA values that need protecting (default: every value), as
    ``ppdp.publish`` takes them; a model that discloses one of them for any record with
    certainty (a release ``publish`` would refuse) is never recommended. ``max_posterior``: the
    largest posterior on a sensitive value the custodian accepts — the recommendation only
    considers models whose audited posterior on every sensitive value is at most this.
    ``workload``: anatomy, point or range (``n_queries`` generated), or a :class:`Workload` of
    queries (e.g. :func:`sql_workload`). ``level``: the confidence level of the intervals over trials. ``attacks``: also attack every
    model (:func:`attack_rows`: a release of a training half of at most ``attack_rows`` rows, the
    other half held back as control)."""
    from tqdm.auto import tqdm

    from .api import publish
    from .queries import answer_exact

    from .table import Table

    if not isinstance(table, Table):
        raise PpdpError(f"evaluate() needs a ppdp.Table, got {type(table).__name__}")
    if isinstance(models, (str, ModelSpec)):
        models = [models]
    for name, v in (("trials", trials), ("n_queries", n_queries), ("seed", seed)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise PpdpError(f"{name} must be an integer, got {v!r}")
    if not isinstance(selectivity, (int, float)) or not 0 < selectivity <= 1:
        raise PpdpError(f"selectivity must be in (0, 1], got {selectivity!r}")
    given_wl: Any = None if isinstance(workload, str) else workload  # a Workload (e.g. sql_workload's)
    if given_wl is not None:
        workload = "given"
        if not len(given_wl):
            raise PpdpError("the workload holds no query")
    elif workload not in WORKLOADS:
        raise PpdpError(f"unknown workload {workload!r}; choose one of {', '.join(WORKLOADS)}")
    if trials < 1:
        raise PpdpError(f"trials must be ≥ 1, got {trials}")
    if n_queries < 1:
        raise PpdpError(f"queries must be ≥ 1, got {n_queries}")
    if max_posterior is not None and not (isinstance(max_posterior, (int, float)) and 0 < max_posterior <= 1):
        raise ParameterError(f"max_posterior must be in (0, 1], got {max_posterior!r}", param="max_posterior")
    if not 0 < level < 1:
        raise ParameterError(f"level must be in (0, 1), got {level!r}", param="level")
    if sensitive_values is not None:
        sensitive_values = [str(v) for v in ([sensitive_values] if isinstance(sensitive_values, str) else sensitive_values)]
        known = {str(v) for c in table.sensitive for v in table.domain(c)}
        unknown = [v for v in sensitive_values if v not in known]
        if unknown:
            raise ParameterError(f"sensitive value {unknown[0]!r} is not a value of the sensitive column "
                                 f"(values: {', '.join(sorted(known)[:12])})", param="sensitive_values")
    for e in epsilons or ():
        if isinstance(e, bool) or not isinstance(e, (int, float)) or not (e > 0 and math.isfinite(e)):
            raise ParameterError(f"every epsilon must be a finite number > 0, got {e!r}", param="epsilons")
    specs = [m if isinstance(m, ModelSpec) else parse_model_spec(m, epsilon_later=True) for m in models]
    if not specs:
        raise PpdpError("give at least one --model")
    specs = expand_epsilons(specs, epsilons)
    for spec in specs:
        if "epsilon" in spec.mechanism_class()._parameter_constraints and "epsilon" not in spec.params \
                and spec.mechanism_class().param_defaults().get("epsilon") is inspect.Parameter.empty:
            raise ParameterError(f"model {spec.name!r} needs epsilon: write {spec.name}:epsilon=1 or give --epsilons",
                                 param="epsilons")
    for spec in specs:  # every value validated before any work
        check_model_spec(spec)
    if len({s.label for s in specs}) != len(specs):
        raise PpdpError("a model is given twice: " + ", ".join(sorted({s.label for s in specs if [t.label for t in specs].count(s.label) > 1})))
    wl = given_wl if given_wl is not None else make_workload(table, workload, n_queries, seed, selectivity, dims)
    used = workload_columns(wl)
    if workload != "range":  # in the table's declared order: quasi-identifiers, then the sensitive attribute
        roles = [*table.quasi, *table.sensitive]
        used = [c for c in roles if c in used] + [c for c in used if c not in roles]
    wl_dims = used or [*table.quasi, *table.sensitive]
    ds = (dataset_info or {}).get("dataset")
    if public_domains is None and isinstance(ds, str) and ds.lower() in _bundled():
        public_domains = ds.lower()
    true = answer_exact(table, wl).astype(np.float64)
    seeds = trial_seeds(seed, trials)

    res_parts, runs = [], []
    bar = tqdm(total=len(specs) * trials, desc="evaluate", unit="release", disable=not progress)
    for spec in specs:
        for trial, s in enumerate(seeds):
            bar.set_postfix_str(f"{spec.label} #{trial}")
            rec: dict[str, Any] = {"model": spec.label, "name": spec.name, "params": json.dumps(spec.params, default=str),
                                   "trial": trial, "seed": s, "error": "", "filled": ""}
            try:
                params, filled = _fill_histogram(spec, wl_dims, public_domains, table)
                rec["filled"] = ", ".join(filled)
                mech = spec.mechanism_class()(**params)
                t0 = time.perf_counter()
                # published even where publish would refuse it: the run shows why such a model is passed over
                rel = publish(table, mech, seed=s, allow_disclosure=True,
                              sensitive_values=None if spec.mechanism_class().family == "histogram" else sensitive_values)
                t1 = time.perf_counter()
                stated = rel.estimate(wl, level=level)  # the estimator's own standard errors (NaN: not stated)
                est = np.asarray(stated.estimate, dtype=np.float64)
                t2 = time.perf_counter()
                se = np.asarray(stated.se, dtype=np.float64)
                rec["stated_rmse"] = float(np.sqrt(np.mean(se ** 2))) if np.isfinite(se).all() and len(se) else math.nan
                rec["observed_rmse"] = float(np.sqrt(np.mean((est - true) ** 2))) if len(est) else math.nan
                rec.update(family=rel.family, publish_s=t1 - t0, query_s=t2 - t1,
                           mse=_certificate_mse(rel), n_published=rel.manifest.get("n_published"))
                rec.update(_privacy_of(rel, table, sensitive_values))
                if verify:
                    rep = rel.verify(table)
                    rec["verified"] = rep.ok
                    if not rep.ok:
                        rec["error"] = "verify failed: " + "; ".join(rep.problems[:3])
                res_parts.append(pd.DataFrame({"model": spec.label, "params": rec["params"], "trial": trial,
                                               "query_id": np.arange(len(wl)), "true": true, "estimate": est}))
            except Exception as e:  # a model that fails on this table is a row, not a crash
                # a refusal is its one line; anything else is a fault and keeps its exception's name
                rec["error"] = str(e) if isinstance(e, PpdpError) else f"{type(e).__name__}: {e}"
            runs.append(rec)
            bar.update(1)
            if rec["error"] and not rec.get("family"):
                bar.update(trials - trial - 1)  # the other trials would fail the same way
                break
    bar.close()

    results = pd.concat(res_parts, ignore_index=True) if res_parts else pd.DataFrame(
        columns=["model", "params", "trial", "query_id", "true", "estimate"])
    runs_df = pd.DataFrame(runs)
    summary = summarize(results, runs_df, table.n_rows, [s.label for s in specs])
    metric = "mean_abs_err" if workload == "range" else "mean_rel_err"
    model_df = model_table(results, runs_df, specs, level)
    rec_ = recommend(model_df, metric, max_posterior, level)
    meta = {"workload": wl.meta, "n_queries": len(wl), "trials": trials, "seed": seed, "trial_seeds": seeds,
            "models": [s.label for s in specs], "n_rows": table.n_rows, "quasi": list(table.quasi),
            "sensitive": list(table.sensitive), "dataset": dataset_info or {}, "workload_columns": wl_dims,
            "metric": metric, "level": level, "max_posterior": max_posterior, "epsilons": list(epsilons or []),
            "sensitive_values": sensitive_values,
            "public_domains": public_domains if isinstance(public_domains, (str, type(None))) else "declared"}
    ev = Evaluation(results, summary, runs_df, Path(out_dir) if out_dir else Path("."), meta, model_df, rec_)
    if attacks:
        ev.attacks = attack_rows_of(table, specs, wl_dims, public_domains, seed, attack_rows, sensitive_values)
        meta["attacks"] = {"rows": attack_rows, "seed": seed}
    if out_dir is not None:
        write_evaluation(ev, wl)
    return ev


def attack_rows_of(table, specs: Sequence[ModelSpec], wl_dims, public_domains, seed: int, n_rows: int,
                   sensitive_values=None) -> pd.DataFrame:
    """One row per (model, attack): each model published on a training half of a seeded subsample
    (at most ``n_rows`` rows) with the other half held back, attacked by
    :func:`ppdp.audit.attacks.attack_mechanism`; a model the attacks cannot run on is one row
    with its error."""
    from .audit.attacks import attack_mechanism

    parts = []
    for spec in specs:
        try:
            params, _ = _fill_histogram(spec, wl_dims, public_domains, table)
            rep = attack_mechanism(table, spec.mechanism_class()(**params), n_rows=n_rows, seed=seed,
                                   sensitive_values=sensitive_values)
            parts.append(rep.table.assign(model=spec.label, family=rep.family, error=""))
        except Exception as e:  # a family without record-level attacks, or a table too small
            parts.append(pd.DataFrame([{"model": spec.label, "attack": "", "error": f"{type(e).__name__}: {e}"}]))
    out = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
    return out[["model", *[c for c in out.columns if c != "model"]]] if len(out) else out


def _bundled() -> list[str]:
    from .datasets import names

    return [str(n).lower() for n in names()]


def _certificate_mse(rel) -> float:
    cert = rel.manifest.get("certificate", {})
    try:
        return float(cert["mse"])
    except (KeyError, TypeError, ValueError):
        return math.nan


def interval(values: Sequence[float], level: float = 0.95) -> tuple[float, float, float]:
    """Mean of per-trial values and its Student-t interval (NaN bounds with one trial)."""
    from scipy import stats

    v = np.asarray([x for x in values if x == x], dtype=float)
    if len(v) == 0:
        return math.nan, math.nan, math.nan
    m = float(v.mean())
    if len(v) < 2:
        return m, math.nan, math.nan
    h = float(stats.t.ppf(0.5 + level / 2, len(v) - 1) * v.std(ddof=1) / math.sqrt(len(v)))
    return m, m - h, m + h


def model_table(results: pd.DataFrame, runs: pd.DataFrame, specs: Sequence[ModelSpec], level: float = 0.95) -> pd.DataFrame:
    """One row per model: its privacy (claim, audited largest posterior — the largest over the
    trials —, records disclosed with certainty, ε) next to its error on the workload (mean
    relative and mean absolute error: mean over trials of each trial's mean, with a ``level``
    Student-t interval over trials)."""
    rows = []
    for spec in specs:
        lab = spec.label
        rr = runs[runs["model"] == lab] if len(runs) else runs
        ok = rr[rr["error"] == ""] if len(rr) else rr
        r = results[results["model"] == lab]
        per_rel, per_abs = [], []
        for _, g in r.groupby("trial"):
            t, e = g["true"].to_numpy(), g["estimate"].to_numpy()
            rel = metrics.relative_error(t, e)
            per_rel.append(float(np.nanmean(rel)) if np.any(~np.isnan(rel)) else math.nan)
            per_abs.append(float(np.abs(t - e).mean()))
        mr, mr_lo, mr_hi = interval(per_rel, level)
        ma, ma_lo, ma_hi = interval(per_abs, level)

        def col(name, how="max"):
            if name not in ok or not len(ok) or ok[name].isna().all():
                return math.nan
            v = pd.to_numeric(ok[name], errors="coerce")
            return float(v.max() if how == "max" else v.mean())

        first = ok.iloc[0] if len(ok) else (rr.iloc[0] if len(rr) else None)
        rows.append({
            "model": lab, "name": spec.name, "family": (first.get("family") if first is not None else "") or "",
            "params": json.dumps(spec.params, default=str), "trials": int(len(ok)),
            "claim": (first.get("claim") if first is not None else "") or "",
            "bound": (first.get("bound") if first is not None else "") or "",
            "max_posterior": col("max_posterior"), "max_posterior_protected": col("max_posterior_protected"),
            "records_certain": col("records_certain"),
            "max_posterior_sensitive": col("max_posterior_sensitive"),
            "records_certain_sensitive": col("records_certain_sensitive"),
            "records_certain_in_set": col("records_certain_in_set"),
            "disclosed_values": "+".join(sorted({v for x in (ok["disclosed_values"] if "disclosed_values" in ok else [])
                                                 if isinstance(x, str) for v in x.split("+") if v})),
            "n_published": col("n_published"), "epsilon": col("epsilon"),
            "mean_rel_err": mr, "mean_rel_err_lo": mr_lo, "mean_rel_err_hi": mr_hi,
            "mean_abs_err": ma, "mean_abs_err_lo": ma_lo, "mean_abs_err_hi": ma_hi,
            "publish_s": col("publish_s", "mean"), "query_s": col("query_s", "mean"),
            "stated_rmse": col("stated_rmse", "mean"), "observed_rmse": col("observed_rmse", "mean"),
            "verified": bool(ok["verified"].all()) if "verified" in ok and len(ok) else None,
            "filled": (first.get("filled") if first is not None else "") or "",
            "error": "; ".join(sorted(set(e for e in rr["error"] if e))) if len(rr) else "",
        })
    return pd.DataFrame(rows)


RULE = ("drop the models that failed on this table or failed verification; drop the models that "
        "disclose a sensitive value of any record with certainty (a release publish refuses){cap}; among the "
        "rest take the lowest {metric}; among the models whose mean error lies inside the best one's {level:.0%} "
        "interval over trials, prefer the most private — fewest records disclosed with certainty, then fewest known "
        "with certainty to hold one of the sensitive values, then the lowest largest posterior on a sensitive value found by the audit, then the smallest ε.")


def _num(v) -> float:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return math.nan
    return f


def passed_over(models: pd.DataFrame, metric: str = "mean_rel_err", max_posterior: float | None = None) -> list[dict[str, str]]:
    """Why each model the recommendation leaves out is left out (``[{"model", "why"}]``, in the
    models' order): failed, not verified, a sensitive value disclosed with certainty, or an
    audited posterior on a sensitive value above ``max_posterior`` (the bound the custodian
    accepts; a differentially private histogram bounds no posterior)."""
    out = []
    for _, r in models.iterrows():
        certain = _num(r.get("records_certain_sensitive"))
        certain = _num(r.get("records_certain")) if certain != certain else certain  # no declaration recorded: all
        post = _num(r.get("max_posterior_sensitive"))
        post = _num(r.get("max_posterior")) if post != post else post
        why = ""
        if r.get("error"):
            why = f"failed: {str(r['error'])[:200]}"
        elif not r.get("trials") or _num(r.get(metric)) != _num(r.get(metric)):
            why = "no trial published and answered the workload"
        elif certain > 0:
            vals = str(r.get("disclosed_values") or "").replace("+", ", ")
            why = (f"discloses the sensitive value of {int(certain):,} records with certainty"
                   + (f" ({vals})" if vals else "") + "; publish refuses such a release")
        elif max_posterior is not None and r.get("family") == "histogram":
            why = (f"ε-differential privacy bounds no posterior, and a largest posterior of {max_posterior:g} was "
                   "asked for")
        elif max_posterior is not None and post > max_posterior + 1e-12:
            why = (f"the audit finds a posterior of {post:.3g} on a sensitive value, above "
                   f"the accepted {max_posterior:g}")
        if why:
            out.append({"model": str(r["model"]), "why": why})
    return out


def recommend(models: pd.DataFrame, metric: str = "mean_rel_err", max_posterior: float | None = None,
              level: float = 0.95) -> dict[str, Any]:
    """The model the report recommends, by :data:`RULE` (stated in the result).

    Returns ``{"model", "reason", "rule", "metric", "candidates", "passed_over"}``; ``model``
    is None when no model qualifies (the reason says why); ``passed_over`` says why each other
    model was left out (:func:`passed_over`)."""
    words = {"mean_rel_err": "mean relative error", "mean_abs_err": "mean absolute error"}[metric]
    cap = "" if max_posterior is None else (f"; drop the models whose audited posterior on a sensitive value exceeds "
                                            f"{max_posterior:g} (a differentially private model bounds no posterior and "
                                            "is dropped too)")
    rule = RULE.format(cap=cap, metric=words, level=level)
    out: dict[str, Any] = {"model": None, "rule": rule, "metric": metric, "candidates": [], "passed_over": []}
    if models.empty:
        out["reason"] = "no model was evaluated"
        return out
    out["passed_over"] = passed_over(models, metric, max_posterior)
    left = {p["model"] for p in out["passed_over"]}
    m = models[~models["model"].astype(str).isin(left)].copy()
    if m.empty:
        ran = models[(models["trials"] > 0) & (models["error"] == "") & models[metric].notna()]
        if ran.empty:
            out["reason"] = "no model published and verified on this table"
        elif max_posterior is not None and any("with certainty" not in p["why"] and not p["why"].startswith("failed")
                                               for p in out["passed_over"]):
            out["reason"] = f"no model keeps the largest posterior on a sensitive value at or below {max_posterior:g}"
        else:
            out["reason"] = ("every model that ran discloses a sensitive value of some records with certainty; declare "
                             "the values that need no protection (--sensitive-value), or try stronger parameters")
        return out
    best = m.loc[m[metric].idxmin()]
    b_hi = best[f"{metric}_hi"] if best[f"{metric}_hi"] == best[f"{metric}_hi"] else best[metric]
    overlap = m[m[metric] <= b_hi]
    post_col = "max_posterior_sensitive" if "max_posterior_sensitive" in overlap else "max_posterior"
    in_set = overlap["records_certain_in_set"] if "records_certain_in_set" in overlap else pd.Series(0.0, overlap.index)
    overlap = overlap.assign(_c=overlap["records_certain"].fillna(0), _s=in_set.fillna(0.0),
                             _p=overlap[post_col].fillna(1.0), _e=overlap["epsilon"].fillna(0.0))
    pick = overlap.sort_values(["_c", "_s", "_p", "_e", metric]).iloc[0]
    out["candidates"] = list(m["model"])
    out["model"] = pick["model"]
    why = f"its {words} is {pick[metric]:.4g}"
    if pick["model"] != best["model"]:
        why += (f", within the {level:.0%} interval of the lowest ({best['model']}: {best[metric]:.4g}), "
                f"and it is more private")
    else:
        why += ", the lowest of the qualifying models"
    if pick["records_certain"] == pick["records_certain"]:
        why += (f"; it discloses no sensitive value with certainty ({int(pick['records_certain']):,} records' value "
                "disclosed in all)" if pick["records_certain"] else "; it discloses no record's value with certainty")
    k_set = _num(pick.get("records_certain_in_set"))
    if k_set == k_set and k_set > 0:
        why += (f", but {int(k_set):,} records are disclosed with certainty to hold one of the sensitive values "
                "(no single value)")
    if pick["family"] == "histogram":
        why += f"; ε = {pick['epsilon']:g} (ε-differential privacy bounds no posterior)"
    elif pick[post_col] == pick[post_col]:
        why += f"; the largest posterior on a sensitive value the audit finds is {pick[post_col]:.3g}"
        if max_posterior is None and pick[post_col] >= 0.9:
            why += " (no bound was given: --max-posterior P recommends only models at or below P)"
    out["reason"] = why
    return out


def summarize(results: pd.DataFrame, runs: pd.DataFrame, n_rows: int, order: Sequence[str]) -> pd.DataFrame:
    """One row per (model, bin): bins are 'all', the selectivity bins and 'count≤10'."""
    rows = []
    for label in order:
        r = results[results["model"] == label]
        rr = runs[runs["model"] == label]
        base = {"model": label, "params": rr["params"].iloc[0] if len(rr) else "",
                "trials": int((rr["error"] == "").sum()) if len(rr) else 0,
                "mse": float(np.nanmean(rr["mse"])) if "mse" in rr and rr["mse"].notna().any() else math.nan,
                "publish_s": float(rr["publish_s"].mean()) if "publish_s" in rr and rr["publish_s"].notna().any() else math.nan,
                "query_s": float(rr["query_s"].mean()) if "query_s" in rr and rr["query_s"].notna().any() else math.nan,
                "error": "; ".join(sorted(set(e for e in rr["error"] if e))) if len(rr) else ""}
        if r.empty:
            rows.append({**base, "bin": "all", "n_queries": 0, "mean_rel_err": math.nan, "median_rel_err": math.nan,
                         "p95_rel_err": math.nan, "mean_abs_err": math.nan})
            continue
        t = r["true"].to_numpy()
        e = r["estimate"].to_numpy()
        rel = metrics.relative_error(t, e)
        bins = selectivity_bin(t, n_rows)
        groups = [("all", np.ones(len(t), bool))]
        groups += [(b, bins == b) for b in dict.fromkeys(selectivity_bin(np.asarray(SELECTIVITY_EDGES[:-1]) * n_rows, n_rows))]
        groups.append((f"count≤{SMALL_COUNT}", t <= SMALL_COUNT))
        for name, m in groups:
            v = rel[m & ~np.isnan(rel)]
            rows.append({**base, "bin": name, "n_queries": int(m.sum()),
                         "mean_rel_err": float(v.mean()) if len(v) else math.nan,
                         "median_rel_err": float(np.median(v)) if len(v) else math.nan,
                         "p95_rel_err": float(np.percentile(v, 95)) if len(v) else math.nan,
                         "mean_abs_err": float(np.abs(t[m] - e[m]).mean()) if m.any() else math.nan})
    cols = ["model", "bin", "n_queries", "mean_rel_err", "median_rel_err", "p95_rel_err", "mean_abs_err", "mse",
            "publish_s", "query_s", "trials", "params", "error"]
    return pd.DataFrame(rows)[cols]


def write_evaluation(ev: Evaluation, workload) -> None:
    out = ev.out_dir
    out.mkdir(parents=True, exist_ok=True)
    workload.save(out / "workload.jsonl")
    ev.results.to_csv(out / "results.csv", index=False, float_format="%.10g")
    ev.summary.to_csv(out / "summary.csv", index=False, float_format="%.10g")
    ev.runs.to_csv(out / "runs.csv", index=False, float_format="%.6g")
    (out / "meta.json").write_text(json.dumps({**ev.meta, "machine": machine_info()}, indent=2, default=str) + "\n")
    ev.models.to_csv(out / "models.csv", index=False, float_format="%.6g")
    if len(ev.attacks):
        ev.attacks.to_csv(out / "attacks.csv", index=False, float_format="%.6g")
    write_report(ev, out / "report.html")


# --------------------------------------------------------------------------------- report
def write_report(ev: Evaluation, path: Path) -> Path:
    """The decision report (:func:`ppdp.report.evaluation.write_evaluation_report`)."""
    from .report.evaluation import write_evaluation_report

    return write_evaluation_report(ev, path)

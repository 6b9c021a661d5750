"""Compare models side by side on one table (``ppdp evaluate``; SPEC §3, §5).

Every model is published ``trials`` times (seeded), every release answers ONE shared
workload through its own estimator (``Release.answer``), and the run writes

- ``workload.jsonl``: the workload (re-loadable with ``ppdp.Workload.load``);
- ``results.csv``: model, params, trial, query_id, true, estimate;
- ``summary.csv``: per model and selectivity bin: mean / median / 95th-percentile relative
  error, mean absolute error, the bucketization MSE (certificate ``mse``) where it applies,
  publish and query time; a model that cannot publish this table is a row with its error;
- ``report.html``: the self-contained report (utility per model and bin, error
  distributions, parameters, seeds, machine).

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


def parse_model_spec(spec: str) -> ModelSpec:
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
    check_model_spec(out, spec)
    return out


def check_model_spec(spec: ModelSpec, text: str | None = None):
    """Build the spec's mechanism once (validating every value); a ParameterError names the spec."""
    cls = _mechanism_class(spec.name)
    where = f" in {text or spec.label!r}"
    valid = list(cls._parameter_constraints)
    unknown = [k for k in spec.params if k not in valid]
    if unknown:
        raise ParameterError(f"model {spec.name!r} has no parameter {', '.join(map(repr, unknown))}{where}; "
                             f"valid parameters: {', '.join(valid)}", param=unknown[0])
    missing = [k for k, d in cls.param_defaults().items() if d is inspect.Parameter.empty and k not in spec.params]
    if missing:
        raise ParameterError(f"model {spec.name!r} needs {', '.join(missing)}{where}", param=missing[0])
    try:
        return cls(**spec.params)
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


def selectivity_bin(true: np.ndarray, n_rows: int) -> np.ndarray:
    """Label of each query's selectivity bin (true / N)."""
    return metrics.selectivity_bin(true, n_rows, SELECTIVITY_EDGES)


# -------------------------------------------------------------------------------- running
@dataclass
class Evaluation:
    """What a run produced: long results, the summary, per-run records, and the files."""

    results: pd.DataFrame
    summary: pd.DataFrame
    runs: pd.DataFrame
    out_dir: Path
    meta: dict


def trial_seeds(seed: int, trials: int) -> list[int]:
    """Independent publish seeds per trial, derived from the run seed."""
    return [int(s.generate_state(1)[0]) for s in np.random.SeedSequence(seed).spawn(trials)]


def evaluate(table, models: Sequence[str | ModelSpec], workload: str = "anatomy", n_queries: int = 5000, trials: int = 3,
             seed: int = 0, out_dir: str | Path | None = None, selectivity: float = 0.01, dims: Sequence[str] | None = None,
             verify: bool = True, progress: bool = True, dataset_info: dict | None = None) -> Evaluation:
    """Publish every model ``trials`` times and answer one shared workload (see module doc)."""
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
    if workload not in WORKLOADS:
        raise PpdpError(f"unknown workload {workload!r}; choose one of {', '.join(WORKLOADS)}")
    if trials < 1:
        raise PpdpError(f"trials must be ≥ 1, got {trials}")
    if n_queries < 1:
        raise PpdpError(f"queries must be ≥ 1, got {n_queries}")
    specs = [m if isinstance(m, ModelSpec) else parse_model_spec(m) for m in models]
    if not specs:
        raise PpdpError("give at least one --model")
    for spec in specs:  # every value validated before any work
        check_model_spec(spec)
    wl = make_workload(table, workload, n_queries, seed, selectivity, dims)
    true = answer_exact(table, wl).astype(np.float64)
    seeds = trial_seeds(seed, trials)

    res_parts, runs = [], []
    bar = tqdm(total=len(specs) * trials, desc="evaluate", unit="release", disable=not progress)
    for spec in specs:
        for trial, s in enumerate(seeds):
            bar.set_postfix_str(f"{spec.label} #{trial}")
            rec: dict[str, Any] = {"model": spec.label, "name": spec.name, "params": json.dumps(spec.params, default=str),
                                   "trial": trial, "seed": s, "error": ""}
            try:
                ds = (dataset_info or {}).get("dataset")
                if ds and "domains" in getattr(spec.mechanism_class(), "_parameter_constraints", {}) \
                        and "domains" not in spec.params:  # a bundled table: its documented (public) domains
                    mech = spec.mechanism_class()(**spec.params, domains=ds)
                else:
                    mech = spec.build()
                t0 = time.perf_counter()
                rel = publish(table, mech, seed=s)
                t1 = time.perf_counter()
                est = np.asarray(rel.answer(wl), dtype=np.float64)
                t2 = time.perf_counter()
                rec.update(family=rel.family, publish_s=t1 - t0, query_s=t2 - t1,
                           mse=_certificate_mse(rel), n_published=rel.manifest.get("n_published"))
                if verify:
                    rep = rel.verify(table)
                    rec["verified"] = rep.ok
                    if not rep.ok:
                        rec["error"] = "verify failed: " + "; ".join(rep.problems[:3])
                res_parts.append(pd.DataFrame({"model": spec.label, "params": rec["params"], "trial": trial,
                                               "query_id": np.arange(len(wl)), "true": true, "estimate": est}))
            except Exception as e:  # a model that fails on this table is a row, not a crash
                rec["error"] = f"{type(e).__name__}: {e}"
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
    meta = {"workload": wl.meta, "n_queries": len(wl), "trials": trials, "seed": seed, "trial_seeds": seeds,
            "models": [s.label for s in specs], "n_rows": table.n_rows, "quasi": list(table.quasi),
            "sensitive": list(table.sensitive), "dataset": dataset_info or {}}
    ev = Evaluation(results, summary, runs_df, Path(out_dir) if out_dir else Path("."), meta)
    if out_dir is not None:
        write_evaluation(ev, wl)
    return ev


def _certificate_mse(rel) -> float:
    cert = rel.manifest.get("certificate", {})
    try:
        return float(cert["mse"])
    except (KeyError, TypeError, ValueError):
        return math.nan


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
    write_report(ev, out / "report.html")


# --------------------------------------------------------------------------------- report
def write_report(ev: Evaluation, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from .report import HtmlReport, plain_label

    rep = HtmlReport("ppdp evaluate — utility of each model on one workload")
    s = ev.summary
    m = ev.meta
    ds = m.get("dataset") or {}
    rep.paragraph(f"Table: {ds.get('dataset', 'input file')} ({m['n_rows']:,} rows; SA = {', '.join(m['sensitive'])}; "
                  f"QI = {', '.join(m['quasi'])}). Workload: {m['workload'].get('generator')} with {m['n_queries']:,} queries, "
                  f"{m['trials']} trial(s) per model, run seed {m['seed']}.")
    failed = s[(s["bin"] == "all") & (s["error"] != "")]
    for _, row in failed.iterrows():
        rep.paragraph(f"{row['model']}: {row['error']}", css="bad")

    rep.heading("Utility per model (all queries)")
    allb = s[s["bin"] == "all"][["model", "n_queries", "mean_rel_err", "median_rel_err", "p95_rel_err", "mean_abs_err",
                                 "mse", "publish_s", "query_s", "trials", "error"]]
    rep.table(allb.reset_index(drop=True), bad_rows=list(allb["error"] != ""))
    rep.note("Relative error = |true − estimate| / true over queries with true > 0. MSE is the bucketization "
             "certificate's Loss/(|T|−1) (bucketized releases only). Times are means over trials, in seconds.")

    ok = [lab for lab in m["models"] if not ev.results[ev.results["model"] == lab].empty]
    if ok:
        rep.heading("Utility per selectivity bin")
        piv = s[(s["bin"] != "all") & s["model"].isin(ok)].pivot_table(index="bin", columns="model", values="mean_rel_err", sort=False)
        counts = s[(s["bin"] != "all") & s["model"].isin(ok)].groupby("bin", sort=False)["n_queries"].first()
        fig, ax = plt.subplots(figsize=(10, 4.2))
        x = np.arange(len(piv.index))
        w = 0.8 / max(len(ok), 1)
        for i, lab in enumerate(ok):
            if lab in piv:
                ax.bar(x + i * w - 0.4 + w / 2, piv[lab].to_numpy(), w, label=plain_label(lab))
        ax.set_xticks(x, [f"{b}\n(n={counts.get(b, 0)})" for b in piv.index])
        ax.set_ylabel("mean relative error")
        ax.set_yscale("log")
        ax.legend(fontsize=8)
        ax.set_title("Mean relative error by selectivity (true count / N)")
        rep.figure(fig, "Mean relative error per selectivity bin (log scale); n = queries per bin per trial summed over trials.")
        tbl = piv.reset_index()
        rep.table(tbl)

        rep.heading("Error distributions")
        fig, ax = plt.subplots(figsize=(10, 4.2))
        for lab in ok:
            r = ev.results[ev.results["model"] == lab]
            v = np.sort(metrics.relative_error(r["true"].to_numpy(), r["estimate"].to_numpy()))
            v = v[~np.isnan(v)]
            ax.plot(np.maximum(v, 1e-6), np.linspace(0, 1, len(v)), label=plain_label(lab))
        ax.set_xscale("log")
        ax.set_xlabel("relative error")
        ax.set_ylabel("fraction of queries ≤ x")
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
        rep.figure(fig, "Empirical CDF of the relative error per model (all trials).")

        fig, ax = plt.subplots(figsize=(10, 4.2))
        data = []
        for lab in ok:
            r = ev.results[ev.results["model"] == lab]
            v = metrics.relative_error(r["true"].to_numpy(), r["estimate"].to_numpy())
            data.append(np.maximum(v[~np.isnan(v)], 1e-6))
        ax.boxplot(data, showfliers=False)
        ax.set_xticks(np.arange(1, len(ok) + 1), [plain_label(lab) for lab in ok], rotation=15, fontsize=8)
        ax.set_yscale("log")
        ax.set_ylabel("relative error")
        rep.figure(fig, "Relative error per model (box: quartiles, whiskers 1.5 IQR; outliers hidden).")

    rep.heading("Runs")
    rcols = [c for c in ("model", "trial", "seed", "family", "publish_s", "query_s", "mse", "verified", "error") if c in ev.runs]
    rep.table(ev.runs[rcols], bad_rows=list(ev.runs["error"] != ""))
    rep.provenance({"models": m["models"], "workload": m["workload"], "trials": m["trials"], "run seed": m["seed"],
                    "trial seeds": m["trial_seeds"], "dataset": ds})
    rep.paragraph("Files: workload.jsonl, results.csv, summary.csv, runs.csv, meta.json (next to this report).")
    return rep.write(path)

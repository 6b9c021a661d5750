"""The ``ppdp evaluate`` report: a decision, not only a comparison.

Each model's guarantee (the claim in words, the largest posterior the audit finds, the records
disclosed with certainty) is shown next to its error on the user's workload with intervals over
trials; a privacy-vs-error plot; one sentence per parameter; per-ε tables and plots for the
differentially private models; and a closing recommendation with the rule that chose it
(:func:`ppdp.evaluate.recommend`). The evaluation object is duck-typed (``results``,
``summary``, ``runs``, ``models``, ``recommendation``, ``meta``) so this module does not import
:mod:`ppdp.evaluate`.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .. import metrics, registry
from . import HtmlReport, plain_label

#: what each common parameter does, in one sentence with its value (``{v}``)
PARAMETER_SENTENCES = {
    "theta": "θ = {v}: each sensitive value x may make up at most min(1, {v}·f_x + b) of any bucket, so a larger θ "
             "allows more concentrated buckets (smaller error, higher posterior).",
    "floor": "b = {v}: the constant added to every threshold θ·f_x, so rare values may still reach share b.",
    "l": "ℓ = {v}: every bucket holds at least {v} distinct sensitive values, so no value is inferred with a "
         "probability above 1/{v}.",
    "l_prime": "ℓ' = {v}: each record keeps its value with probability 1/{v} (or hides it in a group of {v} values), "
               "so a larger ℓ' protects more and adds more noise.",
    "rho1": "ρ1 = {v}: the sensitive values with prior (relative frequency) at most {v} are the protected ones.",
    "rho2": "ρ2 = {v}: after seeing the release, an adversary's belief in a protected value stays at most {v}.",
    "retention": "retention = {v}: the probability that a record keeps its own sensitive value.",
    "epsilon": "ε = {v}: the privacy budget; any one person changes the probability of any release by at most a "
               "factor e^ε = {e:.3g}, and the noise scale grows as 1/ε.",
    "dims": "dims = {v}: the histogram's dimensions — only queries over these columns are answered.",
    "domains": "domains = {v}: the public cell labels of each dimension (never read off the rows).",
    "bins": "bins = {v}: explicit bin edges of numeric dimensions (public, never read off the rows).",
    "fake_values": "σ = {v}: fake sensitive values added to every bucket, so an adversary who learns some records "
                   "cannot single out the rest.",
    "negative_associations": "negative associations = {v}: (column value, sensitive value) pairs that never occur "
                             "together, so no fake value is implausible in its bucket.",
    "merge": "merge = {v}: how SDR combines its initial groups (fewer groups, less noise per count).",
    "min_size": "min_size = {v}: the smallest sub-table SDR keeps when merging.",
    "method": "method = {v}: the bucketing algorithm.",
    "max_bucket": "M' = {v}: the largest bucket allowed.",
}


def parameter_sentence(name: str, key: str, value: Any) -> str:
    """One sentence saying what parameter ``key`` = ``value`` of model ``name`` does."""
    shown = "+".join(map(str, value)) if isinstance(value, (list, tuple)) else (
        json.dumps(value) if isinstance(value, dict) else str(value))
    tmpl = PARAMETER_SENTENCES.get(key)
    if tmpl:
        e = math.exp(float(value)) if key == "epsilon" and isinstance(value, (int, float)) else math.nan
        return tmpl.format(v=shown, e=e)
    cls = registry.mechanisms().get(name)
    help_ = (getattr(cls, "_parameter_help", {}) or {}).get(key, "") if cls else ""
    return f"{key} = {shown}: {help_}" if help_ else f"{key} = {shown}."


def breakable(label: str) -> str:
    """A model label that may wrap after ':' and ',' (zero-width spaces), not inside a number."""
    return str(label).replace(":", ":\u200b").replace(",", ",\u200b")


def _ci(m, lo, hi) -> str:
    if m != m:
        return "–"
    if lo != lo:
        return f"{m:.4g} (one trial)"
    return f"{m:.4g} [{lo:.4g}, {hi:.4g}]"


def _posterior_text(row) -> str:
    if row["family"] == "histogram":
        return f"not bounded (ε-DP: odds move ≤ e^ε = {math.exp(row['epsilon']):.3g}×)" if row["epsilon"] == row["epsilon"] else "not bounded"
    if row["max_posterior"] != row["max_posterior"]:
        return "–"
    text = f"{row['max_posterior']:.3g}"
    sens = row.get("max_posterior_sensitive", math.nan)
    prot = row.get("max_posterior_protected", math.nan)
    if sens == sens and abs(sens - row["max_posterior"]) > 1e-12:
        text += f" (sensitive values: {sens:.3g})"
    elif prot == prot:
        text += f" (protected values: {prot:.3g})"
    return text


def _certain_text(row) -> str:
    c, n = row["records_certain"], row["n_published"]
    if c != c:
        return "–"
    text = f"{int(c):,} of {int(n):,} ({c / n:.1%})" if n == n and n > 0 else f"{int(c):,}"
    s = row.get("records_certain_sensitive", math.nan)
    if c and s == s:
        text += f"; of a sensitive value: {int(s):,}" if s else "; none of a sensitive value"
    k = row.get("records_certain_in_set", math.nan)
    if k == k and k > 0:
        text += f"; {int(k):,} known to hold one of the sensitive values"
    return text


def _legend_outside(ax, n: int) -> None:
    """The legend to the right of the axes, never over the data."""
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0, frameon=False,
              ncol=1 if n <= 14 else 2)


def _eps_axis(ax, eps) -> None:
    """A log ε axis ticked at the evaluated ε values, labelled as written (0.05, 0.1, 1)."""
    from matplotlib.ticker import FixedLocator, NullFormatter, NullLocator

    vals = sorted({float(e) for e in eps if e == e})
    ax.set_xscale("log")
    ax.xaxis.set_major_locator(FixedLocator(vals))
    ax.xaxis.set_major_formatter(lambda v, _pos: f"{v:g}")
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_minor_formatter(NullFormatter())
    if len(vals) == 1:
        ax.set_xlim(vals[0] / 2, vals[0] * 2)


def _base_label(label: str) -> str:
    """A model label without its ``epsilon=…`` parameter (the per-ε grouping key)."""
    name, _, rest = label.partition(":")
    keep = [p for p in rest.split(",") if p and not p.startswith("epsilon=")] if rest else []
    return name + (":" + ",".join(keep) if keep else "")


def write_evaluation_report(ev, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    m = ev.meta
    models: pd.DataFrame = ev.models
    rec = ev.recommendation
    metric = m.get("metric", "mean_rel_err")
    words = {"mean_rel_err": "mean relative error", "mean_abs_err": "mean absolute error"}[metric]
    level = float(m.get("level", 0.95))
    ds = m.get("dataset") or {}
    wmeta = m["workload"]
    rep = HtmlReport("ppdp evaluate — which model to publish for these queries")
    wdesc = wmeta.get("generator", "?")
    if wmeta.get("dims"):
        wdesc += " over " + " × ".join(wmeta["dims"])
    rep.paragraph(f"Table: {ds.get('dataset') or 'input file'} ({m['n_rows']:,} rows; sensitive attribute "
                  f"{', '.join(m['sensitive']) or '–'}; quasi-identifiers {', '.join(m['quasi']) or '–'}). "
                  f"Workload: {wdesc}, {m['n_queries']:,} queries, the same for every model; {m['trials']} seeded "
                  f"release(s) per model (run seed {m['seed']}).")

    # ------------------------------------------------------------------ the decision
    if rec.get("model"):
        rep.decision("Recommendation:", f"for these queries, publish with {rec['model']} — {rec['reason']}.",
                     rule=rec.get("rule"))
    else:
        rep.decision("No recommendation:", f"{rec.get('reason', 'no model qualifies')}.", rule=rec.get("rule"))
    sens = m.get("sensitive_values")
    cap = m.get("max_posterior")
    rep.paragraph("Judged against the sensitive values "
                  + ("declared: every value (none declared)" if sens is None else f"declared: {', '.join(sens) or 'none'}")
                  + "; a model that discloses one of them for any record with certainty is never recommended"
                  + (f", nor one whose audited posterior on one of them exceeds {cap:g}" if cap is not None else
                     "; no posterior bound was given (--max-posterior P, the largest posterior you accept), so only "
                     "certainty is excluded") + ".")
    passed = rec.get("passed_over") or []
    if passed:
        rep.heading("Passed over")
        rep.items([(p["model"], p["why"] + ".") for p in passed])
    elif len(models[models["error"] != ""]):
        for _, row in models[models["error"] != ""].iterrows():
            rep.paragraph(f"{row['model']}: {row['error']}", css="bad")

    # ------------------------------------------------------------------ privacy next to error
    rep.heading("Privacy and error per model")
    other = "mean_abs_err" if metric == "mean_rel_err" else "mean_rel_err"
    owords = {"mean_rel_err": "mean relative error", "mean_abs_err": "mean absolute error"}[other]
    tbl = pd.DataFrame({
        "model": [breakable(x) for x in models["model"]],
        "guarantee (the claim)": [c or "–" for c in models["claim"]],
        "largest posterior (audit)": [_posterior_text(r) for _, r in models.iterrows()],
        "records disclosed with certainty": [_certain_text(r) for _, r in models.iterrows()],
        f"{words} [{level:.0%} CI]": [_ci(r[metric], r[f"{metric}_lo"], r[f"{metric}_hi"]) for _, r in models.iterrows()],
        f"{owords} [{level:.0%} CI]": [_ci(r[other], r[f"{other}_lo"], r[f"{other}_hi"]) for _, r in models.iterrows()],
        "publish s": models["publish_s"],
    }).astype({"model": object})
    rep.table(tbl, bad_rows=list(models["error"] != ""), best_rows=list(models["model"] == rec.get("model")))
    if models.get("stated_rmse") is not None and models["stated_rmse"].notna().any():
        st = models[models["stated_rmse"].notna()]
        rep.table(pd.DataFrame({"model": st["model"], "expected RMSE (the release's stated standard errors)": st["stated_rmse"],
                                "observed RMSE": st["observed_rmse"]}).astype({"model": object}),
                  caption="Expected error of a release, from its estimator's stated standard errors (for noisy "
                          "histograms: its noise variances), next to the error observed on this workload")
    rep.note(f"Error: per trial, the mean over the workload's queries (relative error over queries with a true "
             f"count > 0); shown is the mean over trials with its {level:.0%} Student-t interval over trials. "
             "Largest posterior: the highest probability the audit (ppdp audit) finds an adversary assigns to "
             "a sensitive value of a record, over the trials and over every value (in brackets: over the declared "
             "sensitive values, or the values the claim protects, when these are fewer). Records disclosed with "
             "certainty: the release's stated disclosure (records whose value a receiver learns for sure), and how "
             "many of them hold a sensitive value — what publish refuses.")

    attacks = getattr(ev, "attacks", None)
    if attacks is not None and len(attacks):
        attack_section(rep, attacks, m.get("attacks") or {})

    # ------------------------------------------------------------------ parameters in words
    rep.heading("What each parameter means")
    items: list[tuple[str | None, str]] = []
    for _, row in models.iterrows():
        params = json.loads(row["params"]) if row["params"] else {}
        sentences = [parameter_sentence(row["name"], k, v) for k, v in params.items()]
        if row.get("filled"):
            sentences.append(f"Filled in for this run: {row['filled']} (the columns the workload queries; the "
                             "declared public domains).")
        items.append((row["model"], " ".join(sentences) if sentences else "the mechanism's defaults."))
    rep.items(items)

    ok = models[(models["trials"] > 0) & models[metric].notna()]
    # ------------------------------------------------------------------ privacy vs error plot
    if len(ok):
        post = ok[ok["family"] != "histogram"]
        dp = ok[ok["family"] == "histogram"]
        panels = [p for p in (("post", post), ("dp", dp)) if len(p[1])]
        fig, axes = plt.subplots(1, len(panels), figsize=(10.5 if len(panels) == 2 else 9.5, 4.2), squeeze=False)
        for ax, (kind, d) in zip(axes[0], panels):
            for _, r in d.iterrows():
                x = r["max_posterior"] if kind == "post" else r["epsilon"]
                y, lo, hi = r[metric], r[f"{metric}_lo"], r[f"{metric}_hi"]
                yerr = None if lo != lo else [[y - lo], [hi - y]]
                mark = "*" if r["model"] == rec.get("model") else "o"
                ax.errorbar([x], [y], yerr=yerr, fmt=mark, ms=11 if mark == "*" else 6, capsize=3,
                            label=plain_label(r["model"]))
            ax.set_xlabel("largest posterior an adversary reaches (audit)" if kind == "post" else "ε (log scale)")
            if kind == "dp":
                _eps_axis(ax, d["epsilon"])
            ax.set_ylabel(words)
            ax.grid(alpha=0.3)
            ax.set_title("posterior-bounded models" if kind == "post" else "ε-differentially private models", fontsize=10)
            _legend_outside(ax, len(d))
        fig.tight_layout()
        rep.heading("Privacy vs error")
        rep.figure(fig, f"Each model's {words} (bars: {level:.0%} interval over trials) against its privacy: the largest "
                        "posterior the audit finds (lower is more private) or ε (lower is more private). "
                        "The recommended model is drawn as a star.")

    # ------------------------------------------------------------------ per-ε tables and plots
    dp_all = models[models["epsilon"].notna() & (models["trials"] > 0)]
    if len(dp_all) and dp_all["epsilon"].nunique() >= 1:
        rep.heading("Differentially private models per ε")
        d = dp_all.assign(base=[_base_label(x) for x in dp_all["model"]])
        for met, mw in ((metric, words), (other, owords)):
            piv = d.pivot_table(index="base", columns="epsilon", values=met, sort=False)
            lo = d.pivot_table(index="base", columns="epsilon", values=f"{met}_lo", sort=False)
            hi = d.pivot_table(index="base", columns="epsilon", values=f"{met}_hi", sort=False)
            cells = {f"ε = {e:g}": [_ci(piv.loc[b, e], lo.loc[b, e] if b in lo.index and e in lo else math.nan,
                                        hi.loc[b, e] if b in hi.index and e in hi else math.nan) for b in piv.index]
                     for e in piv.columns}
            rep.table(pd.DataFrame({"model": list(piv.index), **cells}), caption=f"{mw} [{level:.0%} CI over trials]")
        fig, ax = plt.subplots(figsize=(9.5, 4.0))
        for base, g in d.groupby("base", sort=False):
            g = g.sort_values("epsilon")
            y = g[metric].to_numpy()
            err = np.vstack([y - g[f"{metric}_lo"].to_numpy(), g[f"{metric}_hi"].to_numpy() - y])
            ax.errorbar(g["epsilon"], y, yerr=None if np.isnan(err).all() else err, marker="o", capsize=3,
                        label=plain_label(base))
        _eps_axis(ax, d["epsilon"])
        ax.set_yscale("log")
        ax.set_xlabel("ε")
        ax.set_ylabel(words)
        ax.grid(alpha=0.3, which="both")
        _legend_outside(ax, d["base"].nunique())
        fig.tight_layout()
        rep.figure(fig, f"{words.capitalize()} per ε (log–log; bars: {level:.0%} interval over trials).")

    # ------------------------------------------------------------------ selectivity and distributions
    s = ev.summary
    ok_labels = list(ok["model"])
    if ok_labels and metric == "mean_rel_err":
        rep.heading("Error per selectivity bin")
        sub = s[(s["bin"] != "all") & s["model"].isin(ok_labels)]
        piv = sub.pivot_table(index="bin", columns="model", values="mean_rel_err", sort=False)
        counts = sub.groupby("bin", sort=False)["n_queries"].first()
        fig, ax = plt.subplots(figsize=(9.5, 4.0))
        x = np.arange(len(piv.index))
        w = 0.8 / max(len(ok_labels), 1)
        for i, lab in enumerate(ok_labels):
            if lab in piv:
                ax.bar(x + i * w - 0.4 + w / 2, piv[lab].to_numpy(), w, label=plain_label(lab))
        ax.set_xticks(x, [f"{b}\n(n={counts.get(b, 0)})" for b in piv.index], fontsize=8)
        ax.set_ylabel("mean relative error")
        vals = piv.to_numpy(dtype=float)
        log_scale = bool(np.any(np.isfinite(vals) & (vals > 0)))  # every error 0 (exact answers): a linear axis
        if log_scale:
            ax.set_yscale("log")
        _legend_outside(ax, len(ok_labels))
        fig.tight_layout()
        rep.figure(fig, "Mean relative error per selectivity bin (true count / N"
                        f"{'; log scale' if log_scale else ''}); n = queries per bin, summed over trials.")
        t = piv.T.reset_index().rename(columns={"model": "model"})
        rep.table(t)

    if ok_labels:
        rep.heading("Error distributions")
        fig, ax = plt.subplots(figsize=(9.5, 4.0))
        for lab in ok_labels:
            r = ev.results[ev.results["model"] == lab]
            t_, e_ = r["true"].to_numpy(), r["estimate"].to_numpy()
            v = np.sort(metrics.relative_error(t_, e_) if metric == "mean_rel_err" else np.abs(t_ - e_))
            v = v[~np.isnan(v)]
            if len(v):
                ax.plot(np.maximum(v, 1e-6), np.linspace(0, 1, len(v)), label=plain_label(lab))
        ax.set_xscale("log")
        ax.set_xlabel("relative error" if metric == "mean_rel_err" else "absolute error")
        ax.set_ylabel("fraction of queries ≤ x")
        ax.grid(alpha=0.3)
        _legend_outside(ax, len(ok_labels))
        fig.tight_layout()
        rep.figure(fig, "Empirical distribution of the per-query error per model (all trials).")

    rep.heading("Runs")
    rcols = [c for c in ("model", "trial", "seed", "family", "publish_s", "query_s", "mse", "max_posterior",
                         "records_certain", "verified", "error") if c in ev.runs]
    rep.table(ev.runs[rcols], bad_rows=list(ev.runs["error"] != ""))
    rep.provenance({"models": m["models"], "workload": m["workload"], "trials": m["trials"], "run seed": m["seed"],
                    "trial seeds": m["trial_seeds"], "dataset": ds, "recommendation rule": rec.get("rule", "")})
    rep.paragraph("Files: models.csv (this page's model table), workload.jsonl, results.csv, summary.csv, runs.csv, "
                  "meta.json (next to this report).")
    return rep.write(path)


def _ci3(v, lo, hi) -> str:
    return "–" if v != v else f"{v:.3f} [{lo:.3f}, {hi:.3f}]"


def attack_section(rep: HtmlReport, attacks: pd.DataFrame, meta: dict) -> None:
    """Every model's attacks (``Evaluation.attacks``, one row per model and attack) next to its
    formal bound; a row whose attack beats the bound is marked red."""
    rep.heading("Attacks next to the bound")
    rows = meta.get("rows", "?")
    rep.paragraph("Attacks that do not assume the model (Giomi et al. 2023): every model is published once more on a "
                  f"training half of a seeded subsample (at most {rows} rows), the other half held back as control; "
                  "each attack runs on training and on control records, risk = (success − control)/(1 − control). "
                  "The formal bound is the claim's (attribute inference: the posterior bound of each guessed value, "
                  "averaged over the guesses; ε-DP: e^ε times the control's upper interval end). An attack beats its "
                  "bound when the lower end of its 95% interval on the training records lies above the bound.")
    ok = attacks[attacks.get("error", pd.Series([""] * len(attacks))).fillna("") == ""] if "error" in attacks else attacks
    if len(ok):
        tbl = pd.DataFrame({
            "model": [breakable(x) for x in ok["model"]],
            "attack": ok["attack"],
            "success [95% CI]": [_ci3(*r) for r in ok[["success", "success_lo", "success_hi"]].to_numpy(float)],
            "control [95% CI]": [_ci3(*r) for r in ok[["control", "control_lo", "control_hi"]].to_numpy(float)],
            "risk [95% CI]": [_ci3(*r) for r in ok[["risk", "risk_lo", "risk_hi"]].to_numpy(float)],
            "formal bound": ["–" if b != b else f"{b:.3f}" for b in ok["bound"].to_numpy(float)],
            "bound from": ok["bound_name"],
            "beats bound": ["YES" if bool(x) else "no" for x in ok["beats_bound"]],
        }).astype({"model": object, "attack": object})
        rep.table(tbl, bad_rows=[bool(x) for x in ok["beats_bound"]])
        beaten = ok[ok["beats_bound"].astype(bool)]
        if len(beaten):
            rep.paragraph("An attack beats the bound of: " + ", ".join(f"{r['model']} ({r['attack']})"
                                                                      for _, r in beaten.iterrows()) + ".", css="bad")
        else:
            rep.paragraph("No attack beats its model's bound.", css="ok")
    if "error" in attacks:
        for _, r in attacks[attacks["error"].fillna("") != ""].iterrows():
            rep.note(f"{r['model']}: no attack ran — {r['error']}")

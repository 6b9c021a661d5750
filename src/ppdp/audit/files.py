"""Audit outputs: CSV tables, PNG plots and the self-contained HTML report."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ..releases.storage import csv_safe_frame
from ..report import HtmlReport, figure_png, machine_info, plain_label


def _plot_posteriors(res):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    s = res.summary
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(12, 4.3), gridspec_kw={"width_ratios": [3, 2]})
    x = np.arange(len(s))
    a1.bar(x, s["max_posterior"].fillna(0), color=np.where(s["violations"] > 0, "#c33", "#4a7ab5"), label="max posterior")
    if s["bound"].notna().any():
        a1.step(x, s["bound"].to_numpy(), where="mid", color="k", lw=1.3, label="bound")
    a1.plot(x, s["prior"], ".", color="#e90", label="prior")
    a1.set_xticks(x, [plain_label(str(v)[:14]) for v in s["value"]], rotation=90, fontsize=6 if len(s) > 20 else 8)
    a1.set_ylabel("posterior")
    a1.set_title("Max posterior per SA value vs its bound")
    a1.legend(fontsize=8)
    c = res.classes
    b = c["bound"].to_numpy()
    if np.isfinite(b).any():
        r = (c["posterior"] / c["bound"]).to_numpy()
        r = r[np.isfinite(r)]
        a2.hist(r, bins=40, color="#4a7ab5")
        a2.axvline(1.0, color="k", lw=1.2)
        a2.set_xlabel("posterior / bound (per record class and value)")
    else:
        a2.hist(c["posterior"].clip(0, 1).dropna(), bins=40, color="#4a7ab5")
        a2.set_xlabel("posterior (no bound for this model)")
    a2.set_ylabel("classes")
    a2.set_yscale("log")
    a2.set_title("Distribution over record classes")
    fig.tight_layout()
    return fig


def write_audit(res, release, out_dir, release_path: str = "", corruption=None, attacks=None) -> Path:
    """Write audit_summary.csv, audit_classes.csv, posterior.png (+ corruption.csv, + attacks.csv
    for an :class:`~ppdp.audit.attacks.AttackReport`) and report.html."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    csv_safe_frame(res.summary).to_csv(out / "audit_summary.csv", index=False, float_format="%.6g")
    csv_safe_frame(res.classes.drop(columns=["code"])).to_csv(out / "audit_classes.csv", index=False, float_format="%.6g")
    png = figure_png(_plot_posteriors(res))
    (out / "posterior.png").write_bytes(png)
    if corruption is not None:
        csv_safe_frame(corruption).to_csv(out / "corruption.csv", index=False, float_format="%.6g")
    m = release.manifest
    meta = {"release": release_path, "family": res.family, "mechanism": res.mechanism, "params": m.get("params"),
            "fit_for_publication": m.get("fit_for_publication"), "bound": res.bound_name, "violations": res.n_violations, "notes": res.notes,
            "headline": res.headline(), "sensitive_values": res.sensitive_values, "records_disclosed": res.exposed,
            "disclosure_allowed": res.disclosure_allowed,
            "machine": machine_info()}
    if attacks is not None:
        csv_safe_frame(attacks.table).to_csv(out / "attacks.csv", index=False, float_format="%.6g")
        meta["attacks"] = attacks.to_dict()
    (out / "audit.json").write_text(json.dumps(meta, indent=2, default=str) + "\n")

    rep = HtmlReport(f"ppdp audit — {res.mechanism} release")
    verdict = res.headline()
    rep.paragraph(f"Release {release_path or '(in memory)'}: family {res.family}, mechanism {res.mechanism}, "
                  f"params {json.dumps(m.get('params'), default=str)}. Bound: {res.bound_name}.")
    rep.paragraph(verdict, css="ok" if res.ok else "bad")
    if attacks is not None:
        rep.paragraph(attacks.headline(), css="ok" if attacks.ok else "bad")
    rep.paragraph("Judged against the sensitive values "
                  + ("declared: every value (none declared)" if res.sensitive_values is None
                     else f"declared: {', '.join(res.sensitive_values) or 'none'}") + ".")
    for n in res.notes:
        rep.note(n)
    if attacks is not None:
        attack_section(rep, attacks)
    rep.heading("Posterior vs bound per SA value")
    rep.figure(png, "Left: the adversary's best posterior per SA value over all record classes (red: a violation), the "
                    "bound and the prior. Right: posterior/bound over all record classes.")
    rep.table(res.summary, bad_rows=list(res.summary["violations"] > 0))
    bad = res.classes[res.classes["violation"]]
    if len(bad):
        rep.heading("Violating record classes")
        rep.table(bad.drop(columns=["code"]).reset_index(drop=True), max_rows=50)
    if corruption is not None:
        rep.heading("Corruption attack")
        rep.paragraph("An adversary knows the SA value of q random records of each bucket; best posterior on a remaining "
                      "record, without fake values and with σ fake values per bucket (Wang et al. 2011, §6).")
        rep.table(corruption)
    rep.provenance({"release": release_path, "mechanism": res.mechanism, "params": m.get("params"),
                    "fit_for_publication": m.get("fit_for_publication"), "n_input": m.get("n_input"), "n_published": m.get("n_published")})
    return rep.write(out / "report.html")


def write_differential(df, out_dir, corruption=None) -> Path:
    """Write differential_inference.csv/.png (+ corruption.csv) and report.html."""
    from .differential import plot_differential

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    csv_safe_frame(df).to_csv(out / "differential_inference.csv", index=False, float_format="%.8g")
    png = figure_png(plot_differential(df))
    (out / "differential_inference.png").write_bytes(png)
    rep = HtmlReport("ppdp audit — differential inference (Wang et al. 2011, Theorem 2)")
    eps = df["epsilon"].iloc[0]
    rep.paragraph(f"Two count queries with true answers x and y = {df['y_over_x'].iloc[0]}·x, answered with Laplace noise "
                  f"of scale b = 1/ε = {1 / eps:g}. The ratio Y/X of the noisy answers estimates y/x: "
                  "Theorem 2 gives E[Y/X] ≈ (y/x)(1 + 2b²/x²), var ≈ (2b²/x²)(1 + (y/x)²).")
    rep.figure(png, "Bias factor and variance of Y/X: Monte-Carlo vs Theorem 2 and the exact value.")
    cols = ["x", "theorem2_factor", "fourth_order_factor", "exact_factor", "mc_factor", "mc_se", "theorem2_var", "mc_var",
            "mc_within_3se_of_exact", "mc_within_3se_of_theorem2"]
    rep.table(df[cols])
    rep.note("Theorem 2 is a second-order expansion; the next term is 24b⁴/x⁴. At ε = 0.1, x = 100 the exact factor is "
             "≈ 1.023 (the paper's 1.02 is that value to two decimals); at x = 1000 the factor is 1.0002.")
    if corruption is not None:
        csv_safe_frame(corruption).to_csv(out / "corruption.csv", index=False, float_format="%.6g")
        rep.heading("Corruption attack")
        rep.table(corruption)
    rep.provenance({"epsilon": eps, "n_samples": int(df["n_samples"].iloc[0]), "seed": int(df["seed"].iloc[0])})
    return rep.write(out / "report.html")


def attack_table(attacks):
    """The attack table as the reports show it: success, control and risk with 95% intervals,
    the bound and whether the attack beats it."""
    import pandas as pd

    def ci(v, lo, hi):
        return "–" if v != v else f"{v:.3f} [{lo:.3f}, {hi:.3f}]"

    t = attacks.table
    return pd.DataFrame({
        "attack": t["attack"],
        "success on training records [95% CI]": [ci(*r) for r in t[["success", "success_lo", "success_hi"]].to_numpy()],
        "control (held back) [95% CI]": [ci(*r) for r in t[["control", "control_lo", "control_hi"]].to_numpy()],
        "risk [95% CI]": [ci(*r) for r in t[["risk", "risk_lo", "risk_hi"]].to_numpy()],
        "formal bound": [("–" if b != b else f"{b:.3f}") for b in t["bound"]],
        "bound from": t["bound_name"],
        "beats bound": ["YES" if x else "no" for x in t["beats_bound"]],
        "n": t["targets"],
    }).astype({"attack": object})


def attack_section(rep, attacks) -> None:
    """The attacks next to the bound, as a report section."""
    from .attacks import BEATS_RULE

    rep.heading("Attacks next to the bound")
    rep.paragraph("Attacks that do not assume the model (Giomi et al. 2023): each runs on records of the training part "
                  "the release was published from and on control records held back from it; risk = (success − "
                  "control)/(1 − control). The formal bound is the claim's: for attribute inference the posterior "
                  "bound of each guessed value averaged over the guesses, for an ε-DP release e^ε times the control's "
                  f"upper interval end. Rule: {BEATS_RULE}.")
    rep.table(attack_table(attacks), bad_rows=list(attacks.table["beats_bound"]))
    for n in attacks.notes:
        rep.note(n)
    for _, r in attacks.table.iterrows():
        if r["note"]:
            rep.note(f"{r['attack']}: {r['note']}")

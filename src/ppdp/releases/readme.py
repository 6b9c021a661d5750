"""The README.md every release directory carries: a receiver's guide written for someone
without ppdp.

It is generated from the manifest alone (:func:`render_readme`), so ``verify`` can regenerate
it and report a shipped README that differs (a tampered README cannot mislead). It holds the
claim in plain words (``Claim.statement`` and the disclosure line), a data dictionary (each
file, each column, its type and domain), what each file holds, and recipes that estimate a
count with pandas or DuckDB SQL, per family:

* bucketized — Anatomy's estimator Σ_g n_g(P)·c_g(S)/|g| (Xiao & Tao 2006) over qit and st;
* randomized — the inversion x̂ = (y − n·q)/p per sub-table, p and q from the manifest;
* histogram — the sum of the noisy cell counts in the range (cell index → label mapping);
* answers — a lookup of the published answer.

Plain string formatting rather than a template engine: the document is a function of the
manifest that ``verify`` recomputes byte for byte, and the core install (which verify needs)
then carries no template dependency.
"""

from __future__ import annotations

import json
from typing import Any, Mapping, Sequence

from ..claims import claim_of, disclosure_statement
from ..errors import PpdpError

#: file name of the README inside a release directory
README_NAME = "README.md"
#: largest README read back by the loader (bytes)
MAX_README_BYTES = 8 * 2**20
#: domains up to this size are listed in full; longer ones show their first labels
LIST_FULL = 30
LIST_FIRST = 8

_FAMILY_FILES: dict[str, dict[str, str]] = {
    "bucketized": {
        "qit": "the quasi-identifier table: one row per published record, its quasi-identifier labels as they were "
               "and `bid`, the bucket it belongs to",
        "st": "the sensitive table: per bucket (`bid`) and sensitive value, `count` = how many records of the bucket "
              "are listed with that value (fake values, if any, appear with count 1 and are not marked)",
    },
    "randomized": {
        "data": "one row per published record: the quasi-identifier labels as they were and the sensitive value(s) "
                "after randomization (the published value is often not the true one)",
    },
    "ldp": {
        "data": "k rows per published record (column `record`): the record's quasi-identifier labels as they were "
                "and, one per row, the k values of its ε-locally differentially private report (its own value is "
                "among them only with probability p; see the recipe)",
    },
    "histogram": {
        "cells": "the noisy cell histogram: one integer column per dimension holding the cell index (see the index → "
                 "label mapping below) and `count`, the noisy count of the cell",
        "partitions": "noisy partition counts: `pid`, for each dimension `<dim>_lo` / `<dim>_hi` (first and last cell "
                      "index of the partition, inclusive) and `count`",
        "marginals": "the noisy marginals the cells were inferred from (when the mechanism measured marginals): `set` "
                     "(which marginal), `cell` (the cell's index within it, row-major) and `count`, its noisy count",
    },
    "answers": {
        "answers": "one row per query of the workload the release was made for: `where` (the query as text), `query` "
                   "(its exact JSON form) and `count`, the noisy answer",
    },
}


def sql_name(name: str) -> str:
    """A double-quoted SQL identifier."""
    return '"' + str(name).replace('"', '""') + '"'


def sql_text(value: str) -> str:
    """A single-quoted SQL string literal."""
    return "'" + str(value).replace("'", "''") + "'"


def _md(text: Any) -> str:
    """Text safe inside a Markdown table cell or inline code."""
    return str(text).replace("|", "\\|").replace("`", "'").replace("\n", " ")


def _labels(labels: Sequence[str]) -> str:
    shown = ", ".join(f"`{_md(lab)}`" for lab in labels[:LIST_FULL if len(labels) <= LIST_FULL else LIST_FIRST])
    if len(labels) <= LIST_FULL:
        return f"{len(labels)} labels: {shown}"
    return f"{len(labels)} labels, the first {LIST_FIRST}: {shown}, … (all in `manifest.json`, `schema.domains`)"


def _columns(manifest: Mapping[str, Any], stem: str) -> list[tuple[str, str, str]]:
    """(column, type, domain / meaning) of one file, from the manifest only."""
    sch = manifest.get("schema", {})
    quasi, sens, doms = list(sch.get("quasi", [])), list(sch.get("sensitive", [])), sch.get("domains", {})
    fam = manifest.get("family")
    cert = manifest.get("certificate", {})
    lab = "text label"

    def dom(c: str) -> str:
        return _labels(list(doms.get(c, [])))

    if fam == "bucketized" and stem == "qit":
        return [*((c, lab, "quasi-identifier; " + dom(c)) for c in quasi), ("bid", "integer", "bucket id")]
    if fam == "bucketized" and stem == "st":
        return [("bid", "integer", "bucket id (as in qit)"),
                *((c, lab, "sensitive attribute; " + dom(c)) for c in sens),
                ("count", "integer", "records of the bucket listed with this value")]
    if fam == "randomized":
        cols = [*((c, lab, "quasi-identifier, published unchanged; " + dom(c)) for c in quasi),
                *((c, lab, "sensitive attribute, randomized; " + dom(c)) for c in sens)]
        if cert.get("subtables"):
            cols.append(("subtable", "integer", f"sub-table id, 0 … {len(cert['subtables']) - 1}"))
        return cols
    if fam == "ldp":
        return [("record", "integer", "record number 0 … n−1 (k rows each)"),
                *((c, lab, "quasi-identifier, published unchanged; " + dom(c)) for c in quasi),
                *((c, lab, "one value of the record's report; " + dom(c)) for c in sens)]
    if fam == "histogram" and stem == "cells":
        return [*((c, "integer", f"cell index 0 … {len(doms.get(c, [])) - 1} of dimension {_md(c)} (mapping below)") for c in quasi),
                ("count", "number", "noisy count of the cell (can be negative)")]
    if fam == "histogram" and stem == "partitions":
        cols = [("pid", "integer", "partition id 0 … P−1")]
        for c in quasi:
            cols += [(f"{c}_lo", "integer", f"first cell index of {_md(c)} in the partition"),
                     (f"{c}_hi", "integer", f"last cell index of {_md(c)} in the partition (inclusive)")]
        return cols + [("count", "number", "noisy count of the partition")]
    if fam == "answers":
        return [("where", "text", "the query's WHERE clause"), ("query", "text", "the query's exact JSON form"),
                ("count", "number", "noisy answer")]
    return []


def _example(manifest: Mapping[str, Any]) -> tuple[str, str, str | None]:
    """(QI column, one of its labels, SA column or None) for the worked example."""
    sch = manifest.get("schema", {})
    quasi, sens, doms = list(sch.get("quasi", [])), list(sch.get("sensitive", [])), sch.get("domains", {})
    q = quasi[0] if quasi else (sens[0] if sens else "column")
    labels = list(doms.get(q, [])) or ["label"]
    return q, labels[0], (sens[0] if sens else None)


def _numeric_note(manifest: Mapping[str, Any]) -> str:
    num = manifest.get("schema", {}).get("numeric", {}) or {}
    cols = [c for c, v in num.items() if v is not None]
    if not cols or manifest.get("family") in ("histogram", "answers"):
        return ""
    return (f"\nLabels are text, also for numbers ({', '.join(f'`{_md(c)}`' for c in cols)}): compare numerically with "
            f"`TRY_CAST({sql_name(cols[0])} AS DOUBLE) BETWEEN 30 AND 40` in SQL, "
            f"`pd.to_numeric(df[{cols[0]!r}], errors='coerce').between(30, 40)` in pandas.\n")


def _recipe_bucketized(manifest: Mapping[str, Any]) -> str:
    q, lab, sa = _example(manifest)
    sa = sa or "SA"
    sa_lab = (manifest["schema"]["domains"].get(sa) or ["value"])[0]
    P = f"{sql_name(q)} = {sql_text(lab)}"
    S = f"{sql_name(sa)} = {sql_text(sa_lab)}"
    sigma = int(manifest.get("certificate", {}).get("fake_values", 0) or 0)
    out = f"""Anatomy's estimator (Xiao & Tao 2006): for a condition P on the quasi-identifiers and S on `{_md(sa)}`,

    estimate = Σ over buckets g of  n_g(P) · c_g(S) / |g|

with n_g(P) the qit rows of bucket g meeting P, c_g(S) the st count of g on the values meeting S, and |g| the
qit rows of g. The example counts records with {_md(P)} and {_md(S)}; replace the two WHERE clauses.

DuckDB (run in this directory):

```sql
WITH size AS (SELECT bid, COUNT(*) AS g FROM 'qit.parquet' GROUP BY bid),
     np   AS (SELECT bid, COUNT(*) AS n FROM 'qit.parquet' WHERE {P} GROUP BY bid),
     cs   AS (SELECT bid, SUM("count") AS c FROM 'st.parquet' WHERE {S} GROUP BY bid)
SELECT COALESCE(SUM(CAST(np.n AS DOUBLE) * cs.c / size.g), 0) AS estimate
FROM np JOIN cs USING (bid) JOIN size USING (bid);
```

pandas:

```python
import pandas as pd
qit, st = pd.read_parquet("qit.parquet"), pd.read_parquet("st.parquet")
size = qit.groupby("bid", observed=True).size()
n_p = qit[qit[{q!r}] == {lab!r}].groupby("bid", observed=True).size()
c_s = st[st[{sa!r}] == {sa_lab!r}].groupby("bid", observed=True)["count"].sum()
estimate = (n_p * c_s / size).dropna().sum()
```
"""
    if sigma:
        out += f"""
This release lists σ = {sigma} fake value(s) in every bucket (count 1, not marked). The recipe above counts them
as real, so it overstates a count by the fakes it meets. ppdp's estimate (`ppdp query`) subtracts them
without knowing which they are: in bucket g, each value x that could have been drawn as a fake (a
record of g could hold it under the thresholds f'_x in `certificate.thresholds`, i.e. ⌊f'_x·|g|⌋ ≥ 1,
no published negative association excludes it) but does not appear in g gets c_g(x) = −σ/|D_g|, with
D_g the set of such values; every other value keeps its count. Add these terms to c_g(S) to reproduce it.
"""
    return out


def _recipe_randomized(manifest: Mapping[str, Any]) -> str:
    cert = manifest.get("certificate", {})
    sch = manifest["schema"]
    q, lab, sa = _example(manifest)
    sa = sa or "SA"
    labels = list(sch["domains"].get(sa, []))
    if cert.get("model") == "diverted":
        return (f"This is an ℓ'-diverted release (ℓ' = {cert.get('l_prime')}): its published value distribution is "
                f"the best estimate of the true one for counts over `{_md(sa)}` alone (count the rows of `data.parquet`). "
                "Counts that also condition on quasi-identifiers need the group-schedule transition matrix that ppdp "
                "rebuilds from the published counts (`ppdp query`); no short recipe reproduces it.\n")
    subs = cert.get("subtables") or []
    if subs:
        groups = [(int(s["id"]), float(s["p"]), float(s["q"]), list(s["domain"])) for s in subs]
        src = "'data.parquet'"
        intro = (f"Small-domain randomization in {len(groups)} sub-tables: a record of sub-table j (column `subtable`) "
                 f"keeps its value with probability p_j + q_j and shows each other value of the sub-table's domain D_j "
                 f"with probability q_j.")
    elif cert.get("p") is not None and cert.get("q") is not None:
        groups = [(0, float(cert["p"]), float(cert["q"]), labels)]
        src = "(SELECT *, 0 AS subtable FROM 'data.parquet')"
        intro = (f"Uniform perturbation on the {len(labels)} values of `{_md(sa)}`: a record keeps its value with "
                 f"probability p + q and shows each other value with probability q (one group, j = 0).")
    else:
        return "The release's transition model is not a uniform one; use `ppdp query`.\n"
    S = f"{sql_name(sa)} = {sql_text(labels[0] if labels else 'value')}"
    P = f"{sql_name(q)} = {sql_text(lab)}"
    model_rows = ",\n    ".join(f"({j}, {p!r}, {qq!r})" for j, p, qq, _ in groups)
    dom_rows = ",\n    ".join(f"({j}, {sql_text(v)})" for j, _, _, d in groups for v in d)
    pq_py = ", ".join(f"{j}: ({p!r}, {qq!r})" for j, p, qq, _ in groups)
    dom_py = ",\n    ".join(f"{j}: {list(map(str, d))!r}" for j, _, _, d in groups)
    sub_py = 'lambda d: d["subtable"]' if subs else "0"
    return f"""{intro} p and q per group are in the manifest (`certificate`) and repeated below.
The inversion, in every group j, for the n_j rows meeting a quasi-identifier condition P, of which y_jx
show the value x:

    x̂ = Σ_j Σ_(x in S ∩ D_j)  (y_jx − n_j · q_j) / p_j

(ppdp's `inversion` estimator: unbiased, can be negative; ppdp's default for SDR and uniform releases, `eb`,
shrinks these counts towards a parent distribution and projects them to be non-negative). The example counts records with {_md(P)} and {_md(S)}; replace both
WHERE conditions (S appears twice: on the data and on the domain list).

DuckDB (run in this directory):

```sql
WITH model(subtable, p, q) AS (VALUES
    {model_rows}),
     dom(subtable, {sql_name(sa)}) AS (VALUES
    {dom_rows}),
     k AS (SELECT subtable, COUNT(*) AS k FROM dom WHERE {S} GROUP BY subtable),
     r AS (SELECT subtable, COUNT(*) AS n, SUM(CASE WHEN {S} THEN 1 ELSE 0 END) AS y
           FROM {src} WHERE {P} GROUP BY subtable)
SELECT COALESCE(SUM((r.y - r.n * COALESCE(k.k, 0) * model.q) / model.p), 0) AS estimate
FROM r JOIN model USING (subtable) LEFT JOIN k USING (subtable);
```

pandas:

```python
import pandas as pd
df = pd.read_parquet("data.parquet")
pq = {{{pq_py}}}
domain = {{
    {dom_py}}}
S = {{{(labels[0] if labels else 'value')!r}}}  # the sensitive values counted
df = df[df[{q!r}] == {lab!r}].assign(j={sub_py})
estimate = 0.0
for j, rows in df.groupby("j"):
    p, q = pq[int(j)]
    k = len(S & set(domain[int(j)]))
    y = rows[{sa!r}].astype(str).isin(S).sum()
    estimate += (y - len(rows) * k * q) / p
```
"""


def _recipe_histogram(manifest: Mapping[str, Any]) -> str:
    sch, cert = manifest["schema"], manifest.get("certificate", {})
    dims = list(cert.get("dims") or sch.get("quasi", []))
    doms, bins = sch.get("domains", {}), cert.get("bins", {}) or {}
    lines = ["Cells hold integer indices. Index i of a dimension stands for its i-th label "
             "(`manifest.json`, `schema.domains`, 0-based):", ""]
    for d in dims:
        labs = list(doms.get(d, []))
        edges = bins.get(d)
        binned = isinstance(edges, list) and len(edges) == len(labs) + 1 and all(isinstance(e, (int, float)) for e in edges)
        how = " (bin i covers [edge_i, edge_i+1), the last bin is closed)" if binned else ""
        shown = labs if len(labs) <= LIST_FULL else labs[:LIST_FIRST]
        lines.append(f"- `{_md(d)}`, {len(labs)} cells{how}: " + ", ".join(f"{i} → `{_md(lab)}`" for i, lab in enumerate(shown))
                     + ("" if len(labs) <= LIST_FULL else f", … (all {len(labs)} in `manifest.json`)"))
    d0 = dims[0] if dims else "dim"
    n0 = len(doms.get(d0, [])) or 1
    hi = min(1, n0 - 1)
    has_cells = int(manifest.get("files", {}).get("cells", {}).get("rows", 0) or 0) > 0 or cert.get("storage") == "sparse"
    cond = f"{sql_name(d0)} BETWEEN 0 AND {hi}"
    lines += ["", "A range condition on a numeric dimension selects the cells whose label lies in the range; on a "
              "binned dimension it must follow the bin edges (`schema.bins`; ppdp refuses a range that cuts a bin) "
              "and selects the bins it covers. An equality on a label selects its index.", ""]
    if has_cells:
        lines += [f"Estimate a count by summing the noisy counts of the cells in the range (ppdp's `cells` estimator; "
                  f"cells not listed count 0). The example counts the cells with {_md(d0)} index 0 … {hi}:", "",
                  "```sql", f"SELECT COALESCE(SUM(\"count\"), 0) AS estimate FROM 'cells.parquet' WHERE {cond};", "```", "",
                  "```python", "import pandas as pd", 'cells = pd.read_parquet("cells.parquet")',
                  f'estimate = cells.loc[cells[{d0!r}].between(0, {hi}), "count"].sum()', "```", ""]
    if int(manifest.get("files", {}).get("partitions", {}).get("rows", 0) or 0) > 0:
        overlap = " * ".join(
            f"GREATEST(0, LEAST({sql_name(d + '_hi')}, {hi if d == d0 else len(doms.get(d, [])) - 1}) - "
            f"GREATEST({sql_name(d + '_lo')}, 0) + 1)" for d in dims)
        size = " * ".join(f"({sql_name(d + '_hi')} - {sql_name(d + '_lo')} + 1)" for d in dims)
        lines += ["From the partitions, spread each partition's count evenly over its cells (ppdp's `uniform` "
                  "estimator): a partition contributes count × (its cells in the range) / (its cells). Replace the "
                  "range bounds of each dimension:", "",
                  "```sql", f"SELECT COALESCE(SUM(\"count\" * {overlap} / ({size})), 0) AS estimate FROM 'partitions.parquet';",
                  "```", ""]
    default = manifest.get("mechanism")
    lines.append(f"ppdp's default estimator for a `{_md(default)}` release may differ from these (e.g. least squares over "
                 "cells and partitions); `ppdp query RELEASE \"WHERE…\"` gives it.")
    return "\n".join(lines) + "\n"


def _recipe_answers(manifest: Mapping[str, Any]) -> str:
    return """The release answers only the queries it was made for: look the query up.

```sql
SELECT "where", "count" FROM 'answers.parquet';
```

```python
import pandas as pd
answers = pd.read_parquet("answers.parquet").set_index("where")["count"]
```

`count` is the noisy answer (an integer stored as a number); the WHERE text is written as ppdp prints it.
"""


def _recipe_ldp(manifest: Mapping[str, Any]) -> str:
    cert = manifest.get("certificate", {})
    q, lab, sa = _example(manifest)
    sa = sa or "SA"
    labels = list(manifest["schema"]["domains"].get(sa, []))
    k, p, qq = cert.get("k"), cert.get("p"), cert.get("q")
    S = f"{sql_name(sa)} = {sql_text(labels[0] if labels else 'value')}"
    P = f"{sql_name(q)} = {sql_text(lab)}"
    return f"""k-subset selection under ε-local differential privacy (ε = {cert.get('epsilon')}): every record reports
k = {k} of the values of `{_md(sa)}`, its own with probability p = {p!r} and any other with probability q = {qq!r}.
For the n records meeting a quasi-identifier condition P, of which c report the value x, the unbiased count is

    x̂ = (c − n · q) / (p − q)

(ppdp's `inversion` estimator; its default, `eb`, shrinks these counts towards the whole table's distribution
and projects them to be non-negative). The example counts records with {_md(P)} and {_md(S)}:

```sql
SELECT (SUM(CASE WHEN {S} THEN 1 ELSE 0 END) - COUNT(DISTINCT "record") * {qq!r}) / ({p!r} - {qq!r}) AS estimate
FROM 'data.parquet' WHERE {P};
```
"""


_RECIPES = {"bucketized": _recipe_bucketized, "ldp": _recipe_ldp, "randomized": _recipe_randomized, "histogram": _recipe_histogram,
            "answers": _recipe_answers}


def render_readme(manifest: Mapping[str, Any], fmt: str = "parquet") -> str:
    """The README.md of a release, from its manifest alone (deterministic). ``fmt="csv"``: the
    README of ``ppdp export --format csv``, whose recipes read the exported CSV files."""
    text = _render_readme(manifest)
    return text if fmt == "parquet" else _as_csv(manifest, text)


def _as_csv(manifest: Mapping[str, Any], text: str) -> str:
    """The README's files and recipes turned to the CSV copies: label columns read as text
    (a label such as `1` stays the text `1`), every other column as a number."""
    import re

    def labels(stem: str) -> list[str]:
        return [c for c, t, _ in _columns(manifest, stem) if t.endswith("label") or t == "text"]

    def duck(m: re.Match) -> str:
        cols = labels(m.group(1))
        types = ", ".join(f"{sql_text(c)}: 'VARCHAR'" for c in cols)
        opts = f", types = {{{types}}}" if cols else ""
        return f"read_csv('{m.group(1)}.csv', header = true, quote = '\"'{opts})"

    def pandas(m: re.Match) -> str:
        cols = labels(m.group(1))
        dtype = f", dtype={{{', '.join(f'{c!r}: str' for c in cols)}}}" if cols else ""
        return f'pd.read_csv("{m.group(1)}.csv"{dtype}, keep_default_na=False)'

    text = re.sub(r"'(\w+)\.parquet'", duck, text)
    text = re.sub(r'pd\.read_parquet\("(\w+)\.parquet"\)', pandas, text)
    text = re.sub(r"### `(\w+)\.parquet`", r"### `\1.csv`", text)
    note = ("These are the CSV copies of the release's tables written by `ppdp export --format csv`, beside its "
            "`manifest.json`; the recipes below read them. A text cell a spreadsheet would run as a formula (one "
            "beginning with `=`, `+`, `-` or `@`, not a number) carries a leading `'`. The release itself, with "
            "its Parquet files, is what `ppdp verify` checks.")
    head, _, rest = text.partition("\n\n")
    return f"{head}\n\n{note}\n\n{rest}"


def _render_readme(manifest: Mapping[str, Any]) -> str:
    fam = str(manifest.get("family"))
    mech = manifest.get("mechanism")
    try:
        statement = claim_of(manifest).statement()
    except (PpdpError, KeyError, TypeError, ValueError, AttributeError) as e:
        statement = f"(the certificate cannot be read: {e})"
    fit = manifest.get("fit_for_publication") is True
    out = [f"# A ppdp release: {_md(mech)} ({_md(fam)} family)", "",
           "This directory is a privacy-protected release in the `ppdp-release/1` format: `manifest.json` (parameters, "
           "schema, the privacy certificate) and Parquet files, readable with pandas, DuckDB, Spark or any Parquet "
           "reader. This README is generated from `manifest.json`; `ppdp verify` regenerates it and reports a "
           "difference.", "",
           "## What is protected", "", _md(statement), "", _md(disclosure_statement(manifest.get("disclosure"))), ""]
    if not fit:
        out += ["**Not fit for publication**: " + _md(manifest.get("randomness", "a seeded test run")) + ".", ""]
    n_pub = manifest.get("n_published")
    est = " (a noisy estimate, not the exact number)" if fam == "histogram" else ""
    out += [f"Published records: {n_pub}{est}; dropped: {manifest.get('dropped', 0)}.", ""]
    mv = manifest.get("missing_values")
    if isinstance(mv, Mapping):
        cols = ", ".join(f"`{_md(c)}`" for c in mv.get("columns", []))
        told = (f"{mv['rows_dropped']} of the {mv['rows_read']} rows read" if "rows_read" in mv
                else "their number is not published (an exact count is not ε-DP)")
        out += [f"**Missing values**: rows with a missing value in {cols} were left out before publishing; {told}.", ""]
    util = manifest.get("utility")
    if isinstance(util, Mapping) and util.get("warning"):
        allowed = " Published anyway (`--allow-low-utility`)." if util.get("allowed_low_utility") else ""
        out += [f"**Low utility**: {_md(util['warning'])}.{allowed}", ""]
    out += ["## Files", ""]
    files = manifest.get("files", {})
    for stem in files:
        rows = files[stem].get("rows") if isinstance(files[stem], Mapping) else None
        out += [f"### `{_md(stem)}.parquet` ({rows} rows)", "",
                _FAMILY_FILES.get(fam, {}).get(stem, "a file of this release") + ".", "",
                "| column | type | domain / meaning |", "|---|---|---|"]
        out += [f"| `{_md(c)}` | {t} | {d} |" for c, t, d in _columns(manifest, stem)]
        out.append("")
    out += ["## Estimating a count without ppdp", ""]
    recipe = _RECIPES.get(fam)
    out.append(recipe(manifest) if recipe else "No recipe for this family; use `ppdp query`.\n")
    out.append(_numeric_note(manifest))
    return "\n".join(out).rstrip("\n") + "\n"


def manifest_roundtrip(manifest: Mapping[str, Any], default=None) -> dict[str, Any]:
    """The manifest as a reader sees it (through JSON), so the README written at save time is
    the one ``verify`` regenerates from the saved file."""
    return json.loads(json.dumps(manifest, default=default, allow_nan=False))


__all__ = ["README_NAME", "MAX_README_BYTES", "render_readme", "manifest_roundtrip", "sql_name", "sql_text"]

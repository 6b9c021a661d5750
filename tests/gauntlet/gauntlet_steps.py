"""The gauntlet: every table under tests/gauntlet/data taken end to end through the CLI, as a new
user would, with nothing edited by hand.

``schema infer`` → compared with the reviewed schema under schemas/ → ``evaluate`` (one model
per family) → ``publish`` every family → ``verify`` each release against the source →
GROUP BY and range queries → ``audit`` → ``export`` → the export README's pandas recipe, run in
a fresh interpreter that does not import ppdp.

Shared by tests/gauntlet/test_gauntlet.py and benchmarks/bench_gauntlet.py. Commands run in this
process through click's CliRunner (one import of ppdp for the whole run); CPU seconds are this
process's (``time.process_time``) plus those of the recipe's child interpreter.
"""

from __future__ import annotations

import math
import os
import re
import resource
import subprocess
import sys
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).parent
DATA = HERE / "data"
SCHEMAS = HERE / "schemas"

#: per table: its file, the histogram dimensions (two quasi-identifiers and the sensitive
#: column), a GROUP BY column, a range condition that follows the bins, anatomy's ℓ
TABLES: dict[str, dict] = {
    "anes96": dict(file="anes96.csv", dims="age,educ,PID", group="educ", where="age >= 30 AND age < 50",
                   params={"fprivacy": ["--theta", "4"]}),
    "arrests": dict(file="arrests.tsv", dims="colour,age,checks", group="colour", where="age >= 18 AND age < 35",
                    params={"fprivacy": ["--theta", "2"]}),
    "chile": dict(file="chile.csv", dims="region,age,vote", group="region", where="age >= 30 AND age < 50",
                  params={"fprivacy": ["--theta", "2"]}),
    "diabetes": dict(file="diabetes.csv", dims="age,sex,target", group="sex", where="age >= 30 AND age < 50",
                     params={"fprivacy": ["--theta", "1.5"], "sdr": ["--rho1", "0.2", "--rho2", "0.5"],
                             "uniform": ["--rho1", "0.2", "--rho2", "0.5"]}),
    "fair": dict(file="fair.tsv", dims="age,religious,affairs", group="religious", where="age >= 20 AND age < 35",
                 params={"fprivacy": ["--theta", "2"]},
                 refused={"anatomy": r"needs every SA frequency ≤ 1/ℓ",
                          "diverted": r"not eligible for ℓ' = 2"}),
    "gss_vocab": dict(file="gss_vocab.csv.gz", dims="gender,age,vocab", group="gender",
                      where="age >= 30 AND age < 50", params={"fprivacy": ["--theta", "4"]}),
    "health_insurance": dict(file="health_insurance.csv", dims="age,ethnicity,health", group="ethnicity",
                             where="age >= 25 AND age < 45",
                             refused={"anatomy": r"needs every SA frequency ≤ 1/ℓ",
                                      "global": r"retention 0.5 ≤ 1/m = 1/2",
                                      "diverted": r"not eligible for ℓ' = 2"}),
    "islr_wage": dict(file="islr_wage.csv", dims="age,education,wage", group="education",
                      where="age >= 25 AND age < 45", params={"fprivacy": ["--theta", "1.5"]}),
    "slid_fr": dict(file="slid_fr.csv", dims="age,langue,salaire", group="langue", where="age >= 25 AND age < 45",
                    params={"fprivacy": ["--theta", "2"]}),
    "titanic": dict(file="titanic.csv", dims="passengerClass,age,survived", group="passengerClass",
                    where="age >= 20 AND age < 40",
                    params={"fprivacy": ["--theta", "1.5"], "sdr": ["--rho1", "0.4", "--rho2", "0.7"],
                            "uniform": ["--rho1", "0.4", "--rho2", "0.7"]},
                    refused={"anatomy": r"needs every SA frequency ≤ 1/ℓ",
                             "global": r"retention 0.5 ≤ 1/m = 1/2",
                             "diverted": r"not eligible for ℓ' = 2"}),
    # the second batch: wider tables, an identifier, dates, continuous and very skewed sensitive
    # columns, missing sensitive values, BOM, CRLF, quoted thousands separators, label variants
    "covid_testing": dict(file="covid_testing.csv.gz", eval_dims=True, dims="gender,age,result", group="gender",
                          where="age >= 18 AND age < 45",
                          refused={"anatomy": r"needs every SA frequency ≤ 1/ℓ",
                                   "diverted": r"not eligible for ℓ' = 2"}),
    "cps1988": dict(file="cps1988.csv.gz", dims="region,experience,wage", group="region",
                    where="experience >= 10 AND experience < 30", params={"fprivacy": ["--theta", "2"]}),
    "schooling": dict(file="schooling.csv", eval_dims=True, dims="age76,black,wage76", group="black",
                      where="age76 >= 25 AND age76 < 30",
                      params={"fprivacy": ["--theta", "2"], "sdr": ["--rho1", "0.2", "--rho2", "0.5"],
                              "uniform": ["--rho1", "0.2", "--rho2", "0.5"]}),
    "nmes1988": dict(file="nmes1988.tsv.gz", dims="gender,age,visits", group="gender", where="age >= 7 AND age < 8",
                     params={"fprivacy": ["--theta", "2"]}),
    "nhefs": dict(file="nhefs.csv.gz", eval_dims=True, dims="sex,age,wt82_71", group="sex", where="age >= 30 AND age < 50",
                  params={"fprivacy": ["--theta", "2"]}),
    "acs12": dict(file="acs12.psv", dims="gender,age,income", group="gender", where="age >= 20 AND age < 40",
                  params={"fprivacy": ["--theta", "2"]}),
    "nlswork": dict(file="nlswork.csv.gz", eval_dims=True, dims="race,age,ln_wage", group="race", where="age >= 30 AND age < 40",
                    params={"fprivacy": ["--theta", "2"]}),
}

#: ``eval_dims``: evaluate runs a range workload over ``dims`` (the default workload's every column
#: makes a cube of millions of cells, which evaluate refuses for a histogram model);
#: ``params``: the parameters this table's custodian picks where PUBLISH's do not fit it (F'-privacy's θ
#: so that no protected value's threshold reaches 1, SDR's ρ1 above the rarest value's share);
#: ``refused``: mechanisms whose eligibility the table does not meet (a binary sensitive attribute,
#: or one value held by more than half the rows), with the refusal they must give: exit 2, one line.

#: the parameters a custodian would pick, one release per family's mechanism
PUBLISH: dict[str, list[str]] = {
    "fprivacy": ["--theta", "8"],
    "anatomy": ["--l", "2"],
    "sdr": ["--rho1", "0.1", "--rho2", "0.5"],
    "uniform": ["--rho1", "0.1", "--rho2", "0.5"],
    "global": ["--l-prime", "2"],
    "diverted": ["--l-prime", "2"],
    "dp": ["--epsilon", "1"],
    "dpcube": ["--epsilon", "1"],
    "subset": ["--rho1", "0.1", "--rho2", "0.5"],
}
DP = ("dp", "dpcube")
EVALUATED = ("fprivacy", "sdr", "dpcube")  # one model per family: bucketized, randomized, histogram
AUDITED = ("fprivacy", "sdr")
EXPORTED = ("fprivacy", "sdr", "dp")

#: (table or "*", step or step prefix) → (owner, the bug in one line, a regex its error matches).
#: A step listed here must fail with that error (strict: a pass means the entry is stale).
_BINNED_MISSING = ("missing", "a binned numeric column with missing values (missing = \"category\") breaks every "
                   "ε-DP histogram: 'bins given for COL, but its values are not numeric'",
                   r"bins given for '\w+', but its values are not numeric")
_RANGE_MISSING = ("missing", "a range query on a bucketized or randomized release whose binned column has missing "
                  "values is refused: 'range bound ... is neither a number on a numeric domain nor a label'",
                  r"range bound '[\d.]+' for '\w+' is neither a number on a numeric domain nor a label")
KNOWN: dict[tuple[str, str], tuple[str, str, str]] = {
}


def known(table: str, step: str):
    for (t, s), v in KNOWN.items():
        if t in ("*", table) and (step == s or step.startswith(s + ":")):
            return v
    return None


@dataclass
class Step:
    name: str
    status: str  # "pass", "refused" (as documented), "xfail", "FAIL", "XPASS", "skip"
    cpu_s: float
    detail: str = ""


@dataclass
class Result:
    table: str
    rows: int
    columns: int
    missing_share: float
    steps: list[Step] = field(default_factory=list)

    def cpu_by_kind(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for s in self.steps:
            k = s.name.split(":")[0].replace("evaluate-model", "evaluate").replace("recipe-release", "recipe")
            out[k] = out.get(k, 0.0) + s.cpu_s
        return out

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for s in self.steps:
            out[s.status] = out.get(s.status, 0) + 1
        return out


def _child_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


class Runner:
    """Runs one table's steps, recording each step's outcome and CPU seconds."""

    def __init__(self, table: str, work: Path):
        from click.testing import CliRunner

        from ppdp.cli import cli

        self.cli, self.runner = cli, CliRunner()
        self.table, self.cfg, self.work = table, TABLES[table], work
        self.src = str(DATA / self.cfg["file"])
        self.schema = str(SCHEMAS / f"{table}.toml")
        self.steps: list[Step] = []

    def invoke(self, args: list[str]):
        r = self.runner.invoke(self.cli, args, catch_exceptions=True)
        if r.exception is not None and not isinstance(r.exception, SystemExit):
            return 99, f"{type(r.exception).__name__}: {r.exception}"
        return r.exit_code, r.output

    def step(self, name: str, fn) -> bool:
        """Run ``fn() -> (ok, detail)``; a KNOWN failure is an xfail, a KNOWN pass an XPASS."""
        t0, c0 = time.process_time(), _child_cpu()
        try:
            ok, detail = fn()
        except Exception as e:  # a step's own check raised: a failure with its message
            ok, detail = False, f"{type(e).__name__}: {e}"
        cpu = time.process_time() - t0 + _child_cpu() - c0
        line = _last_line(detail)
        k = known(self.table, name)
        if ok:
            status = "XPASS" if k else "refused" if name.split(":")[-1] in self.cfg.get("refused", {}) \
                and name.startswith("publish:") else "pass"
        elif k and re.search(k[2], detail):
            status = "xfail"
        else:
            status = "FAIL"
        self.steps.append(Step(name, status, round(cpu, 3), line if status != "pass" else ""))
        return ok

    def skip(self, name: str, why: str) -> None:
        self.steps.append(Step(name, "skip", 0.0, why))

    # -- the steps --------------------------------------------------------------------------

    def infer(self) -> tuple[bool, str]:
        out = self.work / "inferred.toml"
        code, text = self.invoke(["schema", "infer", self.src, "-o", str(out)])
        if code:
            return False, text
        got = tomllib.loads(out.read_text(encoding="utf-8"))
        want = tomllib.loads(Path(self.schema).read_text(encoding="utf-8"))
        problems = []
        for k in ("sep", "header", "encoding", "na", "missing", "thousands", "decimal", "lowercase"):
            if got["file"].get(k) != want["file"].get(k):
                problems.append(f"file.{k}: inferred {got['file'].get(k)!r}, reviewed {want['file'].get(k)!r}")
        if set(got["columns"]) != set(want["columns"]):
            problems.append(f"columns: inferred {sorted(got['columns'])}, reviewed {sorted(want['columns'])}")
        for c, spec in want["columns"].items():
            if spec.get("type") == "numeric" and got["columns"].get(c, {}).get("type") != "numeric":
                problems.append(f"{c}: reviewed numeric, inferred text")
        return not problems, "; ".join(problems) or text

    def evaluate(self) -> tuple[bool, str]:
        params = self.cfg.get("params", {})
        theta = params.get("fprivacy", PUBLISH["fprivacy"])[1]
        rho1, rho2 = params.get("sdr", PUBLISH["sdr"])[1::2]
        # the histogram model over every dimension the shared workload queries (dims left out)
        models = [f"fprivacy:theta={theta}", f"sdr:rho1={rho1},rho2={rho2}", "dpcube:epsilon=1"]
        args = ["evaluate", self.src, "--schema", self.schema, "--trials", "1", "--queries", "200",
                "-o", str(self.work / "evaluate")]
        if self.cfg.get("eval_dims"):  # a wide table: the histogram over every column is refused (too many cells)
            args += ["--workload", "range", "--dims", self.cfg["dims"]]
        for m in models:
            args += ["--model", m]
        code, text = self.invoke(args)
        ok = code == 0 and (self.work / "evaluate" / "report.html").exists()
        return ok, text

    def evaluated(self, name: str) -> tuple[bool, str]:
        """One model's row of the evaluate run: published, verified, answered, no error."""
        import pandas as pd

        df = pd.read_csv(self.work / "evaluate" / "models.csv", keep_default_na=False)
        row = df[df["name"] == name]
        if len(row) != 1:
            return False, f"models.csv has {len(row)} rows for {name}"
        row = row.iloc[0]
        ok = not row["error"] and str(row["verified"]) == "True" and math.isfinite(float(row["mean_rel_err"]))
        return ok, row["error"] or f"verified {row['verified']}, mean_rel_err {row['mean_rel_err']}"

    def publish(self, mech: str) -> tuple[bool, str]:
        args = ["publish", mech, self.src, "--schema", self.schema,
                *self.cfg.get("params", {}).get(mech, PUBLISH[mech])]
        if mech in DP:
            args += ["--dims", self.cfg["dims"]]
        code, text = self.invoke([*args, "-o", str(self.work / mech)])
        return code == 0, text

    def refused(self, mech: str) -> tuple[bool, str]:
        """A mechanism the table is not eligible for: exit 2, one line naming why, nothing on disk."""
        code, text = self.invoke(["publish", mech, self.src, "--schema", self.schema, *PUBLISH[mech],
                                  "-o", str(self.work / mech)])
        lines = [ln for ln in text.strip().splitlines() if ln.strip()]
        ok = (code == 2 and len(lines) == 1 and re.search(self.cfg["refused"][mech], lines[0]) is not None
              and not (self.work / mech).exists())
        return ok, text

    def verify(self, mech: str) -> tuple[bool, str]:
        rel = self.work / mech
        args = ["verify", str(rel), "--input", self.src, "--schema", self.schema]
        cust = Path(f"{rel}.custodian.json")
        if cust.exists():
            args += ["--custodian", str(cust)]
        code, text = self.invoke(args)
        return code == 0 and "verify: OK" in text, text

    def query(self, mech: str, sql: str) -> tuple[bool, str]:
        out = self.work / f"{mech}-q{abs(hash(sql)) % 10_000}.csv"
        code, text = self.invoke(["query", str(self.work / mech), sql, "-o", str(out)])
        if code:
            return False, text
        import pandas as pd

        df = pd.read_csv(out)
        ok = len(df) > 0 and bool(df["estimate"].map(math.isfinite).all())
        return ok, text if ok else f"no finite estimates in {out.name}"

    def query_input(self, mech: str) -> tuple[bool, str]:
        """The exact count beside the estimate: the source read with the schema."""
        code, text = self.invoke(["query", str(self.work / mech), self.cfg["where"], "--input", self.src,
                                  "--schema", self.schema])
        return code == 0, text

    def audit(self, mech: str) -> tuple[bool, str]:
        out = self.work / f"audit-{mech}"
        code, text = self.invoke(["audit", str(self.work / mech), "--input", self.src, "--schema", self.schema,
                                  "-o", str(out)])
        return code == 0 and (out / "audit_summary.csv").exists(), text

    def export(self, mech: str) -> tuple[bool, str]:
        code, text = self.invoke(["export", str(self.work / mech), "--format", "csv",
                                  "-o", str(self.work / f"export-{mech}")])
        return code == 0, text

    def _run_recipe(self, where: Path, readme: str) -> tuple[float | None, str]:
        blocks = re.findall(r"```python\n(.*?)```", readme, flags=re.S)
        if not blocks:
            return None, "the README has no pandas recipe"
        code = blocks[0] + "\nprint(repr(float(estimate)))\n"
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        env["PYTHONNOUSERSITE"] = "1"
        guard = "import sys; sys.modules['ppdp'] = None\n"  # the recipe must not need ppdp
        p = subprocess.run([sys.executable, "-c", guard + code], cwd=where, capture_output=True, text=True,
                           env=env, timeout=120)
        if p.returncode:
            return None, p.stderr.strip()
        return float(p.stdout.strip().splitlines()[-1]), p.stdout

    def recipe(self, mech: str) -> tuple[bool, str]:
        """The export README's pandas recipe, in a fresh interpreter without ppdp, in the export."""
        out = self.work / f"export-{mech}"
        est, text = self._run_recipe(out, (out / "README.md").read_text(encoding="utf-8"))
        return est is not None and math.isfinite(est), text

    def recipe_release(self, mech: str) -> tuple[bool, str]:
        """The release README's pandas recipe, run without ppdp in the release directory, gives
        ppdp's own estimate of the README's example count (Anatomy's estimator for a bucketized
        release, the inversion for a randomized one)."""
        rel = self.work / mech
        readme = (rel / "README.md").read_text(encoding="utf-8")
        est, text = self._run_recipe(rel, readme)
        if est is None or not math.isfinite(est):
            return False, text
        m = re.search(r'The example counts records with ("[^"]+" = \'[^\']*\') and ("[^"]+" = \'[^\']*\')', readme)
        if m is None:  # a histogram's example names cell indices: the recipe ran, nothing to compare
            return True, f"estimate {est}"
        args = ["query", str(rel), f"{m.group(1)} AND {m.group(2)}", "-o", str(self.work / f"{mech}-ex.csv")]
        if mech in ("sdr", "uniform"):
            args += ["--estimator", "inversion"]
        code, qtext = self.invoke(args)
        if code:
            return False, qtext
        import pandas as pd

        want = float(pd.read_csv(self.work / f"{mech}-ex.csv")["estimate"].iloc[0])
        ok = math.isclose(est, want, rel_tol=1e-9, abs_tol=1e-9)
        return ok, f"recipe {est}, ppdp query {want} for {m.group(1)} AND {m.group(2)}"


def _last_line(text: str) -> str:
    lines = [ln for ln in str(text).strip().splitlines() if ln.strip()]
    err = [ln for ln in lines if ln.startswith("error:") or "Error" in ln]
    return (err[-1] if err else lines[-1] if lines else "").strip()[:300]


def table_stats(table: str) -> tuple[int, int, float]:
    """Rows, columns and the share of missing cells of the file as its reviewed schema reads it."""
    from ppdp.schema import load_schema, read_frame

    sch = load_schema(SCHEMAS / f"{table}.toml")
    df = read_frame(DATA / TABLES[table]["file"], sch.file)
    miss = df.isna() | df.isin(list(sch.file.na) + [""])
    return len(df), df.shape[1], float(miss.to_numpy().mean())


def run_table(table: str, work: Path) -> Result:
    work.mkdir(parents=True, exist_ok=True)
    rows, cols, miss = table_stats(table)
    res = Result(table, rows, cols, round(miss, 4))
    r = Runner(table, work)
    r.step("infer", r.infer)
    if r.step("evaluate", r.evaluate):
        for name in EVALUATED:
            r.step(f"evaluate-model:{name}", lambda m=name: r.evaluated(m))
    for mech in PUBLISH:
        if mech in r.cfg.get("refused", {}):
            r.step(f"publish:{mech}", lambda m=mech: r.refused(m))
            continue
        if not r.step(f"publish:{mech}", lambda m=mech: r.publish(m)):
            for s in ("verify", "query-groupby", "query-range"):
                r.skip(f"{s}:{mech}", "not published")
            continue
        r.step(f"verify:{mech}", lambda m=mech: r.verify(m))
        r.step(f"query-groupby:{mech}", lambda m=mech: r.query(
            m, f"SELECT {r.cfg['group']}, COUNT(*) FROM t GROUP BY {r.cfg['group']}"))
        r.step(f"query-range:{mech}", lambda m=mech: r.query(m, f"SELECT COUNT(*) FROM t WHERE {r.cfg['where']}"))
    if (work / "fprivacy").exists():
        r.step("query-input:fprivacy", lambda: r.query_input("fprivacy"))
    for mech in AUDITED:
        if (work / mech).exists():
            r.step(f"audit:{mech}", lambda m=mech: r.audit(m))
        else:
            r.skip(f"audit:{mech}", "not published")
    for mech in EXPORTED:
        if (work / mech).exists():
            r.step(f"recipe-release:{mech}", lambda m=mech: r.recipe_release(m))
        if (work / mech).exists() and r.step(f"export:{mech}", lambda m=mech: r.export(m)):
            r.step(f"recipe:{mech}", lambda m=mech: r.recipe(m))
        else:
            r.skip(f"recipe:{mech}", "not exported")
    res.steps = r.steps
    return res


STEP_KINDS = ("infer", "evaluate", "publish", "verify", "query-groupby", "query-range", "query-input", "audit",
              "export", "recipe")  # recipe: the export's and the release's


def format_table(results: list[Result]) -> str:
    head = ["table", "rows", "cols", "missing", "passed", "refused", "xfail", "FAIL"] + [f"{k} s" for k in STEP_KINDS]
    lines = [" | ".join(head), " | ".join("---" for _ in head)]
    for res in results:
        c, cpu = res.counts(), res.cpu_by_kind()
        done = sum(v for k, v in c.items() if k != "skip")
        lines.append(" | ".join([
            res.table, str(res.rows), str(res.columns), f"{100 * res.missing_share:.1f}%",
            f"{c.get('pass', 0)}/{done}", str(c.get("refused", 0)), str(c.get("xfail", 0)), str(c.get("FAIL", 0) + c.get("XPASS", 0)),
            *(f"{cpu.get(k, 0.0):.2f}" for k in STEP_KINDS)]))
    return "\n".join(lines)

"""The ``ppdp-release/1`` directory format (SPEC §5) and what every release family shares.

A release is a manifest (``manifest.json``) plus one or more Parquet files. Families
(bucketized, randomized, histogram) subclass :class:`Release`, register themselves with
:func:`register_family`, and implement ``answer`` (their estimator) and ``_verify`` (their
certificate re-check from the files alone).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ..errors import PpdpError, ReleaseError

FORMAT = "ppdp-release/1"
_FAMILIES: dict[str, type["Release"]] = {}


def register_family(name: str):
    def deco(cls):
        cls.family = name
        _FAMILIES[name] = cls
        return cls

    return deco


@dataclass
class VerifyReport:
    """Outcome of :func:`ppdp.verify`: ``ok`` is True iff ``problems`` is empty."""

    problems: list[str] = field(default_factory=list)
    checks: list[str] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.problems

    def check(self, condition: bool, what: str, problem: str | None = None) -> bool:
        """Record a check; on failure record ``problem`` (default: 'failed: what')."""
        self.checks.append(what)
        if not condition:
            self.problems.append(problem or f"failed: {what}")
        return bool(condition)

    def __str__(self) -> str:
        head = "OK" if self.ok else f"FAILED ({len(self.problems)} problem(s))"
        lines = [f"verify: {head}; {len(self.checks)} checks"]
        lines += [f"  problem: {p}" for p in self.problems]
        lines += [f"  {k}: {v}" for k, v in self.facts.items()]
        return "\n".join(lines)


def labels_to_codes(values: pa.ChunkedArray | pa.Array | np.ndarray, domain: Sequence[str], column: str) -> np.ndarray:
    """Map published labels to codes; labels outside the domain raise :class:`ReleaseError`."""
    arr = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    if isinstance(arr, pa.Array):
        if pa.types.is_dictionary(arr.type):
            dict_codes = labels_to_codes(arr.dictionary.cast(pa.string()), domain, column)
            idx = arr.indices.to_numpy(zero_copy_only=False)
            return dict_codes[idx] if len(idx) else np.zeros(0, dtype=np.int32)
        arr = arr.cast(pa.string()).to_numpy(zero_copy_only=False)
    arr = np.asarray(arr).astype(str)
    dom = np.asarray(list(domain), dtype=str)
    order = np.argsort(dom)
    pos = np.searchsorted(dom[order], arr)
    pos = np.clip(pos, 0, len(dom) - 1)
    codes = order[pos]
    bad = dom[codes] != arr
    if bad.any():
        raise ReleaseError(f"column {column!r} holds labels outside its published domain, e.g. {arr[bad][:3].tolist()}")
    return codes.astype(np.int32)


def codes_to_labels(codes: np.ndarray, domain: Sequence[str]) -> pa.DictionaryArray:
    return pa.DictionaryArray.from_arrays(pa.array(np.asarray(codes, dtype=np.int32)), pa.array(list(domain), pa.string()))


class Release:
    """A published release: ``manifest`` (dict) and ``tables`` (file stem → Arrow table)."""

    family: ClassVar[str] = "abstract"
    #: True for a family whose ``n_input``/``n_published`` are a private estimate (ε-DP histograms),
    #: not the exact number of rows: verify then checks them against the files, not the source table
    n_is_estimate: ClassVar[bool] = False

    def __init__(self, manifest: Mapping[str, Any], tables: Mapping[str, pa.Table],
                 custodian: Mapping[str, Any] | None = None):
        self.manifest: dict[str, Any] = dict(manifest)
        self.manifest.setdefault("format", FORMAT)
        self.manifest.setdefault("family", self.family)
        self.tables: dict[str, pa.Table] = dict(tables)
        #: what only the custodian keeps (e.g. the seed, which values are fake): never written into
        #: the release directory; ``save`` writes it to :func:`custodian_path` beside it
        self.custodian: dict[str, Any] = dict(custodian or {})

    # -------------------------------------------------------------- schema
    @property
    def schema(self) -> dict:
        return self.manifest["schema"]

    @property
    def domains(self) -> dict[str, list[str]]:
        return self.schema["domains"]

    @property
    def numeric(self) -> dict[str, np.ndarray | None]:
        from ..table import domain_numeric_values

        given = self.schema.get("numeric", {})
        return {c: (np.asarray(given[c], float) if given.get(c) is not None else domain_numeric_values(d)) for c, d in self.domains.items()}

    @property
    def certificate(self) -> dict:
        return self.manifest.get("certificate", {})

    def codes(self, table: str, column: str) -> np.ndarray:
        return labels_to_codes(self.tables[table].column(column), self.domains[column], column)

    # ----------------------------------------------------------- answering
    def resolve(self, queries) -> tuple[Any, list[dict[str, np.ndarray]]]:
        from ..queries import Resolver, as_workload

        wl = as_workload(queries)
        return wl, Resolver(self.domains, self.numeric).all(wl)

    def estimator(self, estimator=None):
        """The estimator object ``answer`` uses: ``None`` → the mechanism's default, a name →
        the registered estimator of this family, an :class:`~ppdp.estimators.Estimator` → itself."""
        from ..errors import ParameterError
        from ..registry import estimator as registered, mechanism

        if estimator is None:
            estimator = mechanism(self.manifest["mechanism"]).default_estimator
        if isinstance(estimator, str):
            estimator = registered(self.family, estimator)()
        if not callable(getattr(estimator, "answer", None)) or not callable(getattr(estimator, "supports", None)):
            raise ParameterError(f"estimator must be None, a name or an Estimator object, got {estimator!r}",
                                 param="estimator")
        if not estimator.supports(self):
            raise ParameterError(f"estimator {getattr(estimator, 'name', estimator)!r} does not apply to a "
                                 f"{self.manifest.get('mechanism')} release", param="estimator")
        return estimator

    def answer(self, workload, estimator=None) -> np.ndarray:
        """Estimated counts for every query of the workload (float64 array of shape (n,)).

        ``estimator``: ``None`` (the mechanism's default), a registered name, or an Estimator object."""
        return np.asarray(self.estimator(estimator).answer(self, workload), dtype=np.float64)

    def count(self, query, estimator=None) -> float:
        """Estimated count of one query (a Query or a WHERE string)."""
        answers = self.answer([query]) if estimator is None else self.answer([query], estimator=estimator)
        return float(answers[0])

    # ------------------------------------------------------------- verify
    def verify(self, table=None) -> VerifyReport:
        rep = VerifyReport()
        m = self.manifest
        rep.check(m.get("format") == FORMAT, "format is ppdp-release/1", f"format is {m.get('format')!r}, expected {FORMAT!r}")
        for key in ("mechanism", "params", "schema", "n_input", "n_published", "dropped", "seed", "library_version", "certificate"):
            rep.check(key in m, f"manifest has {key!r}", f"manifest lacks {key!r}")
        if rep.problems:
            return rep
        rep.check(
            int(m["n_published"]) + int(m["dropped"]) == int(m["n_input"]),
            "n_published + dropped = n_input",
            f"n_published {m['n_published']} + dropped {m['dropped']} != n_input {m['n_input']}",
        )
        if table is not None and not self.n_is_estimate:
            rep.check(table.n_rows == int(m["n_input"]), "source table has n_input rows",
                      f"the source table has {table.n_rows} rows, the manifest says n_input = {m['n_input']}")
        try:
            self._verify(rep, table)
        except PpdpError as e:  # a malformed or inconsistent release is a problem, never a crash
            rep.problems.append(str(e))
        return rep

    def _verify(self, rep: VerifyReport, table) -> None:
        raise NotImplementedError

    # ------------------------------------------------------------ save/load
    def save(self, directory: str | os.PathLike, overwrite: bool = False) -> Path:
        """Write atomically: a temporary sibling directory renamed into place at the end."""
        target = Path(directory)
        if target.exists() and not overwrite:
            raise ReleaseError(f"{str(target)!r} exists; choose a new directory or pass overwrite=True")
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
        try:
            for name, t in self.tables.items():
                pq.write_table(t, tmp / f"{name}.parquet", compression="zstd")
            (tmp / "manifest.json").write_text(json.dumps(self.manifest, indent=2, default=_json_default) + "\n")
            if target.exists():
                old = target.with_name(f".{target.name}.old-{os.getpid()}")
                target.rename(old)
                tmp.rename(target)
                shutil.rmtree(old, ignore_errors=True)
            else:
                tmp.rename(target)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        if self.custodian:
            path = custodian_path(target)
            part = path.with_name(f".{path.name}.tmp-{os.getpid()}")
            part.write_text(json.dumps(self.custodian, indent=2, default=_json_default) + "\n")
            os.replace(part, path)
        return target

    def export_csv(self, directory: str | os.PathLike) -> list[Path]:
        """CSV copies of the release's tables (on request; Parquet stays the format)."""
        import pyarrow.csv as pcsv

        out = []
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        for name, t in self.tables.items():
            plain = pa.table({c: (t.column(c).cast(t.column(c).type.value_type) if pa.types.is_dictionary(t.column(c).type) else t.column(c)) for c in t.column_names})
            pcsv.write_csv(plain, d / f"{name}.csv")
            out.append(d / f"{name}.csv")
        return out

    def __repr__(self) -> str:
        return f"<{type(self).__name__} mechanism={self.manifest.get('mechanism')!r} n_published={self.manifest.get('n_published')}>"


def stamp_manifest(release: "Release", mechanism_name: str, params: Mapping[str, Any], seed: int | None,
                   library_version: str) -> "Release":
    """Fill in the manifest fields every release shares (format, family, mechanism, params, seed …),
    whichever engine applied the plan."""
    m = release.manifest
    m["format"] = FORMAT
    m["family"] = release.family
    m["mechanism"] = mechanism_name
    m["params"] = dict(params)
    m["seed"] = "os-entropy" if seed is None else int(seed)
    m["fit_for_publication"] = seed is None
    m["library_version"] = library_version
    m.setdefault("dropped", 0)
    return release


def _json_default(o):
    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def custodian_path(directory: str | os.PathLike) -> Path:
    """Where ``Release.save(directory)`` keeps the custodian-side file: ``<directory>.custodian.json``,
    a sibling of the release directory, never inside it (it is not handed out)."""
    d = Path(directory)
    return d.with_name(d.name + ".custodian.json")


def load_custodian(path: str | os.PathLike) -> dict[str, Any]:
    """Read a custodian-side file written by :meth:`Release.save`."""
    p = Path(path)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ReleaseError(f"{str(p)!r}: no custodian file there") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ReleaseError(f"{str(p)!r}: unreadable custodian file ({e})") from None
    if not isinstance(data, dict):
        raise ReleaseError(f"{str(p)!r}: a custodian file holds a JSON object")
    return data


def load_release(directory: str | os.PathLike) -> Release:
    """Open a release directory written by :meth:`Release.save`."""
    d = Path(directory)
    mpath = d / "manifest.json"
    if not mpath.is_file():
        raise ReleaseError(f"{str(d)!r} is not a ppdp release (no manifest.json)")
    try:
        manifest = json.loads(mpath.read_text())
    except json.JSONDecodeError as e:
        raise ReleaseError(f"{mpath}: malformed JSON ({e})") from None
    if manifest.get("format") != FORMAT:
        raise ReleaseError(f"{mpath}: format {manifest.get('format')!r} is not {FORMAT!r}")
    _import_families()
    fam = manifest.get("family")
    cls = _FAMILIES.get(fam)
    if cls is None:
        raise ReleaseError(f"{mpath}: unknown release family {fam!r}")
    tables = {}
    for f in sorted(d.glob("*.parquet")):
        try:
            tables[f.stem] = pq.read_table(f)
        except (OSError, pa.ArrowInvalid) as e:
            raise ReleaseError(f"{f}: unreadable Parquet ({e})") from None
    return cls(manifest, tables)


def _import_families() -> None:
    import importlib

    for mod in ("bucketized", "randomized", "histogram", "answers"):
        try:
            importlib.import_module(f"ppdp.releases.{mod}")
        except ModuleNotFoundError as e:  # a family not built yet
            if e.name != f"ppdp.releases.{mod}":
                raise

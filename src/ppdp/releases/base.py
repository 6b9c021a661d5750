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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ..errors import PpdpError, ReleaseError
from ..kernels.progress import stage
from ..kernels.rng import CSPRNG_NAME
from ..validation import check_level
from .custodian import load_custodian, save_custodian  # noqa: F401  (load_custodian: re-exported)
from .narrow import read_narrow
from .readme import MAX_README_BYTES, README_NAME, render_readme
from .storage import (csv_safe_array, custodian_path, fsync_path, is_release_dir, lies_within, json_default, open_parquet, open_regular, os_reason, publish_directory,
                      read_bounded, read_json, remove_stale_temps, temp_path)

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


def dictionary_codes(lut: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """``lut[idx]`` in ``lut``'s dtype: the codes of a dictionary column's indices ``idx``, given
    each dictionary entry's code ``lut``. When the dictionary is the domain in order (the
    writer's layout) and every index lies in it, the indices are the codes: no gather."""
    if np.array_equal(lut, np.arange(len(lut))) and (not len(idx) or (int(idx.min()) >= 0 and int(idx.max()) < len(lut))):
        return idx.astype(lut.dtype, copy=False)
    return lut[idx]


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
    #: the family's files: stem → its columns (``{quasi}`` / ``{sensitive}`` stand for each column
    #: of that role in the manifest's schema; a trailing ``?`` marks an optional column). The
    #: loader reads these and nothing else (:func:`load_release`).
    FILES: ClassVar[Mapping[str, tuple[str, ...]]] = {}
    #: what the loader found in the directory but did not read (extra files, symlinks, columns)
    load_problems: Sequence[str] = ()
    #: the README.md shipped in the directory, as read by :func:`load_release` ("" when absent;
    #: None for a release not loaded from a directory): verify compares it with the one the
    #: manifest gives
    shipped_readme: str | None = None

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

    def check_data_file(self, rep) -> bool:
        """The checks of a family whose release is one ``data.parquet`` of records (randomized,
        ldp): the file is there and alone, and ``fit_for_publication`` agrees with the seed.
        False when the file is missing (nothing more can be checked)."""
        rep.check("data" in self.tables, "data.parquet present", "data.parquet is missing")
        if "data" not in self.tables:
            return False
        extra = sorted(set(self.tables) - {"data"})
        rep.check(not extra, "the release holds data.parquet only",
                  f"the release holds Parquet files the format does not define: {', '.join(e + '.parquet' for e in extra)}")
        seed, fit = self.manifest.get("seed"), self.manifest.get("fit_for_publication")
        rep.check(not (fit is True and seed not in (None, "os-entropy")), "fit_for_publication consistent with the seed",
                  f"fit_for_publication is true but the release was drawn from the recorded seed {seed!r}")
        return True

    def narrow_codes(self, table: str, column: str) -> np.ndarray:
        """Codes of a column in the narrowest integer type of its domain, read-only; a dictionary
        column is decoded a chunk at a time (its dictionary mapped once per chunk)."""
        from ..table import code_dtype

        dt = code_dtype(len(self.domains[column]))
        col = self.tables[table].column(column)
        if pa.types.is_dictionary(col.type) and not col.null_count:
            codes = np.empty(len(col), dtype=dt)
            pos = 0
            for ch in col.chunks:
                lut = labels_to_codes(ch.dictionary, self.domains[column], column).astype(dt)
                idx = ch.indices.to_numpy(zero_copy_only=False)
                codes[pos:pos + len(idx)] = dictionary_codes(lut, idx)
                pos += len(idx)
        else:
            codes = np.asarray(self.codes(table, column)).astype(dt, copy=False)
        codes.setflags(write=False)
        return codes

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
        with stage("answer"):
            return np.asarray(self.estimator(estimator).answer(self, workload), dtype=np.float64)

    def estimate(self, workload, estimator=None, level: float = 0.95):
        """Estimated counts with standard errors and intervals (an
        :class:`~ppdp.estimators.Estimates`), one entry per query of the workload. ``level`` in
        (0, 1); ``Estimates.kind`` says what the interval promises."""
        level = check_level(level)
        with stage("answer"):
            return self.estimator(estimator).estimate(self, workload, level=level)

    def count(self, query, estimator=None) -> float:
        """Estimated count of one query (a Query or a WHERE string)."""
        answers = self.answer([query]) if estimator is None else self.answer([query], estimator=estimator)
        return float(answers[0])

    # ------------------------------------------------------------- verify
    def verify(self, table=None) -> VerifyReport:
        rep = VerifyReport()
        m = self.manifest
        rep.problems.extend(self.load_problems)
        rep.check(m.get("format") == FORMAT, "format is ppdp-release/1", f"format is {m.get('format')!r}, expected {FORMAT!r}")
        present = [rep.check(key in m, f"manifest has {key!r}", f"manifest lacks {key!r}")
                   for key in ("mechanism", "params", "schema", "n_input", "n_published", "dropped", "fit_for_publication",
                               "library_version", "certificate")]
        if not all(present) or m.get("format") != FORMAT:
            return rep
        counts = {k: m[k] for k in ("n_input", "n_published", "dropped")}
        bad = {k: v for k, v in counts.items() if not isinstance(v, int) or isinstance(v, bool) or v < 0}
        if not rep.check(not bad, "row counts are non-negative integers", f"row counts are not non-negative integers: {bad}"):
            return rep
        rep.check(
            int(m["n_published"]) + int(m["dropped"]) == int(m["n_input"]),
            "n_published + dropped = n_input",
            f"n_published {m['n_published']} + dropped {m['dropped']} != n_input {m['n_input']}",
        )
        fit = m["fit_for_publication"]
        rep.check(isinstance(fit, bool), "fit_for_publication is true or false",
                  f"fit_for_publication is {fit!r}, not true or false")
        rep.check("seed" not in m, "the manifest carries no seed (a seed lives in the custodian-side file only)",
                  "the manifest carries a seed" + (" yet says fit_for_publication: true" if fit is True else "")
                  + ": whoever knows the seed can replay the randomisation")
        rep.facts["fit_for_publication"] = fit is True
        if "files" in m:
            toc = m["files"]
            stated = {k: (v.get("rows") if isinstance(v, dict) else None) for k, v in toc.items()} if isinstance(toc, dict) else None
            actual = {k: int(t.num_rows) for k, t in self.tables.items()}
            rep.check(stated == actual, "the table of contents (files) matches the files",
                      f"the manifest's files {stated} do not match the files {actual}")
        if "bins" in m["schema"]:
            rep.check(m["schema"]["bins"] == recorded_bins(self.domains), "schema.bins are the edges of the binned "
                      "columns' labels", f"schema.bins {m['schema']['bins']} disagree with the bin labels of the domains")
        if table is not None and not self.n_is_estimate:
            rep.check(table.n_rows == int(m["n_input"]), "source table has n_input rows",
                      f"the source table has {table.n_rows} rows, the manifest says n_input = {m['n_input']}")
        try:
            self._verify(rep, table)
        except PpdpError as e:  # a malformed or inconsistent release is a problem, never a crash
            rep.problems.append(str(e))
        except (KeyError, TypeError, ValueError, IndexError, AttributeError, ArithmeticError) as e:
            rep.problems.append(f"malformed release ({type(e).__name__}: {e})")
        if self.shipped_readme is not None:  # last: a family's checks stop at an earlier problem
            self._verify_readme(rep)
        return rep

    def _verify(self, rep: VerifyReport, table) -> None:
        raise NotImplementedError

    def _verify_readme(self, rep: VerifyReport) -> None:
        """The shipped README.md is the one the manifest gives (a receiver reads it; a tampered
        one could misstate the claim or the recipe)."""
        shipped = self.shipped_readme or ""
        if not rep.check(bool(shipped), f"the release carries its {README_NAME}",
                         f"the release lacks {README_NAME} (the receiver's guide; publish it again or see `ppdp export`)"):
            return
        want = render_readme(self.manifest)
        if shipped != want:
            a, b = shipped.splitlines(), want.splitlines()
            i = next((k for k, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
            rep.check(False, f"{README_NAME} is the one the manifest gives",
                      f"{README_NAME} differs from the one the manifest gives (first at line {i + 1}: "
                      f"{(a[i] if i < len(a) else '<end>')[:80]!r}); do not trust it — regenerate it from the manifest")
        else:
            rep.checks.append(f"{README_NAME} is the one the manifest gives")

    # ------------------------------------------------------------ save/load
    def save(self, directory: str | os.PathLike, overwrite: bool = False,
             custodian_file: str | os.PathLike | None = None) -> Path:
        """Write the release to ``directory`` atomically and without replacing anything.

        The files are written into a fresh hidden sibling ``.NAME.tmp-<pid>-<token>-<host>``,
        synced, then renamed onto ``directory`` with a no-replace rename: if anything appeared
        at ``directory`` meanwhile (another ``ppdp publish -o`` to the same place, a directory
        made by hand) the rename fails, nothing is replaced and a :class:`ReleaseError` says so.
        Only the temporary directory this call created is ever deleted. Temporary directories of
        the same target left by a killed run (their creating process is gone) are removed first.

        ``overwrite=True`` replaces an existing *release* directory (one holding a
        ``manifest.json``; anything else is refused) by an atomic exchange of the two
        directories, so the target always holds a complete release (see :func:`publish_directory`).

        The custodian-side file (``Release.custodian``, e.g. the seed) goes to
        :func:`custodian_path`, beside the release and never inside it, after the release is in
        place (created exclusively; replaced only with ``overwrite``); the fakes, if any, go to
        its Parquet sidecar (:mod:`ppdp.releases.custodian`). ``custodian_file``: write it there
        instead (e.g. a directory only the custodian reads); it must not lie inside the release
        directory, and its directory must be writable — both checked before anything is written.
        """
        target = Path(directory)
        if target.name in ("", ".", ".."):
            raise ReleaseError(f"{str(target)!r} is not a usable release directory name")
        parent = target.parent
        try:
            parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise ReleaseError(f"cannot create the parent directory of {str(target)!r}: {os_reason(e)}") from None
        remove_stale_temps(target)
        cpath = custodian_path(target) if custodian_file is None else self._custodian_target(target, custodian_file)
        if os.path.lexists(target):
            if not overwrite:
                raise ReleaseError(f"{str(target)!r} exists; choose a new directory or pass overwrite=True")
            if not is_release_dir(target):
                raise ReleaseError(f"{str(target)!r} exists and is not a ppdp release directory; overwrite replaces only a release")
        if self.custodian and os.path.lexists(cpath) and not overwrite:
            raise ReleaseError(f"the custodian file {str(cpath)!r} exists; choose a new directory or pass overwrite=True")
        self.manifest["files"] = {name: {"rows": int(t.num_rows)} for name, t in self.tables.items()}
        tmp = temp_path(target)
        try:
            os.mkdir(tmp)
        except OSError as e:
            raise ReleaseError(f"cannot write into {str(parent)!r}: {os_reason(e)}") from None
        try:
            for name, t in self.tables.items():
                pq.write_table(t, tmp / f"{name}.parquet", compression="zstd")
                fsync_path(tmp / f"{name}.parquet")
            text = json.dumps(self.manifest, indent=2, default=json_default, allow_nan=False) + "\n"
            with open(tmp / "manifest.json", "w", encoding="utf-8") as f:
                f.write(text)
                f.flush()
                os.fsync(f.fileno())
            # the receiver's guide, from the manifest as written (verify regenerates it from the file)
            with open(tmp / README_NAME, "w", encoding="utf-8") as f:
                f.write(render_readme(json.loads(text)))
                f.flush()
                os.fsync(f.fileno())
            fsync_path(tmp)
            publish_directory(tmp, target, replace=overwrite)
        except BaseException as e:
            shutil.rmtree(tmp, ignore_errors=True)  # ours: created above by os.mkdir
            if isinstance(e, OSError):
                raise ReleaseError(f"cannot write the release {str(target)!r}: {os_reason(e)}") from None
            if isinstance(e, ValueError) and not isinstance(e, PpdpError):
                raise ReleaseError(f"cannot write the release {str(target)!r}: {e}") from None
            raise
        fsync_path(parent)
        if self.custodian:
            save_custodian(cpath, self.custodian, replace=overwrite)
        return target

    def _custodian_target(self, target: Path, path: str | os.PathLike) -> Path:
        """A custodian file path the caller chose: not inside the release, in a writable directory."""
        cpath = Path(path)
        if cpath.name in ("", ".", "..") or cpath.name.endswith(("/", os.sep)):
            raise ReleaseError(f"the custodian file {str(path)!r} is not a usable file name")
        if lies_within(cpath, target):
            raise ReleaseError(f"the custodian file {str(path)!r} lies inside the release directory {str(target)!r}, "
                               "which is handed out; keep it elsewhere")
        if self.custodian:
            try:
                cpath.parent.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise ReleaseError(f"cannot create the directory of the custodian file {str(path)!r}: {os_reason(e)}") from None
            if not os.access(cpath.parent, os.W_OK | os.X_OK):
                raise ReleaseError(f"cannot write the custodian file {str(path)!r}: its directory is not writable")
            if os.path.isdir(cpath):
                raise ReleaseError(f"the custodian file {str(path)!r} is a directory")
        return cpath

    def export_csv(self, directory: str | os.PathLike) -> list[Path]:
        """CSV copies of the release's tables (on request; Parquet stays the format). Text cells
        that a spreadsheet would run as a formula (starting with ``=``, ``+``, ``-``, ``@``, tab
        or CR, and not a plain number) are written with a leading ``'``."""
        import pyarrow.csv as pcsv

        out = []
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        for name, t in self.tables.items():
            plain = pa.table({c: csv_safe_array(t.column(c)) for c in t.column_names})
            pcsv.write_csv(plain, d / f"{name}.csv")
            out.append(d / f"{name}.csv")
        return out

    def __repr__(self) -> str:
        return f"<{type(self).__name__} mechanism={self.manifest.get('mechanism')!r} n_published={self.manifest.get('n_published')}>"


def stamp_manifest(release: "Release", mechanism_name: str, params: Mapping[str, Any], seed: int | None,
                   library_version: str) -> "Release":
    """Fill in the manifest fields every release shares (format, family, mechanism, params …),
    whichever engine applied the plan.

    A seeded run is a reproducible test run: the manifest says ``fit_for_publication: false``
    and the seed goes only into the custodian-side file (``release.custodian["seed"]``), never
    into the release — whoever knows it can replay the randomisation and undo it."""
    m = release.manifest
    m["format"] = FORMAT
    m["family"] = release.family
    m["mechanism"] = mechanism_name
    m["params"] = dict(params)
    m.pop("seed", None)
    m["fit_for_publication"] = seed is None
    m["randomness"] = CSPRNG_NAME if seed is None else "seeded test run (PCG64); the seed is kept in the custodian file"
    if seed is not None:
        release.custodian["seed"] = int(seed)
    m["library_version"] = library_version
    m.setdefault("dropped", 0)
    return release



#: largest number of rows decoded from one Parquet file of a release (the manifest's table of
#: contents must also state it); ``load_release(max_rows=…)`` overrides it
MAX_ROWS = 2_000_000_000
#: largest Parquet footer read (bytes)
MAX_FOOTER_BYTES = 64 * 2**20
#: decoded bytes allowed per value on top of a fixed allowance, from the footer's uncompressed
#: sizes (labels and numbers are short: a release value needs a few bytes, never kilobytes)
MAX_BYTES_PER_VALUE = 1024
#: other files a release directory may hold: the generated README (read as text, bounded, and
#: compared by verify with the one the manifest gives)
ALLOWED_EXTRA = frozenset({README_NAME})


def declared_columns(cls: type["Release"], schema: Mapping[str, Any]) -> dict[str, tuple[list[str], list[str]]]:
    """File stem → (required columns, optional columns) of a family's format: ``cls.FILES``
    with ``{quasi}`` / ``{sensitive}`` expanded to each column of the manifest's schema and a
    trailing ``?`` marking an optional column."""
    out = {}
    for stem, specs in cls.FILES.items():
        req: list[str] = []
        opt: list[str] = []
        for spec in specs:
            optional = spec.endswith("?")
            spec = spec.rstrip("?")
            names = [spec]
            for role in ("quasi", "sensitive"):
                if "{" + role + "}" in spec:
                    names = [spec.replace("{" + role + "}", c) for c in schema.get(role, [])]
            (opt if optional else req).extend(names)
        out[stem] = (req, opt)
    return out


def _json_kind(v: Any) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean", int: "number", float: "number",
            type(None): "null"}.get(type(v), type(v).__name__)


def recorded_bins(domains: Mapping[str, Sequence[str]]) -> dict[str, list[float]]:
    """The bin edges of every binned column (labels ``[lo, hi)``), as a manifest's ``schema.bins``
    records them for receivers: a range query must not cut a bin (the Resolver refuses it)."""
    from ..schema import bin_edges

    return {c: list(e) for c, d in domains.items() if (e := bin_edges(d)) is not None}


def _check_manifest(manifest: Any, where: str) -> None:
    """The structure the loader relies on; any deviation is one ReleaseError."""
    def bad(what: str):
        raise ReleaseError(f"{where}: {what}")

    if not isinstance(manifest, dict):
        bad(f"the manifest is a JSON {_json_kind(manifest)}, not an object")
    if manifest.get("format") != FORMAT:
        bad(f"format {manifest.get('format')!r} is not {FORMAT!r}")
    for key, typ in (("family", str), ("schema", dict), ("files", dict)):
        if key not in manifest:
            bad(f"the manifest lacks {key!r}" + (" (written by an older ppdp? publish it again)" if key == "files" else ""))
        if not isinstance(manifest[key], typ):
            bad(f"{key!r} is a JSON {_json_kind(manifest[key])}, expected a JSON {_json_kind(typ())}")
    for key in ("params", "certificate"):
        if key in manifest and not isinstance(manifest[key], dict):
            bad(f"{key!r} is a JSON {_json_kind(manifest[key])}, expected a JSON object")
    sch = manifest["schema"]
    for role in ("quasi", "sensitive"):
        v = sch.get(role, [])
        if not isinstance(v, list) or not all(isinstance(c, str) for c in v):
            bad(f"schema {role!r} must be a list of column names")
    doms = sch.get("domains")
    if not isinstance(doms, dict) or not all(isinstance(d, list) and all(isinstance(x, str) for x in d) for d in doms.values()):
        bad("schema 'domains' must map each column to a list of labels")
    num = sch.get("numeric", {})
    if not isinstance(num, dict) or not all(
            v is None or (isinstance(v, list) and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in v))
            for v in num.values()):
        bad("schema 'numeric' must map each column to null or a list of numbers")
    for stem, entry in manifest["files"].items():
        rows = entry.get("rows") if isinstance(entry, dict) else None
        if not isinstance(rows, int) or isinstance(rows, bool) or rows < 0:
            bad(f"files[{stem!r}] must be {{\"rows\": <non-negative integer>}}")


def _primitive(t: pa.DataType) -> bool:
    if pa.types.is_dictionary(t):
        return _primitive(t.value_type) and pa.types.is_integer(t.index_type)
    return (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t) or pa.types.is_string(t)
            or pa.types.is_large_string(t) or pa.types.is_null(t))


def _read_parquet(path: Path, stated_rows: int, required: list[str], optional: list[str], max_rows: int,
                  problems: list[str]) -> pa.Table:
    """Read one declared Parquet file within bounds: the footer's row count (read before any
    data page is decoded) must not exceed what the manifest states (nor ``max_rows``); only
    the declared columns of primitive types are decoded; extra columns are a problem, not read."""
    fd = open_regular(path, "Parquet file")
    with os.fdopen(fd, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        pf = open_parquet(f, size, str(path), MAX_FOOTER_BYTES)
        md = pf.metadata
        schema = pf.schema_arrow
        rows = int(md.num_rows)
        if rows > stated_rows or rows > max_rows:
            raise ReleaseError(f"{path}: {rows:,} rows, the manifest states {stated_rows:,}"
                               + (f" (at most {max_rows:,} are read)" if rows > max_rows else "") + "; not decoded")
        if rows < stated_rows:
            problems.append(f"{path.name} has {rows:,} rows, the manifest's table of contents states {stated_rows:,}")
        names = list(schema.names)
        if len(set(names)) != len(names):
            raise ReleaseError(f"{path}: repeated column names {names}")
        extra = [c for c in names if c not in required and c not in optional]
        if extra:
            problems.append(f"{path.name} holds column(s) {extra} that the format does not define (not read)")
        wanted = [c for c in names if c not in extra]
        odd = [f"{c}: {schema.field(c).type}" for c in wanted if not _primitive(schema.field(c).type)]
        if odd:
            raise ReleaseError(f"{path}: columns of types the format does not use ({', '.join(odd)})")
        unc = sum(md.row_group(i).total_byte_size for i in range(md.num_row_groups))
        if unc > 16 * 2**20 + MAX_BYTES_PER_VALUE * max(rows, 1) * max(len(names), 1):
            raise ReleaseError(f"{path}: {unc:,} bytes when decoded for {rows:,} rows; not decoded")
        try:
            return read_narrow(pf, wanted)
        except (OSError, pa.ArrowException, ValueError, MemoryError) as e:
            raise ReleaseError(f"{path}: unreadable Parquet ({e})") from None


def load_release(directory: str | os.PathLike, max_rows: int = MAX_ROWS) -> Release:
    """Open a release directory written by :meth:`Release.save`, safely.

    Only what the family's format defines is read (``Release.FILES``: the file names and their
    columns), as regular files (a symlink is never followed), within bounds: the manifest is at
    most :data:`~ppdp.releases.storage.MAX_JSON_BYTES` and nests at most
    :data:`~ppdp.releases.storage.MAX_JSON_DEPTH` levels; each Parquet file's row count is read
    from its footer and checked against the manifest's table of contents (``files``) before any
    data is decoded. A malformed release (a manifest that is no JSON object, NaN, missing keys,
    wrong types, an unreadable or oversized file) raises one :class:`ReleaseError`; anything else
    in the directory (an extra file, a symlink, an undeclared column) is recorded and reported
    as a problem by ``verify`` (``release.load_problems``), never read."""
    d = Path(directory)
    mpath = d / "manifest.json"
    if not d.is_dir():
        raise ReleaseError(f"{str(d)!r} is not a directory")
    if not os.path.lexists(mpath):
        raise ReleaseError(f"{str(d)!r} is not a ppdp release (no manifest.json)")
    manifest = read_json(mpath, "manifest")
    _check_manifest(manifest, str(mpath))
    _import_families()
    fam = manifest["family"]
    cls = _FAMILIES.get(fam)
    if cls is None:
        raise ReleaseError(f"{mpath}: unknown release family {fam!r}")
    declared = declared_columns(cls, manifest["schema"])
    toc = manifest["files"]
    problems: list[str] = []
    for stem in toc:
        if stem not in declared:
            problems.append(f"the manifest lists {stem!r}, which a {fam} release does not hold")
    allowed = {"manifest.json", *ALLOWED_EXTRA, *(f"{s}.parquet" for s in declared)}
    try:
        entries = sorted(os.scandir(d), key=lambda e: e.name)
    except OSError as e:
        raise ReleaseError(f"{str(d)!r}: cannot list the release directory: {os_reason(e)}") from None
    regular: set[str] = set()
    # a large table written by an engine as a directory of parts (ppdp.releases.partitioned)
    parted = {s for s, e in toc.items() if s in declared and isinstance(e, dict) and e.get("partitioned") is True}
    for entry in entries:
        if entry.name in parted and not entry.is_symlink() and entry.is_dir(follow_symlinks=False):
            regular.add(f"{entry.name}.parquet")
        elif entry.is_symlink():
            problems.append(f"{entry.name} is a symbolic link (not followed, not read)")
        elif not entry.is_file(follow_symlinks=False):
            problems.append(f"{entry.name} is not a regular file (not read)")
        elif entry.name not in allowed:
            problems.append(f"{entry.name} is not part of a {fam} release (not read)")
        else:
            regular.add(entry.name)
    if "manifest.json" not in regular:
        raise ReleaseError(f"{mpath}: the manifest is not a regular file")
    tables = {}
    for stem, (req, opt) in declared.items():
        if f"{stem}.parquet" not in regular:
            continue  # missing: the family's verify reports it
        if stem not in toc:
            problems.append(f"{stem}.parquet is not in the manifest's table of contents (not read)")
            continue
        if stem in parted:
            from .partitioned import read_partitioned

            tables[stem] = read_partitioned(d / stem, toc[stem]["rows"], req, opt, manifest["schema"]["domains"],
                                            max_rows, problems)
            continue
        tables[stem] = _read_parquet(d / f"{stem}.parquet", toc[stem]["rows"], req, opt, max_rows, problems)
    rel = cls(manifest, tables)
    rel.load_problems = problems
    rel.shipped_readme = ""
    if README_NAME in regular:
        try:
            rel.shipped_readme = _read_readme(d / README_NAME)
        except ReleaseError as e:  # reported by verify, never used
            problems.append(str(e))
            rel.shipped_readme = None
    return rel


def _read_readme(path: Path) -> str:
    """The shipped README as text (a regular file of at most MAX_README_BYTES bytes, UTF-8)."""
    data = read_bounded(path, README_NAME, MAX_README_BYTES)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ReleaseError(f"{path}: not UTF-8 text ({e.reason})") from None


def _import_families() -> None:
    import importlib

    for mod in ("bucketized", "randomized", "histogram", "answers", "ldp"):
        try:
            importlib.import_module(f"ppdp.releases.{mod}")
        except ModuleNotFoundError as e:  # a family not built yet
            if e.name != f"ppdp.releases.{mod}":
                raise

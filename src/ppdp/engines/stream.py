"""The streaming engine (SPEC §6): a table larger than memory, read from a Parquet dataset in
chunks, published to a partitioned release (:mod:`ppdp.releases.partitioned`) — or, for the
histogram family, counted into the label combinations of its dimensions in one pass and
published by the mechanism itself (:func:`publish_stream_histogram`: the release is the cube).

The plan is the mechanism's public plan, made from streamed sufficient statistics (the SA
counts: one pass over the SA column); the apply is per row and per chunk. The randomized
family (uniform perturbation, global randomization, SDR, A') needs no global row order:

- **exact slot counts without a global sort.** SDR assigns exactly ``C[j, v]`` rows of SA
  value v to sub-table j, A' exactly one row per decoy-group slot, and the local engine does
  so by a uniformly random permutation of each value's rows. The same distribution is
  obtained chunk by chunk (:class:`Allotment`): a chunk holding k rows of value v draws how
  many of them go to each slot type from the multivariate hypergeometric distribution of the
  slots still free (sampling without replacement), then deals them to its rows in random
  order. By exchangeability this is a uniformly random assignment of the value's rows to the
  slots, whatever the chunking. A' slots are grouped by the value set of their decoy group
  (groups with the same set are interchangeable: the published value is uniform over the
  set), so the state is (distinct sets × |SA|) counts, not one entry per group.
- **the output is shuffled** beyond memory: every published row goes to one of B spill files
  chosen at random, and every spill file is permuted in memory when it becomes a part file,
  so the part files are a uniformly random order of the rows (the source order may carry
  information).
- **randomness.** One publication generator (:func:`ppdp.kernels.rng.publication_rng`: AES-CTR
  from the OS without a seed, PCG64 of the seed with one) drives the whole stream, in chunk
  order; a seeded run over the same dataset and chunk size is reproducible. The draws differ
  from the in-memory engine's (different consumption order) but the plan, and so the claim
  and certificate, are the same.

:func:`publish_stream` writes the release; :func:`verify_stream` re-derives the claim and
checks the files and, with the source, the source fit of the randomized SA (the goodness of
fit test of :func:`ppdp.kernels.transition.randomization_fit`, on (NSA combination, SA value)
counts aggregated over the chunks); :func:`answer_stream` answers count queries on the
published SA distribution by streaming the release. Memory is O(chunk + state), the state
being the SA counts, the plan, and (for the source fit) one count per distinct
(NSA combination, SA value) pair.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
import pyarrow.ipc as ipc
import pyarrow.parquet as pq

from ..claims import state_disclosure
from ..claims.diverted import DivertedClaim
from ..claims.dp import state_utility
from ..errors import InfeasibleError, PpdpError, SchemaError
from ..kernels.grid import cube_codes, declared_domains
from ..kernels.rng import publication_rng
from ..kernels.transition import perturb_local
from ..mechanisms.randomization.diverted import Diverted, DivertedPlan
from ..mechanisms.randomization.sdr import SDR, SDRPlan
from ..mechanisms.randomization.uniform import GlobalRandomization, UniformPerturbation, UniformPlan, check_randomizable
from ..provenance import VERSION
from ..releases.base import recorded_bins, stamp_manifest
from ..releases.partitioned import finish_partitioned, iter_partitioned
from ..releases.randomized import RandomizedRelease
from ..releases.storage import temp_path
from ..table import Table, domain_numeric_values
from .blocks import DatasetSchema, FileScan, bucketize, label_codes

META_KEY = b"ppdp"


def table_order(labels: Sequence[Any], numeric: bool) -> tuple[list[str], list | None]:
    """Distinct labels ordered as ``ppdp.Table`` orders a column it encodes: numeric columns by
    value (labels as Table writes numbers), text columns lexicographically."""
    if numeric:
        vals = sorted({float(x) for x in labels})
        labs = [str(int(v)) if float(v).is_integer() else repr(float(v)) for v in vals]
        return labs, vals
    labs = sorted({str(x) for x in labels})
    nvals = domain_numeric_values(labs)
    return labs, (None if nvals is None else nvals.tolist())


def dataset_schema(source, quasi: Sequence[str] = (), sensitive: Sequence[str] = (),
                   domains: Mapping[str, Sequence[str]] | None = None) -> DatasetSchema:
    """The schema of a Parquet dataset (a file or a directory of files). Written by
    ``Table.to_parquet`` / ``ppdp.datasets.write_synthetic``: its roles, domains (the dictionary
    order) and numeric values, read from the footer — no data. Otherwise the domains are the
    distinct values (one streamed pass) ordered as ``ppdp.Table`` orders them; ``domains``
    fixes a column's order."""
    ds = pads.dataset(source, format="parquet")
    meta = (ds.schema.metadata or {}).get(META_KEY)
    info = json.loads(meta) if meta else {}
    q = tuple(quasi) or tuple(info.get("quasi", ()))
    s = tuple(sensitive) or tuple(info.get("sensitive", ()))
    if not s:
        raise SchemaError("name the sensitive attribute (the dataset carries no ppdp roles)")
    cols = [*q, *s]
    missing = [c for c in cols if c not in ds.schema.names]
    if missing:
        raise SchemaError(f"unknown column(s) {missing}; the dataset has {ds.schema.names}")
    doms: dict[str, tuple[str, ...]] = {}
    nums: dict[str, list | None] = {}
    todo = []
    for c in cols:
        if domains and c in domains:
            doms[c] = tuple(str(x) for x in domains[c])
            given = domain_numeric_values(doms[c])
            nums[c] = None if given is None else given.tolist()
        elif pa.types.is_dictionary(ds.schema.field(c).type) and info:
            todo.append(c)
        else:
            todo.append(c)
    if todo:
        first = next(iter(ds.get_fragments()), None)
        if info and first is not None and all(pa.types.is_dictionary(ds.schema.field(c).type) for c in todo):
            # Table.to_parquet: every chunk carries the full domain as its dictionary, in order
            # one small batch of the first row group: its dictionaries are the domains (never the whole file)
            head = next(pq.ParquetFile(first.path).iter_batches(batch_size=1, columns=todo))
            for c in todo:
                doms[c] = tuple(head.column(c).dictionary.to_pylist())
                nums[c] = info.get("numeric", {}).get(c)
        else:
            seen: dict[str, set] = {c: set() for c in todo}
            for b in ds.to_batches(columns=todo, batch_readahead=0, fragment_readahead=0):
                for c in todo:
                    seen[c].update(pc.unique(b.column(c)).to_pylist())
            for c in todo:
                typ = ds.schema.field(c).type
                is_num = pa.types.is_integer(typ) or pa.types.is_floating(typ)
                labs, nlist = table_order(list(seen[c]), is_num)
                doms[c], nums[c] = tuple(labs), nlist
    return DatasetSchema(q, s, doms, nums)






# --------------------------------------------------------------------------- randomness
def split_counts(totals: np.ndarray, parts: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Deal slot counts to partitions: ``totals`` (K slot types × m values), ``parts`` (P × m)
    rows of each value in each partition (column sums equal) → (P, K, m) slots per partition,
    each partition's share of value v's slots drawn without replacement (multivariate
    hypergeometric, sequentially over the partitions)."""
    totals = np.asarray(totals, dtype=np.int64)
    parts = np.asarray(parts, dtype=np.int64)
    if not np.array_equal(totals.sum(axis=0), parts.sum(axis=0)):
        raise PpdpError("the plan's slot counts do not match the data's SA counts (plan and data disagree)")
    P = parts.shape[0]
    K, m = totals.shape
    out = np.zeros((P, K, m), dtype=np.int64)
    for v in range(m):
        left = totals[:, v].copy()
        for p in range(P):
            k = int(parts[p, v])
            if k:
                d = rng.multivariate_hypergeometric(left, k, method="marginals")
                out[p, :, v] = d
                left -= d
    return out


class Allotment:
    """The slots still free (K slot types × m values); :meth:`take` deals them to a chunk's rows
    (multivariate hypergeometric per value present, then a random order inside the value)."""

    def __init__(self, slots: np.ndarray):
        self.left = np.array(slots, dtype=np.int64)

    def take(self, codes: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        codes = np.asarray(codes, dtype=np.int64)
        K, m = self.left.shape
        out = np.empty(len(codes), dtype=np.int64)
        if not len(codes):
            return out
        order = np.argsort(codes, kind="stable")
        counts = np.bincount(codes, minlength=m)
        if (counts > self.left.sum(axis=0)).any():
            raise PpdpError("the data hold more rows of a value than the plan places (plan and data disagree)")
        start = 0
        for v in np.flatnonzero(counts).tolist():
            k = int(counts[v])
            d = rng.multivariate_hypergeometric(self.left[:, v], k, method="marginals")
            self.left[:, v] -= d
            types = np.repeat(np.arange(K, dtype=np.int64), d)
            out[order[start:start + k]] = types[rng.permutation(k)]
            start += k
        return out


# ---------------------------------------------------------------------------- row plans
class RowPlan:
    """A randomized-family plan applied chunk by chunk: ``slots`` (per SA: K × m slot counts,
    or None when rows are independent) and :meth:`apply` (published codes of one chunk)."""

    sensitive: tuple[str, ...]
    slots: tuple[np.ndarray | None, ...]
    subtable: bool = False

    def apply(self, codes: Sequence[np.ndarray], types: Sequence[np.ndarray | None], rng: np.random.Generator) -> dict[str, np.ndarray]:
        raise NotImplementedError

    @property
    def claim(self):
        return self.plan.claim

    def kernel(self) -> "RowPlan":
        """A copy holding arrays only (no plan object): what is shipped to Spark executors."""
        k = object.__new__(type(self))
        k.__dict__.update({a: v for a, v in self.__dict__.items() if a != "plan"})
        return k


class UniformRows(RowPlan):
    def __init__(self, plan: UniformPlan, sa: str):
        self.plan, self.sensitive, self.slots = plan, (sa,), (None,)
        self.m, self.retention = int(plan.m), float(plan.retention)

    def apply(self, codes, types, rng):
        x = np.asarray(codes[0], dtype=np.int64)  # UniformPlan.apply, on the plan's numbers
        return {self.sensitive[0]: perturb_local(x, np.full(len(x), self.m), np.full(len(x), self.retention), rng)}


class SDRRows(RowPlan):
    subtable = True

    def __init__(self, plan: SDRPlan, sa: str):
        self.plan, self.sensitive, self.slots = plan, (sa,), (np.asarray(plan.counts, dtype=np.int64),)
        sts = plan.claim.subtables
        self.m_j = np.array([st["m"] for st in sts], dtype=np.int64)
        self.ret_j = np.array([st["retention"] for st in sts], dtype=float)
        doms = plan.domains
        J, m = plan.counts.shape
        self.lut = np.full((J, m), -1, dtype=np.int64)
        for j, d in enumerate(doms):
            self.lut[j, d] = np.arange(len(d))
        self.flat = np.concatenate(doms)
        self.off = np.concatenate([[0], np.cumsum(self.m_j)[:-1]]).astype(np.int64)

    def apply(self, codes, types, rng):
        x, sub = np.asarray(codes[0], dtype=np.int64), np.asarray(types[0], dtype=np.int64)
        local = perturb_local(self.lut[sub, x], self.m_j[sub], self.ret_j[sub], rng)
        return {self.sensitive[0]: self.flat[self.off[sub] + local], "subtable": sub}


class DivertedRows(RowPlan):
    """A' with slot types = the distinct value sets of the decoy groups (interchangeable)."""

    def __init__(self, plan: DivertedPlan, sensitive: Sequence[str]):
        self.plan, self.sensitive = plan, tuple(sensitive)
        self.l_prime = lp = plan.l_prime
        slots, self.sets = [], []
        for counts, (v, g) in zip(plan.counts, plan.schedules):
            m = len(counts)
            gv = np.asarray(v)[np.argsort(np.asarray(g) * m + np.asarray(v), kind="stable")].reshape(-1, lp)
            sets, mult = np.unique(gv, axis=0, return_counts=True)
            S = np.zeros((len(sets), m), dtype=np.int64)
            for k, row in enumerate(sets):
                S[k, row] = mult[k]
            slots.append(S)
            self.sets.append(sets)
        self.slots = tuple(slots)

    def apply(self, codes, types, rng):
        out = {}
        lp = self.l_prime
        for sa, sets, t in zip(self.sensitive, self.sets, types):
            pick = rng.integers(0, lp, size=len(t))
            out[sa] = sets[np.asarray(t, dtype=np.int64), pick]
        return out


def row_plan(mechanism, counts: Sequence[np.ndarray], schema: DatasetSchema) -> RowPlan:
    """The mechanism's public plan from the SA counts, wrapped for chunked application."""
    sens = list(schema.sensitive)
    if isinstance(mechanism, (UniformPerturbation, GlobalRandomization)):
        sa = sens[0]
        return UniformRows(mechanism.plan(check_randomizable(sa, counts[0]), list(schema.domains[sa]), sa), sa)
    if isinstance(mechanism, SDR):
        sa = sens[0]
        return SDRRows(mechanism.plan(check_randomizable(sa, counts[0]), list(schema.domains[sa]), sa), sa)
    if isinstance(mechanism, Diverted):
        return DivertedRows(mechanism.plan([np.asarray(c) for c in counts]), sens)
    raise PpdpError(f"the streaming engine applies the randomized family (uniform, global, sdr, diverted), "
                    f"bucketization (fprivacy, anatomy) and the histogram family; got "
                    f"{getattr(mechanism, 'name', type(mechanism).__name__)!r}")


def diverted_eligible(mechanism: Diverted, counts: Sequence[np.ndarray], n: int, schema: DatasetSchema) -> int:
    """A' eligibility on streamed counts (as ``Diverted.check_eligible``); returns N mod ℓ'."""
    lp = mechanism.l_prime
    n_keep = (n // lp) * lp
    if n_keep == 0:
        raise InfeasibleError(f"the table has {n} rows, fewer than ℓ' = {lp}")
    for sa, c in zip(schema.sensitive, counts):
        if lp > len(c):
            raise InfeasibleError(f"ℓ' = {lp} exceeds the {len(c)} values of the sensitive attribute {sa!r}")
        if int(np.max(c)) > n_keep // lp:
            raise InfeasibleError(f"table not eligible for ℓ' = {lp}: a value of {sa!r} occurs {int(np.max(c))} times, "
                                  f"more than N/ℓ' = {n_keep // lp}")
    return n - n_keep


# ------------------------------------------------------------------------------ publish
def _batches(source, columns: Sequence[str], chunk_rows: int) -> Iterator[pa.RecordBatch]:
    """The dataset's rows in batches of at most ``chunk_rows``, file by file and row group by
    row group, reading nothing ahead: memory stays O(chunk) however slowly the caller consumes
    (a dataset scanner decodes ahead of a slow consumer, up to ~1 GiB)."""
    ds = pads.dataset(source, format="parquet")
    for frag in ds.get_fragments():
        with ds.filesystem.open_input_file(frag.path) as f:
            for b in pq.ParquetFile(f).iter_batches(batch_size=chunk_rows, columns=list(columns)):
                if b.num_rows:
                    yield b


def publish_stream(source, mechanism, out, seed: int | None = None, *, quasi: Sequence[str] = (),
                   sensitive: Sequence[str] = (), domains: Mapping[str, Sequence[str]] | None = None,
                   chunk_rows: int = 2_000_000, part_rows: int = 4_000_000, overwrite: bool = False,
                   allow_low_utility: bool = False) -> dict:
    """Publish a Parquet dataset larger than memory under a randomized-family mechanism into
    the partitioned release directory ``out`` — under a bucketization mechanism likewise
    (:func:`publish_stream_bucketized`), or under a histogram mechanism into a release
    directory (:func:`publish_stream_histogram`). Returns the manifest (the seed, if any, goes
    to the custodian file beside ``out``, as with ``Release.save``)."""
    if getattr(mechanism, "family", None) == "histogram":
        return publish_stream_histogram(source, mechanism, out, seed, domains=domains, chunk_rows=chunk_rows,
                                        overwrite=overwrite, allow_low_utility=allow_low_utility)
    if getattr(mechanism, "family", None) == "bucketized":
        return publish_stream_bucketized(source, mechanism, out, seed, quasi=quasi, sensitive=sensitive,
                                         domains=domains, chunk_rows=chunk_rows, part_rows=part_rows,
                                         overwrite=overwrite)
    t0 = time.process_time()
    from ..releases.storage import custodian_path

    target = Path(out)
    if os.path.lexists(target) and not overwrite:  # before any pass over the data
        raise PpdpError(f"{str(target)!r} exists; choose a new directory or pass overwrite=True")
    if seed is not None and os.path.lexists(custodian_path(target)) and not overwrite:
        raise PpdpError(f"the custodian file {str(custodian_path(target))!r} exists; choose a new directory or pass "
                        "overwrite=True")
    schema = dataset_schema(source, quasi, sensitive, domains)
    sens = list(schema.sensitive)
    # pass 1: the sufficient statistics (SA counts)
    counts = [np.zeros(len(schema.domains[s]), dtype=np.int64) for s in sens]
    n = 0
    for b in _batches(source, sens, chunk_rows):
        n += b.num_rows
        for i, s in enumerate(sens):
            counts[i] += np.bincount(label_codes(b.column(s), schema.domains[s], s), minlength=len(counts[i]))
    if n == 0:
        raise PpdpError("the input table is empty")
    rng = publication_rng(seed)
    drop_pos = np.zeros(0, dtype=np.int64)
    n_drop = 0
    if isinstance(mechanism, Diverted):
        n_drop = diverted_eligible(mechanism, counts, n, schema)
        if n_drop:  # N mod ℓ' rows at random; their values come off the counts in pass 2
            drop_pos = np.sort(rng.choice(n, size=n_drop, replace=False))
            counts = _counts_without(source, sens, schema, drop_pos, chunk_rows)
    rp = row_plan(mechanism, counts, schema)
    allots = [None if s is None else Allotment(s) for s in rp.slots]
    # pass 2: apply per chunk, scatter to spill files at random
    if os.path.lexists(target) and not overwrite:  # appeared meanwhile
        raise PpdpError(f"{str(target)!r} exists; choose a new directory or pass overwrite=True")
    tmp = temp_path(target)
    os.mkdir(tmp)
    try:
        return _apply_stream(source, mechanism, seed, schema, rp, allots, rng, n, n_drop, drop_pos, tmp, target,
                             chunk_rows, part_rows, overwrite, t0)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _apply_stream(source, mechanism, seed, schema: DatasetSchema, rp: "RowPlan", allots, rng, n: int, n_drop: int,
                  drop_pos: np.ndarray, tmp: Path, target: Path, chunk_rows: int, part_rows: int, overwrite: bool,
                  t0: float) -> dict:
    sens = list(schema.sensitive)
    cols = [*schema.quasi, *sens]
    spill_dir = tmp / "spill"
    data_dir = tmp / "data"
    os.mkdir(spill_dir)
    os.mkdir(data_dir)
    n_pub = n - n_drop
    B = max(1, -(-n_pub // part_rows))
    out_cols = [*schema.quasi, *(["subtable"] if rp.subtable else []), *sens]
    widths = {c: (np.int16 if len(schema.domains.get(c, ())) < 2**15 else np.int32) for c in out_cols}
    spill_schema = pa.schema([pa.field(c, pa.from_numpy_dtype(widths[c])) for c in out_cols])
    writers = [ipc.new_file(str(spill_dir / f"{k:05d}.arrow"), spill_schema) for k in range(B)]
    pub_counts = [np.zeros(len(schema.domains[s]), dtype=np.int64) for s in sens]
    J = len(rp.slots[0]) if rp.subtable and rp.slots[0] is not None else 1
    group_counts = {s: np.zeros((J, len(schema.domains[s])), dtype=np.int64) for s in sens}
    try:
        seen = 0
        for b in _batches(source, cols, chunk_rows):
            codes = {c: label_codes(b.column(c), schema.domains[c], c) for c in cols}
            if len(drop_pos):
                hit = drop_pos[(drop_pos >= seen) & (drop_pos < seen + b.num_rows)] - seen
                keep = np.ones(b.num_rows, dtype=bool)
                keep[hit] = False
                codes = {c: v[keep] for c, v in codes.items()}
            seen += b.num_rows
            k = len(codes[cols[0]])
            xs = [codes[s] for s in sens]
            types = [None if a is None else a.take(x, rng) for a, x in zip(allots, xs)]
            res = rp.apply(xs, types, rng)
            codes.update(res)
            for i, s in enumerate(sens):
                m_s = len(pub_counts[i])
                key = res[s] if not rp.subtable else res["subtable"] * m_s + res[s]
                group_counts[s] += np.bincount(key, minlength=J * m_s).reshape(J, m_s)
            pub_counts = [group_counts[s].sum(axis=0) for s in sens]
            dest = rng.integers(0, B, size=k)
            order = np.argsort(dest, kind="stable")
            bounds = np.searchsorted(dest[order], np.arange(B + 1))
            arrays = [pa.array(codes[c][order].astype(widths[c])) for c in out_cols]
            whole = pa.RecordBatch.from_arrays(arrays, schema=spill_schema)
            for j in range(B):
                if bounds[j + 1] > bounds[j]:
                    writers[j].write_batch(whole.slice(int(bounds[j]), int(bounds[j + 1] - bounds[j])))
    finally:
        for w in writers:
            w.close()
    # pass 3: every spill file, permuted in memory, becomes a part file
    for j in range(B):
        path = spill_dir / f"{j:05d}.arrow"
        with pa.memory_map(str(path)) as src:
            t = ipc.open_file(src).read_all()
        perm = rng.permutation(t.num_rows)
        arrays = []
        for c in out_cols:
            v = t.column(c).to_numpy()[perm]
            if c == "subtable":
                arrays.append(pa.array(v.astype(np.int32)))
            else:
                arrays.append(pa.DictionaryArray.from_arrays(pa.array(v.astype(np.int32)),
                                                             pa.array(list(schema.domains[c]), pa.string())))
        pq.write_table(pa.Table.from_arrays(arrays, names=out_cols), data_dir / f"part-{j:05d}.parquet", compression="zstd")
        del t
        os.unlink(path)
    shutil.rmtree(spill_dir)
    claim = rp.claim if not isinstance(rp, DivertedRows) else DivertedClaim.derive(
        mechanism.l_prime, sens, n_pub, n_drop, rp.plan.counts, [schema.domains[s] for s in sens])
    manifest: dict[str, Any] = {"format": "ppdp-release/1", "family": "randomized", "schema": schema.manifest_schema(),
                                "n_input": n, "n_published": n_pub, "dropped": n_drop, "engine": "stream",
                                "certificate": claim.to_certificate()}
    rel = counted_release(manifest, {s: pub_counts[i] for i, s in enumerate(sens)}, group_counts)
    state_disclosure(rel)  # what the files disclose, from the published counts (verify re-derives it)
    bins = recorded_bins(rel.domains)
    if bins:  # as ppdp.publish records them
        rel.manifest["schema"]["bins"] = bins
    stamp_manifest(rel, mechanism.name, mechanism.get_params(), seed, VERSION)
    m = finish_partitioned(tmp, target, rel.manifest, {"data": n_pub}, overwrite=overwrite)
    if rel.custodian:
        from ..releases.custodian import save_custodian
        from ..releases.storage import custodian_path

        save_custodian(custodian_path(target), rel.custodian, replace=overwrite)
    m["_cpu_seconds"] = time.process_time() - t0
    return m


def _counts_without(source, sens, schema: DatasetSchema, drop_pos: np.ndarray, chunk_rows: int) -> list[np.ndarray]:
    counts = [np.zeros(len(schema.domains[s]), dtype=np.int64) for s in sens]
    seen = 0
    for b in _batches(source, sens, chunk_rows):
        keep = np.ones(b.num_rows, dtype=bool)
        keep[drop_pos[(drop_pos >= seen) & (drop_pos < seen + b.num_rows)] - seen] = False
        seen += b.num_rows
        for i, s in enumerate(sens):
            counts[i] += np.bincount(label_codes(b.column(s), schema.domains[s], s)[keep], minlength=len(counts[i]))
    return counts


# ------------------------------------------------------------------------------- verify
class CountedRelease(RandomizedRelease):
    """A randomized release's manifest with its published SA counts streamed (no rows held):
    ``streamed_counts`` (attribute → counts of each published value) and
    ``streamed_group_counts`` (attribute → transition groups × values: SDR's sub-tables, one
    group otherwise), from which the claim's disclosure is computed
    (:func:`ppdp.claims.rho.transition_disclosure`)."""

    streamed_counts: dict[str, np.ndarray] = {}
    streamed_group_counts: dict[str, np.ndarray] | None = None

    def published_counts(self, attribute: str) -> np.ndarray:
        if attribute in self.streamed_counts:
            return self.streamed_counts[attribute]
        return super().published_counts(attribute)


def counted_release(manifest: dict, counts: Mapping[str, np.ndarray], group_counts: Mapping[str, np.ndarray],
                    columns: Sequence[str] = ()) -> CountedRelease:
    """A :class:`CountedRelease` of ``manifest`` (its data table empty, with ``columns``)."""
    rel = CountedRelease(manifest, {"data": pa.table({c: pa.array([], pa.string()) for c in columns})} if columns else {})
    rel.streamed_counts = {s: np.asarray(v, dtype=np.int64) for s, v in counts.items()}
    rel.streamed_group_counts = {s: np.asarray(v, dtype=np.int64) for s, v in group_counts.items()}
    return rel


def pair_counts(batches: Iterator[dict[str, np.ndarray]], qi: Sequence[str], dims: Sequence[int], sa: str, m: int,
                merge_at: int = 1 << 22):
    """Aggregated counts of (NSA combination, SA value) pairs over a stream (sorted keys). Each
    batch is reduced to its distinct keys; the reduced batches are merged only when they
    outgrow the merged part, so the cost is O(rows + distinct keys × log), not one re-sort of
    every key seen so far per batch."""
    keys = np.zeros(0, dtype=np.int64)
    cnt = np.zeros(0, dtype=np.int64)
    pend_k: list[np.ndarray] = []
    pend_c: list[np.ndarray] = []
    pending = 0

    def merge():
        nonlocal keys, cnt, pend_k, pend_c, pending
        allk = np.concatenate([keys, *pend_k])
        allc = np.concatenate([cnt, *pend_c])
        keys, inv = np.unique(allk, return_inverse=True)
        cnt = np.bincount(np.asarray(inv).ravel(), weights=allc, minlength=len(keys)).astype(np.int64)
        pend_k, pend_c, pending = [], [], 0

    for codes in batches:
        k = np.ravel_multi_index([codes[c] for c in qi], dims) * m + codes[sa] if qi else codes[sa]
        u, c = np.unique(k, return_counts=True)
        pend_k.append(u)
        pend_c.append(c)
        pending += len(u)
        if pending > max(len(keys), merge_at):
            merge()
    if pend_k or not len(keys):
        merge()
    return keys, cnt


# ----------------------------------------------------------------------------- histogram family
class CountedTable(Table):
    """A Table holding one row per distinct label combination of the histogram's dimensions,
    with ``row_weights`` the number of input rows of each: the only thing a histogram
    mechanism reads (its dense cube, :func:`ppdp.kernels.grid.dense_counts` with weights).
    At most one row per cube cell, whatever N."""

    row_weights: np.ndarray | None = None


#: a chunk's label combinations are counted in a dense array up to this many cells
#: (``np.bincount``), else by sorting their keys (``np.unique``)
DENSE_COUNT_CELLS = 1 << 22


def merge_counts(keys: Sequence[np.ndarray], counts: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """The distinct keys of ``keys`` (arrays of flat cell keys) and each one's summed ``counts``."""
    uk, inv = np.unique(np.concatenate(keys), return_inverse=True)
    return uk, np.bincount(inv.ravel(), weights=np.concatenate(counts), minlength=len(uk)).astype(np.int64)


def counted_table(keys: np.ndarray, weights: np.ndarray, dims: Sequence[str], doms: Mapping[str, Sequence[str]],
                  numeric: Mapping[str, list | None]) -> CountedTable:
    """The :class:`CountedTable` of distinct flat cell ``keys`` over the domains ``doms`` of
    ``dims`` (C order) with their row counts ``weights``; ``numeric``: each dimension's numeric
    values (None: a text column)."""
    shape = tuple(max(1, len(doms[d])) for d in dims)
    cell = np.unravel_index(np.asarray(keys, dtype=np.int64), shape)
    codes = {d: cell[i].astype(np.int32) for i, d in enumerate(dims)}
    t = CountedTable(codes, {d: list(doms[d]) for d in dims},
                     numeric={d: (None if numeric.get(d) is None else np.asarray(numeric[d])) for d in dims})
    t.row_weights = np.asarray(weights, dtype=np.int64)
    return t


def counted_combinations(source, dims: Sequence[str], domains: Mapping[str, Sequence[str]] | None = None,
                         chunk_rows: int = 2_000_000) -> CountedTable:
    """The :class:`CountedTable` of a Parquet dataset over ``dims``, a chunk at a time: each
    row's labels coded over the dataset's domains (:func:`dataset_schema`: the footer's, or one
    pass over the distinct values; ``domains`` fixes a column's order), its flat cell key, the
    keys counted (``np.bincount`` up to :data:`DENSE_COUNT_CELLS` cells, else sorted and
    merged). Memory O(chunk + combinations)."""
    dims = list(dims)
    if not dims:
        raise SchemaError("a histogram needs at least one dimension")
    schema = dataset_schema(source, dims[:-1], dims[-1:], domains)
    doms = {d: list(schema.domains[d]) for d in dims}
    shape = tuple(max(1, len(doms[d])) for d in dims)
    n_cells = int(np.prod(shape, dtype=np.int64))
    dense = n_cells <= DENSE_COUNT_CELLS
    acc = np.zeros(n_cells if dense else 0, dtype=np.int64)
    keys: list[np.ndarray] = []
    cnts: list[np.ndarray] = []
    n = 0
    for b in _batches(source, dims, chunk_rows):
        n += b.num_rows
        k = np.ravel_multi_index([label_codes(b.column(d), doms[d], d) for d in dims], shape)
        if dense:
            acc += np.bincount(k, minlength=n_cells)
            continue
        uk, c = np.unique(k, return_counts=True)
        keys.append(uk)
        cnts.append(c.astype(np.int64))
        if sum(len(x) for x in keys) > 4 * max(chunk_rows, 1):
            uk, c = merge_counts(keys, cnts)
            keys[:], cnts[:] = [uk], [c]
    if n == 0:
        raise PpdpError("the input table is empty")
    if dense:
        uk = np.flatnonzero(acc)
        return counted_table(uk, acc[uk], dims, doms, schema.numeric)
    return counted_table(*merge_counts(keys, cnts), dims, doms, schema.numeric)


def publish_counted(table: CountedTable, mechanism, out, seed: int | None, engine: str, *,
                    overwrite: bool = False, allow_low_utility: bool = False) -> dict:
    """A histogram mechanism run on counted label combinations, as ``ppdp.publish`` runs it (its
    ε plan, noise and inference, with the same generator: a seeded release equals the local
    engine's), saved to ``out``; the manifest names the ``engine``. Returns the manifest."""
    if getattr(mechanism, "family", None) != "histogram":
        raise PpdpError(f"a counted table is published by a histogram mechanism; got {getattr(mechanism, 'name', mechanism)!r}")
    declared, _ = declared_domains(mechanism.dims, mechanism.bins, mechanism.domains)
    spec, _ = cube_codes(table, list(mechanism.dims), mechanism.bins, declared)
    if not spec.dense:
        raise PpdpError(f"the cube has {spec.n_cells:,} cells; the {engine} engine publishes dense cubes only")
    rel = mechanism._publish(table, publication_rng(seed))  # the mechanism's own steps
    rel.manifest["engine"] = engine
    state_disclosure(rel)
    state_utility(rel, allow_low_utility)  # a noisy total that is mostly noise: refused unless allowed
    bins = recorded_bins(rel.domains)
    if bins:
        rel.manifest["schema"]["bins"] = bins
    stamp_manifest(rel, mechanism.name, mechanism.get_params(), seed, VERSION)
    rel.save(out, overwrite=overwrite)
    return rel.manifest


def publish_stream_bucketized(source, mechanism, out, seed: int | None = None, *, quasi: Sequence[str] = (),
                              sensitive: Sequence[str] = (), domains: Mapping[str, Sequence[str]] | None = None,
                              chunk_rows: int = 2_000_000, part_rows: int = 4_000_000, overwrite: bool = False,
                              allow_full_disclosure: bool = False) -> dict:
    """F'-privacy or Anatomy on a Parquet dataset larger than memory, into the partitioned
    release directory ``out``: the Spark engine's bucketization stages
    (:func:`ppdp.engines.blocks.bucketize`) with every task run in this process, one after the
    other — (A) one read of the dataset, ``chunk_rows`` rows of row groups at a time, every row
    as narrow codes to a uniformly random block of about ``part_rows`` rows in spill files
    beside the release, the SA counts per block kept; the mechanism's public plan from the
    counts; (B) a block at a time, each row's uniformly random rank within its SA value, its
    bucket by the typed plan, the row to the output part of its bucket id's range; (C) each part
    written ordered by bucket (the QIT ordered by bucket id, as in memory); (D) the ST from the plan alone, a range of buckets at a time; the disclosure
    streamed over the ranges. Memory O(block + plan): no array of one entry per row or per
    bucket. PySpark is not needed. Negative associations for the fakes are not supported here
    (nor on Spark): one clear error. Returns the manifest."""
    if getattr(mechanism, "negative_associations", None) or getattr(mechanism, "learn_associations", False):
        raise PpdpError("negative associations for fake values (given or learned) are not supported by the streaming "
                        "engine; publish in memory (ppdp publish) to use them")
    target = Path(out)
    if os.path.lexists(target) and not overwrite:  # before any pass over the data
        raise PpdpError(f"{str(target)!r} exists; choose a new directory or pass overwrite=True")
    schema = dataset_schema(source, quasi, sensitive, domains)
    if len(schema.sensitive) != 1:
        raise SchemaError(f"bucketization publishes one sensitive attribute; the dataset declares {list(schema.sensitive)}")
    scan = FileScan.of(source, unit_rows=chunk_rows)
    if scan.n_rows == 0:
        raise PpdpError("the input table is empty")
    return bucketize(None, schema, target, seed, publication_rng(seed), mechanism.plan, overwrite=overwrite,
                      mechanism=mechanism, allow_full_disclosure=allow_full_disclosure, part_rows=part_rows,
                      scan=scan)


def publish_stream_histogram(source, mechanism, out, seed: int | None = None, *,
                             domains: Mapping[str, Sequence[str]] | None = None, chunk_rows: int = 2_000_000,
                             overwrite: bool = False, allow_low_utility: bool = False) -> dict:
    """A histogram mechanism (cells, dpcube, kdtree, consistency, dp, kron, agrid, marginals,
    dpcube-paper) on a Parquet dataset larger than memory: one streamed pass counts the label
    combinations of its dimensions (:func:`counted_combinations`), then the mechanism runs on
    the counts (:func:`publish_counted`). Memory O(chunk + cube). Returns the manifest."""
    target = Path(out)
    if os.path.lexists(target) and not overwrite:  # before any pass over the data
        raise PpdpError(f"{str(target)!r} exists; choose a new directory or pass overwrite=True")
    declared, undeclared = declared_domains(mechanism.dims, mechanism.bins, mechanism.domains)
    if undeclared:
        raise SchemaError(f"the domain of {undeclared} is not declared: a differentially private histogram must not "
                          "read its cells off the rows (pass domains= or bins=)")
    table = counted_combinations(source, mechanism.dims, domains, chunk_rows)
    return publish_counted(table, mechanism, target, seed, "stream", overwrite=overwrite,
                           allow_low_utility=allow_low_utility)


def _verify_stream_histogram(release_dir: Path, manifest: dict, source, chunk_rows: int) -> dict:
    """:func:`verify_stream` of a histogram release: its own verify, with the source's counted
    label combinations (:func:`counted_combinations`) as the source table."""
    from ..releases.base import load_release

    table = None
    if source is not None:
        table = counted_combinations(source, list(manifest.get("params", {}).get("dims") or []), None, chunk_rows)
    r = load_release(release_dir).verify(table)
    return {"ok": bool(r.ok), "problems": list(r.problems), "checks": list(r.checks), "facts": dict(r.facts)}


def _verify_stream_bucketized(release_dir: Path, source) -> dict:
    """:func:`verify_stream` of a bucketized (partitioned) release: the release's own verify
    (:func:`ppdp.load_release`), with the ``source`` dataset read as a :class:`~ppdp.table.Table`
    of narrow codes (a column at a time: about a byte per cell), which must fit in memory, as the
    release's verify must (measured: docs/scale.md)."""
    from ..releases.base import load_release
    from ..table import Table

    table = None if source is None else Table.from_parquet(source)
    r = load_release(release_dir).verify(table)
    return {"ok": bool(r.ok), "problems": list(r.problems), "checks": list(r.checks), "facts": dict(r.facts)}


def verify_stream(release_dir, source=None, chunk_rows: int = 2_000_000) -> dict:
    """Verify a streamed (partitioned) randomized release in bounded memory: the manifest and
    claim (re-derived by the claim's own check on the manifest), the files (row count, every
    label in its domain, the columns) and, with the ``source`` dataset, the source fit of the
    published SA (uniform and global randomization: the goodness-of-fit bounds of
    :func:`ppdp.kernels.transition.randomization_fit`, computed from aggregated pair counts).
    Returns ``{"ok": bool, "problems": [...], "checks": [...], "facts": {...}}``."""
    from ..claims import claim_of
    from ..kernels.transition import FIT_ALPHA
    from ..releases.base import VerifyReport
    from ..releases.storage import read_json

    d = Path(release_dir)
    manifest = read_json(d / "manifest.json", "manifest")
    if manifest.get("family") == "histogram":
        return _verify_stream_histogram(d, manifest, source, chunk_rows)
    if manifest.get("family") == "bucketized":
        return _verify_stream_bucketized(d, source)
    rep = VerifyReport()
    sch = manifest["schema"]
    qi, sens = list(sch["quasi"]), list(sch["sensitive"])
    doms = sch["domains"]
    claim = claim_of(manifest)
    n_rows = 0
    pub = {s: np.zeros(len(doms[s]), dtype=np.int64) for s in sens}
    sdr = getattr(claim, "is_sdr", False)
    J = len(getattr(claim, "subtables", ()) or ()) if sdr else 1
    per_group = {s: np.zeros((max(J, 1), len(doms[s])), dtype=np.int64) for s in sens}
    cols_seen: set[str] = set()

    def pub_codes():
        nonlocal n_rows
        for b in iter_partitioned(d / "data", batch_rows=chunk_rows):
            cols_seen.update(b.schema.names)
            codes = {c: label_codes(b.column(c), doms[c], c) for c in [*qi, *sens]}
            n_rows += b.num_rows
            sub = None
            if sdr and "subtable" in b.schema.names:
                sub = b.column("subtable").to_numpy(zero_copy_only=False).astype(np.int64)
                if len(sub) and (sub.min() < 0 or sub.max() >= J):
                    raise PpdpError(f"a sub-table index outside 0..{J - 1}")
            for s in sens:
                m_s = len(doms[s])
                key = codes[s] if sub is None else sub * m_s + codes[s]
                per_group[s] += np.bincount(key, minlength=per_group[s].size).reshape(per_group[s].shape)
                pub[s] += np.bincount(codes[s], minlength=m_s)
            yield codes

    dims = [len(doms[c]) for c in qi]
    sa = sens[0]
    m = len(doms[sa])
    pkeys, pcnt = pair_counts(pub_codes(), qi, dims, sa, m)
    rep.check(n_rows == int(manifest["n_published"]), "the parts hold n_published rows",
              f"the parts hold {n_rows} rows, the manifest says {manifest['n_published']}")
    rep.checks.append("every published label lies in its domain")
    expected = set(qi) | set(sens) | ({"subtable"} if getattr(claim, "is_sdr", False) else set())
    rep.check(cols_seen == expected, "the parts hold exactly the NSA and SA columns", f"columns {sorted(cols_seen)} != {sorted(expected)}")
    stub = counted_release(manifest, pub, per_group, sorted(expected))
    claim_rep = VerifyReport()
    try:
        claim.check(stub, claim_rep, None)
    except (PpdpError, KeyError, ValueError) as e:
        claim_rep.problems.append(str(e))
    # a check that counts the rows of the (empty) stub is replaced by the streamed count above
    rep.checks.extend(claim_rep.checks)
    rep.problems.extend(p for p in claim_rep.problems if "rows" not in p and "n =" not in p)
    rep.facts.update(claim_rep.facts)
    if source is not None and not rep.problems:
        schema = dataset_schema(source, qi, sens)
        for c in [*qi, *sens]:
            rep.check(list(schema.domains[c]) == list(doms[c]), f"the source's domain of {c!r} is the release's",
                      f"the source table's domain of {c!r} differs from the release's")
        if not rep.problems:
            n_src = 0

            def src_codes():
                nonlocal n_src
                for b in _batches(source, [*qi, sa], chunk_rows):
                    n_src += b.num_rows
                    yield {c: label_codes(b.column(c), doms[c], c) for c in [*qi, sa]}

            skeys, scnt = pair_counts(src_codes(), qi, dims, sa, m)
            rep.check(n_src == int(manifest["n_input"]), "source has n_input rows",
                      f"the source has {n_src} rows, the manifest says n_input = {manifest['n_input']}")
            g_s, g_p = skeys // m, pkeys // m
            src_g, src_gn = np.unique(g_s, return_inverse=True)
            n_g = np.bincount(np.asarray(src_gn).ravel(), weights=scnt)
            pub_g = np.unique(g_p, return_counts=False)
            grp_pub = np.bincount(np.searchsorted(pub_g, g_p), weights=pcnt, minlength=len(pub_g))
            same = np.array_equal(src_g, pub_g) and np.allclose(n_g, grp_pub) if int(manifest.get("dropped", 0)) == 0 else True
            rep.check(bool(same), "published NSA rows = the source's NSA rows (multiset)",
                      "the published NSA rows are not the source's NSA rows")
            gamma = getattr(claim, "gamma", None)
            if gamma is not None and not getattr(claim, "is_sdr", False) and same:
                r, q = float(getattr(claim, "retention")), float(getattr(claim, "q"))
                a = scnt / n_g[np.asarray(src_gn).ravel()]
                idx = np.minimum(np.searchsorted(skeys, pkeys), len(skeys) - 1)
                hit = skeys[idx] == pkeys
                W = float((a[idx] * pcnt)[hit].sum())
                ew = float((scnt * (r * a + q * (1.0 - a))).sum())
                n_pub = int(pcnt.sum())
                t = float(np.sqrt(n_pub * np.log(2.0 / FIT_ALPHA) / 2.0))
                ok = ew - t <= W <= ew + t
                rep.facts[f"source fit of {sa}"] = f"W = {W:.1f}, accepted range [{ew - t:.1f}, {ew + t:.1f}] (n = {n_pub})"
                rep.check(ok, f"published {sa} fits the declared randomization given the source (false alarm ≤ {FIT_ALPHA:g})",
                          f"the published {sa} does not fit the declared randomization given the source: W = {W:.1f} "
                          f"outside [{ew - t:.1f}, {ew + t:.1f}]")
    return {"ok": rep.ok, "problems": list(rep.problems), "checks": list(rep.checks), "facts": dict(rep.facts),
            "published_counts": {s: v.tolist() for s, v in pub.items()}}


# ------------------------------------------------------------------------------ queries
def answer_stream(release_dir, sa_values: Sequence[str], chunk_rows: int = 2_000_000) -> np.ndarray:
    """Estimated number of records holding each SA label of ``sa_values`` (the first sensitive
    attribute), from a streamed pass over the published SA column: the published counts,
    inverted through the release's transition model (the "inversion" estimate)."""
    from ..releases.storage import read_json

    d = Path(release_dir)
    manifest = read_json(d / "manifest.json", "manifest")
    sa = manifest["schema"]["sensitive"][0]
    dom = manifest["schema"]["domains"][sa]
    y = np.zeros(len(dom), dtype=np.int64)
    for b in iter_partitioned(d / "data", columns=[sa], batch_rows=chunk_rows):
        y += np.bincount(label_codes(b.column(sa), dom, sa), minlength=len(dom))
    stub = RandomizedRelease(manifest, {"data": pa.table({sa: pa.array([], pa.string())})})
    model = stub.transition_models(counts=None if manifest["certificate"].get("model") != "l'-diverted zero-differential privacy"
                                   else [y])[0]
    if len(model.groups) != 1:
        raise PpdpError("answer_stream answers single-group releases (uniform, global, diverted); load an SDR release "
                        "with ppdp.load_release for its sub-table estimates")
    est = model.single.invert(y)
    pos = {lab: i for i, lab in enumerate(dom)}
    return np.array([est[pos[v]] for v in sa_values], dtype=float)


#: estimators linear in the published rows: a sum of per-batch answers is the whole release's answer
LINEAR_ESTIMATORS = {"diverted": ("full-closed",), "other": ("inversion",)}


def answer_where_stream(release_dir, workload, estimator: str | None = None, chunk_rows: int = 2_000_000) -> np.ndarray:
    """Answer WHERE count queries (strings as ``ppdp query`` takes them, or Query objects; on
    quasi-identifiers and the sensitive attribute) on a partitioned randomized release,
    streamed batch by batch in bounded memory.

    The estimator must be linear in the published rows — ``inversion`` (uniform, global,
    SDR; the default) or ``full-closed`` (A'; the default there, its transition built from
    the whole release's published counts, streamed first) — so the sum of the batches'
    answers is exactly the in-memory ``load_release(dir).answer(workload, estimator)``.
    Non-linear estimators (``norm-sub``, ``mle``, ``em``, iterative A') need the whole
    release: load it with ``ppdp.load_release``."""
    from ..queries.workload import as_workload
    from ..releases.partitioned import encode_labels
    from ..releases.storage import read_json

    d = Path(release_dir)
    manifest = read_json(d / "manifest.json", "manifest")
    if manifest.get("family") != "randomized":
        raise PpdpError(f"streamed WHERE queries read randomized releases; this one is {manifest.get('family')!r} "
                        "(load it with ppdp.load_release)")
    diverted = manifest.get("certificate", {}).get("model") == DivertedClaim.model
    allowed = LINEAR_ESTIMATORS["diverted" if diverted else "other"]
    estimator = estimator or allowed[0]
    if estimator not in allowed:
        raise PpdpError(f"streamed queries need an estimator linear in the rows ({', '.join(allowed)} for this release); "
                        f"got {estimator!r} — load the release with ppdp.load_release for the others")
    sch = manifest["schema"]
    doms = sch["domains"]
    sens = list(sch["sensitive"])
    counts: dict[str, np.ndarray] = {}
    if diverted:  # the receiver's transition is built from the release's published counts: one pass first
        counts = {s: np.zeros(len(doms[s]), dtype=np.int64) for s in sens}
        for b in iter_partitioned(d / "data", columns=sens, batch_rows=chunk_rows):
            for s in sens:
                counts[s] += np.bincount(label_codes(b.column(s), doms[s], s), minlength=len(doms[s]))
    queries = list(as_workload(workload))
    total = np.zeros(len(queries), dtype=np.float64)
    for b in iter_partitioned(d / "data", batch_rows=chunk_rows):
        t = pa.table({c: (encode_labels(b.column(c), doms[c], c) if c in doms else b.column(c)) for c in b.schema.names})
        rel = CountedRelease(manifest, {"data": t})
        rel.streamed_counts = counts
        total += rel.answer(queries, estimator=estimator)
    return total


__all__ = ["Allotment", "CountedRelease", "DatasetSchema", "LINEAR_ESTIMATORS", "counted_release", "RowPlan", "answer_stream", "pair_counts",
           "answer_where_stream", "dataset_schema", "label_codes", "publish_stream",
           "row_plan", "split_counts", "table_order", "verify_stream"]

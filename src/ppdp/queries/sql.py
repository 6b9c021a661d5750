"""Receivers' count queries: ``SELECT [g1, g2,] COUNT(*) [FROM t] [WHERE cond] [GROUP BY g1, g2]``.

A condition may combine comparisons (``=``, ``<>``/``!=``, ``<``, ``<=``, ``>``, ``>=``),
``IN (…)``, ``BETWEEN … AND …`` (and their ``NOT`` forms) with ``AND``, ``OR``, ``NOT`` and
parentheses. Every estimator answers conjunctive queries (one value set per column), so a
condition is compiled, against the release's domains, into *disjoint* conjunctive terms
(:func:`compile_condition`): per column the atoms split the domain into classes of values
that no atom tells apart; the condition is evaluated on every combination of classes
(vectorised) and the satisfying combinations are merged back column by column. A
conjunction — however written, ``a = 1 OR a = 2`` included — compiles to exactly one term;
``a = 1 OR b = 2`` to two (``a = 1`` and ``a <> 1 AND b = 2``). The count of the condition is
the sum of its terms' counts.

``GROUP BY`` (on any published attributes, QI or SA) expands the statement into one query per
group value combination and term, built from domain masks (:func:`expand`), and the whole
expansion is answered as one workload. Every other construct (HAVING, ORDER BY, LIMIT, JOIN,
UNION, DISTINCT, other aggregates, functions …) is refused with a :class:`QueryError` naming
it.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np
import sqlglot
from sqlglot import exp

from ..errors import QueryError
from .model import Predicate, Query, Resolver
from ..table import MISSING_LABEL
from .parser import MAX_NESTING, MAX_QUERY_CHARS, REFUSED_CLAUSES, parse_where

#: most class combinations a condition may span (before merging), and most expanded queries
MAX_COMBINATIONS = 1 << 16
MAX_EXPANDED = 5_000_000

_REFUSED = {k: v for k, v in REFUSED_CLAUSES.items() if k != "group"}  # GROUP BY is answered here


def _show(text: str) -> str:
    return repr(text) if len(text) <= 80 else repr(text[:77]) + "…"


@dataclass(frozen=True)
class CountStatement:
    """A parsed count statement: ``condition`` (a tree of ``("and"|"or", [..])``, ``("not", x)``,
    ``("atom", Predicate)`` or ``("true",)``), the GROUP BY columns and the text."""

    condition: tuple
    group_by: tuple[str, ...]
    text: str

    @property
    def columns(self) -> set[str]:
        out: set[str] = set(self.group_by)
        stack = [self.condition]
        while stack:
            n = stack.pop()
            if n[0] == "atom":
                out.add(n[1].column)
            elif n[0] in ("and", "or"):
                stack += n[1]
            elif n[0] == "not":
                stack.append(n[1])
        return out


#: an IN list of plain literals: single-quoted strings ('' inside for a quote) or unsigned
#: decimal numbers
_LIST_ITEM = r"'(?:[^']|'')*'|\d+(?:\.\d+)?(?![\w.])"
#: left to right: string literals, quoted identifiers and comments are passed over whole (an IN
#: inside them is not an IN list); an ``IN (…)`` of plain literals is folded
_SCAN = re.compile(r"(?P<skip>'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|`[^`]*`|--[^\n]*|/\*.*?\*/)"
                   rf"|(?<![\w$])(?P<kw>IN)\s*\(\s*(?P<items>(?:{_LIST_ITEM})(?:\s*,\s*(?:{_LIST_ITEM}))*)\s*\)",
                   re.IGNORECASE | re.DOTALL)
_ITEM = re.compile(_LIST_ITEM)
#: the folded list's stand-in: a string literal holding this mark and the list's number
_MARK = "\x1e"


def _fold_in_lists(body: str) -> tuple[str, list[tuple[str, ...]]]:
    """``body`` with each ``IN (…)`` list of plain literals replaced by one stand-in literal, and
    the lists' values (as :func:`_literal` reads them: a string's text with '' as ', a number's
    digits). The SQL parser's cost grows with the tokens of a statement, and a receiver's IN
    lists run to dozens of values: folded, a statement parses several times faster and means
    the same (``tests/queries/test_sql_fold.py`` compares the two on random statements). No
    folding when the text holds the mark itself."""
    if _MARK in body:
        return body, []
    lists: list[tuple[str, ...]] = []

    def fold(m: re.Match) -> str:
        if m.group("skip") is not None:
            return m.group(0)
        vals = tuple(v[1:-1].replace("''", "'") if v.startswith("'") else v for v in _ITEM.findall(m.group("items")))
        lists.append(vals)
        return f"{m.group('kw')} ('{_MARK}{len(lists) - 1}')"

    return _SCAN.sub(fold, body), lists


@functools.lru_cache(maxsize=4096)
def _parse_folded(folded: str) -> tuple:
    """The parsed statements of a folded text (:func:`_fold_in_lists`). A folded text names its
    lists by position only, so a workload's statements over the same columns share one text and
    one parse (cached; the trees are only read)."""
    return tuple(t for t in sqlglot.parse(folded) if t is not None)


def _literal(node: Any, text: str) -> str:
    if isinstance(node, exp.Literal):
        return node.this
    if isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal) and not node.this.is_string:
        return "-" + node.this.this
    if isinstance(node, exp.Column) and not node.table:
        return node.name
    if isinstance(node, exp.Boolean):
        return "True" if node.this else "False"
    raise QueryError(f"expected a literal value, got {node.sql()!r} in {_show(text)}")


def _column(node: Any, text: str) -> str:
    if isinstance(node, exp.Column):
        return node.name
    raise QueryError(f"expected a column name, got {node.sql()!r} in {_show(text)}")


def _condition(node: Any, text: str, lists: Sequence[tuple[str, ...]] = ()) -> tuple:
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.And):
        return ("and", [_condition(node.this, text, lists), _condition(node.expression, text, lists)])
    if isinstance(node, exp.Or):
        return ("or", [_condition(node.this, text, lists), _condition(node.expression, text, lists)])
    if isinstance(node, exp.Not):
        return ("not", _condition(node.this, text, lists))
    if isinstance(node, exp.Boolean):
        return ("true",) if node.this else ("not", ("true",))
    if isinstance(node, (exp.EQ, exp.NEQ)):
        if isinstance(node.left, exp.Column):
            col, val = _column(node.left, text), _literal(node.right, text)
        else:
            col, val = _column(node.right, text), _literal(node.left, text)
        atom = ("atom", Predicate(col, "eq", (val,)))
        return atom if isinstance(node, exp.EQ) else ("not", atom)
    if isinstance(node, exp.In):
        if any(node.args.get(k) is not None for k in ("query", "unnest", "field")):
            raise QueryError(f"IN takes a list of values, got {node.sql()!r}")
        items = node.expressions
        if (lists and len(items) == 1 and isinstance(items[0], exp.Literal) and items[0].is_string
                and items[0].this.startswith(_MARK)):
            vals = lists[int(items[0].this[len(_MARK):])]  # a folded list (_fold_in_lists)
        else:
            vals = tuple(_literal(v, text) for v in items)
        if not vals:
            raise QueryError(f"empty IN list in {_show(text)}")
        return ("atom", Predicate(_column(node.this, text), "in", vals))
    if isinstance(node, exp.Between):
        if node.args.get("symmetric"):
            raise QueryError(f"BETWEEN SYMMETRIC is not supported: {node.sql()!r}")
        return ("atom", Predicate(_column(node.this, text), "between", low=_literal(node.args["low"], text),
                                  high=_literal(node.args["high"], text)))
    if isinstance(node, (exp.GTE, exp.LTE, exp.GT, exp.LT)):
        left_is_col = isinstance(node.left, exp.Column)
        col = _column(node.left if left_is_col else node.right, text)
        val = _literal(node.right if left_is_col else node.left, text)
        lower = isinstance(node, (exp.GTE, exp.GT)) == left_is_col
        strict = isinstance(node, (exp.GT, exp.LT))
        p = (Predicate(col, "between", low=val, low_open=strict) if lower
             else Predicate(col, "between", high=val, high_open=strict))
        return ("atom", p)
    if isinstance(node, exp.Is):
        if not isinstance(node.expression, exp.Null):
            raise QueryError(f"IS takes NULL (IS NULL / IS NOT NULL): {node.sql()!r}")
        # NULL is a missing value: the label MISSING_LABEL (a column without one has no such row)
        return ("atom", Predicate(_column(node.this, text), "eq", (MISSING_LABEL,)))
    if isinstance(node, (exp.Like, exp.ILike)):
        raise QueryError(f"LIKE is not supported; list the values with IN (…): {node.sql()!r}")
    raise QueryError(f"unsupported condition {node.sql()!r}: use =, <>, IN (…), BETWEEN … AND …, <, <=, >, >= "
                     "joined by AND, OR, NOT")


def parse_statement(text: str) -> CountStatement:
    """Parse a count statement or a bare / ``WHERE`` condition (module doc)."""
    if not isinstance(text, str):
        raise QueryError(f"a query is a string, got {type(text).__name__}")
    if len(text) > MAX_QUERY_CHARS:
        raise QueryError(f"the query is {len(text):,} characters long (at most {MAX_QUERY_CHARS:,})")
    if "\x00" in text:
        raise QueryError("the query holds a NUL character")
    body = text.strip().rstrip(";").strip()
    if not body:
        return CountStatement(("true",), (), text)
    depth = top = 0
    if body.count("(") + body.count("[") > MAX_NESTING:  # else no deeper than its openers: no scan
        for ch in body:
            depth += ch in "(["
            depth -= ch in ")]"
            top = max(top, depth)
    if top > MAX_NESTING:
        raise QueryError(f"the query nests brackets {top} deep (at most {MAX_NESTING}): {_show(text)}")
    head = body.split(None, 1)[0].upper()
    if not (head == "SELECT" or head.startswith("SELECT(") or head == "WITH"):
        cond = body[len("WHERE"):] if head == "WHERE" else body
        if not cond.strip():
            raise QueryError(f"WHERE without a condition: {_show(text)}")
        body = f"SELECT COUNT(*) WHERE {cond}"
    folded, lists = _fold_in_lists(body)
    trees: list | None = None
    if lists:
        try:
            trees = list(_parse_folded(folded))
        except Exception:  # the unfolded text below: its own parse, or its own error
            trees, lists = None, []
    try:
        if trees is None:
            trees = [t for t in sqlglot.parse(body) if t is not None]
    except sqlglot.errors.SqlglotError as e:
        msg = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise QueryError(f"cannot parse query {_show(text)}: {msg}") from None
    except RecursionError:
        raise QueryError(f"the query nests too deeply: {_show(text)}") from None
    except Exception as e:  # a parser crash on odd input is still bad input
        raise QueryError(f"cannot parse query {_show(text)}: {type(e).__name__}") from None
    if len(trees) != 1:
        raise QueryError(f"one query at a time: {_show(text)} holds {len(trees)} statements")
    tree = trees[0]
    if isinstance(tree, (exp.Union, exp.Intersect, exp.Except)):
        raise QueryError(f"{type(tree).__name__.upper()} is not supported (one count statement at a time): {_show(text)}")
    if not isinstance(tree, exp.Select):
        raise QueryError(f"not a count query: {_show(text)} (write a condition, or SELECT COUNT(*) … WHERE … GROUP BY …)")
    for key, value in tree.args.items():
        if key in ("expressions", "from_", "from", "where", "group") or value in (None, False, [], ""):
            continue
        raise QueryError(f"{_REFUSED.get(key, key.upper())} is not supported in a count query: {_show(text)} "
                         "(SELECT [columns,] COUNT(*) [FROM t] [WHERE condition] [GROUP BY columns])")
    src = tree.args.get("from_") or tree.args.get("from")
    if src is not None and not (isinstance(src.this, exp.Table) and isinstance(src.this.this, exp.Identifier)):
        raise QueryError(f"FROM takes one table name in a count query: {_show(text)}")
    group: list[str] = []
    g = tree.args.get("group")
    if g is not None:
        for key, value in g.args.items():
            if key != "expressions" and value not in (None, False, [], ""):
                raise QueryError(f"GROUP BY {key.upper()} is not supported: {_show(text)}")
        for gexp in g.expressions:
            if not isinstance(gexp, exp.Column):
                raise QueryError(f"GROUP BY takes column names, got {gexp.sql()!r} in {_show(text)}")
            if gexp.name in group:
                raise QueryError(f"GROUP BY names {gexp.name!r} twice in {_show(text)}")
            group.append(gexp.name)
    counts = 0
    for sel in tree.expressions:
        inner = sel.this if isinstance(sel, exp.Alias) else sel
        if isinstance(inner, exp.Count) and isinstance(inner.this, exp.Star) and not inner.args.get("distinct"):
            counts += 1
        elif isinstance(inner, exp.Column) and inner.name in group:
            continue
        elif isinstance(inner, exp.Column):
            raise QueryError(f"column {inner.name!r} is selected but not in GROUP BY: {_show(text)}")
        else:
            raise QueryError(f"only COUNT(*) (and the GROUP BY columns) can be selected, got {sel.sql()!r} in "
                             f"{_show(text)}")
    if counts != 1:
        raise QueryError(f"a count query selects COUNT(*) once, got {counts} in {_show(text)}")
    w = tree.args.get("where")
    condition: tuple = _condition(w.this, text, lists) if w is not None else ("true",)
    return CountStatement(condition, tuple(group), text)


# ------------------------------------------------------------------ compilation
def _atoms(node: tuple, out: list) -> None:
    if node[0] == "atom":
        out.append(node[1])
    elif node[0] in ("and", "or"):
        for c in node[1]:
            _atoms(c, out)
    elif node[0] == "not":
        _atoms(node[1], out)


def _evaluate(node: tuple, truth: list[np.ndarray], counter: list[int], n: int) -> np.ndarray:
    kind = node[0]
    if kind == "true":
        return np.ones(n, dtype=bool)
    if kind == "atom":
        v = truth[counter[0]]
        counter[0] += 1
        return v
    if kind == "not":
        return ~_evaluate(node[1], truth, counter, n)
    parts = [_evaluate(c, truth, counter, n) for c in node[1]]
    return np.logical_and.reduce(parts) if kind == "and" else np.logical_or.reduce(parts)


def compile_condition(condition: tuple, resolver: Resolver) -> list[dict[str, np.ndarray]]:
    """Disjoint conjunctive terms (column → boolean domain mask, unconstrained columns left out)
    whose union is the condition (module doc). An unsatisfiable condition gives no term."""
    atoms: list[Predicate] = []
    _atoms(condition, atoms)
    masks = [next(iter(resolver(Query((p,))).values())) for p in atoms]
    cols = list(dict.fromkeys(p.column for p in atoms))
    classes: dict[str, np.ndarray] = {}  # per column: class id of each domain code
    reps: dict[str, list[np.ndarray]] = {}  # per column, per class: the truth of the column's atoms
    for c in cols:
        idx = [i for i, p in enumerate(atoms) if p.column == c]
        sig = np.stack([masks[i] for i in idx], axis=1)  # (domain, atoms on c)
        uniq, inv = np.unique(sig, axis=0, return_inverse=True)
        classes[c], reps[c] = inv.ravel(), [uniq[:, k] for k in range(len(idx))]
    sizes = [len(reps[c][0]) for c in cols]
    total = int(np.prod(sizes, dtype=np.int64)) if cols else 1
    if total > MAX_COMBINATIONS:
        raise QueryError(f"the condition splits the domains into {total:,} combinations (at most {MAX_COMBINATIONS:,}); "
                         "simplify it")
    grid = np.indices(sizes).reshape(len(cols), -1) if cols else np.zeros((0, 1), dtype=np.int64)
    pos = {c: j for j, c in enumerate(cols)}
    seen: dict[str, int] = {}
    truth = []
    for p in atoms:
        k = seen.get(p.column, 0)
        seen[p.column] = k + 1
        truth.append(reps[p.column][k][grid[pos[p.column]]])
    sat = _evaluate(condition, truth, [0], grid.shape[1])
    # merge the satisfying combinations column by column: a term is one class set per column
    terms = {tuple(frozenset([int(x)]) for x in grid[:, j]) for j in np.flatnonzero(sat)}
    changed = True
    while changed and len(terms) > 1:
        changed = False
        for j in range(len(cols)):
            merged: dict[tuple, set] = {}
            for t in terms:
                merged.setdefault(t[:j] + t[j + 1:], set()).update(t[j])
            new = {k[:j] + (frozenset(v),) + k[j:] for k, v in merged.items()}
            if len(new) < len(terms):
                terms, changed = new, True
    out = []
    for t in sorted(terms, key=lambda t: tuple(sorted(s)[0] for s in t)):
        term = {}
        for c, s in zip(cols, t):
            if len(s) == sizes[pos[c]]:
                continue  # every class: the column is unconstrained
            term[c] = np.isin(classes[c], list(s))
        out.append(term)
    return out


def _predicate(col: str, mask: np.ndarray, labels: Sequence[str]) -> Predicate:
    idx = np.flatnonzero(mask)
    if len(idx) == 1:
        return Predicate(col, "eq", (labels[int(idx[0])],))
    return Predicate(col, "in", tuple(labels[int(i)] for i in idx))


@dataclass
class Expansion:
    """A statement expanded into conjunctive queries: ``queries`` (the workload), ``owner``
    (row of ``groups`` each query adds to) and ``groups`` (GROUP BY codes, one row per group;
    shape (n_groups, n_group_columns))."""

    queries: list[Query]
    owner: np.ndarray
    groups: np.ndarray
    group_by: tuple[str, ...]
    n_terms: int


def expand(statement: CountStatement, domains: Mapping[str, Sequence[str]],
           numeric: Mapping[str, np.ndarray | None] | None = None) -> Expansion:
    """One conjunctive query per (group, term); groups that no term can reach are left out."""
    for c in statement.columns:
        if c not in domains:
            raise QueryError(f"unknown attribute {c!r}; the release has {sorted(domains)}")
    resolver = Resolver(domains, numeric)
    terms = compile_condition(statement.condition, resolver)
    gb = statement.group_by
    if not gb:
        plain = [Query(tuple(_predicate(c, m, domains[c]) for c, m in t.items())) for t in terms]
        return Expansion(plain, np.zeros(len(plain), dtype=np.int64), np.zeros((1, 0), dtype=np.int64), gb, len(terms))
    dims = [len(domains[c]) for c in gb]
    n_groups = int(np.prod(dims, dtype=np.int64))
    if n_groups * max(len(terms), 1) > MAX_EXPANDED:
        raise QueryError(f"GROUP BY {', '.join(gb)} spans {n_groups:,} groups (at most {MAX_EXPANDED:,} queries in all)")
    grid = np.indices(dims).reshape(len(gb), -1)  # (n_group_cols, n_groups)
    labels = {c: list(domains[c]) for c in gb}
    queries: list[Query] = []
    owner: list[np.ndarray] = []
    for t in terms:
        # the groups this term reaches: every group column's value inside the term's mask
        ok = np.ones(n_groups, dtype=bool)
        for j, c in enumerate(gb):
            if c in t:
                ok &= t[c][grid[j]]
        gi = np.flatnonzero(ok)
        rest = tuple(_predicate(c, m, domains[c]) for c, m in t.items() if c not in gb)
        per_col = [[Predicate(c, "eq", (lab,)) for lab in labels[c]] for c in gb]
        cols_codes = grid[:, gi]
        queries.extend(Query(rest + tuple(per_col[j][int(v)] for j, v in enumerate(codes)))
                       for codes in cols_codes.T)
        owner.append(gi)
    own = np.concatenate(owner) if owner else np.zeros(0, dtype=np.int64)
    present = np.unique(own)
    remap = np.full(n_groups, -1, dtype=np.int64)
    remap[present] = np.arange(len(present))
    return Expansion(queries, remap[own], grid[:, present].T, gb, len(terms))


def _statements(sql) -> list[tuple[str, CountStatement | Query]]:
    if isinstance(sql, (str, Query)):
        sql = [sql]
    if not isinstance(sql, (list, tuple)):
        raise QueryError(f"a query is SQL text or a ppdp Query (or a list of them), got {type(sql).__name__}")
    out: list[tuple[str, CountStatement | Query]] = []
    for q in sql:
        if isinstance(q, Query):
            out.append((str(q), q))
        elif isinstance(q, CountStatement):
            out.append((q.text.strip(), q))
        elif isinstance(q, str):
            out.append((q.strip(), parse_statement(q)))
        else:
            raise QueryError(f"a query is SQL text or a ppdp Query, got {type(q).__name__}")
    return out


def _conjunction(node: tuple) -> list[Predicate] | None:
    """The atoms of a plain conjunction on distinct columns (None otherwise)."""
    out: list[Predicate] = []
    stack = [node]
    while stack:
        n = stack.pop()
        if n[0] == "atom":
            out.append(n[1])
        elif n[0] == "and":
            stack += reversed(n[1])
        elif n[0] != "true":
            return None
    cols = [p.column for p in out]
    return out if len(set(cols)) == len(cols) else None


def query_table(release, sql, estimator=None, source=None, level: float = 0.95):
    """Answer count statements on a release: a :class:`pandas.DataFrame` with one row per
    statement (one per group with GROUP BY): ``query`` (the text), the GROUP BY columns
    (labels), ``estimate``, ``se``, ``lower``, ``upper`` (the ``level`` interval) and, with a
    ``source`` table, ``exact``. ``sql``: a statement or a list of them (SQL text — a bare
    condition, ``WHERE …`` or ``SELECT … COUNT(*) … GROUP BY …`` — :class:`Query` objects or
    parsed :class:`CountStatement` objects).
    Every statement is expanded into conjunctive queries (module doc) and the whole expansion is
    answered with one ``release.estimate`` call; the interval method is in
    ``frame.attrs["method"]`` and what it promises in ``frame.attrs["kind"]`` (``Estimates.kind``:
    certain bounds of disjoint terms are summed). A group whose count is a sum of k > 1 disjoint terms gets the
    sum of the terms' standard errors (an upper bound whatever their correlation) and the
    normal interval around the summed estimate."""
    import pandas as pd
    from scipy import stats as sps

    from .workload import Workload, answer_exact

    stmts = _statements(sql)
    domains, numeric = release.domains, release.numeric
    queries: list[Query] = []
    owner_parts, n_rows, frames_meta = [], 0, []
    for text, st in stmts:
        if isinstance(st, Query):
            exp_ = Expansion([st], np.zeros(1, dtype=np.int64), np.zeros((1, 0), dtype=np.int64), (), 1)
        else:
            atoms = _conjunction(st.condition) if not st.group_by else None
            if atoms is not None:
                for p in atoms:
                    if p.column not in domains:
                        raise QueryError(f"unknown attribute {p.column!r}; the release has {sorted(domains)}")
                exp_ = Expansion([Query(tuple(atoms))], np.zeros(1, dtype=np.int64), np.zeros((1, 0), dtype=np.int64),
                                 (), 1)
            else:
                exp_ = expand(st, domains, numeric)
        queries.extend(exp_.queries)
        owner_parts.append(exp_.owner + n_rows)
        frames_meta.append((text, exp_))
        n_rows += len(exp_.groups)
    owner = np.concatenate(owner_parts) if owner_parts else np.zeros(0, dtype=np.int64)
    wl = Workload(queries)
    if queries:
        e = release.estimate(wl, estimator, level=level)
        est_q, se_q, lo_q, hi_q, method, kind = e.estimate, e.se, e.lower, e.upper, e.method, e.kind
    else:
        est_q = se_q = lo_q = hi_q = np.zeros(0)
        method, kind = "no query", "none"
    n_terms = np.bincount(owner, minlength=n_rows)
    est = np.bincount(owner, weights=est_q, minlength=n_rows)
    se = np.bincount(owner, weights=se_q, minlength=n_rows)
    z = float(sps.norm.ppf(0.5 + level / 2))
    single = n_terms == 1
    lower, upper = est - z * se, est + z * se
    first = np.full(n_rows, -1, dtype=np.int64)
    first[owner[::-1]] = np.arange(len(owner))[::-1]
    lower[single] = lo_q[first[single]]
    upper[single] = hi_q[first[single]]
    if kind == "certain":  # certain bounds of disjoint terms add up to certain bounds of the sum
        lower = np.bincount(owner, weights=lo_q, minlength=n_rows)
        upper = np.bincount(owner, weights=hi_q, minlength=n_rows)
    empty = n_terms == 0  # an unsatisfiable condition: the count is 0 for certain
    est[empty] = se[empty] = lower[empty] = upper[empty] = 0.0
    group_cols = list(dict.fromkeys(c for _, x in frames_meta for c in x.group_by))
    data: dict[str, list] = {"query": []}
    for c in group_cols:
        data[c] = []
    for text, x in frames_meta:
        k = len(x.groups)
        data["query"].extend([text] * k)
        for c in group_cols:
            if c in x.group_by:
                j = x.group_by.index(c)
                lab = domains[c]
                data[c].extend(lab[int(v)] for v in x.groups[:, j])
            else:
                data[c].extend([None] * k)
    frame = pd.DataFrame(data)
    frame["estimate"], frame["se"], frame["lower"], frame["upper"] = est, se, lower, upper
    if source is not None:
        exact_q = answer_exact(source, wl) if queries else np.zeros(0)
        frame["exact"] = np.bincount(owner, weights=exact_q, minlength=n_rows)
    frame.attrs["method"] = method + (("; groups summed over several disjoint terms: bounds = Σ bounds" if kind == "certain"
                                       else "; groups summed over several disjoint terms: se = Σ se (upper bound)")
                                      if (n_terms > 1).any() else "")
    frame.attrs["level"] = level
    frame.attrs["kind"] = kind
    return frame


def load_statements(path) -> list:
    """A workload file: JSON lines (``{"predicates": […]}`` / ``{"where": "…"}``, an optional
    ``{"workload": {…}}`` header — :meth:`Workload.load`) when its first non-blank character is
    ``{`` (or ``[``, refused there as not a query); otherwise SQL text: statements separated by ``;`` when the file holds one, else one
    statement per line; blank lines and lines starting with ``--`` are skipped."""
    from .workload import Workload

    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except UnicodeDecodeError:
        raise QueryError(f"workload {str(path)!r} is not UTF-8 text") from None
    except OSError as e:
        raise QueryError(f"cannot read workload {str(path)!r}: {e.strerror or e}") from None
    if text.lstrip()[:1] in ("{", "["):  # JSON (a JSON line is an object; anything else is refused there)
        return list(Workload.load(path))
    lines = [ln for ln in text.splitlines() if not ln.strip().startswith("--")]
    parts = "\n".join(lines).split(";") if ";" in text else lines
    out = [p.strip() for p in parts if p.strip()]
    if not out:
        raise QueryError(f"workload {str(path)!r} holds no statement")
    return out


def is_conjunctive(text: str) -> bool:
    """True when ``text`` is a plain conjunctive count query :func:`parse_where` reads."""
    try:
        parse_where(text)
    except QueryError:
        return False
    return True


__all__ = ["CountStatement", "Expansion", "parse_statement", "query_table", "load_statements", "compile_condition", "expand", "is_conjunctive",
           "MAX_COMBINATIONS"]

"""Parse the count-query subset of SQL into a :class:`Query` with sqlglot.

Accepted: a bare condition, ``WHERE condition``, or ``SELECT COUNT(*) [FROM t] [WHERE
condition]``, where a condition is ``a = v``, ``a IN (v, …)``, ``a BETWEEN lo AND hi`` and one-
or two-sided bounds with ``<``, ``<=``, ``>``, ``>=`` (merged into one range per column),
joined by ``AND`` (parentheses allowed). Everything else is a :class:`QueryError` that names
what was refused — OR, NOT, functions, and every clause the estimators cannot answer
(``GROUP BY``, ``HAVING``, ``ORDER BY``, ``LIMIT``, ``UNION``, joins, a second statement …):
a query is answered as written or not at all, never with part of it dropped.
"""

from __future__ import annotations

from typing import Any

import sqlglot
from sqlglot import exp

from ..errors import QueryError
from ..table import MISSING_LABEL
from .model import Predicate, Query

#: longest query text accepted (characters) and deepest bracket nesting
MAX_QUERY_CHARS = 100_000
MAX_NESTING = 64

#: SQL spelling of the Select arguments a count query may not carry
REFUSED_CLAUSES = {
    "group": "GROUP BY", "having": "HAVING", "order": "ORDER BY", "limit": "LIMIT", "offset": "OFFSET",
    "joins": "JOIN", "distinct": "DISTINCT", "with_": "WITH", "qualify": "QUALIFY", "windows": "WINDOW",
    "laterals": "LATERAL", "into": "INTO", "locks": "FOR UPDATE", "sample": "TABLESAMPLE", "sort": "SORT BY",
    "cluster": "CLUSTER BY", "distribute": "DISTRIBUTE BY", "connect": "CONNECT BY", "prewhere": "PREWHERE",
    "pivots": "PIVOT", "settings": "SETTINGS", "format": "FORMAT", "kind": "SELECT kind", "for_": "FOR",
    "options": "OPTION", "match": "MATCH_RECOGNIZE", "exclude": "EXCLUDE", "hint": "a hint",
    "operation_modifiers": "a SELECT modifier",
}


def _show(where: str) -> str:
    """A query quoted for a one-line message (long ones cut)."""
    return repr(where) if len(where) <= 80 else repr(where[:77]) + "…"


def _literal(node: Any, where: str) -> str:  # an exp.Expression (sqlglot ≥ 30 types operands as exp.Expr)
    if isinstance(node, exp.Literal):
        return node.this
    if isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal) and not node.this.is_string:
        return "-" + node.this.this
    if isinstance(node, exp.Column) and not node.table:  # bare identifiers are read as labels: sex = Male
        return node.name
    if isinstance(node, exp.Boolean):
        return "True" if node.this else "False"
    raise QueryError(f"expected a literal value, got {node.sql()!r} in {_show(where)}")


def _column(node: Any, where: str) -> str:  # an exp.Expression
    if isinstance(node, exp.Column) and not node.table:
        return node.name
    raise QueryError(f"expected a column name, got {node.sql()!r} in {_show(where)}")


def _check_depth(text: str, where: str) -> None:
    depth = top = 0
    for ch in text:
        if ch in "([{":
            depth += 1
            top = max(top, depth)
        elif ch in ")]}":
            depth -= 1
    if top > MAX_NESTING:
        raise QueryError(f"the query nests brackets {top} deep (at most {MAX_NESTING}): {_show(where)}")


def _statement(text: str, where: str) -> exp.Select:
    """The one SELECT statement a query is; every clause besides FROM t and WHERE refused."""
    try:
        trees = [t for t in sqlglot.parse(text) if t is not None]
    except sqlglot.errors.SqlglotError as e:
        msg = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise QueryError(f"cannot parse query {_show(where)}: {msg}") from None
    except RecursionError:
        raise QueryError(f"the query nests too deeply: {_show(where)}") from None
    except Exception as e:  # a parser crash on odd input is still bad input, not a traceback
        raise QueryError(f"cannot parse query {_show(where)}: {type(e).__name__}") from None
    if len(trees) != 1:
        raise QueryError(f"one query at a time: {_show(where)} holds {len(trees)} statements")
    tree = trees[0]
    if isinstance(tree, (exp.Union, exp.Intersect, exp.Except)):
        kind = type(tree).__name__.upper()
        raise QueryError(f"{kind} is not supported (one count query at a time): {_show(where)}")
    if not isinstance(tree, exp.Select):
        raise QueryError(f"not a count query: {_show(where)} (write a condition, or SELECT COUNT(*) … WHERE …)")
    for key, value in tree.args.items():
        if key in ("expressions", "from_", "from", "where") or value in (None, False, [], ""):
            continue
        clause = REFUSED_CLAUSES.get(key, key.upper())
        raise QueryError(f"{clause} is not supported in a count query: {_show(where)} (only SELECT COUNT(*) [FROM t] "
                         "WHERE condition, or the bare condition)")
    sel = tree.expressions
    if len(sel) != 1 or not isinstance(sel[0], exp.Count) or not isinstance(sel[0].this, exp.Star) \
            or sel[0].args.get("distinct"):
        shown = ", ".join(e.sql() for e in sel)
        raise QueryError(f"only SELECT COUNT(*) is supported, got SELECT {shown} in {_show(where)}")
    src = tree.args.get("from_") or tree.args.get("from")
    if src is not None and not (isinstance(src.this, exp.Table) and isinstance(src.this.this, exp.Identifier)
                                and not src.this.args.get("joins")):
        raise QueryError(f"FROM takes one table name in a count query: {_show(where)}")
    return tree


def _conjuncts(node: exp.Expression, where: str) -> list[exp.Expression]:
    """The AND-ed conditions, through parentheses."""
    out, stack = [], [node]
    while stack:
        c = stack.pop()
        while isinstance(c, exp.Paren):
            c = c.this
        if isinstance(c, exp.And):
            stack += [c.expression, c.this]
        elif isinstance(c, exp.Boolean) and c.this:  # TRUE: the empty conjunction
            continue
        else:
            out.append(c)
    return out


def parse_where(where: str) -> Query:
    """A count query's text → :class:`Query` (see the module doc for what is accepted)."""
    if not isinstance(where, str):
        raise QueryError(f"a query is a string (a WHERE condition), got {type(where).__name__}")
    if len(where) > MAX_QUERY_CHARS:
        raise QueryError(f"the query is {len(where):,} characters long (at most {MAX_QUERY_CHARS:,})")
    if "\x00" in where:
        raise QueryError("the query holds a NUL character")
    text = where.strip()
    if not text:
        return Query(())
    _check_depth(text, where)
    head = text.split(None, 1)[0].upper()
    if head == "SELECT" or head.startswith("SELECT(") or head == "WITH":
        tree = _statement(text, where)
    else:
        body = text[len("WHERE"):] if head == "WHERE" else text
        if not body.strip():
            raise QueryError(f"WHERE without a condition: {_show(where)}")
        tree = _statement(f"SELECT COUNT(*) WHERE {body}", where)
    cond = tree.args.get("where")
    if cond is None:
        return Query(())
    preds: dict[str, Predicate] = {}
    bounds: dict[str, list] = {}
    first: dict[str, int] = {}
    for i, c in enumerate(_conjuncts(cond.this, where)):
        for node in (c.this, getattr(c, "expression", None)):
            if isinstance(node, exp.Column):
                first.setdefault(node.name, i)
                break
        if isinstance(c, exp.EQ):
            col = _column(c.left, where)
            preds[col] = _merge(preds.get(col), Predicate(col, "eq", (_literal(c.right, where),)), where)
        elif isinstance(c, exp.Is) and isinstance(c.expression, exp.Null):  # NULL: the missing label
            col = _column(c.this, where)
            preds[col] = _merge(preds.get(col), Predicate(col, "eq", (MISSING_LABEL,)), where)
        elif isinstance(c, exp.In):
            col = _column(c.this, where)
            if any(c.args.get(k) is not None for k in ("query", "unnest", "field")):
                raise QueryError(f"IN takes a list of values, got {c.sql()!r}")
            vals = tuple(_literal(v, where) for v in c.expressions)
            if not vals:
                raise QueryError(f"empty IN list in {_show(where)}")
            preds[col] = _merge(preds.get(col), Predicate(col, "in", vals), where)
        elif isinstance(c, exp.Between):
            col = _column(c.this, where)
            if c.args.get("symmetric"):
                raise QueryError(f"BETWEEN SYMMETRIC is not supported: {c.sql()!r}")
            preds[col] = _merge(
                preds.get(col), Predicate(col, "between", low=_literal(c.args["low"], where), high=_literal(c.args["high"], where)), where
            )
        elif isinstance(c, (exp.GTE, exp.LTE, exp.GT, exp.LT)):
            left_is_col = isinstance(c.left, exp.Column)
            col = _column(c.left if left_is_col else c.right, where)
            val = _literal(c.right if left_is_col else c.left, where)
            lower = isinstance(c, (exp.GTE, exp.GT)) == left_is_col
            b = bounds.setdefault(col, [None, False, None, False])
            side = 0 if lower else 2
            if b[side] is not None:
                raise QueryError(f"column {col!r} has two {'lower' if lower else 'upper'} bounds in {_show(where)}")
            b[side], b[side + 1] = val, isinstance(c, (exp.GT, exp.LT))
        else:
            raise QueryError(
                f"unsupported condition {c.sql()!r}: use =, IN (…), BETWEEN … AND …, <, <=, > or >= joined by AND"
            )
    for col, (lo, lo_open, hi, hi_open) in bounds.items():
        preds[col] = _merge(preds.get(col), Predicate(col, "between", low=lo, high=hi, low_open=lo_open,
                                                      high_open=hi_open), where)
    # one predicate per column, in the order the columns first appear in the text
    return Query(tuple(preds[c] for c in sorted(preds, key=first.__getitem__)))


def _merge(old, new, where):
    if old is not None:
        raise QueryError(f"column {new.column!r} appears twice in {_show(where)}")
    return new

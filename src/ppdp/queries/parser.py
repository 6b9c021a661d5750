"""Parse the WHERE-clause subset of SQL into a :class:`Query` with sqlglot.

Accepted: ``a = v``, ``a IN (v, …)``, ``a BETWEEN lo AND hi``, and one- or two-sided bounds
with ``<``, ``<=``, ``>``, ``>=`` (merged into one range per column), joined by ``AND``. Anything else (OR, NOT, functions)
is a :class:`QueryError`.
"""

from __future__ import annotations

from typing import Any

import sqlglot
from sqlglot import exp

from ..errors import QueryError
from .model import Predicate, Query


def _literal(node: Any, where: str) -> str:  # an exp.Expression (sqlglot ≥ 30 types operands as exp.Expr)
    if isinstance(node, exp.Literal):
        return node.this
    if isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal):
        return "-" + node.this.this
    if isinstance(node, exp.Column):  # bare identifiers are read as labels: sex = Male
        return node.name
    if isinstance(node, exp.Boolean):
        return "True" if node.this else "False"
    raise QueryError(f"expected a literal value, got {node.sql()!r} in {where!r}")


def _column(node: Any, where: str) -> str:  # an exp.Expression
    if isinstance(node, exp.Column):
        return node.name
    raise QueryError(f"expected a column name, got {node.sql()!r} in {where!r}")


def parse_where(where: str) -> Query:
    text = where.strip()
    if text.upper().startswith("WHERE "):
        text = text[6:]
    if not text:
        return Query(())
    try:
        tree = sqlglot.parse_one(f"SELECT 1 WHERE {text}")
    except sqlglot.errors.ParseError as e:
        raise QueryError(f"cannot parse WHERE clause {where!r}: {str(e).splitlines()[0]}") from None
    cond = tree.args["where"].this
    conjuncts = list(cond.flatten()) if isinstance(cond, exp.And) else [cond]
    preds: dict[str, Predicate] = {}
    bounds: dict[str, list] = {}
    for c in conjuncts:
        while isinstance(c, exp.Paren):
            c = c.this
        if isinstance(c, exp.EQ):
            col = _column(c.left, where)
            preds[col] = _merge(preds.get(col), Predicate(col, "eq", (_literal(c.right, where),)), where)
        elif isinstance(c, exp.In):
            col = _column(c.this, where)
            vals = tuple(_literal(v, where) for v in c.expressions)
            if not vals:
                raise QueryError(f"empty IN list in {where!r}")
            preds[col] = _merge(preds.get(col), Predicate(col, "in", vals), where)
        elif isinstance(c, exp.Between):
            col = _column(c.this, where)
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
                raise QueryError(f"column {col!r} has two {'lower' if lower else 'upper'} bounds in {where!r}")
            b[side], b[side + 1] = val, isinstance(c, (exp.GT, exp.LT))
        else:
            raise QueryError(
                f"unsupported condition {c.sql()!r}: use =, IN (…), BETWEEN … AND …, <, <=, > or >= joined by AND"
            )
    for col, (lo, lo_open, hi, hi_open) in bounds.items():
        preds[col] = _merge(preds.get(col), Predicate(col, "between", low=lo, high=hi, low_open=lo_open,
                                                      high_open=hi_open), where)
    return Query(tuple(preds.values()))


def _merge(old, new, where):
    if old is not None:
        raise QueryError(f"column {new.column!r} appears twice in {where!r}")
    return new

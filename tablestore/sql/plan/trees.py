"""Query trees built from parts without parsing: quoted names, columns, relations and conjuncts.

A row-level statement (DELETE, UPDATE, MERGE) is parsed once; its planning builds the Spark
query it runs from the clauses' trees and these parts, and hands the tree to the planner
(:meth:`~tablestore.sql.plan.planner.QueryPlanner.dataframe`), so no SQL text is read twice.
sqlglot's builder helpers (``exp.select("a")``, ``Select.join(..., join_type=...)``,
``Select.with_``) parse the strings they are given; these functions take names and trees only.
"""

from __future__ import annotations

from sqlglot import exp


def identifier(name: str) -> exp.Identifier:
    """``name`` as a quoted identifier (any character allowed)."""
    return exp.Identifier(this=name, quoted=True)


def column(name: str, table: str | None = None) -> exp.Column:
    """The column ``table.name`` (or ``name``), quoted."""
    return exp.Column(this=identifier(name), table=identifier(table) if table is not None else None)


def aliased(node: exp.Expr, name: str) -> exp.Alias:
    """``node AS name``."""
    return exp.Alias(this=node, alias=identifier(name))


def number(value: int) -> exp.Expr:
    return exp.Literal.number(value)


def table_name(parts: tuple[str, ...]) -> exp.Table:
    """The table ``a.b.c`` (a bare name, a database's table, a catalog's; deeper namespaces as a dotted name)."""
    names = [identifier(p) for p in parts]
    if len(names) > 3:
        return exp.Table(this=exp.Dot.build(names[2:]), db=names[1], catalog=names[0])
    keys = ("this", "db", "catalog")
    return exp.Table(**dict(zip(keys, reversed(names), strict=False)))


def relation(node: exp.Expr, alias: str) -> exp.Expr:
    """A copy of a table or subquery ``node`` under ``alias`` (``node AS alias``)."""
    out = node.copy()
    out.set("alias", exp.TableAlias(this=identifier(alias)))
    return out


def subquery(select: exp.Expr) -> exp.Subquery:
    """``(select)``."""
    return exp.Subquery(this=select)


def select(*expressions: exp.Expr, from_: exp.Expr, where: exp.Expr | None = None,
           joins: tuple[exp.Join, ...] = ()) -> exp.Select:
    """``SELECT expressions FROM from_ [joins] [WHERE where]``."""
    tree = exp.Select(expressions=list(expressions), from_=exp.From(this=from_))
    if joins:
        tree.set("joins", list(joins))
    if where is not None:
        tree.set("where", exp.Where(this=where))
    return tree


def with_cte(query: exp.Select, name: str, body: exp.Expr) -> exp.Select:
    """``WITH name AS (body) query``."""
    query.set("with_", exp.With(expressions=[exp.CTE(this=body, alias=exp.TableAlias(this=identifier(name)))]))
    return query


def conjuncts(tree: exp.Expr) -> list[exp.Expr]:
    """The top-level ANDs of a condition (the condition itself when it is no AND)."""
    return list(tree.flatten()) if isinstance(tree, exp.And) else [tree]


def is_not_null(node: exp.Expr) -> exp.Expr:
    return exp.Not(this=exp.Is(this=node, expression=exp.Null()))


def and_(left: exp.Expr, right: exp.Expr) -> exp.And:
    """``left AND (right)``: the right side is parenthesised, as its text would be."""
    return exp.And(this=left, expression=exp.Paren(this=right))


def not_(node: exp.Expr) -> exp.Not:
    """``NOT (node)``."""
    return exp.Not(this=exp.Paren(this=node))


def case(whens: list[tuple[exp.Expr, exp.Expr]], default: exp.Expr | None = None) -> exp.Case:
    """``CASE WHEN c THEN v ... [ELSE default] END``."""
    tree = exp.Case(ifs=[exp.If(this=c, true=v) for c, v in whens])
    if default is not None:
        tree.set("default", default)
    return tree


def cast_null(type_name: str) -> exp.Cast:
    """``CAST(NULL AS type)``, the type named as in sqlglot's ``DataType.Type`` (``TEXT``: Spark's STRING)."""
    return exp.Cast(this=exp.Null(), to=exp.DataType(this=exp.DataType.Type[type_name]))

"""Parsing of row-level DML (issue 6): DELETE, UPDATE and MERGE, in Spark SQL syntax.

    DELETE FROM t [[AS] alias] [WHERE cond]
    UPDATE t [[AS] alias] SET c = expr [, ...] [WHERE cond]
    MERGE INTO t [[AS] alias] USING (source_table | (query)) [[AS] alias] ON cond
      WHEN MATCHED [AND cond] THEN UPDATE SET c = expr [, ...] | UPDATE SET * | DELETE
      WHEN NOT MATCHED [AND cond] THEN INSERT (c, ...) VALUES (expr, ...) | INSERT *

The statement header (keyword and target name) is read with the shared cursor, so a mistake
there points at its token; the rest is parsed by sqlglot (Spark dialect), once, from the tokens
the script was lexed into. Conditions, values and the MERGE source are kept as the trees of
that parse: planning (:mod:`tablestore.sql.run.row_level`) builds them into its queries and
turns plain filters into table expressions without reading any SQL text again.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp
from sqlglot.errors import ParseError as SqlglotParseError

from tablestore.errors import ParseError
from tablestore.sql.parse import statements as st
from tablestore.sql.parse.tokens import Cursor, parse_tokens


def _tree(c: Cursor, kind: type[exp.Expr]) -> exp.Expr:
    # sqlglot parses the whole statement from the tokens the script was lexed into once.
    try:
        tree = parse_tokens(c.sql, c.tokens)
    except SqlglotParseError as e:
        err = e.errors[0] if e.errors else {}
        line = err.get("line")
        raise ParseError(f"syntax error: {err.get('description', str(e))}",
                         (line + c.line_offset) if line is not None else None, err.get("col"), c.sql) from None
    if not isinstance(tree, kind):
        raise c.error(f"cannot parse this as a {kind.__name__.upper()} statement")
    c.pos = len(c.tokens)
    return tree


def _alias(table: exp.Expr) -> str | None:
    alias = table.args.get("alias")
    return alias.name if alias is not None and alias.name else None


def _target(c: Cursor, *keywords: str) -> st.Name:
    for word in keywords:
        c.expect(word)
    return c.qualified_name("a table name")


def _assignments(items: list[exp.Expr], c: Cursor) -> tuple[tuple[str, exp.Expr], ...]:
    out = []
    for item in items:
        if not isinstance(item, exp.EQ) or not isinstance(item.this, exp.Column):
            raise c.error(f"expected column = value in SET but found {item.sql(dialect='spark')!r}")
        out.append((item.this.name, item.expression))
    return tuple(out)


def _delete(c: Cursor) -> st.Statement:
    name = _target(c, "DELETE", "FROM")
    tree = _tree(c, exp.Delete)
    where = tree.args.get("where")
    return st.DeleteFrom(c.sql, name, _alias(tree.this), where.this if where is not None else None)


def _update(c: Cursor) -> st.Statement:
    name = _target(c, "UPDATE")
    tree = _tree(c, exp.Update)
    assignments = _assignments(list(tree.expressions), c)
    if not assignments:
        raise c.error("UPDATE needs SET column = value")
    where = tree.args.get("where")
    return st.UpdateTable(c.sql, name, assignments, _alias(tree.this), where.this if where is not None else None)


def _when(when: exp.Expr, c: Cursor) -> st.MergeClause:
    if when.args.get("source"):
        raise c.error("WHEN NOT MATCHED BY SOURCE is not supported; use WHEN MATCHED or WHEN NOT MATCHED")
    matched = bool(when.args.get("matched"))
    condition = when.args.get("condition")
    then = when.args.get("then")
    if isinstance(then, exp.Var) and then.name.upper() == "DELETE":
        if not matched:
            raise c.error("WHEN NOT MATCHED can only INSERT")
        return st.MergeClause(True, "delete", condition)
    if isinstance(then, exp.Update):
        if not matched:
            raise c.error("WHEN NOT MATCHED can only INSERT")
        items = list(then.expressions)
        if len(items) == 1 and isinstance(items[0], exp.Star):
            return st.MergeClause(True, "update", condition, None)
        return st.MergeClause(True, "update", condition, _assignments(items, c))
    if isinstance(then, exp.Insert):
        if matched:
            raise c.error("WHEN MATCHED can only UPDATE or DELETE")
        if isinstance(then.this, exp.Star):
            return st.MergeClause(False, "insert", condition)
        columns = tuple(col.name for col in then.this.expressions) if isinstance(then.this, exp.Tuple) else None
        values_node = then.expression
        values = tuple(values_node.expressions) if isinstance(values_node, exp.Tuple) else None
        if values is None:
            raise c.error("expected INSERT (columns) VALUES (values) or INSERT *")
        if columns is not None and len(columns) != len(values):
            raise c.error(f"INSERT names {len(columns)} column(s) but gives {len(values)} value(s)")
        return st.MergeClause(False, "insert", condition, None, columns, values)
    raise c.error(f"unsupported MERGE action {then.sql(dialect='spark') if then is not None else None!r}")


def _merge(c: Cursor) -> st.Statement:
    name = _target(c, "MERGE", "INTO")
    tree = _tree(c, exp.Merge)
    using = tree.args.get("using")
    if using is None or tree.args.get("on") is None:
        raise c.error("MERGE needs USING source ON condition")
    source_alias = _alias(using)
    source = using.copy()
    source.set("alias", None)
    whens = tree.args.get("whens")
    clauses = tuple(_when(w, c) for w in (whens.expressions if whens is not None else []))
    if not clauses:
        raise c.error("MERGE needs at least one WHEN MATCHED or WHEN NOT MATCHED clause")
    return st.MergeInto(c.sql, name, source, tree.args["on"], clauses, _alias(tree.this), source_alias)


STATEMENT_PARSERS: dict[str, Callable[[Cursor], st.Statement]] = {
    "DELETE": _delete,
    "UPDATE": _update,
    "MERGE": _merge,
}

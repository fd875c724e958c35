"""The row lineage metadata columns in queries: ``SELECT _row_id, _last_updated_sequence_number FROM t``.

As in Iceberg's Spark integration, the two columns of a format v3 table (see
:mod:`tablestore.spec.schemas.row_lineage`) are hidden: selectable by name, never part of ``*``. A
query that names one reads its tables through the ``tablestore`` source with the
``row-lineage`` option (the columns appended), and each ``*`` or ``t.*`` over such a table is
spelled out as the table's own columns, so the hidden ones stay out of it.
"""

from __future__ import annotations

from sqlglot import exp

from tablestore.spec.schemas.row_lineage import ROW_LINEAGE_BY_NAME

LINEAGE_OPTION = "row-lineage"


def references_row_lineage(tree: exp.Expression) -> bool:
    """Whether the query names a row lineage column anywhere (a projection, filter, join...)."""
    return any(c.name.lower() in ROW_LINEAGE_BY_NAME for c in tree.find_all(exp.Column)
               if isinstance(c.this, exp.Identifier))


def hide_from_stars(tree: exp.Expression, columns_by_view: dict[str, list[str]]) -> None:
    """Spell out every ``*`` and ``alias.*`` over a view in ``columns_by_view`` (view name →
    the table's own columns), so that it leaves out the lineage columns that view also has."""
    for select in list(tree.find_all(exp.Select)):
        sources = _sources(select)
        hidden = {alias: columns_by_view[view] for alias, view in sources if view in columns_by_view}
        if not hidden:
            continue
        out: list[exp.Expression] = []
        for e in select.expressions:
            if isinstance(e, exp.Star):
                aliases = [alias for alias, _ in sources if alias is not None]
                if len(aliases) < len(sources):
                    out.append(e)  # a source without a name cannot be spelled out; leave it as it is
                    continue
                for alias in aliases:
                    out.extend(_columns(alias, hidden[alias]) if alias in hidden else [_star(alias)])
            elif isinstance(e, exp.Column) and isinstance(e.this, exp.Star) and e.table in hidden:
                out.extend(_columns(e.table, hidden[e.table]))
            else:
                out.append(e)
        select.set("expressions", out)


def _sources(select: exp.Select) -> list[tuple[str | None, str | None]]:
    """(alias, view name if a table) of each relation in the select's FROM and JOINs."""
    from_ = select.args.get("from_") or select.args.get("from")
    relations = [from_.this] if from_ is not None else []
    relations += [j.this for j in select.args.get("joins") or []]
    return [(r.alias_or_name or None, r.name if isinstance(r, exp.Table) else None) for r in relations]


def _columns(alias: str, names: list[str]) -> list[exp.Expression]:
    return [exp.column(exp.to_identifier(n, quoted=True), table=exp.to_identifier(alias, quoted=True))
            for n in names]


def _star(alias: str) -> exp.Expression:
    return exp.Column(this=exp.Star(), table=exp.to_identifier(alias, quoted=True))

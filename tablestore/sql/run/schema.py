"""Execution of schema evolution (issue 4): ALTER TABLE ... ADD/DROP/RENAME/ALTER COLUMN, identifier fields.

Every action of one statement goes into one :class:`~tablestore.table.update.schema.UpdateSchema`,
so the statement commits once or not at all. Names are matched ignoring case, as Spark does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tablestore.spec.schemas.types import parse_sql_type
from tablestore.sql.parse.statements import (
    AddColumnAction,
    AlterColumnAction,
    AlterSchema,
    DropColumnAction,
    IdentifierFieldsAction,
    RenameColumnAction,
)
from tablestore.sql.result import StatementResult

if TYPE_CHECKING:
    from tablestore.sql.context import SessionContext
    from tablestore.table.update.schema import UpdateSchema


def alter_schema(context: SessionContext, s: AlterSchema) -> StatementResult:
    table = context.table(s.name)
    update = table.update_schema(case_sensitive=False)
    for action in s.actions:
        _apply(update, action)
    update.commit()
    return StatementResult()


def _apply(u: UpdateSchema, action: Any) -> None:
    if isinstance(action, AddColumnAction):
        u.add_column(tuple(action.column), parse_sql_type(action.type_text), doc=action.comment,
                     required=action.not_null, first=action.first, after=action.after, default=action.default)
    elif isinstance(action, DropColumnAction):
        name = ".".join(action.column)
        if action.if_exists and u.apply().find_field_id(name, case_sensitive=False) is None:
            return
        u.drop_column(name)
    elif isinstance(action, RenameColumnAction):
        u.rename_column(".".join(action.column), action.new_name)
    elif isinstance(action, AlterColumnAction):
        name = ".".join(action.column)
        if action.type_text is not None:
            u.widen(name, parse_sql_type(action.type_text))
        if action.comment is not None:
            u.update_doc(name, action.comment)
        if action.drop_not_null:
            u.make_optional(name)
        if action.set_not_null:
            u.update_column(name, required=True)
        if action.set_default:
            u.set_default(name, action.default)
        if action.first:
            u.move_first(name)
        elif action.after is not None:
            u.move_after(name, action.after)
    elif isinstance(action, IdentifierFieldsAction):
        names = [".".join(c) for c in action.columns]
        if action.drop:
            u.drop_identifier_fields(*names)
        else:
            u.set_identifier_fields(*names)

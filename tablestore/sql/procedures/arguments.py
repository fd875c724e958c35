"""The arguments of a procedure call: SQL literals read into Python values, and the checks the
procedure families share (a table, an integer, a point in time)."""

from __future__ import annotations

import datetime
import decimal
from typing import TYPE_CHECKING, Any

from tablestore.errors import ValidationError
from tablestore.option_values import aware_datetime, epoch_ms

if TYPE_CHECKING:
    from tablestore.catalog.base import Catalog
    from tablestore.table import Table


def table_argument(catalog: Catalog, args: dict[str, Any]) -> Table:
    """The table the ``table`` argument names, loaded from ``catalog``."""
    name = args["table"]
    if not isinstance(name, str):
        raise ValidationError(f"table must be a string like 'db.t', got {name!r}")
    return catalog.load_table(name)


def int_argument(value: Any, name: str) -> int | None:
    """An integer argument, None when not given."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationError(f"{name} must be an integer, got {value!r}")
    return value


def time_argument(value: Any, name: str) -> int | None:
    """A point-in-time argument (a TIMESTAMP or DATE literal, an ISO string, epoch milliseconds)
    in epoch milliseconds, None when not given."""
    if value is None:
        return None
    if not isinstance(value, int | str | datetime.datetime | datetime.date) or isinstance(value, bool):
        raise ValidationError(f"{name} must be a TIMESTAMP, got {value!r}")
    return epoch_ms(value, name)


def literal_value(sql: str) -> Any:
    """The Python value of one SQL literal argument (raises ValidationError otherwise)."""
    import sqlglot
    from sqlglot import exp

    try:
        node = sqlglot.parse_one(sql, read="spark")
    except sqlglot.errors.ParseError as e:
        raise ValidationError(f"cannot read the argument {sql!r}: {e}") from None
    return _value(node, sql, exp)


def _value(node: Any, sql: str, exp: Any) -> Any:
    if isinstance(node, exp.Literal):
        if node.is_string:
            return node.this
        text = node.this
        try:
            return int(text)
        except ValueError:
            return decimal.Decimal(text) if "." in text and "e" not in text.lower() else float(text)
    if isinstance(node, exp.Boolean):
        return bool(node.this)
    if isinstance(node, exp.Null):
        return None
    if isinstance(node, exp.Neg):
        return -_value(node.this, sql, exp)
    if isinstance(node, exp.Paren):
        return _value(node.this, sql, exp)
    if isinstance(node, exp.Cast) and isinstance(node.this, exp.Literal):
        target = node.to.this.name.upper() if hasattr(node.to.this, "name") else str(node.to).upper()
        text = node.this.this
        if target.startswith("TIMESTAMP"):
            return aware_datetime(text)
        if target == "DATE":
            return datetime.date.fromisoformat(text)
        return text
    if isinstance(node, exp.Array):
        return [_value(e, sql, exp) for e in node.expressions]
    if isinstance(node, (exp.Map, exp.VarMap)):
        keys, values = node.args.get("keys"), node.args.get("values")
        ks = [_value(e, sql, exp) for e in (keys.expressions if keys is not None else [])]
        vs = [_value(e, sql, exp) for e in (values.expressions if values is not None else [])]
        return dict(zip(ks, vs, strict=True))
    if isinstance(node, exp.Anonymous) and node.name.lower() == "map":
        items = [_value(e, sql, exp) for e in node.expressions]
        return dict(zip(items[::2], items[1::2], strict=True))
    raise ValidationError(f"procedure arguments must be literals; {sql!r} is not one")


__all__ = ["int_argument", "literal_value", "table_argument", "time_argument"]

"""Values as people write them in options, properties, settings and procedure arguments: points
in time and true/false. One parser for each, so ``as-of-timestamp``, ``older_than`` and
``rollback_to_timestamp`` accept the same spellings, and every flag the same words.

A leaf below every layer that reads such values (io's storage properties, the table's
properties, the Spark options, the SQL procedures, the service's settings)."""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any

from tablestore.errors import ValidationError

PointInTime = int | float | str | datetime.datetime | datetime.date

TRUE_WORDS = frozenset({"true", "1", "yes"})
FALSE_WORDS = frozenset({"false", "0", "no"})


def aware_datetime(text: str, what: str = "timestamp") -> datetime.datetime:
    """An ISO-8601 time (``T`` or a space between date and time) as a zoned datetime: UTC when
    it names no zone, as Spark's session time zone defaults. ``what`` names it in the error."""
    try:
        value = datetime.datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValidationError(f"{what} {text!r} is not an ISO-8601 timestamp") from None
    return value if value.tzinfo is not None else value.replace(tzinfo=datetime.UTC)


def epoch_ms(value: PointInTime, what: str = "timestamp") -> int:
    """``value`` in epoch milliseconds, Iceberg's unit for snapshot times: a number, or a string of
    digits, is taken as epoch ms; an ISO-8601 string or a datetime without a zone as UTC; a date
    as its midnight UTC. ``what`` names the argument in the error."""
    if isinstance(value, bool):  # a bool is an int to Python, never a point in time
        raise ValidationError(f"{what} must be a datetime, an ISO string or epoch milliseconds")
    if isinstance(value, int | float):
        return int(value)
    if isinstance(value, str):
        if value.strip().lstrip("-").isdigit():
            return int(value.strip())
        value = aware_datetime(value, what)
    if isinstance(value, datetime.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=datetime.UTC)
        return int(value.timestamp() * 1000)
    return int(datetime.datetime(value.year, value.month, value.day, tzinfo=datetime.UTC).timestamp() * 1000)


def truth(value: Any, key: str) -> bool:
    """A true/false value: a bool, or ``true``/``false``, ``1``/``0``, ``yes``/``no`` in any case.
    Anything else is an error naming ``key`` (how the caller names the setting, e.g. ``table
    property write.wap.enabled``), never a silent False."""
    if isinstance(value, bool):
        return value
    lowered = str(value).strip().lower()
    if lowered in TRUE_WORDS:
        return True
    if lowered in FALSE_WORDS:
        return False
    raise ValidationError(f"{key} must be true or false, got {value!r}")


def flag(values: Mapping[str, Any], key: str, default: bool = False, kind: str = "property") -> bool:
    """The flag ``key`` of ``values`` (properties, options), ``default`` when absent. ``kind``
    says what the mapping holds, for the error: ``table property``, ``option``..."""
    raw = values.get(key)
    if raw is None:
        return default
    return truth(raw, f"{kind} {key}")

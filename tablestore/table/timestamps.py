"""Points in time as the table API accepts them, turned into Iceberg's epoch milliseconds."""

from __future__ import annotations

import datetime

from tablestore.errors import ValidationError

PointInTime = int | float | str | datetime.datetime | datetime.date


def epoch_ms(value: PointInTime, what: str = "timestamp") -> int:
    """``value`` in epoch milliseconds: a number is taken as epoch ms, an ISO-8601 string or a
    datetime without a zone as UTC (as Spark's session time zone defaults), a date as its
    midnight UTC. ``what`` names the argument in the error."""
    if isinstance(value, bool):  # a bool is an int to Python, never a point in time
        raise ValidationError(f"{what} must be a datetime, an ISO string or epoch milliseconds")
    if isinstance(value, int | float):
        return int(value)
    if isinstance(value, str):
        try:
            value = datetime.datetime.fromisoformat(value)
        except ValueError:
            raise ValidationError(f"{what} {value!r} is not an ISO-8601 timestamp") from None
    if isinstance(value, datetime.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=datetime.UTC)
        return int(value.timestamp() * 1000)
    return int(datetime.datetime(value.year, value.month, value.day, tzinfo=datetime.UTC).timestamp() * 1000)

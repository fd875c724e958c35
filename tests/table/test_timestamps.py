"""Every point in time the table API accepts reads as the same epoch milliseconds."""

from __future__ import annotations

import datetime

import pytest

from tablestore.errors import ValidationError
from tablestore.table.timestamps import epoch_ms

NOON_MS = 1_704_110_400_000  # 2024-01-01T12:00:00Z


def test_numbers_strings_datetimes_and_dates_agree() -> None:
    assert epoch_ms(NOON_MS) == NOON_MS
    assert epoch_ms(float(NOON_MS)) == NOON_MS
    assert epoch_ms("2024-01-01T12:00:00") == NOON_MS  # no zone: UTC
    assert epoch_ms("2024-01-01T13:00:00+01:00") == NOON_MS
    assert epoch_ms(datetime.datetime(2024, 1, 1, 12)) == NOON_MS
    assert epoch_ms(datetime.date(2024, 1, 1)) == NOON_MS - 12 * 3600 * 1000


def test_refusals_name_the_argument() -> None:
    with pytest.raises(ValidationError, match="older_than 'yesterday' is not an ISO-8601 timestamp"):
        epoch_ms("yesterday", "older_than")
    with pytest.raises(ValidationError, match="as_of_timestamp must be a datetime"):
        epoch_ms(True, "as_of_timestamp")

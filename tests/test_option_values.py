"""One parser per kind of value: every point in time the API, the options and the procedures
accept reads as the same epoch milliseconds, and every flag takes the same words."""

from __future__ import annotations

import datetime

import pytest

from tablestore.errors import ValidationError
from tablestore.option_values import aware_datetime, epoch_ms, flag, truth

NOON_MS = 1_704_110_400_000  # 2024-01-01T12:00:00Z


def test_numbers_strings_datetimes_and_dates_agree() -> None:
    assert epoch_ms(NOON_MS) == NOON_MS
    assert epoch_ms(float(NOON_MS)) == NOON_MS
    assert epoch_ms("2024-01-01T12:00:00") == NOON_MS  # no zone: UTC
    assert epoch_ms("2024-01-01T13:00:00+01:00") == NOON_MS
    assert epoch_ms(datetime.datetime(2024, 1, 1, 12)) == NOON_MS
    assert epoch_ms(datetime.date(2024, 1, 1)) == NOON_MS - 12 * 3600 * 1000
    assert epoch_ms(f" {NOON_MS} ") == NOON_MS  # an option's text of digits: epoch ms
    assert epoch_ms("2024-01-01 12:00:00") == NOON_MS  # SQL's space between date and time


def test_iso_text_without_a_zone_is_utc() -> None:
    assert aware_datetime("2024-01-01 12:00:00") == datetime.datetime(2024, 1, 1, 12, tzinfo=datetime.UTC)
    kept = aware_datetime("2024-01-01T12:00:00+02:00")
    assert kept.utcoffset() == datetime.timedelta(hours=2)


def test_flags_take_the_same_words_everywhere() -> None:
    assert [truth(v, "k") for v in ("true", "TRUE", " 1 ", "yes", True)] == [True] * 5
    assert [truth(v, "k") for v in ("false", "False", "0", "no", False)] == [False] * 5
    assert flag({}, "write.wap.enabled") is False
    assert flag({}, "pushdown", default=True) is True
    assert flag({"write.wap.enabled": "TRUE"}, "write.wap.enabled") is True


def test_an_unknown_flag_is_an_error_naming_its_key() -> None:
    with pytest.raises(ValidationError, match="table property write.wap.enabled must be true or false, got 'maybe'"):
        flag({"write.wap.enabled": "maybe"}, "write.wap.enabled", kind="table property")
    with pytest.raises(ValidationError, match="option rewrite-all must be true or false, got 'on'"):
        flag({"rewrite-all": "on"}, "rewrite-all", kind="option")


def test_refusals_name_the_argument() -> None:
    with pytest.raises(ValidationError, match="older_than 'yesterday' is not an ISO-8601 timestamp"):
        epoch_ms("yesterday", "older_than")
    with pytest.raises(ValidationError, match="as_of_timestamp must be a datetime"):
        epoch_ms(True, "as_of_timestamp")

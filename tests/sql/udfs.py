"""Python functions used as catalog functions (CREATE FUNCTION ... AS 'tests.sql.udfs.shout')."""

from __future__ import annotations


def shout(text: str | None) -> str | None:
    return None if text is None else text.upper() + "!"

"""Parsing of Iceberg's branching and tagging DDL.

``parse_alter_table`` is an :class:`~tablestore.sql.parse.parser.AlterTableAction`, tried by the
parser after the common ALTER TABLE actions. Syntax (Iceberg's
Spark SQL extensions, ``docs/docs/spark-ddl.md`` "Branching and Tagging DDL")::

    ALTER TABLE t CREATE [OR REPLACE] BRANCH [IF NOT EXISTS] b [AS OF VERSION n]
        [RETAIN n DAYS|HOURS|MINUTES] [WITH SNAPSHOT RETENTION [n SNAPSHOTS] [m DAYS|HOURS|MINUTES]]
    ALTER TABLE t REPLACE BRANCH b [AS OF VERSION n] [RETAIN ...] [WITH SNAPSHOT RETENTION ...]
    ALTER TABLE t CREATE [OR REPLACE] TAG [IF NOT EXISTS] v [AS OF VERSION n] [RETAIN n DAYS|HOURS|MINUTES]
    ALTER TABLE t REPLACE TAG v [AS OF VERSION n] [RETAIN ...]
    ALTER TABLE t DROP BRANCH [IF EXISTS] b          ALTER TABLE t DROP TAG [IF EXISTS] v

As in Iceberg's grammar, ``IF NOT EXISTS`` does not go with ``OR REPLACE``. A name with a dash
is quoted with backticks (``audit-branch``).
"""

from __future__ import annotations

from tablestore.sql.parse import statements as st
from tablestore.sql.parse.tokens import Cursor

BRANCH = "branch"
TAG = "tag"
_UNIT_MS = {"DAYS": 86_400_000, "DAY": 86_400_000, "HOURS": 3_600_000, "HOUR": 3_600_000,
            "MINUTES": 60_000, "MINUTE": 60_000}


def _kind(c: Cursor) -> str | None:
    if c.accept("BRANCH"):
        return BRANCH
    if c.accept("TAG"):
        return TAG
    return None


def _duration(c: Cursor, what: str) -> int:
    amount = c.integer(f"a number of {what}")
    unit = c.word()
    if unit not in _UNIT_MS:
        raise c.error(f"expected DAYS, HOURS or MINUTES after {amount} but found {c.next_text()!r}")
    c.advance()
    if amount <= 0:
        raise c.error(f"{what} must be positive, not {amount}")
    return amount * _UNIT_MS[unit]


def parse_alter_table(c: Cursor, name: st.Name, is_view: bool) -> st.Statement | None:
    if c.word() == "DROP" and c.word(1) in ("BRANCH", "TAG"):
        c.advance()
        kind = _kind(c)
        assert kind is not None
        _refuse_view(c, is_view)
        if_exists = c.accept("IF", "EXISTS")
        return st.DropRef(c.sql, name, kind, c.identifier(f"a {kind} name"), if_exists)
    create = replace = False
    if c.accept("CREATE"):
        create = True
        replace = c.accept("OR", "REPLACE")
    elif c.accept("REPLACE"):
        replace = True
    kind = _kind(c) if create or replace else None
    if kind is None:
        return None
    _refuse_view(c, is_view)
    if_not_exists = False
    if c.is_word("IF", "NOT", "EXISTS"):
        if replace:
            raise c.error("IF NOT EXISTS cannot go with REPLACE: use CREATE ... IF NOT EXISTS or CREATE OR REPLACE")
        c.accept("IF", "NOT", "EXISTS")
        if_not_exists = True
    ref = c.identifier(f"a {kind} name")
    snapshot_id = max_ref_age = min_snapshots = max_snapshot_age = None
    while not c.at_end():
        if snapshot_id is None and c.accept("AS", "OF", "VERSION"):
            snapshot_id = c.integer("a snapshot id")
        elif max_ref_age is None and c.accept("RETAIN"):
            max_ref_age = _duration(c, f"the {kind}'s retention")
        elif kind == BRANCH and min_snapshots is None and max_snapshot_age is None and c.accept("WITH"):
            c.expect("SNAPSHOT", "RETENTION")
            if c.word(1) == "SNAPSHOTS":
                min_snapshots = c.integer("a number of snapshots")
                c.advance()
                if min_snapshots <= 0:
                    raise c.error(f"the number of snapshots to keep must be positive, not {min_snapshots}")
            if not c.at_end() and c.word(1) in _UNIT_MS:
                max_snapshot_age = _duration(c, "the snapshots' retention")
            if min_snapshots is None and max_snapshot_age is None:
                raise c.error("expected n SNAPSHOTS and/or m DAYS|HOURS|MINUTES after WITH SNAPSHOT RETENTION")
        else:
            expected = "AS OF VERSION, RETAIN or WITH SNAPSHOT RETENTION" if kind == BRANCH else \
                "AS OF VERSION or RETAIN"
            raise c.error(f"unexpected {c.next_text()!r} in {'CREATE' if create else 'REPLACE'} {kind.upper()}; "
                          f"expected {expected}")
    return st.CreateRef(c.sql, name, kind, ref, create, replace, if_not_exists, snapshot_id, max_ref_age,
                     min_snapshots, max_snapshot_age)


def _refuse_view(c: Cursor, is_view: bool) -> None:
    if is_view:
        raise c.error("views have no branches or tags; ALTER TABLE makes them on a table")

"""A session's options: what ``SET key=value`` changed, and the runtime mode.

``SET`` and ``RESET`` are parsed in :mod:`tablestore.sql.parse.options` and run in
:mod:`tablestore.sql.run.options`. This module is below the handlers' context so that the query
planner, which reads ``spark.wap.branch`` from the options, needs nothing of it (``context.py``
imports the planner).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tablestore.errors import ValidationError

INSERT_OVERWRITE_MODE = "tablestore.insert-overwrite.mode"
SPARK_OVERWRITE_MODE = "spark.sql.sources.partitionOverwriteMode"
OVERWRITE_MODES = ("dynamic", "static")
# ``SET tablestore.commit-id = ...``: the commit identifier of the session's INSERTs (run/insert.py).
COMMIT_ID = "tablestore.commit-id"
UNDEFINED = "<undefined>"


@dataclass
class SessionOptions:
    """The options of one session: what ``SET key=value`` changed, and the runtime mode.

    The two overwrite modes are typed fields: their keys are matched ignoring case (as their
    values are checked) and their values are ``dynamic`` or ``static``. Any other key is kept
    as given, so ``SET`` lists it and ``SET key`` shows it, as Spark does.
    """

    insert_overwrite_mode: str | None = None
    """``SET tablestore.insert-overwrite.mode``: INSERT OVERWRITE's mode; it wins over Spark's."""
    partition_overwrite_mode: str | None = None
    """``SET spark.sql.sources.partitionOverwriteMode``: Spark's name for the same choice."""
    runtime_mode: str = "batch"
    """``batch``, or ``streaming`` in a session that a streaming job runs: row-level DML is batch-only."""
    others: dict[str, str] = field(default_factory=dict)
    """Every other key set in the session, by its name as given."""

    def set(self, key: str, value: str) -> str:
        """Set ``key``; returns the value kept (an overwrite mode in lower case).
        ValidationError for an overwrite mode other than ``dynamic`` or ``static``."""
        known = _known_key(key)
        if known is None:
            self.others[key] = value
            return value
        mode = value.lower()
        if mode not in OVERWRITE_MODES:
            raise ValidationError(f"{key} must be 'dynamic' or 'static', got {value!r}")
        if known == INSERT_OVERWRITE_MODE:
            self.insert_overwrite_mode = mode
        else:
            self.partition_overwrite_mode = mode
        return mode

    def get(self, key: str) -> str | None:
        """The value set for ``key``, or None."""
        known = _known_key(key)
        if known == INSERT_OVERWRITE_MODE:
            return self.insert_overwrite_mode
        if known == SPARK_OVERWRITE_MODE:
            return self.partition_overwrite_mode
        return self.others.get(key)

    def reset(self, key: str | None = None) -> None:
        """Forget what ``SET key=...`` set (every key when None), as Spark's ``RESET``."""
        known = _known_key(key) if key is not None else None
        if key is None or known == INSERT_OVERWRITE_MODE:
            self.insert_overwrite_mode = None
        if key is None or known == SPARK_OVERWRITE_MODE:
            self.partition_overwrite_mode = None
        if key is None:
            self.others.clear()
        else:
            self.others.pop(key, None)

    def items(self) -> list[tuple[str, str]]:
        """Every key set, with its value, sorted by key (what ``SET`` lists)."""
        typed = [(INSERT_OVERWRITE_MODE, self.insert_overwrite_mode),
                 (SPARK_OVERWRITE_MODE, self.partition_overwrite_mode)]
        return sorted([(k, v) for k, v in typed if v is not None] + list(self.others.items()))

    def overwrite_mode(self) -> str | None:
        """The session's INSERT OVERWRITE mode: tablestore's option, else Spark's, else None."""
        return self.insert_overwrite_mode or self.partition_overwrite_mode


def _known_key(key: str) -> str | None:
    lowered = key.lower()
    for known in (INSERT_OVERWRITE_MODE, SPARK_OVERWRITE_MODE):
        if lowered == known.lower():
            return known
    return None

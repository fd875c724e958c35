"""The exceptions tablestore raises.

One root, :class:`TableStoreError`, with a subclass per thing a caller may want to catch.
Every message says what was wrong and what to do about it.
"""

from __future__ import annotations


class TableStoreError(Exception):
    """Root of every error tablestore raises on purpose."""


class TableStoreWarning(UserWarning):
    """Root of the warnings tablestore emits."""


class ValidationError(TableStoreError, ValueError):
    """The input is not acceptable: a bad name, value, option or argument."""


class InvalidArgumentError(ValidationError):
    """A request Java's reference refuses with ``IllegalArgumentException`` (its builders'
    preconditions); the REST service answers it as 400 with that type, which Java clients raise
    again as IllegalArgumentException."""


class InvalidNameError(ValidationError):
    """A namespace, table or column name that is empty, has control characters, '/' or '..'."""


class SchemaError(ValidationError):
    """A schema is malformed, or data does not match the table's schema."""


class SchemaEvolutionError(SchemaError):
    """A schema change that the evolution rules do not allow."""


class FilterError(ValidationError):
    """A filter that cannot be parsed or bound to the table's schema."""


class SnapshotRangeError(ValidationError):
    """A range of snapshots (a changelog's or an incremental scan's) that cannot be read: its
    start is not an ancestor of its end, or it reaches into expired snapshots."""


class NotFoundError(TableStoreError, LookupError):
    """Something named does not exist."""


class NoSuchNamespaceError(NotFoundError):
    pass


class NoSuchTableError(NotFoundError):
    pass


class NoSuchViewError(NotFoundError):
    pass


class NoSuchFunctionError(NotFoundError):
    pass


class NoSuchSnapshotError(NotFoundError):
    pass


class NoSuchCatalogError(NotFoundError):
    pass


class NoSuchPlanIdError(NotFoundError):
    """A server-side scan plan that does not exist (never made, fetched to the end, or expired)."""


class NoSuchPlanTaskError(NotFoundError):
    """A plan task of a server-side scan plan that does not exist (already fetched, or expired)."""


class AlreadyExistsError(TableStoreError):
    """Something with that name exists already."""


class NamespaceAlreadyExistsError(AlreadyExistsError):
    pass


class TableAlreadyExistsError(AlreadyExistsError):
    pass


class ViewAlreadyExistsError(AlreadyExistsError):
    """A view (or a table, as they share names) of that name exists already."""


class FunctionAlreadyExistsError(AlreadyExistsError):
    """A function of that name exists already."""


class NamespaceNotEmptyError(TableStoreError):
    """A namespace still holds tables or views; drop them first or use CASCADE."""


class CommitFailedError(TableStoreError):
    """A commit could not be applied; nothing was committed."""


class CommitConflictError(CommitFailedError):
    """The table changed under the commit in a way that conflicts with it.

    Raised when a commit's requirements no longer hold (another writer won the race and a retry
    is unsafe or exhausted), or when validation against the scan's snapshot finds a conflicting
    concurrent change.
    """


class CommitStateUnknownError(CommitFailedError):
    """The commit may or may not have been applied (for example the catalog did not answer).

    ``snapshot_id`` names the snapshot the commit would have added, when it made one: it is in
    the table's history if the commit landed. Its files are kept either way.
    """

    def __init__(self, message: str, snapshot_id: int | None = None) -> None:
        super().__init__(message)
        self.snapshot_id = snapshot_id


class CorruptMetadataError(TableStoreError):
    """A metadata, manifest or manifest-list file cannot be read as Iceberg metadata."""


class MetadataFileNotFoundError(NotFoundError, CorruptMetadataError):
    """A catalog points at a metadata file that is gone (Java's ``NotFoundException``).

    Also a CorruptMetadataError, which is what callers caught before the REST service answered
    it as the protocol's NotFoundException (404)."""


class UnsupportedError(TableStoreError, NotImplementedError):
    """A feature of the format or of a statement that tablestore does not support."""


class ParseError(ValidationError):
    """A SQL statement that cannot be parsed; carries the line and column of the problem."""

    def __init__(self, message: str, line: int | None = None, column: int | None = None,
                 sql: str | None = None) -> None:
        self.line = line
        self.column = column
        self.sql = sql
        where = f" (line {line}, column {column})" if line is not None and column is not None else ""
        super().__init__(f"{message}{where}")

    @property
    def highlight(self) -> str:
        """The offending line with a caret under the column."""
        if self.sql is None or self.line is None or self.column is None:
            return ""
        lines = self.sql.splitlines() or [""]
        text = lines[min(self.line, len(lines)) - 1]
        return f"{text}\n{' ' * max(0, self.column - 1)}^"


class NotAuthorizedError(TableStoreError):
    """No token, an unknown or expired token (HTTP 401): raised by the REST service and, for
    its answer, by the REST client."""


class ForbiddenError(TableStoreError):
    """A valid token without the role the request needs (HTTP 403)."""


class ConfigError(ValidationError):
    """The YAML configuration is invalid; the message names the file and the key."""


class QueryError(ValidationError):
    """Spark could not analyse or run a query: an unknown column, a type error, an overflow."""


class NoSuchPartitionError(NotFoundError):
    """A PARTITION (k='v') names a partition that has no rows; SHOW PARTITIONS lists the partitions."""


class PartitionAlreadyExistsError(AlreadyExistsError):
    """A partition rename would move rows into a partition that already has rows."""

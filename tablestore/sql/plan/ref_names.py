"""Branch and tag names in SQL, and the session's write-audit-publish options.

Iceberg's Spark identifiers name a branch or a tag of a table with one more part:
``db.t.branch_audit`` is branch ``audit`` of ``db.t`` (read and written), ``db.t.tag_v1`` is tag
``v1`` (read only). As in Iceberg's ``SparkCatalog.loadTable``, a name that is itself a table
is that table; only otherwise is the last part read as a ref of the table the other parts name.

The session options ``spark.wap.branch`` and ``spark.wap.id`` (``SET spark.wap.branch = audit``)
redirect writes of a table whose property ``write.wap.enabled`` is ``true``, as Iceberg's
``SparkWriteConf`` does: to that branch, or into staged snapshots carrying that ``wap.id``.
Reads of such a table without an explicit ref read the WAP branch once it exists. Tables
without the property ignore both options.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tablestore.errors import NoSuchTableError, NotFoundError, ValidationError
from tablestore.option_values import flag
from tablestore.table import WAP_ENABLED

if TYPE_CHECKING:
    from tablestore.catalog.base import Catalog
    from tablestore.spec.metadata.table_metadata import TableMetadata
    from tablestore.sql.options import SessionOptions
    from tablestore.table import Table

BRANCH_PREFIX = "branch_"
TAG_PREFIX = "tag_"
WAP_BRANCH = "spark.wap.branch"
WAP_ID = "spark.wap.id"


@dataclass(frozen=True)
class RefName:
    """The branch or tag a table name's last part selects."""

    kind: str
    """``branch`` or ``tag``."""
    name: str


@dataclass(frozen=True)
class ResolvedName:
    catalog: Catalog
    identifier: tuple[str, ...]
    ref: RefName


def ref_part(part: str) -> RefName | None:
    """``branch_x`` -> branch x, ``tag_x`` -> tag x (prefixes in any case), else None."""
    lowered = part.lower()
    for prefix, kind in ((BRANCH_PREFIX, "branch"), (TAG_PREFIX, "tag")):
        if lowered.startswith(prefix) and len(part) > len(prefix):
            return RefName(kind, part[len(prefix):])
    return None


def split_ref(resolve: Callable[[tuple[str, ...]], tuple[Catalog, tuple[str, ...]]],
              parts: tuple[str, ...]) -> ResolvedName | None:
    """The table and ref that ``parts`` names when its last part is ``branch_x`` or ``tag_x``, the
    other parts name a table, and the whole name is no table; else None."""
    if len(parts) < 2:
        return None
    ref = ref_part(parts[-1])
    if ref is None or _table_at(resolve, parts) is not None:
        return None
    found = _table_at(resolve, parts[:-1])
    if found is None:
        return None
    return ResolvedName(found[0], found[1], ref)


def _table_at(resolve: Callable[[tuple[str, ...]], tuple[Catalog, tuple[str, ...]]],
              parts: tuple[str, ...]) -> tuple[Catalog, tuple[str, ...]] | None:
    try:
        catalog, identifier = resolve(parts)
        return (catalog, identifier) if catalog.table_exists(identifier) else None
    except (ValidationError, NotFoundError):
        return None


def check_readable(metadata: TableMetadata, ref: RefName, table_name: str) -> None:
    """ValidationError unless the table has ``ref`` and it is of the kind its name says."""
    found = metadata.refs.get(ref.name)
    if found is None:
        raise NoSuchTableError(
            f"table {table_name} has no {ref.kind} {ref.name!r}; its branches and tags are "
            f"{', '.join(sorted(metadata.refs)) or 'none'}"
        )
    if found.type != ref.kind:
        prefix = BRANCH_PREFIX if found.type == "branch" else TAG_PREFIX
        raise ValidationError(
            f"{ref.name!r} of table {table_name} is a {found.type}, not a {ref.kind}: name it {prefix}{ref.name}"
        )


def wap_enabled(properties: dict[str, str]) -> bool:
    return flag(properties, WAP_ENABLED, kind="table property")


def wap_read_ref(options: SessionOptions, metadata: TableMetadata) -> str | None:
    """The branch a read of the table without an explicit ref reads: the session's
    ``spark.wap.branch`` when the table has write-audit-publish on and the branch exists."""
    branch = options.get(WAP_BRANCH)
    if branch and wap_enabled(metadata.properties) and branch in metadata.refs:
        return branch
    return None


def write_target(options: SessionOptions, table: Table, ref: RefName | None) -> Table:
    """The Table a write statement commits through: the named branch, the session's WAP branch,
    or staged snapshots of its ``wap.id``; a tag is refused (tags are read-only)."""
    if ref is not None and ref.kind == "tag":
        check_readable(table.metadata, ref, table.name)
        table.on_branch(ref.name)  # refuses: tags are read-only
        raise AssertionError(f"on_branch accepted tag {ref.name!r}")
    explicit = ref.name if ref is not None else None
    if not wap_enabled(table.properties):
        return table.on_branch(explicit) if explicit is not None else table
    wap_id, wap_branch = options.get(WAP_ID), options.get(WAP_BRANCH)
    if wap_id and wap_branch:
        raise ValidationError(
            f"cannot write to {table.name}: both {WAP_ID} ({wap_id!r}) and {WAP_BRANCH} ({wap_branch!r}) are set; "
            "RESET one of them"
        )
    if wap_branch:
        if explicit is not None and explicit != wap_branch:
            raise ValidationError(
                f"cannot write to both branch {explicit!r} and the WAP branch {wap_branch!r} of {table.name}; "
                f"RESET {WAP_BRANCH} or write to the table's plain name"
            )
        return table.on_branch(wap_branch)
    if wap_id:
        if explicit is not None:
            raise ValidationError(
                f"cannot write to branch {explicit!r} of {table.name} while {WAP_ID} ({wap_id!r}) stages writes; "
                f"RESET {WAP_ID} or write to the table's plain name"
            )
        return table.staged(wap_id)
    return table.on_branch(explicit) if explicit is not None else table

"""Partition evolution: the ``UpdateSpec`` builder behind ``table.update_spec()``.

    >>> import pyarrow as pa, tablestore, tempfile
    >>> wh = tempfile.mkdtemp()
    >>> catalog = tablestore.load_catalog("local", type="sql", uri=f"sqlite:///{wh}/catalog.db", warehouse=wh)
    >>> catalog.create_namespace("db")
    >>> table = catalog.create_table("db.t", schema=pa.schema([("id", pa.int64()), ("ts", pa.timestamp("us"))]),
    ...                              partition_by=["days(ts)"])
    >>> with table.update_spec() as u:
    ...     _ = u.replace_field("days(ts)", "hours(ts)").add_field("bucket(16, id)")
    >>> [(f.name, f.field_id, str(f.transform)) for f in table.spec().fields]
    [('ts_hour', 1001, 'hour'), ('id_bucket_16', 1002, 'bucket[16]')]

The rules are those of Java Iceberg's ``BaseUpdatePartitionSpec``, so a table evolved here looks
the same as one evolved by Spark's ``ALTER TABLE ... ADD PARTITION FIELD``:

- a new field is named as Java names it (``ts_hour``, ``id_bucket_16``, ``name_trunc_4``;
  identity keeps the column name) unless a name is given;
- in format v2 a field that some older spec already had (same column and transform, and same
  name when one is given) gets that field's id back, so its partition values line up across
  specs; otherwise it gets the next id after the table's last partition id;
- a removed field leaves the spec in v2; in v1 it stays as a ``void`` field, because v1 readers
  number partition fields by position;
- the result is committed once, when the ``with`` block ends without an error, as an added spec
  (or the id of an existing spec with the same fields) made the default. Files keep the spec
  they were written with; new writes use the new default.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING

from tablestore.errors import CommitConflictError, ValidationError
from tablestore.spec.metadata.update_models import (
    AddPartitionSpecUpdate,
    AssertDefaultSpecId,
    AssertLastAssignedPartitionId,
    AssertTableUUID,
    SetDefaultSpecUpdate,
    TableRequirement,
)
from tablestore.spec.partitioning.partition_spec import (
    PartitionField,
    PartitionSpec,
    check_transform,
    parse_term,
    resolve_column,
)
from tablestore.spec.partitioning.transforms import (
    BucketTransform,
    IdentityTransform,
    Transform,
    TruncateTransform,
    VoidTransform,
)
from tablestore.spec.schemas.schema import Schema
from tablestore.table.update.retry import StagedCommit

if TYPE_CHECKING:
    from tablestore.spec.metadata.table_metadata import TableMetadata
    from tablestore.table import Table
    from tablestore.table.update.transaction import Transaction

__all__ = ["UpdateSpec", "evolution_field_name"]

_TIME = ("year", "month", "day", "hour")


def evolution_field_name(transform: Transform, column: str) -> str:
    """The name Java's ``BaseUpdatePartitionSpec`` gives an added field (it differs from the
    names ``PartitionSpec.Builder`` gives at table creation for bucket and truncate)."""
    if isinstance(transform, BucketTransform):
        return f"{column}_bucket_{transform.num_buckets}"
    if isinstance(transform, TruncateTransform):
        return f"{column}_trunc_{transform.width}"
    return transform.default_partition_name(column)


@dataclass(frozen=True)
class _Term:
    source_id: int
    transform: Transform
    column: str
    text: str

    @property
    def key(self) -> tuple[int, str]:
        return self.source_id, str(self.transform)


class UpdateSpec:
    """Collects partition field changes; :meth:`commit` (or leaving ``with``) applies them once.

    Terms are written as in ``PARTITIONED BY``: ``ts``, ``days(ts)``, ``hours(ts)``,
    ``bucket(16, id)``, ``truncate(4, name)``. A field to remove or replace is named by its term
    or by its partition field name.
    """

    def __init__(self, table: Table, transaction: Transaction | None = None) -> None:
        self.table = table
        self._transaction = transaction
        self._base = transaction.metadata if transaction is not None else table.metadata
        self._reset(self._base)

    def _reset(self, base: TableMetadata) -> None:
        self._base = base
        self._schema: Schema = base.schema()
        self._spec: PartitionSpec = base.spec()
        self._format_version = base.format_version
        self._last_id = base.last_partition_id
        self._by_name = {f.name: f for f in self._spec.fields}
        self._by_key = {(f.source_id, str(f.transform)): f for f in self._spec.fields}
        self._adds: list[PartitionField] = []
        self._added_by_name: dict[str, PartitionField] = {}
        self._added_by_key: dict[tuple[int, str], PartitionField] = {}
        self._added_time: dict[int, PartitionField] = {}
        self._deletes: set[int] = set()
        self._renames: dict[str, str] = {}

    # -- the builder -------------------------------------------------------------------------------
    def _term(self, text: str) -> _Term:
        parsed = parse_term(text)
        if parsed.rest:
            raise ValidationError(
                f"unexpected {' '.join(parsed.rest)!r} after the partition term {text!r}; "
                "give a field name with name=..."
            )
        field, column = resolve_column(self._schema, parsed.column, text, "partition term")
        check_transform(parsed.transform, field, column, text)
        return _Term(field.field_id, parsed.transform, column, text)

    def add_field(self, term: str, name: str | None = None) -> UpdateSpec:
        """Partition new writes also by ``term`` (``hours(ts)``, ``bucket(16, id)``, ``country``)."""
        if name is not None and not name.strip():
            raise ValidationError(f"the partition field name for {term!r} is empty; give a name or None")
        if name is not None and name in self._added_by_name:
            raise ValidationError(f"partition field {name!r} is added twice in this change")
        t = self._term(term)
        existing = self._by_key.get(t.key)
        if existing is not None and existing.field_id in self._deletes:
            # Removing then re-adding the same field is a no-op (or a rename), as in Java.
            self._deletes.discard(existing.field_id)
            if name is not None and name != existing.name:
                self.rename_field(existing.name, name)
            return self
        if existing is not None:
            raise ValidationError(
                f"the table is already partitioned by {t.text!r} (field {existing.name!r}); nothing to add"
            )
        if t.key in self._added_by_key:
            raise ValidationError(f"{t.text!r} is added twice in this change")
        new = self._recycle_or_create(t, name)
        if str(new.transform) in _TIME:
            other = self._added_time.get(new.source_id)
            if other is not None:
                raise ValidationError(
                    f"{t.text!r} is redundant with the added field {other.name!r}: both partition "
                    f"{t.column!r} by time; add only one of them"
                )
            self._added_time[new.source_id] = new
        self._check_name(new, t)
        self._added_by_key[t.key] = new
        self._added_by_name[new.name] = new
        self._adds.append(new)
        return self

    def _recycle_or_create(self, t: _Term, name: str | None) -> PartitionField:
        if self._format_version >= 2:
            # Reusing a historical field's id keeps its partition values comparable across specs.
            for spec in self._base.partition_specs:
                for f in spec.fields:
                    if f.source_id == t.source_id and str(f.transform) == str(t.transform) and (
                        name is None or f.name == name
                    ):
                        return PartitionField(f.source_id, f.field_id, t.transform, f.name)
        self._last_id += 1
        return PartitionField(t.source_id, self._last_id, t.transform,
                              name if name is not None else evolution_field_name(t.transform, t.column))

    def _check_name(self, new: PartitionField, t: _Term) -> None:
        clash = self._schema.find_field_id(new.name)
        if clash is not None and not (isinstance(new.transform, IdentityTransform) and clash == new.source_id):
            raise ValidationError(
                f"partition field name {new.name!r} of {t.text!r} is also a column of the table; "
                "choose another name"
            )
        if new.name in self._added_by_name:
            raise ValidationError(f"partition field name {new.name!r} is used twice in this change")
        current = self._by_name.get(new.name)
        if current is None:
            return
        if current.field_id in self._deletes or isinstance(current.transform, VoidTransform):
            # The old field keeps living in older specs under a name that no longer clashes.
            self._renames[current.name] = f"{current.name}_{current.field_id}"
            return
        raise ValidationError(
            f"the table already has a partition field named {new.name!r} ({current.transform} of "
            f"{self._column(current.source_id)}); choose another name"
        )

    def _field(self, name_or_term: str) -> PartitionField:
        """The current field a name (``ts_day``) or a term (``days(ts)``) refers to."""
        if name_or_term in self._added_by_name:
            raise ValidationError(f"cannot remove {name_or_term!r}: it is added in this same change")
        found = self._by_name.get(name_or_term)
        if found is not None:
            return found
        try:
            t = self._term(name_or_term)
        except ValidationError:
            t = None
        if t is not None:
            if t.key in self._added_by_key:
                raise ValidationError(f"cannot remove {name_or_term!r}: it is added in this same change")
            found = self._by_key.get(t.key)
            if found is not None:
                return found
        names = ", ".join(f"{f.name} ({self._describe(f)})" for f in self._spec.fields) or "none"
        raise ValidationError(
            f"the table is not partitioned by {name_or_term!r}; its partition fields are: {names}"
        )

    def remove_field(self, name_or_term: str) -> UpdateSpec:
        """Stop partitioning new writes by a field, named by its name or its term."""
        field = self._field(name_or_term)
        if field.name in self._renames:
            raise ValidationError(f"cannot rename and remove partition field {field.name!r} in one change")
        self._deletes.add(field.field_id)
        return self

    def replace_field(self, old: str, new: str, name: str | None = None) -> UpdateSpec:
        """Remove ``old`` and add ``new`` in this change (``days(ts)`` -> ``hours(ts)``)."""
        self.remove_field(old)
        return self.add_field(new, name)

    def rename_field(self, name: str, new_name: str) -> UpdateSpec:
        if not new_name.strip():
            raise ValidationError("the new partition field name is empty")
        if name in self._added_by_name:
            raise ValidationError(f"cannot rename {name!r}: it is added in this same change")
        field = self._by_name.get(name)
        if field is None:
            raise ValidationError(f"the table has no partition field {name!r}; it has "
                                  f"{', '.join(self._by_name) or 'none'}")
        if field.field_id in self._deletes:
            raise ValidationError(f"cannot remove and rename partition field {name!r} in one change")
        self._renames[name] = new_name
        return self

    # -- the result -------------------------------------------------------------------------------
    def apply(self) -> PartitionSpec:
        """The new spec (its id is decided at commit)."""
        fields: list[PartitionField] = []
        for f in self._spec.fields:
            name = self._renames.get(f.name, f.name)
            if f.field_id not in self._deletes:
                fields.append(PartitionField(f.source_id, f.field_id, f.transform, name))
            elif self._format_version < 2:
                fields.append(PartitionField(f.source_id, f.field_id, VoidTransform(), name))
        fields.extend(self._adds)
        names = [f.name for f in fields]
        duplicate = next((n for n in names if names.count(n) > 1), None)
        if duplicate is not None:
            raise ValidationError(f"partition field name {duplicate!r} would be used twice; choose another name")
        spec = PartitionSpec(self._spec.spec_id, tuple(fields))
        spec.validate(self._schema)
        return spec

    def stage(self, base: TableMetadata) -> StagedCommit:
        """The new default spec on ``base`` (a :class:`MetadataChange` of a transaction).

        A concurrent partition spec change makes it fail: resolving the same request on the new
        spec would change its meaning, so the caller decides (Java does not retry
        UpdatePartitionSpec either). Other concurrent commits are retried over.
        """
        if base.default_spec_id != self._base.default_spec_id or base.last_partition_id != self._base.last_partition_id:
            raise CommitConflictError(
                "the table's partition spec was changed by a concurrent commit after this spec update started; "
                "reload the table and make the change again"
            )
        spec = self.apply()
        requirements: list[TableRequirement] = [
            AssertTableUUID(uuid=base.table_uuid),
            AssertDefaultSpecId(default_spec_id=self._base.default_spec_id),
            AssertLastAssignedPartitionId(last_assigned_partition_id=self._base.last_partition_id),
        ]
        if _same_fields(spec, base.spec()):
            return StagedCommit(requirements, [])
        # Java's reuseOrCreateNewSpecId: a spec with the same columns, transforms and names is reused.
        existing = next((s for s in base.partition_specs if _same_fields(spec, s)), None)
        if existing is not None:
            return StagedCommit(requirements, [SetDefaultSpecUpdate(spec_id=existing.spec_id)])
        return StagedCommit(requirements, [AddPartitionSpecUpdate(spec=spec), SetDefaultSpecUpdate(spec_id=-1)])

    def commit(self) -> None:
        """Commit the new default spec (or add it to the transaction); nothing happens if the
        spec does not change."""
        if not self.stage(self._base).updates:
            return
        if self._transaction is not None:
            self._transaction.add_change(self)
            return
        self.table.transaction().add_change(self).commit_transaction()

    def __enter__(self) -> UpdateSpec:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if exc_type is None:
            self.commit()

    # -- messages ---------------------------------------------------------------------------------
    def _column(self, source_id: int) -> str:
        return self._schema.find_column_name(source_id) or f"column id {source_id}"

    def _describe(self, f: PartitionField) -> str:
        return f"{f.transform}({self._column(f.source_id)})"


def _same_fields(a: PartitionSpec, b: PartitionSpec) -> bool:
    return len(a.fields) == len(b.fields) and all(
        x.source_id == y.source_id and str(x.transform) == str(y.transform) and x.name == y.name
        and x.field_id == y.field_id
        for x, y in zip(a.fields, b.fields, strict=True)
    )

"""The fixture tables, built once per warehouse, and what tablestore reads at each snapshot.

A :class:`BuiltTable` carries everything a reader needs to read a fixture without tablestore:
its metadata file, each snapshot with the metadata file written when it became current (for
readers that cannot select a snapshot), and tablestore's own rows at that snapshot in the
oracle's JSON form (``tests/values.py``), which every reader's rows are compared with.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import tablestore
from tablestore.catalog.base import Catalog, read_metadata_file
from tablestore.spec.schemas.schema import Schema
from tablestore.table import Table
from tests.interop.fixture_tables import FIXTURES, NAMESPACE, FixtureTable
from tests.interop.rows import canonical_rows

# The three kinds of warehouse: a bare local path, a file:// URI, and S3 on the loopback server.
KINDS = ("path", "file", "s3")


@dataclass(frozen=True)
class SnapshotRows:
    """One snapshot of a fixture and tablestore's rows there, sorted as the oracle sorts them."""

    snapshot_id: int
    step: str
    metadata_location: str  # the metadata file whose current snapshot this is
    schema: Schema  # the snapshot's schema, which a read at that snapshot returns
    rows: list[list[Any]]

    @property
    def columns(self) -> list[str]:
        return [f.name for f in self.schema.fields]


@dataclass
class BuiltTable:
    fixture: FixtureTable
    identifier: str
    metadata_location: str
    snapshots: list[SnapshotRows] = field(default_factory=list)


@dataclass
class Warehouse:
    kind: str
    location: str
    catalog_uri: str
    properties: dict[str, str]
    tables: dict[str, BuiltTable] = field(default_factory=dict)


def snapshot_schema(table: Table, snapshot_id: int) -> Schema:
    snapshot = table.snapshot_by_id(snapshot_id)
    assert snapshot is not None and snapshot.schema_id is not None
    schema = table.metadata.schema_by_id(snapshot.schema_id)
    assert schema is not None
    return schema


def _metadata_at_snapshots(table: Table) -> dict[int, str]:
    """The first metadata file in which each snapshot was current."""
    files = [entry.metadata_file for entry in table.metadata.metadata_log] + [table.metadata_location]
    first: dict[int, str] = {}
    for location in files:
        current = read_metadata_file(table.io, location).current_snapshot_id
        if current is not None and current not in first:
            first[current] = location
    return first


def build_table(catalog: Catalog, fixture: FixtureTable) -> BuiltTable:
    """Create one fixture, run its recipe, and record tablestore's rows at each snapshot."""
    identifier = f"{NAMESPACE}.{fixture.name}"
    table = catalog.create_table((NAMESPACE, fixture.name), schema=fixture.schema,
                                 partition_by=fixture.partition_by, properties=fixture.properties)
    steps = fixture.recipe(table)
    table.refresh()
    snapshots = table.snapshots()
    assert len(snapshots) == len(steps), f"{fixture.name}: {len(snapshots)} snapshots for {len(steps)} steps"
    at = _metadata_at_snapshots(table)
    built = BuiltTable(fixture, identifier, table.metadata_location)
    for snapshot, step in zip(snapshots, steps, strict=True):
        rows = table.scan(snapshot_id=snapshot.snapshot_id).to_arrow()
        assert rows.num_rows == step.rows, f"{fixture.name} after {step.description}: {rows.num_rows} rows"
        schema = snapshot_schema(table, snapshot.snapshot_id)
        assert rows.column_names == [f.name for f in schema.fields]
        built.snapshots.append(SnapshotRows(snapshot.snapshot_id, step.description, at[snapshot.snapshot_id],
                                            schema, canonical_rows(rows, schema)))
    return built


# Fixtures built at once per warehouse. Each is its own table, and most of a build waits on
# I/O (on S3, on MinIO's answers), so a few at a time shorten it several times over.
BUILD_THREADS = 4


def build_warehouse(kind: str, root: Path, properties: dict[str, str], location: str) -> Warehouse:
    """Create every fixture in a fresh SQLite catalog over ``location`` and record its snapshots."""
    catalog_uri = f"sqlite:///{root / 'catalog.db'}"
    catalog = tablestore.load_catalog(f"interop_{kind}", type="sql", uri=catalog_uri, warehouse=location, **properties)
    warehouse = Warehouse(kind, location, catalog_uri, properties)
    try:
        catalog.create_namespace(NAMESPACE)
        with ThreadPoolExecutor(max_workers=BUILD_THREADS, thread_name_prefix=f"interop-{kind}") as pool:
            for fixture, built in zip(FIXTURES, pool.map(partial(build_table, catalog), FIXTURES), strict=True):
                warehouse.tables[fixture.name] = built
    finally:
        catalog.close()
    return warehouse


def describe(built: BuiltTable, snapshot: SnapshotRows) -> str:
    return f"{built.fixture.name} at snapshot {snapshot.snapshot_id} ({snapshot.step})"


def dump(rows: list[list[Any]]) -> str:
    return json.dumps(rows, default=str)[:2000]

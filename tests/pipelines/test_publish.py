"""Write-audit-publish in the pipeline, read by the engines that read main: an ingest writes to its
run's audit branch, the GX batch check reads that branch, and main moves only for a batch that
passed.

The pipeline runs as the stack runs it: its catalog is the REST catalog service with the warehouse
in S3 (MinIO), and Trino 476 reads the same tables through the same service. A bad batch (a
quantity out of range and NULL users) leaves main's snapshot and rows as they were, for
tablestore, for Trino (main, and main's snapshot by id) and for DuckDB reading the table's current
metadata file; Trino reading the audit branch by name sees the bad rows, so the reads of main
could have seen them. The failed check names the branch; the next good batch of the same day
publishes, and the snapshot main gets is the one the check audited.
"""

from __future__ import annotations

import datetime
import io
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dagster as dg
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from pipelines.definitions import build_definitions
from pipelines.defs.ingest.assets import BATCH_CHECK, EVENTS_KEY, LANDING_KEY
from pipelines.defs.ingest.landing import day_directory, events_for_day, write_landing_day
from pipelines.defs.publish import AUDIT_PREFIX, audit_branch
from pipelines.defs.resources import resources
from pipelines.drive import materialize
from pipelines.settings import CONFIG_DIR, DATABASE, PipelineSettings, load_settings
from tests.interop.readers import S3Access, duckdb_connect, duckdb_read
from tests.services import CATALOG, CLIENT_ID, CLIENT_SECRET, WRITE_TOKEN, RestService, S3Server, write_config
from tests.trino import TrinoServer, rest_catalog_properties

pytestmark = [pytest.mark.e2e, pytest.mark.spark, pytest.mark.s3, pytest.mark.trino]

# Trino's name for the pipeline's catalog: the session's one Trino serves other modules' catalogs too.
TRINO_CATALOG = "wap"
# The columns compared value by value. `price` is a REAL: Trino's client hands it over as the
# shortest decimal text of the float, so it is read as a DOUBLE (the float's exact value), as
# Arrow gives it.
COLUMNS = ("event_id", "event_ts", "user_id", "email", "country", "event_type", "quantity", "price", "amount")
TRINO_COLUMNS = ", ".join("CAST(price AS DOUBLE)" if c == "price" else c for c in COLUMNS)
# Fewer events than the demo: every row is compared in tablestore, Trino and DuckDB.
EVENTS_PER_DAY = 400


@dataclass
class Lake:
    """The pipeline's settings file and root, on the REST catalog that Trino and DuckDB read too."""

    settings_file: Path
    root: Path
    trino: TrinoServer
    s3: S3Access

    def trino_rows(self, version: str | int | None = None) -> list[tuple[Any, ...]]:
        """Trino's rows of ``events`` (at ``version``: a snapshot id, or a ref by name), by event id."""
        travel = "" if version is None else f" FOR VERSION AS OF {version!r}"  # a name is quoted: 'audit_...'
        sql = f"SELECT {TRINO_COLUMNS} FROM {TRINO_CATALOG}.{DATABASE}.events{travel} ORDER BY event_id"
        return [tuple(r) for r in self.trino.query(sql, TRINO_CATALOG)]

    def trino_refs(self) -> dict[str, int]:
        """The table's refs as Trino finds them (``$refs``): name to snapshot id."""
        rows = self.trino.query(f'SELECT name, snapshot_id FROM {TRINO_CATALOG}.{DATABASE}."events$refs"',
                                TRINO_CATALOG)
        return {name: snapshot_id for name, snapshot_id in rows}


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory, s3_server: S3Server, trino: TrinoServer) -> Iterator[Lake]:
    workdir = tmp_path_factory.mktemp("wap")
    catalog_db = f"sqlite:///{workdir / 'catalog.db'}"
    warehouse = f"s3://{s3_server.create_bucket()}/warehouse"
    config = workdir / "tablestore.yaml"
    # As the stack's service: the landing table is external, on the pipeline's local disk.
    write_config(config, catalog_db, warehouse, s3_server.properties,
                 server_extra={"allow-external-locations": "true"})
    service = RestService(config, catalog_db, warehouse, workdir, s3_properties=s3_server.properties)
    service.start()
    try:
        # The embedded settings with the catalog swapped for the service (which hands the client its
        # S3 settings): the pipeline's code is the same, only its catalog differs.
        doc = yaml.safe_load((CONFIG_DIR / "embedded.yaml").read_text())
        doc["tablestore"]["catalogs"] = [{"name": "lakehouse", "type": "rest", "uri": service.uri,
                                          "token": WRITE_TOKEN, "default-database": DATABASE}]
        doc["data"]["events-per-day"] = EVENTS_PER_DAY
        settings_file = workdir / "pipeline.yaml"
        settings_file.write_text(yaml.safe_dump(doc, sort_keys=False))
        trino.create_catalog(TRINO_CATALOG, rest_catalog_properties(
            service.uri, CATALOG, f"{CLIENT_ID}:{CLIENT_SECRET}", s3_server.endpoint, s3_server.region))
        try:
            yield Lake(settings_file, workdir / "lakehouse", trino,
                       S3Access(s3_server.endpoint, s3_server.access_key, s3_server.secret_key, s3_server.region))
        finally:
            trino.drop_catalog(TRINO_CATALOG)
    finally:
        service.stop()


def write_bad_landing_day(settings: PipelineSettings, day: datetime.date) -> None:
    """The day's landing file as a broken source system sends it: one quantity far out of range
    and the first three users missing."""
    good = events_for_day(settings, day)
    quantity = good.column("quantity").to_pylist()
    quantity[0] = 50_000
    users = [None, None, None, *good.column("user_id").to_pylist()[3:]]
    bad = good.set_column(good.schema.get_field_index("quantity"), good.schema.field("quantity"),
                          pa.array(quantity, pa.int32()))
    bad = bad.set_column(bad.schema.get_field_index("user_id"), bad.schema.field("user_id"), pa.array(users, pa.int64()))
    buffer = io.BytesIO()
    pq.write_table(bad, buffer, compression="zstd")
    (day_directory(settings, day) / "part-00000.parquet").write_bytes(buffer.getvalue())


def materialization(result: dg.ExecuteInProcessResult) -> dict[str, object]:
    (event,) = [e for e in result.get_asset_materialization_events() if e.asset_key == EVENTS_KEY]
    metadata = event.materialization.metadata
    return {k: getattr(v, "value", v) for k, v in metadata.items()}


def rows_of(table: pa.Table) -> list[tuple[Any, ...]]:
    """``table``'s rows in ``COLUMNS``, by event id: the form Trino's rows are compared in."""
    table = table.select(list(COLUMNS)).sort_by("event_id")
    return list(zip(*(table.column(c).to_pylist() for c in COLUMNS), strict=True))


def test_a_batch_that_breaks_its_check_is_never_seen_on_main_by_trino_or_duckdb_and_the_next_good_one_is_published(
    lake: Lake, tmp_path: Path,
) -> None:
    settings = load_settings(lake.settings_file, lake.root)
    res = resources(str(lake.settings_file), str(lake.root))
    definitions = build_definitions(str(lake.settings_file), str(lake.root), settings)
    instance = dg.DagsterInstance.ephemeral()  # one instance: the next run finds the failed one
    assert materialize(definitions, [LANDING_KEY], instance=instance).success
    first_day, bad_day = settings.daily_dates[:2]

    first = materialize(definitions, [EVENTS_KEY], partition_key=first_day.isoformat(), instance=instance)
    assert first.success
    published = materialization(first)
    table = res["tablestore"].table("events")
    assert table.metadata_location.startswith("s3://")  # the service's warehouse, in MinIO
    head = table.current_snapshot()
    assert head is not None
    # A fast-forward: main's new snapshot is the very one the check read on the audit branch.
    assert published["published_snapshot_id"] == published["audited_snapshot_id"] == head.snapshot_id
    assert published["audit_branch"] == audit_branch(first.run_id)
    assert int(str(published["write_tasks"])) >= 1  # Spark's tasks wrote the branch's files
    assert [r for r in table.refs() if r.startswith(AUDIT_PREFIX)] == []  # removed once published
    main_before = head.snapshot_id
    rows_before = rows_of(table.scan().to_arrow())
    assert rows_before == rows_of(events_for_day(settings, first_day))  # the landing day, value for value

    write_bad_landing_day(settings, bad_day)
    bad = materialize(definitions, [EVENTS_KEY], partition_key=bad_day.isoformat(), instance=instance)

    assert not bad.success
    (evaluation,) = bad.get_asset_check_evaluations()
    assert (evaluation.check_name, evaluation.passed) == (BATCH_CHECK, False)
    branch = audit_branch(bad.run_id)
    assert evaluation.metadata["audit_branch"].value == branch
    failed = [str(f) for f in evaluation.metadata["failed"].value]  # type: ignore[union-attr]
    assert any("quantity" in f for f in failed) and any("user_id" in f for f in failed)
    assert bad.get_asset_materialization_events() == []
    table.refresh()
    assert table.current_snapshot().snapshot_id == main_before
    assert rows_of(table.scan().to_arrow()) == rows_before
    # Trino reads main, and main's snapshot by id, exactly as before the batch.
    assert lake.trino_refs() == {"main": main_before, branch: table.refs()[branch].snapshot_id}
    assert lake.trino_rows() == rows_before
    assert lake.trino_rows(version=main_before) == rows_before
    # DuckDB, which knows no refs, reads the table's current snapshot from the metadata file the
    # catalog points at now (the one that also records the audit branch): main's, without the batch.
    con = duckdb_connect(tmp_path / "duckdb-extensions", lake.s3)
    seen = con.execute("SELECT * FROM iceberg_scan(?)", [table.metadata_location]).to_arrow_table()
    assert rows_of(seen) == rows_before
    # The batch waits on its branch for inspection. Trino reading the branch by name, and DuckDB
    # reading the branch's head snapshot from the same metadata file, see the bad rows: the reads
    # of main above could have seen them.
    bad_rows = rows_of(pq.read_table(day_directory(settings, bad_day) / "part-00000.parquet"))
    quantity, user = COLUMNS.index("quantity"), COLUMNS.index("user_id")
    assert max(r[quantity] for r in bad_rows) == 50_000 and sum(r[user] is None for r in bad_rows) == 3
    assert lake.trino_rows(version=branch) == sorted(rows_before + bad_rows)
    assert rows_of(duckdb_read(con, table.metadata_location, table.refs()[branch].snapshot_id)) == \
        sorted(rows_before + bad_rows)

    write_landing_day(settings, bad_day)  # the source system sends the day again, whole
    good = materialize(definitions, [EVENTS_KEY], partition_key=bad_day.isoformat(), instance=instance)
    assert good.success
    published = materialization(good)
    assert published["audit_branches_dropped"] == branch  # the failed run's branch, kept until now
    table.refresh()
    now = table.current_snapshot()
    assert now is not None and published["published_snapshot_id"] == published["audited_snapshot_id"] == now.snapshot_id
    assert now.parent_snapshot_id == main_before
    assert sorted(table.refs()) == ["main"]
    # Trino reads the published day on main, whose snapshot is the one the check audited.
    assert lake.trino_refs() == {"main": published["audited_snapshot_id"]}
    assert lake.trino_rows() == sorted(rows_before + rows_of(events_for_day(settings, bad_day)))

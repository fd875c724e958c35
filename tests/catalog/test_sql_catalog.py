"""SqlCatalog on SQLite and PostgreSQL, with local and S3 warehouses, and against pyiceberg."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from sqlalchemy import create_engine, text

from tablestore.catalog import load_catalog
from tablestore.catalog.sql_catalog import SqlCatalog
from tablestore.errors import (
    CommitConflictError,
    InvalidNameError,
    NamespaceAlreadyExistsError,
    NamespaceNotEmptyError,
    NoSuchNamespaceError,
    NoSuchTableError,
    TableAlreadyExistsError,
    ValidationError,
)
from tablestore.io import load_file_io
from tablestore.names import parse_metadata_version
from tests.conftest import SQL_CATALOG_LEGS, Warehouse

SCHEMA = pa.schema([
    pa.field("id", pa.int64(), nullable=False),
    pa.field("ts", pa.timestamp("us")),
    pa.field("country", pa.string()),
])


def _rows(uri: str, sql: str, **params: Any) -> list[tuple[Any, ...]]:
    engine = create_engine(uri)
    try:
        with engine.connect() as conn:
            return [tuple(r) for r in conn.execute(text(sql), params)]
    finally:
        engine.dispose()


def _set_properties(**props: str) -> Any:
    from tablestore.spec.metadata.update_models import update_from_json

    return update_from_json({"action": "set-properties", "updates": props})


def _second_catalog(catalog: SqlCatalog, warehouse: Warehouse) -> SqlCatalog:
    """Another catalog object (own engine and connections) on the same database."""
    return SqlCatalog(catalog.name, uri=str(catalog.engine.url.render_as_string(hide_password=False)),
                      warehouse=warehouse.location, **warehouse.properties)


# -- namespaces ------------------------------------------------------------------------------------


@SQL_CATALOG_LEGS
def test_namespace_crud(catalog: SqlCatalog) -> None:
    assert catalog.list_namespaces() == []
    catalog.create_namespace("db", {"owner": "ana", "comment": "x"})
    catalog.create_namespace(("other",))
    assert catalog.namespace_exists("db") and catalog.namespace_exists(("db",))
    assert not catalog.namespace_exists("nope")
    assert catalog.list_namespaces() == [("db",), ("other",)]
    assert catalog.load_namespace_properties("db") == {"owner": "ana", "comment": "x"}
    assert catalog.load_namespace_properties("other") == {}

    summary = catalog.update_namespace_properties(
        "db", removals={"comment", "absent"}, updates={"owner": "bo"}
    )
    assert (summary.removed, summary.updated, summary.missing) == (["comment"], ["owner"], ["absent"])
    assert catalog.load_namespace_properties("db") == {"owner": "bo"}
    # Removing every property leaves the namespace in place (the exists marker stays).
    catalog.update_namespace_properties("db", removals={"owner"})
    assert catalog.namespace_exists("db") and catalog.load_namespace_properties("db") == {}

    with pytest.raises(NamespaceAlreadyExistsError, match="^Namespace already exists: db$"):
        catalog.create_namespace("db")
    catalog.drop_namespace("db")
    assert catalog.list_namespaces() == [("other",)]
    with pytest.raises(NoSuchNamespaceError, match="^Namespace does not exist: db$"):
        catalog.drop_namespace("db")
    with pytest.raises(NoSuchNamespaceError, match="^Namespace does not exist: db$"):
        catalog.load_namespace_properties("db")
    with pytest.raises(ValidationError, match="both removed and updated"):
        catalog.update_namespace_properties("other", removals={"a"}, updates={"a": "1"})


@SQL_CATALOG_LEGS
def test_multi_level_namespaces(catalog: SqlCatalog) -> None:
    catalog.create_namespace("a.b")
    catalog.create_namespace(("a", "c"))
    catalog.create_namespace("a_b")  # '_' is a LIKE wildcard: must not match "a." prefixes
    assert catalog.list_namespaces() == [("a",), ("a_b",)]
    assert catalog.list_namespaces("a") == [("a", "b"), ("a", "c")]
    assert catalog.list_namespaces(("a", "b")) == []
    assert catalog.namespace_exists("a")  # implied by its children, as in the JDBC catalog
    with pytest.raises(NamespaceNotEmptyError, match=r"a\.b.*drop them first"):
        catalog.drop_namespace("a")
    with pytest.raises(NoSuchNamespaceError):
        catalog.list_namespaces("zzz")
    rows = _rows(str(catalog.engine.url.render_as_string(hide_password=False)),
                 "SELECT namespace, property_key, property_value FROM iceberg_namespace_properties "
                 "WHERE catalog_name = :c ORDER BY namespace", c=catalog.name)
    assert rows == [("a.b", "exists", "true"), ("a.c", "exists", "true"), ("a_b", "exists", "true")]


@SQL_CATALOG_LEGS
def test_catalogs_are_isolated_by_name(catalog: SqlCatalog, warehouse: Warehouse) -> None:
    catalog.create_namespace("db")
    other = SqlCatalog("another", uri=catalog.engine.url.render_as_string(hide_password=False),
                       warehouse=warehouse.location, **warehouse.properties)
    try:
        assert other.list_namespaces() == []
        other.create_namespace("db")  # same namespace name, other catalog: no clash
    finally:
        other.close()


# -- tables ----------------------------------------------------------------------------------------


@SQL_CATALOG_LEGS
def test_create_and_load_table(catalog: SqlCatalog, warehouse: Warehouse) -> None:
    catalog.create_namespace("db")
    catalog.create_table("db.events", SCHEMA, partition_by=["day(ts)", "country"], properties={"owner": "x"})
    location, metadata = catalog.load_table_metadata(("db", "events"))

    assert metadata.location == f"{warehouse.uri}/db/events"
    assert location.startswith(f"{warehouse.uri}/db/events/metadata/00000-")
    assert location.endswith(".metadata.json") and parse_metadata_version(location) == 0
    assert [f.name for f in metadata.schema().fields] == ["id", "ts", "country"]
    assert [f.field_id for f in metadata.schema().fields] == [1, 2, 3]
    assert metadata.schema().fields[0].required
    assert [str(f.transform) for f in metadata.spec().fields] == ["day", "identity"]
    assert metadata.properties["owner"] == "x"
    assert metadata.format_version == 2

    raw = json.loads(load_file_io(warehouse.properties).new_input(location).read())
    assert raw["location"] == metadata.location and raw["format-version"] == 2
    assert raw["table-uuid"] == str(metadata.table_uuid)

    assert catalog.table_exists("db.events") and not catalog.table_exists("db.nope")
    assert catalog.list_tables("db") == [("db", "events")]
    rows = _rows(catalog.engine.url.render_as_string(hide_password=False),
                 "SELECT table_namespace, table_name, metadata_location, previous_metadata_location, "
                 "iceberg_type FROM iceberg_tables WHERE catalog_name = :c", c=catalog.name)
    assert rows == [("db", "events", location, None, "TABLE")]


@SQL_CATALOG_LEGS
def test_create_table_errors(catalog: SqlCatalog, warehouse: Warehouse) -> None:
    with pytest.raises(NoSuchNamespaceError, match=r"^Namespace does not exist: db \(cannot create table db\.t; create the namespace first\)$"):
        catalog.create_table("db.t", SCHEMA)
    catalog.create_namespace("db")
    catalog.create_table("db.t", SCHEMA)
    with pytest.raises(TableAlreadyExistsError, match=r"^Table already exists: db\.t$"):
        catalog.create_table("db.t", SCHEMA)
    with pytest.raises(ValidationError, match="nope"):
        catalog.create_table("db.t2", SCHEMA, partition_by=["day(nope)"])
    with pytest.raises(NoSuchNamespaceError):
        catalog.drop_namespace("missing")
    with pytest.raises(NamespaceNotEmptyError, match=r"db\.t.*drop them first.*CASCADE"):
        catalog.drop_namespace("db")
    # Only the one table's metadata file was written.
    files = load_file_io(warehouse.properties).list_prefix(warehouse.location)
    assert len([f for f in files if f.path.endswith(".metadata.json")]) == 1


@SQL_CATALOG_LEGS
def test_explicit_and_namespace_locations(catalog: SqlCatalog, warehouse: Warehouse) -> None:
    catalog.create_namespace("db", {"location": f"{warehouse.location}/custom-db/"})
    catalog.create_table("db.t", SCHEMA)
    assert catalog.load_table_metadata("db.t")[1].location == f"{warehouse.uri}/custom-db/t"
    catalog.create_table("db.u", SCHEMA, location=f"{warehouse.location}/elsewhere/u/")
    location, metadata = catalog.load_table_metadata("db.u")
    assert metadata.location == f"{warehouse.uri}/elsewhere/u"
    assert location.startswith(f"{warehouse.uri}/elsewhere/u/metadata/00000-")
    catalog.create_namespace("a.b")
    catalog.create_table("a.b.t", SCHEMA)
    assert catalog.load_table_metadata(("a", "b", "t"))[1].location == f"{warehouse.uri}/a/b/t"


@SQL_CATALOG_LEGS
def test_rename_and_drop(catalog: SqlCatalog, warehouse: Warehouse) -> None:
    catalog.create_namespace("db")
    catalog.create_namespace("other")
    catalog.create_table("db.t", SCHEMA)
    catalog.create_table("db.u", SCHEMA)
    location, _ = catalog.load_table_metadata("db.t")

    with pytest.raises(NoSuchNamespaceError, match=r"^Namespace does not exist: missing \(cannot rename db\.t to missing\.t"):
        catalog.rename_table("db.t", "missing.t")
    with pytest.raises(TableAlreadyExistsError, match=r"^Cannot rename db\.t to db\.u\. Table already exists$"):
        catalog.rename_table("db.t", "db.u")
    with pytest.raises(NoSuchTableError, match=r"^Table does not exist: db\.nope$"):
        catalog.rename_table("db.nope", "other.x")

    catalog.rename_table("db.t", "other.t2")
    assert catalog.list_tables("db") == [("db", "u")]
    assert catalog.list_tables("other") == [("other", "t2")]
    assert catalog.load_table_metadata("other.t2")[0] == location  # files do not move

    catalog.drop_table("other.t2")
    assert not catalog.table_exists("other.t2")
    assert load_file_io(warehouse.properties).new_input(location).exists()  # no purge: files stay
    with pytest.raises(NoSuchTableError, match=r"^Table does not exist: other\.t2$"):
        catalog.drop_table("other.t2")
    with pytest.raises(NoSuchTableError, match=r"^Table does not exist: other\.t2$"):
        catalog.load_table_metadata("other.t2")


@SQL_CATALOG_LEGS
def test_register_table(catalog: SqlCatalog) -> None:
    catalog.create_namespace("db")
    catalog.create_table("db.t", SCHEMA)
    location, metadata = catalog.load_table_metadata("db.t")
    catalog.drop_table("db.t")
    catalog.register_table("db.back", location)
    again_location, again = catalog.load_table_metadata("db.back")
    assert again_location == location and again.table_uuid == metadata.table_uuid
    with pytest.raises(TableAlreadyExistsError):
        catalog.register_table("db.back", location)


@SQL_CATALOG_LEGS
def test_load_table_returns_a_table(catalog: SqlCatalog) -> None:
    catalog.create_namespace("db")
    created = catalog.create_table("db.t", SCHEMA)
    table = catalog.load_table("db.t")
    assert table.identifier == ("db", "t")
    assert table.metadata_location == created.metadata_location
    assert table.metadata.table_uuid == created.metadata.table_uuid


# -- commits ---------------------------------------------------------------------------------------


@SQL_CATALOG_LEGS
def test_commit_table(catalog: SqlCatalog, warehouse: Warehouse) -> None:
    from tablestore.spec.metadata.update_models import requirement_from_json

    catalog.create_namespace("db")
    catalog.create_table("db.t", SCHEMA)
    base_location, base = catalog.load_table_metadata("db.t")
    requirement = requirement_from_json({"type": "assert-table-uuid", "uuid": str(base.table_uuid)})
    location, metadata = catalog.commit_table("db.t", [requirement], [_set_properties(k="v")])

    assert parse_metadata_version(location) == 1
    assert location.startswith(f"{warehouse.uri}/db/t/metadata/00001-")
    assert metadata.properties["k"] == "v"
    assert catalog.load_table_metadata("db.t") == (location, metadata)
    rows = _rows(catalog.engine.url.render_as_string(hide_password=False),
                 "SELECT metadata_location, previous_metadata_location FROM iceberg_tables "
                 "WHERE catalog_name = :c", c=catalog.name)
    assert rows == [(location, base_location)]

    wrong = requirement_from_json({"type": "assert-table-uuid", "uuid": str(uuid.uuid4())})
    with pytest.raises(CommitConflictError):
        catalog.commit_table("db.t", [wrong], [_set_properties(k="w")])
    assert catalog.load_table_metadata("db.t")[0] == location
    with pytest.raises(NoSuchTableError):
        catalog.commit_table("db.nope", [], [_set_properties(k="v")])


@SQL_CATALOG_LEGS
def test_commit_creates_table_with_assert_create(catalog: SqlCatalog, warehouse: Warehouse) -> None:
    """A create transaction (as a REST client sends it) goes through commit_table."""
    from tablestore.spec.metadata.update_models import requirement_from_json, update_from_json

    catalog.create_namespace("db")
    table_uuid = str(uuid.uuid4())
    schema = {"type": "struct", "schema-id": 0, "fields": [
        {"id": 1, "name": "id", "required": True, "type": "long"},
    ]}
    updates = [update_from_json(u) for u in [
        {"action": "assign-uuid", "uuid": table_uuid},
        {"action": "upgrade-format-version", "format-version": 2},
        {"action": "add-schema", "schema": schema, "last-column-id": 1},
        {"action": "set-current-schema", "schema-id": -1},
        {"action": "add-spec", "spec": {"spec-id": 0, "fields": []}},
        {"action": "set-default-spec", "spec-id": -1},
        {"action": "add-sort-order", "sort-order": {"order-id": 0, "fields": []}},
        {"action": "set-default-sort-order", "sort-order-id": -1},
        {"action": "set-location", "location": f"{warehouse.uri}/db/made"},
        {"action": "set-properties", "updates": {"created-by": "commit"}},
    ]]
    create = requirement_from_json({"type": "assert-create"})
    location, metadata = catalog.commit_table("db.made", [create], updates)
    assert parse_metadata_version(location) == 0
    assert location.startswith(f"{warehouse.uri}/db/made/metadata/00000-")
    assert str(metadata.table_uuid) == table_uuid and metadata.properties["created-by"] == "commit"
    assert catalog.load_table_metadata("db.made") == (location, metadata)
    # A second create of the same table fails its requirement.
    with pytest.raises(CommitConflictError):
        catalog.commit_table("db.made", [create], updates)


@SQL_CATALOG_LEGS
def test_commit_loses_compare_and_swap(
    catalog: SqlCatalog, warehouse: Warehouse, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two catalog objects commit against the same base: the first wins, the second conflicts."""
    catalog.create_namespace("db")
    catalog.create_table("db.t", SCHEMA)
    other = _second_catalog(catalog, warehouse)
    try:
        stale = other.load_table_metadata("db.t")
        winner_location, _ = catalog.commit_table("db.t", [], [_set_properties(a="1")])
        # `other` still believes the table is at `stale` when it swaps.
        monkeypatch.setattr(other, "load_table_metadata", lambda identifier: stale)
        with pytest.raises(CommitConflictError, match="changed by another commit"):
            other.commit_table("db.t", [], [_set_properties(b="2")])
    finally:
        other.close()
    location, metadata = catalog.load_table_metadata("db.t")
    assert location == winner_location
    assert metadata.properties.get("a") == "1" and "b" not in metadata.properties
    # The loser deleted its metadata file: only versions 0 and 1 exist.
    files = load_file_io(warehouse.properties).list_prefix(f"{warehouse.location}/db/t/metadata")
    assert sorted(parse_metadata_version(f.path) for f in files) == [0, 1]


@SQL_CATALOG_LEGS
def test_concurrent_commits_exactly_one_wins(
    catalog: SqlCatalog, warehouse: Warehouse, monkeypatch: pytest.MonkeyPatch
) -> None:
    catalog.create_namespace("db")
    catalog.create_table("db.t", SCHEMA)
    base = catalog.load_table_metadata("db.t")
    catalogs = [_second_catalog(catalog, warehouse) for _ in range(4)]
    for c in catalogs:
        monkeypatch.setattr(c, "load_table_metadata", lambda identifier: base)
    barrier = threading.Barrier(len(catalogs))
    outcomes: list[str] = []
    lock = threading.Lock()

    def commit(i: int) -> None:
        barrier.wait()
        try:
            catalogs[i].commit_table("db.t", [], [_set_properties(writer=str(i))])
            result = f"won:{i}"
        except CommitConflictError:
            result = "lost"
        with lock:
            outcomes.append(result)

    threads = [threading.Thread(target=commit, args=(i,)) for i in range(len(catalogs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for c in catalogs:
        c.close()
    winners = [o for o in outcomes if o.startswith("won")]
    assert len(winners) == 1 and outcomes.count("lost") == len(catalogs) - 1
    _, metadata = catalog.load_table_metadata("db.t")
    assert metadata.properties["writer"] == winners[0].split(":")[1]
    files = load_file_io(warehouse.properties).list_prefix(f"{warehouse.location}/db/t/metadata")
    assert len(files) == 2


def test_two_processes_commit_to_sqlite(tmp_path: Path) -> None:
    """Two processes commit in a loop (retrying conflicts); no commit is lost, no lock error."""
    uri = f"sqlite:///{tmp_path / 'cat.db'}"
    warehouse = str(tmp_path / "wh")
    catalog = SqlCatalog("procs", uri=uri, warehouse=warehouse)
    catalog.create_namespace("db")
    catalog.create_table("db.t", SCHEMA)
    script = textwrap.dedent(f"""
        import sys
        from tablestore.catalog.sql_catalog import SqlCatalog
        from tablestore.errors import CommitConflictError
        from tablestore.spec.metadata.update_models import update_from_json
        writer = sys.argv[1]
        catalog = SqlCatalog("procs", uri={uri!r}, warehouse={warehouse!r})
        for i in range(15):
            update = update_from_json({{"action": "set-properties", "updates": {{f"{{writer}}-{{i}}": "x"}}}})
            while True:
                try:
                    catalog.commit_table("db.t", [], [update])
                    break
                except CommitConflictError:
                    pass
    """)
    procs = [subprocess.Popen([sys.executable, "-c", script, w], cwd=str(Path(__file__).parents[2]),
                              stderr=subprocess.PIPE) for w in ("p", "q")]
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err.decode()
    location, metadata = catalog.load_table_metadata("db.t")
    expected = {f"{w}-{i}" for w in ("p", "q") for i in range(15)}
    assert expected <= set(metadata.properties)
    assert parse_metadata_version(location) == 30


# -- names -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", ["", " ", "a/b", "a\\b", "..", "x..y", "a\x00b", "tab\tname", "nl\n"])
def test_bad_names_are_rejected(tmp_path: Path, bad: str) -> None:
    catalog = SqlCatalog("names", uri=f"sqlite:///{tmp_path / 'c.db'}", warehouse=str(tmp_path / "wh"))
    with pytest.raises(InvalidNameError) as info:
        catalog.create_namespace((bad,))
    assert repr(bad) in str(info.value) or (bad.strip() == "" and "empty" in str(info.value))
    catalog.create_namespace("db")
    with pytest.raises(InvalidNameError, match=r"not allowed|empty"):
        catalog.create_table(("db", bad), SCHEMA)
    assert catalog.list_namespaces() == [("db",)]
    assert catalog.list_tables("db") == []


def test_identifier_forms(tmp_path: Path) -> None:
    catalog = SqlCatalog("names", uri=f"sqlite:///{tmp_path / 'c.db'}", warehouse=str(tmp_path / "wh"))
    with pytest.raises(InvalidNameError, match="'t' has no namespace"):
        catalog.create_table("t", SCHEMA)
    with pytest.raises(InvalidNameError, match=r"'db\.\.t'"):
        catalog.load_table_metadata("db..t")
    with pytest.raises(InvalidNameError, match="longer than 255"):
        catalog.create_namespace("x" * 300)


def test_namespace_levels_may_contain_dots(tmp_path: Path) -> None:
    uri = f"sqlite:///{tmp_path / 'c.db'}"
    catalog = SqlCatalog("names", uri=uri, warehouse=str(tmp_path / "wh"))
    catalog.create_namespace(("new.db",))
    catalog.create_namespace(("new",))
    catalog.create_namespace(("new.db", "x.y"))
    assert catalog.namespace_exists(("new.db",)) and not catalog.namespace_exists(("new", "db"))
    assert catalog.list_namespaces() == [("new",), ("new.db",)]
    assert catalog.list_namespaces(("new.db",)) == [("new.db", "x.y")]
    assert catalog.list_namespaces(("new",)) == []
    table = catalog.create_table(("new.db", "x.y", "ta.ble"), SCHEMA)
    assert table.location == f"file://{tmp_path}/wh/new.db/x.y/ta.ble"
    assert catalog.list_tables(("new.db", "x.y")) == [("new.db", "x.y", "ta.ble")]
    # The JDBC layout joins levels with dots; a dot inside a level is stored as \x1e, so
    # every other JDBC reader still sees two levels where there are two.
    assert _rows(uri, "SELECT DISTINCT table_namespace FROM iceberg_tables") == [("new\x1edb.x\x1ey",)]
    catalog.drop_table(("new.db", "x.y", "ta.ble"))
    catalog.drop_namespace(("new.db", "x.y"))
    catalog.drop_namespace(("new.db",))
    assert catalog.list_namespaces() == [("new",)]


# -- setup, configuration, secrets --------------------------------------------------------------------


def test_load_catalog(tmp_path: Path) -> None:
    warehouse = tmp_path / "wh"
    catalog = load_catalog("default", warehouse=str(warehouse))  # type sql, database in the warehouse
    assert isinstance(catalog, SqlCatalog)
    catalog.create_namespace("db")
    assert (warehouse / "catalog.db").exists()
    with pytest.raises(ValidationError, match="unknown catalog type 'hive'"):
        load_catalog("x", type="hive", warehouse=str(warehouse))
    with pytest.raises(ValidationError, match="uri"):
        load_catalog("x", type="sql", warehouse="s3://bucket/wh")


def test_sqlite_parent_directory_is_created_and_wal_enabled(tmp_path: Path) -> None:
    db = tmp_path / "deep" / "er" / "cat.db"
    SqlCatalog("c", uri=f"sqlite:///{db}", warehouse=str(tmp_path / "wh")).create_namespace("db")
    assert db.exists()
    assert _rows(f"sqlite:///{db}", "PRAGMA journal_mode") == [("wal",)]


def test_tables_created_once_by_concurrent_processes(tmp_path: Path) -> None:
    uri = f"sqlite:///{tmp_path / 'fresh.db'}"
    script = (
        "import sys; from tablestore.catalog.sql_catalog import SqlCatalog; "
        f"SqlCatalog('c' + sys.argv[1], uri={uri!r}, warehouse={str(tmp_path)!r}).list_namespaces()"
    )
    procs = [subprocess.Popen([sys.executable, "-c", script, str(i)], stderr=subprocess.PIPE,
                              cwd=str(Path(__file__).parents[2])) for i in range(4)]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err.decode()
    names = _rows(uri, "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
    assert names == [("iceberg_namespace_properties",), ("iceberg_tables",)]


@pytest.mark.postgres
def test_postgres_tables_created_concurrently(postgres_uri: str, tmp_path: Path) -> None:
    errors: list[BaseException] = []
    barrier = threading.Barrier(4)

    def start(i: int) -> None:
        barrier.wait()
        try:
            SqlCatalog(f"c{i}", uri=postgres_uri, warehouse=str(tmp_path)).close()
        except BaseException as e:  # collected and reported below
            errors.append(e)

    threads = [threading.Thread(target=start, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    catalog = SqlCatalog("c0", uri=postgres_uri, warehouse=str(tmp_path))
    catalog.create_namespace("db")
    assert catalog.list_namespaces() == [("db",)]
    catalog.close()


def test_v0_schema_without_iceberg_type(tmp_path: Path) -> None:
    """A database of an older JDBC catalog (no iceberg_type column) is used as it is."""
    uri = f"sqlite:///{tmp_path / 'v0.db'}"
    engine = create_engine(uri)
    with engine.begin() as conn:
        conn.execute(text(
            "CREATE TABLE iceberg_tables (catalog_name VARCHAR(255) NOT NULL, "
            "table_namespace VARCHAR(255) NOT NULL, table_name VARCHAR(255) NOT NULL, "
            "metadata_location VARCHAR(1000), previous_metadata_location VARCHAR(1000), "
            "PRIMARY KEY (catalog_name, table_namespace, table_name))"
        ))
    engine.dispose()
    catalog = SqlCatalog("old", uri=uri, warehouse=str(tmp_path / "wh"))
    catalog.create_namespace("db")
    catalog.create_table("db.t", SCHEMA)
    assert catalog.list_tables("db") == [("db", "t")]
    location, _ = catalog.commit_table("db.t", [], [_set_properties(k="v")])
    assert parse_metadata_version(location) == 1
    columns = [r[1] for r in _rows(uri, "PRAGMA table_info(iceberg_tables)")]
    assert "iceberg_type" not in columns


def test_views_rows_are_not_tables(tmp_path: Path) -> None:
    uri = f"sqlite:///{tmp_path / 'c.db'}"
    catalog = SqlCatalog("c", uri=uri, warehouse=str(tmp_path / "wh"))
    catalog.create_namespace("db")
    engine = create_engine(uri)
    with engine.begin() as conn:
        conn.execute(text("INSERT INTO iceberg_tables VALUES ('c', 'db', 'v', '/x/v.json', NULL, 'VIEW')"))
    engine.dispose()
    assert catalog.list_tables("db") == []
    assert not catalog.table_exists("db.v")
    with pytest.raises(NoSuchTableError):
        catalog.load_table_metadata("db.v")
    with pytest.raises(TableAlreadyExistsError, match="view"):
        catalog.create_table("db.v", SCHEMA)


def test_secrets_stay_out_of_reprs(tmp_path: Path) -> None:
    catalog = SqlCatalog(
        "c", uri=f"sqlite:///{tmp_path / 'c.db'}", warehouse=str(tmp_path / "wh"),
        **{"s3.secret-access-key": "SUPERSECRET", "s3.access-key-id": "AKID"},
    )
    assert "SUPERSECRET" not in repr(catalog) and "SUPERSECRET" not in repr(catalog.io)
    with pytest.raises(ValidationError) as info:
        SqlCatalog("c", uri="postgresql+psycopg2://user:SUPERSECRET@host:notaport/db")
    assert "SUPERSECRET" not in str(info.value)
    pg = SqlCatalog.__new__(SqlCatalog)
    pg.name, pg.warehouse = "p", None
    pg.engine = create_engine("postgresql+psycopg2://user:SUPERSECRET@localhost:1/db")
    assert "SUPERSECRET" not in repr(pg) and "***" in repr(pg)


# -- pyiceberg interoperability ------------------------------------------------------------------------


@pytest.fixture
def shared_uri(catalog_uri: str) -> str:
    if catalog_uri.startswith("sqlite:///"):
        # pyiceberg does not create the database's directory (ours does).
        Path(catalog_uri.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    return catalog_uri


def test_pyiceberg_reads_ours(shared_uri: str, tmp_path: Path) -> None:
    from pyiceberg.catalog.sql import SqlCatalog as PySqlCatalog

    warehouse = str(tmp_path / "wh")
    ours = SqlCatalog("shared", uri=shared_uri, warehouse=warehouse)
    ours.create_namespace("db", {"owner": "ana"})
    ours.create_namespace("a.b")
    ours.create_table("db.t", SCHEMA, partition_by=["country"])
    location, metadata = ours.load_table_metadata("db.t")

    theirs = PySqlCatalog("shared", uri=shared_uri, warehouse=warehouse)
    assert sorted(theirs.list_namespaces()) == [("a",), ("db",)]
    assert theirs.list_namespaces("a") == [("a", "b")]
    assert theirs.load_namespace_properties("db")["owner"] == "ana"
    assert theirs.list_tables("db") == [("db", "t")]
    table = theirs.load_table("db.t")
    assert table.metadata_location == location
    assert str(table.metadata.table_uuid) == str(metadata.table_uuid)
    assert [f.name for f in table.schema().fields] == ["id", "ts", "country"]

    # pyiceberg commits to our table; we see its commit through the same catalog row.
    table.append(pa.table({"id": [1, 2], "ts": pa.array([None, None], pa.timestamp("us")),
                           "country": ["de", "fr"]}, schema=SCHEMA))
    new_location, new_metadata = ours.load_table_metadata("db.t")
    assert new_location == theirs.load_table("db.t").metadata_location
    assert parse_metadata_version(new_location) == 1
    snapshot = new_metadata.current_snapshot()
    assert snapshot is not None and snapshot.summary["added-records"] == "2"
    theirs.engine.dispose()
    ours.close()


def test_ours_reads_pyiceberg(shared_uri: str, tmp_path: Path) -> None:
    from pyiceberg.catalog.sql import SqlCatalog as PySqlCatalog

    warehouse = str(tmp_path / "wh")
    theirs = PySqlCatalog("shared", uri=shared_uri, warehouse=warehouse)
    theirs.create_namespace("db", {"owner": "bo"})  # pyiceberg writes no marker row here
    theirs.create_namespace("empty")
    py_table = theirs.create_table("db.t", SCHEMA)
    py_table.append(pa.table({"id": [7], "ts": pa.array([None], pa.timestamp("us")), "country": ["it"]},
                             schema=SCHEMA))

    ours = SqlCatalog("shared", uri=shared_uri, warehouse=warehouse)
    assert ours.list_namespaces() == [("db",), ("empty",)]
    assert ours.load_namespace_properties("db") == {"owner": "bo"}
    assert ours.list_tables("db") == [("db", "t")]
    location, metadata = ours.load_table_metadata("db.t")
    assert location == theirs.load_table("db.t").metadata_location
    assert [f.name for f in metadata.schema().fields] == ["id", "ts", "country"]
    assert metadata.current_snapshot() is not None

    # And we commit on top of pyiceberg's metadata; pyiceberg sees it.
    new_location, _ = ours.commit_table("db.t", [], [_set_properties(k="v")])
    reloaded = theirs.load_table("db.t")
    assert reloaded.metadata_location == new_location
    assert reloaded.properties["k"] == "v"
    assert parse_metadata_version(new_location) == parse_metadata_version(location) + 1
    ours.drop_table("db.t")
    assert theirs.list_tables("db") == []
    theirs.engine.dispose()
    ours.close()

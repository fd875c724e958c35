"""View metadata (format/view-spec.md): JSON both ways, versions on replace, and pyiceberg's model."""

from __future__ import annotations

import gzip
import json
from typing import Any

import pytest

from tablestore.errors import CorruptMetadataError, UnsupportedError, ValidationError
from tablestore.spec.metadata.view import (
    SQLViewRepresentation,
    UnknownViewRepresentation,
    View,
    ViewHistoryEntry,
    ViewMetadata,
    new_view_metadata,
    parse_view_metadata,
    serialize_view_metadata,
)
from tablestore.spec.schemas.schema import Schema
from tablestore.spec.schemas.types import IntegerType, LongType, NestedField, StringType

UUID = "fa6506c3-7681-40c8-86dc-e36561f83385"
SCHEMA = Schema((NestedField(1, "id", LongType(), required=True), NestedField(2, "name", StringType())))
OTHER_SCHEMA = Schema((NestedField(1, "n", IntegerType()),))

# The example of the view spec ("Appendix A"), as Java's ViewMetadataParser writes it: a Spark
# and a Trino representation, a summary with engine fields, a non-zero schema id.
SPEC_EXAMPLE: dict[str, Any] = {
    "view-uuid": UUID,
    "format-version": 1,
    "location": "s3://bucket/warehouse/default.db/event_agg",
    "current-version-id": 1,
    "properties": {"comment": "Daily event counts"},
    "versions": [{
        "version-id": 1,
        "timestamp-ms": 1573518431292,
        "schema-id": 1,
        "default-catalog": "prod",
        "default-namespace": ["default"],
        "summary": {"engine-name": "Spark", "engineVersion": "3.3.2"},
        "representations": [
            {"type": "sql", "sql": "SELECT\n    COUNT(1), CAST(event_ts AS DATE)\nFROM events\n"
             "GROUP BY 2", "dialect": "spark"},
            {"type": "sql", "sql": "SELECT count(1), CAST(event_ts AS DATE) FROM events GROUP BY 2",
             "dialect": "trino"},
        ],
    }],
    "schemas": [{
        "schema-id": 1,
        "type": "struct",
        "fields": [
            {"id": 1, "name": "event_count", "required": False, "type": "int", "doc": "Count of events"},
            {"id": 2, "name": "event_date", "required": False, "type": "date"},
        ],
    }],
    "version-log": [{"timestamp-ms": 1573518431292, "version-id": 1}],
}


def _new(**kwargs: Any) -> ViewMetadata:
    args: dict[str, Any] = {
        "location": "/wh/db/v", "schema": SCHEMA, "sql": "SELECT id, name FROM t",
        "default_namespace": ("db",), "default_catalog": "local", "view_uuid": UUID, "timestamp_ms": 1000,
    }
    args.update(kwargs)
    return new_view_metadata(**args)


def test_new_view_metadata_json_is_the_spec_shape() -> None:
    metadata = _new(properties={"comment": "people"})
    assert metadata.to_json() == {
        "view-uuid": UUID,
        "format-version": 1,
        "location": "/wh/db/v",
        "properties": {"comment": "people"},
        "schemas": [{
            "type": "struct",
            "schema-id": 0,
            "fields": [
                {"id": 1, "name": "id", "required": True, "type": "long"},
                {"id": 2, "name": "name", "required": False, "type": "string"},
            ],
        }],
        "current-version-id": 1,
        "versions": [{
            "version-id": 1,
            "timestamp-ms": 1000,
            "schema-id": 0,
            "summary": {"engine-name": "tablestore"},
            "default-catalog": "local",
            "default-namespace": ["db"],
            "representations": [{"type": "sql", "sql": "SELECT id, name FROM t", "dialect": "spark"}],
        }],
        "version-log": [{"timestamp-ms": 1000, "version-id": 1}],
    }


def test_json_round_trip_and_file_bytes() -> None:
    metadata = _new()
    assert ViewMetadata.from_json(metadata.to_json()) == metadata
    assert parse_view_metadata(serialize_view_metadata(metadata)) == metadata
    # Java writes view metadata gzip-compressed by default (.gz.metadata.json).
    assert parse_view_metadata(gzip.compress(serialize_view_metadata(metadata))) == metadata


def test_without_default_catalog_the_key_is_omitted() -> None:
    version = _new(default_catalog=None, default_namespace=()).to_json()["versions"][0]
    assert "default-catalog" not in version
    assert version["default-namespace"] == []


def test_reads_the_spec_example() -> None:
    metadata = ViewMetadata.from_json(SPEC_EXAMPLE)
    version = metadata.current_version()
    assert (version.version_id, version.schema_id, version.timestamp_ms) == (1, 1, 1573518431292)
    assert version.default_catalog == "prod" and version.default_namespace == ("default",)
    assert version.summary == {"engine-name": "Spark", "engineVersion": "3.3.2"}
    assert version.sql_representation("TRINO") == SQLViewRepresentation(
        "SELECT count(1), CAST(event_ts AS DATE) FROM events GROUP BY 2", "trino"
    )
    assert metadata.schema().column_names == ["event_count", "event_date"]
    assert metadata.schema().fields[0].doc == "Count of events"
    assert metadata.properties == {"comment": "Daily event counts"}
    assert metadata.version_log == (ViewHistoryEntry(1573518431292, 1),)
    assert metadata.to_json() == SPEC_EXAMPLE


def test_unknown_fields_and_representations_are_kept() -> None:
    obj = json.loads(json.dumps(SPEC_EXAMPLE))
    obj["future-field"] = {"x": 1}
    obj["versions"][0]["representations"].append({"type": "substrait", "plan": "AAEC"})
    metadata = ViewMetadata.from_json(obj)
    reps = metadata.current_version().representations
    assert reps[2] == UnknownViewRepresentation({"type": "substrait", "plan": "AAEC"})
    assert reps[2].type == "substrait"
    assert metadata.to_json() == obj


def test_pyiceberg_reads_ours_and_we_read_pyiceberg() -> None:
    from pyiceberg.view.metadata import ViewMetadata as PyViewMetadata

    ours = _new(properties={"comment": "people"})
    theirs = PyViewMetadata.model_validate_json(serialize_view_metadata(ours))
    assert theirs.view_uuid == UUID and theirs.current_version_id == 1
    version = theirs.versions[0]
    assert version.representations[0].root.sql == "SELECT id, name FROM t"
    assert version.representations[0].root.dialect == "spark"
    assert tuple(version.default_namespace) == ("db",) and version.default_catalog == "local"
    assert [f.name for f in theirs.schemas[0].fields] == ["id", "name"]
    assert theirs.schemas[0].fields[0].required

    back = parse_view_metadata(theirs.model_dump_json(by_alias=True, exclude_none=True).encode())
    assert back == ours


def test_replace_adds_a_version_and_logs_it() -> None:
    first = _new()
    second = first.replace("SELECT n FROM u", OTHER_SCHEMA, ("db",), "local", {"owner": "ana"}, timestamp_ms=2000)
    assert second.current_version_id == 2
    assert [v.version_id for v in second.versions] == [1, 2]
    assert second.current_version().sql_representation().sql == "SELECT n FROM u"  # type: ignore[union-attr]
    assert [s.schema_id for s in second.schemas] == [0, 1]
    assert second.schema().column_names == ["n"] and second.schema().schema_id == 1
    assert second.version_log == (ViewHistoryEntry(1000, 1), ViewHistoryEntry(2000, 2))
    assert second.properties == {"owner": "ana"}
    assert second.view_uuid == first.view_uuid and second.location == first.location
    # The first version is still there, unchanged.
    assert second.version_by_id(1) == first.current_version()


def test_replace_reuses_equal_schemas_and_identical_versions() -> None:
    first = _new()
    # Same schema (ids too) with new SQL: a new version on schema 0.
    second = first.replace("SELECT id, name FROM t2", SCHEMA.with_id(7), ("db",), "local", timestamp_ms=2000)
    assert [s.schema_id for s in second.schemas] == [0]
    assert second.current_version().schema_id == 0
    # Nothing changed: the very same metadata comes back (the catalog then writes nothing).
    assert second.replace("SELECT id, name FROM t2", SCHEMA, ("db",), "local") is second
    # Going back to the first definition makes version 1 current again, without a new version.
    third = second.replace("SELECT id, name FROM t", SCHEMA, ("db",), "local", timestamp_ms=3000)
    assert third.current_version_id == 1
    assert [v.version_id for v in third.versions] == [1, 2]
    assert [e.version_id for e in third.version_log] == [1, 2, 1]
    # Only a property change: same version, merged properties.
    fourth = third.replace("SELECT id, name FROM t", SCHEMA, ("db",), "local", {"k": "v"})
    assert fourth.current_version_id == 1 and fourth.versions == third.versions
    assert fourth.properties == {"k": "v"}


def test_old_versions_expire_by_version_history_num_entries() -> None:
    metadata = _new(properties={"version.history.num-entries": "2"})
    for i in range(2, 6):
        metadata = metadata.replace(f"SELECT {i}", SCHEMA, ("db",), "local", timestamp_ms=1000 * i)
    assert [v.version_id for v in metadata.versions] == [4, 5]
    assert metadata.current_version_id == 5
    assert [e.version_id for e in metadata.version_log] == [4, 5]
    with pytest.raises(ValidationError, match="no version 1"):
        metadata.version_by_id(1)


def test_invalid_view_definitions_are_refused() -> None:
    with pytest.raises(ValidationError, match="empty query"):
        _new(sql="  ")
    with pytest.raises(ValidationError, match="tuple of names"):
        _new(default_namespace="db")
    with pytest.raises(ValidationError, match="must be an integer"):
        _new(properties={"version.history.num-entries": "ten"}).replace("SELECT 2", SCHEMA, (), None)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda o: o.update({"format-version": 2}), "format-version 2"),
        (lambda o: o.pop("view-uuid"), "'view-uuid'"),
        (lambda o: o.update({"current-version-id": 9}), "current-version-id 9"),
        (lambda o: o["versions"][0].update({"schema-id": 5}), "unknown schema id 5"),
        (lambda o: o["versions"][0].update({"default-namespace": "default"}), "default-namespace"),
        (lambda o: o["versions"][0]["representations"][0].pop("sql"), "'sql'"),
        (lambda o: o.update({"versions": [o["versions"][0], o["versions"][0]]}), "duplicate version ids"),
        (lambda o: o["version-log"][0].update({"version-id": "1"}), "'version-id' has the wrong type"),
    ],
)
def test_corrupt_metadata_is_reported(change: Any, message: str) -> None:
    obj = json.loads(json.dumps(SPEC_EXAMPLE))
    change(obj)
    with pytest.raises(CorruptMetadataError, match=message):
        ViewMetadata.from_json(obj)


def test_corrupt_bytes_are_reported() -> None:
    with pytest.raises(CorruptMetadataError, match="not valid JSON"):
        parse_view_metadata(b"{nope")
    with pytest.raises(CorruptMetadataError, match="not valid gzip"):
        parse_view_metadata(b"\x1f\x8bnot gzip")


def test_view_accessors_read_the_current_version() -> None:
    view = View(("db", "event_agg"), "/x/00000-a.metadata.json", ViewMetadata.from_json(SPEC_EXAMPLE))
    assert view.sql.startswith("SELECT\n    COUNT(1)") and view.dialect == "spark"
    assert view.default_catalog == "prod" and view.default_namespace == ("default",)
    assert view.comment == "Daily event counts" and view.properties == {"comment": "Daily event counts"}
    assert view.schema.column_names == ["event_count", "event_date"]

    # A view with only Trino SQL still has SQL to show; one with no SQL at all does not.
    obj = json.loads(json.dumps(SPEC_EXAMPLE))
    obj["versions"][0]["representations"] = obj["versions"][0]["representations"][1:]
    trino_only = View(("db", "v"), "/x", ViewMetadata.from_json(obj))
    assert trino_only.sql.startswith("SELECT count(1)") and trino_only.dialect == "trino"
    obj["versions"][0]["representations"] = [{"type": "substrait", "plan": "AA"}]
    with pytest.raises(UnsupportedError, match="no SQL representation"):
        _ = View(("db", "v"), "/x", ViewMetadata.from_json(obj)).sql

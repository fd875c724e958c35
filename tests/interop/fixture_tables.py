"""The shared fixture tables every independent reader reads: what each one is and how it is written.

Each :class:`FixtureTable` is a recipe of commits through tablestore's public API; building runs
it in one catalog and records every snapshot it made with the row count the recipe expects at
that snapshot (worked out from the recipe's own inputs, so tablestore is checked too, not only
echoed). Between them the fixtures cover every partition transform, partition evolution (day to
hour and others), every kind of schema change, a struct that gained a field, merge-on-read and
copy-on-write deletes and updates, every type, and names with spaces, unicode and dots.
"""

from __future__ import annotations

import datetime
import decimal
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from tablestore.spec.schemas.schema import Schema, arrow_to_schema
from tablestore.spec.schemas.types import NestedField, UUIDType
from tablestore.table import Table

UTC = datetime.UTC
D = decimal.Decimal

NAMESPACE = "interop"


@dataclass(frozen=True)
class Step:
    """What one commit did, and how many rows the table must hold right after it."""

    description: str
    rows: int


Recipe = Callable[[Table], list[Step]]


@dataclass(frozen=True)
class FixtureTable:
    name: str
    schema: Schema | pa.Schema
    partition_by: list[str] | None
    recipe: Recipe
    properties: dict[str, str] | None = None
    about: str = ""


# -- data -----------------------------------------------------------------------------------------

def all_types_arrow() -> pa.Schema:
    return pa.schema([
        pa.field("id", pa.int64(), nullable=False),
        ("b", pa.bool_()),
        ("i", pa.int32()),
        ("l", pa.int64()),
        ("f", pa.float32()),
        ("d", pa.float64()),
        ("dec", pa.decimal128(10, 2)),
        ("wide_dec", pa.decimal128(38, 6)),
        ("dt", pa.date32()),
        ("ts", pa.timestamp("us")),
        ("tstz", pa.timestamp("us", tz="UTC")),
        ("s", pa.string()),
        ("u", pa.binary(16)),  # made an Iceberg uuid below
        ("fx", pa.binary(4)),
        ("bin", pa.binary()),
        ("st", pa.struct([("x", pa.int32()), ("y", pa.string())])),
        ("lst", pa.list_(pa.int64())),
        ("mp", pa.map_(pa.string(), pa.float64())),
        ("nested", pa.list_(pa.struct([("k", pa.string()), ("v", pa.list_(pa.int32()))]))),
    ])


def all_types_schema() -> Schema:
    """Every type but time (Spark has none; see the ``time_type`` fixture), with ``u`` a uuid."""
    schema = arrow_to_schema(all_types_arrow())
    fields = tuple(NestedField(f.field_id, f.name, UUIDType(), f.required) if f.name == "u" else f
                   for f in schema.fields)
    return Schema(fields, schema.schema_id)


def all_types_rows(start: int, n: int) -> pa.Table:
    rows: dict[str, list[Any]] = {name: [] for name in all_types_arrow().names}
    for k in range(start, start + n):
        null = k % 7 == 3  # some nulls in every optional column
        rows["id"].append(k)
        rows["b"].append(None if null else k % 2 == 0)
        rows["i"].append(None if null else k * 3 - 50)
        rows["l"].append(None if null else k * 1_000_000_007 - 2**40)
        rows["f"].append(None if null else k / 4 - 3)
        rows["d"].append(None if null else (float("nan") if k % 11 == 5 else k * 1.25 - 3))
        rows["dec"].append(None if null else D(k * 137 - 400) / 100)
        rows["wide_dec"].append(None if null else D(f"{k * 10**20 + k}.{k:06d}") * (-1 if k % 2 else 1))
        rows["dt"].append(None if null else datetime.date(2023, 12, 25) + datetime.timedelta(days=k * 3))
        rows["ts"].append(None if null else datetime.datetime(2024, 1, 1, 10) + datetime.timedelta(hours=k * 7, microseconds=k))
        rows["tstz"].append(None if null else datetime.datetime(2024, 2, 28, 22, tzinfo=UTC) + datetime.timedelta(minutes=k * 97))
        rows["s"].append(None if null else f"str-{k:03d}-äé" + "x" * (k % 20))
        rows["u"].append(None if null else uuid.UUID(int=k * 7919 + 1 + (2**127 if k % 3 else 0)).bytes)
        rows["fx"].append(None if null else bytes([k % 256, 1, 2, 3]))
        rows["bin"].append(None if null else bytes(range(k % 9)))
        rows["st"].append(None if null else {"x": k, "y": None if k % 5 == 0 else f"y{k}"})
        rows["lst"].append(None if null else list(range(k % 4)))
        rows["mp"].append(None if null else [(f"k{j}", j * 0.5) for j in range(k % 3)])
        rows["nested"].append(None if null else [{"k": f"n{j}", "v": list(range(j))} for j in range(k % 3)])
    return pa.table(rows, schema=all_types_arrow())


def events_arrow() -> pa.Schema:
    """A smaller schema for the transform, evolution and delete fixtures."""
    return pa.schema([
        pa.field("id", pa.int64(), nullable=False),
        ("ts", pa.timestamp("us")),
        ("tstz", pa.timestamp("us", tz="UTC")),
        ("dt", pa.date32()),
        ("cat", pa.string()),
        ("n", pa.int32()),
        ("amount", pa.decimal128(9, 2)),
        ("payload", pa.binary()),
    ])


def events(start: int, n: int, base: datetime.datetime = datetime.datetime(2024, 3, 30, 20)) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table({
        "id": pa.array(ids, pa.int64()),
        "ts": [None if k % 13 == 6 else base + datetime.timedelta(minutes=k * 53) for k in ids],
        "tstz": [base.replace(tzinfo=UTC) + datetime.timedelta(hours=k * 5) for k in ids],
        "dt": [datetime.date(2023, 11, 28) + datetime.timedelta(days=k * 4) for k in ids],
        "cat": [None if k % 11 == 4 else ["north", "south", "east", "wëst"][k % 4] for k in ids],
        "n": [k * 7 - 100 for k in ids],
        "amount": [D(k * 313 - 2000) / 100 for k in ids],
        "payload": [bytes([k % 256]) * (k % 5) for k in ids],
    }, schema=events_arrow())


# -- recipes --------------------------------------------------------------------------------------

def appends_and_overwrite(rows: Callable[[int, int], pa.Table]) -> Recipe:
    """Two appends, then an overwrite of a range that crosses both."""
    def recipe(table: Table) -> list[Step]:
        table.append(rows(0, 40))
        table.append(rows(40, 25))
        table.overwrite(rows(1000, 6), filter="id >= 30 AND id < 50")
        return [Step("append 40", 40), Step("append 25", 65), Step("overwrite 20 ids with 6", 51)]
    return recipe


def day_to_hour(table: Table) -> list[Step]:
    """The pipeline's rollover: day(ts), then hour(ts), with deletes of both kinds across specs."""
    table.append(events(0, 30))
    with table.update_spec() as update:
        update.replace_field("ts_day", "hour(ts)")
    table.append(events(30, 30))
    table.update_properties({"write.delete.mode": "merge-on-read"})
    removed = table.delete(f"id IN ({', '.join(str(k) for k in range(12, 60, 3))})")  # files of both specs
    table.update_properties({"write.delete.mode": "copy-on-write"})
    removed_cow = table.delete("id >= 50 AND id < 54")
    return [Step("append under day(ts)", 30), Step("append under hour(ts)", 60),
            Step("merge-on-read delete across specs", 60 - removed),
            Step("copy-on-write delete", 60 - removed - removed_cow)]


def spec_changes(table: Table) -> list[Step]:
    """Unpartitioned, then identity(cat) added, bucket(4, id) added, identity(cat) dropped."""
    table.append(events(0, 20))
    with table.update_spec() as update:
        update.add_field("cat")
    table.append(events(20, 20))
    with table.update_spec() as update:
        update.add_field("bucket(4, id)")
    table.append(events(40, 20))
    with table.update_spec() as update:
        update.remove_field("cat")
    table.append(events(60, 20))
    table.update_properties({"write.delete.mode": "merge-on-read"})
    removed = table.delete("cat = 'south' OR id IN (3, 25, 45, 65)")
    return [Step("unpartitioned append", 20), Step("append under identity(cat)", 40),
            Step("append under cat, bucket(4, id)", 60), Step("append under bucket(4, id)", 80),
            Step("merge-on-read delete across four specs", 80 - removed)]


def schema_changes(table: Table) -> list[Step]:
    """Add, widen, rename, reorder and drop, with an append after each."""
    first = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "small": pa.array([10, None, -30], pa.int32()),
                      "ratio": pa.array([0.5, 1.5, None], pa.float32()), "price": pa.array([D("1.25"), None, D("-3.50")], pa.decimal128(9, 2)),
                      "gone": ["a", "b", None]})
    table.append(first)
    with table.update_schema() as update:
        update.add_column("added", "string")
    table.append(pa.table({"id": pa.array([4], pa.int64()), "small": pa.array([40], pa.int32()), "ratio": pa.array([2.5], pa.float32()),
                           "price": pa.array([D("4.00")], pa.decimal128(9, 2)), "gone": ["d"], "added": ["new"]}))
    with table.update_schema() as update:
        update.widen("small", "bigint")
        update.widen("ratio", "double")
        update.widen("price", "decimal(18, 2)")
    table.append(pa.table({"id": pa.array([5], pa.int64()), "small": pa.array([2**40], pa.int64()), "ratio": pa.array([1e300], pa.float64()),
                           "price": pa.array([D("1234567890123456.78")], pa.decimal128(18, 2)), "gone": ["e"], "added": [None]}))
    with table.update_schema() as update:
        update.rename_column("small", "big")
        update.move_first("added")
        update.move_after("id", "price")
    table.append(pa.table({"added": ["x"], "big": pa.array([6], pa.int64()), "ratio": pa.array([6.5], pa.float64()),
                           "price": pa.array([D("6.00")], pa.decimal128(18, 2)), "id": pa.array([6], pa.int64()), "gone": ["f"]}))
    with table.update_schema() as update:
        update.drop_column("gone")
    table.append(pa.table({"added": ["y"], "big": pa.array([7], pa.int64()), "ratio": pa.array([7.5], pa.float64()),
                           "price": pa.array([D("7.00")], pa.decimal128(18, 2)), "id": pa.array([7], pa.int64())}))
    return [Step("append 3", 3), Step("add column, append", 4), Step("widen int, float, decimal; append", 5),
            Step("rename and reorder, append", 6), Step("drop column, append", 7)]


def struct_gained_field(table: Table) -> list[Step]:
    """A struct column that gained a field: old files lack it and read null."""
    table.append(pa.table({"id": pa.array([1, 2], pa.int64()),
                           "st": pa.array([{"a": 1}, None], pa.struct([("a", pa.int32())]))}))
    with table.update_schema() as update:
        update.add_column(("st", "b"), "string")
    table.append(pa.table({"id": pa.array([3], pa.int64()),
                           "st": pa.array([{"a": 3, "b": "three"}], pa.struct([("a", pa.int32()), ("b", pa.string())]))}))
    return [Step("append with st{a}", 2), Step("st gains b, append", 3)]


def row_level(mode: str) -> Recipe:
    """DELETE and UPDATE in one write mode, on a table partitioned by identity(cat)."""
    def recipe(table: Table) -> list[Step]:
        table.update_properties({"write.delete.mode": mode, "write.update.mode": mode})
        table.append(events(0, 40))
        table.append(events(40, 20))
        first = table.delete(f"id IN ({', '.join(str(k) for k in range(1, 60, 4))})")
        updated = table.update({"amount": "CAST(amount * 2 AS DECIMAL(9, 2))", "cat": "'moved'"}, filter="id BETWEEN 10 AND 25")
        second = table.delete("cat = 'east' AND id > 30")
        assert updated > 0
        return [Step("append 40", 40), Step("append 20", 60), Step(f"{mode} delete", 60 - first),
                Step(f"{mode} update (rows move partition)", 60 - first),
                Step(f"{mode} delete in one partition", 60 - first - second)]
    return recipe


def odd_names(table: Table) -> list[Step]:
    table.append(pa.table({
        "id": pa.array([1, 2, 3, 4], pa.int64()),
        "with space": ["a b", "c d", None, "a b"],
        "ünïcødé 名前": [1.5, None, -2.0, 3.25],
        "dot.ted": pa.array([10, 20, 30, None], pa.int32()),
    }))
    table.append(pa.table({
        "id": pa.array([5], pa.int64()), "with space": ["x/y=z %"], "ünïcødé 名前": [0.0], "dot.ted": pa.array([50], pa.int32()),
    }))
    return [Step("append 4", 4), Step("append 1 (a partition value with / = and %)", 5)]


def time_rows(table: Table) -> list[Step]:
    table.append(pa.table({"id": pa.array([1, 2, 3], pa.int32()),
                           "t": pa.array([datetime.time(0, 0), datetime.time(13, 45, 7, 123456), None], pa.time64("us"))}))
    return [Step("append 3", 3)]


# What pandas and pyiceberg hand over: nanosecond timestamps (stored as microseconds in a v2
# table) and Arrow's uuid extension type (an Iceberg uuid).
ARROW_DEFAULTS = pa.schema([pa.field("id", pa.int64(), nullable=False), ("ts", pa.timestamp("ns")),
                            ("tstz", pa.timestamp("ns", tz="UTC")), ("u", pa.uuid()), ("us", pa.list_(pa.uuid()))])


def arrow_defaults_rows(table: Table) -> list[Step]:
    ts = [datetime.datetime(2024, 2, 29, 23, 59, 59, 999999), None, datetime.datetime(1969, 12, 31, 23, 59, 59, 1)]
    u = [uuid.UUID(int=7).bytes, None, uuid.UUID("f81d4fae-7dec-11d0-a765-00a0c91e6bf6").bytes]
    table.append(pa.table({
        "id": pa.array([1, 2, 3], pa.int64()),
        "ts": pa.array(ts, pa.timestamp("us")).cast(pa.timestamp("ns")),
        "tstz": pa.array([t and t.replace(tzinfo=UTC) for t in ts], pa.timestamp("us", tz="UTC")).cast(
            pa.timestamp("ns", tz="UTC")),
        "u": pa.array(u, pa.binary(16)).cast(pa.uuid()),
        "us": pa.array([[uuid.UUID(int=8).bytes], [], None], pa.list_(pa.binary(16))).cast(pa.list_(pa.uuid())),
    }, schema=ARROW_DEFAULTS))
    return [Step("append 3", 3)]


ODD_SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("with space", pa.string()),
                        ("ünïcødé 名前", pa.float64()), ("dot.ted", pa.int32())])

STRUCT_SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("st", pa.struct([("a", pa.int32())]))])

SCHEMA_CHANGES = pa.schema([pa.field("id", pa.int64(), nullable=False), ("small", pa.int32()), ("ratio", pa.float32()),
                            ("price", pa.decimal128(9, 2)), ("gone", pa.string())])

TRANSFORMS = {
    "identity": ["cat"],
    "bucket": ["bucket(8, id)", "bucket(4, cat)"],
    "truncate": ["truncate(2, cat)", "truncate(5, n)", "truncate(100, amount)"],
    "year": ["year(dt)"],
    "month": ["month(ts)"],
    "day": ["day(tstz)"],
    "hour": ["hour(ts)"],
    "void": ["void(n)"],
    "multi": ["day(ts)", "bucket(3, id)", "truncate(10, amount)", "cat"],
}

FIXTURES: tuple[FixtureTable, ...] = (
    FixtureTable("all_types", all_types_schema(), None, appends_and_overwrite(all_types_rows),
                 about="every type but time: primitives, decimal(38), uuid, fixed, struct, list, map, list of struct"),
    FixtureTable("all_types_partitioned", all_types_schema(), ["bucket(4, u)", "truncate(3, bin)", "dt"],
                 appends_and_overwrite(all_types_rows), about="partitioned by a uuid bucket, binary truncate, a date"),
    *(FixtureTable(f"transform_{name}", events_arrow(), by, appends_and_overwrite(events), about=f"partitioned by {', '.join(by)}")
      for name, by in TRANSFORMS.items()),
    FixtureTable("evolve_day_to_hour", events_arrow(), ["day(ts)"], day_to_hour,
                 about="day(ts) replaced by hour(ts); merge-on-read and copy-on-write deletes across both specs"),
    FixtureTable("evolve_specs", events_arrow(), None, spec_changes,
                 about="unpartitioned, + identity, + bucket, - identity; a merge-on-read delete across four specs"),
    FixtureTable("evolve_schema", SCHEMA_CHANGES, None, schema_changes,
                 about="add, widen (int, float, decimal), rename, reorder, drop"),
    FixtureTable("struct_gained_field", STRUCT_SCHEMA, None, struct_gained_field, about="a struct that gained a field"),
    FixtureTable("deletes_merge_on_read", events_arrow(), ["cat"], row_level("merge-on-read"),
                 about="DELETE and UPDATE as position deletes"),
    FixtureTable("deletes_copy_on_write", events_arrow(), ["cat"], row_level("copy-on-write"),
                 about="DELETE and UPDATE as rewritten files"),
    FixtureTable("odd names ü.x", ODD_SCHEMA, ["`with space`", "bucket(2, `dot.ted`)"], odd_names,
                 about="table and column names with spaces, unicode and dots; partition values with / = % and spaces"),
    FixtureTable("arrow_defaults", ARROW_DEFAULTS, None, arrow_defaults_rows, properties={"format-version": "2"},
                 about="a v2 table created from Arrow nanosecond timestamps and Arrow's uuid type"),
    FixtureTable("time_type", pa.schema([("id", pa.int32()), ("t", pa.time64("us"))]), ["t"], time_rows,
                 about="time, the one type Spark cannot read"),
)

FIXTURE_NAMES = [f.name for f in FIXTURES]

"""The SQL of ingestion: the landing table, the events table, its evolution and its rollover.

Every step is idempotent: DDL runs only when the table is not yet in the wanted state, and data
lands with ``INSERT OVERWRITE`` (dynamic: the partitions the rows fall into are replaced), only
for the partitions whose landing rows differ from main's, under a commit identifier.
"""

from __future__ import annotations

import datetime
import hashlib
import json
from dataclasses import dataclass, field

from pipelines.settings import PipelineSettings, table_name
from tablestore.spec.schemas.types import DecimalType, DoubleType, LongType
from tablestore.sql.options import COMMIT_ID
from tablestore.sql.session import SqlSession
from tablestore.table import Table

LANDING = table_name("landing_events")
EVENTS = table_name("events")
# The snapshot summary keys of a write made by Spark tasks (tablestore.spark.tasks.write_files).
WRITE_SUMMARY_PREFIX = "tablestore.write."
REQUESTS = table_name("erasure_requests")
# The landing table declares `device` from the start: files from before the source sent it
# have no such column and read NULL through the name mapping.
LANDING_COLUMNS = (
    "event_id BIGINT, event_ts TIMESTAMP, user_id BIGINT, email STRING, country STRING, event_type STRING, "
    "quantity INT, price FLOAT, amount DECIMAL(10,2), device STRING"
)
EVENTS_COLUMNS = (
    "event_id BIGINT NOT NULL, event_ts TIMESTAMP, user_id BIGINT, email STRING, country STRING, "
    "event_type STRING, quantity INT, price FLOAT, amount DECIMAL(10,2)"
)
# Where an events column comes from in the landing table, after the rename.
SOURCE_OF = {"country_code": "country"}
EVOLUTION_STATEMENTS = (
    ("device", "ALTER TABLE {t} ADD COLUMN device STRING"),
    # v3 only: a NOT NULL column added to a table with rows, without rewriting a file. Rows
    # ingested before read the initial default; later ingests leave it out and get the
    # write default (the landing files have no such column).
    ("source_system", "ALTER TABLE {t} ADD COLUMN source_system STRING NOT NULL DEFAULT 'landing'"),
    ("quantity", "ALTER TABLE {t} ALTER COLUMN quantity TYPE BIGINT"),
    ("price", "ALTER TABLE {t} ALTER COLUMN price TYPE DOUBLE"),
    ("amount", "ALTER TABLE {t} ALTER COLUMN amount TYPE DECIMAL(12,2)"),
    ("country", "ALTER TABLE {t} RENAME COLUMN country TO country_code"),
)
DAY_FIELD = "event_ts_day"
HOUR_FIELD = "event_ts_hour"


def ts_literal(value: datetime.datetime | datetime.date) -> str:
    if not isinstance(value, datetime.datetime):
        value = datetime.datetime(value.year, value.month, value.day)
    return f"TIMESTAMP '{value.strftime('%Y-%m-%d %H:%M:%S')}'"


def register_landing(sql: SqlSession, settings: PipelineSettings) -> int:
    """Create the external landing table over ``landing/events`` and register new files."""
    sql.execute_one(
        f"CREATE EXTERNAL TABLE IF NOT EXISTS {LANDING} ({LANDING_COLUMNS}) PARTITIONED BY (dt STRING) "
        f"STORED AS PARQUET LOCATION '{settings.events_landing}'"
    )
    result = sql.execute_one(f"MSCK REPAIR TABLE {LANDING}")
    return int(result.rows[0][result.columns.index("files_added")]) if result.rows else 0


# The erasure's DELETE writes position deletes, which belong to their data file's spec; the
# verified erasure then rewrites those files in that same spec. A copy-on-write DELETE would
# rewrite the day files in the current (hour) spec, and the spec check would fail from then on.
EVENTS_PROPERTIES = {"write.delete.mode": "merge-on-read"}


V3_ONLY_STEPS = ("source_system",)


def ensure_events_table(sql: SqlSession, format_version: int = 2) -> Table:
    """The events table, created (in ``format_version``) if missing, upgraded to v3 if asked.

    A v3 table stays v3 when the settings say 2: Iceberg has no downgrade.
    """
    catalog, identifier = sql.manager.resolve_table(EVENTS)
    if not catalog.table_exists(identifier):
        version = f" TBLPROPERTIES ('format-version'='{format_version}')" if format_version != 2 else ""
        sql.execute_one(f"CREATE TABLE {EVENTS} ({EVENTS_COLUMNS}) PARTITIONED BY (days(event_ts)){version}")
        sql.execute_one(f"ALTER TABLE {EVENTS} SET IDENTIFIER FIELDS event_id")
    table = catalog.load_table(identifier)
    if table.metadata.format_version < format_version:
        sql.execute_one(f"ALTER TABLE {EVENTS} SET TBLPROPERTIES ('format-version'='{format_version}')")
        table = catalog.load_table(identifier)
    missing = {k: v for k, v in EVENTS_PROPERTIES.items() if table.properties.get(k) != v}
    if missing:  # also brings a lakehouse made by an older pipeline up to date
        pairs = ", ".join(f"'{k}' = '{v}'" for k, v in missing.items())
        sql.execute_one(f"ALTER TABLE {EVENTS} SET TBLPROPERTIES ({pairs})")
        table = catalog.load_table(identifier)
    return table


def requests_exist(sql: SqlSession) -> bool:
    catalog, identifier = sql.manager.resolve_table(REQUESTS)
    return catalog.table_exists(identifier)


def landing_select(sql: SqlSession, table: Table, start: datetime.datetime, end: datetime.datetime) -> str:
    """The landing rows of [start, end) in the events table's current column order and names.

    Subjects of an erasure request are left out: re-ingesting landing data must not bring back
    an erased user (the requests table is the suppression list).
    """
    # Under the events table's names: a renamed column is selected by its landing name and aliased.
    columns = [f"{SOURCE_OF[f.name]} AS {f.name}" if f.name in SOURCE_OF else f.name
               for f in table.schema().fields if f.name not in V3_ONLY_STEPS]
    days = sorted({(start + datetime.timedelta(hours=h)).date().isoformat()
                   for h in range(int((end - start).total_seconds() // 3600) or 1)})
    where = (
        f"dt IN ({', '.join(repr(d) for d in days)}) "
        f"AND event_ts >= {ts_literal(start)} AND event_ts < {ts_literal(end)}"
    )
    if requests_exist(sql):
        where += f" AND user_id NOT IN (SELECT user_id FROM {REQUESTS})"
    return f"SELECT {', '.join(columns)} FROM {LANDING} WHERE {where}"


@dataclass
class IngestResult:
    start: datetime.datetime
    end: datetime.datetime
    rows: int
    action: str  # "overwritten" or "unchanged"
    snapshot_id: int | None = None
    #: The partitions (``YYYY-MM-DD`` or ``YYYY-MM-DD-HH``) the write replaced, and those of the
    #: window whose landing rows main already held, left untouched.
    partitions: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    #: The commit identifier the write carried (``tablestore.commit-id`` in its snapshot summary).
    commit_id: str = ""
    # Where the files were written: the Spark tasks, executors and hosts the snapshot records
    # (``tablestore.write.*`` of its summary; see tablestore.spark.tasks.write_files).
    written_by: dict[str, str] = field(default_factory=dict)


# A partition's fingerprint: its row count, the sum of its ids, and the sum of a 64-bit hash of
# every compared column of each row (order-independent, so files and row order do not matter).
Fingerprint = tuple[int, int, int]
PARTITION_FORMAT = {DAY_FIELD: "yyyy-MM-dd", HOUR_FIELD: "yyyy-MM-dd-HH"}
PARTITION_STEP = {DAY_FIELD: datetime.timedelta(days=1), HOUR_FIELD: datetime.timedelta(hours=1)}
_NUMERIC = ("int", "long", "float", "double", "decimal")


def compared_columns(table: Table) -> list[str]:
    """The events columns an ingest writes, and a re-run compares (not the v3 write-default one)."""
    return [f.name for f in table.schema().fields if f.name not in V3_ONLY_STEPS]


def partition_fingerprints(sql: SqlSession, rows: str, columns: list[str], grain: str,
                           cast_to: dict[str, str] | None = None) -> dict[str, Fingerprint]:
    """The fingerprint of each partition (of ``grain``) of the rows of the query ``rows``.

    ``cast_to`` casts columns to the events table's types first: the landing files keep the
    source's narrower numbers, which the write widens (INT to BIGINT, FLOAT to DOUBLE)."""
    cast_to = cast_to or {}
    hashed = ", ".join(f"CAST(q.{c} AS {cast_to[c]})" if c in cast_to else f"q.{c}" for c in columns)
    result = sql.execute_one(
        f"SELECT date_format(q.event_ts, '{PARTITION_FORMAT[grain]}') AS p, count(*), "
        # DECIMAL(38, 0): a sum of 64-bit hashes overflows BIGINT (an error under ANSI SQL).
        f"coalesce(sum(q.event_id), 0), coalesce(sum(CAST(xxhash64({hashed}) AS DECIMAL(38, 0))), 0) "
        f"FROM ({rows}) AS q GROUP BY 1"
    )
    return {str(r[0]): (int(r[1]), int(r[2]), int(r[3])) for r in result.rows}


def partition_start(key: str, grain: str) -> datetime.datetime:
    return datetime.datetime.strptime(key, "%Y-%m-%d-%H" if grain == HOUR_FIELD else "%Y-%m-%d")


def changed_ranges(keys: list[str], grain: str) -> list[tuple[datetime.datetime, datetime.datetime]]:
    """The partitions ``keys`` as time ranges, contiguous ones merged."""
    ranges: list[tuple[datetime.datetime, datetime.datetime]] = []
    for key in sorted(keys):
        start = partition_start(key, grain)
        end = start + PARTITION_STEP[grain]
        if ranges and ranges[-1][1] == start:
            ranges[-1] = (ranges[-1][0], end)
        else:
            ranges.append((start, end))
    return ranges


def ingest_commit_id(table: Table, grain: str, base: int | None, wanted: dict[str, Fingerprint]) -> str:
    """The commit identifier of one ingest: the table, the grain, main's snapshot the comparison
    was made against, and what the landing rows of the partitions written hash to. A retry of
    the same step (or a duplicate run from the same main) names the same commit, which the
    branch's history then already holds; any change to main or to the landing rows names another."""
    digest = hashlib.sha256(json.dumps(sorted(wanted.items())).encode()).hexdigest()[:32]
    return f"ingest:{table.metadata.table_uuid}:{grain}:{base or 0}:{digest}"


def ingest(sql: SqlSession, start: datetime.datetime, end: datetime.datetime, grain: str,
           format_version: int = 2, branch: str | None = None) -> IngestResult:
    """Land the events of [start, end) in the events table with INSERT OVERWRITE; into ``branch``
    when given (write-audit-publish: the run's audit branch, made from main by this write).

    Only the partitions whose landing rows differ from what main holds are written: each
    partition of the window is fingerprinted on both sides (count, sum of ids, sum of a hash of
    every column), and those that match are left out of the overwrite. When none differs,
    nothing is written: no branch, no snapshot (a re-run of an ingested range changes nothing).
    The write carries a commit identifier (``SET tablestore.commit-id``, :func:`ingest_commit_id`),
    so a step retried after it wrote commits nothing more.

    ``grain`` is the partition field the caller's Dagster partitions line up with
    (``event_ts_day`` or ``event_ts_hour``). When the table's spec has moved on (a day
    re-materialized after the rollover), a dynamic overwrite would write the day's rows as
    hour-spec files before the cut-over: the layout that the ``partition_specs_by_cutover``
    check forbids. So such a range is refused when its landing rows changed.
    """
    table = ensure_events_table(sql, format_version)
    query = landing_select(sql, table, start, end)
    columns = compared_columns(table)
    numeric = {f.name: str(f.field_type) for f in table.schema().fields
               if f.name in columns and str(f.field_type).startswith(_NUMERIC)}
    base = table.current_snapshot()
    wanted = partition_fingerprints(sql, query, columns, grain, cast_to=numeric)
    held = {} if base is None else partition_fingerprints(
        sql, f"SELECT {', '.join(columns)} FROM {EVENTS} WHERE event_ts >= {ts_literal(start)} "
             f"AND event_ts < {ts_literal(end)}", columns, grain)
    changed = sorted(k for k in wanted if wanted[k] != held.get(k))
    same = sorted(k for k in wanted if k not in changed)
    if not changed:
        return IngestResult(start, end, sum(w[0] for w in wanted.values()), "unchanged", unchanged=same)
    current_fields = [f.name for f in table.spec().fields]
    if grain not in current_fields:
        from tablestore.errors import ValidationError

        raise ValidationError(
            f"{start:%Y-%m-%d %H:%M} to {end:%Y-%m-%d %H:%M} is stored under an older partition spec of {EVENTS} "
            f"(current fields: {', '.join(current_fields)}) and its landing data changed ({', '.join(changed)}); "
            f"ingest it through the asset whose partitions match the current spec, or delete the range first"
        )
    if same:  # only the partitions that changed
        ranges = " OR ".join(f"(event_ts >= {ts_literal(a)} AND event_ts < {ts_literal(b)})"
                             for a, b in changed_ranges(changed, grain))
        query = f"SELECT * FROM ({query}) AS landed WHERE {ranges}"
    commit_id = ingest_commit_id(table, grain, base.snapshot_id if base else None,
                                 {k: wanted[k] for k in changed})
    # Named columns: those the landing data lacks (a v3 NOT NULL DEFAULT column) get their
    # write default.
    target = f"{EVENTS}.branch_{branch}" if branch else EVENTS
    sql.execute_one(f"SET {COMMIT_ID} = '{commit_id}'")
    try:
        sql.execute_one(f"INSERT OVERWRITE {target} ({', '.join(columns)}) {query}")
    finally:
        sql.execute_one(f"RESET {COMMIT_ID}")
    table.refresh()
    if branch and branch not in table.refs():
        # Applied before on main itself (a retry after the publish): nothing new to audit.
        return IngestResult(start, end, sum(w[0] for w in wanted.values()), "unchanged", unchanged=same)
    snapshot = table.on_branch(branch).current_snapshot() if branch else table.current_snapshot()
    rows = int(snapshot.summary.get("added-records", "0")) if snapshot else 0
    written_by = {k.removeprefix(WRITE_SUMMARY_PREFIX): v for k, v in (snapshot.summary if snapshot else {}).items()
                  if k.startswith(WRITE_SUMMARY_PREFIX)}
    return IngestResult(start, end, rows, "overwritten", snapshot.snapshot_id if snapshot else None,
                        partitions=changed, unchanged=same, commit_id=commit_id, written_by=written_by)


def evolve_schema(sql: SqlSession, skip: tuple[str, ...] = (), format_version: int = 2) -> list[str]:
    """Run the evolution statements that are not applied yet; returns the statements run.

    ``skip`` names steps (``device``, ``source_system``, ``quantity``, ``price``, ``amount``,
    ``country``) to leave out, which is how the tests show that the checks notice a missing one.
    ``source_system`` (NOT NULL DEFAULT) runs on a v3 table only."""
    table = ensure_events_table(sql, format_version)
    v3 = table.metadata.format_version >= 3
    schema = table.schema()
    types = {f.name: f.field_type for f in schema.fields}
    done = {
        "device": "device" in types,
        "source_system": "source_system" in types or not v3,
        "quantity": isinstance(types.get("quantity"), LongType),
        "price": isinstance(types.get("price"), DoubleType),
        "amount": types.get("amount") == DecimalType(12, 2),
        "country": "country_code" in types,
    }
    ran = []
    for key, statement in EVOLUTION_STATEMENTS:
        if not done[key] and key not in skip:
            text = statement.format(t=EVENTS)
            sql.execute_one(text)
            ran.append(text)
    return ran


def roll_over(sql: SqlSession, format_version: int = 2) -> str | None:
    """Replace the day partition field by an hour field, unless done; returns the statement run."""
    table = ensure_events_table(sql, format_version)
    if HOUR_FIELD in [f.name for f in table.spec().fields]:
        return None
    text = f"ALTER TABLE {EVENTS} REPLACE PARTITION FIELD days(event_ts) WITH hours(event_ts)"
    sql.execute_one(text)
    return text

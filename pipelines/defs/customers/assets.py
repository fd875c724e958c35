"""The customers dimension and the features merged into it.

``customers`` follows the changes of the events (:mod:`pipelines.defs.changes`): a run reads the
changelog of ``events`` since the snapshot it consumed last, recomputes the users whose events
changed, and replaces their rows in one overwrite (a user left without events, an erased one,
loses the row); the first run, a backfill (run config ``full: true``) and an expired consumed
snapshot rebuild it with INSERT OVERWRITE. The replaced rows' features are NULL until the
feature assets refill them. ``customer_segments`` and ``customer_lifetime_value`` add their
column with a merge_columns the first time, and afterwards refresh it with an update_columns (a
partial update: customers absent from the source keep their value) for the users whose events
changed up to the snapshot ``customers`` consumed, or for every user after a rebuild. The
feature query is a Spark DataFrame and the merge runs in Spark tasks
(``tablestore.spark.tasks.column_merge_tasks.merge_in_tasks``, classic or Spark Connect): the run
process plans and commits; the feature rows never reach it.

A small change (:func:`pipelines.defs.changes.choose_engine`) is recomputed in the run's process
instead: tablestore's scan of the touched users' events, reduced one file at a time to one row
per user by pyarrow (:func:`customers_in_process`, :func:`feature_in_process`), then the table
API's ``overwrite`` or ``update_columns``. The rows are the Spark queries' own, kept beside them.
"""

import time
from typing import TYPE_CHECKING, Any

import dagster as dg
import pyarrow as pa
import pyarrow.compute as pc

from pipelines.defs.automation import FOLLOWS_UPSTREAM, USER_TABLE_FRESHNESS
from pipelines.defs.changes import (
    AUTO,
    SPARK,
    Changes,
    EngineChoice,
    RefreshConfig,
    SessionSource,
    changed_keys,
    choose_engine,
    last_consumed,
)
from pipelines.defs.ingest.assets import EVENTS_HOURLY_KEY, EVENTS_KEY
from pipelines.defs.metadata import snapshot_metadata
from pipelines.defs.resources import SparkResource, TableStoreResource
from pipelines.defs.retries import STEP_RETRY, step_commit_id
from pipelines.settings import table_name
from tablestore.table import Table
from tablestore.table.read.scan import TableScan

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

CUSTOMERS_KEY = dg.AssetKey(["lakehouse", "shop", "customers"])
SEGMENTS_KEY = dg.AssetKey(["lakehouse", "shop", "customer_segments"])
LTV_KEY = dg.AssetKey(["lakehouse", "shop", "customer_lifetime_value"])
CUSTOMERS = table_name("customers")
EVENTS = table_name("events")
BASE_COLUMNS = "user_id BIGINT NOT NULL, email STRING, country_code STRING, first_seen TIMESTAMP"

ERASURE_KEY = dg.AssetKey(["lakehouse", "shop", "gdpr_erasure"])  # it refreshes these assets too
# The customers table snapshot of the last full rebuild: the features follow a rebuild in full.
REBUILD = "rebuild_snapshot_id"
BASE_SQL = (f"SELECT user_id, min_by(email, event_ts), min_by(country_code, event_ts), min(event_ts) "
            f"FROM {EVENTS} {{where}} GROUP BY user_id")

SEGMENT_SQL = f"""
SELECT user_id,
       CASE WHEN count_if(event_type = 'purchase') >= 8 THEN 'vip'
            WHEN count_if(event_type = 'purchase') >= 3 THEN 'regular'
            WHEN count_if(event_type = 'purchase') >= 1 THEN 'occasional'
            ELSE 'browser' END AS segment
FROM {EVENTS} {{where}} GROUP BY user_id
"""
# Only customers who bought have a lifetime value; the others keep what they had (NULL).
LTV_SQL = f"""
SELECT user_id,
       CAST(sum(CASE WHEN event_type = 'purchase' THEN amount ELSE -amount END) AS DECIMAL(14,2)) AS lifetime_value
FROM {EVENTS} WHERE event_type IN ('purchase', 'refund') {{and_where}} GROUP BY user_id
HAVING count_if(event_type = 'purchase') > 0
"""
# The events' columns each in-process recompute reads; the customers refresh reads them all once.
CUSTOMER_COLUMNS = ["user_id", "email", "country_code", "event_ts"]
FEATURE_COLUMNS = {"segment": ["user_id", "event_type"], "lifetime_value": ["user_id", "event_type", "amount"]}
FEATURES = tuple(FEATURE_COLUMNS)
CUSTOMER_READ = [*CUSTOMER_COLUMNS, "event_type", "amount"]


def merge_feature(table: Table, source: "DataFrame", column: str, commit_id: str | None = None) -> dict[str, str | int]:
    """Add ``column`` from ``source`` (joined on user_id), or refresh it if the table has it;
    the materialization's metadata: the action, the snapshot and the Spark tasks that wrote.
    ``commit_id`` (:func:`~pipelines.defs.retries.step_commit_id`): a retried step applies once."""
    from tablestore.spark.tasks.column_merge_tasks import merge_in_tasks  # pyspark: loaded when a run merges

    exists = column in [f.name for f in table.schema().fields]
    action = "update_columns" if exists else "merge_columns"
    outcome = merge_in_tasks(table, source, "user_id", [column], "update" if exists else "merge", commit_id=commit_id)
    summary = outcome.snapshot.summary if outcome.snapshot is not None else {}
    return {
        "action": action,
        "snapshot_id": str(outcome.snapshot.snapshot_id if outcome.snapshot is not None else None),
        "rewritten_fragments": outcome.rewritten,
        "write_tasks": int(summary.get("tablestore.write.tasks", "0")),
        "write_hosts": summary.get("tablestore.write.hosts", ""),
    }


def users_filter(users: list[int]) -> str:
    return f"user_id IN ({', '.join(str(u) for u in users)})"


def users_scan(events: Table, users: list[int], columns: list[str]) -> TableScan:
    """The events of ``users``, in ``columns``: what an in-process recompute reads."""
    return events.scan(filter=users_filter(users), columns=columns)


_FIRST = pc.ScalarAggregateOptions(skip_nulls=False)  # the first row's value, even NULL (min_by's)


def _first_seen(rows: pa.Table) -> pa.Table:
    """Per user, the email and country of the earliest event and its time (rows without a time
    last): reduces the rows of a file, and the reductions of every file, alike."""
    ordered = rows.sort_by([("user_id", "ascending"), ("event_ts", "ascending", "at_end")])
    first = ordered.group_by("user_id", use_threads=False).aggregate(
        [("email", "first", _FIRST), ("country_code", "first", _FIRST), ("event_ts", "first", _FIRST)])
    return first.rename_columns(["user_id", "email", "country_code", "event_ts"])


def customers_in_process(scan: TableScan, schema: pa.Schema) -> pa.Table:
    """``BASE_SQL`` over ``scan`` (:func:`users_scan`) in this process, as rows of ``schema`` (the
    columns after the base four, the features, NULL). ``min_by(x, event_ts)`` is the x of the
    earliest event, NULL or not; a user whose events have no time gets NULL for all three."""
    return _customers_rows([_first_seen(pa.Table.from_batches([batch])) for batch in scan.to_batches()], schema)


def _customers_rows(parts: list[pa.Table], schema: pa.Schema) -> pa.Table:
    """The customers' rows from the per-file reductions of :func:`_first_seen`."""
    first = _first_seen(pa.concat_tables(parts)) if parts else pa.table(
        {"user_id": pa.array([], pa.int64()), "email": pa.array([], pa.string()),
         "country_code": pa.array([], pa.string()), "event_ts": pa.array([], pa.timestamp("us"))})
    timeless = pc.is_null(first.column("event_ts"))
    columns = [first.column("user_id"), *(pc.if_else(timeless, pa.scalar(None, first.column(c).type), first.column(c))
                                          for c in ("email", "country_code")), first.column("event_ts")]
    columns += [pa.nulls(first.num_rows, f.type) for f in list(schema)[4:]]
    return pa.Table.from_arrays(columns, names=schema.names).cast(schema)


def _purchases(rows: pa.Table) -> pa.Array:
    # count_if(event_type = 'purchase'): a NULL type is no purchase.
    return pc.cast(pc.fill_null(pc.equal(rows.column("event_type"), "purchase"), False), pa.int64())


def _feature_part(rows: pa.Table, column: str) -> pa.Table:
    """One file's rows of ``SEGMENT_SQL`` or ``LTV_SQL`` (``column``) reduced to per-user sums."""
    purchase = _purchases(rows)
    if column == "segment":
        return (pa.table({"user_id": rows.column("user_id"), "purchases": purchase})
                .group_by("user_id").aggregate([("purchases", "sum")]).rename_columns(["user_id", "purchases"]))
    keep = pc.is_in(rows.column("event_type"), value_set=pa.array(["purchase", "refund"]))
    amount = rows.column("amount")
    signed = pc.if_else(pc.cast(purchase, pa.bool_()), amount, pc.negate(amount))
    return (pa.table({"user_id": rows.column("user_id"), "purchases": purchase, "value": signed})
            .filter(pc.fill_null(keep, False)).group_by("user_id")
            .aggregate([("purchases", "sum"), ("value", "sum")]).rename_columns(["user_id", "purchases", "value"]))


def _feature_rows(parts: list[pa.Table], column: str) -> pa.Table:
    """user_id and the feature, one row per user, from the per-file sums of :func:`_feature_part`."""
    if column == "segment":
        sums = pa.concat_tables(parts).group_by("user_id").aggregate([("purchases", "sum")]) if parts else \
            pa.table({"user_id": pa.array([], pa.int64()), "purchases_sum": pa.array([], pa.int64())})
        n = sums.column("purchases_sum")
        segment = pc.case_when(pc.make_struct(pc.greater_equal(n, 8), pc.greater_equal(n, 3), pc.greater_equal(n, 1)),
                               "vip", "regular", "occasional", "browser")
        return pa.table({"user_id": sums.column("user_id"), "segment": segment})
    if not parts:
        return pa.table({"user_id": pa.array([], pa.int64()), "lifetime_value": pa.array([], pa.decimal128(14, 2))})
    sums = pa.concat_tables(parts).group_by("user_id").aggregate([("purchases", "sum"), ("value", "sum")])
    sums = sums.filter(pc.greater(sums.column("purchases_sum"), 0))  # HAVING count_if(purchase) > 0
    return pa.table({"user_id": sums.column("user_id"),
                     "lifetime_value": pc.cast(sums.column("value_sum"), pa.decimal128(14, 2))})


def feature_in_process(scan: TableScan, column: str) -> pa.Table:
    """``SEGMENT_SQL`` or ``LTV_SQL`` (``column``) over ``scan`` (:func:`users_scan`) in this
    process: user_id and the feature, one row per user, each file reduced to per-user sums."""
    return _feature_rows([_feature_part(pa.Table.from_batches([batch]), column) for batch in scan.to_batches()],
                         column)


def customers_and_features_in_process(scan: TableScan, schema: pa.Schema) -> tuple[pa.Table, dict[str, pa.Table]]:
    """:func:`customers_in_process` and :func:`feature_in_process` of both features over one read
    of ``scan`` (:func:`users_scan` of :data:`CUSTOMER_READ`): the same rows as three reads."""
    firsts: list[pa.Table] = []
    parts: dict[str, list[pa.Table]] = {column: [] for column in FEATURES}
    for batch in scan.to_batches():
        rows = pa.Table.from_batches([batch])
        firsts.append(_first_seen(rows.select(CUSTOMER_COLUMNS)))
        for column in FEATURES:
            parts[column].append(_feature_part(rows, column))
    return _customers_rows(firsts, schema), {column: _feature_rows(parts[column], column) for column in FEATURES}


class FeatureReads:
    """The feature rows the customers refresh computed in its read (the in-process path), for the
    two feature steps after it: the three steps of a run run one after another in one process
    (the in-process executor), and each read the events of the same users at the same snapshot,
    every file of the table when the users are spread over the days. Keyed by the events table,
    its snapshot and the users, so a step finds only rows its own read would have made; one
    entry, each feature's rows handed out once."""

    def __init__(self) -> None:
        self._key: tuple[str, int, tuple[int, ...]] | None = None
        self._rows: dict[str, pa.Table] = {}

    def put(self, events: Table, users: list[int], rows: dict[str, pa.Table]) -> None:
        self._key, self._rows = _read_key(events, users), dict(rows)

    def take(self, events: Table, users: list[int], column: str) -> pa.Table | None:
        if self._key is None or self._key != _read_key(events, users):
            return None
        return self._rows.pop(column, None)


def _read_key(events: Table, users: list[int]) -> tuple[str, int, tuple[int, ...]]:
    snapshot = events.current_snapshot()
    return events.metadata.table_uuid, snapshot.snapshot_id if snapshot is not None else 0, tuple(users)


FEATURE_READS = FeatureReads()  # this process's (a run's, in the stack)


def refresh_customers(store: TableStoreResource, session: SessionSource, since: int | None, full: bool = False,
                      until: int | None = None, rebuilt: int | None = None,
                      engine: str = AUTO) -> tuple[Changes, dict[str, Any]]:
    """Recompute the customers whose events changed after ``since`` (everyone when ``full``);
    ``rebuilt`` is the customers snapshot of the last full rebuild, carried forward; ``engine``
    forces where (:func:`~pipelines.defs.changes.choose_engine`)."""
    started = time.monotonic()
    events = store.table("events")
    changes = changed_keys(events, since, ["user_id"], None, full, until)
    if not store.exists("customers"):
        sql = store.sql(session())
        sql.execute_one(f"CREATE TABLE {CUSTOMERS} ({BASE_COLUMNS})")
        sql.execute_one(f"ALTER TABLE {CUSTOMERS} SET IDENTIFIER FIELDS user_id")
    table = store.table("customers")
    users = sorted(int(u) for u in changes.keys.column("user_id").to_pylist()) if changes.keys.num_rows else []
    choice = EngineChoice(True, "no user changed: nothing recomputed, no Spark asked for")
    if changes.full or users:
        choice = choose_engine(changes, store.settings.changes.in_process,
                               lambda: users_scan(events, users, CUSTOMER_READ), engine)
    if changes.full:
        sql = store.sql(session())
        extra = [f.name for f in table.schema().fields][4:]
        nulls = "".join(f", NULL AS {name}" for name in extra)
        sql.execute_one(
            f"INSERT OVERWRITE {CUSTOMERS} SELECT user_id, min_by(email, event_ts), min_by(country_code, event_ts), "
            f"min(event_ts){nulls} FROM {EVENTS} GROUP BY user_id"
        )
        rebuilt = table.refresh().current_snapshot().snapshot_id  # type: ignore[union-attr]
    elif users:
        schema = table.schema().as_arrow()
        if choice.scan is not None and choice.in_process:
            recomputed, features = customers_and_features_in_process(choice.scan, schema)
            FEATURE_READS.put(events, users, features)
        else:
            # A few rows per touched user: the recomputed rows come back to this process.
            result = store.sql(session()).execute_one(BASE_SQL.format(where=f"WHERE {users_filter(users)}"))
            names = schema.names
            rows = [dict(zip(names, [*r, *([None] * (len(names) - len(r)))], strict=True)) for r in result.rows]
            recomputed = pa.Table.from_pylist(rows, schema=schema)
        table.overwrite(recomputed, users_filter(users))
    committed = changes.full or bool(users)
    numbers = snapshot_metadata(table, started, committed=committed)
    return changes, {"rows": numbers["rows_total"], "users_recomputed": len(users), REBUILD: rebuilt or 0,
                     **choice.metadata(), **numbers}


def _latest(instance: dg.DagsterInstance, key: dg.AssetKey, name: str) -> int | None:
    event = instance.get_latest_materialization_event(key)
    materialization = event.asset_materialization if event is not None else None
    if materialization is None or name not in materialization.metadata:
        return None
    return int(materialization.metadata[name].value) or None  # type: ignore[arg-type]


def refresh_feature(store: TableStoreResource, session: SessionSource, column: str, since: int | None,
                    until: int | None, full: bool, commit_id: str | None = None,
                    engine: str = AUTO) -> tuple[Changes, dict[str, Any]]:
    """Refresh ``column`` for the users whose events changed after ``since`` up to ``until``
    (the snapshot ``customers`` consumed), or for every user when ``full``; ``engine`` forces
    where (:func:`~pipelines.defs.changes.choose_engine`)."""
    table = store.table("customers")
    full = full or column not in [f.name for f in table.schema().fields]  # merge_columns adds it for all
    events = store.table("events")
    changes = changed_keys(events, since, ["user_id"], None, full, until)
    users = sorted(int(u) for u in changes.keys.column("user_id").to_pylist()) if changes.keys.num_rows else []
    if not changes.full and not users:
        return changes, {"action": "unchanged", "snapshot_id": "None", "source_rows": 0}
    read = FEATURE_READS.take(events, users, column) if not changes.full and engine != SPARK else None
    if read is not None:
        # What this step's own read would give: the customers refresh read the same users' events
        # at this snapshot, in this process, under the same bounds.
        choice = EngineChoice(True, f"read with the customers' recompute: {len(users)} users at snapshot "
                                    f"{_read_key(events, users)[1]}")
    else:
        choice = choose_engine(changes, store.settings.changes.in_process,
                               lambda: users_scan(events, users, FEATURE_COLUMNS[column]), engine)
    rows = read
    if rows is None and choice.scan is not None and choice.in_process:
        rows = feature_in_process(choice.scan, column)
    if rows is not None:
        snapshot = table.update_columns(rows, "user_id", [column], commit_id=commit_id)
        metadata: dict[str, Any] = {"action": "update_columns", "snapshot_id": str(snapshot.snapshot_id if snapshot
                                                                                    is not None else None),
                                    "users_recomputed": len(users), "source_rows": rows.num_rows}
        if column == "segment":
            counts = {str(c["values"]): int(c["counts"]) for c in pc.value_counts(rows.column("segment")).to_pylist()}
            metadata["segments"] = counts
        return changes, {**metadata, **choice.metadata()}
    where = "" if changes.full else users_filter(users)
    text = SEGMENT_SQL.format(where=f"WHERE {where}" if where else "") if column == "segment" else \
        LTV_SQL.format(and_where=f"AND {where}" if where else "")
    source = store.sql(session()).planner().dataframe(text)
    metadata = {**merge_feature(table, source, column, commit_id), "users_recomputed": len(users)}
    if column == "segment":
        # One row per segment (four at most): the only rows of the feature this process sees.
        counts = {r["segment"]: r["count"] for r in source.groupBy("segment").count().collect()}
        metadata.update(source_rows=sum(counts.values()), segments=counts)
    else:
        metadata["source_rows"] = source.count()
    return changes, {**metadata, **choice.metadata()}


def _numbers(tablestore: TableStoreResource, merged: dict[str, str | int], started: float) -> dict[str, int | float]:
    # The merge's snapshot (none when nothing changed), as numbers the UI plots.
    return snapshot_metadata(tablestore.table("customers"), started, committed=merged["snapshot_id"] != "None")


def _json(metadata: dict[str, Any]) -> dict[str, Any]:
    return {k: dg.MetadataValue.json(v) if isinstance(v, dict) else v for k, v in metadata.items()}


def _refresh(context: dg.AssetExecutionContext, store: TableStoreResource, spark: SparkResource, key: dg.AssetKey,
             column: str, full: bool) -> tuple[Changes, dict[str, Any]]:
    """A feature's refresh: the events it consumed last up to what ``customers`` consumed; in
    full after a rebuild of ``customers`` it has not followed yet."""
    since = last_consumed(context.instance, key, ERASURE_KEY)
    until = last_consumed(context.instance, CUSTOMERS_KEY, ERASURE_KEY)
    rebuilt = _latest(context.instance, CUSTOMERS_KEY, REBUILD)
    followed = _latest(context.instance, key, REBUILD)
    changes, metadata = refresh_feature(store, spark.session, column, since, until, full or rebuilt != followed,
                                        step_commit_id(context, column))
    return changes, {**metadata, REBUILD: rebuilt or 0}


def build_customer_assets() -> list[dg.AssetsDefinition]:
    @dg.asset(key=CUSTOMERS_KEY, deps=[EVENTS_KEY, EVENTS_HOURLY_KEY], group_name="customers",
              kinds={"iceberg", "spark"}, retry_policy=STEP_RETRY, automation_condition=FOLLOWS_UPSTREAM,
              freshness_policy=USER_TABLE_FRESHNESS)
    def customers(context: dg.AssetExecutionContext, config: RefreshConfig, tablestore: TableStoreResource,
                  spark: SparkResource) -> dg.MaterializeResult:
        """``lakehouse.shop.customers``: one row per user seen in the events (identifier user_id),
        recomputed for the users whose events changed; the features are refilled after it."""
        since = last_consumed(context.instance, CUSTOMERS_KEY, ERASURE_KEY)
        rebuilt = _latest(context.instance, CUSTOMERS_KEY, REBUILD)
        changes, numbers = refresh_customers(tablestore, spark.session, since, config.full, rebuilt=rebuilt)
        return dg.MaterializeResult(metadata={**changes.metadata(), **numbers},
                                    data_version=dg.DataVersion(str(changes.until)))

    @dg.asset(key=SEGMENTS_KEY, deps=[CUSTOMERS_KEY], group_name="customers", kinds={"iceberg", "spark"},
              retry_policy=STEP_RETRY, automation_condition=FOLLOWS_UPSTREAM)
    def customer_segments(context: dg.AssetExecutionContext, config: RefreshConfig, tablestore: TableStoreResource,
                          spark: SparkResource) -> dg.MaterializeResult:
        """``segment`` (vip, regular, occasional, browser) from purchase counts, merged into
        ``customers`` with merge_columns (update_columns once the column exists)."""
        started = time.monotonic()
        changes, metadata = _refresh(context, tablestore, spark, SEGMENTS_KEY, "segment", config.full)
        return dg.MaterializeResult(metadata={**changes.metadata(), **_json(metadata),
                                              **_numbers(tablestore, metadata, started)})

    @dg.asset(key=LTV_KEY, deps=[SEGMENTS_KEY], group_name="customers", kinds={"iceberg", "spark"},
              retry_policy=STEP_RETRY, automation_condition=FOLLOWS_UPSTREAM)
    def customer_lifetime_value(context: dg.AssetExecutionContext, config: RefreshConfig,
                                tablestore: TableStoreResource, spark: SparkResource) -> dg.MaterializeResult:
        """``lifetime_value`` (purchases minus refunds) for customers who bought: a partial update,
        so customers without purchases keep NULL."""
        started = time.monotonic()
        changes, metadata = _refresh(context, tablestore, spark, LTV_KEY, "lifetime_value", config.full)
        return dg.MaterializeResult(metadata={**changes.metadata(), **_json(metadata),
                                              **_numbers(tablestore, metadata, started)})

    return [customers, customer_segments, customer_lifetime_value]


@dg.definitions
def defs() -> dg.Definitions:
    return dg.Definitions(assets=build_customer_assets())

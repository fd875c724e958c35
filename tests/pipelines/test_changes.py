"""The downstream assets consume the changes of ``events``: after a one-hour landing the hourly
rollup recomputes that hour alone and the customers and their features only the users in it,
each recording the events snapshot it consumed; a GDPR erasure reaches every derived table as
deletes; a backfill recomputes everything. A small change is recomputed in the run's process, a
full one in Spark, and both paths write the same rows from the same change.

The assets run through ``dagster.materialize`` on one instance (so each run finds what the
previous one recorded), with the pipeline's resources and one local Spark session.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import dagster as dg
import pyarrow as pa
import pytest

from pipelines.definitions import build_definitions
from pipelines.defs.changes import CONSUMED, ERASURE_CONSUMED_PREFIX, IN_PROCESS, SPARK, changed_keys, choose_engine
from pipelines.defs.customers.assets import (
    CUSTOMER_COLUMNS,
    CUSTOMER_READ,
    CUSTOMERS_KEY,
    FEATURE_COLUMNS,
    LTV_KEY,
    SEGMENTS_KEY,
    customers_and_features_in_process,
    customers_in_process,
    feature_in_process,
    refresh_customers,
    refresh_feature,
    users_scan,
)
from pipelines.defs.erasure.assets import ERASURE_KEY, REQUEST_SCHEMA
from pipelines.defs.resources import SparkResource, TableStoreResource, resources
from pipelines.defs.rollups import assets as rollups
from pipelines.defs.rollups.assets import ROLLUP_KEY, refresh_rollup
from pipelines.settings import InProcessLimits, load_settings

pytestmark = pytest.mark.spark

EVENTS_SCHEMA = pa.schema([
    ("event_id", pa.int64()), ("event_ts", pa.timestamp("us")), ("user_id", pa.int64()), ("email", pa.string()),
    ("country_code", pa.string()), ("event_type", pa.string()), ("amount", pa.decimal128(12, 2)),
])
START = datetime.datetime(2026, 11, 1)
DAYS, PER_HOUR, USERS = 3, 12, 40
TYPES = ("view", "purchase", "refund", "cart")
DOWNSTREAM = [CUSTOMERS_KEY, SEGMENTS_KEY, LTV_KEY, ROLLUP_KEY]


def events_of_hour(hour: datetime.datetime, first_id: int) -> pa.Table:
    rows = []
    for i in range(PER_HOUR):
        n = first_id + i
        user = 1 + (n * 7) % USERS
        rows.append({"event_id": n, "event_ts": hour + datetime.timedelta(minutes=5 * i), "user_id": user,
                     "email": f"u{user}@example.com", "country_code": "DE", "event_type": TYPES[n % 4],
                     "amount": Decimal(n % 50) + Decimal("0.25")})
    return pa.Table.from_pylist(rows, schema=EVENTS_SCHEMA)


@dataclass
class Lake:
    store: TableStoreResource
    resources: dict[str, Any]
    instance: dg.DagsterInstance
    assets: list[Any]

    def run(self, keys: list[dg.AssetKey], full: bool = False) -> dict[str, dict[str, Any]]:
        config = {"ops": {k.to_python_identifier(): {"config": {"full": True}} for k in keys if k != ERASURE_KEY}} \
            if full else None
        result = dg.materialize(self.assets, selection=keys, resources=self.resources, instance=self.instance,
                                run_config=config)
        assert result.success
        return {m.asset_key.to_user_string(): {k: v.value for k, v in m.metadata.items()}
                for e in result.get_asset_materialization_events() for m in [e.materialization]}


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lake]:
    root = tmp_path_factory.mktemp("changes")
    settings = load_settings(root=str(root))
    res = resources(None, str(root))
    store: TableStoreResource = res["tablestore"]
    events = store.catalog().create_table(("shop", "events"), schema=EVENTS_SCHEMA, partition_by=["day(event_ts)"])
    for h in range(DAYS * 24):  # one file per day, as a daily ingest writes
        if h % 24 == 0:
            day = pa.concat_tables(events_of_hour(START + datetime.timedelta(hours=h + k), (h + k) * 100)
                                   for k in range(24))
            events.append(day)
    try:
        yield Lake(store, res, dg.DagsterInstance.ephemeral(), list(build_definitions(settings=settings).assets or []))
    finally:
        res["spark"].session().stop()


def expected_rollup(store: TableStoreResource) -> list[tuple[Any, ...]]:
    rows = store.table("events").scan().to_arrow().to_pylist()
    out: dict[tuple[str, str], list[Any]] = {}
    for r in rows:
        if r["event_ts"] is None:
            continue  # no hour: an incremental refresh never recomputes it
        key = (r["event_ts"].strftime("%Y-%m-%d %H:00"), r["event_type"])
        entry = out.setdefault(key, [0, set(), Decimal(0)])
        entry[0] += 1
        entry[1].add(r["user_id"])
        entry[2] += r["amount"] or 0
    return sorted(((h, t, n, len(u - {None}), a) for (h, t), (n, u, a) in out.items()),
                  key=lambda row: (row[0], row[1] or ""))


def rollup_rows(store: TableStoreResource) -> list[tuple[Any, ...]]:
    rows = store.table(rollups.ROLLUP).scan().to_arrow().to_pylist()
    return sorted(((r["hour"], r["event_type"], r["events"], r["users"], r["amount"]) for r in rows),
                  key=lambda row: (row[0], row[1] or ""))


def customers(store: TableStoreResource) -> dict[int, dict[str, Any]]:
    return {r["user_id"]: r for r in store.table("customers").scan().to_arrow().to_pylist()}


def test_downstream_assets_read_only_the_changes_and_an_erasure_reaches_every_derived_table(lake: Lake) -> None:
    store = lake.store
    assert rollups.ERASURE_KEY == ERASURE_KEY
    first = lake.run(DOWNSTREAM)
    events = store.table("events")
    landed_before = events.current_snapshot().snapshot_id  # type: ignore[union-attr]
    for key in DOWNSTREAM:
        meta = first[key.to_user_string()]
        assert meta["mode"] == "full" and meta[CONSUMED] == landed_before, key
    assert rollup_rows(store) == expected_rollup(store)
    users = set(events.scan(columns=["user_id"]).to_arrow().column("user_id").to_pylist())
    assert set(customers(store)) == users and all(c["segment"] is not None for c in customers(store).values())

    # A one-hour landing: one new file of PER_HOUR rows.
    hour = START + datetime.timedelta(days=DAYS)
    landed = events_of_hour(hour, 999_000)
    events.append(landed)
    landed_at = events.refresh().current_snapshot().snapshot_id  # type: ignore[union-attr]
    touched_users = len(set(landed.column("user_id").to_pylist()))
    second = lake.run(DOWNSTREAM)
    rollup = second[ROLLUP_KEY.to_user_string()]
    assert (rollup["mode"], rollup["previous_consumed_snapshot_id"], rollup[CONSUMED]) == \
        ("incremental", landed_before, landed_at)
    # What was read: the landed file's rows, the one hour they fall in, nothing else.
    assert (rollup["changed_files_read"], rollup["changed_rows_read"], rollup["hours_recomputed"]) == \
        (1, PER_HOUR, 1)
    for key in (CUSTOMERS_KEY, SEGMENTS_KEY, LTV_KEY):
        meta = second[key.to_user_string()]
        assert (meta["mode"], meta["changed_rows_read"], meta["users_recomputed"]) == \
            ("incremental", PER_HOUR, touched_users), key
    # A one-hour change is within the settings' bounds: no step of the run asked Spark for work.
    assert {second[k.to_user_string()]["engine"] for k in DOWNSTREAM} == {IN_PROCESS}
    # The run's steps share its process: the features came from the customers refresh's one read.
    assert all(second[k.to_user_string()]["engine_reason"].startswith("read with the customers' recompute")
               for k in (SEGMENTS_KEY, LTV_KEY))
    assert {first[k.to_user_string()]["engine"] for k in (ROLLUP_KEY, CUSTOMERS_KEY)} == {SPARK}  # full
    assert rollup_rows(store) == expected_rollup(store)

    # Nothing new upstream: nothing read, nothing written.
    third = lake.run([ROLLUP_KEY, CUSTOMERS_KEY])
    assert third[ROLLUP_KEY.to_user_string()]["hours_recomputed"] == 0
    assert third[CUSTOMERS_KEY.to_user_string()]["users_recomputed"] == 0

    # A GDPR erasure of one user flows down as deletes.
    erased = 1 + (999_000 * 7) % USERS  # a user of the landed hour
    hours_of_user = {r["event_ts"].strftime("%Y-%m-%d %H") for r in events.scan(filter=f"user_id = {erased}")
                     .to_arrow().to_pylist()}
    requests = store.catalog().create_table(("shop", "erasure_requests"), schema=REQUEST_SCHEMA)
    requests.append(pa.Table.from_pylist([{"request_id": "r1", "user_id": erased, "requested_at": hour,
                                           "status": "pending", "completed_at": None}], schema=REQUEST_SCHEMA))
    erasure = lake.run([ERASURE_KEY])[ERASURE_KEY.to_user_string()]
    refreshed = erasure[f"refreshed:{ROLLUP_KEY.to_user_string()}"]
    assert refreshed == {"mode": "incremental", "hours_recomputed": len(hours_of_user)}
    assert erasure[ERASURE_CONSUMED_PREFIX + ROLLUP_KEY.to_user_string()] != landed_at
    assert store.table("events").scan(filter=f"user_id = {erased}").count() == 0
    assert erased not in customers(store)
    assert rollup_rows(store) == expected_rollup(store)  # the erased user's events counted nowhere
    # The erasure expired every older snapshot; the rollup still goes on from what it consumed.
    after = lake.run([ROLLUP_KEY, CUSTOMERS_KEY])
    assert after[ROLLUP_KEY.to_user_string()]["mode"] == "incremental"
    assert after[ROLLUP_KEY.to_user_string()]["hours_recomputed"] == 0
    assert erased not in customers(store)

    # A backfill recomputes everything, to the same rows.
    backfill = lake.run([ROLLUP_KEY], full=True)[ROLLUP_KEY.to_user_string()]
    assert backfill["mode"] == "full" and backfill["hours_recomputed"] == DAYS * 24 + 1
    assert rollup_rows(store) == expected_rollup(store)


def _customers_rows(store: TableStoreResource) -> list[dict[str, Any]]:
    return sorted(customers(store).values(), key=lambda r: r["user_id"])


def test_in_process_and_spark_refreshes_of_the_same_changes_write_the_same_rows(lake: Lake) -> None:
    """The differential test of the two paths: one change of every kind (an appended hour with
    NULLs in every column a query reads, a copy-on-write UPDATE, a merge-on-read DELETE), each
    downstream table refreshed from it by Spark and then, over the same range, in this process;
    every row of the derived table compared after each."""
    store = lake.store
    session = SparkResource(tablestore=store).session
    if not store.exists("customers"):
        lake.run(DOWNSTREAM)  # run alone: the derived tables first
    events = store.table("events")
    since = events.current_snapshot().snapshot_id  # type: ignore[union-attr]
    hour = START + datetime.timedelta(days=DAYS, hours=2)
    edge = [  # user 60's earliest event has no email (min_by keeps the NULL); 61 has no time at all
        {"event_id": 7_000_001, "event_ts": hour, "user_id": None, "email": None, "country_code": None,
         "event_type": "purchase", "amount": Decimal("5.00")},
        {"event_id": 7_000_002, "event_ts": hour + datetime.timedelta(minutes=1), "user_id": 60, "email": None,
         "country_code": "FR", "event_type": None, "amount": None},
        {"event_id": 7_000_003, "event_ts": hour + datetime.timedelta(minutes=2), "user_id": 60,
         "email": "u60@example.com", "country_code": "IT", "event_type": "purchase", "amount": Decimal("9.50")},
        {"event_id": 7_000_004, "event_ts": None, "user_id": 61, "email": "u61@example.com", "country_code": "ES",
         "event_type": "refund", "amount": Decimal("1.00")},
    ]
    events.append(pa.concat_tables([events_of_hour(hour, 888_000), pa.Table.from_pylist(edge, schema=EVENTS_SCHEMA)]))
    # Purchases and refunds for one user (the segments and lifetime values move), an amount changed.
    events.update({"event_type": "'refund'"}, "event_id IN (101, 105)")
    events.update({"amount": "CAST(amount + 1 AS DECIMAL(12, 2))"}, "event_id = 109")
    events.update_properties({"write.delete.mode": "merge-on-read"})
    events.delete("event_id IN (2401, 2405)")
    until = events.refresh().current_snapshot().snapshot_id  # type: ignore[union-attr]

    # The bounds decide from the plans: this change is small, unless a bound says otherwise.
    changes = changed_keys(events, since, ["user_id"], None, False, until)
    users = sorted(int(u) for u in changes.keys.column("user_id").to_pylist())

    def scan() -> Any:
        return users_scan(events, users, ["user_id", "event_type"])
    assert choose_engine(changes, InProcessLimits(), scan).in_process
    for limits, words in ((InProcessLimits(max_files=0), "data files"), (InProcessLimits(max_rows=1), "rows"),
                          (InProcessLimits(max_scan_rows=1), "recompute's scan")):
        choice = choose_engine(changes, limits, scan)
        assert not choice.in_process and words in choice.reason, choice.reason

    def both(refresh: Any, read: Any, reset: Any = None) -> Any:
        by_spark = refresh(SPARK)
        after_spark = read()
        if reset is not None:
            reset()  # the feature columns of the touched users back to NULL, as before the Spark run
        by_us = refresh(IN_PROCESS)
        assert (by_spark["engine"], by_us["engine"]) == (SPARK, IN_PROCESS)
        assert read() == after_spark
        return after_spark

    rollup = both(lambda engine: refresh_rollup(store, session, since, until=until, engine=engine)[1],
                  lambda: rollup_rows(store))
    assert rollup == expected_rollup(store)
    assert any(r[1] is None for r in rollup) and any(r[0] == hour.strftime("%Y-%m-%d %H:00") for r in rollup)

    def customers_once(engine: str) -> dict[str, Any]:
        return refresh_customers(store, session, since, until=until, engine=engine)[1]

    table = both(customers_once, lambda: _customers_rows(store))
    by_user = {r["user_id"]: r for r in table}
    assert (by_user[60]["email"], by_user[60]["country_code"]) == (None, "FR")
    assert (by_user[61]["email"], by_user[61]["first_seen"]) == (None, None)
    assert by_user[60]["segment"] is None  # the recomputed rows wait for their features

    for column in ("segment", "lifetime_value"):
        def feature(engine: str, column: str = column) -> dict[str, Any]:
            return refresh_feature(store, session, column, since, until, False, engine=engine)[1]

        def reset(column: str = column) -> None:
            customers_once(IN_PROCESS)
            if column == "lifetime_value":
                feature(IN_PROCESS, "segment")

        table = both(feature, lambda: _customers_rows(store), reset)
    by_user = {r["user_id"]: r for r in table}
    assert by_user[60]["segment"] == "occasional" and by_user[60]["lifetime_value"] == Decimal("9.50")
    assert by_user[61]["segment"] == "browser"

    # The feature steps above took their rows from the customers refresh's one read (the same
    # users at the same snapshot); a feature step's own read gives the same rows.
    schema = store.table("customers").schema().as_arrow()
    once, features = customers_and_features_in_process(users_scan(events, users, CUSTOMER_READ), schema)
    assert once.sort_by("user_id") == customers_in_process(users_scan(events, users, CUSTOMER_COLUMNS),
                                                           schema).sort_by("user_id")
    for column, rows in features.items():
        own = feature_in_process(users_scan(events, users, FEATURE_COLUMNS[column]), column)
        assert rows.num_rows > 0 and rows.sort_by("user_id") == own.sort_by("user_id"), column


def test_the_reconciliation_compares_only_the_tables_whose_snapshot_moved() -> None:
    from pipelines.defs.reconcile.assets import changed_tables

    current = {"events": 3, "customers": 7, "erasure_requests": 1}
    assert changed_tables(current, None) == ["customers", "erasure_requests", "events"]  # the first run: all
    assert changed_tables(current, {"events": 3, "customers": 6, "erasure_requests": 1}) == ["customers"]
    assert changed_tables(current, {"events": 3, "customers": 7}) == ["erasure_requests"]  # a new table
    assert changed_tables(current, dict(current)) == []

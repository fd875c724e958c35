"""The pipeline's downstream assets after a one-hour landing, against a full recompute.

The events of ``--rows`` rows over 30 days (``bench.common.generate_events``, with the columns
the assets read: ``country`` as ``country_code``, an ``email`` per user) are the pipeline's
``shop.events`` table (embedded settings: SQLite catalog, local warehouse, Spark ``local[2]``),
partitioned by day. The downstream assets' bodies run as the assets run them, on one Spark
session: the hourly rollup, the customers, and their two features (segment, lifetime value).

- ``full-recompute`` (the floor): every hour of the rollup, every customer, every feature value
  recomputed (``full=True``: what the first run and a backfill do).
- ``changes``: before each round (untimed) one new hour of events lands (``rows / 720`` rows, one
  data file); the round refreshes the four from the changelog since the snapshot they consumed
  (one hour recomputed, the users of that hour), where the settings' bounds decide (the embedded
  defaults: in the run's process at this size, see ``pipelines.settings.InProcessLimits``).
- ``changes-spark``: the same after its own one-hour landing, with every refresh forced into
  Spark (what ``changes`` did before the in-process path: the before/after in one run).

Target: ``changes`` takes at most 10% of the full recompute's time.
"""

from __future__ import annotations

import datetime
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from bench.common import DAYS, START, Benchmark, Case, Contestant, Workspace

HOURS = DAYS * 24


def _pipeline_events(data: pa.Table) -> pa.Table:
    email = pc.binary_join_element_wise("u", pc.cast(data.column("user_id"), pa.string()), "@example.com", "")
    return pa.table({
        "event_id": data.column("event_id"), "event_ts": data.column("event_ts"), "user_id": data.column("user_id"),
        "email": email, "country_code": data.column("country"), "event_type": data.column("event_type"),
        "quantity": data.column("quantity"), "amount": data.column("amount"),
    })


class _Pipeline:
    def __init__(self, ws: Workspace) -> None:
        from pipelines.defs.resources import resources

        root = ws.fresh("pipeline_changes")
        self.res = resources(None, str(root))
        self.store = self.res["tablestore"]
        self.spark = self.res["spark"].session()
        events = _pipeline_events(ws.data)
        self.hour_rows = max(1, events.num_rows // HOURS)
        self.template = events.slice(0, self.hour_rows)
        table = self.store.catalog().create_table(("shop", "events"), schema=events.schema,
                                                  partition_by=["day(event_ts)"])
        table.append(events)
        self.landed = 0
        # What every contestant reports as its rows, every round: the 30 days' rows, the table the
        # assets derive from (the harness refuses counts that differ by round or by contestant;
        # the landed hours add 0.14% each).
        self.table_rows = events.num_rows
        self.consumed: dict[str, int | None] = {}
        self.full()  # untimed: the derived tables exist and have consumed the table

    def full(self) -> int:
        return self._refresh(full=True)

    def land_hour(self) -> None:
        """One new hour after the 30 days: a copy of the first hour's rows, shifted."""
        self.landed += 1
        shift = datetime.timedelta(days=DAYS, hours=self.landed)
        ts = pc.add(self.template.column("event_ts"), pa.scalar(shift, pa.duration("us")))
        rows = self.template.set_column(1, "event_ts", ts)
        rows = rows.set_column(0, "event_id", pc.add(rows.column("event_id"), 10**12 * self.landed))
        self.store.table("events").append(rows)

    def changes(self, engine: str) -> int:
        return self._refresh(full=False, engine=engine)

    def _refresh(self, full: bool, engine: str = "auto") -> int:
        from pipelines.defs.customers.assets import refresh_customers, refresh_feature
        from pipelines.defs.rollups.assets import refresh_rollup

        def session() -> Any:
            return self.spark

        rollup, _ = refresh_rollup(self.store, session, self.consumed.get("rollup"), full, engine=engine)
        customers, _ = refresh_customers(self.store, session, self.consumed.get("customers"), full, engine=engine)
        read = rollup.changed_rows + customers.changed_rows
        for column in ("segment", "lifetime_value"):
            feature, _ = refresh_feature(self.store, session, column, self.consumed.get(column), customers.until,
                                         full, engine=engine)
            self.consumed[column] = feature.until
            read += feature.changed_rows
        self.consumed.update(rollup=rollup.until, customers=customers.until)
        assert full or read > 0, "a changes round read no changelog row"
        return self.table_rows


def build(ws: Workspace, rounds: int) -> Benchmark:
    state: dict[str, Any] = {}

    def pipeline() -> _Pipeline:
        if "p" not in state:
            state["p"] = _Pipeline(ws)
        return state["p"]

    def prepare() -> None:
        pipeline()

    case = Case(
        "downstream assets, 30-day table",
        [
            Contestant("full-recompute", lambda: pipeline().full(), setup=prepare, floor=True),
            Contestant("changes", lambda: pipeline().changes("auto"), setup=lambda: pipeline().land_hour()),
            Contestant("changes-spark", lambda: pipeline().changes("spark"), setup=lambda: pipeline().land_hour()),
        ],
        rounds=rounds,
        targets={"full-recompute": 0.10},
    )

    def cleanup() -> None:
        if "p" in state:
            state["p"].spark.stop()

    notes = [f"events from {START:%Y-%m-%d} over {DAYS} days; each 'changes' round lands one hour "
             f"(rows/{HOURS}) before it, untimed; rows/s counts the 30-day table's rows for every contestant"]
    return Benchmark("pipeline_changes", "Pipeline: downstream assets after a one-hour landing", [case], notes,
                     cleanup)

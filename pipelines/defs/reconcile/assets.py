"""Trino reconciliation (stack only): Trino reads every table as tablestore does.

For every table of the shop database that Trino can reach (not the external landing table,
whose files lie on a volume Trino does not mount), one profile query runs in Trino and the same
in tablestore's SQL on Spark (``profiles.py``): the row count and, per column, non-null counts,
min, max, sums and string lengths. The two must be equal, and no erased user may be left in
Trino's view of ``events`` and ``customers``. Nothing sized by the data leaves either engine.

Only what changed is reconciled: the materialization records the snapshot of every table it
compared (``table_snapshots``), and the next run profiles only the tables whose snapshot moved
since (run config ``full: true`` compares them all).

In the embedded environment there is no Trino; the asset records that it skipped and why. In
the Docker Compose stack, Trino is the compose profile ``trino``: the stack passes its profiles
as ``$LAKEHOUSE_PROFILES``, and without ``trino`` among them the asset skips, saying "no Trino in
this stack". With it, an unreachable Trino fails the asset.
"""

import os
from typing import Any

import dagster as dg
from dagster import AssetExecutionContext

from pipelines.defs.automation import FOLLOWS_UPSTREAM
from pipelines.defs.changes import RefreshConfig
from pipelines.defs.erasure.assets import ERASED_TABLES, ERASURE_KEY
from pipelines.defs.reconcile.profiles import differences, profile, profile_query, spark_quote, trino_quote
from pipelines.defs.resources import SparkResource, TableStoreResource
from pipelines.defs.retries import STEP_RETRY
from pipelines.settings import CATALOG, DATABASE

RECONCILE_KEY = dg.AssetKey(["lakehouse", "shop", "trino_reconciliation"])
# Tables over files outside the warehouse (the landing table): Trino does not mount their volume.
EXTERNAL_PROPERTY = "EXTERNAL"
PROFILES_VARIABLE = "LAKEHOUSE_PROFILES"


def trino_absent_reason(trino_settings: dict[str, object] | None, environment: str) -> str | None:
    """Why there is no Trino to reconcile with, or None when Trino is part of this deployment.

    ``$LAKEHOUSE_PROFILES`` unset (not under Compose) leaves the settings in charge."""
    if not trino_settings:
        return f"no Trino in the {environment} environment"
    profiles = os.environ.get(PROFILES_VARIABLE)
    if profiles is not None and "trino" not in {p.strip() for p in profiles.split(",")}:
        return "no Trino in this stack (the compose profile trino is not enabled: COMPOSE_PROFILES=trino)"
    return None


def reconciled_tables(tablestore: TableStoreResource) -> list[str]:
    """Every table of the shop database but external ones."""
    names = sorted(ident[-1] for ident in tablestore.catalog().list_tables((DATABASE,)))
    return [n for n in names if tablestore.table(n).properties.get(EXTERNAL_PROPERTY, "").upper() != "TRUE"]


def changed_tables(current: dict[str, int], previous: dict[str, int] | None) -> list[str]:
    """The tables whose snapshot moved since the last reconciliation (all of them on the first)."""
    if previous is None:
        return sorted(current)
    return sorted(name for name, snapshot in current.items() if previous.get(name) != snapshot)


def table_snapshots(tablestore: TableStoreResource, names: list[str]) -> dict[str, int]:
    snapshots = {}
    for name in names:
        current = tablestore.table(name).current_snapshot()
        snapshots[name] = current.snapshot_id if current is not None else 0
    return snapshots


def _previous_snapshots(instance: dg.DagsterInstance) -> dict[str, int] | None:
    event = instance.get_latest_materialization_event(RECONCILE_KEY)
    materialization = event.asset_materialization if event is not None else None
    if materialization is None or "table_snapshots" not in materialization.metadata:
        return None
    value = materialization.metadata["table_snapshots"].value
    return {str(k): int(v) for k, v in value.items()} if isinstance(value, dict) else None


def build_reconcile_assets() -> list[dg.AssetsDefinition]:
    @dg.asset(key=RECONCILE_KEY, retry_policy=STEP_RETRY, deps=[ERASURE_KEY], group_name="reconcile", kinds={"trino"},
              automation_condition=FOLLOWS_UPSTREAM)
    def trino_reconciliation(context: AssetExecutionContext, config: RefreshConfig, tablestore: TableStoreResource,
                             spark: SparkResource) -> dg.MaterializeResult:
        """Trino's column profiles of every table equal tablestore's; no erased user in Trino."""
        trino_settings = tablestore.settings.trino
        absent = trino_absent_reason(trino_settings, tablestore.settings.environment)
        if absent or not trino_settings:
            context.log.info("skipped: %s", absent)
            return dg.MaterializeResult(metadata={"skipped": str(absent)})
        import trino  # the stack image installs it

        trino_catalog = str(trino_settings.get("catalog", CATALOG))
        connection = trino.dbapi.connect(host=trino_settings["host"], port=int(trino_settings.get("port", 8080)),
                                         user="dagster", catalog=trino_catalog, schema=DATABASE)
        sql = tablestore.sql(spark.session())
        counts: dict[str, dict[str, int]] = {}
        mismatches: dict[str, dict[str, Any]] = {}
        columns = 0
        snapshots = table_snapshots(tablestore, reconciled_tables(tablestore))
        changed = changed_tables(snapshots, None if config.full else _previous_snapshots(context.instance))
        for name in changed:
            schema = tablestore.table(name).schema()
            via_trino, labels = profile_query(f"{trino_catalog}.{DATABASE}.{trino_quote(name)}", schema, trino_quote)
            cursor = connection.cursor()
            cursor.execute(via_trino)
            theirs = profile(labels, cursor.fetchone())
            via_tablestore, _ = profile_query(f"{CATALOG}.{DATABASE}.{spark_quote(name)}", schema, spark_quote)
            ours = profile(labels, sql.execute_one(via_tablestore).rows[0])
            counts[name] = {"trino": int(theirs["rows"]), "tablestore": int(ours["rows"])}
            columns += len(schema.fields)
            differing = differences(ours, theirs)
            if differing:
                mismatches[name] = {k: list(v) for k, v in differing.items()}
        erased_left = {}
        for name in ERASED_TABLES:
            cursor = connection.cursor()
            cursor.execute(f"SELECT count(*) FROM {trino_quote(name)} WHERE user_id IN "
                           f"(SELECT user_id FROM erasure_requests WHERE status = 'done')")
            erased_left[name] = int(cursor.fetchone()[0])
        if mismatches or any(erased_left.values()):
            # A disagreement is an answer, not an outage: it fails at once, without the retries.
            raise dg.Failure(f"Trino and tablestore disagree: {mismatches}; erased users Trino still reads: "
                             f"{erased_left}", allow_retries=False)
        return dg.MaterializeResult(metadata={"counts": dg.MetadataValue.json(counts),
                                              "columns_compared": columns,
                                              "table_snapshots": dg.MetadataValue.json(snapshots),
                                              "tables_compared": dg.MetadataValue.json(changed),
                                              "tables_unchanged": len(snapshots) - len(changed),
                                              "erased_users_left": dg.MetadataValue.json(erased_left)})

    return [trino_reconciliation]


@dg.definitions
def defs() -> dg.Definitions:
    return dg.Definitions(assets=build_reconcile_assets())

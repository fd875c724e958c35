"""Trino reconciliation (stack only): Trino's row counts equal tablestore's.

In the embedded environment there is no Trino; the asset records that it skipped and why. In
the Docker Compose stack, Trino is the compose profile ``trino``: the stack passes its profiles
as ``$LAKEHOUSE_PROFILES``, and without ``trino`` among them the asset skips, saying "no Trino in
this stack". With it, an unreachable Trino fails the asset.
"""

import os

import dagster as dg
from dagster import AssetExecutionContext

from pipelines.defs.erasure.assets import ERASURE_KEY
from pipelines.defs.resources import TableStoreResource
from pipelines.settings import CATALOG, DATABASE

RECONCILE_KEY = dg.AssetKey(["lakehouse", "shop", "trino_reconciliation"])
RECONCILED_TABLES = ("events", "customers", "erasure_requests")
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


def build_reconcile_assets() -> list[dg.AssetsDefinition]:
    @dg.asset(key=RECONCILE_KEY, deps=[ERASURE_KEY], group_name="reconcile", kinds={"trino"})
    def trino_reconciliation(context: AssetExecutionContext, tablestore: TableStoreResource) -> dg.MaterializeResult:
        """Row counts through the ``trino`` client equal the counts of tablestore scans."""
        trino_settings = tablestore.settings.trino
        absent = trino_absent_reason(trino_settings, tablestore.settings.environment)
        if absent or not trino_settings:
            context.log.info("skipped: %s", absent)
            return dg.MaterializeResult(metadata={"skipped": str(absent)})
        import trino  # the stack image installs it

        connection = trino.dbapi.connect(host=trino_settings["host"], port=int(trino_settings.get("port", 8080)),
                                         user="dagster", catalog=trino_settings.get("catalog", CATALOG),
                                         schema=DATABASE)
        counts = {}
        for name in RECONCILED_TABLES:
            cursor = connection.cursor()
            cursor.execute(f"SELECT count(*) FROM {name}")
            via_trino = int(cursor.fetchone()[0])
            via_tablestore = tablestore.table(name).scan().to_arrow().num_rows
            counts[name] = {"trino": via_trino, "tablestore": via_tablestore}
        mismatched = [n for n, c in counts.items() if c["trino"] != c["tablestore"]]
        if mismatched:
            raise dg.Failure(f"Trino and tablestore disagree on row counts of {', '.join(mismatched)}: {counts}")
        return dg.MaterializeResult(metadata={"counts": dg.MetadataValue.json(counts)})

    return [trino_reconciliation]

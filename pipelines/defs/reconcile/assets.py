"""Trino reconciliation (stack only): Trino's row counts equal tablestore's.

In the embedded environment there is no Trino; the asset records that it skipped and why.
"""


import dagster as dg
from dagster import AssetExecutionContext

from pipelines.defs.erasure.assets import ERASURE_KEY
from pipelines.defs.resources import TableStoreResource
from pipelines.settings import CATALOG, DATABASE

RECONCILE_KEY = dg.AssetKey(["lakehouse", "shop", "trino_reconciliation"])
RECONCILED_TABLES = ("events", "customers", "erasure_requests")


def build_reconcile_assets() -> list[dg.AssetsDefinition]:
    @dg.asset(key=RECONCILE_KEY, deps=[ERASURE_KEY], group_name="reconcile", kinds={"trino"})
    def trino_reconciliation(context: AssetExecutionContext, tablestore: TableStoreResource) -> dg.MaterializeResult:
        """Row counts through the ``trino`` client equal the counts of tablestore scans."""
        trino_settings = tablestore.settings.trino
        if not trino_settings:
            context.log.info("no Trino in the %s environment; reconciliation skipped",
                             tablestore.settings.environment)
            return dg.MaterializeResult(metadata={"skipped": f"no Trino in the {tablestore.settings.environment} "
                                                             "environment"})
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

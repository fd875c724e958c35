"""Great Expectations suites over the lakehouse, run on Spark DataFrames from tablestore scans.

Each suite is a function ``(Lakehouse) -> SuiteRun``: it builds the DataFrame it needs, an
expectation suite, and validates the one against the other with GX Core. The Dagster asset
checks (``pipelines/defs/quality_checks.py``) and ``make quality`` (``pipelines/quality_run.py``)
both call these functions. This package knows nothing of the pipeline: what a suite reads of its
settings is ``SuiteSettings``, and its catalog and database come with the ``Lakehouse``.
"""

from __future__ import annotations

import datetime
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from tablestore.catalog_manager import CatalogManager
from tablestore.spark import register_table_view

if TYPE_CHECKING:
    from pathlib import Path
    from types import ModuleType

    from pyspark.sql import DataFrame, SparkSession

# GX logs every data source and suite it adds at INFO; the results are what matters here.
logging.getLogger("great_expectations").setLevel(logging.WARNING)

EPOCH = datetime.datetime(1970, 1, 1)


def _expectations() -> ModuleType:
    """GX's expectations, imported when a suite runs: importing GX takes 2 to 3 s (scipy, its
    expectation catalog), which every process that loads the code location paid (the webserver,
    each Dagster run, the runs without a check among them)."""
    import great_expectations.expectations as gxe

    return gxe


class _Evolution(Protocol):
    @property
    def at(self) -> datetime.date: ...


class _Rollover(Protocol):
    @property
    def cutover(self) -> datetime.date: ...


class SuiteSettings(Protocol):
    """What the suites read of a pipeline's settings (``pipelines.settings.PipelineSettings``)."""

    @property
    def events_landing(self) -> Path: ...
    @property
    def evolution(self) -> _Evolution: ...
    @property
    def rollover(self) -> _Rollover: ...


@dataclass
class Lakehouse:
    """What a suite reads: the settings, the catalogs and a SparkSession, and the catalog and
    database of the pipeline's tables."""

    settings: SuiteSettings
    manager: CatalogManager
    spark: SparkSession
    catalog: str
    database: str
    #: The branch a suite reads of a table (write-audit-publish: the audit branch of the run
    #: being checked); main for a table not named here.
    refs: dict[str, str] = field(default_factory=dict)
    #: The window of event time a run wrote, which the batch suites look at (None: all rows).
    window: tuple[datetime.datetime, datetime.datetime] | None = None
    #: The directory of GX's Data Docs site that every validation adds its page to (None: no
    #: Data Docs are built).
    data_docs: Path | None = None

    def table_df(self, name: str) -> DataFrame:
        view = f"quality_{name}_{uuid.uuid4().hex[:8]}"
        snapshot_id = None
        branch = self.refs.get(name)
        if branch is not None:
            table = self.manager.catalog(self.catalog).load_table((self.database, name))
            ref = table.refs().get(branch)
            if ref is None:
                raise ValueError(f"table {name} has no branch {branch!r} to check")
            snapshot_id = ref.snapshot_id
        return register_table_view(self.spark, self.manager, (self.catalog, self.database, name), view,
                                   snapshot_id=snapshot_id)

    def exists(self, name: str) -> bool:
        return self.manager.catalog(self.catalog).table_exists((self.database, name))

    def landing_df(self) -> DataFrame:
        """The landing files as the source system wrote them, read directly (not via a table)."""
        root = self.settings.events_landing
        # Only the dt=... directories: the external landing table keeps its metadata/ beside them.
        days = sorted(str(p) for p in root.glob("dt=*") if p.is_dir())
        return self.spark.read.option("basePath", str(root)).option("mergeSchema", "true").parquet(*days)

    def erased_users(self) -> list[int]:
        """Users whose erasure request is done."""
        if not self.exists("erasure_requests"):
            return []
        rows = self.table_df("erasure_requests").where("status = 'done'").select("user_id").collect()
        return sorted(int(r.user_id) for r in rows)


@dataclass
class SuiteRun:
    """The outcome of one suite: GX's validation result and what the suite looked at."""

    name: str
    success: bool
    result: Any  # great_expectations ExpectationSuiteValidationResult
    observed: dict[str, Any] = field(default_factory=dict)
    #: The Data Docs pages of the suite's validations (``file://`` URLs), the suite's own first.
    data_docs: list[str] = field(default_factory=list)

    def failed_expectations(self) -> list[str]:
        failed = []
        for r in self.result.results:
            if not r.success:
                config = r.expectation_config
                kwargs = ", ".join(f"{k}={v!r}" for k, v in config.kwargs.items() if k != "batch_id")
                observed = r.result.get("observed_value", r.result.get("partial_unexpected_list"))
                failed.append(f"{config.type}({kwargs}): observed {observed!r}")
        return failed

    def describe(self) -> str:
        return str(self.result.describe())


# The name of the Data Docs site in each validation's GX context.
DATA_DOCS_SITE = "lakehouse"


def validate(lake: Lakehouse, name: str, df: DataFrame, expectations: list[Any],
             observed: dict[str, Any] | None = None) -> SuiteRun:
    """Validate ``df`` against ``expectations`` as the GX suite ``name`` (an ephemeral context).

    With ``lake.data_docs`` set, the validation runs as a GX checkpoint whose
    ``UpdateDataDocsAction`` renders the suite and this validation's result into the Data Docs
    site there; the page is in the result's ``data_docs``."""
    import great_expectations as gx
    from great_expectations.data_context.types.base import ProgressBarsConfig

    context = gx.get_context(mode="ephemeral")
    context.variables.progress_bars = ProgressBarsConfig(globally=False, metric_calculations=False)
    source = context.data_sources.add_spark(name="lakehouse")
    asset = source.add_dataframe_asset(name=name)
    batch_definition = asset.add_batch_definition_whole_dataframe(f"{name}_batch")
    suite = context.suites.add(gx.ExpectationSuite(name=name, expectations=expectations))
    if lake.data_docs is None:
        result = batch_definition.get_batch(batch_parameters={"dataframe": df}).validate(suite)
        return SuiteRun(name, bool(result.success), result, observed or {})
    lake.data_docs.mkdir(parents=True, exist_ok=True)
    from quality.data_docs import data_docs_site

    context.add_data_docs_site(DATA_DOCS_SITE, data_docs_site(lake.data_docs))
    definition = context.validation_definitions.add(gx.ValidationDefinition(name=name, data=batch_definition,
                                                                            suite=suite))
    checkpoint = context.checkpoints.add(gx.Checkpoint(
        name=name, validation_definitions=[definition],
        actions=[gx.checkpoint.UpdateDataDocsAction(name="data_docs", site_names=[DATA_DOCS_SITE])],
    ))
    outcome = checkpoint.run(batch_parameters={"dataframe": df})
    ((identifier, result),) = outcome.run_results.items()
    pages = [str(site["site_url"]) for site in context.get_docs_sites_urls(resource_identifier=identifier,
                                                                           site_name=DATA_DOCS_SITE)]
    return SuiteRun(name, bool(result.success), result, observed or {}, pages)


# -- the suites --------------------------------------------------------------------------------------


def null_device_before_evolution(lake: Lakehouse) -> SuiteRun:
    """Rows ingested before the schema evolution read NULL for the added column ``device``."""
    gxe = _expectations()
    start = lake.settings.evolution.at
    df = lake.table_df("events").where(f"event_ts < TIMESTAMP '{start.isoformat()} 00:00:00'").select("device")
    return validate(lake, "null_device_before_evolution", df, [
        gxe.ExpectTableRowCountToBeBetween(min_value=1),  # the suite must look at some rows
        gxe.ExpectColumnValuesToBeNull(column="device"),
    ], {"rows_before": start.isoformat()})


EVOLVED_TYPES = {"quantity": "LongType", "price": "DoubleType", "amount": "DecimalType"}
EVOLVED_TYPE_NAMES = {"quantity": "bigint", "price": "double", "amount": "decimal(12,2)"}


def evolved_types(lake: Lakehouse) -> SuiteRun:
    """The widened columns have their new Spark types, and rows written before the evolution read
    the same values as the landing files they came from."""
    gxe = _expectations()
    from pyspark.sql import functions as F

    events = lake.table_df("events")
    types = {f.name: f.dataType for f in events.schema.fields}
    observed: dict[str, Any] = {name: repr(types.get(name)) for name in EVOLVED_TYPES}
    before = f"TIMESTAMP '{lake.settings.evolution.at.isoformat()} 00:00:00'"
    old = events.where(f"event_ts < {before}")
    landing = lake.landing_df().where(f"event_ts < {before}").select(
        "event_id",
        F.col("quantity").cast("bigint").alias("landing_quantity"),
        F.col("price").cast("double").alias("landing_price"),
        F.col("amount").cast("decimal(12,2)").alias("landing_amount"),
        F.col("country").alias("landing_country"),
    )
    joined = old.join(landing, "event_id", "inner").select(
        F.col("quantity").cast("bigint").alias("quantity"), "landing_quantity",
        F.col("price").cast("double").alias("price"), "landing_price",
        F.col("amount").cast("decimal(12,2)").alias("amount"), "landing_amount",
        F.col("country_code") if "country_code" in types else F.lit(None).alias("country_code"), "landing_country",
    )
    old_rows = old.count()
    observed["old_rows"] = old_rows
    # Types are checked on the table's own DataFrame; values on the join (the casts there only
    # make the comparison possible when a type was left unwidened).
    # GX compares Spark type classes only, so the precision and scale of the decimal are checked
    # on a DataFrame of the table's Spark type names (``decimal(12,2)``) as well.
    type_names = lake.spark.createDataFrame(
        [(name, types[name].simpleString() if name in types else "missing", expected)
         for name, expected in EVOLVED_TYPE_NAMES.items()],
        "column_name string, spark_type string, expected_type string",
    )
    class_run = validate(lake, "evolved_types_classes", events.limit(1000), [
        gxe.ExpectColumnValuesToBeOfType(column=name, type_=spark_type) for name, spark_type in EVOLVED_TYPES.items()
    ])
    names_run = validate(lake, "evolved_types_names", type_names, [
        gxe.ExpectColumnPairValuesToBeEqual(column_A="spark_type", column_B="expected_type"),
    ])
    type_run = class_run
    type_run.result.results.extend(names_run.result.results)
    type_run.success = class_run.success and names_run.success
    value_run = validate(lake, "evolved_types_values", joined, [
        gxe.ExpectTableRowCountToEqual(value=old_rows),  # every old row has its landing row
        gxe.ExpectColumnPairValuesToBeEqual(column_A="quantity", column_B="landing_quantity"),
        gxe.ExpectColumnPairValuesToBeEqual(column_A="price", column_B="landing_price"),
        gxe.ExpectColumnPairValuesToBeEqual(column_A="amount", column_B="landing_amount"),
        gxe.ExpectColumnPairValuesToBeEqual(column_A="country_code", column_B="landing_country"),
    ])
    merged = type_run.result
    merged.results.extend(value_run.result.results)
    merged.success = type_run.success and value_run.success
    return SuiteRun("evolved_types", type_run.success and value_run.success, merged, observed,
                    [*class_run.data_docs, *names_run.data_docs, *value_run.data_docs])


ERASABLE_TABLES = ("events", "customers")


def erased_users_gone(lake: Lakehouse) -> SuiteRun:
    """No user whose erasure request is done appears in any table of the shop that holds users."""
    gxe = _expectations()
    from pyspark.sql import functions as F

    erased = lake.erased_users()
    frames = [lake.table_df(t).select(F.lit(t).alias("table_name"), "user_id") for t in ERASABLE_TABLES
              if lake.exists(t)]
    df = frames[0]
    for other in frames[1:]:
        df = df.unionByName(other)
    return validate(lake, "erased_users_gone", df, [
        gxe.ExpectColumnValuesToNotBeInSet(column="user_id", value_set=erased),
    ], {"erased_users": erased, "tables": [t for t in ERASABLE_TABLES if lake.exists(t)]})


def landing_reconciles(lake: Lakehouse) -> SuiteRun:
    """Landing rows minus the erased subjects' rows equal the rows of ``events``."""
    gxe = _expectations()
    from pyspark.sql import functions as F

    erased = lake.erased_users()
    # Both counts in one pass over the landing files (each pass lists and reads every file).
    kept = ~F.col("user_id").isin(erased) if erased else F.lit(True)
    counts = lake.landing_df().agg(F.count(F.lit(1)).alias("rows"), F.count_if(kept).alias("kept")).collect()[0]
    landing_rows, expected = int(counts["rows"]), int(counts["kept"])
    events = lake.table_df("events").select("event_id")
    return validate(lake, "landing_reconciles", events, [
        gxe.ExpectTableRowCountToEqual(value=expected),
        gxe.ExpectColumnValuesToBeUnique(column="event_id"),
    ], {"landing_rows": landing_rows, "erased_users": erased, "expected_events": expected})


def partition_specs_by_cutover(lake: Lakehouse) -> SuiteRun:
    """Data files from before the cut-over are under the day spec, later ones under the hour spec."""
    gxe = _expectations()
    import pyarrow as pa

    table = lake.manager.catalog(lake.catalog).load_table((lake.database, "events"))
    specs = table.specs()
    cutover = datetime.datetime.combine(lake.settings.rollover.cutover, datetime.time())
    rows = []
    for f in table.inspect.data_files().to_pylist():
        spec = specs[f["spec_id"]]
        name = spec.fields[0].name if spec.fields else "unpartitioned"
        value = f["partition"].get(name) if f["partition"] else None
        if name.endswith("_day") and value is not None:
            start = datetime.datetime.combine(value, datetime.time())
            kind = "day"
        elif name.endswith("_hour") and value is not None:
            start = EPOCH + datetime.timedelta(hours=int(value))
            kind = "hour"
        else:
            start, kind = None, "other"
        expected = None if start is None else ("day" if start < cutover else "hour")
        rows.append({"file_path": f["file_path"], "spec_id": f["spec_id"], "spec_kind": kind,
                     "expected_kind": expected, "partition_start": start})
    arrow = pa.Table.from_pylist(rows, schema=pa.schema([
        ("file_path", pa.string()), ("spec_id", pa.int32()), ("spec_kind", pa.string()),
        ("expected_kind", pa.string()), ("partition_start", pa.timestamp("us")),
    ]))
    df = lake.spark.createDataFrame(arrow.to_pandas())
    counts = {k: sum(1 for r in rows if r["spec_kind"] == k) for k in ("day", "hour")}
    return validate(lake, "partition_specs_by_cutover", df, [
        gxe.ExpectColumnPairValuesToBeEqual(column_A="spec_kind", column_B="expected_kind"),
        gxe.ExpectColumnDistinctValuesToEqualSet(column="spec_kind", value_set=["day", "hour"]),
    ], {"files_per_spec": counts, "cutover": lake.settings.rollover.cutover.isoformat()})


# The bounds a batch of events must keep: a quantity is a count of items in one order line.
MAX_QUANTITY = 1_000


def events_batch_valid(lake: Lakehouse) -> SuiteRun:
    """The events a run wrote (its audit branch, in its window) are whole: ids, users and times
    present, ids unique, quantities between 1 and MAX_QUANTITY, amounts not negative. The gate
    of write-audit-publish: a batch that fails it never reaches main."""
    gxe = _expectations()
    df = lake.table_df("events")
    observed: dict[str, Any] = {"branch": lake.refs.get("events", "main")}
    if lake.window is not None:
        start, end = lake.window
        df = df.where(f"event_ts >= TIMESTAMP '{start:%Y-%m-%d %H:%M:%S}' "
                      f"AND event_ts < TIMESTAMP '{end:%Y-%m-%d %H:%M:%S}'")
        observed["window"] = f"{start:%Y-%m-%d %H:%M} .. {end:%Y-%m-%d %H:%M}"
    df = df.select("event_id", "user_id", "event_ts", "quantity", "amount")
    return validate(lake, "events_batch_valid", df, [
        gxe.ExpectTableRowCountToBeBetween(min_value=1),
        gxe.ExpectColumnValuesToNotBeNull(column="event_id"),
        gxe.ExpectColumnValuesToBeUnique(column="event_id"),
        gxe.ExpectColumnValuesToNotBeNull(column="user_id"),
        gxe.ExpectColumnValuesToNotBeNull(column="event_ts"),
        gxe.ExpectColumnValuesToBeBetween(column="quantity", min_value=1, max_value=MAX_QUANTITY),
        gxe.ExpectColumnValuesToBeBetween(column="amount", min_value=0),
    ], observed)


SUITES: dict[str, Callable[[Lakehouse], SuiteRun]] = {
    "events_batch_valid": events_batch_valid,
    "null_device_before_evolution": null_device_before_evolution,
    "evolved_types": evolved_types,
    "erased_users_gone": erased_users_gone,
    "landing_reconciles": landing_reconciles,
    "partition_specs_by_cutover": partition_specs_by_cutover,
}

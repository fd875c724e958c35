"""The GX suites as Dagster asset checks. A blocking check that fails stops downstream assets."""


import urllib.parse
from pathlib import Path

import dagster as dg

from pipelines.defs.resources import SparkResource, TableStoreResource
from pipelines.settings import CATALOG, DATABASE, PipelineSettings
from quality.suites import SUITES, Lakehouse, SuiteRun


def lakehouse(tablestore: TableStoreResource, spark: SparkResource) -> Lakehouse:
    settings = tablestore.settings
    return Lakehouse(settings, tablestore.manager, spark.session(), CATALOG, DATABASE,
                     data_docs=settings.data_docs.site)


def data_docs_link(page: str, settings: PipelineSettings) -> str:
    """The address of a Data Docs page (a ``file://`` URL from GX): under ``data-docs.url`` when the
    settings say where the site is served, the file itself otherwise."""
    if settings.data_docs.url is None:
        return page
    relative = Path(urllib.parse.unquote(urllib.parse.urlparse(page).path)).relative_to(settings.data_docs.site)
    return f"{settings.data_docs.url}/{urllib.parse.quote(relative.as_posix())}"


def data_docs_metadata(run: SuiteRun, settings: PipelineSettings) -> dict[str, dg.MetadataValue]:
    """The link from a check's result to the Data Docs page of its validation (the UI shows it as
    a link on the check's page), and the pages of a suite made of several validations."""
    if not run.data_docs:
        return {}
    pages = [data_docs_link(page, settings) for page in run.data_docs]
    links: dict[str, dg.MetadataValue] = {"data_docs": dg.MetadataValue.url(pages[0])}
    if len(pages) > 1:
        links["data_docs_pages"] = dg.MetadataValue.md("\n".join(f"- <{page}>" for page in pages))
    return links


def check_result(run: SuiteRun, settings: PipelineSettings) -> dg.AssetCheckResult:
    evaluated = len(run.result.results)
    failed = run.failed_expectations()
    return dg.AssetCheckResult(
        passed=run.success,
        severity=dg.AssetCheckSeverity.ERROR,
        description=f"GX suite {run.name}: {evaluated - len(failed)} of {evaluated} expectations met",
        metadata={
            "suite": run.name,
            "expectations": evaluated,
            "failed": dg.MetadataValue.json(failed),
            "observed": dg.MetadataValue.json({k: v if isinstance(v, int | str | list | dict) else str(v)
                                               for k, v in run.observed.items()}),
            **data_docs_metadata(run, settings),
        },
    )


def suite_check(suite: str, asset: dg.AssetKey, blocking: bool = True,
                retry_policy: dg.RetryPolicy | None = None) -> dg.AssetChecksDefinition:
    """An asset check on ``asset`` that runs the GX suite ``suite`` (see quality.suites.SUITES).

    ``retry_policy`` retries the check when it raises (a service died under it); a suite that
    runs and finds failed expectations is a result, never retried."""
    run_suite = SUITES[suite]

    @dg.asset_check(asset=asset, name=suite, blocking=blocking, description=run_suite.__doc__,
                    retry_policy=retry_policy)
    def _check(tablestore: TableStoreResource, spark: SparkResource) -> dg.AssetCheckResult:
        return check_result(run_suite(lakehouse(tablestore, spark)), tablestore.settings)

    return _check

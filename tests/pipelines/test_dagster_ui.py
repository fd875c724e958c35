"""The Dagster UI of ``make dagster`` in headless Chromium (Debian's ``chromium`` and
``chromium-driver`` under Selenium, installed from Debian when missing), on one local
``dagster dev`` (webserver, daemon and code server on loopback, a temporary DAGSTER_HOME) for the
module. It shows what the platform does by itself and what a data engineer reads there:

- a landed file starts the landing sensor's run, which the Runs page lists as launched by it;
- a backfill of a range of partitions launched from the asset's page (Materialize…, a typed
  range, Launch backfill) runs as one run and shows completed on the Backfills page;
- the asset's page plots its numeric materialization metadata;
- a check's page links to the GX Data Docs page of its validation, and the link opens it.

The data are tiny (40 events a day, a one-core Spark), and only the landing sensor runs (the
settings leave automation stopped, and the test starts that sensor as a user would): nothing
downstream of ``events`` runs, so the module costs two Spark runs.
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest

from pipelines.defs.ingest.landing import write_landing_day
from pipelines.defs.ingest.sensors import LANDING_SENSOR, RANGE_END, RANGE_START
from pipelines.settings import PipelineSettings, load_settings
from tests.pipelines.dagster_ui import chromium, open_ui
from tests.services import free_port

pytestmark = [pytest.mark.e2e, pytest.mark.spark, pytest.mark.timeout(1800)]

REPO = Path(__file__).resolve().parents[2]
EVENTS_PAGE = "/assets/lakehouse/shop/events"
DAYS = ("2026-11-01", "2026-11-02")
# Waits for a run: a Spark application starting in a new process, on a machine that may be busy.
RUN_TIMEOUT = 900
T = TypeVar("T")


@dataclass
class DagsterUI:
    url: str
    settings: PipelineSettings
    docs_url: str

    def graphql(self, query: str, variables: dict[str, Any] | None = None) -> dict[str, Any]:
        request = urllib.request.Request(f"{self.url}/graphql",
                                         data=json.dumps({"query": query, "variables": variables or {}}).encode(),
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=60) as response:
            answer = json.loads(response.read())
        assert "errors" not in answer, answer["errors"]
        return dict(answer["data"])

    def runs(self, tag: str, value: str) -> list[dict[str, Any]]:
        data = self.graphql("""query($filter: RunsFilter) { runsOrError(filter: $filter) { ... on Runs { results {
            runId status tags { key value } } } } }""", {"filter": {"tags": [{"key": tag, "value": value}]}})
        return [{**r, "tags": {t["key"]: t["value"] for t in r["tags"]}} for r in data["runsOrError"]["results"]]


def settings_text(root: Path, docs_url: str) -> str:
    """Tiny embedded settings: 4 days of 40 events, a one-core Spark, automation stopped."""
    text = (REPO / "pipelines" / "config" / "embedded.yaml").read_text()
    for old, new in (("events-per-day: 1200", "events-per-day: 40"), ("users: 150", "users: 20"),
                     ("master: local[2]", "master: local[1]"), ("root: warehouse/lakehouse", f"root: {root}")):
        assert old in text
        text = text.replace(old, new)
    return text + f"automation: {{running: false}}\ndata-docs: {{url: '{docs_url}'}}\n"


@contextlib.contextmanager
def static_site(directory: Path) -> Iterator[str]:
    """The Data Docs site served on loopback, as a user would serve it next to the UI."""
    directory.mkdir(parents=True, exist_ok=True)
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def dagster_ui(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DagsterUI]:
    """``dagster dev`` as ``make dagster`` starts it, on loopback, a free port, a fresh
    DAGSTER_HOME and lakehouse root, with the landing sensor started."""
    home = tmp_path_factory.mktemp("dagster-home")
    root = tmp_path_factory.mktemp("lakehouse")
    with contextlib.ExitStack() as stack:
        # The site's directory is the root's data_docs (PipelineSettings.data_docs.site).
        docs_url = stack.enter_context(static_site(root / "data_docs"))
        settings_file = home / "settings.yaml"
        settings_file.write_text(settings_text(root, docs_url))
        settings = load_settings(settings_file)
        assert settings.data_docs.site == root / "data_docs" and settings.data_docs.url == docs_url
        port = free_port()
        env = {**os.environ, "DAGSTER_HOME": str(home), "LAKEHOUSE_SETTINGS": str(settings_file)}
        env.pop("LAKEHOUSE_ROOT", None)
        log_path = home / "dagster-dev.log"
        with log_path.open("w") as log:
            process = subprocess.Popen(
                [str(Path(sys.executable).parent / "dagster"), "dev", "-m", "pipelines.definitions",
                 "-h", "127.0.0.1", "-p", str(port)],
                cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            )
        stack.callback(stop, process)
        ui = DagsterUI(f"http://127.0.0.1:{port}", settings, docs_url)
        wait(lambda: ui_answers(ui.url), 420, lambda: f"dagster dev did not start:\n{log_path.read_text()[-4000:]}",
             process)
        yield ui


def stop(process: subprocess.Popen[bytes]) -> None:
    # dagster dev shuts its webserver, daemon and code server down on SIGTERM; a busy machine
    # may make that slow, and nothing of it may outlive the module.
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=30)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def ui_answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/server_info", timeout=5) as response:
            return bool(response.status == 200)
    except OSError:
        return False


def wait(condition: Callable[[], T | None], timeout: float, why: Callable[[], str],
         process: subprocess.Popen[bytes] | None = None, every: float = 2) -> T:
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline or (process is not None and process.poll() is not None):
            raise AssertionError(why())
        time.sleep(every)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as driver:
        yield driver


def body(browser: Any) -> str:
    from selenium.webdriver.common.by import By

    return str(browser.find_element(By.TAG_NAME, "body").text)


def click(browser: Any, xpath: str, timeout: float = 60) -> None:
    """Click the first visible element at ``xpath``, once the page has rendered it."""
    from selenium.common.exceptions import ElementClickInterceptedException, StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    def clicked(d: Any) -> bool:
        # The page re-renders while its queries load; an element found a moment ago may be gone.
        try:
            for element in d.find_elements(By.XPATH, xpath):
                if element.is_displayed() and element.is_enabled():
                    element.click()
                    return True
        except (StaleElementReferenceException, ElementClickInterceptedException):
            pass
        return False

    WebDriverWait(browser, timeout, poll_frequency=0.5).until(clicked)


def shown(browser: Any, text: str | re.Pattern[str], timeout: float = 60) -> str:
    """Wait until the page shows ``text`` (a string or a pattern); the page's text."""
    from selenium.webdriver.support.ui import WebDriverWait

    def found(d: Any) -> str | None:
        page = body(d)
        hit = text in page if isinstance(text, str) else text.search(page) is not None
        return page if hit else None

    return str(WebDriverWait(browser, timeout, poll_frequency=1).until(found))


def test_a_landed_file_starts_the_landing_sensors_run_which_the_runs_page_shows(
        dagster_ui: DagsterUI, browser: Any, tmp_path: Path) -> None:
    settings = dagster_ui.settings
    for day in settings.data.dates[:2]:
        write_landing_day(settings, day)
    # The user starts the sensor (the settings left it stopped), as its toggle in the UI does.
    started = dagster_ui.graphql("""mutation($s: SensorSelector!) { startSensor(sensorSelector: $s) {
        ... on Sensor { sensorState { status } } } }""", {"s": {
        "repositoryLocationName": "pipelines.definitions", "repositoryName": "__repository__",
        "sensorName": LANDING_SENSOR}})
    assert started["startSensor"] == {"sensorState": {"status": "RUNNING"}}

    def finished() -> dict[str, Any] | None:
        runs = dagster_ui.runs("dagster/sensor_name", LANDING_SENSOR)
        return runs[0] if runs and runs[0]["status"] in ("SUCCESS", "FAILURE", "CANCELED") else None

    run = wait(finished, RUN_TIMEOUT, lambda: f"no finished run of {LANDING_SENSOR}: "
               f"{dagster_ui.runs('dagster/sensor_name', LANDING_SENSOR)}", every=5)
    assert run["status"] == "SUCCESS"
    assert (run["tags"][RANGE_START], run["tags"][RANGE_END]) == DAYS  # the two landed days, one run
    assert len(dagster_ui.runs("dagster/sensor_name", LANDING_SENSOR)) == 1

    open_ui(browser, dagster_ui.url, "/runs")
    page = shown(browser, run["runId"][:8])
    # The run's row: its id, what it materialized, who launched it, its status.
    row = page[page.index(run["runId"][:8]):]
    row = row[:row.index("View\n") if "View\n" in row else len(row)]
    assert "lakehouse / shop / events" in row and LANDING_SENSOR in row and "Success" in row, row
    browser.save_screenshot(str(tmp_path / "runs.png"))


def test_a_backfill_launched_from_the_assets_page_is_one_run_and_completes(
        dagster_ui: DagsterUI, browser: Any, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    open_ui(browser, dagster_ui.url, f"{EVENTS_PAGE}?view=partitions")
    click(browser, "//button[normalize-space()='Materialize…']")
    # The UI asks first when an upstream (the landing files' asset) was never materialized.
    with contextlib.suppress(Exception):
        click(browser, "//button[normalize-space()='Confirm']", timeout=10)
    # The dialog is found before it has rendered its text (Selenium's text is the visible text
    # only), so it is looked for until it says how it backfills: BackfillPolicy.single_run().
    single_run = "Backfills all partitions in a single run."

    def rendered() -> Any:
        from selenium.common.exceptions import StaleElementReferenceException

        with contextlib.suppress(StaleElementReferenceException):  # re-rendered meanwhile: look again
            for found in browser.find_elements(
                    By.XPATH, "//*[@role='dialog'][.//button[normalize-space()='Launch backfill']]"):
                if single_run in found.text:
                    return found
        return None

    dialog = wait(rendered, 60, lambda: body(browser), every=1)
    (selection,) = [i for i in dialog.find_elements(By.TAG_NAME, "input") if i.get_attribute("type") == "text"]
    selection.click()
    selection.send_keys(Keys.CONTROL, "a")
    selection.send_keys(f"[{DAYS[0]}...{DAYS[1]}]", Keys.ENTER)
    wait(lambda: "2 partitions" in dialog.text, 30, lambda: dialog.text)
    click(browser, "//button[normalize-space()='Launch backfill']")
    page = shown(browser, re.compile(r"Created backfill (\w+)"))
    match = re.search(r"Created backfill (\w+)", page)
    assert match is not None
    backfill_id = match.group(1)

    # The Backfills page shows it completed once its run is done.
    def completed() -> bool:
        open_ui(browser, dagster_ui.url, "/runs?view=backfills")
        with contextlib.suppress(Exception):
            page = shown(browser, backfill_id, timeout=30)
            row = page[page.index(backfill_id):]
            return "Success" in row.split("View\n", 1)[0]
        return False

    wait(completed, RUN_TIMEOUT, lambda: body(browser), every=10)
    browser.save_screenshot(str(tmp_path / "backfills.png"))
    data = dagster_ui.graphql("""query($id: String!) { partitionBackfillOrError(backfillId: $id) {
        ... on PartitionBackfill { status partitionNames isAssetBackfill } } }""", {"id": backfill_id})
    assert data["partitionBackfillOrError"] == {"status": "COMPLETED_SUCCESS", "partitionNames": list(DAYS),
                                                "isAssetBackfill": True}
    (run,) = dagster_ui.runs("dagster/backfill", backfill_id)  # the range: one run
    assert run["status"] == "SUCCESS"
    assert (run["tags"][RANGE_START], run["tags"][RANGE_END]) == DAYS


NUMERIC_METADATA = ("rows_added", "rows_total", "data_files", "data_files_added", "bytes_total", "bytes_added",
                    "partitions_changed", "duration_s", "snapshot_id")


def test_the_assets_page_plots_its_numeric_metadata(dagster_ui: DagsterUI, browser: Any, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    open_ui(browser, dagster_ui.url, f"{EVENTS_PAGE}?view=overview")
    click(browser, "//button[normalize-space()='Plots']")
    page = shown(browser, "When graphing values by partition")
    plots = page[page.index("Plots\n"):page.index("When graphing values by partition")]
    assert set(NUMERIC_METADATA) <= set(plots.split("\n")), plots
    browser.save_screenshot(str(tmp_path / "plots.png"))
    # One chart per numeric entry, each drawn: pixels painted on its canvas.
    canvases = browser.find_elements(By.TAG_NAME, "canvas")
    assert len(canvases) >= len(NUMERIC_METADATA)
    painted = browser.execute_script(
        "return Array.from(document.querySelectorAll('canvas')).map(c => {"
        " const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data; let n = 0;"
        " for (let i = 3; i < d.length; i += 4) { if (d[i] > 0) n++; } return n; })")
    assert all(n > 0 for n in painted), painted


def test_a_checks_page_links_to_the_data_docs_of_its_validation(
        dagster_ui: DagsterUI, browser: Any, tmp_path: Path) -> None:
    open_ui(browser, dagster_ui.url, f"{EVENTS_PAGE}?view=checks")
    shown(browser, "events_batch_valid")
    link = f"//a[starts-with(@href, '{dagster_ui.docs_url}/validations/events_batch_valid/')]"
    from selenium.webdriver.common.by import By

    wait(lambda: browser.find_elements(By.XPATH, link), 60, lambda: body(browser))
    href = browser.find_element(By.XPATH, link).get_attribute("href")
    ui_window = browser.current_window_handle
    click(browser, link)
    # The link opens the page (in a new tab, as the UI opens links of metadata).
    wait(lambda: len(browser.window_handles) > 1 or browser.current_url == href, 30, lambda: browser.current_url)
    for handle in browser.window_handles:
        if handle != ui_window:
            browser.switch_to.window(handle)
    assert browser.current_url == href
    page = shown(browser, "Expectation Suite")
    browser.save_screenshot(str(tmp_path / "data-docs.png"))
    assert re.search(r"Expectation Suite: events_batch_valid\b.{0,80}Status: Succeeded", page.replace("\n", " ")), page
    # The page is the file GX wrote into the lakehouse's Data Docs site.
    relative = href.removeprefix(dagster_ui.docs_url + "/")
    assert (dagster_ui.settings.data_docs.site / urllib.request.url2pathname(relative)).is_file()
    if browser.current_window_handle != ui_window:
        browser.close()
        browser.switch_to.window(ui_window)

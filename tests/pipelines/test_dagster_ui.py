"""The Dagster UI of ``make dagster``, driven by headless Chromium (Debian's ``chromium`` and
``chromium-driver``, installed from Debian when missing): launch a materialization of one asset
from the asset's page and watch the run reach Success in the UI."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.services import free_port

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
# The cheapest asset: it writes the requests file, no Spark.
ASSET_PATH = "landing/erasure_requests"


def install_chromium() -> None:
    """Debian's chromium and chromium-driver, like the suite's other tools (tmux)."""
    if Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists():
        return
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update", "-q"], capture_output=True, timeout=900, env=env)
    subprocess.run(["apt-get", "install", "-y", "-q", "chromium", "chromium-driver"], capture_output=True,
                   timeout=1800, env=env)
    assert Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists(), \
        "the browser test needs Debian's chromium and chromium-driver: apt-get install chromium chromium-driver"


def graphql(url: str, query: str) -> dict[str, Any]:
    request = urllib.request.Request(f"{url}/graphql", data=json.dumps({"query": query}).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())["data"]


@pytest.fixture(scope="module")
def dagster_ui(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """``dagster dev`` as ``make dagster`` starts it (embedded settings), on loopback, a free
    port, a fresh DAGSTER_HOME and LAKEHOUSE_ROOT."""
    home = tmp_path_factory.mktemp("dagster-home")
    root = tmp_path_factory.mktemp("lakehouse")
    port = free_port()
    env = {**os.environ, "DAGSTER_HOME": str(home), "LAKEHOUSE_ROOT": str(root), "LAKEHOUSE_ENV": "embedded"}
    env.pop("LAKEHOUSE_SETTINGS", None)
    log_path = home / "dagster-dev.log"
    with log_path.open("w") as log:
        process = subprocess.Popen(
            [str(Path(sys.executable).parent / "dagster"), "dev", "-m", "pipelines.definitions",
             "-h", "127.0.0.1", "-p", str(port)],
            cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 420  # the code server imports Spark and GX: slow on a busy machine
        while True:
            try:
                with urllib.request.urlopen(f"{url}/server_info", timeout=5) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"dagster dev did not start:\n{log_path.read_text()[-4000:]}")
            time.sleep(1)
        yield url, root
    finally:
        # dagster dev shuts its webserver, daemon and code server down on SIGTERM; a busy
        # machine may make that slow, and nothing of it may outlive the test.
        os.killpg(process.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=30)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    install_chromium()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1600,1000"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def test_materialize_an_asset_from_the_dagster_ui_and_see_the_run_succeed(
        dagster_ui: tuple[str, Path], browser: Any, tmp_path: Path) -> None:
    from selenium.common.exceptions import ElementClickInterceptedException, StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    url, root = dagster_ui
    # On loopback the UI opens a "Join the Dagster community" dialog over the page a second
    # after the first visit, which swallowed the click on Materialize. The UI stores its
    # dismissal in localStorage (key communityNux): set it before the asset page loads.
    browser.get(f"{url}/server_info")
    browser.execute_script("window.localStorage.setItem('communityNux', JSON.stringify('1'))")
    browser.get(f"{url}/assets/{ASSET_PATH}")

    def body(d: Any) -> str:
        return str(d.find_element(By.TAG_NAME, "body").text)

    def click_materialize(d: Any) -> bool:
        # The page re-renders while the asset graph loads; a button found a moment ago may be gone.
        try:
            for button in d.find_elements(By.XPATH, "//button[normalize-space()='Materialize']"):
                if button.is_displayed() and button.is_enabled():
                    button.click()
                    return True
        except StaleElementReferenceException:
            pass
        except ElementClickInterceptedException:
            # Any other dialog over the page: its Skip / Close button, then try again.
            for close in d.find_elements(By.XPATH, "//div[contains(@class,'dialog')]//button"):
                if close.is_displayed() and close.text.strip().lower() in ("skip", "close", "dismiss", "ok"):
                    close.click()
                    break
        return False

    WebDriverWait(browser, 120, poll_frequency=1).until(click_materialize)
    # The UI confirms with a toast "Launched run <id>" linking to the run.
    link = WebDriverWait(browser, 60, poll_frequency=1).until(
        lambda d: next((a.get_attribute("href") for a in d.find_elements(By.XPATH, "//a[contains(@href,'/runs/')]")),
                       None))
    run_id = str(link).rstrip("/").rsplit("/", 1)[-1]
    browser.get(f"{url}/runs/{run_id}")

    def finished(d: Any) -> str | None:
        # The run page's status tag reads Queued, Starting, Started, then Success or Failure.
        text = body(d)
        for status in ("Success", "Failure", "Canceled"):
            if status in text.split("\n"):
                return status
        return None

    try:
        status = WebDriverWait(browser, 240, poll_frequency=2).until(finished)
    finally:
        browser.save_screenshot(str(tmp_path / "dagster-run.png"))
    assert status == "Success", body(browser)[:2000]
    # The same run, through the GraphQL API the UI reads.
    run = graphql(url, f'{{ runOrError(runId: "{run_id}") {{ ... on Run {{ status assetSelection {{ path }} }} }} }}')
    assert run["runOrError"] == {"status": "SUCCESS", "assetSelection": [{"path": ASSET_PATH.split("/")}]}
    # And the asset did its work in the lakehouse the UI was started on.
    (requests,) = (root / "landing" / "erasure_requests").glob("*.jsonl")
    assert sorted(json.loads(line)["user_id"] for line in requests.read_text().splitlines()) == [7, 42, 101]

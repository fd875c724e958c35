"""Headless Chromium driving a Dagster UI (Debian's ``chromium`` and ``chromium-driver``,
installed from Debian when missing): the embedded UI test and the Docker stack test use it."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"


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


@contextmanager
def chromium() -> Iterator[Any]:
    """A headless Chromium under Selenium, quit at the end."""
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


def open_ui(browser: Any, url: str, path: str) -> None:
    """Open ``path`` of the UI at ``url`` with the "Join the Dagster community" dialog dismissed
    (see ``materialize_in_ui``)."""
    browser.get(f"{url}/server_info")
    browser.execute_script("window.localStorage.setItem('communityNux', JSON.stringify('1'))")
    browser.get(f"{url}{path}")


def _run_ids(url: str) -> set[str]:
    """The ids of every run the instance behind the UI at ``url`` knows (its GraphQL API)."""
    query = "{ runsOrError(limit: 10000) { ... on Runs { results { runId } } } }"
    request = urllib.request.Request(f"{url}/graphql", data=json.dumps({"query": query}).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as response:
        results = json.loads(response.read())["data"]["runsOrError"]["results"]
    return {r["runId"] for r in results}


def materialize_in_ui(browser: Any, url: str, asset_path: str, screenshot: Path,
                      timeout_s: float = 240) -> tuple[str, str, str]:
    """Click Materialize on the asset's page of the UI at ``url``, follow the "Launched run"
    link and wait on the run's page for its end: (run id, Success | Failure | Canceled, the
    page's text). The run page is saved to ``screenshot``."""
    from selenium.common.exceptions import ElementClickInterceptedException, StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    # On loopback the UI opens a "Join the Dagster community" dialog over the page a second
    # after the first visit, which swallowed the click on Materialize. The UI stores its
    # dismissal in localStorage (key communityNux): set it before the asset page loads.
    browser.get(f"{url}/server_info")
    browser.execute_script("window.localStorage.setItem('communityNux', JSON.stringify('1'))")
    browser.get(f"{url}/assets/{asset_path}")

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

    def run_links(d: Any) -> set[str]:
        # Run ids of the page's links to runs (/runs/<id>?<the UI's view state>).
        ids = set()
        for a in d.find_elements(By.XPATH, "//a[contains(@href,'/runs/')]"):
            with contextlib.suppress(StaleElementReferenceException):
                ids.add(str(a.get_attribute("href")).split("?")[0].rstrip("/").rsplit("/", 1)[-1])
        return ids

    # The page of an asset materialized before links to the runs that did it: the new run is
    # the one the instance did not know before the click.
    earlier = _run_ids(url)
    WebDriverWait(browser, 120, poll_frequency=1).until(click_materialize)
    # The UI confirms with a toast "Launched run <id>" linking to the run.
    run_id = str(WebDriverWait(browser, 60, poll_frequency=1).until(
        lambda d: next(iter(run_links(d) - earlier), None)))
    browser.get(f"{url}/runs/{run_id}")

    def finished(d: Any) -> str | None:
        # The run page's status tag reads Queued, Starting, Started, then Success or Failure.
        text = body(d)
        for status in ("Success", "Failure", "Canceled"):
            if status in text.split("\n"):
                return status
        return None

    try:
        status = WebDriverWait(browser, timeout_s, poll_frequency=2).until(finished)
    finally:
        browser.save_screenshot(str(screenshot))
    return run_id, str(status), body(browser)

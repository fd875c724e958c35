"""The Dagster UI of `make dagster`, driven by headless Chromium (Debian's chromium and
chromedriver, installed with apt when missing): launch a materialization of one asset and see
the run succeed."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.services import free_port

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"


def _install_chromium() -> None:
    if Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists():
        return
    if shutil.which("apt-get") is None:
        pytest.skip("chromium and chromium-driver are missing and apt-get is not available to install them")
    subprocess.run(["apt-get", "update", "-q"], check=True, capture_output=True, timeout=900)
    subprocess.run(["apt-get", "install", "-y", "-q", "chromium", "chromium-driver"], check=True,
                   capture_output=True, timeout=1800, env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})


@pytest.fixture(scope="module")
def dagster_ui(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`dagster dev` on the embedded configuration (as `make dagster` starts it) on a free port."""
    home = tmp_path_factory.mktemp("dagster-home")
    root = tmp_path_factory.mktemp("lakehouse")
    port = free_port()
    env = {**os.environ, "DAGSTER_HOME": str(home), "LAKEHOUSE_ROOT": str(root), "LAKEHOUSE_ENV": "embedded"}
    log = (home / "dagster-dev.log").open("w")
    process = subprocess.Popen(
        [str(Path(sys.executable).parent / "dagster"), "dev", "-m", "pipelines.definitions", "-h", "127.0.0.1",
         "-p", str(port)],
        cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 300
        while True:
            try:
                with urllib.request.urlopen(f"{url}/server_info", timeout=5) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"dagster dev did not start:\n{(home / 'dagster-dev.log').read_text()[-4000:]}")
            time.sleep(1)
        yield url
    finally:
        os.killpg(process.pid, 15)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, 9)
            process.wait()
        log.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    _install_chromium()
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


def test_materialize_an_asset_from_the_dagster_ui(dagster_ui: str, browser: object) -> None:
    from selenium.common.exceptions import ElementClickInterceptedException, StaleElementReferenceException
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.remote.webdriver import WebDriver
    from selenium.webdriver.support.ui import WebDriverWait

    assert isinstance(browser, WebDriver)
    browser.get(f"{dagster_ui}/assets/landing/erasure_requests")
    def click_materialize(d: WebDriver) -> bool:
        # The page re-renders while the asset graph loads; a button found a moment ago may be gone.
        try:
            for button in d.find_elements(By.XPATH, "//button[normalize-space()='Materialize']"):
                if button.is_displayed() and button.is_enabled():
                    button.click()
                    return True
        except StaleElementReferenceException:
            pass
        except ElementClickInterceptedException:
            # A dialog (Dagster's first-visit notices) covers the page: close it and try again.
            ActionChains(d).send_keys(Keys.ESCAPE).perform()
            for close in d.find_elements(By.XPATH, "//div[contains(@class,'bp5-dialog')]//button"):
                if close.is_displayed() and close.text.strip().lower() in ("close", "dismiss", "got it", "ok", ""):
                    close.click()
                    break
        return False

    WebDriverWait(browser, 180, poll_frequency=1).until(click_materialize)
    WebDriverWait(browser, 60).until(lambda d: "run" in d.find_element(By.TAG_NAME, "body").text.lower())
    # The launched run appears in the runs list; it must reach Success.
    browser.save_screenshot(str(Path(os.environ.get("TMPDIR", "/tmp")) / "dagster-ui-after-click.png"))
    browser.get(f"{dagster_ui}/runs")
    WebDriverWait(browser, 300, poll_frequency=2).until(
        lambda d: (d.refresh() or True) and "Success" in d.find_element(By.TAG_NAME, "body").text
    )
    body = browser.find_element(By.TAG_NAME, "body").text
    assert "Failure" not in body

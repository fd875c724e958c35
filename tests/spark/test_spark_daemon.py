"""The Python daemon tablestore's Spark sessions fork their workers from, and the JVM settings
that spark_session adds for the data source's Arrow transfer."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
from pyspark.sql import SparkSession

from tablestore.spark import DEFAULT_CONF, with_java_options
from tablestore.spark.daemon import PRELOADED_MODULES, prefer_installed_pyspark, preload


def _installed(root: Path, version: str) -> Path:
    (root / "pyspark").mkdir(parents=True)
    (root / "pyspark" / "version.py").write_text(f"__version__: str = '{version}'\n")
    return root


def _zipped(path: Path, version: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("pyspark/version.py", f'__version__: str = "{version}"\n')
        archive.writestr("pyspark/__init__.py", "")
    return path


def test_the_installed_pyspark_of_the_zips_version_goes_first(tmp_path: Path) -> None:
    spark_zip = str(_zipped(tmp_path / "lib" / "pyspark.zip", "4.3.0"))
    py4j_zip = str(tmp_path / "lib" / "py4j-0.10.9.9-src.zip")
    site = str(_installed(tmp_path / "site", "4.3.0"))
    path = ["/app", spark_zip, py4j_zip, site]
    assert prefer_installed_pyspark(path)
    assert path == ["/app", py4j_zip, site, spark_zip]


def test_another_installed_version_or_none_leaves_sparks_zip_first(tmp_path: Path) -> None:
    spark_zip = str(_zipped(tmp_path / "lib" / "pyspark.zip", "4.3.0"))
    other = str(_installed(tmp_path / "other", "4.2.1"))
    path = [spark_zip, other]
    assert not prefer_installed_pyspark(path)
    assert path == [spark_zip, other]

    alone = [spark_zip, str(tmp_path / "empty")]
    assert not prefer_installed_pyspark(alone)
    assert alone == [spark_zip, str(tmp_path / "empty")]

    broken = tmp_path / "broken" / "pyspark.zip"
    broken.parent.mkdir()
    broken.write_bytes(b"not a zip")
    site = str(_installed(tmp_path / "site", "4.3.0"))
    unreadable = [str(broken), site]
    assert not prefer_installed_pyspark(unreadable)
    assert unreadable == [str(broken), site]


def test_preload_imports_what_it_can_and_names_what_it_cannot() -> None:
    assert preload(("json", "tablestore_no_such_module", "tablestore.table.read.data_files")) == ["tablestore_no_such_module"]
    assert "tablestore.table.read.data_files" in sys.modules
    assert preload() == []  # every module the daemon preloads exists in this environment


def test_java_options_gain_arrows_unchecked_access_unless_the_config_chose() -> None:
    added = with_java_options({"spark.driver.extraJavaOptions": "-Xss4m"})
    assert added["spark.driver.extraJavaOptions"] == "-Xss4m -Darrow.enable_unsafe_memory_access=true"
    assert added["spark.executor.extraJavaOptions"] == "-Darrow.enable_unsafe_memory_access=true"

    chosen = {"spark.driver.extraJavaOptions": "-Darrow.enable_unsafe_memory_access=false"}
    assert with_java_options(chosen)["spark.driver.extraJavaOptions"] == "-Darrow.enable_unsafe_memory_access=false"


def test_workers_fork_from_a_daemon_that_imported_their_modules(spark: SparkSession) -> None:
    assert spark.conf.get("spark.python.daemon.module") == "tablestore.spark.daemon"
    wanted = PRELOADED_MODULES

    # Nested, so that cloudpickle sends it by value: by reference, the worker would import this
    # test module, and with it tablestore, before the function looks.
    def report(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        inherited = sorted(name for name in wanted if name in sys.modules)
        import pyspark

        for _ in batches:
            yield pa.RecordBatch.from_pydict({"report": [json.dumps({"inherited": inherited, "pyspark": pyspark.__file__})]})

    rows = spark.range(0, 2, 1, 2).mapInArrow(report, "report string").collect()
    reports = [json.loads(r["report"]) for r in rows]
    assert len(reports) == 2
    import pyspark

    for got in reports:
        assert got["inherited"] == sorted(PRELOADED_MODULES)
        # The installed pyspark, whose bytecode is compiled, not Spark's source-only pyspark.zip.
        assert Path(got["pyspark"]) == Path(str(pyspark.__file__))


def test_a_new_session_sets_the_arrow_transfer_settings_in_its_jvm(tmp_path: Path) -> None:
    # A fresh process: this test process's JVM was started by whichever module ran first.
    script = f"""
import json
from tablestore.config import LakehouseConfig, SparkConfig, SqlCatalogConfig
from tablestore.spark import spark_session
catalog = SqlCatalogConfig(name="lake", properties={{"uri": "sqlite:///{tmp_path}/c.db", "warehouse": "{tmp_path}/wh"}})
spark = spark_session(LakehouseConfig(default_catalog="lake", catalogs={{"lake": catalog}}, spark=SparkConfig(master="local[1]", conf={{}})))
jvm = spark.sparkContext._jvm
print(json.dumps({{
    "unsafe": jvm.java.lang.System.getProperty("arrow.enable_unsafe_memory_access"),
    "max_bytes": spark.conf.get("spark.sql.execution.arrow.maxBytesPerBatch"),
}}))
spark.stop()
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    settings = json.loads(done.stdout.strip().splitlines()[-1])
    assert settings == {"unsafe": "true", "max_bytes": DEFAULT_CONF["spark.sql.execution.arrow.maxBytesPerBatch"]}

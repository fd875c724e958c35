"""Iceberg's AWS bundle (``org.apache.iceberg:iceberg-aws-bundle``), installed from Maven Central.

Java Iceberg's ``S3FileIO`` and its remote signer (``S3V4RestSignerClient``) are in the Spark
runtime jar that ``../shared/iceberg-oracle`` runs (Iceberg 1.10); the AWS SDK v2 they call is not.
The bundle is that SDK, as Iceberg packages it for engines. ``install()`` fetches it with Maven's
own client, once per machine and version, into ``~/.cache/tablestore/iceberg-aws/<version>``, as
``infra/iceberg_rck.py`` installs the REST Compatibility Kit; ``oracle_environment()`` is what
puts it on the oracle's Spark driver (``tests/rest/test_remote_signing.py`` reads a table through
the service's remote signer with it).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

# The oracle's runtime is Iceberg 1.10; the bundle of the same line.
VERSION = "1.10.1"
ARTIFACT = f"org.apache.iceberg:iceberg-aws-bundle:{VERSION}"


def cache_dir() -> Path:
    root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return root / "tablestore" / "iceberg-aws" / VERSION


def install() -> Path:
    """The bundle's jar, fetched once."""
    jar = cache_dir() / f"iceberg-aws-bundle-{VERSION}.jar"
    if jar.is_file():
        return jar
    mvn = shutil.which("mvn")
    if mvn is None:
        raise RuntimeError(f"Iceberg's AWS bundle {VERSION} comes from Maven Central, and Maven (mvn) is not "
                           "installed: apt-get install maven")
    jar.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=jar.parent) as tmp:
        command = [mvn, "-q", "-B", "dependency:copy", f"-Dartifact={ARTIFACT}", f"-DoutputDirectory={tmp}"]
        done = subprocess.run(command, cwd=tmp, capture_output=True, text=True, timeout=1800)
        fetched = Path(tmp, jar.name)
        if done.returncode != 0 or not fetched.is_file():
            raise RuntimeError(f"mvn could not fetch {ARTIFACT}:\n{(done.stdout + done.stderr)[-2000:]}")
        fetched.rename(jar)  # whole or not at all
    return jar


def oracle_environment(jar: Path) -> dict[str, str]:
    """Variables that put ``jar`` on the class path of the oracle's Spark driver (local mode: the
    executors are in the driver's JVM). The oracle sets ``spark.jars`` itself, so the jar goes
    through spark-submit's ``--driver-class-path`` rather than beside its jars."""
    return {"PYSPARK_SUBMIT_ARGS": f"--driver-class-path {jar} pyspark-shell"}


if __name__ == "__main__":
    print(install())

"""Iceberg's REST Compatibility Kit (1.11.0), installed from Maven Central on this machine.

The kit is ``RESTCompatibilityKitSuite`` in the ``tests`` jar of
``org.apache.iceberg:iceberg-open-api``; it runs ``CatalogTests`` and ``ViewCatalogTests`` (the
``tests`` jars of ``iceberg-core`` and ``iceberg-api``) against a REST catalog through Java's
``RESTCatalog``. ``install()`` resolves those jars and what they need at run time (iceberg-core,
Hadoop's shaded client for the kit's file IO, AssertJ, the JUnit console launcher) with Maven's
own client, once per machine and version, into ``~/.cache/tablestore/iceberg-rck/<version>``, as
``infra/trino_server.py`` installs Trino. ``command(...)`` is the console launcher's command line
for a run against a served catalog; ``tests/rest/test_compatibility_kit.py`` runs it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

VERSION = "1.11.0"
HADOOP = "3.4.1"
JUNIT_CONSOLE = "1.11.4"
SUITE = "org.apache.iceberg.rest.RESTCompatibilityKitSuite"

_DEPENDENCIES = [
    ("org.apache.iceberg", "iceberg-open-api", VERSION, "tests"),
    ("org.apache.iceberg", "iceberg-open-api", VERSION, "test-fixtures"),
    ("org.apache.iceberg", "iceberg-core", VERSION, None),
    ("org.apache.iceberg", "iceberg-core", VERSION, "tests"),
    ("org.apache.iceberg", "iceberg-api", VERSION, "tests"),
    ("org.apache.hadoop", "hadoop-client-api", HADOOP, None),
    ("org.apache.hadoop", "hadoop-client-runtime", HADOOP, None),
    ("org.junit.platform", "junit-platform-console-standalone", JUNIT_CONSOLE, None),
    ("org.assertj", "assertj-core", "3.27.3", None),
    ("org.slf4j", "slf4j-simple", "2.0.16", None),
]


def cache_dir() -> Path:
    root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return root / "tablestore" / "iceberg-rck" / VERSION


# What Iceberg's reference REST server (``org.apache.iceberg.rest.RESTCatalogServer`` in the
# test-fixtures jar) needs besides the kit's jars: Jetty 12.1 and, for its JDBC catalog on
# PostgreSQL, the driver. ``bench/catalog_throughput.py`` runs it.
JETTY = "12.1.5"
SERVER_CLASS = "org.apache.iceberg.rest.RESTCatalogServer"
_SERVER_DEPENDENCIES: list[tuple[str, str, str, str | None]] = [
    ("org.eclipse.jetty", "jetty-server", JETTY, None),
    ("org.eclipse.jetty.ee10", "jetty-ee10-servlet", JETTY, None),
    ("org.eclipse.jetty.compression", "jetty-compression-server", JETTY, None),
    ("org.eclipse.jetty.compression", "jetty-compression-gzip", JETTY, None),
    ("org.postgresql", "postgresql", "42.7.4", None),
    # PostgreSQL's Unix socket, as the service reaches it (no TCP listener in the tests' server)
    ("com.kohlschutter.junixsocket", "junixsocket-common", "2.10.1", None),
    ("com.kohlschutter.junixsocket", "junixsocket-native-common", "2.10.1", None),
]


def _pom(deps: list[tuple[str, str, str, str | None]] | None = None) -> str:
    dependencies = "".join(
        f"<dependency><groupId>{g}</groupId><artifactId>{a}</artifactId><version>{v}</version>"
        + (f"<classifier>{c}</classifier>" if c else "") + "</dependency>"
        for g, a, v, c in (deps or _DEPENDENCIES)
    )
    return ('<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>'
            "<groupId>tablestore</groupId><artifactId>iceberg-rck</artifactId><version>1</version>"
            f"<dependencies>{dependencies}</dependencies></project>")


def install() -> Path:
    """The directory of the kit's jars (with their runtime dependencies), made once."""
    lib = cache_dir() / "lib"
    if lib.is_dir() and any(lib.glob("junit-platform-console-standalone-*.jar")):
        return lib
    mvn = shutil.which("mvn")
    if mvn is None:
        raise RuntimeError(f"Iceberg's REST Compatibility Kit {VERSION} comes from Maven Central, and Maven "
                           "(mvn) is not installed: apt-get install maven")
    lib.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=lib.parent) as tmp:
        Path(tmp, "pom.xml").write_text(_pom())
        command = [mvn, "-q", "-B", "dependency:copy-dependencies", f"-DoutputDirectory={tmp}/lib"]
        done = subprocess.run(command, cwd=tmp, capture_output=True, text=True, timeout=1800)
        if done.returncode != 0:
            raise RuntimeError(f"mvn could not resolve the kit's jars:\n{(done.stdout + done.stderr)[-2000:]}")
        Path(tmp, "lib").rename(lib)  # whole or not at all
    return lib


def install_server() -> Path:
    """The directory of the reference server's extra jars (Jetty, the PostgreSQL driver), made
    once next to the kit's; run it with both on the classpath (``server_command``)."""
    lib = cache_dir() / "server-lib"
    if lib.is_dir() and any(lib.glob("junixsocket-common-*.jar")):
        return lib
    mvn = shutil.which("mvn")
    if mvn is None:
        raise RuntimeError("Iceberg's reference REST server needs Jetty from Maven Central, and Maven (mvn) is not "
                           "installed: apt-get install maven")
    lib.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=lib.parent) as tmp:
        Path(tmp, "pom.xml").write_text(_pom(_SERVER_DEPENDENCIES))
        command = [mvn, "-q", "-B", "dependency:copy-dependencies", f"-DoutputDirectory={tmp}/lib"]
        done = subprocess.run(command, cwd=tmp, capture_output=True, text=True, timeout=1800)
        if done.returncode != 0:
            raise RuntimeError(f"mvn could not resolve the server's jars:\n{(done.stdout + done.stderr)[-2000:]}")
        shutil.rmtree(lib, ignore_errors=True)
        Path(tmp, "lib").rename(lib)
    return lib


def server_command(java: str, lib: Path, server_lib: Path, heap: str = "1g") -> list[str]:
    """The reference REST server; it reads its catalog from ``CATALOG_*`` variables
    (``CATALOG_URI``, ``CATALOG_WAREHOUSE``, ``CATALOG_JDBC_USER``, ``CATALOG_REST_PORT``, ...)."""
    jars = [j for j in sorted(lib.glob("*.jar")) if "junit-platform-console" not in j.name]
    classpath = os.pathsep.join(str(j) for j in [*jars, *sorted(server_lib.glob("*.jar"))])
    return [java, f"-Xmx{heap}", "-cp", classpath, SERVER_CLASS]


def command(java: str, lib: Path, reports: Path) -> list[str]:
    """The JUnit console launcher running the kit against a remote catalog (``rck.local=false``:
    the kit starts no server of its own); its catalog properties come from ``CATALOG_*``
    variables of the environment (``CATALOG_URI``, ``CATALOG_WAREHOUSE``, ...)."""
    standalone = next(lib.glob("junit-platform-console-standalone-*.jar"))
    classpath = os.pathsep.join(str(j) for j in sorted(lib.glob("*.jar")) if j != standalone)
    return [java, "-jar", str(standalone), "execute", "--class-path", classpath,
            "--select-class", SUITE, "--config=rck.local=false", "--details=summary",
            "--disable-banner", f"--reports-dir={reports}"]


if __name__ == "__main__":
    print(install())

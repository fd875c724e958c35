"""The real Trino 476 server on loopback, for tests: ``start_trino(workdir, catalogs)``.

The suite shares one server (the session fixture ``trino`` of tests/conftest.py): a test module
adds the catalogs it needs with ``create_catalog`` and drops them when it is done.

The server comes from :mod:`infra.trino_server` (downloaded once per machine, pruned to the
Iceberg connector) and runs on the Java 24+ runtime found there, as one coordinator that is also
its own worker, with a small heap: tests send it tables of a few hundred rows. Starting takes
15 to 60 seconds.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from infra import trino_server
from infra.local.processes import free_port, spawn, stop_process, wait_until

# How long a query refused for want of an active worker is retried (see ``TrinoServer.query``).
NO_NODES_RETRY_S = 60.0

JVM_CONFIG = """-server
-Xmx1G
-XX:+UseG1GC
-XX:+ExitOnOutOfMemoryError
-XX:ReservedCodeCacheSize=256M
-Djdk.attach.allowAttachSelf=true
-Dfile.encoding=UTF-8
-XX:+EnableDynamicAgentLoading
"""


@dataclass
class TrinoServer:
    """A running Trino coordinator; ``query(sql)`` runs one statement and returns its rows."""

    port: int
    home: Path
    process: Any = field(default=None, repr=False)
    log_path: Path | None = None

    @property
    def uri(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def connect(self, catalog: str = "lakehouse", schema: str | None = None) -> Any:
        import trino

        return trino.dbapi.connect(host="127.0.0.1", port=self.port, user="tests", catalog=catalog, schema=schema,
                                   http_scheme="http", request_timeout=300)

    def query(self, sql: str, catalog: str = "lakehouse") -> list[list[Any]]:
        """The rows of ``sql``. A query refused with NO_NODES_AVAILABLE never started (the
        scheduler found no active worker), so it is sent again, for up to a minute: on a loaded
        machine the one node can drop out of the node manager's view between two refreshes."""
        from trino.exceptions import TrinoQueryError

        deadline = time.monotonic() + NO_NODES_RETRY_S
        while True:
            try:
                return self.query_once(sql, catalog)
            except TrinoQueryError as error:
                if error.error_name != "NO_NODES_AVAILABLE" or time.monotonic() > deadline:
                    raise
            time.sleep(1)

    def query_once(self, sql: str, catalog: str = "lakehouse") -> list[list[Any]]:
        connection = self.connect(catalog)
        try:
            cursor = connection.cursor()
            cursor.execute(sql)
            return [list(row) for row in cursor.fetchall()]
        finally:
            connection.close()

    def active_workers(self) -> int:
        """How many nodes the coordinator's node manager counts as active workers."""
        rows = self.query_once("SELECT count(*) FROM system.runtime.nodes WHERE state = 'active'", "system")
        return int(rows[0][0])

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path and self.log_path.exists() else ""

    def create_catalog(self, name: str, properties: Mapping[str, str]) -> None:
        """Add catalog ``name`` to the running server (``catalog.management=dynamic``), so test
        modules share one server and each brings its own catalogs; it answers once this returns."""
        connector = properties["connector.name"]
        options = ", ".join(f"{_quoted(k)} = '{v.replace(chr(39), chr(39) * 2)}'"
                            for k, v in properties.items() if k != "connector.name")
        self.query(f"CREATE CATALOG {_quoted(name)} USING {connector} WITH ({options})", "system")
        wait_for_catalog(self, name)

    def drop_catalog(self, name: str) -> None:
        self.query(f"DROP CATALOG IF EXISTS {_quoted(name)}", "system")

    def stop(self) -> None:
        if self.process is not None:
            stop_process(self.process, timeout_s=30)


def _quoted(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'


def _properties(values: Mapping[str, str]) -> str:
    return "".join(f"{k}={v}\n" for k, v in values.items())


def _started(server: TrinoServer) -> bool:
    import urllib.error
    import urllib.request

    # As the official image's health-check: /v1/info answers while Trino still starts.
    try:
        with urllib.request.urlopen(f"{server.uri}/v1/info", timeout=3) as answer:
            return json.loads(answer.read()).get("starting") is False
    except (urllib.error.URLError, ConnectionError, OSError, ValueError):
        return False


def _has_worker(server: TrinoServer) -> bool:
    try:
        return server.active_workers() > 0
    except Exception:  # any refusal while the server settles means "not yet"
        return False


def start_trino(workdir: Path, catalogs: Mapping[str, Mapping[str, str]], timeout_s: float = 240.0,
                extra_config: Sequence[str] = ()) -> TrinoServer:
    """A Trino 476 coordinator on a free loopback port with ``catalogs`` (name -> properties)."""
    home = trino_server.install()
    java = trino_server.java_home()
    etc = workdir / "etc"
    (etc / "catalog").mkdir(parents=True, exist_ok=True)
    port = free_port()
    (etc / "node.properties").write_text(_properties({
        "node.environment": "test", "node.id": f"tests-{port}", "node.data-dir": str(workdir / "data"),
        # Else the node announces the first non-loopback address, and on a machine whose Docker
        # networks come and go (the stack test) the coordinator loses its own worker.
        "node.internal-address": "127.0.0.1",
        "plugin.dir": str(home / "plugin")}))
    (etc / "config.properties").write_text(_properties({
        "coordinator": "true", "node-scheduler.include-coordinator": "true",
        "http-server.http.port": str(port), "discovery.uri": f"http://127.0.0.1:{port}",
        "query.max-memory": "512MB", "query.max-memory-per-node": "512MB",
        # Two cores shared with the rest of the suite.
        "task.concurrency": "2", "task.max-worker-threads": "4",
        # Catalogs come and go with CREATE/DROP CATALOG: one server serves every test module.
        "catalog.management": "dynamic",
    }) + "".join(f"{line}\n" for line in extra_config))
    (etc / "jvm.config").write_text(JVM_CONFIG)
    (etc / "log.properties").write_text("io.trino=INFO\n")
    for name, properties in catalogs.items():
        (etc / "catalog" / f"{name}.properties").write_text(_properties(properties))
    log_path = workdir / "trino.log"
    env = {"JAVA_HOME": str(java), "PATH": f"{java / 'bin'}:/usr/bin:/bin", "HOME": str(workdir)}
    process = spawn([str(home / "bin" / "launcher"), "run", f"--etc-dir={etc}", f"--data-dir={workdir / 'data'}"],
                    log_path, env=env, cwd=workdir)
    server = TrinoServer(port=port, home=home, process=process, log_path=log_path)
    try:
        wait_until(lambda: _started(server), "Trino", process, log_path, timeout_s)
        # "Started" is not "schedulable": the node manager lists the coordinator as an active
        # worker only at its next refresh, and until then every query that reads data fails with
        # NO_NODES_AVAILABLE (seen in CI) while metadata queries already answer.
        wait_until(lambda: _has_worker(server), "Trino's worker", process, log_path, timeout_s)
    except BaseException:
        server.stop()
        raise
    return server


def rest_catalog_properties(catalog_uri: str, warehouse: str, credential: str, s3_endpoint: str,
                            region: str = "us-east-1") -> dict[str, str]:
    """The Iceberg connector on a tablestore REST catalog, as the stack ships it: OAuth2 client
    credentials, vended storage credentials, and no storage key of its own."""
    return {
        "connector.name": "iceberg",
        "iceberg.catalog.type": "rest",
        "iceberg.rest-catalog.uri": catalog_uri,
        "iceberg.rest-catalog.warehouse": warehouse,
        "iceberg.rest-catalog.security": "OAUTH2",
        "iceberg.rest-catalog.oauth2.credential": credential,
        "iceberg.rest-catalog.vended-credentials-enabled": "true",
        "iceberg.rest-catalog.view-endpoints-enabled": "true",
        "fs.native-s3.enabled": "true",
        "s3.endpoint": s3_endpoint,
        "s3.path-style-access": "true",
        "s3.region": region,
    }


def wait_for_catalog(server: TrinoServer, catalog: str = "lakehouse", timeout_s: float = 60.0) -> None:
    """Wait until ``catalog`` answers (catalogs load after the server reports started)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            server.query("SHOW SCHEMAS", catalog)
            return
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(1)


__all__ = ["TrinoServer", "rest_catalog_properties", "start_trino", "wait_for_catalog"]

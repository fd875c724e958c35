"""Real services for the test suite: MinIO (S3 and STS), PostgreSQL and the REST
catalog service (``tablestore catalog serve`` in a subprocess).

Each starter returns a handle with ``stop()``; the session fixtures in ``conftest.py`` stop them
at the end of the session, and the child processes are also told to die with the test process
(Linux ``PR_SET_PDEATHSIG``) so an interrupted run leaves nothing behind.
"""

from __future__ import annotations

import glob
import http.client
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from infra.local.processes import die_with_parent, free_port, http_ok, spawn, stop_process, wait_until

VENV_BIN = Path(sys.executable).parent
# The test MinIO's root user (MinIO wants a secret of at least 8 characters).
ROOT_USER = "testing"
ROOT_PASSWORD = "testing-root-secret"


# -- S3 (MinIO) ---------------------------------------------------------------------------------


@dataclass
class S3Server:
    """A running MinIO server (built from source: ``infra/images/minio.py``) on loopback.

    ``access_key`` / ``secret_key`` are its root user's. ``create_user`` adds a user whose key
    is worth only what its policy allows: MinIO enforces IAM policies, and STS ``AssumeRole``
    (on the same endpoint) answers for users, with session policies.
    """

    endpoint: str
    access_key: str = ROOT_USER
    secret_key: str = field(default=ROOT_PASSWORD, repr=False)
    region: str = "us-east-1"
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    log_path: Path | None = None

    @property
    def properties(self) -> dict[str, str]:
        """The FileIO / catalog properties that reach this server."""
        return {
            "s3.endpoint": self.endpoint,
            "s3.access-key-id": self.access_key,
            "s3.secret-access-key": self.secret_key,
            "s3.region": self.region,
            "s3.path-style-access": "true",
        }

    def client(self, access_key: str | None = None, secret_key: str | None = None,
               session_token: str | None = None) -> Any:
        """boto3's S3 client, with the root key unless another one is given."""
        import boto3

        return boto3.client(
            "s3", endpoint_url=self.endpoint, aws_access_key_id=access_key or self.access_key,
            aws_secret_access_key=secret_key or self.secret_key, aws_session_token=session_token,
            region_name=self.region,
        )

    def create_bucket(self, name: str | None = None) -> str:
        """Create a bucket (a fresh unique one by default) and return its name."""
        name = name or f"test-{uuid.uuid4().hex[:12]}"
        self.client().create_bucket(Bucket=name)
        return name

    def create_user(self, access_key: str, secret_key: str, buckets: Sequence[str] = ()) -> None:
        """A MinIO user with read and write on ``buckets`` only (every bucket when empty)."""
        from infra.storage_init import admin_client, bucket_policy, ensure_user

        admin = admin_client(self.endpoint.removeprefix("http://"), self.access_key, self.secret_key)
        policy = bucket_policy(buckets or ["*"])
        ensure_user(admin, access_key, secret_key, f"user-{access_key.lower()}", policy)

    def stop(self) -> None:
        if self.process is not None:
            stop_process(self.process)


def start_s3_server(workdir: Path, timeout_s: float = 60.0) -> S3Server:
    """MinIO on a free loopback port over ``workdir/data``. The first call on a machine builds
    the pinned MinIO from source (several CPU-minutes); later ones find it cached."""
    from infra.local.minio import minio_argv, minio_env

    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    log_path = workdir / "minio.log"
    proc = spawn(minio_argv(workdir / "data", port), log_path, env=minio_env(ROOT_USER, ROOT_PASSWORD), cwd=workdir)
    server = S3Server(endpoint=endpoint, process=proc, log_path=log_path)
    try:
        wait_until(lambda: http_ok(f"{endpoint}/minio/health/ready"), "minio", proc, log_path, timeout_s)
    except BaseException:
        server.stop()
        raise
    return server


# -- PostgreSQL --------------------------------------------------------------------------------


@dataclass
class PostgresServer:
    """A running PostgreSQL server; ``uri(db)`` is a SQLAlchemy URI for one database."""

    socket_dir: str
    port: int | None
    user: str = "postgres"
    _stop: Any = field(default=None, repr=False)

    def uri(self, database: str = "postgres") -> str:
        port = f"&port={self.port}" if self.port else ""
        return f"postgresql+psycopg2://{self.user}@/{database}?host={self.socket_dir}{port}"

    def create_database(self, name: str | None = None) -> str:
        """Create a fresh database and return the SQLAlchemy URI for it."""
        from sqlalchemy import create_engine, text

        name = name or f"test_{uuid.uuid4().hex[:12]}"
        engine = create_engine(self.uri(), isolation_level="AUTOCOMMIT")
        try:
            with engine.connect() as conn:
                conn.execute(text(f'CREATE DATABASE "{name}"'))
        finally:
            engine.dispose()
        return self.uri(name)

    def stop(self) -> None:
        if self._stop is not None:
            self._stop()
            self._stop = None


def start_postgres(workdir: Path) -> PostgresServer:
    """PostgreSQL via the pgserver package, else Debian's binaries in /usr/lib/postgresql."""
    try:
        return _start_pgserver(workdir)
    except Exception as first:
        try:
            return _start_debian_postgres(workdir)
        except Exception as second:
            raise RuntimeError(
                f"cannot start PostgreSQL: pgserver: {first!r}; pg_ctl: {second!r}"
            ) from second


def _start_pgserver(workdir: Path) -> PostgresServer:
    from urllib.parse import parse_qs, urlsplit

    import pgserver

    server = pgserver.get_server(workdir / "pgdata", cleanup_mode="delete")
    parts = urlsplit(server.get_uri())
    query = parse_qs(parts.query)
    host = query["host"][0]
    port = int(query["port"][0]) if "port" in query else None
    return PostgresServer(socket_dir=host, port=port, user=parts.username or "postgres", _stop=server.cleanup)


def _start_debian_postgres(workdir: Path) -> PostgresServer:
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    if not candidates:
        raise RuntimeError("no /usr/lib/postgresql/*/bin/pg_ctl")
    bindir = Path(candidates[-1]).parent
    data = workdir / "pgdata-debian"
    sock = workdir / "pgsock"
    data.mkdir()
    sock.mkdir()
    run_as: list[str] = []
    if os.geteuid() == 0:
        # PostgreSQL refuses to run as root; Debian's package provides the postgres user.
        shutil.chown(data, "postgres")
        shutil.chown(sock, "postgres")
        os.chmod(workdir, 0o755)
        run_as = ["runuser", "-u", "postgres", "--"]
    port = free_port()
    subprocess.run([*run_as, str(bindir / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust"],
                   check=True, capture_output=True)
    subprocess.run(
        [*run_as, str(bindir / "pg_ctl"), "-D", str(data), "-w", "-l", str(data / "log"),
         "-o", f"-h '' -k {sock} -p {port}", "start"],
        check=True, capture_output=True, timeout=60,
    )

    def stop() -> None:
        subprocess.run([*run_as, str(bindir / "pg_ctl"), "-D", str(data), "-w", "-m", "fast", "stop"],
                       check=False, capture_output=True, timeout=60)

    return PostgresServer(socket_dir=str(sock), port=port, user="postgres", _stop=stop)


# -- the REST catalog service ------------------------------------------------------------------

WRITE_TOKEN = "write-token-0123456789abcdef"
READ_TOKEN = "read-token-0123456789abcdef"
CLIENT_ID = "etl"
CLIENT_SECRET = "etl-secret-0123456789"
CATALOG = "lake"


@dataclass
class RestService:
    """A catalog service process; ``restart()`` starts it again on the same port and database."""

    config_path: Path
    catalog_uri: str
    warehouse: str
    workdir: Path
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None

    @property
    def uri(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 60.0) -> None:
        log = open(self.workdir / "server.log", "ab")  # noqa: SIM115 - handed to the child
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "tablestore.cli", "catalog", "serve", "--config", str(self.config_path),
                 "--port", str(self.port)],
                stdout=log, stderr=subprocess.STDOUT, preexec_fn=die_with_parent, cwd=self.workdir,
            )
        finally:
            log.close()
        deadline = time.monotonic() + timeout_s
        request = urllib.request.Request(f"{self.uri}/v1/config", headers={"Authorization": f"Bearer {READ_TOKEN}"})
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"the catalog service exited:\n{self.log()}")
            try:
                with urllib.request.urlopen(request, timeout=2):
                    return
            except urllib.error.HTTPError:
                return  # it answers (a configuration without the read token refuses it)
            except (urllib.error.URLError, ConnectionError, OSError):
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the catalog service did not answer:\n{self.log()}")
            time.sleep(0.2)

    def log(self) -> str:
        return (self.workdir / "server.log").read_text(errors="replace")

    def kill(self) -> None:
        """SIGKILL: no cleanup, no flush, as a crash."""
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=10)

    def stop(self) -> None:
        if self.process is not None:
            stop_process(self.process)

    s3_properties: dict[str, str] = field(default_factory=dict)

    def direct_properties(self) -> dict[str, str]:
        """Properties of a SqlCatalog on the same database and warehouse."""
        return {"uri": self.catalog_uri, "warehouse": self.warehouse, **self.s3_properties}

    def reset(self) -> None:
        """Empty the served catalog: drop every table, view, function and namespace through the
        API, then delete every file under the warehouse, so that a test sharing this service
        starts from an empty catalog (and finds no files of an earlier test in its locations)."""
        from tablestore.io import load_file_io

        client = self.client()
        try:
            pending: list[tuple[str, ...]] = list(client.list_namespaces())
            ordered: list[tuple[str, ...]] = []
            while pending:  # depth first, parents before their children
                namespace = pending.pop()
                ordered.append(namespace)
                pending.extend(client.list_namespaces(namespace))
            for namespace in reversed(ordered):  # children before their parents
                # Not purged: a test may leave files no purge would accept (a corrupt metadata
                # file); the warehouse is emptied below instead.
                for table in client.list_tables(namespace):
                    client.drop_table(table)
                for view in client.list_views(namespace):
                    client.drop_view(view)
                for function in client.list_functions(namespace):
                    client.drop_function(function)
                client.drop_namespace(namespace)
        finally:
            client.close()
        fs, path = load_file_io(self.s3_properties, self.warehouse).filesystem_for(self.warehouse)
        fs.delete_dir_contents(path, missing_dir_ok=True)

    def pyiceberg(self, token: str = WRITE_TOKEN) -> Any:
        from pyiceberg.catalog.rest import RestCatalog as PyRestCatalog

        return PyRestCatalog("rest", uri=self.uri, token=token)

    def client(self, token: str = WRITE_TOKEN) -> Any:
        from tablestore.catalog.rest import RestCatalog

        return RestCatalog("rest", uri=self.uri, token=token)


def write_config(path: Path, catalog_uri: str, warehouse: str, s3: dict[str, str] | None = None,
                 server_extra: dict[str, object] | None = None) -> None:
    s3_lines = "".join(f'      {k.removeprefix("s3.")}: "{v}"\n' for k, v in (s3 or {}).items())
    path.write_text(f"""
catalogs:
  - name: {CATALOG}
    type: sql
    uri: "{catalog_uri}"
    warehouse: "{warehouse}"
{"    s3:" + chr(10) + s3_lines if s3 else ""}
server:
  tokens:
    - name: writer
      token: {WRITE_TOKEN}
      role: write
    - name: reader
      token: {READ_TOKEN}
      roles: {{{CATALOG}: read}}
  clients:
    - client-id: {CLIENT_ID}
      client-secret: {CLIENT_SECRET}
      role: write
  token-secret: test-signing-secret
""" + "".join(f"  {k}: {v}\n" for k, v in (server_extra or {}).items()))


# Headers that differ between any two answers of the service.
VOLATILE_HEADERS = {"date", "x-request-id"}


def raw_answer(service: RestService, method: str, path: str, token: str, body: Any = None, raw: bytes | None = None,
               headers: dict[str, str] | None = None) -> tuple[int, list[tuple[str, str]], bytes]:
    """One request to ``service`` over a plain HTTP connection, no client library in between: the
    status, the headers but the volatile ones (lower-cased, in order) and the body. ``body`` is
    sent as JSON, ``raw`` as it is."""
    conn = http.client.HTTPConnection("127.0.0.1", service.port, timeout=30)
    try:
        sent = {"Authorization": f"Bearer {token}", **(headers or {})}
        if body is not None:
            raw = json.dumps(body).encode()
            sent["Content-Type"] = "application/json"
        conn.request(method, path, body=raw, headers=sent)
        response = conn.getresponse()
        kept = [(k.lower(), v) for k, v in response.getheaders() if k.lower() not in VOLATILE_HEADERS]
        return response.status, kept, response.read()
    finally:
        conn.close()

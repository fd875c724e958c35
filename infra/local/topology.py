"""The stack's topology as processes on loopback: what ``docker-compose.yml`` starts, without Docker.

| compose service            | here                                                         |
|----------------------------|--------------------------------------------------------------|
| minio + storage-init       | MinIO built from source; the bucket made with the ``minio`` SDK |
| postgres                   | PostgreSQL (Debian's or pgserver's binaries) via ``pg_ctl``  |
| catalog                    | ``tablestore catalog serve`` on that PostgreSQL and S3       |
| spark-master, spark-worker | ``spark-class`` Master and Worker from the PySpark package   |
| dagster-webserver, -daemon | ``dagster-webserver`` and ``dagster-daemon`` (if ``pipelines`` exists) |
| trino                      | none (Iceberg readers stand in: pyiceberg, the Java oracle)  |

Every service can be stopped, or killed (``kill()``: SIGKILL, no clean shutdown), and started again
on the same port and data, which is how the tests show that a crash of the catalog or PostgreSQL
loses no committed change. ``pipeline_settings_path`` is the pipeline's settings
(``pipelines/config/stack.yaml`` with these loopback addresses, ``$LAKEHOUSE_SETTINGS``).
"""

from __future__ import annotations

import glob
import importlib.util
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from infra.local.minio import minio_argv, minio_env
from infra.local.processes import (
    child_pids,
    free_port,
    http_ok,
    kill_pids,
    kill_process,
    spawn,
    stop_process,
    wait_until,
)
from infra.storage_init import create_buckets

VENV_BIN = Path(sys.executable).parent
REPO = Path(__file__).resolve().parents[2]
BUCKET = "lakehouse"
CATALOG = "lakehouse"  # what clients use: the REST catalog
METASTORE = "metastore"  # what the service serves: the SQL catalog on PostgreSQL
ACCESS_KEY = "lakehouse"
READY_TIMEOUT_S = 300.0  # a JVM takes a minute to start on a busy 2-core machine


@dataclass
class ServiceProcess:
    """One long-running service: how to start it, how to know it is ready, its process."""

    name: str
    url: str
    start_fn: Callable[[], subprocess.Popen[bytes] | None]
    ready_fn: Callable[[], bool]
    stop_fn: Callable[[subprocess.Popen[bytes] | None], None] = lambda p: stop_process(p) if p else None
    kill_fn: Callable[[subprocess.Popen[bytes] | None], None] = lambda p: kill_process(p) if p else None
    log_path: Path | None = None
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    def start(self, timeout_s: float = READY_TIMEOUT_S) -> None:
        self.launch()
        self.wait_ready(timeout_s)

    def launch(self) -> None:
        self.process = self.start_fn()

    def wait_ready(self, timeout_s: float = READY_TIMEOUT_S) -> None:
        wait_until(self.ready_fn, self.name, self.process, self.log_path, timeout_s)

    def stop(self) -> None:
        self.stop_fn(self.process)
        self.process = None

    def restart(self) -> None:
        self.stop()
        self.start()

    def kill(self) -> None:
        """SIGKILL, as a crash or ``docker kill`` would: no clean shutdown; ``start()`` brings it back."""
        self.kill_fn(self.process)
        self.process = None


def _pg_bindir() -> Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    if found:
        return Path(found[-1]).parent
    spec = importlib.util.find_spec("pgserver")
    if spec and spec.origin:
        bindir = Path(spec.origin).parent / "pginstall" / "bin"
        if (bindir / "pg_ctl").exists():
            return bindir
    raise RuntimeError("no PostgreSQL binaries: apt-get install postgresql, or install the pgserver package")


class LocalStack:
    """Start with ``start()`` (or ``with LocalStack.running(...)``); stop with ``stop()``.

    ``config_path`` is a tablestore.yaml for clients (catalog ``lakehouse`` of type rest, Spark on
    the standalone master); ``server_config_path`` is the catalog service's own.
    """

    def __init__(self, workdir: Path, spark_cores: int = 1, spark_memory: str = "1g", dagster: bool = True,
                 pipeline_data: dict[str, int] | None = None) -> None:
        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        self.secret_key = secrets.token_hex(16)
        self.token = secrets.token_hex(16)
        self.ports = {name: free_port() for name in
                      ("s3", "postgres", "catalog", "spark", "spark-ui", "worker-ui", "dagster")}
        self.s3_endpoint = f"http://127.0.0.1:{self.ports['s3']}"
        self.catalog_uri = f"http://127.0.0.1:{self.ports['catalog']}"
        self.spark_master = f"spark://127.0.0.1:{self.ports['spark']}"
        self.spark_cores = spark_cores
        self.spark_memory = spark_memory
        self.with_dagster = dagster
        self.services: list[ServiceProcess] = []
        self.skipped: dict[str, str] = {}
        self.config_path = workdir / "tablestore.yaml"
        self.server_config_path = workdir / "tablestore.server.yaml"
        self.pipeline_settings_path = workdir / "pipeline.yaml"
        self.pipeline_data = pipeline_data or {}
        self._pg_bindir = _pg_bindir()
        self._pg_data = workdir / "pgdata"
        self._run_as = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []

    # -- configuration ---------------------------------------------------------------------

    @property
    def postgres_uri(self) -> str:
        return f"postgresql+psycopg2://postgres@127.0.0.1:{self.ports['postgres']}/catalog"

    @property
    def s3_properties(self) -> dict[str, str]:
        return {"endpoint": self.s3_endpoint, "access-key-id": ACCESS_KEY, "secret-access-key": self.secret_key,
                "path-style-access": "true", "region": "us-east-1"}

    def _write_configs(self) -> None:
        # The same shape as infra/tablestore.stack.yaml, with loopback addresses.
        rest = {"name": CATALOG, "type": "rest", "uri": self.catalog_uri, "token": self.token,
                "default-database": "shop"}
        sql = {"name": METASTORE, "type": "sql", "uri": self.postgres_uri, "warehouse": f"s3://{BUCKET}/warehouse",
               "default-database": "shop", "s3": self.s3_properties}
        client = {"default-catalog": CATALOG, "catalogs": [rest], "spark": {"master": self.spark_master}}
        server = {"default-catalog": METASTORE, "catalogs": [sql],
                  "server": {"catalogs": [METASTORE], "host": "127.0.0.1", "port": self.ports["catalog"],
                             "tokens": [{"name": "local", "token": self.token, "role": "write"}],
                             # As in the stack: the pipeline's landing table is external, on local disk.
                             "allow-external-locations": True}}
        self.config_path.write_text(yaml.safe_dump(client, sort_keys=False))
        self.server_config_path.write_text(yaml.safe_dump(server, sort_keys=False))
        self._write_pipeline_settings(client)

    def _write_pipeline_settings(self, client: dict[str, Any]) -> None:
        # The stack's pipeline settings with this topology's addresses. Spark gets the client
        # config's master, with shuffles sized for one small worker.
        stack_settings = REPO / "pipelines" / "config" / "stack.yaml"
        if not stack_settings.exists():
            return
        doc = yaml.safe_load(stack_settings.read_text())
        doc["root"] = str(self.workdir / "lakehouse")
        parallelism = str(max(2, self.spark_cores))
        doc["tablestore"] = {**client, "spark": {"master": self.spark_master, "conf": {
            "spark.sql.shuffle.partitions": parallelism, "spark.default.parallelism": parallelism,
            "spark.ui.showConsoleProgress": "false"}}}
        doc.pop("trino", None)  # no Trino here: the reconciliation asset records that it skipped
        # No landing bucket here: files land in the local landing folder, where the sensors (and
        # the pipeline run in-process) find them, as in the embedded default.
        doc.pop("landing-bucket", None)
        doc["data"].update(self.pipeline_data)
        self.pipeline_settings_path.write_text(yaml.safe_dump(doc, sort_keys=False))

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable,
                   TABLESTORE_CONFIG=str(self.config_path), SPARK_LOCAL_IP="127.0.0.1",
                   SPARK_LOG_DIR=str(self.workdir / "spark-logs"), SPARK_WORKER_DIR=str(self.workdir / "spark-work"))
        return env

    # -- services --------------------------------------------------------------------------

    def _s3(self) -> ServiceProcess:
        log = self.workdir / "s3.log"
        # Its objects live in workdir/minio-data: a restart (or a SIGKILL) of the process keeps them.
        return ServiceProcess(
            "s3", self.s3_endpoint,
            lambda: spawn(minio_argv(self.workdir / "minio-data", self.ports["s3"]), log,
                          env=minio_env(ACCESS_KEY, self.secret_key), cwd=self.workdir),
            lambda: http_ok(f"{self.s3_endpoint}/minio/health/ready"), log_path=log)

    def _postgres(self) -> ServiceProcess:
        log = self._pg_data.parent / "postgres.log"
        sock = self.workdir / "pgsock"

        def start() -> None:
            if not (self._pg_data / "PG_VERSION").exists():
                for d in (self._pg_data, sock):
                    d.mkdir(exist_ok=True)
                    if self._run_as:
                        shutil.chown(d, "postgres")
                subprocess.run([*self._run_as, str(self._pg_bindir / "initdb"), "-D", str(self._pg_data),
                                "-U", "postgres", "--auth=trust"], check=True, capture_output=True)
            if self._run_as:
                log.touch()
                shutil.chown(log, "postgres")
            started = subprocess.run(
                [*self._run_as, str(self._pg_bindir / "pg_ctl"), "-D", str(self._pg_data), "-w", "-l", str(log),
                 "-o", f"-h 127.0.0.1 -k {sock} -p {self.ports['postgres']}", "start"],
                check=False, capture_output=True, timeout=120)
            if started.returncode != 0:
                raise RuntimeError(f"PostgreSQL did not start:\n{log.read_text(errors='replace')[-3000:]}")
            # The catalog database, once (the compose file's POSTGRES_DB).
            psql = [*self._run_as, str(self._pg_bindir / "psql"), "-h", "127.0.0.1", "-p",
                    str(self.ports["postgres"]), "-U", "postgres", "-tAc"]
            exists = subprocess.run([*psql, "SELECT 1 FROM pg_database WHERE datname='catalog'"],
                                    check=True, capture_output=True, text=True).stdout.strip()
            if not exists:
                subprocess.run([*psql, "CREATE DATABASE catalog"], check=True, capture_output=True)

        def stop(_: subprocess.Popen[bytes] | None) -> None:
            subprocess.run([*self._run_as, str(self._pg_bindir / "pg_ctl"), "-D", str(self._pg_data), "-w",
                            "-m", "fast", "stop"], check=False, capture_output=True, timeout=60)

        def ready() -> bool:
            return subprocess.run([str(self._pg_bindir / "pg_isready"), "-h", "127.0.0.1", "-p",
                                   str(self.ports["postgres"])], capture_output=True).returncode == 0

        def kill(_: subprocess.Popen[bytes] | None) -> None:
            # The postmaster and every backend, as a crash of the container would; the next
            # start finds the stale postmaster.pid and recovers from the WAL.
            pid_file = self._pg_data / "postmaster.pid"
            if pid_file.exists():
                postmaster = int(pid_file.read_text().split()[0])
                kill_pids([postmaster, *child_pids(postmaster)])
                if Path(f"/proc/{postmaster}").exists():
                    # Dead but not yet reaped by init: PostgreSQL would take the zombie for a live
                    # postmaster and refuse to start. In a killed container its id is gone with it.
                    pid_file.unlink()

        def start_fn() -> None:
            start()

        return ServiceProcess("postgres", self.postgres_uri, start_fn, ready, stop, kill, log_path=log)

    def _catalog(self) -> ServiceProcess:
        log = self.workdir / "catalog.log"
        return ServiceProcess(
            "catalog", self.catalog_uri,
            lambda: spawn([str(VENV_BIN / "tablestore"), "catalog", "serve", "--config", str(self.server_config_path)],
                          log, env=self._env(), cwd=self.workdir),
            lambda: http_ok(f"{self.catalog_uri}/v1/config", {"Authorization": f"Bearer {self.token}"}),
            log_path=log)

    def _spark_class(self) -> str:
        import pyspark

        return str(Path(pyspark.__file__).parent / "bin" / "spark-class")

    def _spark_master(self) -> ServiceProcess:
        log = self.workdir / "spark-master.log"
        ui = f"http://127.0.0.1:{self.ports['spark-ui']}"
        return ServiceProcess(
            "spark-master", self.spark_master,
            lambda: spawn([self._spark_class(), "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                           "--port", str(self.ports["spark"]), "--webui-port", str(self.ports["spark-ui"])],
                          log, env=self._env(), cwd=self.workdir),
            lambda: http_ok(f"{ui}/json/"), log_path=log)

    def _spark_worker(self) -> ServiceProcess:
        import json
        import urllib.request

        log = self.workdir / "spark-worker.log"
        ui = f"http://127.0.0.1:{self.ports['spark-ui']}/json/"

        def registered() -> bool:
            # Ready when the master counts it as an alive worker.
            try:
                with urllib.request.urlopen(ui, timeout=3) as r:
                    return int(json.load(r).get("aliveworkers", 0)) >= 1
            except OSError:
                return False

        return ServiceProcess(
            "spark-worker", f"http://127.0.0.1:{self.ports['worker-ui']}",
            lambda: spawn([self._spark_class(), "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                           "--cores", str(self.spark_cores), "--memory", self.spark_memory,
                           "--webui-port", str(self.ports["worker-ui"]), self.spark_master],
                          log, env=self._env(), cwd=self.workdir),
            registered, log_path=log)

    def _dagster(self) -> list[ServiceProcess]:
        repo = REPO
        home = self.workdir / "dagster-home"
        home.mkdir(exist_ok=True)
        (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
        workspace = self.workdir / "workspace.yaml"
        workspace.write_text(yaml.safe_dump({"load_from": [{"python_module": {
            "module_name": "pipelines.definitions", "attribute": "defs", "location_name": "pipelines",
            "working_directory": str(repo)}}]}))
        env = {**self._env(), "DAGSTER_HOME": str(home), "LAKEHOUSE_ENV": "stack",
               "LAKEHOUSE_SETTINGS": str(self.pipeline_settings_path)}
        url = f"http://127.0.0.1:{self.ports['dagster']}"
        web_log, daemon_log = self.workdir / "dagster-webserver.log", self.workdir / "dagster-daemon.log"
        web = ServiceProcess(
            "dagster-webserver", url,
            lambda: spawn([str(VENV_BIN / "dagster-webserver"), "-h", "127.0.0.1", "-p", str(self.ports["dagster"]),
                           "-w", str(workspace)], web_log, env=env, cwd=repo),
            lambda: http_ok(f"{url}/server_info"), log_path=web_log)
        daemon = ServiceProcess(
            "dagster-daemon", "",
            lambda: spawn([str(VENV_BIN / "dagster-daemon"), "run", "-w", str(workspace)], daemon_log,
                          env=env, cwd=repo),
            lambda: True, log_path=daemon_log)
        return [web, daemon]

    # -- lifecycle -------------------------------------------------------------------------

    def service(self, name: str) -> ServiceProcess:
        return next(s for s in self.services if s.name == name)

    def start(self) -> None:
        self._write_configs()
        s3, postgres, catalog = self._s3(), self._postgres(), self._catalog()
        master, worker = self._spark_master(), self._spark_worker()
        try:
            # Launched together, then waited for: the JVMs' start-up dominates on a busy machine.
            # The worker retries registering until the master answers; postgres starts synchronously.
            for svc in (s3, master, worker, postgres):
                self.services.append(svc)
                svc.launch()
            s3.wait_ready()
            # storage-init: the same code as the compose service, on the stand-in for MinIO.
            create_buckets(self.s3_endpoint.removeprefix("http://"), ACCESS_KEY, self.secret_key, (BUCKET,))
            postgres.wait_ready()
            self.services.append(catalog)
            catalog.start()
            master.wait_ready()
            worker.wait_ready()
            if self.with_dagster:
                if importlib.util.find_spec("pipelines") is None or importlib.util.find_spec("dagster") is None:
                    self.skipped["dagster"] = ("the Dagster code location `pipelines` (or dagster) is not "
                                               "installed here; the webserver and daemon were not started")
                else:
                    for svc in self._dagster():
                        self.services.append(svc)
                        svc.start()
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Stop every service, last started first; each by its own process id."""
        errors = []
        for svc in reversed(self.services):
            try:
                svc.stop()
            except Exception as e:  # keep stopping the others
                errors.append(f"{svc.name}: {e!r}")
        self.services.clear()
        if errors:
            raise RuntimeError("could not stop: " + "; ".join(errors))

    @classmethod
    @contextmanager
    def running(cls, workdir: Path | None = None, **kwargs: object) -> Iterator[LocalStack]:
        tmp = None
        if workdir is None:
            tmp = Path(tempfile.mkdtemp(prefix="lakehouse-local-"))
            tmp.chmod(0o755)  # PostgreSQL runs as the postgres user when we are root
            workdir = tmp
        stack = cls(workdir, **kwargs)  # type: ignore[arg-type]
        stack.start()
        try:
            yield stack
        finally:
            try:
                stack.stop()
            finally:
                if tmp is not None:
                    shutil.rmtree(tmp, ignore_errors=True)

    def urls(self) -> dict[str, str]:
        return {s.name: s.url for s in self.services if s.url}

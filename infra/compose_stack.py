"""A throwaway Docker Compose stack of this repository, for the stack test and the benchmark.

Under a project name of its own, with fresh secrets in a private ``.env`` and engine-chosen
loopback ports, so that a user's stack (``make up`` on 3000, 8181, ...) is never touched.
With the ``trino`` profile: on machines that cannot pull ``trinodb/trino:476``, ``make images``
builds it first (``infra/images``); ``running_stack`` builds any image that is missing.

``ensure_engine`` starts the machine's Docker engine with ``../shared/docker-stack/setup`` when
none answers (the test turns its error into a failure, never a skip).
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from infra.images import ensure_images

ROOT = Path(__file__).resolve().parents[1]
SETUP = ROOT.parent / "shared" / "docker-stack" / "setup"
# Where setup keeps the engine's pid and log.
SETUP_WORK = Path(os.environ.get("DOCKER_STACK_WORK", "/var/tmp/docker-stack"))
COMPOSE_FILE = ROOT / "docker-compose.yml"
ENGINE_HINT = ("check out ../shared beside the repository: ../shared/docker-stack/setup installs and starts "
               "the Docker engine and builds the stand-ins of the base images")
# Seconds before run monitoring fails a run that has not started, in the stacks made here.
RUN_START_TIMEOUT_S = 45
PORT_VARIABLES = ("MINIO_PORT", "MINIO_CONSOLE_PORT", "POSTGRES_PORT", "CATALOG_PORT", "SPARK_MASTER_UI_PORT",
                  "SPARK_WORKER_UI_PORT", "DAGSTER_PORT", "TRINO_PORT", "KEYCLOAK_PORT")


class StackError(RuntimeError):
    """The engine or the stack could not be brought up; the message says what to do."""


def engine_answers() -> bool:
    try:
        return subprocess.run(["docker", "info"], capture_output=True, timeout=60).returncode == 0
    except (FileNotFoundError, subprocess.TimeoutExpired):
        return False


def ensure_engine() -> None:
    """A Docker engine that answers: ``../shared/docker-stack/setup`` starts one when none does."""
    if engine_answers():
        return
    if not SETUP.exists():
        raise StackError(f"no Docker engine answers and {SETUP} does not exist; {ENGINE_HINT}")
    # In a session of its own: setup leaves dockerd running in the background, and in the
    # caller's process group it would die with it (Ctrl-C on `make test`, a killed test run),
    # taking every stack on the machine down, other users' included.
    done = subprocess.run([str(SETUP)], capture_output=True, text=True, timeout=1200, start_new_session=True)
    if done.returncode != 0 or not engine_answers():
        raise StackError(f"{SETUP} did not start a Docker engine (exit {done.returncode}): {done.stderr[-2000:]}")


@dataclass
class Stack:
    project: str
    env: dict[str, str]  # the secrets and settings of this stack (never printed)
    command: list[str]
    env_file: Path
    timings: dict[str, float] = field(default_factory=dict)  # seconds: "up" (build included), "down"

    def compose(self, *args: str, timeout: float = 600, check: bool = True) -> subprocess.CompletedProcess[str]:
        # The process environment may carry a user's COMPOSE_PROFILES or *_PORT: ours win.
        environ = {**os.environ, **self.env}
        done = subprocess.run([*self.command, *args], capture_output=True, text=True, timeout=timeout,
                              env=environ, cwd=ROOT)
        if check and done.returncode != 0:
            raise StackError(f"docker compose {' '.join(args)} failed: {done.stderr[-3000:]}")
        return done

    def address(self, service: str, port: int) -> str:
        """host:port that ``service``'s ``port`` is published on."""
        return self.compose("port", service, str(port)).stdout.strip()

    def url(self, service: str, port: int) -> str:
        return f"http://{self.address(service, port)}"

    def container(self, service: str) -> dict[str, Any]:
        """``docker inspect`` of ``service``'s container (running or exited)."""
        container_id = self.compose("ps", "-a", "-q", service).stdout.strip()
        inspected = subprocess.run(["docker", "inspect", container_id], capture_output=True, text=True, check=True)
        info: dict[str, Any] = json.loads(inspected.stdout)[0]
        return info


def write_env_file(path: Path, project: str, profiles: tuple[str, ...] = ("trino",)) -> dict[str, str]:
    """Fresh secrets, the compose profiles (trino), loopback, engine-chosen host ports; mode 0600."""
    values = {
        "MINIO_ROOT_USER": "lakehouse",
        "MINIO_ROOT_PASSWORD": secrets.token_hex(16),
        "MINIO_CATALOG_USER": "catalog",
        "MINIO_CATALOG_PASSWORD": secrets.token_hex(16),
        "MINIO_LANDING_USER": "landing-reader",
        "MINIO_LANDING_PASSWORD": secrets.token_hex(16),
        "POSTGRES_PASSWORD": secrets.token_hex(16),
        "CATALOG_TOKEN_TRINO": secrets.token_hex(16),
        "CATALOG_TOKEN_SPARK": secrets.token_hex(16),
        "CATALOG_TOKEN_DAGSTER": secrets.token_hex(16),
        "CATALOG_TOKEN_SECRET": secrets.token_hex(24),
        "CATALOG_CLIENT_SECRET_TRINO": secrets.token_hex(16),
        # The keycloak profile is off here, but Compose checks every service's variables.
        "KEYCLOAK_ADMIN_PASSWORD": secrets.token_hex(16),
        "KEYCLOAK_CLIENT_SECRET_ENGINEER": secrets.token_hex(16),
        "KEYCLOAK_CLIENT_SECRET_ANALYST": secrets.token_hex(16),
        "COMPOSE_PROJECT_NAME": project,
        # Trino runs unless left out: `make images` builds trinodb/trino:476 where it cannot be pulled.
        "COMPOSE_PROFILES": ",".join(profiles),
        "LAKEHOUSE_BIND": "127.0.0.1",
        # Run monitoring fails a run left STARTING after 45 s, polled every 5 s (infra/dagster/
        # dagster.yaml: 90 s and 15 s); 45 s stays above the slowest start measured under load
        # (40 s), so a slow start is not failed.
        "DAGSTER_RUN_START_TIMEOUT_SECONDS": str(RUN_START_TIMEOUT_S),
        "DAGSTER_RUN_MONITORING_POLL_SECONDS": "5",
        # Empty host ports: the engine picks free ones.
        **{name: "" for name in PORT_VARIABLES},
    }
    path.write_text("".join(f"{k}={v}\n" for k, v in values.items()))
    path.chmod(0o600)
    return values


@contextmanager
def running_stack(workdir: Path, prefix: str = "tablestore-test", profiles: tuple[str, ...] = ("trino",),
                  overrides: tuple[Path, ...] = ()) -> Iterator[Stack]:
    """``docker compose up --build --wait`` of every service of ``profiles`` (Trino by default);
    ``down -v`` at the end, whatever happened. ``overrides`` are Compose files merged over
    docker-compose.yml (a benchmark's own pipeline settings, say)."""
    ensure_engine()
    # The images this machine cannot pull (make images: MinIO, Trino): built once, then found current.
    ensure_images()
    project = f"{prefix}-{uuid.uuid4().hex[:8]}"
    env_path = workdir / ".env"
    env = write_env_file(env_path, project, profiles)
    files = [arg for path in (COMPOSE_FILE, *overrides) for arg in ("-f", str(path))]
    stack = Stack(project, env, ["docker", "compose", "--project-directory", str(ROOT), *files,
                                 "--env-file", str(env_path), "-p", project], env_path)
    try:
        started = time.monotonic()
        up = stack.compose("up", "--build", "--wait", "--wait-timeout", "600", timeout=1500, check=False)
        stack.timings["up"] = time.monotonic() - started
        if up.returncode != 0:
            logs = stack.compose("logs", "--tail=40", timeout=120, check=False).stdout
            raise StackError(f"docker compose up --build --wait failed: {up.stderr[-3000:]}\n{logs[-6000:]}")
        yield stack
    finally:
        started = time.monotonic()
        stack.compose("down", "-v", "--remove-orphans", timeout=600, check=False)
        stack.timings["down"] = time.monotonic() - started

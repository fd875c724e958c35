"""Static checks of docker-compose.yml and infra/: no Docker engine here, so the stack must be right
by construction. Every file it references exists; names, ports, credentials and buckets agree
across the compose file, infra/'s configs and the stack's tablestore.yaml; the Trino catalog uses
only properties the pinned Trino knows; ``docker-compose config`` accepts it."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from tablestore.config import parse_config
from tablestore.rest.settings import server_settings
from tests.services import PostgresServer

ROOT = Path(__file__).resolve().parents[2]
INFRA = ROOT / "infra"
COMPOSE = ROOT / "docker-compose.yml"
ENV_EXAMPLE = INFRA / ".env.example"
STACK_CONFIG = INFRA / "tablestore.stack.yaml"
TRINO_CATALOG = INFRA / "trino" / "catalog" / "lakehouse.properties"
# The image's WORKDIR: /app/<path> inside the image is <path> in this repository.
IMAGE_ROOT = "/app/"
TRINO_VERSION = "476"
KEYCLOAK_VERSION = "26.7.3"

# Catalog properties Trino 476 knows, as used here. Sources (Trino 476 documentation):
# https://trino.io/docs/476/connector/iceberg.html (connector.name, iceberg.catalog.type),
# https://trino.io/docs/476/object-storage/metastores.html#iceberg-rest-catalog
#   (iceberg.rest-catalog.uri, .security, .oauth2.token, .oauth2.credential, .warehouse,
#   .vended-credentials-enabled, .view-endpoints-enabled); tests/interop/test_trino.py starts
#   the real 476 with them,
# https://trino.io/docs/476/object-storage/file-system-s3.html (fs.native-s3.enabled, s3.endpoint,
#   s3.region, s3.path-style-access, s3.aws-access-key, s3.aws-secret-key). Trino renamed
#   fs.native-s3.enabled to fs.s3.enabled in 2026; 476 only knows the old name.
TRINO_476_PROPERTIES = {
    "connector.name", "iceberg.catalog.type", "iceberg.rest-catalog.uri", "iceberg.rest-catalog.security",
    "iceberg.rest-catalog.oauth2.token", "iceberg.rest-catalog.oauth2.credential", "iceberg.rest-catalog.warehouse",
    "iceberg.rest-catalog.vended-credentials-enabled", "iceberg.rest-catalog.view-endpoints-enabled",
    "fs.native-s3.enabled", "s3.endpoint", "s3.region",
    "s3.path-style-access", "s3.aws-access-key", "s3.aws-secret-key",
}
OUR_IMAGE_SERVICES = ("storage-init", "catalog", "spark-master", "spark-worker", "spark-connect", "dagster-code",
                      "dagster-webserver", "dagster-daemon")


def _compose() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(COMPOSE.read_text())
    return data


def _services() -> dict[str, Any]:
    services: dict[str, Any] = _compose()["services"]
    return services


def _env_example() -> dict[str, str]:
    pairs = (line.split("=", 1) for line in ENV_EXAMPLE.read_text().splitlines()
             if line.strip() and not line.startswith("#"))
    return {k.strip(): v.strip() for k, v in pairs}


def _properties(path: Path) -> dict[str, str]:
    pairs = (line.split("=", 1) for line in path.read_text().splitlines() if line.strip() and not line.startswith("#"))
    return {k.strip(): v.strip() for k, v in pairs}


def _stack_config() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(STACK_CONFIG.read_text())
    return data


def _catalog_entry(name: str) -> dict[str, Any]:
    return next(c for c in _stack_config()["catalogs"] if c["name"] == name)


def _container_port(service: str, flag: str) -> str:
    command = _services()[service]["command"]
    return str(command[command.index(flag) + 1])


# "${LAKEHOUSE_BIND:-127.0.0.1}:${NAME-default}:container": the bind address and the host port
# are variables with defaults.
PORT_RE = re.compile(r"^\$\{LAKEHOUSE_BIND:-127\.0\.0\.1\}:\$\{(\w+)-(\d+)\}:(\d+)$")


def _published(service: str) -> dict[str, str]:
    """container port -> default host port."""
    out = {}
    for port in _services()[service].get("ports", []):
        match = PORT_RE.match(port)
        assert match, f"{service} publishes {port!r}, not ${{LAKEHOUSE_BIND:-127.0.0.1}}:${{VAR-port}}:port"
        out[match.group(3)] = match.group(2)
    return out


# -- every referenced file exists -----------------------------------------------------------


def test_build_contexts_dockerfiles_and_mounts_exist() -> None:
    for name, service in _services().items():
        build = service.get("build")
        if build:
            context = ROOT / build["context"]
            assert context.is_dir(), name
            assert (context / build.get("dockerfile", "Dockerfile")).is_file(), name
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            if source.startswith("."):
                assert (ROOT / source).exists(), f"{name} mounts {source}, which does not exist"
            else:
                assert source in (_compose().get("volumes") or {}), f"{name}: undeclared volume {source}"


def test_every_service_of_our_image_builds_the_one_image_and_never_pulls_it() -> None:
    services = _services()
    images = {services[name]["image"] for name in OUR_IMAGE_SERVICES}
    assert images == {"lakehouse/tablestore:0.1.0"}
    builders = sorted(name for name, s in services.items() if "build" in s)
    assert builders == sorted(OUR_IMAGE_SERVICES)
    # A fresh `make up` built it, but first tried to pull it from a registry five times.
    assert {services[name]["pull_policy"] for name in OUR_IMAGE_SERVICES} == {"build"}
    assert len({str(services[name]["build"]) for name in OUR_IMAGE_SERVICES}) == 1


def test_dockerfile_copies_existing_paths_and_installs_from_the_lock() -> None:
    dockerfile = (INFRA / "Dockerfile").read_text()
    assert re.search(r"^FROM python:3\.11", dockerfile, re.M)
    assert "openjdk-17-jre-headless" in dockerfile
    assert "uv sync --frozen" in dockerfile
    assert not re.match(r"#\s*syntax=", dockerfile)  # the engine's own frontend: nothing to pull
    ignored = {line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()
               if line.strip() and not line.startswith("#")}
    assert ".env" in ignored  # secrets never enter the image
    for line in dockerfile.splitlines():
        if line.startswith("COPY "):
            for source in line.split()[1:-1]:
                assert (ROOT / source).exists(), f"Dockerfile copies {source}, which does not exist"
                assert source not in ignored, f"Dockerfile copies {source}, which .dockerignore leaves out"


def test_paths_inside_the_image_exist_in_the_repository() -> None:
    texts = [COMPOSE.read_text(), (INFRA / "Dockerfile").read_text(), (INFRA / "spark" / "spark-defaults.conf").read_text()]
    paths = {m for text in texts for m in re.findall(r"/app/((?:infra|tablestore)/[\w./-]+)", text)}
    assert "infra/tablestore.stack.yaml" in paths and "infra/dagster/workspace.yaml" in paths
    for path in paths:
        assert (ROOT / path).exists(), f"/app/{path} is referenced but {path} does not exist"


def test_dagster_workspace_names_the_pipeline_code_location() -> None:
    # The webserver and the daemon load the code location from the code server's gRPC port.
    workspace = yaml.safe_load((INFRA / "dagster" / "workspace.yaml").read_text())
    (entry,) = workspace["load_from"]
    grpc = entry["grpc_server"]
    code = _services()["dagster-code"]["command"]
    assert (grpc["host"], str(grpc["port"]), grpc["location_name"]) == (
        "dagster-code", code[code.index("-p") + 1], code[code.index("--location-name") + 1])
    assert code[:3] == ["dagster", "code-server", "start"]
    assert (code[code.index("-m") + 1], code[code.index("-a") + 1], code[code.index("-d") + 1]) == (
        "pipelines.definitions", "defs", IMAGE_ROOT.rstrip("/"))
    assert (ROOT / "pipelines" / "definitions.py").exists()
    # The instance lives in the stack's PostgreSQL, in the database storage-init creates.
    dagster = yaml.safe_load((INFRA / "dagster" / "dagster.yaml").read_text())
    db = dagster["storage"]["postgres"]["postgres_db"]
    pg = _services()["postgres"]
    assert (db["hostname"], db["port"], db["username"]) == ("postgres", 5432, pg["environment"]["POSTGRES_USER"])
    assert db["password"] == {"env": "POSTGRES_PASSWORD"}
    init = _services()["storage-init"]["command"]
    assert init[init.index("--dagster-database") + 1] == db["db_name"] != pg["environment"]["POSTGRES_DB"]
    # Compute logs: written by the runs (in the code server), read by the webserver.
    for name in ("dagster-code", "dagster-webserver"):
        mounts = {v.split(":")[1] for v in _services()[name]["volumes"]}
        assert dagster["local_artifact_storage"]["config"]["base_dir"] in mounts


def _instructions() -> list[str]:
    """The Dockerfile's instructions, continuation lines joined, comments left out."""
    text = re.sub(r"\\\n", " ", (INFRA / "Dockerfile").read_text())
    return [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def test_dockerfile_makes_the_man_directory_before_installing_the_jre() -> None:
    # The slim base has no /usr/share/man/man1; the JRE's update-alternatives fails without it.
    (install,) = [i for i in _instructions() if "openjdk-17-jre-headless" in i]
    assert install.index("mkdir -p /usr/share/man/man1") < install.index("apt-get install")


def test_java_home_is_not_tied_to_one_architecture() -> None:
    dockerfile = (INFRA / "Dockerfile").read_text()
    (java_home,) = re.findall(r"JAVA_HOME=(\S+)", dockerfile)
    assert not re.search(r"amd64|arm64|x86_64|aarch64", java_home), java_home
    # The link JAVA_HOME names is made from wherever /usr/bin/java resolves to.
    assert f'"$(dirname "$(dirname "$(readlink -f /usr/bin/java)")")" {java_home}' in dockerfile


def test_dockerfile_keeps_the_uv_cache_out_of_the_image_and_dependencies_in_their_own_layer() -> None:
    instructions = _instructions()
    syncs = [i for i in instructions if "uv sync" in i]
    assert len(syncs) == 2
    for sync in syncs:  # the cache is a BuildKit cache mount, not part of any layer
        assert sync.startswith("RUN --mount=type=cache,target=/root/.cache/uv "), sync
    copies = [i for i in instructions if i.startswith("COPY ")]
    # The dependency layer depends on pyproject.toml and uv.lock alone, so a change of the
    # sources or the README reuses it; the sources come after it.
    assert copies[0] == "COPY pyproject.toml uv.lock ./"
    first_sync = instructions.index(syncs[0])
    assert "--no-install-project" in syncs[0] and instructions.index(copies[0]) < first_sync
    assert all(instructions.index(c) > first_sync for c in copies[1:])
    assert "pip install --no-cache-dir" in "\n".join(instructions)


def test_ports_are_published_on_loopback_unless_lakehouse_bind_says_otherwise() -> None:
    published = {name: _published(name) for name in _services()}  # asserts the form of each port
    assert published["dagster-webserver"] == {"3000": "3000"} and published["catalog"] == {"8181": "8181"}
    # The master's RPC port and the Spark Connect server run code: they stay on the stack's network.
    assert "7077" not in published["spark-master"]
    assert published["spark-connect"] == {}
    example = _env_example()
    assert example["LAKEHOUSE_BIND"] == "127.0.0.1"
    for ports in published.values():
        for container, variable in ports.items():
            assert example[_host_port_variable(container, ports)] == variable


def _host_port_variable(container: str, ports: dict[str, str]) -> str:
    for service in _services().values():
        for port in service.get("ports", []):
            match = PORT_RE.match(port)
            if match and match.group(3) == container and match.group(2) == ports[container]:
                return match.group(1)
    raise AssertionError(container)


def test_long_running_services_have_an_init_and_restart_by_themselves() -> None:
    for name, service in _services().items():
        if name == "storage-init":
            assert service["restart"] == "no"  # runs once; a restart would loop
            continue
        assert service.get("init") is True, f"{name} has no init process to reap zombies"
        assert service.get("restart") == "unless-stopped", f"{name} stays down when it dies"


def test_healthchecks_wait_for_real_readiness() -> None:
    services = _services()
    pg = services["postgres"]["healthcheck"]["test"]
    assert pg[0] == "CMD-SHELL" and re.search(r"pg_isready -h localhost\b", pg[1]), pg
    # Trino's /v1/info answers while it starts; the image's own check waits for "starting":false.
    assert services["trino"]["healthcheck"]["test"] == ["CMD", "/usr/lib/trino/bin/health-check"]


def test_trino_is_an_opt_in_profile_the_pipeline_is_told_about() -> None:
    services = _services()
    assert services["trino"]["profiles"] == ["trino"]
    assert [n for n, s in services.items() if "profiles" in s] == ["trino", "keycloak"]
    assert _compose()["x-lakehouse-env"]["LAKEHOUSE_PROFILES"] == "${COMPOSE_PROFILES:-}"
    assert _env_example()["COMPOSE_PROFILES"] == "trino"  # a user's full stack has Trino


def test_keycloak_is_an_opt_in_profile_whose_realm_the_catalog_trusts() -> None:
    keycloak = _services()["keycloak"]
    assert keycloak["profiles"] == ["keycloak"] and keycloak["image"] == f"quay.io/keycloak/keycloak:{KEYCLOAK_VERSION}"
    command = keycloak["command"]
    assert command[0] == "start-dev" and "--import-realm" in command
    hostname = command[command.index("--hostname") + 1]
    assert hostname == f"http://keycloak:{command[command.index('--http-port') + 1]}"
    assert _published("keycloak") == {"8080": "8180"}
    assert "./infra/keycloak:/opt/keycloak/data/import:ro" in keycloak["volumes"]
    realm = json.loads((INFRA / "keycloak" / "lakehouse-realm.json").read_text())
    # Its secrets come from the environment (Keycloak resolves ${VAR} when it imports the file).
    secrets = {c["secret"].strip("${}") for c in realm["clients"]}
    assert secrets <= set(keycloak["environment"]) and secrets <= set(_env_example())
    env = _env_example()
    text = re.sub(r"\$\{(\w+)\}", lambda m: env[m.group(1)], STACK_CONFIG.read_text())
    (issuer,) = server_settings(parse_config(text, source=str(STACK_CONFIG))).oidc
    assert issuer.issuer == f"{hostname}/realms/{realm['realm']}"
    assert issuer.token_endpoint == f"{issuer.issuer}/protocol/openid-connect/token"
    assert set(issuer.roles) == {r["name"] for r in realm["roles"]["realm"]}
    audience = next(m["config"]["included.custom.audience"] for s in realm["clientScopes"] if s["name"] == "catalog"
                    for m in s["protocolMappers"] if m["protocolMapper"] == "oidc-audience-mapper")
    assert audience == issuer.audience


def test_spark_applications_do_not_starve_and_work_outside_the_venv() -> None:
    conf = dict(line.split(None, 1) for line in (INFRA / "spark" / "spark-defaults.conf").read_text().splitlines()
                if line.strip() and not line.startswith("#"))
    worker = _services()["spark-worker"]["command"]
    cores = int(worker[worker.index("--cores") + 1])
    assert int(conf["spark.cores.max"].strip()) <= cores
    # Shuffles sized to the worker's cores (Spark's 200 partitions cost the small pipeline's joins).
    assert int(conf["spark.sql.shuffle.partitions"].strip()) == 2 * cores
    work_dir = worker[worker.index("--work-dir") + 1]
    assert not work_dir.startswith("/app"), work_dir
    assert f"SPARK_WORKER_DIR={work_dir}" in (INFRA / "Dockerfile").read_text()
    # One run at a time, every step in the run's process; the Spark work of every run goes to
    # the one long-lived application of the Spark Connect server, which the pipeline's stack
    # settings and the stack's tablestore config name.
    connect = _services()["spark-connect"]["command"]
    assert connect[:3] == ["python", "-m", "infra.spark_connect"]
    url = f"sc://spark-connect:{connect[connect.index('--port') + 1]}"
    assert connect[connect.index("--master") + 1] == f"spark://spark-master:{_container_port('spark-master', '--port')}"
    pipeline_stack = yaml.safe_load((ROOT / "pipelines" / "config" / "stack.yaml").read_text())
    assert pipeline_stack["tablestore"]["spark"]["master"] == url
    dagster = yaml.safe_load((INFRA / "dagster" / "dagster.yaml").read_text())
    assert dagster["run_coordinator"]["config"]["max_concurrent_runs"] == 1
    from pipelines.definitions import build_definitions

    executor = build_definitions().resolve_job_def("__ASSET_JOB").executor_def
    assert executor.name == "in_process"


def test_make_ps_shows_exited_containers_and_the_stack_tests_outlive_pytest_timeout() -> None:
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^ps:\n\t\$\(COMPOSE\) ps -a$", makefile, re.M)
    match = re.search(r"^timeout = (\d+)$", (ROOT / "pyproject.toml").read_text(), re.M)
    assert match
    from tests.infra import test_docker_stack, test_stack

    for module in (test_stack, test_docker_stack):
        marks = [m for m in module.pytestmark if m.name == "timeout"]
        assert marks and marks[0].args[0] > module.PLAN_TIMEOUT_S > int(match.group(1)), module.__name__


# -- health and start order ------------------------------------------------------------------


def test_pinned_images_healthchecks_and_start_conditions() -> None:
    services = _services()
    assert services["minio"]["image"] == "quay.io/minio/minio:RELEASE.2025-09-07T16-13-09Z"
    assert services["trino"]["image"] == f"trinodb/trino:{TRINO_VERSION}"
    for name, service in services.items():
        image = service["image"]
        assert ":" in image and not image.endswith(":latest"), f"{name}: unpinned image {image}"
        for dep, cond in (service.get("depends_on") or {}).items():
            assert dep in services, f"{name} depends on unknown {dep}"
            condition = cond["condition"]
            assert condition in ("service_healthy", "service_completed_successfully"), (name, dep)
            if condition == "service_healthy":
                assert "healthcheck" in services[dep], f"{name} waits for {dep} to be healthy; it has no healthcheck"
            else:
                assert services[dep].get("restart") == "no", f"{dep} runs once"
    # Every long-running service reports health, so `docker compose up --wait` means ready.
    assert {n for n, s in services.items() if "healthcheck" not in s} == {"storage-init"}
    assert services["catalog"]["depends_on"] == {"postgres": {"condition": "service_healthy"},
                                                 "storage-init": {"condition": "service_completed_successfully"}}
    # storage-init makes Dagster's database in PostgreSQL, so it waits for it too.
    assert set(services["storage-init"]["depends_on"]) == {"minio", "postgres"}
    # The daemon launches the runs: it waits for the catalog and the Spark Connect server (the
    # webserver does not wait for Spark, so it starts while the JVMs do); both load the code
    # location from the code server.
    assert set(services["dagster-daemon"]["depends_on"]) == {"dagster-code", "catalog", "spark-connect"}
    assert services["spark-connect"]["depends_on"] == {"spark-worker": {"condition": "service_healthy"}}
    assert set(services["dagster-webserver"]["depends_on"]) == {"catalog", "dagster-code"}
    assert services["dagster-code"]["healthcheck"]["test"][:4] == ["CMD", "dagster", "api", "grpc-health-check"]


# -- names, ports, credentials and buckets agree ---------------------------------------------


def test_secrets_are_all_in_env_example_and_reach_the_services() -> None:
    example = _env_example()
    compose_vars = set(re.findall(r"\$\{(\w+)(?::\?[^}]*)?\}", COMPOSE.read_text()))
    assert compose_vars <= set(example), compose_vars - set(example)
    stack_vars = set(re.findall(r"\$\{(\w+)\}", STACK_CONFIG.read_text()))
    lakehouse_env = _compose()["x-lakehouse-env"]
    # MinIO's keys: the root user's only in storage-init (and MinIO), the catalog's user's
    # only in storage-init (which creates it) and the catalog, the landing reader's only in
    # storage-init and Dagster's code server (its sensors and runs); every other service of our
    # image has the common settings alone.
    root = {"MINIO_ROOT_USER", "MINIO_ROOT_PASSWORD"}
    catalog = {"MINIO_CATALOG_USER", "MINIO_CATALOG_PASSWORD"}
    landing = {"MINIO_LANDING_USER", "MINIO_LANDING_PASSWORD"}
    # The daemon's run-monitoring timeouts (not secrets; empty: dagster.yaml's, infra/dagster_instance.py).
    monitoring = {"DAGSTER_RUN_START_TIMEOUT_SECONDS", "DAGSTER_RUN_MONITORING_POLL_SECONDS"}
    extra = {"storage-init": root | catalog | landing, "catalog": catalog, "dagster-code": landing,
             "dagster-daemon": monitoring}
    assert not (root | catalog | landing) & set(lakehouse_env)
    for name in OUR_IMAGE_SERVICES:
        environment = _services()[name]["environment"]
        assert {k: v for k, v in environment.items() if k not in extra.get(name, set())} == lakehouse_env, name
        assert set(environment) - set(lakehouse_env) == extra.get(name, set()), name
    holders = {n for n, s in _services().items() if root & set(s.get("environment") or {})}
    assert holders == {"minio", "storage-init"}
    stack_vars = {v for v in stack_vars if v not in catalog}
    assert stack_vars <= set(lakehouse_env), stack_vars - set(lakehouse_env)
    # The stack config names the catalog's variables with a fallback: the other containers
    # that load it never use the metastore's key.
    assert set(re.findall(r"\$\{(MINIO_\w+):-\}", STACK_CONFIG.read_text())) == catalog
    trino_vars = set(re.findall(r"\$\{ENV:(\w+)\}", TRINO_CATALOG.read_text()))
    assert trino_vars <= set(_services()["trino"]["environment"])
    # The rest are fixed settings, or (LAKEHOUSE_PROFILES) derived from the example's COMPOSE_PROFILES.
    fixed = {"TABLESTORE_CONFIG", "LAKEHOUSE_ENV", "LAKEHOUSE_ROOT", "LAKEHOUSE_PROFILES"}
    assert set(lakehouse_env) - fixed <= set(example), set(lakehouse_env) - fixed - set(example)
    assert "COMPOSE_PROFILES" in example


def test_stack_config_parses_and_serves_the_metastore() -> None:
    env = _env_example()
    text = re.sub(r"\$\{(\w+)\}", lambda m: env[m.group(1)], STACK_CONFIG.read_text())
    config = parse_config(text, source=str(STACK_CONFIG))
    settings = server_settings(config)
    assert settings.catalogs == ("metastore",) and settings.port == int(_container_port("catalog", "--port"))
    assert {p.name for p in settings.tokens} == {"trino", "spark", "dagster"}
    trino = settings.client("trino")
    assert trino is not None and trino.can("metastore", "write")  # Trino's OAuth2 client
    assert config.default_catalog == "lakehouse" and config.catalog("lakehouse").type == "rest"
    assert config.spark.master == f"sc://spark-connect:{_container_port('spark-connect', '--port')}"
    # The pipeline's external landing table lies on the volume the catalog, Dagster and Spark share.
    assert settings.allow_external_locations
    # Clients get MinIO STS credentials scoped to a table, never the MinIO key of the metastore.
    metastore_s3 = config.catalog("metastore").properties
    assert settings.vending.vending == "sts" and settings.vending.duration_s == 3600
    assert settings.vending.sts_endpoint == metastore_s3["s3.endpoint"] == "http://minio:9000"
    for name in ("catalog", "dagster-daemon", "spark-worker", "spark-connect"):
        assert "lakehouse-data:/data/lakehouse" in _services()[name]["volumes"], name


def test_catalog_minio_postgres_and_bucket_agree() -> None:
    services = _services()
    rest = _catalog_entry("lakehouse")
    uri = urlsplit(rest["uri"])
    assert uri.hostname == "catalog" and str(uri.port) == _container_port("catalog", "--port")
    assert _published("catalog")[str(uri.port)] == str(uri.port)

    sql = _catalog_entry("metastore")
    pg = urlsplit(sql["uri"])
    pg_env = services["postgres"]["environment"]
    assert (pg.hostname, pg.port, pg.username, pg.path.lstrip("/")) == (
        "postgres", 5432, pg_env["POSTGRES_USER"], pg_env["POSTGRES_DB"])
    assert pg.password == "${POSTGRES_PASSWORD}" and "POSTGRES_PASSWORD" in pg_env["POSTGRES_PASSWORD"]

    s3 = sql["s3"]
    endpoint = urlsplit(s3["endpoint"])
    minio_port = _container_port("minio", "--address").lstrip(":")
    assert endpoint.hostname == "minio" and str(endpoint.port) == minio_port
    assert (s3["access-key-id"], s3["secret-access-key"]) == ("${MINIO_CATALOG_USER:-}", "${MINIO_CATALOG_PASSWORD:-}")
    assert s3["path-style-access"] is True

    bucket = urlsplit(sql["warehouse"]).netloc
    init = services["storage-init"]["command"]
    assert init[init.index("--bucket") + 1] == bucket
    assert init[init.index("--endpoint") + 1] == f"minio:{minio_port}"


def test_trino_catalog_points_at_the_catalog_and_minio() -> None:
    props = _properties(TRINO_CATALOG)
    unknown = set(props) - TRINO_476_PROPERTIES
    assert not unknown, f"properties Trino {TRINO_VERSION} does not know: {unknown}"
    assert props["connector.name"] == "iceberg" and props["iceberg.catalog.type"] == "rest"
    assert props["iceberg.rest-catalog.uri"] == _catalog_entry("lakehouse")["uri"]
    assert props["iceberg.rest-catalog.security"] == "OAUTH2"
    # OAuth2 client credentials of the client `trino` the catalog serves, no static token.
    assert props["iceberg.rest-catalog.oauth2.credential"] == "trino:${ENV:CATALOG_CLIENT_SECRET_TRINO}"
    assert "iceberg.rest-catalog.oauth2.token" not in props
    assert props["iceberg.rest-catalog.warehouse"] == "metastore"
    # No storage key: the catalog vends per-table credentials.
    assert props["iceberg.rest-catalog.vended-credentials-enabled"] == "true"
    assert "s3.aws-access-key" not in props and "s3.aws-secret-key" not in props
    assert "MINIO" not in TRINO_CATALOG.read_text()
    s3 = _catalog_entry("metastore")["s3"]
    assert props["fs.native-s3.enabled"] == "true"
    assert props["s3.endpoint"] == s3["endpoint"] and props["s3.region"] == s3["region"]
    assert props["s3.path-style-access"] == "true"
    mount = _services()["trino"]["volumes"][0].split(":")
    assert (ROOT / mount[0]).resolve() == TRINO_CATALOG.parent and mount[1] == "/etc/trino/catalog"


def test_pipeline_stack_settings_agree_with_the_compose_file() -> None:
    settings_file = ROOT / "pipelines" / "config" / "stack.yaml"
    assert _compose()["x-lakehouse-env"]["LAKEHOUSE_ENV"] == "stack"
    settings = yaml.safe_load(settings_file.read_text())
    ours = _stack_config()
    theirs = settings["tablestore"]
    assert theirs["spark"]["master"] == ours["spark"]["master"]
    rest = next(c for c in theirs["catalogs"] if c["name"] == "lakehouse")
    assert rest["uri"] == _catalog_entry("lakehouse")["uri"]
    # The catalog service refuses requests without a token (server.auth is required).
    assert rest.get("token") or rest.get("credential"), "the pipeline's lakehouse catalog needs a token"
    assert settings["root"] == _compose()["x-lakehouse-env"]["LAKEHOUSE_ROOT"]
    trino = settings.get("trino")
    if trino:
        assert trino["host"] == "trino" and str(trino["port"]) in _published("trino")


# -- the Compose tool itself ----------------------------------------------------------------


@pytest.fixture(scope="module")
def compose_tool() -> list[str]:
    """``docker compose`` (v2 plugin) if present, else ``docker-compose``, installed from Debian if missing."""
    if shutil.which("docker") and subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0:
        return ["docker", "compose"]
    if not shutil.which("docker-compose"):
        done = subprocess.run(["apt-get", "install", "-y", "docker-compose"], capture_output=True, text=True,
                              timeout=600)
        if done.returncode != 0 or not shutil.which("docker-compose"):
            pytest.skip(f"no docker compose and apt-get install docker-compose failed: {done.stderr[-500:]}")
    return ["docker-compose"]


def test_compose_config_passes(compose_tool: list[str], tmp_path: Path) -> None:
    env = tmp_path / ".env"
    shutil.copy(ENV_EXAMPLE, env)
    done = subprocess.run([*compose_tool, "--env-file", str(env), "-f", str(COMPOSE), "config"],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    resolved = yaml.safe_load(done.stdout)
    assert set(resolved["services"]) == {"minio", "storage-init", "postgres", "catalog", "spark-master",
                                         "spark-worker", "spark-connect", "dagster-code", "dagster-webserver",
                                         "dagster-daemon", "trino"}
    secret = _env_example()["MINIO_CATALOG_PASSWORD"]
    assert resolved["services"]["catalog"]["environment"]["MINIO_CATALOG_PASSWORD"] == secret
    assert resolved["services"]["storage-init"]["environment"]["MINIO_ROOT_PASSWORD"] == _env_example()[
        "MINIO_ROOT_PASSWORD"]
    assert "MINIO_ROOT_PASSWORD" not in resolved["services"]["catalog"]["environment"]


def test_compose_config_refuses_to_run_without_secrets(compose_tool: list[str], tmp_path: Path) -> None:
    empty = tmp_path / "empty.env"
    empty.write_text("")
    done = subprocess.run([*compose_tool, "--env-file", str(empty), "-f", str(COMPOSE), "config"],
                          capture_output=True, text=True, cwd=tmp_path, timeout=120,
                          env={"PATH": "/usr/local/bin:/usr/bin:/bin"})
    assert done.returncode != 0 and "copy infra/.env.example to .env" in done.stderr


@pytest.mark.postgres
def test_dagster_instance_config_loads_and_keeps_runs_in_postgres(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, postgres_server: PostgresServer) -> None:
    """The stack's instance settings, pointed at the suite's PostgreSQL (the same keys but
    the server's address): Dagster creates its tables there and keeps a run in them."""
    from dagster import DagsterInstance, DagsterRun
    from sqlalchemy import create_engine, text

    doc = yaml.safe_load((INFRA / "dagster" / "dagster.yaml").read_text())
    database = postgres_server.create_database()
    db = doc["storage"]["postgres"]["postgres_db"]
    # The suite's server listens on a Unix socket: a URL carries it where hostname cannot.
    doc["storage"]["postgres"] = {"postgres_url": database}
    doc["local_artifact_storage"]["config"]["base_dir"] = str(tmp_path / "s")
    (tmp_path / "dagster.yaml").write_text(yaml.safe_dump(doc))
    assert set(db) == {"username", "password", "hostname", "port", "db_name", "scheme"}
    assert db["scheme"] == "postgresql+psycopg2"  # the driver installed (SQLAlchemy 2.1 defaults to psycopg 3)
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
    instance = DagsterInstance.get()
    try:
        assert type(instance.run_coordinator).__name__ == "QueuedRunCoordinator"
        assert type(instance.run_storage).__name__ == "PostgresRunStorage"
        assert type(instance.event_log_storage).__name__ == "PostgresEventLogStorage"
        assert type(instance.schedule_storage).__name__ == "PostgresScheduleStorage"
        run = instance.add_run(DagsterRun(job_name="probe", run_id="0f8fad5b-d9cb-469f-a165-70867728950e"))
    finally:
        instance.dispose()
    engine = create_engine(database)
    try:
        with engine.connect() as conn:
            assert conn.execute(text("SELECT run_id, pipeline_name FROM runs")).all() == [(run.run_id, "probe")]
    finally:
        engine.dispose()

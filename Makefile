# The README's commands. Each target installs what it needs first (idempotent).
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
UV := python3 -m uv
PYTEST_ARGS ?=

.PHONY: install demo dagster quality test lint bench clean up down logs ps e2e-stack images

# Bytecode is compiled once here: the environment may set PYTHONDONTWRITEBYTECODE, and then every
# process (each Spark Python worker, each Dagster step) would compile pandas, pyspark and
# dagster from source again (about 5 s of CPU each).
$(VENV)/.installed: pyproject.toml uv.lock
	@$(UV) --version >/dev/null 2>&1 || python3 -m pip install --quiet uv
	$(UV) sync --frozen --all-extras --compile-bytecode --quiet
	touch $@

install: $(VENV)/.installed

# The lakehouse pipeline end to end on embedded defaults (no Docker, no network).
demo: install
	$(PY) -m pipelines.demo

# The Dagster UI on the same embedded configuration: http://127.0.0.1:3000
DAGSTER_PORT ?= 3000
dagster: install
	mkdir -p warehouse/dagster-home
	DAGSTER_HOME=$(abspath warehouse/dagster-home) LAKEHOUSE_ROOT=$(abspath warehouse/demo) \
		$(VENV)/bin/dagster dev -m pipelines.definitions -p $(DAGSTER_PORT)

# The Great Expectations suites alone, on what `make demo` left.
quality: install
	$(PY) -m pipelines.quality_run

# The S3 tests run MinIO built from source (infra/images/minio.py), the Trino tests Trino 476 and
# the identity-provider tests Keycloak 26 from Maven Central (infra/trino_server.py,
# infra/keycloak_server.py), as Iceberg's jars (infra/iceberg_rck.py, infra/iceberg_aws.py):
# each installed once per machine and pin, before the suite rather than inside a test's time limit.
test: install
	$(PY) -m infra.images.minio
	$(PY) -m infra.trino_server
	$(PY) -m infra.keycloak_server
	$(PY) -m infra.iceberg_rck
	$(PY) -m infra.iceberg_aws
	$(PY) -m pytest $(PYTEST_ARGS)

# ruff, mypy, the layering contract of docs/design.md §4 ([tool.importlinter] in pyproject.toml),
# and Dagster's validation of the code location (what `dg check defs` runs): the defs folder
# loads, and every asset, check, job, sensor and schedule in it is well formed.
lint: install
	$(VENV)/bin/ruff check tablestore pipelines quality tests bench infra
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports
	$(VENV)/bin/dagster definitions validate -w infra/dagster/workspace.local.yaml
	$(PY) -m pytest -q -p no:cacheprovider tests/test_layers.py -k "import_cycle or cycle_check or private or import_path"

bench: install
	$(PY) -m bench.run $(BENCH_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache warehouse

# Local builds, under their official tags, of the stack's images that this machine cannot pull
# (infra/images). A user's machine pulls them instead and never needs this.
images: install
	$(PY) -m infra.images

# The Docker Compose stack (docs/stack.md). Secrets come from .env: cp infra/.env.example .env
COMPOSE ?= docker compose

up:
	@test -f .env || { echo "no .env: cp infra/.env.example .env and change the secrets"; exit 2; }
	$(COMPOSE) up -d --build --wait

down:
	$(COMPOSE) down

logs:
	$(COMPOSE) logs -f --tail=200

# -a: the one-shot storage-init shows as "exited (0)" once it has done its work.
ps:
	$(COMPOSE) ps -a

# The `stack` tests against a running stack (`make up`); -rs lists each skip with its reason
# (no stack up, no Trino in it). Their own deadlines are longer than pyproject's default timeout.
e2e-stack: install
	$(PY) -m pytest -m stack -rs tests/infra $(PYTEST_ARGS)

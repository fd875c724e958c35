# The README's commands. Each target installs what it needs first (idempotent).
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
UV := python3 -m uv
PYTEST_ARGS ?=

.PHONY: install demo test lint bench clean

$(VENV)/.installed: pyproject.toml uv.lock
	@$(UV) --version >/dev/null 2>&1 || python3 -m pip install --quiet uv
	$(UV) sync --frozen --all-extras --quiet
	touch $@

install: $(VENV)/.installed

demo: install
	$(PY) -m tablestore.demo

test: install
	$(PY) -m pytest $(PYTEST_ARGS)

lint: install
	$(VENV)/bin/ruff check tablestore tests bench
	$(VENV)/bin/mypy

bench: install
	$(PY) -m bench.run $(BENCH_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache warehouse

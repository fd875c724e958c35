"""Start a Dagster process with run monitoring's timeouts taken from the stack's environment.

Dagster reads its instance from ``$DAGSTER_HOME/dagster.yaml`` and accepts no environment
variable for run monitoring's integers (``start_timeout_seconds`` is a plain ``int`` in its
schema), so the image's file holds the production values (infra/dagster/dagster.yaml) and this
entry point writes the container's copy with the overrides the environment gives, then becomes
the command (``exec``). Only the daemon runs run monitoring, so only its command goes through
here. The test stack sets short timeouts (``infra.compose_stack``): a run left STARTING fails
there within a minute instead of the production 90 s plus a 15 s poll.

    python -m infra.dagster_instance dagster-daemon run -w /app/infra/dagster/workspace.yaml
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

# Environment variable -> the key of dagster.yaml's `run_monitoring` it overrides; empty or unset
# keeps the file's value.
RUN_MONITORING_ENV = {
    "DAGSTER_RUN_START_TIMEOUT_SECONDS": "start_timeout_seconds",
    "DAGSTER_RUN_MONITORING_POLL_SECONDS": "poll_interval_seconds",
}


def with_overrides(config: Mapping[str, Any], environ: Mapping[str, str]) -> dict[str, Any]:
    """``config`` (a parsed dagster.yaml) with run monitoring's values from ``environ``."""
    out = dict(config)
    monitoring = dict(out.get("run_monitoring") or {})
    for variable, key in RUN_MONITORING_ENV.items():
        value = environ.get(variable, "").strip()
        if not value:
            continue
        if not value.isdigit() or int(value) <= 0:
            raise SystemExit(f"{variable}={value!r} is not a whole number of seconds above 0; set it so, or unset "
                             f"it to keep dagster.yaml's {key}")
        monitoring[key] = int(value)
    if monitoring:
        out["run_monitoring"] = monitoring
    return out


def main(argv: list[str]) -> None:
    if not argv:
        raise SystemExit("usage: python -m infra.dagster_instance COMMAND [ARGS...] (e.g. dagster-daemon run)")
    path = Path(os.environ.get("DAGSTER_HOME", "/opt/dagster/home")) / "dagster.yaml"
    config = yaml.safe_load(path.read_text()) or {}
    updated = with_overrides(config, os.environ)
    if updated != config:
        path.write_text(yaml.safe_dump(updated, sort_keys=False))
    os.execvp(argv[0], argv)


if __name__ == "__main__":
    main(sys.argv[1:])

"""``trinodb/trino:476`` built here, for machines that cannot pull it.

The same server as the official image (the 476 tarball from Maven Central, see
:mod:`infra.trino_server`), on a Java 25 runtime copied from this machine (Trino 476 needs 24+),
and the official image's contract: the server in ``/usr/lib/trino``, configuration in
``/etc/trino`` (``catalog/`` is where the stack mounts ``lakehouse.properties``), data in
``/data/trino``, the ``trino`` user (uid 1000), port 8080, ``/usr/lib/trino/bin/run-trino`` as the
command and ``/usr/lib/trino/bin/health-check``, which fails until ``/v1/info`` says
``"starting":false``, and the ``trino`` CLI in ``/usr/bin``. The one difference: only the Iceberg
connector is installed (the official image has all of them).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import tempfile
from pathlib import Path

from infra import trino_server
from infra.images import ImageBuild, image_exists

TAG = f"trinodb/trino:{trino_server.VERSION}"
BASE = "debian:bookworm-slim"

RUN_TRINO = """#!/bin/bash
set -xeuo pipefail

launcher_opts=(--etc-dir /etc/trino)
if ! grep -s -q 'node.id' /etc/trino/node.properties; then
    launcher_opts+=("-Dnode.id=${HOSTNAME}")
fi
exec /usr/lib/trino/bin/launcher run "${launcher_opts[@]}" "$@"
"""

HEALTH_CHECK = """#!/usr/bin/env bash
set -euo pipefail

function get_property() {
    grep "^$1=" "$2" | cut -d'=' -f2
}

scheme=http
port=8080
config=/etc/trino/config.properties
if [ "$(get_property 'http-server.http.enabled' "$config")" == "false" ]; then
    scheme=https
    port=$(get_property http-server.https.port "$config")
else
    port=$(get_property http-server.http.port "$config")
fi
endpoint="$scheme://localhost:$port/v1/info"

if ! info=$(curl --fail --silent --show-error --insecure "$endpoint"); then
    echo >&2 "Server is not responding to requests"
    exit 1
fi

if ! grep -q '"starting":\\s*false' <<<"$info" >/dev/null; then
    echo >&2 "Server is starting"
    exit 1
fi
"""

CONFIG = {
    "config.properties": "coordinator=true\nnode-scheduler.include-coordinator=true\n"
                         "http-server.http.port=8080\ndiscovery.uri=http://localhost:8080\n",
    "node.properties": "node.environment=docker\nnode.data-dir=/data/trino\nplugin.dir=/usr/lib/trino/plugin\n",
    "jvm.config": "-server\n-Xmx1G\n-XX:InitialRAMPercentage=80\n-XX:MaxRAMPercentage=80\n-XX:G1HeapRegionSize=32M\n"
                  "-XX:+ExplicitGCInvokesConcurrent\n-XX:+ExitOnOutOfMemoryError\n-XX:+HeapDumpOnOutOfMemoryError\n"
                  "-XX:ReservedCodeCacheSize=512M\n"
                  "-XX:PerMethodRecompilationCutoff=10000\n-XX:PerBytecodeRecompilationCutoff=10000\n"
                  "-Djdk.attach.allowAttachSelf=true\n-Djdk.nio.maxCachedBufferSize=2000000\n-Dfile.encoding=UTF-8\n"
                  "-XX:+EnableDynamicAgentLoading\n",
    "log.properties": "io.trino=INFO\n",
}

DOCKERFILE = f"""FROM {BASE}
RUN apt-get update && apt-get install -y --no-install-recommends curl less && rm -rf /var/lib/apt/lists/* \\
    && groupadd trino --gid 1000 && useradd trino --uid 1000 --gid 1000 --create-home \\
    && mkdir -p /usr/lib/trino /data/trino /etc/trino/catalog && chown -R trino:trino /data/trino /etc/trino
ENV JAVA_HOME=/usr/lib/jvm/jdk LANG=en_US.UTF-8
ENV PATH=$JAVA_HOME/bin:$PATH
COPY jdk /usr/lib/jvm/jdk
COPY --chown=trino:trino trino-server /usr/lib/trino
COPY --chown=trino:trino etc /etc/trino
COPY run-trino health-check /usr/lib/trino/bin/
COPY trino-cli /usr/bin/trino
LABEL org.opencontainers.image.title="trino" org.opencontainers.image.version="{trino_server.VERSION}" \\
      io.tablestore.built-from="{trino_server.ARTIFACT}" io.tablestore.recipe="@RECIPE@"
EXPOSE 8080
USER trino:trino
HEALTHCHECK --interval=10s --timeout=5s --start-period=10s CMD /usr/lib/trino/bin/health-check
CMD ["/usr/lib/trino/bin/run-trino"]
"""


def build() -> None:
    server = trino_server.install()
    java = trino_server.java_home()
    with tempfile.TemporaryDirectory(prefix="trino-image-") as tmp:
        context = Path(tmp)
        # Hard links where the file system allows: the server is 500 MB.
        shutil.copytree(server, context / "trino-server", copy_function=_link_or_copy)
        shutil.copytree(java, context / "jdk", symlinks=True, copy_function=_link_or_copy,
                        ignore=shutil.ignore_patterns("src.zip", "demo", "man", "jmods"))
        (context / "etc").mkdir()
        for name, text in CONFIG.items():
            (context / "etc" / name).write_text(text)
        (context / "etc" / "catalog").mkdir()
        # Executable in the context: the legacy builder (no BuildKit here) has no COPY --chmod.
        for name, text in (("run-trino", RUN_TRINO), ("health-check", HEALTH_CHECK)):
            (context / name).write_text(text)
            (context / name).chmod(0o755)
        shutil.copy2(trino_server.cli_jar(), context / "trino-cli")
        (context / "trino-cli").chmod(0o755)
        (context / "Dockerfile").write_text(DOCKERFILE.replace("@RECIPE@", recipe()))
        subprocess.run(["docker", "build", "-t", TAG, str(context)], check=True)


def _link_or_copy(source: str, target: str) -> None:
    try:
        Path(target).hardlink_to(source)
    except OSError:
        shutil.copy2(source, target)


def recipe() -> str:
    """A digest of how the image is made: a local image of another recipe is rebuilt."""
    parts = [DOCKERFILE, RUN_TRINO, HEALTH_CHECK, *(f"{k}={v}" for k, v in sorted(CONFIG.items()))]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


def is_current() -> bool:
    """The image is there, and is either pulled (no label of ours) or built by this recipe."""
    if not image_exists(TAG):
        return False
    done = subprocess.run(["docker", "image", "inspect", "--format", "{{json .Config.Labels}}", TAG],
                          capture_output=True, text=True)
    labels = json.loads(done.stdout or "null") or {}
    return "io.tablestore.built-from" not in labels or labels.get("io.tablestore.recipe") == recipe()


BUILD = ImageBuild(TAG, build, is_current)

__all__ = ["BUILD", "TAG"]

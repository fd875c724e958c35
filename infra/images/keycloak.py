"""``quay.io/keycloak/keycloak:26.7.3`` built here, for machines that cannot pull it.

The same server as the official image (the distribution zip from Maven Central, see
:mod:`infra.keycloak_server`), on the Java 21+ runtime found on this machine, and the official
image's contract as the stack uses it: the server in ``/opt/keycloak``, ``kc.sh`` as the
entrypoint (the compose file gives ``start-dev`` and its options as the command), realm files
imported from ``/opt/keycloak/data/import``, the ``keycloak`` user (uid 1000), port 8080, and
the management port 9000 (``/health/ready`` with ``--health-enabled=true``). Unlike the
official image it is not pre-built for production (``kc.sh build``): the stack runs it in
development mode, which builds at start.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import tempfile
import zipfile
from pathlib import Path

from infra import keycloak_server
from infra.images import ImageBuild, image_exists

TAG = f"quay.io/keycloak/keycloak:{keycloak_server.VERSION}"
BASE = "debian:bookworm-slim"

DOCKERFILE = f"""FROM {BASE}
RUN groupadd keycloak --gid 1000 && useradd keycloak --uid 1000 --gid 0 --create-home \\
    && mkdir -p /opt/keycloak
ENV JAVA_HOME=/usr/lib/jvm/jdk LANG=en_US.UTF-8
ENV PATH=$JAVA_HOME/bin:$PATH
COPY jdk /usr/lib/jvm/jdk
COPY --chown=1000:0 keycloak /opt/keycloak
LABEL org.opencontainers.image.title="keycloak" org.opencontainers.image.version="{keycloak_server.VERSION}" \\
      io.tablestore.built-from="{keycloak_server.ARTIFACT}" io.tablestore.recipe="@RECIPE@"
EXPOSE 8080 9000
USER 1000
ENTRYPOINT ["/opt/keycloak/bin/kc.sh"]
"""


def build() -> None:
    source = keycloak_server.distribution()
    java = keycloak_server.java_home()
    with tempfile.TemporaryDirectory(prefix="keycloak-image-") as tmp:
        context = Path(tmp)
        # A fresh copy of the distribution (the cached one is built for the tests' dev mode).
        with zipfile.ZipFile(source) as archive:
            archive.extractall(context)
        (context / f"keycloak-{keycloak_server.VERSION}").rename(context / "keycloak")
        for script in (context / "keycloak" / "bin").glob("*.sh"):
            script.chmod(0o755)  # zipfile does not keep the mode
        shutil.copytree(java, context / "jdk", symlinks=True,
                        ignore=shutil.ignore_patterns("src.zip", "demo", "man", "jmods"))
        (context / "Dockerfile").write_text(DOCKERFILE.replace("@RECIPE@", recipe()))
        subprocess.run(["docker", "build", "-t", TAG, str(context)], check=True)


def recipe() -> str:
    """A digest of how the image is made: a local image of another recipe is rebuilt."""
    return hashlib.sha256(DOCKERFILE.encode()).hexdigest()[:16]


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

"""MinIO built from source: the ``minio`` and ``mc`` binaries, and the image of the stack.

MinIO's community edition ships as source only (its README says ``go install``), so the pinned
release is compiled here with the Go toolchain through the Go module proxy, static
(``CGO_ENABLED=0``). The binaries are cached per machine and per pin
(``~/.cache/tablestore/minio/<release>/``): the build takes several CPU-minutes once, and then
the test suite (``tests/services.py`` runs this MinIO on loopback) and ``make images`` reuse it.

``make images`` puts the binaries into an image under the official tag
``quay.io/minio/minio:RELEASE.2025-09-07T16-13-09Z`` with the official image's contract:
entrypoint ``/usr/bin/docker-entrypoint.sh`` (MinIO's own script, from the module's source),
command ``minio``, volume ``/data``, port 9000, and ``minio``, ``mc`` and ``curl`` on the path.
It replaces the stand-in of ``../shared/docker-stack`` (moto behind MinIO's command line, label
``minio-standin-moto``). A user's machine pulls the official image instead.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from infra.images import ImageBuild, image_exists

RELEASE = "RELEASE.2025-09-07T16-13-09Z"
TAG = f"quay.io/minio/minio:{RELEASE}"
MINIO_MODULE = "github.com/minio/minio"
MINIO_COMMIT = "07c3a429bfed433e49018cb0f78a52145d4bedeb"
# The Go module proxy serves a commit under its pseudo-version (the commit's time and hash).
MINIO_VERSION = "v0.0.0-20250907161309-07c3a429bfed"
# mc's newest release before that server release (mc RELEASE.2025-08-13T08-35-41Z), which is
# the mc the official image of RELEASE.2025-09-07T16-13-09Z downloaded when it was built.
MC_MODULE = "github.com/minio/mc"
MC_RELEASE = "RELEASE.2025-08-13T08-35-41Z"
MC_COMMIT = "7394ce0dd2a80935aded936b09fa12cbb3cb8096"
MC_VERSION = "v0.0.0-20250813083541-7394ce0dd2a8"
# Set on the image; ``is_current`` compares it, so a new pin rebuilds the image.
PIN_LABEL = "io.tablestore.minio-commit"
STANDIN_TITLE = "minio-standin-moto"
GO_HINT = ("MinIO is built from source with the Go toolchain (1.24 or newer) through the Go module "
           "proxy: install Go (https://go.dev/doc/install) and put `go` on PATH")


@dataclass(frozen=True)
class MinioBinaries:
    minio: Path
    mc: Path


def cache_dir() -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "tablestore" / "minio" / f"{RELEASE}-{MINIO_COMMIT[:12]}-mc-{MC_COMMIT[:12]}"


def _ldflags(package: str, version: str, release: str, commit: str) -> str:
    # What MinIO's release build sets (buildscripts/gen-ldflags.go), so `minio --version` and the
    # server's own reports name the release rather than "DEVELOPMENT.GOGET".
    values = {"Version": version, "ReleaseTag": release, "CommitID": commit, "ShortCommitID": commit[:12],
              "CopyrightYear": version[:4]}
    return "-s -w " + " ".join(f"-X {package}/cmd.{name}={value}" for name, value in values.items())


def _release_time(release: str) -> str:
    """RELEASE.2025-09-07T16-13-09Z -> 2025-09-07T16:13:09Z (the form MinIO's Version takes)."""
    day, _, clock = release.removeprefix("RELEASE.").partition("T")
    return f"{day}T{clock.replace('-', ':')}"


def _go() -> str:
    go = shutil.which("go") or ("/usr/local/go/bin/go" if Path("/usr/local/go/bin/go").exists() else None)
    if go is None:
        raise RuntimeError(f"no `go` on PATH: {GO_HINT}")
    return go


@contextmanager
def _locked(directory: Path) -> Iterator[None]:
    # Several test sessions (worktrees, CI) may ask at once: one builds, the others wait for it.
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _go_install(module: str, version: str, ldflags: str, name: str, target: Path,
                unsummed: bool = False) -> None:
    with tempfile.TemporaryDirectory(prefix=f"build-{name}-", dir=target.parent) as gobin:
        env = {**os.environ, "CGO_ENABLED": "0", "GOBIN": gobin, "GOFLAGS": "-buildvcs=false"}
        if unsummed:
            # The checksum database has no entry for this pseudo-version (it records the commit
            # under another timestamp, which the proxy does not serve); the proxy's answer names
            # the commit itself, and every dependency is still checked against the database.
            env["GONOSUMDB"] = module
        done = subprocess.run([_go(), "install", "-trimpath", "-ldflags", ldflags, f"{module}@{version}"],
                              env=env, capture_output=True, text=True, timeout=3600)
        if done.returncode != 0:
            raise RuntimeError(f"go install {module}@{version} failed (exit {done.returncode}): "
                               f"{done.stderr[-3000:]}\n{GO_HINT}")
        # Renamed into place only when whole: an interrupted build leaves no half binary.
        os.replace(Path(gobin) / name, target)


def binary(name: str) -> Path:
    """The pinned ``minio`` or ``mc``, built once per machine (minio: several CPU-minutes) and cached."""
    pins = {
        "minio": (MINIO_MODULE, MINIO_VERSION, RELEASE, MINIO_COMMIT, False),
        "mc": (MC_MODULE, MC_VERSION, MC_RELEASE, MC_COMMIT, True),
    }
    if name not in pins:
        raise ValueError(f"no pinned binary {name!r}; expected one of {', '.join(pins)}")
    module, version, release, commit, unsummed = pins[name]
    directory = cache_dir()
    target = directory / name
    if target.exists():
        return target
    with _locked(directory):
        if not target.exists():  # another process may have built it while this one waited
            _go_install(module, version, _ldflags(module, _release_time(release), release, commit), name, target,
                        unsummed=unsummed)
    return target


def binaries() -> MinioBinaries:
    """Both binaries of the image."""
    return MinioBinaries(binary("minio"), binary("mc"))


def _module_source(module: str, version: str) -> Path:
    """The module's source in Go's module cache (downloaded if it is not there)."""
    done = subprocess.run([_go(), "mod", "download", "-json", f"{module}@{version}"],
                          capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        raise RuntimeError(f"go mod download {module}@{version} failed: {done.stderr[-2000:]}\n{GO_HINT}")
    return Path(json.loads(done.stdout)["Dir"])


DOCKERFILE = f"""\
# The official image's layout (MinIO's Dockerfile.release) on Debian instead of UBI micro.
FROM debian:bookworm-slim
# Debian's curl (dynamically linked; the official image's static build is downloaded from a
# site these machines cannot reach): the image's healthchecks use it.
RUN apt-get update && apt-get install -y --no-install-recommends curl ca-certificates \\
 && rm -rf /var/lib/apt/lists/*
LABEL org.opencontainers.image.title="minio" \\
      org.opencontainers.image.version="{RELEASE}" \\
      org.opencontainers.image.revision="{MINIO_COMMIT}" \\
      {PIN_LABEL}="{MINIO_COMMIT}-mc-{MC_COMMIT}"
ENV MINIO_ACCESS_KEY_FILE=access_key \\
    MINIO_SECRET_KEY_FILE=secret_key \\
    MINIO_ROOT_USER_FILE=access_key \\
    MINIO_ROOT_PASSWORD_FILE=secret_key \\
    MINIO_KMS_SECRET_KEY_FILE=kms_master_key \\
    MINIO_CONFIG_ENV_FILE=config.env \\
    MC_CONFIG_DIR=/tmp/.mc
COPY minio mc /usr/bin/
COPY docker-entrypoint.sh /usr/bin/docker-entrypoint.sh
COPY LICENSE CREDITS /licenses/
EXPOSE 9000
VOLUME ["/data"]
ENTRYPOINT ["/usr/bin/docker-entrypoint.sh"]
CMD ["minio"]
"""


def _labels(tag: str) -> dict[str, str]:
    done = subprocess.run(["docker", "image", "inspect", "-f", "{{json .Config.Labels}}", tag],
                          capture_output=True, text=True)
    if done.returncode != 0:
        return {}
    labels: dict[str, str] = json.loads(done.stdout) or {}
    return labels


def is_current() -> bool:
    """The image under the official tag is this build (not the moto stand-in, not another pin)."""
    return image_exists(TAG) and _labels(TAG).get(PIN_LABEL) == f"{MINIO_COMMIT}-mc-{MC_COMMIT}"


def build() -> None:
    found = binaries()
    source = _module_source(MINIO_MODULE, MINIO_VERSION)
    with tempfile.TemporaryDirectory(prefix="minio-image-") as context:
        root = Path(context)
        (root / "Dockerfile").write_text(DOCKERFILE)
        for binary in (found.minio, found.mc):
            shutil.copy2(binary, root / binary.name)
        shutil.copy(source / "dockerscripts" / "docker-entrypoint.sh", root / "docker-entrypoint.sh")
        (root / "docker-entrypoint.sh").chmod(0o755)
        for name in ("LICENSE", "CREDITS"):
            shutil.copy(source / name, root / name)
        # The engine's classic builder: this machine's docker CLI has no buildx.
        done = subprocess.run(["docker", "build", "-q", "-t", TAG, str(root)], capture_output=True, text=True,
                              env={**os.environ, "DOCKER_BUILDKIT": "0"}, timeout=1800)
        if done.returncode != 0:
            raise RuntimeError(f"docker build of {TAG} failed: {done.stderr[-3000:]}")


BUILD = ImageBuild(tag=TAG, build=build, is_current=is_current)


if __name__ == "__main__":
    # `make test` runs this first: the S3 tests' MinIO (and the image's mc) are built before the
    # suite starts, not inside a test's time limit.
    built = binaries()
    print(f"MinIO {RELEASE}: {built.minio}; mc {MC_RELEASE}: {built.mc}")

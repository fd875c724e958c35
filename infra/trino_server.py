"""The Trino server the stack pins (476), installed from Maven Central on this machine.

Trino 476 is the last release published to Maven Central (``io.trino:trino-server:476:tar.gz``);
the official image ``trinodb/trino:476`` is built from the same tarball. ``install()`` downloads
it once per machine with Maven's own client into ``~/.cache/tablestore/trino`` and unpacks it
there with only the plugins the lakehouse uses (the Iceberg connector): the full tarball carries
about fifty connectors, 800 MB that neither the tests nor the image need. ``java_home()`` finds
a Java runtime Trino 476 accepts (24 or later). The test fixture (``tests/trino.py``) and the
image builder (``infra/images/trino.py``) both start from here.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path

from infra.java_runtime import find_java

VERSION = "476"
ARTIFACT = f"io.trino:trino-server:{VERSION}:tar.gz"
# The command-line client, an executable jar (a shell header runs java on itself): the official
# image's /usr/bin/trino.
CLI_ARTIFACT = f"io.trino:trino-cli:{VERSION}:jar:executable"
# What stays of plugin/: the Iceberg connector is all the lakehouse catalog needs; the server
# itself loads nothing else from there.
PLUGINS = ("iceberg",)
MIN_JAVA = 24


def cache_dir() -> Path:
    root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return root / "tablestore" / "trino"


def tarball() -> Path:
    """The server tarball, downloaded once (``mvn dependency:copy``) and reused."""
    return _download(ARTIFACT, f"trino-server-{VERSION}.tar.gz")


def cli_jar() -> Path:
    """The executable CLI jar, downloaded once."""
    return _download(CLI_ARTIFACT, f"trino-cli-{VERSION}-executable.jar")


def _download(artifact: str, name: str) -> Path:
    target = cache_dir() / name
    if target.exists():
        return target
    mvn = shutil.which("mvn")
    if mvn is None:
        raise RuntimeError(f"Trino {VERSION} comes from Maven Central as {artifact}, and Maven (mvn) is not "
                           f"installed: apt-get install maven, or put the file at {target}")
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        command = [mvn, "-q", "-B", "dependency:copy", f"-Dartifact={artifact}", f"-DoutputDirectory={tmp}"]
        done = subprocess.run(command, cwd=tmp, capture_output=True, text=True, timeout=1800)
        downloaded = Path(tmp) / name
        if done.returncode != 0 or not downloaded.exists():
            raise RuntimeError(f"mvn could not download {artifact}:\n{(done.stdout + done.stderr)[-2000:]}")
        downloaded.rename(target)  # whole or not at all: a cut download never looks complete
    return target


def install() -> Path:
    """The unpacked server (``bin/launcher``, ``lib/``, the pruned ``plugin/``), made once."""
    home = cache_dir() / f"trino-server-{VERSION}"
    if (home / "bin" / "launcher").exists():
        return home
    source = tarball()
    with tempfile.TemporaryDirectory(dir=home.parent) as tmp:
        with tarfile.open(source) as archive:
            prefix = f"trino-server-{VERSION}/"
            keep = [m for m in archive.getmembers() if _wanted(m.name.removeprefix(prefix))]
            archive.extractall(tmp, members=keep, filter="tar")
        Path(tmp, f"trino-server-{VERSION}").rename(home)
    return home


def _wanted(relative: str) -> bool:
    parts = relative.split("/")
    if parts[0] != "plugin" or len(parts) < 2 or not parts[1]:
        return True
    return parts[1] in PLUGINS


def java_home() -> Path:
    """A Java runtime of version 24 or later: ``$TRINO_JAVA_HOME``, else the newest under
    /usr/lib/jvm or /opt."""
    return find_java(MIN_JAVA, "TRINO_JAVA_HOME", f"Trino {VERSION}", "openjdk-25-jre-headless")


__all__ = ["ARTIFACT", "CLI_ARTIFACT", "MIN_JAVA", "PLUGINS", "VERSION", "cache_dir", "cli_jar", "install", "java_home",
           "tarball"]


if __name__ == "__main__":
    # `make test` runs this first, as it builds MinIO: the download (about 800 MB from Maven
    # Central) and the unpacking happen once per machine, before the suite, not inside a test's
    # time limit.
    print(f"Trino {VERSION}: {install()} on Java {java_home()}")

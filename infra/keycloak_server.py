"""The Keycloak server the tests and the stack's ``keycloak`` profile pin (26.7.3), from Maven Central.

Keycloak's server distribution is published as ``org.keycloak:keycloak-quarkus-dist:<version>:zip``.
``install()`` downloads it once per machine with Maven's own client into
``~/.cache/tablestore/keycloak``, unpacks it, and starts it once in development mode there
(``kc.sh start-dev``) so that the costly first start happens once, not in every test session:

- Quarkus' build step (the "augmentation", a minute or more) is written into the distribution's
  ``lib/quarkus``; later ``start-dev`` runs find it current and skip it;
- the empty database (H2 in a file: Keycloak's schema, the ``master`` realm and a bootstrap
  admin) is kept as a seed; a test server starts from a copy in its own directory, which saves
  the schema creation (another minute on a loaded machine);
- on Java 25 or later, a second start records an ahead-of-time cache of the classes it loads
  and links (JEP 514, ``-XX:AOTCacheOutput``), which every later start reads: on this project's
  two loaded cores it more than halved the start (122 s without it, 55 s with it under a heavier
  load).

``java_home()`` finds a Java runtime Keycloak 26 accepts (21 or later). The test fixture
(``tests/keycloak.py``) and the image builder (``infra/images/keycloak.py``) both start here.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
import zipfile
from pathlib import Path

from infra.java_runtime import find_java, java_major

VERSION = "26.7.3"
ARTIFACT = f"org.keycloak:keycloak-quarkus-dist:{VERSION}:zip"
MIN_JAVA = 21
# The first Java whose JVM records an AOT cache in one run (JEP 514).
AOT_JAVA = 25
# The bootstrap administrator of the seed database: it exists in every test server, which
# listens on loopback only and lives as long as its test module.
ADMIN_USER = "admin"
ADMIN_PASSWORD = "admin-of-the-test-keycloak"
# Where a server's database lives: its H2 file is <kc.db-url-path>/data/h2/keycloakdb.mv.db.
DB_FILE = Path("data") / "h2" / "keycloakdb.mv.db"
SEED_TIMEOUT_S = 900.0


def cache_dir() -> Path:
    root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return root / "tablestore" / "keycloak"


def home() -> Path:
    return cache_dir() / f"keycloak-{VERSION}"


def seed_db() -> Path:
    """The seed database file (schema, master realm, admin), made by ``install()``."""
    return cache_dir() / f"seed-{VERSION}" / DB_FILE


def distribution() -> Path:
    """The distribution zip, downloaded once (``mvn dependency:copy``) and reused."""
    name = f"keycloak-quarkus-dist-{VERSION}.zip"
    target = cache_dir() / name
    if target.exists():
        return target
    mvn = shutil.which("mvn")
    if mvn is None:
        raise RuntimeError(f"Keycloak {VERSION} comes from Maven Central as {ARTIFACT}, and Maven (mvn) is not "
                           f"installed: apt-get install maven, or put the file at {target}")
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        command = [mvn, "-q", "-B", "dependency:copy", f"-Dartifact={ARTIFACT}", f"-DoutputDirectory={tmp}"]
        done = subprocess.run(command, cwd=tmp, capture_output=True, text=True, timeout=1800)
        downloaded = Path(tmp) / name
        if done.returncode != 0 or not downloaded.exists():
            raise RuntimeError(f"mvn could not download {ARTIFACT}:\n{(done.stdout + done.stderr)[-2000:]}")
        downloaded.rename(target)  # whole or not at all: a cut download never looks complete
    return target


def unpack() -> Path:
    """The unpacked distribution (``bin/kc.sh``, ``lib/``), made once."""
    target = home()
    if (target / "bin" / "kc.sh").exists():
        return target
    source = distribution()
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        with zipfile.ZipFile(source) as archive:
            archive.extractall(tmp)
        for script in Path(tmp, f"keycloak-{VERSION}", "bin").glob("*.sh"):
            script.chmod(0o755)  # zipfile does not keep the mode
        Path(tmp, f"keycloak-{VERSION}").rename(target)
    return target


def aot_cache() -> Path:
    """The ahead-of-time class cache of this version on this machine's Java (see the module docstring)."""
    return cache_dir() / f"keycloak-{VERSION}-java{java_major(java_home())}.aot"


def install() -> Path:
    """The distribution, built for development mode, with its seed database and AOT cache (see
    the module docstring). The first call takes minutes; later ones return at once."""
    dist = unpack()
    if not seed_db().exists():
        seed = seed_db().parents[2]
        with tempfile.TemporaryDirectory(dir=cache_dir()) as tmp:
            workdir = Path(tmp)
            _start_and_stop(dist, workdir, "")
            if not (workdir / DB_FILE).exists():
                raise RuntimeError(f"Keycloak started but wrote no database at {workdir / DB_FILE}")
            (workdir / "seed" / "data").mkdir(parents=True)
            (workdir / "data" / "h2").rename(workdir / "seed" / "data" / "h2")
            (workdir / "seed").rename(seed)
    cache = aot_cache()
    if (java_major(java_home()) or 0) >= AOT_JAVA and not cache.exists():
        with tempfile.TemporaryDirectory(dir=cache_dir()) as tmp:
            workdir = Path(tmp)
            (workdir / DB_FILE).parent.mkdir(parents=True)
            shutil.copyfile(seed_db(), workdir / DB_FILE)
            recorded = workdir / cache.name
            # Written when the JVM exits; renamed into place whole.
            _start_and_stop(dist, workdir, f"-XX:AOTCacheOutput={recorded}")
            if recorded.exists():
                recorded.rename(cache)
    return dist


def _start_and_stop(dist: Path, workdir: Path, java_options: str) -> None:
    """Start Keycloak with its database under ``workdir``, wait until it answers, stop it."""
    port = _free_port()
    log_path = workdir / "keycloak.log"
    env = environment(workdir, aot=False)
    env["JAVA_OPTS_APPEND"] += f" {java_options}"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(command(dist, port), env=env, cwd=workdir,
                                   stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + SEED_TIMEOUT_S
        while not ready(f"http://127.0.0.1:{port}"):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"Keycloak did not start (installing it in {cache_dir()}):\n"
                                   f"{log_path.read_text(errors='replace')[-3000:]}")
            time.sleep(1)
    finally:
        stop(process, timeout_s=SEED_TIMEOUT_S)  # the AOT cache is assembled as the JVM exits


def command(dist: Path, port: int) -> list[str]:
    """``kc.sh start-dev`` on ``port`` of loopback."""
    return [str(dist / "bin" / "kc.sh"), "start-dev", "--http-host", "127.0.0.1", "--http-port", str(port)]


def environment(workdir: Path, aot: bool = True) -> dict[str, str]:
    """The environment of a server whose database is under ``workdir`` (reading the AOT cache
    when there is one and ``aot``)."""
    java = java_home()
    cache = aot_cache()
    options = f"-Dkc.db-url-path={workdir} -XX:TieredStopAtLevel=1"
    if aot and cache.exists():
        options += f" -XX:AOTCache={cache}"
    return {
        "JAVA_HOME": str(java), "PATH": f"{java / 'bin'}:/usr/bin:/bin", "HOME": str(workdir),
        "KC_BOOTSTRAP_ADMIN_USERNAME": ADMIN_USER, "KC_BOOTSTRAP_ADMIN_PASSWORD": ADMIN_PASSWORD,
        # Two cores shared with the rest of the suite: a small heap, and the C1 compiler alone
        # (C2's optimisations pay off only in a long-lived server).
        "JAVA_OPTS_KC_HEAP": "-Xms64m -Xmx512m",
        "JAVA_OPTS_APPEND": options,
    }


def ready(uri: str) -> bool:
    """Whether the server answers its master realm's discovery document (it does once started)."""
    try:
        with urllib.request.urlopen(f"{uri}/realms/master/.well-known/openid-configuration", timeout=3) as answer:
            return bool(answer.status == 200)
    except (urllib.error.URLError, ConnectionError, OSError):
        return False


def stop(process: subprocess.Popen[bytes], timeout_s: float = 60.0) -> None:
    """SIGTERM to the server's process group (kc.sh and its JVM), then SIGKILL if it lingers."""
    if process.poll() is not None:
        return
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=30)
    except ProcessLookupError:
        pass


def _free_port() -> int:
    # Not infra.local.processes.free_port: infra.local imports infra.images, which imports this.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def java_home() -> Path:
    """A Java runtime of version 21 or later: ``$KEYCLOAK_JAVA_HOME``, else the newest under
    /usr/lib/jvm or /opt."""
    return find_java(MIN_JAVA, "KEYCLOAK_JAVA_HOME", f"Keycloak {VERSION}", "openjdk-21-jre-headless")


__all__ = [
    "ADMIN_PASSWORD",
    "ADMIN_USER",
    "AOT_JAVA",
    "ARTIFACT",
    "DB_FILE",
    "MIN_JAVA",
    "VERSION",
    "aot_cache",
    "cache_dir",
    "command",
    "distribution",
    "environment",
    "home",
    "install",
    "java_home",
    "ready",
    "seed_db",
    "stop",
    "unpack",
]


if __name__ == "__main__":
    # `make test` runs this first, as it installs Trino: the download (about 180 MB from Maven
    # Central), Quarkus' build and the seed database happen once per machine, before the suite,
    # not inside a test's time limit.
    print(f"Keycloak {VERSION}: {install()} on Java {java_home()}")

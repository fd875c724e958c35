"""The Java runtime a server needs: this machine carries Temurin 25 beside the default Java 17,
and Trino and Keycloak each need a newer one than the default."""

from __future__ import annotations

import os
import re
from pathlib import Path

JVM_ROOTS = ("/usr/lib/jvm", "/opt")


def java_major(java_home: Path) -> int | None:
    """The major version of the runtime at ``java_home`` (from its ``release`` file), or None
    when it is not one."""
    release = java_home / "release"
    if not release.exists() or not (java_home / "bin" / "java").exists():
        return None
    found = re.search(r'^JAVA_VERSION="(\d+)', release.read_text(errors="replace"), re.MULTILINE)
    return int(found.group(1)) if found else None


def find_java(minimum: int, env_variable: str, needed_by: str, package: str) -> Path:
    """A Java runtime of version ``minimum`` or later: ``$env_variable``, else the newest under
    /usr/lib/jvm or /opt. ``needed_by`` and ``package`` (a Debian package that has one) make
    the error say what needs it and how to get one."""
    explicit = os.environ.get(env_variable)
    if explicit:
        major = java_major(Path(explicit))
        if major is None or major < minimum:
            raise RuntimeError(f"{env_variable}={explicit} is not a Java {minimum}+ runtime ({needed_by} needs one)")
        return Path(explicit)
    candidates = [p for root in JVM_ROOTS if Path(root).is_dir() for p in Path(root).iterdir()]
    found = sorted(((m, p) for p in candidates if (m := java_major(p)) is not None and m >= minimum), reverse=True)
    if not found:
        raise RuntimeError(f"{needed_by} needs Java {minimum} or later, and none is under /usr/lib/jvm or /opt: "
                           f"install one (for example Debian's {package}) or set {env_variable}")
    return found[0][1]


__all__ = ["find_java", "java_major"]

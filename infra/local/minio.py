"""How a MinIO server process is started on loopback, without Docker (the tests' S3 server and
the local topology's): the pinned binary of ``infra/images/minio.py``, one drive, no console."""

from __future__ import annotations

import os
from pathlib import Path

from infra.images.minio import binary


def minio_argv(data_dir: Path, port: int) -> list[str]:
    """``minio server`` over ``data_dir`` (created if missing) on 127.0.0.1:``port``."""
    data_dir.mkdir(parents=True, exist_ok=True)
    return [str(binary("minio")), "server", str(data_dir), "--address", f"127.0.0.1:{port}", "--quiet"]


def minio_env(root_user: str, root_password: str) -> dict[str, str]:
    """The process environment: the root credentials, and nothing that phones home."""
    if len(root_user) < 3 or len(root_password) < 8:
        raise ValueError("MinIO wants a root user of at least 3 characters and a password of at least 8")
    return {
        **os.environ,
        "MINIO_ROOT_USER": root_user,
        "MINIO_ROOT_PASSWORD": root_password,
        "MINIO_BROWSER": "off",  # no console: nothing listens but the S3 port
        "MINIO_UPDATE": "off",
        # A test's data directory is on the root disk, which MinIO otherwise refuses in some setups.
        "MINIO_CI_CD": "on",
    }

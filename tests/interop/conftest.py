"""The fixture tables, built once per test session in each of the three warehouses.

``interop_warehouse(kind)`` is ``path`` (a bare local path), ``file`` (a ``file://`` URI) or
``s3`` (a bucket on the loopback moto server; tests that use it carry the ``s3`` marker). Each is
built the first time a test asks for it and kept for the session.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.interop.built import Warehouse, build_warehouse
from tests.services import S3Server

Builder = Callable[[str], Warehouse]

@pytest.fixture(scope="session")
def interop_warehouse(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Builder:
    built: dict[str, Warehouse] = {}

    def get(kind: str) -> Warehouse:
        if kind not in built:
            root = tmp_path_factory.mktemp(f"interop-{kind}")
            if kind == "path":
                built[kind] = build_warehouse(kind, root, {}, str(root / "warehouse"))
            elif kind == "file":
                built[kind] = build_warehouse(kind, root, {}, (root / "warehouse").as_uri())
            elif kind == "s3":
                server: S3Server = request.getfixturevalue("s3_server")
                bucket = server.create_bucket()
                built[kind] = build_warehouse(kind, root, server.properties, f"s3://{bucket}/warehouse")
            else:
                raise ValueError(kind)
        return built[kind]

    return get

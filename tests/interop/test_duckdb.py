"""DuckDB's Iceberg extension reads every fixture at every snapshot as tablestore does."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.interop.built import SnapshotRows, Warehouse
from tests.interop.compare import assert_reads_identically
from tests.interop.params import FIXTURES, KINDS, s3_access
from tests.interop.readers import DUCKDB_EXTENSIONS, duckdb_connect, duckdb_read, extension_file


@pytest.fixture(scope="module")
def connections(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    opened: dict[str, Any] = {}
    yield opened
    for con in opened.values():
        con.close()


@pytest.fixture
def con(request: pytest.FixtureRequest, connections: dict[str, Any], kind: str,
        tmp_path_factory: pytest.TempPathFactory) -> Any:
    if kind not in connections:
        connections[kind] = duckdb_connect(tmp_path_factory.mktemp("duckdb-ext"), s3_access(request, kind))
    return connections[kind]


def test_extensions_load_from_the_pypi_packages_into_a_private_directory(tmp_path: Path) -> None:
    con = duckdb_connect(tmp_path)
    try:
        loaded = dict(con.execute("SELECT extension_name, install_path FROM duckdb_extensions() "
                                  "WHERE loaded AND install_path <> '(BUILT-IN)'").fetchall())
        assert sorted(loaded) == sorted(DUCKDB_EXTENSIONS)
        for name, path in loaded.items():
            assert Path(path).is_relative_to(tmp_path), path
            assert Path(path).read_bytes() == extension_file(name).read_bytes()
        assert con.execute("SELECT current_setting('autoinstall_known_extensions')").fetchone() == (False,)
    finally:
        con.close()


@pytest.mark.parametrize("fixture", FIXTURES)
@pytest.mark.parametrize("kind", KINDS)
def test_duckdb_reads_every_snapshot_identically(interop_warehouse: Callable[[str], Warehouse], con: Any,
                                                 kind: str, fixture: str) -> None:
    built = interop_warehouse(kind).tables[fixture]

    def read(snapshot: SnapshotRows) -> Any:
        return duckdb_read(con, built.metadata_location, snapshot.snapshot_id)

    assert_reads_identically("duckdb", built, read)

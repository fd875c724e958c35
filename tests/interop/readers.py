"""The independent readers, each reduced to: read this table at this snapshot into Arrow.

- DuckDB 1.5 with its iceberg, avro and httpfs extensions, installed from the PyPI packages'
  own ``.duckdb_extension`` files into a private extension directory (nothing is downloaded at
  run time; autoinstall and autoload are off so a missing file fails instead);
- iceberg-rust, as pyiceberg-core's DataFusion table provider;
- Polars' native Iceberg reader (``reader_override="native"``: Polars reads the Parquet files and
  applies deletes itself; pyiceberg plans the scan, as Polars does without its planner plugin);
- pyiceberg's ``StaticTable``.

The Java reference implementation is batched into one JVM instead (``java.py``).
"""

from __future__ import annotations

import glob
import importlib
import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

DUCKDB_EXTENSIONS = ("avro", "iceberg", "httpfs")


@dataclass(frozen=True)
class S3Access:
    endpoint: str  # http://127.0.0.1:PORT
    access_key: str
    secret_key: str
    region: str

    @property
    def properties(self) -> dict[str, str]:
        """pyiceberg and iceberg-rust FileIO properties."""
        return {"s3.endpoint": self.endpoint, "s3.access-key-id": self.access_key,
                "s3.secret-access-key": self.secret_key, "s3.region": self.region,
                "s3.path-style-access": "true"}


def extension_file(name: str) -> Path:
    """The ``.duckdb_extension`` file that the PyPI package ``duckdb-extension-<name>`` ships."""
    module = importlib.import_module(f"duckdb_extension_{name}")
    assert module.__file__ is not None
    found = glob.glob(os.path.join(os.path.dirname(module.__file__), "extensions", "*", f"{name}.duckdb_extension"))
    if len(found) != 1:
        raise AssertionError(f"duckdb-extension-{name} ships {found!r}, not one .duckdb_extension file")
    return Path(found[0])


def duckdb_connect(extension_directory: Path, s3: S3Access | None = None) -> Any:
    """An in-memory DuckDB with the three extensions loaded from the PyPI packages, UTC, and S3."""
    import duckdb

    con = duckdb.connect(config={"extension_directory": str(extension_directory),
                                 "autoinstall_known_extensions": False, "autoload_known_extensions": False})
    for name in DUCKDB_EXTENSIONS:
        con.execute(f"INSTALL '{extension_file(name)}'")
        con.execute(f"LOAD {name}")
    con.execute("SET TimeZone = 'UTC'")
    if s3 is not None:
        host = s3.endpoint.removeprefix("http://")
        con.execute(f"CREATE SECRET interop_s3 (TYPE s3, KEY_ID '{s3.access_key}', SECRET '{s3.secret_key}', "
                    f"REGION '{s3.region}', ENDPOINT '{host}', URL_STYLE 'path', USE_SSL false)")
    return con


def duckdb_read(con: Any, metadata_location: str, snapshot_id: int) -> pa.Table:
    table: pa.Table = con.execute("SELECT * FROM iceberg_scan(?, snapshot_from_id = ?)",
                                  [metadata_location, snapshot_id]).to_arrow_table()
    return table


def rust_read(metadata_location: str, s3: S3Access | None) -> pa.Table:
    """iceberg-rust reads the table at the current snapshot of ``metadata_location``.

    Its DataFusion provider takes no snapshot, so a snapshot is read through the metadata file
    written when it became current.
    """
    import datafusion
    from pyiceberg_core.datafusion import IcebergDataFusionTable

    provider = IcebergDataFusionTable(["interop", "t"], metadata_location, s3.properties if s3 else {})
    ctx = datafusion.SessionContext()
    ctx.register_table("t", provider)
    table: pa.Table = ctx.sql("SELECT * FROM t").to_arrow_table()
    return table


def polars_storage_options(s3: S3Access | None) -> dict[str, str] | None:
    if s3 is None:
        return None
    return {"aws_endpoint_url": s3.endpoint, "aws_access_key_id": s3.access_key,
            "aws_secret_access_key": s3.secret_key, "aws_region": s3.region, "aws_allow_http": "true",
            **s3.properties}


def polars_read(metadata_location: str, snapshot_id: int, s3: S3Access | None) -> pa.Table:
    import polars as pl

    with warnings.catch_warnings():
        # Polars says it plans through pyiceberg without its planner plugin; that is the setup.
        warnings.simplefilter("ignore", pl.exceptions.PerformanceWarning)
        frame = pl.scan_iceberg(metadata_location, snapshot_id=snapshot_id, reader_override="native",
                                storage_options=polars_storage_options(s3)).collect()
    return frame.to_arrow()


def pyiceberg_read(metadata_location: str, snapshot_id: int, s3: S3Access | None) -> pa.Table:
    from pyiceberg.table import StaticTable

    table = StaticTable.from_metadata(metadata_location, properties=s3.properties if s3 else {})
    result: pa.Table = table.scan(snapshot_id=snapshot_id).to_arrow()
    return result

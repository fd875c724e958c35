"""Shared helpers for maintenance tests: a position-delete commit and plain-pyarrow file checks."""

from __future__ import annotations

import uuid
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq

import tablestore
from tablestore.spec.manifests.manifest import DataFile
from tablestore.table.ops.position_deletes import write_position_deletes
from tablestore.table.update.snapshot import RowDelta, since
from tablestore.table.update.transaction import commit_snapshot

SCHEMA = pa.schema([("user_id", pa.int64()), ("country", pa.string()), ("payload", pa.string())])


def add_position_deletes(table: tablestore.Table, data_file: DataFile, positions: list[int]) -> DataFile:
    """Commit a merge-on-read position delete file masking ``positions`` of ``data_file``."""
    rows = pa.table({"file_path": [data_file.file_path] * len(positions), "pos": positions})
    spec = table.metadata.spec_for(data_file.spec_id)
    part = spec.partition_path(data_file.partition, table.schema()) if spec.fields else ""
    path = f"{table.location}/data/{part}/{uuid.uuid4()}-pos-deletes.parquet"
    delete_file = write_position_deletes(table.io, path, rows, data_file.spec_id, data_file.partition)
    commit_snapshot(RowDelta(table, [], [], [delete_file], since(table.current_snapshot()), checks=()))
    return delete_file


def rows(n: int, start: int = 0, countries: tuple[str, ...] = ("de", "fr", "it")) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table({
        "user_id": ids,
        "country": [countries[i % len(countries)] for i in ids],
        "payload": [f"secret-of-{i}" for i in ids],
    }, schema=SCHEMA)


def parquet_files(location: str, properties: dict[str, str] | None = None) -> list[tuple[pafs.FileSystem, str]]:
    """Every .parquet file under a local path or s3:// URI, listed with plain pyarrow."""
    if location.startswith("s3://"):
        props = properties or {}
        fs: pafs.FileSystem = pafs.S3FileSystem(
            endpoint_override=props.get("s3.endpoint"), access_key=props.get("s3.access-key-id"),
            secret_key=props.get("s3.secret-access-key"), region=props.get("s3.region", "us-east-1"),
        )
        base = location[len("s3://"):]
    else:
        fs, base = pafs.LocalFileSystem(), location.removeprefix("file:")
    infos = fs.get_file_info(pafs.FileSelector(base, recursive=True, allow_not_found=True))
    return [(fs, i.path) for i in infos if i.type == pafs.FileType.File and i.path.endswith(".parquet")]


def subject_rows_in_files(location: str, field_id: int, values: list[Any],
                          properties: dict[str, str] | None = None) -> dict[str, int]:
    """{file: rows holding one of ``values`` in the column with ``field_id``}, read with plain pyarrow."""
    found: dict[str, int] = {}
    for fs, path in parquet_files(location, properties):
        table = pq.read_table(path, filesystem=fs)
        for i, f in enumerate(table.schema):
            if (f.metadata or {}).get(b"PARQUET:field_id") == str(field_id).encode():
                hits = pc.sum(pc.is_in(table.column(i), value_set=pa.array(values, f.type))).as_py() or 0
                if hits:
                    found[path] = found.get(path, 0) + hits
    return found

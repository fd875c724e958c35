"""The service's metadata cache: bounded by the bytes of the JSON it keeps, least recently used
first out, each file serialized once."""

from __future__ import annotations

import json

import pyarrow as pa

from tablestore.rest.state.metadata_cache import MetadataCache, metadata_json
from tablestore.spec.metadata.table_metadata import TableMetadata, new_table_metadata
from tablestore.spec.partitioning.partition_spec import UNPARTITIONED_SPEC
from tablestore.spec.partitioning.sort_order import UNSORTED_ORDER
from tablestore.spec.schemas.schema import arrow_to_schema


def _metadata(location: str) -> TableMetadata:
    schema = arrow_to_schema(pa.schema([pa.field("id", pa.int64())]))
    return new_table_metadata(schema, UNPARTITIONED_SPEC, UNSORTED_ORDER, location, {"k": "v"})


def test_a_thousand_tables_fit_where_512_entries_did_not_and_the_bytes_bound_holds() -> None:
    files = {f"/w/t{i}/metadata/00000.metadata.json": _metadata(f"/w/t{i}") for i in range(1000)}
    total = sum(len(metadata_json(m)) for m in files.values())
    cache = MetadataCache(max_bytes=total)
    for location, metadata in files.items():
        cache.put(location, metadata)
    assert len(cache) == 1000 and all(cache.get(location) is metadata for location, metadata in files.items())
    # The body is the JSON of the file, the same object every time (serialized once).
    first = next(iter(files))
    body = cache.body(first, files[first])
    assert json.loads(body) == files[first].to_json() and cache.body(first, files[first]) is body
    # One more file than the bytes allow: the least recently used goes (t1: t0 was just read).
    cache.put("/w/extra/metadata/00000.metadata.json", _metadata("/w/extra"))
    assert cache.size_bytes <= cache.max_bytes
    assert cache.get("/w/t1/metadata/00000.metadata.json") is None and cache.get(first) is not None
    assert 998 <= len(cache) <= 1000


def test_a_file_discarded_is_gone_and_its_bytes_freed() -> None:
    cache = MetadataCache()
    cache.put("/w/t/metadata/00000.metadata.json", _metadata("/w/t"))
    cache.put("/w/t/metadata/00001.metadata.json", _metadata("/w/t"))
    one = cache.size_bytes // 2
    cache.discard("/w/t/metadata/00000.metadata.json")
    cache.discard("/w/t/metadata/missing.metadata.json")
    assert cache.get("/w/t/metadata/00000.metadata.json") is None and len(cache) == 1
    assert abs(cache.size_bytes - one) <= 2

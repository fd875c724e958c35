"""What Iceberg's REST Compatibility Kit asks of the service, one behaviour at a time, over HTTP
as a Java client sends it: a missing metadata file, view schema ids, locations as requested,
Java's messages and namespace names with dots."""

from __future__ import annotations

import uuid
from typing import Any

import pyarrow as pa
import requests

from tablestore.io import load_file_io
from tests.rest.conftest import CATALOG, WRITE_TOKEN, RestService

AUTH = {"Authorization": f"Bearer {WRITE_TOKEN}"}
SCHEMA = pa.schema([pa.field("id", pa.int64())])


def _url(service: RestService, path: str) -> str:
    return f"{service.uri}/v1/{CATALOG}/{path}"


def _namespace(service: RestService, prefix: str) -> str:
    ns = f"{prefix}_{uuid.uuid4().hex[:8]}"
    created = requests.post(_url(service, "namespaces"), headers=AUTH, json={"namespace": [ns]}, timeout=30)
    assert created.status_code == 200, created.text
    return ns


def _error(response: requests.Response) -> tuple[int, str, str]:
    body: dict[str, Any] = response.json()["error"]
    return response.status_code, body["type"], body["message"]


def test_a_table_whose_metadata_file_is_gone_is_not_served_from_the_cache(rest_service: RestService) -> None:
    ns = _namespace(rest_service, "gone")
    client = rest_service.client()
    try:
        table = client.create_table(f"{ns}.t", SCHEMA)
        location = table.metadata_location
        # Loaded once, so the service has the parsed file in its cache.
        first = requests.get(_url(rest_service, f"namespaces/{ns}/tables/t"), headers=AUTH, timeout=30)
        assert first.status_code == 200 and first.json()["metadata-location"] == location
        io = load_file_io({})
        data = io.new_input(location).read()
        io.delete(location)
        try:
            missing = requests.get(_url(rest_service, f"namespaces/{ns}/tables/t"), headers=AUTH, timeout=30)
            status, kind, message = _error(missing)
            assert (status, kind) == (404, "NotFoundException")
            assert message.startswith(f"Failed to open input stream for file: {location}")
        finally:
            io.new_output(location).write(data)
        again = requests.get(_url(rest_service, f"namespaces/{ns}/tables/t"), headers=AUTH, timeout=30)
        assert again.status_code == 200 and again.json()["metadata-location"] == location
    finally:
        client.close()


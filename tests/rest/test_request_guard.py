"""The service against a hostile client: authentication before the body, a body size limit
enforced while reading, property limits, a log line per failed request, and memory that stays
flat under oversized and unauthenticated bodies."""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from tablestore.rest.routes.limits import MAX_PROPERTY_KEY_CHARS, MAX_PROPERTY_VALUE_CHARS
from tests.rest.conftest import CATALOG, CLIENT_SECRET, READ_TOKEN, WRITE_TOKEN, RestService, write_config

LIMIT = 4 * 1024 * 1024  # the service's max-request-bytes in this module


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RestService]:
    workdir = tmp_path_factory.mktemp("guard")
    uri = f"sqlite:///{workdir / 'catalog.db'}"
    config = workdir / "tablestore.yaml"
    write_config(config, uri, str(workdir / "warehouse"), server_extra={"max-request-bytes": LIMIT})
    service = RestService(config, uri, str(workdir / "warehouse"), workdir)
    service.start()
    try:
        yield service
    finally:
        service.stop()


def _auth(token: str = WRITE_TOKEN) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_a_malformed_body_without_a_token_gets_401_not_the_parsers_400(guarded: RestService) -> None:
    url = f"{guarded.uri}/v1/{CATALOG}/namespaces"
    for headers in ({}, {"Authorization": "Bearer wrong-token-xxxxxxxxxxxxxxxx"}):
        answer = requests.post(url, data=b"{not json", headers={**headers, "Content-Type": "application/json"},
                               timeout=30)
        assert answer.status_code == 401, answer.text
        assert answer.json()["error"]["type"] == "NotAuthorizedException"
    # With a token, the same body is the parser's 400.
    assert requests.post(url, data=b"{not json", headers={**_auth(), "Content-Type": "application/json"},
                         timeout=30).status_code == 400


def test_bodies_over_the_limit_are_refused_with_413_and_smaller_ones_served(guarded: RestService) -> None:
    url = f"{guarded.uri}/v1/{CATALOG}/namespaces"
    big = b" " * (LIMIT + 1)
    declared = requests.post(url, data=big, headers={**_auth(), "Content-Type": "application/json"}, timeout=60)
    assert declared.status_code == 413
    assert declared.json()["error"]["type"] == "RequestTooLargeException"
    assert f"at most {LIMIT}" in declared.json()["error"]["message"]

    def chunks() -> Iterator[bytes]:  # no Content-Length: refused while reading
        for _ in range(LIMIT // 65536 + 2):
            yield b" " * 65536

    streamed = requests.post(url, data=chunks(), headers={**_auth(), "Content-Type": "application/json"}, timeout=60)
    assert streamed.status_code == 413 and "more than" in streamed.json()["error"]["message"]
    # A body just under the limit (JSON padded with blanks) is served.
    body = b'{"namespace": ["guard_ok"]}'
    padded = body + b" " * (LIMIT - len(body))
    assert requests.post(url, data=padded, headers={**_auth(), "Content-Type": "application/json"},
                         timeout=60).status_code == 200


def test_property_keys_and_values_have_limits_with_clear_400s(guarded: RestService) -> None:
    base = f"{guarded.uri}/v1/{CATALOG}/namespaces"
    long_value = "v" * (MAX_PROPERTY_VALUE_CHARS + 1)
    answer = requests.post(base, json={"namespace": ["props"], "properties": {"k": long_value}}, headers=_auth(),
                           timeout=60)
    assert answer.status_code == 400
    assert f"values are limited to {MAX_PROPERTY_VALUE_CHARS}" in answer.json()["error"]["message"]
    long_key = "k" * (MAX_PROPERTY_KEY_CHARS + 1)
    assert requests.post(base, json={"namespace": ["props"]}, headers=_auth(), timeout=30).status_code == 200
    answer = requests.post(f"{base}/props/properties", json={"updates": {long_key: "v"}}, headers=_auth(), timeout=30)
    assert answer.status_code == 400
    assert f"keys are limited to {MAX_PROPERTY_KEY_CHARS}" in answer.json()["error"]["message"]
    # A table's set-properties in a commit is bounded the same way.
    table: dict[str, Any] = {"name": "t", "schema": {"type": "struct", "schema-id": 0,
                                     "fields": [{"id": 1, "name": "id", "type": "long", "required": False}]}}
    assert requests.post(f"{base}/props/tables", json=table, headers=_auth(), timeout=30).status_code == 200
    commit: dict[str, Any] = {"requirements": [], "updates": [{"action": "set-properties", "updates": {"k": long_value}}]}
    answer = requests.post(f"{base}/props/tables/t", json=commit, headers=_auth(), timeout=60)
    assert answer.status_code == 400 and "set-properties" in answer.json()["error"]["message"]
    # Within the limits, properties are stored.
    ok = requests.post(f"{base}/props/properties", json={"updates": {"k" * 100: "v" * 100_000}}, headers=_auth(),
                       timeout=30)
    assert ok.status_code == 200 and ok.json()["updated"] == ["k" * 100]


def test_every_failed_request_is_logged_once_with_its_id_and_principal_and_no_secret(guarded: RestService) -> None:
    missing = requests.get(f"{guarded.uri}/v1/{CATALOG}/namespaces/nowhere", headers=_auth(READ_TOKEN), timeout=30)
    denied = requests.post(f"{guarded.uri}/v1/{CATALOG}/namespaces", json={"namespace": ["x"]},
                           headers=_auth(READ_TOKEN), timeout=30)
    stranger = requests.get(f"{guarded.uri}/v1/config", headers={"Authorization": "Bearer wrong-token-0123456789"},
                            timeout=30)
    bad_client = requests.post(f"{guarded.uri}/v1/oauth/tokens", timeout=30,
                               data={"grant_type": "client_credentials", "client_id": "etl", "client_secret": "nope"})
    ok = requests.get(f"{guarded.uri}/v1/config", headers=_auth(READ_TOKEN), timeout=30)
    assert (missing.status_code, denied.status_code, stranger.status_code, bad_client.status_code,
            ok.status_code) == (404, 403, 401, 401, 200)
    guarded.stop()  # flushes the log
    try:
        log = guarded.log()
    finally:
        guarded.start()
    expected = [
        (missing, "GET", f"/v1/{CATALOG}/namespaces/nowhere", 404, "NoSuchNamespaceException", "reader"),
        (denied, "POST", f"/v1/{CATALOG}/namespaces", 403, "ForbiddenException", "reader"),
        (stranger, "GET", "/v1/config", 401, "NotAuthorizedException", "-"),
        (bad_client, "POST", "/v1/oauth/tokens", 401, "invalid_client", "-"),
    ]
    for answer, method, path, status, error_type, principal in expected:
        request_id = answer.headers["X-Request-ID"]
        # Once in text by the guard, and once in the JSON access log (tests/rest/test_metrics.py).
        lines = [line for line in log.splitlines() if request_id in line and not line.startswith("{")]
        assert lines == [f"WARNING tablestore.rest.requests: request {request_id}: {method} {path} -> "
                         f"{status} {error_type} (principal {principal})"], lines
        access = [json.loads(line) for line in log.splitlines() if request_id in line and line.startswith("{")]
        assert [(a["status"], a["error"], a["principal"]) for a in access] == [(status, error_type, principal)]
    # The successful request is only in the access log; no token or secret is anywhere.
    assert [line for line in log.splitlines() if ok.headers["X-Request-ID"] in line and not line.startswith("{")] == []
    for secret in (WRITE_TOKEN, READ_TOKEN, CLIENT_SECRET, "wrong-token-0123456789", "nope", "test-signing-secret"):
        assert secret not in log
    # Start-up is logged at INFO.
    assert re.search(rf"^INFO tablestore.rest.app: serving catalogs {CATALOG} on http://", log, re.MULTILINE)


def _rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def _send_body(port: int, path: str, token: str | None, size: int, declare: bool) -> bytes:
    """POST ``size`` bytes in 1 MiB writes, stopping when the server closes; the answer's
    first bytes (empty if the server reset the connection first)."""
    headers = [f"POST {path} HTTP/1.1", "Host: 127.0.0.1", "Content-Type: application/json"]
    headers.append(f"Content-Length: {size}" if declare else "Transfer-Encoding: chunked")
    if token:
        headers.append(f"Authorization: Bearer {token}")
    chunk = b"[" * (1024 * 1024)
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        try:
            s.sendall(("\r\n".join(headers) + "\r\n\r\n").encode())
            sent = 0
            while sent < size:
                s.sendall(chunk if declare else b"%x\r\n%s\r\n" % (len(chunk), chunk))
                sent += len(chunk)
            if not declare:
                s.sendall(b"0\r\n\r\n")
            return s.recv(64)
        except (BrokenPipeError, ConnectionResetError):
            try:
                return s.recv(64)
            except OSError:
                return b""


def test_the_services_memory_stays_flat_under_oversized_and_unauthenticated_bodies(guarded: RestService) -> None:
    assert guarded.process is not None
    pid = guarded.process.pid
    path = f"/v1/{CATALOG}/namespaces"
    _send_body(guarded.port, path, WRITE_TOKEN, 1024 * 1024, declare=True)  # warm up: allocator arenas
    before = _rss_bytes(pid)
    size = 64 * 1024 * 1024
    answers: list[bytes] = []
    started = time.monotonic()
    # Four at a time, as a few concurrent requests were what exhausted the service's memory:
    # no token, a read token, a write token (each declared and chunked).
    cases = [(None, True), (None, False), (READ_TOKEN, False), (WRITE_TOKEN, True), (WRITE_TOKEN, False)] * 2
    for batch in range(0, len(cases), 4):
        threads = [threading.Thread(target=lambda t=t, d=d: answers.append(_send_body(guarded.port, path, t, size, d)))
                   for t, d in cases[batch:batch + 4]]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
    after = _rss_bytes(pid)
    # 10 bodies of 64 MiB: buffering even one would add 64 MiB.
    assert after - before < 24 * 1024 * 1024, (before, after)
    statuses = {a.split(b" ")[1] for a in answers if a.startswith(b"HTTP/1.1 ")}
    assert statuses <= {b"401", b"413"} and statuses, answers
    assert time.monotonic() - started < 120
    # The service still answers.
    assert requests.get(f"{guarded.uri}/v1/config", headers=_auth(READ_TOKEN), timeout=30).status_code == 200


def _verifications(service: RestService) -> float:
    text = requests.get(f"{service.uri}/metrics", headers=_auth(READ_TOKEN), timeout=30).text
    return float(next(line.split()[-1] for line in text.splitlines()
                      if line.startswith("tablestore_token_verifications_total ")))


def test_a_token_is_verified_once_per_request(guarded: RestService) -> None:
    """The envelope verifies a request's token once; the idempotency store, the endpoint's checks,
    the access log and /metrics read the principal it put on the request. Counted by /metrics,
    whose own scrape is one authenticated request too."""
    import uuid

    before = _verifications(guarded)
    url = f"{guarded.uri}/v1/{CATALOG}"
    ns = f"once{uuid.uuid4().hex[:6]}"
    schema: dict[str, Any] = {"type": "struct", "schema-id": 0, "fields": [{"id": 1, "name": "id", "type": "long", "required": False}]}
    keyed = {**_auth(), "Idempotency-Key": str(uuid.uuid4())}  # the mutation that read the token three times
    answers = [
        requests.post(f"{url}/namespaces", json={"namespace": [ns]}, headers=keyed, timeout=30),
        requests.post(f"{url}/namespaces/{ns}/tables", json={"name": "t", "schema": schema},
                      headers={**_auth(), "Idempotency-Key": str(uuid.uuid4())}, timeout=30),
        requests.get(f"{url}/namespaces/{ns}/tables/t", headers=_auth(READ_TOKEN), timeout=30),
        requests.post(f"{url}/namespaces", json={"namespace": [ns]}, headers=keyed, timeout=30),  # replayed
        requests.post(f"{url}/namespaces", json={"namespace": ["x"]}, headers=_auth(READ_TOKEN), timeout=30),  # 403
        requests.get(f"{guarded.uri}/v1/config", headers=_auth(READ_TOKEN), timeout=30),
    ]
    assert [a.status_code for a in answers] == [200, 200, 200, 200, 403, 200]
    assert answers[3].headers["idempotent-replayed"] == "true"
    assert _verifications(guarded) - before == len(answers) + 1  # and the second scrape

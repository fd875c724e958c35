"""Real faults of a commit, for the fault matrix (tests/table/test_commit_faults.py).

- :class:`FaultProxy`: a small HTTP proxy in front of the catalog service, as a load balancer or
  gateway is. Armed with a fault, it does it to the next commit request (a POST with
  requirements) only: ``lost`` forwards the commit and answers 502 (the service committed, the
  client never hears of it); ``refused`` answers 503 without forwarding (nothing landed);
  ``reset`` forwards the commit and resets the connection instead of answering; ``down``
  forwards it, resets the connection and then resets every request until :meth:`up`.
- :class:`DatabaseFault`: the same at the SQL catalog's COMMIT, on its real database, through
  SQLAlchemy's ``commit`` event: ``lost`` lets the COMMIT happen and then fails as a connection
  lost after it; ``refused`` fails before the COMMIT is sent; ``terminate`` (PostgreSQL) ends the
  connection's backend with ``pg_terminate_backend`` from another connection just before its
  COMMIT, which then fails for real; ``kill`` lets the COMMIT happen and SIGKILLs the process.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import signal
import socket
import struct
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from sqlalchemy import create_engine, event, text
from sqlalchemy.exc import OperationalError

PROXY_FAULTS = ("lost", "refused", "reset", "down")
DATABASE_FAULTS = ("lost", "refused", "terminate", "kill")
# Of a swap sent in autocommit mode (the service on PostgreSQL: one UPDATE, no COMMIT).
STATEMENT_FAULTS = ("lost-after-swap", "terminate-before-swap")


class FaultProxy:
    def __init__(self, upstream: str) -> None:
        parts = urlsplit(upstream)
        self.upstream = (parts.hostname or "127.0.0.1", parts.port or 80)
        self.fault: str | None = None
        self.down = False
        self.commits_faulted = 0
        self._lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self.server.daemon_threads = True
        self.server.proxy = self  # type: ignore[attr-defined]
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def uri(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def arm(self, fault: str | None) -> None:
        assert fault is None or fault in PROXY_FAULTS, fault
        self.fault = fault

    def up(self) -> None:
        self.down, self.fault = False, None

    def take(self, is_commit: bool) -> str | None:
        with self._lock:
            if not is_commit or self.fault is None:
                return None
            fault, self.fault = self.fault, None
            self.commits_faulted += 1
            return fault

    def forward(self, method: str, path: str, headers: dict[str, str], body: bytes) -> tuple[int, str, bytes]:
        connection = http.client.HTTPConnection(*self.upstream, timeout=60)
        try:
            connection.request(method, path, body=body or None, headers=headers)
            response = connection.getresponse()
            return response.status, response.getheader("Content-Type") or "application/json", response.read()
        finally:
            connection.close()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"  # one request per connection: a reset hits exactly one

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _handle(self) -> None:
        proxy: FaultProxy = self.server.proxy  # type: ignore[attr-defined]
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if proxy.down:
            self._reset()
            return
        is_commit = self.command == "POST" and (b'"requirements"' in body or self.path.endswith("/transactions/commit"))
        fault = proxy.take(is_commit)
        if fault == "refused":
            self._answer(503, "text/html", b"<html><body><h1>503 Service Unavailable</h1></body></html>")
            return
        headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection", "content-length")}
        status, content_type, data = proxy.forward(self.command, self.path, headers, body)
        if fault == "lost":
            self._answer(502, "text/html", b"<html><body><h1>502 Bad Gateway</h1></body></html>")
        elif fault == "reset":
            self._reset()
        elif fault == "down":
            proxy.down = True
            self._reset()
        else:
            self._answer(status, content_type, data)

    do_GET = do_POST = do_DELETE = do_HEAD = do_PUT = _handle

    def _answer(self, status: int, content_type: str, data: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _reset(self) -> None:
        # SO_LINGER 0: close() sends RST, as a gateway dropping the connection does.
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        with contextlib.suppress(OSError):
            self.connection.close()
        self.close_connection = True

    def finish(self) -> None:
        with contextlib.suppress(OSError):
            super().finish()


class DatabaseFault:
    """Faults at the COMMIT of a SQL catalog's database transactions (the pointer swap)."""

    def __init__(self, engine: Any, admin_uri: str | None = None) -> None:
        self.engine = engine
        self.admin_uri = admin_uri
        self.fault: str | None = None
        event.listen(engine, "commit", self._on_commit)
        event.listen(engine, "before_cursor_execute", self._before_statement)
        event.listen(engine, "after_cursor_execute", self._after_statement)

    def arm(self, fault: str | None) -> None:
        assert fault is None or fault in (*DATABASE_FAULTS, *STATEMENT_FAULTS), fault
        self.fault = fault

    @staticmethod
    def _is_swap(statement: str) -> bool:
        return statement.lstrip().upper().startswith("UPDATE ICEBERG_TABLES")

    def _before_statement(self, conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if self.fault == "terminate-before-swap" and self._is_swap(statement):
            self.fault = None
            self._terminate(conn.connection.dbapi_connection.get_backend_pid())

    def _after_statement(self, conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if self.fault == "lost-after-swap" and self._is_swap(statement):
            self.fault = None  # the UPDATE ran (and, in autocommit mode, is committed)
            raise OperationalError(statement, None, ConnectionResetError("connection lost after the swap (injected)"))

    def _terminate(self, pid: int) -> None:
        assert self.admin_uri is not None, "pg_terminate_backend needs the database's URI"
        admin = create_engine(self.admin_uri)
        try:
            with admin.connect() as other:
                other.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
                other.commit()
        finally:
            admin.dispose()

    def _on_commit(self, conn: Any) -> None:
        # Only a writing transaction (the catalog marks them: on SQLite they BEGIN IMMEDIATE).
        if self.fault not in DATABASE_FAULTS or not conn.get_execution_options().get("tablestore_write"):
            return
        fault, self.fault = self.fault, None
        dbapi = conn.connection.dbapi_connection
        if fault == "lost":
            dbapi.commit()
            raise OperationalError("COMMIT", None, ConnectionResetError("connection lost after COMMIT (injected)"))
        if fault == "refused":
            raise OperationalError("COMMIT", None, ConnectionResetError("connection lost before COMMIT (injected)"))
        if fault == "kill":
            dbapi.commit()
            os.kill(os.getpid(), signal.SIGKILL)
        if fault == "terminate":
            self._terminate(dbapi.get_backend_pid())  # the real COMMIT then goes to a backend that is gone

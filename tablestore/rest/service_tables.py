"""The service's own tables, in each served catalog's database beside the Iceberg catalog's.

One ``MetaData`` holds them all, and :func:`create_service_table` creates one on first use (a
service that never uses grants adds no grants table), tolerating another replica that creates it
at the same moment:

- ``tablestore_grants``: privileges granted (:mod:`tablestore.rest.auth.grants`);
- ``tablestore_idempotency_keys``: Idempotency-Keys and their responses
  (:mod:`tablestore.rest.state.idempotency`);
- ``tablestore_scan_plans``: the pages of paged scan plans (:mod:`tablestore.rest.state.plan_store`);
- ``tablestore_service_instances`` and ``tablestore_revoked_tokens``: the replicas' heartbeats and
  the tokens revoked on any of them (:mod:`tablestore.rest.state.replicas`).
"""

from __future__ import annotations

from sqlalchemy import BigInteger, Column, Engine, Integer, LargeBinary, MetaData, String, Text, inspect
from sqlalchemy import Table as SqlTable
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.schema import CreateTable

SERVICE_TABLES = MetaData()

GRANTS = SqlTable(
    "tablestore_grants",
    SERVICE_TABLES,
    Column("catalog_name", String(255), primary_key=True, nullable=False),
    Column("securable_type", String(16), primary_key=True, nullable=False),
    Column("securable_name", Text, primary_key=True, nullable=False),  # JSON list of levels ([] for the catalog)
    Column("privilege", String(32), primary_key=True, nullable=False),
    Column("grantee_type", String(16), primary_key=True, nullable=False),
    Column("grantee_name", String(255), primary_key=True, nullable=False),
    Column("granted_by", String(255), nullable=False),
    Column("granted_ms", BigInteger, nullable=False),
)

IDEMPOTENCY_KEYS = SqlTable(
    "tablestore_idempotency_keys",
    SERVICE_TABLES,
    Column("catalog_name", String(255), primary_key=True, nullable=False),
    Column("idempotency_key", String(36), primary_key=True, nullable=False),
    Column("fingerprint", String(64), nullable=False),
    Column("created_ms", BigInteger, nullable=False),
    Column("status", Integer, nullable=True),  # NULL while the first request runs
    Column("headers", Text, nullable=True),  # JSON [[name, value], ...] of the response
    Column("body", LargeBinary, nullable=True),
    Column("owner", String(36), nullable=True),  # the replica running the request (NULL: unknown)
)

SCAN_PLANS = SqlTable(
    "tablestore_scan_plans",
    SERVICE_TABLES,
    Column("catalog_name", String(255), primary_key=True, nullable=False),
    Column("plan_id", String(64), primary_key=True, nullable=False),
    Column("page", Integer, primary_key=True, nullable=False),  # 0: the plan's answer, then its plan tasks
    Column("table_ident", Text, nullable=False),  # JSON list of the table's identifier
    Column("principal", Text, nullable=False),
    Column("created_ms", BigInteger, nullable=False),
    Column("body", LargeBinary, nullable=True),  # NULL on page 0: the plan was cancelled
)

INSTANCES = SqlTable(
    "tablestore_service_instances",
    SERVICE_TABLES,
    Column("instance_id", String(36), primary_key=True, nullable=False),
    Column("started_ms", BigInteger, nullable=False),
    Column("heartbeat_ms", BigInteger, nullable=False),
)

REVOKED_TOKENS = SqlTable(
    "tablestore_revoked_tokens",
    SERVICE_TABLES,
    Column("token_hash", String(64), primary_key=True, nullable=False),
    Column("expires_ms", BigInteger, nullable=False),
)


def create_service_table(engine: Engine, table: SqlTable) -> None:
    """Create ``table`` in the database of ``engine`` unless it is there."""
    if inspect(engine).has_table(table.name):
        return
    try:
        with engine.begin() as conn:
            conn.execute(CreateTable(table, if_not_exists=True))
    except SQLAlchemyError:
        # Another replica created it at the same moment (PostgreSQL may report that).
        if not inspect(engine).has_table(table.name):
            raise


__all__ = ["GRANTS", "IDEMPOTENCY_KEYS", "INSTANCES", "REVOKED_TOKENS", "SCAN_PLANS", "SERVICE_TABLES",
           "create_service_table"]

"""``GET .../tables/{table}/credentials``: fresh scoped credentials for a table's files.

Clients call it when the credentials of a LoadTableResult near their expiry
(``s3.session-token-expires-at-ms``), instead of loading the table again. The credentials are
those a load with ``X-Iceberg-Access-Delegation: vended-credentials`` gets (see
:mod:`tablestore.rest.storage.credentials`): scoped to the table's location, read-only unless the caller
may write the table (the write role, or WRITE under grants), expiring.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query

from tablestore.rest.access import ReadAccess
from tablestore.rest.auth.grants import Privilege

router = APIRouter(prefix="/v1/{prefix}", tags=["tables"])


@router.get("/namespaces/{namespace}/tables/{table}/credentials")
def load_credentials(
    namespace: str,
    table: str,
    access: ReadAccess,
    plan_id: str | None = Query(default=None, alias="planId"),
) -> dict[str, Any]:
    # planId names a server-side scan plan; a plan reads the same table, so it needs the same
    # credentials and is accepted without changing them.
    ident = access.parse_identifier(namespace, table)
    access.require_table(Privilege.READ, ident)
    _location, metadata = access.catalog.load_table_metadata(ident)
    return {"storage-credentials": access.storage_credentials(metadata.location, dict(metadata.properties), ident)}


__all__ = ["router"]

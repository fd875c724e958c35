"""``POST .../tables/{table}/sign``: the REST spec's remote signing of S3 requests.

A client that loaded the table with ``X-Iceberg-Access-Delegation: remote-signing`` sends each
S3 request it is about to make (``RemoteSignRequest``: region, uri, method, headers, and the body
of a multi-object delete) and gets back the headers that sign it (``RemoteSignResult``: uri,
headers). The request is signed only for the table this URL names, inside its locations, and
writes only for who may write the table (the write role, or WRITE under grants;
:mod:`tablestore.rest.storage.signing`); anything else is 403.

Reads are answered ``Cache-Control: private`` (Java's signer may reuse the signature of the
same request for 30 seconds), writes ``no-cache``.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from tablestore.errors import ForbiddenError
from tablestore.rest.access import ReadAccess
from tablestore.rest.auth.grants import Privilege
from tablestore.rest.auth.tokens import LOCATION_PROPERTIES
from tablestore.rest.state.stats import REQUESTS_SIGNED
from tablestore.rest.storage.signing import S3Location, check_request, parse_request

router = APIRouter(prefix="/v1/{prefix}", tags=["tables"])


class RemoteSignRequest(BaseModel):
    """The spec's ``RemoteSignRequest``."""

    model_config = ConfigDict(extra="allow")

    region: str
    uri: str
    method: str
    headers: dict[str, list[str]] = Field(default_factory=dict)
    properties: dict[str, str] = Field(default_factory=dict)
    body: str | None = None
    provider: str | None = None


@router.post("/namespaces/{namespace}/tables/{table}/sign")
def sign_request(namespace: str, table: str, access: ReadAccess,
                 body: Annotated[RemoteSignRequest, Body()]) -> JSONResponse:
    if body.provider and body.provider.lower() != "s3":
        raise ForbiddenError(f"remote signing refused: this service signs S3 requests only, not {body.provider!r}")
    ident = access.parse_identifier(namespace, table)
    access.require_table(Privilege.READ, ident)
    _location, metadata = access.catalog.load_table_metadata(ident)
    locations = [found for path in (metadata.location, *(metadata.properties.get(k) for k in LOCATION_PROPERTIES))
                 if path and (found := S3Location.parse(path)) is not None]
    signer = access.service.signers[access.prefix]
    request = parse_request(body.method, body.uri, body.headers, body.body, signer.endpoint)
    check_request(request, locations, access.may_write(ident), ".".join(ident))
    headers = signer.sign(request.method, body.uri, body.region, body.headers)
    access.service.stats.inc(REQUESTS_SIGNED, access.prefix)
    return JSONResponse({"uri": body.uri, "headers": headers},
                        headers={"Cache-Control": "no-cache" if request.write else "private"})


__all__ = ["RemoteSignRequest", "router"]

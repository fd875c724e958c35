"""tablestore errors as the REST spec's error responses: ``{"error": {message, type, code}}``.

Ordinary failures are 4xx: bad input 400, no token 401, no role 403, missing things 404, name
clashes and lost commit races 409, an unprocessable metadata file 422. Only a commit whose
outcome is truly unknown is a 5xx: 504, one of the codes (500, 502, 504) the spec gives for
"the commit state is unknown", which pyiceberg and Java clients map to CommitStateUnknown and so
do not clean up the commit's files. 503 is not used: clients read it as "service unavailable",
a failure they may clean up after. An unexpected exception is a 500 whose message says nothing
about internals.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from tablestore.errors import (
    AlreadyExistsError,
    CommitFailedError,
    CommitStateUnknownError,
    CorruptMetadataError,
    ForbiddenError,
    InvalidArgumentError,
    NamespaceNotEmptyError,
    NotAuthorizedError,
    NotFoundError,
    TableStoreError,
    UnsupportedError,
    ValidationError,
)

logger = logging.getLogger(__name__)

# (status, Iceberg exception type name) per error class; the first match wins.
_STATUS: list[tuple[type[BaseException], int, str]] = [
    (NotAuthorizedError, 401, "NotAuthorizedException"),
    (ForbiddenError, 403, "ForbiddenException"),
    (CommitStateUnknownError, 504, "CommitStateUnknownException"),
    (CommitFailedError, 409, "CommitFailedException"),
    (NamespaceNotEmptyError, 409, "NamespaceNotEmptyException"),
    (AlreadyExistsError, 409, "AlreadyExistsException"),
    (NotFoundError, 404, "NotFoundException"),
    (UnsupportedError, 406, "UnsupportedOperationException"),
    (CorruptMetadataError, 422, "CorruptMetadataException"),
    (InvalidArgumentError, 400, "IllegalArgumentException"),
    (ValidationError, 400, "BadRequestException"),
    (TableStoreError, 400, "BadRequestException"),
]

_NOT_FOUND_TYPES = {
    "NoSuchNamespaceError": "NoSuchNamespaceException",
    "NoSuchTableError": "NoSuchTableException",
    "NoSuchViewError": "NoSuchViewException",
    "NoSuchFunctionError": "NoSuchFunctionException",
    "NoSuchPlanIdError": "NoSuchPlanIdException",
    "NoSuchPlanTaskError": "NoSuchPlanTaskException",
}


def error_body(status: int, error_type: str, message: str) -> dict[str, object]:
    return {"error": {"message": message, "type": error_type, "code": status}}


def error_response(status: int, error_type: str, message: str) -> JSONResponse:
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return JSONResponse(error_body(status, error_type, message), status_code=status, headers=headers)


def status_of(exc: BaseException) -> tuple[int, str]:
    for cls, status, name in _STATUS:
        if isinstance(exc, cls):
            return status, _NOT_FOUND_TYPES.get(type(exc).__name__, name)
    return 500, "ServerErrorException"


def log_unexpected(request_id: str | None, method: str, path: str, exc: BaseException) -> None:
    """The traceback of an unexpected error, under the request's id (the envelope logs the 500
    answer itself). The path and exception class are logged, never the headers (tokens)."""
    logger.error("request %s: unexpected error on %s %s: %s", request_id, method, path, type(exc).__name__,
                 exc_info=exc)


def tablestore_error_response(exc: TableStoreError) -> JSONResponse:
    """A TableStoreError's answer: its status and Iceberg error type, its message."""
    status, name = status_of(exc)
    return error_response(status, name, str(exc))


def unexpected_error_response(scope: Mapping[str, Any], exc: BaseException) -> JSONResponse:
    """The answer to an unexpected error (500, no detail), its traceback logged under the
    request's id: the app's handler and the routes answered in the envelope alike."""
    log_unexpected(scope.get("state", {}).get("request_id"), scope["method"], scope["path"], exc)
    return error_response(500, "ServerErrorException", "internal server error; see the server log")


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(TableStoreError)
    async def _tablestore(_request: Request, exc: TableStoreError) -> JSONResponse:
        return tablestore_error_response(exc)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e.get('loc', ()))}: {e.get('msg', '')}" for e in exc.errors()[:5]
        )
        return error_response(400, "BadRequestException", f"malformed request: {problems}")

    @app.exception_handler(StarletteHTTPException)
    async def _http(_request: Request, exc: StarletteHTTPException) -> JSONResponse:
        name = {404: "NotFoundException", 405: "MethodNotAllowedException"}.get(exc.status_code, "RESTException")
        return error_response(exc.status_code, name, str(exc.detail))

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        return unexpected_error_response(request.scope, exc)


__all__ = ["error_body", "error_response", "install_error_handlers", "log_unexpected", "status_of",
           "tablestore_error_response", "unexpected_error_response"]

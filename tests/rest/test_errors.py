"""tablestore errors map to the REST spec's statuses and exception types."""

from __future__ import annotations

import pytest

from tablestore import errors
from tablestore.errors import ForbiddenError, NotAuthorizedError
from tablestore.rest.errors import status_of


@pytest.mark.parametrize(("error", "status", "kind"), [
    (NotAuthorizedError("x"), 401, "NotAuthorizedException"),
    (ForbiddenError("x"), 403, "ForbiddenException"),
    (errors.CommitConflictError("x"), 409, "CommitFailedException"),
    (errors.CommitFailedError("x"), 409, "CommitFailedException"),
    (errors.CommitStateUnknownError("x"), 504, "CommitStateUnknownException"),
    (errors.NoSuchTableError("x"), 404, "NoSuchTableException"),
    (errors.NoSuchNamespaceError("x"), 404, "NoSuchNamespaceException"),
    (errors.NoSuchViewError("x"), 404, "NoSuchViewException"),
    (errors.NoSuchFunctionError("x"), 404, "NoSuchFunctionException"),
    (errors.NoSuchCatalogError("x"), 404, "NotFoundException"),
    (errors.TableAlreadyExistsError("x"), 409, "AlreadyExistsException"),
    (errors.ViewAlreadyExistsError("x"), 409, "AlreadyExistsException"),
    (errors.NamespaceNotEmptyError("x"), 409, "NamespaceNotEmptyException"),
    (errors.InvalidNameError("x"), 400, "BadRequestException"),
    (errors.SchemaEvolutionError("x"), 400, "BadRequestException"),
    (errors.UnsupportedError("x"), 406, "UnsupportedOperationException"),
    (errors.CorruptMetadataError("x"), 422, "CorruptMetadataException"),
    (RuntimeError("x"), 500, "ServerErrorException"),
])
def test_error_status_and_type(error: BaseException, status: int, kind: str) -> None:
    assert status_of(error) == (status, kind)

"""How much a client may send: the size of a request body, and of each property it sets.

A body is refused while it is being read, as soon as it passes ``server.max-request-bytes``
(:mod:`tablestore.rest.envelope`), so an oversized request costs the service no more memory
than the limit. The default, 8 MiB, is several times the largest legitimate request: a commit
carries manifest-list locations, not manifests, and even a create of a table with thousands of
columns is a few hundred KB of schema JSON.

Properties are stored in the catalog database (namespaces) or in every metadata file a table or
view writes from then on, so each key and value is bounded too. The value limit leaves room for
the largest property clients write, a table's name mapping (``schema.name-mapping.default``),
which is tens of bytes per column.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from tablestore.errors import ValidationError

MAX_PROPERTY_KEY_CHARS = 1024
MAX_PROPERTY_VALUE_CHARS = 1024 * 1024
MAX_PROPERTIES = 10_000


def check_properties(properties: Mapping[str, str], what: str) -> None:
    """ValidationError (a 400) naming the first property whose key or value is too long."""
    if len(properties) > MAX_PROPERTIES:
        raise ValidationError(f"{what}: {len(properties)} properties in one request; at most {MAX_PROPERTIES}")
    for key, value in properties.items():
        if not key:
            raise ValidationError(f"{what}: a property key is empty")
        if len(key) > MAX_PROPERTY_KEY_CHARS:
            raise ValidationError(f"{what}: property key {key[:40]!r}... is {len(key)} characters long; "
                                  f"keys are limited to {MAX_PROPERTY_KEY_CHARS}")
        if len(value) > MAX_PROPERTY_VALUE_CHARS:
            raise ValidationError(f"{what}: the value of property {key!r} is {len(value)} characters long; "
                                  f"values are limited to {MAX_PROPERTY_VALUE_CHARS}")


def check_property_keys(keys: Iterable[str], what: str) -> None:
    check_properties(dict.fromkeys(keys, ""), what)


__all__ = ["MAX_PROPERTIES", "MAX_PROPERTY_KEY_CHARS", "MAX_PROPERTY_VALUE_CHARS",
           "check_properties", "check_property_keys"]

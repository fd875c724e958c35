"""Names as the REST paths and bodies carry them: namespace levels joined by a separator in one
path segment, and identifiers of a namespace list and a name, validated as the catalog's names."""

from __future__ import annotations

from tablestore.errors import ValidationError
from tablestore.names import Identifier, to_namespace, validate_name

# The REST spec joins namespace levels in a path segment with the unit separator (%1F).
NAMESPACE_SEPARATOR = "\x1f"


def parse_namespace(text: str, separator: str = NAMESPACE_SEPARATOR) -> Identifier:
    """A namespace path segment as a validated tuple: levels joined by ``separator`` (the
    server's ``namespace-separator``, decoded) or by the spec's default %1F, which the 1.11 spec
    asks servers to accept as well, for older clients. A dot is part of a level's name."""
    parts = [text]
    for sep in dict.fromkeys((separator, NAMESPACE_SEPARATOR)):
        parts = [level for part in parts for level in part.split(sep)]
    return to_namespace(tuple(parts))


def parse_identifier(namespace: str, name: str, kind: str = "table",
                     separator: str = NAMESPACE_SEPARATOR) -> Identifier:
    validate_name(name, f"{kind} name")
    return (*parse_namespace(namespace, separator), name)


def identifier_of(namespace: list[str], name: str, kind: str = "table") -> Identifier:
    if not isinstance(namespace, list) or not namespace:
        raise ValidationError(f"a {kind} identifier needs a namespace with at least one level")
    validate_name(name, f"{kind} name")
    return (*to_namespace(tuple(namespace)), name)


__all__ = ["NAMESPACE_SEPARATOR", "identifier_of", "parse_identifier", "parse_namespace"]

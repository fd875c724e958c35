"""The Iceberg REST catalog service (``tablestore catalog serve``).

- :mod:`~tablestore.rest.app`: the FastAPI app factory and ``serve``;
- :mod:`~tablestore.rest.namespaces`, :mod:`~tablestore.rest.tables`, :mod:`~tablestore.rest.views`,
  :mod:`~tablestore.rest.functions`: the endpoint groups;
- :mod:`~tablestore.rest.errors`: tablestore errors as the spec's error responses;
- :mod:`~tablestore.rest.security` and :mod:`~tablestore.rest.settings`: tokens, roles, locations.

The client side is :class:`tablestore.catalog.rest.RestCatalog`.
"""

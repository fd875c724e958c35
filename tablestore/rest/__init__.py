"""The Iceberg REST catalog service (``tablestore catalog serve``), in rooms:

- :mod:`~tablestore.rest.app`: the FastAPI app factory and ``serve``; the config and OAuth2
  token endpoints;
- :mod:`~tablestore.rest.envelope`: the one outermost middleware (request id, authentication
  once, body limit, metrics and logs);
- :mod:`~tablestore.rest.access`: what the app serves (``Service``) and one request's access to
  one catalog (``Access``);
- :mod:`~tablestore.rest.settings` and :mod:`~tablestore.rest.errors`: the ``server:`` section,
  and tablestore errors as the spec's error responses;
- :mod:`~tablestore.rest.service_tables`: the service's own tables in each catalog's database;
- ``routes/``: the endpoints, one module per resource;
- ``auth/``: tokens, OpenID Connect issuers, grants and the authorizer;
- ``storage/``: vended credentials and remote signing;
- ``state/``: the served catalogs, their metadata cache, Idempotency-Keys, paged plans, replicas
  and counters.

The client side is :class:`tablestore.catalog.rest.RestCatalog`.
"""

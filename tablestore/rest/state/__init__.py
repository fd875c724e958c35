"""What the service keeps across requests: the served catalogs (``served_catalog``) and their
metadata cache, Idempotency-Keys, paged scan plans, the replicas of one database, and the
counters ``/metrics`` reads."""

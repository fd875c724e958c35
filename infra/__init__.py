"""The platform around tablestore: the Docker Compose stack's helpers and the same topology
as local processes (``infra.local``)."""

"""The lakehouse pipeline: a Dagster code location over tablestore (see pipelines.definitions)."""

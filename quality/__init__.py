"""Great Expectations suites over the lakehouse (``quality.suites``), their Dagster asset checks
(``quality.checks``) and ``python -m quality`` (``make quality``), which runs them alone."""

"""Great Expectations suites over the lakehouse (``quality.suites``). The pipeline runs them as
Dagster asset checks (``pipelines/defs/quality_checks.py``) and alone (``make quality``,
``pipelines/quality_run.py``); this package imports no module of the pipeline."""

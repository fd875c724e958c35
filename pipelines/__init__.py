"""The lakehouse pipeline: a Dagster code location over tablestore (see pipelines.definitions)."""

import importlib.machinery
import sys

# pyspark.sql.connect, which great_expectations imports, calls sys.exit(0) on import when
# ``__main__`` has neither ``__spec__`` nor ``__file__``: it takes the process for a doctest
# run. Dagster's run workers (multiprocessing spawn children of the code server) and
# ``python -c`` look exactly like that, so every run launched from the UI of ``make dagster``
# ended at once with "exited with code 0". A ``__main__`` spec is what ``python -m`` would have
# set; multiprocessing treats the name ``__main__`` as "nothing to re-import", as before.
_main = sys.modules.get("__main__")
if _main is not None and getattr(_main, "__spec__", None) is None and not hasattr(_main, "__file__") \
        and not hasattr(sys, "ps1"):
    _main.__spec__ = importlib.machinery.ModuleSpec("__main__", None)

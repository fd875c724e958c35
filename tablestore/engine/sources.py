"""Other libraries' DataFrames as Arrow sources, found by the package their type comes from.

The table layer accepts pyarrow and pandas data itself. For anything else it asks
:func:`dataframe_source`, which looks the value's top-level package up in a table of adapters
(``pyspark`` -> :class:`tablestore.spark.arrow_source.SparkArrowSource`) and imports the adapter
only then: a process that never holds a Spark DataFrame never imports pyspark, and the core
works without it installed. Another engine adds its own with :func:`register_source_adapter`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import cast

from tablestore.engine.protocols import ArrowSource

# top-level package of a DataFrame's type -> "module:callable" that adapts one of them.
_ADAPTERS: dict[str, str] = {"pyspark": "tablestore.spark.arrow_source:adapt"}


def register_source_adapter(package: str, target: str) -> None:
    """Adapt values whose type comes from ``package`` with the callable ``"module:name"``; the
    callable takes the value and returns an :class:`ArrowSource`, or None for a value it does
    not take (another type from the same package)."""
    _ADAPTERS[package] = target


def dataframe_source(value: object) -> ArrowSource | None:
    """``value`` as an Arrow source when an adapter takes it, else None."""
    package = type(value).__module__.partition(".")[0]
    target = _ADAPTERS.get(package)
    if target is None:
        return None
    module_name, _, attribute = target.partition(":")
    # Imported by name, at the first value of that kind: see the module's docstring.
    adapt = cast(Callable[[object], ArrowSource | None], getattr(importlib.import_module(module_name), attribute))
    return adapt(value)


__all__ = ["dataframe_source", "register_source_adapter"]

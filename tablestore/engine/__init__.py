"""Engines run file tasks: the local engine on threads, the Spark engine on executors.

Both run the same task functions; an engine only decides where they run. What an engine can
do is declared as protocols in :mod:`tablestore.engine.protocols`; the table layer imports
those, :mod:`tablestore.engine.local` (its default engine) and :mod:`tablestore.engine.sources`
(DataFrames of other libraries as Arrow sources). The whole package sits below the table layer;
the Spark engine, which reads and writes tables, is the package :mod:`tablestore.spark` above it
(docs/design.md §4).
"""

from __future__ import annotations

from tablestore.engine.local import LocalEngine
from tablestore.engine.protocols import ArrowSource, Engine, FragmentRewriter, TaskRunner


def default_engine() -> Engine:
    return LocalEngine()


__all__ = ["ArrowSource", "Engine", "FragmentRewriter", "LocalEngine", "TaskRunner", "default_engine"]

"""Engines run file tasks: the local engine on threads, the Spark engine on executors.

Both run the same task functions; an engine only decides where they run.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Protocol, TypeVar

T = TypeVar("T")
R = TypeVar("R")


class Engine(Protocol):
    def map(self, fn: Callable[[T], R], items: Iterable[T]) -> list[R]:
        """Run ``fn`` on every item and return the results in the items' order."""
        ...


def default_engine() -> Engine:
    from tablestore.engine.local import LocalEngine

    return LocalEngine()

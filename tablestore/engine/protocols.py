"""What an engine can do, as protocols: the table layer codes against these, never an engine.

An engine is anything with these methods; nothing registers or subclasses. The table layer
imports this module (and :mod:`tablestore.engine.local`, its default engine), never a module
of a particular engine such as Spark's: an engine plugs in by being handed to a table
(``table.with_engine(engine)``) or by adapting its own DataFrames (:mod:`tablestore.engine.sources`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Protocol, TypeVar, runtime_checkable

import pyarrow as pa

T = TypeVar("T")
R = TypeVar("R")


class TaskRunner(Protocol):
    """Runs file tasks: the one capability every engine has."""

    def map(self, fn: Callable[[T], R], items: Iterable[T]) -> list[R]:
        """Run ``fn`` on every item and return the results in the items' order."""
        ...

    def imap(self, fn: Callable[[T], R], items: Iterable[T], prefetch: int | None = None) -> Iterator[R]:
        """The same results as :meth:`map`, in order, as they are ready; at most ``prefetch``
        results computed ahead of the consumer (bounded memory for a streamed scan)."""
        ...


# The name the table layer has always used for what it runs its tasks on.
Engine = TaskRunner


class ArrowSource(Protocol):
    """Another library's DataFrame as a source of Arrow rows (a merge or MERGE INTO source)."""

    @property
    def arrow_schema(self) -> pa.Schema:
        """The columns and their Arrow types, without reading the rows."""
        ...

    @property
    def is_streaming(self) -> bool:
        """True for an unbounded source, which a batch operation cannot read to its end."""
        ...

    def to_arrow(self, columns: Sequence[str] | None = None) -> pa.Table:
        """The rows (only ``columns``, in that order, when given) as one Arrow table."""
        ...


@runtime_checkable
class FragmentRewriter(Protocol):
    """An engine that runs a column merge itself when the source is its own DataFrame (Spark:
    the source's rows go from the JVM to the tasks that own their fragments, never through the
    driver). ``rewrite_fragments`` returns None for a source it does not own; the table layer
    then runs the merge as plain tasks on :meth:`TaskRunner.map`."""

    def rewrite_fragments(self, source: object, fragments: list[Any], plan: Any) -> list[Any] | None: ...


__all__ = ["ArrowSource", "Engine", "FragmentRewriter", "TaskRunner"]

"""The local engine: file tasks on a thread pool in this process.

pyarrow releases the GIL while it encodes, decodes and does I/O, so threads give real
parallelism for Parquet reads and writes.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")


class LocalEngine:
    def __init__(self, max_workers: int | None = None) -> None:
        self.max_workers = max_workers or max(2, os.cpu_count() or 2)

    def map(self, fn: Callable[[T], R], items: Iterable[T]) -> list[R]:
        work = list(items)
        if len(work) <= 1:
            return [fn(item) for item in work]
        with ThreadPoolExecutor(max_workers=min(self.max_workers, len(work))) as pool:
            return list(pool.map(fn, work))

    def imap(self, fn: Callable[[T], R], items: Iterable[T], prefetch: int | None = None) -> Iterator[R]:
        """Results in order, computing at most ``prefetch`` ahead (bounded memory for streams)."""
        work = list(items)
        ahead = prefetch or self.max_workers
        with ThreadPoolExecutor(max_workers=self.max_workers) as pool:
            futures = [pool.submit(fn, item) for item in work[:ahead]]
            next_index = len(futures)
            while futures:
                result = futures.pop(0).result()
                if next_index < len(work):
                    futures.append(pool.submit(fn, work[next_index]))
                    next_index += 1
                yield result

"""Deleting the files of a write that did not commit: the one guard every writer uses.

A written file may be deleted only when no commit can reference it: the write failed before
its commit was sent, or the catalog refused the commit. When a commit's outcome is unknown
(:class:`~tablestore.errors.CommitStateUnknownError`) the files may be the table's, so they
stay; ``remove_orphan_files`` clears them if the commit never landed. The rule, and how the
commit resolves an unknown outcome, is told in :mod:`tablestore.table.update.commit_outcome`.

:func:`deleted_unless_sent` is the only place in the project that catches ``BaseException`` to
delete files (``tests/test_layers.py`` checks it): writers (Parquet writers, Spark jobs, row-level
operations, compaction) and the catalogs (a new metadata file) wrap their pre-commit work in it.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterable, Iterator

from tablestore.errors import CommitStateUnknownError
from tablestore.io.fileio import FileIO

log = logging.getLogger(__name__)


@contextlib.contextmanager
def deleted_unless_sent(delete: Callable[[], object]) -> Iterator[None]:
    """Run the part of a write before (or of) its commit: if it fails, ``delete()`` removes what
    it wrote, since no commit references it. An unknown commit outcome passes through with
    nothing deleted. Deleting is best effort: ``remove_orphan_files`` catches what is left."""
    try:
        yield
    except CommitStateUnknownError:
        raise
    except BaseException:
        try:
            delete()
        except Exception as e:  # the first error is the one to report
            log.warning("could not delete the files of a write that did not commit: %s", e)
        raise


def delete_files(io: FileIO, paths: Iterable[str]) -> None:
    """Delete files no commit references; what cannot be deleted is left to remove_orphan_files."""
    for path in paths:
        try:
            io.delete(path)
        except FileNotFoundError:
            pass
        except OSError as e:
            log.warning("could not delete uncommitted file %s: %s", path, e)


__all__ = ["delete_files", "deleted_unless_sent"]

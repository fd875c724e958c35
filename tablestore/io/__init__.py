"""File IO: a small FileIO over ``pyarrow.fs`` for local paths and ``s3://``.

The interface (``FileIO``, its files and the ``s3.*`` property names) is in
:mod:`tablestore.io.fileio`, the pyarrow implementation in :mod:`tablestore.io.arrow`; this
module holds ``load_file_io``, which chooses one. Every name is imported from the module that
defines it (``tests/test_layers.py`` checks).
"""

from __future__ import annotations

from collections.abc import Mapping

from tablestore.io.arrow import ArrowFileIO
from tablestore.io.fileio import FileIO


def load_file_io(properties: Mapping[str, str] | None = None, location: str | None = None) -> FileIO:
    """The FileIO for these properties.

    ``location`` is accepted for pyiceberg compatibility (it chooses an implementation by
    scheme there); the pyarrow implementation handles every supported scheme, so an
    unsupported one is reported when a file is first accessed, naming the location.
    """
    return ArrowFileIO(properties or {})


__all__ = ["load_file_io"]

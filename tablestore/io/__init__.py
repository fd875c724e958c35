"""File IO: a small FileIO over ``pyarrow.fs`` for local paths and ``s3://``.

The interface (``FileIO``, its files and the ``s3.*`` property names) is in
:mod:`tablestore.io.fileio`, the pyarrow implementation in :mod:`tablestore.io.arrow`; this
module puts them together and is where the rest of the project imports them from.
"""

from __future__ import annotations

from collections.abc import Mapping

from tablestore.io.arrow import ArrowFileIO
from tablestore.io.fileio import (
    S3_ACCESS_KEY_ID,
    S3_CONNECT_TIMEOUT,
    S3_ENDPOINT,
    S3_PATH_STYLE_ACCESS,
    S3_REGION,
    S3_REQUEST_TIMEOUT,
    S3_SECRET_ACCESS_KEY,
    S3_SESSION_TOKEN,
    FileInfo,
    FileIO,
    InputFile,
    OutputFile,
    is_secret_property,
    redact_properties,
    to_location_uri,
)


def load_file_io(properties: Mapping[str, str] | None = None, location: str | None = None) -> FileIO:
    """The FileIO for these properties.

    ``location`` is accepted for pyiceberg compatibility (it chooses an implementation by
    scheme there); the pyarrow implementation handles every supported scheme, so an
    unsupported one is reported when a file is first accessed, naming the location.
    """
    return ArrowFileIO(properties or {})


__all__ = [
    "S3_ACCESS_KEY_ID",
    "S3_CONNECT_TIMEOUT",
    "S3_ENDPOINT",
    "S3_PATH_STYLE_ACCESS",
    "S3_REGION",
    "S3_REQUEST_TIMEOUT",
    "S3_SECRET_ACCESS_KEY",
    "S3_SESSION_TOKEN",
    "FileIO",
    "FileInfo",
    "InputFile",
    "OutputFile",
    "is_secret_property",
    "load_file_io",
    "redact_properties",
    "to_location_uri",
]

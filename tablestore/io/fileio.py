"""File access for tables: the ``FileIO`` interface (``tablestore.io`` re-exports it with
``load_file_io``, which returns the implementation).

Every file a table owns (metadata JSON, manifest lists, manifests, data files) is read and
written through a ``FileIO``, addressed by a full location string (``/abs/path``,
``file:///abs/path``, ``s3://bucket/key``). The one implementation, on ``pyarrow.fs``, is in
:mod:`tablestore.io.arrow`.

Properties use pyiceberg's names so one property map configures both libraries:
``s3.endpoint``, ``s3.access-key-id``, ``s3.secret-access-key``, ``s3.session-token``,
``s3.region``, ``s3.path-style-access``; unset ones fall back to the environment
(``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``,
``AWS_REGION``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tablestore.names import to_location_uri  # re-exported: how FileIO users spell locations

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.fs as pafs

S3_ENDPOINT = "s3.endpoint"
S3_ACCESS_KEY_ID = "s3.access-key-id"
S3_SECRET_ACCESS_KEY = "s3.secret-access-key"
S3_SESSION_TOKEN = "s3.session-token"
S3_REGION = "s3.region"
S3_PATH_STYLE_ACCESS = "s3.path-style-access"
S3_CONNECT_TIMEOUT = "s3.connect-timeout"
S3_REQUEST_TIMEOUT = "s3.request-timeout"

# Property keys whose values must never be shown (reprs, logs, error messages).
SECRET_PROPERTY_KEYS = frozenset({S3_SECRET_ACCESS_KEY, S3_SESSION_TOKEN, "credential", "token", "password"})


def is_secret_property(key: str) -> bool:
    """Whether a property's value is a secret that must not be shown."""
    lowered = key.lower()
    return key in SECRET_PROPERTY_KEYS or any(
        word in lowered for word in ("secret", "password", "token", "credential")
    )


def redact_properties(properties: Mapping[str, str]) -> dict[str, str]:
    """A copy of a property map whose secret values are replaced by ``***``, for display."""
    return {k: ("***" if is_secret_property(k) else v) for k, v in properties.items()}


@dataclass(frozen=True)
class FileInfo:
    """A listed file: its full location (same scheme as the listed prefix), size and mtime."""

    path: str
    size: int
    mtime_ms: int | None


class InputFile(ABC):
    """A file to read. Nothing is fetched until a method is called."""

    def __init__(self, location: str) -> None:
        self.location = location

    @abstractmethod
    def read(self) -> bytes:
        """The whole file; FileNotFoundError naming the location if it does not exist."""

    @abstractmethod
    def open(self) -> pa.NativeFile:
        """A seekable random-access file (for Parquet and Avro readers)."""

    @abstractmethod
    def exists(self) -> bool: ...

    @abstractmethod
    def length(self) -> int:
        """Size in bytes; FileNotFoundError if the file does not exist."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.location!r})"


class OutputFile(ABC):
    """A file to write."""

    def __init__(self, location: str) -> None:
        self.location = location

    @abstractmethod
    def create(self, overwrite: bool = False) -> pa.NativeFile:
        """An output stream to the file.

        With ``overwrite=False`` (the default) an existing file is never replaced: FileExistsError
        is raised instead. Metadata files rely on this, so that two writers that picked the same
        name cannot clobber each other.
        """

    def write(self, data: bytes, overwrite: bool = False) -> None:
        """Write ``data`` as the whole file (no overwrite unless asked, as in :meth:`create`)."""
        with self.create(overwrite=overwrite) as stream:
            stream.write(data)

    @abstractmethod
    def exists(self) -> bool: ...

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.location!r})"


class FileIO(ABC):
    """Reads, writes, deletes and lists files by location."""

    def __init__(self, properties: Mapping[str, str] | None = None) -> None:
        self.properties: dict[str, str] = dict(properties or {})

    @abstractmethod
    def new_input(self, path: str) -> InputFile: ...

    @abstractmethod
    def new_output(self, path: str) -> OutputFile: ...

    @abstractmethod
    def delete(self, path: str) -> None:
        """Delete one file; a file that does not exist is not an error (deletes are retried)."""

    @abstractmethod
    def list_prefix(self, prefix: str) -> list[FileInfo]:
        """Every file below the directory ``prefix``, recursively; [] if there is none.

        ``prefix`` is a directory: ``s3://b/t`` lists ``s3://b/t/...`` but not ``s3://b/t2/...``.
        """

    @abstractmethod
    def filesystem_for(self, path: str) -> tuple[pafs.FileSystem, str]:
        """The pyarrow filesystem for a location and the path to give it (no scheme)."""

    def is_local(self, path: str) -> bool:
        """Whether ``path`` is on a local file system, where looking at a file is a system call
        rather than a request over the network (the catalog service's loads look without a
        worker thread then)."""
        import pyarrow.fs as pafs

        return isinstance(self.filesystem_for(path)[0], pafs.LocalFileSystem)

    def make_local_directory(self, path: str) -> None:
        """Create the directory ``path`` (and its parents) if it is on a local file system.

        Object stores have no directories, and our own writes create them as needed; this is
        for other writers that expect one to exist (DuckDB writes a staged table's first
        manifest into ``metadata/`` without creating it).
        """
        import pyarrow.fs as pafs

        fs, local = self.filesystem_for(path)
        if isinstance(fs, pafs.LocalFileSystem):
            fs.create_dir(local, recursive=True)

    def __repr__(self) -> str:
        # Only non-secret settings: properties may hold credentials.
        shown = {k: v for k, v in redact_properties(self.properties).items() if v != "***"}
        return f"{type(self).__name__}({shown})"


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
    "redact_properties",
    "to_location_uri",
]

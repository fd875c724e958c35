"""The ``FileIO`` on ``pyarrow.fs``: local disk and S3-compatible object stores.

Locations: plain paths and ``file:`` URIs go to ``LocalFileSystem``; ``s3://``, ``s3a://`` and
``s3n://`` go to ``S3FileSystem`` (the three are the same store; Spark and Hadoop write the
others). S3 filesystems are cached per configuration because creating one sets up an AWS SDK
client, which is far slower than a request.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import pyarrow as pa
import pyarrow.fs as pafs

from tablestore.errors import UnsupportedError, ValidationError
from tablestore.io.cleanup import deleted_unless_sent
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
)
from tablestore.option_values import truth

S3_SCHEMES = frozenset({"s3", "s3a", "s3n"})
DEFAULT_REGION = "us-east-1"

# pyiceberg's generic client.* names are accepted as fallbacks for the s3.* ones.
_CLIENT_ACCESS_KEY_ID = "client.access-key-id"
_CLIENT_SECRET_ACCESS_KEY = "client.secret-access-key"
_CLIENT_SESSION_TOKEN = "client.session-token"
_CLIENT_REGION = "client.region"
_S3_FORCE_VIRTUAL_ADDRESSING = "s3.force-virtual-addressing"

_LOCAL_FS = pafs.LocalFileSystem()


@dataclass(frozen=True)
class S3Config:
    """Everything an ``S3FileSystem`` is built from; the cache key. Secrets stay out of repr."""

    region: str
    endpoint_override: str | None = None
    scheme: str = "https"
    access_key: str | None = None
    secret_key: str | None = field(default=None, repr=False)
    session_token: str | None = field(default=None, repr=False)
    force_virtual_addressing: bool = False
    connect_timeout: float | None = None
    request_timeout: float | None = None

    @staticmethod
    def from_properties(properties: Mapping[str, str]) -> S3Config:
        env = os.environ

        def first(*values: str | None) -> str | None:
            return next((v for v in values if v), None)

        access_key = first(properties.get(S3_ACCESS_KEY_ID), properties.get(_CLIENT_ACCESS_KEY_ID))
        secret_key = first(properties.get(S3_SECRET_ACCESS_KEY), properties.get(_CLIENT_SECRET_ACCESS_KEY))
        session_token = first(properties.get(S3_SESSION_TOKEN), properties.get(_CLIENT_SESSION_TOKEN))
        if access_key is None and secret_key is None:
            # Credentials come as a pair, so take the environment's only when none were given.
            access_key = env.get("AWS_ACCESS_KEY_ID") or None
            secret_key = env.get("AWS_SECRET_ACCESS_KEY") or None
            session_token = session_token or env.get("AWS_SESSION_TOKEN") or None
        if (access_key is None) != (secret_key is None):
            missing = S3_SECRET_ACCESS_KEY if secret_key is None else S3_ACCESS_KEY_ID
            raise ValidationError(f"S3 credentials are incomplete: {missing} is not set")

        region = first(
            properties.get(S3_REGION), properties.get(_CLIENT_REGION),
            env.get("AWS_REGION"), env.get("AWS_DEFAULT_REGION"),
        ) or DEFAULT_REGION

        endpoint = first(
            properties.get(S3_ENDPOINT), env.get("AWS_ENDPOINT_URL_S3"), env.get("AWS_ENDPOINT_URL")
        )
        endpoint_override, scheme = _split_endpoint(endpoint) if endpoint else (None, "https")

        # Path-style unless virtual addressing is asked for: S3-compatible servers on a plain
        # host:port (MinIO, moto, Ceph) have no per-bucket DNS names. Against AWS itself (no
        # endpoint) Arrow uses virtual addressing anyway.
        force_virtual = False
        if _S3_FORCE_VIRTUAL_ADDRESSING in properties:
            force_virtual = truth(properties[_S3_FORCE_VIRTUAL_ADDRESSING], f"property {_S3_FORCE_VIRTUAL_ADDRESSING}")
        elif S3_PATH_STYLE_ACCESS in properties:
            force_virtual = not truth(properties[S3_PATH_STYLE_ACCESS], f"property {S3_PATH_STYLE_ACCESS}")

        return S3Config(
            region=region,
            endpoint_override=endpoint_override,
            scheme=scheme,
            access_key=access_key,
            secret_key=secret_key,
            session_token=session_token,
            force_virtual_addressing=force_virtual,
            connect_timeout=_as_float(properties.get(S3_CONNECT_TIMEOUT), S3_CONNECT_TIMEOUT),
            request_timeout=_as_float(properties.get(S3_REQUEST_TIMEOUT), S3_REQUEST_TIMEOUT),
        )

    def build(self) -> pafs.S3FileSystem:
        kwargs: dict[str, object] = {
            "region": self.region,
            "scheme": self.scheme,
            "force_virtual_addressing": self.force_virtual_addressing,
        }
        if self.endpoint_override:
            kwargs["endpoint_override"] = self.endpoint_override
        if self.access_key is not None:
            kwargs["access_key"] = self.access_key
            kwargs["secret_key"] = self.secret_key
            if self.session_token:
                kwargs["session_token"] = self.session_token
        if self.connect_timeout is not None:
            kwargs["connect_timeout"] = self.connect_timeout
        if self.request_timeout is not None:
            kwargs["request_timeout"] = self.request_timeout
        return pafs.S3FileSystem(**kwargs)


def _split_endpoint(endpoint: str) -> tuple[str, str]:
    """``http://host:9000`` → (``host:9000``, ``http``); a bare ``host:port`` means https."""
    if "://" not in endpoint:
        return endpoint.rstrip("/"), "https"
    parts = urlsplit(endpoint)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValidationError(
            f"{S3_ENDPOINT} must look like http://host:port or https://host, got {endpoint!r}"
        )
    return parts.netloc, parts.scheme


def _as_float(value: str | None, key: str) -> float | None:
    if value is None or value == "":
        return None
    try:
        return float(value)
    except ValueError:
        raise ValidationError(f"property {key} must be a number of seconds, got {value!r}") from None


_S3_CACHE: dict[S3Config, pafs.S3FileSystem] = {}
_S3_CACHE_LOCK = threading.Lock()


def _s3_filesystem(config: S3Config) -> pafs.S3FileSystem:
    with _S3_CACHE_LOCK:
        fs = _S3_CACHE.get(config)
        if fs is None:
            fs = config.build()
            _S3_CACHE[config] = fs
        return fs


@dataclass(frozen=True)
class _Resolved:
    fs: pafs.FileSystem
    path: str  # the path the filesystem understands
    is_local: bool


class ArrowFileIO(FileIO):
    """``FileIO`` on pyarrow filesystems."""

    def __init__(self, properties: Mapping[str, str] | None = None) -> None:
        super().__init__(properties)
        self._s3_config: S3Config | None = None

    def _s3(self) -> pafs.S3FileSystem:
        # Built on first S3 use, so local-only users never need S3 settings to be valid.
        if self._s3_config is None:
            self._s3_config = S3Config.from_properties(self.properties)
        return _s3_filesystem(self._s3_config)

    def _resolve(self, location: str) -> _Resolved:
        if not location:
            raise ValidationError("empty file location")
        scheme, sep, rest = location.partition(":")
        if not sep or len(scheme) == 1 or "/" in scheme:
            # A plain path (a one-letter "scheme" is a Windows drive letter).
            return _Resolved(_LOCAL_FS, os.path.abspath(location), True)
        scheme = scheme.lower()
        if scheme == "file":
            # file:///abs/path (URI form) and file:/abs/path (Hadoop's form) both occur.
            path = rest[2:] if rest.startswith("//") else rest
            if not path.startswith("/"):
                raise ValidationError(f"file location must be absolute: {location!r}")
            return _Resolved(_LOCAL_FS, path, True)
        if scheme in S3_SCHEMES:
            if not rest.startswith("//") or not rest[2:].split("/", 1)[0]:
                raise ValidationError(f"S3 location must look like s3://bucket/key, got {location!r}")
            return _Resolved(self._s3(), rest[2:].rstrip("/"), False)
        raise UnsupportedError(
            f"unsupported storage scheme {scheme!r} in {location!r}; "
            "use a local path, file://, s3:// or s3a://"
        )

    def filesystem_for(self, path: str) -> tuple[pafs.FileSystem, str]:
        resolved = self._resolve(path)
        return resolved.fs, resolved.path

    def is_local(self, path: str) -> bool:
        return self._resolve(path).is_local

    def new_input(self, path: str) -> ArrowInputFile:
        return ArrowInputFile(path, self._resolve(path))

    def new_output(self, path: str) -> ArrowOutputFile:
        return ArrowOutputFile(path, self._resolve(path))

    def delete(self, path: str) -> None:
        resolved = self._resolve(path)
        with contextlib.suppress(FileNotFoundError):
            resolved.fs.delete_file(resolved.path)

    def list_prefix(self, prefix: str) -> list[FileInfo]:
        resolved = self._resolve(prefix)
        base = resolved.path.rstrip("/")
        selector = pafs.FileSelector(base, recursive=True, allow_not_found=True)
        try:
            infos = resolved.fs.get_file_info(selector)
        except (NotADirectoryError, FileNotFoundError):
            return []
        # Answer in the caller's spelling (scheme, relative-vs-absolute), so results can be
        # compared with locations recorded in metadata.
        shown = prefix.rstrip("/")
        out = []
        for info in infos:
            if info.type != pafs.FileType.File:
                continue
            relative = info.path[len(base):].lstrip("/")
            mtime_ns = info.mtime_ns
            out.append(FileInfo(
                f"{shown}/{relative}",
                int(info.size or 0),
                mtime_ns // 1_000_000 if mtime_ns is not None else None,
            ))
        out.sort(key=lambda f: f.path)
        return out


class ArrowInputFile(InputFile):
    def __init__(self, location: str, resolved: _Resolved) -> None:
        super().__init__(location)
        self._resolved = resolved

    def read(self) -> bytes:
        try:
            with self._resolved.fs.open_input_stream(self._resolved.path) as stream:
                return bytes(stream.read())
        except FileNotFoundError as e:
            raise FileNotFoundError(f"file does not exist: {self.location}") from e

    def open(self) -> pa.NativeFile:
        try:
            return self._resolved.fs.open_input_file(self._resolved.path)
        except FileNotFoundError as e:
            raise FileNotFoundError(f"file does not exist: {self.location}") from e

    def exists(self) -> bool:
        if self._resolved.is_local:
            # One stat, without Arrow's FileInfo: the catalog service looks before every load it
            # answers from memory.
            return os.path.isfile(self._resolved.path)
        return self._resolved.fs.get_file_info(self._resolved.path).type == pafs.FileType.File

    def length(self) -> int:
        info = self._resolved.fs.get_file_info(self._resolved.path)
        if info.type != pafs.FileType.File:
            raise FileNotFoundError(f"file does not exist: {self.location}")
        return int(info.size or 0)


class ArrowOutputFile(OutputFile):
    def __init__(self, location: str, resolved: _Resolved) -> None:
        super().__init__(location)
        self._resolved = resolved

    def exists(self) -> bool:
        return self._resolved.fs.get_file_info(self._resolved.path).type != pafs.FileType.NotFound

    def create(self, overwrite: bool = False) -> pa.NativeFile:
        fs, path = self._resolved.fs, self._resolved.path
        if self._resolved.is_local:
            return self._create_local(path, overwrite)
        if not overwrite and self.exists():
            # Object stores have no portable create-if-absent here; the check narrows the window
            # and unique (UUID) file names close it.
            raise FileExistsError(f"file exists already, not overwriting it: {self.location}")
        return fs.open_output_stream(path)

    def write(self, data: bytes, overwrite: bool = False) -> None:
        if not self._resolved.is_local or overwrite:
            super().write(data, overwrite)
            return
        # A whole local file in one open and one write, without an Arrow stream: the catalog
        # service writes a metadata file per commit, and the stream's open, the directory
        # creation and the second open were a tenth of a commit's CPU.
        path = self._resolved.path
        fd = self._claim(path)
        with deleted_unless_sent(lambda: os.unlink(path)):
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
            finally:
                os.close(fd)

    def _claim(self, path: str) -> int:
        """A new local file, opened for writing; FileExistsError if the name is taken.

        O_EXCL makes the existence check and the creation one atomic step, so of two writers
        racing for one name exactly one gets it. The parent directories are made only when the
        file cannot be created without them (the usual case has them: one system call).
        """
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL
        try:
            try:
                return os.open(path, flags, 0o666)
            except FileNotFoundError:
                parent = os.path.dirname(path)
                if not parent:
                    raise
                os.makedirs(parent, exist_ok=True)
                return os.open(path, flags, 0o666)
        except FileExistsError:
            raise FileExistsError(f"file exists already, not overwriting it: {self.location}") from None

    def _create_local(self, path: str, overwrite: bool) -> pa.NativeFile:
        if overwrite:
            parent = os.path.dirname(path)
            if parent:
                os.makedirs(parent, exist_ok=True)
            return _LOCAL_FS.open_output_stream(path)
        # Arrow reopens the (empty) file this writer claimed.
        os.close(self._claim(path))
        with deleted_unless_sent(lambda: os.unlink(path)):  # the empty file this writer claimed
            return _LOCAL_FS.open_output_stream(path)


__all__ = ["ArrowFileIO", "ArrowInputFile", "ArrowOutputFile", "S3Config"]

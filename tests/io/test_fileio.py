"""FileIO on local disk and on S3 (MinIO): round trips, no-overwrite, listing, deletes, config."""

from __future__ import annotations

import threading
from pathlib import Path

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest

from tablestore.errors import UnsupportedError, ValidationError
from tablestore.io import load_file_io
from tablestore.io.arrow import S3Config
from tablestore.io.fileio import FileIO, redact_properties
from tests.conftest import Warehouse
from tests.services import S3Server


@pytest.fixture
def io(warehouse: Warehouse) -> FileIO:
    return load_file_io(warehouse.properties, warehouse.location)


def test_round_trip(io: FileIO, warehouse: Warehouse) -> None:
    path = f"{warehouse.location}/a/b/c.bin"
    payload = bytes(range(256)) * 100
    assert not io.new_input(path).exists()
    io.new_output(path).write(payload)
    f = io.new_input(path)
    assert f.exists()
    assert f.length() == len(payload)
    assert f.read() == payload
    with f.open() as stream:
        stream.seek(256)
        assert stream.read(4) == bytes([0, 1, 2, 3])
        assert stream.size() == len(payload)


def test_create_does_not_overwrite(io: FileIO, warehouse: Warehouse) -> None:
    path = f"{warehouse.location}/metadata/00001-x.metadata.json"
    io.new_output(path).write(b"first")
    with pytest.raises(FileExistsError, match=r"00001-x\.metadata\.json"):
        io.new_output(path).create()
    with pytest.raises(FileExistsError):
        io.new_output(path).write(b"second")
    assert io.new_input(path).read() == b"first"
    with io.new_output(path).create(overwrite=True) as out:
        out.write(b"third")
    assert io.new_input(path).read() == b"third"


def test_parquet_through_streams(io: FileIO, warehouse: Warehouse) -> None:
    table = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "s": ["a", "b", None]})
    path = f"{warehouse.location}/data/part-0.parquet"
    with io.new_output(path).create() as out:
        pq.write_table(table, out)
    with io.new_input(path).open() as f:
        assert pq.read_table(f).equals(table)


def test_list_prefix_is_a_directory_listing(io: FileIO, warehouse: Warehouse) -> None:
    base = warehouse.location
    for name, size in [("t/x.txt", 1), ("t/sub/y.txt", 22), ("t2/z.txt", 333)]:
        io.new_output(f"{base}/{name}").write(b"." * size)
    listed = io.list_prefix(f"{base}/t")
    assert [(f.path, f.size) for f in listed] == [(f"{base}/t/sub/y.txt", 22), (f"{base}/t/x.txt", 1)]
    assert all(f.mtime_ms is not None and f.mtime_ms > 1_600_000_000_000 for f in listed)
    # A trailing slash means the same directory; t2 is not inside t.
    assert [f.path for f in io.list_prefix(f"{base}/t/")] == [f"{base}/t/sub/y.txt", f"{base}/t/x.txt"]
    assert io.list_prefix(f"{base}/missing") == []


def test_delete(io: FileIO, warehouse: Warehouse) -> None:
    path = f"{warehouse.location}/d/f.txt"
    io.new_output(path).write(b"x")
    io.delete(path)
    assert not io.new_input(path).exists()
    io.delete(path)  # deleting a missing file is not an error
    assert io.list_prefix(f"{warehouse.location}/d") == []


def test_missing_file_errors_name_the_location(io: FileIO, warehouse: Warehouse) -> None:
    path = f"{warehouse.location}/nope.json"
    with pytest.raises(FileNotFoundError, match=r"nope\.json"):
        io.new_input(path).read()
    with pytest.raises(FileNotFoundError, match=r"nope\.json"):
        io.new_input(path).length()


def test_filesystem_for(io: FileIO, warehouse: Warehouse) -> None:
    fs, path = io.filesystem_for(f"{warehouse.location}/k/v.txt")
    if warehouse.kind == "s3":
        assert isinstance(fs, pafs.S3FileSystem)
        assert path == warehouse.location.removeprefix("s3://") + "/k/v.txt"
    else:
        assert isinstance(fs, pafs.LocalFileSystem)
        assert path == f"{warehouse.location}/k/v.txt"


# -- local specifics -------------------------------------------------------------------------------


def test_local_uri_forms(tmp_path: Path) -> None:
    io = load_file_io({})
    io.new_output(f"file://{tmp_path}/u/a.txt").write(b"uri")
    assert (tmp_path / "u" / "a.txt").read_bytes() == b"uri"
    assert io.new_input(f"file:{tmp_path}/u/a.txt").read() == b"uri"  # Hadoop's file:/path form
    assert io.new_input(str(tmp_path / "u" / "a.txt")).read() == b"uri"
    assert [f.path for f in io.list_prefix(f"file://{tmp_path}/u")] == [f"file://{tmp_path}/u/a.txt"]
    assert io.is_local(f"file://{tmp_path}/u/a.txt") and io.is_local(f"file:{tmp_path}/u") and io.is_local("rel/a")


def test_local_exclusive_create_race(tmp_path: Path) -> None:
    """Of many writers racing for one name, exactly one gets it."""
    io = load_file_io({})
    path = str(tmp_path / "race" / "00001.metadata.json")
    winners: list[int] = []
    losers: list[int] = []
    barrier = threading.Barrier(8)

    def attempt(i: int) -> None:
        barrier.wait()
        try:
            io.new_output(path).write(str(i).encode())
            winners.append(i)
        except FileExistsError:
            losers.append(i)

    threads = [threading.Thread(target=attempt, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(winners) == 1 and len(losers) == 7
    assert io.new_input(path).read() == str(winners[0]).encode()


def test_unsupported_scheme() -> None:
    io = load_file_io({})
    with pytest.raises(UnsupportedError, match="gs://b/x"):
        io.new_input("gs://b/x").read()


# -- S3 configuration (no server needed) -------------------------------------------------------------


def test_s3_config_from_properties(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION", "AWS_DEFAULT_REGION",
                "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    config = S3Config.from_properties({
        "s3.endpoint": "http://127.0.0.1:9000", "s3.access-key-id": "AKID",
        "s3.secret-access-key": "SUPERSECRET",
    })
    assert (config.endpoint_override, config.scheme, config.region) == ("127.0.0.1:9000", "http", "us-east-1")
    assert (config.access_key, config.secret_key) == ("AKID", "SUPERSECRET")
    assert config.force_virtual_addressing is False
    assert "SUPERSECRET" not in repr(config)
    assert S3Config.from_properties({"s3.endpoint": "minio:9000"}).scheme == "https"
    assert S3Config.from_properties({"s3.path-style-access": "false"}).force_virtual_addressing is True


def test_s3_config_environment_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "ENVKEY")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "ENVSECRET")
    monkeypatch.setenv("AWS_REGION", "eu-central-1")
    monkeypatch.setenv("AWS_ENDPOINT_URL", "https://s3.example.com")
    config = S3Config.from_properties({})
    assert (config.access_key, config.secret_key, config.region) == ("ENVKEY", "ENVSECRET", "eu-central-1")
    assert (config.endpoint_override, config.scheme) == ("s3.example.com", "https")
    # Properties win over the environment; a pair given in properties is never mixed with env.
    config = S3Config.from_properties(
        {"s3.access-key-id": "P", "s3.secret-access-key": "Q", "s3.region": "r"}
    )
    assert (config.access_key, config.secret_key, config.region) == ("P", "Q", "r")


def test_s3_config_errors_hide_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AWS_ACCESS_KEY_ID", raising=False)
    with pytest.raises(ValidationError, match=r"s3\.access-key-id") as info:
        S3Config.from_properties({"s3.secret-access-key": "SUPERSECRET"})
    assert "SUPERSECRET" not in str(info.value)
    with pytest.raises(ValidationError, match=r"s3\.endpoint"):
        S3Config.from_properties({"s3.endpoint": "ftp://host"})


def test_reprs_hide_secrets() -> None:
    props = {"s3.access-key-id": "AKID", "s3.secret-access-key": "SUPERSECRET", "s3.session-token": "TOK"}
    io = load_file_io(props)
    assert "SUPERSECRET" not in repr(io) and "TOK" not in repr(io)
    assert redact_properties(props)["s3.secret-access-key"] == "***"
    assert redact_properties(props)["s3.access-key-id"] == "AKID"


@pytest.mark.s3
def test_s3_filesystems_are_cached(s3_server: S3Server) -> None:
    bucket = s3_server.create_bucket()
    a = load_file_io(s3_server.properties).filesystem_for(f"s3://{bucket}/a")[0]
    b = load_file_io(dict(s3_server.properties)).filesystem_for(f"s3a://{bucket}/b")[0]
    assert a is b
    other = dict(s3_server.properties, **{"s3.region": "eu-west-1"})
    assert load_file_io(other).filesystem_for(f"s3://{bucket}/a")[0] is not a


@pytest.mark.s3
def test_s3a_scheme_reaches_same_objects(s3_server: S3Server) -> None:
    bucket = s3_server.create_bucket()
    io = load_file_io(s3_server.properties)
    io.new_output(f"s3a://{bucket}/k/obj").write(b"v")
    assert io.new_input(f"s3://{bucket}/k/obj").read() == b"v"
    assert not io.is_local(f"s3://{bucket}/k/obj")
    body = s3_server.client().get_object(Bucket=bucket, Key="k/obj")["Body"].read()
    assert body == b"v"

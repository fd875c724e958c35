"""The YAML configuration: where it is found, what it means, and how it fails."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tablestore.catalog.sql_catalog import SqlCatalog
from tablestore.config import (
    CONFIG_ENV,
    LakehouseConfig,
    RestCatalogConfig,
    SparkConfig,
    SqlCatalogConfig,
    load_config,
    parse_config,
)
from tablestore.errors import ConfigError, NoSuchCatalogError, ValidationError

FULL = """
default-catalog: lakehouse
catalogs:
  - name: lakehouse
    type: rest
    uri: http://localhost:8181
    default-database: shop
  - name: local
    type: sql
    uri: sqlite:///warehouse/catalog.db
    warehouse: ./warehouse
    default-database: analytics
    s3: {endpoint: "http://localhost:9000", access-key-id: minio, secret-access-key: "s3cr3t-value",
         path-style-access: true, region: eu-west-1}
spark:
  master: spark://spark-master:7077
  conf: {spark.sql.shuffle.partitions: 4, spark.executor.memory: 2g}
"""


def _write(directory: Path, text: str, name: str = "tablestore.yaml") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(text)
    return path


def _only(name: str, directory: Path) -> str:
    return f"catalogs:\n  - name: {name}\n    type: sql\n    warehouse: {directory / name}\n"


@pytest.fixture(autouse=True)
def _no_env_config(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(CONFIG_ENV, raising=False)


# -- what a file means ---------------------------------------------------------------------------------


def test_full_file_is_parsed_into_the_model(tmp_path: Path) -> None:
    path = _write(tmp_path / "conf", FULL)
    config = load_config(path)
    assert config.source == str(path)
    assert config.default_catalog == "lakehouse"
    assert list(config.catalogs) == ["lakehouse", "local"]
    assert config.catalogs["lakehouse"] == RestCatalogConfig(
        name="lakehouse", properties={"uri": "http://localhost:8181"}, default_database="shop"
    )
    # Relative paths are relative to the file's directory; s3 keys become s3.* properties and
    # booleans are written the way Iceberg clients parse them.
    warehouse = tmp_path / "conf" / "warehouse"
    assert config.catalogs["local"] == SqlCatalogConfig(name="local", properties={
        "uri": f"sqlite:///{warehouse}/catalog.db",
        "warehouse": str(warehouse),
        "s3.endpoint": "http://localhost:9000",
        "s3.access-key-id": "minio",
        "s3.secret-access-key": "s3cr3t-value",
        "s3.path-style-access": "true",
        "s3.region": "eu-west-1",
    }, default_database="analytics")
    assert config.spark == SparkConfig(
        master="spark://spark-master:7077", conf={"spark.sql.shuffle.partitions": "4", "spark.executor.memory": "2g"}
    )
    assert config.catalog() is config.catalogs["lakehouse"]
    with pytest.raises(NoSuchCatalogError, match="'lakehouse', 'local'"):
        config.catalog("nope")


def test_defaults_first_catalog_default_database_and_spark(tmp_path: Path) -> None:
    config = parse_config(
        "catalogs:\n  - {name: b, type: SQL, uri: 'sqlite:////abs/b.db'}\n  - {name: a, type: rest, uri: http://x}\n"
    )
    assert config.default_catalog == "b"
    assert config.catalogs["b"].type == "sql"
    assert config.catalogs["b"].properties == {"uri": "sqlite:////abs/b.db"}  # absolute: unchanged
    assert config.catalogs["b"].default_database == "default"
    assert config.spark == SparkConfig(master="local[2]", conf={})
    assert config.source == "<string>"


def test_other_catalog_keys_are_passed_through_as_properties() -> None:
    config = parse_config(
        "catalogs:\n  - name: r\n    type: rest\n    uri: http://h:8181\n    credential: id:secret\n"
        "    prefix: main\n    s3.connect-timeout: 30\n    warehouse: relative/name\n"
    )
    # A rest catalog's warehouse is a name the server interprets, so it is not made a path.
    assert config.catalogs["r"].properties == {
        "uri": "http://h:8181", "credential": "id:secret", "prefix": "main", "s3.connect-timeout": "30",
        "warehouse": "relative/name",
    }


def test_sqlite_uris_special_forms_are_left_alone(tmp_path: Path) -> None:
    text = (
        "catalogs:\n  - {name: m, type: sql, uri: 'sqlite:///:memory:'}\n"
        "  - {name: q, type: sql, uri: 'sqlite:///rel/c.db?timeout=5', warehouse: 's3://bucket/wh'}\n"
        "  - {name: p, type: sql, uri: 'postgresql+psycopg2://u:p@h/db', warehouse: wh}\n"
    )
    config = parse_config(text, base_dir=tmp_path)
    assert config.catalogs["m"].properties["uri"] == "sqlite:///:memory:"
    assert config.catalogs["q"].properties == {
        "uri": f"sqlite:///{tmp_path}/rel/c.db?timeout=5", "warehouse": "s3://bucket/wh"
    }
    assert config.catalogs["p"].properties == {
        "uri": "postgresql+psycopg2://u:p@h/db", "warehouse": str(tmp_path / "wh")
    }


def test_catalog_config_loads_a_working_catalog(tmp_path: Path) -> None:
    path = _write(tmp_path / "conf", "catalogs:\n  - {name: local, type: sql, uri: 'sqlite:///db/c.db', "
                  "warehouse: wh}\n")
    catalog = load_config(path).catalogs["local"].load()
    try:
        assert isinstance(catalog, SqlCatalog)
        catalog.create_namespace("db")
        # A relative warehouse resolves against the config file's folder, recorded as a full URI.
        assert catalog.warehouse == f"file://{tmp_path / 'conf' / 'wh'}"
        assert (tmp_path / "conf" / "db" / "c.db").is_file()
    finally:
        catalog.close()


# -- where the file is found ---------------------------------------------------------------------------


def test_resolution_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    explicit = _write(tmp_path / "explicit", _only("explicit", tmp_path))
    from_env = _write(tmp_path / "env", _only("from_env", tmp_path), "custom.yaml")
    workdir = tmp_path / "work"
    _write(workdir, _only("from_cwd", tmp_path))
    empty = tmp_path / "empty"
    empty.mkdir()

    monkeypatch.chdir(workdir)
    monkeypatch.setenv(CONFIG_ENV, str(from_env))
    assert load_config(str(explicit)).default_catalog == "explicit"
    assert load_config().default_catalog == "from_env"
    assert load_config().source == str(from_env)

    monkeypatch.delenv(CONFIG_ENV)
    cwd_config = load_config()
    assert cwd_config.default_catalog == "from_cwd"
    assert cwd_config.source == str(workdir / "tablestore.yaml")

    monkeypatch.chdir(empty)
    default = load_config()
    assert default.source == "<embedded default>"
    assert default.default_catalog == "local"
    assert default.catalogs == {"local": SqlCatalogConfig(name="local", properties={
        "uri": f"sqlite:///{empty}/warehouse/catalog.db", "warehouse": str(empty / "warehouse"),
    }, default_database="default")}


def test_relative_file_in_the_working_directory_resolves_against_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _write(tmp_path, "catalogs:\n  - {name: c, type: sql, warehouse: ./wh}\n")
    monkeypatch.chdir(tmp_path)
    config = load_config("tablestore.yaml")
    assert config.catalogs["c"].properties["warehouse"] == str(tmp_path / "wh")
    monkeypatch.chdir("/")
    # Resolved once at load: using it elsewhere does not move the warehouse.
    assert config.catalogs["c"].properties["warehouse"] == str(tmp_path / "wh")


def test_missing_files_are_errors_not_defaults(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match=f"the config file {tmp_path / 'nope.yaml'} does not exist"):
        load_config(tmp_path / "nope.yaml")
    monkeypatch.setenv(CONFIG_ENV, str(tmp_path / "gone.yaml"))
    with pytest.raises(ConfigError, match=r"named by \$TABLESTORE_CONFIG .*gone.yaml does not exist"):
        load_config()


# -- environment variables -----------------------------------------------------------------------------


def test_environment_variables_are_substituted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TS_TEST_SECRET", "from-env-secret")
    monkeypatch.setenv("TS_TEST_HOST", "minio")
    monkeypatch.delenv("TS_TEST_UNSET", raising=False)
    config = parse_config(
        "catalogs:\n  - name: c\n    type: rest\n    uri: http://${TS_TEST_HOST}:9000/x\n"
        "    s3: {secret-access-key: '${TS_TEST_SECRET}', region: '${TS_TEST_UNSET:-us-east-1}'}\n"
        "    note: 'literal $${NOT_A_VAR}'\n"
    )
    assert config.catalogs["c"].properties == {
        "uri": "http://minio:9000/x",
        "s3.secret-access-key": "from-env-secret",
        "s3.region": "us-east-1",
        "note": "literal ${NOT_A_VAR}",
    }


def test_unknown_environment_variable_names_variable_file_and_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TS_TEST_MISSING", raising=False)
    path = _write(
        tmp_path, "catalogs:\n  - name: c\n    type: sql\n    s3:\n      secret-access-key: ${TS_TEST_MISSING}\n"
    )
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert str(info.value) == (
        f"{path}: catalogs[0].s3.secret-access-key refers to the environment variable TS_TEST_MISSING, "
        "which is not set; set it or write ${TS_TEST_MISSING:-default}"
    )


# -- errors --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("catalog: []\n", "unknown top-level key 'catalog' (did you mean 'catalogs'?)"),
        ("catalogs:\n  - {type: sql}\n", "catalogs[0] has no 'name'"),
        ("catalogs:\n  - {name: a}\n", "catalogs[0] (catalog 'a') has no 'type'; use one of sql, rest"),
        ("catalogs:\n  - {name: a, type: hive}\n", "unknown type 'hive'; use one of sql, rest"),
        ("catalogs:\n  - {name: a, type: sql}\n  - {name: a, type: rest}\n",
         "catalogs[1]: the catalog name 'a' is defined twice"),
        ("default-catalog: b\ncatalogs:\n  - {name: a, type: sql}\n",
         "default-catalog 'b' is not one of the catalogs defined: 'a'"),
        ("catalogs:\n  - {name: a.b, type: sql}\n", "catalog names cannot contain '.'"),
        ("catalogs:\n  - {name: a, type: sql, s3: [x]}\n", "catalogs[0].s3 must be a mapping"),
        ("catalogs:\n  - {name: a, type: sql, extra: {x: 1}}\n", "catalogs[0].extra must be a single value"),
        ("catalogs: {a: {type: sql}}\n", "'catalogs' must be a list"),
        ("spark: {mastr: x}\ncatalogs:\n  - {name: a, type: sql}\n", "unknown key 'spark.mastr'"),
        ("catalogs: []\n", "defines no catalogs"),
        ("", "the file is empty"),
        ("catalogs: [\n", "the file is not valid YAML at line 2"),
        ("- a\n", "the file must be a mapping"),
    ],
)
def test_errors_name_the_file_and_the_key(tmp_path: Path, text: str, message: str) -> None:
    path = _write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert str(info.value).startswith(f"{path}: ")
    assert message in str(info.value)
    assert isinstance(info.value, ValidationError)


# -- secrets and JSON ----------------------------------------------------------------------------------


def test_secrets_never_show_in_repr_or_str() -> None:
    text = (
        FULL.replace("uri: http://localhost:8181", "uri: http://localhost:8181\n    token: tok-SECRET-1")
        .replace("spark.executor.memory: 2g", "spark.hadoop.fs.s3a.secret.key: s3a-SECRET-2")
        .replace("\nspark:\n", "\n  - {name: pg, type: sql, uri: 'postgresql+psycopg2://ana:pg-SECRET-3@db/cat'}\nspark:\n")
    )
    config = parse_config(text)
    shown = repr(config) + str(config) + repr(config.catalogs["local"]) + str(config.spark)
    for secret in ("s3cr3t-value", "tok-SECRET-1", "s3a-SECRET-2", "pg-SECRET-3"):
        assert secret not in shown
    assert "'s3.secret-access-key': '***'" in shown
    assert "postgresql+psycopg2://ana:***@db/cat" in shown
    # Not secrets: shown, so a user can tell which catalog is which.
    assert "'s3.access-key-id': 'minio'" in shown and "http://localhost:9000" in shown


def test_json_round_trip_keeps_everything(tmp_path: Path) -> None:
    config = load_config(_write(tmp_path, FULL))
    text = config.model_dump_json()
    assert isinstance(text, str)
    assert json.loads(text)["catalogs"][1]["properties"]["s3.secret-access-key"] == "s3cr3t-value"
    assert LakehouseConfig.from_json(text) == config
    assert LakehouseConfig.from_json(config.model_dump()) == config
    assert LakehouseConfig.from_json(json.dumps(text)) == config  # encoded twice on its way
    with pytest.raises(ConfigError, match="not valid JSON"):
        LakehouseConfig.from_json("{")
    with pytest.raises(ConfigError, match="default-catalog 'x' is not defined"):
        LakehouseConfig.from_json({**config.model_dump(), "default-catalog": "x"})

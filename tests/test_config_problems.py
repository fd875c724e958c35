"""The one formatter of configuration errors (tablestore.config_problems), through the models that
use it: the lakehouse configuration, the service's server section and its storage credentials."""

from __future__ import annotations

import pytest

from tablestore.config import LakehouseConfig, RestCatalogConfig, SqlCatalogConfig, parse_config
from tablestore.config_problems import key_path, keys_at
from tablestore.errors import ConfigError
from tablestore.rest.settings import server_settings

SERVED = "catalogs:\n  - {name: lake, type: sql, uri: 'sqlite:////tmp/x.db'}\nserver:\n  auth: none\n"


def _problem(text: str) -> str:
    with pytest.raises(ConfigError) as info:
        parse_config(text)
    return str(info.value)


def test_a_catalog_kind_never_shows_in_a_key() -> None:
    # pydantic puts the discriminated union's tag ("rest") in an error's location; the file has none.
    assert _problem("catalogs:\n  - {name: r, type: rest, s3: {endpoint: [1]}}\n") == (
        "<string>: catalogs[0].s3.endpoint must be a single value, got [1]")
    assert _problem("catalogs:\n  - {name: r, type: REST, token: {x: 1}}\n") == (
        "<string>: catalogs[0].token must be a single value, got {'x': 1}")


def test_a_file_key_is_quoted_with_a_hint_and_a_section_key_is_named_by_its_path() -> None:
    assert _problem("catalogs:\n  - {name: a, type: sql}\nspark: {mastre: x}\n") == (
        "<string>: unknown key 'spark.mastre' (did you mean 'master'?); expected one of master, conf")
    with pytest.raises(ConfigError) as info:
        server_settings(parse_config(SERVED + "  prot: 1\n"))
    assert str(info.value).startswith("<string>: unknown key server.prot; expected one of catalogs, host, port, ")


def test_the_loader_names_the_file_and_the_file_cannot() -> None:
    # `source` is a field of the model (the JSON carries it) but not a key of the file.
    assert keys_at(LakehouseConfig, ()) == ["default-catalog", "catalogs", "spark", "server"]
    assert _problem("catalogs:\n  - {name: a, type: sql}\nsource: elsewhere\n") == (
        "<string>: unknown top-level key 'source'; expected one of default-catalog, catalogs, spark, server")
    assert key_path(("catalogs", 1, "s3", "endpoint")) == "catalogs[1].s3.endpoint"


def test_a_section_takes_the_keys_of_the_file_only() -> None:
    # The field names (duration_s) are for code; a file spells the key (duration-seconds).
    text = SERVED + "  storage-credentials: {duration_s: 1000}\n"
    with pytest.raises(ConfigError, match=r"unknown key server\.storage-credentials\.duration_s; expected one of "
                                          r"vending, duration-seconds, role-arn, sts-endpoint"):
        server_settings(parse_config(text))
    settings = server_settings(parse_config(SERVED + "  storage-credentials: {duration-seconds: 1000}\n"))
    assert settings.vending.duration_s == 1000


def test_the_executors_json_keeps_each_catalog_kind() -> None:
    config = parse_config("catalogs:\n  - {name: r, type: rest, uri: 'http://h'}\n"
                          "  - {name: s, type: sql, uri: 'sqlite:////abs/c.db', s3: {region: eu}}\n")
    again = LakehouseConfig.from_json(config.model_dump_json())
    assert again == config
    assert type(again.catalogs["r"]) is RestCatalogConfig and type(again.catalogs["s"]) is SqlCatalogConfig
    assert again.catalogs["s"].properties == {"uri": "sqlite:////abs/c.db", "s3.region": "eu"}
    # Code names the fields; the same model reads them.
    assert SqlCatalogConfig(name="s", properties={"uri": "sqlite:////abs/c.db", "s3.region": "eu"}) == config.catalogs["s"]


def test_a_flag_that_is_not_true_or_false_is_refused_by_its_key() -> None:
    # One reading of true/false (tablestore.option_values): before, server.access-log read "maybe" as false.
    with pytest.raises(ConfigError) as info:
        server_settings(parse_config(SERVED + "  access-log: maybe\n"))
    assert str(info.value) == "<string>: server.access-log must be true or false, got 'maybe'"
    assert server_settings(parse_config(SERVED + "  access-log: 'NO'\n")).access_log is False


def test_a_check_across_fields_and_a_missing_key_name_where_they_are() -> None:
    with pytest.raises(ConfigError) as info:
        server_settings(parse_config(SERVED + "  tokens: [{token: aaaaaaaaaaaaaaaaaaaa, roles: {other: read}}]\n"))
    assert str(info.value) == ("<string>: server.tokens[0].roles name catalog 'other', which is not served "
                               "(['lake'])")
    with pytest.raises(ConfigError) as info:
        server_settings(parse_config(SERVED + "  tokens: {role: write}\n"))
    assert str(info.value) == "<string>: server.tokens[0] needs token (for example token: ${MY_TOKEN})"
    settings = server_settings(parse_config(SERVED + "  tokens: {token: aaaaaaaaaaaaaaaaaaaa, role: WRITE}\n"))
    assert [(t.name, t.roles) for t in settings.tokens] == [("token0", {"*": "write"})]

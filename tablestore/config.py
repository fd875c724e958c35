"""The lakehouse configuration: named catalogs and Spark settings, from one YAML file.

The file is found at the path given (``--config PATH``), else at ``$TABLESTORE_CONFIG``, else at
``./tablestore.yaml``, else the embedded default applies: one SQL catalog named ``local`` on
SQLite, with its warehouse in ``./warehouse``. ::

    default-catalog: lakehouse
    catalogs:
      - name: lakehouse
        type: rest                       # rest | sql
        uri: http://localhost:8181
        default-database: shop
      - name: local
        type: sql
        uri: sqlite:///warehouse/catalog.db
        warehouse: ./warehouse           # a local path or s3://bucket/prefix
        s3: {endpoint: http://localhost:9000, access-key-id: minio,
             secret-access-key: ${MINIO_PASSWORD}, path-style-access: true}
    spark:
      master: local[2]
      conf: {spark.sql.shuffle.partitions: "4"}
    server:                              # for `tablestore catalog serve` (tablestore.rest.settings)
      tokens: [{token: ${CATALOG_TOKEN}, role: write}]

- ``${VAR}`` in any value is replaced by the environment variable (``${VAR:-fallback}`` gives a
  fallback; ``$${`` is a literal ``${``). A variable that is not set is an error, so a missing
  secret is reported at startup rather than as a failed S3 request later.
- The ``s3`` keys become the catalog properties ``s3.<key>``; any other key of a catalog entry is
  passed to the catalog as a property as it is (``credential``, ``prefix``, ...).
- Relative SQLite paths in ``uri`` and relative ``warehouse`` paths of ``sql`` catalogs are
  resolved against the directory of the config file (of the working directory for the embedded
  default and for text without a file), so a config means the same wherever it is used from.

Secrets (values of keys containing ``secret``, ``password``, ``token`` or ``credential``, and
passwords in URIs) never appear in reprs. ``model_dump_json()`` keeps them: its JSON text is how
executors get the configuration (``LakehouseConfig.from_json`` reads it back).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

import pydantic
from pydantic import BeforeValidator, Field, ValidationInfo, model_validator
from pydantic_core import PydanticCustomError, PydanticKnownError

from tablestore.catalog import load_catalog
from tablestore.catalog.base import Catalog
from tablestore.config_files import ConfigFile, FileModel, read_file, yaml_mapping
from tablestore.config_problems import problem_at, validated
from tablestore.errors import ConfigError, InvalidNameError, NoSuchCatalogError
from tablestore.io.fileio import redact_properties
from tablestore.names import validate_name

CONFIG_ENV = "TABLESTORE_CONFIG"
DEFAULT_CONFIG_FILE = "tablestore.yaml"
EMBEDDED_SOURCE = "<embedded default>"
STRING_SOURCE = "<string>"
DEFAULT_CATALOG_NAME = "local"
DEFAULT_DATABASE = "default"
DEFAULT_SPARK_MASTER = "local[2]"
CATALOG_TYPES = ("sql", "rest")

_SQLITE_URI = re.compile(r"(sqlite(?:\+\w+)?:///)([^?]*)(\?.*)?", re.DOTALL)
_URI_PASSWORD = re.compile(r"(://[^/:@]*:)[^/@]*@")


def redact_uri(uri: str) -> str:
    """``uri`` with any password (``scheme://user:password@host``) replaced by ``***``."""
    return _URI_PASSWORD.sub(r"\1***@", uri)


def _redacted(properties: Mapping[str, str]) -> dict[str, str]:
    return {k: redact_uri(v) for k, v in redact_properties(properties).items()}


def _sqlite_uri(uri: str, loading: ConfigFile) -> str:
    match = _SQLITE_URI.fullmatch(uri)
    if match is None or match.group(2) in ("", ":memory:") or match.group(2).startswith(("file:", "/")):
        return uri
    return f"{match.group(1)}{loading.path(match.group(2))}{match.group(3) or ''}"


def _single_value(value: Any) -> str:
    if isinstance(value, bool):
        # Properties are strings; Iceberg clients parse "true"/"false" (not Python's "True").
        return "true" if value else "false"
    if isinstance(value, str | int | float):
        return str(value)
    raise PydanticCustomError("config_type", "a single value")


def _values(value: Any) -> Any:
    # An empty key (`s3:`) is an empty mapping, and a key without a value is left out.
    return {k: v for k, v in (value or {}).items() if v is not None} if isinstance(value, dict | None) else value


_Value = Annotated[str, BeforeValidator(_single_value)]
# A mapping of single values, as strings (a catalog's properties, Spark's settings, a table's config).
Properties = Annotated[dict[str, _Value], BeforeValidator(_values)]
_PROPERTIES = pydantic.TypeAdapter(dict[str, _Value])


class _Catalog(FileModel):
    """One named catalog: its type, its properties (what the implementation takes: ``uri``,
    ``warehouse``, ``s3.endpoint``, ...) and its default database. In a file, every other key of
    an entry is a property, as written, and ``s3`` gives ``s3.<key>`` properties; the JSON (and
    code) gives them as ``properties``."""

    name: str
    type: str
    default_database: str = DEFAULT_DATABASE
    properties: dict[str, str] = Field(default_factory=dict)
    # Where the error is when `s3` is not a mapping; a mapping becomes properties.
    s3: Properties = Field(default_factory=dict, exclude=True, description="a mapping (endpoint, access-key-id, ...)")

    @model_validator(mode="before")
    @classmethod
    def _gather_properties(cls, entry: Any, info: ValidationInfo) -> Any:
        if not isinstance(entry, dict):
            return entry
        s3, given = entry.get("s3"), entry.get("properties")
        own = {"name", "type", "default-database", "default_database", *([] if isinstance(s3, dict | None) else ["s3"])}
        written = {k: v for k, v in entry.items() if k not in own and k != "s3" and not (
            k == "properties" and isinstance(given, dict))}
        written.update({**(given if isinstance(given, dict) else {}),
                        **({f"s3.{k}": v for k, v in s3.items()} if isinstance(s3, dict) else {})})
        # Validated here, so that an error names the key as written (catalogs[0].s3.endpoint).
        properties = _PROPERTIES.validate_python({k: v for k, v in written.items() if v is not None})
        loading = ConfigFile.of(info)
        return {**{k: v for k, v in entry.items() if k in own},
                "properties": properties if loading is None else cls.resolved(properties, loading)}

    @classmethod
    def resolved(cls, properties: dict[str, str], loading: ConfigFile) -> dict[str, str]:
        """``properties`` of a catalog read from a file, with its relative paths resolved."""
        return properties

    def load(self) -> Catalog:
        """A new catalog object for this configuration (the CatalogManager caches them)."""
        return load_catalog(self.name, **{**self.properties, "type": self.type})

    def __repr__(self) -> str:
        return (f"CatalogConfig(name={self.name!r}, type={self.type!r}, "
                f"properties={_redacted(self.properties)!r}, default_database={self.default_database!r})")


class SqlCatalogConfig(_Catalog):
    """A catalog on SQLAlchemy (SQLite or PostgreSQL). In a file, a relative SQLite path in
    ``uri`` and a relative ``warehouse`` are relative to the file's directory."""

    type: Literal["sql"] = "sql"

    @classmethod
    def resolved(cls, properties: dict[str, str], loading: ConfigFile) -> dict[str, str]:
        paths = {"uri": lambda uri: _sqlite_uri(uri, loading), "warehouse": loading.path}
        return {k: paths[k](v) if k in paths else v for k, v in properties.items()}


class RestCatalogConfig(_Catalog):
    """A client of an Iceberg REST catalog; its ``warehouse`` is a name the server interprets."""

    type: Literal["rest"] = "rest"


def _catalog_entry(entry: Any) -> Any:
    """What needs the whole entry, in the order a reader fixes it: the name, the type, the database."""
    if not isinstance(entry, dict):
        if isinstance(entry, _Catalog):
            return entry
        raise PydanticCustomError("config_type", "a mapping with name, type and properties")
    name, kind, database = entry.get("name"), entry.get("type"), entry.get("default-database", DEFAULT_DATABASE)
    if not isinstance(name, str) or not name.strip():
        raise PydanticCustomError("config_must", "has no 'name'; every catalog needs one")
    try:
        # A dot would make `cat.db.table` ambiguous.
        problem = ": catalog names cannot contain '.'" if "." in validate_name(name, "catalog name") else ""
    except InvalidNameError as e:
        problem = f": {e}"
    kind = kind.strip().lower() if isinstance(kind, str) else ""
    types = ", ".join(CATALOG_TYPES)
    if not problem and not kind:
        problem = f" has no 'type'; use one of {types}"
    elif not problem and kind not in CATALOG_TYPES:
        problem = f": unknown type {kind!r}; use one of {types}"
    elif not problem and (not isinstance(database, str) or not database.strip()):
        problem = f": 'default-database' must be a database name, got {database!r}"
    if problem:
        raise PydanticCustomError("config_must", f"(catalog {name!r}){problem}")
    return {**entry, "type": kind, "default-database": database.strip()}


# (The discriminator's Field comes first: it applies to the union, the validator around it.)
CatalogConfig = Annotated[SqlCatalogConfig | RestCatalogConfig, Field(discriminator="type"),
                          BeforeValidator(_catalog_entry)]
_CATALOG_LIST = pydantic.TypeAdapter(list[CatalogConfig])


def _by_name(entries: Any, info: ValidationInfo) -> Any:
    """The file's (and the JSON's) list of entries as the catalogs by name; code gives the mapping."""
    if isinstance(entries, dict) and ConfigFile.of(info) is None:
        return entries
    if not isinstance(entries, list | None):
        raise PydanticKnownError("list_type")
    catalogs: dict[str, Any] = {}
    # Validated here, so that an error names the entry as the file has it (catalogs[1].s3).
    entries = _CATALOG_LIST.validate_python(entries or [], context=info.context, by_name=False)
    for index, catalog in enumerate(entries):
        if catalog.name in catalogs:
            raise PydanticCustomError("config_value", f"the catalog name {catalog.name!r} is defined twice",
                                      {"at": (index,)})
        catalogs[catalog.name] = catalog
    return catalogs


class SparkConfig(FileModel):
    """How to start Spark: the master URL and extra ``spark.*`` settings."""

    master: Annotated[str, BeforeValidator(lambda v: _single_value(v) if v not in (None, "") else DEFAULT_SPARK_MASTER)
                      ] = DEFAULT_SPARK_MASTER
    conf: Properties = Field(default_factory=dict, description="a mapping of Spark settings")

    def __repr__(self) -> str:
        return f"SparkConfig(master={self.master!r}, conf={_redacted(self.conf)!r})"


class LakehouseConfig(FileModel):
    """The whole configuration: the catalogs by name, which one is the default, and Spark.

    ``source`` says where it came from (a file path, ``<embedded default>`` or ``<string>``).
    """

    default_catalog: str = Field("", description="the name of a catalog below")
    catalogs: Annotated[dict[str, CatalogConfig], BeforeValidator(_by_name),
                        pydantic.WrapSerializer(lambda catalogs, dump: list(dump(catalogs).values()))] = Field(
        default_factory=dict, description="a list of catalog entries (each starting with '- name: ...')")
    spark: SparkConfig = Field(default_factory=SparkConfig, description="a mapping with master and conf")
    # The ``server:`` section for ``tablestore catalog serve`` as written (after ${VAR}
    # substitution); tablestore.rest.settings validates it. It holds tokens, so it is left out
    # of reprs and of the JSON (executors never need it).
    server: Annotated[dict[str, Any], BeforeValidator(lambda value: {} if value is None else value)] = Field(
        default_factory=dict, exclude=True, description="a mapping (catalogs, tokens, clients, ...)")
    # Not a key of the file (init=False keeps it out of the keys): the loader names the file.
    source: str = Field(None, init=False, validate_default=True)

    @pydantic.field_validator("source", mode="before")
    @classmethod
    def _named_by_the_loader(cls, source: Any, info: ValidationInfo) -> Any:
        loading = ConfigFile.of(info)
        if loading is not None and source is not None:
            raise PydanticKnownError("extra_forbidden")
        return loading.source if loading else source or STRING_SOURCE

    @model_validator(mode="after")
    def _default_is_defined(self, info: ValidationInfo) -> LakehouseConfig:
        if not self.catalogs:
            raise PydanticCustomError("config", "defines no catalogs; add at least one under 'catalogs:'")
        if not self.default_catalog:
            # Unless told, the first catalog is the default (set here once: the model is frozen).
            object.__setattr__(self, "default_catalog", next(iter(self.catalogs)))
        if self.default_catalog not in self.catalogs:
            default, names = repr(self.default_catalog), _names(self.catalogs)
            raise problem_at(("default-catalog",), f"{default} is not one of the catalogs defined: {names}"
                             if ConfigFile.of(info) else f"{default} is not defined; the catalogs are {names}")
        return self

    @classmethod
    def from_json(cls, obj: Mapping[str, Any] | str | bytes) -> LakehouseConfig:
        """The configuration from ``model_dump_json()``'s text (or ``model_dump()``'s object)."""
        for _ in range(2):
            # Twice: text that was JSON-encoded once more on its way is accepted too.
            try:
                obj = json.loads(obj) if isinstance(obj, str | bytes) else obj
            except ValueError as e:
                raise ConfigError(f"the configuration is not valid JSON: {e}") from None
        if not isinstance(obj, Mapping):
            raise ConfigError(f"the configuration JSON must be an object, got {type(obj).__name__}")
        return validated(cls, obj, str(obj.get("source") or STRING_SOURCE))

    def catalog(self, name: str | None = None) -> CatalogConfig:
        """The configuration of catalog ``name`` (the default catalog if None)."""
        key = self.default_catalog if name is None else name
        if key not in self.catalogs:
            raise NoSuchCatalogError(
                f"catalog {key!r} is not defined in {self.source}; the catalogs are {_names(self.catalogs)}")
        return self.catalogs[key]

    def __repr__(self) -> str:
        return (f"LakehouseConfig(default_catalog={self.default_catalog!r}, "
                f"catalogs={list(self.catalogs.values())!r}, spark={self.spark!r}, source={self.source!r})")


def _names(catalogs: Mapping[str, Any]) -> str:
    return ", ".join(repr(n) for n in catalogs) or "(none)"


def load_config(path: str | os.PathLike[str] | None = None) -> LakehouseConfig:
    """The configuration from ``path``, else ``$TABLESTORE_CONFIG``, else ``./tablestore.yaml``,
    else the embedded default. A path that is given but missing is an error."""
    if path is not None and str(path):
        return _load_file(Path(path), "the config file")
    if os.environ.get(CONFIG_ENV):
        return _load_file(Path(os.environ[CONFIG_ENV]), f"the config file named by ${CONFIG_ENV}")
    if Path(DEFAULT_CONFIG_FILE).is_file():
        return _load_file(Path(DEFAULT_CONFIG_FILE), "the config file")
    return default_config()


def default_config(base_dir: str | os.PathLike[str] | None = None) -> LakehouseConfig:
    """The embedded default: a SQLite catalog ``local`` with its warehouse in ``./warehouse``."""
    local = {"name": DEFAULT_CATALOG_NAME, "type": "sql", "uri": "sqlite:///warehouse/catalog.db",
             "warehouse": "warehouse"}
    loading = ConfigFile(EMBEDDED_SOURCE, os.path.abspath(base_dir or os.getcwd()))
    return validated(LakehouseConfig, {"catalogs": [local]}, EMBEDDED_SOURCE, context=loading)


def _load_file(path: Path, what: str) -> LakehouseConfig:
    return parse_config(read_file(path, what), source=str(path.absolute()))


def parse_config(text: str, source: str = STRING_SOURCE, *,
                 base_dir: str | os.PathLike[str] | None = None) -> LakehouseConfig:
    """The configuration in YAML ``text``. ``source`` names it in error messages; relative paths
    resolve against ``base_dir``, by default the directory of ``source`` if it is a file path,
    else the working directory."""
    if base_dir is None:
        is_file = not (source.startswith("<") and source.endswith(">"))
        base_dir = os.path.dirname(os.path.abspath(source)) if is_file else os.getcwd()
    doc = yaml_mapping(text, source, LakehouseConfig)
    return validated(LakehouseConfig, doc, source, context=ConfigFile(source, os.fspath(base_dir)))


__all__ = ["CONFIG_ENV", "CatalogConfig", "ConfigError", "LakehouseConfig", "Properties", "RestCatalogConfig",
           "SparkConfig", "SqlCatalogConfig", "default_config", "load_config", "parse_config", "redact_uri"]

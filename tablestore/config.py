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
passwords in URIs) never appear in reprs. ``to_json()`` keeps them: its JSON text is how
executors get the configuration.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import pydantic
import yaml
from pydantic import BeforeValidator, ConfigDict, Field, model_validator
from pydantic.fields import FieldInfo
from pydantic_core import PydanticCustomError

from tablestore.catalog import Catalog, load_catalog
from tablestore.errors import ConfigError, InvalidNameError, NoSuchCatalogError, TableStoreError
from tablestore.io import redact_properties
from tablestore.names import validate_name

CONFIG_ENV = "TABLESTORE_CONFIG"
DEFAULT_CONFIG_FILE = "tablestore.yaml"
EMBEDDED_SOURCE = "<embedded default>"
STRING_SOURCE = "<string>"
DEFAULT_CATALOG_NAME = "local"
DEFAULT_DATABASE = "default"
DEFAULT_SPARK_MASTER = "local[2]"
CATALOG_TYPES = ("sql", "rest")

_ENV_VAR = re.compile(r"\$(\$?)\{([^}]*)\}")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SQLITE_URI = re.compile(r"(sqlite(?:\+\w+)?:///)([^?]*)(\?.*)?", re.DOTALL)
_URI_PASSWORD = re.compile(r"(://[^/:@]*:)[^/@]*@")


def redact_uri(uri: str) -> str:
    """``uri`` with any password (``scheme://user:password@host``) replaced by ``***``."""
    return _URI_PASSWORD.sub(r"\1***@", uri)


def _redacted(properties: Mapping[str, str]) -> dict[str, str]:
    shown = redact_properties(properties)
    return {k: redact_uri(v) for k, v in shown.items()}


def validated(model: type[pydantic.BaseModel], build: Any) -> Any:
    """``build()`` (a model's validation), with a tablestore error a validator raised re-raised as
    itself: pydantic wraps every ValueError, and ours are ValueErrors that already say it all."""
    try:
        return build()
    except pydantic.ValidationError as e:
        for error in e.errors():
            cause = (error.get("ctx") or {}).get("error")
            if isinstance(cause, TableStoreError):
                raise cause from None
        problem = e.errors()[0]
        where = ".".join(str(part) for part in problem["loc"]) or model.__name__
        raise ConfigError(f"{model.__name__}: {where}: {problem['msg']}") from None


# -- the model -------------------------------------------------------------------------------------


class _Model(pydantic.BaseModel):
    # Frozen and compared by value, as the dataclasses these were; str() is the redacted repr
    # (pydantic's own str() would list every field, secrets included).
    model_config = ConfigDict(frozen=True, extra="forbid")

    def __str__(self) -> str:
        return repr(self)

    def _init(self, **fields: Any) -> None:
        # The classes below take their fields positionally too, as the dataclasses they were.
        validated(type(self), lambda: pydantic.BaseModel.__init__(self, **fields))


class CatalogConfig(_Model):
    """One named catalog: its type (``sql`` or ``rest``), its properties and its default database.

    ``properties`` are what the implementation takes (``uri``, ``warehouse``, ``s3.endpoint``, ...).
    """

    name: str
    type: str
    properties: dict[str, str] = Field(default_factory=dict)
    default_database: str = DEFAULT_DATABASE

    def __init__(self, name: str, type: str, properties: Mapping[str, str] | None = None,
                 default_database: str = DEFAULT_DATABASE) -> None:
        self._init(name=name, type=type, properties=dict(properties or {}), default_database=default_database)

    def load(self) -> Catalog:
        """A new catalog object for this configuration (the CatalogManager caches them)."""
        return load_catalog(self.name, **{**self.properties, "type": self.type})

    def __repr__(self) -> str:
        return (
            f"CatalogConfig(name={self.name!r}, type={self.type!r}, "
            f"properties={_redacted(self.properties)!r}, default_database={self.default_database!r})"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "type": self.type,
            "default-database": self.default_database,
            "properties": dict(self.properties),
        }

    @staticmethod
    def from_json(obj: Mapping[str, Any]) -> CatalogConfig:
        return CatalogConfig(
            name=str(obj["name"]),
            type=str(obj["type"]),
            properties={str(k): str(v) for k, v in (obj.get("properties") or {}).items()},
            default_database=str(obj.get("default-database") or DEFAULT_DATABASE),
        )


class SparkConfig(_Model):
    """How to start Spark: the master URL and extra ``spark.*`` settings."""

    master: str = DEFAULT_SPARK_MASTER
    conf: dict[str, str] = Field(default_factory=dict)

    def __init__(self, master: str = DEFAULT_SPARK_MASTER, conf: Mapping[str, str] | None = None) -> None:
        self._init(master=master, conf=dict(conf or {}))

    def __repr__(self) -> str:
        return f"SparkConfig(master={self.master!r}, conf={_redacted(self.conf)!r})"

    def to_json(self) -> dict[str, Any]:
        return {"master": self.master, "conf": dict(self.conf)}

    @staticmethod
    def from_json(obj: Mapping[str, Any]) -> SparkConfig:
        return SparkConfig(
            master=str(obj.get("master") or DEFAULT_SPARK_MASTER),
            conf={str(k): str(v) for k, v in (obj.get("conf") or {}).items()},
        )


class LakehouseConfig(_Model):
    """The whole configuration: the catalogs by name, which one is the default, and Spark.

    ``source`` says where it came from (a file path, ``<embedded default>`` or ``<string>``).
    """

    default_catalog: str
    catalogs: dict[str, CatalogConfig]
    spark: SparkConfig = Field(default_factory=SparkConfig)
    source: str = STRING_SOURCE
    # The ``server:`` section for ``tablestore catalog serve`` as written (after ${VAR}
    # substitution); tablestore.rest.settings validates it. It holds tokens, so it is left out
    # of reprs and of to_json() (executors never need it).
    server: dict[str, Any] = Field(default_factory=dict)

    def __init__(self, default_catalog: str, catalogs: Mapping[str, CatalogConfig], spark: SparkConfig | None = None,
                 source: str = STRING_SOURCE, server: Mapping[str, Any] | None = None) -> None:
        self._init(default_catalog=default_catalog, catalogs=dict(catalogs), spark=spark or SparkConfig(),
                   source=source, server=dict(server or {}))

    @model_validator(mode="after")
    def _default_is_defined(self) -> LakehouseConfig:
        if self.default_catalog not in self.catalogs:
            raise ConfigError(
                f"{self.source}: default-catalog {self.default_catalog!r} is not defined; "
                f"the catalogs are {_names(self.catalogs)}"
            )
        return self

    def catalog(self, name: str | None = None) -> CatalogConfig:
        """The configuration of catalog ``name`` (the default catalog if None)."""
        key = self.default_catalog if name is None else name
        try:
            return self.catalogs[key]
        except KeyError:
            raise NoSuchCatalogError(
                f"catalog {key!r} is not defined in {self.source}; the catalogs are {_names(self.catalogs)}"
            ) from None

    def __repr__(self) -> str:
        return (
            f"LakehouseConfig(default_catalog={self.default_catalog!r}, "
            f"catalogs={list(self.catalogs.values())!r}, spark={self.spark!r}, source={self.source!r})"
        )

    def to_dict(self) -> dict[str, Any]:
        """The configuration as a JSON-compatible object, secrets included."""
        return {
            "source": self.source,
            "default-catalog": self.default_catalog,
            "catalogs": [c.to_json() for c in self.catalogs.values()],
            "spark": self.spark.to_json(),
        }

    def to_json(self) -> str:
        """The configuration as JSON text, secrets included: what executors are given (as the
        ``config`` option of the Spark data source)."""
        return json.dumps(self.to_dict(), sort_keys=True)

    @staticmethod
    def from_json(obj: Mapping[str, Any] | str | bytes) -> LakehouseConfig:
        """The configuration from ``to_json()``'s text (or ``to_dict()``'s object)."""
        for _ in range(2):
            # Twice: text that was JSON-encoded once more on its way (a JSON string holding the
            # JSON object) is accepted too.
            if isinstance(obj, str | bytes):
                try:
                    obj = json.loads(obj)
                except ValueError as e:
                    raise ConfigError(f"the configuration is not valid JSON: {e}") from None
        if not isinstance(obj, Mapping):
            raise ConfigError(f"the configuration JSON must be an object, got {type(obj).__name__}")
        try:
            catalogs = [CatalogConfig.from_json(c) for c in obj["catalogs"]]
            return LakehouseConfig(
                default_catalog=str(obj["default-catalog"]),
                catalogs={c.name: c for c in catalogs},
                spark=SparkConfig.from_json(obj.get("spark") or {}),
                source=str(obj.get("source") or STRING_SOURCE),
            )
        except (KeyError, TypeError, AttributeError) as e:
            raise ConfigError(f"the configuration JSON is missing or mistypes {e}") from None


def _names(catalogs: Mapping[str, Any]) -> str:
    return ", ".join(repr(n) for n in catalogs) or "(none)"


# -- the YAML file, as written ---------------------------------------------------------------------
# The file's own shape, key by key: pydantic checks keys and value types, and _problem turns its
# first error into a message naming the file, the key and the fix. What needs the whole entry
# (a catalog's label, its name rules) is checked by validators that raise the message itself.


def _single_value(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        # Properties are strings; Iceberg clients parse "true"/"false" (not Python's "True").
        return "true" if value else "false"
    if isinstance(value, str | int | float):
        return str(value)
    raise PydanticCustomError("config_type", "a single value")


def _none_is_empty(empty: Any) -> BeforeValidator:
    return BeforeValidator(lambda value: empty if value is None else value)


_Value = Annotated[str | None, BeforeValidator(_single_value)]
_Values = Annotated[dict[str, _Value], _none_is_empty({})]


class _SparkSection(pydantic.BaseModel):
    model_config = ConfigDict(extra="forbid")

    master: _Value = None
    conf: _Values = Field(default_factory=dict, description="a mapping of Spark settings")


class _CatalogEntry(pydantic.BaseModel):
    # Any other key is a catalog property, passed through as it is.
    model_config = ConfigDict(extra="allow")
    __pydantic_extra__: dict[str, _Value] = Field(init=False)

    name: str
    type: str
    default_database: Any = Field(default=DEFAULT_DATABASE, alias="default-database")
    s3: _Values = Field(default_factory=dict, description="a mapping (endpoint, access-key-id, ...)")

    @model_validator(mode="before")
    @classmethod
    def _name_and_type(cls, entry: Any) -> Any:
        if not isinstance(entry, dict):
            return entry  # pydantic's own type error: "must be a mapping with name, type and properties"
        name = entry.get("name")
        if not isinstance(name, str) or not name.strip():
            raise PydanticCustomError("config_missing", "has no 'name'; every catalog needs one")
        try:
            validate_name(name, "catalog name")
        except InvalidNameError as e:
            raise PydanticCustomError("config_value", "{problem}", {"problem": str(e)}) from None
        if "." in name:
            # A dot would make `cat.db.table` ambiguous.
            raise PydanticCustomError("config_value", "catalog names cannot contain '.'")
        kind = entry.get("type")
        if not isinstance(kind, str) or not kind.strip():
            raise PydanticCustomError("config_missing", "has no 'type'; use one of {types}",
                                      {"types": ", ".join(CATALOG_TYPES)})
        kind = kind.strip().lower()
        if kind not in CATALOG_TYPES:
            raise PydanticCustomError("config_value", "unknown type {kind}; use one of {types}",
                                      {"kind": repr(kind), "types": ", ".join(CATALOG_TYPES)})
        database = entry.get("default-database", DEFAULT_DATABASE)
        if not isinstance(database, str) or not database.strip():
            raise PydanticCustomError("config_value", "'default-database' must be a database name, got {got}",
                                      {"got": repr(database)})
        return {**entry, "type": kind, "default-database": database.strip()}


class _Document(pydantic.BaseModel):
    model_config = ConfigDict(extra="forbid")

    default_catalog: str | None = Field(
        default=None, alias="default-catalog", description="the name of a catalog below")
    catalogs: Annotated[list[_CatalogEntry], _none_is_empty([])] = Field(
        default_factory=list, description="a list of catalog entries (each starting with '- name: ...')")
    spark: Annotated[_SparkSection, _none_is_empty({})] = Field(
        default_factory=_SparkSection, description="a mapping with master and conf")
    server: Annotated[dict[str, Any], _none_is_empty({})] = Field(
        default_factory=dict, description="a mapping (catalogs, tokens, clients, ...)")


# What each place must be, for pydantic's own type errors ("catalogs[0] must be a mapping ...").
_ITEM_DESCRIPTIONS = {("catalogs", int): "a mapping with name, type and properties"}


def key_path(loc: tuple[int | str, ...]) -> str:
    """A pydantic error location as the file spells it: ``catalogs[0].s3.endpoint``."""
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def _model_in(annotation: Any) -> type[pydantic.BaseModel] | None:
    """The model a field's annotation holds (``list[_CatalogEntry]``, ``Annotated[...]``), if any."""
    if isinstance(annotation, type) and issubclass(annotation, pydantic.BaseModel):
        return annotation
    return next((m for m in map(_model_in, typing.get_args(annotation)) if m is not None), None)


def field_at(root: type[pydantic.BaseModel], loc: tuple[int | str, ...]) -> FieldInfo | None:
    """The field of ``root`` (or of a model nested in it) that a pydantic error location names."""
    model: type[pydantic.BaseModel] | None = root
    found = None
    for part in loc:
        if isinstance(part, int):
            continue  # an item of a list: the list's field describes it
        found = {f.alias or name: f for name, f in model.model_fields.items()}.get(part) if model else None
        if found is None:
            return None
        model = _model_in(found.annotation)
    return found


def keys_at(root: type[pydantic.BaseModel], loc: tuple[int | str, ...]) -> list[str]:
    """The keys the mapping at ``loc`` may have: the fields (by alias) of the model there."""
    model = root if not loc else _model_in(getattr(field_at(root, loc), "annotation", None))
    return [f.alias or name for name, f in model.model_fields.items()] if model else []


def _expected(loc: tuple[int | str, ...]) -> str:
    """What the value at ``loc`` must be: the description of its field."""
    shape = tuple(int if isinstance(part, int) else part for part in loc)
    if shape in _ITEM_DESCRIPTIONS:
        return _ITEM_DESCRIPTIONS[shape]
    found = field_at(_Document, loc)
    return (found.description if found else None) or "a different kind of value"


def _problem(error: Any, doc: Mapping[str, Any]) -> str:
    """The message for pydantic's ``error`` about the document ``doc``: where, what, and the fix."""
    loc: tuple[int | str, ...] = tuple(error["loc"])
    kind, where = error["type"], key_path(loc)
    if kind == "extra_forbidden":
        allowed = keys_at(_Document, loc[:-1])
        close = difflib.get_close_matches(str(loc[-1]), allowed, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        what = "top-level key" if len(loc) == 1 else "key"
        return f"unknown {what} {where!r}{hint}; expected one of {', '.join(allowed)}"
    if kind in ("config_missing", "config_value"):
        label = where
        entries = doc.get("catalogs")
        if loc[:1] == ("catalogs",) and len(loc) == 2 and isinstance(entries, list):
            name = entries[int(loc[1])].get("name")
            if isinstance(name, str) and name.strip():
                label = f"{where} (catalog {name!r})"
        return f"{label} {error['msg']}" if kind == "config_missing" else f"{label}: {error['msg']}"
    shown = repr(where) if len(loc) == 1 else where
    expected = error["msg"] if kind == "config_type" else _expected(loc)
    return f"{shown} must be {expected}, got {error['input']!r}"


def problem_message(error: Any, model: type[pydantic.BaseModel], prefix: tuple[str, ...] = ()) -> str:
    """The message for pydantic's ``error`` about a section of the file (``model``, found at the
    keys ``prefix``): the key, what is wrong, and what it must be. Validators raise
    ``PydanticCustomError`` of type ``config_value`` ("<key>: <problem>"), ``config_missing`` or
    ``config_must`` ("<key> needs ..." / "<key> must be ...") with their own message."""
    loc = tuple(error["loc"])
    where = key_path((*prefix, *loc))
    kind = error["type"]
    if kind == "extra_forbidden":
        return f"unknown key {where}; expected one of {', '.join(keys_at(model, loc[:-1]))}"
    # Our validators' own messages: "<key>: <problem>", or "<key> <must be / needs ...>".
    if kind == "config_value":
        return f"{where}: {error['msg']}"
    if kind in ("config_missing", "config_must"):
        return f"{where} {error['msg']}"
    found = field_at(model, loc)
    description = found.description if found else None
    if kind in ("int_parsing", "int_type", "int_from_float"):
        return f"{where} must be an integer, got {error['input']!r}"
    if kind == "greater_than_equal":
        reason = f": {description}" if description else ""
        return f"{where} must be at least {error['ctx']['ge']}{reason}"
    if kind in ("model_type", "model_attributes_type", "dict_type") and not description:
        return f"{where} must be a mapping ({', '.join(keys_at(model, loc))}), got {error['input']!r}"
    return f"{where} must be {description or 'a different kind of value'}, got {error['input']!r}"


# -- loading ---------------------------------------------------------------------------------------


def load_config(path: str | os.PathLike[str] | None = None) -> LakehouseConfig:
    """The configuration from ``path``, else ``$TABLESTORE_CONFIG``, else ``./tablestore.yaml``,
    else the embedded default. A path that is given but missing is an error."""
    if path is not None and str(path):
        return _load_file(Path(path), "the config file")
    env_path = os.environ.get(CONFIG_ENV)
    if env_path:
        return _load_file(Path(env_path), f"the config file named by ${CONFIG_ENV}")
    local = Path(DEFAULT_CONFIG_FILE)
    if local.is_file():
        return _load_file(local, "the config file")
    return default_config()


def default_config(base_dir: str | os.PathLike[str] | None = None) -> LakehouseConfig:
    """The embedded default: a SQLite catalog ``local`` with its warehouse in ``./warehouse``."""
    warehouse = os.path.abspath(os.path.join(base_dir or os.getcwd(), "warehouse"))
    local = CatalogConfig(
        DEFAULT_CATALOG_NAME,
        "sql",
        {"uri": f"sqlite:///{warehouse}/catalog.db", "warehouse": warehouse},
    )
    return LakehouseConfig(DEFAULT_CATALOG_NAME, {local.name: local}, SparkConfig(), EMBEDDED_SOURCE)


def _load_file(path: Path, what: str) -> LakehouseConfig:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{what} {path} does not exist") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"cannot read {what} {path}: {e}") from None
    return parse_config(text, source=str(path.absolute()))


def parse_config(
    text: str, source: str = STRING_SOURCE, *, base_dir: str | os.PathLike[str] | None = None
) -> LakehouseConfig:
    """The configuration in YAML ``text``. ``source`` names it in error messages; relative paths
    resolve against ``base_dir``, by default the directory of ``source`` if it is a file path,
    else the working directory."""
    if base_dir is None:
        is_file = not (source.startswith("<") and source.endswith(">"))
        base_dir = os.path.dirname(os.path.abspath(source)) if is_file else os.getcwd()
    return _Parser(source, os.fspath(base_dir)).parse(text)


class _Parser:
    def __init__(self, source: str, base_dir: str) -> None:
        self.source = source
        self.base_dir = base_dir

    def error(self, message: str) -> ConfigError:
        return ConfigError(f"{self.source}: {message}")

    def parse(self, text: str) -> LakehouseConfig:
        try:
            doc = yaml.safe_load(text)
        except yaml.YAMLError as e:
            mark = getattr(e, "problem_mark", None)
            where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
            problem = getattr(e, "problem", None) or str(e)
            raise self.error(f"the file is not valid YAML{where}: {problem}") from None
        if doc is None:
            raise self.error("the file is empty; define at least one catalog under 'catalogs:'")
        top_level = ", ".join(f.alias or name for name, f in _Document.model_fields.items())
        if not isinstance(doc, dict):
            raise self.error(f"the file must be a mapping of keys {top_level}; got {type(doc).__name__}")
        doc = self.substitute(doc, "")
        try:
            document = _Document.model_validate(doc)
        except pydantic.ValidationError as e:
            raise self.error(_problem(e.errors()[0], doc)) from None

        if not document.catalogs:
            raise self.error("defines no catalogs; add at least one under 'catalogs:'")
        catalogs: dict[str, CatalogConfig] = {}
        for index, entry in enumerate(document.catalogs):
            catalog = self.catalog(entry)
            if catalog.name in catalogs:
                raise self.error(f"catalogs[{index}]: the catalog name {catalog.name!r} is defined twice")
            catalogs[catalog.name] = catalog

        default = document.default_catalog
        if default is None:
            default = next(iter(catalogs))
        elif default not in catalogs:
            raise self.error(
                f"default-catalog {default!r} is not one of the catalogs defined: {_names(catalogs)}"
            )
        spark = SparkConfig(master=document.spark.master or DEFAULT_SPARK_MASTER,
                            conf={k: v for k, v in document.spark.conf.items() if v is not None})
        return LakehouseConfig(default, catalogs, spark, self.source, document.server)

    def catalog(self, entry: _CatalogEntry) -> CatalogConfig:
        properties = {key: value for key, value in (entry.model_extra or {}).items() if value is not None}
        properties.update({f"s3.{key}": value for key, value in entry.s3.items() if value is not None})
        if entry.type == "sql":
            if "uri" in properties:
                properties["uri"] = self.resolve_sqlite(properties["uri"])
            if "warehouse" in properties:
                properties["warehouse"] = self.resolve_path(properties["warehouse"])
        return CatalogConfig(entry.name, entry.type, properties, entry.default_database)

    def substitute(self, value: Any, where: str) -> Any:
        """``value`` with ``${VAR}`` replaced in every string (keys are left as written)."""
        if isinstance(value, dict):
            return {k: self.substitute(v, f"{where}.{k}" if where else str(k)) for k, v in value.items()}
        if isinstance(value, list):
            return [self.substitute(v, f"{where}[{i}]") for i, v in enumerate(value)]
        if not isinstance(value, str) or "${" not in value:
            return value

        def replace(match: re.Match[str]) -> str:
            if match.group(1):  # $${...} stands for a literal ${...}
                return "${" + match.group(2) + "}"
            name, has_default, default = match.group(2).partition(":-")
            if not _ENV_NAME.fullmatch(name):
                raise self.error(f"{where}: {match.group(0)!r} is not a valid ${{VARIABLE}} reference")
            found = os.environ.get(name)
            if found is not None:
                return found
            if has_default:
                return default
            raise self.error(
                f"{where} refers to the environment variable {name}, which is not set; "
                f"set it or write ${{{name}:-default}}"
            )

        return _ENV_VAR.sub(replace, value)

    def resolve_path(self, location: str) -> str:
        if "://" in location or location.startswith("file:"):
            return location
        return os.path.normpath(os.path.join(self.base_dir, os.path.expanduser(location)))

    def resolve_sqlite(self, uri: str) -> str:
        match = _SQLITE_URI.fullmatch(uri)
        if match is None:
            return uri
        prefix, path, query = match.group(1), match.group(2), match.group(3) or ""
        if not path or path == ":memory:" or path.startswith("file:") or path.startswith("/"):
            return uri
        return f"{prefix}{self.resolve_path(path)}{query}"


__all__ = [
    "CONFIG_ENV",
    "CatalogConfig",
    "ConfigError",
    "LakehouseConfig",
    "SparkConfig",
    "default_config",
    "field_at",
    "key_path",
    "keys_at",
    "load_config",
    "parse_config",
    "problem_message",
    "redact_uri",
    "validated",
]

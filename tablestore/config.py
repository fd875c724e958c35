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
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tablestore.catalog import Catalog, load_catalog
from tablestore.errors import ConfigError, InvalidNameError, NoSuchCatalogError
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

_TOP_LEVEL_KEYS = ("default-catalog", "catalogs", "spark", "server")
_SPARK_KEYS = ("master", "conf")
# Keys of a catalog entry that are not passed through as properties verbatim.
_CATALOG_KEYS = ("name", "type", "default-database", "s3")
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


# -- the model -------------------------------------------------------------------------------------


@dataclass(frozen=True, repr=False)
class CatalogConfig:
    """One named catalog: its type (``sql`` or ``rest``), its properties and its default database.

    ``properties`` are what the implementation takes (``uri``, ``warehouse``, ``s3.endpoint``, ...).
    """

    name: str
    type: str
    properties: dict[str, str] = field(default_factory=dict)
    default_database: str = DEFAULT_DATABASE

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


@dataclass(frozen=True, repr=False)
class SparkConfig:
    """How to start Spark: the master URL and extra ``spark.*`` settings."""

    master: str = DEFAULT_SPARK_MASTER
    conf: dict[str, str] = field(default_factory=dict)

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


@dataclass(frozen=True, repr=False)
class LakehouseConfig:
    """The whole configuration: the catalogs by name, which one is the default, and Spark.

    ``source`` says where it came from (a file path, ``<embedded default>`` or ``<string>``).
    """

    default_catalog: str
    catalogs: dict[str, CatalogConfig]
    spark: SparkConfig = field(default_factory=SparkConfig)
    source: str = STRING_SOURCE
    # The ``server:`` section for ``tablestore catalog serve`` as written (after ${VAR}
    # substitution); tablestore.rest.settings validates it. It holds tokens, so it is left out
    # of reprs and of to_json() (executors never need it).
    server: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.default_catalog not in self.catalogs:
            raise ConfigError(
                f"{self.source}: default-catalog {self.default_catalog!r} is not defined; "
                f"the catalogs are {_names(self.catalogs)}"
            )

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
        if not isinstance(doc, dict):
            raise self.error(
                f"the file must be a mapping of keys {', '.join(_TOP_LEVEL_KEYS)}; got {type(doc).__name__}"
            )
        doc = self.substitute(doc, "")
        self.check_keys(doc, _TOP_LEVEL_KEYS, "top-level key")

        entries = doc.get("catalogs")
        if not entries:
            raise self.error("defines no catalogs; add at least one under 'catalogs:'")
        if not isinstance(entries, list):
            raise self.error("'catalogs' must be a list of catalog entries (each starting with '- name: ...')")
        catalogs: dict[str, CatalogConfig] = {}
        for index, entry in enumerate(entries):
            catalog = self.catalog(entry, f"catalogs[{index}]")
            if catalog.name in catalogs:
                raise self.error(f"catalogs[{index}]: the catalog name {catalog.name!r} is defined twice")
            catalogs[catalog.name] = catalog

        default = doc.get("default-catalog")
        if default is None:
            default = next(iter(catalogs))
        elif not isinstance(default, str) or default not in catalogs:
            raise self.error(
                f"default-catalog {default!r} is not one of the catalogs defined: {_names(catalogs)}"
            )
        server = doc.get("server") or {}
        if not isinstance(server, dict):
            raise self.error(f"'server' must be a mapping (catalogs, tokens, clients, ...), got {server!r}")
        return LakehouseConfig(default, catalogs, self.spark(doc.get("spark")), self.source, server)

    # -- pieces ----------------------------------------------------------------------------------
    def check_keys(self, obj: Mapping[str, Any], allowed: tuple[str, ...], what: str, where: str = "") -> None:
        for key in obj:
            if key not in allowed:
                close = difflib.get_close_matches(str(key), allowed, n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                raise self.error(
                    f"unknown {what} {where + str(key)!r}{hint}; expected one of {', '.join(allowed)}"
                )

    def catalog(self, entry: Any, where: str) -> CatalogConfig:
        if not isinstance(entry, dict):
            raise self.error(f"{where} must be a mapping with name, type and properties; got {entry!r}")
        name = entry.get("name")
        if not isinstance(name, str) or not name.strip():
            raise self.error(f"{where} has no 'name'; every catalog needs one")
        label = f"{where} (catalog {name!r})"
        try:
            validate_name(name, "catalog name")
        except InvalidNameError as e:
            raise self.error(f"{label}: {e}") from None
        if "." in name:
            # A dot would make `cat.db.table` ambiguous.
            raise self.error(f"{label}: catalog names cannot contain '.'")
        kind = entry.get("type")
        if not isinstance(kind, str) or not kind.strip():
            raise self.error(f"{label} has no 'type'; use one of {', '.join(CATALOG_TYPES)}")
        kind = kind.strip().lower()
        if kind not in CATALOG_TYPES:
            raise self.error(f"{label}: unknown type {kind!r}; use one of {', '.join(CATALOG_TYPES)}")
        database = entry.get("default-database", DEFAULT_DATABASE)
        if not isinstance(database, str) or not database.strip():
            raise self.error(f"{label}: 'default-database' must be a database name, got {database!r}")

        properties: dict[str, str] = {}
        for key, value in entry.items():
            if key in _CATALOG_KEYS or value is None:
                continue
            properties[str(key)] = self.scalar(value, f"{where}.{key}")
        s3 = entry.get("s3")
        if s3 is not None:
            if not isinstance(s3, dict):
                raise self.error(f"{where}.s3 must be a mapping (endpoint, access-key-id, ...), got {s3!r}")
            for key, value in s3.items():
                if value is not None:
                    properties[f"s3.{key}"] = self.scalar(value, f"{where}.s3.{key}")
        if kind == "sql":
            if "uri" in properties:
                properties["uri"] = self.resolve_sqlite(properties["uri"])
            if "warehouse" in properties:
                properties["warehouse"] = self.resolve_path(properties["warehouse"])
        return CatalogConfig(name, kind, properties, database.strip())

    def spark(self, obj: Any) -> SparkConfig:
        if obj is None:
            return SparkConfig()
        if not isinstance(obj, dict):
            raise self.error(f"'spark' must be a mapping with master and conf, got {obj!r}")
        self.check_keys(obj, _SPARK_KEYS, "key", "spark.")
        conf = obj.get("conf") or {}
        if not isinstance(conf, dict):
            raise self.error(f"spark.conf must be a mapping of Spark settings, got {conf!r}")
        master = obj.get("master")
        return SparkConfig(
            master=self.scalar(master, "spark.master") if master is not None else DEFAULT_SPARK_MASTER,
            conf={str(k): self.scalar(v, f"spark.conf.{k}") for k, v in conf.items() if v is not None},
        )

    def scalar(self, value: Any, where: str) -> str:
        if isinstance(value, bool):
            # Properties are strings; Iceberg clients parse "true"/"false" (not Python's "True").
            return "true" if value else "false"
        if isinstance(value, str | int | float):
            return str(value)
        raise self.error(f"{where} must be a single value, got {value!r}")

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
    "load_config",
    "parse_config",
    "redact_uri",
]

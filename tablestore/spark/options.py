"""The options of the ``tablestore`` data source: table names, the configuration, flags.

Shared by its reads (:mod:`tablestore.spark.datasource.source_read`), writes
(:mod:`tablestore.spark.datasource.source_write`) and the streaming sink; the data source itself is
:mod:`tablestore.spark.datasource.source`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

from tablestore.catalog_manager import CatalogManager
from tablestore.config import LakehouseConfig, load_config
from tablestore.errors import ValidationError
from tablestore.option_values import epoch_ms, flag

if TYPE_CHECKING:
    from tablestore.catalog.base import Catalog

SOURCE_NAME = "tablestore"
SNAPSHOT_PROPERTY_PREFIX = "snapshot-property."
# Spark's settings of read_dataframe (spark/native/native_read.py), every session's too.
# Match the files' columns by field id; a column a file lacks (added later) reads as NULL.
NATIVE_READ_CONF = {
    "spark.sql.parquet.fieldId.read.enabled": "true",
    # "true" would read a file without any field id as all NULL rows, silently (row-level SQL
    # then misses every row of it); "false" fails the read and names the file.
    "spark.sql.parquet.fieldId.read.ignoreMissing": "false",
}


# -- resolving tables on the driver ---------------------------------------------------------------


def parse_name(text: str) -> tuple[str, ...]:
    """``cat.db.t`` or ```my db`.`t.1``` as its parts (backticks quote, doubled backticks escape)."""
    parts: list[str] = []
    current: list[str] = []
    quoted = False
    i = 0
    while i < len(text):
        c = text[i]
        if quoted:
            if c == "`" and text[i + 1:i + 2] == "`":
                current.append("`")
                i += 1
            elif c == "`":
                quoted = False
            else:
                current.append(c)
        elif c == "`":
            quoted = True
        elif c == ".":
            parts.append("".join(current))
            current = []
        else:
            current.append(c)
        i += 1
    if quoted:
        raise ValidationError(f"unclosed backtick in table name {text!r}")
    parts.append("".join(current))
    if any(not p for p in parts):
        raise ValidationError(f"table name {text!r} has an empty part")
    return tuple(parts)


def quote_name(parts: Sequence[str]) -> str:
    return ".".join(p if p.isidentifier() else "`" + p.replace("`", "``") + "`" for p in parts)


def load_config_from(config_json: str | None) -> LakehouseConfig:
    if not config_json:
        return load_config()
    return LakehouseConfig.from_json(config_json)


def config_to_json(config: LakehouseConfig) -> str:
    return config.model_dump_json()


def table_options(name: str, config: LakehouseConfig | None, catalog: str | None) -> dict[str, str]:
    """The data source options that name a table (``path``) and how to find it, for the Python
    helpers that read or write without ``spark.read``'s option chain."""
    options = {"path": name}
    if config is not None:
        options["config"] = config_to_json(config)
    if catalog:
        options["catalog"] = catalog
    return options


@contextlib.contextmanager
def resolved_table(
    options: Mapping[str, str], default_config: str | None,
) -> Iterator[tuple[str, Catalog, tuple[str, ...]]]:
    """(config JSON, catalog, identifier) of the table the options name; closes the catalog after."""
    path = options.get("path")
    if not path:
        raise ValidationError("name the table: spark.read.format('tablestore').load('db.table')")
    config_json = options.get("config") or default_config
    config = load_config_from(config_json)
    with CatalogManager(config) as manager:
        catalog_name = options.get("catalog")
        if catalog_name:
            # The identifier is relative to the named catalog (any depth of namespace).
            catalog, identifier = manager.catalog(catalog_name), parse_name(path)
        else:
            catalog, identifier = manager.resolve_table(parse_name(path))
        yield config_json or config_to_json(config), catalog, tuple(identifier)


def as_of_timestamp_ms(text: str) -> int:
    """The ``as-of-timestamp`` option: epoch milliseconds, or an ISO-8601 time (UTC if no zone)."""
    return epoch_ms(text, "as-of-timestamp")


def bool_option(options: Mapping[str, str], key: str, default: bool) -> bool:
    """A true/false option (also 1/0, yes/no); ``default`` when absent."""
    return flag(options, key, default, kind="option")

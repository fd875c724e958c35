"""The lakehouse configuration (``tablestore.yaml``) of tests that run SQL or the command line
on local SQLite catalogs.

``sqlite_catalog(root, name)`` is one ``type: sql`` catalog with its database and warehouse under
``root``; ``lakehouse_config(root, *catalogs)`` writes ``root/tablestore.yaml`` naming them (the
first is the default) and loads it as the CLI would, so a test can hand the same file to
``tablestore ... --config``. (The REST service's configuration, with its ``server:`` section, is
``tests.services.write_config``.)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tablestore.config import LakehouseConfig, load_config


@dataclass(frozen=True)
class SqliteCatalog:
    """A ``type: sql`` catalog on a SQLite database; ``s3`` holds the catalog's ``s3:`` options."""

    name: str
    uri: str
    warehouse: str
    default_database: str | None = None
    s3: Mapping[str, str] = field(default_factory=dict)

    def entry(self) -> dict[str, Any]:
        """The catalog's item of the ``catalogs:`` list."""
        entry: dict[str, Any] = {"name": self.name, "type": "sql", "uri": self.uri, "warehouse": self.warehouse}
        if self.default_database is not None:
            entry["default-database"] = self.default_database
        if self.s3:
            entry["s3"] = dict(self.s3)
        return entry


def sqlite_catalog(root: Path, name: str, *, default_database: str | None = None, warehouse: str | None = None,
                   s3_properties: Mapping[str, str] | None = None) -> SqliteCatalog:
    """Catalog ``name`` on ``root/<name>.db`` with its warehouse in ``root/<name>-warehouse`` unless
    ``warehouse`` (a directory or an s3:// location) is given; ``s3_properties`` are FileIO
    properties (``s3.endpoint``, ...), written as the catalog's ``s3:`` options."""
    s3 = {key.removeprefix("s3."): value for key, value in (s3_properties or {}).items()}
    return SqliteCatalog(name, f"sqlite:///{root / name}.db", warehouse or str(root / f"{name}-warehouse"),
                         default_database, s3)


def write_lakehouse_config(root: Path, *catalogs: SqliteCatalog) -> Path:
    """``root/tablestore.yaml`` defining ``catalogs``, the first of them the default catalog."""
    if not catalogs:
        raise ValueError("a lakehouse configuration needs at least one catalog")
    doc = {"default-catalog": catalogs[0].name, "catalogs": [c.entry() for c in catalogs]}
    path = root / "tablestore.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return path


def lakehouse_config(root: Path, *catalogs: SqliteCatalog) -> LakehouseConfig:
    """The configuration of :func:`write_lakehouse_config`, loaded from its file."""
    return load_config(write_lakehouse_config(root, *catalogs))

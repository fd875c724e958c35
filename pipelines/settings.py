"""The pipeline's settings: one YAML file per environment (``embedded`` or ``stack``).

``$LAKEHOUSE_ENV`` picks the environment (``embedded`` by default), ``$LAKEHOUSE_SETTINGS``
names another settings file, and ``$LAKEHOUSE_ROOT`` replaces the file's ``root``. The
``tablestore`` section is a tablestore configuration (docs/design.md, section 7) whose relative
paths resolve against ``root``.
"""

from __future__ import annotations

import datetime
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tablestore.config import LakehouseConfig, parse_config
from tablestore.errors import ConfigError

CONFIG_DIR = Path(__file__).parent / "config"
ENVIRONMENTS = ("embedded", "stack")
CATALOG = "lakehouse"
DATABASE = "shop"


def table_name(name: str) -> str:
    """The full name of a table of the shop database: ``lakehouse.shop.<name>``."""
    return f"{CATALOG}.{DATABASE}.{name}"


@dataclass(frozen=True)
class DataSettings:
    start: datetime.date
    days: int
    events_per_day: int
    users: int
    seed: int

    @property
    def dates(self) -> list[datetime.date]:
        return [self.start + datetime.timedelta(days=i) for i in range(self.days)]

    @property
    def end(self) -> datetime.date:
        """The day after the last landing day."""
        return self.start + datetime.timedelta(days=self.days)


@dataclass(frozen=True)
class PipelineSettings:
    environment: str
    root: Path
    tablestore: LakehouseConfig
    landing: Path
    data: DataSettings
    evolution_at: datetime.date
    cutover: datetime.date
    erasure_users: tuple[int, ...]
    trino: dict[str, Any] | None
    source: str
    # Days of events to keep (counted back from the end of the landed data); None: no retention.
    retention_days: int | None = None
    # The Iceberg format version of `events` (settings `events: {format-version: N}`). 2 by
    # default: the stack's Trino 476 does not read v3's deletion vectors (Trino 480 does).
    events_format_version: int = 2

    @property
    def events_landing(self) -> Path:
        return self.landing / "events"

    @property
    def requests_landing(self) -> Path:
        return self.landing / "erasure_requests"

    @property
    def daily_dates(self) -> list[datetime.date]:
        """Days the daily asset ingests: from the first landing day up to the cut-over."""
        return [d for d in self.data.dates if d < self.cutover]


def settings_path(environment: str | None = None) -> Path:
    explicit = os.environ.get("LAKEHOUSE_SETTINGS")
    if explicit:
        return Path(explicit)
    env = environment or os.environ.get("LAKEHOUSE_ENV") or "embedded"
    if env not in ENVIRONMENTS:
        raise ConfigError(f"LAKEHOUSE_ENV={env!r} is not an environment; use one of {', '.join(ENVIRONMENTS)}")
    return CONFIG_DIR / f"{env}.yaml"


def _date(value: Any, where: str, source: str) -> datetime.date:
    if isinstance(value, datetime.date):
        return value
    try:
        return datetime.date.fromisoformat(str(value))
    except ValueError:
        raise ConfigError(f"{source}: {where} must be a date (YYYY-MM-DD), got {value!r}") from None


def _retention_days(section: Any, source: str) -> int | None:
    days = section.get("days") if isinstance(section, dict) else None
    if days is None:
        return None
    if isinstance(days, bool) or not isinstance(days, int) or days < 1:
        raise ConfigError(f"{source}: retention.days must be a whole number of days >= 1, got {days!r}")
    return days


def _events_format_version(section: Any, source: str) -> int:
    version = section.get("format-version", 2) if isinstance(section, dict) else 2
    if isinstance(version, bool) or version not in (2, 3, "2", "3"):
        raise ConfigError(f"{source}: events.format-version must be 2 or 3, got {version!r}")
    return int(version)


def load_settings(
    path: str | os.PathLike[str] | None = None, root: str | os.PathLike[str] | None = None
) -> PipelineSettings:
    """The settings from ``path`` (default: the environment's file); ``root`` overrides the root."""
    file = Path(path) if path is not None else settings_path()
    try:
        doc = yaml.safe_load(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"the pipeline settings file {file} does not exist") from None
    source = str(file)
    if not isinstance(doc, dict):
        raise ConfigError(f"{source}: the settings must be a YAML mapping")
    for key in ("environment", "root", "tablestore", "landing", "data", "evolution", "rollover", "erasure"):
        if key not in doc:
            raise ConfigError(f"{source}: the key {key!r} is missing")
    root_path = Path(root or os.environ.get("LAKEHOUSE_ROOT") or doc["root"]).absolute()
    tablestore = parse_config(yaml.safe_dump(doc["tablestore"]), source=f"{source} (tablestore)", base_dir=root_path)
    if CATALOG not in tablestore.catalogs:
        raise ConfigError(f"{source}: the tablestore section must define the catalog {CATALOG!r}")
    data = doc["data"]
    try:
        data_settings = DataSettings(
            start=_date(data["start"], "data.start", source),
            days=int(data["days"]),
            events_per_day=int(data["events-per-day"]),
            users=int(data["users"]),
            seed=int(data["seed"]),
        )
    except KeyError as e:
        raise ConfigError(f"{source}: data.{e.args[0]} is missing") from None
    settings = PipelineSettings(
        environment=str(doc["environment"]),
        root=root_path,
        tablestore=tablestore,
        landing=root_path / str(doc["landing"]),
        data=data_settings,
        evolution_at=_date(doc["evolution"]["at"], "evolution.at", source),
        cutover=_date(doc["rollover"]["cutover"], "rollover.cutover", source),
        erasure_users=tuple(int(u) for u in doc["erasure"].get("requested-users") or ()),
        trino=doc.get("trino"),
        source=source,
        retention_days=_retention_days(doc.get("retention"), source),
        events_format_version=_events_format_version(doc.get("events"), source),
    )
    if not data_settings.start < settings.evolution_at <= settings.cutover < data_settings.end:
        raise ConfigError(
            f"{source}: the dates must satisfy data.start < evolution.at <= rollover.cutover < the day after the "
            f"last landing day ({data_settings.start} < {settings.evolution_at} <= {settings.cutover} "
            f"< {data_settings.end})"
        )
    return settings

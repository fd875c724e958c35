"""The pipeline's settings: one YAML file per environment (``embedded`` or ``stack``).

``$LAKEHOUSE_ENV`` picks the environment (``embedded`` by default), ``$LAKEHOUSE_SETTINGS``
names another settings file, and ``$LAKEHOUSE_ROOT`` replaces the file's ``root``. The
``tablestore`` section is a tablestore configuration (docs/design.md, section 7) whose relative
paths resolve against ``root``.
"""

from __future__ import annotations

import contextlib
import contextvars
import datetime
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import yaml
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator
from pydantic_core import PydanticCustomError

from tablestore.config import LakehouseConfig, parse_config
from tablestore.config_problems import FILE_SPELLING, validated
from tablestore.errors import ConfigError

CONFIG_DIR = Path(__file__).parent / "config"
ENVIRONMENTS = ("embedded", "stack")
CATALOG = "lakehouse"
DATABASE = "shop"


def table_name(name: str) -> str:
    """The full name of a table of the shop database: ``lakehouse.shop.<name>``."""
    return f"{CATALOG}.{DATABASE}.{name}"


def _date(value: Any) -> datetime.date:
    if isinstance(value, datetime.date):
        return value
    try:
        return datetime.date.fromisoformat(str(value))
    except ValueError:
        raise PydanticCustomError("config_must", "must be a date (YYYY-MM-DD), got {got}",
                                  {"got": repr(value)}) from None


_Date = Annotated[datetime.date, BeforeValidator(_date)]


class _Section(BaseModel):
    # Keys as the file spells them: the field events_per_day is the key events-per-day.
    model_config = ConfigDict(frozen=True, **FILE_SPELLING)


class DataSettings(_Section):
    """The generated landing data: which days, how many events and users, and the seed."""

    start: _Date
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


class _Evolution(_Section):
    at: _Date


class _Rollover(_Section):
    cutover: _Date


class _Erasure(_Section):
    requested_users: Annotated[tuple[int, ...], BeforeValidator(lambda v: () if v is None else v)] = ()


class _Retention(_Section):
    # Days of events to keep (counted back from the end of the landed data); None: no retention.
    days: Any = None

    @field_validator("days")
    @classmethod
    def _whole_days(cls, days: Any) -> int | None:
        if days is not None and (isinstance(days, bool) or not isinstance(days, int) or days < 1):
            raise PydanticCustomError("config_must", "must be a whole number of days >= 1, got {got}",
                                      {"got": repr(days)})
        return days


class _Events(_Section):
    # 2 by default: the stack's Trino 476 does not read v3's deletion vectors (Trino 480 does).
    format_version: Any = 2

    @field_validator("format_version")
    @classmethod
    def _two_or_three(cls, version: Any) -> int:
        if isinstance(version, bool) or version not in (2, 3, "2", "3"):
            raise PydanticCustomError("config_must", "must be 2 or 3, got {got}", {"got": repr(version)})
        return int(version)


class _Automation(_Section):
    # Whether the sensors and the maintenance schedule start running by themselves.
    running: bool = True
    # The shortest time between two ticks of each sensor (None: each sensor's own default).
    tick_seconds: int | None = Field(default=None, ge=1)


class LandingBucket(_Section):
    """An S3 bucket (MinIO in the stack) that the sensors watch for landed files."""

    endpoint: str
    name: str
    region: str = "us-east-1"


def _section(value: Any) -> Any:
    return {} if value is None else value


class InProcessLimits(_Section):
    """When the downstream refresh of a change runs in the run's process (tablestore's scan and
    pyarrow) instead of Spark (settings ``changes: {in-process: {...}}``). Every bound is known
    from manifests before a row is read: the changelog's planned data files and their rows (an
    upper bound of the changed rows, so of the keys touched), and the rows the recompute's
    pruned scan plans (what streams through the process, one file at a time). A change over any
    bound, and every full recomputation, runs in Spark. 0 turns the in-process path off."""

    # A misspelt bound is refused, not silently left at its default.
    model_config = ConfigDict(frozen=True, extra="forbid", **FILE_SPELLING)
    max_files: int = Field(default=32, ge=0)
    max_rows: int = Field(default=100_000, ge=0)
    max_scan_rows: int = Field(default=2_000_000, ge=0)


class _Changes(_Section):
    model_config = ConfigDict(frozen=True, extra="forbid", **FILE_SPELLING)
    in_process: Annotated[InProcessLimits, BeforeValidator(_section)] = Field(default_factory=InProcessLimits)


class _DataDocs(_Section):
    # Where GX's Data Docs site is served (e.g. http://127.0.0.1:3001); None: links are file:// URLs.
    url: str | None = None


class _Document(_Section):
    """A settings file, key by key."""

    environment: str
    root: str
    tablestore: dict[str, Any]
    landing: str
    data: DataSettings
    evolution: _Evolution
    rollover: _Rollover
    erasure: Annotated[_Erasure, BeforeValidator(_section)]
    trino: dict[str, Any] | None = None
    retention: Annotated[_Retention, BeforeValidator(_section)] = Field(default_factory=_Retention)
    events: Annotated[_Events, BeforeValidator(_section)] = Field(default_factory=_Events)
    automation: Annotated[_Automation, BeforeValidator(_section)] = Field(default_factory=_Automation)
    landing_bucket: LandingBucket | None = None
    data_docs: Annotated[_DataDocs, BeforeValidator(_section)] = Field(default_factory=_DataDocs)
    changes: Annotated[_Changes, BeforeValidator(_section)] = Field(default_factory=_Changes)


class PipelineSettings(_Section):
    """The validated settings of one environment, with its paths resolved against ``root``."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

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
    # Whether the sensors and the maintenance schedule run by default (settings `automation:
    # {running: false}` leaves them stopped until someone starts them in the UI).
    automation_running: bool = True
    # Settings `automation: {tick-seconds: N}`: the sensors' shortest interval (the stack's is short).
    tick_seconds: int | None = None
    # Settings `landing-bucket`: the sensors watch this bucket, not the local landing folder, and
    # the runs copy what they ingest from it (pipelines/defs/ingest/landing_bucket.py).
    landing_bucket: LandingBucket | None = None
    # The URL the Data Docs site is served at (settings `data-docs: {url: ...}`); None: the checks
    # link to the pages as files.
    data_docs_url: str | None = None
    # Settings `changes: {in-process: {...}}`: how small a change is refreshed without Spark.
    in_process: InProcessLimits = Field(default_factory=InProcessLimits)

    @property
    def events_landing(self) -> Path:
        return self.landing / "events"

    @property
    def requests_landing(self) -> Path:
        return self.landing / "erasure_requests"

    @property
    def data_docs(self) -> Path:
        """GX's Data Docs site, which every validation of the pipeline's checks adds its page to."""
        return self.root / "data_docs"

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
    document = validated(_Document, doc, source)
    root_path = Path(root or os.environ.get("LAKEHOUSE_ROOT") or document.root).absolute()
    tablestore = parse_config(yaml.safe_dump(document.tablestore), source=f"{source} (tablestore)",
                              base_dir=root_path)
    if CATALOG not in tablestore.catalogs:
        raise ConfigError(f"{source}: the tablestore section must define the catalog {CATALOG!r}")
    data = document.data
    settings = PipelineSettings(
        environment=document.environment,
        root=root_path,
        tablestore=tablestore,
        landing=root_path / document.landing,
        data=data,
        evolution_at=document.evolution.at,
        cutover=document.rollover.cutover,
        erasure_users=document.erasure.requested_users,
        trino=document.trino,
        source=source,
        retention_days=document.retention.days,
        events_format_version=document.events.format_version,
        automation_running=document.automation.running,
        tick_seconds=document.automation.tick_seconds,
        landing_bucket=document.landing_bucket,
        data_docs_url=document.data_docs.url.rstrip("/") if document.data_docs.url else None,
        in_process=document.changes.in_process,
    )
    if not data.start < settings.evolution_at <= settings.cutover < data.end:
        raise ConfigError(
            f"{source}: the dates must satisfy data.start < evolution.at <= rollover.cutover < the day after the "
            f"last landing day ({data.start} < {settings.evolution_at} <= {settings.cutover} "
            f"< {data.end})"
        )
    return settings


# Which settings file and root the code location is being built for, and those settings, loaded
# once. ``dagster dev`` and the daemon load the definitions with neither (the environment
# decides); ``build_definitions`` and the tests name them. The defs folder's modules are loaded by
# Dagster (``load_from_defs_folder``) without arguments, so they read the selection from here.
_SELECTION: contextvars.ContextVar[tuple[str | None, str | None, PipelineSettings | None]] = contextvars.ContextVar(
    "lakehouse_settings_selection", default=(None, None, None))


@contextlib.contextmanager
def use_settings(path: str | os.PathLike[str] | None = None, root: str | os.PathLike[str] | None = None,
                 settings: PipelineSettings | None = None) -> Iterator[None]:
    """Within the block, ``selected_settings`` are those of ``path`` with ``root``, loaded once
    here (or ``settings``, when the caller has loaded them)."""
    path_text, root_text = None if path is None else str(path), None if root is None else str(root)
    loaded = settings if settings is not None else load_settings(path_text, root_text)
    token = _SELECTION.set((path_text, root_text, loaded))
    try:
        yield
    finally:
        _SELECTION.reset(token)


def selection() -> tuple[str | None, str | None]:
    """The (settings file, root) chosen by ``use_settings``; (None, None) means the environment."""
    path, root, _ = _SELECTION.get()
    return path, root


def selected_settings() -> PipelineSettings:
    """The settings that the definitions being built run with (see ``use_settings``)."""
    path, root, loaded = _SELECTION.get()
    return loaded if loaded is not None else load_settings(path, root)

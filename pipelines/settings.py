"""The pipeline's settings: one YAML file per environment (``embedded`` or ``stack``).

``$LAKEHOUSE_ENV`` picks the environment (``embedded`` by default), ``$LAKEHOUSE_SETTINGS``
names another settings file, and ``$LAKEHOUSE_ROOT`` replaces the file's ``root``. Each section
of the file is a model here, its keys the fields with hyphens (``events-per-day``), and the
``tablestore`` section is a tablestore configuration (docs/design.md, section 7): a
:class:`~tablestore.config.LakehouseConfig`, its relative paths, as the other paths of the file,
resolved against ``root``. ``${VAR}`` in any value is the environment variable, as in a
tablestore configuration.
"""

from __future__ import annotations

import contextlib
import contextvars
import datetime
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

from pydantic import AfterValidator, Field, ValidationInfo, model_validator
from pydantic_core import PydanticCustomError

from tablestore.config import LakehouseConfig
from tablestore.config_files import ConfigFile, FileModel, Flag, Listed, read_file, yaml_mapping
from tablestore.config_problems import checked, problem_at, validated
from tablestore.errors import ConfigError

CONFIG_DIR = Path(__file__).parent / "config"
ENVIRONMENTS = ("embedded", "stack")
CATALOG = "lakehouse"
DATABASE = "shop"


def table_name(name: str) -> str:
    """The full name of a table of the shop database: ``lakehouse.shop.<name>``."""
    return f"{CATALOG}.{DATABASE}.{name}"


def _under_root(path: Path, info: ValidationInfo) -> Path:
    # The loader's context is the file with ``root`` as its directory.
    loading = ConfigFile.of(info)
    return Path(loading.path(str(path))) if loading else path


_Date = Annotated[datetime.date, Field(description="a date (YYYY-MM-DD)")]
# A path of the file: relative to ``root``.
_UnderRoot = Annotated[Path, AfterValidator(_under_root)]


class DataSettings(FileModel):
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


class Evolution(FileModel):
    # Days from here on carry `device`; the schema evolves before they land.
    at: _Date


class Rollover(FileModel):
    # The daily asset ends here and the hourly asset starts.
    cutover: _Date


class Erasure(FileModel):
    # The subjects of the landed erasure requests.
    requested_users: Listed[int] = ()


class Retention(FileModel):
    # Days of events to keep (counted back from the end of the landed data); None: no retention.
    days: Annotated[int | None, checked(lambda days: days is None or (type(days) is int and days >= 1),
                                        "a whole number of days >= 1")] = None


class Events(FileModel):
    # The Iceberg format version of `events`. 2 by default: the stack's Trino 476 does not read
    # v3's deletion vectors (Trino 480 does).
    format_version: Annotated[int, checked(lambda version: version in (2, 3, "2", "3"), "2 or 3")] = 2


class Automation(FileModel):
    # Whether the sensors and the maintenance schedule start running by themselves (false leaves
    # them stopped until someone starts them in the UI).
    running: Flag = True
    # The shortest time between two ticks of each sensor (None: each sensor's own default).
    tick_seconds: int | None = Field(default=None, ge=1)


class LandingBucket(FileModel):
    """An S3 bucket (MinIO in the stack) that the sensors watch for landed files, instead of the
    local landing folder; the runs copy what they ingest from it (pipelines/defs/ingest/landing_bucket.py)."""

    endpoint: str
    name: str
    region: str = "us-east-1"


class InProcessLimits(FileModel):
    """When the downstream refresh of a change runs in the run's process (tablestore's scan and
    pyarrow) instead of Spark (settings ``changes: {in-process: {...}}``). Every bound is known
    from manifests before a row is read: the changelog's planned data files and their rows (an
    upper bound of the changed rows, so of the keys touched), and the rows the recompute's
    pruned scan plans (what streams through the process, one file at a time). A change over any
    bound, and every full recomputation, runs in Spark. 0 turns the in-process path off."""

    max_files: int = Field(default=32, ge=0)
    max_rows: int = Field(default=100_000, ge=0)
    max_scan_rows: int = Field(default=2_000_000, ge=0)


class Changes(FileModel):
    in_process: InProcessLimits = Field(default_factory=InProcessLimits)


class DataDocs(FileModel):
    # Where GX's Data Docs site is served (e.g. http://127.0.0.1:3001); None: links are file:// URLs.
    url: Annotated[str | None, AfterValidator(lambda url: url.rstrip("/") if url else None)] = None
    # GX's Data Docs site, which every validation of the pipeline's checks adds its page to.
    site: _UnderRoot = Field(Path("data_docs"), validate_default=True)


class PipelineSettings(FileModel):
    """The settings of one environment, key by key, with their paths resolved against ``root``."""

    environment: str
    root: Annotated[Path, AfterValidator(Path.absolute)]
    tablestore: LakehouseConfig
    landing: _UnderRoot
    data: DataSettings
    evolution: Evolution
    rollover: Rollover
    erasure: Erasure
    trino: dict[str, Any] | None = None
    retention: Retention = Field(default_factory=Retention)
    events: Events = Field(default_factory=Events)
    automation: Automation = Field(default_factory=Automation)
    landing_bucket: LandingBucket | None = None
    # Validated when absent too, so that its site is under root.
    data_docs: DataDocs = Field(default={}, validate_default=True)
    changes: Changes = Field(default_factory=Changes)

    @model_validator(mode="after")
    def _consistent(self) -> PipelineSettings:
        if CATALOG not in self.tablestore.catalogs:
            raise problem_at(("tablestore", "catalogs"), f"must define the catalog {CATALOG!r}")
        start, at, cutover, end = self.data.start, self.evolution.at, self.rollover.cutover, self.data.end
        if not start < at <= cutover < end:
            raise PydanticCustomError("config", "the dates must satisfy data.start < evolution.at <= rollover.cutover "
                                      f"< the day after the last landing day ({start} < {at} <= {cutover} < {end})")
        return self

    @property
    def source(self) -> str:
        """The settings file."""
        return self.tablestore.source

    @property
    def events_landing(self) -> Path:
        return self.landing / "events"

    @property
    def requests_landing(self) -> Path:
        return self.landing / "erasure_requests"

    @property
    def daily_dates(self) -> list[datetime.date]:
        """Days the daily asset ingests: from the first landing day up to the cut-over."""
        return [d for d in self.data.dates if d < self.rollover.cutover]


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
    """The settings from ``path`` (default: the environment's file); ``root`` (else
    ``$LAKEHOUSE_ROOT``) overrides the file's root."""
    file = Path(path) if path is not None else settings_path()
    doc = yaml_mapping(read_file(file, "the pipeline settings file"), str(file), PipelineSettings)
    if root or os.environ.get("LAKEHOUSE_ROOT"):
        doc["root"] = str(root or os.environ["LAKEHOUSE_ROOT"])
    base_dir = Path(str(doc.get("root") or "")).absolute()
    return validated(PipelineSettings, doc, str(file), context=ConfigFile(str(file), str(base_dir)))


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

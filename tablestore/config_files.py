"""How tablestore reads a settings file (the lakehouse configuration with its ``server:``
section, the pipeline's settings): the file's text as a YAML mapping with ``${VAR}`` replaced,
the context its models validate in (:class:`ConfigFile`: its name, and the directory its
relative paths start from), and :class:`FileModel`, the base of the model of every section, with
the value types they share. :mod:`tablestore.config_problems` says what is wrong with a file.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, ClassVar, TypeVar

import pydantic
import yaml
from pydantic_core import PydanticCustomError

from tablestore.config_problems import FILE_SPELLING, keys_at
from tablestore.errors import ConfigError, ValidationError
from tablestore.option_values import truth

Item = TypeVar("Item")
_ENV_VAR = re.compile(r"\$(\$?)\{([^}]*)\}")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class FileModel(pydantic.BaseModel):
    """A mapping of a configuration file: its keys are the fields with hyphens (FILE_SPELLING),
    an unknown key is an error, and an empty key (``spark:``) is an empty mapping. Frozen and
    compared by value; a number where text is meant (a name, a secret) is read as text."""

    model_config = pydantic.ConfigDict(frozen=True, extra="forbid", coerce_numbers_to_str=True, **FILE_SPELLING)
    # The keys a mapping needs, written as a file would, for the message about a missing one.
    EXAMPLE: ClassVar[str] = ""

    @pydantic.model_validator(mode="before")
    @classmethod
    def _empty_is_a_mapping(cls, data: Any) -> Any:
        return {} if data is None else data

    def __str__(self) -> str:
        # pydantic's str() shows every field; a model's repr is where it hides its secrets.
        return repr(self)


def _listed(value: Any) -> Any:
    return () if value is None else value if isinstance(value, list | tuple) else (value,)


def _flag(value: Any) -> bool:
    try:
        return truth(value, "")
    except ValidationError:
        raise PydanticCustomError("config_must", "must be true or false, got {got}", {"got": repr(value)}) from None


# A list, or one item written alone (``catalogs: lakehouse``); an empty key is an empty list.
Listed = Annotated[tuple[Item, ...], pydantic.BeforeValidator(_listed)]
# true or false as every flag of the house reads them (tablestore.option_values); anything else is an error.
Flag = Annotated[bool, pydantic.BeforeValidator(_flag)]


@dataclass(frozen=True)
class ConfigFile:
    """The validation context of a file: its name, and the directory its relative paths start from."""

    source: str
    base_dir: str

    @staticmethod
    def of(info: pydantic.ValidationInfo) -> ConfigFile | None:
        """The file being validated, or None for a model made in code or from JSON."""
        return info.context if isinstance(info.context, ConfigFile) else None

    def path(self, location: str) -> str:
        if "://" in location or location.startswith("file:"):
            return location
        return os.path.normpath(os.path.join(self.base_dir, os.path.expanduser(location)))


def read_file(path: Path, what: str) -> str:
    """The text of the file ``path``; ``what`` names it when it is missing or unreadable."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{what} {path} does not exist") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"cannot read {what} {path}: {e}") from None


def yaml_mapping(text: str, source: str, model: type[pydantic.BaseModel]) -> dict[str, Any]:
    """The mapping of keys in the YAML ``text`` of a file that ``model`` reads, with ``${VAR}``
    replaced in its values; a ConfigError if it is none (``source`` names the file)."""
    try:
        doc = yaml.safe_load(text)
    except (yaml.YAMLError, ValueError) as e:  # ValueError: a date that is none (2026-13-01)
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise ConfigError(f"{source}: the file is not valid YAML{where}: {getattr(e, 'problem', None) or e}") from None
    if not isinstance(doc, dict):
        keys = ", ".join(keys_at(model, ()))
        raise ConfigError(f"{source}: the file is empty; it must be a mapping of keys {keys}" if doc is None else
                          f"{source}: the file must be a mapping of keys {keys}; got {type(doc).__name__}")
    return _substitute(doc, "", source)


def _substitute(value: Any, where: str, source: str) -> Any:
    """``value`` with ``${VAR}`` replaced in every string (keys are left as written)."""
    if isinstance(value, dict):
        return {k: _substitute(v, f"{where}.{k}" if where else str(k), source) for k, v in value.items()}
    if isinstance(value, list):
        return [_substitute(v, f"{where}[{i}]", source) for i, v in enumerate(value)]

    def replace(match: re.Match[str]) -> str:
        if match.group(1):  # $${...} stands for a literal ${...}
            return "${" + match.group(2) + "}"
        name, has_default, default = match.group(2).partition(":-")
        if not _ENV_NAME.fullmatch(name):
            raise ConfigError(f"{source}: {where}: {match.group(0)!r} is not a valid ${{VARIABLE}} reference")
        if name not in os.environ and not has_default:
            raise ConfigError(f"{source}: {where} refers to the environment variable {name}, which is not set; "
                              f"set it or write ${{{name}:-default}}")
        return os.environ.get(name, default)

    return _ENV_VAR.sub(replace, value) if isinstance(value, str) else value


__all__ = ["ConfigFile", "FileModel", "Flag", "Listed", "read_file", "yaml_mapping"]

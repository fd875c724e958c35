"""What is wrong with a configuration file, in one line: the key, the problem and the fix.

Every file tablestore reads (the lakehouse configuration, its ``server:`` section, the
pipeline's settings) is checked by pydantic models (:class:`tablestore.config_files.FileModel`),
and :func:`validated` turns the model's first error into a :class:`ConfigError` that names the
file and the key as the file spells them (``catalogs[0].s3.endpoint``). What a model cannot say by
its types, its validators say with ``PydanticCustomError`` of these types:

- ``config_value``: "<key>: <message>";
- ``config_must``: "<key> <message>" ("must be ...", "needs ...", "has no ...");
- ``config_type``: "<key> must be <message>, got <value>";
- ``config``: the message as it is (a problem of the whole file, which names its keys itself),
  after the key of its section when the model is a section of another file.

A check across fields names the key it is about with :func:`problem_at`. Otherwise the field's
``description`` says what the value must be, and a model's ``EXAMPLE`` what a missing key
looks like.
"""

from __future__ import annotations

import difflib
import types
import typing
from collections.abc import Callable
from typing import Any, TypeVar

import pydantic
from pydantic.fields import FieldInfo
from pydantic_core import ErrorDetails, PydanticCustomError

from tablestore.errors import ConfigError

Model = TypeVar("Model", bound=pydantic.BaseModel)
Loc = tuple[int | str, ...]
_HYPHENS = pydantic.AliasGenerator(validation_alias=lambda name: name.replace("_", "-"),
                                   serialization_alias=lambda name: name.replace("_", "-"))
# How a file spells keys: the field `token_ttl_seconds` is the key `token-ttl-seconds` (an alias
# may say otherwise). Code may construct models by field name.
FILE_SPELLING = pydantic.ConfigDict(validate_by_name=True, serialize_by_alias=True, alias_generator=_HYPHENS)


def checked(test: Callable[[Any], bool], what: str) -> pydantic.BeforeValidator:
    """A check of a value as the file writes it: "<key> must be <what>, got <value>" unless ``test``."""

    def check(value: Any) -> Any:
        if not test(value):
            raise PydanticCustomError("config_type", what)
        return value

    return pydantic.BeforeValidator(check)


def problem_at(at: Loc, message: str) -> PydanticCustomError:
    """A problem found by a check across the fields of a model, about its key ``at``: "<key> <message>"."""
    return PydanticCustomError("config_must", message, {"at": at})


def validated(model: type[Model], data: Any, source: str, *, prefix: tuple[str, ...] = (),
              context: Any = None) -> Model:
    """``data`` as a ``model``, or a ConfigError "<source>: <problem>" about its first error.

    ``prefix`` is where the model's section sits in the file (``("server",)``). A file spells
    keys by their aliases only (code may construct models by field name)."""
    try:
        return model.model_validate(data, context=context, by_alias=True, by_name=False)
    except pydantic.ValidationError as e:
        raise ConfigError(f"{source}: {problem_message(e.errors(), model, prefix)}") from None


def key_path(loc: Loc) -> str:
    """A location as the file spells it: ``catalogs[0].s3.endpoint``."""
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def problem_message(errors: list[ErrorDetails], model: type[pydantic.BaseModel], prefix: tuple[str, ...] = ()) -> str:
    """The message for the first of pydantic's ``errors`` about ``model`` (found at the keys
    ``prefix`` of its file).

    A key of the file's own mapping (no ``prefix``) is quoted, and an unknown one gets the
    closest known key as a hint; inside a section, the key is named by its path."""
    error = errors[0]
    loc, found, models = _walk(model, tuple(error["loc"]))
    where, kind, msg = key_path((*prefix, *loc, *error.get("ctx", {}).get("at", ()))), error["type"], error["msg"]
    if kind == "config":
        return f"{key_path((*prefix, *loc))}: {msg}" if loc else msg
    if kind == "config_value":
        return f"{where}: {msg}"
    if kind == "config_must":
        return f"{where} {msg}"
    top_level = not prefix and len(loc) == 1
    if kind == "missing":
        example = next((getattr(m, "EXAMPLE", "") for m in _walk(model, loc[:-1])[2]), "")
        if example:  # every key the mapping lacks, and what they look like
            lacks = [str(e["loc"][-1]) for e in errors if e["type"] == "missing" and e["loc"][:-1] == error["loc"][:-1]]
            return f"{key_path((*prefix, *loc[:-1]))} needs {', '.join(lacks)} (for example {example})"
        return f"the key {where!r} is missing" if top_level else f"{where} is missing"
    if kind == "extra_forbidden":
        allowed = keys_at(model, loc[:-1])
        if prefix:
            return f"unknown key {where}; expected one of {', '.join(allowed)}"
        close = difflib.get_close_matches(str(loc[-1]), allowed, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        what = "top-level key" if top_level else "key"
        return f"unknown {what} {where!r}{hint}; expected one of {', '.join(allowed)}"
    shown, got = (repr(where) if top_level else where), repr(error.get("input"))
    if kind == "config_type":
        return f"{shown} must be {msg}, got {got}"
    if kind in ("int_parsing", "int_type", "int_from_float"):
        return f"{shown} must be an integer, got {got}"
    description = found.description if found else None
    if kind == "greater_than_equal":
        reason = f": {description}" if description else ""
        return f"{shown} must be at least {error.get('ctx', {})['ge']}{reason}"
    if kind in ("model_type", "model_attributes_type", "dict_type") and not description:
        return f"{shown} must be a mapping ({', '.join(_keys(models))}), got {got}"
    return f"{shown} must be {description or 'a different kind of value'}, got {got}"


def keys_at(model: type[pydantic.BaseModel], loc: Loc) -> list[str]:
    """The keys the mapping at ``loc`` may have, as the file spells them."""
    return _keys(_walk(model, loc)[2])


def _keys(models: list[type[pydantic.BaseModel]]) -> list[str]:
    # init=False marks a field the loader fills in (where the file came from), never the file.
    return list(dict.fromkeys(k for m in models for n, f in m.model_fields.items() if f.init is not False
                              for k in _spellings(n, f)))


def _spellings(name: str, field: FieldInfo) -> list[str]:
    """The keys a field is written as: its alias, or each of its alias choices (``role``, ``roles``)."""
    alias = field.validation_alias
    if isinstance(alias, pydantic.AliasChoices):
        return [choice for choice in alias.choices if isinstance(choice, str)]
    return [(alias if isinstance(alias, str) else field.alias) or name]


def _walk(model: type[pydantic.BaseModel], loc: Loc) -> tuple[Loc, FieldInfo | None, list[type[pydantic.BaseModel]]]:
    """``loc`` without the tags of discriminated unions (pydantic puts the member's tag in the
    location; the file never has it), the field that describes the value there (for an item,
    its list's field), and the models that value may be."""
    path: list[int | str] = []
    found: FieldInfo | None = None
    models, annotation = [model], None
    for part in loc:
        if isinstance(part, int):
            # An item of a list or tuple, or a value of a mapping (the file's list may be kept by name).
            args = [a for a in typing.get_args(_bare(annotation)) if a is not Ellipsis]
            annotation = args[-1] if args else None
        else:
            fields = {key: f for m in models for name, f in m.model_fields.items() for key in _spellings(name, f)}
            tagged = [m for m in models if (part,) in (typing.get_args(f.annotation) for f in m.model_fields.values())]
            if part not in fields and len(models) > 1 and tagged:
                models = tagged  # the tag of a discriminated union's member: not a key
                continue
            found = fields.get(part)
            annotation = found.annotation if found else None
        path.append(part)
        models = _models(annotation)
    return tuple(path), found, models


def _bare(annotation: Any) -> Any:
    while typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    return annotation


def _models(annotation: Any) -> list[type[pydantic.BaseModel]]:
    """The models an annotation holds directly: ``X``, ``X | Y``, ``Annotated[X | Y, ...]``."""
    bare = _bare(annotation)
    if isinstance(bare, type) and issubclass(bare, pydantic.BaseModel):
        return [bare]
    if typing.get_origin(bare) in (typing.Union, types.UnionType):
        return [m for arg in typing.get_args(bare) for m in _models(arg)]
    return []


__all__ = ["FILE_SPELLING", "checked", "key_path", "keys_at", "problem_at", "problem_message", "validated"]

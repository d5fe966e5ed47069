"""Turning pydantic's validation errors into one message a person can act on.

Each problem is told as `FILE:LINE: field.path: what is wrong`, where FILE is the site
file that set the offending value (from the merge's provenance, so a bad value from the
user's override names the user's file, not the admin's). Unknown keys list the valid
ones, and suggest the closest. The first problem is told in full; any others are named
after it, so that the CLI can still show it on one line.
"""

from __future__ import annotations

import difflib
import types
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from jobsmith.site_config.layers import Origin, Provenance
from jobsmith.site_config.yamlfile import KeyPath

_SHOWN_INPUT = 60  # characters of a bad value quoted back; whole mappings are noise


def describe_validation_error(
    exc: ValidationError,
    model: type[BaseModel],
    provenance: Provenance,
    files: Sequence[Path],
    document: str = "site file",
) -> str:
    """One message for every problem in exc: the first in full, the others by field path
    (document: what the files are, for "required, but no site file sets it")."""
    problems = sorted(exc.errors(include_url=False), key=lambda e: _position(e, provenance, files))
    first = _describe(problems[0], model, provenance, files, document)
    others = [dotted(_paths(p)[0]) for p in problems[1:]]
    if not others:
        return first
    return f"{first} (and {len(others)} more: {', '.join(others)})"


def _position(
    error: ErrorDetails, provenance: Provenance, files: Sequence[Path]
) -> tuple[int, int]:
    """Sort key putting problems in reading order: by file, then by line; unset ones last."""
    origins = [o for path in _paths(error) for o in provenance.origins_of(path)]
    if not origins:
        return (len(files), 0)
    first = origins[0]
    file_index = files.index(first.file) if first.file in files else len(files)
    return (file_index, first.line or 0)


def _describe(
    error: ErrorDetails,
    model: type[BaseModel],
    provenance: Provenance,
    files: Sequence[Path],
    document: str,
) -> str:
    paths = _paths(error)
    origins: list[Origin] = []
    for path in paths:
        origins += [o for o in provenance.origins_of(path) if o not in origins]
    where = ", ".join(str(o) for o in origins) or " + ".join(str(f) for f in files)
    shown = " and ".join(dotted(p) for p in paths)
    return f"{where}: {shown}: {_what(error, model, document)}"


def _paths(error: ErrorDetails) -> list[KeyPath]:
    """The key paths at fault: the error's location, refined by a cross-field check."""
    loc = tuple(part for part in error["loc"] if part != "[key]")
    fields = (error.get("ctx") or {}).get("fields")
    if not fields:
        return [loc]
    return [(*loc, *sub) for sub in fields]


def _what(error: ErrorDetails, model: type[BaseModel], document: str) -> str:
    kind = error["type"]
    if kind == "missing":
        return f"required, but no {document} sets it"
    if kind == "extra_forbidden":
        return _unknown_key(error["loc"], model)
    if kind in ("site_config", "duration", "memory", "path_expansion", "name"):
        return error["msg"]  # ours: already says what was given and what is wanted
    return f"{_lower(error['msg'])} (got {_short(error['input'])})"


def _unknown_key(loc: tuple[int | str, ...], model: type[BaseModel]) -> str:
    key = str(loc[-1])
    valid = _valid_keys(model, loc[:-1])
    if not valid:
        return f"unknown key {key!r}"
    close = difflib.get_close_matches(key, valid, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return f"unknown key {key!r}{hint}; valid keys here: {', '.join(valid)}"


def _valid_keys(model: type[BaseModel], loc: tuple[int | str, ...]) -> list[str]:
    """Field names of the model found by following loc down from model (empty if none)."""
    current: Any = model
    for part in loc:
        current = _unwrap(current)
        if isinstance(current, type) and issubclass(current, BaseModel):
            info = current.model_fields.get(str(part))
            if info is None:
                return []
            current = info.annotation
        elif get_origin(current) in (dict, list):
            current = get_args(current)[-1]  # dict[K, V] -> V, list[T] -> T
        else:
            return []
    current = _unwrap(current)
    if isinstance(current, type) and issubclass(current, BaseModel):
        return list(current.model_fields)
    return []


def _unwrap(annotation: Any) -> Any:
    """Peel Annotated[...] and Optional[...] off a type to reach the model or container."""
    origin = get_origin(annotation)
    if origin is Annotated:
        return _unwrap(get_args(annotation)[0])
    if origin in (Union, types.UnionType):
        real = [a for a in get_args(annotation) if a is not type(None)]
        return _unwrap(real[0]) if len(real) == 1 else annotation
    return annotation


def dotted(path: KeyPath) -> str:
    """path as a person writes it: `partitions.gpu.max_time`, `paths.allowed_roots[0]`."""
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else f".{part}"
    return text.lstrip(".") or "(top level)"


def _lower(message: str) -> str:
    return message[:1].lower() + message[1:]


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= _SHOWN_INPUT else text[: _SHOWN_INPUT - 3] + "..."

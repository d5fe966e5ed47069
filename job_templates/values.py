"""Coercion of one raw parameter value to its typed form, with the spec's constraints.

Values arrive as strings from the CLI (`-P key=value`) or typed from a YAML/JSON params
file; both go through the same function. Paths come out relative-or-absolute as given:
resolving them against the allowed roots is paths.py's job. Errors are ValueErrors whose
message describes the problem; the caller adds the template and parameter names.
"""

from __future__ import annotations

import math
import re
import shlex
import unicodedata
from collections.abc import Callable, Sequence
from pathlib import Path

from jobsmith.job_templates.params import PATH_TYPES, ParamSpec, ParamType
from jobsmith.workload_caps import MAX_LIST_ITEMS, check_count

#: the longest text value accepted (PATH_MAX on Linux)
MAX_TEXT = 4096

# Unicode categories refused in every value: controls (newline, tab, NUL, ESC, NEL),
# format characters (bidi overrides that make code read differently than it runs),
# line/paragraph separators, and lone surrogates.
_REFUSED_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs"})
_INT = re.compile(r"^[+-]?[0-9]+$")
_TRUE = frozenset({"true", "yes", "on", "1"})
_FALSE = frozenset({"false", "no", "off", "0"})


def check_text(text: str) -> str:
    """Refuse control characters (a newline could start a new line of script) and huge text."""
    for char in text:
        if unicodedata.category(char) in _REFUSED_CATEGORIES:
            raise ValueError(
                f"contains a control character (U+{ord(char):04X}); "
                "values must be a single line of printable text"
            )
    if len(text) > MAX_TEXT:
        raise ValueError(f"is {len(text)} characters long; the limit is {MAX_TEXT}")
    return text


#: the longest multi-line text accepted (a generated configuration file)
MAX_MULTILINE = 65536
_LINE_BREAKS = frozenset("\n\t")


def check_multiline(text: str) -> str:
    """Text of several lines: newlines and tabs pass, other controls are refused as in
    check_text. It is only ever written to a file through the q filter (one quoted shell
    word), so a newline in it is data, never a new line of script."""
    for char in text:
        if char not in _LINE_BREAKS and unicodedata.category(char) in _REFUSED_CATEGORIES:
            raise ValueError(
                f"contains a control character (U+{ord(char):04X}); "
                "text may hold lines and tabs but no other control character"
            )
    if len(text) > MAX_MULTILINE:
        raise ValueError(f"is {len(text)} characters long; the limit is {MAX_MULTILINE}")
    if any(line.startswith("#SBATCH") for line in text.split("\n")):
        # quoted, it is data; but a line of the script that starts so is one the renderer
        # refuses wholesale, and this says which value brought it
        raise ValueError("has a line starting with #SBATCH, which a batch script cannot carry")
    return text


def _as_multiline(raw: object) -> str:
    if isinstance(raw, str):
        return check_multiline(raw)
    raise ValueError(f"expected text, got {type(raw).__name__} {raw!r}")


def coerce(spec: ParamSpec, raw: object) -> object:
    """The typed value of raw for spec: str, int, float, bool, Path or a tuple of those.

    A path's pattern is not checked here but on the resolved path (check_pattern), since
    that is the text the job will see.
    """
    value = _COERCERS[spec.type](raw)
    _check_choices(spec, value)
    _check_range(spec, value)
    if spec.type not in PATH_TYPES:
        check_pattern(spec, value)
    return value


def _as_text(raw: object) -> str:
    # A params file may hold `seed: 42` for a str parameter; bools and floats are refused
    # because YAML turns `yes` and `1.10` into them, silently changing the text.
    if isinstance(raw, str):
        return check_text(raw)
    if isinstance(raw, int) and not isinstance(raw, bool):
        return str(raw)
    raise ValueError(f"expected text, got {type(raw).__name__} {raw!r} (quote it)")


def _as_nonempty_text(raw: object) -> str:
    text = _as_text(raw)
    if not text.strip():
        raise ValueError("is empty")
    return text


def _as_int(raw: object) -> int:
    if isinstance(raw, int) and not isinstance(raw, bool):
        return raw
    if isinstance(raw, str) and _INT.match(raw):
        return int(raw)
    raise ValueError(f"expected an integer, got {raw!r}")


def _as_float(raw: object) -> float:
    if isinstance(raw, bool) or not isinstance(raw, int | float | str):
        raise ValueError(f"expected a number, got {raw!r}")
    try:
        value = float(check_text(raw) if isinstance(raw, str) else raw)
    except ValueError:
        raise ValueError(f"expected a number, got {raw!r}") from None
    if not math.isfinite(value):
        raise ValueError(f"expected a finite number, got {raw!r}")
    return value


def _as_bool(raw: object) -> bool:
    if isinstance(raw, bool):
        return raw
    if isinstance(raw, str) and raw.lower() in _TRUE | _FALSE:
        return raw.lower() in _TRUE
    raise ValueError(f"expected true or false (yes/no, on/off, 1/0), got {raw!r}")


def _as_path(raw: object) -> Path:
    text = _as_nonempty_text(raw)
    if text.startswith("~"):
        # Nothing here expands '~'; taking it literally would make a directory named '~'.
        raise ValueError(f"{text!r} starts with '~', which is not expanded; give the full path")
    return Path(text)


def _as_list(
    raw: object, item: Callable[[object], object], split: Callable[[str], list[str]]
) -> tuple[object, ...]:
    items: Sequence[object]
    if isinstance(raw, str):
        items = split(check_text(raw))
    elif isinstance(raw, list | tuple):
        items = raw
    else:
        raise ValueError(f"expected a list, got {type(raw).__name__} {raw!r}")
    # counted before a value is made of each (a Path, a checked text)
    check_count(len(items), MAX_LIST_ITEMS, "items", "split the work over several jobs")
    return tuple(item(x) for x in items)


def _as_paths(raw: object) -> tuple[object, ...]:
    # From the CLI a list of paths is comma separated; a path containing a comma needs
    # a params file, where the list is a real list.
    value = _as_list(raw, _as_path, lambda text: [p for p in text.split(",") if p])
    if not value:
        raise ValueError("is an empty list")
    return value


def _as_args(raw: object) -> tuple[object, ...]:
    # From the CLI, arguments are split the way a shell would split them, so
    # `-P args="--lr 0.1 --name 'my run'"` means what it looks like.
    try:
        return _as_list(raw, _as_text, shlex.split)
    except ValueError as exc:  # shlex: "No closing quotation"
        raise ValueError(f"cannot split into words: {exc}") from None


_COERCERS: dict[ParamType, Callable[[object], object]] = {
    ParamType.STR: _as_text,
    ParamType.INT: _as_int,
    ParamType.FLOAT: _as_float,
    ParamType.BOOL: _as_bool,
    ParamType.CHOICE: _as_text,
    ParamType.PATH: _as_path,
    ParamType.PATHS: _as_paths,
    ParamType.ARGS: _as_args,
    ParamType.COMMAND: _as_nonempty_text,
    ParamType.TEXT: _as_multiline,
    ParamType.TABLE: _as_path,
}


def _check_choices(spec: ParamSpec, value: object) -> None:
    if spec.choices is not None and value not in spec.choices:
        valid = ", ".join(str(choice) for choice in spec.choices)
        raise ValueError(f"{value!r} is not a valid choice; valid: {valid}")


def _check_range(spec: ParamSpec, value: object) -> None:
    if not isinstance(value, int | float):
        return
    if spec.min is not None and value < spec.min:
        raise ValueError(f"{value} is below the minimum {_number(spec.min)}")
    if spec.max is not None and value > spec.max:
        raise ValueError(f"{value} is above the maximum {_number(spec.max)}")


def check_pattern(spec: ParamSpec, value: object) -> None:
    """Refuse a value (or any item of a list value) that does not fully match spec.pattern."""
    if spec.pattern is None:
        return
    texts = [str(v) for v in value] if isinstance(value, tuple) else [str(value)]
    for text in texts:
        if not re.fullmatch(spec.pattern, text):
            meaning = f" ({spec.pattern_help})" if spec.pattern_help else ""
            raise ValueError(f"{text!r} does not match the pattern {spec.pattern}{meaning}")


def _number(value: float) -> int | float:
    return int(value) if value.is_integer() else value

"""Escaping filters for template bodies, and the rule that every output is escaped.

A template body is shell code; parameter values are data. The only way a value may
reach the rendered text is through one of these filters, each of which escapes it for
the syntax it lands in and returns a `ShellSafe` string. The renderer's finalize hook
(`require_escaped`) refuses any other string, so forgetting `| q` is a render error
rather than an injection. Numbers pass through: they cannot carry shell syntax.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable
from pathlib import Path

from jinja2 import Undefined


class ShellSafe(str):
    """Text already escaped by a filter here: safe to place in a shell command line."""

    __slots__ = ()


class UnescapedOutput(Exception):
    """A template printed a value without passing it through an escaping filter."""


class EscapeError(Exception):
    """A value cannot be represented in the syntax a filter escapes for."""


def q(value: object) -> ShellSafe:
    """Quote one value as a single shell word (shlex.quote): `{{ input | q }}`."""
    return ShellSafe(shlex.quote(_scalar_text(value)))


def qlist(values: object) -> ShellSafe:
    """Quote each item of a list as its own shell word, space separated: `{{ files | qlist }}`."""
    if isinstance(values, str | bytes) or not isinstance(values, Iterable):
        raise EscapeError(f"qlist needs a list, got {type(values).__name__}; use q for one value")
    return ShellSafe(" ".join(q(item) for item in values))


def concat_file(value: object) -> ShellSafe:
    """One ffmpeg concat-demuxer line, `file '<path>'`, with `'` written as `'\\''`.

    Inside single quotes the concat parser (av_get_token) takes everything literally, so
    closing the quote, adding an escaped quote and reopening is the only escape needed.
    The same spelling is also inert shell text, hence ShellSafe.
    """
    text = _scalar_text(value)
    return ShellSafe("file '" + text.replace("'", "'\\''") + "'")


def require_escaped(value: object) -> object:
    """Jinja finalize hook: let escaped text and numbers through, refuse anything else."""
    if isinstance(value, ShellSafe | Undefined):
        return value  # Undefined raises its own error, naming the variable, when printed
    if isinstance(value, int | float) and not isinstance(value, bool):
        return value
    raise UnescapedOutput(
        f"a {type(value).__name__} value is printed without escaping; "
        "pipe it through | q (one word), | qlist (a list) or | concat_file"
    )


def _scalar_text(value: object) -> str:
    if isinstance(value, Undefined):
        str(value)  # StrictUndefined raises here, naming the variable
    if isinstance(value, bool) or not isinstance(value, str | int | float | Path):
        raise EscapeError(f"cannot escape a {type(value).__name__} value as one word")
    return str(value)

"""Groovy source text for values that come from the site: string literals that cannot inject.

A Nextflow config file is a Groovy script. A partition, account or QoS name written into it
raw could end the string and run code (`x'; System.exit(1); '`), or interpolate (`${…}` in a
double-quoted string). Every such value goes through `string_literal`, which writes a
single-quoted literal (Groovy never interpolates those) with backslash, quote and control
characters escaped.
"""

from __future__ import annotations

from types import MappingProxyType

# Named escapes for the characters that would end or break a single-quoted literal. Groovy
# (like Java) may translate `\uXXXX` anywhere in the source before lexing, so a quote,
# backslash or line break is never written as `\u0027`/`\u005c`/`\u000a`: that would turn
# back into the raw character and end the literal.
_NAMED = MappingProxyType(
    {
        "\\": "\\\\",
        "'": "\\'",
        "\n": "\\n",
        "\r": "\\r",
        "\t": "\\t",
        "\b": "\\b",
        "\f": "\\f",
    }
)


def _escape(char: str) -> str:
    named = _NAMED.get(char)
    if named is not None:
        return named
    code = ord(char)
    # Other control characters are harmless inside the literal once translated, but a
    # config file with raw control bytes is unreadable to a person reviewing it.
    if code < 0x20 or code == 0x7F:
        return f"\\u{code:04x}"
    return char


def string_literal(value: str) -> str:
    """`value` as a Groovy single-quoted string literal that evaluates to exactly `value`."""
    return "'" + "".join(_escape(char) for char in value) + "'"

"""Text that came from bytes: whether it still holds bytes that were not UTF-8.

Python hands argv and environment variables over with bytes that are not UTF-8 turned
into lone surrogates (surrogateescape). No script, JSON document or log can carry those,
so every place that takes such text from the user refuses it by name, through this test.
"""

from __future__ import annotations


def holds_undecodable(text: str) -> bool:
    """True if text holds a lone surrogate: a byte that was not UTF-8."""
    return any("\ud800" <= c <= "\udfff" for c in text)

"""Bounding what an engine's records say before it reaches a person or the brain."""

from __future__ import annotations

#: longest text of one message, in characters
MAX_TEXT = 300


def one_line(text: str, limit: int = MAX_TEXT) -> str:
    """`text` on one line, control characters as spaces, cut to `limit` characters with '…'."""
    # a log line can be megabytes (a dumped command); only its start can ever be shown
    head = text[: limit * 8]
    flat = " ".join("".join(c if c.isprintable() else " " for c in head).split())
    if len(flat) <= limit and len(head) == len(text):
        return flat
    return flat[: limit - 1] + "…"

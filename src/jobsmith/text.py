"""Text that came from bytes: whether it still holds bytes that were not UTF-8.

Python hands argv and environment variables over with bytes that are not UTF-8 turned
into lone surrogates (surrogateescape). No script, JSON document or log can carry those,
so every place that takes such text from the user refuses it by name, through this test.
"""

from __future__ import annotations

import hashlib
import unicodedata


def holds_undecodable(text: str) -> bool:
    """True if text holds a lone surrogate: a byte that was not UTF-8."""
    return any("\ud800" <= c <= "\udfff" for c in text)


def slurm_word(text: str, limit: int = 40, keep: str = "_-") -> str:
    """text cut to what a Slurm job name may safely hold: accents dropped (scène ->
    scene), any other character '_', at most limit characters, and text with no ASCII
    letter or digit left (映画) named by the first 12 hex digits of its sha256 instead (an
    accented file name crashed building a job name: issue 24)."""
    folded = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    word = "".join(c if c.isascii() and (c.isalnum() or c in keep) else "_" for c in folded)
    word = word[:limit]
    if not word.strip("_-."):
        return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()[:12]
    return word

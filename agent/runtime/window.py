"""A look-back window as people type it (`--since 7d`, `--older-than 12h`): status, wait
and `sessions prune` read it the same way, with the same bounds and the same error."""

from __future__ import annotations

import re
from datetime import timedelta

from jobsmith.errors import InputError

_WINDOW = re.compile(r"^(?P<n>[0-9]{1,9})(?P<unit>[dhm])$")


def parse_window(text: str, option: str = "--since") -> timedelta:
    """'7d', '12h', '90m' as a timedelta; anything else is a clear error naming option."""
    match = _WINDOW.match(text.strip())
    if match is None:
        raise InputError(f"{option} {text!r}: expected a number and d, h or m, e.g. 7d, 12h, 90m")
    unit = {"d": "days", "h": "hours", "m": "minutes"}[match.group("unit")]
    n = int(match.group("n"))
    # bounded so that now - window stays a date (and sacct's -S a sane one)
    if n > {"days": 3650, "hours": 87600, "minutes": 5256000}[unit]:
        raise InputError(f"{option} {text!r}: at most 10 years (3650d)")
    return timedelta(**{unit: n})

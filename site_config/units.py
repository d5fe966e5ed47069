"""Slurm's duration and memory notations: parse to integers, format back (pure).

Site files are written by people who copy limits from `scontrol` and `sbatch` man pages,
so both notations are Slurm's own:

- durations: an int is minutes (as `sbatch -t 30`); strings are "MM", "MM:SS",
  "HH:MM:SS", "D-HH", "D-HH:MM" or "D-HH:MM:SS". Stored as seconds.
- memory: an int is MiB (as `sbatch --mem=500`); strings are digits with an optional
  K/M/G/T suffix (powers of 1024, as Slurm reads them). Stored as MiB.

Errors are raised as pydantic's PydanticCustomError so that, used as validators, they
become a single clean message on the offending field.
"""

from __future__ import annotations

import re

from pydantic_core import PydanticCustomError

from jobsmith.adapters.slurm.options import slurm_duration

DURATION_SYNTAX = "minutes as an int, or 'MM:SS', 'HH:MM:SS', 'D-HH', 'D-HH:MM', 'D-HH:MM:SS'"
MEMORY_SYNTAX = "MiB as an int, or digits with a K/M/G/T suffix such as '500M' or '4G'"

_DAYS = re.compile(r"^(?P<days>\d+)-(?P<rest>\d+(?::\d+){0,2})$")
_CLOCK = re.compile(r"^\d+(?::\d+){0,2}$")
_MEMORY = re.compile(r"^(?P<number>\d+)(?P<unit>[KMGT]?)$", re.IGNORECASE)
_KIB_PER_UNIT = {"K": 1, "M": 1024, "G": 1024**2, "T": 1024**3}


def parse_duration(value: object) -> int:
    """Seconds for a Slurm duration (int minutes or a time string); raise on anything else."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise _bad_duration(value)
    seconds = value * 60 if isinstance(value, int) else _duration_string(value.strip())
    if seconds is None or seconds <= 0:
        raise _bad_duration(value)
    return seconds


def _duration_string(text: str) -> int | None:
    days_match = _DAYS.match(text)
    if days_match:
        # After "D-" the fields are hours first, unlike the bare forms (minutes first).
        parts = [int(p) for p in days_match["rest"].split(":")]
        hours, minutes, seconds = [*parts, 0, 0][:3]
        if hours >= 24 or minutes >= 60 or seconds >= 60:
            return None
        return int(days_match["days"]) * 86400 + hours * 3600 + minutes * 60 + seconds
    if not _CLOCK.match(text):
        return None
    parts = [int(p) for p in text.split(":")]
    # The leading field may exceed its unit ("90:00" is 90 minutes, as Slurm reads it);
    # the trailing ones may not, which catches "1:70:00"-style typos.
    if any(p >= 60 for p in parts[1:]):
        return None
    if len(parts) == 1:
        return parts[0] * 60
    if len(parts) == 2:
        return parts[0] * 60 + parts[1]
    return parts[0] * 3600 + parts[1] * 60 + parts[2]


def _bad_duration(value: object) -> PydanticCustomError:
    return PydanticCustomError(
        "duration",
        "invalid duration {value}: expected a positive Slurm time, {syntax}",
        {"value": repr(value), "syntax": DURATION_SYNTAX},
    )


def format_duration(seconds: int) -> str:
    """Seconds as Slurm's exact '[D-]HH:MM:SS' (parse_duration reads it back unchanged)."""
    return slurm_duration(seconds)


def parse_memory(value: object) -> int:
    """MiB for a Slurm memory size (int MiB or '4G'-style string); raise on anything else."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise _bad_memory(value)
    if isinstance(value, int):
        mib = value
    else:
        match = _MEMORY.match(value.strip())
        if not match:
            raise _bad_memory(value)
        kib = int(match["number"]) * _KIB_PER_UNIT[(match["unit"] or "M").upper()]
        if kib % 1024:
            raise PydanticCustomError(
                "memory", "memory {value} is not a whole number of MiB", {"value": repr(value)}
            )
        mib = kib // 1024
    if mib <= 0:
        raise _bad_memory(value)
    return mib


def _bad_memory(value: object) -> PydanticCustomError:
    return PydanticCustomError(
        "memory",
        "invalid memory size {value}: expected a positive size, {syntax}",
        {"value": repr(value), "syntax": MEMORY_SYNTAX},
    )


def format_memory(mib: int) -> str:
    """MiB as the shortest exact Slurm size: '4G' when whole GiB, else '500M'."""
    for unit, factor in (("T", 1024**2), ("G", 1024)):
        if mib % factor == 0:
            return f"{mib // factor}{unit}"
    return f"{mib}M"

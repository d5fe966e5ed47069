"""Slurm's duration and size syntax, below both the site config and the adapters.

Two readers, one notation. What people type (site files, --time, --mem, SBATCH_*
variables) is read strictly, and a mistake is an error on the field: parse_duration,
parse_memory. What Slurm prints (sacct, squeue, scontrol) is read leniently, and what
cannot be read is "unknown" (None), never an error that would stop a poll:
parse_printed_duration, parse_printed_memory. Formatting goes back to Slurm's own forms.

People's notation, as Slurm's man pages give it:

- durations: an int is minutes (as `sbatch -t 30`); strings are "MM", "MM:SS",
  "HH:MM:SS", "D-HH", "D-HH:MM" or "D-HH:MM:SS". Stored as seconds.
- memory: an int is MiB (as `sbatch --mem=500`); strings are digits with an optional
  K/M/G/T suffix (powers of 1024, as Slurm reads them). Stored as MiB.

Strict errors are raised as pydantic's PydanticCustomError so that, used as validators,
they become a single clean message on the offending field.
"""

from __future__ import annotations

import re

from pydantic_core import PydanticCustomError

DURATION_SYNTAX = "minutes as an int, or 'MM:SS', 'HH:MM:SS', 'D-HH', 'D-HH:MM', 'D-HH:MM:SS'"
MEMORY_SYNTAX = "MiB as an int, or digits with a K/M/G/T suffix such as '500M' or '4G'"

# re.ASCII: \d is [0-9] only (without it '١٠', Arabic-Indic ten, read as 10 minutes)
_DAYS = re.compile(r"^(?P<days>\d+)-(?P<rest>\d+(?::\d+){0,2})$", re.ASCII)
_CLOCK = re.compile(r"^\d+(?::\d+){0,2}$", re.ASCII)
_MEMORY = re.compile(r"^(?P<number>\d+)(?P<unit>[KMGT]?)$", re.IGNORECASE | re.ASCII)
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
    days, rem = divmod(seconds, 86400)
    hours, rem = divmod(rem, 3600)
    minutes, secs = divmod(rem, 60)
    clock = f"{hours:02d}:{minutes:02d}:{secs:02d}"
    return f"{days}-{clock}" if days else clock


def format_time_limit(seconds: int) -> str:
    """A time limit for --time: minutes rounded up, as Slurm's granularity is 1 min."""
    return format_duration(-(-seconds // 60) * 60)


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


# --- what Slurm prints ----------------------------------------------------------------

_PRINTED_MEM = re.compile(r"(?P<num>\d+(?:\.\d+)?)(?P<unit>[KMGTPE]?)(?P<per>[nc]?)", re.IGNORECASE)
_POWERS = {"": 0, "K": 1, "M": 2, "G": 3, "T": 4, "P": 5, "E": 6}
_PRINTED_DURATION = re.compile(r"(?:(?P<days>\d+)-)?(?P<clock>\d+(?::\d+){0,2}(?:\.\d+)?)")
#: no node has an exbibyte of memory; anything this big is one of Slurm's markers
_ABSURD_BYTES = 1 << 60


def parse_printed_memory(text: str | None) -> int | None:
    """Bytes from sacct's memory notation: '424416K', '500M', '1.50G', '0'; None if absent.

    Units are binary (K = 1024), as Slurm's. A bare number is bytes (MaxRSS under
    --noconvert). The 'n'/'c' suffixes of pre-21.08 ReqMem (per node / per CPU) are
    accepted and dropped: the value returned is the per-node or per-CPU amount.
    """
    match = _PRINTED_MEM.fullmatch((text or "").strip())
    if match is None:
        return None
    scale: int = 1024 ** _POWERS[match["unit"].upper()]
    value = round(float(match["num"]) * scale)
    # Slurm's "unset"/"infinite" markers (NO_VAL64 and friends, ~2**64 before any unit)
    # show up in ReqMem for a moment while accounting catches up: not a real size
    return None if value >= _ABSURD_BYTES else value


def parse_printed_duration(text: str | None) -> int | None:
    """Whole seconds from a Slurm duration ('00:01:04', '1-02:03:04', '05:00'); else None.

    Formats are Slurm's own: minutes, minutes:seconds, hours:minutes:seconds,
    days-hours, days-hours:minutes, days-hours:minutes:seconds. 'UNLIMITED',
    'Partition_Limit', 'INVALID', 'NOT_SET' and '' mean no value: None.
    """
    seconds = parse_printed_seconds(text)
    return None if seconds is None else round(seconds)


def parse_printed_seconds(text: str | None) -> float | None:
    """Seconds, fractions kept (TotalCPU prints 'MM:SS.mmm')."""
    match = _PRINTED_DURATION.fullmatch((text or "").strip())
    if match is None:
        return None
    parts = match["clock"].split(":")
    try:
        if match["days"] is not None:
            hours, minutes, secs = [*parts, "0", "0"][:3]
            return int(match["days"]) * 86400 + int(hours) * 3600 + int(minutes) * 60 + float(secs)
        if len(parts) == 1:  # a bare number is minutes in Slurm's time syntax
            return float(parts[0]) * 60
        if len(parts) == 2:
            return int(parts[0]) * 60 + float(parts[1])
        return int(parts[0]) * 3600 + int(parts[1]) * 60 + float(parts[2])
    except ValueError:  # a fraction somewhere other than on the seconds
        return None

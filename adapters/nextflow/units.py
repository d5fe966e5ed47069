"""Nextflow's units, both ways: reading a trace's values and writing a config's literals.

A trace prints memory and durations human-readable (`1.5 GB`, `2h 3m 4s`, `96.2%`) or, with
`trace.raw = true`, as bare bytes and milliseconds; `-` means "no value". Nextflow's memory
units are binary (1 KB = 1024 B). Readers return None for anything they cannot read, never
raise, and never return a non-finite number.
"""

from __future__ import annotations

import math
import re
from types import MappingProxyType

_NUMBER = r"[0-9]+(?:\.[0-9]+)?"
_MEMORY = re.compile(rf"(?P<n>{_NUMBER})\s*(?P<unit>B|KB|MB|GB|TB|PB|EB)?", re.ASCII)
_DURATION_PART = re.compile(rf"(?P<n>{_NUMBER})(?P<unit>ms|s|m|h|d)", re.ASCII)
_PERCENT = re.compile(rf"(?P<n>{_NUMBER})%?", re.ASCII)
_INTEGER = re.compile(r"-?[0-9]{1,18}", re.ASCII)

_MIB_PER_UNIT = MappingProxyType(
    {
        "B": 1 / 1024**2,
        "KB": 1 / 1024,
        "MB": 1.0,
        "GB": 1024.0,
        "TB": 1024.0**2,
        "PB": 1024.0**3,
        "EB": 1024.0**4,
    }
)
_SECONDS_PER_UNIT = MappingProxyType({"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0})

#: config literals, largest first: a value is written in the largest unit that divides it
_CONFIG_MEMORY_UNITS = (("TB", 1024 * 1024), ("GB", 1024), ("MB", 1))
_CONFIG_TIME_UNITS = (("d", 86400), ("h", 3600), ("m", 60), ("s", 1))


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def read_integer(text: str) -> int | None:
    """A whole number (an exit status, a CPU count); None for `-` or anything else."""
    text = text.strip()
    return int(text) if _INTEGER.fullmatch(text) else None


def read_memory_mb(text: str) -> float | None:
    """MiB from `244.3 MB`, `17 GB`, `468 B`, or a bare number of bytes (raw traces)."""
    match = _MEMORY.fullmatch(text.strip())
    if match is None:
        return None
    unit = match["unit"] or "B"
    return _finite(float(match["n"]) * _MIB_PER_UNIT[unit])


def read_duration_s(text: str) -> float | None:
    """Seconds from `39.4s`, `9m 49s`, `4h 12m 10s`, `352ms`, or bare milliseconds (raw)."""
    text = text.strip()
    if re.fullmatch(_NUMBER, text, re.ASCII):
        return _finite(float(text) / 1000)
    parts = text.split()
    if not parts:
        return None
    total = 0.0
    for part in parts:
        match = _DURATION_PART.fullmatch(part)
        if match is None:
            return None
        total += float(match["n"]) * _SECONDS_PER_UNIT[match["unit"]]
    return _finite(total)


def read_percent(text: str) -> float | None:
    """96.2 from `96.2%` or `96.2` (raw)."""
    match = _PERCENT.fullmatch(text.strip())
    return _finite(float(match["n"])) if match else None


def memory_literal(mb: int) -> str:
    """A Nextflow memory literal for `mb` MiB: `2.GB`, `1536.MB`."""
    for unit, size in _CONFIG_MEMORY_UNITS:
        if mb % size == 0:
            return f"{mb // size}.{unit}"
    return f"{mb}.MB"


def duration_literal(seconds: int) -> str:
    """A Nextflow duration literal for `seconds`: `4.h`, `90.m`, `45.s`."""
    for unit, size in _CONFIG_TIME_UNITS:
        if seconds % size == 0:
            return f"{seconds // size}.{unit}"
    return f"{seconds}.s"

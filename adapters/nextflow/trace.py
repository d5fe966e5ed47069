"""Reading a Nextflow trace file: tab-separated, one row per task attempt, header first.

The header names the columns (the defaults, the fields jobsmith's config asks for, or any
other set), so the parser finds each value by name and keeps the header in the context for
later calls that only bring new rows. Human-readable and raw (`trace.raw`) values both read.
Nextflow appends a row when a task ends (COMPLETED, FAILED, CACHED) and, when the run stops,
rows for the tasks still SUBMITTED, RUNNING or ABORTED.

A row that cannot be read (wrong number of columns, no id, a status Nextflow never writes)
is skipped; the call then also returns one WARNING saying how many rows were skipped.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

from jobsmith.adapters.nextflow.status import task_status
from jobsmith.adapters.nextflow.units import (
    read_duration_s,
    read_integer,
    read_memory_mb,
    read_percent,
)
from jobsmith.adapters.workflow import EngineMessage, EngineTask, MessageKind, Parsed

SEPARATOR = "\t"
#: what a trace prints for "no value"
_ABSENT = frozenset({"", "-"})
#: columns of which a header must have these to be one
_HEADER_NEEDS = frozenset({"status"})
_HEADER_ANY = frozenset({"task_id", "hash", "native_id", "name"})

T = TypeVar("T")


def _is_header(fields: Sequence[str]) -> bool:
    names = set(fields)
    return names >= _HEADER_NEEDS and bool(_HEADER_ANY & names)


def _value(row: Mapping[str, str], *names: str) -> str | None:
    """The first present value among `names` (a column may go by an older name)."""
    for name in names:
        value = row.get(name, "").strip()
        if value not in _ABSENT:
            return value
    return None


def _read(row: Mapping[str, str], reader: Callable[[str], T | None], *names: str) -> T | None:
    value = _value(row, *names)
    return None if value is None else reader(value)


def _process(row: Mapping[str, str], name: str) -> str:
    given = _value(row, "process")
    if given:
        return given
    # a task's name is `PROCESS (tag)`, or the process alone; process names have no spaces
    process, tagged, _ = name.partition(" (")
    return process if tagged and process and name.endswith(")") else name


def _task(row: Mapping[str, str]) -> EngineTask | None:
    status = task_status(row.get("status", ""))
    key = _value(row, "task_id", "hash", "native_id")
    if status is None or key is None:
        return None
    name = _value(row, "name") or key
    attempt = _read(row, read_integer, "attempt")
    workdir = _value(row, "workdir")
    return EngineTask(
        key=key,
        process=_process(row, name),
        name=name,
        status=status,
        native_id=_value(row, "native_id"),
        attempt=attempt if attempt and attempt >= 1 else 1,
        exit_code=_read(row, read_integer, "exit"),
        cpus=_read(row, read_integer, "cpus"),
        mem_mb=_read(row, read_memory_mb, "memory"),
        peak_rss_mb=_read(row, read_memory_mb, "peak_rss", "rss"),
        realtime_s=_read(row, read_duration_s, "realtime"),
        cpu_percent=_read(row, read_percent, "%cpu"),
        workdir=workdir,
        # Nextflow's wrapper writes the task's stdout and stderr together here
        log=f"{workdir.rstrip('/')}/.command.log" if workdir else None,
    )


def parse_trace(lines: Sequence[str], context: tuple[str, ...]) -> Parsed:
    """Tasks from new trace rows; `context` is the header kept from an earlier call."""
    header: tuple[str, ...] = context
    tasks: list[EngineTask] = []
    skipped = 0
    for line in lines:
        fields = line.rstrip("\r\n").split(SEPARATOR)
        if _is_header(fields):
            header = tuple(field.strip() for field in fields)
            continue
        if not line.strip():
            continue
        task = _task(dict(zip(header, fields, strict=True))) if len(fields) == len(header) else None
        if task is None:
            skipped += 1
        else:
            tasks.append(task)
    messages: tuple[EngineMessage, ...] = ()
    if skipped:
        text = f"skipped {skipped} trace line(s) that could not be read"
        messages = (EngineMessage(kind=MessageKind.WARNING, text=text),)
    return Parsed(tasks=tuple(tasks), messages=messages, context=header)

"""Nextflow's task status words, mapped to jobsmith's TaskStatus: the one place that does it."""

from __future__ import annotations

from types import MappingProxyType

from jobsmith.adapters.workflow import TaskStatus

_STATUSES = MappingProxyType(
    {
        # NEW: created, waiting for a slot in the executor's queue; nothing ran yet, and
        # jobsmith's nearest word for "not known to run" is SUBMITTED
        "NEW": TaskStatus.SUBMITTED,
        "SUBMITTED": TaskStatus.SUBMITTED,
        "RUNNING": TaskStatus.RUNNING,
        "COMPLETED": TaskStatus.COMPLETED,
        "FAILED": TaskStatus.FAILED,
        "CACHED": TaskStatus.CACHED,
        "ABORTED": TaskStatus.ABORTED,
    }
)


def task_status(word: str) -> TaskStatus | None:
    """The TaskStatus for a trace's `status` value; None for a word Nextflow never writes."""
    return _STATUSES.get(word.strip().upper())

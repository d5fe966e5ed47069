"""Job states: the one place where Slurm's state strings are mapped to jobsmith's Enum.

Slurm prints states in several spellings: sacct's parsable output ("CANCELLED by 1001"),
squeue's compact codes ("PD", "R"), and the JSON of 22.05 (a string) and 24.11 (a list
with flags such as ["PENDING", "REQUEUED"]). Everything goes through parse_state().
"""

from __future__ import annotations

import re
from enum import StrEnum


class JobState(StrEnum):
    """What jobsmith knows about a job or array task."""

    #: submitted (we hold its id) but neither squeue nor sacct shows it yet: slurmdbd can
    #: lag behind the controller. This is not a failure.
    NOT_VISIBLE = "NOT_VISIBLE"
    PENDING = "PENDING"
    CONFIGURING = "CONFIGURING"
    RUNNING = "RUNNING"
    COMPLETING = "COMPLETING"
    SUSPENDED = "SUSPENDED"
    REQUEUED = "REQUEUED"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"
    TIMEOUT = "TIMEOUT"
    OUT_OF_MEMORY = "OUT_OF_MEMORY"
    NODE_FAIL = "NODE_FAIL"
    PREEMPTED = "PREEMPTED"
    BOOT_FAIL = "BOOT_FAIL"
    DEADLINE = "DEADLINE"
    #: Slurm printed something this version of jobsmith does not know
    UNKNOWN = "UNKNOWN"

    @property
    def is_terminal(self) -> bool:
        """True once Slurm will not change the state again (short of a requeue)."""
        return self in _TERMINAL

    @property
    def is_failure(self) -> bool:
        """True for terminal states other than a successful completion: the job did not
        do its work (what `wait` exits 1 for, and what the watcher diagnoses)."""
        return self.is_terminal and self is not JobState.COMPLETED

    @property
    def counts_toward_streak(self) -> bool:
        """True for a failure that says something may be wrong with what is submitted,
        and so counts toward the failure-streak stop: not a cancellation (someone chose
        it) nor a preemption (the scheduler chose it)."""
        return self in _STREAK_FAILURES

    @property
    def is_active(self) -> bool:
        """True while the job is queued or running (worth polling)."""
        return not self.is_terminal and self is not JobState.UNKNOWN


_TERMINAL = frozenset(
    {
        JobState.COMPLETED,
        JobState.FAILED,
        JobState.CANCELLED,
        JobState.TIMEOUT,
        JobState.OUT_OF_MEMORY,
        JobState.NODE_FAIL,
        JobState.PREEMPTED,
        JobState.BOOT_FAIL,
        JobState.DEADLINE,
    }
)

_STREAK_FAILURES = frozenset(
    {
        JobState.FAILED,
        JobState.TIMEOUT,
        JobState.OUT_OF_MEMORY,
        JobState.NODE_FAIL,
        JobState.BOOT_FAIL,
        JobState.DEADLINE,
    }
)

_SLURM_NAMES: dict[str, JobState] = {
    "PENDING": JobState.PENDING,
    "PD": JobState.PENDING,
    "REQUEUE_HOLD": JobState.PENDING,
    "REQUEUE_FED": JobState.PENDING,
    "RESV_DEL_HOLD": JobState.PENDING,
    "SPECIAL_EXIT": JobState.PENDING,
    "CONFIGURING": JobState.CONFIGURING,
    "CF": JobState.CONFIGURING,
    "RUNNING": JobState.RUNNING,
    "R": JobState.RUNNING,
    "SIGNALING": JobState.RUNNING,
    "STAGE_OUT": JobState.RUNNING,
    "RESIZING": JobState.RUNNING,
    "COMPLETING": JobState.COMPLETING,
    "CG": JobState.COMPLETING,
    "SUSPENDED": JobState.SUSPENDED,
    "S": JobState.SUSPENDED,
    "STOPPED": JobState.SUSPENDED,
    "ST": JobState.SUSPENDED,
    "REQUEUED": JobState.REQUEUED,
    "RQ": JobState.REQUEUED,
    "COMPLETED": JobState.COMPLETED,
    "CD": JobState.COMPLETED,
    "FAILED": JobState.FAILED,
    "F": JobState.FAILED,
    "CANCELLED": JobState.CANCELLED,
    "CA": JobState.CANCELLED,
    "REVOKED": JobState.CANCELLED,
    "RV": JobState.CANCELLED,
    "TIMEOUT": JobState.TIMEOUT,
    "TO": JobState.TIMEOUT,
    "OUT_OF_MEMORY": JobState.OUT_OF_MEMORY,
    "OOM": JobState.OUT_OF_MEMORY,
    "NODE_FAIL": JobState.NODE_FAIL,
    "NF": JobState.NODE_FAIL,
    "PREEMPTED": JobState.PREEMPTED,
    "PR": JobState.PREEMPTED,
    "BOOT_FAIL": JobState.BOOT_FAIL,
    "BF": JobState.BOOT_FAIL,
    "DEADLINE": JobState.DEADLINE,
    "DL": JobState.DEADLINE,
}

_BY_UID = re.compile(r"^(?P<state>[A-Z_]+)(?: by (?P<uid>\S+))?\+?$")


def parse_state(raw: str | list[str] | None) -> tuple[JobState, str | None]:
    """Map any Slurm spelling of a state to (JobState, uid that cancelled it or None).

    Accepts "COMPLETED", "CANCELLED by 1001", "PD", and 24.11's JSON lists such as
    ["PENDING", "REQUEUED"] (the first entry is the base state, the rest are flags).
    An empty value means Slurm has no record yet: NOT_VISIBLE, never a failure.
    """
    if raw is None:
        return JobState.NOT_VISIBLE, None
    if isinstance(raw, list):
        if not raw:
            return JobState.NOT_VISIBLE, None
        raw = raw[0]
    text = raw.strip()
    if not text:
        return JobState.NOT_VISIBLE, None
    match = _BY_UID.match(text)
    if match is None:
        return JobState.UNKNOWN, None
    state = _SLURM_NAMES.get(match.group("state"), JobState.UNKNOWN)
    return state, match.group("uid")

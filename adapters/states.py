"""Job states as jobsmith knows them, whatever the scheduler: the neutral Enum.

The scheduler's own spellings are mapped to it in the adapter (adapters/slurm/parsing/states.py
for Slurm), in exactly one place; everything else reads this Enum and its predicates.
"""

from __future__ import annotations

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
    #: the job has ended but how is unknown: on a cluster without accounting, the
    #: controller no longer holds it (it forgets a job MinJobAge after its end) and
    #: nothing else recorded it. Terminal, yet neither a success nor a failure.
    FINAL_UNKNOWN = "FINAL_UNKNOWN"

    @classmethod
    def known(cls, value: str | None) -> JobState | None:
        """The state a recorded value names, or None for none (or a spelling this release
        does not know: a log written by a newer jobsmith)."""
        try:
            return cls(value) if value else None
        except ValueError:
            return None

    @property
    def is_terminal(self) -> bool:
        """True once Slurm will not change the state again (short of a requeue)."""
        return self in _TERMINAL

    @property
    def is_failure(self) -> bool:
        """True for terminal states other than a successful completion: the job did not
        do its work (what `wait` exits 1 for, and what the watcher diagnoses)."""
        return self.is_terminal and self not in (JobState.COMPLETED, JobState.FINAL_UNKNOWN)

    @property
    def counts_toward_streak(self) -> bool:
        """True for a failure that says something may be wrong with what is submitted,
        and so counts toward the failure-streak stop: not a cancellation (someone chose
        it), a preemption (the scheduler chose it), nor a node failure (NODE_FAIL,
        BOOT_FAIL: the node's doing, which the user's node blocklist answers by leaving
        the node out, agent/runtime/blocklist/)."""
        return self in _STREAK_FAILURES

    @property
    def has_started(self) -> bool:
        """True from its start until it has ended (starting, running, ending, suspended):
        a hold no longer keeps such a job from running."""
        return self in _STARTED

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
        JobState.FINAL_UNKNOWN,
    }
)

_STARTED = frozenset(
    {JobState.CONFIGURING, JobState.RUNNING, JobState.COMPLETING, JobState.SUSPENDED}
)

_STREAK_FAILURES = frozenset(
    {
        JobState.FAILED,
        JobState.TIMEOUT,
        JobState.OUT_OF_MEMORY,
        JobState.DEADLINE,
    }
)

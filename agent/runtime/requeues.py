"""A job Slurm requeued, in words: "preempted 2×, resumed" (issue 27).

A requeued job keeps its id: Slurm runs it again, and sacct -D lists each earlier run
with how it ended (JobRecord.requeues, oldest first). jobsmith follows it as one job:
the earlier runs are history, not failures, and `status`, the glance and the report say
how often it was requeued, and why, beside its state. The count is Slurm's restart count
(`SLURM_RESTART_COUNT` inside the job, `Restarts` in scontrol show job).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from jobsmith.adapters.records import JobRecord
from jobsmith.adapters.states import JobState

#: how an earlier run ended, as a verb: the order in which kinds are named
_WHY = {
    JobState.PREEMPTED: "preempted",
    JobState.REQUEUED: "requeued",
    JobState.NODE_FAIL: "node failed",
}


def requeue_phrase(requeues: Sequence[JobState], state: JobState) -> str | None:
    """ "preempted 2×, resumed" for a job whose earlier runs ended so and that runs again
    (or ran to its end); None for a job never requeued."""
    if not requeues:
        return None
    counts = Counter(_WHY.get(s, s.value.lower()) for s in requeues)
    said = ", ".join(f"{why} {n}×" for why, n in counts.items())
    if state in (JobState.PENDING, JobState.REQUEUED, JobState.NOT_VISIBLE):
        return f"{said}, waiting to resume"
    return f"{said}, resumed"


def record_phrase(record: JobRecord | None) -> str | None:
    """requeue_phrase of one job's (or task's) record."""
    return None if record is None else requeue_phrase(record.requeues, record.state)

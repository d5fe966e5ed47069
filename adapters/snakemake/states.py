"""Snakemake's words for what happened to a rule job, mapped to `TaskStatus`: the one place.

Snakemake's console never says a Slurm job started running: a rule job is SUBMITTED
until Snakemake reports it finished or in error.
"""

from __future__ import annotations

from enum import StrEnum

from jobsmith.adapters.workflow import TaskStatus


class JobEvent(StrEnum):
    """A console line's verdict on one rule job."""

    SUBMITTED = "submitted"  # "Job 4 has been submitted with SLURM jobid 13964 (log: …)."
    STARTED_LOCALLY = "localrule"  # a "localrule NAME:" block: runs inside the head job
    FINISHED = "finished"  # "Finished jobid: 4 (Rule: align)"
    ERROR = "error"  # an "Error in rule NAME:" block
    CANCELLED = "cancelled"  # "Terminating processes on user request, …" while it ran


STATUS: dict[JobEvent, TaskStatus] = {
    JobEvent.SUBMITTED: TaskStatus.SUBMITTED,
    JobEvent.STARTED_LOCALLY: TaskStatus.RUNNING,
    JobEvent.FINISHED: TaskStatus.COMPLETED,
    JobEvent.ERROR: TaskStatus.FAILED,
    JobEvent.CANCELLED: TaskStatus.ABORTED,
}


def task_status(event: JobEvent) -> TaskStatus:
    """The status a rule job has after `event`."""
    return STATUS[event]


def in_flight(status: TaskStatus) -> bool:
    """Whether a job in this status is still Snakemake's to finish or cancel."""
    return status in (TaskStatus.SUBMITTED, TaskStatus.RUNNING)

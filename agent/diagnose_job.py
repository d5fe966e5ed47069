"""Diagnosing a job by id: one status query, its failed tasks, their stderr, the verdicts."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timedelta

from jobsmith.adapters.scheduler import Scheduler
from jobsmith.agent.diagnosis import Diagnosis, diagnose
from jobsmith.errors import JobNotFound
from jobsmith.site_config import SiteConfig


def diagnose_job(
    scheduler: Scheduler,
    site: SiteConfig | None,
    stderr_tail: Callable[[str], Sequence[str]],
    job_id: str,
) -> list[Diagnosis]:
    """A diagnosis for the job, or for each failed task of an array (every task if none
    failed), from accounting, the controller's reason and the end of each stderr file."""
    status = scheduler.status([job_id], datetime.now() - timedelta(days=30))[job_id]
    if status.record is None and not status.tasks:
        raise JobNotFound(f"job {job_id}: neither the controller nor accounting knows it")
    records = [t for t in status.tasks if t.state.is_failure] or list(status.tasks)
    if status.record is not None:
        records = [status.record]
    out = []
    for rec in records:
        part = site.partitions.get(rec.partition or "") if site else None
        out.append(
            diagnose(
                rec,
                stderr_tail(rec.job_id),
                reason=status.reason,
                partition_max_mem_mb=part.max_mem_per_node if part else None,
                partition_max_time_s=part.max_time if part else None,
            )
        )
    return out

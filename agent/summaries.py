"""Structured summaries of Slurm's answers, as a brain sees them (compact, not raw dumps)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jobsmith.adapters.scheduler import JobStatus
from jobsmith.adapters.slurm.records import JobRecord

#: an array summary lists at most this many of its not-completed tasks
_MAX_TASKS = 20


def record_summary(rec: JobRecord) -> dict[str, Any]:
    """The facts about one job or task that decide the next step."""
    return {
        "job_id": rec.job_id,
        "state": rec.state.value,
        "exit_code": rec.exit_code,
        "signal": rec.signal,
        "cancelled_by": rec.cancelled_by,
        "elapsed_s": rec.elapsed_s,
        "timelimit_s": rec.timelimit_s,
        "max_rss_bytes": rec.max_rss_bytes,
        "req_mem_bytes": rec.req_mem_bytes,
        "reason": rec.reason if not rec.state.is_terminal else None,
    }


def status_summary(statuses: Mapping[str, JobStatus]) -> dict[str, Any]:
    """Every job's state; arrays as counts plus their unfinished or failed tasks."""
    jobs = []
    for st in statuses.values():
        entry: dict[str, Any] = {"job_id": st.job_id, "state": st.state.value}
        if st.tasks:
            entry["task_counts"] = st.task_counts
            notable = [t for t in st.tasks if t.state.value != "COMPLETED"][:_MAX_TASKS]
            entry["tasks"] = [record_summary(t) for t in notable]
        elif st.record is not None:
            entry.update(record_summary(st.record))
        entry["reason"] = st.reason
        entry["estimated_start"] = st.estimated_start.isoformat() if st.estimated_start else None
        jobs.append(entry)
    return {"jobs": jobs}

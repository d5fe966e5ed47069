"""Recording what Slurm did to a session's jobs as job_state events in that session.

Status polls see jobs end; each terminal state is written once into the session that
submitted the job, which is what budgets (the failure streak) and later the watcher and
the brains read.
"""

from __future__ import annotations

from collections.abc import Mapping

from jobsmith.adapters.scheduler import JobStatus
from jobsmith.agent.events import EventKind
from jobsmith.agent.ledger import JobLedger
from jobsmith.agent.session_log import SessionLog
from jobsmith.agent.store import SessionStore


def record_job_states(
    store: SessionStore, ledger: JobLedger, statuses: Mapping[str, JobStatus]
) -> int:
    """Append a job_state event for each newly terminal job; returns how many were added."""
    added = 0
    for job_id, st in statuses.items():
        record = ledger.get(job_id)
        if record is None or record.session_id is None or not st.state.is_terminal:
            continue
        log = SessionLog(store, record.session_id)
        seen = {
            (e.data.get("job_id"), e.data.get("state"))
            for e in log.events()
            if e.kind is EventKind.JOB_STATE
        }
        if (job_id, st.state.value) in seen:
            continue
        data: dict[str, object] = {
            "job_id": job_id,
            "state": st.state.value,
            "task_counts": st.task_counts,
        }
        if st.record is not None:
            data |= {"exit_code": st.record.exit_code, "signal": st.record.signal}
        log.append(EventKind.JOB_STATE, data, None)
        added += 1
    return added

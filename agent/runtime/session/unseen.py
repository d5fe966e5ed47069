"""Jobs that ended unseen: what the sessions recorded while the controller still held them.

On a cluster without accounting the controller forgets a finished job after MinJobAge,
and the adapter then reports it FINAL_UNKNOWN. If a poll (the watcher, status, wait) saw
it end before that, its session recorded the end in a job_state event; that recorded
state is the answer, not "unknown".
"""

from __future__ import annotations

from collections.abc import Mapping

from jobsmith.adapters.scheduler import JobStatus
from jobsmith.adapters.states import JobState
from jobsmith.agent.runtime.session.ledger import JobLedger
from jobsmith.agent.runtime.session.readmodel import SessionFolds


def with_recorded_ends(
    folds: SessionFolds, ledger: JobLedger, statuses: Mapping[str, JobStatus]
) -> dict[str, JobStatus]:
    """statuses, each FINAL_UNKNOWN replaced by the end state its session recorded."""
    out = dict(statuses)
    for job_id, st in statuses.items():
        record = ledger.get(job_id) if st.state is JobState.FINAL_UNKNOWN else None
        if record is None or record.session_id is None:
            continue
        recorded = JobState.known(folds.of(record.session_id).job_states.get(job_id))
        if recorded is not None and recorded.is_terminal:
            out[job_id] = st.model_copy(update={"state": recorded})
    return out

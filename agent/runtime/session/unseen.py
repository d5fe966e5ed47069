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
        if st.state is not JobState.FINAL_UNKNOWN:
            continue
        recorded = folds.recorded_state(job_id, ledger.get(job_id))
        if recorded is not None and recorded.is_terminal:
            out[job_id] = st.model_copy(update={"state": recorded})
    return out

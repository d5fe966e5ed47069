"""Recording what Slurm did to a session's jobs as job_state events in that session.

Each poll (status, wait, the watcher) compares a job's state with the last one recorded
in the session that submitted it, and appends a job_state event when it changed. Budgets
(the failure streak), the watcher's decisions and the brains read these events.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from pydantic import BaseModel, ConfigDict, Field

from jobsmith.adapters.scheduler import JobStatus
from jobsmith.adapters.states import JobState
from jobsmith.agent.runtime.session.events import Event, EventKind
from jobsmith.agent.runtime.session.ledger import JobLedger
from jobsmith.agent.runtime.session.readmodel import SessionFolds, fold_events
from jobsmith.agent.runtime.session.session_log import SessionLog
from jobsmith.agent.runtime.session.store import SessionStore


class StateChange(BaseModel):
    """One job's new state, as recorded in its session."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    session_id: str = Field(description="the session that submitted the job")
    job_id: str = Field(description="Slurm's job id")
    state: JobState = Field(description="the new state")
    previous: JobState | None = Field(description="the state recorded before, if any")


def last_states(events: list[Event]) -> dict[str, str]:
    """The last recorded state of each job of a session (a fold of just these events)."""
    return fold_events(events).job_states


def decided_jobs(events: list[Event]) -> set[str]:
    """Job ids a brain or a person already decided about.

    A typed `decision` event names its job; logs written before decisions were typed
    recorded the rule brain's as model_output with a job_id, which still counts.
    """
    return fold_events(events).decided


def record_job_states(
    store: SessionStore,
    ledger: JobLedger,
    statuses: Mapping[str, JobStatus],
    on_change: Callable[[StateChange], None] | None = None,
    *,
    folds: SessionFolds,
) -> list[StateChange]:
    """Append a job_state event for each job whose state changed; return the changes.

    The last recorded states come from the sessions' folds (the caller's, kept up to
    date across calls). NOT_VISIBLE is never recorded: a job Slurm does not show yet
    has not changed.
    """
    changes = []
    known: dict[str, dict[str, str]] = {}
    logs: dict[str, SessionLog] = {}
    for job_id, st in statuses.items():
        record = ledger.get(job_id)
        if record is None or record.session_id is None or st.state is JobState.NOT_VISIBLE:
            continue
        log = logs.setdefault(record.session_id, SessionLog(store, record.session_id))
        if record.session_id not in known:
            known[record.session_id] = dict(folds.of(record.session_id).job_states)
        previous = known[record.session_id].get(job_id)
        if previous == st.state.value or _forgotten_after_its_end(previous, st.state):
            continue
        log.append(EventKind.JOB_STATE, _state_data(job_id, st), None)
        known[record.session_id][job_id] = st.state.value
        change = StateChange(
            session_id=record.session_id,
            job_id=job_id,
            state=st.state,
            previous=JobState(previous) if previous else None,
        )
        changes.append(change)
        if on_change is not None:
            on_change(change)
    return changes


def _forgotten_after_its_end(previous: str | None, state: JobState) -> bool:
    """True for FINAL_UNKNOWN after a recorded end: the controller forgot a job whose end
    a poll already saw, and the recorded end is the better answer (never overwritten)."""
    recorded = JobState.known(previous)
    return state is JobState.FINAL_UNKNOWN and recorded is not None and recorded.is_terminal


def _state_data(job_id: str, st: JobStatus) -> dict[str, object]:
    data: dict[str, object] = {
        "job_id": job_id,
        "state": st.state.value,
        "task_counts": st.task_counts,
        "reason": st.reason,
    }
    if st.record is not None:
        data |= {"exit_code": st.record.exit_code, "signal": st.record.signal}
    return data

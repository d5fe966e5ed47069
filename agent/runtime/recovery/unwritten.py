"""An array whose end accounting has not finished writing: held, not decided.

slurmdbd writes an array's task records as their ends reach it, and can lag behind the
controller by whole tasks. A poll that reads accounting alone (a running job is followed
by sacct alone: adapters/slurm/scheduler.py) can then see every task it has a record of
ended while others have no record yet: merge_status summarises that as the array's end,
with task counts short of the array. Recorded so, the session would keep those counts for
good (a job_state event is written on a change of state only), and a decision could be
made on an end whose failed task accounting had not written yet.

jobsmith knows how many tasks it submitted (the ledger's --array). An ended array with
fewer task records than that is held in the state last seen (as a stand-in row is:
standin.py), so nothing is decided or recorded from it and the next poll reads it again.
A record that never comes must not hold the array for ever: once the newest task end is
HOLD_S old, the answer is taken as it is.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from jobsmith.adapters.scheduler import JobStatus
from jobsmith.adapters.states import JobState
from jobsmith.agent.runtime.session.ledger import JobLedger
from jobsmith.agent.runtime.session.readmodel import SessionFolds

#: how long after its newest task end an array short of task records is held (seconds)
HOLD_S = 300.0


def hold_unwritten_arrays(
    statuses: Mapping[str, JobStatus],
    ledger: JobLedger,
    folds: SessionFolds,
    now: datetime | None = None,
) -> dict[str, JobStatus]:
    """statuses with each ended array that accounting has not finished writing held in
    the state its session last recorded (COMPLETING where none was: it is ending)."""
    out = dict(statuses)
    for job_id, st in statuses.items():
        if "_" in job_id or not st.tasks or not st.accounted or not st.state.is_terminal:
            continue
        submitted = ledger.get(job_id)
        if submitted is None or submitted.options.array is None:
            continue
        if sum(st.task_counts.values()) >= submitted.options.array_size():
            continue
        if _newest_end_age(st, now) > HOLD_S:
            continue
        recorded = folds.recorded_state(job_id, submitted)
        held = recorded if recorded is not None and not recorded.is_terminal else None
        out[job_id] = st.model_copy(update={"state": held or JobState.COMPLETING})
    return out


def _newest_end_age(st: JobStatus, now: datetime | None) -> float:
    """Seconds since the newest task end accounting shows (never held without one)."""
    ends = [t.end_time for t in st.tasks if t.end_time is not None]
    if not ends:
        return float("inf")
    newest = max(ends)
    return ((now or datetime.now(newest.tzinfo)) - newest).total_seconds()

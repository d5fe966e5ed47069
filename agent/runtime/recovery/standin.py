"""A stand-in accounting row, settled from what jobsmith already knows.

Right after a short job ends, or after a job starts on a busy cluster (slurmdbd has not
recorded the start yet: seen in CI), slurmdbd can answer sacct for seconds with a row
made from the step records alone (adapters/slurm/parsing/parse.py marks it JobRecord.stand_in):
no name, no time limit, no memory asked, and a state that may lag the job's (PENDING
beside a RUNNING batch step, in tests/fixtures/lab-22.05/sacct-placeholder-pipe.txt).

Asking sacct again would cost every poll a sleep and a second call for as long as the
row lasts, and nothing bounds that. jobsmith needs neither: what it submitted is in its
ledger (name, memory, time, partition), and the state the last poll saw is in the
session (or, for a job of no session, in the last poll kept; for a job never seen,
the row's state read with its steps). So a stand-in row is
filled from those, keeps the last poll's state, and is marked so that nothing is
decided from it (agent/watcher/cycle.py); the next poll reads the job again anyway.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from jobsmith.adapters.records import JobRecord
from jobsmith.adapters.scheduler import JobStatus
from jobsmith.adapters.states import JobState
from jobsmith.agent.runtime.session.lastpoll import LastPoll
from jobsmith.agent.runtime.session.ledger import JobLedger, SubmissionRecord
from jobsmith.agent.runtime.session.readmodel import SessionFolds

_MIB = 1024 * 1024


def settle_stand_ins(
    statuses: Mapping[str, JobStatus],
    ledger: JobLedger,
    folds: SessionFolds,
    last_poll: Callable[[], LastPoll | None],
) -> dict[str, JobStatus]:
    """statuses with what a stand-in row lacks filled from the ledger, and each status
    whose state is a stand-in's alone (the controller did not answer for the job, whose
    state stands otherwise: adapters/slurm/parsing/status.py) holding the state last seen: its
    session's record, else the last poll's, else (never seen before: stand-ins come right
    after a start too) the row's own state read with its steps. last_poll is only read
    when a stand-in needs it."""
    out = dict(statuses)
    polled: dict[str, JobState] | None = None

    def last_seen(job_id: str) -> JobState | None:
        nonlocal polled
        if polled is None:
            poll = last_poll()
            polled = {} if poll is None else {j.job_id: j.state for j in poll.jobs}
        return polled.get(job_id)

    for job_id, st in statuses.items():
        records = [st.record] if st.record is not None else []
        if not any(_lacking(r) for r in [*records, *st.tasks]):
            continue
        submitted = ledger.get(job_id)
        state = st.state
        if st.stand_in and not st.in_queue:  # the state is the lagging row's alone
            recorded = folds.recorded_state(job_id, submitted)
            state = recorded or last_seen(job_id) or _own_state(st)
        out[job_id] = st.model_copy(
            update={
                "state": state,
                "record": None if st.record is None else _filled(st.record, submitted),
                "tasks": tuple(_filled(t, submitted) for t in st.tasks),
            }
        )
    return out


def _lacking(record: JobRecord) -> bool:
    """A stand-in, or a record merged from one: no name, no memory asked or no limit."""
    return record.stand_in or not record.name or record.req_mem_bytes is None


def _own_state(st: JobStatus) -> JobState:
    """The row's state, read with its steps: PENDING beside a RUNNING batch step (the
    capture) is a job that runs. Nothing is decided from it either way (cycle.py)."""
    records = [st.record] if st.record is not None else list(st.tasks)
    if any(step.state is JobState.RUNNING for r in records for step in r.steps):
        return JobState.RUNNING
    return st.state


def _filled(record: JobRecord, submitted: SubmissionRecord | None) -> JobRecord:
    """A record with what jobsmith submitted in place of what its row lacks."""
    if not _lacking(record) or submitted is None:
        return record
    opts = submitted.options
    update: dict[str, object] = {"name": record.name or opts.job_name}
    if record.req_mem_bytes is None and opts.mem_mb is not None:
        update["req_mem_bytes"] = opts.mem_mb * _MIB * (opts.nodes or 1)
    if record.timelimit_s is None and opts.time_limit_s is not None:
        update["timelimit_s"] = opts.time_limit_s
    if record.partition is None and opts.partition is not None:
        update["partition"] = opts.partition
    return record.model_copy(update=update)

"""Merging accounting (sacct) and controller (squeue) records into one status per job (pure).

The controller is current but forgets finished jobs after MinJobAge; accounting keeps
everything but can lag behind the controller. A job neither knows yet is NOT_VISIBLE,
which is never a failure. Where the site keeps no accounting, controller_status() reads
the controller alone, and a job it no longer holds has ended unseen: FINAL_UNKNOWN.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TypeVar

from jobsmith.adapters.jobid import ANY_KIND, BadJobId, parse_job_id
from jobsmith.adapters.records import JobRecord, QueueRecord
from jobsmith.adapters.scheduler import JobStatus
from jobsmith.adapters.states import JobState

T = TypeVar("T")


def merge_status(
    job_ids: Sequence[str], accounting: Sequence[JobRecord], queue: Sequence[QueueRecord]
) -> dict[str, JobStatus]:
    """One JobStatus per requested id ('123' for a job or a whole array, '123_4' for a task).

    Records are indexed once by every id they answer to, so a poll of thousands of jobs
    stays linear.
    """
    acct_by, live_by = _index(accounting), _index(queue)
    return {j: _one(j, acct_by.get(j, []), live_by.get(j, [])) for j in job_ids}


R = TypeVar("R", JobRecord, QueueRecord)


def controller_status(job_ids: Sequence[str], queue: Sequence[QueueRecord]) -> dict[str, JobStatus]:
    """One JobStatus per id from the controller alone (a site without accounting).

    Every id asked about was given by sbatch, so the controller held the job; it drops a
    job only MinJobAge after its end. A job it no longer shows has therefore ended, and
    with no accounting how it ended is unknown: FINAL_UNKNOWN, never a failure.
    """
    merged = merge_status(job_ids, [], queue)
    return {
        job_id: st.model_copy(update={"state": JobState.FINAL_UNKNOWN})
        if st.state is JobState.NOT_VISIBLE
        else st
        for job_id, st in merged.items()
    }


def _index(records: Sequence[R]) -> dict[str, list[R]]:
    """Records by the ids a caller may ask with: display id, raw id, and the array's id."""
    index: dict[str, list[R]] = {}
    for rec in records:
        for key in {rec.job_id, rec.job_id_raw, rec.array_job_id}:
            if key is not None:
                index.setdefault(key, []).append(rec)
    return index


def _one(job_id: str, acct: list[JobRecord], live: list[QueueRecord]) -> JobStatus:
    if "_" in job_id:  # one task: only its own record, not its siblings sharing the array id
        acct = [r for r in acct if job_id in (r.job_id, r.job_id_raw)]
        live = [q for q in live if job_id in (q.job_id, q.job_id_raw)]
    tasks = _tasks(acct, live)
    if tasks and "_" not in job_id:
        return JobStatus(
            job_id=job_id,
            state=summarise(t.state for t in tasks),
            tasks=tuple(tasks),
            reason=_first(q.reason for q in live),
            estimated_start=_first(q.estimated_start for q in live),
            in_queue=bool(live),
            accounted=bool(acct),
            dependency=_first(q.dependency for q in live),
        )
    record = _with_live_state(acct[0] if acct else None, live[0] if live else None)
    return JobStatus(
        job_id=job_id,
        state=record.state if record else JobState.NOT_VISIBLE,
        record=record,
        reason=live[0].reason if live else None,
        estimated_start=live[0].estimated_start if live else None,
        in_queue=bool(live),
        accounted=bool(acct),
        dependency=live[0].dependency if live else None,
    )


def _tasks(acct: list[JobRecord], live: list[QueueRecord]) -> list[JobRecord]:
    """Array task records by display id, the controller's state winning where it has one.

    Accounting can lag behind the controller by whole tasks, and its not-yet-split
    pending range goes stale as soon as tasks start: while the controller holds any
    record of the array, its pending range is the only one used.
    """
    live_tasks = [q for q in live if q.array_job_id is not None]
    by_id = {
        r.job_id: r
        for r in acct
        if r.array_job_id is not None and not (live_tasks and r.array_task_range)
    }
    for q in live_tasks:
        by_id[q.job_id] = _merge(by_id.get(q.job_id), q)
    return [by_id[k] for k in sorted(by_id, key=_task_sort_key)]


def _with_live_state(record: JobRecord | None, live: QueueRecord | None) -> JobRecord | None:
    """Accounting's detail with the controller's (fresher) state and reason."""
    return record if live is None else _merge(record, live)


def _merge(record: JobRecord | None, live: QueueRecord) -> JobRecord:
    if record is None:
        return JobRecord(
            job_id=live.job_id,
            job_id_raw=live.job_id_raw,
            array_job_id=live.array_job_id,
            array_task_id=live.array_task_id,
            array_task_range=live.array_task_range,
            name=live.name,
            state=live.state,
            reason=live.reason,
            partition=live.partition,
            user=live.user,
            comment=live.comment,
            exit_code=live.exit_code,
            signal=live.signal,
        )
    update: dict[str, object] = {"state": live.state, "reason": live.reason}
    if record.exit_code is None or not record.state.is_terminal:
        # accounting has not caught up with the end of the job yet
        update |= {"exit_code": live.exit_code, "signal": live.signal}
    if record.stand_in:
        # slurmdbd's stand-in row (parse.py) beside the controller's answer: the state and
        # name are the controller's; the row is still a stand-in for what only accounting
        # has (memory, limits, steps' peaks), so nothing is decided from it (JobStatus.
        # in_queue tells the agent the state is fresh: agent/runtime/recovery/standin.py)
        update |= {"name": record.name or live.name}
        update |= {"partition": record.partition or live.partition}
    return record.model_copy(update=update)


def summarise(states: Iterable[JobState]) -> JobState:
    """One state for a whole array: active while any task is, else success or the failure."""
    seen = set(states)
    if not seen:
        return JobState.NOT_VISIBLE
    active = {s for s in seen if not s.is_terminal}
    for state in (JobState.RUNNING, JobState.PENDING):
        if state in active:
            return state
    if active:
        return active.pop()
    failures = {s for s in seen if s.is_failure}
    if not failures:
        # one task that ended unseen makes the array's success unknown too
        return JobState.FINAL_UNKNOWN if JobState.FINAL_UNKNOWN in seen else JobState.COMPLETED
    return failures.pop() if len(failures) == 1 else JobState.FAILED


def _task_sort_key(job_id: str) -> tuple[int, str]:
    index = job_id.partition("_")[2]
    return (int(index), "") if index.isdigit() else (1 << 62, index)


def _first(values: Iterable[T | None]) -> T | None:
    return next((v for v in values if v is not None), None)


def started_among(job_ids: Sequence[str], queue: Iterable[QueueRecord]) -> list[str]:
    """The ids among job_ids (a job, a task, a range of tasks) that name a job or array
    task the controller shows as started (JobState.has_started), in their order: what
    `scontrol hold` did not stop. An id that is not a job id names nothing."""
    started = [r for r in queue if r.state.has_started]
    named = []
    for text in job_ids:
        try:
            ref = parse_job_id(text, ANY_KIND)
        except BadJobId:
            continue
        if any(ref.names(r.job_id_raw, r.array_job_id, r.array_task_id) for r in started):
            named.append(text)
    return named

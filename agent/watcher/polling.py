"""Polling the jobs a command asks about: one batched status call, the ends recorded in
the sessions that submitted the jobs, and told (news, the site's webhook).

`jobsmith status` and `wait`, the plan, pipeline and report views, and each watcher cycle
(agent/watcher/cycle.py) poll through here, so every poll settles stand-in rows the same
way and leaves its answer for whoever asks without polling (chat, MCP: last_poll.json).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import TYPE_CHECKING, Protocol

from jobsmith.adapters.states import JobState
from jobsmith.errors import ConfigError

if TYPE_CHECKING:
    from jobsmith.adapters.scheduler import JobStatus, Scheduler
    from jobsmith.agent.runtime.session.jobstate import StateChange
    from jobsmith.agent.runtime.session.lastpoll import LastPollFile
    from jobsmith.agent.runtime.session.ledger import JobLedger, SubmissionRecord
    from jobsmith.agent.runtime.session.readmodel import SessionFolds
    from jobsmith.agent.runtime.session.store import SessionStore
    from jobsmith.agent.runtime.submission.executor import Executor
    from jobsmith.agent.watcher.news import News
    from jobsmith.agent.watcher.workload import WorkloadParts
    from jobsmith.site_config import LoadedSite

#: how far back the views that poll a session's jobs (plan, pipeline, report) look
SESSION_WINDOW = "30d"


class PollParts(Protocol):
    """What a poll uses (the composition root, agent/app.py, has them all); the site is
    read only to tell a job's end to its webhook."""

    @property
    def scheduler(self) -> Scheduler: ...
    @property
    def store(self) -> SessionStore: ...
    @property
    def ledger(self) -> JobLedger: ...
    @property
    def folds(self) -> SessionFolds: ...
    @property
    def last_poll_file(self) -> LastPollFile: ...
    @property
    def news(self) -> News: ...
    @property
    def site(self) -> LoadedSite: ...
    @property
    def executor(self) -> Executor:
        """Holds or cancels a job Slurm changed after it was checked (check_accepted)."""
        ...


def batched_poll(
    parts: PollParts, job_ids: list[str], since: datetime, *, terms: bool = True
) -> dict[str, JobStatus]:
    """One batched status call (a watcher cycle's, `status`'s); a just-ended job's
    stand-in row is filled from the ledger and keeps the state last seen
    (agent/runtime/recovery/standin.py), as does an ended array whose accounting lacks
    tasks (recovery/unwritten.py); the answer is kept for whoever asks without polling.

    terms=False (a poll that follows states: `wait`) asks without what Slurm granted
    (QoS, TRES: Scheduler.status), unless a job's first compare with what was checked is
    still due (check_accepted reads them)."""
    from jobsmith.agent.runtime.recovery.standin import settle_stand_ins
    from jobsmith.agent.runtime.recovery.unwritten import hold_unwritten_arrays

    terms = terms or any(_compare_due(parts, job_id) is not None for job_id in job_ids)
    answered = parts.scheduler.status(job_ids, since, terms=terms)
    last_poll = parts.last_poll_file
    statuses = settle_stand_ins(answered, parts.ledger, parts.folds, last_poll.read)
    statuses = hold_unwritten_arrays(statuses, parts.ledger, parts.folds)
    last_poll.record(statuses, datetime.now(UTC))
    check_accepted(parts, statuses)
    return statuses


def check_accepted(parts: PollParts, statuses: Mapping[str, JobStatus]) -> None:
    """The first poll that reads a job's own record compares it with what was checked
    (agent/runtime/submission/accepted.py). A job Slurm changed is held while it waits,
    or cancelled if it already runs, through the executor (the session's log has the
    step), and told: news, and a job_accepted event naming what changed. Two pollers
    may both act (hold and cancel are idempotent); one event is recorded."""
    from jobsmith.agent.runtime.session.claims import append_once_per_job
    from jobsmith.agent.runtime.session.events import EventKind
    from jobsmith.agent.runtime.session.session_log import SessionLog
    from jobsmith.agent.runtime.submission.accepted import altered

    try:
        adjusts = parts.site.config.scheduler.adjusts
    except ConfigError:
        return  # no site config: nothing was submitted through jobsmith's policy
    for job_id, status in statuses.items():
        own = status.record or next(iter(status.tasks), None)
        # a row accounting is still writing has no partition yet, and a job accounting
        # has not written at all is only the controller's (no QoS, limits or TRES): the
        # next poll compares. Without accounting, the controller's record is all there is.
        if status.stand_in or own is None or not own.partition:
            continue
        due = _compare_due(parts, job_id)
        if due is None:
            continue
        submitted, sid = due
        if not status.accounted and parts.scheduler.has_accounting():
            continue
        changes = altered(submitted.options, status, adjusts)
        action = _undo(parts, sid, job_id, status) if changes else None
        data = {"job_id": job_id, "altered": changes, "action": action}
        log = SessionLog(parts.store, sid)
        if append_once_per_job(log, EventKind.JOB_ACCEPTED, data) and changes:
            parts.news.add("job_altered", job_id=job_id, altered=changes, action=action)


def _compare_due(parts: PollParts, job_id: str) -> tuple[SubmissionRecord, str] | None:
    """The job's submission and session while check_accepted has yet to compare it (None:
    jobsmith did not submit it, or its session has a job_accepted event for it): the one
    test for check_accepted and for batched_poll's choice of the terms."""
    submitted = parts.ledger.get(job_id)
    if submitted is None or submitted.session_id is None:
        return None
    sid = submitted.session_id
    return None if job_id in parts.folds.of(sid).accepted else (submitted, sid)


def _undo(parts: PollParts, session_id: str, job_id: str, status: JobStatus) -> str | None:
    """Hold a changed job that waits, cancel one that runs (None: it has ended)."""
    from jobsmith.agent.runtime.submission import steps as st
    from jobsmith.agent.runtime.submission.judging.judge import Origin, Who

    if status.state.is_terminal:
        return None
    step = st.Hold if status.state is JobState.PENDING else st.Cancel
    control = step(job_ids=[job_id])
    parts.executor.run(session_id, control, origin=Origin(who=Who.BRAIN))
    return control.action


def poll_jobs(
    parts: WorkloadParts, job_ids: list[str], since: str, *, terms: bool = True
) -> dict[str, JobStatus]:
    """Status of the given jobs, or of every job jobsmith submitted within `since`.

    Jobs that ended are also recorded in the sessions that submitted them, and told
    (tell); a workload whose last job this poll saw end is told too
    (agent/watcher/workload.py), whoever polled first. terms: batched_poll's.
    """
    from jobsmith.agent.runtime.session.jobstate import record_job_states
    from jobsmith.agent.runtime.session.unseen import with_recorded_ends
    from jobsmith.agent.runtime.window import parse_window

    window = parse_window(since)
    floor = datetime.now() - window
    ledger = parts.ledger
    if not job_ids:
        job_ids = [r.job_id for r in ledger.since(floor)]
    known = [r.submitted_at for j in job_ids if (r := ledger.get(j)) is not None]
    since_dt = min([floor, *(t - timedelta(minutes=5) for t in known)])
    polled = batched_poll(parts, job_ids, since_dt, terms=terms)
    statuses = with_recorded_ends(parts.folds, ledger, polled)
    changes = record_job_states(
        parts.store, ledger, statuses, partial(tell, parts), folds=parts.folds
    )
    if any(c.state.is_terminal for c in changes):
        from jobsmith.agent.watcher.workload import tell_workloads

        tell_workloads(parts, changes)  # this poll may be the one that saw a workload end
    return statuses


def session_poll(parts: WorkloadParts) -> Callable[[list[str]], dict[str, JobStatus]]:
    """poll_jobs over the session window: how the plan, pipeline and report views poll
    a session's jobs (none asked, no call)."""

    def poll(job_ids: list[str]) -> dict[str, JobStatus]:
        return poll_jobs(parts, job_ids, SESSION_WINDOW) if job_ids else {}

    return poll


def tell(parts: PollParts, change: StateChange) -> None:
    """Note a job that ended, for the next interactive command and the site's webhook."""
    if not change.state.is_terminal:
        return
    parts.news.add("job_ended", job_id=change.job_id, state=change.state.value)
    url = _webhook_url(parts)
    if url and parts.site.config.notify.webhook_for == "job":  # else: watcher/workload.py
        from jobsmith.agent.views.output import note
        from jobsmith.agent.watcher.webhook import post

        payload = {"event": "job_ended", **change.model_dump(mode="json")}
        problem = post(url, payload)
        if problem:
            note(f"jobsmith: {problem}")


def _webhook_url(parts: PollParts) -> str | None:
    try:
        return parts.site.config.notify.webhook_url
    except ConfigError:
        return None

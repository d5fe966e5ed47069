"""Polling the jobs a command asks about: one batched status call, the ends recorded in
the sessions that submitted the jobs, and told (news, the site's webhook).

`jobsmith status` and `wait`, the plan, pipeline and report views, and each watcher cycle
(agent/watcher/cycle.py) poll through here, so every poll settles stand-in rows the same
way and leaves its answer for whoever asks without polling (chat, MCP: last_poll.json).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import TYPE_CHECKING, Protocol

from jobsmith.errors import ConfigError

if TYPE_CHECKING:
    from jobsmith.adapters.scheduler import JobStatus, Scheduler
    from jobsmith.agent.runtime.session.jobstate import StateChange
    from jobsmith.agent.runtime.session.lastpoll import LastPollFile
    from jobsmith.agent.runtime.session.ledger import JobLedger
    from jobsmith.agent.runtime.session.readmodel import SessionFolds
    from jobsmith.agent.runtime.session.store import SessionStore
    from jobsmith.agent.watcher.news import News
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


def batched_poll(parts: PollParts, job_ids: list[str], since: datetime) -> dict[str, JobStatus]:
    """One batched status call (a watcher cycle's, `status`'s); a just-ended job's
    stand-in row is filled from the ledger and keeps the state last seen
    (agent/runtime/recovery/standin.py); the answer is kept for whoever asks without polling."""
    from jobsmith.agent.runtime.recovery.standin import settle_stand_ins

    answered = parts.scheduler.status(job_ids, since)
    last_poll = parts.last_poll_file
    statuses = settle_stand_ins(answered, parts.ledger, parts.folds, last_poll.read)
    last_poll.record(statuses, datetime.now(UTC))
    return statuses


def poll_jobs(parts: PollParts, job_ids: list[str], since: str) -> dict[str, JobStatus]:
    """Status of the given jobs, or of every job jobsmith submitted within `since`.

    Jobs that ended are also recorded in the sessions that submitted them.
    """
    from jobsmith.agent.runtime.session.jobstate import record_job_states
    from jobsmith.agent.runtime.session.unseen import with_recorded_ends
    from jobsmith.agent.runtime.window import parse_window

    window = parse_window(since)
    floor = datetime.now() - window
    ledger = parts.ledger
    if not job_ids:
        job_ids = [r.job_id for r in ledger.all() if r.submitted_at >= floor]
    known = [r.submitted_at for j in job_ids if (r := ledger.get(j)) is not None]
    since_dt = min([floor, *(t - timedelta(minutes=5) for t in known)])
    statuses = with_recorded_ends(parts.folds, ledger, batched_poll(parts, job_ids, since_dt))
    record_job_states(parts.store, ledger, statuses, partial(tell, parts), parts.folds)
    return statuses


def session_poll(parts: PollParts) -> Callable[[list[str]], dict[str, JobStatus]]:
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
    if url:
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

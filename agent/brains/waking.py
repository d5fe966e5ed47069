"""Waking a conversation's brain when the jobs it started end.

A person says "transcode this, join the chunks when they are done, re-run any chunk that
fails" and leaves. The chunks end while nobody is there; whoever sees them end (the
watcher, usually from cron; a `status` or `wait`; an open chat) records their states, and
the session's fold (agent/runtime/session/readmodel.py) lists the ended jobs of an ask or chat
session that its brain was not told of yet. `Waker.wake` then takes the session up again:
one model turn, on the session's log as data and the ended jobs, through the same tools,
policy, budgets and approvals as the person's own ask. The rule brain has already had its
say by then (the watcher decides about failures first, at no token cost), and the model
sees what it did.

Exactly one waker tells a brain about a job: `brain_woken` is appended only if no earlier
one names any of the same jobs (a conditional append, agent/runtime/session/claims.py), before
the model is called; a watcher and an open chat racing for the same session wake it once.
A crash after that append loses that wake's turn rather than paying for it twice.

A wake that fails (the API down, an unreadable reply, a bound reached, any surprise)
records `brain_failed` with the reason and when to try again: its jobs are unwoken
again, and a later waker takes them up once that time has come (RETRY_BACKOFF: after 1,
5, then 30 minutes), in the same conditional way. After the last retry fails the event
says it was given up, and so does the user's news. The attempt count is the log's own (the
fold counts `brain_failed` events per job): no side file, and two wakers racing for a
retry still wake the brain once. A wake lost to a crash between its `brain_woken` and its
end stays lost, as before.

Where there is no key (the watcher runs from cron, the key lives in a chat's
environment), `brain_waiting` records that the session's brain waits, once for each set of
jobs, and the news says so; the next waker with a key (a chat, an ask, a watcher) picks
it up, since the jobs stay unwoken until a `brain_woken` names them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from jobsmith.agent.brains.ask_tools import SESSION_VIEW_CHARS, as_data
from jobsmith.agent.brains.conversation import Conversation
from jobsmith.agent.runtime.documents import SessionDocument
from jobsmith.agent.runtime.session.events import Event, EventKind
from jobsmith.agent.runtime.session.jobstate import last_states
from jobsmith.agent.runtime.session.payloads import WakeFailedPayload, WakePayload, payload
from jobsmith.agent.runtime.session.readmodel import SessionFolds, TokenTotals
from jobsmith.agent.runtime.session.session_log import SessionLog
from jobsmith.agent.runtime.session.store import SessionStore
from jobsmith.agent.runtime.submission.approval.approvals import ApprovalNeeded
from jobsmith.errors import JobsmithError

WAKE_PROMPT = """\
You are taken up again because jobs of this session ended; no person is watching now. \
Above is the session so far (the person's requests, your earlier turns, the steps and \
the jobs' states) and below are the jobs that ended. If what the person asked for needs \
a next step now (join the chunks, merge the alignments, re-run what failed and was not \
re-run already), take it with your tools. A submission that needs approval waits for \
the person. Otherwise, or after that, say in one or two sentences what happened and \
what the person can do next."""


class WakeOutcome(BaseModel):
    """What waking one session's brain did (`watch --once --json`'s `woken`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    session_id: str = Field(description="the session")
    job_ids: list[str] = Field(description="the ended jobs it was woken for")
    outcome: Literal["answered", "held", "waiting", "failed"] = Field(
        description="answered: the model went on; held: a submission waits for approval; "
        "waiting: no model key here (the next chat, ask or watcher with one goes on); "
        "failed: the model could not be asked (the reason says why)"
    )
    detail: str = Field("", description="the model's answer, the step held, or the reason")
    submitted: list[str] = Field(default_factory=list, description="job ids it submitted")
    attempt: int = Field(1, description="which try at these jobs this was (1: the first)")
    retry_at: AwareDatetime | None = Field(
        None, description="failed: when a waker tries again (None: given up, or not failed)"
    )
    usage: TokenTotals = Field(
        default_factory=TokenTotals,
        description="what its model calls cost (a chat's /cost counts the wakes it made)",
    )


class WakeTaken(JobsmithError):
    """Another waker already took up these jobs."""


#: the most conversations one waker takes up in one call (a watcher cycle, a chat's poll):
#: an open chat once woke 11 older ask sessions on opening, 11 model calls at once; the
#: rest are taken up by the next cycles, oldest first, so none is left out for good
MAX_WAKES_PER_CALL = 3
#: how long after its first, second, third failure a wake is tried again; one more
#: failure after the last is given up: a model API that is down for an hour costs four
#: calls per session, not one per cycle, and a wake is not lost to a passing outage
RETRY_BACKOFF = (timedelta(minutes=1), timedelta(minutes=5), timedelta(minutes=30))
#: the most tries at one wake
MAX_WAKE_TRIES = 1 + len(RETRY_BACKOFF)


def _now() -> datetime:
    return datetime.now(UTC)


@dataclass
class Waker:
    """Takes up the brains of conversation sessions whose jobs ended (module docstring)."""

    conversation: Conversation
    store: SessionStore
    folds: SessionFolds
    #: the user's news (kind, fields): what the next interactive command mentions
    tell: Callable[..., None]
    #: now, for the retries' backoff (a test moves it)
    clock: Callable[[], datetime] = field(default=_now)

    def wake(self, session_ids: Iterable[str]) -> list[WakeOutcome]:
        """Each given session with ended jobs its brain was not told of, taken up once."""
        outcomes: list[WakeOutcome] = []
        has_key: bool | None = None  # read once per call, and only if a session needs it
        now = self.clock()
        for session_id in sorted(set(session_ids)):
            fold = self.folds.of(session_id)
            jobs = fold.wake_due(now) if fold.conversational else []
            if not jobs:
                continue
            has_key = self.conversation.has_key() if has_key is None else has_key
            if not has_key:
                outcomes.append(self._waiting(session_id, jobs, fold.waiting))
                continue
            if sum(o.outcome != "waiting" for o in outcomes) >= MAX_WAKES_PER_CALL:
                break  # the next call takes it up (the jobs stay unwoken until then)
            tried = {j: r.failures for j in jobs if (r := fold.wake_retries.get(j)) is not None}
            outcome = self._wake_one(session_id, jobs, tried)
            if outcome is not None:
                outcomes.append(outcome)
        return outcomes

    def _waiting(self, session_id: str, jobs: list[str], announced: set[str]) -> WakeOutcome:
        """No key here: say so once for these jobs, in the session and in the news."""
        if not set(jobs) <= announced:
            SessionLog(self.store, session_id).append(
                EventKind.BRAIN_WAITING, {"job_ids": jobs}, None
            )
            self.tell("brain_waiting", session_id=session_id)
        return WakeOutcome(
            session_id=session_id,
            job_ids=jobs,
            outcome="waiting",
            detail="no model key here: `jobsmith chat --session "
            f"{session_id}` (or a watcher with a key) goes on",
        )

    def _wake_one(
        self, session_id: str, jobs: list[str], tried: dict[str, int]
    ) -> WakeOutcome | None:
        """One wake: claim the jobs, then one run of model turns (None: taken already).
        tried: the failed wakes of each job so far, as this waker's fold counts them."""
        log = SessionLog(self.store, session_id)
        try:
            log.append_if(EventKind.BRAIN_WOKEN, {"job_ids": jobs}, None, _unclaimed(jobs, tried))
        except WakeTaken:
            return None
        attempt = 1 + max(tried.values(), default=0)
        done = WakeOutcome(session_id=session_id, job_ids=jobs, outcome="answered", attempt=attempt)
        spent = TokenTotals()  # the run's, whatever ends it (a failed call costs too)
        try:
            run = self.conversation.open("wake", "", session_id)
            spent = run.totals
            result = run.exchange(wake_message(self.store.read(session_id), jobs))
        except ApprovalNeeded as err:
            self.tell("approval_asked", step_id=err.step_id)
            update = {"outcome": "held", "detail": str(err), "usage": spent}
            return done.model_copy(update=update)
        except JobsmithError as err:
            return self._failed(log, done.model_copy(update={"usage": spent}), str(err))
        except Exception as err:  # a surprise ends this wake, never the watcher cycle
            said = f"waking it failed: {type(err).__name__}: {err}"
            return self._failed(log, done.model_copy(update={"usage": spent}), said)
        self.tell("brain_answered", session_id=session_id)
        update = {"detail": result.answer, "submitted": result.job_ids(), "usage": spent}
        return done.model_copy(update=update)

    def _failed(self, log: SessionLog, done: WakeOutcome, reason: str) -> WakeOutcome:
        """A failed wake, recorded with when to try again (or that it is given up)."""
        attempt = done.attempt
        retry_at = self.clock() + RETRY_BACKOFF[attempt - 1] if attempt < MAX_WAKE_TRIES else None
        data = {
            "job_ids": done.job_ids,
            "reason": reason,
            "attempt": attempt,
            "retry_at": None if retry_at is None else retry_at.isoformat(),
        }
        failed = done.model_copy(update={"outcome": "failed", "retry_at": retry_at})
        try:
            log.append(EventKind.BRAIN_FAILED, data, None)
        except (JobsmithError, OSError) as err:  # the jobs stay taken, as after a crash
            said = f"{reason}; recording that failed too ({err}): not tried again"
            return failed.model_copy(update={"detail": said, "retry_at": None})
        if retry_at is None:
            self.tell("brain_gave_up", session_id=log.session_id)
            said = (
                f"{reason}; given up after {attempt} tries (`jobsmith chat --session "
                f"{log.session_id}` to go on)"
            )
        else:
            said = f"{reason}; try {attempt} of {MAX_WAKE_TRIES}, again after {retry_at:%H:%M} UTC"
        return failed.model_copy(update={"detail": said})


def _unclaimed(jobs: list[str], tried: dict[str, int]) -> Callable[[list[Event]], None]:
    """Precondition of a brain_woken: each job was woken as often as its wakes failed,
    and as often as the waker's fold counted (tried): nobody holds it now, and nobody
    took up this same try before (a waker with a stale fold is one try behind)."""
    wanted = set(jobs)

    def check(events: list[Event]) -> None:
        woken: Counter[str] = Counter()
        failed: Counter[str] = Counter()
        for event in events:
            data = payload(event)
            if event.kind is EventKind.BRAIN_WOKEN and isinstance(data, WakePayload):
                woken.update(wanted & set(data.job_ids))
            elif isinstance(data, WakeFailedPayload):
                failed.update(wanted & set(data.job_ids))
        taken = sorted(j for j in jobs if not woken[j] == failed[j] == tried.get(j, 0))
        if taken:
            raise WakeTaken(f"jobs {taken} were taken up already")

    return check


def wake_message(events: list[Event], jobs: list[str]) -> str:
    """What the woken model is told: the session so far and the ended jobs, as data."""
    earlier = SessionDocument(events=tuple(events)).compact()
    ended = [
        {"job_id": job, "state": state}
        for job, state in sorted(last_states(events).items())
        if job in set(jobs)
    ]
    return (
        f"The session so far:\n{as_data(earlier, SESSION_VIEW_CHARS)}\n\n"
        f"The jobs that ended:\n{as_data(ended)}\n\n{WAKE_PROMPT}"
    )

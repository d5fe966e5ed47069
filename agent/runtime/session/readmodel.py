"""The read model: what a session's log adds up to, kept up to date by folding new events.

A session's state (each job's last recorded state, the jobs decided about, what its
submissions spent, the tokens its model calls cost, its part of the failure streak) is
one fold over its events. The log is append-only and gap-free, so a fold up to seq N
stays true for ever: `SessionFolds` keeps each session's fold with the seq it reached
and, when asked again, reads only the events after it (`SessionStore.read(id,
from_seq=N + 1)`). A watcher cycle, a status poll or a budget check then costs the new
events, not the whole log.

Folds are also kept on disk (`<state>/folds/<session>.json`), so a watcher started by
cron every few minutes does not rebuild them either. That file is a cache and nothing
else: written atomically, read back only if it is for this session and of this format,
and rebuilt from the log when it is missing, damaged, stale or ahead of the log (a
session pruned and never re-created: ids are unique). Nothing is ever decided from it
that the log would not say.

The failure streak crosses sessions: it counts the streak failures since the newest
reset (a completed job, or a person's `unblock`) in any session. A session's fold keeps
its newest reset and the failures after it, which is all that count needs: with R the
newest reset over all sessions, the streak is the failures after R, and every such
failure is after its own session's reset too.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, ValidationError

from jobsmith.adapters.states import JobState
from jobsmith.adapters.workflow import TaskStatus
from jobsmith.agent.runtime.session.events import Event, EventKind
from jobsmith.agent.runtime.session.payloads import (
    AcceptedPayload,
    DecidedPayload,
    JobStatePayload,
    ModelOutputPayload,
    OpenedPayload,
    PipelineProgressPayload,
    ResultPayload,
    UnblockedPayload,
    UsagePayload,
    WakeFailedPayload,
    WakePayload,
    payload,
)
from jobsmith.agent.runtime.session.store import SessionNotFound, SessionStore
from jobsmith.files import replace_file

if TYPE_CHECKING:
    from jobsmith.agent.runtime.session.ledger import SubmissionRecord

#: the fold's on-disk format; another value is rebuilt from the log
FORMAT = 8
#: the origins of sessions a model converses in (ask, chat): their brains are woken
CONVERSATIONS = frozenset({"ask", "chat"})
#: what settles a step held for a person: an answer, or a result
_SETTLING = frozenset({EventKind.APPROVAL_GIVEN, EventKind.APPROVAL_REFUSED, EventKind.RESULT})
#: submissions older than this are dropped from a fold: no budget window is longer
_SPENDING_KEPT = timedelta(days=2)


class Spending(BaseModel):
    """One submission, as the budgets count it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    at: AwareDatetime = Field(description="when its result was recorded")
    node_hours: float = Field(0.0, description="nodes x time limit, over all tasks")
    gpu_hours: float = Field(0.0, description="GPUs x time limit, over all tasks")
    submissions: int = Field(
        1, ge=0, description="submissions it counts (0: a pipeline task's time, charged at its end)"
    )


class TokenSpend(BaseModel):
    """One model call, as the token budgets count it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    at: AwareDatetime = Field(description="when its decision or model_output was recorded")
    tokens: int = Field(description="input + output + cache-creation tokens (UsagePayload)")


class TokenTotals(BaseModel):
    """What a session's model calls cost in all, in the Messages API's own counts."""

    model_config = ConfigDict(extra="forbid")

    calls: int = Field(0, description="model calls recorded (decisions and conversation turns)")
    input_tokens: int = Field(0, description="uncached input tokens")
    output_tokens: int = Field(0, description="tokens the model wrote")
    cache_read_input_tokens: int = Field(0, description="input read from the cache")
    cache_creation_input_tokens: int = Field(0, description="input written to the cache")
    charged: int = Field(0, description="what the token budgets count (UsagePayload.charged)")

    def add(self, usage: UsagePayload) -> None:
        """Count one call's usage in."""
        self.calls += 1
        self.input_tokens += usage.input_tokens
        self.output_tokens += usage.output_tokens
        self.cache_read_input_tokens += usage.cache_read_input_tokens
        self.cache_creation_input_tokens += usage.cache_creation_input_tokens
        self.charged += usage.charged

    def plus(self, other: TokenTotals) -> None:
        """Count another's calls in (a chat adds the wakes its polls made)."""
        for name in type(self).model_fields:
            setattr(self, name, getattr(self, name) + getattr(other, name))

    def in_words(self) -> str:
        """'3 model call(s), 1200 tokens charged (900 in, 300 out, 4000 read from the
        cache)': how sessions show, report and chat's /cost say it, in one place."""
        return (
            f"{self.calls} model call(s), {self.charged} tokens charged ({self.input_tokens} in, "
            f"{self.output_tokens} out, {self.cache_read_input_tokens} read from the cache)"
        )


class WakeRetry(BaseModel):
    """A job whose wakes failed (agent/brains/waking.py): how often, and when the next
    waker may try (None: given up, the job is no longer unwoken)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    failures: int = Field(ge=1, description="wakes for the job that failed")
    retry_at: AwareDatetime | None = Field(description="when to try again (None: given up)")


class SessionFold(BaseModel):
    """What one session's log adds up to, up to and including event `seq`."""

    model_config = ConfigDict(extra="forbid")

    format: int = Field(FORMAT, description="the fold's format (FORMAT)")
    session_id: str = Field(description="the session folded")
    seq: int = Field(-1, description="the last event folded in (-1: none yet)")
    job_states: dict[str, str] = Field(
        default_factory=dict, description="each job's last recorded state (JobState values)"
    )
    decided: set[str] = Field(default_factory=set, description="jobs decided about")
    accepted: set[str] = Field(
        default_factory=set, description="jobs whose record Slurm's was compared with"
    )
    spending: list[Spending] = Field(
        default_factory=list, description="submissions of the last two days"
    )
    tokens: TokenTotals = Field(
        default_factory=TokenTotals, description="what the session's model calls cost in all"
    )
    token_spending: list[TokenSpend] = Field(
        default_factory=list, description="model calls of the last two days that cost tokens"
    )
    last_reset: AwareDatetime | None = Field(
        None, description="newest completed job or unblock: the streak starts after it"
    )
    streak_failures: list[AwareDatetime] = Field(
        default_factory=list, description="failures that count toward the streak, after it"
    )
    awaiting: dict[str, int] = Field(
        default_factory=dict,
        description="steps waiting for a person: step id -> seq of its approval_asked event",
    )
    conversational: bool = Field(
        False, description="opened by ask or chat: its brain is woken when its jobs end"
    )
    unwoken: set[str] = Field(
        default_factory=set, description="its jobs that ended and its brain was not told of"
    )
    waiting: set[str] = Field(
        default_factory=set, description="of those, the ones a brain_waiting event announced"
    )
    wake_retries: dict[str, WakeRetry] = Field(
        default_factory=dict, description="jobs whose wakes failed: how often, and what next"
    )
    engine_jobs: set[str] = Field(
        default_factory=set, description="Slurm jobs a pipeline's engine submitted, as seen"
    )
    engine_charged: set[str] = Field(
        default_factory=set, description="of those, the ones whose run time was charged"
    )

    def fold(self, events: Iterable[Event]) -> None:
        """Apply events (the ones after `seq`, in order) to this fold."""
        for event in events:
            if event.seq != self.seq + 1:
                raise ValueError(f"session {self.session_id}: event {event.seq} after {self.seq}")
            self._apply(event, payload(event))
            self.seq = event.seq

    def _apply(self, event: Event, data: object) -> None:
        self._approvals(event)
        if isinstance(data, JobStatePayload):
            self.job_states[data.job_id] = data.state
            self._streak(event.at, data.job_state)
            self._ended(data)
        elif isinstance(data, AcceptedPayload):
            self.accepted.add(data.job_id)
        elif isinstance(data, OpenedPayload):
            self.conversational = data.origin in CONVERSATIONS
        elif isinstance(data, WakePayload):
            self._woken(event.kind, data)
        elif isinstance(data, WakeFailedPayload):
            self._wake_failed(data)
        elif isinstance(data, DecidedPayload):
            self.decided.add(data.job_id)
            if data.usage is not None:
                self._spend_tokens(event.at, data.usage)
        elif isinstance(data, ModelOutputPayload) and data.usage is not None:
            self._spend_tokens(event.at, data.usage)  # a conversation's turn
        elif isinstance(data, ResultPayload) and data.submitted:
            node, gpu = data.spent("node_hours"), data.spent("gpu_hours")
            self.spending.append(Spending(at=event.at, node_hours=node, gpu_hours=gpu))
        elif isinstance(data, UnblockedPayload):
            self._reset(event.at)
        elif isinstance(data, PipelineProgressPayload):
            self._engine_spending(event.at, data)

    def _engine_spending(self, at: datetime, data: PipelineProgressPayload) -> None:
        """A pipeline's tasks, charged as its engine's records show them: a submission
        when a Slurm job is first seen, its node-hours (one node for its run time: what
        it used, the engine having asked for it) when it ends."""
        for task in data.tasks:
            job = task.native_id
            if job is None:
                continue  # run inside the head job (a local rule): no submission
            if job not in self.engine_jobs:
                self.engine_jobs.add(job)
                self.spending.append(Spending(at=at))
            ended = task.status not in (TaskStatus.SUBMITTED, TaskStatus.RUNNING)
            if ended and task.realtime_s and job not in self.engine_charged:
                self.engine_charged.add(job)
                hours = task.realtime_s / 3600
                self.spending.append(Spending(at=at, node_hours=hours, submissions=0))

    def _ended(self, data: JobStatePayload) -> None:
        state = data.job_state
        if self.conversational and state is not None and state.is_terminal:
            self.unwoken.add(data.job_id)

    def _woken(self, kind: EventKind, data: WakePayload) -> None:
        if kind is EventKind.BRAIN_WOKEN:
            self.unwoken -= set(data.job_ids)
            self.waiting -= set(data.job_ids)
        else:
            self.waiting |= set(data.job_ids) & self.unwoken

    def _wake_failed(self, data: WakeFailedPayload) -> None:
        """The wake's jobs are unwoken again, to be tried at retry_at (unless given up)."""
        for job in data.job_ids:
            before = self.wake_retries.get(job)
            failures = 1 + (before.failures if before is not None else 0)
            self.wake_retries[job] = WakeRetry(failures=failures, retry_at=data.retry_at)
            if data.retry_at is not None:
                self.unwoken.add(job)

    def wake_due(self, now: datetime) -> list[str]:
        """The unwoken jobs a waker may take up now: never tried, or due for a retry."""
        return sorted(
            job
            for job in self.unwoken
            if (retry := self.wake_retries.get(job)) is None
            or (retry.retry_at is not None and retry.retry_at <= now)
        )

    def _spend_tokens(self, at: datetime, usage: UsagePayload) -> None:
        self.tokens.add(usage)
        if usage.charged:
            self.token_spending.append(TokenSpend(at=at, tokens=usage.charged))

    def tokens_since(self, since: datetime) -> int:
        """The tokens the budgets count, spent at or after since (within the kept two days)."""
        return sum(t.tokens for t in self.token_spending if t.at >= since)

    def _approvals(self, event: Event) -> None:
        """A request waits until an answer or a result settles its step (asked once).

        A request without a step id (a damaged log) is listed under '#<seq>' until
        anything without a step id settles.
        """
        if event.kind is EventKind.APPROVAL_ASKED:
            self.awaiting.setdefault(event.step_id or f"#{event.seq}", event.seq)
        elif event.kind in _SETTLING and event.step_id is not None:
            self.awaiting.pop(event.step_id, None)
        elif event.kind in _SETTLING:
            self.awaiting = {k: v for k, v in self.awaiting.items() if not k.startswith("#")}

    def _streak(self, at: datetime, state: JobState | None) -> None:
        if state is JobState.COMPLETED:
            self._reset(at)
        elif state is not None and state.counts_toward_streak:
            self.streak_failures.append(at)

    def _reset(self, at: datetime) -> None:
        if self.last_reset is None or at >= self.last_reset:
            self.last_reset = at
            self.streak_failures = [f for f in self.streak_failures if f > at]

    def forget_old_spending(self) -> None:
        """Drop submissions and model calls two days older than the session's newest one of
        each: no budget window reaches back that far (keeps a long session's fold small;
        the session's token totals keep counting everything)."""
        if self.spending:
            cutoff = max(s.at for s in self.spending) - _SPENDING_KEPT
            self.spending = [s for s in self.spending if s.at >= cutoff]
        if self.token_spending:
            cutoff = max(t.at for t in self.token_spending) - _SPENDING_KEPT
            self.token_spending = [t for t in self.token_spending if t.at >= cutoff]


def fold_events(events: Iterable[Event]) -> SessionFold:
    """A fold of just these events of one session, whatever seq they start at (for callers
    that already read them; SessionFolds is what keeps folds up to date)."""
    fold: SessionFold | None = None
    for event in sorted(events, key=lambda e: e.seq):
        fold = fold or SessionFold(session_id=event.session_id)
        fold.seq = event.seq - 1
        fold.fold([event])
    return fold or SessionFold(session_id="")


class SessionFolds:
    """Each session's fold, brought up to date by reading only the events it lacks."""

    def __init__(self, store: SessionStore, directory: Path | None = None) -> None:
        self._store = store
        self._dir = directory
        self._folds: dict[str, SessionFold] = {}

    def of(self, session_id: str) -> SessionFold:
        """The session's fold, up to its newest event (SessionNotFound if it has none)."""
        fold = self._folds.get(session_id) or self._load(session_id)
        before = fold.seq
        try:
            fold.fold(self._store.read(session_id, fold.seq + 1))
        except ValueError:  # a cache that does not fit the log: start again from it
            fold = SessionFold(session_id=session_id)
            fold.fold(self._store.read(session_id))
        if fold.seq < 0:
            raise SessionNotFound(session_id)
        self._folds[session_id] = fold
        if fold.seq != before:
            self._save(fold)
        return fold

    def recorded_state(self, job_id: str, submitted: SubmissionRecord | None) -> JobState | None:
        """The job's state as the session that submitted it last recorded it (None: no
        session, or none recorded). The one lookup for every reader that holds a poll's
        answer it cannot trust yet, or one Slurm no longer has, to the session's record:
        stand-in rows, unwritten arrays, jobs that ended unseen, the MCP wait."""
        if submitted is None or submitted.session_id is None:
            return None
        return JobState.known(self.of(submitted.session_id).job_states.get(job_id))

    def _load(self, session_id: str) -> SessionFold:
        path = self._path(session_id)
        if path is not None:
            with contextlib.suppress(OSError, ValidationError, ValueError):
                fold = SessionFold.model_validate_json(path.read_bytes())
                if (
                    fold.format == FORMAT
                    and fold.session_id == session_id
                    and self._holds(session_id, fold.seq)
                ):
                    return fold
        return SessionFold(session_id=session_id)

    def _holds(self, session_id: str, seq: int) -> bool:
        """True if the log has event seq (one file read: a fold ahead of its log is stale)."""
        return seq < 0 or bool(self._store.read(session_id, seq, seq))

    def _save(self, fold: SessionFold) -> None:
        path = self._path(fold.session_id)
        if path is None:
            return
        fold.forget_old_spending()
        # a cache: a write that fails (quota, read-only $HOME) costs a rebuild, nothing else
        with contextlib.suppress(OSError):
            replace_file(path, fold.model_dump_json().encode(), durable=False)

    def _path(self, session_id: str) -> Path | None:
        return None if self._dir is None else self._dir / f"{session_id}.json"

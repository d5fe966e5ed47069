"""Steps waiting for a person, found in the session logs (no state of their own).

A step is answered once: `answer` appends approval_given or approval_refused only if the
log has no answer and no result for the step yet, checked and appended as one conditional
append (agent/runtime/session/claims.py), so two people (or one twice) approving at once run it
once. An
approval also makes its approver the step's holder until the result, with a lease for
other login nodes, so a `sessions resume` meanwhile waits for it instead of acting.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from jobsmith.agent.runtime.session.claims import (
    LOOKUP_ALLOWANCE,
    SBATCH_MAX_LIFE,
    Check,
    StepSettled,
    owner,
)
from jobsmith.agent.runtime.session.events import Event, EventKind
from jobsmith.agent.runtime.session.readmodel import SessionFolds
from jobsmith.agent.runtime.session.session_log import SessionLog
from jobsmith.agent.runtime.session.store import SessionStore, utc_now
from jobsmith.errors import JobsmithError, NotFound

#: events that settle an approval request
_SETTLED = frozenset({EventKind.APPROVAL_GIVEN, EventKind.APPROVAL_REFUSED, EventKind.RESULT})


class ApprovalNeeded(JobsmithError):
    """The step waits for a person: `jobsmith approve STEP` or `jobsmith deny STEP`."""

    exit_code = 8

    def __init__(self, step_id: str, reason: str) -> None:
        super().__init__(
            f"step {step_id} needs a person's approval ({reason}): see `jobsmith pending`, "
            f"then `jobsmith approve {step_id}` or `jobsmith deny {step_id}`"
        )
        self.step_id = step_id


class AlreadyAnswered(StepSettled):
    """Someone answered the step first (approved or denied it), or it has a result."""

    exit_code = 6  # as find_pending's NotFound: the step no longer waits for anyone


class PendingApproval(BaseModel):
    """One held step, with exactly what the person is asked to approve."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    session_id: str = Field(description="session holding the step")
    step_id: str = Field(description="the step; `jobsmith approve STEP_ID`")
    asked_at: datetime = Field(description="when approval was asked")
    action: str = Field(description="the step's action: submit, cancel, …")
    reason: str = Field(description="why a person must look")
    script: str | None = Field(None, description="the exact script that would be submitted")
    script_sha256: str | None = Field(None, description="hash the approval is bound to")
    cost: dict[str, Any] | None = Field(None, description="tasks, core-, GPU- and node-hours")
    data: dict[str, Any] = Field(description="the approval_asked event's data, in full")


def pending_approvals(
    store: SessionStore, folds: SessionFolds | None = None
) -> list[PendingApproval]:
    """Every approval request not yet given, refused or overtaken by a result.

    Each session's fold names its waiting steps; only their requests are read.
    """
    folds = SessionFolds(store) if folds is None else folds
    pending = []
    for info in store.list_sessions():
        for seq in folds.of(info.id).awaiting.values():
            pending += [_pending(info.id, e) for e in store.read(info.id, seq, seq)]
    return sorted(pending, key=lambda p: p.asked_at)


def find_pending(
    store: SessionStore, step_id: str, folds: SessionFolds | None = None
) -> PendingApproval:
    """The pending request for step_id, or a clear error listing what is pending."""
    pending = pending_approvals(store, folds)
    for item in pending:
        if item.step_id == step_id:
            return item
    waiting = ", ".join(p.step_id for p in pending) or "none"
    raise NotFound(f"no step {step_id!r} is waiting for approval; pending: {waiting}")


def answer(store: SessionStore, item: PendingApproval, given: bool, data: dict[str, Any]) -> Event:
    """Record a person's answer unless the step was answered or settled meanwhile.

    Raises AlreadyAnswered naming who was first. An approval makes this process the
    step's holder while it runs what was approved.
    """
    kind = EventKind.APPROVAL_GIVEN if given else EventKind.APPROVAL_REFUSED
    if given:
        data = {**data, "owner": owner(utc_now(), LOOKUP_ALLOWANCE + SBATCH_MAX_LIFE)}
    log = SessionLog(store, item.session_id)
    return log.append_if(kind, data, item.step_id, unanswered(item.step_id))


def unanswered(step_id: str) -> Check:
    """Precondition of an answer: the step has no answer and no result yet."""

    def check(events: list[Event]) -> None:
        first = next((e for e in events if e.step_id == step_id and e.kind in _SETTLED), None)
        if first is None:
            return
        what = {EventKind.APPROVAL_GIVEN: "approved", EventKind.APPROVAL_REFUSED: "denied"}
        by = first.data.get("by")
        raise AlreadyAnswered(
            step_id,
            f"step {step_id} was already {what.get(first.kind, 'run')} by "
            f"{f'{by} on {first.writer}' if by else first.writer} at {first.at:%H:%M:%S} UTC;"
            " nothing more to do",
            first,
        )

    return check


def _pending(session_id: str, event: Event) -> PendingApproval:
    data = dict(event.data)
    step = data.get("step")
    action = step.get("action", "?") if isinstance(step, dict) else "?"
    cost = data.get("cost")
    return PendingApproval(
        session_id=session_id,
        step_id=event.step_id or "?",
        asked_at=event.at,
        action=str(action),
        reason=str(data.get("reason", "")),
        script=str(data["script"]) if "script" in data else None,
        script_sha256=str(data["script_sha256"]) if "script_sha256" in data else None,
        cost=cost if isinstance(cost, dict) else None,
        data=data,
    )

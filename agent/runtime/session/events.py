"""The event model of a session: what the session store records, one event at a time.

A session is an append-only sequence of events numbered 0, 1, 2, … with no gaps. Event 0
is always `session_opened` and carries the session's metadata (title, site, who opened
it); every later event is appended by the agent, the executor or a person. Sequence
numbers, not timestamps, order a session: two login nodes' clocks can disagree, the log
cannot.

The events of one step (intent, approval asked/given/refused, claimed, result) share a
`step_id`, so a step's history can be collected from the log without interpreting `data`.
A step has at most one result: it is appended only if the step has none yet (see
agent/runtime/session/claims.py, which also says who may act on a step that is in flight).
"""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, JsonValue, field_validator

#: The JSON payload of an event (and a session's metadata).
EventData = dict[str, JsonValue]


class EventKind(StrEnum):
    """What an event records; the value is what the log stores."""

    SESSION_OPENED = "session_opened"  # always seq 0; data is the session's metadata
    USER_INPUT = "user_input"  # what a person typed or asked
    MODEL_OUTPUT = "model_output"  # what a model said (before typed decisions: rules too)
    DECISION = "decision"  # a brain's or person's typed decision about a failed job
    INTENT = "intent"  # a step about to run, committed before it runs
    APPROVAL_ASKED = "approval_asked"  # a step held for a person, with what was shown
    APPROVAL_GIVEN = "approval_given"
    APPROVAL_REFUSED = "approval_refused"
    CLAIMED = "claimed"  # a process takes over an in-flight step (agent/runtime/session/claims.py)
    RESULT = "result"  # a step's structured outcome, committed after it ran
    JOB_STATE = "job_state"  # a Slurm job changed state
    JOB_ACCEPTED = "job_accepted"  # what Slurm recorded of a job, against what was checked
    UNBLOCKED = "unblocked"  # a person lifted a failure-streak stop
    BRAIN_WOKEN = "brain_woken"  # a conversation's brain taken up again: its jobs ended
    BRAIN_WAITING = "brain_waiting"  # its jobs ended, but no model key where they were seen
    BRAIN_FAILED = "brain_failed"  # a wake's model turn failed: tried again later, or given up
    PLAN_JOB = "plan_job"  # a plan step's job was re-run: the step's job is now another
    PIPELINE = "pipeline"  # a workflow engine's head job is launched (or resumed)
    PIPELINE_PROGRESS = "pipeline_progress"  # what the engine's records said since
    PIPELINE_BUDGET = "pipeline_budget"  # a running pipeline's tasks near or at a budget
    WORKLOAD = "workload"  # an array fed in parts within the site's limits (workflows/feeding)
    WORKLOAD_ENDED = "workload_ended"  # every job of the session ended: told once
    NOTE = "note"  # anything worth keeping that is none of the above
    SESSION_CLOSED = "session_closed"


class Event(BaseModel):
    """One entry of a session's log, as stored and as read back."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    session_id: str = Field(description="id of the session the event belongs to")
    seq: int = Field(
        ge=0,
        description="position in the session, from 0 (the session_opened event), no gaps",
    )
    kind: EventKind = Field(description="what the event records")
    at: AwareDatetime = Field(
        description="when the writer appended it, UTC (the writer's clock; order by seq)"
    )
    step_id: str | None = Field(
        None, description="ties together the intent, approvals and result of one step"
    )
    writer: str = Field(
        "", description="host:pid of the process that appended it (for audits across nodes)"
    )
    data: EventData = Field(default_factory=dict, description="the kind's JSON payload")

    @field_validator("at")
    @classmethod
    def _in_utc(cls, value: datetime) -> datetime:
        # Normalise so that stored timestamps compare and print alike on every node.
        return value.astimezone(UTC)


class SessionInfo(BaseModel):
    """A summary of one session, for listings, retention and quota reports."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(description="session id (sortable by creation time)")
    created: AwareDatetime = Field(description="when the session was opened (event 0), UTC")
    last_seq: int = Field(ge=0, description="sequence number of the newest event")
    last_event_at: AwareDatetime = Field(description="when the newest event was appended, UTC")
    closed: bool = Field(description="whether the newest event is session_closed")
    size_bytes: int = Field(ge=0, description="disk space the session uses (allocated bytes)")
    title: str | None = Field(None, description="the metadata's 'title', if it has one")
    meta: EventData = Field(default_factory=dict, description="the metadata given at creation")

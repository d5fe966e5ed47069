"""The last poll, kept: what Slurm said about the user's jobs, and when.

Every batched poll (a watcher cycle, `jobsmith status`) replaces `<state>/last_poll.json`
with its answer, so a chat turn or an MCP client can say what is running without asking
Slurm again, and says how old the answer is. It is a snapshot, never a source of truth:
a poll that did not answer leaves the previous one, and nothing is decided from it that
a new poll would not confirm. Written atomically (a reader sees one poll or the other).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, ValidationError

from jobsmith.adapters.scheduler import JobStatus
from jobsmith.adapters.states import JobState
from jobsmith.files import replace_file


class PolledJob(BaseModel):
    """One job as the poll saw it (bounded: task counts, not one record per task)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    job_id: str = Field(description="Slurm's job id")
    state: JobState = Field(description="its state then")
    task_counts: dict[str, int] = Field(default_factory=dict, description="array tasks per state")
    reason: str | None = Field(None, description="why it waited, from the controller")


class LastPoll(BaseModel):
    """The newest poll's answer."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    at: AwareDatetime = Field(description="when Slurm answered")
    jobs: tuple[PolledJob, ...] = Field(description="every job polled")

    def active(self) -> list[PolledJob]:
        """The jobs that were queued or running then."""
        return [job for job in self.jobs if job.state.is_active]


class LastPollFile:
    """`<state>/last_poll.json`: replaced by each poll, read by whoever wants the news."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def record(self, statuses: Mapping[str, JobStatus], at: datetime) -> LastPoll:
        """Keep this poll's answer (a write that fails is lost: it is a cache)."""
        poll = LastPoll(
            at=at,
            jobs=tuple(
                PolledJob(job_id=j, state=s.state, task_counts=s.task_counts, reason=s.reason)
                for j, s in statuses.items()
            ),
        )
        with contextlib.suppress(OSError):
            replace_file(self.path, poll.model_dump_json().encode(), durable=False)
        return poll

    def read(self) -> LastPoll | None:
        """The newest poll kept, or None if there is none (or it cannot be read)."""
        try:
            return LastPoll.model_validate_json(self.path.read_bytes())
        except (OSError, ValidationError):
            return None

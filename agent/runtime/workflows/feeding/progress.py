"""A fed workload seen as one: "12,000 tasks: 7,950 done, 50 running, 4,000 not yet
submitted" (pure).

Its parts are separate Slurm arrays; a person follows one workload. The counts come from
each part's newest state, as the session recorded it (the watcher's job_state events,
with their task counts), or from this poll where it has the part: the line costs no
extra Slurm call. A part claimed but not yet answered by sbatch counts as queued.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from pydantic import BaseModel, ConfigDict, Field

from jobsmith.adapters.scheduler import JobStatus
from jobsmith.adapters.states import JobState
from jobsmith.agent.runtime.session.events import Event, EventKind
from jobsmith.agent.runtime.workflows.feeding.record import live_jobs, part_jobs, workloads


class WorkloadProgress(BaseModel):
    """How far one fed workload is, in tasks."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    session_id: str = Field(description="the session that holds the workload")
    step_id: str = Field(description="the workload's step")
    tasks: int = Field(description="every task of the workload")
    parts: int = Field(description="the arrays it is fed as")
    done: int = Field(description="tasks that completed")
    running: int = Field(description="tasks running now")
    queued: int = Field(description="tasks submitted, not yet running")
    failed: int = Field(description="tasks that ended otherwise (failed, cancelled, ...)")
    not_submitted: int = Field(description="tasks of parts not fed yet")
    cancelled: bool = Field(False, description="cancelled: no further part is fed")
    parts_not_submitted: int = Field(0, description="parts without a job yet")
    followers: tuple[str, ...] = Field(
        (), description="a plan's steps after it not submitted yet: they wait for all its parts"
    )

    @property
    def feeding(self) -> bool:
        """Whether something of it is still to be submitted (parts, a plan's followers)."""
        return bool(self.not_submitted or self.followers) and not self.cancelled

    def line(self) -> str:
        """The one line status and the report show."""
        words = [f"{self.done:,} done", f"{self.running:,} running"]
        if self.queued:
            words.append(f"{self.queued:,} queued")
        if self.failed:
            words.append(f"{self.failed:,} failed")
        rest = "not to be submitted (cancelled)" if self.cancelled else "not yet submitted"
        words.append(f"{self.not_submitted:,} {rest}")
        then = self.followers_line()
        return f"{self.tasks:,} tasks: " + ", ".join(words) + (f"; {then}" if then else "")

    def followers_glance(self) -> str | None:
        """The glance's few words for the same: "check, encode wait for it"."""
        if not self.followers or self.cancelled:
            return None
        verb = "waits" if len(self.followers) == 1 else "wait"
        return f"{', '.join(self.followers)} {verb} for it"

    def followers_line(self) -> str | None:
        """ "encode: waits for workload st-….render, 3 of 8 parts not yet submitted": a
        plan's steps after it, until they are submitted (followers.py)."""
        if not self.followers:
            return None
        names = ", ".join(self.followers)
        if self.cancelled:
            return f"{names}: not to be submitted (workload {self.step_id} cancelled)"
        verb = "waits" if len(self.followers) == 1 else "wait"
        if self.parts_not_submitted:
            return (
                f"{names}: {verb} for workload {self.step_id}, {self.parts_not_submitted} of "
                f"{self.parts} parts not yet submitted"
            )
        return f"{names}: {verb} for workload {self.step_id}, every part submitted"

    def headline(self) -> str:
        """The line with the workload's step id, as status, a chat's and the MCP
        server's status tool show it (the id `cancel` and `wait` take)."""
        return f"workload {self.step_id}: {self.line()}"

    def state(self) -> JobState:
        """The workload as one job's state, for `wait`: ended when nothing of it is left
        to run (cancelled: its parts not yet submitted never will be), and then
        COMPLETED only if every task completed; CANCELLED if it was cancelled short of
        that, FAILED if a task did not complete; before that RUNNING while a task runs,
        else PENDING."""
        if self.running or self.queued or (self.not_submitted and not self.cancelled):
            return JobState.RUNNING if self.running else JobState.PENDING
        if self.cancelled and (self.not_submitted or self.failed):
            return JobState.CANCELLED
        return JobState.FAILED if self.failed else JobState.COMPLETED


def workload_progress(
    session_id: str, events: Iterable[Event], statuses: Mapping[str, JobStatus] | None = None
) -> list[WorkloadProgress]:
    """Each workload of the session, as far as it is (module docstring)."""
    events = list(events)
    counts = _recorded_counts(events)
    for job_id, status in (statuses or {}).items():
        counts[job_id] = status.task_counts or {status.state.value: 1}
    found = []
    for w in workloads(session_id, events):
        jobs = part_jobs(events, w.step_id)
        tally = {"done": 0, "running": 0, "queued": 0, "failed": 0}
        for part in w.parts:
            if part.index not in jobs:
                continue
            seen = counts.get(jobs[part.index] or "", {})
            for state, n in seen.items():
                tally[_kind(state)] += n
            tally["queued"] += part.count - sum(seen.values())  # not seen in a state yet
        fed = sum(p.count for p in w.parts if p.index in jobs)
        results = {e.step_id for e in events if e.kind is EventKind.RESULT}
        followers = tuple(f for f in w.followers if f"{w.plan_step}.{f}" not in results)
        found.append(
            WorkloadProgress(
                session_id=session_id,
                step_id=w.step_id,
                tasks=w.tasks,
                parts=len(w.parts),
                not_submitted=w.tasks - fed,
                cancelled=w.cancelled,
                parts_not_submitted=sum(1 for p in w.parts if not jobs.get(p.index)),
                followers=followers,
                **tally,
            )
        )
    return found


def unended_parts(
    session_id: str, events: Iterable[Event], job_states: Mapping[str, str]
) -> list[str]:
    """The job ids of the session's workload parts whose end the session has not recorded
    (job_states: the session's fold, SessionFold.job_states; record.live_jobs).

    `status` of one part polls these with it (the same one sacct): a part fed by an
    earlier watcher cycle may have ended since, with no poller left to record it (a
    `wait` on another part polls only what it waits for), and the workload line would
    count its tasks queued for good (seen in CI: "37 done, 3 queued" of 40 completed).
    """
    events = list(events)
    return [
        job_id
        for w in workloads(session_id, events)
        for job_id in live_jobs(part_jobs(events, w.step_id).values(), job_states)
    ]


def _recorded_counts(events: list[Event]) -> dict[str, dict[str, int]]:
    """Each job's newest recorded task counts (one task in its state if none recorded)."""
    counts: dict[str, dict[str, int]] = {}
    for e in events:
        if e.kind is EventKind.JOB_STATE and e.data.get("job_id"):
            tasks = e.data.get("task_counts")
            if not isinstance(tasks, dict) or not tasks:
                tasks = {str(e.data.get("state")): 1}
            counts[str(e.data["job_id"])] = {str(k): int(str(v)) for k, v in tasks.items()}
    return counts


def _kind(state: str) -> str:
    known = JobState.known(state)
    if known is JobState.COMPLETED:
        return "done"
    if known is not None and known.is_terminal:
        return "failed"
    if known in (JobState.CONFIGURING, JobState.RUNNING, JobState.COMPLETING):
        return "running"
    return "queued"

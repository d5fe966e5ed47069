"""`wait_for_jobs` for the MCP server: the states it reads, and who polls meanwhile.

A waiting client costs Slurm nothing per job: the states come from what the batched poll
already keeps, the newest poll's answer (`<state>/last_poll.json`,
agent/runtime/session/lastpoll.py)
and the job states the sessions recorded. When no watcher runs for the user, the server
is the poller while a wait lasts: it takes the per-user watcher lock and runs watcher
cycles (one sacct for every open job, as `jobsmith watch` would, rules and all); when a
watcher holds the lock, the server only reads what that watcher's polls leave, at its
pace. Only jobs jobsmith follows can be waited for (`jobsmith adopt` brings in others):
the watcher never polls anything else. A fed workload is waited for by its step id, as
one job (its state as its session recorded its parts: the watcher cycles feed it and
record them), even before any of its parts has a job.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from jobsmith.adapters.jobid import WholeJobIdText
from jobsmith.agent.runtime.session.lastpoll import PolledJob
from jobsmith.agent.runtime.workflows.feeding.awaited import as_recorded
from jobsmith.agent.runtime.workflows.feeding.record import Workload
from jobsmith.agent.runtime.workflows.feeding.reference import (
    WorkloadIdText,
    find_workload,
    parse_workload_id,
)
from jobsmith.agent.watcher.watcher import Watcher
from jobsmith.errors import JobsmithError, NotFound

if TYPE_CHECKING:
    from jobsmith.agent.app import App

#: at most this many jobs in one wait (a bigger set is an array, or several waits)
MAX_WAIT_JOBS = 100
#: the longest one call may block (a client's own request timeout is usually shorter:
#: the progress notifications keep it alive)
MAX_WAIT_S = 3600.0


class WaitInput(BaseModel):
    """wait_for_jobs' arguments."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    job_ids: list[WholeJobIdText] = Field(
        default_factory=list,
        max_length=MAX_WAIT_JOBS,
        description="Slurm job ids jobsmith submitted (an array: its job id)",
    )
    workloads: list[WorkloadIdText] = Field(
        default_factory=list,
        max_length=MAX_WAIT_JOBS,
        description="fed workloads, by the step id status shows for each (st-...): each "
        "waited for as one job, ended once nothing of it is left to run",
    )
    timeout_s: float = Field(
        300.0, ge=1, le=MAX_WAIT_S, allow_inf_nan=False, description="give up after, seconds"
    )

    @model_validator(mode="after")
    def _names_one(self) -> WaitInput:
        if not (self.job_ids or self.workloads):
            raise ValueError("name at least one job id or workload")
        return self


def not_followed(app: App, job_ids: Sequence[str]) -> None:
    """NotFound naming the jobs jobsmith does not follow (so no poll would see them)."""
    foreign = [j for j in job_ids if app.ledger.get(j) is None]
    if foreign:
        raise NotFound(
            f"wait_for_jobs: jobsmith did not submit {', '.join(foreign)}, so no poll "
            "follows them: `jobsmith adopt JOB_ID` first, or ask `status`"
        )


def workloads_of(app: App, step_ids: Sequence[str]) -> list[Workload]:
    """The fed workloads named (UnknownWorkload, naming it, for a step id of none)."""
    return [find_workload(app.store, app.ledger, parse_workload_id(s)) for s in step_ids]


def job_states(
    app: App, job_ids: Sequence[str], workloads: Sequence[Workload] = ()
) -> dict[str, PolledJob | None]:
    """Each job's newest known state (None: no poll has seen it yet), asking no one.

    An end a session recorded wins (a job that ended leaves later polls); otherwise the
    newest poll's answer; otherwise what the session recorded last. A workload is one
    job, by its step id, as its session recorded its parts (feeding/awaited.py).
    """
    found: dict[str, PolledJob | None] = {}
    for w in workloads:
        found[w.step_id] = as_recorded(app.store, w)
    return {**_job_states(app, job_ids), **found}


def _job_states(app: App, job_ids: Sequence[str]) -> dict[str, PolledJob | None]:
    poll = app.last_poll_file.read()
    polled = {job.job_id: job for job in poll.jobs} if poll else {}
    out: dict[str, PolledJob | None] = {}
    for job_id in job_ids:
        recorded = app.folds.recorded_state(job_id, app.ledger.get(job_id))
        if recorded is not None and recorded.is_terminal:
            out[job_id] = PolledJob(job_id=job_id, state=recorded)
        elif job_id in polled:
            out[job_id] = polled[job_id]
        elif recorded is not None:
            out[job_id] = PolledJob(job_id=job_id, state=recorded)
        else:
            out[job_id] = None
    return out


def fingerprint(job: PolledJob | None) -> tuple[str, tuple[tuple[str, int], ...]]:
    """What counts as a change: the state, and an array's counts per state."""
    if job is None:
        return ("", ())
    return (job.state.value, tuple(sorted(job.task_counts.items())))


def all_ended(states: Mapping[str, PolledJob | None]) -> bool:
    """True if every job has ended."""
    return all(job is not None and job.state.is_terminal for job in states.values())


def progress_text(states: Mapping[str, PolledJob | None]) -> str:
    """'41 RUNNING, 42 PENDING (Resources)' for a progress notification."""
    parts = []
    for job_id, job in states.items():
        if job is None:
            parts.append(f"{job_id} not polled yet")
            continue
        text = f"{job_id} {job.state.value}"
        if job.task_counts:
            text += " (" + ", ".join(f"{n} {s}" for s, n in sorted(job.task_counts.items())) + ")"
        elif job.reason and not job.state.is_terminal:
            text += f" ({job.reason})"
        parts.append(text)
    return ", ".join(parts)


def wait_document(
    states: Mapping[str, PolledJob | None],
    changed: Sequence[str],
    *,
    timed_out: bool,
    poller: str,
    app: App,
) -> dict[str, Any]:
    """wait_for_jobs' answer: every job's state, which changed, and how fresh it is."""
    poll = app.last_poll_file.read()
    jobs = [
        job.model_dump(mode="json")
        if job is not None
        else {"job_id": job_id, "state": None, "note": "no poll has seen it yet"}
        for job_id, job in states.items()
    ]
    return {
        "jobs": jobs,
        "changed": list(changed),
        "all_ended": all_ended(states),
        "timed_out": timed_out,
        "polled_at": poll.at.isoformat() if poll else None,
        "poller": poller,
    }


class Poller:
    """The server as the user's poller while any wait runs and no watcher does: a Watcher
    (agent/watcher/watcher.py) whose lock the last wait to end gives back."""

    def __init__(self, app: App, interval_s: float) -> None:
        self.app = app
        self.interval_s = interval_s
        self._watcher = Watcher.of(app, interval_s)
        self._waits = 0
        self._mutex = threading.Lock()

    def begin(self) -> None:
        """A wait starts."""
        with self._mutex:
            self._waits += 1

    def end(self) -> None:
        """A wait ended: the last one gives the watcher lock back."""
        with self._mutex:
            self._waits -= 1
            if self._waits == 0:
                self._watcher.release()

    def close(self) -> None:
        """The server stops: a cycle under way finishes, then the lock is given back."""
        with self._mutex:
            self._watcher.release()

    def poll(self) -> str:
        """One watcher cycle if this server may poll; who polls ('this server' or 'your
        watcher'). A cycle that fails changes nothing (the next one tries again)."""
        with self._mutex:
            try:
                if self._watcher.cycle_if_free() is None:
                    return "your watcher"
            except JobsmithError:
                pass  # a cycle that failed learned nothing: the states stay as they were
            return "this server"

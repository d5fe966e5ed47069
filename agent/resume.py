"""Resuming a session after its process died: reconcile in-flight steps with Slurm.

A step whose intent is in the log but whose result is not was cut short. A read or a
control step is simply run again (both are safe to repeat). A submission is looked up in
Slurm by its tag (the job name) before anything else, and is submitted again, with the
same script and tag, only when resume can be sure Slurm never got it:

- the dead process's sbatch may still be running (it runs in its own session and may
  submit after our lookup): resume waits until no process on this host carries the
  submission's tag in its environment; for an intent written on another login node it
  cannot look, so it waits until sbatch's longest life has passed since the intent;
- the controller answers for every job it holds; accounting can lag behind it, so a job
  that already left the controller is only trusted absent once slurmdbd's agent queue
  (sdiag) is empty.
Otherwise the step is reported undecided, and nothing is submitted.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from jobsmith.adapters.slurm.scheduler import SUBMIT_TAG_ENV, SlurmScheduler
from jobsmith.agent.events import Event, EventKind
from jobsmith.agent.executor import Executor
from jobsmith.agent.steps import STEP_ADAPTER

#: an sbatch outlives its parent by at most this (its own retries included)
SBATCH_MAX_LIFE = timedelta(minutes=5)


class ResumeReport(BaseModel):
    """What resume did with each step that was in flight."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    session_id: str = Field(description="the session resumed")
    found: list[str] = Field(default_factory=list, description="steps whose job Slurm had")
    resubmitted: list[str] = Field(default_factory=list, description="never reached Slurm")
    rerun: list[str] = Field(default_factory=list, description="non-submit steps run again")
    undecided: dict[str, str] = Field(
        default_factory=dict, description="step -> why resume could not be sure"
    )


def in_flight(events: list[Event]) -> list[Event]:
    """The first intent of every step that has no result and is not waiting for a person."""
    results = {e.step_id for e in events if e.kind is EventKind.RESULT}
    asked = {e.step_id for e in events if e.kind is EventKind.APPROVAL_ASKED}
    answered = {
        e.step_id
        for e in events
        if e.kind in (EventKind.APPROVAL_GIVEN, EventKind.APPROVAL_REFUSED)
    }
    refused = {e.step_id for e in events if e.kind is EventKind.APPROVAL_REFUSED}
    seen: set[str | None] = set()
    out = []
    for e in events:
        if e.kind is not EventKind.INTENT or e.step_id in seen or e.step_id in results:
            continue
        seen.add(e.step_id)
        if e.step_id in refused or (e.step_id in asked and e.step_id not in answered):
            continue
        out.append(e)
    return out


def resume_session(
    executor: Executor,
    scheduler: SlurmScheduler,
    session_id: str,
    *,
    host: str,
    orphan_wait_s: float = 120.0,
    clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    sleep: Callable[[float], None] = time.sleep,
) -> ResumeReport:
    """Reconcile every in-flight step of the session (see the module docstring)."""
    events = executor.store.read(session_id)
    approved = {e.step_id for e in events if e.kind is EventKind.APPROVAL_GIVEN}
    report = ResumeReport(session_id=session_id)
    for intent in in_flight(events):
        step_id = intent.step_id or "?"
        data: dict[str, Any] = dict(intent.data)
        if "job_name" not in data or "script" not in data:
            executor.run(session_id, STEP_ADAPTER.validate_python(data["step"]))
            report.rerun.append(step_id)
            continue
        doubt = _wait_until_sure(scheduler, data, intent.at, host, orphan_wait_s, clock, sleep)
        found = scheduler.find_by_name(str(data["job_name"]), _local_since(intent.at, clock))
        if found:
            executor.record_found(session_id, step_id, data, found[0])
            report.found.append(step_id)
        elif doubt:
            report.undecided[step_id] = doubt
        else:
            executor.submit_recorded(session_id, step_id, data, approved=step_id in approved)
            report.resubmitted.append(step_id)
    return report


def _wait_until_sure(
    scheduler: SlurmScheduler,
    data: dict[str, Any],
    at: datetime,
    host: str,
    wait_s: float,
    clock: Callable[[], datetime],
    sleep: Callable[[float], None],
) -> str | None:
    """None once 'not found' would be final; else why it would not be (yet)."""
    name = str(data["job_name"])
    if data.get("host") != host:
        until = at + SBATCH_MAX_LIFE
        if clock() < until:
            return f"its sbatch ran on {data.get('host')}; resume there, or after {until:%H:%M} UTC"
    deadline = time.monotonic() + wait_s
    while orphan_sbatch_alive(name) or scheduler.dbd_backlog() > 0:
        if time.monotonic() > deadline:
            return f"an sbatch for {name} is still running, or slurmdbd is still catching up"
        sleep(0.5)
    return None


def orphan_sbatch_alive(job_name: str, proc: Path = Path("/proc")) -> bool:
    """True if a process of this user carries the submission's tag (an sbatch still running)."""
    needle = f"{SUBMIT_TAG_ENV}={job_name}".encode()
    for entry in proc.iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue  # gone, or another user's: not ours
        if needle in environ.split(b"\0"):
            return True
    return False


def _local_since(at: datetime, clock: Callable[[], datetime]) -> datetime:
    """The intent's time, less a margin, as the naive local time sacct's -S expects."""
    age = clock() - at
    return datetime.now() - age - timedelta(minutes=10)

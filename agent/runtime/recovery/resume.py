"""Resuming a session after its process died: reconcile in-flight steps with Slurm.

A step whose intent is in the log but whose result is not was cut short. A read or a
control step is simply run again (both are safe to repeat). A submission is looked up in
Slurm by its tag (the job name) before anything else, and is submitted again, with the
same script and tag, only when resume can be sure Slurm never got it:

- the dead process's sbatch may still be running (it runs in its own session and may
  submit after our lookup): resume waits until no process on this host carries the
  submission's tag in its environment; for an intent written on another login node it
  cannot look, so it waits until sbatch's longest life has passed since the intent (a
  scheduler with no SubmissionProbe cannot look at all: the step is undecided);
- the controller answers for every job it holds; accounting can lag behind it, so a job
  that already left the controller is only trusted absent once slurmdbd's agent queue
  (sdiag: ControllerFacts.dbd_backlog; a scheduler without them has no such lag) is empty;
- where the site keeps no accounting (Scheduler.has_accounting), "not found" is never
  final: the controller forgets a finished job after MinJobAge, so a job it no longer
  shows may have run. Such a step is always undecided.
Otherwise the step is reported undecided, and nothing is submitted.

Before any of this, resume claims the step (agent/runtime/session/claims.py): a `claimed` event
appended
only if the step has no result and no live holder (the process that wrote its intent, an
approver running it, another resume). So two resumes, or a resume and the process it
would rescue, never both act. The loser of that race waits, up to --wait, for the
winner's result and reports the step by it: a submission the winner submitted or found
is `found` (Slurm has it), a read or control step it ran is `rerun`, any other outcome is
undecided with what the winner recorded. A winner still at work after --wait leaves the
step undecided ("being resumed by host:pid"); a winner that dies without a result is
taken over, by a claim appended under the same condition. An intent written on another
login node is not waited for (its process may be dead there, which resume cannot see):
the step is undecided until that intent's lease ends, as it always was.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import BaseModel, ConfigDict, Field

from jobsmith.adapters.scheduler import Scheduler
from jobsmith.agent.runtime.session.claims import (
    CLOCK_SKEW,
    LOOKUP_ALLOWANCE,
    SBATCH_MAX_LIFE,
    Holder,
    StepClaimed,
    StepSettled,
    claimable,
    owner,
)
from jobsmith.agent.runtime.session.events import Event, EventKind
from jobsmith.agent.runtime.session.payloads import intent_payload, result_payload
from jobsmith.agent.runtime.session.session_log import SessionLog
from jobsmith.agent.runtime.submission.approval.approvals import ApprovalNeeded
from jobsmith.agent.runtime.submission.executor import Executor
from jobsmith.agent.runtime.submission.orders import Recorded
from jobsmith.agent.runtime.submission.steps import step_adapter
from jobsmith.agent.runtime.workflows.planrun import PlanStepUndecided

if TYPE_CHECKING:
    from jobsmith.agent.runtime.session.store import SessionStore
    from jobsmith.agent.runtime.workflows.pipelinerun import Pipelines

#: how often a resume that lost the claim looks for the winner's result
POLL_S = 0.5


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
    relaunched: str | None = Field(
        None,
        description="a pipeline whose head job had ended unfinished: the new head job's id "
        "(its engine resumes the run: agent/runtime/workflows/pipelinerun.py)",
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


class ResumeParts(Protocol):
    """What `sessions resume` uses (the composition root, agent/app.py, has them all)."""

    @property
    def store(self) -> SessionStore: ...
    @property
    def executor(self) -> Executor: ...
    @property
    def scheduler(self) -> Scheduler: ...
    @property
    def pipelines(self) -> Pipelines: ...


def resume(parts: ResumeParts, session_id: str, orphan_wait_s: float) -> ResumeReport:
    """`jobsmith sessions resume`: the session's in-flight steps reconciled with Slurm after
    a crash, and a pipeline that had nothing in flight resumed as its engine does."""
    import socket

    from jobsmith.agent.runtime.workflows.pipelinerun import ORIGIN

    info = parts.store.info(session_id)  # a clear error for an unknown session
    report = resume_session(
        parts.executor,
        parts.scheduler,
        session_id,
        host=socket.gethostname(),
        orphan_wait_s=orphan_wait_s,
    )
    settled = not (report.found or report.resubmitted or report.undecided)
    if info.meta.get("origin") == ORIGIN and settled:
        # nothing was in flight: a pipeline resumes as its engine does, if it ended
        # unfinished (a failed or cancelled head job); a finished one is left alone
        launched = parts.pipelines.resume_if_unfinished(session_id)
        if launched is not None:
            job_id = launched.result.summary.get("job_id")
            report = report.model_copy(update={"relaunched": str(job_id)})
    return report


def resume_session(
    executor: Executor,
    scheduler: Scheduler,
    session_id: str,
    *,
    host: str,
    orphan_wait_s: float = 120.0,
    clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    sleep: Callable[[float], None] = time.sleep,
) -> ResumeReport:
    """Reconcile every in-flight step of the session (see the module docstring)."""
    log = SessionLog(executor.store, session_id)
    events = log.events()
    # the hash each approval was given for: a resumed submission must still match it
    approved = {
        e.step_id: str(e.data["script_sha256"])
        for e in events
        if e.kind is EventKind.APPROVAL_GIVEN and e.data.get("script_sha256")
    }
    report = ResumeReport(session_id=session_id)
    # a plan goes on only after its jobs that were in flight are settled (planrun.py)
    for intent in sorted(in_flight(events), key=_is_plan):
        step_id = intent.step_id or "?"
        try:
            start_by = _claim(log, step_id, host, orphan_wait_s, clock, sleep)
            step = _Step(intent, approved_sha256=approved.get(step_id), start_by=start_by)
            _reconcile(executor, scheduler, report, step, host, orphan_wait_s, clock, sleep)
        except StepSettled as done:
            _report_settled(report, intent, done.event)
        except ApprovalNeeded as held:  # above a threshold now: a person decides
            report.undecided[step_id] = str(held)
        except StepClaimed as busy:
            report.undecided[step_id] = _still_held(busy.holder, host, orphan_wait_s)
        except PlanStepUndecided as open_job:  # a job of the plan is left undecided above
            report.undecided[step_id] = str(open_job)
    return report


def _is_plan(intent: Event) -> bool:
    step = intent_payload(intent).step or {}
    return step.get("action") == "run_plan"


@dataclass(frozen=True)
class _Step:
    """An in-flight step this resume holds."""

    intent: Event
    approved_sha256: str | None  # None: nobody had to approve it
    start_by: datetime  # the claim's lease covers an sbatch started before this


def _claim(
    log: SessionLog,
    step_id: str,
    host: str,
    wait_s: float,
    clock: Callable[[], datetime],
    sleep: Callable[[float], None],
) -> datetime:
    """Hold the step, waiting up to wait_s for a live holder to finish or die.

    Returns the time by which an sbatch must have started to stay within the lease.
    Raises StepSettled once the step has a result, StepClaimed if it is still held.
    An intent written on another host is not waited for: its process may have died
    there, which nothing here can see, and its lease outlasts any --wait.
    """
    before_sbatch = timedelta(seconds=wait_s) + LOOKUP_ALLOWANCE
    deadline = time.monotonic() + wait_s
    while True:
        now = clock()
        data = {"owner": owner(now, before_sbatch + SBATCH_MAX_LIFE), "by": "sessions resume"}
        try:
            log.append_if(EventKind.CLAIMED, data, step_id, claimable(step_id, clock))
            return now + before_sbatch
        except StepClaimed as busy:
            elsewhere = busy.holder.kind is EventKind.INTENT and busy.holder.host != host
            if elsewhere or time.monotonic() >= deadline:
                raise
        sleep(POLL_S)


def _still_held(holder: Holder, host: str, waited_s: float) -> str:
    """Why a step someone else holds was left undecided."""
    if holder.host != host:
        until = holder.until + CLOCK_SKEW
        return (
            f"{holder.doing} {holder}, on another login node: nothing submitted; resume on"
            f" {holder.host}, or after {until:%H:%M} UTC"
        )
    return (
        f"{holder.doing} {holder}, still after {waited_s:.0f}s: nothing submitted;"
        " resume again once it has finished"
    )


def _reconcile(
    executor: Executor,
    scheduler: Scheduler,
    report: ResumeReport,
    step: _Step,
    host: str,
    wait_s: float,
    clock: Callable[[], datetime],
    sleep: Callable[[float], None],
) -> None:
    """Find, resubmit or re-run one held step, or leave it undecided."""
    session_id, step_id = step.intent.session_id, step.intent.step_id or "?"
    data: dict[str, Any] = dict(step.intent.data)
    if "job_name" not in data or "script" not in data:
        executor.run(session_id, step_adapter().validate_python(data["step"]))
        report.rerun.append(step_id)
        return
    at = step.intent.at
    doubt = _wait_until_sure(scheduler, data, at, host, wait_s, clock, sleep)
    found = scheduler.find_by_name(str(data["job_name"]), _local_since(at, clock))
    if found:
        executor.record_found(session_id, step_id, data, found[0])
        report.found.append(step_id)
    elif doubt:
        report.undecided[step_id] = doubt
    elif not scheduler.has_accounting():
        report.undecided[step_id] = _unseen(str(data["job_name"]))
    elif clock() > step.start_by:
        report.undecided[step_id] = "Slurm answered too slowly to submit within this resume's claim"
    else:
        executor.submit(session_id, Recorded(step_id, data, step.approved_sha256))
        report.resubmitted.append(step_id)


def _unseen(job_name: str) -> str:
    """Why a submission the controller does not show is undecided on a site without
    accounting."""
    return (
        f"{job_name}: the controller does not show it and this cluster keeps no accounting,"
        " so it may never have reached Slurm or may have run and been forgotten (MinJobAge);"
        " nothing submitted: look for its output, and submit it again yourself if it never ran"
    )


def _report_settled(report: ResumeReport, intent: Event, result: Event) -> None:
    """Report a step another process settled while this resume looked at it."""
    step_id = intent.step_id or "?"
    settled = result_payload(result)
    if settled.submitted:
        report.found.append(step_id)
    elif intent_payload(intent).job_name is None:
        report.rerun.append(step_id)
    else:
        said = f"{settled.outcome}: {settled.error}"
        report.undecided[step_id] = f"resumed by {result.writer}, which recorded {said}"


def _wait_until_sure(
    scheduler: Scheduler,
    data: dict[str, Any],
    at: datetime,
    host: str,
    wait_s: float,
    clock: Callable[[], datetime],
    sleep: Callable[[float], None],
) -> str | None:
    """None once 'not found' would be final; else why it would not be (yet)."""
    name = str(data["job_name"])
    ran_on = str(data.get("submit_host") or data.get("host"))
    if ran_on != host:
        # its sbatch may outlive its caller there by SBATCH_MAX_LIFE: unseen from here
        # until then (over SSH, the login node's `timeout -k` ends it well before)
        until = at + SBATCH_MAX_LIFE
        if clock() < until:
            where = "resume there, or" if not ran_on.startswith("ssh:") else "resume"
            return f"its sbatch ran on {ran_on}; {where} after {until:%H:%M} UTC"
    capabilities = scheduler.capabilities()
    probe, controller = capabilities.submissions, capabilities.controller
    if probe is None:  # nowhere to look: as a probe that cannot look, but without the wait
        return f"this scheduler cannot say whether a submission of {name} is still on its way"

    def backlog() -> int:  # no ControllerFacts: accounting is not known to lag
        return controller.dbd_backlog() if controller is not None else 0

    deadline = time.monotonic() + wait_s
    while probe.submission_in_flight(name) or backlog() > 0:
        if time.monotonic() > deadline:
            return f"an sbatch for {name} is still running, or slurmdbd is still catching up"
        sleep(0.5)
    return None


def _local_since(at: datetime, clock: Callable[[], datetime]) -> datetime:
    """The intent's time, less a margin, as the naive local time sacct's -S expects."""
    age = clock() - at
    return datetime.now() - age - timedelta(minutes=10)

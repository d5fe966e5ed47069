"""Running a brain on a failed job: show it the job, record its decision, run its steps.

The decision is recorded before any step runs, as one typed `decision` event in the
job's session, by a conditional append (SessionLog.append_if): the job must not have a
decision yet. Two watchers, or a watcher and `jobsmith status` that saw the same failure,
cannot both act on it; and a person's `jobsmith rerun` is recorded the same way
(`record_person_rerun`), so the watcher does not re-run a job a person already re-ran,
and a person is told when the watcher already did. Its steps then go through the
executor like any other step: policy, budgets and approvals apply to a brain as to a
person.

A brain that calls a model (a `ModelBrain`) is first held to the policy's model token
budgets, read from the folds as the executor reads the node-hour budget: the session's
tokens, and the last day's over every session active in it. When one is reached the
model is not called: the brain decides without it (its rules' re-run, else a hold that
names the budget, its limit and what was used).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any, Protocol

from jobsmith.adapters.scheduler import JobStatus
from jobsmith.agent.brains.protocol import Action, Brain, Decision, FailureView, ModelBrain
from jobsmith.agent.diagnosis.job import NO_ACCOUNTING_NOTE, StderrTail, diagnose_record
from jobsmith.agent.runtime.session.claims import Check
from jobsmith.agent.runtime.session.events import Event, EventKind
from jobsmith.agent.runtime.session.jobstate import StateChange
from jobsmith.agent.runtime.session.ledger import JobLedger
from jobsmith.agent.runtime.session.session_log import SessionLog
from jobsmith.agent.runtime.submission.approval.approvals import ApprovalNeeded
from jobsmith.agent.runtime.submission.executor import Executor
from jobsmith.agent.runtime.submission.judging.policy import (
    model_token_refusal,
    model_tokens_from_folds,
)
from jobsmith.agent.runtime.submission.onestep import StepParts, in_session, one_step
from jobsmith.agent.runtime.submission.steps import Rerun, StepResult
from jobsmith.agent.runtime.workflows.planrun import after_failure
from jobsmith.errors import JobsmithError

#: a re-run's outcomes after which the failed job may still be replaced by it
_RERUN_GOES_ON = frozenset({"done", "awaiting_approval"})


class AlreadyDecided(JobsmithError):
    """Someone (the watcher's brain or a person) already acted on this failed job."""

    def __init__(self, job_id: str, earlier: Decision) -> None:
        done = f"{earlier.action.value} by {earlier.brain}: {earlier.reason}"
        super().__init__(
            f"job {job_id} was already decided on ({done}); see `jobsmith sessions show`, "
            "and re-run the newer job instead if it failed too"
        )
        self.earlier = earlier


def decisions_about(events: list[Event], job_id: str) -> list[Decision]:
    """The typed decisions a session holds about job_id, oldest first."""
    return [
        Decision.model_validate(e.data)
        for e in events
        if e.kind is EventKind.DECISION and e.data.get("job_id") == job_id
    ]


def decide_failure(
    brain: Brain,
    executor: Executor,
    stderr_tail: StderrTail,
    change: StateChange,
    status: JobStatus,
) -> dict[str, Any] | None:
    """Ask the brain about one failed job, record its decision, run its steps.

    Returns the decision as the watcher reports it (`watch --once --json`'s decisions),
    with what running its steps gave; None if someone else decided about the job first.
    """
    log = SessionLog(executor.store, change.session_id)
    events = log.events()
    failed = [t for t in status.tasks if t.state.is_failure] or (
        [status.record] if status.record is not None else []
    )
    site = executor.site
    # without accounting, say what the verdict could not see (as `jobsmith diagnose` does)
    extra = () if executor.scheduler.has_accounting() else (NO_ACCOUNTING_NOTE,)
    diagnoses = tuple(diagnose_record(r, site, stderr_tail, status.reason, extra) for r in failed)
    view = FailureView(change=change, status=status, diagnoses=diagnoses, events=tuple(events))
    decision = _asked(brain, executor, view)
    data = decision.model_dump(mode="json")
    try:
        log.append_if(EventKind.DECISION, data, None, _undecided(change.job_id))
    except AlreadyDecided:
        return None  # another watcher, or a person, got there first: theirs stands
    ran = _run_steps(executor, change.session_id, decision)
    # a canary that failed for good: its array's rest, waiting for it, never runs; not
    # while its re-run waits for a person, who may approve it (a denial cancels the rest
    # then: answers.deny)
    rerun = decision.action is Action.RERUN and ran.get("outcome") in _RERUN_GOES_ON
    cancelled = after_failure(executor, change.job_id, reran=rerun)
    return {**_reported(decision), **ran, **({"cancelled": cancelled} if cancelled else {})}


def _asked(brain: Brain, executor: Executor, view: FailureView) -> Decision:
    """The brain's decision; without its model when a model token budget is reached."""
    if isinstance(brain, ModelBrain):
        refused = model_budget_refusal(executor, view.change.session_id)
        if refused is not None:
            return brain.decide_without_model(view, refused)
    return brain.decide(view)


def model_budget_refusal(executor: Executor, session_id: str) -> str | None:
    """Why the session's model may not be asked now (a token budget reached), or None."""
    budgets = executor.site.policy.budgets
    if budgets.model_tokens_per_session is None and budgets.model_tokens_per_day is None:
        return None  # no budget: no session needs reading
    now = executor.clock()
    read = executor.judge.folds_active_since(now - timedelta(days=1))
    if all(f.session_id != session_id for f in read) and executor.judge.folds is not None:
        read.append(executor.judge.folds.of(session_id))
    return model_token_refusal(budgets, model_tokens_from_folds(read, session_id, now))


def record_person_rerun(
    executor: Executor, session_id: str, job_id: str, step: Rerun, by: str
) -> None:
    """Record a person's re-run of job_id in its session, unless it was re-run already."""
    decision = Decision(
        brain=f"person ({by})",
        job_id=job_id,
        action=Action.RERUN,
        reason=step.reason or "by hand",
        steps=(step,),
    )
    log = SessionLog(executor.store, session_id)
    # a person may re-run a job a brain only reported on, never one already re-run
    rerun_free = _undecided(job_id, frozenset({Action.RERUN}))
    log.append_if(EventKind.DECISION, decision.model_dump(mode="json"), None, rerun_free)


class RerunParts(StepParts, Protocol):
    """What a person's re-run uses (the composition root, agent/app.py, has them all)."""

    @property
    def ledger(self) -> JobLedger: ...
    @property
    def environ(self) -> Mapping[str, str]: ...


def rerun_by_hand(
    parts: RerunParts,
    job_id: str,
    *,
    failed_only: bool,
    mem_mb: int | None,
    time_limit_s: int | None,
) -> tuple[str, StepResult]:
    """`jobsmith rerun`: a job jobsmith submitted, again (only its failed tasks, for
    arrays), recorded in the job's own session first so the watcher leaves it to the
    person (and the person is told if the watcher already re-ran it), then run in that
    session too, as the watcher's own re-runs are: a re-run is part of its job's workload,
    so the session's report lists it and its webhook tells the workload once, when the
    re-run and what waits for it (a plan's later steps) have ended (issue 28, item 4).
    A job with no session (submitted before sessions were kept) is re-run in a new one."""
    step = Rerun(
        job_id=job_id,
        failed_only=failed_only,
        mem_mb=mem_mb,
        time_limit_s=time_limit_s,
        reason="by hand",
    )
    record = parts.ledger.get(job_id)
    if record is not None and record.session_id is not None:
        who = parts.environ.get("USER", "?")
        record_person_rerun(parts.executor, record.session_id, job_id, step, who)
        return record.session_id, in_session(parts, record.session_id, step)
    return one_step(parts, f"rerun {job_id}", step)


def _undecided(job_id: str, actions: frozenset[Action] = frozenset(Action)) -> Check:
    """Precondition of a decision: job_id has none of these actions decided yet."""

    def check(events: list[Event]) -> None:
        earlier = [d for d in decisions_about(events, job_id) if d.action in actions]
        if earlier:
            raise AlreadyDecided(job_id, earlier[0])

    return check


def _reported(decision: Decision) -> dict[str, Any]:
    """The decision as `watch --once --json` documents it."""
    doc: dict[str, Any] = decision.model_dump(mode="json", exclude={"steps"})
    for step in decision.steps:
        if isinstance(step, Rerun):
            doc |= {"mem_mb": step.mem_mb, "time_limit_s": step.time_limit_s}
    return doc


def _run_steps(executor: Executor, session_id: str, decision: Decision) -> dict[str, Any]:
    """Run the decision's steps in order; stop at the first that does not complete."""
    outcome: dict[str, Any] = {}
    for step in decision.steps:
        try:
            result: StepResult = executor.run(session_id, step)
        except ApprovalNeeded as err:
            return {"outcome": "awaiting_approval", "step_id": err.step_id}
        except JobsmithError as err:
            return {"outcome": "refused_or_failed", "error": str(err)}
        outcome = {"outcome": result.outcome.value, "new_job_id": result.summary.get("job_id")}
    return outcome

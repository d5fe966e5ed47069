"""A person's answer to a held step: approve it (it runs exactly as shown) or deny it.

`jobsmith approve`/`deny` and chat's approval keys all answer through here, so a step is
judged afresh and answered the same way whichever face asked (agent/runtime/submission/
approvals.py finds the step and records the answer once, however many answer at once).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from jobsmith.adapters.scheduler import Scheduler
    from jobsmith.agent.runtime.session.readmodel import SessionFolds
    from jobsmith.agent.runtime.session.store import SessionStore
    from jobsmith.agent.runtime.submission.approval.approvals import PendingApproval
    from jobsmith.agent.runtime.submission.executor import Executor
    from jobsmith.agent.runtime.submission.steps import StepResult


class AnswerParts(Protocol):
    """What answering uses (the composition root, agent/app.py, has them all). Parts are
    read when needed: the executor (which loads the site file) only once the step is found."""

    @property
    def store(self) -> SessionStore: ...
    @property
    def folds(self) -> SessionFolds: ...
    @property
    def executor(self) -> Executor: ...
    @property
    def environ(self) -> Mapping[str, str]: ...


#: the held steps whose intent recorded the exact script to submit (a re-run's is its
#: original's script with new directives): approved, exactly that script is submitted
_SUBMISSIONS = frozenset({"submit", "rerun"})


def approve(parts: AnswerParts, step_id: str) -> StepResult:
    """Approve a held step and run exactly what was shown (once, however many approve)."""
    from jobsmith.agent.runtime.submission.approval.approvals import answer, find_pending
    from jobsmith.agent.runtime.submission.orders import Recorded
    from jobsmith.agent.runtime.submission.steps import step_adapter

    item = find_pending(parts.store, step_id, parts.folds)
    # a fresh judgement before the approval is recorded: the site file loads (building
    # the executor reads it), and a submission passes today's policy, limits and paths;
    # whatever fails leaves the step pending, nothing recorded
    executor = parts.executor
    submission = item.action in _SUBMISSIONS
    if submission and "workload" in item.data:  # one approval for every part (feeding)
        return _approve_workload(parts, item, step_id)
    if submission:
        executor.judge.again(item.data)
    given = {"by": parts.environ.get("USER", "?"), "script_sha256": item.script_sha256}
    answer(parts.store, item, True, given)
    if submission:
        return executor.submit(item.session_id, Recorded.approved(step_id, item.data))
    step = step_adapter().validate_python(item.data["step"])
    if item.action == "run_plan":  # the plan checks the approved hash itself
        return executor.run(item.session_id, step)
    return executor.run_approved_control(item.session_id, step)


def _approve_workload(parts: AnswerParts, item: PendingApproval, step_id: str) -> StepResult:
    """A workload held whole: judged again whole (its parts are judged as each is fed),
    then recorded and fed (agent/runtime/workflows/feeding/feeder.py)."""
    from jobsmith.agent.runtime.submission.approval.approvals import answer
    from jobsmith.agent.runtime.submission.judging.judge import refusal
    from jobsmith.agent.runtime.submission.judging.policy import Cost
    from jobsmith.agent.runtime.workflows.feeding import feeder
    from jobsmith.errors import PolicyError

    executor = parts.executor
    whole = executor.judge.spend(Cost.model_validate(item.data["cost"]), approval_given=True)
    if whole.verdict == "refuse":
        raise PolicyError(refusal(whole))
    given = {"by": parts.environ.get("USER", "?"), "script_sha256": item.script_sha256}
    answer(parts.store, item, True, given)
    return feeder.approved(executor, item.session_id, step_id, item.data)


def start_estimate(scheduler: Scheduler, script: str | None) -> str | None:
    """When Slurm would start script, in words (None if it cannot say): shown before a
    person approves it."""
    from jobsmith.errors import SchedulerError

    if not script:
        return None
    try:
        verdict = scheduler.test_only(script)
    except SchedulerError:
        return None
    if not verdict.ok:
        return f"Slurm would not accept it as is: {verdict.message}"
    if verdict.estimated_start is None:
        return None
    where = f" in partition {verdict.partition}" if verdict.partition else ""
    caveat = "" if verdict.estimate_reliable else " (unreliable here: GRES on Slurm 22.05)"
    return f"{verdict.estimated_start:%Y-%m-%d %H:%M:%S}{where}{caveat}"


def deny(parts: AnswerParts, step_id: str, reason: str) -> PendingApproval:
    """Refuse a held step; nothing runs (an error if it was answered meanwhile). A denied
    re-run of a canary leaves the canary failed for good: its array's rest is cancelled."""
    from jobsmith.agent.runtime.submission.approval.approvals import answer, find_pending
    from jobsmith.agent.runtime.workflows.planrun import after_failure

    item = find_pending(parts.store, step_id, parts.folds)
    refused = {"by": parts.environ.get("USER", "?"), "reason": reason}
    answer(parts.store, item, False, refused)
    rerun_of = item.data.get("rerun_of") if item.action == "rerun" else None
    if rerun_of:  # the decision kept the rest for this re-run (brains/deciding.py)
        after_failure(parts.executor, str(rerun_of), reran=False)
    return item

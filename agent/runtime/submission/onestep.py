"""A person's action as a one-step session: open it, run the step through the executor
(policy, approvals, the session log), return both.

`submit`, `cancel`/`hold`/`release`, `rerun`, `plan run` and the commands that build a
plan (transcode, render-frames) all act this way; a step held for a person's approval
is news for the next interactive command before the ApprovalNeeded goes on up.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from jobsmith.agent.runtime.documents import ControlResult
    from jobsmith.agent.runtime.session.store import SessionStore
    from jobsmith.agent.runtime.submission.executor import Executor
    from jobsmith.agent.runtime.submission.judging.judge import Origin
    from jobsmith.agent.runtime.submission.request.jobs import JobRequest
    from jobsmith.agent.runtime.submission.steps import Step, StepResult
    from jobsmith.agent.runtime.workflows.plans import Plan


class Told(Protocol):
    """Where news goes (agent/watcher/news.py's News)."""

    def add(self, kind: str, **fields: object) -> None: ...


class StepParts(Protocol):
    """What a one-step session uses (the composition root, agent/app.py, has them all);
    the executor is built after the session is opened, as it always was."""

    @property
    def store(self) -> SessionStore: ...
    @property
    def executor(self) -> Executor: ...
    @property
    def news(self) -> Told: ...


def one_step(
    parts: StepParts, title: str, step: Step, origin: str = "cli", *, asker: Origin | None = None
) -> tuple[str, StepResult]:
    """Open a session titled title, run step in it; origin is the session's kind (cli,
    plan), asker what the judge weighs."""
    session_id = parts.store.create({"title": title, "origin": origin})
    return session_id, in_session(parts, session_id, step, asker=asker)


def in_session(
    parts: StepParts, session_id: str, step: Step, *, asker: Origin | None = None
) -> StepResult:
    """Run a person's step in a session that is already open (a re-run of a job, in the
    job's own session: agent/brains/deciding.py's rerun_by_hand)."""
    from jobsmith.agent.runtime.submission.approval.approvals import ApprovalNeeded

    try:
        return parts.executor.run(session_id, step, origin=asker)
    except ApprovalNeeded as err:
        parts.news.add("approval_asked", step_id=err.step_id)
        raise


def submit(
    parts: StepParts, request: JobRequest, *, advised: bool = False
) -> tuple[str, StepResult]:
    """`jobsmith submit`. advised: the person was shown the advice and chose (the judge
    does not apply the site's `apply` again)."""
    from jobsmith.agent.runtime.submission.judging.judge import Origin
    from jobsmith.agent.runtime.submission.steps import Submit

    asker = Origin(advised=advised)
    return one_step(parts, f"submit {request.template}", Submit(job=request), asker=asker)


def control(
    parts: StepParts, action: str, job_ids: list[str], workloads: Sequence[str] = ()
) -> ControlResult:
    """cancel / hold / release (a foreign job may need approval); cancel also takes fed
    workloads by their step ids, each cancelled as one by the step itself."""
    from jobsmith.agent.runtime.documents import ControlResult
    from jobsmith.agent.runtime.submission.steps import step_adapter

    fields: dict[str, object] = {"action": action, "job_ids": job_ids}
    if action == "cancel":  # a fed workload's part: the workload, as one (feeding)
        from jobsmith.agent.runtime.workflows.feeding.feeder import with_workloads

        job_ids = with_workloads(parts.store, parts.executor.ledger, job_ids)
        fields = {**fields, "job_ids": job_ids, "workloads": list(workloads)}
    step = step_adapter().validate_python(fields)
    _, result = one_step(parts, f"{action} {' '.join([*job_ids, *workloads])}", step)
    done = result.summary
    return ControlResult(
        action=action,
        job_ids=done.get("job_ids", job_ids),
        already_running=done.get("already_running", []),
        workloads=done.get("workloads"),
        already_cancelled=done.get("already_cancelled"),
    )


def run_plan(parts: StepParts, plan: Plan, title: str) -> tuple[str, StepResult]:
    """Submit a plan's jobs at once, with Slurm's dependencies, as one session."""
    from jobsmith.agent.runtime.submission.steps import RunPlan

    return one_step(parts, title, RunPlan(plan=plan), origin="plan")

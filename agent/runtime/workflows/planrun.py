"""Running a plan (agent/runtime/workflows/plans.py) as one step of a session.

The plan is judged whole before anything reaches Slurm: every step is rendered and
checked on the submit path's own policy (a step the policy refuses refuses the plan,
naming it), and the plan's total cost is judged against the budgets and approval
thresholds once, so a person approves the plan once, shown every script. That approval
is bound to the sha256 of the text shown (the scripts in order, without the
dependencies, whose job ids do not exist yet); the plan is rendered again when it runs
and refused if the text changed since.

Then each step is a submit step of its own in the same session (`<plan step id>.<name>`),
in dependency order, waiting through Slurm's `--dependency` for the job ids of the steps
before it. So the machinery of single submissions covers each job: intent before, result
after, and after a crash `sessions resume` finds or resubmits each job that was in
flight first, then continues the plan (agent/runtime/recovery/resume.py runs plan steps last),
which skips every step that already has a job and submits only what Slurm never got.

A step over the site's submit limits (Slurm would refuse its array whole) is fed in
parts instead, as a workload of the plan's session, and the steps after it are submitted
later by whoever feeds its last part (submit_followers), waiting for every part's job:
agent/runtime/workflows/feeding/followers.py says why and what shapes are supported.
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from jobsmith.adapters.options import TAG_PATTERN, JobOptions, array_head
from jobsmith.adapters.states import JobState
from jobsmith.agent.runtime.documents import (
    PlanStatusDocument,
    PlanStepStatus,
)
from jobsmith.agent.runtime.recovery.rerun import with_directives
from jobsmith.agent.runtime.session.claims import LOOKUP_ALLOWANCE, SBATCH_MAX_LIFE, owner
from jobsmith.agent.runtime.session.events import Event, EventKind
from jobsmith.agent.runtime.session.payloads import (
    PlanJobPayload,
    intent_payload,
    payload,
    result_payload,
)
from jobsmith.agent.runtime.session.session_log import SessionLog
from jobsmith.agent.runtime.session.store import utc_now
from jobsmith.agent.runtime.submission import steps as st
from jobsmith.agent.runtime.submission.hashing import script_sha256
from jobsmith.agent.runtime.submission.judging.judge import (
    CheckedJob,
    Origin,
    PlannedJob,
    approval_reason,
    refusal,
    total_cost,
)
from jobsmith.agent.runtime.submission.judging.policy import Cost, check_limits
from jobsmith.agent.runtime.submission.orders import Order, Planned
from jobsmith.agent.runtime.workflows.feeding.followers import (
    FedStep,
    parts_to_wait_for,
    ready,
    with_parts,
)
from jobsmith.agent.runtime.workflows.feeding.progress import workload_progress
from jobsmith.agent.runtime.workflows.feeding.record import Workload, part_jobs, workloads
from jobsmith.agent.runtime.workflows.plans import Plan, approval_text, summary_of
from jobsmith.errors import JobsmithError, NotFound, PolicyError, SchedulerError

if TYPE_CHECKING:
    from jobsmith.adapters.scheduler import JobStatus, Scheduler
    from jobsmith.agent.runtime.session.ledger import JobLedger
    from jobsmith.agent.runtime.session.store import SessionStore
    from jobsmith.agent.runtime.submission.judging.judge import Judge
    from jobsmith.site_config import SiteConfig


class PlanHands(Protocol):
    """What running a plan needs of the executor (agent/runtime/submission/executor.py): its judge
    and parts, a prepared job's submission as a step of its own, a step's result. The
    executor runs plans; a plan knows it only by this."""

    @property
    def judge(self) -> Judge: ...
    @property
    def site(self) -> SiteConfig: ...
    @property
    def scheduler(self) -> Scheduler: ...
    @property
    def ledger(self) -> JobLedger: ...
    @property
    def store(self) -> SessionStore: ...
    @property
    def clock(self) -> Callable[[], datetime]: ...
    @property
    def cwd(self) -> Path: ...

    def submit(self, session: SessionLog | str, order: Order) -> st.StepResult:
        """Submit a job (a plan's: orders.Planned, exactly this script, allowed as part of
        the plan)."""
        ...

    def finish(
        self,
        log: SessionLog,
        step: st.Step,
        outcome: st.Outcome,
        summary: dict[str, Any],
        error: str | None,
    ) -> st.StepResult:
        """Record the step's result (once) and return it."""
        ...


class PlanStepUndecided(JobsmithError):
    """A job of the plan was in flight when its process died and is not settled yet."""

    exit_code = 9


def run_plan(
    executor: PlanHands,
    log: SessionLog,
    step: st.RunPlan,
    origin: Origin,
    checked: Mapping[str, PlannedJob] | None = None,
) -> st.StepResult:
    """Judge the plan whole, then submit each job not submitted yet (module docstring).

    The jobs are checked once (or given, checked: a canary's halves); a later run of the
    same step (after an approval, or a crash) submits the jobs recorded then, so what was
    approved is what is submitted. origin: who asks, whose rules may hold the plan for a
    person whatever its cost (agent/runtime/submission/judging/judge.py).
    """
    from jobsmith.agent.runtime.submission.approval.approvals import ApprovalNeeded

    plan = step.plan
    events = log.events()
    approved = _approved_sha(events, step.id)
    recorded = _recorded_jobs(events, step.id)
    if recorded is not None:
        jobs, fed = recorded, _recorded_fed(events, step.id)
    elif checked is not None:
        jobs, fed = dict(checked), None
    else:
        jobs, fed = _checked_jobs(executor, plan, origin)
    scripts = {name: job.script for name, job in jobs.items()}
    text = approval_text(plan, scripts, fed.words() if fed else None)
    total = total_cost(Cost.of(job.options) for job in jobs.values())
    # against the limits on queued jobs, only what is still to submit with the plan counts
    # (after a crash or an approval, the jobs already submitted are in the queue Slurm
    # counts; a fed step and its followers are judged as they are fed)
    done = _submitted(events, step.id, plan)
    later = {fed.step, *fed.followers} if fed else set()
    to_submit = [
        job.options for name, job in jobs.items() if name not in done and name not in later
    ]
    decision = executor.judge.spend(total, approval_given=approved is not None, jobs=to_submit)
    intent = _intent(step, text, total, jobs, fed)
    log.intent(step.id, intent)
    if decision.verdict == "refuse":
        raise PolicyError(f"refused by policy: plan {plan.name}: {refusal(decision)}")
    if approved is not None and approved != script_sha256(text):
        raise PolicyError(f"plan {plan.name}: the approved scripts changed; nothing submitted")
    wanted = approval_reason(decision, jobs, executor.judge.person_first("run_plan", origin))
    if approved is None and wanted is not None:
        log.append(EventKind.APPROVAL_ASKED, {**intent, "reason": wanted}, step.id)
        raise ApprovalNeeded(step.id, wanted)
    job_ids = _submit_each(executor, log, step, jobs, events, fed)
    if fed is not None:  # followers its feeding submitted already (every part fitted)
        job_ids = _submitted(log.events(), step.id, plan)
    summary = {**summary_of(plan, job_ids), "cost": total.model_dump()}
    if fed is not None:
        summary.update(_fed_summary(log, step.id, fed))
    if plan.name.startswith(CANARY_PREFIX):  # the step was a submission: answer as one
        summary = {**_canary_summary(log, step.id, job_ids), **summary}
    return executor.finish(log, step, st.Outcome.DONE, summary, None)


# --- canaries: a large array runs a few tasks first ------------------------------------------

#: a canary plan's name: the prefix, then the template's name
CANARY_PREFIX = "canary-"


def run_canary(
    executor: PlanHands,
    log: SessionLog,
    step: st.Submit,
    checked: CheckedJob,
    origin: Origin,
) -> st.StepResult:
    """A large array as a two-job plan: its first tasks, then the rest after them (Slurm's
    afterok), judged and approved as one; the step keeps its id, and answers as a
    submission of the rest, naming the canary."""
    canary = executor.site.policy.canary
    assert canary is not None and checked.job.options.array is not None
    first, rest = array_head(checked.job.options.array, canary.tasks)
    job = checked.job
    fields = {**step.job.model_dump(exclude={"dependencies"}), "template": job.template}
    plan = Plan.model_validate(
        {
            "name": CANARY_PREFIX + job.template,
            "steps": {"canary": fields, "rest": {**fields, "after_ok": ["canary"]}},
        }
    )
    wanted = PlannedJob.of(checked).person_first
    halves = {
        "canary": _half(executor, job.script, job.options, first, fresh_tag=True),
        "rest": _half(executor, job.script, job.options, rest, fresh_tag=False),
    }
    halves = {n: h.model_copy(update={"template": job.template}) for n, h in halves.items()}
    halves["rest"] = halves["rest"].model_copy(update={"person_first": wanted})
    return run_plan(executor, log, st.RunPlan(id=step.id, plan=plan), origin, halves)


def _half(
    executor: PlanHands, script: str, options: JobOptions, tasks: str, *, fresh_tag: bool
) -> PlannedJob:
    """The job with only the tasks of its array that the spec tasks names (the canary
    gets a tag of its own)."""
    update: dict[str, object] = {"array": tasks}
    if fresh_tag:
        base = TAG_PATTERN.sub("", options.job_name)
        update["job_name"] = f"{base}.js-{secrets.token_hex(6)}"
    half = JobOptions.model_validate({**options.model_dump(), **update})
    text = with_directives(script, half, executor.scheduler)
    return PlannedJob(template="", script=text, options=half, person_first=None)


def _canary_summary(
    log: SessionLog, plan_step_id: str, job_ids: Mapping[str, str]
) -> dict[str, Any]:
    """The rest's submission document, with the canary's job id and tasks."""
    wanted = {sub_step_id(plan_step_id, n): n for n in ("rest", "canary")}
    found: dict[str, dict[str, Any]] = {}
    for event in log.events():
        if event.kind is EventKind.RESULT and event.step_id in wanted:
            found[wanted[event.step_id]] = dict(event.data)
    bookkeeping = ("outcome", "action", "error")
    rest = {k: v for k, v in found.get("rest", {}).items() if k not in bookkeeping}
    canary_tasks = found.get("canary", {}).get("array_tasks")
    return {**rest, "canary_job_id": job_ids.get("canary"), "canary_tasks": canary_tasks}


def after_failure(executor: PlanHands, job_id: str, reran: bool) -> list[str]:
    """A failed job was decided about: if it was a canary and is not being re-run, its
    array's rest (waiting for it) will never run, so it is cancelled now: a broken
    command costs the canary's tasks, not the array's. Returns what was cancelled."""
    record = executor.ledger.get(job_id)
    if reran or record is None or record.session_id is None:
        return []
    events = executor.store.read(record.session_id)
    try:
        plan = plan_of(events)
    except NotFound:
        return []
    if not plan.plan.name.startswith(CANARY_PREFIX) or plan.job_ids.get("canary") != job_id:
        return []
    rest = plan.job_ids.get("rest")
    if rest is None:
        return []
    with contextlib.suppress(SchedulerError):  # it ended already: nothing to cancel
        executor.scheduler.cancel([rest])
    data = {"canary_failed": job_id, "cancelled": rest}
    SessionLog(executor.store, record.session_id).append(EventKind.NOTE, data, None)
    return [rest]


def _checked_jobs(
    executor: PlanHands, plan: Plan, origin: Origin
) -> tuple[dict[str, PlannedJob], FedStep | None]:
    """Every job checked now, and the step fed in parts if one is over the site's limits;
    PolicyError naming the first step the policy refuses (or that cannot be fed)."""
    judged = executor.judge.plan(plan, origin)
    refused = judged.refusal()
    if refused is not None:
        raise PolicyError(refused)
    return {name: PlannedJob.of(job) for name, job in judged.checked.items()}, judged.fed


def _recorded_fed(events: list[Event], step_id: str) -> FedStep | None:
    """The fed step an earlier run of this plan step recorded with its jobs, if any."""
    for event in reversed(events):
        if event.kind is EventKind.INTENT and event.step_id == step_id:
            fed = event.data.get("fed")
            return FedStep.model_validate(fed) if isinstance(fed, dict) else None
    return None


def _recorded_jobs(events: list[Event], step_id: str) -> dict[str, PlannedJob] | None:
    """The jobs an earlier run of this plan step checked and recorded, if one did."""
    for event in reversed(events):
        if event.kind is EventKind.INTENT and event.step_id == step_id:
            jobs = event.data.get("jobs")
            if isinstance(jobs, dict):
                return {name: PlannedJob.model_validate(job) for name, job in jobs.items()}
    return None


def sub_step_id(plan_step_id: str, name: str) -> str:
    """The submit step of one job of a plan."""
    return f"{plan_step_id}.{name}"


def _submit_each(
    executor: PlanHands,
    log: SessionLog,
    step: st.RunPlan,
    jobs: Mapping[str, PlannedJob],
    events: list[Event],
    fed: FedStep | None = None,
) -> dict[str, str]:
    """Each job in order, waiting for its steps' jobs; those submitted already are kept.
    A step fed in parts is recorded as a workload last (once), and the steps after it
    are left to whoever feeds its last part (submit_followers)."""
    plan = step.plan
    job_ids = _submitted(events, step.id, plan)
    later = {fed.step, *fed.followers} if fed else set()
    for name in plan.order():
        if name in job_ids or name in later:
            continue
        sub_id = sub_step_id(step.id, name)
        if any(e.step_id == sub_id and e.kind is EventKind.INTENT for e in events):
            raise PlanStepUndecided(
                f"plan {plan.name}: the job of step {name} was being submitted when its "
                f"process stopped and is not settled; run `jobsmith sessions resume "
                f"{log.session_id}` (it settles that job first, then goes on with the plan)"
            )
        job_ids[name] = _submit_one(executor, log, plan, name, jobs[name], job_ids, sub_id)
    if fed is not None:
        _begin_workload(executor, log, step, jobs[fed.step], fed)
    return job_ids


def _begin_workload(
    executor: PlanHands, log: SessionLog, step: st.RunPlan, job: PlannedJob, fed: FedStep
) -> None:
    """Record the plan's fed step as a workload of its session and feed it, unless an
    earlier run did (its step has a result: the workload is recorded and fed)."""
    from jobsmith.agent.runtime.workflows.feeding.feeder import begin_in_plan

    sub_id = sub_step_id(step.id, fed.step)
    if any(e.kind is EventKind.RESULT and e.step_id == sub_id for e in log.events()):
        return
    submit = st.Submit(id=sub_id, job=step.plan.request(fed.step, {}))
    with executor.judge.fresh_look_at_the_queue():  # the plan's jobs are queued now
        begin_in_plan(executor, log, step.id, submit, job, fed)


def _fed_summary(log: SessionLog, plan_step_id: str, fed: FedStep) -> dict[str, Any]:
    """What a plan's result says of its fed step: the workload, and the followers still
    to be submitted after its parts."""
    done = {e.step_id for e in log.events() if e.kind is EventKind.RESULT}
    return {
        "workload": sub_step_id(plan_step_id, fed.step),
        "workload_tasks": fed.tasks,
        "workload_parts": len(fed.parts),
        "followers": [f for f in fed.followers if sub_step_id(plan_step_id, f) not in done],
    }


def _submit_one(
    executor: PlanHands,
    log: SessionLog,
    plan: Plan,
    name: str,
    job: PlannedJob,
    job_ids: Mapping[str, str],
    sub_id: str,
) -> str:
    """Submit step name's checked script, waiting for its steps' current jobs."""
    result = executor.submit(log, _planned(executor, plan, name, job, job_ids, sub_id))
    return str(result.summary["job_id"])


def _planned(
    executor: PlanHands,
    plan: Plan,
    name: str,
    job: PlannedJob,
    job_ids: Mapping[str, str | tuple[str, ...]],
    sub_id: str,
) -> Planned:
    """Step name's checked script with its dependencies: the current jobs of its steps
    (every part's, for a step fed in parts)."""
    request = plan.request(name, job_ids)
    # what it waited for already (a canary's `--after-ok`), and its steps' jobs
    waits = (*job.options.dependencies, *request.dependencies)
    options = job.options.model_copy(update={"dependencies": waits})
    script = with_directives(job.script, options, executor.scheduler)
    return Planned(st.Submit(id=sub_id, job=request), job.template, script, options)


class FollowerTaken(JobsmithError):
    """Another actor claimed the follower first, or the workload was cancelled."""


def submit_followers(
    executor: PlanHands, log: SessionLog, w: Workload, waits: list[str] | None = None
) -> tuple[list[st.StepResult], bool]:
    """Submit the followers of a plan's fed workload that can go now (feeding/followers.py):
    once every part has its job, each follower whose steps all have jobs, in plan order,
    waiting for all the parts' jobs. Each is judged now (a full queue: not now, why added
    to waits), then claimed (only if nobody has, and the workload is not cancelled), then
    submitted. Returns the followers submitted, and whether any is still to be."""
    assert w.plan_step is not None
    events = log.events()
    record = plan_of(events)
    jobs = _recorded_jobs(events, record.step_id) or {}
    fed_name = w.step_id.removeprefix(f"{w.plan_step}.")
    parts = part_jobs(events, w.step_id)
    part_ids = [parts.get(p.index) for p in w.parts]
    if not all(part_ids):  # a part not fed yet, or its sbatch not answered yet
        return [], True
    ids = with_parts(record.job_ids, fed_name, [str(j) for j in part_ids])
    touched = {e.step_id for e in events}
    to_go = [n for n in w.followers if sub_step_id(record.step_id, n) not in touched]
    states = _part_states(executor, [str(j) for j in part_ids]) if to_go else {}
    results = []
    for name in to_go:
        sub_id = sub_step_id(record.step_id, name)
        if not ready(record.plan, name, ids):
            continue  # waits for a follower not submitted yet (claimed: resume settles it)
        unmet = parts_to_wait_for(record.plan, name, fed_name, states)
        if unmet is None:  # after_ok, and a part failed: it can never run
            _never(log, name, w, states)
            continue
        planned = _planned(
            executor, record.plan, name, jobs[name], {**ids, fed_name: unmet}, sub_id
        )
        if not _may_submit_now(executor, log, record.plan, name, w, planned, waits):
            break
        result = executor.submit(log, planned)
        results.append(result)
        job_id = str(result.summary["job_id"])
        ids[name] = job_id
        if _cancelled(log, w):  # cancelled while its sbatch ran: the cancel missed it
            with contextlib.suppress(SchedulerError):
                executor.scheduler.cancel([job_id])
            break
    settled = {e.step_id for e in log.events() if e.kind is EventKind.RESULT}
    left = any(sub_step_id(record.step_id, f) not in settled for f in w.followers)
    return results, left


def _cancelled(log: SessionLog, w: Workload) -> bool:
    """Whether the workload is cancelled now (the session says so)."""
    return any(
        x.step_id == w.step_id and x.cancelled for x in workloads(w.session_id, log.events())
    )


def _part_states(executor: PlanHands, part_ids: Sequence[str]) -> dict[str, JobState | None]:
    """Each part's state as Slurm answers now (None: not known), in the parts' order."""
    since = executor.clock() - timedelta(days=7)
    answered = executor.scheduler.status(part_ids, since)
    return {j: (answered[j].state if j in answered else None) for j in part_ids}


def _never(log: SessionLog, name: str, w: Workload, states: Mapping[str, JobState | None]) -> None:
    """Note (once) why a follower is not submitted: a part it waits for after_ok failed."""
    from jobsmith.agent.runtime.workflows.feeding.feeder import note_once

    failed = next(j for j, s in states.items() if s is not None and s is not JobState.COMPLETED)
    note_once(
        log,
        f"step {name} is not submitted: it waits for workload {w.step_id} with after_ok and "
        f"its part job {failed} ended {states[failed]}; `jobsmith cancel {failed}` stops "
        "the workload, or re-run the part's failed tasks and submit what follows by hand",
    )


def _may_submit_now(
    executor: PlanHands,
    log: SessionLog,
    plan: Plan,
    name: str,
    w: Workload,
    planned: Planned,
    waits: list[str] | None,
) -> bool:
    """Judge a follower now and claim it: False if it must wait (a full queue, the hour's
    submissions) or another actor claimed it; PolicyError naming it if refused."""
    from jobsmith.agent.runtime.workflows.feeding.feeder import WAIT_RULES

    options = planned.options
    ruling = executor.judge.spend(Cost.of(options), approval_given=True, jobs=[options])
    if ruling.verdict != "refuse":  # a single job's room too: it must wait, not fail
        ruling = executor.judge.room_for([options]) or ruling
    if ruling.verdict == "refuse":
        if ruling.rule in WAIT_RULES:
            if waits is not None:
                waits.append(f"{ruling.rule}: {ruling.message}")
            return False
        raise PolicyError(
            f"plan {plan.name}, step {name} (after workload {w.step_id}): {refusal(ruling)}"
        )
    check_limits(options, executor.site)
    step_id = planned.step.id

    def unclaimed(events: list[Event]) -> None:
        if any(e.step_id == step_id for e in events):
            raise FollowerTaken(f"step {step_id} was claimed by another actor")
        if any(x.step_id == w.step_id and x.cancelled for x in workloads(w.session_id, events)):
            raise FollowerTaken(f"workload {w.step_id} is cancelled: {name} is not submitted")

    lease = LOOKUP_ALLOWANCE + SBATCH_MAX_LIFE
    claim = {"owner": owner(utc_now(), lease), "workload": w.step_id, "follower": name}
    try:
        log.append_if(EventKind.CLAIMED, claim, step_id, unclaimed)
    except FollowerTaken:
        return False
    return True


def _submitted(events: list[Event], plan_step_id: str, plan: Plan) -> dict[str, str]:
    """Each step's job so far: its submit step's, or the re-run that replaced it."""
    found: dict[str, str] = {}
    subs = {sub_step_id(plan_step_id, name): name for name in plan.steps}
    for event in events:
        if event.kind is EventKind.RESULT and event.step_id in subs:
            result = result_payload(event)
            if result.submitted and result.job_id:
                found[subs[event.step_id]] = result.job_id
        data = payload(event) if event.kind is EventKind.PLAN_JOB else None
        if isinstance(data, PlanJobPayload) and found.get(data.step) == data.replaces:
            found[data.step] = data.job_id
    return found


def redirect_after_rerun(executor: PlanHands, old_job: str, new_job: str) -> list[str]:
    """A job was re-run as new_job: if it is a plan's job, the step's job is now new_job,
    and the jobs downstream of it wait for the new jobs. Returns the jobs pointed at new
    ones; nothing if old_job is no plan's current job (or jobsmith did not submit it).

    A job waiting for old_job is usually still pending (Slurm left it with
    DependencyNeverSatisfied) and is pointed at the new job (`scontrol update …
    Dependency=`). A site that kills jobs whose dependencies can never be met
    (`DependencyParameters=kill_invalid_depend`) has cancelled it, and its own
    dependents, before they ran: those are submitted again, their scripts as the plan
    checked them, each waiting for the new jobs (a plan_job event records each).
    """
    submitted = executor.ledger.get(old_job)
    if submitted is None or submitted.session_id is None:
        return []
    session_id = submitted.session_id
    events = executor.store.read(session_id)
    try:
        record = plan_of(events)
    except NotFound:
        return []
    step = next((n for n, j in record.job_ids.items() if j == old_job), None)
    if step is None:
        return []
    log = SessionLog(executor.store, session_id)
    jobs = _recorded_jobs(events, record.step_id) or {}
    job_ids = {**record.job_ids, step: new_job}
    changed, redirected = {step}, []
    for name in record.plan.order():
        waits = set(record.plan.steps[name].waits_for())
        if not waits & changed or name not in job_ids:
            continue
        current = job_ids[name]
        if _point(executor, record.plan, name, job_ids):
            redirected.append(current)
        elif name in jobs and _killed_before_it_ran(executor, current):
            sub_id = f"{sub_step_id(record.step_id, name)}.after-{new_job}"
            job_ids[name] = _submit_one(
                executor, log, record.plan, name, jobs[name], job_ids, sub_id
            )
            changed.add(name)
            again = {"step": name, "job_id": job_ids[name], "replaces": current}
            log.append(EventKind.PLAN_JOB, again, None)
    data = {"step": step, "job_id": new_job, "replaces": old_job, "redirected": redirected}
    log.append(EventKind.PLAN_JOB, data, None)
    return redirected + [job_ids[n] for n in changed - {step}]


def _point(executor: PlanHands, plan: Plan, name: str, job_ids: Mapping[str, str]) -> bool:
    """Step name's job now waits for its steps' current jobs (False: Slurm has it no
    more as a pending job: it ran, ended, or was cancelled)."""
    deps = plan.request(name, job_ids).dependencies
    try:
        executor.scheduler.set_dependencies(job_ids[name], deps)
    except SchedulerError:
        return False
    return True


def _killed_before_it_ran(executor: PlanHands, job_id: str) -> bool:
    """Cancelled by Slurm itself (no user's uid) without running: what a site with
    kill_invalid_depend does to a job whose dependency failed."""
    since = executor.clock() - timedelta(days=7)
    status = executor.scheduler.status([job_id], since).get(job_id)
    record = status.record if status is not None else None
    return (
        record is not None
        and record.state is JobState.CANCELLED
        and record.cancelled_by is None
        and record.cancelled_by_user is None
        and not record.elapsed_s
    )


def _approved_sha(events: list[Event], step_id: str) -> str | None:
    """The hash a person approved the plan step for, if one did."""
    for event in reversed(events):
        if event.step_id == step_id and event.kind is EventKind.APPROVAL_GIVEN:
            sha = event.data.get("script_sha256")
            return str(sha) if sha else ""
    return None


def _intent(
    step: st.RunPlan,
    text: str,
    total: Cost,
    jobs: Mapping[str, PlannedJob],
    fed: FedStep | None = None,
) -> dict[str, Any]:
    """The plan step's intent: the plan, the jobs as checked, the text a person approves
    (with its hash), the total cost, and the step fed in parts with its followers."""
    intent = {
        "step": step.model_dump(mode="json"),
        "risk": step.risk,
        "plan": step.plan.name,
        "jobs": {name: job.model_dump(mode="json") for name, job in jobs.items()},
        "script": text,
        "script_sha256": script_sha256(text),
        "cost": total.model_dump(),
    }
    if fed is not None:
        intent["fed"] = fed.model_dump(mode="json")
    return intent


@dataclass(frozen=True)
class PlanRecord:
    """What a session's log says about the plan it ran."""

    step_id: str
    plan: Plan
    job_ids: dict[str, str]
    outcome: str | None  # the plan step's result outcome; None while it has none


def plan_of(events: list[Event]) -> PlanRecord:
    """The plan of a session (the first plan step in it); NotFound if it ran none."""
    for event in events:
        intent = intent_payload(event) if event.kind is EventKind.INTENT else None
        if intent is not None and (intent.step or {}).get("action") == "run_plan":
            step = st.RunPlan.model_validate(intent.step)
            results = [e for e in events if e.kind is EventKind.RESULT and e.step_id == step.id]
            outcome = result_payload(results[-1]).outcome if results else None
            return PlanRecord(step.id, step.plan, _submitted(events, step.id, step.plan), outcome)
    session = events[0].session_id if events else "?"
    raise NotFound(f"session {session} ran no plan (`jobsmith plan run FILE` starts one)")


def status_document(
    session_id: str,
    record: PlanRecord,
    statuses: Mapping[str, JobStatus],
    events: Sequence[Event] = (),
) -> PlanStatusDocument:
    """`plan status`'s document: each step with its job's state, in submission order; a
    step fed in parts (no job of its own) with its workload's line, and its followers not
    yet submitted with what they wait for (feeding/followers.py), read from events."""
    plan = record.plan
    notes: dict[str, str] = {}
    for w in workload_progress(session_id, events, statuses):
        fed = w.step_id.removeprefix(f"{record.step_id}.")
        if fed == w.step_id or fed not in plan.steps:
            continue  # not this plan's step
        notes[fed] = f"workload {w.step_id}: {w.line()}"
        then = w.followers_line()
        notes.update({name: then for name in w.followers if then})
    rows = []
    for name in plan.order():
        job_id = record.job_ids.get(name)
        status = statuses.get(job_id) if job_id else None
        rows.append(
            PlanStepStatus(
                name=name,
                depth=plan.depth(name),
                waits_for=plan.edges(name),
                job_id=job_id,
                state=status.state.value if status else None,
                reason=status.reason if status else notes.get(name),
                task_counts=dict(status.task_counts) if status else {},
            )
        )
    return PlanStatusDocument(
        session_id=session_id, plan=plan.name, outcome=record.outcome, steps=tuple(rows)
    )


def plan_status(
    store: SessionStore,
    session_id: str | None,
    poll: Callable[[list[str]], Mapping[str, JobStatus]],
) -> PlanStatusDocument:
    """`plan status`: a plan's steps with their jobs' states (one poll): session_id's plan,
    or the newest plan's."""
    if session_id is None:
        plans = [i.id for i in store.list_sessions() if i.meta.get("origin") == "plan"]
        if not plans:
            raise NotFound("no plan has run yet (`jobsmith plan run FILE` starts one)")
        session_id = plans[-1]
    events = store.read(session_id)
    record = plan_of(events)
    return status_document(session_id, record, poll(list(record.job_ids.values())), events)

"""The judge: the one route from a job request to a judged job, and from a plan to a
judged plan.

Every submission is judged here, whoever asks: the CLI, ask and chat, a brain, the MCP
server, a plan's steps, a canary, an approval judged again. In order, a request gets:

1. the user's `SBATCH_*` defaults folded in (jobs.py, fold_sbatch_env), so what is
   judged is what sbatch would run;
2. the site's advice where the policy takes it itself (`policy.advice.right_size:
   apply`, `earliest_start: apply`), unless the person was shown the advice and chose
   (the CLI's `--right-size`, `--earliest`, `--no-advice`);
3. the template rendered, its parameters and paths checked against the allowed roots,
   and the resources against the site's limits (jobs.py and policy.py; the script's
   sha256 is the one AssembledJob computes);
4. the policy's verdict on spending its cost now: budgets, concurrency, approval
   thresholds (agent/runtime/submission/judging/policy.py), and the scheduler's limits
   on queued jobs;
5. the person-first rules of its origin: a model may not cancel or hold jobs unasked,
   and a conversation that has read text jobs, files or logs wrote may not submit
   unasked (agent/brains/taint.py tracks what it read; the rule is here).

The judge records nothing and submits nothing: the executor (agent/runtime/submission/executor.py)
does, on its verdict.
"""

from __future__ import annotations

import contextlib
import getpass
import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from jobsmith.adapters.capabilities import directives_of
from jobsmith.adapters.options import JobOptions
from jobsmith.adapters.scheduler import Scheduler, SubmitLimits
from jobsmith.agent.runtime.blocklist.exclude import with_blocked
from jobsmith.agent.runtime.session.ledger import JobLedger
from jobsmith.agent.runtime.session.readmodel import SessionFold, SessionFolds
from jobsmith.agent.runtime.session.store import SessionStore
from jobsmith.agent.runtime.submission.advising.estimates import EstimateCache
from jobsmith.agent.runtime.submission.hashing import script_sha256
from jobsmith.agent.runtime.submission.judging.policy import (
    BudgetUse,
    Cost,
    Ruling,
    array_size_refusal,
    budget_use,
    check_limits,
    evaluate,
    history_from_folds,
    submit_limit_refusal,
)
from jobsmith.agent.runtime.submission.request.jobs import (
    AssembledJob,
    JobFields,
    JobRequest,
    assemble,
    fold_sbatch_env,
)
from jobsmith.errors import InputError, PolicyError, TemplateError
from jobsmith.job_templates import TemplateLibrary
from jobsmith.job_templates.paths import PathLookup, PathPolicy
from jobsmith.job_templates.render import render_body
from jobsmith.site_config import SiteConfig

if TYPE_CHECKING:  # imported where used: a submit builds none of their models
    from jobsmith.agent.runtime.documents import PlanCheckDocument, RenderDocument
    from jobsmith.agent.runtime.submission.advising.advice import Adviser, SubmitAdvice
    from jobsmith.agent.runtime.workflows.feeding.followers import FedStep
    from jobsmith.agent.runtime.workflows.plans import Plan

#: what a model may not do to jobs without a person, whatever it has read (excluding
#: nodes included: every node excluded is a job that never starts)
MODEL_CONTROLS = frozenset({"cancel", "hold", "exclude_nodes"})
#: what a conversation that has read job text may not do without a person: the steps
#: whose content the model sets (a new script, command or parameters)
MODEL_AUTHORED = frozenset({"submit", "run_plan"})


class Who(StrEnum):
    """Who asks for an action."""

    PERSON = "person"  # the CLI, `approve`, a person's re-run
    MODEL = "model"  # ask, chat, a woken conversation: a model's tool call
    BRAIN = "brain"  # the watcher's brain deciding about a job that ended


@dataclass(frozen=True)
class Origin:
    """Where a request comes from: what the judge weighs beside the request itself."""

    who: Who = Who.PERSON
    #: the job text the asking conversation has read (agent/brains/taint.py), if any
    read: str | None = None
    #: the person was shown the advice and chose what to take (the CLI): the site's
    #: `apply` is not applied a second time
    advised: bool = False


def tainted_reason(read: str | None, action: str, setting: str) -> str | None:
    """Why a conversation that has read job text (read) must have a person approve
    action first; None if it has read none, the action is not model-authored, or the
    site chose `model.tainted_actions: policy`."""
    if read is None or action not in MODEL_AUTHORED or setting == "policy":
        return None
    return (
        f"this conversation has read text that jobs, files or logs wrote ({read}),"
        " which may carry instructions that are not yours: what it submits waits for"
        " you (model.tainted_actions in the site file)"
    )


def refusal(decision: Ruling) -> str:
    """The one line a policy refusal shows."""
    return f"refused by policy ({decision.rule}): {decision.message}"


@dataclass(frozen=True)
class CheckedJob:
    """A job assembled and judged by the very path a submission takes.

    render, `submit --dry-run`, `--test-only`, MCP's check and the brains' checks all get
    one of these, so what they report is what `submit` would do, stopping only before
    sbatch.
    """

    job: AssembledJob
    cost: Cost
    #: the policy's verdict (budgets, limits, thresholds)
    decision: Ruling
    #: the advice the judge took itself (the site's `apply`), marked with what it took
    advice: SubmitAdvice | None = None
    #: why a person must approve it whatever the thresholds say (the origin's rules)
    person_first: str | None = None

    def verdict(self) -> Ruling:
        """The decision a submission acts on: the policy's, held for a person where the
        origin's rules say so (a refusal stays a refusal)."""
        if self.person_first is not None and self.decision.verdict == "allow":
            return Ruling("approve", "person_first", self.person_first)
        return self.decision

    def raise_if_refused(self) -> None:
        """PolicyError naming the rule and the limit, if policy refuses the job."""
        if self.decision.verdict == "refuse":
            raise PolicyError(refusal(self.decision))

    def document(self) -> RenderDocument:
        """The render document: the script, what made it, and the policy's verdict."""
        from jobsmith.agent.runtime.documents import RenderDocument

        job = self.job
        opts = job.options
        return RenderDocument(
            template=job.template,
            job_name=opts.job_name,
            tag=opts.tag(),
            params=json.loads(json.dumps(job.rendered.params, default=str)),
            options=opts.model_dump(mode="json", exclude_none=True),
            array_tasks=opts.array_size() if opts.array else None,
            inputs=tuple(str(p) for p in job.rendered.input_paths),
            outputs=tuple(str(p) for p in job.rendered.output_paths),
            script=job.script,
            script_sha256=job.script_sha256,
            policy=self.policy(),
        )

    def policy(self) -> dict[str, Any]:
        """The verdict as a document: verdict, rule, message and the cost judged."""
        d = self.decision
        return {
            "verdict": d.verdict,
            "rule": d.rule or None,
            "message": d.message or None,
            "cost": self.cost.model_dump(),
        }


class PlannedJob(BaseModel):
    """One job of a plan as checked: what is shown for approval and then submitted, byte
    for byte (its script gets only the dependency directive, once the job ids exist)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    template: str = Field(description="template name")
    script: str = Field(description="the exact script, without dependencies")
    options: JobOptions = Field(description="its sbatch options, without dependencies")
    person_first: str | None = Field(description="why a person must approve it, if so")

    @classmethod
    def of(cls, checked: CheckedJob) -> PlannedJob:
        """The job a check assembled (held for a person if its thresholds say so; the
        origin's rules hold the plan as a whole: Judgement.person_first)."""
        wanted = checked.decision.message if checked.decision.verdict == "approve" else None
        job = checked.job
        return cls(
            template=job.template, script=job.script, options=job.options, person_first=wanted
        )


def approval_reason(
    decision: Ruling, jobs: Mapping[str, PlannedJob], person_first: str | None = None
) -> str | None:
    """Why a person must approve a plan: its total, any one job of it, or its origin."""
    if decision.verdict == "approve":
        return f"the plan as a whole: {decision.message}"
    for name, job in jobs.items():
        if job.person_first is not None:
            return f"plan step {name}: {job.person_first}"
    return person_first


def total_cost(costs: Iterable[Cost]) -> Cost:
    """A plan's cost: every job's tasks and hours added up (nodes: the most any asks)."""
    items = list(costs)
    return Cost(
        tasks=sum(c.tasks for c in items),
        nodes=max(c.nodes for c in items),
        core_hours=round(sum(c.core_hours for c in items), 3),
        gpu_hours=round(sum(c.gpu_hours for c in items), 3),
        node_hours=round(sum(c.node_hours for c in items), 3),
    )


@dataclass(frozen=True)
class Judgement:
    """A plan judged whole: each job checked, the text shown for approval, the total."""

    plan: Plan
    checked: dict[str, CheckedJob]
    text: str
    total: Cost
    decision: Ruling
    #: why a person must approve the plan whatever its cost (the origin's rules)
    person_first: str | None = None
    #: its step over the site's submit limits, fed in parts, and the steps after it
    #: (agent/runtime/workflows/feeding/followers.py)
    fed: FedStep | None = None
    #: why a step over the site's limits cannot be fed (the plan's shape), if one cannot
    unfed: str | None = None

    def refusal(self) -> str | None:
        """Why the policy refuses the plan (a step, or the whole), or None."""
        if self.unfed is not None:  # with what Slurm would refuse of the step, in its words
            refused = [(n, j) for n, j in self.checked.items() if j.decision.verdict == "refuse"]
            why = [f" (plan step {n}: {refusal(j.decision)})" for n, j in refused[:1]]
            return f"refused by policy: {self.unfed}{''.join(why)}"
        for name, job in self.checked.items():
            if job.decision.verdict == "refuse":
                return f"refused by policy: plan step {name}: {refusal(job.decision)}"
        if self.decision.verdict == "refuse":
            return f"refused by policy: plan {self.plan.name}: {refusal(self.decision)}"
        return None

    def approval_reason(self) -> str | None:
        """Why a person must approve the plan: its total, any one job, or its origin."""
        jobs = {name: PlannedJob.of(job) for name, job in self.checked.items()}
        return approval_reason(self.decision, jobs, self.person_first)

    def document(self) -> PlanCheckDocument:
        """`plan check`'s document."""
        from jobsmith.agent.runtime.documents import PlanCheckDocument, PlanStepCheck

        refused, wanted = self.refusal(), self.approval_reason()
        verdict = "refuse" if refused else "approve" if wanted else "allow"
        return PlanCheckDocument(
            plan=self.plan.name,
            order=tuple(self.checked),
            steps=tuple(
                PlanStepCheck(name=name, waits_for=self.plan.edges(name), job=job.document())
                for name, job in self.checked.items()
            ),
            cost=self.total.model_dump(),
            policy={"verdict": verdict, "message": refused or wanted},
            script_sha256=script_sha256(self.text),
            workload=self.fed.words() if self.fed else None,
        )


@dataclass
class Judge:
    """Judges requests, plans and held approvals under the site's rules (module
    docstring); asks Slurm only what a rule needs (squeue for a concurrency limit,
    sacctmgr/squeue for the limits on queued jobs, `--test-only` for advice taken)."""

    store: SessionStore
    scheduler: Scheduler
    library: TemplateLibrary
    site: SiteConfig
    ledger: JobLedger
    cwd: Path
    #: the submitter's environment, whose SBATCH_* defaults are folded into requests
    environ: Mapping[str, str] = field(default_factory=dict)
    clock: Callable[[], datetime] = lambda: datetime.now(UTC)
    #: the sessions' folds, for the budgets (built on the store if not given)
    folds: SessionFolds | None = None
    #: Slurm's start estimates kept for a minute, for the advice (none kept if not given)
    estimates: EstimateCache | None = None
    #: the nodes on the user's blocklist now (agent/runtime/blocklist/): every request
    #: excludes them, added to its own --exclude before it is assembled and judged
    blocked_nodes: Callable[[], Sequence[str]] = lambda: ()
    #: where the job's paths are resolved and looked at: where it runs (None: this host)
    files: PathLookup | None = None
    #: the queue's active tasks, while one look serves several decisions (see below)
    _active: int | None = field(default=None, init=False, repr=False)
    #: the submit limits (with their queues) seen within that one look, by QoS/account/partition
    _limits: dict[tuple[str | None, ...], SubmitLimits] | None = field(
        default=None, init=False, repr=False
    )

    # --- a request -------------------------------------------------------------------

    def job(self, request: JobRequest, origin: Origin | None = None) -> CheckedJob:
        """The request judged as a submission would be (module docstring); records and
        submits nothing. An error caused by an SBATCH_* default says so."""
        origin = origin or Origin()
        request, from_env = fold_sbatch_env(
            request, self.scheduler.submission_environment(self.environ)
        )
        advice = None if origin.advised else self._advice_taken(request)
        if advice is not None:
            request = advice.apply_to(
                request,
                right_size="right_size" in advice.applied,
                earliest="earliest" in advice.applied,
            )
        try:
            job = self._assemble(request)
        except (PolicyError, TemplateError, InputError) as err:
            if from_env:
                raise type(err)(f"{err} ({from_env})") from None
            raise
        cost = Cost.of(job.options)
        return CheckedJob(
            job=job,
            cost=cost,
            decision=self.spend(cost, jobs=[job.options]),
            advice=advice,
            person_first=self.person_first("submit", origin),
        )

    def advise(self, request: JobRequest) -> SubmitAdvice:
        """What to offer before submitting request
        (agent/runtime/submission/advising/advice.py): asks Slurm for the template's history
        and per-partition start estimates, never raises a Slurm error. The user's SBATCH_*
        defaults count, as they do in job()."""
        request, _ = fold_sbatch_env(request, self.scheduler.submission_environment(self.environ))
        return self._adviser().advise(request)

    def _advice_taken(self, request: JobRequest) -> SubmitAdvice | None:
        """The advice the site's policy takes itself, marked with what it takes (None
        where it takes none: no question is asked then)."""
        settings = self.site.policy.advice
        right, early = settings.right_size == "apply", settings.earliest_start == "apply"
        if not (right or early):
            return None
        return self._adviser().advise(request).taken(right_size=right, earliest=early)

    def _adviser(self) -> Adviser:
        from jobsmith.agent.runtime.submission.advising.advice import Adviser
        from jobsmith.agent.runtime.submission.request.user_scripts import is_script

        def fixed(template: str) -> set[str]:
            if is_script(template):  # a user's script takes its resources as it asks them
                return set()
            return set(self.library.get(template).spec.resources.references())

        return Adviser(
            scheduler=self.scheduler,
            site=self.site,
            assemble=self._assemble,
            records=self.ledger.all,
            newest=self.ledger.newest,
            fixed_fields=fixed,
            estimates=self.estimates,
            user=getpass.getuser() if self.estimates is not None else "",
        )

    def _assemble(self, request: Any) -> AssembledJob:
        header = directives_of(self.scheduler.capabilities()).script_header
        blocked = self.blocked_nodes()
        if blocked and isinstance(request, JobFields):
            exclude = with_blocked(request.exclude, blocked)
            request = request.model_copy(update={"exclude": exclude})
        if getattr(request, "script", None) is not None:
            from jobsmith.agent.runtime.submission.request.user_scripts import assemble_script

            return assemble_script(
                request, self.site, cwd=self.cwd, header=header, files=self.files
            )
        template = self.library.get(request.template)
        return assemble(template, request, self.site, cwd=self.cwd, header=header, files=self.files)

    # --- a plan ----------------------------------------------------------------------

    def plan(self, plan: Plan, origin: Origin | None = None) -> Judgement:
        """Every job of plan judged (without its dependencies) and its total cost
        judged, at one look at the queue; nothing recorded. The origin's rules hold the
        plan as a whole (run_plan), not each of its jobs."""
        from jobsmith.agent.runtime.workflows.plans import approval_text

        origin = origin or Origin()
        with self.one_look_at_the_queue():
            checked = {name: self.job(plan.request(name, {}), origin) for name in plan.order()}
            fed, unfed = self._fed_step(plan, checked)
            later: set[str] = set()
            if fed is not None:  # its whole cost, without the queue's limits: fed as room appears
                whole = checked[fed.step]
                checked[fed.step] = replace(whole, decision=self.spend(whole.cost))
                later = {fed.step, *fed.followers}
            scripts = {name: job.job.script for name, job in checked.items()}
            text = approval_text(plan, scripts, fed.words() if fed else None)
            total = total_cost(job.cost for job in checked.values())
            # against the queue's limits, only what is submitted with the plan
            options = [job.job.options for name, job in checked.items() if name not in later]
            decision = self.spend(total, jobs=options)
        return Judgement(
            plan,
            checked,
            text,
            total,
            decision,
            self.person_first("run_plan", origin),
            fed=fed,
            unfed=unfed,
        )

    def _fed_step(
        self, plan: Plan, checked: Mapping[str, CheckedJob]
    ) -> tuple[FedStep | None, str | None]:
        """The plan's step over the site's submit limits, fed in parts with the steps after
        it as followers (agent/runtime/workflows/feeding/followers.py), or None; or why it
        cannot be (the plan's shape), naming the step."""
        from jobsmith.agent.runtime.workflows.feeding import feeder
        from jobsmith.agent.runtime.workflows.feeding.followers import (
            FedStep,
            PlanShapeError,
            fed_shape,
        )
        from jobsmith.agent.runtime.workflows.feeding.record import part_data

        over = [n for n, job in checked.items() if feeder.feedable(job, job.decision)]
        if not over:
            return None, None
        try:
            step, followers = fed_shape(plan, over)
        except PlanShapeError as err:
            return None, str(err)
        options = checked[step].job.options
        parts, max_array_size = feeder.parts_for(self.scheduler, self.site, options)
        fed = FedStep(
            step=step,
            followers=followers,
            tasks=sum(p.count for p in parts),
            parts=tuple(part_data(p) for p in parts),
            max_array_size=max_array_size,
        )
        return fed, None

    # --- the rules -------------------------------------------------------------------

    def person_first(
        self,
        action: str,
        origin: Origin,
        job_ids: Sequence[str] = (),
        workloads: Sequence[str] = (),
    ) -> str | None:
        """Why a person must approve action first, whatever the policy's thresholds say
        (None: the policy alone decides): nothing a model reads may cancel, hold or
        keep off nodes a person's jobs, a conversation that has read job text may not
        submit, and a site may ask a person before jobsmith acts on jobs no jobsmith
        session submitted
        (`approval.risky_actions`: cancel_foreign, hold_foreign, release_foreign).
        workloads: fed workloads named by their step ids (jobsmith's own, never foreign)."""
        if origin.who is Who.MODEL and action in MODEL_CONTROLS:
            named = [f"jobs {', '.join(job_ids)}"] if job_ids or not workloads else []
            named += [f"workloads {', '.join(workloads)}"] if workloads else []
            return f"the model asks to {action} {' and '.join(named)}; only a person can allow that"
        tainted = tainted_reason(origin.read, action, self.site.model.tainted_actions)
        if (
            tainted is not None
            or f"{action}_foreign" not in self.site.policy.approval.risky_actions
        ):
            return tainted
        foreign = [j for j in job_ids if self.ledger.get(j) is None]
        if foreign:
            return f"{action} of jobs jobsmith did not submit: {', '.join(foreign)}"
        return None

    def spend(
        self, cost: Cost, *, approval_given: bool = False, jobs: Sequence[JobOptions] = ()
    ) -> Ruling:
        """The policy's verdict on spending cost now (budgets, limits, thresholds); jobs,
        if given, are what cost is of, judged together against the scheduler's limits on
        queued jobs (a plan's, all of them). approval_given: a person approved it, which
        lifts the approval thresholds (nothing else)."""
        # budgets look back a day; a failure streak is only read from sessions active in
        # the last week, so a long-lived store does not slow every submission down
        sessions = self.folds_active_since(self.clock() - timedelta(days=7))
        history = history_from_folds(sessions, self.clock())
        decision = evaluate(cost, self.site.policy, history, self._active_tasks())
        if decision.verdict != "refuse":  # no person need approve what Slurm would refuse
            decision = self._submit_limit_refusal(jobs) or decision
        if approval_given and decision.verdict == "approve":
            return Ruling("allow")
        return decision

    def again(self, asked: Mapping[str, Any]) -> None:
        """A held submission judged afresh before its approval is recorded: the site's
        limits and policy as they are now (the approval lifts only the threshold), and
        the template's paths resolved now (an input replaced by a symlink out of the
        allowed roots is refused). Raises the error that refuses it; records nothing,
        so a step that fails here stays pending, and `approve` names why."""
        options = JobOptions.model_validate(asked["options"])
        check_limits(options, self.site)
        hard = self.spend(Cost.of(options), approval_given=True, jobs=[options])
        if hard.verdict == "refuse":
            raise PolicyError(refusal(hard))
        template = str(asked.get("template") or "")
        params = intent_params(asked)
        if template in self.library.names() and params:
            roots = list(self.site.paths.allowed_roots)
            base = Path(str(asked.get("cwd") or self.cwd))
            render_body(
                self.library.get(template),
                params,
                allowed_roots=roots,
                paths=PathPolicy(roots, base, self.files),
            )

    @contextlib.contextmanager
    def one_look_at_the_queue(self) -> Iterator[None]:
        """Within, the policy asks Slurm for the active tasks once: a plan's many checks
        judge one moment, at one squeue instead of one per check and submission (the
        plan's total was judged against the concurrency limit, which covers its jobs).
        Within an outer look, the outer one serves."""
        if self._limits is not None:
            yield
            return
        self._active = self._active_tasks()
        self._limits = {}
        try:
            yield
        finally:
            self._active = None
            self._limits = None

    @contextlib.contextmanager
    def fresh_look_at_the_queue(self) -> Iterator[None]:
        """Within, Slurm is asked again for every judgement, even inside one look: a plan's
        step fed in parts is judged part by part after the plan's other jobs were queued,
        and those take room the look before them did not see."""
        saved = self._active, self._limits
        self._active, self._limits = None, None
        try:
            yield
        finally:
            self._active, self._limits = saved

    def _active_tasks(self) -> int:
        """The queue's active tasks, for the concurrency limit: 0 without one (no squeue:
        a site with no such limit pays nothing for it)."""
        if self.site.policy.max_concurrent_jobs is None:
            return 0
        return self._active if self._active is not None else self.scheduler.active_tasks()

    def folds_active_since(self, since: datetime) -> list[SessionFold]:
        """The folds of the sessions with an event since `since`, for the budgets' windows
        (each fold reads only what its session appended since the last check)."""
        if self.folds is None:
            self.folds = SessionFolds(self.store)
        folds = self.folds
        active = self.store.list_sessions(active_since=since)
        return [folds.of(s.id) for s in active if s.last_event_at >= since]

    def budget_use(self) -> list[BudgetUse]:
        """How much of each budget is spent now (as spend reads it), for a running
        pipeline whose engine submits on its own (agent/runtime/workflows/pipelinerun.py)."""
        sessions = self.folds_active_since(self.clock() - timedelta(days=7))
        return budget_use(self.site.policy.budgets, history_from_folds(sessions, self.clock()))

    def canary_first(self, checked: CheckedJob) -> bool:
        """Whether the site's policy runs this job's first array tasks alone before the
        rest (`policy.canary`): an array above its canary size (a re-run never comes here:
        it re-runs tasks that already ran)."""
        canary = self.site.policy.canary
        is_array = checked.job.options.array is not None
        return canary is not None and is_array and checked.cost.tasks > canary.above_tasks

    def _submit_limit_refusal(self, jobs: Sequence[JobOptions]) -> Ruling | None:
        """A refusal if the jobs' tasks would pass one of the scheduler's limits on queued
        jobs (MaxSubmit; the tasks of jobs under the same limit are added up), or an array's
        highest index its cap on indices (MaxArraySize).

        A single job is not checked, so it costs no sacctmgr and no squeue: over a limit,
        Slurm refuses it whole with an error naming the limit, leaving nothing half done;
        an array (refused whole after policy said yes, its canary too) or a plan (whose
        last jobs would be refused after the first were queued) is what needs it. An
        array of one task is checked too: a fed workload's last part may be one, and it
        must wait for room rather than be refused by sbatch (and lost to the workload).
        """
        if sum(opts.array_size() for opts in jobs) <= 1 and all(o.array is None for o in jobs):
            return None
        return self.room_for(jobs)

    def room_for(self, jobs: Sequence[JobOptions]) -> Ruling | None:
        """The refusal of _submit_limit_refusal, asked even for a single job: a job
        submitted when room appears (a plan's step after a fed workload) waits for room
        instead of being refused by sbatch and lost to its plan."""
        adds: dict[tuple[str, str], int] = {}
        limits = {}
        too_wide = None
        for opts in jobs:
            known = self._submit_limits(opts)
            too_wide = too_wide or array_size_refusal(opts, known.max_array_size)
            for limit in known.limits:
                key = (limit.rule, limit.holder)
                limits[key] = limit
                adds[key] = adds.get(key, 0) + opts.array_size()
        return submit_limit_refusal(((limits[k], adds[k]) for k in limits), len(jobs)) or too_wide

    def _submit_limits(self, opts: JobOptions) -> SubmitLimits:
        """The scheduler's answer, asked once per QoS, account and partition within one
        look at the queue (a plan's jobs usually share them: one squeue for the plan)."""
        if self._limits is None:
            return self.scheduler.submit_limits(getpass.getuser(), opts)
        key = (opts.qos, opts.account, opts.partition)
        if key not in self._limits:
            self._limits[key] = self.scheduler.submit_limits(getpass.getuser(), opts)
        return self._limits[key]


def intent_params(intent: Mapping[str, Any]) -> Mapping[str, object]:
    """The template parameters of a submission intent's step ({} for a re-run's, whose
    step names a job rather than a request)."""
    step = intent.get("step")
    if not isinstance(step, Mapping) or step.get("action") != "submit":
        return {}
    try:
        return JobRequest.model_validate(step.get("job") or {}).params
    except ValidationError:
        return {}

"""The step contract: every action a brain (or the CLI) may ask the executor for.

A step is a typed request with an id and safety metadata; its JSON schema is what a
model sees as its tools. Each step's result is a structured summary (state, exit code,
elapsed, memory, the relevant tail of a log …), never a raw dump of Slurm's output.

A step kind is one class here: its model and its handler (`handle`, given the `Hands`
the executor lends it), registered together in the `Step` union below. The executor
adds what every step gets (intent before, result after, policy, approvals) and knows
no step kind by name, except that submissions take its one submit path. Adding a kind
touches this module and its test.
"""

from __future__ import annotations

import getpass
import secrets
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from enum import StrEnum
from functools import cache
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, model_validator

from jobsmith.adapters.jobid import JobIdOrRangeText, JobIdText, WholeJobIdText
from jobsmith.adapters.options import SafeToken
from jobsmith.agent.runtime.submission.request.jobs import JobRequest
from jobsmith.agent.runtime.workflows.feeding.reference import WorkloadIdText
from jobsmith.agent.runtime.workflows.plans import Plan

if TYPE_CHECKING:
    from jobsmith.adapters.scheduler import JobStatus, Scheduler
    from jobsmith.agent.diagnosis.table import Diagnosis
    from jobsmith.agent.runtime.submission.advising.advice import SubmitAdvice
    from jobsmith.agent.runtime.submission.judging.judge import CheckedJob
    from jobsmith.job_templates import TemplateLibrary
    from jobsmith.site_config import SiteConfig


class Hands(Protocol):
    """What the executor lends a step's handler; a handler reaches nothing else."""

    @property
    def library(self) -> TemplateLibrary:
        """The templates."""
        ...

    @property
    def site(self) -> SiteConfig:
        """The site's config and policy."""
        ...

    @property
    def scheduler(self) -> Scheduler:
        """The scheduler, behind its protocol."""
        ...

    def check(self, request: JobRequest) -> CheckedJob:
        """A job assembled and judged as a submission would be."""
        ...

    def advise(self, request: JobRequest) -> SubmitAdvice:
        """What to offer before submitting it: right-size, earliest partition."""
        ...

    def read_output(self, job_id: str, stream: str, tail: int) -> dict[str, Any]:
        """The end of a job's stdout or stderr, as a LogView document."""
        ...

    def diagnose(self, job_id: str) -> Sequence[Diagnosis]:
        """Why a job (or each failed task) ended as it did."""
        ...

    def stop_workloads(self, step_ids: Sequence[str]) -> list[tuple[str, bool, list[str]]]:
        """Fed workloads named by their step ids, stopped: no part fed after this; for
        each, its step id, whether it was cancelled already, its live parts' jobs
        (agent/runtime/workflows/feeding/feeder.py, stop_named)."""
        ...

    def fed_workloads(self, statuses: Mapping[str, JobStatus]) -> list[dict[str, Any]]:
        """The fed workloads of the polled jobs' sessions and those still feeding, each
        with its line (agent/runtime/workflows/feeding/overview.py)."""
        ...


def new_step_id() -> str:
    """A short unique id for a step (it also names a pending approval)."""
    return "st-" + secrets.token_hex(5)


class Risk(StrEnum):
    """What a step can do to the user's allocation."""

    READ = "read"  # looks only
    SUBMIT = "submit"  # spends allocation
    CONTROL = "control"  # changes jobs that exist (cancel, hold, release)


class _Step(BaseModel):
    # each kind's validator is built when first used: a `jobsmith submit` builds only
    # Submit's, not the fifteen others' (issue 26); what they accept is the same
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    id: str = Field(default_factory=new_step_id, description="unique id of this step")

    #: submissions take the executor's one submit path instead of `handle`
    submits: ClassVar[bool] = False

    @property
    def risk(self) -> Risk:
        """Safety class of the step."""
        return Risk.READ

    def handle(self, hands: Hands) -> dict[str, Any]:
        """Do the step with what the executor lends; the result's summary."""
        raise NotImplementedError(f"step kind {type(self).__name__} has no handler")


class ListTemplates(_Step):
    """List the job templates available."""

    action: Literal["list_templates"] = "list_templates"

    def handle(self, hands: Hands) -> dict[str, Any]:
        """Every template's name and description."""
        listed = hands.library.list()
        return {"templates": [{"name": t.name, "description": t.description} for t in listed]}


class ShowTemplate(_Step):
    """Show one template's parameters and resource defaults."""

    action: Literal["show_template"] = "show_template"
    name: str = Field(description="template name")

    def handle(self, hands: Hands) -> dict[str, Any]:
        """The template's spec."""
        t = hands.library.get(self.name)
        return {"name": t.name, "spec": t.spec.model_dump(mode="json", exclude_none=True)}


class _JobStep(_Step):
    job: JobRequest = Field(description="template, parameters and resources")


class Render(_JobStep):
    """Render a job's script and check it against policy; submits nothing."""

    action: Literal["render"] = "render"

    def handle(self, hands: Hands) -> dict[str, Any]:
        """The render document (as `jobsmith render --json`), compact: as submit judges it."""
        return hands.check(self.job).document().compact()


class TestOnly(_JobStep):
    """Ask Slurm whether it would accept the job and when it would start."""

    __test__ = False  # not a pytest class
    action: Literal["test_only"] = "test_only"

    def handle(self, hands: Hands) -> dict[str, Any]:
        """Policy first (a refusal never reaches Slurm), then sbatch --test-only."""
        checked = hands.check(self.job)
        checked.raise_if_refused()
        verdict = hands.scheduler.test_only(checked.job.script).model_dump(mode="json")
        advice = hands.advise(self.job)
        offers = {"advice": advice.model_dump(mode="json", exclude_none=True)}
        return {**verdict, "policy": checked.policy(), **(offers if advice.offers() else {})}


class Submit(_JobStep):
    """Submit a job to Slurm (subject to policy and, above thresholds, approval)."""

    action: Literal["submit"] = "submit"
    submits: ClassVar[bool] = True

    @property
    def risk(self) -> Risk:
        """Submitting spends allocation."""
        return Risk.SUBMIT


class Rerun(_Step):
    """Submit a job jobsmith ran before again: same script, more memory or time, and for
    an array only the tasks that failed (unless failed_only is false)."""

    action: Literal["rerun"] = "rerun"
    submits: ClassVar[bool] = True
    job_id: WholeJobIdText = Field(
        description="the Slurm job id to re-run (jobsmith must have submitted it)"
    )
    failed_only: bool = Field(True, description="for arrays: re-run only the failed tasks")
    mem_mb: int | None = Field(None, gt=0, description="new memory per node, MiB")
    time_limit_s: int | None = Field(None, gt=0, description="new time limit, seconds")
    reason: str = Field("", description="why (kept in the session log)")

    @property
    def risk(self) -> Risk:
        """Submitting spends allocation."""
        return Risk.SUBMIT


class RunPlan(_Step):
    """Submit a plan's jobs at once, each waiting for the jobs of the steps it names
    through Slurm's dependencies (agent/runtime/workflows/plans.py); policy and approval judge the
    plan whole (agent/runtime/workflows/planrun.py)."""

    action: Literal["run_plan"] = "run_plan"
    submits: ClassVar[bool] = True
    plan: Plan = Field(description="the plan: named steps, each a job and what it waits for")

    @property
    def risk(self) -> Risk:
        """Submitting spends allocation."""
        return Risk.SUBMIT


class Status(_Step):
    """States of jobs (one sacct call for all)."""

    action: Literal["status"] = "status"
    job_ids: list[JobIdText] = Field(description="Slurm job ids; arrays report every task")

    def handle(self, hands: Hands) -> dict[str, Any]:
        """One batched poll; arrays as counts plus their unfinished or failed tasks."""
        from jobsmith.agent.runtime.documents import StatusDocument

        since = datetime.now() - timedelta(days=7)
        statuses = hands.scheduler.status(self.job_ids, since) if self.job_ids else {}
        found = StatusDocument.of(statuses).compact()
        fed = hands.fed_workloads(statuses)
        return {**found, "workloads": fed} if fed else found


class ReadOutput(_Step):
    """The end of a job's stdout or stderr."""

    action: Literal["read_output"] = "read_output"
    job_id: JobIdText = Field(description="Slurm job id, or ARRAY_TASK for one task")
    stream: Literal["stdout", "stderr"] = Field("stdout", description="which file")
    tail: int = Field(50, ge=1, le=2000, description="lines from the end")

    def handle(self, hands: Hands) -> dict[str, Any]:
        """The end of the file."""
        return hands.read_output(self.job_id, self.stream, self.tail)


class Diagnose(_Step):
    """Why a job (or each failed task) ended as it did, with evidence and a remedy."""

    action: Literal["diagnose"] = "diagnose"
    job_id: JobIdText = Field(description="Slurm job id, or ARRAY_TASK for one task")

    def handle(self, hands: Hands) -> dict[str, Any]:
        """Verdict, evidence, efficiency and remedy per failed task."""
        return {"diagnoses": [d.model_dump(mode="json") for d in hands.diagnose(self.job_id)]}


class _Control(_Step):
    action: str  # each control step's Literal: cancel, hold or release
    job_ids: list[JobIdOrRangeText] = Field(
        min_length=1, description="Slurm job ids: 1234, an array task 1234_5 or 1234_[1-3]"
    )

    @property
    def risk(self) -> Risk:
        """Changes jobs that exist."""
        return Risk.CONTROL

    def handle(self, hands: Hands) -> dict[str, Any]:
        """scancel / scontrol hold / release, through the scheduler's protocol."""
        getattr(hands.scheduler, self.action)(self.job_ids)
        return {"action": self.action, "job_ids": self.job_ids}


class Cancel(_Control):
    """Cancel jobs, or fed workloads as a whole (by the step id submit and status print
    for one: it may have no job yet)."""

    action: Literal["cancel"] = "cancel"
    job_ids: list[JobIdOrRangeText] = Field(
        default_factory=list,
        description="Slurm job ids: 1234, an array task 1234_5 or 1234_[1-3]",
    )
    workloads: list[WorkloadIdText] = Field(
        default_factory=list,
        description="fed workloads, by the step id status shows for each (st-...): no part "
        "is submitted after this, and its parts' jobs are cancelled",
    )

    @model_validator(mode="after")
    def _names_one(self) -> Cancel:
        if not (self.job_ids or self.workloads):
            raise ValueError("name at least one job id or workload")
        return self

    def handle(self, hands: Hands) -> dict[str, Any]:
        """Each workload recorded cancelled first (none if one is unknown), then one
        scancel for the jobs and the workloads' parts that have not ended."""
        ids = list(self.job_ids)
        stopped: list[str] = []
        already: list[str] = []
        for step_id, was, live in hands.stop_workloads(self.workloads) if self.workloads else []:
            (already if was else stopped).append(step_id)
            ids += [j for j in live if j not in ids]
        if ids:
            hands.scheduler.cancel(ids)
        summary: dict[str, Any] = {"action": self.action, "job_ids": ids}
        if self.workloads:
            summary |= {"workloads": stopped, "already_cancelled": already}
        return summary


class Hold(_Control):
    """Hold pending jobs (one already running runs on; the result names it)."""

    action: Literal["hold"] = "hold"

    def handle(self, hands: Hands) -> dict[str, Any]:
        """scontrol hold; the jobs that had already started, which it did not stop."""
        running = hands.scheduler.hold(self.job_ids)
        return {"action": self.action, "job_ids": self.job_ids, "already_running": running}


class Release(_Control):
    """Release held jobs."""

    action: Literal["release"] = "release"


class ExcludeNodes(_Step):
    """Keep a pending job off nodes: `scontrol update ExcNodeList`, for a job Slurm itself
    requeued after its node failed, so it starts elsewhere without a new submission."""

    action: Literal["exclude_nodes"] = "exclude_nodes"
    job_ids: list[JobIdText] = Field(
        min_length=1, description="pending Slurm jobs or array tasks (1234, 1234_5)"
    )
    nodes: SafeToken = Field(description="the whole list they must exclude, e.g. 'n2,n7'")
    reason: str = Field("", description="why (kept in the session log)")

    @property
    def risk(self) -> Risk:
        """Changes jobs that exist."""
        return Risk.CONTROL

    def handle(self, hands: Hands) -> dict[str, Any]:
        """One scontrol update per job, through the scheduler's protocol."""
        for job_id in self.job_ids:
            hands.scheduler.exclude_nodes(job_id, self.nodes)
        return {"action": self.action, "job_ids": self.job_ids, "nodes": self.nodes}


class SiteInfo(_Step):
    """The site's partitions, limits, accounts and defaults."""

    action: Literal["site_info"] = "site_info"

    def handle(self, hands: Hands) -> dict[str, Any]:
        """The whole site config."""
        return hands.site.model_dump(mode="json", exclude_none=True)


class ShowClusterFacts(_Step):
    """The live cluster's partitions, their limits and the user's accounts and QoS."""

    action: Literal["cluster_facts"] = "cluster_facts"

    def handle(self, hands: Hands) -> dict[str, Any]:
        """What Slurm says about itself (three read-only commands)."""
        return hands.scheduler.cluster_facts(getpass.getuser()).model_dump(mode="json")


Step = Annotated[
    ListTemplates
    | ShowTemplate
    | Render
    | TestOnly
    | Submit
    | Rerun
    | RunPlan
    | Status
    | ReadOutput
    | Diagnose
    | Cancel
    | Hold
    | Release
    | ExcludeNodes
    | SiteInfo
    | ShowClusterFacts,
    Field(discriminator="action"),
]


@cache
def step_adapter() -> TypeAdapter[Step]:
    """The validator of any step (a dict with its `action`), built on first use."""
    return TypeAdapter(Step)


class Outcome(StrEnum):
    """How a step ended."""

    DONE = "done"
    REFUSED = "refused"  # by policy; nothing happened
    AWAITING_APPROVAL = "awaiting_approval"  # held for a person
    FAILED = "failed"  # Slurm or the input said no
    UNKNOWN = "unknown"  # Slurm did not answer; `sessions resume` reconciles by tag


class StepResult(BaseModel):
    """The structured summary of a step's effect, as a brain sees it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    step_id: str = Field(description="the step this answers")
    action: str = Field(description="the step's action")
    outcome: Outcome = Field(description="done, refused, awaiting_approval or failed")
    summary: dict[str, Any] = Field(default_factory=dict, description="what happened")
    error: str | None = Field(None, description="the one-line reason, if not done")


def step_schemas() -> dict[str, Any]:
    """JSON schema of every step: what a model is offered as tools."""
    return step_adapter().json_schema()

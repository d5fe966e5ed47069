"""The executor: turns typed steps into Slurm actions under the site's policy; decides nothing.

Every step is committed to the session log before it runs (intent) and its result after
it (result). A submission's intent carries its job name and tag, so a process killed
while sbatch runs can be reconciled with Slurm by tag instead of submitting again. A step
above an approval threshold is recorded as approval_asked, with the exact script and its
hash, and waits for `jobsmith approve`; a refusal names the rule and the limit.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jobsmith.adapters.files_there import JobFiles, LocalFiles
from jobsmith.adapters.options import JobOptions
from jobsmith.adapters.scheduler import JobStatus, Scheduler
from jobsmith.agent.runtime.blocklist.exclude import with_blocked
from jobsmith.agent.runtime.documents import SubmissionDocument
from jobsmith.agent.runtime.recovery.rerun import (
    failed_task_indices,
    rerun_options,
    with_directives,
)
from jobsmith.agent.runtime.session.claims import StepSettled, append_result
from jobsmith.agent.runtime.session.events import EventKind
from jobsmith.agent.runtime.session.ledger import JobLedger, SubmissionRecord
from jobsmith.agent.runtime.session.payloads import intent_payload
from jobsmith.agent.runtime.session.readmodel import SessionFolds
from jobsmith.agent.runtime.session.session_log import SessionLog
from jobsmith.agent.runtime.session.store import SessionStore
from jobsmith.agent.runtime.submission import hashing, orders
from jobsmith.agent.runtime.submission import steps as st
from jobsmith.agent.runtime.submission.advising.estimates import EstimateCache
from jobsmith.agent.runtime.submission.approval.approvals import ApprovalNeeded
from jobsmith.agent.runtime.submission.judging.judge import (
    CheckedJob,
    Judge,
    Origin,
    intent_params,
    refusal,
)
from jobsmith.agent.runtime.submission.judging.policy import (
    OVER_SITE_LIMITS,
    Cost,
    Ruling,
    check_limits,
)
from jobsmith.agent.runtime.submission.request.jobs import JobRequest
from jobsmith.agent.runtime.workflows.planrun import (
    PlanStepUndecided,
    redirect_after_rerun,
    run_canary,
    run_plan,
)
from jobsmith.errors import (
    InputError,
    JobsmithError,
    NotFound,
    PolicyError,
    SchedulerUnavailable,
)
from jobsmith.job_templates import TemplateLibrary
from jobsmith.site_config import SiteConfig

if TYPE_CHECKING:  # imported where used: a submission never diagnoses, nor (with
    # --no-advice, or advice the person was shown) advises
    from jobsmith.agent.diagnosis.table import Diagnosis
    from jobsmith.agent.runtime.submission.advising.advice import SubmitAdvice


@dataclass(frozen=True)
class _Ready:
    """A submission's bytes, what it costs, and the intent that records it."""

    step_id: str
    action: str
    template: str
    script: str
    options: JobOptions
    cost: Cost
    params: Mapping[str, object]
    intent: dict[str, Any]
    #: the job this one re-runs: a plan waiting for that job waits for this one
    rerun_of: str | None


@dataclass
class Executor:
    """Runs steps for sessions; the CLI and every brain go through it."""

    store: SessionStore
    scheduler: Scheduler
    library: TemplateLibrary
    site: SiteConfig
    ledger: JobLedger
    cwd: Path
    read_output: Callable[[str, str, int], dict[str, Any]]
    #: the submitter's environment, whose SBATCH_* defaults are folded into requests
    environ: Mapping[str, str] = field(default_factory=dict)
    clock: Callable[[], datetime] = lambda: datetime.now(UTC)
    #: the sessions' folds, for the budgets (built on the store if not given)
    folds: SessionFolds | None = None
    #: Slurm's start estimates kept for a minute, for the advice (none kept if not given)
    estimates: EstimateCache | None = None
    #: the nodes on the user's blocklist now: new submissions and re-runs exclude them
    blocked_nodes: Callable[[], Sequence[str]] = lambda: ()
    #: the job's files where it runs: its paths looked at, its log directory made there
    #: (adapters/files_there.py; over SSH the login node's, not this host's)
    files: JobFiles = field(default_factory=LocalFiles)
    #: the one judge of requests, plans and approvals (agent/runtime/submission/judging/judge.py)
    judge: Judge = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.judge = Judge(
            store=self.store,
            scheduler=self.scheduler,
            library=self.library,
            site=self.site,
            ledger=self.ledger,
            cwd=self.cwd,
            environ=self.environ,
            clock=self.clock,
            folds=self.folds,
            estimates=self.estimates,
            blocked_nodes=self.blocked_nodes,
            files=self.files,
        )

    def run(self, session_id: str, step: st.Step, *, origin: Origin | None = None) -> st.StepResult:
        """Run one step in a session; the result is also the session's last event.

        origin: who asks, and what the asking conversation has read: the judge's
        person-first rules may hold the step for a person whatever the policy's
        thresholds say (a model's cancel or hold; a submission or plan of a conversation
        that has read job text). Policy still refuses what it refuses; a re-run is never
        held by them.
        """
        origin = origin or Origin()
        log = SessionLog(self.store, session_id)
        if isinstance(step, st.Submit):
            return self.submit(log, orders.NewJob(step, origin))
        if isinstance(step, st.Rerun):
            return self.submit(log, orders.Rerun(step))
        try:
            if isinstance(step, st.RunPlan):  # judged whole, then a submission per job
                with self.judge.one_look_at_the_queue():
                    return run_plan(self, log, step, origin)
            intent = {"step": _dump(step), "risk": step.risk}
            log.intent(step.id, intent)
            job_ids: Sequence[str] = getattr(step, "job_ids", ())
            workloads: Sequence[str] = getattr(step, "workloads", ())
            control = step.risk is st.Risk.CONTROL
            held = (
                self.judge.person_first(step.action, origin, job_ids, workloads)
                if control
                else None
            )
            if held is not None:  # `jobsmith approve` runs it
                log.append(EventKind.APPROVAL_ASKED, {**intent, "reason": held}, step.id)
                raise ApprovalNeeded(step.id, held)
            summary = step.handle(self)  # its own handler, this executor as its hands
        except (ApprovalNeeded, StepSettled, PlanStepUndecided):
            raise  # a settled step must not get a failure result on top of its result
        except JobsmithError as err:
            log.intent(step.id, {"step": _dump(step), "risk": step.risk})
            self.finish(log, step, _outcome_of(err), {}, str(err))
            raise
        return self.finish(log, step, st.Outcome.DONE, summary, None)

    # --- submission ------------------------------------------------------------------

    def submit(self, session: SessionLog | str, order: orders.Order) -> st.StepResult:
        """The one way into a submission (orders.py says where the bytes come from).

        The judge rules, the intent is committed (a recorded order's already is), a
        refusal or a person's approval stops it there, else sbatch runs and the ledger
        and the step's result record the job. A failure is the step's result, except a
        recorded order's that is not a refusal: its intent stays unsettled, for resume.
        """
        log = session if isinstance(session, SessionLog) else SessionLog(self.store, session)
        try:
            return self._send(log, order)
        except (ApprovalNeeded, StepSettled, PlanStepUndecided):
            raise
        except JobsmithError as err:
            if not isinstance(order, orders.Recorded):
                log.intent(order.step.id, {"step": _dump(order.step), "risk": order.step.risk})
                self.finish(log, order.step, _outcome_of(err), {}, str(err))
            elif isinstance(err, PolicyError):  # refused for good: neither approve nor resume
                append_result(log, order.step_id, {"outcome": "refused", "error": str(err)})
            raise

    def _send(self, log: SessionLog, order: orders.Order) -> st.StepResult:
        if isinstance(order, orders.Recorded) and "workload" in order.intent:
            # a workload's intent that a crash left unsettled: fed, never submitted whole
            from jobsmith.agent.runtime.workflows.feeding import feeder

            return feeder.approved(self, log.session_id, order.step_id, order.intent)
        if isinstance(order, orders.Recorded):
            job, ruling = self._recorded(order)
        else:
            if isinstance(order, orders.NewJob | orders.Checked):
                checked = self._checked(order)
                ruling = checked.verdict()
                if isinstance(order, orders.NewJob) and ruling.rule in OVER_SITE_LIMITS:
                    # over a submit limit or MaxArraySize: fed in parts that fit (workflows/
                    # feeding; imported only then); a canary's array stays refused whole, as
                    # its canary would be
                    from jobsmith.agent.runtime.workflows.feeding import feeder

                    if feeder.feedable(checked, ruling) and not self.judge.canary_first(checked):
                        return feeder.start(self, log, order.step, checked)
                if ruling.verdict != "refuse" and self.judge.canary_first(checked):
                    # a plan of two (planrun.py), judged again whole, held as this step was
                    origin = order.origin if isinstance(order, orders.NewJob) else Origin()
                    return run_canary(self, log, order.step, checked, origin)
                a = checked.job
                params = order.step.job.params
                job = self._ready(order.step, a.template, a.script, a.options, checked.cost, params)
            else:
                job, ruling = self._judged(order)
            log.intent(job.step_id, job.intent)
        if ruling.verdict == "refuse":
            raise PolicyError(refusal(ruling))
        if ruling.verdict == "approve":
            asked = {**job.intent, "reason": ruling.message}
            log.append(EventKind.APPROVAL_ASKED, asked, job.step_id)
            raise ApprovalNeeded(job.step_id, ruling.message)
        result = self._submit(log, job)
        if job.rerun_of is not None:  # a plan waiting for that job waits for this one
            redirect_after_rerun(self, job.rerun_of, str(result.summary["job_id"]))
        return result

    def _checked(self, order: orders.NewJob | orders.Checked) -> CheckedJob:
        """A new request judged for its origin, or an earlier check's job whose budgets
        are judged again (MCP's check token: time has passed)."""
        if isinstance(order, orders.NewJob):
            return self.judge.job(order.step.job, order.origin)
        again = self.judge.spend(order.checked.cost, jobs=[order.checked.job.options])
        return replace(order.checked, decision=again)

    def _judged(self, order: orders.Rerun | orders.Planned) -> tuple[_Ready, Ruling]:
        """A re-run's or a plan's job, and the budgets' ruling on it (a plan's job was
        allowed with its whole plan: no person is asked again)."""
        if isinstance(order, orders.Rerun):
            template, script, options, params, extra = self._prepare_rerun(order.step)
            cost = Cost.of(options)
            job = self._ready(order.step, template, script, options, cost, params, extra)
            return job, self.judge.spend(cost, jobs=[options])
        cost = Cost.of(order.options)
        params = order.step.job.params
        job = self._ready(order.step, order.template, order.script, order.options, cost, params)
        return job, self.judge.spend(cost, approval_given=True)

    def _recorded(self, order: orders.Recorded) -> tuple[_Ready, Ruling]:
        """A recorded submission's bytes, still what was recorded and approved, and the
        budgets' ruling now (an approval given lifts the thresholds, nothing else)."""
        step_id, intent = order.step_id, order.intent
        script = str(intent["script"])
        actual = hashing.script_sha256(script)
        if actual != intent["script_sha256"] or order.approved_sha256 not in (None, actual):
            raise PolicyError(f"step {step_id}: the script changed after approval; submit it again")
        options = JobOptions.model_validate(intent["options"])
        cost = Cost.of(options)
        given = order.approved_sha256 is not None
        ruling = self.judge.spend(cost, approval_given=given, jobs=[options])
        rerun_of = intent.get("rerun_of")
        job = _Ready(
            step_id=step_id,
            action="submit",
            template=str(intent.get("template", "?")),
            script=script,
            options=options,
            cost=cost,
            params=intent_params(intent),
            intent=dict(intent),
            rerun_of=str(rerun_of) if rerun_of else None,
        )
        return job, ruling

    def _ready(
        self,
        step: st.Submit | st.Rerun,
        template: str,
        script: str,
        options: JobOptions,
        cost: Cost,
        params: Mapping[str, object],
        extra: Mapping[str, Any] | None = None,
    ) -> _Ready:
        """A new submission's bytes and its intent: what approvals bind to and what
        resume submits."""
        probe = self.scheduler.capabilities().submissions
        intent = {
            "step": _dump(step),
            "risk": step.risk,
            **_job_facts(template, script, options, cost),
            "script": script,  # resume submits exactly this, with the same tag
            "host": socket.gethostname(),  # the process that runs it (claims.py)
            # where an orphaned sbatch could still be running: here, or the login node
            # (a scheduler without a SubmissionProbe submits from this process: here)
            "submit_host": probe.submission_host() if probe else socket.gethostname(),
            "cwd": str(self.cwd),  # what relative paths meant, for replay
            **(extra or {}),
        }
        rerun_of = step.job_id if isinstance(step, st.Rerun) else None
        return _Ready(
            step.id, step.action, template, script, options, cost, params, intent, rerun_of
        )

    def _prepare_rerun(
        self, step: st.Rerun
    ) -> tuple[str, str, JobOptions, Mapping[str, object], dict[str, Any]]:
        """The original submission's script with new directives (see
        agent/runtime/recovery/rerun.py), and its template parameters: kept in the ledger
        with the re-run, so right-sizing can tell runs of the same parameters apart."""
        record = self.ledger.get(step.job_id)
        if record is None or record.session_id is None:
            raise NotFound(
                f"job {step.job_id}: jobsmith has no record of submitting it, so it has no "
                "script to re-run (submit it again from its template)"
            )
        original = self._recorded_script(record.session_id, record.options.job_name)
        tasks = None
        if record.options.array and step.failed_only:
            since = datetime.now() - timedelta(days=7)
            status = self.scheduler.status([record.job_id], since)[record.job_id]
            tasks = failed_task_indices(status)
            if not tasks:
                raise InputError(f"job {record.job_id}: no failed array tasks to re-run")
        options = rerun_options(
            record.options, tasks=tasks, mem_mb=step.mem_mb, time_limit_s=step.time_limit_s
        )
        blocked = self.blocked_nodes()
        if blocked:  # the nodes it failed on, if they are on the blocklist now
            options = options.model_copy(update={"exclude": with_blocked(options.exclude, blocked)})
        check_limits(options, self.site)
        script = with_directives(original, options, self.scheduler)
        extra = {"rerun_of": record.job_id, "reason": step.reason, "tasks": tasks}
        return record.template, script, options, record.params, extra

    def _recorded_script(self, session_id: str, job_name: str) -> str:
        for event in self.store.read(session_id):
            intent = intent_payload(event) if event.kind is EventKind.INTENT else None
            if intent is not None and intent.job_name == job_name and intent.script is not None:
                return intent.script
        raise NotFound(f"session {session_id} has no script recorded for {job_name}")

    def record_found(
        self, session_id: str, step_id: str, intent: dict[str, Any], job_id: str
    ) -> st.StepResult:
        """Record a submission that Slurm had although its result was never written."""
        options = JobOptions.model_validate(intent["options"])
        cost = Cost.of(options)
        self._record(
            session_id,
            job_id,
            str(intent.get("template", "?")),
            options,
            str(intent["script_sha256"]),
            recovered=True,
            params=intent_params(intent),
        )
        summary = _submitted(job_id, options, cost, recovered=True, warnings=[])
        data = {"outcome": st.Outcome.DONE, "action": "submit", **summary}
        append_result(SessionLog(self.store, session_id), step_id, data)
        return st.StepResult(
            step_id=step_id, action="submit", outcome=st.Outcome.DONE, summary=summary
        )

    def _record(
        self,
        session_id: str,
        job_id: str,
        template: str,
        options: JobOptions,
        sha: str,
        *,
        recovered: bool,
        warnings: Sequence[str] = (),
        params: Mapping[str, object] | None = None,
    ) -> None:
        self.ledger.record(
            SubmissionRecord(
                job_id=job_id,
                cluster=self.site.cluster,
                template=template,
                params=json.loads(json.dumps(dict(params or {}), default=str)),
                options=options,
                script_sha256=sha,
                submitted_at=datetime.now(),
                recovered=recovered,
                warnings=list(warnings),
                session_id=session_id,
            )
        )

    def _submit(self, log: SessionLog, job: _Ready) -> st.StepResult:
        if job.options.output:  # where the job runs: Slurm 22.05 cannot make it
            self.files.make_dirs(Path(job.options.output).parent)
        result = self.scheduler.submit(job.script, job.options)
        self._record(
            log.session_id,
            result.job_id,
            job.template,
            job.options,
            hashing.script_sha256(job.script),
            recovered=result.recovered,
            warnings=result.warnings,
            params=job.params,
        )
        summary = _submitted(
            result.job_id,
            job.options,
            job.cost,
            recovered=result.recovered,
            warnings=result.warnings,
        )
        data = {"outcome": st.Outcome.DONE, "action": job.action, **summary}
        append_result(log, job.step_id, data)
        return st.StepResult(
            step_id=job.step_id, action=job.action, outcome=st.Outcome.DONE, summary=summary
        )

    # --- everything else -------------------------------------------------------------

    def run_approved_control(self, session_id: str, step: st.Step) -> st.StepResult:
        """Run a control step a person approved."""
        log = SessionLog(self.store, session_id)
        return self.finish(log, step, st.Outcome.DONE, step.handle(self), None)

    def check(self, request: JobRequest) -> CheckedJob:
        """A step's hands judge a request as a person's would be (render, test_only)."""
        return self.judge.job(request)

    def advise(self, request: JobRequest) -> SubmitAdvice:
        """What a step's hands offer before a submission
        (agent/runtime/submission/advising/advice.py)."""
        return self.judge.advise(request)

    def diagnose(self, job_id: str) -> list[Diagnosis]:
        """Why a job (or each failed task) ended as it did (a step's hands)."""
        from jobsmith.agent.diagnosis.job import diagnose_job

        return diagnose_job(self.scheduler, self.site, self._stderr_lines, job_id)

    def stop_workloads(self, step_ids: Sequence[str]) -> list[tuple[str, bool, list[str]]]:
        """Fed workloads named by their step ids, stopped (a Cancel step's hands)."""
        from jobsmith.agent.runtime.workflows.feeding.feeder import stop_named

        return stop_named(self.store, self.ledger, step_ids)

    def fed_workloads(self, statuses: Mapping[str, JobStatus]) -> list[dict[str, Any]]:
        """The polled jobs' fed workloads and those still feeding (a Status step's hands)."""
        from jobsmith.agent.runtime.workflows.feeding.overview import documents, of_polled

        return documents(of_polled(self.store, self.ledger, statuses, every_feeding=True))

    def _stderr_lines(self, job_id: str) -> list[str]:
        try:
            return list(self.read_output(job_id, "stderr", 40).get("lines", []))
        except JobsmithError:
            return []

    def finish(
        self,
        log: SessionLog,
        step: st.Step,
        outcome: st.Outcome,
        summary: dict[str, Any],
        error: str | None,
    ) -> st.StepResult:
        """Record the step's result (once) and return it."""
        data = {"outcome": outcome, "action": step.action, "error": error, **summary}
        append_result(log, step.id, data)
        return st.StepResult(
            step_id=step.id, action=step.action, outcome=outcome, summary=summary, error=error
        )


def _outcome_of(err: JobsmithError) -> st.Outcome:
    if isinstance(err, PolicyError):
        return st.Outcome.REFUSED
    if isinstance(err, SchedulerUnavailable):
        return st.Outcome.UNKNOWN  # Slurm did not answer: a submission may still exist
    return st.Outcome.FAILED


def _submitted(
    job_id: str, options: JobOptions, cost: Cost, *, recovered: bool, warnings: Sequence[str]
) -> dict[str, Any]:
    """The result summary of a submission (the same whether seen or recovered)."""
    return SubmissionDocument(
        submitted=True,
        job_id=job_id,
        job_name=options.job_name,
        tag=options.tag(),
        array_tasks=cost.tasks if options.array else None,
        stdout=options.output,
        stderr=options.error,
        cost=cost.model_dump(),
        recovered=recovered,
        warnings=tuple(warnings),
    ).model_dump(mode="json", exclude={"session_id", "step_id"})


def _dump(step: st.Step) -> dict[str, Any]:
    return step.model_dump(mode="json")


def _job_facts(template: str, script: str, options: JobOptions, cost: Cost) -> dict[str, Any]:
    """What an approval is bound to and what resume needs: name, tag, hash, resources."""
    return {
        "template": template,
        "job_name": options.job_name,
        "tag": options.tag(),
        "script_sha256": hashing.script_sha256(script),
        "options": options.model_dump(mode="json"),
        "cost": cost.model_dump(),
    }


def job_ids_of(results: Sequence[st.StepResult]) -> list[str]:
    """Slurm job ids submitted by these results."""
    return [str(r.summary["job_id"]) for r in results if r.summary.get("submitted")]

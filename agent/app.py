"""The application object graph, built once by the CLI entry point and passed down.

Each part is created on first use: `jobsmith status` never loads templates, and
`jobsmith site init` works before any site config exists.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from jobsmith.errors import ConfigError, InputError

if TYPE_CHECKING:
    from jobsmith.adapters.scheduler import JobStatus, Scheduler, TestOnlyResult
    from jobsmith.adapters.transport import Transport
    from jobsmith.agent.brains.conversation import AskResult, Conversation
    from jobsmith.agent.brains.protocol import Brain
    from jobsmith.agent.brains.waking import WakeOutcome
    from jobsmith.agent.diagnosis.table import Diagnosis
    from jobsmith.agent.runtime.documents import (
        ControlResult,
        LogView,
        PipelineStatusDocument,
        PlanStatusDocument,
    )
    from jobsmith.agent.runtime.glancefacts import GlanceFacts
    from jobsmith.agent.runtime.session.jobstate import StateChange
    from jobsmith.agent.runtime.session.lastpoll import LastPoll, LastPollFile
    from jobsmith.agent.runtime.session.ledger import JobLedger, SubmissionRecord
    from jobsmith.agent.runtime.session.readmodel import SessionFolds
    from jobsmith.agent.runtime.session.store import FileSessionStore
    from jobsmith.agent.runtime.submission.advice import SubmitAdvice
    from jobsmith.agent.runtime.submission.executor import Executor
    from jobsmith.agent.runtime.submission.jobs import AssembledJob, JobRequest
    from jobsmith.agent.runtime.submission.judge import CheckedJob, Judgement, Origin
    from jobsmith.agent.runtime.submission.steps import Step, StepResult
    from jobsmith.agent.runtime.workflows.frames import RenderRequest
    from jobsmith.agent.runtime.workflows.pipelinerun import Pipelines
    from jobsmith.agent.runtime.workflows.plans import Plan
    from jobsmith.agent.runtime.workflows.transcode import Encoding
    from jobsmith.agent.views.report import RunReport
    from jobsmith.agent.watcher.cycle import WatchCycle
    from jobsmith.agent.watcher.lock import WatchLock
    from jobsmith.agent.watcher.news import News
    from jobsmith.job_templates import Template, TemplateLibrary
    from jobsmith.site_config import LoadedSite
    from jobsmith.site_config.model import SchedulerAccess


@dataclass
class UserDirs:
    """Where jobsmith keeps the user's files (platformdirs; overridable for tests)."""

    config_dir: Path
    state_dir: Path
    system_site_file: Path = Path("/etc/jobsmith/site.yaml")

    @classmethod
    def for_user(cls, environ: Mapping[str, str]) -> UserDirs:
        """XDG locations, honouring JOBSMITH_CONFIG_DIR / JOBSMITH_STATE_DIR overrides."""
        import platformdirs

        config = environ.get("JOBSMITH_CONFIG_DIR") or platformdirs.user_config_dir("jobsmith")
        state = environ.get("JOBSMITH_STATE_DIR") or platformdirs.user_state_dir("jobsmith")
        return cls(config_dir=Path(config), state_dir=Path(state))


@dataclass
class App:
    """Everything a command needs; parts are built lazily."""

    paths: UserDirs
    environ: Mapping[str, str]
    site_file: Path | None = None
    transport_override: Transport | None = field(default=None, repr=False)

    @cached_property
    def transport(self) -> Transport:
        """How Slurm commands run: the site config's `scheduler.kind`, `local` (this host)
        or `ssh` (a login node, over one reused connection).

        Commands that need no site config (status, cancel, logs) still work without one,
        locally; then only the default secret filter applies. paramiko is imported only
        for `ssh`, so local users never load it.
        """
        from jobsmith.adapters.slurm.jobenv import SecretFilter
        from jobsmith.adapters.slurm.transport import LocalTransport

        if self.transport_override is not None:
            return self.transport_override
        try:
            secrets = SecretFilter.with_site_names(self.site.config.policy.secret_env)
        except ConfigError:
            secrets = SecretFilter()
        access = self.scheduler_access
        if access.kind == "local":
            return LocalTransport(secrets)
        assert access.host is not None  # the site config requires it for ssh and openssh
        if access.kind == "openssh":
            from jobsmith.adapters.ssh.openssh import OpenSshTransport

            default = Path.home() / ".ssh" / f"jobsmith-{access.host}.sock"
            return OpenSshTransport(
                access.host,
                control_path=access.control_path or default,
                port=access.port,
                user=access.user,
                known_hosts=access.known_hosts,
                is_secret=secrets.is_secret,
            )
        from jobsmith.adapters.ssh.transport import ParamikoTransport

        return ParamikoTransport(
            access.host,
            port=access.port,
            user=access.user,
            key_file=access.key_file,
            known_hosts=access.known_hosts,
            is_secret=secrets.is_secret,
        )

    @cached_property
    def scheduler_access(self) -> SchedulerAccess:
        """The site's `scheduler` block: the whole config's, else the block read alone
        (`site init` over SSH starts from a file that holds only it; see
        load_scheduler_access for when that is local)."""
        from jobsmith.site_config.loader import load_scheduler_access

        try:
            return self.site.config.scheduler
        except ConfigError:
            return load_scheduler_access(
                self.site_file,
                environ=self.environ,
                system_file=self.paths.system_site_file,
                user_file=self.paths.config_dir / "site.yaml",
            )

    @property
    def scheduler_via(self) -> str:
        """How Slurm is reached, for messages: 'local', or the kind and user@host:port."""
        where = getattr(self.transport, "where", None)
        return f"{self.scheduler_access.kind} {where}" if where else "local"

    @cached_property
    def scheduler(self) -> Scheduler:
        """Slurm, through the transport, with the site's command timeout, remembering per
        cluster whether the site keeps accounting (adapters/slurm/accounting.py)."""
        from jobsmith.adapters.slurm.accounting import AccountingMemory
        from jobsmith.adapters.slurm.scheduler import SlurmScheduler

        access = self.scheduler_access
        timeout_s, remote = access.command_timeout_s, access.kind != "local"
        try:
            cluster = self.site.config.cluster
        except ConfigError:
            # commands that need no site config still work without one
            cluster = "no-site-config"
        memory = AccountingMemory(self.paths.state_dir / "clusters" / f"{cluster}.json")
        return SlurmScheduler(self.transport, timeout_s=timeout_s, memory=memory, remote=remote)

    @cached_property
    def site(self) -> LoadedSite:
        """The layered site configuration (admin file or --site, then the user's file)."""
        from jobsmith.site_config import load_site

        return load_site(
            self.site_file, environ=self.environ, user_file=self.paths.config_dir / "site.yaml"
        )

    @cached_property
    def ledger(self) -> JobLedger:
        """Submissions this user made with jobsmith."""
        from jobsmith.agent.runtime.session.ledger import JobLedger

        return JobLedger(self.paths.state_dir / "jobs")

    @cached_property
    def library(self) -> TemplateLibrary:
        """Templates: the user's own, then the site's, then the shipped ones (first wins)."""
        from jobsmith.job_templates import TemplateLibrary, shipped_library

        site_dirs = list(self.site.config.paths.template_dirs)
        return TemplateLibrary([self.paths.config_dir / "templates", *site_dirs, shipped_library()])

    # --- templates and submission ----------------------------------------------------

    def templates_info(self) -> list[Template]:
        """Every template available, by name."""
        return self.library.list()

    def template_detail(self, name: str) -> Template:
        """One template (TemplateError listing the valid names if unknown)."""
        return self.library.get(name)

    def assemble(self, request: JobRequest) -> AssembledJob:
        """Render and check a job against the site's limits; submits nothing."""
        from jobsmith.agent.runtime.submission.jobs import assemble

        template = self.library.get(request.template)
        header = self.scheduler.script_header
        return assemble(template, request, self.site.config, cwd=Path.cwd(), header=header)

    def check(self, request: JobRequest, *, advised: bool = False) -> CheckedJob:
        """Assemble a job and judge it on the very policy path `submit` takes, as the
        person who was shown the advice and chose (`advised`)."""
        from jobsmith.agent.runtime.submission.judge import Origin

        return self.executor.judge.job(request, Origin(advised=advised))

    def test_only(self, job: AssembledJob) -> TestOnlyResult:
        """Slurm's own pre-flight verdict (`sbatch --test-only`)."""
        return self.scheduler.test_only(job.script)

    def start_estimate(self, script: str | None) -> str | None:
        """When Slurm would start script, in words (None if it cannot say): shown before
        a person approves it."""
        from jobsmith.errors import SchedulerError

        if not script:
            return None
        try:
            verdict = self.scheduler.test_only(script)
        except SchedulerError:
            return None
        if not verdict.ok:
            return f"Slurm would not accept it as is: {verdict.message}"
        if verdict.estimated_start is None:
            return None
        where = f" in partition {verdict.partition}" if verdict.partition else ""
        caveat = "" if verdict.estimate_reliable else " (unreliable here: GRES on Slurm 22.05)"
        return f"{verdict.estimated_start:%Y-%m-%d %H:%M:%S}{where}{caveat}"

    def advise(self, request: JobRequest) -> SubmitAdvice:
        """What to offer before submitting request: a right-sized request from the
        user's history and the partition where it would start earliest."""
        return self.executor.judge.advise(request)

    @cached_property
    def store(self) -> FileSessionStore:
        """The session log store, in the user's state directory."""
        from jobsmith.agent.runtime.session.store import FileSessionStore

        return FileSessionStore(self.paths.state_dir / "sessions")

    @cached_property
    def executor(self) -> Executor:
        """The policy-bound executor every action goes through."""
        from jobsmith.agent.runtime.submission.executor import Executor

        def read_output(job_id: str, stream: str, tail: int) -> dict[str, object]:
            return self.logs(job_id, stream, tail).model_dump(mode="json")

        return Executor(
            store=self.store,
            scheduler=self.scheduler,
            library=self.library,
            site=self.site.config,
            ledger=self.ledger,
            cwd=Path.cwd(),
            read_output=read_output,
            environ=self.environ,
            folds=self.folds,
        )

    @cached_property
    def folds(self) -> SessionFolds:
        """Each session's fold (the read model), cached in the state directory."""
        from jobsmith.agent.runtime.session.readmodel import SessionFolds

        return SessionFolds(self.store, self.paths.state_dir / "folds")

    def one_step(
        self, title: str, step: Step, origin: str = "cli", *, asker: Origin | None = None
    ) -> tuple[str, StepResult]:
        """A CLI action is a one-step session: open it, run the step, return both.
        origin is the session's kind (cli, plan); asker what the judge weighs."""
        from jobsmith.agent.runtime.submission.approvals import ApprovalNeeded

        session_id = self.store.create({"title": title, "origin": origin})
        try:
            return session_id, self.executor.run(session_id, step, origin=asker)
        except ApprovalNeeded as err:
            self.news.add("approval_asked", step_id=err.step_id)
            raise

    def submit(self, request: JobRequest, *, advised: bool = False) -> tuple[str, StepResult]:
        """Submit through the executor (policy, approvals, the session log). advised:
        the person was shown the advice and chose (the judge does not apply the site's
        `apply` again)."""
        from jobsmith.agent.runtime.submission.judge import Origin
        from jobsmith.agent.runtime.submission.steps import Submit

        asker = Origin(advised=advised)
        return self.one_step(f"submit {request.template}", Submit(job=request), asker=asker)

    # --- plans ---------------------------------------------------------------------

    def plan_check(self, path: Path) -> Judgement:
        """A plan file read, every job rendered and checked, the plan judged whole."""
        from jobsmith.agent.runtime.workflows.plans import load_plan

        return self.judge_plan(load_plan(path))

    def plan_run(self, path: Path) -> tuple[str, StepResult]:
        """Submit a plan's jobs at once, with Slurm's dependencies, as one session."""
        from jobsmith.agent.runtime.workflows.plans import load_plan

        plan = load_plan(path)
        return self.run_plan(plan, f"plan {plan.name}")

    def plan_status(self, session_id: str | None) -> PlanStatusDocument:
        """A plan's steps with their jobs' states (one poll): session_id's plan, or the
        newest plan's."""
        from jobsmith.agent.runtime.workflows.planrun import plan_of, status_document
        from jobsmith.errors import NotFound

        if session_id is None:
            plans = [i.id for i in self.store.list_sessions() if i.meta.get("origin") == "plan"]
            if not plans:
                raise NotFound("no plan has run yet (`jobsmith plan run FILE` starts one)")
            session_id = plans[-1]
        record = plan_of(self.store.read(session_id))
        ids = list(record.job_ids.values())
        statuses = self.status(ids, "30d") if ids else {}
        return status_document(session_id, record, statuses)

    def transcode_plan(
        self,
        source: Path,
        output: Path,
        chunk_seconds: float,
        encoding: Encoding,
        workdir: Path | None,
    ) -> Plan:
        """The plan that transcodes source into output on the cluster (ffprobe reads the
        source here: agent/runtime/workflows/transcode.py)."""
        from jobsmith.agent.runtime.workflows import transcode

        source, output = source.resolve(), output.resolve()
        if not source.is_file():  # ffprobe would block on a FIFO, read a device forever
            raise InputError(f"transcode: {source} is not a regular file")
        if source == output:
            raise InputError(f"transcode: {output} is the source itself; name another output")
        workdir = (workdir or transcode.default_workdir(output)).resolve()
        probed = transcode.probe(source)
        return transcode.transcode_plan(source, output, probed, chunk_seconds, encoding, workdir)

    def render_plan(self, request: RenderRequest, *, missing_only: bool) -> Plan:
        """The plan that renders a frame range (or, missing_only, only its missing or
        broken frames) and checks it (agent/runtime/workflows/frames.py)."""
        from jobsmith.agent.runtime.workflows import frames

        if not missing_only:
            return frames.render_plan(request)
        todo = frames.broken_frames(request)
        if not todo:
            raise InputError(
                f"render: every frame of {request.frame_start}-{request.frame_end} in "
                f"{request.output_dir} is there and decodes: nothing to re-render"
            )
        return frames.render_plan(request, todo)

    def run_plan(self, plan: Plan, title: str) -> tuple[str, StepResult]:
        """Submit a plan built here (not read from a file), as one session."""
        from jobsmith.agent.runtime.submission.steps import RunPlan

        return self.one_step(title, RunPlan(plan=plan), origin="plan")

    def judge_plan(self, plan: Plan) -> Judgement:
        """A plan judged whole, as `plan check` does; nothing submitted."""
        return self.executor.judge.plan(plan)

    # --- pipelines -------------------------------------------------------------------

    @cached_property
    def pipelines(self) -> Pipelines:
        """Workflow engines' head jobs launched, resumed and followed (the engines are
        chosen here, the composition root; agent/runtime/workflows/pipelinerun.py uses them)."""
        from jobsmith.adapters.nextflow import NextflowEngine
        from jobsmith.adapters.snakemake import SnakemakeEngine
        from jobsmith.adapters.workflow import EngineKind, WorkflowEngine
        from jobsmith.agent.runtime.session.payloads import PipelineBudgetPayload
        from jobsmith.agent.runtime.workflows.pipelinerun import Pipelines

        def poll(job_ids: list[str]) -> dict[str, JobStatus]:
            return self.status(job_ids, "30d")

        engines: dict[EngineKind, WorkflowEngine] = {
            EngineKind.NEXTFLOW: NextflowEngine(),
            EngineKind.SNAKEMAKE: SnakemakeEngine(),
        }

        def tell(session_id: str, said: PipelineBudgetPayload) -> None:
            self.news.add("pipeline_budget", session_id=session_id, **said.model_dump())

        return Pipelines(self.executor, self.store, self.transport, poll, engines, tell)

    def pipeline_status(self, session_id: str | None) -> PipelineStatusDocument:
        """A pipeline's status (default: the newest), after reading what its engine
        wrote since the last look."""
        (doc,) = self.pipeline_statuses([session_id or self.pipelines.newest()])
        return doc

    def pipeline_statuses(self, session_ids: list[str]) -> list[PipelineStatusDocument]:
        """Pipelines' status: one poll for all their head jobs (recorded in their sessions
        first, so each follow knows whether its head job ended), then their records read."""
        from jobsmith.agent.runtime.documents import PipelineStatusDocument

        heads = {sid: self.pipelines.head_job_id(sid) for sid in session_ids}
        ids = [j for j in heads.values() if j]
        statuses = self.status(ids, "30d") if ids else {}
        return [
            PipelineStatusDocument.of(self.pipelines.follow(sid), statuses.get(heads[sid] or ""))
            for sid in session_ids
        ]

    def pipeline_lines(
        self, session_ids: set[str], statuses: Mapping[str, JobStatus]
    ) -> dict[str, str]:
        """Each pipeline session's one line, as its session last recorded it (no reads of
        the engine's records: the at-a-glance status stays one poll)."""
        from jobsmith.agent.runtime.documents import PipelineStatusDocument
        from jobsmith.agent.runtime.workflows.pipelinerun import ORIGIN
        from jobsmith.agent.runtime.workflows.pipelines import pipeline_of

        lines = {}
        for sid in sorted(session_ids):
            if self.store.info(sid).meta.get("origin") != ORIGIN:
                continue
            run = pipeline_of(self.store.read(sid))
            head = statuses.get(run.current.job_id or "")
            lines[sid] = "pipeline " + PipelineStatusDocument.of(run, head).line()
        return lines

    def rerun(
        self, job_id: str, *, failed_only: bool, mem_mb: int | None, time_limit_s: int | None
    ) -> tuple[str, StepResult]:
        """Re-run a job jobsmith submitted (only its failed tasks, for arrays)."""
        from jobsmith.agent.runtime.submission.steps import Rerun

        step = Rerun(
            job_id=job_id,
            failed_only=failed_only,
            mem_mb=mem_mb,
            time_limit_s=time_limit_s,
            reason="by hand",
        )
        record = self.ledger.get(job_id)
        if record is not None and record.session_id is not None:
            # in the job's own session, so the watcher leaves it to the person (and the
            # person is told if the watcher already re-ran it): agent/brains/deciding.py
            from jobsmith.agent.brains.deciding import record_person_rerun

            who = self.environ.get("USER", "?")
            record_person_rerun(self.executor, record.session_id, job_id, step, who)
        return self.one_step(f"rerun {job_id}", step)

    # --- watching ------------------------------------------------------------------------

    @cached_property
    def brain(self) -> Brain:
        """Who decides about failed jobs: the site's or user's `brain:` (default: rules)."""
        from jobsmith.agent.brains.protocol import load_brain
        from jobsmith.agent.brains.rules import RuleBrain

        try:
            spec = self.site.config.brain
        except ConfigError:
            spec = "rules"
        return load_brain(spec, {"rules": RuleBrain, "claude": self._claude_brain})

    def _claude_brain(self) -> Brain:
        """The model brain, with the site's `model:` settings; its key is read when it
        first decides, from the environment or the user's key file."""
        # imported here: neither the brain nor the SDK loads unless `brain: claude`
        from jobsmith.agent.brains.claude import ClaudeBrain
        from jobsmith.agent.brains.model_client import KEY_FILE_NAME

        key_file = self.paths.config_dir / KEY_FILE_NAME
        return ClaudeBrain(self.site.config.model, environ=self.environ, key_file=key_file)

    @cached_property
    def conversation(self) -> Conversation:
        """The model conversations of ask, chat and the wakes, with the site's `model:`
        settings; the key is read when one starts (agent/brains/conversation.py)."""
        # imported here: neither the conversation nor the SDK loads for other commands
        from jobsmith.agent.brains.conversation import Conversation
        from jobsmith.agent.brains.model_client import KEY_FILE_NAME

        return Conversation(
            settings=self.site.config.model,
            environ=self.environ,
            key_file=self.paths.config_dir / KEY_FILE_NAME,
            executor=self.executor,
            recent_jobs=self.recent_job_ids,
        )

    def ask(self, text: str, session_id: str | None) -> AskResult:
        """A person's request answered by the model with jobsmith's tools, in one session
        (agent/brains/conversation.py); ApprovalNeeded if a submission waits for a person."""
        from jobsmith.agent.runtime.submission.approvals import ApprovalNeeded

        try:
            return self.conversation.ask(text, session_id)
        except ApprovalNeeded as err:
            self.news.add("approval_asked", step_id=err.step_id)
            raise

    def wake_brains(self) -> list[WakeOutcome]:
        """Take up the conversations whose jobs ended since their brain last spoke
        (agent/brains/waking.py): the sessions of the last 7 days' submissions."""
        from jobsmith.agent.brains.waking import Waker

        sessions = {r.session_id for r in self.recent_submissions() if r.session_id}
        waker = Waker(self.conversation, self.store, self.folds, self.news.add)
        return waker.wake(sessions)

    def recent_submissions(self) -> list[SubmissionRecord]:
        """What jobsmith submitted for this user in the last 7 days."""
        floor = datetime.now() - timedelta(days=7)
        return [r for r in self.ledger.all() if r.submitted_at >= floor]

    def recent_job_ids(self) -> list[str]:
        """Their job ids (`status` without ids, for ask's tools and the MCP server's)."""
        return [r.job_id for r in self.recent_submissions()]

    def watch_cycle(self, interval_s: float | None = None) -> WatchCycle:
        """One watcher cycle with this app's parts (agent/watcher/cycle.py: run_cycle,
        which says what a cycle does, in order); with the interval, its warnings too."""
        from jobsmith.agent.watcher.cycle import run_cycle

        return run_cycle(self, interval_s)

    def watch_warnings(self, interval_s: float) -> list[str]:
        """What a watcher polling every interval_s may miss (see interval_warning).

        A scheduler that cannot answer gives no warning here: the cycle reports that.
        """
        from jobsmith.agent.watcher.cycle import interval_warning
        from jobsmith.errors import SchedulerError

        try:
            accounting = self.scheduler.has_accounting()
            age = None if accounting else self.scheduler.min_job_age_s()
        except SchedulerError:
            return []
        warning = interval_warning(interval_s, accounting, age)
        return [warning] if warning else []

    @cached_property
    def news(self) -> News:
        """What happened since the user last looked."""
        from jobsmith.agent.watcher.news import News

        return News(self.paths.state_dir)

    def tell(self, change: StateChange) -> None:
        """Note a job that ended, for the next interactive command and the site's webhook."""
        if not change.state.is_terminal:
            return
        self.news.add("job_ended", job_id=change.job_id, state=change.state.value)
        url = self._webhook_url()
        if url:
            from jobsmith.agent.views.output import note
            from jobsmith.agent.watcher.webhook import post

            payload = {"event": "job_ended", **change.model_dump(mode="json")}
            problem = post(url, payload)
            if problem:
                note(f"jobsmith: {problem}")

    def _webhook_url(self) -> str | None:
        try:
            return self.site.config.notify.webhook_url
        except ConfigError:
            return None

    def batched_poll(self, job_ids: list[str], since: datetime) -> dict[str, JobStatus]:
        """One batched status call (a watcher cycle's, `status`'s); a just-ended job's
        stand-in row is filled from the ledger and keeps the state last seen
        (agent/runtime/recovery/standin.py); the answer is kept for whoever asks without polling."""
        from jobsmith.agent.runtime.recovery.standin import settle_stand_ins

        answered = self.scheduler.status(job_ids, since)
        statuses = settle_stand_ins(answered, self.ledger, self.folds, self.last_poll_file.read)
        self.last_poll_file.record(statuses, datetime.now(UTC))
        return statuses

    @cached_property
    def last_poll_file(self) -> LastPollFile:
        """The newest poll's answer, kept for whoever asks without polling (chat, MCP)."""
        from jobsmith.agent.runtime.session.lastpoll import LastPollFile

        return LastPollFile(self.paths.state_dir / "last_poll.json")

    def last_poll(self) -> LastPoll | None:
        """What the newest poll (watcher or status) said, without asking Slurm."""
        return self.last_poll_file.read()

    def stderr_tail(self, job_id: str) -> list[str]:
        """The end of a job's stderr for a diagnosis, bounded in bytes however big it is.

        It raises when the file cannot be read: diagnose_record makes that a note.
        """
        from jobsmith.agent.runtime.logs import read_log

        return read_log(self, job_id, "stderr", 40, max_bytes=1 << 20).lines

    def diagnose(self, job_id: str) -> list[Diagnosis]:
        """Verdict, evidence, efficiency and remedy for a job or each failed task."""
        from jobsmith.agent.diagnosis.job import diagnose_job

        try:
            site = self.site.config
        except ConfigError:
            site = None  # diagnosis needs no site; only the remedy's caps come from it
        return diagnose_job(self.scheduler, site, self.stderr_tail, job_id)

    def run_report(self, session_id: str) -> RunReport:
        """A session's run report (agent/views/report.py): its jobs from one poll (one
        accounting query for all of them), each failed task diagnosed from that poll's
        record and its stderr, as `diagnose` does, without asking Slurm again per job."""
        from jobsmith.agent.diagnosis.job import NO_ACCOUNTING_NOTE, diagnose_record
        from jobsmith.agent.runtime.session.store import SessionNotFound
        from jobsmith.agent.views.report import build_report, failed_records, session_job_ids

        try:
            info = self.store.info(session_id)
        except SessionNotFound as err:
            raise SessionNotFound(session_id, "`jobsmith sessions list` lists them") from err
        events = self.store.read(session_id)
        ids = session_job_ids(events)
        statuses = self.status(ids, "30d") if ids else {}
        failed = failed_records(statuses)
        try:
            site = self.site.config
        except ConfigError:
            site = None  # as for diagnose: only the remedy's caps come from the site
        extra = () if not failed or self.scheduler.has_accounting() else (NO_ACCOUNTING_NOTE,)
        diagnoses = [diagnose_record(r, site, self.stderr_tail, why, extra) for r, why in failed]
        return build_report(info, events, statuses, diagnoses, datetime.now())

    def watch_lock(self, interval_s: float) -> WatchLock:
        """The user's one-watcher lock, stale after three missed cycles."""
        from jobsmith.agent.watcher.lock import WatchLock

        return WatchLock(self.paths.state_dir / "watch.lock", stale_after_s=3 * interval_s + 60)

    # --- following jobs ------------------------------------------------------------

    def status(self, job_ids: list[str], since: str) -> dict[str, JobStatus]:
        """Status of the given jobs, or of every job jobsmith submitted within `since`.

        Jobs that ended are also recorded in the sessions that submitted them.
        """
        from jobsmith.agent.runtime.session.jobstate import record_job_states
        from jobsmith.agent.runtime.session.unseen import with_recorded_ends

        window = parse_window(since)
        floor = datetime.now() - window
        if not job_ids:
            job_ids = [r.job_id for r in self.ledger.all() if r.submitted_at >= floor]
        known = [r.submitted_at for j in job_ids if (r := self.ledger.get(j)) is not None]
        since_dt = min([floor, *(t - timedelta(minutes=5) for t in known)])
        statuses = with_recorded_ends(self.folds, self.ledger, self.batched_poll(job_ids, since_dt))
        record_job_states(self.store, self.ledger, statuses, self.tell, self.folds)
        return statuses

    def glance_facts(self, statuses: Mapping[str, JobStatus], since: str) -> GlanceFacts:
        """What the at-a-glance status shows besides the poll: the ledger's records and
        the sessions' titles, plans, pipelines and recorded verdicts (no Slurm call)."""
        from jobsmith.agent.runtime.glancefacts import glance_facts

        return glance_facts(self.store, self.folds, self.ledger, statuses, since)

    def wait(self, job_ids: list[str], since: str, timeout_s: float) -> dict[str, JobStatus]:
        """Block until the jobs end, showing progress on stderr.

        A job id jobsmith did not submit that Slurm still shows nowhere once the
        controller's MinJobAge has passed is an error naming it (JobNotFound, exit 6): an
        id Slurm never had showed NOT_VISIBLE for the whole wait (an hour by default).
        """
        import time

        from jobsmith.adapters.states import JobState
        from jobsmith.agent.views.output import note
        from jobsmith.agent.watcher.waiting import wait_for
        from jobsmith.errors import JobNotFound

        if not job_ids:
            raise InputError("wait: name at least one Slurm job id")
        started = time.monotonic()
        unseen_limit: list[float] = []  # MinJobAge, read once and only when needed

        def poll() -> dict[str, JobStatus]:
            statuses = self.status(job_ids, since)
            unseen = [
                j
                for j, st in statuses.items()
                if st.state is JobState.NOT_VISIBLE and self.ledger.get(j) is None
            ]
            if unseen and not unseen_limit:
                unseen_limit.append(float(self.scheduler.min_job_age_s() or 300))
            if unseen and time.monotonic() - started > unseen_limit[0]:
                raise JobNotFound(
                    f"job {', '.join(unseen)}: Slurm has shown no such job for "
                    f"{unseen_limit[0]:.0f}s (its MinJobAge), in the queue or in accounting "
                    f"since {since}: check the id"
                )
            return statuses

        final = wait_for(poll, timeout_s=timeout_s, progress=note)
        return dict(final)

    def engine_task_log(self, job_id: str) -> str | None:
        """A pipeline task's log file, as its engine's records named it (logs.LogSources)."""
        return self.pipelines.task_log(job_id)

    def logs(self, job_id: str, which: str, tail_lines: int) -> LogView:
        """The end of a job's stdout or stderr, read where the job wrote it."""
        from jobsmith.agent.runtime.logs import read_log

        return read_log(self, job_id, which, tail_lines)

    def control(self, action: str, job_ids: list[str]) -> ControlResult:
        """cancel / hold / release, through the executor (a foreign job may need approval)."""
        from jobsmith.agent.runtime.documents import ControlResult
        from jobsmith.agent.runtime.submission.steps import STEP_ADAPTER

        step = STEP_ADAPTER.validate_python({"action": action, "job_ids": job_ids})
        self.one_step(f"{action} {' '.join(job_ids)}", step)
        return ControlResult(action=action, job_ids=job_ids)


def build_app(site_file: Path | None, environ: Mapping[str, str] | None = None) -> App:
    """The CLI's object graph for this user and environment."""
    env = dict(os.environ if environ is None else environ)
    # cron, runuser and some batch systems leave USER or HOME unset; site files expand
    # them, so take them from the password database rather than fail
    if not env.get("USER"):
        import getpass

        env["USER"] = env.get("LOGNAME") or getpass.getuser()
    env["HOME"] = env.get("HOME") or os.path.expanduser("~")
    return App(paths=UserDirs.for_user(env), environ=env, site_file=site_file)


_WINDOW = re.compile(r"^(?P<n>[0-9]{1,9})(?P<unit>[dhm])$")


def parse_window(text: str, option: str = "--since") -> timedelta:
    """'7d', '12h', '90m' as a timedelta; anything else is a clear error naming option."""
    match = _WINDOW.match(text.strip())
    if match is None:
        raise InputError(f"{option} {text!r}: expected a number and d, h or m, e.g. 7d, 12h, 90m")
    unit = {"d": "days", "h": "hours", "m": "minutes"}[match.group("unit")]
    n = int(match.group("n"))
    # bounded so that now - window stays a date (and sacct's -S a sane one)
    if n > {"days": 3650, "hours": 87600, "minutes": 5256000}[unit]:
        raise InputError(f"{option} {text!r}: at most 10 years (3650d)")
    return timedelta(**{unit: n})

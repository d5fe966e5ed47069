"""Launching, resuming and following pipelines (agent/runtime/workflows/pipelines.py says what a
pipeline session holds).

`Pipelines` is given what it uses (the executor, the store, the transport the records
are read through, the poll, the engines by kind, the news); `Pipelines.of` takes them
from the composition root's parts, with the engines jobsmith ships. It reaches nothing
else. Following reads each record of the current attempt from the offset the
session recorded, so a watcher cycle costs one small read per record, and a record that
has not grown costs no event.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from jobsmith.adapters.scheduler import JobStatus
from jobsmith.adapters.states import JobState
from jobsmith.adapters.transport import Transport
from jobsmith.adapters.workflow import (
    EngineKind,
    EngineSite,
    LaunchRequest,
    RecordFile,
    WorkflowEngine,
)
from jobsmith.agent.runtime.documents import PipelineStatusDocument
from jobsmith.agent.runtime.session.events import EventKind
from jobsmith.agent.runtime.session.payloads import (
    PipelineBudgetPayload,
    PipelinePayload,
    intent_payload,
)
from jobsmith.agent.runtime.session.session_log import SessionLog
from jobsmith.agent.runtime.session.store import SessionStore
from jobsmith.agent.runtime.submission.executor import Executor
from jobsmith.agent.runtime.submission.request.jobs import JobRequest
from jobsmith.agent.runtime.submission.steps import Cancel, Hold, StepResult, Submit
from jobsmith.agent.runtime.workflows import pipelines as pl
from jobsmith.errors import InputError, NotFound, SchedulerError
from jobsmith.files import usable_check_argv

#: what the session's metadata says a pipeline session is
ORIGIN = "pipeline"


@dataclass(frozen=True)
class Launched:
    """A pipeline launched (or resumed): its session, the head job's step, and notes."""

    session_id: str
    result: StepResult
    notes: tuple[str, ...]


class Told(Protocol):
    """Whoever is told of a pipeline's budget warning or stop (agent/watcher/news.py)."""

    def add(self, kind: str, **fields: object) -> None: ...


class PipelineParts(Protocol):
    """What the pipelines are built from (the composition root, agent/app.py)."""

    @property
    def executor(self) -> Executor: ...
    @property
    def store(self) -> SessionStore: ...
    @property
    def transport(self) -> Transport: ...
    @property
    def news(self) -> Told: ...


def shipped_engines() -> dict[EngineKind, WorkflowEngine]:
    """The workflow engines jobsmith ships, by kind (adapters/nextflow, adapters/snakemake)."""
    from jobsmith.adapters.nextflow import NextflowEngine
    from jobsmith.adapters.snakemake import SnakemakeEngine

    return {EngineKind.NEXTFLOW: NextflowEngine(), EngineKind.SNAKEMAKE: SnakemakeEngine()}


@dataclass
class Pipelines:
    """Pipelines launched, resumed and followed (module docstring)."""

    executor: Executor
    store: SessionStore
    transport: Transport
    poll: Callable[[list[str]], Mapping[str, JobStatus]]
    engines: Mapping[EngineKind, WorkflowEngine]
    #: who is told of a budget warning or stop (the news), if anyone
    tell: Callable[[str, PipelineBudgetPayload], None] | None = None

    @classmethod
    def of(
        cls, parts: PipelineParts, poll: Callable[[list[str]], Mapping[str, JobStatus]]
    ) -> Pipelines:
        """The pipelines with parts, the engines jobsmith ships, and poll (a session's
        poll: agent/watcher/polling.py, session_poll); a budget warning or stop is news."""

        def tell(session_id: str, said: PipelineBudgetPayload) -> None:
            parts.news.add("pipeline_budget", session_id=session_id, **said.model_dump())

        engines = shipped_engines()
        return cls(parts.executor, parts.store, parts.transport, poll, engines, tell)

    def run(
        self,
        request: LaunchRequest,
        resources: JobRequest,
        *,
        partition: str | None,
        head_partition: str | None,
        max_tasks: int | None,
    ) -> Launched:
        """Launch the engine's head job in a new session (policy and approvals as any
        submission); the engine is configured with the site's limits."""
        site = self.executor.site
        pl.check_paths(request, site, self.executor.cwd, self.executor.files)
        self._check_inputs(request)
        self._check_engine(request.engine)
        sizing = pl.size_queue(site, max_tasks)
        engine_site = pl.engine_site(
            site, partition=partition, max_tasks=sizing.max_tasks, head_partition=head_partition
        )
        title = f"pipeline {request.engine} {request.pipeline}"
        session_id = self.store.create({"title": title, "origin": ORIGIN})
        notes = (sizing.note,) if sizing.note else ()
        for note in notes:
            SessionLog(self.store, session_id).append(EventKind.NOTE, {"note": note}, None)
        result = self._launch(session_id, request, engine_site, 1, resources)
        return Launched(session_id, result, notes)

    def resume(self, session_id: str) -> Launched:
        """Launch the engine again in the same launch directory with its resume flags
        (Nextflow's -resume, Snakemake's --rerun-incomplete): what finished is not redone."""
        run = pl.pipeline_of(self.store.read(session_id))
        job_id = run.current.job_id
        status = self.poll([job_id]).get(job_id) if job_id is not None else None
        return self._resume(run, status)

    def _resume(self, run: pl.PipelineRun, head: JobStatus | None) -> Launched:
        """resume() once the session is folded and its head job polled."""
        current, session_id = run.current, run.session_id
        if head is not None and not head.state.is_terminal:
            raise InputError(
                f"pipeline {session_id}: its head job {current.job_id} is "
                f"{head.state.value}; resume it after it ends (or `jobsmith cancel "
                f"{current.job_id}` first)"
            )
        # before anything of the last attempt is touched: its launch directory may have
        # gone or been replaced since, and the engine may have left the PATH
        self._check_inputs(run.request)
        self._check_engine(run.request.engine)
        if head is not None:
            current.state = head.state  # as the poll just recorded it in the session
        run = self._follow(run)  # the ended attempt's last words first
        notes = self._cancel_leftovers(session_id, run)
        resources = self._head_resources(session_id, current.step_id)
        result = self._launch(session_id, run.request, run.site, current.number + 1, resources)
        return Launched(session_id, result, notes)

    def _cancel_leftovers(self, session_id: str, run: pl.PipelineRun) -> tuple[str, ...]:
        """Cancel the tasks an ended head job left behind (a head job killed hard cannot
        cancel what its engine submitted): the resumed engine submits them again, and
        two copies would write the same outputs."""
        left = sorted(t.native_id for t in run.unfinished() if t.native_id)
        if not left:
            return ()
        active = [j for j, s in self.poll(left).items() if not s.state.is_terminal]
        if not active:
            return ()
        self.executor.run(session_id, Cancel(job_ids=active))
        return (f"cancelled {len(active)} task(s) the ended head job left: {', '.join(active)}",)

    def resume_if_unfinished(self, session_id: str) -> Launched | None:
        """Resume the pipeline if its current head job ended without finishing the run
        (`sessions resume`); None if it completed, still runs, or waits for a person."""
        run = pl.pipeline_of(self.store.read(session_id))
        job_id = run.current.job_id
        if job_id is None:
            return None  # not submitted: held for a person, or resume_session's to settle
        status = self.poll([job_id]).get(job_id)
        if status is None or not status.state.is_terminal or status.state is JobState.COMPLETED:
            return None
        return self._resume(run, status)

    def follow(self, session_id: str) -> pl.PipelineRun:
        """Read what the current attempt's records added since the last read, record it,
        and return the run as it now stands.

        Whether the head job has ended is what the session recorded (the watcher's or
        status's poll, which the caller ran first): no poll of its own, so a watcher cycle
        stays one batched poll however many pipelines it follows.
        """
        return self._follow(pl.pipeline_of(self.store.read(session_id)))

    def _follow(self, run: pl.PipelineRun) -> pl.PipelineRun:
        """follow() on a run already folded; what it appends is folded in too, so a cycle
        reads the session once (benchmarks/README.md: the fold is a cycle's cost)."""
        current = run.current
        if current.job_id is None or current.number in run.finished:
            return run
        ended = current.ended
        engine = self.engines[run.request.engine]
        log = SessionLog(self.store, run.session_id)
        for record in engine.records(run.request, attempt=current.number):
            chunk = self._read(run, record)
            if chunk is None or (not chunk and not ended):
                continue
            data = pl.progress(engine, run, record, chunk, final=ended)
            log.append(EventKind.PIPELINE_PROGRESS, data.model_dump(mode="json"), None)
            pl.fold_progress(run, data)
        return run

    def follow_all(self) -> list[str]:
        """Follow every pipeline whose current attempt still runs (the watcher's cycle);
        the sessions read. One pipeline's trouble is a note, never the cycle's end."""
        followed = []
        for info in self.store.list_sessions():
            if info.meta.get("origin") != ORIGIN or info.closed:
                continue
            try:
                run = pl.pipeline_of(self.store.read(info.id))
                if run.current.number in run.finished:
                    continue
                self._watch_budgets(info.id, self._follow(run))
                followed.append(info.id)
            except (SchedulerError, NotFound):
                continue  # the next cycle tries again
        return followed

    def task_log(self, job_id: str) -> str | None:
        """The log of the pipeline task that ran as Slurm job job_id, from the newest
        pipeline that names it (relative paths are the launch directory's)."""
        for session_id in reversed(self.sessions()):
            run = pl.pipeline_of(self.store.read(session_id))
            task = run.jobs.get(job_id)
            if task is not None and task.log:
                if task.log.startswith("/"):
                    return task.log
                return f"{run.request.launch_dir.rstrip('/')}/{task.log}"
        return None

    def head_job_id(self, session_id: str) -> str | None:
        """The current attempt's head job (None: not submitted, or held for a person)."""
        return pl.pipeline_of(self.store.read(session_id)).current.job_id

    def _watch_budgets(self, session_id: str, run: pl.PipelineRun) -> None:
        """Near a budget, say so once; at it, do what the policy says (module docstring
        of pipelines.py): the engine submits on its own, so this is the only brake."""
        current = run.current
        if current.job_id is None or current.ended:
            return
        cancels = self.executor.site.policy.budgets.pipeline_at_limit == "cancel"
        for use in self.executor.judge.budget_use():
            level = pl.budget_level(use.used, use.limit)
            if level is None:
                continue
            said = (current.number, use.budget, level) in run.budget_said
            if said and (level == "near" or cancels):
                continue  # a warning is given once, a head job cancelled once
            action, job_ids = self._at_limit(session_id, run) if level == "reached" else (None, [])
            if said and not job_ids:
                continue  # held before, and nothing new to hold
            data = PipelineBudgetPayload(
                attempt=current.number,
                budget=use.budget,
                level=level,
                used=use.used,
                limit=use.limit,
                action=action,
                job_ids=job_ids,
            )
            log = SessionLog(self.store, session_id)
            log.append(EventKind.PIPELINE_BUDGET, data.model_dump(mode="json"), None)
            if self.tell is not None:
                self.tell(session_id, data)

    def _at_limit(self, session_id: str, run: pl.PipelineRun) -> tuple[str, list[str]]:
        """The policy's action on a pipeline at a budget: hold its pending tasks (each
        cycle, the ones the engine submitted since), or cancel its head job."""
        action = self.executor.site.policy.budgets.pipeline_at_limit
        head = run.current.job_id
        assert head is not None  # _watch_budgets checked
        if action == "cancel":
            self.executor.run(session_id, Cancel(job_ids=[head]))
            return action, [head]
        pending = [t.native_id for t in run.unfinished() if t.native_id]
        statuses = self.poll(pending) if pending else {}
        to_hold = sorted(
            j
            for j, s in statuses.items()
            if s.state is JobState.PENDING and "held" not in (s.reason or "").lower()
        )
        if to_hold:
            self.executor.run(session_id, Hold(job_ids=to_hold))
        return action, to_hold

    def newest(self) -> str:
        """The newest pipeline session."""
        ids = [i.id for i in self.store.list_sessions() if i.meta.get("origin") == ORIGIN]
        if not ids:
            raise NotFound("no pipeline has run yet (`jobsmith pipeline run` starts one)")
        return ids[-1]

    def sessions(self) -> list[str]:
        """Every pipeline session, oldest first."""
        return [i.id for i in self.store.list_sessions() if i.meta.get("origin") == ORIGIN]

    def _check_inputs(self, request: LaunchRequest) -> None:
        """InputError unless every path the request names is what the head job needs
        (pl.input_checks), asked as the engine is, through the transport on the host that
        submits (this one, or the login node over SSH): a FIFO, a file or an unwritable
        place as --launch-dir, or an unreadable or empty Snakefile or params file, was
        found only by the head job after its wait in the queue (issue 24)."""
        checks = pl.input_checks(request)
        argv = usable_check_argv([(kind, path) for _, kind, path in checks])
        said = self.transport.run(argv, timeout=pl.ENGINE_CHECK_TIMEOUT_S)
        refused = pl.inputs_refused(checks, said)
        if refused is not None:
            raise refused

    def _check_engine(self, engine: EngineKind) -> None:
        """EngineNotFound unless engine is on the PATH its head job will have, looked up
        on the submitting host through the transport (pl.engine_check_argv): the head job
        failed with 127 after its wait in the queue (issue 24)."""
        argv = pl.engine_check_argv(engine, self.executor.site.env_setup)
        said = self.transport.run(argv, timeout=pl.ENGINE_CHECK_TIMEOUT_S)
        missing = pl.engine_missing(engine, said)
        if missing is not None:
            raise missing

    def _launch(
        self,
        session_id: str,
        request: LaunchRequest,
        site: EngineSite,
        attempt: int,
        resources: JobRequest,
    ) -> StepResult:
        engine = self.engines[request.engine]
        # the files the head job writes under the launch directory are the template's to
        # check (pipeline_head's `inside: launch_dir`), at submission and again at approval
        step = Submit(job=pl.head_job(engine, site, request, attempt, resources))
        data = PipelinePayload(request=request, site=site, attempt=attempt, step_id=step.id)
        SessionLog(self.store, session_id).append(
            EventKind.PIPELINE, data.model_dump(mode="json"), step.id
        )
        return self.executor.run(session_id, step)

    def _head_resources(self, session_id: str, step_id: str) -> JobRequest:
        """The resources the last attempt's head job asked for (its submit step)."""
        for event in self.store.read(session_id):
            if event.kind is EventKind.INTENT and event.step_id == step_id:
                step = intent_payload(event).step or {}
                job = step.get("job")
                if isinstance(job, dict):
                    return JobRequest.model_validate(job)
        raise NotFound(f"session {session_id}: no head job recorded for step {step_id}")

    def _read(self, run: pl.PipelineRun, record: RecordFile) -> str | None:
        """The record from the recorded offset on; None while the engine has not made it."""
        path = f"{run.request.launch_dir.rstrip('/')}/{record.path}"
        offset = run.offsets.get(pl.record_key(run.current.number, record), 0)
        res = self.transport.run(pl.read_command(path, offset), timeout=30)
        if res.returncode == 3:
            return None
        if res.returncode != 0:
            raise SchedulerError(f"cannot read {path}: {res.stderr.strip() or 'unreadable'}")
        return res.stdout


def pipeline_statuses(
    pipelines: Pipelines,
    session_ids: list[str],
    poll: Callable[[list[str]], Mapping[str, JobStatus]],
) -> list[PipelineStatusDocument]:
    """Pipelines' status: one poll for all their head jobs (recorded in their sessions
    first, so each follow knows whether its head job ended), then their records read."""
    heads = {sid: pipelines.head_job_id(sid) for sid in session_ids}
    statuses = poll([j for j in heads.values() if j])
    return [
        PipelineStatusDocument.of(pipelines.follow(sid), statuses.get(heads[sid] or ""))
        for sid in session_ids
    ]


def pipeline_status(
    pipelines: Pipelines,
    session_id: str | None,
    poll: Callable[[list[str]], Mapping[str, JobStatus]],
) -> PipelineStatusDocument:
    """A pipeline's status (default: the newest), after reading what its engine
    wrote since the last look."""
    (doc,) = pipeline_statuses(pipelines, [session_id or pipelines.newest()], poll)
    return doc


def pipeline_lines(
    store: SessionStore, session_ids: set[str], statuses: Mapping[str, JobStatus]
) -> dict[str, str]:
    """Each pipeline session's one line, as its session last recorded it (no reads of
    the engine's records: the at-a-glance status stays one poll)."""
    lines = {}
    for sid in sorted(session_ids):
        if store.info(sid).meta.get("origin") != ORIGIN:
            continue
        run = pl.pipeline_of(store.read(sid))
        head = statuses.get(run.current.job_id or "")
        lines[sid] = "pipeline " + PipelineStatusDocument.of(run, head).line()
    return lines

"""A session's run report as a document: what ran, what it used, what failed, what it cost.

`build_report` is a pure function of what the App gathered: the session's events, one
poll's JobStatus per job (accounting records, one per array task) and the diagnoses of
the failed tasks. The page (agent/views/report_html.py) and the terminal summary
(agent/views/report_text.py) render from the `RunReport` it returns; `--json` prints its
`ReportSummary`.

Cost is what the tasks used, not what they asked for: core-hours are allocated CPUs x
elapsed time, GPU-hours the GPUs in AllocTRES (`gres/gpu=N`) x elapsed time. A running
task counts until `now`, a pending one nothing.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from functools import partial
from typing import TYPE_CHECKING, Protocol

from pydantic import BaseModel, ConfigDict, Field

from jobsmith.adapters.records import JobRecord
from jobsmith.adapters.scheduler import JobStatus, task_range_size
from jobsmith.adapters.states import JobState
from jobsmith.agent.diagnosis.job import SiteSource, site_if_any
from jobsmith.agent.diagnosis.table import Diagnosis, efficiency
from jobsmith.agent.runtime.logs import LogSources
from jobsmith.agent.runtime.requeues import record_phrase
from jobsmith.agent.runtime.session.events import Event, EventKind, SessionInfo
from jobsmith.agent.runtime.session.payloads import (
    PipelineProgressPayload,
    intent_payload,
    payload,
    result_payload,
)
from jobsmith.agent.runtime.session.readmodel import TokenTotals, fold_events
from jobsmith.agent.runtime.workflows.contact import ContactSheet
from jobsmith.agent.runtime.workflows.progress import WorkProgress
from jobsmith.agent.views.nodes import report_notes

if TYPE_CHECKING:
    from jobsmith.agent.runtime.blocklist.store import BlockedNode, NodeBlocklist
    from jobsmith.agent.runtime.session.store import SessionStore

#: at most this many failed tasks are diagnosed (each reads its stderr); the rest are counted
MAX_DIAGNOSED = 50
_HOUR = 3600.0


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ReportJob(_Model):
    """One Slurm job of the session (an array counts once here)."""

    job_id: str = Field(description="Slurm's job id (an array's id for arrays)")
    name: str | None = Field(description="the job name, as accounting has it")
    state: str = Field(description="overall state (arrays: summarised over tasks)")
    origin: str = Field(description="submitted, rerun, adopted or engine (a pipeline's task)")
    rerun_of: str | None = Field(description="the job this one re-runs, if it is a re-run")
    task_counts: dict[str, int] = Field(description="an array's tasks by state")
    progress: WorkProgress | None = Field(
        None, description="a render's frames or a transcode's chunks done of total"
    )


class ReportTask(_Model):
    """One job or array task: when it queued and ran, and what it used of what it asked."""

    job_id: str = Field(description="Slurm's display id: '331' or '333_2'")
    session_job: str = Field(description="the session's job it belongs to (an array's id)")
    name: str | None = Field(description="job name")
    state: str = Field(description="its state")
    tasks: int = Field(description="tasks it stands for (a pending array range: its size)")
    exit_code: int | None = Field(description="exit status of the batch script")
    signal: int | None = Field(description="signal that ended it")
    submit_time: datetime | None = Field(description="when Slurm accepted it")
    start_time: datetime | None = Field(description="when it started (None: not yet)")
    end_time: datetime | None = Field(description="when it ended (None: not yet)")
    elapsed_s: int | None = Field(description="wall time used, seconds (running: so far)")
    alloc_cpus: int | None = Field(description="CPUs allocated")
    gpus: int = Field(description="GPUs allocated (AllocTRES gres/gpu)")
    total_cpu_s: float | None = Field(description="CPU time used (TotalCPU), seconds")
    cpu_efficiency: float | None = Field(description="TotalCPU / (elapsed x CPUs)")
    max_rss_bytes: int | None = Field(description="peak resident memory (None: unknown)")
    req_mem_bytes: int | None = Field(description="memory requested")
    mem_efficiency: float | None = Field(description="MaxRSS / requested")
    core_hours: float = Field(description="CPUs x elapsed, hours")
    gpu_hours: float = Field(description="GPUs x elapsed, hours")
    verdict: str | None = Field(description="the diagnosis of a failed task, if it has one")
    restarts: int = Field(0, description="how many times Slurm requeued it (restart count)")
    requeued: str | None = Field(
        None, description="what requeued it, in words: 'preempted 2×, resumed' (None: never)"
    )


class ReportRerun(_Model):
    """A re-run the session made: of which job, as which, and why."""

    at: datetime = Field(description="when its intent was recorded")
    rerun_of: str = Field(description="the job re-run")
    job_id: str | None = Field(description="the re-run's job (None: not submitted)")
    outcome: str | None = Field(description="the step's outcome (done, refused, …)")
    reason: str | None = Field(description="why, as the brain or person said")
    mem_mb: int | None = Field(description="new memory, if changed")
    time_limit_s: int | None = Field(description="new wall time, if changed")


class ReportDecision(_Model):
    """A brain's or person's decision about a failed job."""

    at: datetime = Field(description="when it was recorded")
    job_id: str = Field(description="the failed job")
    brain: str = Field(description="who decided (rules, a model, a person)")
    action: str = Field(description="rerun, report, hold or error")
    reason: str = Field(description="one line: why")


class RunReport(_Model):
    """Everything the run report shows about one session."""

    session_id: str = Field(description="the session")
    title: str | None = Field(description="the session's title")
    created: datetime = Field(description="when the session was opened")
    generated_at: datetime = Field(description="when this report was made")
    jobs: tuple[ReportJob, ...] = Field(description="the session's Slurm jobs, in order")
    tasks: tuple[ReportTask, ...] = Field(description="each job or array task")
    task_counts: dict[str, int] = Field(description="tasks by state, over all jobs")
    failures: tuple[Diagnosis, ...] = Field(description="the failed tasks' diagnoses")
    decisions: tuple[ReportDecision, ...] = Field(description="decisions about failed jobs")
    reruns: tuple[ReportRerun, ...] = Field(description="what was re-run")
    core_hours: float = Field(description="CPUs x elapsed over all tasks")
    gpu_hours: float = Field(description="GPUs x elapsed over all tasks")
    notes: tuple[str, ...] = Field(description="what the report could not show, and why")
    usage: TokenTotals = Field(
        default_factory=TokenTotals, description="the session's model calls and their tokens"
    )
    contact_sheets: tuple[ContactSheet, ...] = Field(
        (), description="thumbnails of a render's frames or a transcode's key frames"
    )

    def summary(self, path: str) -> ReportSummary:
        """The summary `report` prints (and `--json`), naming the page written at path."""
        return ReportSummary(
            session_id=self.session_id,
            title=self.title,
            path=path,
            jobs=len(self.jobs),
            tasks=sum(t.tasks for t in self.tasks),
            task_counts=self.task_counts,
            failures=tuple(
                ReportFailure(job_id=d.job_id, verdict=d.verdict.value, remedy=d.remedy)
                for d in self.failures
            ),
            reruns=len(self.reruns),
            core_hours=self.core_hours,
            gpu_hours=self.gpu_hours,
            notes=self.notes,
            usage=self.usage,
            progress={j.job_id: j.progress.line() for j in self.jobs if j.progress},
            thumbnails=sum(s.shown for s in self.contact_sheets),
        )


class ReportFailure(_Model):
    """A failed task in a line: its verdict and remedy."""

    job_id: str = Field(description="the failed job or task")
    verdict: str = Field(description="the diagnosis' verdict")
    remedy: str = Field(description="what to do next")


class ReportSummary(_Model):
    """`jobsmith report --json`: the page's path and the session in figures."""

    session_id: str = Field(description="the session")
    title: str | None = Field(description="the session's title")
    path: str = Field(description="the HTML page written")
    jobs: int = Field(description="Slurm jobs (an array counts once)")
    tasks: int = Field(description="jobs and array tasks")
    task_counts: dict[str, int] = Field(description="tasks by state")
    failures: tuple[ReportFailure, ...] = Field(description="the diagnosed failures")
    reruns: int = Field(description="re-runs submitted or tried")
    core_hours: float = Field(description="CPUs x elapsed over all tasks")
    gpu_hours: float = Field(description="GPUs x elapsed over all tasks")
    notes: tuple[str, ...] = Field(description="what the report could not show, and why")
    usage: TokenTotals = Field(
        default_factory=TokenTotals, description="the session's model calls and their tokens"
    )
    progress: dict[str, str] = Field(
        default_factory=dict,
        description="job id -> a render's frames or a transcode's chunks done, in a line",
    )
    workloads: dict[str, str] = Field(
        default_factory=dict,
        description="step id -> a workload fed in parts, in a line ('40 tasks: 35 done, "
        "5 running, 0 not yet submitted')",
    )
    thumbnails: int = Field(0, description="thumbnails on the page's contact sheet")


# --- what the session's log says ---------------------------------------------------------


def session_job_ids(events: Iterable[Event]) -> list[str]:
    """The Slurm jobs a session submitted, adopted or saw (a pipeline engine's tasks), in
    the order it first recorded them."""
    return list(_job_origins(events))


def _job_origins(events: Iterable[Event]) -> dict[str, str]:
    origins: dict[str, str] = {}
    for event in events:
        if event.kind is EventKind.RESULT:
            result = result_payload(event)
            if result.job_id and (result.submitted or event.data.get("adopted") is True):
                origin = "adopted" if not result.submitted else "submitted"
                origins.setdefault(result.job_id, origin)
        elif event.kind is EventKind.JOB_STATE:
            job = event.data.get("job_id")
            if isinstance(job, str):
                origins.setdefault(job, "submitted")
        else:
            data = payload(event)
            if isinstance(data, PipelineProgressPayload):
                for task in data.tasks:
                    if task.native_id:
                        origins.setdefault(task.native_id, "engine")
    return origins


def reruns_of(events: Sequence[Event]) -> list[ReportRerun]:
    """Each re-run step of the session: its intent (what, why) and its result (as what)."""
    results = {e.step_id: result_payload(e) for e in events if e.kind is EventKind.RESULT}
    found = []
    for event in events:
        intent = intent_payload(event) if event.kind is EventKind.INTENT else None
        if intent is None or not intent.rerun_of:
            continue
        step = intent.step or {}
        result = results.get(event.step_id)
        found.append(
            ReportRerun(
                at=event.at,
                rerun_of=intent.rerun_of,
                job_id=result.job_id if result and result.submitted else None,
                outcome=result.outcome if result else None,
                reason=_text(step.get("reason")),
                mem_mb=_int(step.get("mem_mb")),
                time_limit_s=_int(step.get("time_limit_s")),
            )
        )
    return found


def decisions_of(events: Iterable[Event]) -> list[ReportDecision]:
    """The session's decisions about failed jobs (read leniently: logs outlive releases)."""
    found = []
    for event in events:
        job = event.data.get("job_id")
        if event.kind is not EventKind.DECISION or not isinstance(job, str):
            continue
        found.append(
            ReportDecision(
                at=event.at,
                job_id=job,
                brain=_text(event.data.get("brain")) or "?",
                action=_text(event.data.get("action")) or "?",
                reason=_text(event.data.get("reason")) or "",
            )
        )
    return found


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


# --- what accounting says ------------------------------------------------------------------


def records_of(status: JobStatus) -> list[JobRecord]:
    """A job's own record, or its array's task records."""
    if status.tasks:
        return list(status.tasks)
    return [status.record] if status.record is not None else []


def failed_records(
    statuses: Mapping[str, JobStatus], limit: int = MAX_DIAGNOSED
) -> list[tuple[JobRecord, str | None]]:
    """The failed jobs and tasks to diagnose (at most limit), each with its job's reason."""
    failed = [
        (rec, status.reason)
        for status in statuses.values()
        for rec in records_of(status)
        if rec.state.is_failure
    ]
    return failed[:limit]


def gpus_of(alloc_tres: str | None) -> int:
    """GPUs in an AllocTRES string: `gres/gpu=N` (typed entries `gres/gpu:a100=N` repeat
    that total, so they count only where it is missing)."""
    total, typed = None, 0
    for item in (alloc_tres or "").split(","):
        key, _, value = item.partition("=")
        if not value.isdigit():
            continue
        if key == "gres/gpu":
            total = int(value)
        elif key.startswith("gres/gpu:"):
            typed += int(value)
    return total if total is not None else typed


def _local(when: datetime | None) -> datetime | None:
    """A time as the local wall clock, without zone: sacct -P gives those, its JSON gives
    UTC; one report compares and draws them on one axis."""
    if when is None or when.tzinfo is None:
        return when
    return when.astimezone().replace(tzinfo=None)


def _elapsed(rec: JobRecord, now: datetime) -> int | None:
    """Wall time used: accounting's, else (the controller's record of a running task) the
    time since it started."""
    if rec.elapsed_s is not None:
        return rec.elapsed_s
    if rec.start_time is not None:
        end = rec.end_time or now
        return max(0, int((end - rec.start_time).total_seconds()))
    return None


def task_row(rec: JobRecord, session_job: str, now: datetime, verdict: str | None) -> ReportTask:
    """One task's row: its times, its use against its request, its hours."""
    times = {k: _local(getattr(rec, k)) for k in ("submit_time", "start_time", "end_time")}
    rec = rec.model_copy(update=times)
    elapsed = _elapsed(rec, now)
    hours = (elapsed or 0) / _HOUR
    gpus = gpus_of(rec.alloc_tres)
    eff = efficiency(rec.model_copy(update={"elapsed_s": elapsed}))
    return ReportTask(
        job_id=rec.job_id,
        session_job=session_job,
        name=rec.name,
        state=rec.state.value,
        tasks=task_range_size(rec),
        exit_code=rec.exit_code,
        signal=rec.signal,
        submit_time=rec.submit_time,
        start_time=rec.start_time,
        end_time=rec.end_time,
        elapsed_s=elapsed,
        alloc_cpus=rec.alloc_cpus,
        gpus=gpus,
        total_cpu_s=rec.total_cpu_s,
        cpu_efficiency=eff.cpu_efficiency,
        max_rss_bytes=rec.max_rss_bytes,
        req_mem_bytes=rec.req_mem_bytes,
        mem_efficiency=eff.mem_efficiency,
        core_hours=round((rec.alloc_cpus or 0) * hours, 6),
        gpu_hours=round(gpus * hours, 6),
        verdict=verdict,
        restarts=len(rec.requeues),
        requeued=record_phrase(rec),
    )


# --- the report ------------------------------------------------------------------------------


def build_report(
    session: SessionInfo,
    events: Sequence[Event],
    statuses: Mapping[str, JobStatus],
    diagnoses: Sequence[Diagnosis],
    now: datetime,
    progress: Mapping[str, WorkProgress] | None = None,
    blocked: Sequence[BlockedNode] = (),
    sheets: Sequence[ContactSheet] = (),
) -> RunReport:
    """The run report of a session from its events, one poll of its jobs and the failed
    tasks' diagnoses (now: the poll's time, which running tasks count up to); progress:
    what the jobs' own output said of their frames or chunks; sheets: the thumbnails its
    jobs made."""
    now = _local(now) or now
    origins = _job_origins(events)
    reruns = reruns_of(events)
    rerun_of = {r.job_id: r.rerun_of for r in reruns if r.job_id}
    verdicts = {d.job_id: d.verdict.value for d in diagnoses}
    jobs, tasks = [], []
    for job_id, origin in origins.items():
        status = statuses.get(job_id)
        records = records_of(status) if status else []
        rows = [task_row(r, job_id, now, verdicts.get(r.job_id)) for r in records]
        tasks += rows
        jobs.append(
            ReportJob(
                job_id=job_id,
                name=records[0].name if records else None,
                state=status.state.value if status else "NOT_VISIBLE",
                origin="rerun" if job_id in rerun_of else origin,
                rerun_of=rerun_of.get(job_id),
                task_counts=status.task_counts if status else {},
                progress=(progress or {}).get(job_id),
            )
        )
    counts: Counter[str] = Counter()
    for row in tasks:
        counts[row.state] += row.tasks
    return RunReport(
        session_id=session.id,
        title=session.title,
        created=session.created,
        generated_at=now,
        jobs=tuple(jobs),
        tasks=tuple(tasks),
        task_counts=dict(counts),
        failures=tuple(diagnoses),
        decisions=tuple(decisions_of(events)),
        reruns=tuple(reruns),
        core_hours=round(sum(t.core_hours for t in tasks), 6),
        gpu_hours=round(sum(t.gpu_hours for t in tasks), 6),
        notes=tuple(
            _notes(jobs, tasks) + report_notes(blocked, list(origins), kept_off_nodes(events))
        ),
        usage=fold_events(events).tokens,  # the fold's totals, as `sessions show` has them
        contact_sheets=tuple(sheets),
    )


def _notes(jobs: Sequence[ReportJob], tasks: Sequence[ReportTask]) -> list[str]:
    notes = []
    unseen = [j.job_id for j in jobs if not any(t.session_job == j.job_id for t in tasks)]
    if unseen:
        notes.append(f"not in Slurm's records (yet, or any more): {', '.join(unseen)}")
    failed = sum(t.tasks for t in tasks if t.verdict is None and _is_failure(t.state))
    if failed:
        notes.append(
            f"{failed} failed task(s) not diagnosed here (at most {MAX_DIAGNOSED} are): "
            "`jobsmith diagnose JOBID` diagnoses one job"
        )
    if any(t.max_rss_bytes is None and t.end_time is not None for t in tasks):
        notes.append("MaxRSS is unknown for some tasks: accounting recorded no peak for them")
    return notes


def kept_off_nodes(events: Iterable[Event]) -> list[str]:
    """The session's ExcludeNodes steps that ran, one line each: the requeued tasks the
    watcher kept off blocked nodes (agent/watcher/nodes.py)."""
    asked = {
        e.step_id: e.data.get("step")
        for e in events
        if e.kind is EventKind.INTENT and isinstance(e.data.get("step"), dict)
    }
    lines = []
    for e in events:
        step = asked.get(e.step_id) if e.kind is EventKind.RESULT else None
        done = e.data.get("outcome") == "done"
        if isinstance(step, dict) and step.get("action") == "exclude_nodes" and done:
            ids = step.get("job_ids")
            tasks = ", ".join(str(j) for j in ids) if isinstance(ids, list) else "?"
            lines.append(
                f"Slurm requeued {tasks} after a node failure; jobsmith kept them off "
                f"{step.get('nodes')} (ExcNodeList) instead of submitting them again"
            )
    return lines


def _is_failure(state: str) -> bool:
    known = JobState.known(state)
    return known is not None and known.is_failure


class ReportParts(SiteSource, LogSources, Protocol):
    """What a run report uses (the composition root, agent/app.py, has them all): the
    session store, Slurm, the site (for the remedies' caps) and where logs are read."""

    @property
    def store(self) -> SessionStore: ...
    @property
    def blocklist(self) -> NodeBlocklist: ...


def run_report(
    parts: ReportParts, session_id: str, poll: Callable[[list[str]], Mapping[str, JobStatus]]
) -> RunReport:
    """A session's run report: its jobs from one poll (one accounting query for all of
    them), each failed task diagnosed from that poll's record and its stderr, as
    `jobsmith diagnose` does, without asking Slurm again per job."""
    from jobsmith.agent.diagnosis.job import NO_ACCOUNTING_NOTE, diagnose_record
    from jobsmith.agent.runtime.logs import stderr_tail
    from jobsmith.agent.runtime.workflows.contactread import read_contact_sheets
    from jobsmith.agent.runtime.workflows.progressread import read_progress

    info = _info(parts, session_id)
    events = parts.store.read(session_id)
    statuses = poll(session_job_ids(events))
    failed = failed_records(statuses)
    site = site_if_any(parts)
    extra = () if not failed or parts.scheduler.has_accounting() else (NO_ACCOUNTING_NOTE,)
    tail = partial(stderr_tail, parts)
    diagnoses = [diagnose_record(r, site, tail, why, extra) for r, why in failed]
    said = read_progress(parts, statuses)
    blocked = parts.blocklist.entries()
    sheets = read_contact_sheets(parts, statuses)
    now = datetime.now()
    return build_report(info, events, statuses, diagnoses, now, said, blocked, sheets)


def contact_sheets(
    parts: ReportParts, session_id: str, poll: Callable[[list[str]], Mapping[str, JobStatus]]
) -> tuple[SessionInfo, list[ContactSheet]]:
    """`jobsmith frames`: the session and the contact sheets its jobs made, from one poll
    (the report's section, without the rest of the report)."""
    from jobsmith.agent.runtime.workflows.contactread import read_contact_sheets

    info = _info(parts, session_id)
    statuses = poll(session_job_ids(parts.store.read(session_id)))
    return info, read_contact_sheets(parts, statuses)


def _info(parts: ReportParts, session_id: str) -> SessionInfo:
    from jobsmith.agent.runtime.session.store import SessionNotFound

    try:
        return parts.store.info(session_id)
    except SessionNotFound as err:
        raise SessionNotFound(session_id, "`jobsmith sessions list` lists them") from err

"""What the at-a-glance status knows of each session besides one poll's answers.

Read from the ledger and the session store only, never from Slurm, so `jobsmith status`
stays one sacct call: each session's title, a plan's status document (planrun's own,
from the poll), a pipeline's (as its session last recorded its engine's tasks), a
workload fed in parts (read only where a polled job's name says it is a part, or where
the feeding index lists one still to feed: it may have no job yet), and the
verdicts the watcher's decisions recorded about failed jobs (read only where the
session's fold says a decision was taken about one of them).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from jobsmith.adapters.scheduler import JobStatus
from jobsmith.agent.runtime.documents import PipelineStatusDocument, PlanStatusDocument
from jobsmith.agent.runtime.session.events import Event, EventKind
from jobsmith.agent.runtime.session.ledger import JobLedger
from jobsmith.agent.runtime.session.readmodel import SessionFolds
from jobsmith.agent.runtime.session.store import SessionNotFound, SessionStore
from jobsmith.agent.runtime.workflows.feeding.index import FeedingIndex
from jobsmith.agent.runtime.workflows.feeding.progress import WorkloadProgress, workload_progress
from jobsmith.agent.runtime.workflows.feeding.record import is_part
from jobsmith.agent.runtime.workflows.pipelinerun import ORIGIN as PIPELINE
from jobsmith.agent.runtime.workflows.pipelines import pipeline_of
from jobsmith.agent.runtime.workflows.planrun import plan_of, status_document
from jobsmith.agent.runtime.workflows.progress import WorkProgress
from jobsmith.errors import JobsmithError


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class JobFacts(_Model):
    """What the ledger says of one polled job."""

    session_id: str | None = Field(None, description="the session that submitted it")
    template: str | None = Field(None, description="its template")
    submitted_at: datetime | None = Field(None, description="when Slurm accepted it")


class SessionFacts(_Model):
    """What a session's log says, for its line (read from the store, not from Slurm)."""

    session_id: str
    title: str | None = Field(None, description="the session's title")
    created: datetime | None = Field(None, description="when it was opened")
    plan: PlanStatusDocument | None = Field(None, description="a plan session's status")
    pipeline: PipelineStatusDocument | None = Field(None, description="a pipeline's status")
    verdicts: dict[str, str] = Field(
        default_factory=dict, description="job id -> the verdict a recorded decision gave"
    )
    workloads: tuple[WorkloadProgress, ...] = Field(
        (), description="its workloads fed in parts, as `status --json` counts them"
    )


class GlanceFacts(_Model):
    """Everything the glance needs besides the poll."""

    jobs: dict[str, JobFacts] = Field(default_factory=dict, description="by job id")
    sessions: dict[str, SessionFacts] = Field(default_factory=dict, description="by id")
    window: str = Field("7d", description="how far back status looked (--since)")
    progress: dict[str, WorkProgress] = Field(
        default_factory=dict,
        description="job id -> a render's frames or a transcode's chunks done, as read",
    )


def glance_facts(
    store: SessionStore,
    folds: SessionFolds,
    ledger: JobLedger,
    statuses: Mapping[str, JobStatus],
    window: str,
    progress: Mapping[str, WorkProgress] | None = None,
) -> GlanceFacts:
    """The ledger's record of each polled job, and the facts of the sessions they share
    (progress: what the jobs' own output said, read by the caller); and the facts of the
    sessions whose workloads are still feeding, though none of their jobs was polled
    (none of its parts fitted yet: it has no job)."""
    jobs: dict[str, JobFacts] = {}
    # the sessions with a workload's part among the polled jobs, or one still feeding
    fed: set[str] = FeedingIndex.beside(ledger).sessions()
    for job_id in statuses:
        rec = ledger.get(job_id)
        if rec is not None:
            jobs[job_id] = JobFacts(
                session_id=rec.session_id, template=rec.template, submitted_at=rec.submitted_at
            )
            if rec.session_id and is_part(rec.options.job_name):
                fed.add(rec.session_id)
    by_session: dict[str, list[str]] = {}
    for job_id, facts in jobs.items():
        if facts.session_id:
            by_session.setdefault(facts.session_id, []).append(job_id)
    sessions = {
        sid: session_facts(store, folds, sid, [statuses[j] for j in ids], statuses, sid in fed)
        for sid, ids in by_session.items()
    }
    for sid in sorted(fed - set(by_session)):  # still feeding, no job polled
        waiting = session_facts(store, folds, sid, [], statuses, fed=True)
        if any(w.feeding for w in waiting.workloads):
            sessions[sid] = waiting
    return GlanceFacts(jobs=jobs, sessions=sessions, window=window, progress=dict(progress or {}))


def session_facts(
    store: SessionStore,
    folds: SessionFolds,
    session_id: str,
    jobs: list[JobStatus],
    statuses: Mapping[str, JobStatus],
    fed: bool = False,
) -> SessionFacts:
    """One session's facts; a pruned session's are its id alone. fed: a polled job is a
    workload's part (its name says so), so its session's workloads are read."""
    try:
        info = store.info(session_id)
    except SessionNotFound:
        return SessionFacts(session_id=session_id)
    origin = info.meta.get("origin")
    events = store.read(session_id) if fed or origin in ("plan", PIPELINE) else None
    facts = SessionFacts(session_id=session_id, title=info.title, created=info.created)
    # a damaged plan or pipeline record leaves a plain line: the glance still shows the rest
    with contextlib.suppress(JobsmithError):
        if events is not None and origin == "plan":
            plan = status_document(session_id, plan_of(events), statuses, events)
            facts = facts.model_copy(update={"plan": plan})
        elif events is not None:
            run = pipeline_of(events)
            doc = PipelineStatusDocument.of(run, statuses.get(run.current.job_id or ""))
            facts = facts.model_copy(update={"pipeline": doc})
    if fed and events is not None:
        found = tuple(workload_progress(session_id, events, statuses))
        facts = facts.model_copy(update={"workloads": found})
    failed = {st.job_id for st in jobs if st.state.is_failure or _failed_task(st)}
    decided = {j.partition("_")[0] for j in folds.of(session_id).decided} if failed else set()
    if failed & decided:
        verdicts = recorded_verdicts(events or store.read(session_id))
        facts = facts.model_copy(update={"verdicts": verdicts})
    return facts


def _failed_task(status: JobStatus) -> bool:
    return any(t.state.is_failure for t in status.tasks)


def recorded_verdicts(events: list[Event]) -> dict[str, str]:
    """Each decided job's first verdict, as its first decision recorded it."""
    verdicts: dict[str, str] = {}
    for event in events:
        if event.kind is not EventKind.DECISION:
            continue
        job_id, said = event.data.get("job_id"), event.data.get("verdicts")
        if isinstance(job_id, str) and isinstance(said, list) and said and isinstance(said[0], str):
            verdicts.setdefault(job_id, said[0])
    return verdicts

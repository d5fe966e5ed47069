"""The documents jobsmith shows: each is one model, built in one place.

They live with the runtime, which returns them, below the views that render them
(agent/views/), so the layers run one way (the import-linter contract in pyproject.toml).

A document has a full projection (what `--json` prints; the README documents the shapes
and tests/test_documents.py checks them against these models) and a compact one,
bounded, for a model's context window and for tool results (a brain or an MCP client
asking about a 1,000-task array gets the counts and the tasks worth a look, not 1,000
records). Text output renders from the same models (agent/views/render.py).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from jobsmith.adapters.records import JobRecord
from jobsmith.adapters.scheduler import JobStatus
from jobsmith.adapters.states import JobState
from jobsmith.adapters.workflow import EngineMessage, EngineTask
from jobsmith.agent.diagnosis.table import Diagnosis
from jobsmith.agent.runtime.requeues import requeue_phrase
from jobsmith.agent.runtime.session.events import Event, EventKind
from jobsmith.agent.runtime.session.readmodel import TokenTotals
from jobsmith.agent.runtime.workflows.progress import WorkProgress

if TYPE_CHECKING:
    from jobsmith.agent.runtime.submission.approval.approvals import PendingApproval
    from jobsmith.agent.runtime.workflows.pipelines import PipelineRun

#: a compact document lists at most this many of an array's not-completed tasks
MAX_COMPACT_TASKS = 20
#: a compact render document shows at most this much of the script
MAX_COMPACT_SCRIPT = 4000


class _Document(BaseModel):
    # each document's validator is built when first used: a command shows one or two
    # of them, and building all at import was most of a `jobsmith submit`'s (issue 26)
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    def full(self) -> dict[str, Any]:
        """What `--json` prints."""
        return self.model_dump(mode="json")


def record_summary(rec: JobRecord) -> dict[str, Any]:
    """The facts about one job or task that decide the next step (compact)."""
    return {
        "job_id": rec.job_id,
        "state": rec.state.value,
        "exit_code": rec.exit_code,
        "signal": rec.signal,
        "cancelled_by": rec.cancelled_by,
        "elapsed_s": rec.elapsed_s,
        "timelimit_s": rec.timelimit_s,
        "max_rss_bytes": rec.max_rss_bytes,
        "req_mem_bytes": rec.req_mem_bytes,
        "reason": rec.reason if not rec.state.is_terminal else None,
        "restarts": len(rec.requeues),
    }


class JobStatusDocument(_Document):
    """One job (or whole array) as `status` and `wait` report it."""

    job_id: str = Field(description="the id asked about")
    state: str = Field(description="overall state (arrays: summarised over tasks)")
    record: JobRecord | None = Field(description="the job's own record, if Slurm has one")
    tasks: tuple[JobRecord, ...] = Field(description="array tasks, one record each")
    task_counts: dict[str, int] = Field(description="array tasks per state")
    reason: str | None = Field(description="why it waits, from the controller")
    estimated_start: datetime | None = Field(description="the controller's start estimate")
    session_id: str | None = Field(description="the session that submitted it, if any")
    progress: WorkProgress | None = Field(
        None,
        description="a render's frames or a transcode's chunks done of total, read from "
        "its running tasks' output (None: not such a job)",
    )
    restarts: int = Field(
        0,
        description="how many times Slurm requeued it (its restart count; an array: its "
        "tasks' together); each earlier run's end is in record.requeues",
    )
    requeued: str | None = Field(
        None, description="what requeued it, in words: 'preempted 2×, resumed' (None: never)"
    )

    @classmethod
    def of(
        cls, status: JobStatus, session_id: str | None, progress: WorkProgress | None = None
    ) -> JobStatusDocument:
        """The document of one polled job."""
        records = status.tasks or ((status.record,) if status.record else ())
        requeues = tuple(s for r in records for s in r.requeues)
        return cls(
            job_id=status.job_id,
            state=status.state.value,
            record=status.record,
            tasks=status.tasks,
            task_counts=status.task_counts,
            reason=status.reason,
            estimated_start=status.estimated_start,
            session_id=session_id,
            progress=progress,
            restarts=len(requeues),
            requeued=requeue_phrase(requeues, status.state),
        )

    def compact(self) -> dict[str, Any]:
        """State, counts, and only the tasks worth a look (bounded)."""
        entry: dict[str, Any] = {"job_id": self.job_id, "state": self.state}
        if self.tasks:
            entry["task_counts"] = self.task_counts
            notable = [t for t in self.tasks if t.state.value != "COMPLETED"]
            entry["tasks"] = [record_summary(t) for t in notable[:MAX_COMPACT_TASKS]]
        elif self.record is not None:
            entry.update(record_summary(self.record))
        entry["reason"] = self.reason
        if self.requeued:
            entry["requeued"] = self.requeued
        entry["estimated_start"] = (
            self.estimated_start.isoformat() if self.estimated_start else None
        )
        if self.progress is not None:
            entry["progress"] = self.progress.model_dump(mode="json")
        return entry


class StatusDocument(_Document):
    """`jobsmith status` / `wait`: every job asked about."""

    jobs: tuple[JobStatusDocument, ...] = Field(description="one per job, in the order asked")

    @classmethod
    def of(
        cls,
        statuses: Mapping[str, JobStatus],
        sessions: Mapping[str, str] | None = None,
        progress: Mapping[str, WorkProgress] | None = None,
    ) -> StatusDocument:
        """The document of one poll's answers (with the progress read for them)."""
        where, said = sessions or {}, progress or {}
        return cls(
            jobs=tuple(
                JobStatusDocument.of(st, where.get(j), said.get(j)) for j, st in statuses.items()
            )
        )

    def compact(self) -> dict[str, Any]:
        """Every job's compact document."""
        return {"jobs": [job.compact() for job in self.jobs]}


class SubmissionDocument(_Document):
    """What a submission did (`submit`, `rerun`, and the result of a submit step)."""

    session_id: str | None = Field(None, description="the session that submitted it")
    step_id: str | None = Field(None, description="the submit step")
    submitted: bool = Field(description="true: Slurm accepted it")
    job_id: str = Field(description="Slurm's job id")
    job_name: str = Field(description="the job name, carrying the submission tag")
    tag: str | None = Field(description="jobsmith's submission tag")
    array_tasks: int | None = Field(description="array tasks, None for a plain job")
    stdout: str | None = Field(description="where Slurm writes stdout (%j/%A/%a patterns)")
    stderr: str | None = Field(description="where Slurm writes stderr")
    cost: dict[str, Any] = Field(description="tasks, core-, GPU- and node-hours")
    recovered: bool = Field(description="true if sbatch's answer was lost and the tag found it")
    warnings: tuple[str, ...] = Field(description="what sbatch said on stderr")

    def compact(self) -> dict[str, Any]:
        """The same: a submission is small."""
        return self.full()


class RenderDocument(_Document):
    """`render` / `submit --dry-run`: the checked script and the policy's verdict."""

    template: str = Field(description="template name")
    job_name: str = Field(description="the job name, carrying the submission tag")
    tag: str | None = Field(description="jobsmith's submission tag")
    params: dict[str, Any] = Field(description="the validated parameters")
    options: dict[str, Any] = Field(description="the sbatch options, typed")
    array_tasks: int | None = Field(description="array tasks, None for a plain job")
    inputs: tuple[str, ...] = Field(description="input paths, resolved")
    outputs: tuple[str, ...] = Field(description="output paths, resolved")
    script: str = Field(description="the exact script")
    script_sha256: str = Field(description="what an approval binds to")
    policy: dict[str, Any] = Field(description="verdict, rule, message and cost")

    def compact(self) -> dict[str, Any]:
        """The same, with the script bounded (its hash still names it exactly)."""
        doc = self.full()
        if len(self.script) > MAX_COMPACT_SCRIPT:
            doc["script"] = self.script[:MAX_COMPACT_SCRIPT] + "\n# … (cut; see script_sha256)\n"
        return doc


class PlanStepCheck(_Document):
    """One step of a checked plan: its name, what it waits for, and its render document."""

    name: str = Field(description="the step's name in the plan")
    waits_for: dict[str, list[str]] = Field(description="after_ok/after_any/after_not_ok")
    job: RenderDocument = Field(description="the step's script and the policy's verdict")


class PlanCheckDocument(_Document):
    """`plan check`: every step rendered and judged, and the plan judged whole."""

    plan: str = Field(description="the plan's name")
    order: tuple[str, ...] = Field(description="the steps in the order they are submitted")
    steps: tuple[PlanStepCheck, ...] = Field(description="each step, in that order")
    cost: dict[str, Any] = Field(description="the plan's total: tasks, core-, GPU-, node-hours")
    policy: dict[str, Any] = Field(description="verdict (allow, approve, refuse) and message")
    script_sha256: str = Field(description="what an approval of the whole plan binds to")
    workload: str | None = Field(
        None,
        description="a step over the site's submit limits, fed in parts, and the steps "
        "submitted after its last part (None: no such step)",
    )


class PlanStepStatus(_Document):
    """One step of a running plan."""

    name: str = Field(description="the step's name in the plan")
    depth: int = Field(description="how many steps deep (the tree's indentation)")
    waits_for: dict[str, list[str]] = Field(description="after_ok/after_any/after_not_ok")
    job_id: str | None = Field(description="Slurm's job id (None: not submitted)")
    state: str | None = Field(description="the job's state (None: not submitted)")
    reason: str | None = Field(
        description="why it waits, from the controller; for a step fed in parts, its "
        "workload's line, and for a step after it not yet submitted, what it waits for"
    )
    task_counts: dict[str, int] = Field(description="an array's tasks by state")


class PlanStatusDocument(_Document):
    """`plan status`: the plan's steps as a tree, each with its job's state."""

    session_id: str = Field(description="the plan's session")
    plan: str = Field(description="the plan's name")
    outcome: str | None = Field(description="the plan step's outcome (None: still running)")
    steps: tuple[PlanStepStatus, ...] = Field(description="each step, in submission order")


class PipelineStatusDocument(_Document):
    """`pipeline status`: a pipeline's head job, its tasks summarised (from the engine's
    own records), the failed ones with their Slurm job ids, and what the engine said."""

    session_id: str = Field(description="the pipeline's session")
    engine: str = Field(description="nextflow or snakemake")
    pipeline: str = Field(description="the pipeline (Nextflow) or Snakefile (Snakemake)")
    launch_dir: str = Field(description="where the engine runs and keeps its state")
    attempt: int = Field(description="1, then one more per `pipeline resume`")
    head_job_id: str | None = Field(description="the head job's Slurm id (None: not submitted)")
    head_state: str | None = Field(description="the head job's state")
    task_counts: dict[str, int] = Field(description="tasks by status, each task's latest word")
    failed: tuple[EngineTask, ...] = Field(description="tasks whose latest attempt failed")
    running: tuple[EngineTask, ...] = Field(description="tasks submitted or running")
    messages: tuple[EngineMessage, ...] = Field(description="the engine's newest messages")
    max_concurrent_tasks: int = Field(description="the engine's queue size, from the policy")
    next: str | None = Field(description="what a person can do next, if anything")

    def line(self) -> str:
        """The pipeline in one line: for the at-a-glance listing."""
        tasks = ", ".join(f"{n} {s.lower()}" for s, n in sorted(self.task_counts.items()))
        head = f"{self.head_job_id or '-'} {self.head_state or 'not submitted'}"
        return (
            f"{self.session_id}  {self.engine} {self.pipeline}  head {head}  "
            f"attempt {self.attempt}  [{tasks or 'no tasks yet'}]"
        )

    @classmethod
    def of(cls, run: PipelineRun, head: JobStatus | None) -> PipelineStatusDocument:
        """The document of a folded pipeline session and its head job's status."""
        current = run.current
        state = head.state if head else None
        ended = state is not None and state.is_terminal
        failed = tuple(run.failed())
        nxt = None
        if ended and (failed or state is not JobState.COMPLETED):
            nxt = f"jobsmith pipeline resume {run.session_id}"
        return cls(
            session_id=run.session_id,
            engine=run.request.engine.value,
            pipeline=run.request.pipeline,
            launch_dir=run.request.launch_dir,
            attempt=current.number,
            head_job_id=current.job_id,
            head_state=state.value if state else None,
            task_counts=run.counts(),
            failed=failed,
            # after the head job ended nothing of its engine runs (resume cancels leftovers)
            running=() if ended else tuple(run.unfinished()),
            messages=tuple(run.messages[-10:]),
            max_concurrent_tasks=run.site.max_concurrent_tasks,
            next=nxt,
        )


#: a compact session document shows at most this many of its newest events
MAX_COMPACT_EVENTS = 30
#: and at most this much of each event's data, as JSON text
MAX_COMPACT_EVENT_DATA = 300
#: a compact diagnosis keeps at most this many evidence lines per job
MAX_COMPACT_EVIDENCE = 5


class PendingItem(_Document):
    """One step held for a person, with exactly what the person is asked to approve."""

    session_id: str = Field(description="session holding the step")
    step_id: str = Field(description="the step; `jobsmith approve STEP_ID`")
    asked_at: datetime = Field(description="when approval was asked")
    action: str = Field(description="the step's action: submit, cancel, …")
    reason: str = Field(description="why a person must look")
    script: str | None = Field(description="the exact script that would be submitted")
    script_sha256: str | None = Field(description="hash the approval is bound to")
    cost: dict[str, Any] | None = Field(description="tasks, core-, GPU- and node-hours")


class PendingDocument(_Document):
    """`jobsmith pending`: every step waiting for a person."""

    pending: tuple[PendingItem, ...] = Field(description="oldest session first")

    @classmethod
    def of(cls, items: Iterable[PendingApproval]) -> PendingDocument:
        """The document of the held steps (their events' raw data left out)."""
        fields = set(PendingItem.model_fields)
        return cls(
            pending=tuple(PendingItem.model_validate(i.model_dump(include=fields)) for i in items)
        )

    def compact(self) -> dict[str, Any]:
        """The same, each script bounded (its hash still names it exactly)."""
        doc = self.full()
        for item in doc["pending"]:
            script = item["script"]
            if script and len(script) > MAX_COMPACT_SCRIPT:
                item["script"] = script[:MAX_COMPACT_SCRIPT] + "\n# … (cut; see script_sha256)\n"
        return doc


class SessionDocument(_Document):
    """`jobsmith sessions show`: a session's log, every event, and what its model calls
    cost (from its fold)."""

    events: tuple[Event, ...] = Field(description="oldest first")
    usage: TokenTotals = Field(
        default_factory=TokenTotals, description="the session's model calls and their tokens"
    )

    def compact(self) -> dict[str, Any]:
        """The newest events that fit (at most MAX_COMPACT_EVENTS, MAX_COMPACT_SESSION_CHARS
        of JSON), each with its data cut short, oldest first, and how many were left out.

        A bounded view of a session is cut from its old end: a model resumed from the log
        must see the hold and the interruption that came last, not the session's start
        (a view cut later by size lost exactly those). A step still waiting for a person
        is always in it, however old its request: its line is counted first.
        """
        waiting = _waiting_steps(self.events)
        asked = {e.seq for e in self.events if e.kind is EventKind.APPROVAL_ASKED}
        held = [e for e in self.events if e.seq in asked and e.step_id in waiting]
        lines = {e.seq: _event_line(e) for e in held}
        size = sum(_json_size(line) for line in lines.values())
        count = 0
        for event in reversed(self.events):
            if event.seq in lines:
                continue
            line = _event_line(event)
            cost = _json_size(line)
            if count + len(held) >= MAX_COMPACT_EVENTS or size + cost > MAX_COMPACT_SESSION_CHARS:
                break
            lines[event.seq] = line
            size += cost
            count += 1
        return {
            "session_id": self.events[0].session_id if self.events else None,
            "omitted": len(self.events) - len(lines),
            "events": [lines[seq] for seq in sorted(lines)],
        }


#: the compact session view's JSON, at most, as a model is shown it (with '<' escaped,
#: ask_tools.as_data): under the bound its callers give as_data, so the view is never cut
#: again after it was bounded here
MAX_COMPACT_SESSION_CHARS = 14_000


def _json_size(line: Mapping[str, Any]) -> int:
    text = json.dumps(line, separators=(",", ":"), default=str)
    return len(text) + 5 * text.count("<")  # as_data writes '<' as \u003c


def _waiting_steps(events: Sequence[Event]) -> set[str]:
    """Steps asked of a person and not answered (no approval, refusal or result yet)."""
    waiting: set[str] = set()
    for event in events:
        if event.step_id is None:
            continue
        if event.kind is EventKind.APPROVAL_ASKED:
            waiting.add(event.step_id)
        elif event.kind in (EventKind.APPROVAL_GIVEN, EventKind.APPROVAL_REFUSED, EventKind.RESULT):
            waiting.discard(event.step_id)
    return waiting


def _event_line(event: Event) -> dict[str, Any]:
    data = json.dumps(event.data, default=str)
    if len(data) > MAX_COMPACT_EVENT_DATA:
        data = data[:MAX_COMPACT_EVENT_DATA] + "…"
    return {
        "seq": event.seq,
        "at": event.at.isoformat(),
        "kind": event.kind.value,
        "step_id": event.step_id,
        "data": data,
    }


class DiagnosisDocument(_Document):
    """`jobsmith diagnose`: the verdict on a job, or on each of its failed tasks."""

    diagnoses: tuple[Diagnosis, ...] = Field(description="one per failed task (or the job)")

    def compact(self) -> dict[str, Any]:
        """Verdicts, remedies and the first evidence lines of each."""
        return {
            "diagnoses": [
                {
                    "job_id": d.job_id,
                    "verdict": d.verdict.value,
                    "remedy": d.remedy,
                    "retryable": d.retryable,
                    "suggested": d.suggested,
                    "evidence": list(d.evidence[:MAX_COMPACT_EVIDENCE]),
                    "notes": list(d.notes),
                }
                for d in self.diagnoses
            ]
        }


# --- results of CLI actions whose JSON shape is part of jobsmith's interface -----------


class _Result(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)


class ControlResult(_Result):
    """What cancel / hold / release did."""

    action: str = Field(description="cancel, hold or release")
    job_ids: list[str] = Field(description="Slurm job ids it applied to")
    already_running: list[str] = Field(
        default_factory=list,
        description="hold: the jobs among them that had already started; Slurm holds them "
        "without stopping them (the hold only keeps one from starting again if requeued)",
    )
    workloads: list[str] | None = Field(
        None,
        description="cancel of fed workloads by step id: those cancelled now, as a whole: "
        "no part is submitted after this; their parts' jobs that had not ended are in "
        "job_ids (None, and left out of --json, when none was named)",
    )
    already_cancelled: list[str] | None = Field(
        None,
        description="cancel of fed workloads by step id: those that were cancelled before "
        "(nothing done)",
    )


class LogView(_Result):
    """The end of one job's output file."""

    job_id: str = Field(description="the job or array task asked about")
    stream: str = Field(description="stdout or stderr")
    path: str = Field(description="the file Slurm writes")
    lines: list[str] = Field(description="the last lines of the file, oldest first")
    truncated: bool = Field(description="true if earlier lines were left out")


class StagedFile(_Result):
    """One file put on the cluster or got from it."""

    source: str = Field(description="where it was copied from (the laptop's or the cluster's)")
    target: str = Field(description="where it is now, the path resolved where it lies")
    size: int = Field(description="its size in bytes")
    transferred: int = Field(
        description="bytes that crossed the link for it this time: 0 when it was already "
        "there whole, less than size when an interrupted copy was resumed"
    )
    via: str = Field(
        description="rsync or stream (openssh: a new file streamed, then checked by rsync), "
        "or sftp (ssh)"
    )


class StagingResult(_Result):
    """What `put` or `get` copied."""

    action: str = Field(description="put or get")
    where: str = Field(description="the login node, user@host:port")
    files: list[StagedFile] = Field(description="each file, in the order given")
    not_got: list[str] = Field(
        default_factory=list,
        description="get SESSION: the declared outputs (or the files below a declared "
        "directory) not got, and why (not there, over the limit of files, a symlink to a "
        "directory)",
    )

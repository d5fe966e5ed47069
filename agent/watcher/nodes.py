"""What a watcher cycle does about bad nodes (issue 27): failures attributed to nodes go
on the user's blocklist (agent/runtime/blocklist/), and jobs Slurm requeued after their
node failed are kept off the blocked nodes while they wait.

From the cycle's one poll (no query of its own, unless a job was requeued):
- the records that ended NODE_FAIL or BOOT_FAIL on one node, and the tasks of one
  template that failed the same way on one node only (attribution.py), are noted;
- a job Slurm requeued shows in that poll as its newest run only, submitted again (its
  Submit time is the requeue's), so nothing says its last run's node failed. For those,
  and once per requeue, one `sacct -D -X` (Scheduler.runs) reads the earlier runs, whose
  node failures are noted too;
- a requeued job still pending after a node failure gets the blocked nodes as its
  ExcNodeList (merged with the --exclude it was submitted with): an ExcludeNodes step in
  its session, through the executor like every step (its intent is committed first),
  instead of a new submission. Slurm chose to run it again; jobsmith only keeps it off the
  node, and the rule brain never re-runs it (a requeued job is not a failure).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Protocol

from pydantic import BaseModel, ConfigDict, Field

from jobsmith.adapters.states import JobState
from jobsmith.agent.runtime.blocklist.attribution import (
    aware,
    node_failures,
    same_exit_failures,
)
from jobsmith.agent.runtime.blocklist.exclude import with_blocked
from jobsmith.agent.runtime.submission.steps import ExcludeNodes
from jobsmith.errors import JobsmithError, SchedulerError

if TYPE_CHECKING:
    from jobsmith.adapters.records import JobRecord
    from jobsmith.adapters.scheduler import JobStatus, Scheduler
    from jobsmith.agent.runtime.blocklist.store import NodeBlocklist
    from jobsmith.agent.runtime.session.ledger import JobLedger, SubmissionRecord
    from jobsmith.agent.runtime.submission.executor import Executor

#: a run submitted this long after jobsmith's submission was requeued by Slurm (its
#: Submit time is reset at each requeue); clocks of the login node and the controller
#: further apart cost one extra accounting query per job, once
REQUEUE_SLACK = timedelta(seconds=15)


class NodeParts(Protocol):
    """What the node watch uses (the composition root, agent/app.py, has them all)."""

    @property
    def scheduler(self) -> Scheduler: ...
    @property
    def ledger(self) -> JobLedger: ...
    @property
    def executor(self) -> Executor: ...
    @property
    def blocklist(self) -> NodeBlocklist: ...


class NodeWatch(BaseModel):
    """What one cycle did about nodes (part of its output)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    failures: list[str] = Field(default_factory=list, description="failures noted, one line each")
    blocked: list[str] = Field(default_factory=list, description="the blocklist after it")
    excluded: list[dict[str, object]] = Field(
        default_factory=list,
        description="requeued pending jobs given the blocked nodes as ExcNodeList",
    )


def watch_nodes(
    parts: NodeParts,
    statuses: Mapping[str, JobStatus],
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> NodeWatch:
    """Note the failures the poll's statuses show, then keep requeued pending jobs off
    the blocked nodes (module docstring). Does nothing while the blocklist is off."""
    blocklist = parts.blocklist
    if not blocklist.on:
        return NodeWatch()
    seen = now()
    records = {job_id: _records_of(status) for job_id, status in statuses.items()}
    submitted = {job_id: parts.ledger.get(job_id) for job_id in statuses}
    requeued = _requeued(records, submitted, blocklist.looked_up())
    earlier: list[JobRecord] = []
    if requeued:
        earlier = _earlier_runs(parts.scheduler, requeued, submitted)
    failed_before = {f.job_id_raw for f in node_failures(earlier, seen)}
    blocklist.note_looked({key: raw in failed_before for key, (_, raw, _) in requeued.items()})
    by_template: dict[str, list[JobRecord]] = defaultdict(list)
    for job_id, recs in records.items():
        record = submitted[job_id]
        by_template[record.template if record else job_id].extend(recs)
    noted = blocklist.note(
        [
            *node_failures([r for recs in records.values() for r in recs], seen),
            *node_failures(earlier, seen),
            *same_exit_failures(by_template, seen),
        ]
    )
    blocked = blocklist.blocked()
    excluded = _exclude_pending(parts, records, submitted, blocked) if blocked else []
    return NodeWatch(
        failures=[f"{f.node}: {f.why}" for f in noted], blocked=list(blocked), excluded=excluded
    )


def _records_of(status: JobStatus) -> list[JobRecord]:
    return list(status.tasks) or ([status.record] if status.record else [])


def _run_key(rec: JobRecord) -> str:
    submit = aware(rec.submit_time).isoformat() if rec.submit_time else ""
    return f"{rec.job_id_raw}@{submit}"


def _requeued(
    records: Mapping[str, list[JobRecord]],
    submitted: Mapping[str, SubmissionRecord | None],
    looked: Mapping[str, bool],
) -> dict[str, tuple[str, str, JobRecord]]:
    """The runs not looked at yet whose Submit time is later than jobsmith's submission:
    by their key, (the ledger's job id, the task's raw id, its record)."""
    out = {}
    for job_id, recs in records.items():
        record = submitted[job_id]
        if record is None:
            continue
        after = aware(record.submitted_at) + REQUEUE_SLACK
        for rec in recs:
            if rec.submit_time and aware(rec.submit_time) > after:
                key = _run_key(rec)
                if key not in looked:
                    out[key] = (job_id, rec.job_id_raw, rec)
    return out


def _earlier_runs(
    scheduler: Scheduler,
    requeued: Mapping[str, tuple[str, str, JobRecord]],
    submitted: Mapping[str, SubmissionRecord | None],
) -> list[JobRecord]:
    """Every run of the requeued jobs (one accounting query); none if it fails (the next
    cycle asks again: nothing is marked looked at then)."""
    job_ids = sorted({job_id for job_id, _, _ in requeued.values()})
    since = min(aware(r.submitted_at) for j in job_ids if (r := submitted[j]) is not None)
    return scheduler.runs(job_ids, since - timedelta(minutes=5))


def _exclude_pending(
    parts: NodeParts,
    records: Mapping[str, list[JobRecord]],
    submitted: Mapping[str, SubmissionRecord | None],
    blocked: tuple[str, ...],
) -> list[dict[str, object]]:
    """ExcludeNodes steps for the requeued jobs still pending after a node failure whose
    ExcNodeList lacks a blocked node: one step per job and list, in its session."""
    blocklist = parts.blocklist
    node_failed = {k for k, failed in blocklist.looked_up().items() if failed}
    done = blocklist.excluded()
    steps: dict[tuple[str, str, str], list[tuple[str, JobRecord]]] = defaultdict(list)
    for job_id, recs in records.items():
        record = submitted[job_id]
        if record is None or record.session_id is None:
            continue
        for rec in recs:
            key = _run_key(rec)
            if rec.state is not JobState.PENDING or key not in node_failed:
                continue
            if set(blocked) <= done.get(key, set()):
                continue
            nodes = with_blocked(record.options.exclude, blocked) or ""
            steps[(record.session_id, job_id, nodes)].append((key, rec))
    out: list[dict[str, object]] = []
    for (session_id, job_id, nodes), runs in steps.items():
        step = ExcludeNodes(
            job_ids=[rec.job_id for _, rec in runs],
            nodes=nodes,
            reason=f"Slurm requeued them after a node failure; blocked: {', '.join(blocked)}",
        )
        error = None
        try:
            parts.executor.run(session_id, step)
        except (JobsmithError, SchedulerError) as err:  # started meanwhile: nothing to keep
            error = str(err)
        for key, _ in runs:
            blocklist.note_excluded(key, blocked)
        out.append({"job_id": job_id, "tasks": step.job_ids, "nodes": nodes, "error": error})
    return out

"""Replaying a session's steps against a dry-run executor, under today's (or another) policy.

Each step the session asked for (its intents, in order) runs again through the real
executor, policy and templates, but against a Slurm that only reads: status and
`--test-only` reach the real cluster, while submit, cancel, hold and release are recorded
and answered with placeholder ids. The replay's own events go to a throwaway store, so the
session being inspected is never touched. Use it to audit a session, or to see what
another policy (`jobsmith --site other.yaml sessions replay ID`) would have allowed.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from jobsmith.adapters.capabilities import Capabilities
from jobsmith.adapters.options import Dependency, JobOptions
from jobsmith.adapters.records import JobRecord
from jobsmith.adapters.scheduler import (
    EnvironmentInputs,
    JobStatus,
    Scheduler,
    SubmitLimits,
    SubmitResult,
    TestOnlyResult,
)
from jobsmith.agent.runtime.session.events import Event, EventKind
from jobsmith.agent.runtime.session.ledger import JobLedger
from jobsmith.agent.runtime.session.store import FileSessionStore
from jobsmith.agent.runtime.submission.approval.approvals import ApprovalNeeded
from jobsmith.agent.runtime.submission.executor import Executor
from jobsmith.agent.runtime.submission.steps import step_adapter
from jobsmith.errors import JobsmithError
from jobsmith.site_config.facts import ClusterFacts


@dataclass
class DryRunScheduler:
    """Anything that would change Slurm (submit, cancel, hold, release, set_dependencies)
    is only recorded; reads go to the real scheduler, its capabilities whole (all of them
    only read, so none needs a line of its own here)."""

    real: Scheduler
    actions: list[str] = field(default_factory=list)

    def submit(self, script: str, options: JobOptions) -> SubmitResult:
        """Record the submission; answer with a placeholder id."""
        self.actions.append(f"submit {options.job_name}")
        return SubmitResult(
            job_id=f"dry-{len(self.actions)}", job_name=options.job_name, tag=options.tag()
        )

    def cancel(self, job_ids: Sequence[str]) -> None:
        self.actions.append(f"cancel {' '.join(job_ids)}")

    def hold(self, job_ids: Sequence[str]) -> list[str]:
        self.actions.append(f"hold {' '.join(job_ids)}")
        return []

    def release(self, job_ids: Sequence[str]) -> None:
        self.actions.append(f"release {' '.join(job_ids)}")

    def set_dependencies(self, job_id: str, dependencies: Sequence[Dependency]) -> None:
        spec = ",".join(f"{d.kind.value}:{':'.join(d.job_ids)}" for d in dependencies)
        self.actions.append(f"set dependencies of {job_id}: {spec}")

    def exclude_nodes(self, job_id: str, nodes: str) -> None:
        self.actions.append(f"exclude {nodes} from {job_id}")

    # --- reads, from the real scheduler (test_only submits nothing) ------------------

    def runs(self, job_ids: Sequence[str], since: datetime) -> list[JobRecord]:
        return self.real.runs(job_ids, since)

    def capabilities(self) -> Capabilities:
        return self.real.capabilities()

    def version(self) -> str:
        return self.real.version()

    def test_only(self, script: str) -> TestOnlyResult:
        return self.real.test_only(script)

    def status(
        self, job_ids: Sequence[str], since: datetime, *, terms: bool = True
    ) -> dict[str, JobStatus]:
        return self.real.status(job_ids, since, terms=terms)

    def usage(self, job_ids: Sequence[str], since: datetime) -> dict[str, JobStatus]:
        return self.real.usage(job_ids, since)

    def find_by_name(self, job_name: str, since: datetime) -> list[str]:
        return self.real.find_by_name(job_name, since)

    def active_tasks(self) -> int:
        return self.real.active_tasks()

    def cluster_facts(self, user: str) -> ClusterFacts:
        return self.real.cluster_facts(user)

    def submit_limits(self, user: str, options: JobOptions) -> SubmitLimits:
        return self.real.submit_limits(user, options)

    def has_accounting(self) -> bool:
        return self.real.has_accounting()

    def output_paths(self, job_id: str) -> tuple[str | None, str | None]:
        return self.real.output_paths(job_id)

    def log_path(self, options: JobOptions, job_id: str, stream: str, since: datetime) -> str:
        return self.real.log_path(options, job_id, stream, since)

    def submission_environment(self, environ: Mapping[str, str]) -> EnvironmentInputs:
        return self.real.submission_environment(environ)


class ReplayedStep(BaseModel):
    """One step of the session, then and now."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    step_id: str = Field(description="the original step id")
    action: str = Field(description="the step's action")
    then: str | None = Field(description="the original outcome, if the log has one")
    now: str = Field(description="done (would run), refused, awaiting_approval or failed")
    detail: str = Field("", description="the reason, or what would have been done")


def replay_session(events: list[Event], executor: Executor) -> list[ReplayedStep]:
    """Run every intent of the session through a dry-run copy of executor."""
    dry = DryRunScheduler(executor.scheduler)
    with tempfile.TemporaryDirectory(prefix="jobsmith-replay-") as tmp:
        store = FileSessionStore(Path(tmp) / "sessions")
        session = store.create({"title": "replay"})
        # folds=None: the executor's folds read the real store, the sandbox has its own
        sandbox = replace(
            executor, store=store, scheduler=dry, ledger=JobLedger(Path(tmp)), folds=None
        )
        return [_one(sandbox, session, e, events, dry) for e in _intents(events)]


def _intents(events: list[Event]) -> list[Event]:
    seen: set[str | None] = set()
    out = []
    for e in events:
        if e.kind is EventKind.INTENT and e.step_id not in seen:
            seen.add(e.step_id)
            out.append(e)
    return out


def _one(
    executor: Executor, session: str, intent: Event, events: list[Event], dry: DryRunScheduler
) -> ReplayedStep:
    step = step_adapter().validate_python(intent.data["step"])
    then = next(
        (
            str(e.data.get("outcome"))
            for e in events
            if e.kind is EventKind.RESULT and e.step_id == intent.step_id
        ),
        None,
    )
    cwd = intent.data.get("cwd")
    runner = replace(executor, cwd=Path(str(cwd))) if isinstance(cwd, str) else executor
    before = len(dry.actions)
    try:
        result = runner.run(session, step)
    except ApprovalNeeded as err:
        return ReplayedStep(
            step_id=step.id, action=step.action, then=then, now="awaiting_approval", detail=str(err)
        )
    except JobsmithError as err:
        now = "refused" if err.exit_code == 3 else "failed"
        return ReplayedStep(
            step_id=step.id, action=step.action, then=then, now=now, detail=str(err)
        )
    detail = "; ".join(dry.actions[before:]) or "read only"
    return ReplayedStep(
        step_id=step.id, action=step.action, then=then, now=result.outcome.value, detail=detail
    )

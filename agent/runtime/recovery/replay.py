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

from jobsmith.adapters.options import Dependency, JobOptions
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
from jobsmith.agent.runtime.submission.approvals import ApprovalNeeded
from jobsmith.agent.runtime.submission.executor import Executor
from jobsmith.agent.runtime.submission.steps import STEP_ADAPTER
from jobsmith.errors import JobsmithError
from jobsmith.site_config.facts import ClusterFacts


@dataclass
class DryRunScheduler:
    """Reads go to the real scheduler; anything that would change Slurm is only recorded."""

    real: Scheduler
    actions: list[str] = field(default_factory=list)

    def version(self) -> str:
        """The real scheduler's version."""
        return self.real.version()

    def submit(self, script: str, options: JobOptions) -> SubmitResult:
        """Record the submission; answer with a placeholder id."""
        self.actions.append(f"submit {options.job_name}")
        return SubmitResult(
            job_id=f"dry-{len(self.actions)}", job_name=options.job_name, tag=options.tag()
        )

    def test_only(self, script: str) -> TestOnlyResult:
        """Slurm's real pre-flight verdict (submits nothing)."""
        return self.real.test_only(script)

    def status(self, job_ids: Sequence[str], since: datetime) -> dict[str, JobStatus]:
        """Real states."""
        return self.real.status(job_ids, since)

    def find_by_name(self, job_name: str, since: datetime) -> list[str]:
        """Real lookup."""
        return self.real.find_by_name(job_name, since)

    def active_tasks(self) -> int:
        """The user's real queue, for the concurrency rule."""
        return self.real.active_tasks()

    def cancel(self, job_ids: Sequence[str]) -> None:
        """Record only."""
        self.actions.append(f"cancel {' '.join(job_ids)}")

    def hold(self, job_ids: Sequence[str]) -> None:
        """Record only."""
        self.actions.append(f"hold {' '.join(job_ids)}")

    def release(self, job_ids: Sequence[str]) -> None:
        """Record only."""
        self.actions.append(f"release {' '.join(job_ids)}")

    def set_dependencies(self, job_id: str, dependencies: Sequence[Dependency]) -> None:
        """Record only."""
        spec = ",".join(f"{d.kind.value}:{':'.join(d.job_ids)}" for d in dependencies)
        self.actions.append(f"set dependencies of {job_id}: {spec}")

    def cluster_facts(self, user: str) -> ClusterFacts:
        """Read-only: asked of the real scheduler."""
        return self.real.cluster_facts(user)

    def submit_limits(self, user: str, options: JobOptions) -> SubmitLimits:
        """Read-only: asked of the real scheduler."""
        return self.real.submit_limits(user, options)

    def dbd_backlog(self) -> int:
        """Read-only: asked of the real scheduler."""
        return self.real.dbd_backlog()

    def has_accounting(self) -> bool:
        """Read-only: asked of the real scheduler."""
        return self.real.has_accounting()

    def min_job_age_s(self) -> int | None:
        """Read-only: asked of the real scheduler."""
        return self.real.min_job_age_s()

    def output_paths(self, job_id: str) -> tuple[str | None, str | None]:
        """Real paths."""
        return self.real.output_paths(job_id)

    def log_path(self, options: JobOptions, job_id: str, stream: str, since: datetime) -> str:
        """Real paths."""
        return self.real.log_path(options, job_id, stream, since)

    def script_header(self, options: JobOptions) -> list[str]:
        """The real rendering (pure)."""
        return self.real.script_header(options)

    def is_header_line(self, line: str) -> bool:
        """The real rendering's lines."""
        return self.real.is_header_line(line)

    def batch_script(self, job_id: str) -> str:
        """Read-only: asked of the real scheduler."""
        return self.real.batch_script(job_id)

    def submission_environment(self, environ: Mapping[str, str]) -> EnvironmentInputs:
        """The real reading of the environment (pure)."""
        return self.real.submission_environment(environ)

    def submission_host(self) -> str:
        """Read-only: asked of the real scheduler."""
        return self.real.submission_host()

    def submission_in_flight(self, job_name: str) -> bool:
        """Read-only: asked of the real scheduler."""
        return self.real.submission_in_flight(job_name)


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
    step = STEP_ADAPTER.validate_python(intent.data["step"])
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

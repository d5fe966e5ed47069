"""A running pipeline's tasks count against the site's budgets, with the scheduler DOUBLE
as Slurm (tests/scheduler_double.py) and a real Snakemake console capture as the engine's
record (tests/fixtures/snakemake/killed/console-1.log: four rule jobs submitted, one of
them done when the console was taken).

jobsmith cannot throttle an engine task by task; it reads what the engine submitted,
charges it (a submission per Slurm job first seen, its run time when it ends), says so
once near a budget, and at the budget does what `policy.budgets.pipeline_at_limit` says:
hold the pipeline's pending tasks, or cancel its head job. The lab test
(tests/test_pipeline_lab.py) runs the real engine; the budgets' stop is shown here, where
the test can set every job's state.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from scheduler_double import AgentHarness, HarnessParts, SimulatedCrash

from jobsmith.adapters.scheduler import JobStatus
from jobsmith.adapters.slurm.transport import LocalTransport
from jobsmith.adapters.snakemake import SnakemakeEngine
from jobsmith.adapters.states import JobState
from jobsmith.adapters.workflow import EngineKind, LaunchRequest
from jobsmith.agent.runtime.recovery.resume import ResumeReport, resume
from jobsmith.agent.runtime.session.events import EventKind
from jobsmith.agent.runtime.session.payloads import PipelineBudgetPayload, payload
from jobsmith.agent.runtime.submission import steps as st
from jobsmith.agent.runtime.submission.request.jobs import JobRequest
from jobsmith.agent.runtime.workflows.pipelinerun import Pipelines

CONSOLE = Path(__file__).resolve().parent / "fixtures" / "snakemake" / "killed" / "console-1.log"
RULE_JOBS = ["13972", "13973", "13974", "13975"]
PENDING = RULE_JOBS[1:]  # 13972 completed; Snakemake never said more of the others


@pytest.fixture(autouse=True)
def _engine_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A snakemake on the PATH: `pipeline run` looks for it before submitting
    (tests/test_engine_on_path_with_slurm_double.py); nothing here runs it."""
    engine = tmp_path / "engine-bin" / "snakemake"
    engine.parent.mkdir()
    engine.write_text("#!/bin/sh\nexit 0\n")
    engine.chmod(0o755)
    monkeypatch.setenv("PATH", f"{engine.parent}:{os.environ['PATH']}")


def _launch(tmp_path: Path, budgets: dict[str, Any]) -> tuple[AgentHarness, Pipelines, str]:
    h = AgentHarness.build(tmp_path, {"budgets": budgets})
    told: list[PipelineBudgetPayload] = []

    def poll(ids: list[str]) -> dict[str, Any]:
        return h.slurm.status(ids, h.clock() - timedelta(days=1))

    pipes = Pipelines(
        h.executor,
        h.store,
        LocalTransport(),
        poll,
        {EngineKind.SNAKEMAKE: SnakemakeEngine()},
        lambda sid, said: told.append(said),
    )
    (tmp_path / "Snakefile").write_text("rule all:\n")
    request = LaunchRequest(
        engine=EngineKind.SNAKEMAKE,
        pipeline=str(tmp_path / "Snakefile"),
        launch_dir=str(tmp_path / "run"),
    )
    launched = pipes.run(
        request, JobRequest(template="pipeline_head"), partition=None, head_partition=None,
        max_tasks=None,
    )  # fmt: skip
    head = str(launched.result.summary["job_id"])
    h.slurm.set_state(head, JobState.RUNNING)
    # the engine's console so far: four rule jobs submitted, as Snakemake printed them
    log = tmp_path / "run" / ".jobsmith" / "snakemake-1.log"
    log.parent.mkdir(parents=True)
    shutil.copy(CONSOLE, log)
    h.slurm.set_state(RULE_JOBS[0], JobState.COMPLETED)
    for job in PENDING:
        h.slurm.set_state(job, JobState.PENDING)
    return h, pipes, launched.session_id


def _said(h: AgentHarness, session_id: str) -> list[PipelineBudgetPayload]:
    return [
        data
        for e in h.store.read(session_id)
        if e.kind is EventKind.PIPELINE_BUDGET
        and isinstance(data := payload(e), PipelineBudgetPayload)
    ]


def test_the_engines_submissions_count_and_at_the_budget_its_pending_tasks_are_held(
    tmp_path: Path,
) -> None:
    # the head job is one submission, the console shows four more: five of a budget of 5
    h, pipes, sid = _launch(tmp_path, {"submissions_per_hour": 5})
    assert pipes.follow_all() == [sid]
    (said,) = _said(h, sid)
    assert (said.budget, said.level, said.used, said.limit) == (
        "submissions_per_hour",
        "reached",
        5,
        5,
    )
    assert said.action == "hold" and said.job_ids == PENDING  # not the one that ended
    assert ("hold", (tuple(PENDING),)) in h.slurm.calls
    # the policy sees them too: the next submission of anyone's is refused
    (use,) = [u for u in h.executor.judge.budget_use() if u.budget == "submissions_per_hour"]
    assert use.used == 5
    # a later cycle with nothing new to hold says nothing more
    for job in PENDING:  # as squeue then says of them
        h.slurm.jobs[job] = JobStatus(job_id=job, state=JobState.PENDING, reason="JobHeldUser")
    pipes.follow_all()
    assert len(_said(h, sid)) == 1


def test_near_a_budget_it_is_said_once_and_nothing_is_stopped(tmp_path: Path) -> None:
    h, pipes, sid = _launch(tmp_path, {"submissions_per_hour": 6})  # 5 of 6: near
    pipes.follow_all()
    pipes.follow_all()
    (said,) = _said(h, sid)
    assert (said.level, said.action, said.job_ids) == ("near", None, [])
    assert not [c for c in h.slurm.calls if c[0] in ("hold", "cancel")]


def test_the_policy_can_cancel_the_head_job_at_the_budget_instead(tmp_path: Path) -> None:
    h, pipes, sid = _launch(tmp_path, {"submissions_per_hour": 5, "pipeline_at_limit": "cancel"})
    pipes.follow_all()
    (said,) = _said(h, sid)
    head = pipes.head_job_id(sid)
    assert said.action == "cancel" and said.job_ids == [head]
    assert ("cancel", ((head,),)) in h.slurm.calls


# --- `sessions resume` of a pipeline (agent/runtime/recovery/resume.py's resume) -------------


@dataclass
class ResumeHands(HarnessParts):
    """What `sessions resume` uses (agent/app.py's App has these)."""

    pipelines: Pipelines


def test_resume_relaunches_a_pipeline_whose_head_job_failed_with_nothing_in_flight(
    tmp_path: Path,
) -> None:
    h, pipes, sid = _launch(tmp_path, {"submissions_per_hour": 100})
    head = pipes.head_job_id(sid)
    h.slurm.set_state(head, JobState.FAILED, exit_code=1)
    report = resume(ResumeHands(h, pipes), sid, orphan_wait_s=0)
    new_head = pipes.head_job_id(sid)
    assert new_head != head and h.slurm.options[new_head].job_name.startswith("pipeline_head")
    assert report == ResumeReport(session_id=sid, relaunched=new_head)


def test_resume_leaves_a_pipeline_whose_head_job_completed_alone(tmp_path: Path) -> None:
    h, pipes, sid = _launch(tmp_path, {"submissions_per_hour": 100})
    head = pipes.head_job_id(sid)
    h.slurm.set_state(head, JobState.COMPLETED)
    submitted = h.slurm.count("submit")
    assert resume(ResumeHands(h, pipes), sid, orphan_wait_s=0) == ResumeReport(session_id=sid)
    assert pipes.head_job_id(sid) == head and h.slurm.count("submit") == submitted


@pytest.mark.parametrize("left", ["found", "resubmitted", "undecided"])
def test_a_pipeline_with_a_submission_in_flight_is_reconciled_not_relaunched(
    tmp_path: Path, left: str
) -> None:
    # the head job failed, but a submission of the session was cut short: resume settles
    # that first (found, resubmitted, or left undecided), and relaunches nothing this time
    h, pipes, sid = _launch(tmp_path, {"submissions_per_hour": 100})
    head = pipes.head_job_id(sid)
    h.slurm.set_state(head, JobState.FAILED, exit_code=1)
    step = st.Submit(job=JobRequest(template="command", params={"command": "echo hi"}))
    if left == "found":
        h.slurm.answer_lost = SimulatedCrash()
    else:
        h.slurm.submit_error = SimulatedCrash()
    with pytest.raises(SimulatedCrash):
        h.executor.run(sid, step)
    h.slurm.submit_error = h.slurm.answer_lost = None
    h.slurm.backlog = 1 if left == "undecided" else 0
    submitted = h.slurm.count("submit")
    report = resume(ResumeHands(h, pipes), sid, orphan_wait_s=0)
    assert getattr(report, left) and step.id in getattr(report, left)
    assert report.relaunched is None and pipes.head_job_id(sid) == head
    assert h.slurm.count("submit") == submitted + (left == "resubmitted")


def test_resume_of_a_session_that_ran_no_pipeline_only_reconciles(tmp_path: Path) -> None:
    h, pipes, _ = _launch(tmp_path, {"submissions_per_hour": 100})
    session = h.store.create({"title": "submit command", "origin": "cli"})
    assert resume(ResumeHands(h, pipes), session, orphan_wait_s=0) == ResumeReport(
        session_id=session
    )
    step = st.Submit(job=JobRequest(template="command", params={"command": "echo hi"}))
    h.slurm.submit_error = SimulatedCrash()
    with pytest.raises(SimulatedCrash):
        h.executor.run(session, step)
    h.slurm.submit_error = None
    # this host's own intent: its sbatch is known gone, so it is submitted again at once
    report = resume(ResumeHands(h, pipes), session, orphan_wait_s=0)
    assert report == ResumeReport(session_id=session, resubmitted=[step.id])

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

import shutil
from datetime import timedelta
from pathlib import Path
from typing import Any

from scheduler_double import AgentHarness

from jobsmith.adapters.scheduler import JobStatus
from jobsmith.adapters.slurm.transport import LocalTransport
from jobsmith.adapters.snakemake import SnakemakeEngine
from jobsmith.adapters.states import JobState
from jobsmith.adapters.workflow import EngineKind, LaunchRequest
from jobsmith.agent.runtime.session.events import EventKind
from jobsmith.agent.runtime.session.payloads import PipelineBudgetPayload, payload
from jobsmith.agent.runtime.submission.jobs import JobRequest
from jobsmith.agent.runtime.workflows.pipelinerun import Pipelines

CONSOLE = Path(__file__).resolve().parent / "fixtures" / "snakemake" / "killed" / "console-1.log"
RULE_JOBS = ["13972", "13973", "13974", "13975"]
PENDING = RULE_JOBS[1:]  # 13972 completed; Snakemake never said more of the others


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

"""`approve` checks every path the job writes again, as it is now (issue 24, part 3): a
step held for a person may wait for hours, and a symlink swapped in meanwhile, pointing
out of the allowed roots, must not be written through. That covers the files jobsmith
itself generates inside a directory parameter (a pipeline head job's configuration and
console log under `LAUNCH_DIR/.jobsmith`) as well as a template's own output paths.

Refused means: one error naming the path, nothing submitted, and the step still pending
(a later `approve` goes through once the link is gone). Slurm here is the scheduler
DOUBLE (tests/scheduler_double.py); the lab test of the input case is
tests/test_approval_judged_afresh.py."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from scheduler_double import AgentHarness, Approver

from jobsmith.adapters.slurm.transport import LocalTransport
from jobsmith.adapters.snakemake import SnakemakeEngine
from jobsmith.adapters.workflow import EngineKind, LaunchRequest
from jobsmith.agent.runtime.submission import steps as st
from jobsmith.agent.runtime.submission.approval.answers import approve
from jobsmith.agent.runtime.submission.approval.approvals import ApprovalNeeded, pending_approvals
from jobsmith.agent.runtime.submission.request.jobs import JobRequest
from jobsmith.agent.runtime.workflows.pipelinerun import Pipelines
from jobsmith.errors import PolicyError

#: every submission is held for a person
HELD = {"approval": {"core_hours": 0.0001}}


def _pending(h: AgentHarness) -> list[str]:
    return [p.step_id for p in pending_approvals(h.store)]


def _held_pipeline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[AgentHarness, str]:
    """A Snakemake head job held for approval (the engine is a stand-in on the PATH)."""
    engine = tmp_path / "engine-bin" / "snakemake"
    engine.parent.mkdir()
    engine.write_text("#!/bin/sh\nexit 0\n")
    engine.chmod(0o755)
    monkeypatch.setenv("PATH", f"{engine.parent}:{os.environ['PATH']}")
    h = AgentHarness.build(tmp_path, HELD)
    pipes = Pipelines(
        h.executor, h.store, LocalTransport(), lambda ids: {},
        {EngineKind.SNAKEMAKE: SnakemakeEngine()},
    )  # fmt: skip
    (tmp_path / "Snakefile").write_text("rule all:\n")
    (tmp_path / "run").mkdir()
    request = LaunchRequest(
        engine=EngineKind.SNAKEMAKE,
        pipeline=str(tmp_path / "Snakefile"),
        launch_dir=str(tmp_path / "run"),
    )
    with pytest.raises(ApprovalNeeded):
        pipes.run(
            request, JobRequest(template="pipeline_head"), partition=None, head_partition=None,
            max_tasks=None,
        )  # fmt: skip
    assert h.slurm.jobs == {}
    (step_id,) = _pending(h)
    return h, step_id


def test_a_state_dir_linked_out_after_the_hold_refuses_the_pipelines_approval_with_slurm_double(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    h, step_id = _held_pipeline(tmp_path, monkeypatch)
    outside = tmp_path.parent / f"{tmp_path.name}-outside"
    outside.mkdir()
    state = tmp_path / "run" / ".jobsmith"
    state.symlink_to(outside)  # swapped in while the step waited
    with pytest.raises(PolicyError, match=r"run/\.jobsmith/.* is outside the allowed roots"):
        approve(Approver(h), step_id)
    assert h.slurm.jobs == {}  # nothing submitted
    assert _pending(h) == [step_id]  # still waiting for a person
    assert list(outside.iterdir()) == []
    state.unlink()  # the link gone: the same approval goes through
    job_id = str(approve(Approver(h), step_id).summary["job_id"])
    assert job_id in h.slurm.jobs and _pending(h) == []


def test_a_templates_output_linked_out_after_the_hold_refuses_the_approval_with_slurm_double(
    tmp_path: Path,
) -> None:
    h = AgentHarness.build(tmp_path, HELD)
    (tmp_path / "media").mkdir()
    (tmp_path / "media" / "input.mp4").write_bytes(b"\0" * 16)
    (tmp_path / "out").mkdir()
    params = {"input": "media/input.mp4", "output": "out/audio.m4a"}
    step = st.Submit(job=JobRequest(template="ffmpeg_audio", params=params))
    with pytest.raises(ApprovalNeeded):
        h.executor.run(h.store.create(), step)
    outside = tmp_path.parent / f"{tmp_path.name}-outside"
    outside.mkdir()
    (tmp_path / "out").rmdir()
    (tmp_path / "out").symlink_to(outside)  # swapped in while the step waited
    with pytest.raises(PolicyError, match=r"'output': path 'out/audio.m4a'.* outside the allowed"):
        approve(Approver(h), step.id)
    assert h.slurm.jobs == {}
    assert _pending(h) == [step.id]

"""`pipeline run` looks for its engine where the head job will, before submitting (issue
24, part 6): in this install the head job's PATH had neither snakemake nor nextflow, and
the job failed with 127 after its wait in the queue.

"Where the head job will" is: the environment a submission gets (the one environment
rule passes PATH: adapters/environment_rule.py), on the host that submits (this one, or
the login node over SSH), after the site's env_setup lines (the job's script runs them
first). So the look-up runs through the transport, as sbatch does, never locally. Slurm
here is the scheduler DOUBLE (tests/scheduler_double.py); the transport is the real local
one where the test sets PATH, and a double where it stands for a login node."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from pathlib import Path

import pytest
from scheduler_double import AgentHarness
from scripted_transport import ScriptedTransport

from jobsmith.adapters.slurm.transport import LocalTransport
from jobsmith.adapters.snakemake import SnakemakeEngine
from jobsmith.adapters.transport import Transport
from jobsmith.adapters.workflow import EngineKind, LaunchRequest
from jobsmith.agent.runtime.submission.request.jobs import JobRequest
from jobsmith.agent.runtime.workflows.pipelinerun import Pipelines
from jobsmith.agent.runtime.workflows.pipelines import EngineNotFound


def login_node(found: str | None = None) -> ScriptedTransport:
    """A transport standing for a login node: answers the engine look-up as a node whose
    PATH has no engine would (or finds it at `found`), and records every argv."""

    def answer(argv: tuple[str, ...]) -> tuple[str, str, int]:
        if argv[0] == "sh":  # pipeline run's check of its paths: all usable there
            return "", "", 0
        if found is not None:
            return f"{found}\n", "", 0
        return "/usr/bin:/bin\n", "", 127

    return ScriptedTransport(answer)


def _pipes(
    tmp_path: Path, transport: Transport, env_setup: Sequence[str] = ()
) -> tuple[AgentHarness, Pipelines, LaunchRequest]:
    h = AgentHarness.build(tmp_path)
    site = h.executor.site.model_copy(update={"env_setup": list(env_setup)})
    executor = dataclasses.replace(h.executor, site=site)
    pipes = Pipelines(
        executor, h.store, transport, lambda ids: {}, {EngineKind.SNAKEMAKE: SnakemakeEngine()}
    )
    (tmp_path / "Snakefile").write_text("rule all:\n")
    request = LaunchRequest(
        engine=EngineKind.SNAKEMAKE,
        pipeline=str(tmp_path / "Snakefile"),
        launch_dir=str(tmp_path / "run"),
    )
    return h, pipes, request


def _run(pipes: Pipelines, request: LaunchRequest) -> str:
    launched = pipes.run(
        request, JobRequest(template="pipeline_head"), partition=None, head_partition=None,
        max_tasks=None,
    )  # fmt: skip
    return str(launched.result.summary["job_id"])


def _fake_engine(where: Path) -> Path:
    where.mkdir(parents=True)
    engine = where / "snakemake"
    engine.write_text("#!/bin/sh\nexit 0\n")
    engine.chmod(0o755)
    return where


def test_an_engine_missing_from_the_path_is_refused_before_any_submission(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    h, pipes, request = _pipes(tmp_path, LocalTransport())
    with pytest.raises(EngineNotFound) as caught:
        _run(pipes, request)
    line = str(caught.value)
    assert "snakemake is not on the PATH its head job will have" in line, line
    assert "PATH=/usr/bin:/bin," in line and "module load snakemake" in line, line
    assert "\n" not in line and caught.value.exit_code == 2
    assert h.slurm.jobs == {}  # nothing submitted
    assert h.store.list_sessions() == []  # and no session begun


def test_the_engine_found_on_the_path_launches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir = _fake_engine(tmp_path / "bin")
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    h, pipes, request = _pipes(tmp_path, LocalTransport())
    assert _run(pipes, request) in h.slurm.jobs


def test_the_sites_env_setup_is_run_first_as_the_head_job_runs_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A site loads its engine in env_setup (the lab's: `export PATH=...:$PATH`)."""
    bin_dir = _fake_engine(tmp_path / "venv" / "bin")
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    setup = [f"export PATH={bin_dir}:$PATH", "echo loaded"]  # its output is no answer
    h, pipes, request = _pipes(tmp_path, LocalTransport(), setup)
    assert _run(pipes, request) in h.slurm.jobs


def test_over_ssh_the_engine_is_looked_up_on_the_login_node_not_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found here, missing on the login node: refused, naming the login node's PATH."""
    monkeypatch.setenv("PATH", f"{_fake_engine(tmp_path / 'bin')}:{os.environ['PATH']}")
    login = login_node()
    h, pipes, request = _pipes(tmp_path, login, ["module load snakemake/8"])
    with pytest.raises(EngineNotFound, match=r"PATH=/usr/bin:/bin,"):
        _run(pipes, request)
    ((shell, _, script, _, engine),) = [c for c in login.calls if c[0] == "bash"]
    assert (shell, engine) == ("bash", "snakemake")
    assert script.index("module load snakemake/8") < script.index('command -v "$1"')
    assert h.slurm.jobs == {}


def test_an_engine_the_login_node_has_launches(tmp_path: Path) -> None:
    login = login_node(found="/opt/snakemake/bin/snakemake")
    h, pipes, request = _pipes(tmp_path, login)
    assert _run(pipes, request) in h.slurm.jobs

"""`pipeline run` and `pipeline resume` check what every path they name is before any
session or job exists (issue 24, part 6): a launch or work directory that is a FIFO, a
file, a 300-character name or a place no one can write; a Snakefile that cannot be
read; a params file that is empty, a device, a FIFO or above the 4 MiB every file a
person names may hold (the engine reads it: /dev/zero or 8 GiB would reach it). Each is
one line naming the option, what is wrong and what to do, and exit 2.

What a path is gets asked where the head job will run, as the engine look-up is
(tests/test_engine_on_path_with_slurm_double.py): through the transport, this host or
the login node over SSH. Slurm here is the scheduler DOUBLE (tests/scheduler_double.py);
the transport is the real local one, or a double standing for a login node."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from scheduler_double import AgentHarness
from scripted_transport import Reply, ScriptedTransport

from jobsmith.adapters.scheduler import JobStatus
from jobsmith.adapters.slurm.transport import LocalTransport
from jobsmith.adapters.snakemake import SnakemakeEngine
from jobsmith.adapters.states import JobState
from jobsmith.adapters.transport import Transport
from jobsmith.adapters.workflow import EngineKind, LaunchRequest
from jobsmith.agent.runtime.submission.request.jobs import JobRequest
from jobsmith.agent.runtime.workflows.pipelinerun import Pipelines
from jobsmith.errors import InputError, JobsmithError
from jobsmith.files import MAX_INPUT_BYTES

UNROOTED = os.getuid() != 0
as_a_user = pytest.mark.skipif(not UNROOTED, reason="root writes and reads anywhere")


@pytest.fixture(autouse=True)
def _engine_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A snakemake on the PATH (the engine look-up comes after these checks)."""
    engine = tmp_path / "engine-bin" / "snakemake"
    engine.parent.mkdir()
    engine.write_text("#!/bin/sh\nexit 0\n")
    engine.chmod(0o755)
    monkeypatch.setenv("PATH", f"{engine.parent}:{os.environ['PATH']}")


def _pipes(
    tmp_path: Path, transport: Transport | None = None
) -> tuple[AgentHarness, Pipelines, dict[str, JobStatus]]:
    h = AgentHarness.build(tmp_path)
    statuses: dict[str, JobStatus] = {}
    pipes = Pipelines(
        h.executor, h.store, transport or LocalTransport(),
        lambda ids: {i: statuses[i] for i in ids if i in statuses},
        {EngineKind.SNAKEMAKE: SnakemakeEngine()},
    )  # fmt: skip
    (tmp_path / "Snakefile").write_text("rule all:\n")
    return h, pipes, statuses


def _request(tmp_path: Path, **kw: object) -> LaunchRequest:
    fields: dict[str, object] = {
        "engine": EngineKind.SNAKEMAKE,
        "pipeline": str(tmp_path / "Snakefile"),
        "launch_dir": str(tmp_path / "run"),
    }
    return LaunchRequest.model_validate({**fields, **kw})


def _run(pipes: Pipelines, request: LaunchRequest) -> str:
    launched = pipes.run(
        request, JobRequest(template="pipeline_head"), partition=None, head_partition=None,
        max_tasks=None,
    )  # fmt: skip
    return launched.session_id


def _refused(tmp_path: Path, request: LaunchRequest) -> str:
    h, pipes, _ = _pipes(tmp_path)
    with pytest.raises(InputError) as caught:
        _run(pipes, request)
    line = str(caught.value)
    assert "\n" not in line and caught.value.exit_code == 2, line
    assert h.slurm.jobs == {}  # nothing submitted
    assert h.store.list_sessions() == []  # and no session begun
    return line


def _fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


def _file(path: Path, text: str = "x") -> Path:
    path.write_text(text)
    return path


def _locked(path: Path) -> Path:
    path.mkdir(mode=0o555)
    return path


DIRECTORIES: dict[str, tuple[Callable[[Path], Path], str]] = {
    "fifo": (lambda t: _fifo(t / "fifo"), "is not a directory"),
    "file": (lambda t: _file(t / "afile"), "is not a directory"),
    "long name": (lambda t: t / ("d" * 300), "has a name longer than 255 bytes"),
    "under a file": (lambda t: _file(t / "afile") / "run", "cannot be created: "),
}
LOCKED: dict[str, tuple[Callable[[Path], Path], str]] = {
    "unwritable": (_locked, "is a directory you cannot write"),
    "not creatable": (lambda t: _locked(t / "locked") / "run", "cannot be created in "),
}


def _locked_case(case: str) -> Callable[[Path], Path]:
    make = LOCKED[case][0]
    return (lambda t: make(t / "locked")) if case == "unwritable" else make


@pytest.mark.parametrize("option", ["launch_dir", "work_dir"])
@pytest.mark.parametrize(
    "case", [*DIRECTORIES, *(pytest.param(c, marks=as_a_user) for c in LOCKED)]
)
def test_a_launch_or_work_dir_that_cannot_be_one_is_refused_with_slurm_double(
    tmp_path: Path, option: str, case: str
) -> None:
    make, said = DIRECTORIES[case] if case in DIRECTORIES else (_locked_case(case), LOCKED[case][1])
    path = make(tmp_path)
    line = _refused(tmp_path, _request(tmp_path, **{option: str(path)}))
    flag = "--" + option.replace("_", "-")
    assert line.startswith(f"pipeline: {flag} '{path}' "), line
    assert said in line and "name a directory you can write" in line, line


@pytest.mark.parametrize(
    ("case", "said"),
    [
        ("missing", "does not exist"),
        ("empty", "is empty"),
        ("fifo", "is a FIFO, device or socket, not a regular file"),
        ("device", "is a FIFO, device or socket, not a regular file"),
        ("huge", f"is larger than {MAX_INPUT_BYTES} bytes"),
        ("directory", "is a directory, not a regular file"),
        ("long name", "has a name longer than 255 bytes"),
        pytest.param("unreadable", "is not readable by you", marks=as_a_user),
    ],
)
@pytest.mark.parametrize("which", ["params_file", "pipeline"])
def test_a_params_file_or_snakefile_the_engine_cannot_use_is_refused_with_slurm_double(
    tmp_path: Path, which: str, case: str, said: str
) -> None:
    path = {
        "missing": tmp_path / "nope.yaml",
        "empty": tmp_path / "empty.yaml",
        "fifo": tmp_path / "fifo.yaml",
        "device": Path("/dev/zero"),
        "huge": tmp_path / "huge.yaml",
        "directory": tmp_path / "adir",
        "long name": tmp_path / ("p" * 300),
        "unreadable": tmp_path / "secret.yaml",
    }[case]
    if case == "empty":
        path.write_text("")
    elif case == "fifo":
        os.mkfifo(path)
    elif case == "huge":  # sparse: 8 GiB without the disk
        with path.open("wb") as handle:
            handle.truncate(8 << 30)
    elif case == "directory":
        path.mkdir()
    elif case == "unreadable":
        path.write_text("a: 1\n")
        path.chmod(0)
    if case == "device":  # outside the allowed roots: the roots' check says so first
        with pytest.raises(JobsmithError, match="outside the allowed roots"):
            _refused(tmp_path, _request(tmp_path, **{which: str(path)}))
        return
    line = _refused(tmp_path, _request(tmp_path, **{which: str(path)}))
    named = "--params-file" if which == "params_file" else "the Snakefile"
    assert line.startswith(f"pipeline: {named} '{path}' {said}: "), line
    assert "name a readable, non-empty regular file" in line, line


def test_usable_paths_launch_and_a_launch_dir_to_be_created_is_fine_with_slurm_double(
    tmp_path: Path,
) -> None:
    h, pipes, _ = _pipes(tmp_path)
    params = _file(tmp_path / "config.yaml", "samples: [a]\n")
    request = _request(tmp_path, launch_dir=str(tmp_path / "runs" / "new"), params_file=str(params))
    _run(pipes, request)
    assert len(h.slurm.jobs) == 1


def test_resume_refuses_a_launch_dir_replaced_by_a_file_since_with_slurm_double(
    tmp_path: Path,
) -> None:
    h, pipes, statuses = _pipes(tmp_path)
    (tmp_path / "run").mkdir()
    session = _run(pipes, _request(tmp_path))
    (head,) = h.slurm.jobs
    statuses[head] = JobStatus(job_id=head, state=JobState.FAILED)
    (tmp_path / "run").rmdir()
    _file(tmp_path / "run")
    with pytest.raises(InputError, match=r"^pipeline: --launch-dir '.*/run' is not a directory: "):
        pipes.resume(session)
    assert list(h.slurm.jobs) == [head]  # nothing more submitted


def _login_node_answer(argv: tuple[str, ...]) -> tuple[str, str, int]:
    """A login node where the launch directory is a file and the engine is found."""
    if argv[0] == "sh":
        return "1\tis not a directory\n", "", 1
    return "/opt/bin/snakemake\n", "", 0


def test_over_ssh_the_paths_are_checked_on_the_login_node_not_here_with_slurm_double(
    tmp_path: Path,
) -> None:
    """Usable here (a directory to be created), not there: refused with the login node's
    word, and the paths went to it as arguments, never as code."""
    login = ScriptedTransport(_login_node_answer)
    h, pipes, _ = _pipes(tmp_path, login)
    request = _request(tmp_path)
    with pytest.raises(InputError, match=r"--launch-dir '.*/run' is not a directory"):
        _run(pipes, request)
    (check,) = [c for c in login.calls if c[0] == "sh"]
    assert check[-4:] == ("dir", request.launch_dir, "file", request.pipeline)
    assert request.launch_dir not in check[2]
    assert h.slurm.jobs == {} and h.store.list_sessions() == []


def test_the_cli_refuses_a_fifo_as_launch_dir_in_one_line_with_slurm_double(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through `jobsmith pipeline run`, with the lab's own site file and a recording
    transport that runs this check where it stands, as a login node sharing this file
    system would."""
    from lab_cli import LAB_SITE
    from test_cli_fuzz_with_slurm_double import RecordingSlurmDouble

    from jobsmith.agent.app import App, UserDirs
    from jobsmith.agent.faces.cli import cli

    class SharedFileSystem(RecordingSlurmDouble):
        def answer(self, argv: tuple[str, ...], **run: Any) -> Reply:
            if argv[0] == "sh":
                return LocalTransport().run(argv, timeout=30)
            return super().answer(argv, **run)

    home = tmp_path / "home"
    home.mkdir()
    fifo = _fifo(home / "fifo")
    _file(home / "Snakefile", "rule all:\n")
    env = {"HOME": str(tmp_path), "USER": "alice", "PATH": os.environ["PATH"]}
    transport = SharedFileSystem()
    app = App(
        paths=UserDirs(config_dir=home / "config", state_dir=home / "state"),
        environ=env,
        site_file=LAB_SITE,
        transport_override=transport,
    )
    monkeypatch.chdir(home)
    argv = ["pipeline", "run", "snakemake", "Snakefile", "--launch-dir", str(fifo), "--json"]
    out = CliRunner().invoke(cli, argv, obj=app, env=env)
    assert out.exit_code == 2, out.output
    (line,) = out.stderr.strip().splitlines()
    said = f"jobsmith: error: pipeline: --launch-dir '{fifo}' is not a directory: "
    assert line.startswith(said), line
    assert not [c for c in transport.calls if c[0] == "sbatch"]  # nothing submitted

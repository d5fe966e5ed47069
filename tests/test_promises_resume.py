"""`sessions resume` when it cannot be sure (issue 16, part 2): exit 9, nothing submitted.

Resume submits a cut-short submission again only once "not found in Slurm" is final.
Two things keep it from being final: the dead process's sbatch may still be running
(it runs in its own session and can submit after resume looked), and slurmdbd may not
have caught up with the controller. Here the first is real: the crash driver of
tests/test_crash.py is SIGKILLed while a slow sbatch runs, and that sbatch lives on.
The second cannot be produced on the lab (the lab user may not stop slurmdbd), so the
real `sdiag`'s report is passed through a double that changes only its backlog figure.
Once the doubt is gone, a second resume submits the step exactly once.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from lab_cli import LAB_SITE, jobs_named, write_user_site

from jobsmith.agent.faces.cli import cli
from jobsmith.agent.runtime.session.store import FileSessionStore

HERE = Path(__file__).resolve().parent
STEP = "st-plan-a"  # the crash driver's first step

pytestmark = pytest.mark.usefixtures("lab_cluster")


def resume(session: str, wait_s: int) -> Result:
    return CliRunner().invoke(
        cli,
        ["--site", str(LAB_SITE), "sessions", "resume", session, "--wait", str(wait_s), "--json"],
        catch_exceptions=False,
    )


def crash_driver(store: FileSessionStore, workdir: Path, env: dict[str, str]) -> str:
    """Run tests/crash_driver.py into a new session until the fault in env kills it."""
    session = store.create({"title": "undecided resume"})
    driver = [sys.executable, str(HERE / "crash_driver.py"), str(LAB_SITE), session, str(workdir)]
    killed = subprocess.run(driver, env=env, cwd=workdir, capture_output=True, text=True)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    return session


def job_name_of(store: FileSessionStore, session: str) -> str:
    intent = next(e for e in store.read(session) if e.kind.value == "intent")
    assert intent.step_id == STEP
    return str(intent.data["job_name"])


def nothing_submitted(store: FileSessionStore, session: str, name: str, home: Path) -> None:
    assert jobs_named(name) == set()
    assert not [e for e in store.read(session) if e.kind.value == "result"]
    assert not list((home / "state" / "jobs").glob("*.json"))


@pytest.fixture
def orphan_sbatch(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """(PATH entry, pid file) of an sbatch that sleeps 30 s before running the real one.

    Whatever a test does, its process group is killed at the end, so it never submits.
    """
    shim = tmp_path / "shim"
    shim.mkdir()
    pids = tmp_path / "sbatch.pids"
    real = shutil.which("sbatch")
    assert real is not None
    (shim / "sbatch").write_text(f'#!/bin/sh\necho $$ >> {pids}\nsleep 30\nexec {real} "$@"\n')
    (shim / "sbatch").chmod(0o755)
    yield shim, pids
    for pid in pids.read_text().split() if pids.exists() else []:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(int(pid), signal.SIGKILL)  # sbatch runs in its own session and group


def test_resume_leaves_a_step_undecided_while_its_sbatch_still_runs(
    jobsmith_home: Path, workdir: Path, orphan_sbatch: tuple[Path, Path]
) -> None:
    write_user_site(jobsmith_home / "config", workdir)
    store = FileSessionStore(jobsmith_home / "state" / "sessions")
    shim, pids = orphan_sbatch
    env = {**os.environ, "PATH": f"{shim}:{os.environ['PATH']}"}
    session = crash_driver(store, workdir, {**env, "JOBSMITH_FAULT_KILL_IN_SBATCH": "1"})
    deadline = time.monotonic() + 5
    while not pids.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert pids.exists(), "the slow sbatch never started"
    name = job_name_of(store, session)

    begun = time.monotonic()
    undecided = resume(session, 2)  # resume's own lookups use the real Slurm commands
    assert undecided.exit_code == 9, undecided.output
    assert time.monotonic() - begun < 20  # it gave up after --wait, not after the orphan
    report = json.loads(undecided.stdout)
    assert report["found"] == [] and report["resubmitted"] == [] and report["rerun"] == []
    assert report["undecided"] == {
        STEP: f"an sbatch for {name} is still running, or slurmdbd is still catching up"
    }
    nothing_submitted(store, session, name, jobsmith_home)

    for pid in pids.read_text().split():  # the orphan dies without submitting
        os.killpg(int(pid), signal.SIGKILL)
    time.sleep(0.5)
    final = resume(session, 10)
    assert final.exit_code == 0, final.output
    assert json.loads(final.stdout)["resubmitted"] == [STEP]
    assert len(jobs_named(name)) == 1


def install_dbd_backlog_double(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An `sdiag` on PATH: the real one's report with a DBD agent queue of 7 messages.

    Returns the file each call is counted in.
    """
    real = shutil.which("sdiag")
    assert real is not None
    shim = tmp_path / "sdiag-double"
    shim.mkdir()
    calls = tmp_path / "sdiag.calls"
    (shim / "sdiag").write_text(
        f"#!/bin/sh\necho call >> {calls}\n"
        f'{real} "$@" | sed "s/^DBD Agent queue size: *[0-9]*/DBD Agent queue size: 7/"\n'
    )
    (shim / "sdiag").chmod(0o755)
    monkeypatch.setenv("PATH", f"{shim}:{os.environ['PATH']}")
    return calls


def test_resume_leaves_a_step_undecided_during_a_dbd_backlog_reported_by_an_sdiag_double(
    jobsmith_home: Path, workdir: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    write_user_site(jobsmith_home / "config", workdir)
    store = FileSessionStore(jobsmith_home / "state" / "sessions")
    # killed right after its first event, the intent: its sbatch never started
    session = crash_driver(store, workdir, {**os.environ, "JOBSMITH_FAULT_KILL_AFTER_EVENTS": "1"})
    name = job_name_of(store, session)
    clean_path = os.environ["PATH"]
    calls = install_dbd_backlog_double(tmp_path, monkeypatch)

    undecided = resume(session, 2)
    assert undecided.exit_code == 9, undecided.output
    assert calls.exists(), "the sdiag double was never asked"
    assert json.loads(undecided.stdout)["undecided"] == {
        STEP: f"an sbatch for {name} is still running, or slurmdbd is still catching up"
    }
    nothing_submitted(store, session, name, jobsmith_home)

    monkeypatch.setenv("PATH", clean_path)  # the backlog drained
    final = resume(session, 10)
    assert final.exit_code == 0, final.output
    assert json.loads(final.stdout)["resubmitted"] == [STEP]
    assert len(jobs_named(name)) == 1

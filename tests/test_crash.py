"""Kill the agent at every step boundary of a multi-job scenario, resume, and check Slurm.

The driver (tests/crash_driver.py) submits three jobs in one session through the real
executor and the real lab cluster. It is SIGKILLed right after each of its committed
events, and while each of its sbatch calls is still running (sbatch is slowed by a shim
that sleeps before running the real sbatch, so it outlives the killed driver and submits
after it died). Then `jobsmith sessions resume` reconciles, the driver runs again to
finish its plan, and the test checks against sacct/squeue that every job exists exactly
once, and against the log that no committed event was lost.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from lab_cli import LAB_SITE, jobs_named, write_user_site

from jobsmith.agent.faces.cli import cli
from jobsmith.agent.runtime.session.store import FileSessionStore

HERE = Path(__file__).resolve().parent
PLAN_STEPS = ["st-plan-a", "st-plan-b", "st-plan-c"]
# events the driver commits: intent + result per step
BOUNDARIES = [("after_event", n) for n in range(1, 7)] + [("in_sbatch", n) for n in (1, 2, 3)]

pytestmark = pytest.mark.usefixtures("lab_cluster")


@pytest.fixture
def slow_sbatch(tmp_path: Path) -> Path:
    """A PATH entry whose sbatch waits 1.5 s, then runs the real one (timing only)."""
    shim = tmp_path / "shim"
    shim.mkdir()
    real = subprocess.run(["sh", "-c", "command -v sbatch"], capture_output=True, text=True)
    (shim / "sbatch").write_text(f'#!/bin/sh\nsleep 1.5\nexec {real.stdout.strip()} "$@"\n')
    (shim / "sbatch").chmod(0o755)
    return shim


def _job_names(store: FileSessionStore, session_id: str) -> list[str]:
    names = set()
    for event in store.read(session_id):
        if event.kind.value == "intent" and "job_name" in event.data:
            names.add(str(event.data["job_name"]))
    return sorted(names)


@pytest.mark.parametrize("kind,n", BOUNDARIES, ids=[f"{k}-{n}" for k, n in BOUNDARIES])
def test_kill_at_boundary_then_resume_submits_each_job_once(
    kind: str,
    n: int,
    jobsmith_home: Path,
    workdir: Path,
    slow_sbatch: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    write_user_site(jobsmith_home / "config", workdir)
    store = FileSessionStore(jobsmith_home / "state" / "sessions")
    session = store.create({"title": f"crash test {kind} {n}"})
    env = {**os.environ, "PATH": f"{slow_sbatch}:{os.environ['PATH']}"}
    fault = (
        "JOBSMITH_FAULT_KILL_AFTER_EVENTS"
        if kind == "after_event"
        else ("JOBSMITH_FAULT_KILL_IN_SBATCH")
    )
    driver = [sys.executable, str(HERE / "crash_driver.py"), str(LAB_SITE), session, str(workdir)]
    killed = subprocess.run(
        driver, env={**env, fault: str(n)}, cwd=workdir, capture_output=True, text=True
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    before = [e.model_dump(mode="json") for e in store.read(session)]

    monkeypatch.setenv("PATH", env["PATH"])
    resumed = CliRunner().invoke(
        cli,
        ["--site", str(LAB_SITE), "sessions", "resume", session, "--json"],
        catch_exceptions=False,
    )
    assert resumed.exit_code == 0, resumed.output
    report = json.loads(resumed.stdout)
    assert report["undecided"] == {}
    if kind == "in_sbatch":
        # the orphaned sbatch submitted after the driver died: found, not resubmitted
        assert report["found"] == [PLAN_STEPS[n - 1]], report

    finished = subprocess.run(driver, env=env, cwd=workdir, capture_output=True, text=True)
    assert finished.returncode == 0, finished.stderr

    after = [e.model_dump(mode="json") for e in store.read(session)]
    assert after[: len(before)] == before  # no committed event lost or changed
    assert [e["seq"] for e in after] == list(range(len(after)))
    results = [e for e in after if e["kind"] == "result"]
    assert sorted(e["step_id"] for e in results) == PLAN_STEPS  # one result per step
    names = _job_names(store, session)
    assert len(names) == 3
    for name in names:
        assert len(jobs_named(name)) == 1, name

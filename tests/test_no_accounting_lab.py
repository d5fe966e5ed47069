"""A site without accounting, for real: the lab cluster switched to
AccountingStorageType=accounting_storage/none (issue 15, part 1).

Disruptive: `jobsmith-slurm-lab accounting off` restarts slurmctld and slurmd, so this runs
alone, and the fixture always switches accounting back on, whatever happened. One test,
to keep the lab switched for as short a time as possible (about 2 minutes, most of it
waiting for the controller to forget a finished job).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from lab_cli import LAB_SITE, js

from jobsmith.agent.runtime.session.store import FileSessionStore

pytestmark = [pytest.mark.disruptive, pytest.mark.usefixtures("lab_cluster")]

LAB = "/usr/local/sbin/jobsmith-slurm-lab"
#: the lab's MinJobAge is 30 s; slurmctld purges finished jobs on its own beat after that
FORGET_TIMEOUT_S = 240


def switch_accounting(mode: str) -> None:
    subprocess.run(["sudo", "-n", LAB, "accounting", mode], check=True, timeout=300)


@pytest.fixture
def accounting_off() -> Iterator[None]:
    """The lab without accounting for one test; back on afterwards, even on failure."""
    try:
        switch_accounting("off")
        yield
    finally:
        switch_accounting("on")


def in_controller(job_id: str) -> bool:
    out = subprocess.run(
        ["squeue", "--me", "-h", "-t", "all", "-o", "%i"], capture_output=True, text=True
    )
    return job_id in out.stdout.split()


def crash_after_intent(workdir: Path) -> str:
    """A `jobsmith submit` killed right after its intent, before sbatch: its session."""
    argv = [sys.executable, "-m", "jobsmith", "--site", str(LAB_SITE), "submit", "command"]
    argv += ["-P", "command=true", "--log-dir", str(workdir)]
    env = {**os.environ, "JOBSMITH_FAULT_KILL_AFTER_EVENTS": "1"}
    killed = subprocess.run(argv, env=env, cwd=workdir, capture_output=True, text=True)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    store = FileSessionStore(Path(os.environ["JOBSMITH_STATE_DIR"]) / "sessions")
    cut = [i.id for i in store.list_sessions() if store.read(i.id)[-1].kind.value == "intent"]
    assert len(cut) == 1, cut
    return cut[0]


@pytest.mark.usefixtures("accounting_off", "user_site")
def test_without_accounting_jobs_are_followed_through_the_controller_alone(
    workdir: Path,
) -> None:
    sacct = subprocess.run(["sacct", "-j", "1"], capture_output=True, text=True)
    assert "accounting storage is disabled" in sacct.stderr  # the lab really is switched

    # a job submitted through jobsmith fails; wait sees it through squeue alone
    sub = js("submit", "command", "-P", "command=exit 3", "--log-dir", str(workdir))
    assert sub.exit_code == 0, sub.output
    job = sub.stdout.strip()
    waited = js("wait", job, "--timeout", "60", "--json")
    assert waited.exit_code == 1, waited.output  # a failure, as with accounting
    assert json.loads(waited.stdout)["jobs"][0]["state"] == "FAILED"

    # the watcher polling every 60 s, above MinJobAge (30 s): it says so
    watched = js("watch", "--once", "--interval", "60", "--json")
    assert watched.exit_code == 0, watched.output
    (warning,) = json.loads(watched.stdout)["warnings"]
    assert "MinJobAge" in warning and "below 30s" in warning
    quiet = js("watch", "--once", "--interval", "20", "--json")
    assert json.loads(quiet.stdout)["warnings"] == []

    # a job submitted by hand, never seen to end: once forgotten, FINAL_UNKNOWN, not failed
    hand = subprocess.run(
        ["sbatch", "--parsable", "-o", "/dev/null", "--wrap", "exit 4"],
        capture_output=True,
        text=True,
        check=True,
        cwd=workdir,
    ).stdout.strip()
    deadline = time.monotonic() + FORGET_TIMEOUT_S
    while in_controller(hand) or in_controller(job):
        assert time.monotonic() < deadline, "the controller kept finished jobs too long"
        time.sleep(3)
    unseen = js("wait", hand, "--timeout", "30", "--json")
    assert unseen.exit_code == 9, unseen.output
    assert json.loads(unseen.stdout)["jobs"][0]["state"] == "FINAL_UNKNOWN"
    # the jobsmith job's end was recorded while visible: status still knows it failed
    status = js("status", job, "--json")
    assert status.exit_code == 0, status.output
    assert json.loads(status.stdout)["jobs"][0]["state"] == "FAILED"

    # crash recovery: Slurm never got this one, but without accounting that cannot be known
    session = crash_after_intent(workdir)
    resumed = js("sessions", "resume", session, "--wait", "0", "--json")
    assert resumed.exit_code == 9, resumed.output
    report = json.loads(resumed.stdout)
    assert report["resubmitted"] == [] and report["found"] == []
    (why,) = report["undecided"].values()
    assert "keeps no accounting" in why

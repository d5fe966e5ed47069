"""A fed workload named by its step id on the lab cluster (issue 28, the fed workload's
gaps): the user's own five `sbatch` jobs fill QoS `tiny` (MaxSubmitJobsPerUser 5, made
by `scripts/slurm-lab up`), so a 10-task array submitted through jobsmith has no job at
first, and its step id is the only name it has.

- `cancel STEP_ID` of that workload exits 0 and records it cancelled: once the user's
  jobs have ended and a watcher cycle has run, nothing of it ever reached Slurm (neither
  the queue nor accounting has a job of its name, no task wrote its file), and `status
  STEP_ID` says cancelled; a second cancel says so, exit 0.
- `wait STEP_ID` on a workload that starts unfed feeds it as it polls (no watcher runs)
  and returns 0 once every task completed, each task having run once.

Runs as alice (`asalice-wt WORKTREE tests/test_feeder_ids_lab.py`)."""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from lab_cli import fill_tiny, js, queued_in_tiny
from test_feeder_later_lab import SITE

#: alone: it fills QoS tiny's whole per-user limit, which tests/test_submit_limits_lab.py
#: and tests/test_feeder_lab.py need empty
pytestmark = [pytest.mark.usefixtures("lab_cluster"), pytest.mark.alone]


@pytest.fixture
def tiny_full() -> Iterator[list[str]]:
    """QoS tiny filled with the user's own five sleeps (not jobsmith's); cancelled after."""
    with fill_tiny(120) as own:
        yield own


def room(own: list[str]) -> None:
    """The user's own jobs end (scancel): QoS tiny is empty again."""
    subprocess.run(["scancel", *own], check=True)
    deadline = time.monotonic() + 60
    while queued_in_tiny() and time.monotonic() < deadline:
        time.sleep(1)
    assert queued_in_tiny() == []


def jobs_named_like(prefix: str) -> list[str]:
    """Every job (an array once, by its id) whose name starts with prefix that the queue
    or accounting has, as `NAME|ID` (a part's name is the workload's with `.pN` added)."""
    since = (datetime.now() - timedelta(minutes=30)).strftime("%Y-%m-%dT%H:%M:%S")
    acct = subprocess.run(
        ["sacct", "-X", "-n", "-P", "-S", since, "--format=JobName,JobID"],
        capture_output=True, text=True, check=True,
    ).stdout.splitlines()  # fmt: skip
    queue = subprocess.run(
        ["squeue", "--me", "-h", "-t", "all", "-o", "%j|%i"],
        capture_output=True, text=True, check=True,
    ).stdout.splitlines()  # fmt: skip
    return sorted({line.split("_")[0] for line in acct + queue if line.startswith(prefix)})


def submit_unfed(workdir: Path, name: str) -> str:
    """A 10-task workload none of whose parts fits; its step id."""
    sub = js(
        "submit", "command", "-a", "0-9", "--qos", "tiny", "-t", "1", "--no-advice",
        "-J", name, "-P", "command=echo run >> ran_$SLURM_ARRAY_TASK_ID",
        "--log-dir", str(workdir), "--json",
    )  # fmt: skip
    assert sub.exit_code == 0, sub.output
    doc = json.loads(sub.stdout)
    assert (doc["job_id"], doc["not_yet_submitted"]) == (None, 10), doc
    return str(doc["step_id"])


def test_an_unfed_workload_cancelled_by_its_step_id_never_reaches_slurm(
    user_site: Callable[[str], None], workdir: Path, tiny_full: list[str]
) -> None:
    user_site(SITE)
    name = f"idscancel{uuid.uuid4().hex[:6]}"
    step_id = submit_unfed(workdir, name)
    cancelled = js("cancel", step_id)
    assert cancelled.exit_code == 0, cancelled.output
    assert cancelled.stdout.startswith(f"cancelled workload {step_id}"), cancelled.stdout
    room(tiny_full)
    for _ in range(2):  # the watcher's cycles, with room: nothing of it is fed
        assert js("watch", "--once").exit_code == 0
    assert jobs_named_like(name) == []
    assert list(workdir.glob("ran_*")) == []
    shown = js("status", step_id)
    assert shown.exit_code == 0, shown.output
    line = "10 tasks: 0 done, 0 running, 10 not to be submitted (cancelled)"
    assert f"workload {step_id}: {line}" in shown.stdout, shown.stdout
    again = js("cancel", step_id)
    assert (again.exit_code, again.stdout) == (0, f"workload {step_id} is already cancelled\n")


def test_wait_on_a_workload_that_starts_unfed_returns_0_once_every_task_ran_once(
    user_site: Callable[[str], None], workdir: Path, tiny_full: list[str]
) -> None:
    user_site(SITE)
    name = f"idswait{uuid.uuid4().hex[:6]}"
    step_id = submit_unfed(workdir, name)
    room(tiny_full)  # no watcher runs: the wait feeds it
    started = time.monotonic()
    waited = js("wait", step_id, "--timeout", "300", "--json")
    took = time.monotonic() - started
    assert waited.exit_code == 0, waited.output
    [job] = json.loads(waited.stdout)["jobs"]
    assert (job["job_id"], job["state"]) == (step_id, "COMPLETED"), job
    ran = {p.name: p.read_text() for p in workdir.glob("ran_*")}
    assert ran == {f"ran_{i}": "run\n" for i in range(10)}, (ran, took)
    parts = jobs_named_like(name)
    assert len(parts) == 2, parts  # 10 tasks in two parts of 5: the QoS's limit
    shown = json.loads(js("status", step_id, "--json").stdout)["workloads"]
    assert [w["line"] for w in shown] == ["10 tasks: 10 done, 0 running, 0 not yet submitted"]

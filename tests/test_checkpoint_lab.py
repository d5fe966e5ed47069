"""Checkpointable jobs on the real lab: preempted, or at their time limit, they save,
requeue and resume, and jobsmith follows them as one job (issue 27, item 2).

The lab's partition `preempt` is preempted by `high` with a GraceTime of 20 s, and Slurm
sends the job's --signal at preemption (scripts/slurm-lab). On three nodes each node has
the machine's 2 CPUs: a job asking 2 CPUs on n1 fills it, so a `high` job pinned to n1
can only start by preempting it. The job's program is a counter that continues from its
last checkpoint, so its own log proves where each run began.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest
from lab_cli import js, watch_until

pytestmark = pytest.mark.usefixtures("multinode_lab", "user_site")

#: counts to $1, a second a step, from the count in ./state; saves the count when
#: ./ckpt.request appears (and removes it), and logs each run's start and end to ./runs
_COUNTER = """#!/bin/bash
n=$(cat state 2>/dev/null || echo 0)
echo "start $n restart ${SLURM_RESTART_COUNT:-0} on $SLURMD_NODENAME" >> runs
while [ "$n" -lt "$1" ]; do
  n=$((n + 1))
  if [ -e ckpt.request ]; then echo "$n" > state; echo "saved $n" >> runs; rm -f ckpt.request; fi
  sleep 1
done
echo "$n" > state
echo "finished $n" >> runs
"""
#: what --checkpoint runs: ask the counter to save, and wait (5 s at most) until it did
_ASK_TO_SAVE = (
    "touch ckpt.request; for i in $(seq 50); do [ -e ckpt.request ] || exit 0; sleep 0.1; done"
)


def _counter(workdir: Path) -> str:
    path = workdir / "counter.sh"
    path.write_text(_COUNTER)
    path.chmod(0o755)
    return str(path)


def _runs(workdir: Path) -> list[str]:
    path = workdir / "runs"
    return path.read_text().splitlines() if path.exists() else []


def _submitted(*args: str) -> str:
    result = js("submit", "command", *args, "--json")
    assert result.exit_code == 0, result.output
    return str(json.loads(result.stdout)["job_id"])


def _until(done, timeout_s: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while not done():
        assert time.monotonic() < deadline, f"not within {timeout_s} s: {what}"
        time.sleep(1)


def _status(job_id: str) -> dict[str, object]:
    result = js("status", job_id, "--json")
    assert result.exit_code == 0, result.output
    job: dict[str, object] = json.loads(result.stdout)["jobs"][0]
    return job


def test_a_preempted_job_checkpoints_is_requeued_and_resumes(workdir: Path) -> None:
    counter = _counter(workdir)
    job_id = _submitted(
        "-p", "preempt", "-c", "2", "--mem", "200M", "-t", "10", "--exclude", "n2,n3",
        "--checkpoint", _ASK_TO_SAVE, "--signal-lead", "60", "--max-requeues", "2",
        "--log-dir", str(workdir), "-P", f"command={counter} 45",
    )  # fmt: skip
    _until(lambda: len(_runs(workdir)) >= 1, 120, "the job started")
    time.sleep(4)  # a few counts to save
    high = subprocess.run(
        ["sbatch", "--parsable", "-p", "high", "-w", "n1", "-c", "2", "--mem", "200M",
         "-t", "2", "-o", "/dev/null", "--wrap", "sleep 5"],
        capture_output=True, text=True, check=True, cwd=workdir,
    )  # fmt: skip
    assert high.stdout.strip()
    seen = watch_until(lambda w: w.states.get(job_id) == "COMPLETED", 300, every_s=3)
    assert seen.states.get(job_id) == "COMPLETED", (seen, _runs(workdir))
    runs = _runs(workdir)
    saved = [int(line.split()[1]) for line in runs if line.startswith("saved")]
    starts = [line for line in runs if line.startswith("start")]
    assert len(saved) == 1 and saved[0] > 1, runs  # saved once, at preemption
    assert starts[:2] == [
        "start 0 restart 0 on n1",
        f"start {saved[0]} restart 1 on n1",  # resumed from its checkpoint
    ], runs
    assert runs.index("finished 45") > runs.index(starts[1]), runs
    # Slurm 24.11.5 requeues a job preempted with a GraceTime once more when its next run
    # ends (docs/lab-multinode.md): that run starts from the end its program saved
    assert starts[2:] in ([], ["start 45 restart 2 on n1"]), runs
    # one job, preempted (once, or as 24.11 records it), never a failure: no decision
    assert seen.decisions == [], seen.decisions
    restarts = len(starts) - 1
    job = _status(job_id)
    assert job["state"] == "COMPLETED" and job["restarts"] == restarts, job
    assert job["requeued"] == f"preempted {restarts}×, resumed", job
    assert job["record"]["requeues"] == ["PREEMPTED"] * restarts, job  # type: ignore[index]
    table = js("status", job_id)
    assert f"preempted {restarts}×, resumed" in table.stdout, table.stdout


def test_a_job_at_its_time_limit_checkpoints_and_finishes_within_its_bound(
    workdir: Path,
) -> None:
    counter = _counter(workdir)
    # -t 1 with a 20 s lead: Slurm sends USR1 20 to 80 s before the end (its timer is
    # coarse), so each run counts 0 to 40: 70 counts take two to four runs
    job_id = _submitted(
        "-p", "debug", "--mem", "200M", "-t", "1", "--exclude", "n3",
        "--checkpoint", _ASK_TO_SAVE, "--signal-lead", "20", "--max-requeues", "4",
        "--log-dir", str(workdir), "-P", f"command={counter} 70",
    )  # fmt: skip
    seen = watch_until(lambda w: w.states.get(job_id) == "COMPLETED", 420, every_s=3)
    runs = _runs(workdir)
    assert seen.states.get(job_id) == "COMPLETED", (seen, runs)
    starts = [line.split() for line in runs if line.startswith("start")]
    saved = [int(line.split()[1]) for line in runs if line.startswith("saved")]
    assert 2 <= len(starts) <= 5, runs  # requeued at least once, within the bound of 4
    assert [int(s[1]) for s in starts] == [0, *saved], runs  # each run resumed the last save
    assert [int(s[3]) for s in starts] == list(range(len(starts))), runs  # restart counts
    assert runs[-1] == "finished 70", runs
    assert seen.decisions == [], seen.decisions
    job = _status(job_id)
    assert job["restarts"] == len(starts) - 1, job
    assert job["record"]["requeues"] == ["REQUEUED"] * (len(starts) - 1), job  # type: ignore[index]
    assert job["requeued"] == f"requeued {len(starts) - 1}×, resumed", job

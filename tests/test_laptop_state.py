"""The laptop's state is the laptop's (issue 29 item 4): sessions, approvals and the
watcher live on the laptop, and a laptop whose watcher was stopped for longer than the
cluster's MinJobAge catches up in one poll, from accounting (sacct over SSH), and reports
what ended in the meantime.

Runs in the laptop stage only (`scripts/slurm-other laptop-test`), like
tests/test_laptop_stage.py: elsewhere the "laptop" and the login node share one home and
one filesystem, and state kept on the wrong side would not show.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from login_node import Cluster, checked, login_node

pytestmark = pytest.mark.slow  # the controller must forget the jobs: MinJobAge and its purge

#: a job above this many core-hours waits for a person (the others stay below it)
APPROVAL = "policy:\n  approval:\n    core_hours: 0.4\n"
#: how long each job runs: long enough that the first watcher cycle sees none of them end
RUN_S = 15
#: how long the controller may take to forget an ended job: MinJobAge plus its purge,
#: which slurmctld runs about once a minute
FORGET_S = 240


@pytest.fixture
def cluster() -> Cluster:
    node = login_node()
    if not isinstance(node, Cluster):
        pytest.skip("runs in the laptop stage only: scripts/slurm-other laptop-test")
    return node


def min_job_age_s(cluster: Cluster) -> int:
    """The cluster's MinJobAge, from its controller (`scontrol show config`, over SSH)."""
    config = checked(cluster, ["scontrol", "show", "config"])
    found = re.search(r"^MinJobAge\s*=\s*(\d+)", config, re.MULTILINE)
    assert found, config
    return int(found.group(1))


def in_queue(cluster: Cluster, job_ids: set[str]) -> set[str]:
    """Which of job_ids the controller still shows (any state; an array by its id)."""
    shown = checked(cluster, ["squeue", "-h", "-t", "all", "-o", "%A %F"]).split()
    return job_ids & set(shown)


def jobsmith_state_there(cluster: Cluster, sessions: set[str], job_ids: set[str]) -> str:
    """Files of the cluster user's home that hold jobsmith state of these sessions and
    jobs: named after a session or holding its id, or a job record (jobs/ID.json) of a
    jobsmith directory."""
    script = (
        'for s in $1; do find "$HOME" -xdev -name "*$s*" -print;'
        '  grep -rlsF -- "$s" "$HOME/.local" "$HOME/.config" "$HOME/.cache" || true; done;'
        ' for j in $2; do find "$HOME" -xdev -path "*jobsmith*/jobs/$j.json" -print; done'
    )
    names = [" ".join(sorted(sessions)), " ".join(sorted(job_ids))]
    return checked(cluster, ["sh", "-c", script, "sh", *names])


def test_a_watcher_stopped_past_min_job_age_catches_up_in_one_poll_from_the_laptop(
    cluster: Cluster, tmp_path: Path
) -> None:
    """From the laptop: four jobs (one fails, one is an array, one waits for a person's
    approval first), one watcher cycle while they run, then no watcher until the cluster's
    controller has forgotten them all (squeue over SSH shows none, longer than MinJobAge
    after they ended). One `watch --once` then records every end, from sacct (exit codes,
    the array's tasks), decides about the failure, and `status` agrees; a second cycle
    has nothing left to follow. Sessions, the approval and the job records are in the
    laptop's directories; the cluster user's home holds none of it."""
    from lab_cli import write_user_site
    from sshd import start_sshd
    from test_ssh_transport import jobsmith, laptop_env, remote_site

    there = Path(f"/scratch/{cluster.user}/js-laptop-{uuid.uuid4().hex[:12]}")
    checked(cluster, ["mkdir", "-p", str(there)])
    assert not there.exists()  # the logs are written there, not here
    sshd = start_sshd(tmp_path / "sshd", node=cluster)
    try:
        known = tmp_path / "known_hosts"
        known.write_text(sshd.known_hosts_line())
        site = remote_site(tmp_path, sshd, known)
        home = tmp_path / "home"
        env = laptop_env(home)
        write_user_site(home / "config", there, APPROVAL)

        def run(*args: str, code: int = 0) -> Any:
            res = jobsmith(env, tmp_path, site, *args)
            assert res.returncode == code, (args, res.stdout, res.stderr)
            return res

        def submit(*args: str, minutes: int = 5, code: int = 0) -> dict[str, Any]:
            res = run("submit", "command", "-t", str(minutes), *args, "--log-dir", str(there),
                      "--no-advice", "--json", code=code)  # fmt: skip
            return json.loads(res.stdout) if code == 0 else {}

        sleep = f"sleep {RUN_S}"
        ok = submit("-P", f"command={sleep}; echo fine")
        failed = submit("-P", f"command={sleep}; echo 'it broke' >&2; exit 3")
        array = submit("-a", "0-1", "-P", f"command={sleep}; echo task $SLURM_ARRAY_TASK_ID")
        submit("-P", f"command={sleep}; echo approved", minutes=30, code=8)  # 0.5 core-hour
        (held,) = json.loads(run("pending", "--json").stdout)["pending"]
        approved = json.loads(run("approve", held["step_id"], "--json").stdout)
        assert approved["outcome"] == "done", approved
        jobs = {
            "ok": str(ok["job_id"]),
            "failed": str(failed["job_id"]),
            "array": str(array["job_id"]),
            "approved": str(approved["summary"]["job_id"]),
        }
        ids = set(jobs.values())

        first = json.loads(run("watch", "--once", "--json").stdout)  # then it stops
        assert first["scheduler_ok"] is True and first["watched"] == 4, first
        assert all(c["state"] in ("PENDING", "RUNNING") for c in first["changes"]), first
        assert in_queue(cluster, ids) == ids  # the controller still has them all

        stopped = time.monotonic()
        while in_queue(cluster, ids) and time.monotonic() - stopped < FORGET_S:
            time.sleep(5)
        assert in_queue(cluster, ids) == set(), f"still in squeue after {FORGET_S} s"
        assert time.monotonic() - stopped > min_job_age_s(cluster)

        logins = sshd.logins()
        cycle = json.loads(run("watch", "--once", "--json").stdout)
        assert sshd.logins() - logins == 1  # one process, one connection: one catch-up
        assert cycle["scheduler_ok"] is True and cycle["watched"] == 4, cycle
        ended = {c["job_id"]: c["state"] for c in cycle["changes"]}
        want = {jobs["ok"]: "COMPLETED", jobs["failed"]: "FAILED", jobs["array"]: "COMPLETED",
                jobs["approved"]: "COMPLETED"}  # fmt: skip
        assert ended == want, cycle
        (decision,) = cycle["decisions"]
        assert decision["job_id"] == jobs["failed"], decision

        status = json.loads(run("status", *sorted(ids), "--json").stdout)["jobs"]
        seen = {j["job_id"]: j for j in status}
        assert {j: s["state"] for j, s in seen.items()} == want, status
        assert seen[jobs["failed"]]["record"]["exit_code"] == 3  # sacct's, the queue forgot
        assert seen[jobs["ok"]]["record"]["exit_code"] == 0
        assert seen[jobs["array"]]["task_counts"] == {"COMPLETED": 2}, seen[jobs["array"]]
        again = json.loads(run("watch", "--once", "--json").stdout)
        assert again["watched"] == 0 and again["changes"] == [], again  # nothing left open

        state = home / "state"
        sessions = {str(x["session_id"]) for x in (ok, failed, array)} | {held["session_id"]}
        assert sessions <= {p.name for p in (state / "sessions").iterdir()}
        assert ids <= {p.stem for p in (state / "jobs").glob("*.json")}
        shown = json.loads(run("sessions", "show", held["session_id"], "--json").stdout)
        kinds = [e["kind"] for e in shown["events"] if e["step_id"] == held["step_id"]]
        assert "approval_given" in kinds, kinds
        assert jobsmith_state_there(cluster, sessions, ids) == ""
        assert cluster.slurm_calls_here() == []
    finally:
        sshd.stop()
        cluster.run(["rm", "-rf", str(there)])

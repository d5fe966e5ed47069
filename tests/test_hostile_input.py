"""Hostile input at the CLI boundary, on the real lab cluster (issue 7, items 2, 4, 6, 7, 8).

- The user's environment: every sbatch input variable is folded into the checked request
  or refused by name; the output-shaping and filtering variables of squeue, sacct and
  scancel cannot change what jobsmith reads or touches.
- Job ids: only Slurm's forms reach Slurm; an option-looking id is refused, exit 2.
- dry-run, render and --test-only take the submit path's policy (exit 3 / 8 as submit).
- Exit statuses: docs/exit-status.md's table is what the code does.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from lab_cli import js

from jobsmith.agent.runtime.session.events import EventKind
from jobsmith.agent.runtime.session.store import FileSessionStore
from jobsmith.agent.watcher.lock import WatchLock

pytestmark = [pytest.mark.lab, pytest.mark.usefixtures("lab_cluster")]


def _documented(command: str, prefix: str) -> list[str]:
    """The input variables the installed Slurm command itself knows (its binary's strings).

    Read from the binary rather than typed from a manual, so a Slurm upgrade that adds a
    variable makes these tests cover it (or fail) instead of silently missing it.
    """
    binary = Path(shutil.which(command) or command).read_bytes()
    names = {m.decode() for m in re.findall(rb"\b" + prefix.encode() + rb"[A-Z0-9_]+\b", binary)}
    return sorted(names)


SBATCH_VARS = _documented("sbatch", "SBATCH_")
FOLDED = {
    "SBATCH_PARTITION": ("long", "--partition=long"),
    "SBATCH_ACCOUNT": ("proj2", "--account=proj2"),
    "SBATCH_QOS": ("normal", "--qos=normal"),
    "SBATCH_TIMELIMIT": ("00:07:00", "--time=00:07:00"),
    "SBATCH_MEM_PER_NODE": ("300M", "--mem=300M"),
}


def test_the_installed_sbatch_documents_the_variables_we_classify() -> None:
    assert len(SBATCH_VARS) > 30, SBATCH_VARS
    assert set(FOLDED) <= set(SBATCH_VARS)


@pytest.mark.parametrize("name", SBATCH_VARS)
def test_every_sbatch_input_variable_is_folded_or_refused(
    name: str, user_site, monkeypatch: pytest.MonkeyPatch, jobsmith_home: Path
) -> None:  # type: ignore[no-untyped-def]
    value, directive = FOLDED.get(name, ("1", ""))
    monkeypatch.setenv(name, value)
    out = js("submit", "command", "-P", "command=true", "--dry-run", "--json")
    if name in FOLDED:
        assert out.exit_code == 0, out.output
        assert f"#SBATCH {directive}\n" in json.loads(out.stdout)["script"]
    else:
        assert out.exit_code == 2, out.output
        assert name in out.stderr and "unset" in out.stderr
        assert "Traceback" not in out.output
    assert not (jobsmith_home / "state" / "sessions").exists()  # a dry run records nothing


def test_an_explicit_option_wins_over_the_environment(
    user_site, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("SBATCH_MEM_PER_NODE", "8G")
    out = js("render", "command", "-P", "command=true", "--mem", "200M")
    assert out.exit_code == 0, out.output
    assert "#SBATCH --mem=200M\n" in out.stdout and "8G" not in out.stdout


def test_a_partition_from_the_environment_is_checked_by_policy(
    user_site, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("SBATCH_PARTITION", "nosuch")
    out = js("submit", "command", "-P", "command=true", "--mem", "200M", "--time", "2")
    assert out.exit_code == 3, out.output
    assert "partition 'nosuch' is not allowed" in out.stderr
    assert "SBATCH_PARTITION=nosuch" in out.stderr


def _sacct_fields(job_id: str, fields: str) -> list[str]:
    """The job's accounting fields once slurmdbd has its final record (it lags the
    controller, and an early record can lack fields such as the partition)."""
    since = (datetime.now() - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%S")
    argv = ["sacct", "-X", "-n", "-P", "--noconvert", "-S", since, "-j", job_id]
    for _ in range(60):
        res = subprocess.run(
            [*argv, f"-o{fields},End"], capture_output=True, text=True, check=True, env=_CLEAN_ENV
        )
        *values, end = res.stdout.strip().split("|")
        # right after a job ends, slurmdbd may briefly hold a stub record ("allocation",
        # empty partition, NO_VAL memory): wait for the real one
        if end not in ("", "Unknown") and all(values) and "18446744073709551616" not in res.stdout:
            return values
        time.sleep(0.5)
    raise AssertionError(f"job {job_id} never reached accounting")


#: for the tests' own Slurm commands, whatever hostile variables a test exported
_CLEAN_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin"}


def test_what_slurm_runs_is_what_policy_checked(
    user_site, workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    """The issue's case: SBATCH_* exported, a real submission runs with the checked values."""
    monkeypatch.setenv("SBATCH_PARTITION", "long")
    monkeypatch.setenv("SBATCH_TIMELIMIT", "00:03:00")
    monkeypatch.setenv("SBATCH_MEM_PER_NODE", "8G")
    out = js("submit", "command", "-P", "command=true", "--mem", "200M", "--log-dir", str(workdir))
    assert out.exit_code == 0, out.output
    job_id = out.stdout.strip()
    assert js("wait", job_id, "--timeout", "120").exit_code == 0
    partition, req_mem, limit = _sacct_fields(job_id, "Partition,ReqMem,Timelimit")
    assert partition == "long", (partition, req_mem, limit, job_id)
    assert req_mem in ("200M", "200Mn")  # 22.05 marks per-node memory with n
    assert limit == "00:03:00"
    session = json.loads(js("sessions", "list", "--json").stdout)["sessions"][-1]["id"]
    intent = next(
        e
        for e in json.loads(js("sessions", "show", session, "--json").stdout)["events"]
        if e["kind"] == "intent"
    )
    assert "#SBATCH --partition=long\n" in intent["data"]["script"]  # the hash covers it


READ_VARS = [
    *_documented("squeue", "SQUEUE_"),
    *_documented("sacct", "SACCT_"),
    "SLURM_TIME_FORMAT",
    "SLURM_BITSTR_LEN",
    "SLURM_CLUSTERS",
    "SLURM_EXIT_ERROR",
]
HOSTILE = {
    "SQUEUE_FORMAT": "%i",
    "SQUEUE_FORMAT2": "jobid",
    "SQUEUE_STATES": "RUNNING",
    "SQUEUE_PARTITION": "gpu",
    "SQUEUE_ACCOUNT": "proj2",
    "SQUEUE_NAMES": "nothing-by-this-name",
    "SQUEUE_USERS": "root",
    "SQUEUE_SORT": "-i",
    "SACCT_FORMAT": "JobID",
    "SLURM_TIME_FORMAT": "relative",
    "SLURM_BITSTR_LEN": "4",
    "SLURM_CLUSTERS": "nowhere",
    "SLURM_EXIT_ERROR": "0",
}


@pytest.fixture(scope="module")
def held_job() -> str:
    """A job of the lab user that stays pending (held) while the tests read it."""
    res = subprocess.run(
        ["sbatch", "--parsable", "--hold", "-p", "debug", "-t", "1", "--mem=50M", "--wrap", "true"],
        capture_output=True,
        text=True,
        check=True,
    )
    job_id = res.stdout.strip().split(";")[0]
    yield job_id
    subprocess.run(["scancel", job_id], check=False)


@pytest.mark.parametrize("name", READ_VARS)
def test_output_shaping_variables_cannot_change_what_status_reads(
    name: str, held_job: str, user_site, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv(name, HOSTILE.get(name, "1"))
    out = js("status", held_job, "--json")
    assert out.exit_code == 0, out.output
    (job,) = json.loads(out.stdout)["jobs"]
    assert job["state"] == "PENDING"
    assert job["reason"] in ("JobHeldUser", "JobHeldAdmin")  # read from squeue, not lost


def test_scancel_filters_in_the_environment_cannot_spare_a_job(
    user_site, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    for name in _documented("scancel", "SCANCEL_"):
        monkeypatch.setenv(name, {"SCANCEL_NAME": "nothing", "SCANCEL_USER": "root"}.get(name, "1"))
    res = subprocess.run(
        ["sbatch", "--parsable", "--hold", "-t", "1", "--mem=50M", "--wrap", "true"],
        capture_output=True,
        text=True,
        check=True,
        env=_CLEAN_ENV,
    )
    job_id = res.stdout.strip()
    user_site("policy:\n  approval:\n    risky_actions: []\n")
    out = js("cancel", job_id)
    assert out.exit_code == 0, out.output
    assert js("wait", job_id, "--timeout", "60", "--json").exit_code == 1  # ended, cancelled
    (state,) = _sacct_fields(job_id, "State")
    assert state.startswith("CANCELLED")


# --- job ids (item 7) -------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ["cancel", "--", "--name=x"],
        ["hold", "--", "--help"],
        ["cancel", "--", "--user=alice"],
        ["release", "1;id"],
        ["status", "1;id"],
        ["status", "1_[1-3]"],  # a range: only cancel/hold/release take one
        ["logs", "12 34"],
        ["diagnose", "--", "-5"],
        ["rerun", "12_3"],
        ["wait", "0", "--timeout", "5"],  # today's code waited an hour for job 0
        ["adopt", "4294967296"],
        ["render", "command", "-P", "command=true", "--after-ok", "abc"],
        ["render", "command", "-P", "command=true", "--after-not-ok", "1,--x"],
    ],
)
def test_a_bad_job_id_is_one_line_and_exit_2(
    argv: list[str], user_site, jobsmith_home: Path
) -> None:  # type: ignore[no-untyped-def]
    out = js(*argv)
    assert out.exit_code == 2, out.output
    assert out.stderr.startswith("jobsmith: error: job id ") and out.stderr.count("\n") == 1
    assert not (jobsmith_home / "state" / "sessions").exists()  # nothing recorded


def test_job_id_lists_are_split_like_slurm_does(user_site) -> None:  # type: ignore[no-untyped-def]
    out = js("render", "command", "-P", "command=true", "--after-any", "11,12_3", "--json")
    assert out.exit_code == 0, out.output
    assert "#SBATCH --dependency=afterany:11:12_3\n" in json.loads(out.stdout)["script"]


# --- dry-run takes the submit path's policy (item 6) -------------------------------------


def _chunk_args(workdir: Path, duration: str) -> list[str]:
    (workdir / "clip.mp4").write_bytes(b"")
    return [
        "ffmpeg_chunks",
        "-P",
        "input=clip.mp4",
        "-P",
        "output_dir=chunks",
        "-P",
        f"duration_s={duration}",
    ]


@pytest.mark.parametrize("mode", [["submit", "--dry-run"], ["render"], ["submit", "--test-only"]])
def test_dry_run_is_held_where_submit_would_be(
    mode: list[str], user_site, workdir: Path, jobsmith_home: Path
) -> None:  # type: ignore[no-untyped-def]
    """A chunk array over the approval threshold: submit waits (8), and so do its checks."""
    args = [*_chunk_args(workdir, "36000"), "--time", "30", "--cpus", "2"]
    checked = js(*mode[:1], *args, *mode[1:], "--json")
    assert checked.exit_code == 8, checked.output
    assert json.loads(checked.stdout).get("policy", {}).get("verdict") in (None, "approve")
    assert "approval" in checked.stderr
    assert not (jobsmith_home / "state" / "sessions").exists()  # nothing held, nothing recorded
    real = js("submit", *args)
    assert real.exit_code == 8, real.output


@pytest.mark.parametrize("mode", [["submit", "--dry-run"], ["render"], ["submit", "--test-only"]])
def test_dry_run_refuses_what_submit_refuses(mode: list[str], user_site, workdir: Path) -> None:  # type: ignore[no-untyped-def]
    """duration_s=600,000 would be a 10,000-task array, above the lab's 2,000 concurrent
    tasks (and below jobsmith's workload cap: jobsmith/workload_caps.py): refused, exit 3,
    as submit is."""
    args = _chunk_args(workdir, "600000")
    checked = js(*mode[:1], *args, *mode[1:])
    assert checked.exit_code == 3, checked.output
    assert "max concurrent jobs" in checked.stderr
    assert js("submit", *args).exit_code == 3


# --- exit statuses (item 8) ---------------------------------------------------------------


def test_exit_statuses_of_the_readme_table(  # type: ignore[no-untyped-def]
    user_site, workdir: Path, monkeypatch, tmp_path: Path, jobsmith_home: Path
) -> None:
    """One real case per status docs/exit-status.md documents, run through the CLI."""
    failed = js(
        "submit", "command", "-P", "command=exit 3", "--log-dir", str(workdir)
    ).stdout.strip()
    assert js("wait", failed, "--timeout", "120").exit_code == 1
    assert js("render", "command", "-P", "nope=1").exit_code == 2
    assert js("status", "--since", "forever").exit_code == 2
    assert js("render", "command", "-P", "command=true", "--mem", "900G").exit_code == 3
    user_site("accounts:\n  allowed: [lab, nosuchaccount]\n")  # allowed here, unknown to Slurm
    slurm_says_no = js("submit", "command", "-P", "command=true", "--account", "nosuchaccount")
    assert slurm_says_no.exit_code == 4, slurm_says_no.output
    assert js("hold", "3999999998").exit_code == 6
    assert js("approve", "st-0000000000").exit_code == 6
    assert js("sessions", "show", "20260101T000000.000Z-000000000000").exit_code == 6
    held = subprocess.run(
        ["sbatch", "--parsable", "--hold", "-t", "1", "--mem=50M", "--wrap", "true"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    try:
        assert js("wait", held, "--timeout", "1").exit_code == 7
    finally:
        subprocess.run(["scancel", held], check=False)
    user_site("policy:\n  approval:\n    core_hours: 0.001\n")
    assert js("submit", "command", "-P", "command=true").exit_code == 8
    assert js("watch", "--once", "--json").exit_code == 0
    session = _session_in_flight_on_another_node(jobsmith_home)
    assert js("sessions", "resume", session, "--json").exit_code == 9
    lock = WatchLock(jobsmith_home / "state" / "watch.lock", stale_after_s=960)
    lock.acquire()
    try:
        second = js("watch", "--once", "--json")
        assert second.exit_code == 10, second.output
        assert json.loads(second.stdout)["error"] == "WatcherRunning"
    finally:
        lock.release()
    monkeypatch.setenv("PATH", str(tmp_path))  # no Slurm commands here
    assert js("status", "1").exit_code == 5


def _session_in_flight_on_another_node(home: Path) -> str:
    """A session whose submission's intent was written a moment ago on another login node:
    its sbatch may still be running there, so resume cannot be sure (exit 9)."""
    store = FileSessionStore(home / "state" / "sessions")
    session = store.create({"title": "crashed elsewhere"})
    name = "command.js-00000000abcd"
    intent = {
        "step": {"action": "submit", "id": "st-elsewhere0", "job": {"template": "command"}},
        "job_name": name,
        "script": f"#!/bin/bash\n#SBATCH --job-name={name}\ntrue\n",
        "script_sha256": "0" * 64,
        "options": {"job_name": name},
        "host": "another-login-node",
    }
    store.append(session, 1, EventKind.INTENT, intent, step_id="st-elsewhere0")
    return session

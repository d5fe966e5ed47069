"""README promises that had no test of their own (issue 16, part 2), each on real parts.

- an approval is bound to the script's sha256: a held script edited in the session store
  is refused by `approve`, and nothing reaches Slurm;
- the daily node-hour and GPU-hour budgets and `submissions_per_hour` count real
  submissions (the lab's two fake GPUs make GPU-hours real);
- the rule brain re-runs an out-of-memory job at most twice, then reports it;
- the transport kills a Slurm command that outlives its timeout with its whole process
  group, so a killed sbatch can submit nothing afterwards.

Every test here was seen to fail against a deliberately broken build (the issue's
closing note says how each was broken). Tests marked xfail(strict) document a promise the
code does not keep yet; they turn into failures the day it does, so the mark goes.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from lab_cli import LAB_SITE, jobs_named, js

from jobsmith.adapters.options import JobOptions
from jobsmith.adapters.slurm.commands.options import render_directives
from jobsmith.adapters.slurm.scheduler import SlurmScheduler
from jobsmith.adapters.slurm.transport import LocalTransport
from jobsmith.errors import SchedulerUnavailable

#: a test on the real lab cluster (it fails, never skips, without it; conftest marks it lab)
lab = pytest.mark.usefixtures("lab_cluster")


@pytest.fixture
def policy(user_site: Callable[[str], None]) -> Callable[[str], None]:
    """Write the user's site overrides (YAML text under `policy:`), chdir into workdir."""
    return lambda policy_yaml: user_site(f"policy:\n{policy_yaml}")


def events(session_id: str) -> list[dict[str, Any]]:
    out = js("sessions", "show", session_id, "--json")
    assert out.exit_code == 0, out.output
    return list(json.loads(out.stdout)["events"])


def submitted(jobsmith_home: Path) -> list[dict[str, Any]]:
    """The job ledger: one record per submission Slurm accepted."""
    ledger = jobsmith_home / "state" / "jobs"
    return [json.loads(p.read_text()) for p in sorted(ledger.glob("*.json"))]


def event_file(jobsmith_home: Path, session_id: str, kind: str, step_id: str) -> Path:
    """The store's file holding the step's event of this kind (one JSON file per event)."""
    directory = jobsmith_home / "state" / "sessions" / session_id
    for path in sorted(directory.glob("[0-9]*.json")):
        doc = json.loads(path.read_text())
        if doc["kind"] == kind and doc["step_id"] == step_id:
            return path
    raise AssertionError(f"no {kind} event for {step_id} in {directory}")


def rewrite(path: Path, edit: Callable[[dict[str, Any]], None]) -> None:
    """Edit a stored event in place, as anything with write access to the store could."""
    doc = json.loads(path.read_text())
    edit(doc)
    path.chmod(0o600)
    path.write_text(json.dumps(doc))


# --- approvals are bound to the script's hash -------------------------------------------


@lab
def test_held_script_edited_in_the_store_is_refused_by_approve_and_never_reaches_slurm(
    policy: Callable[[str], None], workdir: Path, jobsmith_home: Path
) -> None:
    policy("  approval:\n    core_hours: 0.01\n")
    held = js("submit", "command", "-P", "command=echo approved-run", "--log-dir", str(workdir))
    assert held.exit_code == 8, held.output
    (item,) = json.loads(js("pending", "--json").stdout)["pending"]
    step, session = item["step_id"], item["session_id"]
    asked = event_file(jobsmith_home, session, "approval_asked", step)
    job_name = json.loads(asked.read_text())["data"]["job_name"]

    def tamper(doc: dict[str, Any]) -> None:
        original = doc["data"]["script"]
        doc["data"]["script"] = original.replace("echo approved-run", "touch PWNED")
        assert doc["data"]["script"] != original

    rewrite(asked, tamper)
    shown = json.loads(js("pending", "--json").stdout)["pending"][0]
    assert "touch PWNED" in shown["script"]  # what a person would now be shown …
    assert hashlib.sha256(shown["script"].encode()).hexdigest() != shown["script_sha256"]

    approved = js("approve", step, "--json")
    assert approved.exit_code == 3, approved.output  # … is refused, not run
    assert f"step {step}: the script changed after approval" in approved.stderr
    assert jobs_named(job_name) == set()
    assert submitted(jobsmith_home) == []
    assert not any(e["data"].get("submitted") for e in events(session))


@lab
def test_approval_refused_for_an_edited_script_stays_refused(
    policy: Callable[[str], None], workdir: Path, jobsmith_home: Path
) -> None:
    """After `approve` refused an edited script, nothing may run the step later: not a
    second approve, not `sessions resume` (approve here is its own process, which ends)."""
    policy("  approval:\n    core_hours: 0.01\n")
    held = js("submit", "command", "-P", "command=echo approved-run", "--log-dir", str(workdir))
    assert held.exit_code == 8, held.output
    (item,) = json.loads(js("pending", "--json").stdout)["pending"]
    step, session = item["step_id"], item["session_id"]
    asked = event_file(jobsmith_home, session, "approval_asked", step)
    job_name = json.loads(asked.read_text())["data"]["job_name"]

    def tamper(doc: dict[str, Any]) -> None:
        doc["data"]["script"] = doc["data"]["script"].replace("echo approved-run", "touch PWNED")

    rewrite(asked, tamper)
    approve = [sys.executable, "-m", "jobsmith", "--site", str(LAB_SITE), "approve", step]
    refused = subprocess.run(approve, cwd=workdir, capture_output=True, text=True, timeout=60)
    assert refused.returncode == 3, refused.stderr
    try:
        resumed = js("sessions", "resume", session, "--wait", "5", "--json")
        assert jobs_named(job_name) == set(), resumed.output
        assert submitted(jobsmith_home) == []
        result = [e for e in events(session) if e["kind"] == "result"]
        assert [r["data"]["outcome"] for r in result] == ["refused"], result
    finally:
        for record in submitted(jobsmith_home):
            subprocess.run(["scancel", record["job_id"]], check=False)


def _approve_killed_after_the_approval(step: str, workdir: Path) -> None:
    """`jobsmith approve STEP` in its own process, SIGKILLed right after it recorded the
    approval (its first event), before its sbatch: a crash `sessions resume` must finish."""
    run = subprocess.run(
        [sys.executable, "-m", "jobsmith", "--site", str(LAB_SITE), "approve", step],
        env={**os.environ, "JOBSMITH_FAULT_KILL_AFTER_EVENTS": "1"},
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == -signal.SIGKILL, run.stderr


def _held_then_approved_and_crashed(
    policy: Callable[[str], None], workdir: Path, jobsmith_home: Path
) -> tuple[str, str, str, Path]:
    """(session, step, job name, intent file) of a step approved by a process that died."""
    policy("  approval:\n    core_hours: 0.01\n")
    held = js("submit", "command", "-P", "command=echo approved-run", "--log-dir", str(workdir))
    assert held.exit_code == 8, held.output
    (item,) = json.loads(js("pending", "--json").stdout)["pending"]
    step, session = item["step_id"], item["session_id"]
    _approve_killed_after_the_approval(step, workdir)
    kinds = [e["kind"] for e in events(session)]
    assert kinds == ["session_opened", "intent", "approval_asked", "approval_given"], kinds
    given = next(e for e in events(session) if e["kind"] == "approval_given")
    assert given["data"]["script_sha256"] == item["script_sha256"]
    intent = event_file(jobsmith_home, session, "intent", step)
    return session, step, json.loads(intent.read_text())["data"]["job_name"], intent


@lab
def test_approved_script_edited_before_resume_is_refused(
    policy: Callable[[str], None], workdir: Path, jobsmith_home: Path
) -> None:
    session, step, job_name, intent = _held_then_approved_and_crashed(
        policy, workdir, jobsmith_home
    )

    def tamper(doc: dict[str, Any]) -> None:
        doc["data"]["script"] = doc["data"]["script"].replace("echo approved-run", "touch PWNED")

    rewrite(intent, tamper)
    resumed = js("sessions", "resume", session, "--wait", "5", "--json")
    assert resumed.exit_code == 3, resumed.output
    assert f"step {step}: the script changed after approval" in resumed.stderr
    assert jobs_named(job_name) == set()
    assert submitted(jobsmith_home) == []


@lab
def test_resume_submits_only_the_script_whose_hash_was_approved(
    policy: Callable[[str], None], workdir: Path, jobsmith_home: Path
) -> None:
    session, _, job_name, intent = _held_then_approved_and_crashed(policy, workdir, jobsmith_home)

    def swap(doc: dict[str, Any]) -> None:
        script = doc["data"]["script"].replace("echo approved-run", "echo never-approved")
        doc["data"]["script"] = script
        doc["data"]["script_sha256"] = hashlib.sha256(script.encode()).hexdigest()

    rewrite(intent, swap)
    resumed = js("sessions", "resume", session, "--wait", "5", "--json")
    try:
        assert resumed.exit_code != 0, resumed.output
        assert jobs_named(job_name) == set()
    finally:
        for record in submitted(jobsmith_home):
            subprocess.run(["scancel", record["job_id"]], check=False)


# --- budgets -----------------------------------------------------------------------------


def _submit(workdir: Path, *options: str) -> Any:
    return js("submit", "command", "-P", "command=true", "--log-dir", str(workdir), *options)


@lab
def test_submissions_per_hour_counts_every_real_submission(
    policy: Callable[[str], None], workdir: Path, jobsmith_home: Path
) -> None:
    policy("  budgets:\n    submissions_per_hour: 3\n")
    ids = []
    for n in range(3):
        ok = _submit(workdir)
        assert ok.exit_code == 0, (n, ok.output)
        ids.append(ok.stdout.strip())
    fourth = _submit(workdir)
    assert fourth.exit_code == 3, fourth.output
    refusal = "refused by policy (submissions per hour): 3 submissions in the last hour"
    assert f"{refusal}: the limit is 3" in fourth.stderr
    assert _submit(workdir, "--dry-run").exit_code == 3  # the dry run judges it the same
    fifth = _submit(workdir)  # a refusal is not a submission: still 3, not 4
    assert fifth.exit_code == 3 and refusal in fifth.stderr, fifth.output
    assert sorted(r["job_id"] for r in submitted(jobsmith_home)) == sorted(ids)
    assert js("wait", *ids, "--timeout", "120").exit_code == 0  # they were real jobs


@lab
def test_daily_node_hour_budget_adds_up_real_submissions(
    policy: Callable[[str], None], workdir: Path, jobsmith_home: Path
) -> None:
    policy("  budgets:\n    node_hours_per_day: 1\n")
    ids = []
    for _ in range(2):  # 1 node x 30 minutes: half a node-hour each
        ok = _submit(workdir, "--time", "30:00")
        assert ok.exit_code == 0, ok.output
        assert events(_last_session())[-1]["data"]["cost"]["node_hours"] == 0.5
        ids.append(ok.stdout.strip())
    third = _submit(workdir, "--time", "30:00")
    assert third.exit_code == 3, third.output
    assert (
        "refused by policy (node-hours per day): 1 node-hours in the last 24 h plus 0.5 "
        "would pass the daily budget of 1" in third.stderr
    )
    assert len(submitted(jobsmith_home)) == 2
    assert js("wait", *ids, "--timeout", "120").exit_code == 0


def _last_session() -> str:
    listed = json.loads(js("sessions", "list", "--json").stdout)["sessions"]
    return str(listed[-1]["id"])


@lab
def test_daily_gpu_hour_budget_counts_the_lab_gpus(
    policy: Callable[[str], None], workdir: Path, jobsmith_home: Path
) -> None:
    policy("  budgets:\n    gpu_hours_per_day: 2\n")
    gpu_job = ("--partition", "gpu", "--gpus", "1", "--time", "1:00:00")
    ids = []
    for _ in range(2):  # one GPU for an hour: one GPU-hour each
        ok = js(
            "submit",
            "command",
            "-P",
            "command=echo gpus=$CUDA_VISIBLE_DEVICES",
            "--log-dir",
            str(workdir),
            *gpu_job,
        )
        assert ok.exit_code == 0, ok.output
        ids.append(ok.stdout.strip())
    third = js("submit", "command", "-P", "command=true", "--log-dir", str(workdir), *gpu_job)
    assert third.exit_code == 3, third.output
    assert (
        "refused by policy (GPU-hours per day): 2 GPU-hours in the last 24 h plus 1 "
        "would pass the daily budget of 2" in third.stderr
    )
    cpu_only = _submit(workdir, "--time", "1:00")  # spends no GPU-hours: not refused
    assert cpu_only.exit_code == 0, cpu_only.output
    assert js("wait", *ids, cpu_only.stdout.strip(), "--timeout", "120").exit_code == 0
    for job_id in ids:  # Slurm really gave each a GPU: the budget counted real GPUs
        tres = subprocess.run(
            ["sacct", "-X", "-n", "-P", "-j", job_id, "--format=AllocTRES"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert "gres/gpu=1" in tres, tres
        assert (workdir / f"command_{job_id}.out").read_text().strip() in ("gpus=0", "gpus=1")
    assert len(submitted(jobsmith_home)) == 3


# --- the rule brain's retry cap ----------------------------------------------------------

# Always asks for more than it was given: its limit plus 256 MiB, held long enough for the
# lab's 2-second memory sampler to kill it, whatever --mem the re-run was given.
ALWAYS_OOM = (
    "python3 -c 'import os, time; "
    'x = bytearray((int(os.environ["SLURM_MEM_PER_NODE"]) + 256) << 20); time.sleep(8)\''
)


@lab
def test_rule_brain_reruns_an_oom_job_at_most_twice_then_reports(
    policy: Callable[[str], None], workdir: Path, jobsmith_home: Path
) -> None:
    policy("  approval:\n    core_hours: 100\n")
    first = js(
        "submit", "command", "-P", f"command={ALWAYS_OOM}", "--mem", "100M",
        "--log-dir", str(workdir),
    )  # fmt: skip
    assert first.exit_code == 0, first.output
    job = first.stdout.strip()
    decisions: list[dict[str, Any]] = []
    try:
        deadline = time.monotonic() + 420
        # three decisions are all there may be; a broken cap would go on re-running
        while time.monotonic() < deadline and len(decisions) < 3:
            cycle = json.loads(js("watch", "--once", "--json").stdout)
            assert cycle["scheduler_ok"], cycle
            decisions += cycle["decisions"]
            if any(d["action"] != "rerun" for d in decisions):
                break
            time.sleep(2)
        assert len(decisions) == 3, decisions
        one, two = (str(d.get("new_job_id")) for d in decisions[:2])
        assert [(d["job_id"], d["action"]) for d in decisions] == [
            (job, "rerun"),
            (one, "rerun"),
            (two, "report"),
        ], decisions
        assert all(d["verdicts"] == ["out_of_memory"] for d in decisions), decisions
        assert decisions[2]["reason"] == "retry budget spent (2 of 2 re-runs)"
        assert 100 < decisions[0]["mem_mb"] < decisions[1]["mem_mb"]  # more memory each time
        asked = json.loads(js("status", two, "--json").stdout)["jobs"][0]["record"]
        assert asked["req_mem_bytes"] == decisions[1]["mem_mb"] << 20
        for _ in range(2):  # later cycles decide nothing more and submit nothing more
            quiet = json.loads(js("watch", "--once", "--json").stdout)
            assert quiet["decisions"] == [] and quiet["watched"] == 0, quiet
        assert len(submitted(jobsmith_home)) == 3
    finally:
        for record in submitted(jobsmith_home):
            subprocess.run(["scancel", record["job_id"]], check=False)


# --- the transport's timeout kills the whole command -------------------------------------


@pytest.fixture
def shim_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A directory put first on PATH, for commands that stand in for Slurm's."""
    path = tmp_path / "shim"
    path.mkdir()
    path.chmod(0o755)
    monkeypatch.setenv("PATH", f"{path}:{os.environ['PATH']}")
    return path


def _shim(directory: Path, name: str, body: str) -> None:
    script = directory / name
    script.write_text(f"#!/bin/sh\n{body}")
    script.chmod(0o755)


def _group_gone(pgid: int) -> bool:
    """No process of the group can act any more (killed members may linger as zombies
    until init reaps them; a SIGKILL takes a moment to land)."""
    deadline = time.monotonic() + 1
    while _live_members(pgid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _live_members(pgid: int) -> list[int]:
    live = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rpartition(")")[2].split()
        except OSError:
            continue  # exited meanwhile
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):  # proc(5): state, pgrp
            live.append(int(stat.parent.name))
    return live


def test_slow_command_is_killed_with_its_whole_process_group(
    shim_dir: Path, tmp_path: Path
) -> None:
    started, late = tmp_path / "started", tmp_path / "late"
    # The shim hangs, and a child of it would write a file after 3 s: only killing the
    # shim's whole process group stops that child.
    _shim(shim_dir, "sacct", f"echo $$ > {started}\n(sleep 3; touch {late}) &\nsleep 60\n")
    begun = time.monotonic()
    with pytest.raises(SchedulerUnavailable, match=r"sacct -X gave no answer within 1s"):
        LocalTransport().run(["sacct", "-X"], timeout=1)
    assert time.monotonic() - begun < 3  # not held up by what was killed
    assert started.exists(), "the shim never ran: PATH did not reach the transport"
    assert _group_gone(int(started.read_text()))  # reaped, nothing of it left
    time.sleep(4)
    assert not late.exists(), "a child of the timed-out command lived on"


@lab
def test_sbatch_killed_at_its_timeout_submits_nothing_afterwards(
    shim_dir: Path, tmp_path: Path, workdir: Path
) -> None:
    real = shutil.which("sbatch")
    assert real is not None
    started = tmp_path / "started"
    # An sbatch slower than the timeout whose real submission happens in a child process
    # after 3 s: were only the shim killed, the child would still submit.
    _shim(
        shim_dir,
        "sbatch",
        f'echo $$ >> {started}\nsh -c \'sleep 3; exec "$0" "$@"\' {real} "$@"\n',
    )
    name = f"promise-timeout.js-{os.urandom(6).hex()}"
    options = JobOptions.model_validate(
        {
            "job_name": name,
            "partition": "debug",
            "time_limit_s": 60,
            "mem_mb": 50,
            "output": str(workdir / "never_%j.out"),
        }
    )
    scheduler = SlurmScheduler(LocalTransport(), timeout_s=1, submit_attempts=2, retry_delay_s=0)
    script = "\n".join(["#!/bin/bash", *render_directives(options), "true"]) + "\n"
    with pytest.raises(SchedulerUnavailable, match="gave no answer within 1s"):
        scheduler.submit(script, options)
    pids = [int(p) for p in started.read_text().split()]
    assert len(pids) == 2  # the retry ran only after looking the tag up: not found
    assert all(_group_gone(p) for p in pids)
    time.sleep(5)  # past the moment the killed children would have submitted
    assert jobs_named(name) == set()


@lab
def test_site_command_timeout_is_the_one_slurm_commands_get(
    user_site: Callable[[str], None], shim_dir: Path
) -> None:
    user_site("scheduler:\n  command_timeout_s: 1\n")
    _shim(shim_dir, "sacct", "sleep 6\n")
    begun = time.monotonic()
    out = js("status", "1", "--json")
    assert out.exit_code == 5, out.output  # SchedulerUnavailable: Slurm did not answer
    assert time.monotonic() - begun < 4
    assert "gave no answer within 1s" in out.stderr

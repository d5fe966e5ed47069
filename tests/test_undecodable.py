"""Bytes that are not UTF-8 (in logs, job names, scripts) and logs that cannot be read.

A job's output is whatever its program wrote (bwa given a video as reads writes binary to
stderr), and a job submitted by hand can carry any bytes in its name or script. None of
that may stop a command with a traceback, nor end a watcher cycle: one job's unreadable
output is a note on that job, and the other jobs of the cycle are still handled.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from datetime import datetime
from pathlib import Path

import pytest
from lab_cli import js as lab_js

from jobsmith.adapters.options import JobOptions
from jobsmith.adapters.scheduler import JobStatus
from jobsmith.adapters.slurm.transport import LocalTransport
from jobsmith.adapters.states import JobState
from jobsmith.agent.runtime.session.jobstate import StateChange
from jobsmith.agent.runtime.session.ledger import JobLedger, SubmissionRecord
from jobsmith.agent.runtime.session.readmodel import SessionFolds
from jobsmith.agent.runtime.session.store import FileSessionStore
from jobsmith.agent.watcher.cycle import watch_cycle

#: the job from the report: stderr holds "café" in Latin-1, which is not UTF-8
LATIN1_STDERR = 'printf "caf\\xe9\\n" >&2; exit 3'


def test_transport_decodes_bytes_that_are_not_utf8() -> None:
    transport = LocalTransport()
    out = transport.run(["printf", r"caf\xe9\n\xff caf\xc3\xa9"], timeout=10)
    assert out.returncode == 0
    assert out.stdout == "caf\ufffd\n\ufffd café"  # valid UTF-8 is kept as it is
    err = transport.run(["sh", "-c", r"printf 'caf\351' >&2; exit 3"], timeout=10)
    assert (err.returncode, err.stdout, err.stderr) == (3, "", "caf\ufffd")


def test_one_jobs_trouble_is_its_decision_not_the_end_of_the_cycle(tmp_path: Path) -> None:
    store, ledger = FileSessionStore(tmp_path / "sessions"), JobLedger(tmp_path / "jobs")
    for job_id in ("101", "102"):
        ledger.record(
            SubmissionRecord(
                job_id=job_id,
                cluster="lab",
                template="command",
                params={},
                options=JobOptions(job_name=f"j{job_id}"),
                script_sha256="",
                submitted_at=datetime.now(),
                session_id=store.create({"title": job_id}),
            )
        )

    def failed(ids: list[str], since: datetime) -> dict[str, JobStatus]:
        return {i: JobStatus(job_id=i, state=JobState.FAILED) for i in ids}

    def decide(change: StateChange, status: JobStatus) -> dict[str, object]:
        if change.job_id == "101":  # what no reader foresaw, e.g. a bug on odd input
            raise ValueError("surprise")
        return {"job_id": change.job_id, "action": "report"}

    cycle = watch_cycle(store, ledger, failed, decide, folds=SessionFolds(store))
    assert cycle.scheduler_ok and cycle.watched == 2
    assert cycle.decisions == [
        {
            "job_id": "101",
            "action": "error",
            "reason": "deciding about it failed: ValueError: surprise",
        },
        {"job_id": "102", "action": "report"},
    ]


@pytest.fixture
def js(user_site):  # type: ignore[no-untyped-def]
    """Invoke the CLI in-process from workdir; returns click's Result."""
    return lab_js


def _submit(js, workdir: Path, command: str) -> str:  # type: ignore[no-untyped-def]
    res = js("submit", "command", "-P", f"command={command}", "--log-dir", str(workdir))
    assert res.exit_code == 0, res.output
    return str(res.stdout.strip())


def _watch_once(js) -> dict[str, dict[str, object]]:  # type: ignore[no-untyped-def]
    """One watcher cycle; its decisions by job id."""
    res = js("watch", "--once", "--json")
    assert res.exit_code == 0, res.output
    cycle = json.loads(res.stdout)
    assert cycle["scheduler_ok"], cycle
    return {str(d["job_id"]): d for d in cycle["decisions"]}


def _decided(js, jobs: set[str]) -> dict[str, dict[str, object]]:  # type: ignore[no-untyped-def]
    """Watcher cycles until each of jobs has its decision (right after a job ends a cycle
    may see slurmdbd's stand-in row and leave it to the next: agent/runtime/recovery/standin.py);
    each job decided once."""
    decisions: dict[str, dict[str, object]] = {}
    for _ in range(20):
        cycle = _watch_once(js)
        assert not set(cycle) & set(decisions), cycle  # never twice
        decisions |= cycle
        if set(decisions) >= jobs:
            break
        time.sleep(0.5)
    return decisions


@pytest.mark.lab
@pytest.mark.usefixtures("lab_cluster")
def test_stderr_that_is_not_utf8_is_shown_diagnosed_and_watched(js, workdir: Path) -> None:  # type: ignore[no-untyped-def]
    latin1 = _submit(js, workdir, LATIN1_STDERR)
    other = _submit(js, workdir, "cat /nonexistent/in.mov")
    assert js("wait", latin1, other, "--timeout", "120").exit_code == 1

    shown = js("logs", latin1, "--stderr")
    assert shown.exit_code == 0, shown.output
    assert shown.stdout == "caf\ufffd\n"

    diagnosed = js("diagnose", latin1, "--json")
    assert diagnosed.exit_code == 0, diagnosed.output
    (found,) = json.loads(diagnosed.stdout)["diagnoses"]
    assert found["verdict"] == "nonzero_exit" and found["notes"] == []
    assert "caf\ufffd" in found["evidence"]

    decisions = _decided(js, {latin1, other})
    assert set(decisions) == {latin1, other}
    assert decisions[latin1]["action"] == "report"
    assert decisions[latin1]["verdicts"] == ["nonzero_exit"]
    assert "caf\ufffd" in decisions[latin1]["evidence"]  # type: ignore[operator]
    assert decisions[other]["verdicts"] == ["missing_input"]
    assert _watch_once(js) == {}  # both decided once, then done


@pytest.mark.lab
@pytest.mark.usefixtures("lab_cluster")
def test_unreadable_logs_are_their_jobs_notes_in_a_watch_cycle(js, workdir: Path) -> None:  # type: ignore[no-untyped-def]
    locked = _submit(js, workdir, "echo 'Segmentation fault' >&2; exit 3")
    replaced = _submit(js, workdir, "echo boom >&2; exit 4")
    plain = _submit(js, workdir, "cat /nonexistent/in.mov")
    assert js("wait", locked, replaced, plain, "--timeout", "120").exit_code == 1
    paths = {
        job: Path(json.loads(js("logs", job, "--stderr", "--json").stdout)["path"])
        for job in (locked, replaced)
    }
    paths[locked].chmod(0)
    paths[replaced].unlink()
    paths[replaced].mkdir()  # the log path is now a directory

    diagnosed = js("diagnose", locked, "--json")
    assert diagnosed.exit_code == 0, diagnosed.output
    (found,) = json.loads(diagnosed.stdout)["diagnoses"]
    assert found["verdict"] == "nonzero_exit"  # from accounting alone
    (why,) = found["notes"]
    assert str(paths[locked]) in why and "Permission denied" in why
    assert f"note: {why}" in js("diagnose", locked).stdout

    decisions = _decided(js, {locked, replaced, plain})
    assert set(decisions) == {locked, replaced, plain}
    (why,) = decisions[locked]["notes"]  # type: ignore[misc]
    assert "Permission denied" in why
    (why,) = decisions[replaced]["notes"]  # type: ignore[misc]
    assert str(paths[replaced]) in why and "Is a directory" in why
    assert decisions[replaced]["action"] == "report"
    assert decisions[plain]["verdicts"] == ["missing_input"] and decisions[plain]["notes"] == []


@pytest.mark.lab
@pytest.mark.usefixtures("lab_cluster")
def test_hand_submitted_job_named_in_latin1_is_adopted_and_followed(js, workdir: Path) -> None:  # type: ignore[no-untyped-def]
    # a name and a script in Latin-1, as a shell in a Latin-1 locale would pass them
    sbatch = [b"sbatch", b"--parsable", b"--hold", b"-p", b"debug", b"-J", b"caf\xe9"]
    out = os.fsencode(workdir / "hand_%j.out")
    res = subprocess.run(
        [*sbatch, b"-o", out, b"--wrap", b"echo caf\xe9"],
        cwd=workdir,
        capture_output=True,
        timeout=30,
        check=True,
    )
    job_id = res.stdout.decode().strip()
    try:
        adopted = js("adopt", job_id, "--json")
        assert adopted.exit_code == 0, adopted.output
        session_id = json.loads(adopted.stdout)["session_id"]
    finally:
        subprocess.run(["scontrol", "release", job_id], timeout=30, check=True)
    assert js("wait", job_id, "--timeout", "120").exit_code == 0

    status = js("status", job_id, "--json")
    assert status.exit_code == 0, status.output
    (job,) = json.loads(status.stdout)["jobs"]
    # the name itself is not asserted: the controller gives its bytes (read as "caf\ufffd")
    # but slurmdbd stores "caf?", and for a moment after the end even "allocation"
    assert job["state"] == "COMPLETED" and job["session_id"] == session_id
    assert js("status").exit_code == 0
    assert js("logs", job_id).stdout == "caf\ufffd\n"  # its path came from the controller

    exported = js("sessions", "export", session_id).stdout.splitlines()
    intent = next(e for e in map(json.loads, exported) if e["kind"] == "intent")["data"]
    assert intent["job_name"] == "caf_"
    # U+FFFD in place of its byte would re-run a different script: kept out, with why
    assert intent["script"] is None and "not UTF-8" in intent["script_note"]
    refused = js("rerun", job_id)
    assert refused.exit_code != 0 and "no script recorded" in refused.output

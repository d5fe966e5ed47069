"""One actor per in-flight step, at most one result per step: races between real processes.

The lab tests race real `jobsmith` processes on the lab cluster (`sessions resume` three
at once after a crash, `approve` twice at once) and count the jobs Slurm got by their
tag. The others need no Slurm: they race OS processes on one FileSessionStore through
the conditional append that claims rely on, and run a resume that loses its claim (it
never reaches Slurm).
"""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from lab_cli import LAB_SITE, jobs_named, js, write_user_site

from jobsmith.agent.runtime.session.claims import (
    CLOCK_SKEW,
    StepClaimed,
    StepSettled,
    append_result,
    claimable,
    owner,
    process_start,
)
from jobsmith.agent.runtime.session.events import Event, EventKind
from jobsmith.agent.runtime.session.session_log import SessionLog
from jobsmith.agent.runtime.session.store import FileSessionStore, utc_now
from jobsmith.agent.runtime.submission.approval.approvals import answer, pending_approvals

HERE = Path(__file__).resolve().parent


# `jobsmith ARGS…` in its own process, started only once the go file exists, so that
# racing processes reach their first decision together rather than skewed by imports.
RACER = r"""
import os, sys, time
from pathlib import Path
from jobsmith.agent.faces.cli import main

go = Path(sys.argv[1])
(go.parent / f".ready.{os.getpid()}").touch()
while not go.exists():
    time.sleep(0.0005)
sys.argv = ["jobsmith", *sys.argv[2:]]
main()
"""


def jobsmith(*args: str) -> list[str]:
    """Arguments of a jobsmith command on the lab's site file (run by run_together)."""
    return ["--site", str(LAB_SITE), *args]


def session_events(session_id: str) -> list[dict[str, Any]]:
    """A session's events as `jobsmith sessions show --json` prints them."""
    return json.loads(js("sessions", "show", session_id, "--json").stdout)["events"]  # type: ignore[no-any-return]


def run_together(argvs: list[list[str]], cwd: Path) -> list[subprocess.CompletedProcess[str]]:
    """Run each jobsmith command line in its own process, all released at once; wait."""
    go = cwd / ".go"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", RACER, str(go), *a],
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for a in argvs
    ]
    deadline = time.monotonic() + 120
    while len(list(cwd.glob(".ready.*"))) < len(procs) and time.monotonic() < deadline:
        time.sleep(0.05)
    go.touch()
    done = []
    for argv, proc in zip(argvs, procs, strict=True):
        out, err = proc.communicate(timeout=600)
        done.append(subprocess.CompletedProcess(argv, proc.returncode, out, err))
    return done


def slow_sbatch(where: Path) -> Path:
    """A directory whose sbatch waits 1.5 s, then runs the real one (timing only)."""
    shim = where / "shim"
    shim.mkdir()
    real = subprocess.run(["sh", "-c", "command -v sbatch"], capture_output=True, text=True)
    (shim / "sbatch").write_text(f'#!/bin/sh\nsleep 1.5\nexec {real.stdout.strip()} "$@"\n')
    (shim / "sbatch").chmod(0o755)
    return shim


@pytest.mark.lab
@pytest.mark.usefixtures("lab_cluster")
def test_three_concurrent_resumes_submit_a_lost_step_once(
    jobsmith_home: Path, workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_user_site(jobsmith_home / "config", workdir)
    store = FileSessionStore(jobsmith_home / "state" / "sessions")
    session = store.create({"title": "three resumes"})
    driver = [sys.executable, str(HERE / "crash_driver.py"), str(LAB_SITE), session, str(workdir)]
    env = {**os.environ, "JOBSMITH_FAULT_KILL_AFTER_EVENTS": "1"}  # dies after its intent
    killed = subprocess.run(driver, env=env, cwd=workdir, capture_output=True, text=True)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    (intent,) = [e for e in store.read(session) if e.kind is EventKind.INTENT]

    # the winner's sbatch takes 1.5 s: the others must wait for its result, not act
    monkeypatch.setenv("PATH", f"{slow_sbatch(workdir)}:{os.environ['PATH']}")
    resumes = run_together([jobsmith("sessions", "resume", session, "--json")] * 3, workdir)

    reports = [json.loads(r.stdout) for r in resumes]
    assert len(jobs_named(str(intent.data["job_name"]))) == 1, reports
    log = store.read(session)
    assert [e.step_id for e in log if e.kind is EventKind.RESULT] == [intent.step_id], reports
    assert len([e for e in log if e.kind is EventKind.CLAIMED]) == 1  # the losers took none
    assert sum(r["resubmitted"] == [intent.step_id] for r in reports) == 1, reports
    for r, proc in zip(reports, resumes, strict=True):
        # the others waited for the winner and report its job as found
        assert r["resubmitted"] + r["found"] == [intent.step_id], (r, proc.stderr)
        assert proc.returncode == 0, proc.stderr


@pytest.mark.lab
@pytest.mark.usefixtures("lab_cluster")
def test_two_concurrent_approvals_submit_once(
    user_site, workdir: Path, jobsmith_home: Path
) -> None:  # type: ignore[no-untyped-def]
    user_site("policy:\n  approval:\n    core_hours: 0.01\n")
    held = js("submit", "command", "-P", "command=true", "--log-dir", str(workdir))
    assert held.exit_code == 8, held.output
    # a user's store holds many sessions; each approve reads the held one first, then
    # the rest, before it answers: the time in which both can see the step pending
    store = FileSessionStore(jobsmith_home / "state" / "sessions")
    for _ in range(1000):
        store.create({"title": "an older day's work"})
    (item,) = json.loads(js("pending", "--json").stdout)["pending"]
    intent = next(e for e in session_events(item["session_id"]) if e["kind"] == "intent")
    job_name = intent["data"]["job_name"]

    approvals = run_together([jobsmith("approve", item["step_id"], "--json")] * 2, workdir)

    assert len(jobs_named(job_name)) == 1, [a.stderr for a in approvals]
    codes = sorted(a.returncode for a in approvals)
    assert codes == [0, 6], [a.stderr for a in approvals]  # 6: the step no longer waits
    loser = next(a for a in approvals if a.returncode == 6)
    # which message depends on whether the loser read the log before the winner's answer
    assert "already approved by" in loser.stderr or "no step" in loser.stderr, loser.stderr
    kinds = [e["kind"] for e in session_events(item["session_id"])]
    assert kinds.count("approval_given") == 1 and kinds.count("result") == 1, kinds


# --- claims raced by OS processes, and resumes that lose (no Slurm) ---------------------

STEP = "st-raced"
LEASE = timedelta(minutes=10)
FORK = multiprocessing.get_context("fork")


@pytest.fixture
def store(tmp_path: Path) -> FileSessionStore:
    return FileSessionStore(tmp_path / "sessions")


def claim(store: FileSessionStore, session: str) -> Event:
    """What `sessions resume` appends before acting on the step."""
    data = {"owner": owner(utc_now(), LEASE)}
    return SessionLog(store, session).append_if(
        EventKind.CLAIMED, data, STEP, claimable(STEP, utc_now)
    )


def in_dead_process(fn: Callable[[], object]) -> None:
    """Run fn in a child process that then exits (a crashed actor)."""
    child = FORK.Process(target=fn)
    child.start()
    child.join()
    assert child.exitcode == 0


def crashed_intent(store: FileSessionStore) -> str:
    """A session whose step's intent was written by a process that is gone."""
    session = store.create()
    in_dead_process(lambda: SessionLog(store, session).intent(STEP, {"step": {}}))
    return session


def race(n: int, act: Callable[[int], str]) -> list[str]:
    """act(i) in n processes released together; each stays alive until all have acted
    (a winner that exited at once would leave a dead holder to take over)."""
    start, done, outcomes = FORK.Barrier(n), FORK.Event(), FORK.Queue()

    def racer(i: int) -> None:
        start.wait()
        try:
            outcomes.put(act(i))
        except (StepClaimed, StepSettled) as err:
            outcomes.put(f"lost: {err}")
        done.wait(60)

    procs = [FORK.Process(target=racer, args=(i,)) for i in range(n)]
    for p in procs:
        p.start()
    results = [outcomes.get(timeout=60) for _ in procs]
    done.set()
    for p in procs:
        p.join()
    return results


def holding_process(store: FileSessionStore, session: str, then: Callable[[], object]) -> Any:
    """A process that claims the step, signals, then runs `then` once released."""
    held, release = FORK.Event(), FORK.Event()

    def run() -> None:
        claim(store, session)
        held.set()
        release.wait(60)
        then()

    proc = FORK.Process(target=run)
    proc.start()
    assert held.wait(60)
    return proc, release


def test_racing_claims_exactly_one_wins(store: FileSessionStore) -> None:
    session = crashed_intent(store)
    outcomes = race(6, lambda i: f"won {claim(store, session).writer}")
    won = [o for o in outcomes if o.startswith("won")]
    assert len(won) == 1, outcomes
    winner = won[0].split()[1]
    lost = [o for o in outcomes if o.startswith("lost")]
    assert len(lost) == 5 and all(f"being resumed by {winner}" in o for o in lost), outcomes
    claims = [e for e in store.read(session) if e.kind is EventKind.CLAIMED]
    assert [e.writer for e in claims] == [winner]


def test_racing_results_only_one_is_recorded(store: FileSessionStore) -> None:
    session = crashed_intent(store)

    def result(i: int) -> str:
        append_result(SessionLog(store, session), STEP, {"outcome": "done", "by": i})
        return "recorded"

    outcomes = race(6, result)
    assert outcomes.count("recorded") == 1, outcomes
    assert all("already has a result" in o for o in outcomes if o != "recorded")
    results = [e for e in store.read(session) if e.kind is EventKind.RESULT]
    assert len(results) == 1
    with pytest.raises(StepSettled, match=f"step {STEP} already has a result"):
        append_result(SessionLog(store, session), STEP, {"outcome": "done"})


def test_racing_answers_only_one_counts(store: FileSessionStore) -> None:
    session = crashed_intent(store)
    store.append(session, 2, EventKind.APPROVAL_ASKED, {"step": {"action": "submit"}}, STEP)
    (item,) = pending_approvals(store)

    def answered(i: int) -> str:
        event = answer(store, item, i % 2 == 0, {"by": f"person-{i}"})
        return f"answered {event.kind.value}"

    outcomes = race(6, answered)
    assert len([o for o in outcomes if o.startswith("answered")]) == 1, outcomes
    assert all("was already" in o for o in outcomes if o.startswith("lost")), outcomes
    kinds = [e.kind for e in store.read(session)]
    assert kinds.count(EventKind.APPROVAL_GIVEN) + kinds.count(EventKind.APPROVAL_REFUSED) == 1


def test_claim_of_a_dead_process_is_taken_over(store: FileSessionStore) -> None:
    session = crashed_intent(store)
    alive, release = holding_process(store, session, lambda: None)
    with pytest.raises(StepClaimed, match=f"being resumed by [^ ]+:{alive.pid} "):
        claim(store, session)
    release.set()
    alive.join()
    mine = claim(store, session)  # its holder is gone: taken over
    assert mine.writer.endswith(f":{os.getpid()}")
    claims = [e for e in store.read(session) if e.kind is EventKind.CLAIMED]
    assert [e.writer.split(":")[1] for e in claims] == [str(alive.pid), str(os.getpid())]


def test_a_holder_that_exited_unreaped_holds_nothing(store: FileSessionStore) -> None:
    session = crashed_intent(store)
    pid = os.fork()
    if pid == 0:  # claims, then exits; not reaped until the end: a zombie meanwhile
        claim(store, session)
        os._exit(0)
    stat = Path(f"/proc/{pid}/stat")
    while stat.read_text().rpartition(")")[2].split()[0] != "Z":
        time.sleep(0.01)
    try:
        assert claim(store, session).writer.endswith(f":{os.getpid()}")
    finally:
        os.waitpid(pid, 0)


def test_a_recycled_pid_does_not_hold_the_claim(store: FileSessionStore) -> None:
    session = crashed_intent(store)
    parent = os.getppid()  # alive, and not this process
    someone = {**owner(utc_now(), LEASE), "pid": parent, "started": process_start(parent)}
    store.append(session, 2, EventKind.CLAIMED, {"owner": someone}, STEP)
    with pytest.raises(StepClaimed):
        claim(store, session)  # the very process that claimed: alive
    recycled = {**someone, "started": "another-boot:1"}
    store.append(session, 3, EventKind.CLAIMED, {"owner": recycled}, STEP)
    claim(store, session)  # same pid, another process: the claim is stale


def test_the_intent_writer_holds_its_step_while_alive(tmp_path: Path) -> None:
    store = FileSessionStore(tmp_path / "sessions")
    session = store.create()
    SessionLog(store, session).intent(STEP, {"step": {}})  # this process, still running
    outcomes = race(1, lambda i: f"won {claim(store, session).writer}")
    assert outcomes[0].startswith(f"lost: step {STEP} is being run by its own process,"), outcomes
    assert f":{os.getpid()} " in outcomes[0]
    # an intent older than this process was written by another one with our pid
    old = FileSessionStore(tmp_path / "sessions", clock=lambda: datetime(2020, 1, 1, tzinfo=UTC))
    again = old.create()
    SessionLog(old, again).intent(STEP, {"step": {}})
    assert race(1, lambda i: f"won {claim(store, again).writer}")[0].startswith("won")


def test_a_holder_on_another_host_holds_until_its_lease_ends(store: FileSessionStore) -> None:
    session = crashed_intent(store)
    elsewhere = {"host": "other-login-node", "pid": 1, "started": None}
    until = utc_now() + timedelta(minutes=3)
    store.append(session, 2, EventKind.CLAIMED, {"owner": {**elsewhere, "until": str(until)}}, STEP)
    with pytest.raises(StepClaimed, match="other-login-node:1"):
        claim(store, session)
    ended = utc_now() - CLOCK_SKEW - timedelta(seconds=1)
    store.append(session, 3, EventKind.CLAIMED, {"owner": {**elsewhere, "until": str(ended)}}, STEP)
    claim(store, session)


def test_a_step_with_a_result_cannot_be_claimed(store: FileSessionStore) -> None:
    session = crashed_intent(store)
    store.append(session, 2, EventKind.RESULT, {"outcome": "done"}, STEP)
    with pytest.raises(StepSettled, match="already has a result"):
        claim(store, session)


def test_a_resume_that_loses_leaves_the_step_undecided(jobsmith_home: Path) -> None:
    store = FileSessionStore(jobsmith_home / "state" / "sessions")
    session = crashed_intent(store)
    proc, release = holding_process(store, session, lambda: None)
    try:
        out = js("sessions", "resume", session, "--wait", "1", "--json")
    finally:
        release.set()
        proc.join()
    assert out.exit_code == 9, out.output
    report = json.loads(out.stdout)
    assert report["resubmitted"] == [] and report["found"] == []
    assert f"being resumed by {socket.gethostname()}:{proc.pid}," in report["undecided"][STEP]
    assert [e.kind for e in store.read(session)].count(EventKind.CLAIMED) == 1  # not ours


def test_a_resume_that_loses_reports_what_the_winner_did(jobsmith_home: Path) -> None:
    store = FileSessionStore(jobsmith_home / "state" / "sessions")
    session = crashed_intent(store)

    def submit() -> None:
        result = {"outcome": "done", "submitted": True, "job_id": "4242"}
        append_result(SessionLog(store, session), STEP, result)

    proc, release = holding_process(store, session, submit)
    threading.Timer(1.0, release.set).start()  # the winner finishes while we wait
    out = js("sessions", "resume", session, "--wait", "60", "--json")
    proc.join()
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout)["found"] == [STEP]
    assert [e.kind for e in store.read(session)].count(EventKind.RESULT) == 1


def test_an_intent_from_another_node_is_not_waited_for(jobsmith_home: Path) -> None:
    store = FileSessionStore(jobsmith_home / "state" / "sessions")
    session = store.create()
    SessionLog(store, session).intent(STEP, {"step": {}, "host": "other-login-node"})
    started = time.monotonic()
    out = js("sessions", "resume", session, "--wait", "60", "--json")
    assert out.exit_code == 9, out.output
    assert time.monotonic() - started < 30  # it cannot see that process: no use waiting
    why = json.loads(out.stdout)["undecided"][STEP]
    assert "being run by its own process, other-login-node:" in why
    assert "resume on other-login-node, or after" in why

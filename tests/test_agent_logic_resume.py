"""`sessions resume` decisions without Slurm: found, resubmitted, re-run, or undecided.

A crash is simulated in-process: SchedulerDouble raises SimulatedCrash (a BaseException
nothing in jobsmith catches, like SIGKILL) from sbatch, before or after Slurm got the job,
so the session keeps an intent with no result. The process that wrote that intent is
this one, which claims.Holder.is_me() lets its own resume take over; other holders
(another login node, another live process) are written into the log as claims.py reads
them. test_crash (every kill boundary on the lab) and test_claims (racing real processes)
cover the same code against Slurm and real processes; these cover each branch, including
the undecided ones that a healthy lab never reaches.
"""

from __future__ import annotations

import os
import socket
import subprocess
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from scheduler_double import AgentHarness, SchedulerDouble, SimulatedCrash

from jobsmith.adapters.options import JobOptions
from jobsmith.adapters.scheduler import SubmitResult
from jobsmith.adapters.slurm.inflight import SUBMIT_TAG_ENV, orphan_sbatch_alive
from jobsmith.agent.runtime.recovery.resume import (
    ResumeReport,
    _local_since,
    in_flight,
    resume_session,
)
from jobsmith.agent.runtime.session.claims import SBATCH_MAX_LIFE, owner, process_start
from jobsmith.agent.runtime.session.events import Event, EventKind
from jobsmith.agent.runtime.session.session_log import SessionLog
from jobsmith.agent.runtime.session.store import utc_now
from jobsmith.agent.runtime.submission import steps as st
from jobsmith.agent.runtime.submission.approval.approvals import (
    ApprovalNeeded,
    answer,
    find_pending,
    pending_approvals,
)
from jobsmith.agent.runtime.submission.request.jobs import JobRequest
from jobsmith.agent.runtime.workflows.plans import Plan

HOST = socket.gethostname()


@pytest.fixture
def h(tmp_path: Path) -> AgentHarness:
    return AgentHarness.build(tmp_path, {"approval": {"core_hours": 100}})


def resume(h: AgentHarness, session: str, **kw: Any) -> ResumeReport:
    scheduler = h.slurm  # the Scheduler protocol, dbd_backlog included
    kw.setdefault("host", HOST)
    kw.setdefault("orphan_wait_s", 0)
    kw.setdefault("clock", h.clock)
    kw.setdefault("sleep", lambda s: None)
    return resume_session(h.executor, scheduler, session, **kw)


def request() -> JobRequest:
    return JobRequest(template="command", params={"command": "echo hi"})


def crashed(h: AgentHarness, *, slurm_got_it: bool, step: Any = None) -> tuple[str, str]:
    """A session whose process died in sbatch: (session, step id)."""
    session = h.store.create()
    step = step or st.Submit(job=request())
    if slurm_got_it:
        h.slurm.answer_lost = SimulatedCrash()
    else:
        h.slurm.submit_error = SimulatedCrash()
    with pytest.raises(SimulatedCrash):
        h.executor.run(session, step)
    h.slurm.submit_error = h.slurm.answer_lost = None
    return session, step.id


def kinds(h: AgentHarness, session: str) -> list[str]:
    return [e.kind.value for e in h.store.read(session)]


def intent_of(h: AgentHarness, session: str) -> dict[str, Any]:
    (intent,) = [e for e in h.store.read(session) if e.kind is EventKind.INTENT]
    return dict(intent.data)


# --- found or resubmitted ----------------------------------------------------------------


def test_a_submission_slurm_never_got_is_submitted_again_with_the_same_script_and_tag(
    h: AgentHarness,
) -> None:
    session, step = crashed(h, slurm_got_it=False)
    intent = intent_of(h, session)
    report = resume(h, session)
    assert report == ResumeReport(session_id=session, resubmitted=[step])
    assert h.slurm.count("submit") == 2  # the crashed attempt, then the one that counts
    assert h.slurm.scripts["1000"] == intent["script"]
    assert h.slurm.options["1000"].job_name == intent["job_name"]
    assert kinds(h, session)[-2:] == ["claimed", "result"]
    claimed = h.store.read(session)[-2]
    assert claimed.data["by"] == "sessions resume" and claimed.step_id == step
    # looked up by its name first, from well before the intent was written
    (name, since), *_ = [args for c, args in h.slurm.calls if c == "find_by_name"]
    assert name == intent["job_name"]
    assert since <= datetime.now() - timedelta(minutes=10)
    assert resume(h, session) == ResumeReport(session_id=session)  # nothing in flight now


def test_a_submission_slurm_got_is_found_by_its_tag_and_not_submitted_again(
    h: AgentHarness,
) -> None:
    session, step = crashed(h, slurm_got_it=True)
    report = resume(h, session)
    assert report == ResumeReport(session_id=session, found=[step])
    assert h.slurm.count("submit") == 1
    record = h.ledger.get("1000")
    assert record is not None and record.recovered and record.session_id == session
    result = h.store.read(session)[-1]
    assert result.data["recovered"] is True and result.data["job_id"] == "1000"


def test_an_approved_step_is_submitted_without_asking_again(tmp_path: Path) -> None:
    h = AgentHarness.build(tmp_path, {"approval": {"core_hours": 0.1}})
    session = h.store.create()
    step = st.Submit(job=request())
    with pytest.raises(ApprovalNeeded):
        h.executor.run(session, step)
    item = find_pending(h.store, step.id)
    answer(h.store, item, True, {"by": "carol", "script_sha256": item.script_sha256})
    # the approver died before its sbatch: resume submits what was approved
    assert resume(h, session).resubmitted == [step.id]
    assert h.slurm.count("submit") == 1


def test_steps_waiting_for_a_person_or_denied_are_left_alone(tmp_path: Path) -> None:
    h = AgentHarness.build(tmp_path, {"approval": {"core_hours": 0.1}})
    session = h.store.create()
    waiting, denied = st.Submit(job=request()), st.Submit(job=request())
    for step in (waiting, denied):
        with pytest.raises(ApprovalNeeded):
            h.executor.run(session, step)
    answer(h.store, find_pending(h.store, denied.id), False, {"by": "carol"})
    assert resume(h, session) == ResumeReport(session_id=session)
    assert h.slurm.calls == [("active_tasks", ()), ("active_tasks", ())]
    assert [p.step_id for p in pending_approvals(h.store)] == [waiting.id]


def test_a_read_or_control_step_cut_short_is_simply_run_again(h: AgentHarness) -> None:
    session = h.store.create()
    step = st.Cancel(job_ids=["77"])
    SessionLog(h.store, session).intent(step.id, {"step": step.model_dump(mode="json")})
    assert resume(h, session) == ResumeReport(session_id=session, rerun=[step.id])
    assert h.slurm.calls == [("cancel", (("77",),))]
    assert h.store.read(session)[-1].data["outcome"] == "done"


def test_only_the_first_intent_of_a_step_without_a_result_is_in_flight() -> None:
    def e(seq: int, kind: EventKind, step: str) -> Event:
        return Event(session_id="s", seq=seq, kind=kind, at=utc_now(), step_id=step)

    events = [
        e(1, EventKind.INTENT, "a"),
        e(2, EventKind.INTENT, "a"),  # the same step's intent again: one step
        e(3, EventKind.INTENT, "done"),
        e(4, EventKind.RESULT, "done"),
        e(5, EventKind.INTENT, "asked"),
        e(6, EventKind.APPROVAL_ASKED, "asked"),
        e(7, EventKind.INTENT, "given"),
        e(8, EventKind.APPROVAL_ASKED, "given"),
        e(9, EventKind.APPROVAL_GIVEN, "given"),
        e(10, EventKind.INTENT, "refused"),
        e(11, EventKind.APPROVAL_ASKED, "refused"),
        e(12, EventKind.APPROVAL_REFUSED, "refused"),
    ]
    assert [(x.seq, x.step_id) for x in in_flight(events)] == [(1, "a"), (7, "given")]


class DiesInSecondSbatch(SchedulerDouble):
    """The double, under a process killed in its second sbatch (before Slurm got the job)."""

    def submit(self, script: str, options: JobOptions) -> SubmitResult:
        if self.count("submit") == 1:
            self._call("submit", script, options)
            raise SimulatedCrash
        return super().submit(script, options)


def killed_mid_plan(h: AgentHarness) -> tuple[str, str, str]:
    """A three-job plan whose process died in its second sbatch: (session, the plan's step
    id, the step id of the job in flight)."""
    hi = {"template": "command", "params": {"command": "echo hi"}}
    plan = Plan.model_validate(
        {"name": "chain", "steps": {"a": hi, "b": {**hi, "after_ok": ["a"]}, "c": hi}}
    )
    session = h.store.create()
    step = st.RunPlan(plan=plan)
    with pytest.raises(SimulatedCrash):
        h.executor.run(session, step)
    in_flight_job = next(
        str(e.step_id)
        for e in reversed(h.store.read(session))
        if e.kind is EventKind.INTENT and e.step_id != step.id
    )
    return session, step.id, in_flight_job


def test_a_plan_killed_mid_submission_goes_on_only_after_its_job_in_flight_is_settled(
    tmp_path: Path,
) -> None:
    h = AgentHarness.build(tmp_path, {"approval": {"core_hours": 100}}, DiesInSecondSbatch())
    session, plan_step, in_flight_job = killed_mid_plan(h)
    # the plan's intent comes first in the log; its job in flight is settled first all the same
    report = resume(h, session)
    assert report == ResumeReport(
        session_id=session, resubmitted=[in_flight_job], rerun=[plan_step]
    )
    names = [o.job_name for o in h.slurm.options.values()]
    assert len(names) == 3 == len(set(names))  # each job of the plan once
    assert h.slurm.count("submit") == 4  # the one the crash took, then three


def test_a_plan_whose_job_in_flight_stays_undecided_waits_too(tmp_path: Path) -> None:
    h = AgentHarness.build(tmp_path, {"approval": {"core_hours": 100}}, DiesInSecondSbatch())
    session, plan_step, in_flight_job = killed_mid_plan(h)
    h.slurm.backlog = 1  # slurmdbd behind: the job cannot be known absent yet
    report = resume(h, session)
    assert list(report.undecided) == [in_flight_job, plan_step]
    assert report.undecided[plan_step] == (
        "plan chain: the job of step b was being submitted when its process stopped and is"
        f" not settled; run `jobsmith sessions resume {session}` (it settles that job first,"
        " then goes on with the plan)"
    )
    assert h.slurm.count("submit") == 2  # a, and the attempt the crash took: c waits too


# --- undecided: nothing submitted ----------------------------------------------------------


def test_while_slurmdbd_catches_up_resume_waits_then_decides(h: AgentHarness) -> None:
    session, step = crashed(h, slurm_got_it=False)
    h.slurm.backlog = 3
    waits: list[float] = []

    def sleep(seconds: float) -> None:
        waits.append(seconds)
        h.slurm.backlog -= 1

    assert resume(h, session, orphan_wait_s=60, sleep=sleep).resubmitted == [step]
    assert waits == [0.5, 0.5, 0.5]


def test_a_backlog_that_outlasts_the_wait_leaves_the_step_undecided(h: AgentHarness) -> None:
    session, step = crashed(h, slurm_got_it=False)
    h.slurm.backlog = 1
    report = resume(h, session)
    name = intent_of(h, session)["job_name"]
    assert report.undecided == {
        step: f"an sbatch for {name} is still running, or slurmdbd is still catching up"
    }
    assert report.resubmitted == report.found == [] and h.slurm.count("submit") == 1


def test_an_orphaned_sbatch_on_this_host_is_waited_for(tmp_path: Path) -> None:
    proc = tmp_path / "proc"
    for pid, env in [("101", b"A=1\0JOBSMITH_SUBMISSION=job.js-0123456789ab\0"), ("102", b"")]:
        (proc / pid).mkdir(parents=True)
        (proc / pid / "environ").write_bytes(env)
    (proc / "103").mkdir()  # gone, or another user's: no environ to read
    (proc / "self").mkdir()
    (proc / "self" / "environ").write_bytes(f"{SUBMIT_TAG_ENV}=mine\0".encode())
    (proc / str(os.getpid())).mkdir()
    (proc / str(os.getpid()) / "environ").write_bytes(f"{SUBMIT_TAG_ENV}=mine\0".encode())
    assert orphan_sbatch_alive("job.js-0123456789ab", proc)
    assert not orphan_sbatch_alive("job.js-0123456789", proc)  # whole entries only
    assert not orphan_sbatch_alive("mine", proc)  # this process, and no pid directory
    assert not orphan_sbatch_alive("job.js-ffffffffffff", proc)


def test_an_intent_from_another_login_node_is_not_acted_on_until_its_lease_ends(
    h: AgentHarness,
) -> None:
    session = h.store.create()
    step = st.Submit(job=request())
    with pytest.raises(SimulatedCrash):
        h.slurm.submit_error = SimulatedCrash()
        h.executor.run(session, step)
    h.slurm.submit_error = None
    data = {**intent_of(h, session), "host": "other-node"}
    other = h.store.create()
    SessionLog(h.store, other).intent(step.id, data)
    written = h.store.read(other)[-1].at
    until = written + SBATCH_MAX_LIFE + timedelta(minutes=1)
    report = resume(h, other)
    assert report.undecided == {
        step.id: f"being run by its own process, other-node:{os.getpid()}, on another login"
        f" node: nothing submitted; resume on other-node, or after {until:%H:%M} UTC"
    }
    assert h.slurm.count("find_by_name") == 0
    h.clock.now = until + timedelta(seconds=1)
    assert resume(h, other).resubmitted == [step.id]


def test_resume_on_another_host_than_the_intents_waits_for_sbatch_s_longest_life(
    h: AgentHarness,
) -> None:
    session, step = crashed(h, slurm_got_it=False)
    written = h.store.read(session)[1].at
    until = written + SBATCH_MAX_LIFE
    report = resume(h, session, host="another-node")
    assert report.undecided == {
        step: f"its sbatch ran on {HOST}; resume there, or after {until:%H:%M} UTC"
    }
    h.clock.now = until
    assert resume(h, session, host="another-node").resubmitted == [step]


def test_an_sbatch_run_on_a_login_node_over_ssh_is_waited_out_before_a_resubmission(
    h: AgentHarness,
) -> None:
    # this process wrote the intent (so it may take the step over), but its sbatch ran on
    # the login node, where an orphan may still submit: resume cannot look there
    source, step = crashed(h, slurm_got_it=False)
    session = h.store.create()
    data = {**intent_of(h, source), "submit_host": "ssh:alice@login1:22"}
    SessionLog(h.store, session).intent(step, data)
    until = h.store.read(session)[-1].at + SBATCH_MAX_LIFE
    report = resume(h, session)
    assert report.undecided == {
        step: f"its sbatch ran on ssh:alice@login1:22; resume after {until:%H:%M} UTC"
    }
    assert h.slurm.count("submission_in_flight") == 0 and h.slurm.count("submit") == 1
    h.clock.now = until
    assert resume(h, session).resubmitted == [step]
    assert h.slurm.count("submit") == 2


def test_an_intent_from_before_submit_host_was_recorded_is_judged_by_its_host(
    h: AgentHarness,
) -> None:
    source, step = crashed(h, slurm_got_it=False)
    session = h.store.create()
    data = {k: v for k, v in intent_of(h, source).items() if k != "submit_host"}
    assert data["host"] == HOST
    SessionLog(h.store, session).intent(step, data)
    assert resume(h, session) == ResumeReport(session_id=session, resubmitted=[step])


def test_slurm_answering_after_the_claim_s_lease_leaves_the_step_undecided(
    h: AgentHarness,
) -> None:
    session, step = crashed(h, slurm_got_it=False)
    # the lease covers --wait plus two minutes of look-ups before sbatch must start
    h.slurm.on_find = lambda: h.clock.advance(seconds=30 + 120 + 1)
    report = resume(h, session, orphan_wait_s=30)
    assert report.undecided == {
        step: "Slurm answered too slowly to submit within this resume's claim"
    }
    assert h.slurm.count("submit") == 1
    h.slurm.on_find = lambda: h.clock.advance(seconds=30 + 120)  # just in time
    assert resume(h, session, orphan_wait_s=30).resubmitted == [step]


def holder_claim(h: AgentHarness, session: str, step: str, **who: Any) -> None:
    data = {"owner": {**owner(h.clock(), timedelta(minutes=10)), **who}}
    SessionLog(h.store, session).append(EventKind.CLAIMED, data, step)


def test_a_step_another_live_process_holds_is_left_to_it(h: AgentHarness) -> None:
    session, step = crashed(h, slurm_got_it=False)
    parent = os.getppid()  # alive, and not this process
    holder_claim(h, session, step, pid=parent, started=process_start(parent))
    report = resume(h, session)
    assert report.undecided == {
        step: f"being resumed by {HOST}:{parent}, still after 0s: nothing submitted; resume "
        "again once it has finished"
    }
    assert h.slurm.count("find_by_name") == 0 and h.slurm.count("submit") == 1


def settled_while_waiting(
    h: AgentHarness, session: str, step: str, result: dict[str, Any]
) -> ResumeReport:
    """Resume a step another live process holds, which records result while resume waits."""
    parent = os.getppid()
    holder_claim(h, session, step, pid=parent, started=process_start(parent))
    log = SessionLog(h.store, session)
    return resume(
        h, session, orphan_wait_s=60, sleep=lambda s: log.append(EventKind.RESULT, result, step)
    )


def test_a_holder_that_submits_while_resume_waits_makes_the_step_found(
    h: AgentHarness,
) -> None:
    session, step = crashed(h, slurm_got_it=False)
    result = {"outcome": "done", "submitted": True, "job_id": "5"}
    assert settled_while_waiting(h, session, step, result).found == [step]
    assert h.slurm.count("find_by_name") == 0 and h.slurm.count("submit") == 1


def test_a_holder_that_fails_while_resume_waits_leaves_its_words(h: AgentHarness) -> None:
    session, step = crashed(h, slurm_got_it=False)
    report = settled_while_waiting(h, session, step, {"outcome": "refused", "error": "budget"})
    writer = h.store.read(session)[-1].writer
    assert report.undecided == {step: f"resumed by {writer}, which recorded refused: budget"}


def test_a_control_step_a_holder_ran_while_resume_waits_counts_as_rerun(
    h: AgentHarness,
) -> None:
    session = h.store.create()
    cancel = st.Cancel(job_ids=["7"])
    SessionLog(h.store, session).intent(cancel.id, {"step": cancel.model_dump(mode="json")})
    report = settled_while_waiting(h, session, cancel.id, {"outcome": "done"})
    assert report.rerun == [cancel.id] and h.slurm.count("cancel") == 0


def test_since_for_the_lookup_reaches_back_past_the_intent(h: AgentHarness) -> None:
    at = h.clock() - timedelta(hours=2)
    since = _local_since(at, h.clock)
    assert since.tzinfo is None  # sacct's -S is local time
    expected = datetime.now() - timedelta(hours=2, minutes=10)
    assert abs((since - expected).total_seconds()) < 5


def test_a_step_that_died_before_asking_for_approval_is_asked_on_resume(
    tmp_path: Path,
) -> None:
    h = AgentHarness.build(tmp_path, {"approval": {"core_hours": 0.1}})
    first = h.store.create()
    step = st.Submit(job=request())
    with pytest.raises(ApprovalNeeded):
        h.executor.run(first, step)
    intent = intent_of(h, first)
    # the same session as its process left it when killed right after the intent
    session = h.store.create()
    SessionLog(h.store, session).intent(step.id, intent)
    later = st.Cancel(job_ids=["77"])  # another step cut short in the same session
    SessionLog(h.store, session).intent(later.id, {"step": later.model_dump(mode="json")})
    report = resume(h, session)
    assert report.rerun == [later.id] and list(report.undecided) == [step.id]
    assert report.undecided[step.id].startswith(f"step {step.id} needs a person's approval")
    (asked,) = [p for p in pending_approvals(h.store) if p.session_id == session]
    assert asked.step_id == step.id and asked.script == intent["script"]
    assert asked.reason == "0.5 core-hours is above the approval threshold of 0.1"
    assert h.slurm.count("submit") == 0
    # approved now, the same resume path submits it
    answer(h.store, asked, True, {"by": "carol", "script_sha256": asked.script_sha256})
    assert resume(h, session).resubmitted == [step.id]
    assert h.slurm.count("submit") == 1


def test_resume_never_submits_a_step_above_a_threshold_that_was_not_approved(
    tmp_path: Path,
) -> None:
    h = AgentHarness.build(tmp_path, {"approval": {"core_hours": 0.1}})
    first = h.store.create()
    step = st.Submit(job=request())
    with pytest.raises(ApprovalNeeded):
        h.executor.run(first, step)
    session = h.store.create()  # killed right after the intent: no approval asked yet
    SessionLog(h.store, session).intent(step.id, intent_of(h, first))
    assert list(resume(h, session).undecided) == [step.id]
    # asked now: the next resume leaves it to the person
    assert resume(h, session) == ResumeReport(session_id=session)
    assert h.slurm.count("submit") == 0


@pytest.fixture
def live_writer(h: AgentHarness) -> Iterator[tuple[str, str, int]]:
    """A session whose submission intent another live process on this host wrote:
    (session, step id, its pid). The process lives until the test ends."""
    source, step_id = crashed(h, slurm_got_it=False)
    data = intent_of(h, source)
    session = h.store.create()
    ready_r, ready_w = os.pipe()
    done_r, done_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child writes the intent, then waits to be let go
        try:
            SessionLog(h.store, session).intent(step_id, data)
            os.write(ready_w, b"x")
            os.read(done_r, 1)
        finally:
            os._exit(0)
    assert os.read(ready_r, 1) == b"x"
    try:
        yield session, step_id, pid
    finally:
        os.write(done_w, b"x")
        os.waitpid(pid, 0)
        for fd in (ready_r, ready_w, done_r, done_w):
            os.close(fd)


def test_resume_waits_for_a_live_intent_writer_on_this_host(
    h: AgentHarness, live_writer: tuple[str, str, int]
) -> None:
    session, step, pid = live_writer
    naps: list[float] = []

    def nap(seconds: float) -> None:  # the writer's sbatch answers while resume waits
        naps.append(seconds)
        result = {"outcome": "done", "submitted": True, "job_id": "77"}
        SessionLog(h.store, session).append(EventKind.RESULT, result, step)

    assert resume(h, session, orphan_wait_s=60, sleep=nap).found == [step]
    assert naps == [0.5] and h.slurm.count("find_by_name") == 0
    writer = next(e for e in h.store.read(session) if e.kind is EventKind.INTENT).writer
    assert writer == f"{HOST}:{pid}"


def test_resume_does_not_wait_for_an_intent_written_on_another_node(h: AgentHarness) -> None:
    session = h.store.create()
    step = st.Submit(job=request())
    data = {"step": step.model_dump(mode="json"), "job_name": "x.js-0123456789ab"}
    SessionLog(h.store, session).intent(step.id, {**data, "script": "#!", "host": "far"})
    naps: list[float] = []
    report = resume(h, session, orphan_wait_s=60, sleep=naps.append)
    assert naps == [] and list(report.undecided) == [step.id]


def test_resume_s_claim_covers_its_wait_its_lookups_and_an_sbatch(h: AgentHarness) -> None:
    session, _ = crashed(h, slurm_got_it=True)
    resume(h, session, orphan_wait_s=30)
    (claim,) = [e for e in h.store.read(session) if e.kind is EventKind.CLAIMED]
    who = claim.data["owner"]
    assert isinstance(who, dict) and claim.data["by"] == "sessions resume"
    lease = timedelta(seconds=30) + timedelta(minutes=2) + SBATCH_MAX_LIFE
    assert who["until"] == (h.clock() + lease).isoformat()
    assert (who["host"], who["pid"]) == (HOST, os.getpid())


def test_an_sbatch_still_running_with_the_submission_s_tag_is_waited_for(
    h: AgentHarness,
) -> None:
    session, step = crashed(h, slurm_got_it=False)
    name = intent_of(h, session)["job_name"]
    env = {**os.environ, SUBMIT_TAG_ENV: name}
    orphan = subprocess.Popen(["sleep", "30"], env=env)
    try:
        report = resume(h, session)
    finally:
        orphan.kill()
        orphan.wait()
    assert report.undecided == {
        step: f"an sbatch for {name} is still running, or slurmdbd is still catching up"
    }
    assert h.slurm.count("submit") == 1

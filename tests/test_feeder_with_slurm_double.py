"""The feeder's session side against the scheduler double (agent/runtime/workflows/feeding/
feeder.py): the workload recorded before any part, one part at a time within the limit,
two actors never feeding the same part, feeding resumed by a fresh process, one cancel.
The lab test (tests/test_feeder_lab.py) runs it on the real Slurm."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from scheduler_double import AgentHarness

from jobsmith.adapters.states import JobState
from jobsmith.agent.runtime.session.events import EventKind
from jobsmith.agent.runtime.session.session_log import SessionLog
from jobsmith.agent.runtime.submission import orders
from jobsmith.agent.runtime.submission import steps as st
from jobsmith.agent.runtime.submission.request.jobs import JobRequest
from jobsmith.agent.runtime.workflows.feeding import feeder, record

POLICY: dict[str, Any] = {
    "max_concurrent_jobs": 100,
    "approval": {"core_hours": 1000, "gpu_hours": 8, "nodes": 4},
    "budgets": {"submissions_per_hour": 100, "max_failures_in_a_row": 5},
}


@pytest.fixture
def h(tmp_path: Path) -> AgentHarness:
    harness = AgentHarness.build(tmp_path, POLICY)
    harness.slurm.submit_limit = {"tiny": 4}
    return harness


def submit_workload(h: AgentHarness, tasks: int = 10) -> tuple[str, st.Submit]:
    session = h.store.create()
    job = JobRequest(
        template="command", params={"command": "echo $SLURM_ARRAY_TASK_ID"},
        array=f"0-{tasks - 1}", array_throttle=3, qos="tiny",
    )  # fmt: skip
    step = st.Submit(job=job)
    h.executor.submit(session, orders.NewJob(step))
    return session, step


def end_all(h: AgentHarness) -> None:
    for job_id in list(h.slurm.jobs):
        h.slurm.set_state(job_id, JobState.COMPLETED)


def test_the_workload_is_recorded_before_its_first_part_and_fed_as_parts_end(
    h: AgentHarness,
) -> None:
    session, step = submit_workload(h)
    events = h.store.read(session)
    kinds = [(e.kind, e.step_id) for e in events]
    assert kinds.index((EventKind.WORKLOAD, step.id)) < kinds.index(
        (EventKind.CLAIMED, f"{step.id}.p0")
    )
    assert h.slurm.count("submit") == 1  # 4 of 10 fit the limit; the rest wait
    assert [(o.array, o.array_throttle) for o in h.slurm.options.values()] == [("0-3", 3)]
    assert feeder.feed_session(h.executor, session) == []  # the queue is full
    end_all(h)
    fed = feeder.feed_session(h.executor, session)
    assert [r.step_id for r in fed] == [f"{step.id}.p1"]
    end_all(h)
    fed = feeder.feed_session(h.executor, session)
    assert [r.step_id for r in fed] == [f"{step.id}.p2"]
    assert [o.array for o in h.slurm.options.values()] == ["0-3", "0-3", "0-1"]
    offsets = [s.count("+ 4))") + 2 * s.count("+ 8))") for s in h.slurm.scripts.values()]
    assert offsets == [0, 1, 2]  # the parts' scripts add 0, 4 and 8
    end_all(h)
    assert feeder.feed_session(h.executor, session) == []  # every part fed, once


def test_two_actors_never_feed_the_same_part(h: AgentHarness, monkeypatch: Any) -> None:
    session, step = submit_workload(h)
    end_all(h)
    other = h.with_policy(POLICY)  # a second process: the watcher, while `wait` feeds
    judge = type(h.executor.judge)
    real = judge.spend
    raced: list[int] = []

    def spend(self: Any, *args: Any, **kw: Any) -> Any:
        ruling = real(self, *args, **kw)
        if self is h.executor.judge and not raced:  # between its look and its claim
            raced.append(len(feeder.feed_session(other, session)))
        return ruling

    monkeypatch.setattr(judge, "spend", spend)
    fed = feeder.feed_session(h.executor, session)
    assert raced == [1] and fed == []  # the other took part 1; this one did not take it too
    claims = [e.step_id for e in h.store.read(session) if e.kind is EventKind.CLAIMED]
    assert claims == [f"{step.id}.p0", f"{step.id}.p1"]
    assert h.slurm.count("submit") == 2


def test_a_fresh_process_feeds_on_and_a_cancel_stops_the_workload_whole(
    h: AgentHarness,
) -> None:
    session, step = submit_workload(h)
    end_all(h)
    # the watcher saw part 0 end (a job_state event, as polling records it)
    ended = {"job_id": "1000", "state": "COMPLETED", "task_counts": {"COMPLETED": 4}}
    SessionLog(h.store, session).append(EventKind.JOB_STATE, ended, None)
    fresh = h.with_policy(POLICY)  # after a crash: nothing but the session and the ledger
    assert [r.step_id for r in feeder.feed_session(fresh, session)] == [f"{step.id}.p1"]
    cancelled = feeder.cancel(fresh, session, step.id)
    assert cancelled == ["1001"] and h.slurm.count("cancel") == 1
    end_all(h)
    assert feeder.feed_session(h.executor, session) == []  # part 2 is never fed
    [w] = record.workloads(session, h.store.read(session))
    assert w.cancelled and w.tasks == 10


def test_the_workload_is_one_line_of_tasks_done_running_and_not_yet_submitted(
    h: AgentHarness,
) -> None:
    from jobsmith.agent.runtime.workflows.feeding.progress import workload_progress

    session, _ = submit_workload(h)
    done, running, pending = JobState.COMPLETED, JobState.RUNNING, JobState.PENDING
    polled = {
        "1000": h.slurm.set_tasks("1000", dict(enumerate([done, done, running, pending])), running)
    }
    [p] = workload_progress(session, h.store.read(session), polled)
    assert (p.tasks, p.done, p.running, p.queued, p.not_submitted) == (10, 2, 1, 1, 6)
    assert p.line() == "10 tasks: 2 done, 1 running, 1 queued, 6 not yet submitted"
    [before] = workload_progress(session, h.store.read(session))  # nothing polled yet
    assert before.line() == "10 tasks: 0 done, 0 running, 4 queued, 6 not yet submitted"


def test_cancelling_one_part_s_job_cancels_the_workload_as_one(h: AgentHarness) -> None:
    session, step = submit_workload(h)
    assert feeder.with_workloads(h.store, h.ledger, ["1000_2"]) == ["1000"]
    end_all(h)
    assert feeder.feed_session(h.executor, session) == []  # stopped: part 1 is never fed
    assert feeder.with_workloads(h.store, h.ledger, ["77"]) == ["77"]  # not a part: as is
    cancelled = [e for e in h.store.read(session) if e.kind is EventKind.WORKLOAD][1:]
    assert [(e.step_id, e.data) for e in cancelled] == [(step.id, {"cancelled": True})]


def test_the_workload_is_not_told_ended_while_parts_are_still_to_be_fed(
    h: AgentHarness,
) -> None:
    from jobsmith.agent.runtime.session.jobstate import StateChange
    from jobsmith.agent.runtime.session.readmodel import SessionFolds
    from jobsmith.agent.watcher.workload import ended_workloads

    session, _ = submit_workload(h)
    ended = {"job_id": "1000", "state": "COMPLETED", "task_counts": {"COMPLETED": 4}}
    SessionLog(h.store, session).append(EventKind.JOB_STATE, ended, None)
    change = StateChange(session_id=session, job_id="1000", state=JobState.COMPLETED, previous=None)
    folds = SessionFolds(h.store)
    assert ended_workloads([change], h.ledger, folds) == {session: "1000"}  # its jobs alone
    assert ended_workloads([change], h.ledger, folds, h.store) == {}  # 6 tasks still to feed


def test_a_crash_before_the_workload_was_recorded_is_resumed_as_the_workload(
    h: AgentHarness,
) -> None:
    from jobsmith.agent.runtime.workflows.feeding.feeder import start

    session = h.store.create()
    job = JobRequest(template="command", params={"command": "true"}, array="0-9", qos="tiny")
    step = st.Submit(job=job)
    checked = h.executor.judge.job(job)
    real_begin = feeder.begin

    def crash(*args: Any, **kw: Any) -> Any:
        raise KeyboardInterrupt  # killed right after the intent was written

    feeder.begin = crash  # type: ignore[assignment]
    try:
        with pytest.raises(KeyboardInterrupt):
            start(h.executor, SessionLog(h.store, session), step, checked)
    finally:
        feeder.begin = real_begin  # type: ignore[assignment]
    [intent] = [e for e in h.store.read(session) if e.kind is EventKind.INTENT]
    resumed = h.executor.submit(session, orders.Recorded(step.id, intent.data))
    assert resumed.summary["fed_parts"] == 1 and h.slurm.count("submit") == 1
    assert [o.array for o in h.slurm.options.values()] == ["0-3"]  # a part, never all 10


def test_one_approval_covers_the_workload_and_names_its_total(h: AgentHarness) -> None:
    from scheduler_double import Approver

    from jobsmith.agent.runtime.submission.approval import answers
    from jobsmith.agent.runtime.submission.approval.approvals import ApprovalNeeded

    h.executor = h.with_policy({**POLICY, "approval": {"core_hours": 1}})
    h.slurm.submit_limit = {"tiny": 4}
    session = h.store.create()
    job = JobRequest(template="command", params={"command": "true"}, array="0-9", qos="tiny")
    step = st.Submit(job=job)
    with pytest.raises(ApprovalNeeded, match="a workload of 10 tasks in 3 parts"):
        h.executor.submit(session, orders.NewJob(step))
    assert h.slurm.count("submit") == 0
    result = answers.approve(Approver(h), step.id)
    assert result.summary["fed_parts"] == 1 and h.slurm.count("submit") == 1
    end_all(h)
    assert len(feeder.feed_session(h.executor, session)) == 1  # no second approval asked
    asked = [e for e in h.store.read(session) if e.kind is EventKind.APPROVAL_ASKED]
    assert len(asked) == 1 and asked[0].data["workload"]["tasks"] == 10


def test_a_part_the_policy_now_refuses_is_noted_once_and_fed_when_it_passes(
    h: AgentHarness,
) -> None:
    session, _ = submit_workload(h)
    end_all(h)
    closed = h.with_policy({**POLICY, "budgets": {"node_hours_per_day": 0.001}})
    for _ in range(3):  # three watcher cycles
        assert feeder.feed_sessions(closed, [session]) == {}
    notes = [e.data for e in h.store.read(session) if e.kind is EventKind.NOTE]
    assert len(notes) == 1 and "node-hours per day" in notes[0]["feeding"]
    assert feeder.feed_sessions(h.executor, [session]) == {session: ["1001"]}


def test_the_parts_whose_end_is_not_recorded_are_what_status_polls_besides(
    h: AgentHarness,
) -> None:
    """`status` of one part polls the others whose end the session has not recorded (a
    wait on one part does not record the others': CI showed "37 done, 3 queued")."""
    from jobsmith.agent.runtime.session.readmodel import SessionFolds
    from jobsmith.agent.runtime.workflows.feeding.progress import unended_parts

    session, _ = submit_workload(h)
    events = h.store.read(session)
    [workload] = record.workloads(session, events)
    [first] = record.part_jobs(events, workload.step_id).values()
    folds = SessionFolds(h.store)

    def unended() -> list[str]:
        return unended_parts(session, h.store.read(session), folds.of(session).job_states)

    assert first is not None and unended() == [first]
    log = SessionLog(h.store, session)
    log.append(EventKind.JOB_STATE, {"job_id": first, "state": "PENDING"}, None)
    assert unended() == [first]
    log.append(EventKind.JOB_STATE, {"job_id": first, "state": "COMPLETED"}, None)
    assert unended() == []

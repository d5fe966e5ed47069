"""The rule brain without Slurm: which failures it re-runs, how much it asks for, when it
stops, and what it reports. The real Executor, store and ledger run under SchedulerDouble,
whose job table the test sets to each failure; the brain's re-runs are real submissions
to the double, so the retry cap is checked on the chain of jobs it actually made.

The lab test test_watch.test_oom_array_task_is_rerun_alone_with_more_memory_unattended
shows one real out-of-memory task re-run; these cover the other branches.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from scheduler_double import MIB, AgentHarness, Approver, HarnessParts, SchedulerDouble

from jobsmith.adapters.scheduler import JobStatus
from jobsmith.adapters.states import JobState
from jobsmith.agent.brains.deciding import (
    AlreadyDecided,
    decide_failure,
    decisions_about,
    record_person_rerun,
    rerun_by_hand,
)
from jobsmith.agent.brains.protocol import Action, Decision
from jobsmith.agent.brains.rules import RuleBrain, retry_depth
from jobsmith.agent.diagnosis.job import NO_ACCOUNTING_NOTE
from jobsmith.agent.runtime.session.events import Event, EventKind
from jobsmith.agent.runtime.session.jobstate import StateChange
from jobsmith.agent.runtime.submission import steps as st
from jobsmith.agent.runtime.submission.approval.answers import approve, deny
from jobsmith.agent.runtime.submission.approval.approvals import ApprovalNeeded, pending_approvals
from jobsmith.agent.runtime.submission.request.jobs import JobRequest
from jobsmith.agent.runtime.submission.steps import Rerun
from jobsmith.errors import InputError, NotFound, SchedulerError

POLICY: dict[str, Any] = {"budgets": {"submissions_per_hour": 100}}


@pytest.fixture
def h(tmp_path: Path) -> AgentHarness:
    return AgentHarness.build(tmp_path, POLICY)


def brain(
    h: AgentHarness, stderr: list[str] | None = None, **kw: Any
) -> Callable[[StateChange, JobStatus], dict[str, Any]]:
    """The watcher's decide(): the rule brain run by agent/brains/deciding.py on the harness."""

    def decide(change: StateChange, status: JobStatus) -> dict[str, Any]:
        got = decide_failure(RuleBrain(**kw), h.executor, lambda j: stderr or [], change, status)
        assert got is not None  # None: someone decided first, which no test here sets up
        return got

    return decide


def submit(h: AgentHarness, session: str, **req: Any) -> str:
    job = JobRequest(template="command", params={"command": "make"}, **req)
    return str(h.executor.run(session, st.Submit(job=job)).summary["job_id"])


def failed(session: str, job_id: str, state: JobState) -> StateChange:
    return StateChange(session_id=session, job_id=job_id, state=state, previous=JobState.RUNNING)


def oom(h: AgentHarness, session: str, job_id: str) -> dict[str, Any]:
    """job_id killed for memory at what it asked for; the brain's decision."""
    asked = h.slurm.options[job_id].mem_mb
    assert asked is not None
    status = h.slurm.set_state(
        job_id, JobState.OUT_OF_MEMORY, req_mem_bytes=asked * MIB, max_rss_bytes=asked * MIB
    )
    return brain(h)(failed(session, job_id, JobState.OUT_OF_MEMORY), status)


def outputs(h: AgentHarness, session: str) -> list[Event]:
    return [e for e in h.store.read(session) if e.kind is EventKind.DECISION]


def test_out_of_memory_is_rerun_with_twice_the_memory_and_the_decision_logged_first(
    h: AgentHarness,
) -> None:
    session = h.store.create()
    job = submit(h, session, mem_mb=500)
    decision = oom(h, session, job)
    assert decision == {
        "brain": "rules",
        "job_id": job,
        "verdicts": ["out_of_memory"],
        "remedies": [decision["remedies"][0]],
        "evidence": decision["evidence"],
        "notes": [],
        "action": "rerun",
        "mem_mb": 1000,
        "time_limit_s": None,
        "reason": "out_of_memory: re-run 1 failed task(s) (retry 1 of 2)",
        "outcome": "done",
        "new_job_id": "1001",
    }
    assert "resubmit with --mem 1000M" in decision["remedies"][0]
    assert any("OUT_OF_MEMORY" in e for e in decision["evidence"])
    assert h.slurm.options["1001"].mem_mb == 1000
    kinds = [e.kind for e in h.store.read(session)]
    logged = kinds.index(EventKind.DECISION)
    assert kinds[logged + 1 :] == [EventKind.INTENT, EventKind.RESULT]  # decided, then acted
    (said,) = outputs(h, session)
    assert said.data["brain"] == "rules" and said.data["action"] == "rerun"
    assert said.data["job_id"] == job and "outcome" not in said.data
    steps = said.data["steps"]  # the decision names the step it then runs
    assert isinstance(steps, list) and len(steps) == 1
    step = steps[0]
    assert isinstance(step, dict) and (step["action"], step["mem_mb"]) == ("rerun", 1000)


def test_memory_grows_geometrically_and_the_brain_stops_after_two_reruns(
    h: AgentHarness,
) -> None:
    session = h.store.create()
    first = submit(h, session, mem_mb=500)
    one = oom(h, session, first)
    two = oom(h, session, one["new_job_id"])
    three = oom(h, session, two["new_job_id"])
    assert (one["mem_mb"], two["mem_mb"]) == (1000, 2000)
    assert two["reason"] == "out_of_memory: re-run 1 failed task(s) (retry 2 of 2)"
    assert three["action"] == "report" and "new_job_id" not in three
    assert three["reason"] == "retry budget spent (2 of 2 re-runs)"
    assert h.slurm.count("submit") == 3  # the original and two re-runs, no more
    assert [e.data["action"] for e in outputs(h, session)] == ["rerun", "rerun", "report"]
    assert retry_depth(h.store.read(session), three["job_id"]) == 2


def test_memory_is_capped_by_the_partition_then_the_brain_gives_up(h: AgentHarness) -> None:
    session = h.store.create()
    job = submit(h, session, mem_mb=3000)  # debug allows 4000 MiB per node
    capped = oom(h, session, job)
    assert capped["action"] == "rerun" and capped["mem_mb"] == 4000
    assert "the partition's maximum" in capped["remedies"][0]
    at_cap = oom(h, session, capped["new_job_id"])
    assert at_cap["action"] == "report" and at_cap["reason"] == "a retry cannot fix this"
    assert "already asked for or used the partition's maximum of 4000M" in at_cap["remedies"][0]
    assert h.slurm.count("submit") == 2


def test_time_limit_doubles_capped_by_the_partition(h: AgentHarness) -> None:
    session = h.store.create()
    job = submit(h, session, partition="small", time_limit_s=2700)  # small: at most 2 h
    status = h.slurm.set_state(job, JobState.TIMEOUT, timelimit_s=2700, partition="small")
    decision = brain(h)(failed(session, job, JobState.TIMEOUT), status)
    assert decision["action"] == "rerun"
    assert (decision["time_limit_s"], decision["mem_mb"]) == (5400, None)
    assert h.slurm.options[decision["new_job_id"]].time_limit_s == 5400
    again = h.slurm.set_state(
        decision["new_job_id"], JobState.TIMEOUT, timelimit_s=5400, partition="small"
    )
    capped = brain(h)(failed(session, decision["new_job_id"], JobState.TIMEOUT), again)
    assert capped["time_limit_s"] == 7200


@pytest.mark.parametrize(
    ("state", "fields", "stderr", "verdict"),
    [
        (
            JobState.FAILED,
            {"exit_code": 1},
            ["cat: /data/in.mov: No such file or directory"],
            "missing_input",
        ),
        (
            JobState.FAILED,
            {"exit_code": 127},
            ["bash: line 1: smake: command not found"],
            "command_not_found",
        ),
        (JobState.FAILED, {"exit_code": 3}, [], "nonzero_exit"),
        (JobState.CANCELLED, {"cancelled_by": "1001"}, [], "cancelled"),
    ],
)
def test_failures_more_resources_cannot_fix_are_reported_not_rerun(
    h: AgentHarness, state: JobState, fields: dict[str, Any], stderr: list[str], verdict: str
) -> None:
    session = h.store.create()
    job = submit(h, session)
    status = h.slurm.set_state(job, state, **fields)
    decision = brain(h, stderr)(failed(session, job, state), status)
    assert decision["action"] == "report" and decision["reason"] == "a retry cannot fix this"
    assert decision["verdicts"] == [verdict]
    assert h.slurm.count("submit") == 1
    assert [e.data["action"] for e in outputs(h, session)] == ["report"]


@pytest.mark.parametrize("state", [JobState.PREEMPTED, JobState.NODE_FAIL])
def test_preempted_or_node_failed_jobs_are_rerun_unchanged(
    h: AgentHarness, state: JobState
) -> None:
    session = h.store.create()
    job = submit(h, session)
    status = h.slurm.set_state(job, state, node_list="node1")
    decision = brain(h)(failed(session, job, state), status)
    assert decision["action"] == "rerun" and decision["outcome"] == "done"
    assert (decision["mem_mb"], decision["time_limit_s"]) == (None, None)
    assert h.slurm.options[decision["new_job_id"]].mem_mb == h.slurm.options[job].mem_mb


def array(h: AgentHarness, session: str, n: int) -> str:
    files = []
    for i in range(n):
        path = h.root / f"in{i}.txt"
        path.write_text("x")
        files.append(str(path))
    req = JobRequest(template="file_array", params={"files": ",".join(files), "program": "gzip"})
    return str(h.executor.run(session, st.Submit(job=req)).summary["job_id"])


def test_an_array_reruns_only_its_failed_tasks_with_the_most_any_of_them_needs(
    h: AgentHarness,
) -> None:
    session = h.store.create()
    job = array(h, session, 4)
    tasks = {0: JobState.COMPLETED, 1: JobState.OUT_OF_MEMORY, 2: JobState.COMPLETED}
    tasks[3] = JobState.TIMEOUT
    status = h.slurm.set_tasks(
        job,
        tasks,
        JobState.FAILED,
        req_mem_bytes=1000 * MIB,
        max_rss_bytes=1200 * MIB,
        timelimit_s=600,
    )
    decision = brain(h)(failed(session, job, JobState.FAILED), status)
    assert decision["verdicts"] == ["out_of_memory", "timeout"]
    assert (decision["mem_mb"], decision["time_limit_s"]) == (2000, 1200)
    assert decision["reason"] == "out_of_memory, timeout: re-run 2 failed task(s) (retry 1 of 2)"
    new = h.slurm.options[decision["new_job_id"]]
    assert (new.array, new.mem_mb, new.time_limit_s) == ("1,3", 2000, 1200)


def test_one_task_a_retry_cannot_fix_stops_the_whole_rerun(h: AgentHarness) -> None:
    session = h.store.create()
    job = array(h, session, 2)
    status = h.slurm.set_tasks(
        job, {0: JobState.OUT_OF_MEMORY, 1: JobState.FAILED}, JobState.FAILED, exit_code=2
    )
    decision = brain(h)(failed(session, job, JobState.FAILED), status)
    assert decision["action"] == "report" and decision["verdicts"] == [
        "nonzero_exit",
        "out_of_memory",
    ]
    assert h.slurm.count("submit") == 1


def test_evidence_and_notes_are_cut_to_ten_lines(h: AgentHarness) -> None:
    session = h.store.create()
    job = array(h, session, 12)
    status = h.slurm.set_tasks(job, dict.fromkeys(range(12), JobState.FAILED), JobState.FAILED)

    def unreadable(job_id: str) -> list[str]:
        raise InputError(f"{job_id}: log gone")

    decision = decide_failure(
        RuleBrain(), h.executor, unreadable, failed(session, job, JobState.FAILED), status
    )
    assert decision is not None
    assert len(decision["evidence"]) == 10 and len(decision["notes"]) == 10
    assert decision["notes"][0] == f"stderr not read: {job}_0: log gone"


def test_the_controller_s_reason_decides_a_dependency_that_can_never_be_met(
    h: AgentHarness,
) -> None:
    session = h.store.create()
    job = submit(h, session)
    record = h.slurm.record(job, JobState.CANCELLED)
    status = JobStatus(
        job_id=job, state=JobState.CANCELLED, record=record, reason="DependencyNeverSatisfied"
    )
    decision = brain(h)(failed(session, job, JobState.CANCELLED), status)
    assert decision["verdicts"] == ["dependency_never_satisfied"]
    assert decision["action"] == "report"


def test_the_rerun_step_carries_the_brain_s_reason(h: AgentHarness) -> None:
    session = h.store.create()
    decision = oom(h, session, submit(h, session, mem_mb=500))
    intent = [e for e in h.store.read(session) if e.kind is EventKind.INTENT][-1]
    assert intent.data["reason"] == decision["reason"]
    step = intent.data["step"]
    assert isinstance(step, dict)
    assert step["reason"] == decision["reason"] and step["failed_only"] is True


def test_a_job_slurm_has_no_record_of_is_reported(h: AgentHarness) -> None:
    session = h.store.create()
    job = submit(h, session)
    nothing = JobStatus(job_id=job, state=JobState.FAILED)
    decision = brain(h)(failed(session, job, JobState.FAILED), nothing)
    assert decision["action"] == "report" and decision["verdicts"] == []
    assert decision["reason"] == "a retry cannot fix this"


def test_no_retry_budget_means_report_at_once(h: AgentHarness) -> None:
    session = h.store.create()
    job = submit(h, session, mem_mb=500)
    status = h.slurm.set_state(job, JobState.OUT_OF_MEMORY, req_mem_bytes=500 * MIB)
    decision = brain(h, max_retries=0)(failed(session, job, JobState.OUT_OF_MEMORY), status)
    assert decision["reason"] == "retry budget spent (0 of 0 re-runs)"


def test_a_rerun_above_a_threshold_waits_for_a_person(tmp_path: Path) -> None:
    h = AgentHarness.build(tmp_path, {"approval": {"core_hours": 0.6}})
    session = h.store.create()
    job = submit(h, session, partition="small", time_limit_s=1800)  # 0.5 core-hours: allowed
    status = h.slurm.set_state(job, JobState.TIMEOUT, timelimit_s=1800, partition="small")
    decision = brain(h)(failed(session, job, JobState.TIMEOUT), status)
    assert decision["outcome"] == "awaiting_approval"
    asked = [e for e in h.store.read(session) if e.kind is EventKind.APPROVAL_ASKED]
    assert [e.step_id for e in asked] == [decision["step_id"]]
    assert h.slurm.count("submit") == 1


def test_a_rerun_policy_refuses_is_reported_with_the_rule(tmp_path: Path) -> None:
    h = AgentHarness.build(tmp_path, {"budgets": {"submissions_per_hour": 1}})
    session = h.store.create()
    job = submit(h, session, mem_mb=500)
    status = h.slurm.set_state(job, JobState.OUT_OF_MEMORY, req_mem_bytes=500 * MIB)
    decision = brain(h)(failed(session, job, JobState.OUT_OF_MEMORY), status)
    assert decision["outcome"] == "refused_or_failed"
    assert decision["error"] == (
        "refused by policy (submissions per hour): 1 submissions in the last hour: the limit is 1"
    )
    assert h.slurm.count("submit") == 1


def test_retry_depth_follows_rerun_of_back_to_the_first_submission() -> None:
    def e(seq: int, kind: EventKind, step: str, **data: Any) -> Event:
        at = "2026-01-01T00:00:00+00:00"
        return Event.model_validate(
            {"session_id": "s", "seq": seq, "kind": kind, "at": at, "step_id": step, "data": data}
        )

    events = [
        e(1, EventKind.INTENT, "a"),
        e(2, EventKind.RESULT, "a", submitted=True, job_id="10"),
        e(3, EventKind.INTENT, "b", rerun_of="10"),
        e(4, EventKind.RESULT, "b", submitted=True, job_id="11"),
        e(5, EventKind.INTENT, "c", rerun_of="11"),
        e(6, EventKind.RESULT, "c", submitted=True, job_id="12"),
        e(7, EventKind.INTENT, "d", rerun_of="12"),
        e(8, EventKind.RESULT, "d", submitted=False, job_id="13"),  # refused: no job
    ]
    assert [retry_depth(events, j) for j in ("10", "11", "12", "13", "99")] == [0, 1, 2, 0, 0]


# --- the runner (agent/brains/deciding.py): one decision per failed job, whoever takes it --------


def rerun_step(job_id: str) -> Rerun:
    return Rerun(job_id=job_id, mem_mb=1000, reason="more memory")


def test_a_failed_job_is_decided_once_however_often_it_is_shown(h: AgentHarness) -> None:
    session = h.store.create()
    job = submit(h, session, mem_mb=500)
    other = submit(h, session, mem_mb=500)
    first = oom(h, session, job)
    assert first["action"] == "rerun"
    status = h.slurm.jobs[job]
    again = decide_failure(
        RuleBrain(), h.executor, lambda j: [], failed(session, job, JobState.OUT_OF_MEMORY), status
    )
    assert again is None  # a second watcher, or a later cycle: the first decision stands
    assert [e.data["job_id"] for e in outputs(h, session)] == [job]
    assert h.slurm.count("submit") == 3  # two jobs and one re-run, not two
    # a decision about one job does not decide another
    assert oom(h, session, other)["action"] == "rerun"
    assert decisions_about(h.store.read(session), job)[0].action is Action.RERUN
    assert [d.job_id for d in decisions_about(h.store.read(session), other)] == [other]


def test_a_person_s_rerun_is_recorded_so_the_watcher_leaves_the_job_alone(
    h: AgentHarness,
) -> None:
    session = h.store.create()
    job = submit(h, session, mem_mb=500)
    step = Rerun(job_id=job, mem_mb=1000)  # no reason given
    record_person_rerun(h.executor, session, job, step, "carol")
    (mine,) = decisions_about(h.store.read(session), job)
    assert mine == Decision(
        brain="person (carol)", job_id=job, action=Action.RERUN, reason="by hand", steps=(step,)
    )
    status = h.slurm.set_state(job, JobState.OUT_OF_MEMORY, req_mem_bytes=500 * MIB)
    watcher = decide_failure(
        RuleBrain(), h.executor, lambda j: [], failed(session, job, JobState.OUT_OF_MEMORY), status
    )
    assert watcher is None and h.slurm.count("submit") == 1
    assert len(decisions_about(h.store.read(session), job)) == 1


def test_a_person_cannot_rerun_what_the_watcher_already_reran(h: AgentHarness) -> None:
    session = h.store.create()
    job = submit(h, session, mem_mb=500)
    decision = oom(h, session, job)
    with pytest.raises(AlreadyDecided) as err:
        record_person_rerun(h.executor, session, job, rerun_step(job), "carol")
    assert str(err.value) == (
        f"job {job} was already decided on (rerun by rules: {decision['reason']}); see "
        "`jobsmith sessions show`, and re-run the newer job instead if it failed too"
    )
    assert err.value.earlier.action is Action.RERUN
    assert [e.data["brain"] for e in outputs(h, session)] == ["rules"]


def test_a_person_may_rerun_what_the_watcher_only_reported(h: AgentHarness) -> None:
    session = h.store.create()
    job = submit(h, session)
    status = h.slurm.set_state(job, JobState.FAILED, exit_code=3)
    assert brain(h)(failed(session, job, JobState.FAILED), status)["action"] == "report"
    record_person_rerun(h.executor, session, job, rerun_step(job), "carol")
    assert [e.data["brain"] for e in outputs(h, session)] == ["rules", "person (carol)"]
    with pytest.raises(AlreadyDecided, match=r"\(rerun by person \(carol\): more memory\)"):
        record_person_rerun(h.executor, session, job, rerun_step(job), "dave")


def test_without_accounting_the_decision_says_what_its_verdict_could_not_see(
    h: AgentHarness,
) -> None:
    session = h.store.create()
    job = submit(h, session)
    status = h.slurm.set_state(job, JobState.FAILED, exit_code=3)
    h.slurm.accounting = False
    decision = brain(h)(failed(session, job, JobState.FAILED), status)
    assert decision["action"] == "report" and decision["notes"] == [NO_ACCOUNTING_NOTE]
    (said,) = outputs(h, session)
    assert said.data["notes"] == [NO_ACCOUNTING_NOTE]  # recorded as shown


# --- a canary that failed: its array's rest never runs unless the canary is re-run ----------

CANARY_POLICY: dict[str, Any] = {
    "budgets": {"submissions_per_hour": 100},
    "canary": {"above_tasks": 5, "tasks": 2},
}


def canary_array(h: AgentHarness, session: str) -> tuple[str, str]:
    """A twelve-task array the canary policy splits: (the canary's job, the rest's)."""
    files = []
    for i in range(12):
        path = h.root / f"c{i}.txt"
        path.write_text("x")
        files.append(str(path))
    req = JobRequest(template="file_array", params={"files": ",".join(files), "program": "gzip"})
    summary = h.executor.run(session, st.Submit(job=req)).summary
    canary, rest = str(summary["canary_job_id"]), str(summary["job_id"])
    assert (h.slurm.options[canary].array, h.slurm.options[rest].array) == ("0-1", "2-11")
    return canary, rest


def test_a_canary_that_fails_for_good_cancels_its_array_s_rest(tmp_path: Path) -> None:
    h = AgentHarness.build(tmp_path, CANARY_POLICY)
    session = h.store.create()
    canary, rest = canary_array(h, session)
    status = h.slurm.set_tasks(
        canary, {0: JobState.FAILED, 1: JobState.FAILED}, JobState.FAILED, exit_code=3
    )
    decision = brain(h)(failed(session, canary, JobState.FAILED), status)
    assert decision["action"] == "report" and decision["cancelled"] == [rest]
    assert h.slurm.calls[-1] == ("cancel", ((rest,),))
    assert h.slurm.jobs[rest].state is JobState.CANCELLED
    note = h.store.read(session)[-1]
    assert note.kind is EventKind.NOTE and note.data == {"canary_failed": canary, "cancelled": rest}


def test_a_canary_rerun_leaves_its_array_s_rest_waiting(tmp_path: Path) -> None:
    h = AgentHarness.build(tmp_path, CANARY_POLICY)
    session = h.store.create()
    canary, rest = canary_array(h, session)
    status = h.slurm.set_tasks(
        canary,
        {0: JobState.OUT_OF_MEMORY, 1: JobState.COMPLETED},
        JobState.FAILED,
        req_mem_bytes=1000 * MIB,
        max_rss_bytes=1000 * MIB,
    )
    decision = brain(h)(failed(session, canary, JobState.FAILED), status)
    assert (decision["action"], decision["outcome"]) == ("rerun", "done")
    assert "cancelled" not in decision
    assert h.slurm.count("cancel") == 0 and h.slurm.jobs[rest].state is JobState.PENDING
    assert not [e for e in h.store.read(session) if e.kind is EventKind.NOTE]


def test_a_canary_rerun_policy_refuses_cancels_its_array_s_rest(tmp_path: Path) -> None:
    policy = {**CANARY_POLICY, "budgets": {"submissions_per_hour": 2}}  # the two halves
    h = AgentHarness.build(tmp_path, policy)
    session = h.store.create()
    canary, rest = canary_array(h, session)
    status = h.slurm.set_tasks(
        canary,
        {0: JobState.OUT_OF_MEMORY, 1: JobState.COMPLETED},
        JobState.FAILED,
        req_mem_bytes=1000 * MIB,
        max_rss_bytes=1000 * MIB,
    )
    decision = brain(h)(failed(session, canary, JobState.FAILED), status)
    assert (decision["action"], decision["outcome"]) == ("rerun", "refused_or_failed")
    assert decision["cancelled"] == [rest] and h.slurm.jobs[rest].state is JobState.CANCELLED
    assert h.slurm.count("submit") == 2


# --- `jobsmith rerun` (rerun_by_hand): recorded and run in the job's own session ------------


@dataclass
class Person(HarnessParts):
    """What `jobsmith rerun` uses (agent/app.py's App has these): the harness's parts, the
    person's environment, and the news an approval request leaves."""

    environ: dict[str, str]
    told: list[tuple[str, dict[str, object]]] = field(default_factory=list)

    @property
    def news(self) -> Person:
        return self

    def add(self, kind: str, **fields: object) -> None:
        self.told.append((kind, fields))


def test_a_rerun_by_hand_is_recorded_as_the_person_s_decision_then_run(
    h: AgentHarness,
) -> None:
    session = h.store.create()
    job = array(h, session, 3)
    h.slurm.set_tasks(job, dict.fromkeys(range(3), JobState.COMPLETED), JobState.COMPLETED)
    person = Person(h, {"USER": "carol"})
    sessions = len(h.store.list_sessions())
    ran_in, result = rerun_by_hand(person, job, failed_only=False, mem_mb=2000, time_limit_s=900)
    # in the job's session: its workload's (one report, one webhook message)
    assert ran_in == session and len(h.store.list_sessions()) == sessions
    new = str(result.summary["job_id"])
    # every task (none failed), with the resources the person gave
    opts = h.slurm.options[new]
    assert (opts.array, opts.mem_mb, opts.time_limit_s) == ("0-2", 2000, 900)
    intents = [e for e in h.store.read(ran_in) if e.kind is EventKind.INTENT]
    (intent,) = [e for e in intents if e.data.get("rerun_of")]  # after the job's own
    (mine,) = decisions_about(h.store.read(session), job)
    (step,) = mine.steps
    assert mine == Decision(
        brain="person (carol)", job_id=job, action=Action.RERUN, reason="by hand", steps=(step,)
    )
    assert step == Rerun(
        id=intent.step_id,  # the decision names the step that then ran
        job_id=job,
        failed_only=False,
        mem_mb=2000,
        time_limit_s=900,
        reason="by hand",
    )
    assert intent.data["rerun_of"] == job and intent.data["reason"] == "by hand"
    # the watcher, shown the failure later, leaves the job to the person
    status = h.slurm.set_state(job, JobState.FAILED, exit_code=1)
    assert brain_once(h, session, job, status) is None
    assert h.slurm.count("submit") == 2 and person.told == []


def brain_once(h: AgentHarness, session: str, job: str, status: JobStatus) -> dict[str, Any] | None:
    change = failed(session, job, JobState.FAILED)
    return decide_failure(RuleBrain(), h.executor, lambda j: [], change, status)


def test_a_rerun_by_hand_names_an_unknown_person_and_reruns_only_failed_tasks(
    h: AgentHarness,
) -> None:
    session = h.store.create()
    job = array(h, session, 3)
    tasks = {0: JobState.COMPLETED, 1: JobState.FAILED, 2: JobState.COMPLETED}
    h.slurm.set_tasks(job, tasks, JobState.FAILED, exit_code=1)
    _, result = rerun_by_hand(Person(h, {}), job, failed_only=True, mem_mb=None, time_limit_s=None)
    assert h.slurm.options[str(result.summary["job_id"])].array == "1"
    (mine,) = decisions_about(h.store.read(session), job)
    assert mine.brain == "person (?)"  # no USER in the environment
    (step,) = mine.steps
    assert isinstance(step, Rerun) and step.failed_only is True
    assert (step.mem_mb, step.time_limit_s) == (None, None)


def test_a_person_s_rerun_of_a_job_the_watcher_reran_submits_nothing(h: AgentHarness) -> None:
    session = h.store.create()
    job = submit(h, session, mem_mb=500)
    oom(h, session, job)
    sessions = len(h.store.list_sessions())
    with pytest.raises(AlreadyDecided):
        rerun_by_hand(Person(h, {"USER": "carol"}), job, failed_only=True, mem_mb=None,
                      time_limit_s=None)  # fmt: skip
    assert h.slurm.count("submit") == 2 and len(h.store.list_sessions()) == sessions


def test_a_rerun_by_hand_held_for_approval_is_news(tmp_path: Path) -> None:
    h = AgentHarness.build(tmp_path, {"approval": {"core_hours": 0.6}})
    session = h.store.create()
    job = submit(h, session, partition="small", time_limit_s=1800)  # 0.5 core-hours
    person = Person(h, {"USER": "carol"})
    with pytest.raises(ApprovalNeeded) as held:
        rerun_by_hand(person, job, failed_only=True, mem_mb=None, time_limit_s=3600)
    assert person.told == [("approval_asked", {"step_id": held.value.step_id})]
    assert [d.brain for d in decisions_about(h.store.read(session), job)] == ["person (carol)"]
    assert h.slurm.count("submit") == 1


def test_a_held_rerun_a_person_approves_is_submitted_as_shown(tmp_path: Path) -> None:
    h = AgentHarness.build(tmp_path, {"approval": {"core_hours": 0.6}})
    session = h.store.create()
    job = submit(h, session, partition="small", time_limit_s=1800)
    with pytest.raises(ApprovalNeeded) as held:
        rerun_by_hand(Person(h, {"USER": "carol"}), job, failed_only=True, mem_mb=None,
                      time_limit_s=3600)  # fmt: skip
    (item,) = pending_approvals(h.store)
    assert (item.step_id, item.action) == (held.value.step_id, "rerun")
    result = approve(Approver(h), item.step_id)
    new = str(result.summary["job_id"])
    assert h.slurm.scripts[new] == item.script and h.slurm.options[new].time_limit_s == 3600
    assert h.slurm.count("submit") == 2 and pending_approvals(h.store) == []
    kinds = [e.kind for e in h.store.read(item.session_id)]
    assert kinds[-2:] == [EventKind.APPROVAL_GIVEN, EventKind.RESULT]


@pytest.mark.parametrize("known", [False, True], ids=["not in the ledger", "no session"])
def test_a_job_without_a_recorded_session_is_refused_and_no_decision_is_recorded(
    h: AgentHarness, known: bool
) -> None:
    session = h.store.create()
    job = submit(h, session)
    record = h.ledger.get(job)
    assert record is not None
    if known:  # a record from before sessions were kept
        h.ledger.record(record.model_copy(update={"session_id": None}))
    missing = job if known else "4242"
    with pytest.raises(NotFound, match=f"job {missing}: jobsmith has no record of submitting it"):
        rerun_by_hand(Person(h, {"USER": "carol"}), missing, failed_only=True, mem_mb=None,
                      time_limit_s=None)  # fmt: skip
    assert outputs(h, session) == [] and h.slurm.count("submit") == 1


class SlurmLikeDependencies(SchedulerDouble):
    """The double, but a job that ended (a cancelled one too) takes no new dependency, as
    `scontrol update JobId=… Dependency=…` refuses it (planrun._point reads that as gone)."""

    def set_dependencies(self, job_id: str, dependencies: Sequence[Any]) -> None:
        super().set_dependencies(job_id, dependencies)
        if self.jobs[job_id].state.is_terminal:
            raise SchedulerError(f"scontrol update JobId={job_id}: the job has ended")


def canary_rerun_held(tmp_path: Path) -> tuple[AgentHarness, str, str, str, dict[str, Any]]:
    """A canary array a person approved as a whole (6 core-hours, above 1), whose canary
    then timed out: (harness, session, canary, rest, the decision: a re-run of the canary
    with twice the time, 2 core-hours, held for a person's approval)."""
    policy = {**CANARY_POLICY, "approval": {"core_hours": 1}}
    h = AgentHarness.build(tmp_path, policy, SlurmLikeDependencies())
    session = h.store.create()
    files = []
    for i in range(12):
        path = h.root / f"c{i}.txt"
        path.write_text("x")
        files.append(str(path))
    params = {"files": ",".join(files), "program": "gzip"}
    req = JobRequest(template="file_array", params=params, partition="small", time_limit_s=1800)
    step = st.Submit(job=req)
    with pytest.raises(ApprovalNeeded):
        h.executor.run(session, step)
    summary = approve(Approver(h), step.id).summary
    canary, rest = str(summary["canary_job_id"]), str(summary["job_id"])
    status = h.slurm.set_tasks(
        canary,
        {0: JobState.TIMEOUT, 1: JobState.TIMEOUT},
        JobState.TIMEOUT,
        timelimit_s=1800,
        partition="small",
    )
    decision = brain(h)(failed(session, canary, JobState.TIMEOUT), status)
    assert (decision["action"], decision["outcome"]) == ("rerun", "awaiting_approval")
    return h, session, canary, rest, decision


def test_a_canary_rerun_held_for_approval_keeps_the_rest_for_the_approved_rerun(
    tmp_path: Path,
) -> None:
    h, _, _, rest, decision = canary_rerun_held(tmp_path)
    assert "cancelled" not in decision and h.slurm.count("cancel") == 0
    new = str(approve(Approver(h), decision["step_id"]).summary["job_id"])
    # the rest waits for the approved re-run: Slurm runs it once the new canary succeeds
    assert h.slurm.jobs[rest].state is JobState.PENDING
    assert h.slurm.calls[-1][0] == "set_dependencies" and h.slurm.calls[-1][1][0] == rest
    (after,) = h.slurm.calls[-1][1][1]
    assert after.job_ids == (new,) and h.slurm.count("submit") == 3


def test_a_canary_rerun_a_person_denies_cancels_the_rest_then(tmp_path: Path) -> None:
    h, session, canary, rest, decision = canary_rerun_held(tmp_path)
    assert h.slurm.count("cancel") == 0
    deny(Approver(h), decision["step_id"], "not worth it")
    assert h.slurm.calls[-1] == ("cancel", ((rest,),))
    note = h.store.read(session)[-1]
    assert note.kind is EventKind.NOTE and note.data == {"canary_failed": canary, "cancelled": rest}
    assert h.slurm.count("submit") == 2

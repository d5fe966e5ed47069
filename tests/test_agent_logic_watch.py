"""The watcher's decisions without Slurm: what one cycle polls, records and decides.

watch_cycle runs over the real session store and ledger (jobs submitted through the real
executor) with SchedulerDouble's status as the poll. The checks: one poll per cycle for
every open job of every session; a state change becomes one job_state event; a failed
job gets exactly one decision, whichever poll saw the failure first; a cycle Slurm does
not answer changes nothing; one job's surprise does not stop the others. test_watch runs
the same on the lab cluster (and through a controller restart).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from scheduler_double import MIB, AgentHarness

from jobsmith.adapters.options import JobOptions
from jobsmith.adapters.scheduler import JobStatus
from jobsmith.adapters.states import JobState
from jobsmith.agent.brains.deciding import decide_failure
from jobsmith.agent.brains.rules import RuleBrain
from jobsmith.agent.runtime.session.events import EventKind
from jobsmith.agent.runtime.session.jobstate import StateChange, record_job_states
from jobsmith.agent.runtime.session.ledger import SubmissionRecord
from jobsmith.agent.runtime.session.readmodel import SessionFolds
from jobsmith.agent.runtime.session.session_log import SessionLog
from jobsmith.agent.runtime.submission import steps as st
from jobsmith.agent.runtime.submission.request.jobs import JobRequest
from jobsmith.agent.watcher.cycle import WatchCycle, next_interval, open_jobs, watch_cycle
from jobsmith.errors import SchedulerError


@pytest.fixture
def h(tmp_path: Path) -> AgentHarness:
    return AgentHarness.build(tmp_path, {"budgets": {"submissions_per_hour": 100}})


class Decider:
    """A decide() that records what it was asked; answers, returns None or raises."""

    def __init__(self, raise_for: set[str] | None = None, none_for: set[str] | None = None):
        self.asked: list[tuple[StateChange, JobStatus]] = []
        self.raise_for = raise_for or set()
        self.none_for = none_for or set()

    def __call__(self, change: StateChange, status: JobStatus) -> dict[str, object] | None:
        self.asked.append((change, status))
        if change.job_id in self.raise_for:
            raise RuntimeError(f"surprise about {change.job_id}")
        if change.job_id in self.none_for:
            return None
        return {"job_id": change.job_id, "action": "noted"}


def rule_brain(
    h: AgentHarness, stderr: list[str]
) -> Callable[[StateChange, JobStatus], dict[str, object] | None]:
    """decide() as run_cycle wires it: the rule brain, run by agent/brains/deciding.py."""

    def decide(change: StateChange, status: JobStatus) -> dict[str, object] | None:
        return decide_failure(RuleBrain(), h.executor, lambda j: stderr, change, status)

    return decide


def submit(h: AgentHarness, session: str | None = None, **req: Any) -> str:
    job = JobRequest(template="command", params={"command": "make"}, **req)
    result = h.executor.run(session or h.store.create(), st.Submit(job=job))
    return str(result.summary["job_id"])


def cycle(h: AgentHarness, decide: Any = None, seen: list[StateChange] | None = None) -> WatchCycle:
    on_change = seen.append if seen is not None else None
    return watch_cycle(
        h.store,
        h.ledger,
        h.slurm.status,
        decide or Decider(),
        on_change,
        folds=SessionFolds(h.store),
    )


def states(h: AgentHarness, job_id: str) -> list[str]:
    record = h.ledger.get(job_id)
    assert record is not None and record.session_id is not None
    return [
        str(e.data["state"])
        for e in h.store.read(record.session_id)
        if e.kind is EventKind.JOB_STATE and e.data["job_id"] == job_id
    ]


def test_nothing_to_watch_asks_slurm_nothing(h: AgentHarness) -> None:
    assert cycle(h) == WatchCycle(watched=0, scheduler_ok=True)
    assert h.slurm.calls == []


def test_one_poll_covers_every_open_job_of_every_session(h: AgentHarness) -> None:
    shared = h.store.create()
    jobs = [submit(h, shared), submit(h, shared), submit(h)]
    h.slurm.calls.clear()
    seen: list[StateChange] = []
    out = cycle(h, seen=seen)
    assert out.watched == 3 and out.scheduler_ok and out.error is None
    ((polled, since),) = [args for c, args in h.slurm.calls if c == "status"]
    assert sorted(polled) == jobs and h.slurm.calls == [("status", (polled, since))]
    first = min(r.submitted_at for r in h.ledger.all())
    assert since == first - timedelta(minutes=5)
    assert [(c.job_id, c.state, c.previous) for c in out.changes] == [
        (j, JobState.PENDING, None) for j in jobs
    ]
    assert seen == out.changes and out.decisions == []
    again = cycle(h)
    assert again.watched == 3 and again.changes == []  # no change: nothing recorded
    assert states(h, jobs[0]) == ["PENDING"]


def test_state_changes_are_recorded_once_each_and_finished_jobs_drop_out(
    h: AgentHarness,
) -> None:
    done, running = submit(h), submit(h)
    cycle(h)
    h.slurm.set_state(done, JobState.COMPLETED, exit_code=0)
    h.slurm.set_state(running, JobState.RUNNING)
    out = cycle(h)
    assert {(c.job_id, c.state, c.previous) for c in out.changes} == {
        (done, JobState.COMPLETED, JobState.PENDING),
        (running, JobState.RUNNING, JobState.PENDING),
    }
    assert states(h, done) == ["PENDING", "COMPLETED"]
    assert cycle(h).watched == 1  # only the running one
    assert h.slurm.calls[-1][1][0] == (running,)


def test_a_failed_job_gets_one_decision_then_is_no_longer_watched(h: AgentHarness) -> None:
    job = submit(h)
    h.slurm.set_state(job, JobState.FAILED, exit_code=1)
    brain = rule_brain(h, ["boom"])
    out = watch_cycle(h.store, h.ledger, h.slurm.status, brain, folds=SessionFolds(h.store))
    (decision,) = out.decisions
    assert decision["job_id"] == job and decision["action"] == "report"
    later = watch_cycle(h.store, h.ledger, h.slurm.status, brain, folds=SessionFolds(h.store))
    assert later == WatchCycle(watched=0, scheduler_ok=True)


def test_a_failure_recorded_first_by_status_still_gets_its_one_decision(
    h: AgentHarness,
) -> None:
    job = submit(h)
    h.slurm.set_state(job, JobState.TIMEOUT, timelimit_s=600)
    since = datetime.now() - timedelta(days=1)
    statuses = h.slurm.status([job], since)
    record_job_states(h.store, h.ledger, statuses, folds=SessionFolds(h.store))  # `jobsmith status`
    decide = Decider()
    out = cycle(h, decide)
    assert out.changes == []  # already recorded
    assert [c.job_id for c, _ in decide.asked] == [job]
    (change, status) = decide.asked[0]
    assert change.state is JobState.TIMEOUT and change.previous is None
    assert status.state is JobState.TIMEOUT
    # a decider's model_output names the job: that is what marks it decided
    mark_decided(h, job)
    assert cycle(h).watched == 0


def mark_decided(h: AgentHarness, job_id: str) -> None:
    """What a decision-maker writes first: a model_output naming the job."""
    record = h.ledger.get(job_id)
    assert record is not None and record.session_id is not None
    SessionLog(h.store, record.session_id).append(
        EventKind.MODEL_OUTPUT, {"job_id": job_id, "action": "report"}, None
    )


def test_a_cycle_slurm_does_not_answer_changes_nothing(h: AgentHarness) -> None:
    job = submit(h)
    h.slurm.set_state(job, JobState.FAILED, exit_code=1)
    h.slurm.unavailable = "slurm_load_jobs error: Socket timed out"
    decide = Decider()
    out = cycle(h, decide)
    assert out == WatchCycle(
        watched=1, scheduler_ok=False, error="slurm_load_jobs error: Socket timed out"
    )
    assert decide.asked == [] and states(h, job) == []
    assert next_interval(out, 60, 60, 600) == 120
    h.slurm.unavailable = None
    assert [d["job_id"] for d in cycle(h, decide).decisions] == [job]


def test_a_cycle_whose_poll_gets_an_error_answer_changes_nothing_and_says_so(
    h: AgentHarness,
) -> None:
    """Around a slurmctld restart Slurm's clients can fail with words that are not the
    transient ones (seen in CI on 24.11): the cycle reports it instead of ending the watcher."""
    job = submit(h)
    h.slurm.set_state(job, JobState.FAILED, exit_code=1)
    decide = Decider()

    def refusing(ids: list[str], since: object) -> dict[str, Any]:
        raise SchedulerError("squeue failed: Unexpected message received")

    out = watch_cycle(h.store, h.ledger, refusing, decide, folds=SessionFolds(h.store))
    assert out == WatchCycle(
        watched=1, scheduler_ok=False, error="squeue failed: Unexpected message received"
    )
    assert decide.asked == [] and states(h, job) == []
    assert [d["job_id"] for d in cycle(h, decide).decisions] == [job]


def test_a_job_slurm_does_not_show_yet_is_neither_recorded_nor_failed(
    h: AgentHarness,
) -> None:
    job = submit(h)
    del h.slurm.jobs[job]  # accounting has not caught up with the controller
    decide = Decider()
    out = cycle(h, decide)
    assert out.changes == [] and decide.asked == [] and out.watched == 1
    assert states(h, job) == []


def test_one_jobs_surprise_is_its_decision_and_the_others_are_still_decided(
    h: AgentHarness,
) -> None:
    bad, quiet, fine = submit(h), submit(h), submit(h)
    for job in (bad, quiet, fine):
        h.slurm.set_state(job, JobState.FAILED, exit_code=1)
    decide = Decider(raise_for={bad}, none_for={quiet})
    out = cycle(h, decide)
    assert out.decisions == [
        {
            "job_id": bad,
            "action": "error",
            "reason": f"deciding about it failed: RuntimeError: surprise about {bad}",
        },
        {"job_id": fine, "action": "noted"},
    ]
    # nothing recorded a decision about them: the next cycle asks again about all three
    assert sorted(c.job_id for c, _ in decide.asked) == sorted([bad, quiet, fine])
    decide.asked.clear()
    cycle(h, decide)
    assert sorted(c.job_id for c, _ in decide.asked) == sorted([bad, quiet, fine])


def test_jobs_without_a_session_are_not_watched(h: AgentHarness) -> None:
    h.ledger.record(
        SubmissionRecord(
            job_id="555",
            cluster="doublelab",
            template="command",
            params={},
            options=JobOptions(job_name="x.js-0123456789ab"),
            script_sha256="0" * 64,
            submitted_at=datetime.now(),
        )
    )
    assert open_jobs(h.ledger, SessionFolds(h.store)) == []
    assert cycle(h).watched == 0


def test_the_brain_reruns_through_the_watcher_and_the_new_job_is_watched(
    h: AgentHarness,
) -> None:
    job = submit(h, mem_mb=500)
    brain = rule_brain(h, [])
    h.slurm.set_state(job, JobState.OUT_OF_MEMORY, req_mem_bytes=500 * MIB)
    out = watch_cycle(h.store, h.ledger, h.slurm.status, brain, folds=SessionFolds(h.store))
    (decision,) = out.decisions
    assert decision["action"] == "rerun" and decision["new_job_id"] == "1001"
    nxt = watch_cycle(h.store, h.ledger, h.slurm.status, brain, folds=SessionFolds(h.store))
    assert nxt.watched == 1 and [c.job_id for c in nxt.changes] == ["1001"]


def test_backoff_doubles_to_the_ceiling_and_resets_when_slurm_answers() -> None:
    down = WatchCycle(watched=1, scheduler_ok=False, error="x")
    up = WatchCycle(watched=1, scheduler_ok=True)
    assert [next_interval(down, c, 60, 600) for c in (60, 120, 300, 600)] == [120, 240, 600, 600]
    assert next_interval(up, 600, 60, 600) == 60


def test_wait_polls_soon_then_a_quarter_of_the_time_waited_at_most_every_30s() -> None:
    """A short job is seen soon after it ends, a long wait costs few polls."""
    from jobsmith.agent.watcher.waiting import WaitTimeout, wait_for

    now = [0.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    running = {"1": JobStatus(job_id="1", state=JobState.RUNNING)}
    with pytest.raises(WaitTimeout):
        wait_for(
            lambda: running, timeout_s=3600, progress=lambda _: None,
            clock=lambda: now[0], sleep=sleep,
        )  # fmt: skip
    assert slept[:5] == [0.5, 0.5, 0.5, 0.5, 0.5]  # the first 2 s: every half second
    assert slept[5] == pytest.approx(0.625)  # then a quarter of the time waited
    assert max(slept) == 30.0 and slept[-1] == 30.0
    assert len(slept) < 150  # an hour: a few dozen polls, not one a second
    done = {"1": JobStatus(job_id="1", state=JobState.COMPLETED)}
    assert wait_for(lambda: done, timeout_s=5, progress=lambda _: None) == done


def test_a_slow_poll_is_part_of_the_pause_not_added_to_it() -> None:
    """Polls are paced from their starts: a poll that takes 0.3 s is followed by 0.2 s of
    sleep at the half-second pace, and one slower than the pace by none."""
    from jobsmith.agent.watcher.waiting import WaitTimeout, wait_for

    now = [0.0]
    slept: list[float] = []
    took = iter([0.3, 0.3, 0.7] + [0.0] * 1000)

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    def poll() -> dict[str, JobStatus]:
        now[0] += next(took)
        return {"1": JobStatus(job_id="1", state=JobState.RUNNING)}

    with pytest.raises(WaitTimeout):
        wait_for(poll, timeout_s=60, progress=lambda _: None, clock=lambda: now[0], sleep=sleep)
    assert slept[:4] == pytest.approx([0.2, 0.2, 0.0, 0.5])

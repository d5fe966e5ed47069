"""The pause between polls follows the jobs' expected length (agent/watcher/pacing.py)."""

from __future__ import annotations

import math
from datetime import datetime

import pytest

from jobsmith.adapters.records import JobRecord
from jobsmith.adapters.scheduler import JobStatus
from jobsmith.adapters.states import JobState
from jobsmith.agent.watcher.cycle import WatchCycle
from jobsmith.agent.watcher.pacing import Outlook, Pace, next_poll_s, outlook, watch_pause_s

PACE = Pace(floor_s=0.5, cap_s=30.0, growth=0.25, limit_share=0.1, margin_s=0.5)


@pytest.mark.parametrize(
    ("waited_s", "seen", "pause_s", "quiet_s"),
    [
        # nothing known: soon after the start, then a quarter of the time waited, capped
        (0.0, Outlook(), 0.5, math.inf),
        (1.0, Outlook(), 0.5, math.inf),
        (10.0, Outlook(), 2.5, math.inf),
        (3600.0, Outlook(), 30.0, math.inf),
        # a running job with a 60 s limit is looked at every 6 s at most
        (600.0, Outlook(running=True, shortest_limit_s=60), 6.0, math.inf),
        # a 10 s limit: never below the floor
        (600.0, Outlook(running=True, shortest_limit_s=2), 0.5, math.inf),
        # an end expected in 1.2 s: the poll lands just after it
        (100.0, Outlook(running=True, soonest_end_s=1.2), 1.7, math.inf),
        # an expected end far off does not make the pause longer
        (10.0, Outlook(running=True, soonest_end_s=500), 2.5, math.inf),
        # an array's waiting tasks of 2 s: just after one could end, while the array moves
        (100.0, Outlook(queued_task_s=2), 2.5, 0),
        # ... not once nothing has changed for 4 task lengths (other jobs hold the node)
        (100.0, Outlook(queued_task_s=2), 25.0, 8.1),
        # the soonest end wins over a running job's limit share
        (100.0, Outlook(running=True, shortest_limit_s=60, soonest_end_s=2), 2.5, math.inf),
        # a job COMPLETING ends in a moment: a margin, while that is news
        (28.0, Outlook(completing=True), 0.5, 0.3),
        # ... but one held in CG (a hung epilog) is not polled every half second
        (28.0, Outlook(completing=True), 7.0, 10.1),
    ],
)
def test_next_poll_follows_what_is_expected(
    waited_s: float, seen: Outlook, pause_s: float, quiet_s: float
) -> None:
    assert next_poll_s(waited_s, seen, PACE, quiet_s=quiet_s) == pytest.approx(pause_s)


def _task(task: int, state: JobState, elapsed: int | None, limit: int | None = 3600) -> JobRecord:
    return JobRecord(
        job_id=f"7_{task}",
        job_id_raw=str(100 + task),
        array_job_id="7",
        array_task_id=task,
        name="x",
        state=state,
        elapsed_s=elapsed,
        timelimit_s=limit,
    )


def test_an_array_task_is_expected_to_end_when_its_finished_siblings_did() -> None:
    tasks = (
        _task(0, JobState.COMPLETED, 2),
        _task(1, JobState.COMPLETED, 3),
        _task(2, JobState.COMPLETED, 2),
        _task(3, JobState.RUNNING, 1),
        _task(4, JobState.PENDING, None),
    )
    array = JobStatus(job_id="7", state=JobState.RUNNING, tasks=tasks)
    seen = outlook([array])
    assert seen == Outlook(
        running=True, shortest_limit_s=3600, soonest_end_s=1.0, queued_task_s=2.0
    )
    # nothing running, tasks waiting: they may start at once, and take 2 s
    waiting = (*tasks[:3], _task(3, JobState.PENDING, None))
    array = JobStatus(job_id="7", state=JobState.PENDING, tasks=waiting)
    assert outlook([array]) == Outlook(queued_task_s=2.0)
    # the last tasks COMPLETING: their ends are a moment away
    ending = (*tasks[:3], _task(3, JobState.COMPLETING, 2), _task(4, JobState.COMPLETED, 2))
    array = JobStatus(job_id="7", state=JobState.COMPLETING, tasks=ending)
    assert outlook([array]) == Outlook(completing=True)


def test_a_job_is_expected_to_end_at_its_time_limit() -> None:
    rec = JobRecord(
        job_id="8", job_id_raw="8", name="x", state=JobState.RUNNING, elapsed_s=50, timelimit_s=60
    )
    seen = outlook([JobStatus(job_id="8", state=JobState.RUNNING, record=rec)])
    assert seen == Outlook(running=True, shortest_limit_s=60, soonest_end_s=10)


def test_pending_and_ended_jobs_bring_no_expected_end() -> None:
    # a start estimate is the controller's bound from time limits, not an expectation
    pending = JobStatus(job_id="9", state=JobState.PENDING, estimated_start=datetime.now())
    done = JobStatus(job_id="10", state=JobState.COMPLETED)
    assert outlook([pending, done]) == Outlook()
    # an overdue task (ran longer than its siblings) leaves only its time limit
    late = (_task(0, JobState.COMPLETED, 2), _task(1, JobState.RUNNING, 5, limit=60))
    array = JobStatus(job_id="7", state=JobState.RUNNING, tasks=late)
    assert outlook([array]) == Outlook(running=True, shortest_limit_s=60, soonest_end_s=55)


@pytest.mark.parametrize(
    ("seen", "interval_s", "pause_s"),
    [
        (Outlook(), 300, 300),  # nothing due: the watcher's interval
        (Outlook(running=True, soonest_end_s=30), 300, 30.5),  # just after the end due
        (Outlook(running=True, soonest_end_s=1), 300, 10),  # never below the floor
        (Outlook(running=True, shortest_limit_s=600), 300, 60),  # a tenth of a 10 min limit
        (Outlook(running=True, soonest_end_s=1), 2, 2),  # an interval below the floor stays
    ],
)
def test_a_running_watcher_polls_sooner_only_when_a_job_is_due(
    seen: Outlook, interval_s: float, pause_s: float
) -> None:
    assert watch_pause_s(seen, interval_s) == pytest.approx(pause_s)


def test_a_cycle_keeps_its_outlook_through_copies_but_does_not_print_it() -> None:
    seen = Outlook(running=True, soonest_end_s=3)
    cycle = WatchCycle(watched=1, scheduler_ok=True).with_outlook(seen)
    later = cycle.model_copy(update={"warnings": ["w"]})
    assert later.outlook == seen and WatchCycle(watched=0, scheduler_ok=True).outlook == Outlook()
    assert "outlook" not in later.model_dump_json()

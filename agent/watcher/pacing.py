"""When to poll next: the pause follows what the jobs waited on are expected to do (pure).

A careful person watching jobs looks again soon after submitting (a typo in the command
fails in a second), then less and less often while nothing is due, but is back at the
screen when something is expected to end: a job near its time limit, an array task
that has run as long as its finished siblings took, or, while its array moves, one that
waits (it may start at once and take as long). So the pause is:

1. geometric in the time waited so far (growth x waited), which keeps a long wait to a
   few dozen polls, not one a second;
2. never longer than a share of the shortest time limit among the running jobs (short
   jobs are seen end quickly), nor than the time until the soonest expected end plus a
   margin (the poll lands just after it); for an array's waiting tasks, only while
   something changed within a few task lengths (a node taken by other jobs leaves the
   pause to grow); for a job COMPLETING, a margin, while it became so recently (an
   epilog that hangs leaves the pause to grow: nodes hold jobs in CG for minutes);
3. within [floor, cap].

The controller's start estimate of a pending job never lengthens the pause: backfill
computes it from the running jobs' time limits, so jobs that end early beat it (a first
version that slept until it was 1.4x slower than before on bench_array_wait.py, on a
lab busy with other jobs).

`outlook` reads what the expected ends and starts are from a poll's statuses;
`next_poll_s` turns them into a pause. Neither asks Slurm or reads the clock.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from statistics import median
from typing import TYPE_CHECKING

from jobsmith.adapters.states import JobState

if TYPE_CHECKING:
    from jobsmith.adapters.records import JobRecord
    from jobsmith.adapters.scheduler import JobStatus


@dataclass(frozen=True)
class Pace:
    """How a poller paces itself (seconds, and shares of a time)."""

    floor_s: float = 0.5
    cap_s: float = 30.0
    growth: float = 0.25
    #: the pause is at most this share of the shortest running job's time limit
    limit_share: float = 0.1
    #: how long after an expected end the poll comes (accounting needs a moment to see it)
    margin_s: float = 0.5
    #: an array counts as moving while its last change is under this many task lengths
    #: old; then its waiting tasks are expected to start (and end) at any moment
    moving_tasks: float = 4.0
    #: a job COMPLETING (its script ended, Slurm ends its steps and runs the epilog) is
    #: expected to end at any moment while it became so within this many seconds; one
    #: held there longer (a hung epilog) is left to the geometric pause
    completing_s: float = 10.0


@dataclass(frozen=True)
class Outlook:
    """What the unfinished jobs are expected to do, in seconds from the poll."""

    running: bool = False
    shortest_limit_s: float | None = None
    soonest_end_s: float | None = None
    #: how long an array's waiting tasks should take once started (their finished
    #: siblings' median): while the array moves, one may start and end that soon
    queued_task_s: float | None = None
    #: a job or task is COMPLETING: its end is a moment away
    completing: bool = False


def next_poll_s(waited_s: float, outlook: Outlook, pace: Pace, quiet_s: float = math.inf) -> float:
    """Seconds until the next poll, after waiting waited_s, the last change seen quiet_s
    ago (see the module docstring)."""
    pause = waited_s * pace.growth
    if outlook.running and outlook.shortest_limit_s is not None:
        pause = min(pause, outlook.shortest_limit_s * pace.limit_share)
    if outlook.soonest_end_s is not None and outlook.soonest_end_s >= 0:
        pause = min(pause, outlook.soonest_end_s + pace.margin_s)
    if outlook.completing and quiet_s <= pace.completing_s:
        pause = min(pause, pace.margin_s)
    queued = outlook.queued_task_s
    if queued is not None and quiet_s <= pace.moving_tasks * queued:
        pause = min(pause, queued + pace.margin_s)
    return min(max(pause, pace.floor_s), pace.cap_s)


def outlook(statuses: Iterable[JobStatus]) -> Outlook:
    """The expected ends of the unfinished jobs and tasks among statuses.

    A running job's end is expected at its time limit, or, for an array task, once it has
    run as long as its array's finished tasks took (their median): whichever comes first.
    An array's pending tasks may start at once (an array's tasks start as others end):
    they may end a task's length from now (queued_task_s).
    Times are accounting's elapsed seconds as of the poll, so no clock is read.
    """
    running = completing = False
    limits: list[float] = []
    ends: list[float] = []
    queued: list[float] = []
    for status in statuses:
        if status.state.is_terminal:
            continue
        records = list(status.tasks) or ([status.record] if status.record else [])
        typical = _typical_length(records)
        for rec in records:
            if rec.state is JobState.RUNNING:
                running = True
                ends += _expected_ends(rec, typical)
                if rec.timelimit_s:
                    limits.append(rec.timelimit_s)
            elif rec.state is JobState.COMPLETING:
                completing = True
            elif rec.state is JobState.PENDING and typical is not None:
                queued.append(typical)  # it may start now: it ends a task's length later
    return Outlook(
        running=running,
        shortest_limit_s=min(limits, default=None),
        soonest_end_s=min((e for e in ends if e >= 0), default=None),
        queued_task_s=min(queued, default=None),
        completing=completing,
    )


def _typical_length(records: list[JobRecord]) -> float | None:
    """How long an array's tasks that completed took (median), None if none has."""
    done = [r.elapsed_s for r in records if r.state is JobState.COMPLETED and r.elapsed_s]
    return median(done) if done else None


def _expected_ends(rec: JobRecord, typical: float | None) -> list[float]:
    if rec.elapsed_s is None:
        return []
    out = []
    if rec.timelimit_s:
        out.append(float(rec.timelimit_s - rec.elapsed_s))
    if typical is not None:
        out.append(typical - rec.elapsed_s)
    return out


#: a running watcher polls no more often than this, however soon a job is due
WATCH_FLOOR_S = 10.0


def watch_pause_s(seen: Outlook, interval_s: float) -> float:
    """A running watcher's pause after a cycle Slurm answered: its --interval, or sooner
    when a job it follows is expected to end (a share of the shortest running time limit,
    just after the soonest expected end), never below WATCH_FLOOR_S (or the interval, if
    shorter). The interval is the longest pause: a watcher is asked for at least that."""
    pace = Pace(floor_s=min(WATCH_FLOOR_S, interval_s), cap_s=interval_s)
    return next_poll_s(math.inf, seen, pace)

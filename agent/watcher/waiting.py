"""Waiting for jobs to finish: poll with back-off, show progress, survive a silent scheduler.

A poll that fails (slurmctld or slurmdbd busy or down) keeps the last known states and
tries again later; a job is never reported failed because Slurm did not answer.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Protocol

from jobsmith.errors import InputError, JobsmithError, SchedulerUnavailable

if TYPE_CHECKING:
    from jobsmith.adapters.scheduler import JobStatus
    from jobsmith.agent.watcher.pacing import Pace
    from jobsmith.agent.watcher.workload import WorkloadParts


class WaitedAsOne(Protocol):
    """Fed workloads waited for as one job each
    (agent/runtime/workflows/feeding/awaited.py)."""

    def jobs(self) -> list[str]:
        """Feed what fits now; the job ids of the parts fed so far, to poll."""
        ...

    def statuses(self, polled: Mapping[str, JobStatus]) -> dict[str, JobStatus]:
        """Each workload as one status, from this poll of its parts."""
        ...


class WaitTimeout(JobsmithError):
    """The jobs were still unfinished when the wait's time ran out."""

    exit_code = 7


def wait_for_jobs(
    parts: WorkloadParts,
    job_ids: list[str],
    since: str,
    timeout_s: float,
    said: Callable[[Mapping[str, JobStatus]], Mapping[str, str]] | None = None,
    feed: Callable[[Mapping[str, JobStatus]], Iterable[str]] | None = None,
    whole: WaitedAsOne | None = None,
    terms: bool = False,
) -> dict[str, JobStatus]:
    """`jobsmith wait`: block until the jobs end, showing progress on stderr.

    said gives, for a poll's statuses, what a job's own output says of its progress
    ('31/48 frames': agent/runtime/workflows/progressread.py), added to its part of the
    line; the caller passes it, as reading output needs the transport a poll does not.

    feed, when a job has ended, submits what a fed workload's parts now have room for
    (agent/runtime/workflows/feeding/feeder.py) and names the jobs: they are waited for too.

    whole: fed workloads named by their step ids, each waited for as one job (fed at
    every poll, its parts polled with the jobs, shown as one status by its step id).

    A job id jobsmith did not submit that Slurm still shows nowhere once the
    controller's MinJobAge has passed is an error naming it (JobNotFound, exit 6): an
    id Slurm never had showed NOT_VISIBLE for the whole wait (an hour by default).

    terms: poll with what Slurm granted (QoS, TRES), for a caller that prints whole
    records (`wait --json`); the progress line and the table need states, exit codes,
    times and memory only, and a poll without them costs slurmdbd a third
    (Scheduler.status).
    """
    from jobsmith.adapters.states import JobState
    from jobsmith.agent.views.output import note
    from jobsmith.agent.watcher.polling import poll_jobs
    from jobsmith.errors import JobNotFound

    if not job_ids and whole is None:
        raise InputError("wait: name at least one Slurm job id")
    started = time.monotonic()
    unseen_limit: list[float] = []  # MinJobAge, read once and only when needed

    def poll() -> dict[str, JobStatus]:
        asked = job_ids + [j for j in (whole.jobs() if whole else []) if j not in job_ids]
        polled = poll_jobs(parts, asked, since, terms=terms) if asked else {}
        statuses = {j: st for j, st in polled.items() if j in job_ids}
        if feed is not None and any(st.state.is_terminal for st in statuses.values()):
            added = [j for j in feed(statuses) if j not in job_ids]
            if added:
                job_ids.extend(added)
                statuses = poll_jobs(parts, job_ids, since, terms=terms)
        if whole is not None:
            statuses.update(whole.statuses(polled))
        unseen = [
            j
            for j, st in statuses.items()
            if st.state is JobState.NOT_VISIBLE and parts.ledger.get(j) is None
        ]
        if unseen and not unseen_limit:
            controller = parts.scheduler.capabilities().controller
            age = controller.min_job_age_s() if controller is not None else None
            unseen_limit.append(float(age or 300))
        if unseen and time.monotonic() - started > unseen_limit[0]:
            raise JobNotFound(
                f"job {', '.join(unseen)}: Slurm has shown no such job for "
                f"{unseen_limit[0]:.0f}s (its MinJobAge), in the queue or in accounting "
                f"since {since}: check the id"
            )
        return statuses

    final = wait_for(poll, timeout_s=timeout_s, progress=note, said=said)
    return dict(final)


def wait_for(
    poll: Callable[[], Mapping[str, JobStatus]],
    *,
    timeout_s: float,
    progress: Callable[[str], None],
    pace: Pace | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    said: Callable[[Mapping[str, JobStatus]], Mapping[str, str]] | None = None,
) -> Mapping[str, JobStatus]:
    """Poll until every job is terminal; returns the final statuses.

    The pause after each poll follows what the jobs are expected to do
    (agent/watcher/pacing.py): soon after the start, then a quarter of the time waited so
    far, at most 30 s (counted from each poll's start, so a slow poll does not stretch
    it), but just after a job's expected end (its time limit, or how long
    its array's finished tasks took, or, while the array moves, the length of one of its
    waiting tasks: one may start at once). A job that ends after 3 s is seen within a second
    of it, one that ends after an hour within 30 s, and a long wait costs Slurm a few
    dozen polls, not one per second (benchmarks/README.md: bench_array_wait.py,
    bench_plan.py). A poll Slurm does not answer keeps the last states, and the pacing
    goes on from them.
    """
    from jobsmith.agent.watcher.pacing import Outlook, Pace, next_poll_s, outlook

    pace = pace or Pace()
    started = changed = clock()
    deadline = started + timeout_s
    last: Mapping[str, JobStatus] = {}
    last_line = ""
    expected = Outlook()
    while True:
        polled_at = clock()
        try:
            last = poll()
        except SchedulerUnavailable as err:
            progress(f"Slurm did not answer ({err}); keeping last known states")
        else:
            line = progress_line(last.values(), said(last) if said is not None else None)
            if line != last_line:
                progress(line)
                last_line = line
                changed = clock()
            if last and all(s.state.is_terminal for s in last.values()):
                return last
            expected = outlook(last.values())
        now = clock()
        interval = next_poll_s(now - started, expected, pace, quiet_s=now - changed)
        if polled_at + interval > deadline:
            raise WaitTimeout(f"gave up waiting after {timeout_s:g}s: {last_line or 'no answer'}")
        # the pause runs from the poll's start: a poll that took 0.3 s (sacct and the
        # session's records) is part of it, so a half-second pace is one, not 0.8 s
        sleep(max(0.0, polled_at + interval - clock()))


def progress_line(statuses: Iterable[JobStatus], said: Mapping[str, str] | None = None) -> str:
    """'34 RUNNING (2/4 COMPLETED, 2/4 RUNNING; 31/48 frames), 35 PENDING (Dependency)'
    for the terminal; said: what a job's own output says of its progress, by job id."""
    parts = []
    for st in statuses:
        text = f"{st.job_id} {st.state.value}"
        counts = st.task_counts
        extra = (said or {}).get(st.job_id)
        if counts:
            total = sum(counts.values())
            text += " (" + ", ".join(f"{n}/{total} {s}" for s, n in sorted(counts.items()))
            text += f"; {extra})" if extra else ")"
        elif st.reason:
            text += f" ({st.reason})"
        parts.append(text)
    return ", ".join(parts)

"""A fed workload waited for as one job (`wait STEP_ID`): it has ended when nothing of
it is left to run, not when the parts submitted so far have.

A workload none of whose parts fitted yet has no job to poll, and one whose submitted
parts all ended may still have parts to feed: `wait` on its parts alone would end too
soon, or never start. So each poll of the wait first feeds what fits now (the room may
come from jobs jobsmith never submitted, as for the watcher), then polls the parts fed
so far with the jobs named, and the workload stands in the answer as one status of its
own: its step id, a state (WorkloadProgress.state: CANCELLED once cancelled, so the
wait ends as it does for a cancelled job) and its line as the reason the progress line
shows. The MCP server's wait_for_jobs, which asks no one, reads it as recorded
(as_recorded).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from jobsmith.adapters.scheduler import JobStatus
from jobsmith.adapters.states import JobState
from jobsmith.agent.runtime.session.events import Event
from jobsmith.agent.runtime.session.lastpoll import PolledJob
from jobsmith.agent.runtime.session.ledger import JobLedger
from jobsmith.agent.runtime.session.store import SessionStore
from jobsmith.agent.runtime.workflows.feeding.progress import workload_progress
from jobsmith.agent.runtime.workflows.feeding.record import Workload, part_jobs, workloads
from jobsmith.agent.runtime.workflows.feeding.reference import WorkloadRef, find_workload


@dataclass
class AwaitedWorkloads:
    """The workloads one wait names (module docstring)."""

    store: SessionStore
    found: Sequence[Workload]
    #: feeds these sessions' workloads what fits now (feeder.feed_sessions, with an
    #: executor: built only when a workload has a part left to feed)
    feed: Callable[[list[str]], object]
    _events: dict[str, list[Event]] = field(default_factory=dict)

    @classmethod
    def of(
        cls,
        store: SessionStore,
        ledger: JobLedger,
        refs: Sequence[WorkloadRef],
        feed: Callable[[list[str]], object],
    ) -> AwaitedWorkloads:
        """The workloads refs name (UnknownWorkload for one that names none)."""
        return cls(store, [find_workload(store, ledger, ref) for ref in refs], feed)

    def jobs(self) -> list[str]:
        """Feed what fits now, then the job ids of every part fed so far (those whose
        sbatch has answered), to poll."""
        self._read()
        hungry = sorted({w.session_id for w in self.found if self._to_feed(w)})
        if hungry:
            self.feed(hungry)
            self._read()
        ids: list[str] = []
        for w in self.found:
            jobs = part_jobs(self._events[w.session_id], w.step_id).values()
            ids += [j for j in jobs if j and j not in ids]
        return ids

    def statuses(self, polled: Mapping[str, JobStatus]) -> dict[str, JobStatus]:
        """Each workload as one status, by its step id, from this poll of its parts (and
        what its session recorded of parts this poll did not answer for)."""
        out: dict[str, JobStatus] = {}
        for w in self.found:
            events = self._events.get(w.session_id) or self.store.read(w.session_id)
            for p in workload_progress(w.session_id, events, polled):
                if p.step_id == w.step_id:
                    out[w.step_id] = JobStatus(job_id=w.step_id, state=p.state(), reason=p.line())
        return out

    def _read(self) -> None:
        self._events = {s: self.store.read(s) for s in {w.session_id for w in self.found}}

    def _to_feed(self, w: Workload) -> bool:
        """Whether the workload is live, with a part not claimed yet (as just read)."""
        events = self._events[w.session_id]
        now = next((x for x in workloads(w.session_id, events) if x.step_id == w.step_id), w)
        claimed = part_jobs(events, w.step_id)
        return not now.cancelled and any(p.index not in claimed for p in now.parts)


def as_recorded(store: SessionStore, w: Workload) -> PolledJob:
    """The workload as one polled job, as its session recorded its parts (the watcher's
    polls record them), asking no one: for the MCP server's wait_for_jobs, whose poller
    is a watcher (its cycles feed the workload). Its task counts change as tasks move,
    so a wait sees progress; the reason is its line."""
    [p] = [
        p
        for p in workload_progress(w.session_id, store.read(w.session_id))
        if p.step_id == w.step_id
    ]
    counts = {
        JobState.COMPLETED.value: p.done,
        JobState.RUNNING.value: p.running,
        JobState.PENDING.value: p.queued,
        JobState.FAILED.value: p.failed,
    }
    kept = {k: n for k, n in counts.items() if n}
    return PolledJob(job_id=w.step_id, state=p.state(), task_counts=kept, reason=p.line())

"""The fed workloads a status shows, wherever it is asked for: `status` (also of a
workload named by its step id), `report`, and the status tool of a chat and of the MCP
server (the executor's `status` step).

A workload is shown where one of the polled jobs is its part (its session is read), and,
where asked, wherever the feeding index lists one still to feed: a workload none of
whose parts fitted yet has no job to poll, and would otherwise be shown nowhere. Each
is one line, WorkloadProgress.headline ("workload st-…: 10 tasks: 0 done, 0 running,
10 not yet submitted"), so every face says the same.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from jobsmith.adapters.scheduler import JobStatus
from jobsmith.agent.runtime.session.ledger import JobLedger
from jobsmith.agent.runtime.session.store import SessionNotFound, SessionStore
from jobsmith.agent.runtime.workflows.feeding.index import FeedingIndex
from jobsmith.agent.runtime.workflows.feeding.progress import WorkloadProgress, workload_progress
from jobsmith.agent.runtime.workflows.feeding.record import Reader, Workload, part_jobs
from jobsmith.agent.runtime.workflows.feeding.reference import find_workload, parse_workload_id


def fed_workloads(
    store: SessionStore,
    ledger: JobLedger,
    sessions: Iterable[str],
    statuses: Mapping[str, JobStatus],
    *,
    every_feeding: bool,
    read: Reader | None = None,
) -> dict[str, list[WorkloadProgress]]:
    """The fed workloads of these sessions, each as far as it is (statuses: this poll's
    answers, else as last recorded), by session, sorted; every_feeding: also those of
    the sessions the feeding index lists. read: how a session is read (Reader)."""
    wanted = set(sessions)
    if every_feeding:
        wanted |= FeedingIndex.beside(ledger).sessions()
    found = {}
    for s in wanted:
        try:
            found[s] = workload_progress(s, (read or store.read)(s), statuses)
        except SessionNotFound:  # an index entry of a pruned session: the watcher drops it
            continue
    return {s: ws for s, ws in sorted(found.items()) if ws}


def of_polled(
    store: SessionStore,
    ledger: JobLedger,
    statuses: Mapping[str, JobStatus],
    *,
    every_feeding: bool,
) -> dict[str, list[WorkloadProgress]]:
    """fed_workloads of the sessions that submitted the polled jobs."""
    sessions = {r.session_id for j in statuses if (r := ledger.get(j)) and r.session_id}
    return fed_workloads(store, ledger, sessions, statuses, every_feeding=every_feeding)


def named(
    store: SessionStore, ledger: JobLedger, step_ids: Sequence[str], read: Reader | None = None
) -> tuple[list[Workload], list[str]]:
    """`status STEP_ID`: the workloads named by their step ids (UnknownWorkload for one
    that names none), and their parts' job ids, to poll with the jobs named. read: how
    their sessions are read (Reader; not the search for them, which may read every
    session and keeps none)."""
    found = [find_workload(store, ledger, parse_workload_id(s)) for s in step_ids]
    jobs: list[str] = []
    for w in found:
        fed = part_jobs((read or store.read)(w.session_id), w.step_id).values()
        jobs += [j for j in fed if j and j not in jobs]
    return found, jobs


def documents(found: Mapping[str, list[WorkloadProgress]]) -> list[dict[str, Any]]:
    """Each workload as `status --json` and the status tool give it: its counts and its
    line."""
    return [{**w.model_dump(), "line": w.line()} for ws in found.values() for w in ws]

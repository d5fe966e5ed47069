"""One message per workload: told once, when every job of a session has ended (and,
where the user's file asks, its outputs copied back then: agent/watcher/fetching.py).

A render of 240 frames is one array, a transcode is chunks and a join, a plan is several
jobs; whoever follows it from a chat channel or a pager wants to hear "render shot42:
240/240 tasks done, 3 re-run, 1.7 GPU-h" once, not a line per job. So, where the site's
`notify.webhook_for` is `workload` (the default), the webhook is told when a session's
work is over, by whichever poll saw it end first: a watcher's cycle (after its decisions
and feeding), or `status`, `wait` or a report that recorded the last end before any
watcher did (agent/watcher/polling.py). The work is over when:

- every job the session submitted (its re-runs included) is in a final state;
- every failure among them has a decision (a re-run the rules took is a new job, so the
  workload goes on until that one ends too);
- no step of the session waits for a person's approval;
- no fed workload of the session has parts still to submit (a workload larger than the
  site's limits goes on as its parts end: agent/runtime/workflows/feeding/feeder.py).

The message is the session's report in figures (views/report.py: one accounting query
for all its jobs), and is claimed in the session log before it is sent
(`workload_ended`, once per last job: claims.append_once_per_job), so two watchers, or a
watcher restarted mid-cycle, never tell it twice. A workload that goes on later (a
person's `rerun`) ends again, and is told again, naming its new last job.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Protocol

from jobsmith.adapters.states import JobState
from jobsmith.agent.runtime.session.claims import append_once_per_job
from jobsmith.agent.runtime.session.events import EventKind
from jobsmith.agent.runtime.session.jobstate import StateChange
from jobsmith.agent.runtime.session.ledger import JobLedger
from jobsmith.agent.runtime.session.readmodel import SessionFolds
from jobsmith.agent.runtime.session.session_log import SessionLog
from jobsmith.agent.runtime.session.store import SessionStore
from jobsmith.errors import ConfigError

if TYPE_CHECKING:
    from jobsmith.agent.runtime.staging import StagingParts
    from jobsmith.agent.views.report import ReportParts, RunReport
    from jobsmith.agent.watcher.polling import PollParts

    class WorkloadParts(PollParts, ReportParts, StagingParts, Protocol):
        """What telling a workload's end uses: a poll's parts (the poll that recorded
        the end), a run report's (the message is the session's report) and staging's
        (its outputs copied back, where asked: agent/watcher/fetching.py)."""


def ended_workloads(
    changes: Iterable[StateChange],
    ledger: JobLedger,
    folds: SessionFolds,
    store: SessionStore | None = None,
    *,
    sessions: Iterable[str] = (),
) -> dict[str, str]:
    """The sessions whose work a poll's changes ended (module docstring), each with its
    last job (the one submitted last): session id -> job id. Besides the sessions of the
    jobs that ended in the changes, those named in sessions are judged too (a watcher's
    decision about a failure another poll recorded can be what ends one). With the
    store, a session whose fed workload has parts still to submit has not ended."""
    touched = {c.session_id for c in changes if c.state.is_terminal} | set(sessions)
    if not touched:
        return {}
    jobs: dict[str, list[str]] = {}
    for entry in ledger.entries():  # in submission order, without reading records
        if entry.session_id in touched:
            jobs.setdefault(entry.session_id, []).append(entry.job_id)
    ended: dict[str, str] = {}
    for session_id, job_ids in jobs.items():
        fold = folds.of(session_id)
        states = [JobState.known(fold.job_states.get(j)) for j in job_ids]
        over = all(s is not None and s.is_terminal for s in states)
        failed = [j for j, s in zip(job_ids, states, strict=True) if s and s.is_failure]
        settled = over and not fold.awaiting and all(j in fold.decided for j in failed)
        if settled and (store is None or not _parts_to_feed(store, session_id)):
            ended[session_id] = job_ids[-1]
    return ended


def workload_message(report: RunReport, last_job: str) -> dict[str, Any]:
    """What the webhook is told: the session's figures and one line saying them."""
    summary = report.summary(path="")
    counts = summary.task_counts
    done = counts.get(JobState.COMPLETED.value, 0)
    name = summary.title or f"session {summary.session_id}"
    words = [f"{name}: {done}/{summary.tasks} tasks done"]
    failed = sum(n for state, n in counts.items() if _failure(state))
    if failed:
        first = summary.failures[0] if summary.failures else None
        said = f" (first: {first.job_id}, {first.verdict})" if first else ""
        words.append(f"{failed} failed{said}")
    if summary.reruns:
        words.append(f"{summary.reruns} re-run")
    words.append(f"{summary.core_hours:.2f} core-h")
    if summary.gpu_hours:
        words.append(f"{summary.gpu_hours:.2f} GPU-h")
    return {
        "event": "workload_ended",
        "session_id": summary.session_id,
        "title": summary.title,
        "last_job_id": last_job,
        "jobs": summary.jobs,
        "tasks": summary.tasks,
        "task_counts": counts,
        "failed": failed,
        "first_failure": summary.failures[0].model_dump() if summary.failures else None,
        "reruns": summary.reruns,
        "core_hours": summary.core_hours,
        "gpu_hours": summary.gpu_hours,
        "text": ", ".join(words),
    }


def tell_workloads(
    app: WorkloadParts, changes: Iterable[StateChange], sessions: Iterable[str] = ()
) -> list[str]:
    """Tell the webhook of each workload the changes (and sessions) ended, once (claimed
    in its session first); the sessions told. Whichever poll records a workload's last
    end tells it: a watcher's cycle, or `status`, `wait` or a report that saw it first
    (agent/watcher/polling.py). Best effort, as every webhook call: a failed POST is a
    note, never the cycle's or the command's end."""
    from jobsmith.agent.views.output import note
    from jobsmith.agent.views.report import run_report
    from jobsmith.agent.watcher.polling import session_poll
    from jobsmith.agent.watcher.webhook import post

    try:
        notify, fetch_to = app.site.config.notify, app.site.config.staging.fetch_outputs_to
    except ConfigError:  # no site file: nothing to tell, and status still answers
        return []
    url = notify.webhook_url if notify.webhook_for == "workload" else None
    if url is None and fetch_to is None:
        return []
    told: list[str] = []
    ended = ended_workloads(changes, app.ledger, app.folds, app.store, sessions=sessions)
    if fetch_to is not None:
        from jobsmith.agent.watcher.fetching import fetch_outputs

        fetch_outputs(app, ended, fetch_to)  # the results first: the message may say "done"
    if url is None:
        return told
    for session_id, last_job in ended.items():
        log = SessionLog(app.store, session_id)
        if not append_once_per_job(log, EventKind.WORKLOAD_ENDED, {"job_id": last_job}):
            continue  # another watcher told it
        message = workload_message(run_report(app, session_id, session_poll(app)), last_job)
        problem = post(url, message)
        if problem:
            note(f"jobsmith: {problem}")
        told.append(session_id)
    return told


def _parts_to_feed(store: SessionStore, session_id: str) -> bool:
    """Whether a fed workload of the session still has parts to submit (it goes on:
    agent/runtime/workflows/feeding/feeder.py)."""
    from jobsmith.agent.runtime.workflows.feeding.progress import workload_progress

    events = store.read(session_id)
    return any(p.feeding for p in workload_progress(session_id, events))


def _failure(state: str) -> bool:
    known = JobState.known(state)
    return known is not None and known.is_failure

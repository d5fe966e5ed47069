"""The watcher: one batched poll per cycle for every open session's jobs, and what follows.

Each cycle asks Slurm once (one sacct, at most one squeue --me) about every job a session
submitted that has not ended, however many sessions and jobs there are. State changes
become job_state events in their sessions; a job that ended in failure wakes its
session's decision-maker (the rules; later a model). A cycle whose poll fails changes
nothing: a job is never reported failed because Slurm did not answer. What is watched is
rebuilt from the session store each cycle, so a restarted watcher picks up where the last
one stopped. One job's trouble is that job's: a log that cannot be read is a note on its
decision (see agent/diagnosis/job.py), and whatever else goes wrong while deciding about
one job becomes an "error" decision for it, so the cycle still handles every other job.

`watch_cycle` is that poll and those decisions alone, over the store, the ledger, the
folds and two callables (tested and benchmarked so); `run_cycle` is the whole cycle with the app's
parts, in order: what `watch`, chat and the MCP server run (agent/watcher/watcher.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    SerializerFunctionWrapHandler,
    model_serializer,
)

from jobsmith.adapters.scheduler import JobStatus
from jobsmith.adapters.states import JobState
from jobsmith.agent.brains.waking import WakeOutcome
from jobsmith.agent.runtime.logs import LogSources, stderr_tail
from jobsmith.agent.runtime.session.jobstate import StateChange, record_job_states
from jobsmith.agent.runtime.session.ledger import JobLedger, SubmissionRecord
from jobsmith.agent.runtime.session.readmodel import SessionFolds
from jobsmith.agent.runtime.session.store import SessionStore
from jobsmith.agent.runtime.staging import StagingParts
from jobsmith.agent.watcher.nodes import NodeParts, NodeWatch, watch_nodes
from jobsmith.agent.watcher.pacing import Outlook, outlook
from jobsmith.agent.watcher.polling import PollParts, batched_poll, tell
from jobsmith.agent.watcher.workload import tell_workloads
from jobsmith.errors import SchedulerError

if TYPE_CHECKING:
    from jobsmith.adapters.scheduler import Scheduler
    from jobsmith.agent.brains.conversation import Conversation
    from jobsmith.agent.brains.protocol import Brain
    from jobsmith.agent.runtime.submission.executor import Executor
    from jobsmith.agent.runtime.workflows.pipelinerun import Pipelines


class CycleParts(PollParts, LogSources, NodeParts, StagingParts, Protocol):
    """What a whole cycle uses (the composition root, agent/app.py, has them all): what
    one batched poll uses (agent/watcher/polling.py), where logs are read (for the
    diagnoses), the node blocklist (agent/watcher/nodes.py), staging (an ended session's
    outputs copied back: agent/watcher/fetching.py), the brain and its executor, the
    pipelines and the wakes."""

    @property
    def brain(self) -> Brain: ...
    @property
    def executor(self) -> Executor: ...
    @property
    def pipelines(self) -> Pipelines: ...
    @property
    def conversation(self) -> Conversation: ...


class WatchCycle(BaseModel):
    """What one cycle saw and did."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    watched: int = Field(description="jobs polled")
    scheduler_ok: bool = Field(
        description="false if Slurm did not answer, or answered with an error (nothing changed)"
    )
    error: str | None = Field(None, description="why the poll failed")
    changes: list[StateChange] = Field(default_factory=list, description="new job states")
    decisions: list[dict[str, object]] = Field(
        default_factory=list, description="what the decision-maker did about failures"
    )
    woken: list[WakeOutcome] = Field(
        default_factory=list,
        description="conversations taken up again because their jobs ended "
        "(agent/brains/waking.py)",
    )
    pipelines: list[str] = Field(
        default_factory=list,
        description="pipeline sessions whose engine records were read (agent/runtime/"
        "pipelinerun.py)",
    )
    warnings: list[str] = Field(
        default_factory=list,
        description="what may go unseen, e.g. a poll interval above MinJobAge on a cluster "
        "without accounting",
    )
    nodes: NodeWatch | None = Field(
        None,
        description="failures attributed to nodes, the user's blocklist, and requeued jobs "
        "kept off it (agent/watcher/nodes.py); left out while there are none",
    )
    #: what the polled jobs are expected to do next (agent/watcher/pacing.py): how soon
    #: a watcher that runs on polls again; not part of the printed document
    _outlook: Outlook = PrivateAttr(default_factory=Outlook)

    @model_serializer(mode="wrap")
    def _nodes_only_if_any(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # a cycle with no bad node dumps as before the blocklist existed
        data: dict[str, Any] = handler(self)
        if data.get("nodes") is None:
            data.pop("nodes", None)
        return data

    @property
    def outlook(self) -> Outlook:
        """The expected ends and starts of the jobs this cycle polled (none if it failed)."""
        return self._outlook

    def with_outlook(self, seen: Outlook) -> WatchCycle:
        """This cycle with seen as its outlook."""
        copy = self.model_copy()
        copy._outlook = seen
        return copy


def open_jobs(ledger: JobLedger, folds: SessionFolds) -> list[SubmissionRecord]:
    """Jobs still to follow: not ended yet, or failed with no decision taken about them.

    The second kind matters because `jobsmith status` or `wait` may have recorded the
    failure first: the decision must not depend on which poll saw it. Each session's
    recorded states and decisions come from its fold (agent/runtime/session/readmodel.py), so a
    cycle reads only the events appended since the last one; and the jobs' sessions come
    from the ledger's index, so only the records of open jobs are read.
    """
    out = []
    for entry in ledger.entries():  # the index: only the open jobs' records are read
        if entry.session_id is None:
            continue
        fold = folds.of(entry.session_id)
        state = JobState.known(fold.job_states.get(entry.job_id))
        if (
            state is None
            or not state.is_terminal
            or (state.is_failure and entry.job_id not in fold.decided)
        ):
            record = ledger.get(entry.job_id)
            if record is not None:
                out.append(record)
    return out


def watch_cycle(
    store: SessionStore,
    ledger: JobLedger,
    status: Callable[[list[str], datetime], Mapping[str, JobStatus]],
    decide: Callable[[StateChange, JobStatus], dict[str, object] | None],
    on_change: Callable[[StateChange], None] | None = None,
    *,
    folds: SessionFolds,
) -> WatchCycle:
    """One poll of every open job, then a decision for each failure not yet decided;
    the recorded states and decisions come from folds (kept up to date across cycles)."""
    records = open_jobs(ledger, folds)
    decided = {j for r in records if r.session_id for j in folds.of(r.session_id).decided}
    if not records:
        return WatchCycle(watched=0, scheduler_ok=True)
    ids = [r.job_id for r in records]
    since = min(r.submitted_at for r in records) - timedelta(minutes=5)
    try:
        statuses = status(ids, since)
    except SchedulerError as err:
        # not only "unavailable": around a slurmctld restart its clients also give answers
        # that are no answer (found in CI on Slurm 24.11); a cycle that learned nothing
        # reports it and changes nothing, and the next one asks again
        return WatchCycle(watched=len(ids), scheduler_ok=False, error=str(err))
    changes = record_job_states(store, ledger, statuses, on_change, folds=folds)
    decisions = [
        d
        for r in records
        if r.job_id not in decided
        and statuses[r.job_id].state.is_failure
        and not statuses[r.job_id].stand_in  # decided on the next poll's real row
        and (d := _decide_one(decide, r, statuses[r.job_id])) is not None
    ]
    return WatchCycle(watched=len(ids), scheduler_ok=True, changes=changes, decisions=decisions)


def wake_brains(app: CycleParts) -> list[WakeOutcome]:
    """Take up the conversations whose jobs ended since their brain last spoke
    (agent/brains/waking.py): the sessions of the last 7 days' submissions."""
    from jobsmith.agent.brains.waking import Waker

    sessions = {r.session_id for r in app.ledger.recent() if r.session_id}
    return Waker(app.conversation, app.store, app.folds, app.news.add).wake(sessions)


def run_cycle(app: CycleParts, interval_s: float | None = None) -> WatchCycle:
    """One whole watcher cycle with app's parts (what a Watcher runs), in this order:

    1. watch_cycle above: one batched poll (polling.batched_poll: stand-in rows settled,
       the answer kept for chat and MCP), each change recorded and told (polling.tell: news, the
       site's webhook), and the brain's decision about each new failure
       (agent/brains/deciding.py; the brain is built only when a failure comes);
    2. if Slurm answered: the pipelines' engine records read
       (agent/runtime/workflows/pipelinerun.py)
       and the conversations whose jobs ended taken up again (agent/brains/waking.py);
    3. a decision that waits for a person's approval becomes news; the webhook is told
       of each workload that ended (agent/watcher/workload.py);
    4. with the interval, and if Slurm answered: what polling that seldom may miss
       (watch_warnings).

    The cycle carries what its jobs are expected to do next (WatchCycle.outlook), which
    a watcher that runs on paces itself by (agent/watcher/running.py).
    """
    from jobsmith.agent.brains.deciding import decide_failure

    def decide(change: StateChange, status: JobStatus) -> dict[str, object] | None:
        tail = partial(stderr_tail, app)
        return decide_failure(app.brain, app.executor, tail, change, status)

    polled: list[Mapping[str, JobStatus]] = []
    nodes: list[NodeWatch] = []

    def poll(job_ids: list[str], since: datetime) -> Mapping[str, JobStatus]:
        polled.append(batched_poll(app, job_ids, since))
        # before any decision: a re-run decided now already excludes a node this poll blocked
        nodes.append(_watch_nodes(app, polled[-1]))
        return polled[-1]

    tell_change = partial(tell, app)
    cycle = watch_cycle(app.store, app.ledger, poll, decide, tell_change, folds=app.folds)
    if polled:
        cycle = cycle.with_outlook(outlook(polled[-1].values()))
    if nodes and nodes[-1] != NodeWatch():
        cycle = cycle.model_copy(update={"nodes": nodes[-1]})
    if cycle.scheduler_ok:
        followed = app.pipelines.follow_all()
        cycle = cycle.model_copy(update={"woken": wake_brains(app), "pipelines": followed})
        _feed_workloads(app, cycle.changes)  # before telling: a part fed goes on with it
        # a failure another poll recorded, decided by this cycle, can be what ends one
        tell_workloads(app, cycle.changes, _sessions_of_ended(app, polled))
    for decision in cycle.decisions:
        if decision.get("outcome") == "awaiting_approval":
            app.news.add("approval_asked", step_id=decision.get("step_id"))
    if interval_s is not None and cycle.scheduler_ok:
        cycle = cycle.model_copy(update={"warnings": watch_warnings(app.scheduler, interval_s)})
    return cycle


def _sessions_of_ended(app: CycleParts, polled: list[Mapping[str, JobStatus]]) -> set[str]:
    """The sessions of the jobs the cycle polled (open at its start) that have ended."""
    ended = [j for j, status in (polled[-1] if polled else {}).items() if status.state.is_terminal]
    records = (app.ledger.get(j) for j in ended)
    return {r.session_id for r in records if r is not None and r.session_id is not None}


def _decide_one(
    decide: Callable[[StateChange, JobStatus], dict[str, object] | None],
    record: SubmissionRecord,
    status: JobStatus,
) -> dict[str, object] | None:
    """decide() for one failed job; an exception becomes its decision, not the cycle's end.

    Any exception, not only JobsmithError: an unattended watcher that stops on one job's
    surprise (a bug included) leaves every other job undecided, on every cycle after.
    Unless the decision was recorded before the failure, the next cycle tries again.
    """
    try:
        return decide(_failure(record, status), status)
    except Exception as err:
        return {
            "job_id": record.job_id,
            "action": "error",
            "reason": f"deciding about it failed: {type(err).__name__}: {err}",
        }


def _feed_workloads(app: CycleParts, changes: list[StateChange]) -> None:
    """Feed the next parts of workloads larger than the site's limits
    (agent/runtime/workflows/feeding/feeder.py): every cycle, those the feeding index
    lists (parts still to submit: room may come from jobs jobsmith never submitted, and
    a workload none of whose parts fitted yet has no job to find it by); and, when jobs
    ended, the sessions whose parts ended or still run (a workload an older jobsmith
    recorded is in no index). Listing the index is one directory read; a session with no
    workload is not read, and nothing is built where there is none."""
    from jobsmith.agent.runtime.workflows.feeding.index import FeedingIndex

    sessions = FeedingIndex.beside(app.ledger).sessions()
    ended = [c.job_id for c in changes if c.state.is_terminal]
    if ended:
        from jobsmith.agent.runtime.workflows.feeding.record import is_part

        records = [*open_jobs(app.ledger, app.folds), *(app.ledger.get(j) for j in ended)]
        sessions |= {
            r.session_id for r in records if r and r.session_id and is_part(r.options.job_name)
        }
    if sessions:
        from jobsmith.agent.runtime.workflows.feeding.feeder import feed_sessions

        feed_sessions(app.executor, sessions)


def _watch_nodes(app: CycleParts, statuses: Mapping[str, JobStatus]) -> NodeWatch:
    """watch_nodes, whose trouble (a blocklist file it cannot write, an accounting query
    that fails) is a note in the cycle, never the cycle's end: jobs are still followed."""
    try:
        return watch_nodes(app, statuses)
    except (OSError, SchedulerError) as err:
        return NodeWatch(failures=[f"the blocklist was not updated: {err}"])


def _failure(record: SubmissionRecord, status: JobStatus) -> StateChange:
    assert record.session_id is not None  # open_jobs only returns session jobs
    return StateChange(
        session_id=record.session_id, job_id=record.job_id, state=status.state, previous=None
    )


def next_interval(cycle: WatchCycle, current: float, base: float, ceiling: float) -> float:
    """Back off (x2, up to ceiling) while Slurm does not answer; back to base when it does."""
    return min(current * 2, ceiling) if not cycle.scheduler_ok else base


def watch_warnings(scheduler: Scheduler, interval_s: float) -> list[str]:
    """What a watcher polling every interval_s may miss (see interval_warning).

    A scheduler that cannot answer gives no warning here: the cycle reports that.
    """
    try:
        accounting = scheduler.has_accounting()
        controller = scheduler.capabilities().controller
        # a scheduler that does not say how long it keeps ended jobs: age unknown
        age = None if accounting or controller is None else controller.min_job_age_s()
    except SchedulerError:
        return []
    warning = interval_warning(interval_s, accounting, age)
    return [warning] if warning else []


def interval_warning(interval_s: float, accounting: bool, min_job_age_s: int | None) -> str | None:
    """Why polling every interval_s can miss how jobs end, or None if it cannot.

    With accounting every end is kept. Without it the controller is the only witness, and
    it forgets a finished job MinJobAge seconds after its end: a watcher polling less often
    can find the job gone, its final state never seen (FINAL_UNKNOWN).
    """
    if accounting:
        return None
    if min_job_age_s is None:
        return (
            "this cluster keeps no accounting and its MinJobAge could not be read: a job that"
            " ends between two polls may be forgotten before it is seen (FINAL_UNKNOWN)"
        )
    if interval_s < min_job_age_s:
        return None
    return (
        f"this cluster keeps no accounting and its controller forgets a finished job"
        f" {min_job_age_s}s after it ends (MinJobAge); polling every {interval_s:g}s, a job"
        f" can end and be forgotten between two polls, its final state never seen"
        f" (FINAL_UNKNOWN): use an --interval below {min_job_age_s}s"
    )

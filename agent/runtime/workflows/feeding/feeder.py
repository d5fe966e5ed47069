"""Feeding a workload larger than the site's submit limits, part by part, from the session.

An array Slurm would refuse whole (a MaxSubmit limit: every task counts one queued job;
an index at or above MaxArraySize) is not refused: it becomes a workload, split into
parts that fit (split.py), recorded in its session before any part is submitted, and fed
as earlier parts leave the queue.

- Up front, the policy judges the whole workload (its budgets, its approval thresholds,
  with every task's cost): one approval covers all of it, names the total, and its hash
  covers the workload's definition (the script, the options, the parts).
- The workload is one `workload` event of its step; its parts are steps of their own,
  `STEP.pN`. Before a part's sbatch, the feeder claims it with a conditional append
  (claims.py: a `claimed` event only if the part has no event yet), so two actors
  (the watcher, `wait`, a chat) never feed the same part twice, whatever the
  interleaving. Then the executor's one path for a planned job: intent, sbatch, ledger,
  result. A part whose intent has no result is a crashed submission: `sessions resume`
  settles it by its tag, as any other; the feeder never submits it again.
- Each part is judged when it is fed: the site's limits and the budgets today (not the
  template's paths: an earlier part may rightly have consumed its inputs); a full queue
  or the submissions-per-hour budget means "not now", and the next cycle tries again:
  that paces the feeding.
- Nothing is held in memory: whichever process feeds next reads the session, so feeding
  resumes after a crash. A workload with parts still to submit is also listed in the
  feeding index (index.py), so the watcher and `status` find it even when none of its
  parts has a job yet (nothing fitted when it was submitted).
- Cancelling the workload records that no part is to be fed any more (`workload`
  event with `cancelled`) before the submitted parts are cancelled. A person names it
  by a part's job id or by its step id (reference.py), the one name a workload with
  no job yet has.
- A plan's step can be a workload too (begin_in_plan): the plan's approval covers it, and
  the plan's steps after it are its followers, submitted here once every part has its
  job (followers.py says why and how; planrun.submit_followers does it). It stays in
  the feeding index until they are all submitted; a cancel stops them as it stops parts.
"""

from __future__ import annotations

import contextlib
import getpass
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from jobsmith.adapters.options import JobOptions
from jobsmith.agent.runtime.session.claims import (
    LOOKUP_ALLOWANCE,
    SBATCH_MAX_LIFE,
    AlreadyRecorded,
    append_result,
    owner,
)
from jobsmith.agent.runtime.session.events import Event, EventKind
from jobsmith.agent.runtime.session.ledger import JobLedger
from jobsmith.agent.runtime.session.readmodel import fold_events
from jobsmith.agent.runtime.session.session_log import SessionLog
from jobsmith.agent.runtime.session.store import SessionNotFound, SessionStore, utc_now
from jobsmith.agent.runtime.submission import hashing, orders
from jobsmith.agent.runtime.submission import steps as st
from jobsmith.agent.runtime.submission.approval.approvals import ApprovalNeeded
from jobsmith.agent.runtime.submission.judging.judge import CheckedJob, refusal
from jobsmith.agent.runtime.submission.judging.policy import (
    OVER_SITE_LIMITS,
    Cost,
    Ruling,
    check_limits,
)
from jobsmith.agent.runtime.workflows.feeding.index import FeedingIndex
from jobsmith.agent.runtime.workflows.feeding.partscript import part_options, part_script
from jobsmith.agent.runtime.workflows.feeding.record import (
    Workload,
    follower_jobs,
    live_jobs,
    part_data,
    part_jobs,
    workloads,
)
from jobsmith.agent.runtime.workflows.feeding.reference import find_workload, parse_workload_id
from jobsmith.agent.runtime.workflows.feeding.split import (
    SLURM_DEFAULT_MAX_ARRAY_SIZE,
    Part,
    contiguous_range,
    part_size,
    split,
)
from jobsmith.errors import InputError, JobsmithError, PolicyError

if TYPE_CHECKING:
    from jobsmith.adapters.scheduler import Scheduler
    from jobsmith.agent.runtime.submission.executor import Executor
    from jobsmith.agent.runtime.submission.judging.judge import PlannedJob
    from jobsmith.agent.runtime.workflows.feeding.followers import FedStep
    from jobsmith.agent.runtime.workflows.planrun import PlanHands
    from jobsmith.site_config import SiteConfig

#: refusals that mean "not now": the queue is full (Slurm's limit or the policy's
#: concurrency, which the whole workload passed when it was judged), or the hour's
#: submissions are spent
WAIT_RULES = frozenset({"submit limit", "max concurrent jobs", "submissions per hour"})


class PartTaken(JobsmithError):
    """Another actor claimed the part first: it feeds it, this one must not."""


def feedable(checked: CheckedJob, ruling: Ruling) -> bool:
    """Whether a refused submission is one the feeder takes instead: an array refused
    only for a submit limit or MaxArraySize, whose indices are one range."""
    spec = checked.job.options.array
    if ruling.verdict != "refuse" or ruling.rule not in OVER_SITE_LIMITS or spec is None:
        return False
    try:
        contiguous_range(spec)
    except InputError:
        return False
    return True


def definition(executor: Executor, step: st.Submit, checked: CheckedJob) -> dict[str, Any]:
    """The workload's definition: what is recorded, approved (its hash) and fed. Its
    parts fit the submit limits and the cluster's MaxArraySize (Slurm's default where the
    scheduler cannot tell)."""
    options = checked.job.options
    assert options.array is not None
    first, last = contiguous_range(options.array)
    parts, max_array_size = parts_for(executor.scheduler, executor.site, options)
    data: dict[str, Any] = {
        "template": checked.job.template,
        "script": checked.job.script,
        "options": options.model_dump(mode="json"),
        "step": step.model_dump(mode="json"),
        "cwd": str(executor.cwd),
        "tasks": last - first + 1,
        "parts": [part_data(p) for p in parts],
        "max_array_size": max_array_size,
    }
    data["workload_sha256"] = workload_sha256(data)
    return data


def parts_for(
    scheduler: Scheduler, site: SiteConfig, options: JobOptions
) -> tuple[tuple[Part, ...], int]:
    """The array's parts, and the MaxArraySize they were cut for."""
    assert options.array is not None
    first, last = contiguous_range(options.array)
    known = scheduler.submit_limits(getpass.getuser(), options)
    max_array_size = known.max_array_size or SLURM_DEFAULT_MAX_ARRAY_SIZE
    size = part_size([limit.limit for limit in known.limits], max_array_size)
    concurrency = site.policy.max_concurrent_jobs
    return split(first, last, size, concurrency, options.array_throttle), max_array_size


def dry_run(executor: Executor, checked: CheckedJob) -> tuple[CheckedJob, tuple[Part, ...]] | None:
    """What `submit --dry-run` says of a job refused for the site's limits that a real
    submit would feed instead (start): the job judged as the workload is (its whole cost,
    without the queue's limit), and its parts; None if it would not be fed."""
    ruling = checked.verdict()
    if not feedable(checked, ruling) or executor.judge.canary_first(checked):
        return None
    whole = replace(checked, decision=executor.judge.spend(checked.cost))
    return whole, parts_for(executor.scheduler, executor.site, checked.job.options)[0]


def workload_sha256(data: Mapping[str, Any]) -> str:
    """The hash an approval of the workload is bound to: everything it will submit."""
    kept = {k: v for k, v in data.items() if k != "workload_sha256"}
    return hashing.script_sha256(json.dumps(kept, sort_keys=True, default=str))


def start(
    executor: Executor,
    log: SessionLog,
    step: st.Submit,
    checked: CheckedJob,
) -> st.StepResult:
    """Record the workload as the step's intent, then ask a person (once, for all of it)
    if the policy says so, else begin feeding it."""
    options = checked.job.options
    # the whole workload's cost, without the queue's limit; held for a person where the
    # origin's rules say so (a model that read job text), as any submission is
    whole = replace(checked, decision=executor.judge.spend(checked.cost)).verdict()
    if whole.verdict == "refuse":
        raise PolicyError(refusal(whole))
    data = definition(executor, step, checked)
    intent = {
        "step": data["step"],
        "risk": step.risk,
        "template": checked.job.template,
        "job_name": options.job_name,
        "tag": options.tag(),
        "script_sha256": hashing.script_sha256(checked.job.script),
        "options": data["options"],
        "cost": checked.cost.model_dump(),
        "script": checked.job.script,
        "workload": data,
    }
    log.intent(step.id, intent)
    if whole.verdict == "approve":
        reason = (
            f"{whole.message}; a workload of {data['tasks']} tasks in {len(data['parts'])} "
            "parts, fed as the site's limits allow: this approval covers all of it"
        )
        log.append(EventKind.APPROVAL_ASKED, {**intent, "reason": reason}, step.id)
        raise ApprovalNeeded(step.id, reason)
    return begin(executor, log, step.id, data)


def approved(
    executor: PlanHands, session_id: str, step_id: str, asked: Mapping[str, Any]
) -> st.StepResult:
    """A person approved the workload, or `sessions resume` found its intent unsettled
    (a crash before it was recorded): it must still be what was recorded and shown."""
    data = asked["workload"]
    if workload_sha256(data) != data.get("workload_sha256"):
        raise PolicyError(f"step {step_id}: the workload changed after approval; submit it again")
    return begin(executor, SessionLog(executor.store, session_id), step_id, data)


def begin(
    executor: PlanHands, log: SessionLog, step_id: str, data: Mapping[str, Any]
) -> st.StepResult:
    """Record the workload (once), list it in the feeding index, settle its step, and
    feed what fits now. A crash before the index holds it leaves the step unsettled:
    `sessions resume` comes back here."""

    def not_yet(events: list[Event]) -> None:
        if any(e.kind is EventKind.WORKLOAD and e.step_id == step_id for e in events):
            raise AlreadyRecorded(f"step {step_id}: its workload is recorded already")

    with contextlib.suppress(AlreadyRecorded):  # begun already: feed on
        log.append_if(EventKind.WORKLOAD, data, step_id, not_yet)
    # (again after a resume: feed_session below takes it out if every part is claimed)
    FeedingIndex.beside(executor.ledger).add(log.session_id, step_id)
    summary = {
        "outcome": st.Outcome.DONE,
        "action": "submit",
        "workload": step_id,
        "workload_tasks": data["tasks"],
        "workload_parts": len(data["parts"]),
    }
    append_result(log, step_id, summary)
    waits: list[str] = []
    fed = feed_session(executor, log.session_id, waits)
    first = fed[0].summary if fed else {"submitted": False, "job_id": None, "stdout": None}
    tasks = sum(int(p["count"]) for p in data["parts"][: len(fed)])
    now = {"fed_parts": len(fed), "fed_tasks": tasks, "not_yet_submitted": data["tasks"] - tasks}
    if not fed:  # why none fits now (a full queue, the hour's submissions)
        now["waiting"] = waits[0] if waits else "another process is feeding it"
    return st.StepResult(
        step_id=step_id,
        action="submit",
        outcome=st.Outcome.DONE,
        summary={**first, **summary, **now},
    )


def begin_in_plan(
    executor: PlanHands, log: SessionLog, plan_step_id: str, step: st.Submit, job: PlannedJob,
    fed: FedStep,
) -> None:  # fmt: skip
    """A plan's step over the site's limits (followers.py): recorded in the plan's session
    as a workload whose followers are the plan's steps after it, and fed. The plan's
    approval covered it (its text names the workload): no person is asked again; each
    part is judged as it is fed. Called again after a crash, it records nothing twice."""
    data: dict[str, Any] = {
        "template": job.template,
        "script": job.script,
        "options": job.options.model_dump(mode="json"),
        "step": step.model_dump(mode="json"),
        "cwd": str(executor.cwd),
        "tasks": fed.tasks,
        "parts": [dict(p) for p in fed.parts],
        "max_array_size": fed.max_array_size,
        "plan_step": plan_step_id,
        "followers": list(fed.followers),
    }
    data["workload_sha256"] = workload_sha256(data)
    intent = {
        "step": data["step"],
        "risk": step.risk,
        "template": job.template,
        "job_name": job.options.job_name,
        "tag": job.options.tag(),
        "script_sha256": hashing.script_sha256(job.script),
        "options": data["options"],
        "cost": Cost.of(job.options).model_dump(),
        "script": job.script,
        "workload": data,
    }
    log.intent(step.id, intent)
    begin(executor, log, step.id, data)


def feed_session(
    executor: PlanHands, session_id: str, waits: list[str] | None = None
) -> list[st.StepResult]:
    """Feed every workload of the session what fits now, in order; the parts (and a
    plan's followers) submitted.

    A part already claimed (by anyone, alive or not) is skipped: its claimant or
    `sessions resume` settles it. The first part that does not fit stops its workload's
    feeding until the next call (why, if waits is given, is added to it). Once every part
    has its job, a plan's followers are submitted (followers.py). A workload cancelled,
    or with every part claimed and every follower submitted, leaves the feeding index."""
    log = SessionLog(executor.store, session_id)
    events = log.events()
    taken = {e.step_id for e in events if e.step_id is not None}
    submitted: list[st.StepResult] = []
    index = FeedingIndex.beside(executor.ledger)
    for w in workloads(session_id, events):
        if w.cancelled:
            index.remove(session_id, w.step_id)
            continue
        stopped = False
        for part in w.parts:
            if w.part_step_id(part) in taken:
                continue
            result = _feed_part(executor, log, w, part, waits)
            if result is None:
                stopped = True  # not now (or taken by another actor): the next call tries
                break
            submitted.append(result)
            taken.add(w.part_step_id(part))
        if stopped:
            continue
        if w.followers:  # a plan's steps after it: once every part has its job
            from jobsmith.agent.runtime.workflows.planrun import submit_followers

            results, left = submit_followers(executor, log, w, waits)
            submitted += results
            if left:
                continue
        index.remove(session_id, w.step_id)  # every part claimed: nothing left to feed
    return submitted


def _feed_part(
    executor: PlanHands, log: SessionLog, w: Workload, part: Part, waits: list[str] | None = None
) -> st.StepResult | None:
    """Judge the part now, claim it, submit it; None if it must wait (why is added to
    waits) or was taken."""
    options = part_options(w.options, part)
    ruling = executor.judge.spend(Cost.of(options), approval_given=True, jobs=[options])
    if ruling.verdict == "refuse":
        if ruling.rule in WAIT_RULES:
            if waits is not None:
                waits.append(f"{ruling.rule}: {ruling.message}")
            return None
        raise PolicyError(f"workload {w.step_id}, part {part.index}: {refusal(ruling)}")
    # the site's limits as they are today; the template's paths are not rendered again:
    # earlier parts may rightly have consumed their inputs (gzip does)
    check_limits(options, executor.site)
    step_id = w.part_step_id(part)

    def unclaimed(events: list[Event]) -> None:
        if any(e.step_id == step_id for e in events):
            raise PartTaken(f"part {step_id} was claimed by another actor")

    lease = LOOKUP_ALLOWANCE + SBATCH_MAX_LIFE
    claim = {"owner": owner(utc_now(), lease), "workload": w.step_id, "part": part.index}
    try:
        log.append_if(EventKind.CLAIMED, claim, step_id, unclaimed)
    except PartTaken:
        return None
    script = part_script(w.script, options, part, len(w.parts), executor.scheduler)
    step = st.Submit.model_validate({**w.step, "id": step_id})
    return executor.submit(log, orders.Planned(step, w.template, script, options))


def cancel(executor: Executor, session_id: str, step_id: str) -> list[str]:
    """Cancel a workload as one: no part is fed after this, then every submitted part's
    job that has not ended is cancelled; the job ids cancelled."""
    index = FeedingIndex.beside(executor.ledger)
    ids = stop_feeding(executor.store, session_id, step_id, index)
    if ids:
        executor.scheduler.cancel(ids)
    return ids


def stop_feeding(
    store: SessionStore, session_id: str, step_id: str, index: FeedingIndex | None = None
) -> list[str]:
    """Record that the workload is cancelled (no part is fed after this; once), take it
    out of the feeding index (if given; else the next feeding does), and return its
    parts' jobs that have not ended, as last seen, for the caller to cancel."""
    log = SessionLog(store, session_id)

    def live(events: list[Event]) -> None:
        if any(w.step_id == step_id and w.cancelled for w in workloads(session_id, events)):
            raise AlreadyRecorded(f"workload {step_id} is cancelled already")

    with contextlib.suppress(AlreadyRecorded):
        log.append_if(EventKind.WORKLOAD, {"cancelled": True}, step_id, live)
    if index is not None:
        index.remove(session_id, step_id)
    events = log.events()  # read once: the fold's job states and the parts, from it
    states = fold_events(events).job_states
    jobs = list(part_jobs(events, step_id).values())
    for w in workloads(session_id, events):  # a plan's followers submitted already
        if w.step_id == step_id and w.plan_step is not None:
            jobs += follower_jobs(events, w.plan_step, w.followers)
    return live_jobs(jobs, states)  # as last seen: ended ones stay


def stop_named(
    store: SessionStore, ledger: JobLedger, step_ids: Sequence[str]
) -> list[tuple[str, bool, list[str]]]:
    """`cancel STEP_ID`: the workloads named by their step ids (reference.py), each
    stopped as stop_feeding does, whether or not any part was ever submitted; for each,
    its step id, whether it was cancelled already, and its parts' jobs still to cancel.
    Every id is found before any is stopped: an unknown one (UnknownWorkload) stops
    none."""
    found = [find_workload(store, ledger, parse_workload_id(s)) for s in step_ids]
    index = FeedingIndex.beside(ledger)
    return [
        (w.step_id, w.cancelled, stop_feeding(store, w.session_id, w.step_id, index)) for w in found
    ]


def with_workloads(store: SessionStore, ledger: JobLedger, job_ids: Sequence[str]) -> list[str]:
    """`cancel` of a workload's part (or one of its tasks) cancels the workload as one:
    each such id becomes its workload's live parts, the workload stopped first; any
    other id stays as it is."""
    out: list[str] = []
    for job_id in job_ids:
        whole = _workload_parts(store, ledger, job_id)
        out += [j for j in (whole or [job_id]) if j not in out]  # none live: as asked
    return out


def _workload_parts(store: SessionStore, ledger: JobLedger, job_id: str) -> list[str] | None:
    """The live parts of the workload job_id is a part of, that workload stopped; None if
    it is no part."""
    array = job_id.split("_")[0]
    record = ledger.get(array)
    if record is None or record.session_id is None or ".p" not in record.options.job_name:
        return None
    events = store.read(record.session_id)
    for w in workloads(record.session_id, events):
        if array in part_jobs(events, w.step_id).values():
            index = FeedingIndex.beside(ledger)
            return stop_feeding(store, record.session_id, w.step_id, index)
    return None


def feed_sessions(executor: PlanHands, session_ids: Iterable[str]) -> dict[str, list[str]]:
    """Feed the workloads of these sessions (the watcher's cycle, `wait`): session id ->
    the job ids of the parts submitted. One session's trouble (a part the policy now
    refuses, Slurm not answering) is that session's: it is noted and the others are fed."""
    fed: dict[str, list[str]] = {}
    for session_id in sorted(set(session_ids)):
        try:
            results = feed_session(executor, session_id)
        except SessionNotFound:  # pruned: nothing left to feed, nor to note it in
            index = FeedingIndex.beside(executor.ledger)
            for entry in index.entries():
                if entry.session_id == session_id:
                    index.remove(session_id, entry.step_id)
            continue
        except JobsmithError as err:
            note_once(SessionLog(executor.store, session_id), str(err))
            continue
        if results:
            fed[session_id] = [str(r.summary["job_id"]) for r in results]
    return fed


def note_once(log: SessionLog, problem: str) -> None:
    """Note why feeding stopped (or why a plan's follower is not submitted: planrun.py),
    unless the session's last event says so already (each watcher cycle tries again: the
    log gets the reason once, not once a cycle)."""

    def new(events: list[Event]) -> None:
        last = events[-1] if events else None
        if last is not None and last.kind is EventKind.NOTE and last.data.get("feeding") == problem:
            raise AlreadyRecorded(problem)

    with contextlib.suppress(AlreadyRecorded):
        log.append_if(EventKind.NOTE, {"feeding": problem}, None, new)

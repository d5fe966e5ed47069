"""Advice at submission: a right-sized request from the user's history, and the
partition where Slurm would start the job earliest.

Both are offers. The user takes them (`submit --right-size`, `--earliest`) or the site's
policy does (`policy.advice: apply`); otherwise the job goes as asked and the advice is
shown beside it, in text and in `--json`. Asking costs one batched accounting call for
the history (none when jobsmith never ran the template) and one `sbatch --test-only`
per partition the job could run in (none for a minute after the same question:
estimates.py), only here, at submission, all asked at once and waited for at most
DEADLINE_S together. Advice never stops a submission: if Slurm cannot answer, or not in
time, the advice says so (or leaves out what came too late) and the job goes as asked.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from jobsmith.adapters.records import JobRecord
from jobsmith.adapters.scheduler import JobStatus, Scheduler
from jobsmith.agent.runtime.session.ledger import SubmissionRecord
from jobsmith.agent.runtime.submission.advising.estimates import EstimateCache, shape_key
from jobsmith.agent.runtime.submission.advising.sizing import (
    SizingProposal,
    propose,
    samples,
    usage_of,
)
from jobsmith.agent.runtime.submission.judging.policy import Cost
from jobsmith.agent.runtime.submission.request.jobs import AssembledJob, JobRequest
from jobsmith.errors import JobsmithError
from jobsmith.site_config import SiteConfig

#: an earlier start counts only if it is at least this much earlier (Slurm's estimates
#: move by the scheduler's cycle anyway)
_EARLIER_BY = timedelta(minutes=1)
#: accounting is searched this far back for the template's earlier runs
_HISTORY_WINDOW = timedelta(days=60)
_RESOURCE_FIELDS = ("mem_mb", "time_limit_s", "cpus_per_task")
GRES_CAVEAT = "Slurm's start estimates for GPU jobs are unreliable on 22.05"
#: the most the advice waits for Slurm, all its questions together (they are asked at
#: once); what has not answered by then is not offered and the job goes as asked
DEADLINE_S = 2.0


class PartitionEstimate(BaseModel):
    """What `sbatch --test-only` said about the job in one partition."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    partition: str = Field(description="the partition asked about")
    accepted: bool = Field(description="true if Slurm would accept the job there")
    estimated_start: datetime | None = Field(None, description="Slurm's start estimate")
    reliable: bool = Field(True, description="false where the estimate is known to be poor")
    message: str = Field(description="Slurm's own words, or why it was not asked")


class SubmitAdvice(BaseModel):
    """What jobsmith offers before a submission (and what of it was applied)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    sizing: SizingProposal | None = Field(None, description="a smaller request, if any")
    requested_cost: Cost | None = Field(None, description="the request's cost as asked")
    proposed_cost: Cost | None = Field(None, description="its cost with the proposal")
    requested_start: datetime | None = Field(None, description="estimated start as asked")
    proposed_start: datetime | None = Field(
        None, description="estimated start with the proposal, same partition"
    )
    partition: str | None = Field(None, description="the partition the request names")
    partitions: tuple[PartitionEstimate, ...] = Field(
        (), description="the estimate in each partition the job fits (asked only if several)"
    )
    earliest: str | None = Field(
        None, description="a partition where it would start at least a minute earlier"
    )
    caveats: tuple[str, ...] = Field((), description="what the estimates cannot promise")
    applied: tuple[str, ...] = Field(
        (), description="what was taken: 'right_size' and/or 'earliest'"
    )
    unavailable: str | None = Field(None, description="why no advice could be given")

    def apply_to(self, request: JobRequest, *, right_size: bool, earliest: bool) -> JobRequest:
        """request with what is taken of the advice; `applied` says what."""
        update: dict[str, object] = {}
        if right_size and self.sizing is not None:
            update.update(self.sizing.proposed())
        if earliest and self.earliest is not None:
            update["partition"] = self.earliest
        return request.model_copy(update=update)

    def taken(self, *, right_size: bool, earliest: bool) -> SubmitAdvice:
        """This advice, marked with what apply_to took."""
        applied = (("right_size",) if right_size and self.sizing else ()) + (
            ("earliest",) if earliest and self.earliest else ()
        )
        return self.model_copy(update={"applied": applied})

    def offers(self) -> bool:
        """True if there is anything to offer."""
        return self.sizing is not None or self.earliest is not None


class Adviser:
    """Builds SubmitAdvice for one request: history through the ledger and one status
    call, estimates through `sbatch --test-only`.

    `assemble` renders a request exactly as submission would (raising for a partition the
    job does not fit); `records` lists what jobsmith submitted, oldest first; `newest`,
    if given, the template's newest records (newest first, at most n: the ledger's index)
    and is used instead of `records`. Slurm's questions (each partition's estimate, the
    history) are asked at once, and the whole waits at most `deadline_s`: what has not
    answered by then is not offered. `estimates`, if given, keeps Slurm's estimates for
    a minute (estimates.py); `user` is whose they are.
    """

    def __init__(
        self,
        *,
        scheduler: Scheduler,
        site: SiteConfig,
        assemble: Callable[[JobRequest], AssembledJob],
        records: Callable[[], list[SubmissionRecord]],
        fixed_fields: Callable[[str], set[str]],
        now: Callable[[], datetime] = datetime.now,
        newest: Callable[[str, int], list[SubmissionRecord]] | None = None,
        deadline_s: float = DEADLINE_S,
        estimates: EstimateCache | None = None,
        user: str = "",
    ) -> None:
        self._scheduler = scheduler
        self._site = site
        self._assemble = assemble
        self._records = records
        self._newest = newest
        self._fixed = fixed_fields
        self._now = now
        self._deadline_s = deadline_s
        self._cache = estimates
        self._user = user

    def advise(self, request: JobRequest) -> SubmitAdvice:
        """The advice for request (never raises a Slurm error: `unavailable` says it)."""
        settings = self._site.policy.advice
        try:
            job = self._assemble(request)
        except JobsmithError:
            # the submission itself reports what is wrong with the request, in its words
            return SubmitAdvice(partition=request.partition)
        deadline = time.monotonic() + self._deadline_s
        asking = _Asking()
        # the history's accounting call is the slowest question (about 0.1 s): asked
        # first, it is answered while the job is assembled for each partition it could
        # go to (a template render each), then the estimates are asked (issue 26)
        earlier = self._earlier(request) if settings.right_size != "off" else []
        if earlier:
            asking.ask("history", functools.partial(self._statuses, earlier))
        fits = self._fits(request, job) if settings.earliest_start != "off" else []
        for name, candidate in fits:
            asking.ask(f"estimate {name}", functools.partial(self._estimate, name, candidate))
        answers = asking.by(deadline)
        chosen = job.options.partition
        try:
            estimates = self._estimates_of(fits, answers)
            statuses = _answer(answers, "history") if earlier else None
        except JobsmithError as exc:
            return SubmitAdvice(partition=chosen, unavailable=str(exc))
        if asking.asked and not answers:
            late = f"Slurm did not answer within {self._deadline_s:g} s"
            return SubmitAdvice(partition=chosen, unavailable=late)
        sizing = self._sizing(request, job, earlier, statuses) if statuses is not None else None
        mine = next((e for e in estimates if e.partition == chosen), None)
        requested_start = mine.estimated_start if mine else None
        advice = SubmitAdvice(
            sizing=sizing,
            requested_cost=Cost.of(job.options) if sizing else None,
            partition=chosen,
            partitions=estimates,
            earliest=_earliest(estimates, chosen),
            caveats=_caveats(estimates),
        )
        if sizing is None:
            return advice
        try:
            return self._with_proposal(advice, request, job, requested_start, deadline)
        except JobsmithError as exc:
            return SubmitAdvice(partition=chosen, unavailable=str(exc))

    def _with_proposal(
        self,
        advice: SubmitAdvice,
        request: JobRequest,
        job: AssembledJob,
        requested_start: datetime | None,
        deadline: float,
    ) -> SubmitAdvice:
        """The proposal's cost and start (and the request's start, if not yet asked),
        both asked at once within what is left of the deadline (late: no start)."""
        assert advice.sizing is not None
        smaller = self._assemble(advice.apply_to(request, right_size=True, earliest=False))
        asks: dict[str, Callable[[], object]] = {
            "proposed": functools.partial(self._estimate, smaller.options.partition or "", smaller)
        }
        if requested_start is None:
            asks["requested"] = functools.partial(self._estimate, job.options.partition or "", job)
        answers = _at_once(asks, deadline)
        proposed = _answer(answers, "proposed")
        if requested_start is None:
            requested = _answer(answers, "requested")
            requested_start = requested.estimated_start if requested else None
        return advice.model_copy(
            update={
                "proposed_cost": Cost.of(smaller.options),
                "requested_start": requested_start,
                "proposed_start": proposed.estimated_start if proposed else None,
            }
        )

    # --- the earliest start -----------------------------------------------------------

    def _fits(self, request: JobRequest, job: AssembledJob) -> list[tuple[str, AssembledJob]]:
        """The partitions the job fits, each with the job as it would go there (none
        unless it fits several: nothing to compare)."""
        fits: list[tuple[str, AssembledJob]] = []
        for name in self._candidates(job):
            try:
                fits.append((name, self._assemble(request.model_copy(update={"partition": name}))))
            except JobsmithError:
                continue  # over that partition's limits: not a choice
        return fits if len(fits) >= 2 else []

    def _estimates_of(
        self, fits: list[tuple[str, AssembledJob]], answers: Mapping[str, object]
    ) -> tuple[PartitionEstimate, ...]:
        """Every partition's estimate, or none if any came too late (a comparison with
        one partition missing could offer the wrong one)."""
        found = [_answer(answers, f"estimate {name}") for name, _ in fits]
        if any(e is None for e in found):
            return ()
        return tuple(e for e in found if isinstance(e, PartitionEstimate))

    def _candidates(self, job: AssembledJob) -> list[str]:
        """The site's partitions; a job without GPUs is not offered a GPU partition
        where the site has partitions without (sites keep those for GPU work), and none
        is offered that the site marks `offered: false` (preemptible, high priority)."""
        asked = self._site.partitions
        parts = {n: p for n, p in asked.items() if p.offered or n == job.options.partition}
        without = {n for n, p in parts.items() if p.max_gpus_per_node == 0}
        if job.options.gpus or not without:
            return list(parts)
        return [n for n in parts if n in without or n == job.options.partition]

    def _estimate(self, partition: str, job: AssembledJob) -> PartitionEstimate:
        key = shape_key(self._user, job.options) if self._cache is not None else ""
        verdict = self._cache.get(key) if self._cache is not None else None
        if verdict is None:
            verdict = self._scheduler.test_only(job.script)
            if self._cache is not None:
                self._cache.put(key, verdict)
        return PartitionEstimate(
            partition=partition,
            accepted=verdict.ok,
            estimated_start=verdict.estimated_start,
            reliable=verdict.estimate_reliable,
            message=verdict.message,
        )

    # --- right-sizing -----------------------------------------------------------------

    def _earlier(self, request: JobRequest) -> list[SubmissionRecord]:
        """The template's newest runs jobsmith submitted, newest first (the ledger only)."""
        limit = self._site.policy.advice.history_jobs
        if self._newest is not None:
            return self._newest(request.template, limit)
        earlier = [r for r in reversed(self._records()) if r.template == request.template]
        return earlier[:limit]

    def _statuses(self, earlier: list[SubmissionRecord]) -> dict[str, JobStatus]:
        """What the runs used: one narrow accounting call."""
        since = min(r.submitted_at for r in earlier)
        since = max(since, self._now() - _HISTORY_WINDOW)
        return self._scheduler.usage([r.job_id for r in earlier], since)

    def _sizing(
        self,
        request: JobRequest,
        job: AssembledJob,
        earlier: list[SubmissionRecord],
        statuses: Mapping[str, JobStatus],
    ) -> SizingProposal | None:
        """A proposal from the template's recent completed runs."""
        settings = self._site.policy.advice
        alike = [r for r in earlier if r.params == request.params]
        for basis, chosen in (("same template and parameters", alike), ("same template", earlier)):
            runs = samples([_runs(statuses.get(r.job_id)) for r in chosen])
            if len(runs) >= settings.min_runs:
                usage = usage_of(runs, basis, [r.job_id for r in chosen])
                requested = {f: getattr(job.options, f) for f in _RESOURCE_FIELDS}
                return propose(usage, requested, self._fixed(request.template))
        return None


def _at_once(asks: Mapping[str, Callable[[], object]], deadline: float) -> dict[str, object]:
    """Each ask run in its own thread, all at once; the answers (or the exception each
    raised) of those that finished by deadline (time.monotonic)."""
    asking = _Asking()
    for name, ask in asks.items():
        asking.ask(name, ask)
    return asking.by(deadline)


class _Asking:
    """Questions to Slurm, each run in its own thread from when it is asked, and their
    answers (or the exception each raised) as far as they came by a deadline. The
    threads are daemons: one still waiting on Slurm never holds the process up at its
    exit."""

    def __init__(self) -> None:
        self.asked = 0
        self._answers: dict[str, object] = {}
        self._done = threading.Condition()

    def ask(self, name: str, ask: Callable[[], object]) -> None:
        """Ask now, in a thread of its own."""
        self.asked += 1
        threading.Thread(
            target=self._run, args=(name, ask), daemon=True, name=f"advice {name}"
        ).start()

    def _run(self, name: str, ask: Callable[[], object]) -> None:
        try:
            answer: object = ask()
        except Exception as exc:  # handed to the caller, which decides
            answer = _Raised(exc)
        with self._done:
            self._answers[name] = answer
            self._done.notify_all()

    def by(self, deadline: float) -> dict[str, object]:
        """The answers that came by deadline (time.monotonic), waiting for the rest
        until then."""
        with self._done:
            while len(self._answers) < self.asked:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._done.wait(left)
            return dict(self._answers)


class _Raised:
    """An exception an ask raised, kept to be raised again where its answer is read."""

    def __init__(self, exc: Exception) -> None:
        self.exc = exc


def _answer(answers: Mapping[str, object], name: str) -> Any:
    """The answer named name (None if it came too late); what it raised, raised here."""
    answer = answers.get(name)
    if isinstance(answer, _Raised):
        raise answer.exc
    return answer


def _runs(status: JobStatus | None) -> Sequence[JobRecord]:
    """A job's runs: its array tasks, or its own record."""
    if status is None:
        return ()
    if status.tasks:
        return status.tasks
    return (status.record,) if status.record is not None else ()


def _earliest(estimates: Sequence[PartitionEstimate], chosen: str | None) -> str | None:
    """The partition with the earliest reliable start, if clearly before chosen's."""
    usable = [e for e in estimates if e.accepted and e.reliable and e.estimated_start]
    mine = next((e for e in usable if e.partition == chosen), None)
    if not usable or mine is None or mine.estimated_start is None:
        return None
    best = min(usable, key=lambda e: e.estimated_start or datetime.max)
    if best.estimated_start is None or best.estimated_start + _EARLIER_BY > mine.estimated_start:
        return None
    return best.partition


def _caveats(estimates: Sequence[PartitionEstimate]) -> tuple[str, ...]:
    caveats = []
    if estimates:
        caveats.append(
            "estimates are Slurm's (sbatch --test-only) for the queue as it is now: "
            "jobs submitted or ending early change them"
        )
    if any(not e.reliable for e in estimates):
        caveats.append(GRES_CAVEAT)
    return tuple(caveats)

"""Advice at submission: a right-sized request from the user's history, and the
partition where Slurm would start the job earliest.

Both are offers. The user takes them (`submit --right-size`, `--earliest`) or the site's
policy does (`policy.advice: apply`); otherwise the job goes as asked and the advice is
shown beside it, in text and in `--json`. Asking costs one batched accounting call for
the history (none when jobsmith never ran the template) and one `sbatch --test-only`
per partition the job could run in, only here, at submission. Advice never stops a
submission: if Slurm cannot answer, the advice says so and the job goes as asked.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timedelta

from pydantic import BaseModel, ConfigDict, Field

from jobsmith.adapters.records import JobRecord
from jobsmith.adapters.scheduler import JobStatus, Scheduler
from jobsmith.agent.runtime.session.ledger import SubmissionRecord
from jobsmith.agent.runtime.submission.jobs import AssembledJob, JobRequest
from jobsmith.agent.runtime.submission.policy import Cost
from jobsmith.agent.runtime.submission.sizing import SizingProposal, propose, samples, usage_of
from jobsmith.errors import JobsmithError
from jobsmith.site_config import SiteConfig

#: an earlier start counts only if it is at least this much earlier (Slurm's estimates
#: move by the scheduler's cycle anyway)
_EARLIER_BY = timedelta(minutes=1)
#: accounting is searched this far back for the template's earlier runs
_HISTORY_WINDOW = timedelta(days=60)
_RESOURCE_FIELDS = ("mem_mb", "time_limit_s", "cpus_per_task")
GRES_CAVEAT = "Slurm's start estimates for GPU jobs are unreliable on 22.05"


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
    job does not fit); `records` lists what jobsmith submitted, oldest first.
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
    ) -> None:
        self._scheduler = scheduler
        self._site = site
        self._assemble = assemble
        self._records = records
        self._fixed = fixed_fields
        self._now = now

    def advise(self, request: JobRequest) -> SubmitAdvice:
        """The advice for request (never raises a Slurm error: `unavailable` says it)."""
        settings = self._site.policy.advice
        try:
            job = self._assemble(request)
        except JobsmithError:
            # the submission itself reports what is wrong with the request, in its words
            return SubmitAdvice(partition=request.partition)
        try:
            estimates = self._estimates(request, job) if settings.earliest_start != "off" else ()
            sizing = self._sizing(request, job) if settings.right_size != "off" else None
        except JobsmithError as exc:
            return SubmitAdvice(partition=job.options.partition, unavailable=str(exc))
        chosen = job.options.partition
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
        return self._with_proposal(advice, request, job, requested_start)

    def _with_proposal(
        self,
        advice: SubmitAdvice,
        request: JobRequest,
        job: AssembledJob,
        requested_start: datetime | None,
    ) -> SubmitAdvice:
        """The proposal's cost and start (and the request's start, if not yet asked)."""
        assert advice.sizing is not None
        smaller = self._assemble(advice.apply_to(request, right_size=True, earliest=False))
        if requested_start is None:
            requested_start = self._estimate(job.options.partition or "", job).estimated_start
        proposed = self._estimate(smaller.options.partition or "", smaller)
        return advice.model_copy(
            update={
                "proposed_cost": Cost.of(smaller.options),
                "requested_start": requested_start,
                "proposed_start": proposed.estimated_start,
            }
        )

    # --- the earliest start -----------------------------------------------------------

    def _estimates(self, request: JobRequest, job: AssembledJob) -> tuple[PartitionEstimate, ...]:
        """An estimate per partition the job fits, if it fits several (else none)."""
        fits: list[tuple[str, AssembledJob]] = []
        for name in self._candidates(job):
            try:
                fits.append((name, self._assemble(request.model_copy(update={"partition": name}))))
            except JobsmithError:
                continue  # over that partition's limits: not a choice
        if len(fits) < 2:
            return ()
        return tuple(self._estimate(name, candidate) for name, candidate in fits)

    def _candidates(self, job: AssembledJob) -> list[str]:
        """The site's partitions; a job without GPUs is not offered a GPU partition
        where the site has partitions without (sites keep those for GPU work)."""
        parts = self._site.partitions
        without = {n for n, p in parts.items() if p.max_gpus_per_node == 0}
        if job.options.gpus or not without:
            return list(parts)
        return [n for n in parts if n in without or n == job.options.partition]

    def _estimate(self, partition: str, job: AssembledJob) -> PartitionEstimate:
        verdict = self._scheduler.test_only(job.script)
        return PartitionEstimate(
            partition=partition,
            accepted=verdict.ok,
            estimated_start=verdict.estimated_start,
            reliable=verdict.estimate_reliable,
            message=verdict.message,
        )

    # --- right-sizing -----------------------------------------------------------------

    def _sizing(self, request: JobRequest, job: AssembledJob) -> SizingProposal | None:
        """A proposal from the template's recent completed runs (one status call)."""
        settings = self._site.policy.advice
        earlier = [r for r in reversed(self._records()) if r.template == request.template]
        earlier = earlier[: settings.history_jobs]
        if not earlier:
            return None
        since = min(r.submitted_at for r in earlier)
        since = max(since, self._now() - _HISTORY_WINDOW)
        statuses = self._scheduler.status([r.job_id for r in earlier], since)
        alike = [r for r in earlier if r.params == request.params]
        for basis, chosen in (("same template and parameters", alike), ("same template", earlier)):
            runs = samples([_runs(statuses.get(r.job_id)) for r in chosen])
            if len(runs) >= settings.min_runs:
                usage = usage_of(runs, basis, [r.job_id for r in chosen])
                requested = {f: getattr(job.options, f) for f in _RESOURCE_FIELDS}
                return propose(usage, requested, self._fixed(request.template))
        return None


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

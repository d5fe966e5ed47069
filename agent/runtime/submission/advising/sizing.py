"""Right-sizing from the user's own history: what similar finished jobs used, against
what this request asks for.

Users over-ask (64 GB for a job that peaks at 6) and wait longer for it. The rule here
is deliberately plain, so a person can check it by hand: take the runs that completed
(a failed run's peak says nothing about what success needs), their 95th percentile of
peak memory, wall time and busy cores, add headroom, round to sizes people type, and
propose only where the request is far above that. Pure: the records come from one
batched accounting call made by the caller (agent/runtime/submission/advising/advice.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Sequence
from statistics import median
from typing import NamedTuple

from pydantic import BaseModel, ConfigDict, Field

from jobsmith.adapters.records import JobRecord
from jobsmith.adapters.states import JobState

#: memory headroom over the 95th percentile of peaks: x1.25, at least 256 MiB more
_MEM_FACTOR, _MEM_MIN_EXTRA_MB, _MEM_STEP_MB = 1.25, 256, 256
#: wall-time headroom over the 95th percentile: x1.5, at least 5 minutes more
_TIME_FACTOR, _TIME_MIN_EXTRA_S, _TIME_STEP_S = 1.5, 300, 300
#: "far above": at least this factor, and at least this much, over the proposal
_FAR_FACTOR, _FAR_MEM_MB, _FAR_TIME_S = 1.5, 512, 600
#: a run this short says nothing about how many cores the work keeps busy
_CPU_MIN_ELAPSED_S = 10


class Usage(BaseModel):
    """What the sampled runs used (95th percentiles, so one outlier does not decide)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    runs: int = Field(description="completed runs (array tasks count one each) sampled")
    basis: str = Field(description="'same template and parameters' or 'same template'")
    job_ids: tuple[str, ...] = Field(description="the jobs the runs belong to, newest first")
    peak_mem_mb_p95: int | None = Field(None, description="95th percentile of MaxRSS, MiB")
    elapsed_s_p95: int | None = Field(None, description="95th percentile of wall time, s")
    busy_cpus_p95: float | None = Field(
        None, description="95th percentile of TotalCPU / elapsed: cores kept busy"
    )
    cpu_efficiency_median: float | None = Field(
        None, description="median of TotalCPU / (elapsed x allocated CPUs), 0 to 1"
    )


class Resize(BaseModel):
    """One resource the proposal changes."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    field: str = Field(description="mem_mb, time_limit_s or cpus_per_task")
    requested: int = Field(description="what the request asks for")
    proposed: int = Field(description="what similar runs suggest")
    option: str = Field(description="the submit option that asks for it, e.g. '--mem 2G'")


class SizingProposal(BaseModel):
    """A smaller request, and why: never applied unless the user or the policy says so."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    usage: Usage = Field(description="what the sampled runs used")
    changes: tuple[Resize, ...] = Field(description="each resource to shrink")

    def proposed(self) -> dict[str, int]:
        """The JobRequest fields to change: {'mem_mb': 2048, ...}."""
        return {c.field: c.proposed for c in self.changes}

    def options(self) -> str:
        """The submit options that take the proposal, as typed."""
        return " ".join(c.option for c in self.changes)


def samples(statuses: Sequence[Sequence[JobRecord]]) -> list[JobRecord]:
    """The completed runs among each job's records (its tasks, or itself), in order."""
    return [r for records in statuses for r in records if r.state is JobState.COMPLETED]


def usage_of(runs: Sequence[JobRecord], basis: str, job_ids: Sequence[str]) -> Usage:
    """The 95th percentiles (and median CPU efficiency) of what runs used."""
    peaks = [r.max_rss_bytes / 2**20 for r in runs if r.max_rss_bytes]
    elapsed = [float(r.elapsed_s) for r in runs if r.elapsed_s is not None]
    timed = [r for r in runs if (r.elapsed_s or 0) >= _CPU_MIN_ELAPSED_S and r.total_cpu_s]
    busy = [(r.total_cpu_s or 0) / (r.elapsed_s or 1) for r in timed]
    efficiency = [b / r.alloc_cpus for b, r in zip(busy, timed, strict=True) if r.alloc_cpus]
    return Usage(
        runs=len(runs),
        basis=basis,
        job_ids=tuple(job_ids),
        peak_mem_mb_p95=math.ceil(p95(peaks)) if peaks else None,
        elapsed_s_p95=math.ceil(p95(elapsed)) if elapsed else None,
        busy_cpus_p95=round(p95(busy), 2) if busy else None,
        cpu_efficiency_median=round(median(efficiency), 3) if efficiency else None,
    )


def propose(
    usage: Usage, requested: dict[str, int | None], fixed: Collection[str] = ()
) -> SizingProposal | None:
    """A proposal for each resource requested far above what usage suggests (None: none).

    `requested` maps mem_mb, time_limit_s and cpus_per_task to what the request asks for;
    `fixed` names fields the user cannot change through options (a template that takes
    its CPUs from a parameter), which are never proposed.
    """
    candidates = (
        _memory(usage, requested.get("mem_mb")),
        _time(usage, requested.get("time_limit_s")),
        _cpus(usage, requested.get("cpus_per_task")),
    )
    changes = tuple(c for c in candidates if c is not None and c.field not in fixed)
    return SizingProposal(usage=usage, changes=changes) if changes else None


def p95(values: Sequence[float]) -> float:
    """The 95th percentile by the nearest-rank method (an observed value, never beyond)."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]


def _memory(usage: Usage, requested: int | None) -> Resize | None:
    from jobsmith.units import format_memory

    rule = _Rule(_MEM_FACTOR, _MEM_MIN_EXTRA_MB, _MEM_STEP_MB, _FAR_MEM_MB)
    return _shrink("mem_mb", usage.peak_mem_mb_p95, requested, rule, "--mem", format_memory)


def _time(usage: Usage, requested: int | None) -> Resize | None:
    from jobsmith.units import format_duration

    rule = _Rule(_TIME_FACTOR, _TIME_MIN_EXTRA_S, _TIME_STEP_S, _FAR_TIME_S)
    return _shrink("time_limit_s", usage.elapsed_s_p95, requested, rule, "--time", format_duration)


class _Rule(NamedTuple):
    factor: float  # headroom over what runs used ...
    min_extra: int  # ... and at least this much more
    step: int  # rounded up to a multiple of this
    far_by: int  # proposed only if the request is at least this much above


def _shrink(
    field: str,
    used: int | None,
    requested: int | None,
    rule: _Rule,
    option: str,
    shown: Callable[[int], str],
) -> Resize | None:
    """The proposal for one resource: used plus headroom, if requested is far above it."""
    if used is None or requested is None:
        return None
    proposed = _round_up(max(used * rule.factor, used + rule.min_extra), rule.step)
    if not _far_above(requested, proposed, rule.far_by):
        return None
    return Resize(
        field=field, requested=requested, proposed=proposed, option=f"{option} {shown(proposed)}"
    )


def _cpus(usage: Usage, requested: int | None) -> Resize | None:
    busy = usage.busy_cpus_p95
    if busy is None or requested is None or requested <= 1:
        return None
    proposed = max(1, math.ceil(busy * _MEM_FACTOR))
    if proposed * _FAR_FACTOR > requested:
        return None
    return Resize(
        field="cpus_per_task",
        requested=requested,
        proposed=proposed,
        option=f"--cpus-per-task {proposed}",
    )


def _far_above(requested: int, proposed: int, by_at_least: int) -> bool:
    return requested >= proposed * _FAR_FACTOR and requested - proposed >= by_at_least


def _round_up(value: float, step: int) -> int:
    return max(step, math.ceil(value / step) * step)

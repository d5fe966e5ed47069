"""Diagnosing a job by id: one status query, its failed tasks, their stderr, the verdicts.

A stderr that cannot be read (never written, unreadable, a directory, a path Slurm gave
that names no file) does not stop a diagnosis: the verdict comes from accounting alone
and says why in its notes. The watcher relies on this to go on past one job's bad log.

On a cluster without accounting the record is the controller's: no MaxRSS, CPU time or
steps, so no efficiency, and nothing at all once the controller has forgotten the job.
The diagnosis says so in its notes rather than guessing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Protocol

from jobsmith.adapters.records import JobRecord
from jobsmith.adapters.scheduler import Scheduler
from jobsmith.agent.diagnosis.table import Diagnosis, diagnose
from jobsmith.errors import ConfigError, JobNotFound, JobsmithError
from jobsmith.site_config import SiteConfig

if TYPE_CHECKING:
    from jobsmith.site_config import LoadedSite

#: reads the end of a job's stderr; raises (JobsmithError, OSError …) when it cannot
StderrTail = Callable[[str], Sequence[str]]


class SiteSource(Protocol):
    """Where the site config comes from (loaded on first use; ConfigError without one)."""

    @property
    def site(self) -> LoadedSite: ...


def site_if_any(parts: SiteSource) -> SiteConfig | None:
    """The site config, or None without one: a diagnosis needs no site; only the
    remedy's caps come from it."""
    try:
        return parts.site.config
    except ConfigError:
        return None


def diagnose_job(
    scheduler: Scheduler,
    site: SiteConfig | None,
    stderr_tail: StderrTail,
    job_id: str,
) -> list[Diagnosis]:
    """A diagnosis for the job, or for each failed task of an array (every task if none
    failed), from accounting, the controller's reason and the end of each stderr file."""
    status = scheduler.status([job_id], datetime.now() - timedelta(days=30))[job_id]
    accounting = scheduler.has_accounting()
    if status.record is None and not status.tasks:
        if not accounting:
            raise JobNotFound(
                f"job {job_id}: the controller no longer holds it and this cluster keeps no "
                "accounting, so how it ended cannot be diagnosed; read its output files"
            )
        raise JobNotFound(f"job {job_id}: neither the controller nor accounting knows it")
    records = [t for t in status.tasks if t.state.is_failure] or list(status.tasks)
    if status.record is not None:
        records = [status.record]
    extra = () if accounting else (NO_ACCOUNTING_NOTE,)
    return [diagnose_record(rec, site, stderr_tail, status.reason, extra) for rec in records]


#: what a diagnosis on a cluster without accounting cannot say, in its notes
NO_ACCOUNTING_NOTE = (
    "this cluster keeps no accounting: the verdict rests on the controller's state, exit "
    "code and stderr; memory peak (MaxRSS), CPU efficiency and steps are unknown"
)


def diagnose_record(
    rec: JobRecord,
    site: SiteConfig | None,
    stderr_tail: StderrTail,
    reason: str | None,
    extra_notes: tuple[str, ...] = (),
) -> Diagnosis:
    """One job's or task's diagnosis, capped by its partition's limits where site has them."""
    part = site.partitions.get(rec.partition or "") if site else None
    lines, notes = _stderr(stderr_tail, rec.job_id)
    return diagnose(
        rec,
        lines,
        reason=reason,
        partition_max_mem_mb=part.max_mem_per_node if part else None,
        partition_max_time_s=part.max_time if part else None,
        notes=(*notes, *extra_notes),
    )


def _stderr(stderr_tail: StderrTail, job_id: str) -> tuple[Sequence[str], tuple[str, ...]]:
    """(the stderr tail, ()) or, when it cannot be read, ([], (why,)).

    OSError and UnicodeError are caught too: the reader runs a command through whatever
    transport the site has (one may fail to start `tail`, another decode strictly), and
    no log is worth losing the verdict accounting alone can give.
    """
    try:
        return stderr_tail(job_id), ()
    except (JobsmithError, OSError, UnicodeError) as err:
        return [], (f"stderr not read: {err}",)

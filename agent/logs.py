"""Finding and reading a job's stdout/stderr where Slurm wrote it.

Paths come from jobsmith's own submission record (the -o/-e pattern, expanded for the
job or task) or, for jobs submitted by other means, from the controller while it still
holds the job: 22.05's accounting has no stdout path.
"""

from __future__ import annotations

import getpass
from datetime import timedelta
from typing import TYPE_CHECKING, Protocol

from jobsmith.adapters.slurm.logpaths import expand_log_pattern
from jobsmith.agent.results import LogView
from jobsmith.errors import JobNotFound, SchedulerError

if TYPE_CHECKING:
    from jobsmith.adapters.slurm.scheduler import SlurmScheduler
    from jobsmith.adapters.slurm.transport import Transport
    from jobsmith.agent.ledger import JobLedger, SubmissionRecord


class LogSources(Protocol):
    """Where log paths and contents come from."""

    @property
    def ledger(self) -> JobLedger:
        """jobsmith's submission records."""
        ...

    @property
    def scheduler(self) -> SlurmScheduler:
        """Slurm, for jobs jobsmith did not record."""
        ...

    @property
    def transport(self) -> Transport:
        """Where the files are read."""
        ...


def read_log(parts: LogSources, job_id: str, stream: str, tail_lines: int) -> LogView:
    """The last tail_lines lines (0: all) of the job's stdout or stderr."""
    path = _log_path(parts, job_id, stream)
    command = ["tail", "-n", str(tail_lines + 1), "--", path] if tail_lines else ["cat", "--", path]
    res = parts.transport.run(command, timeout=30)
    if res.returncode != 0:
        raise SchedulerError(
            f"job {job_id}: cannot read its {stream} file {path}: "
            f"{res.stderr.strip() or 'unreadable'} (has the job started?)"
        )
    lines = res.stdout.splitlines()
    truncated = bool(tail_lines) and len(lines) > tail_lines
    return LogView(
        job_id=job_id,
        stream=stream,
        path=path,
        lines=lines[-tail_lines:] if truncated else lines,
        truncated=truncated,
    )


def _log_path(app: LogSources, job_id: str, stream: str) -> str:
    record = app.ledger.get(job_id)
    if record is None:
        out, err = app.scheduler.output_paths(job_id)
        path = err if stream == "stderr" else out
        if not path:
            raise JobNotFound(f"job {job_id}: Slurm reports no {stream} path for it")
        return path
    pattern = record.options.output if stream == "stdout" else record.options.error
    pattern = pattern or record.options.output
    if pattern is None:
        pattern = "slurm-%A_%a.out" if record.options.array else "slurm-%j.out"
    return _expand(app, job_id, record, pattern)


def _expand(app: LogSources, job_id: str, record: SubmissionRecord, pattern: str) -> str:
    """Expand the pattern; %j of an array task needs the task's own id from accounting."""
    array_id, _, task = job_id.partition("_")
    raw = job_id
    if task and "%j" in pattern:
        since = record.submitted_at - timedelta(minutes=5)
        recs = app.scheduler.accounting([job_id], since)
        raw = next((r.job_id_raw for r in recs if r.job_id == job_id), job_id)
    path = expand_log_pattern(
        pattern,
        job_id_raw=raw,
        array_job_id=array_id if task else None,
        array_task_id=int(task) if task.isdigit() else None,
        job_name=record.options.job_name,
        user=getpass.getuser(),
    )
    chdir = record.options.chdir
    if not path.startswith("/") and chdir:
        path = f"{chdir.rstrip('/')}/{path}"
    return path

"""Finding and reading a job's stdout/stderr where Slurm wrote it.

Paths come from jobsmith's own submission record (the -o/-e pattern, expanded for the
job or task) or, for jobs submitted by other means, from the controller while it still
holds the job: 22.05's accounting has no stdout path.

The files are read through the transport (`cat`, `tail`), so they are decoded where every
other byte from the cluster is, in transport.decode: a job's output can be any bytes (a
binary written to stderr), and it reads as text with U+FFFD for what is not UTF-8. A file
that cannot be read at all (missing, unreadable, a directory) is a SchedulerError naming
it; callers that must go on (diagnosis, the watcher) turn that into a note on the job.
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


def read_log(
    parts: LogSources, job_id: str, stream: str, tail_lines: int, max_bytes: int | None = None
) -> LogView:
    """The last tail_lines lines (0: all) of the job's stdout or stderr.

    max_bytes (with tail_lines) reads at most that much from the end of the file, for
    callers that must not take in a log of any size: `tail -n` of a job that wrote
    gigabytes without a newline returns all of them.
    """
    path = _log_path(parts, job_id, stream)
    res = parts.transport.run(_read_command(path, tail_lines, max_bytes), timeout=30)
    if res.returncode != 0:
        why = res.stderr.strip() or "unreadable"
        hint = " (has the job started?)" if "No such file" in why else ""
        raise SchedulerError(f"job {job_id}: cannot read its {stream} file {path}: {why}{hint}")
    lines = res.stdout.splitlines()
    # at the byte bound the first line may be a fragment; bytes replaced by U+FFFD make
    # the text's length an estimate, so this errs towards saying "truncated"
    cut = max_bytes is not None and len(res.stdout.encode()) >= max_bytes
    truncated = bool(tail_lines) and (len(lines) > tail_lines or cut)
    return LogView(
        job_id=job_id,
        stream=stream,
        path=path,
        lines=lines[-tail_lines:] if truncated else lines,
        truncated=truncated,
    )


def _read_command(path: str, tail_lines: int, max_bytes: int | None) -> list[str]:
    if not tail_lines:
        return ["cat", "--", path]
    if max_bytes is not None:
        return ["tail", "-c", str(max_bytes), "--", path]
    return ["tail", "-n", str(tail_lines + 1), "--", path]


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

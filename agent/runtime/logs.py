"""Finding and reading a job's stdout/stderr where Slurm wrote it.

Paths come from jobsmith's own submission record (the -o/-e pattern, expanded for the
job or task), for a pipeline's task from its engine's records
(agent/runtime/workflows/pipelines.py),
or, for jobs submitted by other means, from the controller while it still holds the job:
22.05's accounting has no stdout path.

The files are read through the transport (`cat`, `tail`), so they are decoded where every
other byte from the cluster is, in transport.decode: a job's output can be any bytes (a
binary written to stderr), and it reads as text with U+FFFD for what is not UTF-8. A file
that cannot be read at all (missing, unreadable, a directory) is a SchedulerError naming
it; callers that must go on (diagnosis, the watcher) turn that into a note on the job.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Protocol

from jobsmith.agent.runtime.documents import LogView
from jobsmith.errors import JobNotFound, SchedulerError

if TYPE_CHECKING:
    from jobsmith.adapters.scheduler import Scheduler
    from jobsmith.adapters.transport import Transport
    from jobsmith.agent.runtime.session.ledger import JobLedger
    from jobsmith.agent.runtime.workflows.pipelinerun import Pipelines


class LogSources(Protocol):
    """Where log paths and contents come from."""

    @property
    def ledger(self) -> JobLedger:
        """jobsmith's submission records."""
        ...

    @property
    def scheduler(self) -> Scheduler:
        """Slurm, for jobs jobsmith did not record."""
        ...

    @property
    def transport(self) -> Transport:
        """Where the files are read."""
        ...

    @property
    def pipelines(self) -> Pipelines:
        """The pipelines: a task's log, as its engine's records named it."""
        ...


def read_log(
    parts: LogSources, job_id: str, stream: str, tail_lines: int, max_bytes: int | None = None
) -> LogView:
    """The last tail_lines lines (0: all) of the job's stdout or stderr.

    max_bytes (with tail_lines) reads at most that much from the end of the file, for
    callers that must not take in a log of any size: `tail -n` of a job that wrote
    gigabytes without a newline returns all of them.
    """
    path = log_path(parts, job_id, stream)
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


def read_output(parts: LogSources, job_id: str, stream: str, tail: int) -> dict[str, object]:
    """read_log as the executor's `read_output` hands it on (a tool's or a step's JSON)."""
    return read_log(parts, job_id, stream, tail).model_dump(mode="json")


def stderr_tail(parts: LogSources, job_id: str) -> list[str]:
    """The end of a job's stderr for a diagnosis, bounded in bytes however big it is.

    It raises when the file cannot be read: diagnose_record makes that a note.
    """
    return read_log(parts, job_id, "stderr", 40, max_bytes=1 << 20).lines


def _read_command(path: str, tail_lines: int, max_bytes: int | None) -> list[str]:
    if not tail_lines:
        return ["cat", "--", path]
    if max_bytes is not None:
        return ["tail", "-c", str(max_bytes), "--", path]
    return ["tail", "-n", str(tail_lines + 1), "--", path]


def log_path(app: LogSources, job_id: str, stream: str) -> str:
    """Where the job (or array task) writes stream: from jobsmith's record, a pipeline
    engine's, or the controller's for a job jobsmith did not submit."""
    record = app.ledger.get(job_id)
    if record is None and (engine_log := app.pipelines.task_log(job_id)) is not None:
        return engine_log  # a workflow engine's task: one file holds both streams
    if record is None:
        out, err = app.scheduler.output_paths(job_id)
        path = err if stream == "stderr" else out
        if not path:
            raise JobNotFound(f"job {job_id}: Slurm reports no {stream} path for it")
        return path
    since = record.submitted_at - timedelta(minutes=5)
    return app.scheduler.log_path(record.options, job_id, stream, since)

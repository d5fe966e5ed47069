"""Reading a render's or a transcode's progress from its running tasks' output, through
the transport (agent/runtime/workflows/progress.py parses what is read).

Only running tasks are read: a finished task counts whole and a waiting one as nothing,
from the poll alone, so a job that ended costs no read at all. Every read is bounded:

- Blender's frames are counted from the file's start (a `Saved:` line per frame), in
  pages of at most pipelines.MAX_READ_BYTES each, the read pipelines follow their
  engines' records with, at most MAX_PAGES of them per task (a few KB a frame: 4 MB is
  hundreds of frames; past it the count is marked incomplete rather than read on);
- ffmpeg's newest `-progress` block is at the file's end: its last FFMPEG_TAIL_BYTES,
  with the tail read logs.stderr_tail uses.

No Slurm call is made: the paths come from the ledger's submission records. A task whose
output cannot be read (not there yet, unreadable) is a note on it, never an error of the
status that asked.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from jobsmith.adapters.records import JobRecord
from jobsmith.adapters.scheduler import JobStatus
from jobsmith.adapters.states import JobState
from jobsmith.agent.runtime.workflows import progress as pg
from jobsmith.errors import JobsmithError

if TYPE_CHECKING:
    # imported where a running task's output is read (_task, _blender): a status of jobs
    # that neither render nor transcode, the common case, reads none and needs neither
    # the log reader nor the pipelines' (which bring the submission models with them)
    from jobsmith.agent.runtime.logs import LogSources

#: pages of Blender output read per task (each at most MAX_READ_BYTES)
MAX_PAGES = 4
#: the end of ffmpeg's output read per task: a -progress block is about 250 bytes
FFMPEG_TAIL_BYTES = 4096
#: running tasks read per job and look; the rest are left for `complete: false`
MAX_TASKS_READ = 64


def read_progress(
    parts: LogSources, statuses: Mapping[str, JobStatus]
) -> dict[str, pg.WorkProgress]:
    """The progress of every polled job that renders frames or encodes chunks, by job id
    (other jobs, and jobs jobsmith did not submit, are left out)."""
    out: dict[str, pg.WorkProgress] = {}
    for job_id, status in statuses.items():
        record = parts.ledger.get(job_id)
        work = pg.work_of(record.template, record.params) if record is not None else None
        if work is None:
            continue
        running = [t for t in status.tasks if t.state is JobState.RUNNING]
        read = [_task(parts, work, t) for t in running[:MAX_TASKS_READ]]
        complete = len(running) <= MAX_TASKS_READ and all(t.note is None for t in read)
        out[job_id] = pg.work_progress(status, work, read, complete)
    return out


def _task(parts: LogSources, work: pg.Work, task: JobRecord) -> pg.TaskProgress:
    from jobsmith.agent.runtime.logs import read_log

    index = task.array_task_id if task.array_task_id is not None else -1
    said: pg.BlenderRead | pg.EncodeRead | None = None
    note = None
    try:
        if work.unit == "frames":
            said, note = _blender(parts, task.job_id)
        else:
            tail = read_log(parts, task.job_id, "stdout", 40, max_bytes=FFMPEG_TAIL_BYTES)
            said = pg.parse_ffmpeg(tail.lines)
    except JobsmithError as err:
        note = str(err)
    return pg.task_progress(task.job_id, work, index, said, note)


def _blender(parts: LogSources, task_id: str) -> tuple[pg.BlenderRead | None, str | None]:
    """A task's Blender output from its start, page by page, and a note if not all of
    it was read (what was read still counts: frames done is then a floor)."""
    from jobsmith.agent.runtime.logs import log_path
    from jobsmith.agent.runtime.workflows.pipelines import MAX_READ_BYTES, read_command

    path = log_path(parts, task_id, "stdout")
    said = pg.BlenderRead()
    offset = 0
    for _ in range(MAX_PAGES):
        res = parts.transport.run(read_command(path, offset), timeout=30)
        if res.returncode == 3:
            return said, None  # not written yet: the task has only just started
        if res.returncode != 0:
            return None, f"cannot read {path}: {res.stderr.strip() or 'unreadable'}"
        page = res.stdout
        if len(page.encode()) < MAX_READ_BYTES:
            return pg.parse_blender(page.splitlines(), said), None
        whole = page[: page.rfind("\n") + 1]  # a cut line is read again with the next page
        said = pg.parse_blender(whole.splitlines(), said)
        offset += len(whole.encode())
    megabytes = MAX_PAGES * MAX_READ_BYTES >> 20
    return said, f"{path}: only its first {megabytes} MB read: frames done is at least this"

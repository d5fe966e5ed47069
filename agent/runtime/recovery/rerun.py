"""Re-running a job jobsmith submitted: the same script, new resources, only failed tasks.

The script body is reused exactly (template parameters are not rendered again); only its
`#SBATCH` block is replaced, with a new submission tag, the memory or time a diagnosis
suggests, and, for an array, just the indices of the tasks that failed: an array task
picks its work by SLURM_ARRAY_TASK_ID, so `--array=2,5` re-runs tasks 2 and 5 alone.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence

from jobsmith.adapters.capabilities import directives_of
from jobsmith.adapters.options import TAG_PATTERN, JobOptions
from jobsmith.adapters.scheduler import JobStatus, Scheduler
from jobsmith.errors import InputError, TemplateError


def failed_task_indices(status: JobStatus) -> list[int]:
    """Indices of an array's tasks that ended in failure."""
    return sorted(
        t.array_task_id for t in status.tasks if t.array_task_id is not None and t.state.is_failure
    )


def rerun_options(
    original: JobOptions,
    *,
    tasks: Sequence[int] | None,
    mem_mb: int | None,
    time_limit_s: int | None,
) -> JobOptions:
    """The original options with a new tag, new resources and (for arrays) only `tasks`."""
    base = TAG_PATTERN.sub("", original.job_name)
    update: dict[str, object] = {
        "job_name": f"{base}.js-{secrets.token_hex(6)}",
        "dependencies": (),  # what it waited for has happened
    }
    if mem_mb is not None:
        update["mem_mb"] = mem_mb
    if time_limit_s is not None:
        update["time_limit_s"] = time_limit_s
    if tasks is not None:
        if original.array is None:
            raise InputError(f"job {original.job_name} is not an array: no tasks to choose")
        update["array"] = ",".join(str(t) for t in tasks)
    return JobOptions.model_validate({**original.model_dump(), **update})


def with_directives(script: str, options: JobOptions, scheduler: Scheduler) -> str:
    """script with every directive line of its header replaced by options' directives.

    sbatch reads directives until the first command; a later #SBATCH in the header of an
    adopted script would override ours, so all of them go, not only jobsmith's block.
    """
    lines = script.splitlines()
    if not lines or not lines[0].startswith("#!"):
        raise TemplateError("the recorded script has no shebang line; cannot re-run it")
    header_end = next(
        (i for i, line in enumerate(lines[1:], 1) if line.strip() and not line.startswith("#")),
        len(lines),
    )
    writer = directives_of(scheduler.capabilities())
    header = [line for line in lines[1:header_end] if not writer.is_header_line(line)]
    directives = writer.script_header(options)
    return "\n".join([lines[0], *directives, *header, *lines[header_end:]]) + "\n"

"""A part's script: the workload's script with the part's directives and its offset.

Every template that picks its item by `$SLURM_ARRAY_TASK_ID` (file_array, the frame
blocks of render-frames, transcode chunks, alignment samples) and every user script does
so the same way, so one line in the rendered script serves them all instead of a change
to each template: right after the directive header, the part's offset is added to
`SLURM_ARRAY_TASK_ID`, and the workload's own index is what the body reads. The body is
the workload's bytes unchanged (its hash is what the approval covered); Slurm's own
`%a` in output paths still names the part's index, the line keeps the part's in
`JOBSMITH_PART_TASK_ID`.
"""

from __future__ import annotations

import secrets

from jobsmith.adapters.options import TAG_PATTERN, JobOptions
from jobsmith.adapters.scheduler import Scheduler
from jobsmith.agent.runtime.recovery.rerun import with_directives
from jobsmith.agent.runtime.workflows.feeding.split import Part

#: the line's marker, so a part's script is recognised (and never offset twice)
OFFSET_MARK = "# jobsmith feeder:"


def part_options(workload: JobOptions, part: Part) -> JobOptions:
    """The workload's options for one part: its indices, its throttle, a tag of its own
    (resume finds a part's sbatch by it)."""
    base = TAG_PATTERN.sub("", workload.job_name)
    update = {
        "job_name": f"{base}.p{part.index}.js-{secrets.token_hex(6)}",
        "array": part.array,
        "array_throttle": part.throttle,
    }
    return JobOptions.model_validate({**workload.model_dump(), **update})


def offset_lines(part: Part, parts: int) -> list[str]:
    """The lines that make the part's tasks the workload's tasks offset..offset+count-1."""
    return [
        f"{OFFSET_MARK} part {part.index + 1} of {parts}, tasks {part.offset}-{part.last}",
        'JOBSMITH_PART_TASK_ID="${SLURM_ARRAY_TASK_ID:?must run as an array task}"',
        f"SLURM_ARRAY_TASK_ID=$((JOBSMITH_PART_TASK_ID + {part.offset}))",
        "export SLURM_ARRAY_TASK_ID JOBSMITH_PART_TASK_ID",
    ]


def part_script(
    script: str, options: JobOptions, part: Part, parts: int, scheduler: Scheduler
) -> str:
    """The workload's script with the part's directives, then its offset, then the body."""
    if OFFSET_MARK in script:
        raise ValueError("the script is already a part's script")
    lines = with_directives(script, options, scheduler).splitlines()
    body = next(
        (i for i, line in enumerate(lines[1:], 1) if line.strip() and not line.startswith("#")),
        len(lines),
    )
    return "\n".join([*lines[:body], *offset_lines(part, parts), *lines[body:]]) + "\n"

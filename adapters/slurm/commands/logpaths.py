"""Expanding Slurm's output-file patterns (%j, %A, %a, %x, %u, %%) for one job or task (pure)."""

from __future__ import annotations

import re

_TOKEN = re.compile(r"%(%|[0-9]*[jAaxuN])")


def expand_log_pattern(
    pattern: str,
    *,
    job_id_raw: str,
    array_job_id: str | None,
    array_task_id: int | None,
    job_name: str,
    user: str,
    node: str = "",
) -> str:
    """The file Slurm writes for this job or task, from the -o/-e pattern given at submission.

    Zero-padding like %4a is honoured, as sbatch does.
    """

    def sub(match: re.Match[str]) -> str:
        spec = match.group(1)
        if spec == "%":
            return "%"
        width, code = spec[:-1], spec[-1]
        value = {
            "j": job_id_raw,
            "A": array_job_id or job_id_raw,
            "a": str(array_task_id) if array_task_id is not None else "4294967294",
            "x": job_name,
            "u": user,
            "N": node,
        }[code]
        return value.zfill(int(width)) if width and value.isdigit() else value

    return _TOKEN.sub(sub, pattern)

"""The head job's Nextflow command line and environment.

`nextflow -log <log> run <pipeline> -c <config> [-work-dir …] [-profile …] [-r …]
[-params-file …] [-resume] <extra args>`. Attempt 1 runs as asked; a later attempt adds
`-resume`, which picks up the launch directory's last session (the earlier attempt's), so
the tasks that already ended are reused. Attempt 1 never resumes on its own: a launch
directory may hold an unrelated earlier run, and reusing it is the person's call (they can
pass `-resume` in the extra arguments, which is then not repeated).
"""

from __future__ import annotations

from types import MappingProxyType

from jobsmith.adapters.nextflow.files import AttemptFiles
from jobsmith.adapters.workflow import LaunchRequest

#: exported before the run. No NXF_OPTS: the JVM sizes its heap from the head job's
#: cgroup limit, and a fixed -Xmx could exceed the memory the head job was given.
ENVIRONMENT = MappingProxyType(
    {
        # plain lines in the console log instead of redrawn progress bars
        "NXF_ANSI_LOG": "false",
        # compute nodes often have no internet: the check for a newer release would stall
        "NXF_DISABLE_CHECK_LATEST": "true",
    }
)


def _option(flag: str, value: str | None) -> tuple[str, ...]:
    return (flag, value) if value else ()


def command_line(request: LaunchRequest, files: AttemptFiles) -> tuple[str, ...]:
    """The argv the head job runs in the launch directory (module docstring)."""
    if request.pipeline.startswith("-"):
        raise ValueError(f"pipeline {request.pipeline!r} would read as a Nextflow option")
    resume = files.attempt > 1 and "-resume" not in request.extra_args
    return (
        "nextflow",
        "-log",
        files.log,
        "run",
        request.pipeline,
        "-c",
        files.config,
        *_option("-work-dir", request.work_dir),
        *_option("-profile", request.profile),
        *_option("-r", request.revision),
        *_option("-params-file", request.params_file),
        *(("-resume",) if resume else ()),
        *request.extra_args,
    )

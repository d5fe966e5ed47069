"""The head job's Snakemake command line and the per-attempt console log it is copied to."""

from __future__ import annotations

from jobsmith.adapters.snakemake.profile import PROFILE_DIR
from jobsmith.adapters.workflow import LaunchRequest


def console_log(attempt: int) -> str:
    """Per attempt, so a resumed run is read from its own first byte."""
    return f".jobsmith/snakemake-{attempt}.log"


def argv(request: LaunchRequest, *, attempt: int) -> tuple[str, ...]:
    """`snakemake --profile … --snakefile …`, resuming from attempt 2 on.

    A resume needs `--rerun-incomplete` (outputs of rule jobs the lost head job never saw
    finish); the profile says so too, but the approved command line should show it.
    Values are joined to their options with `=`, so a path starting with `-` stays a path
    and `--configfile` (which takes several files) takes one. Targets come last, after
    `--`, so an option in `extra_args` taking many values (`--config a=1`) cannot swallow
    them and a target cannot be read as an option.
    """
    args = ["snakemake", f"--profile={PROFILE_DIR}", f"--snakefile={request.pipeline}"]
    if request.params_file:
        args.append(f"--configfile={request.params_file}")
    if attempt > 1:
        args.append("--rerun-incomplete")
    args += request.extra_args
    if request.targets:
        args += ["--", *request.targets]
    return tuple(args)


def unlock_argv(request: LaunchRequest) -> tuple[str, ...]:
    """Removes the lock a killed head job left (`--unlock` does nothing else, and exits).

    Only for a launch directory no Snakemake runs in any more: the agent must know the
    earlier head job ended. Not part of `argv`: see the engine's `launch`.
    """
    return ("snakemake", f"--profile={PROFILE_DIR}", f"--snakefile={request.pipeline}", "--unlock")

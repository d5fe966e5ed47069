"""`SnakemakeEngine`: the `WorkflowEngine` for Snakemake with its Slurm executor plugin."""

from __future__ import annotations

from collections.abc import Sequence

from jobsmith.adapters.snakemake import command
from jobsmith.adapters.snakemake.parse import parse_console
from jobsmith.adapters.snakemake.profile import PROFILE_FILE, profile_yaml
from jobsmith.adapters.workflow import (
    EngineKind,
    EngineSite,
    HeadJob,
    LaunchRequest,
    Parsed,
    RecordFile,
)

CONSOLE = "console"


class SnakemakeEngine:
    """Launches Snakemake as a head job and follows its console output.

    Snakemake keeps no machine-readable trace of its rule jobs (the plugin's Slurm job
    names are one run UUID for all of them, and the rule only goes to `--comment`, which
    accounting often drops), so its console is the record: the head job copies it to
    `console_log`, per attempt.
    """

    @property
    def kind(self) -> EngineKind:
        """Snakemake."""
        return EngineKind.SNAKEMAKE

    def launch(self, site: EngineSite, request: LaunchRequest, *, attempt: int = 1) -> HeadJob:
        """The profile from the site, and the command; attempt > 1 resumes.

        A head job killed hard (SIGKILL after Slurm's KillWait) leaves Snakemake's lock in
        `.snakemake/locks`, and the next attempt then stops at once with "Directory
        cannot be locked". `argv` is one command, so the unlock is not in it: the parser
        reports that line as a FAILED message, and `unlock_argv` is the command to run
        before `argv` once the earlier head job is known to have ended.
        """
        return HeadJob(
            files={PROFILE_FILE: profile_yaml(site)},
            argv=command.argv(request, attempt=attempt),
            # a resume comes after the earlier head job ended (the agent checks): a lock
            # left in .snakemake/locks is stale, and would stop the run at once
            prepare=command.unlock_argv(request) if attempt > 1 else (),
            console_log=command.console_log(attempt),
            # nothing to switch off: without a terminal Snakemake writes plain lines (no
            # colour codes in the captured consoles)
            environment={},
        )

    def unlock_argv(self, request: LaunchRequest) -> tuple[str, ...]:
        """`snakemake --unlock` for the same workflow (see `launch`)."""
        return command.unlock_argv(request)

    def records(self, request: LaunchRequest, *, attempt: int = 1) -> tuple[RecordFile, ...]:
        """This attempt's console copy, the only record the parser reads."""
        return (RecordFile(path=command.console_log(attempt), kind=CONSOLE),)

    def parse(self, record: RecordFile, lines: Sequence[str], context: tuple[str, ...]) -> Parsed:
        """Console lines into rule jobs and messages; other records say nothing."""
        if record.kind != CONSOLE:
            return Parsed(context=context)
        return parse_console(lines, context)

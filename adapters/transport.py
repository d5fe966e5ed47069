"""How the scheduler's commands are run: a one-method Transport protocol.

The scheduler code builds argv lists and parses text; it never knows whether a command ran
locally or over SSH. A transport that cannot get an answer in time raises
SchedulerUnavailable (retryable) instead of hanging.

Every byte a command prints becomes text here, in `decode()`, and decoding never fails.
That covers Slurm's answers (sacct and squeue fields such as the name, paths and comment
of a job submitted by hand hold whatever bytes its owner gave) and the job log files
jobsmith reads through the transport (`cat`, `tail`; see agent/runtime/logs.py; the local
transport is adapters/slurm/transport.py). The encoding is
UTF-8 whatever the locale, so a watcher run by cron (often with no locale) reads the same
text as the user's shell; bytes that are not UTF-8 become U+FFFD. Not surrogateescape:
this text goes into JSON output, session events, webhooks and model prompts, where a lone
surrogate raises UnicodeEncodeError at the far end, moving the crash instead of removing
it. The cost is that such bytes cannot round-trip: a path read back from Slurm that is not
UTF-8 names no file, and reading that log fails as a note on its job, like any unreadable
log. stdin (a batch script) is sent as UTF-8.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from jobsmith.errors import SchedulerError


@dataclass(frozen=True)
class CommandResult:
    """What a finished command gave back."""

    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str


class Transport(Protocol):
    """Runs one command where the scheduler's client tools live."""

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float,
        stdin: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> CommandResult:
        """Run argv to completion; raise SchedulerUnavailable if it outlives timeout.

        env holds variables to set for this command on top of the transport's own.
        """
        ...


def decode(data: bytes) -> str:
    """A command's output as text; bytes that are not UTF-8 become U+FFFD (see above)."""
    return data.decode("utf-8", errors="replace")


class NoCommands:
    """A transport that runs nothing (`render --no-slurm`): every command is refused with
    SchedulerError naming it, so whatever asks Slurm something fails loudly instead of
    reaching a cluster that may not be there."""

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float,
        stdin: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> CommandResult:
        program = argv[0] if argv else "(nothing)"
        raise SchedulerError(f"{program} was not run: with --no-slurm jobsmith runs no command")

"""How Slurm commands reach the scheduler: a one-method Transport protocol.

The scheduler code builds argv lists and parses text; it never knows whether a command ran
locally or over SSH. A transport that cannot get an answer in time raises
SchedulerUnavailable (retryable) instead of hanging.

Every byte a command prints becomes text here, in `decode()`, and decoding never fails.
That covers Slurm's answers (sacct and squeue fields such as the name, paths and comment
of a job submitted by hand hold whatever bytes its owner gave) and the job log files
jobsmith reads through the transport (`cat`, `tail`; see agent/logs.py). The encoding is
UTF-8 whatever the locale, so a watcher run by cron (often with no locale) reads the same
text as the user's shell; bytes that are not UTF-8 become U+FFFD. Not surrogateescape:
this text goes into JSON output, session events, webhooks and model prompts, where a lone
surrogate raises UnicodeEncodeError at the far end, moving the crash instead of removing
it. The cost is that such bytes cannot round-trip: a path read back from Slurm that is not
UTF-8 names no file, and reading that log fails as a note on its job, like any unreadable
log. stdin (a batch script) is sent as UTF-8.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from jobsmith import faults
from jobsmith.adapters.slurm.jobenv import SecretFilter
from jobsmith.adapters.slurm.slurmenv import command_environ
from jobsmith.errors import SchedulerUnavailable


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


class LocalTransport:
    """Runs commands as subprocesses of this process, on this host.

    Children get this process's environment minus its secrets (jobenv.SecretFilter):
    sbatch hands the environment it runs in to the job. The Slurm commands' own input
    variables are removed and the output formats pinned (slurmenv.command_environ), so
    a user's SBATCH_PARTITION cannot override the checked script.
    """

    def __init__(self, secrets: SecretFilter | None = None) -> None:
        self._secrets = secrets or SecretFilter()

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float,
        stdin: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> CommandResult:
        """Run argv in its own session so a terminal Ctrl-C cannot kill it halfway.

        sbatch interrupted after sending its RPC leaves a job we never heard about;
        running it in a new session keeps SIGINT from the terminal away from it.
        """
        try:
            proc = subprocess.Popen(
                list(argv),
                stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env={**command_environ(self._secrets.apply(os.environ)), **(env or {})},
                start_new_session=True,
            )
        except FileNotFoundError as exc:
            raise SchedulerUnavailable(
                f"cannot run {argv[0]!r}: not found on PATH; is this a Slurm login node?"
            ) from exc
        if argv and argv[0] == "sbatch":
            faults.sbatch_started()
        try:
            out, err = proc.communicate(
                input=None if stdin is None else stdin.encode(), timeout=timeout
            )
        except subprocess.TimeoutExpired as exc:
            _kill_and_reap(proc)
            raise SchedulerUnavailable(
                f"{' '.join(argv[:2])} gave no answer within {timeout:g}s; "
                "slurmctld may be busy or down, try again"
            ) from exc
        return CommandResult(tuple(argv), proc.returncode, decode(out), decode(err))


def decode(data: bytes) -> str:
    """A command's output as text; bytes that are not UTF-8 become U+FFFD (see above)."""
    return data.decode("utf-8", errors="replace")


def _kill_and_reap(proc: subprocess.Popen[bytes]) -> None:
    """Kill the command's whole process group and wait until it is really gone.

    Callers rely on this: after a timed-out sbatch has been reaped it can no longer
    submit anything, so looking its tag up afterwards gives a final answer.
    """
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate()

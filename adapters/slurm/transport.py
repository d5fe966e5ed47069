"""The local transport: the scheduler's commands as subprocesses on this host.

The protocol it implements, and how output becomes text, are in adapters/transport.py.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Mapping, Sequence

from jobsmith import faults
from jobsmith.adapters.environment_rule import JobEnvironmentRule
from jobsmith.adapters.slurm.commands.slurmenv import command_environ
from jobsmith.adapters.transport import CommandResult, decode
from jobsmith.errors import SchedulerUnavailable


class LocalTransport:
    """Runs commands as subprocesses of this process, on this host.

    Children get only what the allowlist passes of this process's environment
    (adapters/environment_rule.py): sbatch hands the environment it runs in to the job
    (--export=ALL, see argv.EXPORT). The Slurm commands' own input
    variables are removed and the output formats pinned (slurmenv.command_environ), so
    a user's SBATCH_PARTITION cannot override the checked script.
    """

    def __init__(self, environment: JobEnvironmentRule | None = None) -> None:
        self._environment = environment or JobEnvironmentRule()

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
                env={**command_environ(self._environment.apply(os.environ)), **(env or {})},
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


def _kill_and_reap(proc: subprocess.Popen[bytes]) -> None:
    """Kill the command's whole process group and wait until it is really gone.

    Callers rely on this: after a timed-out sbatch has been reaped it can no longer
    submit anything, so looking its tag up afterwards gives a final answer.
    """
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate()

"""The OpenSSH transport: the scheduler's commands through the system's `ssh`, over a
ControlMaster connection the user opened.

Many sites ask for a second factor at every login, which paramiko cannot answer
unattended. OpenSSH can multiplex many sessions over one authenticated connection: the
user opens it once (`ssh -M -S SOCKET -o ControlPersist=yes -fN HOST`, answering the MFA
prompt), and every command of jobsmith's then runs through that socket: no new login,
no prompt, for as long as the master lives (a day of watching on one prompt).

Each command is `ssh -S SOCKET -o ControlMaster=no -o BatchMode=yes HOST -- LINE`: it
never opens a master of its own, never prompts (a missing or dead master is an error
naming the command that opens one, not a hang on a password prompt nobody sees), and
LINE is command.py's, the same quoted `env -i` line as over paramiko. Host keys were
verified by the master's login (OpenSSH's own known_hosts check, StrictHostKeyChecking
is forced on here for any fallback). `ssh` runs in a session of its own, so a Ctrl-C in
the terminal does not cut it; past its deadline it is killed, which closes its channel.

ssh's exit status 255 is its own failure (connection, socket, authentication):
SchedulerUnavailable. A remote command that itself exits 255 is read the same way; no
Slurm command does.

A command cut at its deadline raises CommandTimedOut; killing the local ssh does not
end it on the login node (the master keeps its channel; OpenSSH has no per-session
cancel), the login node's coreutils `timeout` does (command.py), as over paramiko.
"""

from __future__ import annotations

import contextlib
import getpass
import os
import shlex
import signal
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO

from jobsmith.adapters import login_tools
from jobsmith.adapters.environment_rule import JobEnvironmentRule
from jobsmith.adapters.ssh.command import CommandTimedOut, remote_command
from jobsmith.adapters.transport import CommandResult, decode
from jobsmith.errors import SchedulerUnavailable

#: what ssh itself exits with when it fails (man ssh: EXIT STATUS)
SSH_FAILED = 255
#: the environment ssh gets: enough to find its config and the user's files, nothing else
_SSH_ENV = ("HOME", "USER", "LOGNAME", "PATH", "LANG", "SSH_AUTH_SOCK")


class OpenSshTransport:
    """Runs commands on `host` through an OpenSSH ControlMaster socket (module docstring)."""

    def __init__(
        self,
        host: str,
        *,
        control_path: Path,
        port: int = 22,
        user: str | None = None,
        known_hosts: Path | None = None,
        ssh: str = "ssh",
        environment: JobEnvironmentRule | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self.user = user or getpass.getuser()
        self.control_path = control_path
        self._known_hosts = known_hosts
        self._ssh = ssh
        self._environment = environment or JobEnvironmentRule()

    @property
    def where(self) -> str:
        """user@host:port, as messages name the login node."""
        return f"{self.user}@{self.host}:{self.port}"

    def master_command(self) -> str:
        """The command a person runs once to open the connection jobsmith reuses."""
        argv = [self._ssh, "-M", "-S", str(self.control_path), "-o", "ControlPersist=yes"]
        argv += ["-fN", *self._destination()]
        return " ".join(shlex.quote(a) for a in argv)

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float,
        stdin: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> CommandResult:
        """Run argv remotely through the master, stdin sent and closed; deadline timeout."""
        line = remote_command(argv, env or {}, timeout_s=timeout, environment=self._environment)
        self.require_master()
        proc = subprocess.Popen(
            [*self.client_argv(), "--", line],
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=ssh_environment(),
            start_new_session=True,
        )
        try:
            out, err = proc.communicate(None if stdin is None else stdin.encode(), timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill(proc)
            raise CommandTimedOut(argv, self.where, timeout) from None
        if proc.returncode == SSH_FAILED:
            raise self._no_master(" ".join(decode(err).split())[:300] or "ssh failed")
        result = CommandResult(tuple(argv), proc.returncode, decode(out), decode(err))
        return login_tools.check(result, self.where)  # a tool missing there: ToolMissing

    def start(
        self,
        argv: Sequence[str],
        stdout: IO[bytes],
        stderr: IO[bytes],
        stdin: IO[bytes] | None = None,
    ) -> subprocess.Popen[bytes]:
        """argv started on the login node through the master with no deadline, its stdin
        the file stdin (read to its end by ssh itself) or else a pipe the caller writes
        and closes (a copy streamed there: staging.py), its stdout and stderr into those
        files. The caller watches it, waits for it and ends it; the end of input (or of
        the pipe, closed early) ends the remote command's input."""
        line = remote_command(argv, {}, environment=self._environment)
        self.require_master()
        return subprocess.Popen(
            [*self.client_argv(), "--", line],
            stdin=subprocess.PIPE if stdin is None else stdin,
            stdout=stdout,
            stderr=stderr,
            env=ssh_environment(),
        )

    def close(self) -> None:
        """Nothing to close: the master is the user's (`ssh -S SOCKET -O exit HOST`)."""

    def require_master(self) -> None:
        """SchedulerUnavailable naming the command that opens the master, if there is no
        socket to reach one through."""
        if not self.control_path.exists():
            raise self._no_master("there is no connection socket")

    def client_argv(self, *, with_host: bool = True) -> list[str]:
        """ssh through the master; without the host for a program that adds it itself and
        runs ssh as its remote shell (rsync -e, adapters/ssh/staging.py)."""
        options = ["ControlMaster=no", "BatchMode=yes", "StrictHostKeyChecking=yes"]
        if self._known_hosts is not None:
            options.append(f"UserKnownHostsFile={self._known_hosts}")
        argv = [self._ssh, "-S", str(self.control_path)]
        for option in options:
            argv += ["-o", option]
        return [*argv, *self._destination(with_host=with_host)]

    def _destination(self, *, with_host: bool = True) -> list[str]:
        return ["-p", str(self.port), "-l", self.user, *([self.host] if with_host else [])]

    def _no_master(self, said: str) -> SchedulerUnavailable:
        return SchedulerUnavailable(
            f"no SSH connection to {self.where} through {self.control_path} ({said}): open "
            f"it once with `{self.master_command()}` (it asks for your password or second "
            "factor there), then try again"
        )


def ssh_environment() -> dict[str, str]:
    """The environment the system's ssh is run with (_SSH_ENV of this process's)."""
    return {k: os.environ[k] for k in _SSH_ENV if k in os.environ}


def _kill(proc: subprocess.Popen[bytes]) -> None:
    """The ssh client gone and reaped. Its pipes are closed, not read to their end: the
    client handed them to the master, which holds them until the remote command ends."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    for pipe in (proc.stdin, proc.stdout, proc.stderr):
        if pipe is not None:
            pipe.close()
    proc.wait()

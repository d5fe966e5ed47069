"""The SSH transport: the scheduler's commands run on a login node through paramiko.

One connection per transport, opened on the first command and reused by every later
one (a watcher cycle or a chat turn opens no new connection), with keepalives so an idle
NAT or firewall does not drop it. A connection found dead before a command is sent is
reopened once at no risk (nothing ran); one lost while a command runs raises
SchedulerUnavailable, because whether the command ran is unknown, and the next command
connects again. Every command has a deadline; past it, SchedulerUnavailable names the
host. Output becomes text in adapters.transport.decode, as locally.

The remote command line and its environment are command.py's; the host key check is
hostkeys.py's; ~/.ssh/config is read as OpenSSH reads it (HostName, User, Port,
IdentityFile: sshconfig.py). Authentication: the site's key file, else the config's,
else ssh-agent and the default keys (~/.ssh/id_*), as OpenSSH would try them. The
session store, the watcher's state and the logs of jobsmith itself stay on the machine
where jobsmith runs.

A command past its deadline raises CommandTimedOut and its channel is closed; the
login node's coreutils `timeout` ends the command itself (command.py). Not done yet: a
command whose connection is cut off is left to that same `timeout`, and ProxyJump is not
followed (refused by name: the OpenSSH transport follows it).
"""

from __future__ import annotations

import getpass
import logging
import select
import socket
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import paramiko

from jobsmith.adapters import login_tools
from jobsmith.adapters.environment_rule import JobEnvironmentRule
from jobsmith.adapters.ssh import hostkeys, sshconfig
from jobsmith.adapters.ssh.command import CommandTimedOut, remote_command
from jobsmith.adapters.transport import CommandResult, decode
from jobsmith.errors import ConfigError, SchedulerUnavailable

# paramiko logs a dropped connection at ERROR; the caller gets SchedulerUnavailable for
# it, so without a handler of ours Python's last-resort handler would print it twice.
logging.getLogger("paramiko").addHandler(logging.NullHandler())

#: what a dead or dying connection raises from paramiko's calls
_LOST = (paramiko.SSHException, OSError, EOFError)
_CHUNK = 1 << 16


class LoginRefused(ConfigError):
    """The login node refused every key offered: a setting a person must fix."""


class ParamikoTransport:
    """Runs commands on `host` over one reused SSH connection (see the module docstring)."""

    def __init__(
        self,
        host: str,
        *,
        port: int = 22,
        user: str | None = None,
        key_file: Path | None = None,
        known_hosts: Path | None = None,
        keepalive_s: int = 30,
        environment: JobEnvironmentRule | None = None,
        ssh_config: Path | None = None,
    ) -> None:
        config = ssh_config or Path.home() / ".ssh" / "config"
        found = sshconfig.resolve(host, port=port, user=user, key_file=key_file, config=config)
        self.host = found.hostname
        self.port = found.port
        self.user = found.user or getpass.getuser()
        self._key_files = found.identity_files
        self._jumps = found.jumps
        self._hops: list[Any] = []  # the jump hosts' clients, closed with the connection
        self._known_hosts = known_hosts or Path.home() / ".ssh" / "known_hosts"
        self._keepalive_s = keepalive_s
        self._environment = environment or JobEnvironmentRule()
        self._client: Any = None
        self._lock = threading.Lock()

    @property
    def where(self) -> str:
        """user@host:port, as messages name the login node."""
        return f"{self.user}@{self.host}:{self.port}"

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float,
        stdin: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> CommandResult:
        """Run argv remotely to completion, stdin sent and closed; deadline `timeout`."""
        deadline = time.monotonic() + timeout
        command = remote_command(argv, env or {}, timeout_s=timeout, environment=self._environment)
        channel = self._open_channel(deadline)
        try:
            channel.exec_command(command)
            _send_stdin(channel, stdin, deadline)
            out, err = self._collect(channel, deadline, argv, timeout)
        except _LOST as exc:
            self._drop()
            raise self._lost(argv) from exc
        finally:
            channel.close()
        result = CommandResult(tuple(argv), _status(channel), decode(out), decode(err))
        return login_tools.check(result, self.where)  # a tool missing there: ToolMissing

    def close(self) -> None:
        """Close the connection; a later command opens a new one."""
        self._drop()

    # --- the connection -----------------------------------------------------------------

    def open_sftp(self, timeout: float = 30.0) -> Any:
        """An SFTP session on the connection the commands use (staging:
        adapters/ssh/staging.py), reconnecting once if it died idle; the caller closes it."""
        deadline = time.monotonic() + timeout
        return self._open_channel(deadline, lambda client: client.open_sftp())

    def _open_channel(self, deadline: float, opener: Any = None) -> Any:
        """A session channel on the live connection (or what opener makes of the client),
        reconnecting once if it died idle.

        Connecting and opening count against the command's deadline.
        """
        with self._lock:
            for fresh in (False, True):
                client = self._connected(_left(deadline), fresh=fresh)
                try:
                    if opener is not None:
                        return opener(client)
                    return client.get_transport().open_session(timeout=_left(deadline))
                except _LOST as exc:
                    self._drop_locked()
                    if fresh:
                        raise self._unreachable(exc) from exc
        raise AssertionError("unreachable")  # pragma: no cover

    def _connected(self, timeout: float, *, fresh: bool) -> Any:
        """The client, connecting first if there is none or its connection is down."""
        current = None if self._client is None else self._client.get_transport()
        if current is not None and current.is_active() and not fresh:
            return self._client
        self._drop_locked()
        self._client = self._connect(timeout)
        return self._client

    def _connect(self, timeout: float) -> Any:
        """Open and authenticate a new connection, through the jump hosts if there are
        any (ProxyJump: each hop's key checked before any login, as the login node's)."""
        sock = None
        hops = [
            *self._jumps,
            sshconfig.HostSettings(self.host, self.port, self.user, self._key_files),
        ]
        for hop, after in zip(hops, [*hops[1:], None], strict=True):
            user = hop.user or getpass.getuser()
            client = self._login(hop.hostname, hop.port, user, hop.identity_files, timeout, sock)
            if after is None:
                return client
            self._hops.append(client)
            try:
                sock = client.get_transport().open_channel(
                    "direct-tcpip", (after.hostname, after.port), ("127.0.0.1", 0), timeout=timeout
                )
            except (paramiko.ChannelException, *_LOST) as exc:
                raise self._unreachable(exc, via=f"{user}@{hop.hostname}:{hop.port}") from exc
        raise AssertionError("unreachable")  # pragma: no cover: the last hop returns

    def _login(
        self,
        host: str,
        port: int,
        user: str,
        key_files: tuple[Path, ...],
        timeout: float,
        sock: Any,
    ) -> Any:
        """One authenticated client to host (over sock, a channel through the hop before
        it, if given); host key checked before any login."""
        client = paramiko.SSHClient()
        if self._known_hosts.exists():
            client.load_host_keys(str(self._known_hosts))
        client.set_missing_host_key_policy(hostkeys.RefuseUnknown(port, self._known_hosts))
        where = f"{user}@{host}:{port}"
        try:
            client.connect(
                host,
                port=port,
                username=user,
                key_filename=[str(p) for p in key_files] or None,
                look_for_keys=not key_files,
                allow_agent=True,
                timeout=timeout,
                banner_timeout=timeout,
                auth_timeout=timeout,
                sock=sock,
            )
        except paramiko.BadHostKeyException as exc:
            client.close()
            raise hostkeys.changed(
                host, port, exc.key, exc.expected_key, self._known_hosts
            ) from exc
        except paramiko.AuthenticationException as exc:
            client.close()
            raise self._refused_login(exc, where, key_files) from exc
        except hostkeys.HostKeyRefused:  # raised by RefuseUnknown, before any login
            client.close()
            raise
        except _LOST as exc:
            client.close()
            raise self._unreachable(exc, via=None if where == self.where else where) from exc
        client.get_transport().set_keepalive(self._keepalive_s)
        _no_delay(client.get_transport().sock)
        return client

    def _drop(self) -> None:
        with self._lock:
            self._drop_locked()

    def _drop_locked(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None
        for hop in reversed(self._hops):
            hop.close()
        self._hops.clear()

    # --- one command --------------------------------------------------------------------

    def _collect(
        self, channel: Any, deadline: float, argv: Sequence[str], timeout: float
    ) -> tuple[bytes, bytes]:
        """stdout and stderr until the server closes the channel (or the deadline).

        The server closes a channel after its output, EOF and exit status; a channel
        closed with no exit status means the connection died (paramiko closes every
        channel of a lost connection) or the command was killed by a signal (paramiko
        ignores exit-signal): either way, whether it did its work is unknown.
        """
        out, err = bytearray(), bytearray()
        while True:
            _drain(channel, out, err)
            if channel.closed:
                _drain(channel, out, err)  # what arrived just before the close
                if channel.exit_status == -1:
                    raise EOFError("channel closed without an exit status")
                return bytes(out), bytes(err)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise CommandTimedOut(argv, self.host, timeout)
            select.select([channel], [], [], min(remaining, 1.0))

    def _lost(self, argv: Sequence[str]) -> SchedulerUnavailable:
        return SchedulerUnavailable(
            f"the SSH connection to {self.where} was lost while {' '.join(argv[:2])} ran "
            "(or it ended without an exit status); whether it did its work is unknown; "
            "the next command reconnects, try again"
        )

    def _unreachable(self, exc: BaseException, via: str | None = None) -> SchedulerUnavailable:
        hop = f" through the jump host {via} (ProxyJump)" if via else ""
        return SchedulerUnavailable(
            f"cannot reach the login node {self.where}{hop} over SSH "
            f"({exc or type(exc).__name__}); check the network and scheduler.host/port"
            + (" and the ProxyJump in ~/.ssh/config" if via else "")
            + ", then try again"
        )

    def _refused_login(
        self, exc: BaseException, where: str, key_files: tuple[Path, ...]
    ) -> LoginRefused:
        shown = ", ".join(str(p) for p in key_files)
        keys = f"the key {shown}" if shown else "ssh-agent and ~/.ssh/id_*"
        return LoginRefused(
            f"{where} refused the login with {keys} ({exc}); "
            "set scheduler.user and scheduler.key_file in the site file, or load a key "
            "into ssh-agent"
        )


def _no_delay(sock: Any) -> None:
    """Send small packets at once (TCP_NODELAY), as OpenSSH does for interactive sessions.

    Each command is a few small packets each way (open, exec, EOF, status, close); with
    Nagle's algorithm on, one of them waits for the peer's delayed ACK, about 40 ms per
    command (48 ms for `true` against 6 ms without, benchmarks/bench_ssh.py). A hop's
    channel (ProxyJump) is no socket: nothing to set there.
    """
    if isinstance(sock, socket.socket):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


def _left(deadline: float) -> float:
    """Seconds until deadline; a sliver when past it, so paramiko fails fast, not never."""
    return max(deadline - time.monotonic(), 0.01)


def _send_stdin(channel: Any, stdin: str | None, deadline: float) -> None:
    """Send the whole input (a batch script) and close it, so the command sees its end."""
    if stdin is not None:
        channel.settimeout(_left(deadline))
        channel.sendall(stdin.encode())
        channel.settimeout(None)
    channel.shutdown_write()


def _drain(channel: Any, out: bytearray, err: bytearray) -> None:
    """Move whatever output has arrived into out and err, without waiting."""
    while channel.recv_ready():
        out += channel.recv(_CHUNK)
    while channel.recv_stderr_ready():
        err += channel.recv_stderr(_CHUNK)


def _status(channel: Any) -> int:
    """The exit status the server sent (_collect made sure it did)."""
    status: int = channel.exit_status
    return status

"""A real OpenSSH server for the SSH transport's tests, run as the test's user on the
login node: this machine on loopback, or the laptop stage's cluster (tests/login_node.py).

An unprivileged sshd can only log in the user it runs as, which is all the tests need:
its own host key, an authorized key generated for the test, no PAM, everything in one
temporary directory. `SetEnv` plays a remote login environment that exports SBATCH_*
(as a site's module file or the user's .bashrc may), without touching the user's files.
The keys are made here (the client key stays here, the laptop's); on the cluster the
server's files go to a directory of its own there, and its log, sessions and processes are
read there, over the cluster's own sshd.
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from login_node import (
    LoginNode,
    ThisMachine,
    checked,
    kill_pids,
    login_node,
    pids_matching,
    read_file,
    write_file,
)

SSHD = Path("/usr/sbin/sshd")
#: what the server's sessions get in their environment behind jobsmith's back
HOSTILE_ENV = {
    "SBATCH_PARTITION": "high",
    "SQUEUE_FORMAT": "%i",
    "JOBSMITH_TEST_LEAK": "yes",
    "LANG": "C.UTF-8",
}


def keygen(path: Path) -> Path:
    """A new passphrase-less ed25519 key pair at path (and path.pub)."""
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "jobsmith-test", "-f", str(path)],
        check=True,
    )
    return path


def free_port(node: LoginNode | None = None) -> int:
    """A port nothing listens on right now on the login node's address."""
    node = node or login_node()
    if isinstance(node, ThisMachine):
        with socket.socket() as sock:
            sock.bind((node.address, 0))
            port: int = sock.getsockname()[1]
            return port
    probe = (
        "import socket,sys; s=socket.socket(); s.bind((sys.argv[1], 0)); print(s.getsockname()[1])"
    )
    return int(checked(node, ["python3", "-c", probe, node.address]))


@dataclass
class Sshd:
    """One running sshd: its port, files (keys here, the rest on the node) and process."""

    root: Path
    port: int
    node: LoginNode
    #: the server's own directory on the login node (root itself on loopback)
    there: Path
    pid: int
    #: the sshd process when it is this machine's child (loopback), reaped on stop
    process: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        """Where the laptop reaches this server."""
        return self.node.address

    @property
    def client_key(self) -> Path:
        """The private key the server accepts for the test user (on the laptop)."""
        return self.root / "client_key"

    def log_text(self) -> str:
        """sshd's log (LogLevel VERBOSE: one 'Accepted publickey' line per login)."""
        return read_file(self.node, self.there / "sshd.log") or ""

    def known_hosts_line(self) -> str:
        """The known_hosts entry for this server's host key."""
        key = (self.root / "host_key.pub").read_text().split()[:2]
        return f"[{self.address}]:{self.port} {' '.join(key)}\n"

    def logins(self) -> int:
        """How many logins the server has accepted so far."""
        return self.log_text().count("Accepted publickey")

    def session_pids(self) -> list[int]:
        """The sshd processes holding the connections' sockets: killing them drops them.

        Each connection has a monitor (the listener's child) and below it a user child
        that holds the socket; the monitor then exits and the listener reaps it, so
        nothing is left as a zombie. Since OpenSSH 9.8 (Debian 13) the per-connection
        processes are the program sshd-session.
        """
        table = self._processes()
        monitors = {pid for pid, (ppid, _) in table.items() if ppid == self.pid}
        sessions = ("sshd", "sshd-session")
        return [pid for pid, (ppid, comm) in table.items() if ppid in monitors and comm in sessions]

    def drop_sessions(self) -> None:
        """Kill the server side of every connection it serves (the connections die)."""
        kill_pids(self.node, self.session_pids())

    def stop(self) -> None:
        """Stop the server and every connection it still serves, leaving no zombie."""
        self.drop_sessions()
        deadline = time.monotonic() + 3
        while self._monitors() and time.monotonic() < deadline:
            time.sleep(0.05)
        kill_pids(self.node, self._monitors())  # connections that never logged in
        kill_pids(self.node, [self.pid])
        if self.process is not None:
            self.process.wait(timeout=10)

    def _monitors(self) -> list[int]:
        return [pid for pid, (ppid, _) in self._processes().items() if ppid == self.pid]

    def _processes(self) -> dict[int, tuple[int, str]]:
        """pid: (parent pid, command name) of every process on the node."""
        out = self.node.run(["ps", "-e", "-o", "pid=,ppid=,comm="]).stdout
        rows = (line.split(None, 2) for line in out.splitlines())
        return {int(r[0]): (int(r[1]), r[2].strip()) for r in rows if len(r) == 3}


def start_sshd(
    root: Path,
    login_env: Mapping[str, str] | None = None,
    login_shell: str | None = None,
    extra_config: str = "",
    client_key: Path | None = None,
    node: LoginNode | None = None,
) -> Sshd:
    """Start sshd in the foreground on a free port of the login node; wait until it
    answers from here.

    login_env adds to (or replaces) HOSTILE_ENV in every session's environment: PATH
    there plays a login node whose PATH holds other programs (no spaces in values).
    login_shell plays a user whose login shell it is (an unprivileged sshd cannot log in
    another user): the user's own shell runs the fixed ForceCommand, which hands the
    client's command line, verbatim, to `login_shell -c`, as sshd does with a login shell.
    extra_config: more sshd_config lines (e.g. `AllowTcpForwarding no`: a jump host that
    forwards nothing). client_key: accept this existing key (another server's) instead of
    a new one.
    node: where it runs (default: tests/login_node.py's login_node()).
    """
    node = node or login_node()
    root.mkdir(parents=True, exist_ok=True)
    keygen(root / "host_key")
    if client_key is None:
        client_key = keygen(root / "client_key")
    elif client_key != root / "client_key":
        (root / "client_key").write_bytes(client_key.read_bytes())
        (root / "client_key").chmod(0o600)
        (root / "client_key.pub").write_text(client_key.with_suffix(".pub").read_text())
    there = root if isinstance(node, ThisMachine) else Path("/tmp/js-sshd") / uuid.uuid4().hex[:12]
    port = free_port(node)
    setenv = " ".join(f"{k}={v}" for k, v in {**HOSTILE_ENV, **(login_env or {})}.items())
    config = (
        f"Port {port}\nListenAddress {node.address}\nHostKey {there / 'host_key'}\n"
        f"PidFile {there / 'sshd.pid'}\nAuthorizedKeysFile {there / 'authorized_keys'}\n"
        "UsePAM no\nStrictModes no\nPasswordAuthentication no\n"
        "KbdInteractiveAuthentication no\nPubkeyAuthentication yes\nLogLevel VERBOSE\n"
        f"SetEnv {setenv}\n"
        + (f'ForceCommand exec {login_shell} -c "$SSH_ORIGINAL_COMMAND"\n' if login_shell else "")
        + extra_config
    )
    files = {
        "host_key": ((root / "host_key").read_text(), 0o600),
        "authorized_keys": ((root / "client_key.pub").read_text(), 0o644),
        "sshd_config": (config, 0o644),
    }
    for name, (text, mode) in files.items():
        if isinstance(node, ThisMachine):
            (there / name).write_text(text)
            (there / name).chmod(mode)
        else:
            write_file(node, there / name, text, mode)
    argv = [str(SSHD), "-D", "-f", str(there / "sshd_config"), "-E", str(there / "sshd.log")]
    if isinstance(node, ThisMachine):
        process = subprocess.Popen(argv)
        server = Sshd(root, port, node, there, process.pid, process)
    else:  # detached there: its stdio closed, so the session that started it ends
        line = f"{' '.join(argv)} </dev/null >/dev/null 2>&1 & echo $!"
        server = Sshd(root, port, node, there, int(checked(node, ["sh", "-c", line])))
    _wait_listening(server)
    return server


def _wait_listening(server: Sshd) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if not _alive(server):
            code = server.process.returncode if server.process else "?"
            raise RuntimeError(f"sshd exited {code}: {server.log_text()}")
        try:
            with socket.create_connection((server.address, server.port), timeout=1) as sock:
                if sock.recv(64).startswith(b"SSH-"):
                    return
        except OSError:
            time.sleep(0.05)
    server.stop()
    raise RuntimeError("sshd did not answer within 10s")


def _alive(server: Sshd) -> bool:
    if server.process is not None:
        return server.process.poll() is None
    return server.node.run(["kill", "-0", str(server.pid)]).returncode == 0


def pids_running(argv: list[str], node: LoginNode | None = None) -> list[int]:
    """The test user's processes on the login node whose command line is exactly argv
    (words without spaces or newlines)."""
    return pids_matching(node or login_node(), " ".join(re.escape(a) for a in argv))


def kill_all(pids: list[int], node: LoginNode | None = None) -> None:
    """SIGKILL each of pids on the login node (the tests' own leftovers, by id)."""
    kill_pids(node or login_node(), pids)


# --- the transports, connected to one of these servers ------------------------------------


def open_master(sshd: Sshd, known_hosts: Path, socket: Path) -> None:
    """What the person does once (here with the test's key; at a site, with MFA)."""
    subprocess.run(
        ["ssh", "-M", "-S", str(socket), "-o", "ControlPersist=yes", "-fN",
         "-o", "BatchMode=yes", "-o", f"UserKnownHostsFile={known_hosts}",
         "-o", "StrictHostKeyChecking=yes", "-i", str(sshd.client_key),
         "-o", "IdentitiesOnly=yes", "-p", str(sshd.port), sshd.address],
        check=True,
        timeout=30,
    )  # fmt: skip
    assert socket.exists()


def close_master(socket: Path, port: int) -> None:
    """Stop the ControlMaster behind socket."""
    subprocess.run(
        ["ssh", "-S", str(socket), "-O", "exit", "-p", str(port), login_node().address],
        capture_output=True,
        timeout=30,
    )


@contextlib.contextmanager
def connected(kind: str, sshd: Sshd, known_hosts: Path, label: str) -> Iterator[object]:
    """A transport of kind 'paramiko' or 'openssh' (through a master opened here, on a
    socket named after label) to sshd, closed after."""
    from jobsmith.adapters.ssh.openssh import OpenSshTransport
    from jobsmith.adapters.ssh.transport import ParamikoTransport

    if kind == "paramiko":
        paramiko = ParamikoTransport(
            sshd.address, port=sshd.port, key_file=sshd.client_key, known_hosts=known_hosts
        )
        try:
            yield paramiko
        finally:
            paramiko.close()
        return
    socket = Path(f"/tmp/js-cm-{os.getpid()}-{label}.sock")  # a socket's name: <= 107 bytes
    open_master(sshd, known_hosts, socket)
    try:
        yield OpenSshTransport(
            sshd.address, control_path=socket, port=sshd.port, known_hosts=known_hosts
        )
    finally:
        close_master(socket, sshd.port)

"""A real OpenSSH server on loopback for the SSH transport's tests, run as the test's user.

An unprivileged sshd can only log in the user it runs as, which is all the tests need:
its own host key, an authorized key generated for the test, no PAM, everything in one
temporary directory. `SetEnv` plays a remote login environment that exports SBATCH_*
(as a site's module file or the user's .bashrc may), without touching the user's files.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

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


def free_port() -> int:
    """A loopback port nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class Sshd:
    """One running sshd: its port, files and process."""

    root: Path
    port: int
    process: subprocess.Popen[bytes]

    @property
    def client_key(self) -> Path:
        """The private key the server accepts for the test user."""
        return self.root / "client_key"

    @property
    def log(self) -> Path:
        """sshd's log (LogLevel VERBOSE: one 'Accepted publickey' line per login)."""
        return self.root / "sshd.log"

    def known_hosts_line(self) -> str:
        """The known_hosts entry for this server's host key."""
        key = (self.root / "host_key.pub").read_text().split()[:2]
        return f"[127.0.0.1]:{self.port} {' '.join(key)}\n"

    def logins(self) -> int:
        """How many logins the server has accepted so far."""
        return self.log.read_text().count("Accepted publickey")

    def session_pids(self) -> list[int]:
        """The sshd processes holding the connections' sockets: killing them drops them.

        Each connection has a monitor (the listener's child) and below it a user child
        that holds the socket; the monitor then exits and the listener reaps it, so
        nothing is left as a zombie.
        """
        monitors = self._monitors()
        return [pid for pid in _all_pids() if _ppid(pid) in monitors and _comm(pid) == "sshd"]

    def stop(self) -> None:
        """Stop the server and every connection it still serves, leaving no zombie."""
        kill_all(self.session_pids())
        deadline = time.monotonic() + 3
        while self._monitors() and time.monotonic() < deadline:
            time.sleep(0.05)
        kill_all(self._monitors())  # connections that never logged in
        _kill(self.process.pid)
        self.process.wait(timeout=10)

    def _monitors(self) -> list[int]:
        return [pid for pid in _all_pids() if _ppid(pid) == self.process.pid]


def start_sshd(
    root: Path,
    login_env: Mapping[str, str] | None = None,
    login_shell: str | None = None,
    extra_config: str = "",
) -> Sshd:
    """Start sshd in the foreground on a free loopback port; wait until it answers.

    login_env adds to (or replaces) HOSTILE_ENV in every session's environment: PATH
    there plays a login node whose PATH holds other programs (no spaces in values).
    login_shell plays a user whose login shell it is (an unprivileged sshd cannot log in
    another user): the user's own shell runs the fixed ForceCommand, which hands the
    client's command line, verbatim, to `login_shell -c`, as sshd does with a login shell.
    extra_config: more sshd_config lines (e.g. `AllowTcpForwarding no`: a jump host that
    forwards nothing).
    """
    root.mkdir(parents=True, exist_ok=True)
    keygen(root / "host_key")
    keygen(root / "client_key")
    (root / "authorized_keys").write_text((root / "client_key.pub").read_text())
    port = free_port()
    setenv = " ".join(f"{k}={v}" for k, v in {**HOSTILE_ENV, **(login_env or {})}.items())
    (root / "sshd_config").write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {root / 'host_key'}\n"
        f"PidFile {root / 'sshd.pid'}\nAuthorizedKeysFile {root / 'authorized_keys'}\n"
        "UsePAM no\nStrictModes no\nPasswordAuthentication no\n"
        "KbdInteractiveAuthentication no\nPubkeyAuthentication yes\nLogLevel VERBOSE\n"
        f"SetEnv {setenv}\n"
        + (f'ForceCommand exec {login_shell} -c "$SSH_ORIGINAL_COMMAND"\n' if login_shell else "")
        + extra_config
    )
    process = subprocess.Popen(
        [str(SSHD), "-D", "-f", str(root / "sshd_config"), "-E", str(root / "sshd.log")]
    )
    server = Sshd(root, port, process)
    _wait_listening(server)
    return server


def _wait_listening(server: Sshd) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            log = server.log.read_text() if server.log.exists() else ""
            raise RuntimeError(f"sshd exited {server.process.returncode}: {log}")
        try:
            with socket.create_connection(("127.0.0.1", server.port), timeout=1) as sock:
                if sock.recv(64).startswith(b"SSH-"):
                    return
        except OSError:
            time.sleep(0.05)
    server.stop()
    raise RuntimeError("sshd did not answer within 10s")


def _all_pids() -> list[int]:
    return [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()]


def _ppid(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[1])


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def _kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def pids_running(argv: list[str]) -> list[int]:
    """Processes of this user whose command line is exactly argv."""
    wanted = "\0".join(argv).encode() + b"\0"
    found = []
    for pid in _all_pids():
        try:
            if Path(f"/proc/{pid}/cmdline").read_bytes() == wanted:
                found.append(pid)
        except OSError:
            continue
    return found


def kill_all(pids: list[int]) -> None:
    """SIGKILL each of pids (the tests' own leftovers, by id)."""
    for pid in pids:
        _kill(pid)


# --- the transports, connected to one of these servers ------------------------------------

LOOPBACK = "127.0.0.1"


def open_master(sshd: Sshd, known_hosts: Path, socket: Path) -> None:
    """What the person does once (here with the test's key; at a site, with MFA)."""
    subprocess.run(
        ["ssh", "-M", "-S", str(socket), "-o", "ControlPersist=yes", "-fN",
         "-o", "BatchMode=yes", "-o", f"UserKnownHostsFile={known_hosts}",
         "-o", "StrictHostKeyChecking=yes", "-i", str(sshd.client_key),
         "-o", "IdentitiesOnly=yes", "-p", str(sshd.port), LOOPBACK],
        check=True,
        timeout=30,
    )  # fmt: skip
    assert socket.exists()


def close_master(socket: Path, port: int) -> None:
    """Stop the ControlMaster behind socket."""
    subprocess.run(
        ["ssh", "-S", str(socket), "-O", "exit", "-p", str(port), LOOPBACK],
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
            LOOPBACK, port=sshd.port, key_file=sshd.client_key, known_hosts=known_hosts
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
            LOOPBACK, control_path=socket, port=sshd.port, known_hosts=known_hosts
        )
    finally:
        close_master(socket, sshd.port)

"""The warm process's wire and its client: a command handed to an already-imported jobsmith.

A one-shot command (`submit`, `sbatch`, `render`, `status`, `wait`, `plan`) spends most of its time
importing jobsmith before it does anything (issue 26: 0.3-0.4 s of a 0.5 s submit on the
lab). After a cold run the entry point (launch.py) leaves one process per user behind,
with those imports done (warmserver.py); the next command connects to it over a Unix
socket only the user can reach and hands over its argv, working directory, environment,
umask and its three standard streams (the file descriptors themselves, SCM_RIGHTS). The
warm process forks a child that takes all of them on and runs the command as a fresh
process would, writing straight to the caller's terminal or pipes; the caller relays
signals to it and exits with its exit status.

Nothing of a run is kept between commands: the child starts from the imports alone. What
a child cannot take from the caller (the interpreter, its flags, PYTHON* and LD_* loader
variables, jobsmith's code, the user and groups, resource limits, control group, CPU
affinity and nice value, file-system encoding) is part of the socket's name (`identity`),
so a caller only ever meets a warm process started under the same; a warm process whose
code changed on disk declines and ends.

The hand-over commits in one place: the child announces its pid and waits for the
caller's go. A caller that never sends it (it timed out, it died) leaves the child to end
without running anything, and runs the command itself; once the go is sent, the command
is the child's, and the caller never runs it again (no duplicate job).

Standard library only: this runs before anything else is imported.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import socket
import stat
import struct
import sys
from collections.abc import Callable
from pathlib import Path

#: the commands that may run warm: typed many times a day, each one thing, then the
#: process ends (cli._ONE_SHOT, `plan` check/run/status, and `wait`, which may wait long:
#: signals are relayed)
WARM_COMMANDS = frozenset({"submit", "sbatch", "render", "status", "wait", "plan"})

#: the wire's version, in every header (a warm process of another version declines)
VERSION = 1
#: the signals a caller passes on to the child running its command
RELAYED = ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2")
#: variables that change what the interpreter loads, or how: a caller with other values
#: than the warm process's would not have run the same code
_LOADER_VARS = ("PYTHON", "LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT")
#: seconds a caller waits for a warm process to take its command before running it itself
HANDOVER_TIMEOUT_S = 3.0
#: the exit status when the child vanished without one (as a shell reports SIGKILL)
VANISHED = 128 + 9


def command_of(argv: list[str]) -> str | None:
    """The command argv names, past the root's one option (`--site FILE`); None where
    anything else comes first (the root's --help, --version, a typo: run cold)."""
    rest = argv
    while rest and rest[0].startswith("--site"):
        rest = rest[1:] if rest[0].startswith("--site=") else rest[2:]
    return rest[0] if rest else None


def wanted(environ: os._Environ[str] | dict[str, str]) -> bool:
    """True unless the user turned it off (JOBSMITH_WARM=0), or coverage measures the run
    (a forked child would write the warm process's coverage data, not its own)."""
    off = environ.get("JOBSMITH_WARM", "").strip().lower() in ("0", "no", "off", "false")
    measured = "COVERAGE_PROCESS_START" in environ or "COVERAGE_PROCESS_CONFIG" in environ
    return not off and not measured


#: the longest path a Unix socket can be bound to (sun_path's 108 bytes, one the NUL)
_SOCKET_PATH_MAX = 107
#: a socket's name in the directory: identity()'s 24 hex digits and ".sock"
_SOCKET_NAME_LEN = 29


def directory(environ: os._Environ[str] | dict[str, str]) -> Path | None:
    """The user's private directory for warm sockets, made if missing; None where none is
    safe (not ours, reachable by others, a symlink): then every command runs cold.
    A directory too deep for a Unix socket's path (a long JOBSMITH_WARM_DIR or
    XDG_RUNTIME_DIR) gives way to /tmp's: its warm process could never listen there."""
    fallback = Path("/tmp") / f"jobsmith-warm-{os.getuid()}"  # /tmp is per login node
    base = environ.get("JOBSMITH_WARM_DIR")
    if base:
        path = Path(base)
    elif environ.get("XDG_RUNTIME_DIR"):
        path = Path(environ["XDG_RUNTIME_DIR"]) / "jobsmith"
    else:
        path = fallback
    if len(os.fsencode(path)) + 1 + _SOCKET_NAME_LEN > _SOCKET_PATH_MAX:
        path = fallback
    try:
        path.mkdir(mode=0o700, exist_ok=True)
        st = path.lstat()
    except OSError:
        return None
    private = stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o077
    return path if private else None


def identity(package_dir: str, version: str) -> str:
    """What a warm process must share with its caller, hashed into the socket's name."""
    import resource

    limits = sorted(n for n in dir(resource) if n.startswith("RLIMIT_"))
    try:
        cgroup = Path("/proc/self/cgroup").read_text()
    except OSError:
        cgroup = ""
    parts = [
        str(VERSION), sys.executable, sys.version, repr(sys.flags), package_dir, version,
        repr(sorted((k, v) for k, v in os.environ.items() if k.startswith(_LOADER_VARS))),
        repr((os.getuid(), os.geteuid(), os.getgid(), os.getegid(), sorted(os.getgroups()))),
        repr([resource.getrlimit(getattr(resource, n)) for n in limits]),
        cgroup, sys.getfilesystemencoding(), sys.getfilesystemencodeerrors(),
        repr((sorted(os.sched_getaffinity(0)), os.getpriority(os.PRIO_PROCESS, 0))),
    ]  # fmt: skip
    return hashlib.sha256("\0".join(parts).encode("utf-8", "surrogateescape")).hexdigest()[:24]


def package_dir() -> str:
    """The jobsmith package this process imported (a checkout's or an install's)."""
    return os.path.realpath(os.path.dirname(os.path.dirname(os.path.dirname(__file__))))


def socket_path(where: Path, key: str) -> Path:
    return where / f"{key}.sock"


def _stream(s: object) -> list[object]:
    return [
        getattr(s, "encoding", None),
        getattr(s, "errors", None),
        bool(getattr(s, "line_buffering", False)),
        bool(getattr(s, "write_through", False)),
    ]


def header(argv: list[str]) -> bytes:
    """The command as the warm process needs it (JSON; surrogates of undecodable bytes
    in argv or the environment are kept as escapes and come back as they were)."""
    doc = {
        "version": VERSION,
        "argv0": sys.argv[0],
        "argv": argv,
        "cwd": os.getcwd(),
        "env": dict(os.environ),
        "umask": _umask(),
        "streams": [_stream(sys.stdin), _stream(sys.stdout), _stream(sys.stderr)],
        "ignored": ignored_signals(),
    }
    return json.dumps(doc).encode("ascii")


def ignored_signals() -> list[str]:
    """The relayed signals this process ignores (a shell's background job ignores SIGINT,
    `nohup` SIGHUP): the child ignores them too, and the caller does not relay them, as
    a cold process would have gone on through them."""
    import signal

    return [name for name in RELAYED if signal.getsignal(getattr(signal, name)) == signal.SIG_IGN]


def _umask() -> int:
    mask = os.umask(0o077)
    os.umask(mask)
    return mask


def send_message(conn: socket.socket, doc: dict[str, object]) -> None:
    conn.sendall(json.dumps(doc).encode("ascii") + b"\n")


class Replies:
    """The newline-separated JSON documents coming back on the connection."""

    def __init__(self, conn: socket.socket) -> None:
        self._conn = conn
        self._buf = b""

    def next(self) -> dict[str, object] | None:
        """The next document, or None at the end of the connection."""
        while b"\n" not in self._buf:
            chunk = self._conn.recv(4096)
            if not chunk:
                return None
            self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        doc = json.loads(line)
        return doc if isinstance(doc, dict) else None


def run_warm(argv: list[str], path: Path) -> int | None:
    """Run the command in the warm process at path: its exit status, or None where no warm
    process took it (none there, it declined, it did not answer in time): then nothing
    ran, and the caller runs it itself."""
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.settimeout(HANDOVER_TIMEOUT_S)
        conn.connect(str(path))
        data = header(argv)
        sent = socket.send_fds(conn, [struct.pack("!I", len(data)) + data], [0, 1, 2])
        conn.sendall((struct.pack("!I", len(data)) + data)[sent:])
        replies = Replies(conn)
        first = replies.next()
        pid = first.get("pid") if first else None
        if not isinstance(pid, int) or pid <= 1:
            return None  # declined (stale code, another version), or gone
        conn.sendall(b"go\n")
    except (OSError, ValueError):
        conn.close()
        return None
    # The command is the child's now: whatever happens, it is not run again here.
    return _follow(conn, replies, pid)


def _die_by(signum: int) -> int:
    """End by signum, as the child did (the shell then reports what it would have of a cold
    process); where it cannot end this process, the shell's figure for it."""
    import signal

    sys.stdout.flush()
    with contextlib.suppress(OSError, ValueError):  # SIGKILL's cannot be set, nor need be
        signal.signal(signum, signal.SIG_DFL)
    with contextlib.suppress(OSError):
        os.kill(os.getpid(), signum)
    return 128 + signum


def _follow(conn: socket.socket, replies: Replies, pid: int) -> int:
    import signal

    relayed: list[int] = []

    def relay(signum: int, _frame: object) -> None:
        relayed.append(signum)
        with contextlib.suppress(OSError):
            os.kill(pid, signum)

    previous: dict[int, Callable[[int, object], None] | int | None] = {}
    ignored = ignored_signals()
    for name in RELAYED:
        if name not in ignored:
            sig = getattr(signal, name)
            previous[sig] = signal.signal(sig, relay)  # type: ignore[assignment]
    try:
        conn.settimeout(None)
        while True:
            try:
                doc = replies.next()
            except InterruptedError:
                continue
            except (OSError, ValueError):
                doc = None
            if doc is None and relayed and relayed[-1] != signal.SIGINT:
                # the child ended by the signal passed on (and the warm process, which
                # would have said so, is gone): end by it too, as the shell would have
                # seen a cold process end (SIGINT is a KeyboardInterrupt there)
                return _die_by(relayed[-1])
            if doc is None:
                print(
                    f"jobsmith: the warm process's child {pid} ended without an exit status "
                    "(killed?); set JOBSMITH_WARM=0 to run commands in their own process",
                    file=sys.stderr,
                )
                return VANISHED
            code = doc.get("exit")
            if isinstance(code, int):
                return code
            killed = doc.get("signal")  # from the warm process, which reaped the child
            if isinstance(killed, int) and 0 < killed < 65:
                return _die_by(killed)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        conn.close()

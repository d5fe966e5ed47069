"""The warm process: jobsmith imported once, a fresh child per command (see warm.py).

Started by launch.py after a cold run, detached (its own session, standard streams on
/dev/null, working directory /), as `python -m jobsmith.agent.faces.warmserver KEY PATH`.
It stops listening after JOBSMITH_WARM_IDLE_S seconds without a command (600), when a
module it imported changed on disk, or when its socket is no longer its own, and ends when
its last child has. One per key: a lock beside the socket keeps a second from starting
(released when it stops listening, so a long `wait` keeps no new one from starting).

The child of each command takes on the caller's argv, working directory, environment,
umask and standard streams, announces its pid, and runs the command only after the
caller's go. Everything the child cannot take on is in the key (warm.identity), which
the warm process checks against its own before it listens. The warm process keeps each
child's connection until it has reaped the child, and then tells the caller how the child
ended: its exit status, or the signal that killed it (a child the kernel kills, SIGKILL
or the OOM killer, says nothing itself), so the caller ends as a cold process would have.
"""

from __future__ import annotations

import contextlib
import fcntl
import gc
import importlib
import io
import json
import os
import select
import signal
import socket
import struct
import sys
import time
from pathlib import Path
from typing import Any

from jobsmith import __version__
from jobsmith.agent.faces import warm

#: what the warm commands import (measured: the union of the jobsmith modules after a
#: submit with and without advice, a dry run, sbatch, render, status, wait and plan
#: check/run/status; a test
#: checks a warm submit imports nothing more)
WARMED = (
    "jobsmith.adapters.capabilities",
    "jobsmith.adapters.connection",
    "jobsmith.adapters.environment_rule",
    "jobsmith.adapters.files_there",
    "jobsmith.adapters.hostlist",
    "jobsmith.adapters.jobid",
    "jobsmith.adapters.login_tools",
    "jobsmith.adapters.options",
    "jobsmith.adapters.records",
    "jobsmith.adapters.scheduler",
    "jobsmith.adapters.slurm.commands.argv",
    "jobsmith.adapters.slurm.commands.logpaths",
    "jobsmith.adapters.slurm.commands.options",
    "jobsmith.adapters.slurm.commands.sbatch_script",
    "jobsmith.adapters.slurm.commands.slurmenv",
    "jobsmith.adapters.slurm.inflight",
    "jobsmith.adapters.slurm.parsing.accounting",
    "jobsmith.adapters.slurm.parsing.facts",
    "jobsmith.adapters.slurm.parsing.offers",
    "jobsmith.adapters.slurm.parsing.parse",
    "jobsmith.adapters.slurm.parsing.qoslimits",
    "jobsmith.adapters.slurm.parsing.states",
    "jobsmith.adapters.slurm.parsing.status",
    "jobsmith.adapters.slurm.remembered",
    "jobsmith.adapters.slurm.scheduler",
    "jobsmith.adapters.slurm.transport",
    "jobsmith.adapters.states",
    "jobsmith.adapters.transport",
    "jobsmith.adapters.workflow",
    "jobsmith.agent.app",
    "jobsmith.agent.diagnosis.table",
    "jobsmith.agent.faces.cli",
    "jobsmith.agent.runtime.blocklist.attribution",
    "jobsmith.agent.runtime.blocklist.exclude",
    "jobsmith.agent.runtime.blocklist.store",
    "jobsmith.agent.runtime.documents",
    "jobsmith.agent.runtime.glancefacts",
    "jobsmith.agent.runtime.logs",
    "jobsmith.agent.runtime.recovery.rerun",
    "jobsmith.agent.runtime.recovery.standin",
    "jobsmith.agent.runtime.requeues",
    "jobsmith.agent.runtime.session.claims",
    "jobsmith.agent.runtime.session.events",
    "jobsmith.agent.runtime.session.jobstate",
    "jobsmith.agent.runtime.session.lastpoll",
    "jobsmith.agent.runtime.session.ledger",
    "jobsmith.agent.runtime.session.payloads",
    "jobsmith.agent.runtime.session.readmodel",
    "jobsmith.agent.runtime.session.session_log",
    "jobsmith.agent.runtime.session.store",
    "jobsmith.agent.runtime.session.unseen",
    "jobsmith.agent.runtime.staging",
    "jobsmith.agent.runtime.submission.accepted",
    "jobsmith.agent.runtime.submission.advising.advice",
    "jobsmith.agent.runtime.submission.advising.estimates",
    "jobsmith.agent.runtime.submission.advising.sizing",
    "jobsmith.agent.runtime.submission.approval.approvals",
    "jobsmith.agent.runtime.submission.executor",
    "jobsmith.agent.runtime.submission.hashing",
    "jobsmith.agent.runtime.submission.judging.judge",
    "jobsmith.agent.runtime.submission.judging.policy",
    "jobsmith.agent.runtime.submission.onestep",
    "jobsmith.agent.runtime.submission.orders",
    "jobsmith.agent.runtime.submission.request.checkpoint",
    "jobsmith.agent.runtime.submission.request.jobs",
    "jobsmith.agent.runtime.submission.request.user_scripts",
    "jobsmith.agent.runtime.submission.steps",
    "jobsmith.agent.runtime.window",
    "jobsmith.agent.runtime.workflows.feeding.followers",
    "jobsmith.agent.runtime.workflows.feeding.index",
    "jobsmith.agent.runtime.workflows.feeding.progress",
    "jobsmith.agent.runtime.workflows.feeding.record",
    "jobsmith.agent.runtime.workflows.feeding.reference",
    "jobsmith.agent.runtime.workflows.feeding.split",
    "jobsmith.agent.runtime.workflows.pipelinerun",
    "jobsmith.agent.runtime.workflows.pipelines",
    "jobsmith.agent.runtime.workflows.planrun",
    "jobsmith.agent.runtime.workflows.plans",
    "jobsmith.agent.runtime.workflows.progress",
    "jobsmith.agent.runtime.workflows.progressread",
    "jobsmith.agent.views.advice",
    "jobsmith.agent.views.glance",
    "jobsmith.agent.views.nodes",
    "jobsmith.agent.views.output",
    "jobsmith.agent.views.render",
    "jobsmith.agent.watcher.news",
    "jobsmith.agent.watcher.pacing",
    "jobsmith.agent.watcher.polling",
    "jobsmith.agent.watcher.waiting",
    "jobsmith.errors",
    "jobsmith.faults",
    "jobsmith.files",
    "jobsmith.job_templates.arrays",
    "jobsmith.job_templates.environment",
    "jobsmith.job_templates.loader",
    "jobsmith.job_templates.params",
    "jobsmith.job_templates.paths",
    "jobsmith.job_templates.quoting",
    "jobsmith.job_templates.render",
    "jobsmith.job_templates.resources",
    "jobsmith.job_templates.spec",
    "jobsmith.job_templates.tables",
    "jobsmith.job_templates.validate",
    "jobsmith.job_templates.values",
    "jobsmith.site_config.ceiling",
    "jobsmith.site_config.diagnostics",
    "jobsmith.site_config.expand",
    "jobsmith.site_config.facts",
    "jobsmith.site_config.fieldtypes",
    "jobsmith.site_config.layers",
    "jobsmith.site_config.loader",
    "jobsmith.site_config.model",
    "jobsmith.site_config.yamlfile",
    "jobsmith.text",
    "jobsmith.textclick",
    "jobsmith.units",
    "jobsmith.workload_caps",
)

#: the most bytes of one command's header (argv, environment): more is declined
MAX_HEADER = 4 << 20
#: seconds a child waits for its caller's go before it ends without running anything
GO_TIMEOUT_S = 10.0


def main(argv: list[str]) -> int:
    key, path = argv[0], Path(argv[1])
    if warm.identity(warm.package_dir(), __version__) != key:
        return 2  # started under another identity than its name says: never listen
    lock = os.open(f"{path}.lock", os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return 0  # another warm process holds this key
    os.ftruncate(lock, 0)
    os.write(lock, f"{os.getpid()}\n".encode())  # who holds it, for `kill` and the tests
    _warm_up()
    watched = _module_times()
    listener = _listen(path)
    idle_s = float(os.environ.get("JOBSMITH_WARM_IDLE_S", "600"))
    children = _Children()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        _serve(listener, path, watched, idle_s, lock, children)
    finally:
        with contextlib.suppress(OSError):
            if _same_socket(path, listener):
                path.unlink()
        listener.close()
        os.close(lock)  # a new warm process may start while the children below finish
    children.drain()  # (not after a SIGTERM: SystemExit passes by)
    return 0


def _warm_up() -> None:
    """Import what the commands import and build what they would build on first use
    (deferred pydantic validators, the step adapter), then freeze it all out of the
    collector, so children neither rebuild it nor touch its pages."""
    from pydantic import BaseModel

    for name in WARMED:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    stack: list[type[BaseModel]] = list(BaseModel.__subclasses__())
    while stack:
        model = stack.pop()
        stack.extend(model.__subclasses__())
        if model.__module__.startswith("jobsmith.") and not model.__pydantic_complete__:
            with contextlib.suppress(Exception):  # one that cannot build now builds later
                model.model_rebuild()
    from jobsmith.agent.runtime.submission.steps import step_adapter

    step_adapter()
    _parse_ahead(os.environ)
    gc.collect()
    gc.freeze()


def _parse_ahead(environ: os._Environ[str]) -> None:
    """Parse the site files and the shipped templates' specs this process can find, so a
    child finds them in parse_yaml's memo (keyed by the text: a file changed since is
    parsed anew by the child, as it would be cold)."""
    from jobsmith.agent.app import UserDirs
    from jobsmith.job_templates.loader import SPEC_SUFFIX, TEMPLATE_SPEC, shipped_library
    from jobsmith.site_config.yamlfile import read_yaml

    dirs = UserDirs.for_user(environ)
    named = [Path(environ["JOBSMITH_SITE"])] if environ.get("JOBSMITH_SITE") else []
    for site in (dirs.system_site_file, *named, dirs.config_dir / "site.yaml"):
        with contextlib.suppress(Exception):  # none there, or broken: the child says so
            read_yaml(site)
    for spec in sorted(shipped_library().glob(f"*{SPEC_SUFFIX}")):
        with contextlib.suppress(Exception):
            read_yaml(spec, TEMPLATE_SPEC)


def _module_times() -> dict[str, tuple[int, int, int]]:
    """Each jobsmith module's file as it was imported: an upgrade replaces files (another
    inode), an edit changes the time or size."""
    times = {}
    for name, module in list(sys.modules.items()):
        file = getattr(module, "__file__", None)
        if name.startswith("jobsmith") and file:
            with contextlib.suppress(OSError):
                times[file] = _stamp(file)
    return times


def _stamp(file: str) -> tuple[int, int, int]:
    st = os.stat(file)
    return st.st_mtime_ns, st.st_ino, st.st_size


def _changed(watched: dict[str, tuple[int, int, int]]) -> bool:
    for file, stamp in watched.items():
        try:
            if _stamp(file) != stamp:
                return True
        except OSError:
            return True
    return False


def _listen(path: Path) -> socket.socket:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()  # a dead warm process's socket (the lock says none lives)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)
    try:
        listener.bind(str(path))
    finally:
        os.umask(old)
    listener.listen(16)
    return listener


def _same_socket(path: Path, listener: socket.socket) -> bool:
    return path.exists() and bool(listener.getsockname() == str(path))


class _Children:
    """The running children, each with its caller's connection, kept until it is reaped.

    A child reports its own exit status; one the kernel kills says nothing, and its
    caller would see only the connection close. The warm process, its parent, sees how
    each ended and says it: `{"signal": N}` or `{"exit": CODE}` (after a child's own
    report the caller has gone, and the send fails quietly)."""

    def __init__(self) -> None:
        self._conns: dict[int, socket.socket] = {}
        self._wake_r, self._wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        # SIGCHLD writes to the pipe, which the serving loop selects on (PEP 475: a
        # Python handler alone would not wake select)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.set_wakeup_fd(self._wake_w, warn_on_full_buffer=False)

    @property
    def wakeup(self) -> int:
        return self._wake_r

    def add(self, pid: int, conn: socket.socket) -> None:
        self._conns[pid] = conn

    def in_child(self) -> None:
        """In a new child: none of this is its own (another caller's connection kept open
        in it would keep that caller from seeing its own command's end)."""
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        os.close(self._wake_r)
        os.close(self._wake_w)
        for conn in self._conns.values():
            conn.close()
        self._conns.clear()

    def reap(self, *, block: bool = False) -> None:
        with contextlib.suppress(BlockingIOError):
            while os.read(self._wake_r, 512):
                pass
        while self._conns:
            try:
                pid, status = os.waitpid(-1, 0 if block else os.WNOHANG)
            except ChildProcessError:  # none left (reaped elsewhere): nothing to tell
                for gone in self._conns.values():
                    gone.close()
                self._conns.clear()
                return
            if pid == 0:
                return
            conn = self._conns.pop(pid, None)
            if conn is not None:
                with contextlib.suppress(OSError):
                    warm.send_message(conn, _ending(status))
                conn.close()

    def drain(self) -> None:
        """Wait for every child, telling each caller how its command ended."""
        self.reap(block=True)


def _ending(status: int) -> dict[str, object]:
    if os.WIFSIGNALED(status):
        return {"signal": os.WTERMSIG(status)}
    return {"exit": os.waitstatus_to_exitcode(status) & 0xFF}


def _serve(
    listener: socket.socket,
    path: Path,
    watched: dict[str, tuple[int, int, int]],
    idle_s: float,
    lock: int,
    children: _Children,
) -> None:
    deadline = time.monotonic() + idle_s
    while True:
        children.reap()
        left = deadline - time.monotonic()
        if left <= 0 or not path.exists():
            return
        try:
            watched_fds = [listener.fileno(), children.wakeup]
            ready, _, _ = select.select(watched_fds, [], [], min(left, 30.0))
        except InterruptedError:
            continue
        if listener.fileno() not in ready:
            continue
        conn, _ = listener.accept()
        if not _ours(conn):
            conn.close()
            continue
        if _changed(watched):
            with contextlib.suppress(OSError):
                warm.send_message(conn, {"declined": "jobsmith changed on disk"})
            conn.close()
            return
        received = _receive(conn)
        if received is None:
            conn.close()
            continue
        doc, fds = received
        deadline = time.monotonic() + idle_s
        pid = os.fork()
        if pid == 0:
            # the child keeps neither the socket nor the lock: a long `wait` must not
            # keep the next warm process from starting after this one ends
            listener.close()
            os.close(lock)
            children.in_child()
            os._exit(_child(conn, doc, fds))
        children.add(pid, conn)
        for fd in fds:
            os.close(fd)


def _ours(conn: socket.socket) -> bool:
    """Only the user who started the warm process may hand it a command."""
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _pid, uid, _gid = struct.unpack("3i", creds)
    return bool(uid == os.getuid())


def _receive(conn: socket.socket) -> tuple[dict[str, Any], list[int]] | None:
    """The caller's header and its three streams, or None (declined, fds closed)."""
    fds: list[int] = []
    try:
        conn.settimeout(warm.HANDOVER_TIMEOUT_S)
        data, fds, _flags, _addr = socket.recv_fds(conn, 65536, 3)
        while len(data) < 4:
            data += _recv_some(conn)
        (size,) = struct.unpack("!I", data[:4])
        if size > MAX_HEADER:
            raise ValueError(f"header of {size} bytes")
        while len(data) < 4 + size:
            data += _recv_some(conn)
        doc = json.loads(data[4 : 4 + size])
        if len(fds) != 3 or not isinstance(doc, dict) or doc.get("version") != warm.VERSION:
            raise ValueError("not a command of this version")
        return doc, fds
    except (OSError, ValueError):
        for fd in fds:
            os.close(fd)
        with contextlib.suppress(OSError):
            warm.send_message(conn, {"declined": "unreadable command"})
        return None


def _recv_some(conn: socket.socket) -> bytes:
    chunk = conn.recv(65536)
    if not chunk:
        raise ValueError("the caller hung up")
    return chunk


def _child(conn: socket.socket, doc: dict[str, Any], fds: list[int]) -> int:
    """In the forked child: announce, wait for go, become the caller's process, run."""
    _dispositions(doc.get("ignored") or [])
    try:
        warm.send_message(conn, {"pid": os.getpid()})
        conn.settimeout(GO_TIMEOUT_S)
        if conn.recv(3) != b"go\n":
            return 0  # the caller runs it itself, or is gone: nothing ran here
        conn.settimeout(None)
        _become(doc, fds)
    except (OSError, ValueError):
        return 0
    code = _run(doc)
    with contextlib.suppress(OSError):
        warm.send_message(conn, {"exit": code})
    return code


def _dispositions(ignored: list[str]) -> None:
    """The relayed signals as a fresh Python started by the caller has them: what the
    caller ignores ignored (it inherited that), SIGINT else KeyboardInterrupt, the rest
    the default."""
    for name in warm.RELAYED:
        sig = getattr(signal, name)
        if name in ignored:
            signal.signal(sig, signal.SIG_IGN)
        elif sig == signal.SIGINT:
            signal.signal(sig, signal.default_int_handler)
        else:
            signal.signal(sig, signal.SIG_DFL)


def _become(doc: dict[str, Any], fds: list[int]) -> None:
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(doc["cwd"])
    os.umask(int(doc["umask"]))
    os.environ.clear()
    os.environ.update({str(k): str(v) for k, v in doc["env"].items()})
    sys.argv = [str(doc["argv0"]), *map(str, doc["argv"])]
    streams = doc["streams"]
    # (sys.__stdout__ & co. stay: they are on fds 0-2 too, which now are the caller's)
    sys.stdin = _text(0, "r", streams[0])
    sys.stdout = _text(1, "w", streams[1])
    sys.stderr = _text(2, "w", streams[2])


def _text(fd: int, mode: str, spec: list[Any]) -> io.TextIOWrapper:
    """A standard stream on fd, as the caller's Python had it."""
    encoding, errors, line_buffering, write_through = spec
    raw = io.FileIO(fd, mode, closefd=False)
    buffered: io.BufferedReader | io.BufferedWriter = (
        io.BufferedReader(raw) if mode == "r" else io.BufferedWriter(raw)
    )
    return io.TextIOWrapper(
        buffered,
        encoding=encoding or "utf-8",
        errors=errors or "strict",
        line_buffering=bool(line_buffering),
        write_through=bool(write_through),
    )


def _run(doc: dict[str, Any]) -> int:
    """The command, as `jobsmith ARGV` would run it; its exit status as the shell sees it."""
    from jobsmith.agent.faces.cli import main as cli_main

    code: int
    try:
        cli_main()
        code = 0
    except SystemExit as exit_:
        if exit_.code is None:
            code = 0
        elif isinstance(exit_.code, int):
            code = exit_.code
        else:
            print(exit_.code, file=sys.stderr)
            code = 1
    except BaseException:  # as the interpreter reports an uncaught one
        sys.excepthook(*sys.exc_info())
        code = 1
    # as the interpreter ends: its threads first (a cold process waits for every
    # non-daemon thread before it exits), then the atexit functions
    import threading

    for thread in threading.enumerate():
        if thread is not threading.main_thread() and not thread.daemon:
            thread.join()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    import atexit

    atexit._run_exitfuncs()
    return code & 0xFF


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

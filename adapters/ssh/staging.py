"""Staging: a file copied between the laptop and the cluster over the connection the
transport already holds (issue 29 item 3).

Over SSH the job's files are the cluster's (docs/ssh.md), so a file that is only on the
laptop must be copied there first, and a result copied back. The copy rides the
transport's own connection, so it needs no second login (no second MFA prompt):

- `openssh`: rsync, its remote shell the system's ssh through the ControlMaster socket
  (`rsync -e 'ssh -S SOCKET -o ControlMaster=no -o BatchMode=yes …'`). An interrupted copy
  leaves what arrived in `.jobsmith-partial/` beside the target (`--partial-dir`), and the
  next copy sends only what that lacks (rsync's delta transfer against it); a whole file
  already there (same size and modification time: rsync's quick check, `-t`) is not sent
  again. rsync checks every file it transferred against a whole-file checksum of the
  source, and the size is compared after. `-s` sends the paths inside rsync's protocol,
  never through the remote shell, so any name arrives as it is.
  A new file of STREAM_FROM bytes or more (neither it nor a partial copy is there) goes
  as a plain stream instead, `cat` into that same partial file through the master. Once
  all its bytes arrived, POSIX `cksum` of the copy there must equal the laptop's (run
  while it streamed); then it is renamed over the target and given the laptop's
  modification time, so a later put finds it whole by rsync's quick check. Why: rsync's
  processes on each end cost a CPU-bound link (benchmarks/bench_staging.py) 1.4-2x what
  one stream costs, and a new file gains nothing from the delta algorithm; cksum's CRC
  reads a GiB in 0.3 s where sha256sum takes 4 s (the link's own MAC already guards the
  bytes in transit). A stream cut off, or a copy whose CRC differs, leaves its bytes
  where rsync's `--partial-dir` looks, so rsync resumes or mends it; a login node (or a
  laptop) without one of the tools the stream needs gets rsync alone.
- `ssh` (paramiko): SFTP over the transport's paramiko connection. The copy goes to
  `NAME.jobsmith-partial` beside the target and is renamed over it when whole; an
  interrupted copy resumes by appending from the partial file's size; after the copy the
  cluster's `sha256sum` of it must equal the laptop's (computed while sending), else it is
  copied once more from the start. A target already there with the same size and sha256
  is not sent again.

Both refuse a remote path outside the site's allowed roots as the cluster resolves it
(files_there.py answers, job_templates/paths.py's one rule judges), naming the path, where
it leads there and the login node; the remote directory is made there. On the laptop a
fetched file lands in the directory asked for, never through a symlink out of it.

A directory is got file by file (`Stager.tree`, then `get_tree`): what is below it is
listed and resolved there in one command (files_there.py's `tree`), at most
MAX_TREE_FILES files (more is refused naming the limit, so a huge directory is no
surprise), each file judged by get's rule before the first is copied, and copied below
DIR/NAME here keeping its path below the directory, no symlink here on the way. What
crossed the link is counted (`Copied.transferred`: rsync's `--stats`, or the bytes SFTP
wrote), so a resumed copy shows it did not start over.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import re
import shlex
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Protocol

from jobsmith.adapters.files_there import FilesThere
from jobsmith.adapters.login_tools import ToolMissing, checked_sh, named_missing, need_sh
from jobsmith.errors import ConfigError, InputError, PolicyError, SchedulerUnavailable
from jobsmith.job_templates.params import PathKind
from jobsmith.job_templates.paths import PathFact, PathPolicy, inside

if TYPE_CHECKING:
    from jobsmith.adapters.ssh.openssh import OpenSshTransport
    from jobsmith.adapters.ssh.transport import ParamikoTransport
    from jobsmith.adapters.transport import Transport

#: (bytes done, bytes in all) of the file being copied, called as the copy goes
Progress = Callable[[int, int], None]
#: the directory (rsync) or suffix (SFTP) an interrupted copy's bytes wait in
PARTIAL = ".jobsmith-partial"
#: seconds without a byte moving before a copy is given up (rsync --timeout)
IO_TIMEOUT_S = 60
_CHUNK = 32768  # paramiko's largest SFTP write
_HASH_RATE = 20 << 20  # bytes a second sha256sum is at least given on the cluster


class CopyFailed(SchedulerUnavailable):
    """A copy to or from the cluster was cut off or did not verify; running it again
    resumes it (exit 5, like any answer the cluster did not give)."""


class NothingToStage(InputError):
    """put/get on a site whose Slurm runs on this host: its files are this host's."""


@dataclass(frozen=True)
class Copied:
    """One file copied (or found already there)."""

    source: str
    target: str
    size: int
    #: bytes that crossed the link for it this time (0: it was already there, whole)
    transferred: int
    #: how: rsync or sftp
    via: str


class Copier(Protocol):
    """Copies one file over the transport's connection; paths already checked."""

    def upload(self, local: Path, remote: Path, progress: Progress) -> Copied:
        """local (a regular file here) to remote (a file path there)."""
        ...

    def download(self, remote: Path, local: Path, progress: Progress) -> Copied:
        """remote (a regular file there) to local (a file path here)."""
        ...


def copier_for(kind: str, transport: Transport, bwlimit_kbps: int = 0) -> Copier:
    """The copier of a site reached by `kind` (the site's scheduler.kind) over transport;
    NothingToStage for a local site. bwlimit_kbps: at most this many KiB a second (0: no
    limit)."""
    if kind == "openssh":
        from jobsmith.adapters.ssh.openssh import OpenSshTransport

        assert isinstance(transport, OpenSshTransport)
        return RsyncCopier(transport, bwlimit_kbps)
    if kind == "ssh":
        from jobsmith.adapters.ssh.transport import ParamikoTransport

        assert isinstance(transport, ParamikoTransport)
        return SftpCopier(transport, bwlimit_kbps)
    raise NothingToStage(
        "nothing to stage: this site's Slurm runs on this host (scheduler.kind: local), "
        "so the job's files are this host's; put and get copy to and from a cluster "
        "reached over SSH"
    )


#: a directory got with more files than this below it is refused, naming the limit
MAX_TREE_FILES = 1000
#: what a caller gives to follow each file of a tree: its path here, answering a Progress
Following = Callable[[str], Progress]


class TooManyFiles(InputError):
    """A directory to get holds more files than one get copies (MAX_TREE_FILES)."""


@dataclass(frozen=True)
class Tree:
    """A directory there, listed and checked (Stager.tree): what get_tree copies."""

    #: as asked
    directory: Path
    #: resolved there
    real: Path
    #: each regular file: where it is there (resolved), its path below the directory
    files: tuple[tuple[Path, Path], ...]
    #: what is below it and not got, and why (a symlink to a directory, to nothing)
    skipped: tuple[str, ...]


class Stager:
    """put and get with the paths checked: the remote side inside the site's allowed
    roots as the cluster resolves them, the local side inside the directory asked for."""

    def __init__(self, copier: Copier, files: FilesThere, roots: Sequence[Path]) -> None:
        self._copier = copier
        self._files = files
        self._roots = tuple(roots)

    def put(self, local: Path, remote_dir: Path, progress: Progress) -> Copied:
        """local copied into remote_dir (made there if missing), under its own name."""
        source = local.resolve()
        if not source.is_file():
            raise InputError(f"put: '{local}' is not a regular file on this machine")
        target = remote_dir / source.name
        policy = PathPolicy(self._roots, remote_dir, self._files)
        policy.expect([remote_dir, target])
        policy.resolve(remote_dir, "put --to")
        real = policy.resolve(target, "put")
        if policy.fact(target).found not in ("file", "missing"):
            raise InputError(f"put: '{target}'{self._files.where} is not a regular file")
        self._files.make_dirs(real.parent)
        return self._copier.upload(source, real, progress)

    def get(self, remote: Path, local_dir: Path, progress: Progress) -> Copied:
        """remote (a file there) copied into local_dir (made if missing)."""
        policy = PathPolicy(self._roots, remote.parent, self._files)
        real = policy.resolve(remote, "get")
        policy.require_existing(remote, PathKind.FILE, "get")
        target = local_target(local_dir, Path(real.name))
        return self._copier.download(real, target, progress)

    def tree(self, remote_dir: Path, limit: int = MAX_TREE_FILES) -> Tree:
        """remote_dir (a directory there) listed and checked for get_tree: the regular
        files below it, each by the same rule as get's (inside the allowed roots as the
        cluster resolves it: a symlink there leading out of them is PolicyError naming
        it, before anything is copied), listed and resolved in one command
        (FilesThere.tree); the symlinks that are not to a regular file are skipped, each
        with why. TooManyFiles over limit."""
        policy = PathPolicy(self._roots, remote_dir, self._files)
        real = policy.resolve(remote_dir, "get")
        policy.require_existing(remote_dir, PathKind.DIR, "get")
        listed = self._files.tree(real, limit, PARTIAL)
        where = self._files.where
        if listed is None:
            raise TooManyFiles(
                f"{remote_dir}: a directory of more than {limit} files{where}: not got "
                f"(the limit of one get); get the files you want by name "
                f"(jobsmith get {remote_dir}/NAME …)"
            )
        roots = policy.roots
        files: list[tuple[Path, Path]] = []
        skipped: list[str] = []
        for entry in sorted(listed, key=lambda e: e.path):
            fact = entry.fact
            if fact.real is None or fact.found != "file":
                skipped.append(f"{entry.path}: {_not_a_file(fact)}{where}")
                continue
            if not inside(fact.real, roots):
                shown = ", ".join(str(root) for root in roots) or "(none configured)"
                raise PolicyError(
                    f"get: path '{entry.path}' (resolves to '{fact.real}'){where} is outside "
                    f"the allowed roots: {shown}"
                )
            files.append((fact.real, entry.path.relative_to(real)))
        return Tree(remote_dir, real, tuple(files), tuple(skipped))

    def get_tree(self, tree: Tree, local_dir: Path, follow: Following) -> list[Copied]:
        """tree's files copied below local_dir/NAME (NAME: the directory's own name
        there), keeping their paths below it; every target checked (no symlink here on
        the way, made if missing) before the first is copied. follow: the progress of
        each, given its path below local_dir."""
        base = Path(tree.real.name)
        targets = [local_target(local_dir, base / rel) for _, rel in tree.files]
        return [
            self._copier.download(real, target, follow(str(base / rel)))
            for (real, rel), target in zip(tree.files, targets, strict=True)
        ]


def _not_a_file(fact: PathFact) -> str:
    """Why a listed entry (a symlink: find lists only those and regular files) is not
    got."""
    if fact.real is None:
        return f"cannot resolve it ({fact.problem})"
    if fact.found == "dir":
        return "a symlink to a directory, not followed"
    if fact.found == "missing":
        return f"a symlink to nothing there ('{fact.real}')"
    return f"a symlink to '{fact.real}', not a regular file"


def local_target(local_dir: Path, relative: Path) -> Path:
    """Where a file got lands: local_dir (made if missing, then resolved) / relative,
    each directory on the way made if missing, none of them a symlink, and the file
    itself not a symlink nor anything but a regular file if it is there: PolicyError
    otherwise, so a fetched file never lands outside local_dir."""
    if relative.is_absolute() or not relative.parts or {"..", "."} & set(relative.parts):
        raise PolicyError(f"get: '{relative}' is not a path below '{local_dir}'")
    local_dir.mkdir(parents=True, exist_ok=True)
    here = local_dir.resolve()
    path = here
    for part in relative.parts[:-1]:
        path = path / part
        if path.is_symlink() or (path.exists() and not path.is_dir()):
            raise PolicyError(
                f"get: '{path}' here is a symlink or not a directory (below '{here}'); "
                "remove it or choose another --to"
            )
        path.mkdir(exist_ok=True)
    target = path / relative.parts[-1]
    leads = Path(os.path.realpath(target))  # never raises, a loop included
    if target.is_symlink() or leads != target or (target.exists() and not target.is_file()):
        raise PolicyError(
            f"get: '{target}' here leads out of '{here}' or is not a regular file "
            f"(resolves to '{leads}'); remove it or choose another --to"
        )
    return target


# --- rsync through the ControlMaster ------------------------------------------------------

#: the login node's rsync, run by its login shell (any: sh, tcsh, fish read a single-quoted
#: word alike) after need_sh's check, so a missing one is ToolMissing, not a broken pipe
RSYNC_THERE = f"""sh -c '{need_sh(("rsync",))}; exec rsync "$@"' sh"""
#: a new file this large or larger is streamed (module docstring)
STREAM_FROM = 1 << 20
_STREAM_TOOLS = ("cat", "mv", "stat", "mkdir", "cksum", "touch")
#: the stream's far end: $1 the partial file, $2 the bytes to expect; prints its cksum
#: (after the copy, read back from the page cache: `tee | cksum` during it measured no
#: faster, with one more process on the link's path)
_STREAM_THERE = (
    'set -e; mkdir -p -- "${1%/*}"; cat > "$1"; n=$(stat -c %s -- "$1"); '
    '[ "$n" = "$2" ] || { echo "$n of $2 bytes arrived" >&2; exit 3; }; cksum < "$1"'
)
#: then, the CRCs equal: $1 the partial file renamed to $2, given the time $3
_STREAM_DONE = (
    'set -e; mv -f -- "$1" "$2"; touch -m -d "@$3" -- "$2"; rmdir -- "${1%/*}" 2>/dev/null || :'
)
_STREAM_BLOCK = 8 << 20
_STAT = re.compile(r"^Total bytes (sent|received): ([\d,.]+)", re.MULTILINE)
_NONE_SENT = re.compile(r"^Number of regular files transferred: 0$", re.MULTILINE)
_PROGRESS = re.compile(r"^\s*([\d,.]+)\s+\d+%")


class RsyncCopier:
    """rsync with the master's ssh as its remote shell (module docstring)."""

    def __init__(self, transport: OpenSshTransport, bwlimit_kbps: int = 0) -> None:
        self._transport = transport
        self._bwlimit = bwlimit_kbps

    def upload(self, local: Path, remote: Path, progress: Progress) -> Copied:
        size = local.stat().st_size
        partial = remote.parent / PARTIAL / remote.name  # where rsync's --partial-dir looks
        streamed = 0
        if size >= STREAM_FROM and shutil.which("cksum") and self._new_there(remote, partial):
            # the laptop's own CRC, read while the bytes stream (it reads them from disk too)
            mine = subprocess.Popen(
                ["cksum", "--", str(local)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
            )
            try:
                crc = self._stream(local, partial, size, progress)
                streamed = size  # all of it: else CopyFailed
                ours = mine.communicate()[0] if mine.wait() == 0 else b""
            finally:
                if mine.poll() is None:
                    mine.kill()
                    mine.wait()
            if ours and self._finish(local, partial, remote, crc, ours):
                return Copied(str(local), str(remote), size, streamed, "stream")
            # its CRC differs: rsync mends the partial copy below, by its own checksums
        moved = self._rsync(str(local), self._there(remote), size, progress, "sent")
        there = _remote_size(self._transport, remote)
        if there != size:
            raise CopyFailed(f"put: {remote}{self._where} holds {there} bytes, not {size}")
        return Copied(str(local), str(remote), size, streamed + moved, "rsync")

    def _new_there(self, remote: Path, partial: Path) -> bool:
        """Neither remote nor a partial copy of it is there, and the login node has the
        tools a stream needs (else rsync alone copies it: module docstring)."""
        tools = " && ".join(f"command -v {tool} >/dev/null" for tool in _STREAM_TOOLS)
        script = f'{tools} && ! test -e "$1" && ! test -L "$1" && ! test -e "$2"'
        res = self._transport.run(["sh", "-c", script, "sh", str(remote), str(partial)], timeout=30)
        return res.returncode == 0

    def _finish(self, local: Path, partial: Path, remote: Path, crc: bytes, ours: bytes) -> bool:
        """partial renamed to remote and given local's time, if crc (the far end's cksum
        line) says what ours (local's) does; False, nothing done, if it does not."""
        if crc.split()[:2] != ours.split()[:2]:
            return False
        ns = local.stat().st_mtime_ns
        when = f"{ns // 1_000_000_000}.{ns % 1_000_000_000:09d}"
        argv = ["sh", "-c", _STREAM_DONE, "sh", str(partial), str(remote), when]
        res = self._transport.run(argv, timeout=30)
        if res.returncode != 0:
            raise CopyFailed(
                f"put: {partial}{self._where} arrived whole but could not be renamed to "
                f"{remote} ({res.stderr.strip()[:300] or f'exit {res.returncode}'}); run the "
                "same command again"
            )
        return True

    def _stream(self, local: Path, partial: Path, size: int, progress: Progress) -> bytes:
        """local's bytes streamed into partial there; the far end's cksum line of what
        arrived. A cut-off stream is CopyFailed, its bytes kept."""
        pace = _Pace(self._bwlimit * 1024)
        sent = [0]
        with (
            tempfile.TemporaryFile() as errors,
            tempfile.TemporaryFile() as answer,
            local.open("rb") as source,
        ):
            argv = ["sh", "-c", _STREAM_THERE, "sh", str(partial), str(size)]
            # unpaced on Linux, ssh reads the file itself (no pipe, no copy through here:
            # a GiB in half the time) and how far it got is its read offset
            direct = not pace.rate and _offset_of(os.getpid(), source.fileno()) is not None
            proc = self._transport.start(argv, answer, errors, source if direct else None)
            stall = _Stall(proc, sent)
            cut: OSError | None = None
            try:
                if direct:
                    _follow_reads(proc, size, sent, progress)
                else:
                    assert proc.stdin is not None
                    try:
                        _pour(source, proc.stdin, size, sent, pace, progress)
                    except OSError as exc:
                        cut = exc  # the far end went away, or the file shrank: said below
                    with contextlib.suppress(OSError):
                        proc.stdin.close()  # the end of input: the far end checks the count
                proc.wait()  # bounded: _Stall ends it once nothing moves
            finally:
                stall.stop()
                if proc.poll() is None:
                    proc.terminate()  # Ctrl-C or a bug here: what arrived is kept there
                    proc.wait()
            errors.seek(0)
            said = " ".join(errors.read().decode(errors="replace").split())[-400:]
            answer.seek(0)
            crc = answer.read(4096)
        tool = named_missing(said) if proc.returncode else None
        if tool is not None:
            raise ToolMissing(tool, self._transport.where)
        if proc.returncode != 0 or cut is not None:
            why = f"nothing moved for {IO_TIMEOUT_S} s" if stall.fired else said or str(cut)
            raise CopyFailed(
                f"put: streaming {local} to {partial}{self._where} failed after {sent[0]} of "
                f"{size} bytes (exit {proc.returncode}: {why}); what arrived is kept, run the "
                "same command again to resume"
            )
        return crc

    def download(self, remote: Path, local: Path, progress: Progress) -> Copied:
        size = _remote_size(self._transport, remote)
        moved = self._rsync(self._there(remote), str(local), size, progress, "received")
        if local.stat().st_size != size:
            raise CopyFailed(f"get: {local} holds {local.stat().st_size} bytes, not {size}")
        return Copied(str(remote), str(local), size, moved, "rsync")

    @property
    def _where(self) -> str:
        return f" on {self._transport.where}"

    def _there(self, remote: Path) -> str:
        return f"{self._transport.host}:{remote}"

    def argv(self, source: str, target: str) -> list[str]:
        """The rsync command line: one file, resumable, its times kept, its counts told."""
        shell = " ".join(shlex.quote(a) for a in self._transport.client_argv(with_host=False))
        argv = ["rsync", "-s", "-t", f"--partial-dir={PARTIAL}", f"--timeout={IO_TIMEOUT_S}"]
        argv += ["--info=progress2", "--stats", "--no-motd", "-e", shell]
        argv.append(f"--rsync-path={RSYNC_THERE}")
        if self._bwlimit:
            argv.append(f"--bwlimit={self._bwlimit}")
        return [*argv, "--", source, target]

    def _rsync(self, source: str, target: str, size: int, progress: Progress, way: str) -> int:
        """Run rsync, telling progress; the bytes it counted going `way` (sent, received)."""
        from jobsmith.adapters.ssh.openssh import ssh_environment

        self._transport.require_master()
        if shutil.which("rsync") is None:
            raise ConfigError(
                "copying over scheduler.kind openssh needs rsync on this machine (and on the "
                "login node): install it (e.g. apt install rsync), or use kind ssh (SFTP)"
            )
        with tempfile.TemporaryFile() as errors:
            proc = subprocess.Popen(
                self.argv(source, target),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=errors,
                env={**ssh_environment(), "LC_ALL": "C"},  # its counts as 1,234 (--stats)
            )
            try:
                out = follow(proc.stdout, size, progress)
            finally:
                if proc.poll() is None:
                    proc.terminate()  # Ctrl-C or a bug here: rsync keeps what arrived
                proc.wait()
            errors.seek(0)
            text = errors.read().decode(errors="replace")
            said = " ".join(text.split())[-400:]
        tool = named_missing(text) if proc.returncode != 0 else None
        if tool is not None:
            raise ToolMissing(tool, self._transport.where)
        if proc.returncode != 0:
            raise CopyFailed(
                f"rsync {source} {target} failed (exit {proc.returncode}: {said or 'no message'})"
                f"; what arrived is kept, run the same command again to resume"
            )
        return moved(out, way)


def _pour(
    source: IO[bytes], pipe: IO[bytes], size: int, sent: list[int], pace: _Pace, progress: Progress
) -> None:
    """source's size bytes into pipe, counted in sent[0] as they go, at pace's rate (the
    paced stream: unpaced, ssh reads the file itself, RsyncCopier._stream)."""
    block = min(_STREAM_BLOCK, max(pace.rate // 10, 1 << 16)) if pace.rate else _STREAM_BLOCK
    while sent[0] < size:
        data = source.read(min(block, size - sent[0]))
        if not data:
            raise OSError(errno.EIO, f"{source.name} ended early (changed while being sent)")
        pipe.write(data)
        pipe.flush()
        sent[0] += len(data)
        pace.wait(sent[0])
        progress(sent[0], size)


def _offset_of(pid: int, fd: int) -> int | None:
    """The file offset of pid's fd (Linux's /proc/PID/fdinfo), or None where unknown."""
    try:
        with open(f"/proc/{pid}/fdinfo/{fd}") as info:
            for line in info:
                if line.startswith("pos:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


def _follow_reads(
    proc: subprocess.Popen[bytes], size: int, sent: list[int], progress: Progress
) -> None:
    """Until proc (an ssh reading its stdin, the file) ends: how far it read, counted in
    sent[0] and told every half second."""
    while proc.poll() is None:
        done = _offset_of(proc.pid, 0)
        if done is not None and done != sent[0]:
            sent[0] = min(done, size)
            progress(sent[0], size)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=0.5)
    if proc.returncode == 0:
        sent[0] = size
        progress(size, size)


class _Stall:
    """Ends proc when sent[0] has not moved for IO_TIMEOUT_S (a copy that hangs, as
    rsync's --timeout ends one); `fired` says it did."""

    def __init__(self, proc: subprocess.Popen[bytes], sent: list[int]) -> None:
        self.fired = False
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, args=(proc, sent), daemon=True)
        self._thread.start()

    def _watch(self, proc: subprocess.Popen[bytes], sent: list[int]) -> None:
        seen, since = -1, time.monotonic()
        while not self._done.wait(1.0):
            if sent[0] != seen:
                seen, since = sent[0], time.monotonic()
            elif time.monotonic() - since > IO_TIMEOUT_S and proc.poll() is None:
                self.fired = True
                proc.kill()  # the blocked write then fails: the copy ends as cut off

    def stop(self) -> None:
        self._done.set()
        self._thread.join()


def moved(stats: str, way: str) -> int:
    """The bytes rsync's --stats counted going `way` (sent, received); 0 when it
    transferred no file (already there, whole: only the file list went)."""
    if _NONE_SENT.search(stats):
        return 0
    counts = dict(_STAT.findall(stats))
    return int(re.sub(r"[,.]", "", counts.get(way, "0")))


def follow(stream: IO[bytes] | None, size: int, progress: Progress) -> str:
    """rsync's stdout read to its end, each progress2 update told; the text after them."""
    assert stream is not None
    text, pending = [], b""
    while chunk := os.read(stream.fileno(), 65536):
        pending += chunk
        *lines, pending = re.split(rb"[\r\n]", pending)
        for raw in lines:
            line = raw.decode(errors="replace")
            match = _PROGRESS.match(line)
            if match:
                progress(min(int(re.sub(r"[,.]", "", match[1])), size), size)
            else:
                text.append(line)
    text.append(pending.decode(errors="replace"))
    return "\n".join(text)


# --- SFTP over the paramiko connection ----------------------------------------------------


class SftpCopier:
    """SFTP on the paramiko transport's connection (module docstring)."""

    def __init__(self, transport: ParamikoTransport, bwlimit_kbps: int = 0) -> None:
        self._transport = transport
        self._rate = bwlimit_kbps * 1024

    def upload(self, local: Path, remote: Path, progress: Progress) -> Copied:
        size = local.stat().st_size
        sftp = self._transport.open_sftp()
        try:
            if _sftp_size(sftp, str(remote)) == size and self._same(local, remote, size):
                progress(size, size)
                return Copied(str(local), str(remote), size, 0, "sftp")
            partial = f"{remote}{PARTIAL}"
            moved = 0
            for attempt in range(2):  # a partial file that does not match: once from zero
                start = _sftp_size(sftp, partial) or 0
                if start > size or attempt:
                    start = 0
                moved += self._send(sftp, local, partial, start, size, progress)
                if _remote_sha256(self._transport, Path(partial), size) == _sha256(local):
                    sftp.posix_rename(partial, str(remote))
                    return Copied(str(local), str(remote), size, moved, "sftp")
            raise CopyFailed(f"put: {remote}{self._where} does not match {local} after copying")
        except _lost() as exc:
            raise self._cut("put", local, remote, exc) from exc
        finally:
            sftp.close()

    def download(self, remote: Path, local: Path, progress: Progress) -> Copied:
        sftp = self._transport.open_sftp()
        try:
            size = sftp.stat(str(remote)).st_size
            want = _remote_sha256(self._transport, remote, size)
            if local.is_file() and local.stat().st_size == size and _sha256(local) == want:
                progress(size, size)
                return Copied(str(remote), str(local), size, 0, "sftp")
            partial = local.with_name(local.name + PARTIAL)
            moved = 0
            for attempt in range(2):
                start = partial.stat().st_size if partial.is_file() else 0
                if start > size or attempt:
                    start = 0
                moved += self._fetch(sftp, remote, partial, start, size, progress)
                if _sha256(partial) == want:
                    partial.replace(local)
                    return Copied(str(remote), str(local), size, moved, "sftp")
            raise CopyFailed(f"get: {local} does not match {remote}{self._where} after copying")
        except _lost() as exc:
            raise self._cut("get", remote, local, exc) from exc
        finally:
            sftp.close()

    @property
    def _where(self) -> str:
        return f" on {self._transport.where}"

    def _same(self, local: Path, remote: Path, size: int) -> bool:
        return _remote_sha256(self._transport, remote, size) == _sha256(local)

    def _send(
        self, sftp: Any, local: Path, partial: str, start: int, size: int, progress: Progress
    ) -> int:
        """local's bytes from start appended to the partial file there; how many."""
        pace = _Pace(self._rate)
        with local.open("rb") as src, sftp.open(partial, "ab" if start else "wb") as dst:
            dst.set_pipelined(True)
            src.seek(start)
            done = start
            while block := src.read(_CHUNK):
                dst.write(block)
                done += len(block)
                pace.wait(done - start)
                progress(done, size)
        return done - start

    def _fetch(
        self, sftp: Any, remote: Path, partial: Path, start: int, size: int, progress: Progress
    ) -> int:
        """remote's bytes from start appended to the partial file here; how many."""
        pace = _Pace(self._rate)
        with sftp.open(str(remote), "rb") as src, partial.open("ab" if start else "wb") as dst:
            src.seek(start)
            src.prefetch(size)
            done = start
            while block := src.read(_CHUNK):
                dst.write(block)
                done += len(block)
                pace.wait(done - start)
                progress(done, size)
        return done - start

    def _cut(self, what: str, source: Path, target: Path, exc: BaseException) -> CopyFailed:
        self._transport.close()  # the next command connects again
        return CopyFailed(
            f"{what}: copying {source} to {target} over SFTP to {self._transport.where} "
            f"failed ({exc or type(exc).__name__}: the connection lost, or the file refused); "
            "what arrived is kept, run the same command again to resume"
        )


class _Pace:
    """Sleeps so that bytes sent keep under rate a second (0: never sleeps)."""

    def __init__(self, rate: int) -> None:
        self.rate = rate
        self._t0 = time.monotonic()

    def wait(self, done: int) -> None:
        if self.rate:
            ahead = done / self.rate - (time.monotonic() - self._t0)
            if ahead > 0:
                time.sleep(ahead)


def _lost() -> tuple[type[BaseException], ...]:
    import paramiko

    return (paramiko.SSHException, OSError, EOFError)


def _sftp_size(sftp: Any, path: str) -> int | None:
    """path's size there, or None when it is not there."""
    try:
        size: int = sftp.stat(path).st_size
    except FileNotFoundError:
        return None
    return size


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def _remote_sha256(transport: Transport, path: Path, size: int) -> str:
    """sha256sum of path on the cluster, given time for its size."""
    timeout = 30 + size / _HASH_RATE
    res = transport.run([*checked_sh("sha256sum"), "--", str(path)], timeout=timeout)
    if res.returncode != 0:
        raise CopyFailed(f"sha256sum {path} failed there: {res.stderr.strip()[:300]}")
    return res.stdout.split(" ", 1)[0].lstrip("\\")


def _remote_size(transport: Transport, path: Path) -> int:
    res = transport.run([*checked_sh("stat"), "-L", "-c", "%s", "--", str(path)], timeout=30)
    with contextlib.suppress(ValueError):
        if res.returncode == 0:
            return int(res.stdout.strip())
    raise CopyFailed(f"cannot read the size of {path} there: {res.stderr.strip()[:300]}")

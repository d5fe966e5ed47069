"""Files in and out: replacing a small file atomically, and reading a file a person named
with bounds.

Replacing is for jobsmith's own records and caches (submission records, session folds,
the last poll, what a cluster is known to keep). The new content is written to a
temporary file in the same directory, flushed to disk, and renamed over the old one
(rename(2) within a directory is atomic, on NFS too); a write that fails leaves no
temporary file behind.

Reading (read_bounded) is for every file a person names (site files, --params-file, plan
files, template specs and bodies, sample sheets): `--params-file /dev/zero` grew to 12.8
GB, a FIFO blocked, and a 50 MB YAML list passed 4 GB. Such a file must be a regular
file of at most a given size, judged on what was opened (no swap between check and
read), opened without blocking and read with a bound.

Names and paths handed to a job (name_problem, usable_check_argv) are checked before
anything is submitted: a name too long for the file system, and what the job will find
where it runs (a file it reads, a directory it writes), asked of that host through the
transport, as the engine look-up is (agent/runtime/workflows/pipelines.py).
"""

from __future__ import annotations

import contextlib
import enum
import errno
import os
import stat
import tempfile
from collections.abc import Sequence
from pathlib import Path

#: the most a file a person names may hold (a site file, a plan, a params file, a
#: template): far above any real one, far below what parsing could grow to gigabytes
MAX_INPUT_BYTES = 4 * 1024 * 1024


def read_bounded(path: Path, limit: int = MAX_INPUT_BYTES) -> bytes:
    """The bytes of path: a regular file of at most limit bytes; OSError otherwise, with
    a strerror that says why (not a regular file, too large)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as handle:
        mode = os.fstat(handle.fileno()).st_mode
        if not stat.S_ISREG(mode):
            kind = "a directory" if stat.S_ISDIR(mode) else "a device, FIFO or socket"
            raise OSError(errno.EINVAL, f"it is {kind}, not a regular file", str(path))
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise OSError(errno.EFBIG, f"it is larger than {limit} bytes", str(path))
    return data


def replace_file(path: Path, data: bytes, *, durable: bool = True) -> None:
    """Make path hold data, atomically; OSError if it cannot (nothing half-written).

    durable=False is for caches and snapshots, whose readers rebuild what they cannot
    read: the rename still keeps a reader from seeing half a file, but the data is not
    forced to the disk first. That fsync is most of a submit's file work on a loaded
    file server (0.27 s for two session caches, measured with cProfile on the lab under
    load, issue 26), and it buys nothing a rebuild does not."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            if durable:
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def write_output(path: Path, data: bytes) -> None:
    """Write data to a file the user named (-o, --save-plan): replaced whole, as
    replace_file does, where it is a regular file or does not exist yet; written into
    where it names anything else, a device (`-o /dev/null`, `/dev/stdout`) or a FIFO
    with a reader. A rename would put a plain file in a device's place: refused in /dev
    to a user, and as root it replaced /dev/zero (a fuzz test run outside its
    namespaces). A symlink is followed: the link stays, its target gets the data. A FIFO
    no one reads is OSError at once (ENXIO), never a hang."""
    try:
        mode: int | None = path.stat().st_mode
    except FileNotFoundError:
        mode = None
    if mode is None or stat.S_ISREG(mode):
        replace_file(path.resolve() if path.is_symlink() else path, data)
        return
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(errno.EISDIR, "it is a directory", str(path))
    fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    os.set_blocking(fd, True)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)


# --- names, and what a job will find where it runs ---------------------------------------

#: the longest name of one file or directory, and of a whole path, in bytes (Linux's
#: NAME_MAX, and PATH_MAX less its NUL): a longer one is ENAMETOOLONG at the first stat,
#: a traceback wherever that was not expected (issue 24)
MAX_NAME_BYTES = 255
MAX_PATH_BYTES = 4095


def name_problem(path: str) -> str | None:
    """What is wrong with path as a name, before any file system is asked (None: nothing):
    empty, a NUL (no command line can carry it), or too long for the file system."""
    if not path.strip():
        return "is an empty name"
    if "\0" in path:
        return "holds a NUL byte"
    raw = os.fsencode(path)
    if len(raw) > MAX_PATH_BYTES:
        return f"is longer than {MAX_PATH_BYTES} bytes"
    if any(len(part) > MAX_NAME_BYTES for part in raw.split(b"/")):
        return f"has a name longer than {MAX_NAME_BYTES} bytes"
    return None


class Usable(enum.StrEnum):
    """What a path handed to a job must be where the job runs (usable_check_argv)."""

    #: a regular file you can read, not empty, of at most the limit: what an engine reads
    FILE = "file"
    #: a directory you can write, or one that can be created (its nearest existing
    #: ancestor is a directory you can write): where a job writes
    DIR = "dir"
    #: if it is there at all, a directory you can read or a FILE (a pipeline given as a
    #: path; absent, it is a name the engine fetches)
    IF_THERE = "if_there"


#: the check, in POSIX sh: the first path that is not what it must be is printed as
#: "INDEX<TAB>WHY" (INDEX counts from 1) with status 1; all of them usable: status 0
_USABLE_SH = r"""
limit=$1; shift; i=0
while [ $# -gt 0 ]; do
  kind=$1 p=$2; shift 2; i=$((i + 1)); why=
  if [ "$kind" = if_there ]; then
    if [ ! -e "$p" ] && [ ! -L "$p" ]; then continue; fi
    kind=file
    if [ -d "$p" ]; then
      kind=; { [ -r "$p" ] && [ -x "$p" ]; } || why="is a directory you cannot read"
    fi
  fi
  case $kind in
  file)
    if [ ! -e "$p" ]; then why="does not exist"
    elif [ -d "$p" ]; then why="is a directory, not a regular file"
    elif [ ! -f "$p" ]; then why="is a FIFO, device or socket, not a regular file"
    elif [ ! -r "$p" ]; then why="is not readable by you"
    elif [ ! -s "$p" ]; then why="is empty"
    elif size=$(wc -c <"$p") && [ "$((size))" -gt "$limit" ]; then
      why="is larger than $limit bytes"
    fi ;;
  dir)
    if [ -e "$p" ] || [ -L "$p" ]; then
      if [ ! -d "$p" ]; then why="is not a directory"
      elif [ ! -w "$p" ] || [ ! -x "$p" ]; then why="is a directory you cannot write"
      fi
    else
      a=$p
      while [ ! -e "$a" ] && [ ! -L "$a" ]; do a=$(dirname -- "$a"); done
      if [ ! -d "$a" ]; then why="cannot be created: $a is not a directory"
      elif [ ! -w "$a" ] || [ ! -x "$a" ]; then
        why="cannot be created in $a, which you cannot write"
      fi
    fi ;;
  esac
  if [ -n "$why" ]; then printf '%s\t%s\n' "$i" "$why"; exit 1; fi
done
"""


def usable_check_argv(
    checks: Sequence[tuple[Usable, str]], limit: int = MAX_INPUT_BYTES
) -> list[str]:
    """The command that checks each (kind, path) as Usable says, judged by the user who
    runs it: run it through the transport, so it is asked where the job will run (this
    host, or the login node over SSH), never of a laptop's own files. Paths are passed as
    arguments, never as code; nothing is opened but to count a regular file's bytes."""
    argv = ["sh", "-c", _USABLE_SH, "sh", str(limit)]
    for kind, path in checks:
        # a name that starts with '-' names the same file as ./-name, and is never an option
        argv += [kind.value, f"./{path}" if path.startswith("-") else path]
    return argv


def usable_problem(returncode: int, stdout: str) -> tuple[int, str] | None:
    """What usable_check_argv's answer says: None if every path is usable, else (the index
    of the first that is not, counting from 0; why, one line); ValueError for any other
    answer (the check did not run)."""
    if returncode == 0:
        return None
    index, tab, why = stdout.partition("\t")
    if returncode != 1 or not tab or not index.isdecimal():
        raise ValueError(f"the check answered status {returncode}: {stdout.strip()[:200]!r}")
    return int(index) - 1, why.rstrip("\n").replace("\n", "\\n")

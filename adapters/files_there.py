"""The job's files where the job runs: paths resolved and looked at, and the log
directory made, on this host or on the login node over the transport (issue 29).

Over SSH the laptop's files are not the cluster's: an input on the cluster's scratch is
not on the laptop, and a symlink there may point anywhere. So a remote site's paths are
asked of the login node, every path of a submission in ONE command (`look_argv`: an SSH
round trip costs more than all the checks), and the answer is parsed here (`parse_look`)
into the facts the path policy judges (job_templates/paths.py): the rule is the same
whichever host answered. A sample sheet is read there too (`read_argv`, base64 so its
bytes arrive as they are), and its path cells asked in one more command. The log
directory is made there with `mkdir -p` before sbatch runs, as it is made here for a
local site (Slurm 22.05 cannot open a job's output in a directory that does not exist).

Paths travel as arguments, never as code, and come back hex-encoded: a name may hold
spaces, quotes, newlines or bytes that are not UTF-8, and every byte survives both ways
(the argv is encoded with surrogateescape as the OS encodes file names, the answer is
decoded the same way). It needs POSIX sh and GNU coreutils (`realpath -m`, `od`, `tr`;
`head`, `base64` to read) on the login node, as the rest of the SSH transport does
(`timeout`, `base64`): each command checks for its own first and a missing one is
ToolMissing naming it (adapters/login_tools.py), never a wrong answer. A symlink loop
there is named as one (realpath -m leaves it unresolved; `test -L` finds it).
"""

from __future__ import annotations

import base64
import errno
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from jobsmith.adapters.login_tools import check, need_sh
from jobsmith.adapters.transport import Transport
from jobsmith.errors import SchedulerError
from jobsmith.files import MAX_INPUT_BYTES
from jobsmith.job_templates.paths import Found, LocalLookup, PathFact, PathLookup

#: for each path argument one line: "f|d|o|m HEX" (file, directory, other, missing; the
#: resolved path's bytes in hex), "l HEX" (a symlink loop: the link realpath could not
#: resolve), or "e HEX" (realpath's complaint). `printf x` keeps a trailing newline of
#: the name from command substitution; `${r%?}` drops realpath's own. `realpath -m`
#: resolves every symlink it can, even to a missing target, and leaves one it cannot
#: (ELOOP) as it is: so a missing path still holding a symlink names a loop, found by
#: looking at its ancestors with `test -L` (no error text, which is the locale's).
_LOOK_SH = (
    need_sh(("realpath", "od", "tr"), gnu_realpath=True)
    + r"""
for p do
  if r=$(realpath -m -- "$p" 2>&1 && printf x); then
    r=${r%x}; r=${r%?}
    if [ -f "$r" ]; then k=f; elif [ -d "$r" ]; then k=d; elif [ -e "$r" ]; then k=o; else
      k=m; q=$r
      while [ -n "$q" ]; do
        if [ -L "$q" ]; then k=l; r=$q; break; fi
        q=${q%/*}
      done
    fi
  else
    k=e
  fi
  printf '%s ' "$k"; printf '%s' "$r" | od -An -v -tx1 | tr -d ' \n'; echo
done
"""
)

_FOUND: dict[str, Found] = {"f": "file", "d": "dir", "o": "other", "m": "missing"}


def look_argv(paths: Sequence[Path]) -> list[str]:
    """The one command that resolves and looks at every one of paths (absolute)."""
    return ["sh", "-c", _LOOK_SH, "sh", *map(str, paths)]


#: a regular file's first LIMIT+1 bytes in base64 (one more than allowed tells "too big")
_READ_SH = (
    need_sh(("head", "base64"))
    + r"""
if [ ! -f "$1" ]; then echo "it is not a regular file" >&2; exit 3; fi
head -c "$2" -- "$1" | base64 -w0
"""
)


def read_argv(path: Path, limit: int) -> list[str]:
    """The command that reads path (a regular file) as base64, up to one byte past limit."""
    return ["sh", "-c", _READ_SH, "sh", str(path), str(limit + 1)]


#: each path argument's kind as the look's (f d o m, or e: realpath's complaint), the path
#: and where realpath -m resolves it, NUL-separated (a name holds any byte but NUL)
_EACH_SH = r"""
for p do
  if r=$(realpath -m -- "$p" 2>&1 && printf x); then
    r=${r%x}; r=${r%?}
    if [ -f "$r" ]; then k=f; elif [ -d "$r" ]; then k=d; elif [ -e "$r" ]; then k=o; else k=m; fi
  else
    k=e
  fi
  printf '%s\000%s\000%s\000' "$k" "$p" "$r"
done
"""

#: the regular files and symlinks below directory $1 (recursively; a symlinked directory
#: is listed, not descended: find -P), what an interrupted copy left ($3: a directory of
#: that name, a file ending in it) skipped. More than $2 of them: the one word `over`,
#: found by a first pass that stops at $2+1 (head closes the pipe, find ends); else
#: _EACH_SH's answer for each, the whole of it hex-encoded once.
_TREE_SH = (
    need_sh(("find", "tr", "head", "wc", "realpath", "od"), gnu_realpath=True)
    + r"""
d=$1 n=$2 s=$3 each=$4
if [ ! -d "$d" ]; then echo "it is not a directory" >&2; exit 3; fi
set -- "$d" '(' -name "$s" -prune ')' -o '(' -type f -o -type l ')' '!' -name "*$s"
c=$(find "$@" -print0 | tr -dc '\000' | head -c "$((n + 1))" | wc -c)
if [ "$c" -gt "$n" ]; then echo over; exit 0; fi
find "$@" -exec sh -c "$each" sh '{}' + | od -An -v -tx1 | tr -d ' \n'
"""
)


def tree_argv(directory: Path, limit: int, skip: str) -> list[str]:
    """The one command that lists and resolves what is below directory (a resolved
    one), at most limit entries; skip: the name an interrupted copy's leftovers carry."""
    return ["sh", "-c", _TREE_SH, "sh", str(directory), str(limit), skip, _EACH_SH]


@dataclass(frozen=True)
class Listed:
    """One entry below a directory there: a regular file, or a symlink, and what it
    resolves to there."""

    #: as listed: the directory asked, then the entry's own path below it
    path: Path
    fact: PathFact


def parse_tree(stdout: str) -> list[Listed] | None:
    """tree_argv's answer: each entry, in the order listed; None when there are more
    than the limit. ValueError if it is not such an answer."""
    text = stdout.strip()
    if text == "over":
        return None
    *fields, last = bytes.fromhex(text).split(b"\0") if text else [b""]
    if last or len(fields) % 3:
        raise ValueError(f"not a listing: {text[:200]!r}")
    found = []
    for i in range(0, len(fields), 3):
        kind, path, real = fields[i].decode(), os.fsdecode(fields[i + 1]), fields[i + 2]
        if kind == "e":
            fact = PathFact(None, problem=os.fsdecode(real).strip() or "realpath failed")
        elif kind in _FOUND:
            fact = PathFact(Path(os.fsdecode(real)), _FOUND[kind])
        else:
            raise ValueError(f"not a kind: {kind[:20]!r}")
        found.append(Listed(Path(path), fact))
    return found


def parse_look(paths: Sequence[Path], stdout: str) -> dict[Path, PathFact]:
    """look_argv's answer as a fact per path; ValueError if it is not one line per path."""
    lines = stdout.splitlines()
    if len(lines) != len(paths):
        raise ValueError(f"{len(lines)} answers for {len(paths)} paths: {stdout[:200]!r}")
    facts = {}
    for path, line in zip(paths, lines, strict=True):
        kind, _, encoded = line.partition(" ")
        text = os.fsdecode(bytes.fromhex(encoded))
        if kind == "e":
            facts[path] = PathFact(None, problem=text.strip() or "realpath failed")
        elif kind == "l":  # worded as Path.resolve() words it on this host
            facts[path] = PathFact(None, problem=f"Symlink loop from {text!r}")
        elif kind in _FOUND:
            facts[path] = PathFact(Path(text), _FOUND[kind])
        else:
            raise ValueError(f"not an answer: {line[:200]!r}")
    return facts


class JobFiles(PathLookup, Protocol):
    """The files where the job runs: looked at (PathLookup) and the log directory made."""

    def make_dirs(self, path: Path) -> None:
        """mkdir -p path there."""
        ...


class LocalFiles(LocalLookup):
    """This host's files: the cluster's, for a local site."""

    def make_dirs(self, path: Path) -> None:
        path.mkdir(parents=True, exist_ok=True)


class FilesThere:
    """The login node's files, through the transport Slurm's commands take."""

    def __init__(self, transport: Transport, where: str, timeout_s: float = 30.0) -> None:
        """where: the login node as messages name it, e.g. 'alice@login1:22'."""
        self._transport = transport
        self._login = where
        self.where = f" on {where}"
        self._timeout = timeout_s

    def look(self, paths: Sequence[Path]) -> dict[Path, PathFact]:
        if not paths:
            return {}
        res = check(self._transport.run(look_argv(paths), timeout=self._timeout), self._login)
        try:
            if res.returncode != 0:
                raise ValueError(f"exit {res.returncode}: {res.stderr.strip()[:200]}")
            return parse_look(paths, res.stdout)
        except ValueError as exc:
            raise SchedulerError(f"cannot look at the job's paths{self.where}: {exc}") from None

    def read(self, path: Path, limit: int = MAX_INPUT_BYTES) -> bytes:
        res = check(self._transport.run(read_argv(path, limit), timeout=self._timeout), self._login)
        if res.returncode != 0:
            why = res.stderr.strip().splitlines()[-1:] or [f"exit {res.returncode}"]
            raise OSError(errno.EIO, f"{why[0]}{self.where}", str(path))
        try:
            data = base64.b64decode(res.stdout, validate=True)
        except ValueError:
            raise OSError(errno.EIO, f"an answer that is not base64{self.where}") from None
        if len(data) > limit:
            raise OSError(errno.EFBIG, f"it is larger than {limit} bytes", str(path))
        return data

    def tree(self, directory: Path, limit: int, skip: str) -> list[Listed] | None:
        """The regular files and symlinks below directory (resolved, there), each
        resolved there, asked in one command (tree_argv); None when there are more than
        limit. SchedulerError when it cannot be listed (not a directory, say)."""
        argv = tree_argv(directory, limit, skip)
        res = check(self._transport.run(argv, timeout=self._timeout), self._login)
        try:
            if res.returncode != 0:
                raise ValueError(f"exit {res.returncode}: {res.stderr.strip()[:200]}")
            return parse_tree(res.stdout)
        except ValueError as exc:
            raise SchedulerError(
                f"cannot list the directory {directory}{self.where}: {exc}"
            ) from None

    def make_dirs(self, path: Path) -> None:
        res = self._transport.run(["mkdir", "-p", "--", str(path)], timeout=self._timeout)
        if res.returncode != 0:
            why = res.stderr.strip() or f"exit {res.returncode}"
            raise SchedulerError(f"cannot make the directory {path}{self.where}: {why}")

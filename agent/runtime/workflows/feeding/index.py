"""The workloads still feeding: where every actor finds a fed workload with parts not
yet submitted, cheaply, whether or not any of its parts has a job.

The watcher, `status` and `wait` find a workload through its parts' jobs in the ledger.
A workload none of whose parts fitted when it was submitted (the user's own sbatch jobs
fill the QoS) has no job at all, so nothing would ever feed it or show it. Each workload
is therefore entered here when its session records it (feeder.py, `begin`), and leaves
when its last part is claimed or it is cancelled; the watcher tries the sessions listed
here every cycle (room may come from jobs jobsmith never submitted), and the glance
shows them.

One small file per workload in `feeding/` beside the ledger's records, named by a hash of
its session and step (any step id is a safe name then), holding both: written by
write-and-rename, removed by unlink, never rewritten. Two actors therefore never lose
each other's entry, whatever the interleaving (an index file rewritten whole could drop a
line appended meanwhile), and reading the index is one directory listing, however many
jobs the ledger holds. The session stays the truth: an entry is a hint that a session
has a workload to feed, and whoever reads the session and finds every part claimed, or
the workload cancelled, removes the entry. Feeding itself is guarded by the session's
part claims (two actors listing the same entry never feed a part twice).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

from jobsmith.agent.runtime.session.ledger import JobLedger
from jobsmith.files import replace_file

#: the directory's name beside the ledger's records (no `.json` suffix: never a record)
DIRECTORY = "feeding"


@dataclass(frozen=True)
class Feeding:
    """One entry: a session's workload (its step) with parts still to submit."""

    session_id: str
    step_id: str


class FeedingIndex:
    """The entries in one directory (module docstring)."""

    def __init__(self, directory: Path) -> None:
        self._dir = directory

    @classmethod
    def beside(cls, ledger: JobLedger) -> FeedingIndex:
        """The index of the user whose submissions ledger records."""
        return cls(ledger.directory / DIRECTORY)

    def add(self, session_id: str, step_id: str) -> None:
        """Enter the workload (again: the same file, the same bytes). OSError if it
        cannot be written: the caller's step then stays unsettled, for resume."""
        data = json.dumps({"session_id": session_id, "step_id": step_id}).encode()
        replace_file(self._path(session_id, step_id), data)

    def remove(self, session_id: str, step_id: str) -> None:
        """Take the workload out (nothing if it is not in)."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self._path(session_id, step_id))

    def entries(self) -> list[Feeding]:
        """Every entry, sorted; a file that is not one (a temporary one, a damaged one)
        is skipped."""
        try:
            names = os.listdir(self._dir)
        except (FileNotFoundError, NotADirectoryError):
            return []
        found = {e for name in names if not name.startswith(".") and (e := self._read(name))}
        return sorted(found, key=lambda e: (e.session_id, e.step_id))

    def sessions(self) -> set[str]:
        """The sessions with a workload still feeding."""
        return {e.session_id for e in self.entries()}

    def _read(self, name: str) -> Feeding | None:
        try:
            data = json.loads((self._dir / name).read_bytes())
            entry = Feeding(str(data["session_id"]), str(data["step_id"]))
        except (OSError, ValueError, KeyError, TypeError):
            return None  # removed meanwhile, or not an entry
        return entry if name == _name(entry.session_id, entry.step_id) else None

    def _path(self, session_id: str, step_id: str) -> Path:
        return self._dir / _name(session_id, step_id)


def _name(session_id: str, step_id: str) -> str:
    key = f"{session_id}\0{step_id}".encode()
    return hashlib.sha256(key).hexdigest()[:32]

"""One watcher per user across login nodes: a lock file that works on a shared $HOME.

The lock is taken with link(2) (atomic on NFS, unlike POSIX locks there) and kept alive
by a heartbeat: its holder rewrites it every cycle. A lock whose heartbeat is older than
`stale_after` belongs to a watcher that died (or lost its login node) and is taken over.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import time
from pathlib import Path

from jobsmith.errors import JobsmithError


class WatcherRunning(JobsmithError):
    """Another watcher of this user is alive (on this or another login node)."""

    exit_code = 10


class WatchLock:
    """The user's watcher lock at `path`."""

    def __init__(self, path: Path, *, stale_after_s: float) -> None:
        self.path = path
        self.stale_after_s = stale_after_s
        self.me = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"

    def acquire(self) -> None:
        """Take the lock, taking over a stale one; raise WatcherRunning if it is held."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self._link_new():
            return
        holder = self._holder()
        age = time.time() - self._mtime()
        if holder == self.me:
            return
        if age <= self.stale_after_s:
            raise WatcherRunning(
                f"a watcher is already running ({holder}, heartbeat {age:.0f}s ago); "
                f"it owns {self.path}"
            )
        # stale: replace it atomically, then check we are the one who won
        self._write(self.path)
        if self._holder() != self.me:
            raise WatcherRunning(f"another watcher took over {self.path} first")

    def heartbeat(self) -> None:
        """Show we are alive (call every cycle)."""
        if self._holder() != self.me:
            raise WatcherRunning(f"lost {self.path} to {self._holder()}: stopping")
        self._write(self.path)

    def release(self) -> None:
        """Give the lock up if we hold it."""
        if self._holder() == self.me:
            self.path.unlink(missing_ok=True)

    def _link_new(self) -> bool:
        tmp = self.path.with_name(f".{self.path.name}.{self.me}")
        self._write_plain(tmp)
        try:
            os.link(tmp, self.path)
            return True
        except FileExistsError:
            return False
        finally:
            tmp.unlink(missing_ok=True)

    def _write(self, target: Path) -> None:
        tmp = target.with_name(f".{target.name}.{self.me}")
        self._write_plain(tmp)
        os.replace(tmp, target)

    def _write_plain(self, path: Path) -> None:
        path.write_text(json.dumps({"holder": self.me, "at": time.time()}))

    def _holder(self) -> str | None:
        try:
            return str(json.loads(self.path.read_text())["holder"])
        except (OSError, ValueError, KeyError):
            return None

    def _mtime(self) -> float:
        try:
            return self.path.stat().st_mtime
        except OSError:
            return 0.0

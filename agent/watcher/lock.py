"""One watcher per user across login nodes: a lock file that works on a shared $HOME.

The lock is taken with link(2) (atomic on NFS, unlike POSIX locks there; the reasoning,
and the check for NFS's lost reply, are the session store's, see agent/runtime/session/store.py)
and kept
alive by a heartbeat: its holder touches it every cycle. A lock whose heartbeat is older
than `stale_after` belongs to a watcher that died (or lost its login node) and is taken
over.

Taking over must have exactly one winner however many watchers find the same stale lock.
Replacing the file and reading it back cannot promise that (a second replacer can come
after the first one's read-back), so nothing here ever replaces the lock:

1. The lock's name is only ever created by link(2), which fails if the name exists.
2. Each watcher that finds a stale lock links a claim whose name is made from the stale
   holder's id (`.watch.lock.takeover.<holder>.0`). link(2) gives that name to one of
   them; the others stop. A claim whose owner died half-way is not removed (removing and
   re-creating a shared name is itself a race): the next claim number is linked instead.
3. The claim's owner renames the stale lock to a tombstone name of its own, checks that
   the tombstone holds the very lock it judged stale (same holder, still stale; else that
   holder came back to life and gets its lock back), and links its new lock (step 1).

A lock's content never changes after the link (the heartbeat only sets its mtime), so the
holder read from one open file identifies one lock. Claims stay for `stale_after` (a
watcher that looked at the stale lock before it was taken over may still come to claim
it) and are then swept. Tested with racing processes on a local filesystem; NFS itself
could not be exercised here (see agent/runtime/session/store.py).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import socket
import time
from dataclasses import dataclass
from pathlib import Path

from jobsmith.errors import JobsmithError


class WatcherRunning(JobsmithError):
    """Another watcher of this user is alive (on this or another login node)."""

    exit_code = 10


@dataclass(frozen=True)
class _Seen:
    """One lock file as read through one open file descriptor."""

    holder: str | None
    mtime: float
    ino: int

    @property
    def key(self) -> str:
        """A file-name-safe id of this lock, the same for every watcher that reads it."""
        raw = self.holder if self.holder is not None else f"inode-{self.ino}"
        return re.sub(r"[^A-Za-z0-9.-]", "_", raw)


class WatchLock:
    """The user's watcher lock at `path`."""

    def __init__(self, path: Path, *, stale_after_s: float) -> None:
        self.path = path
        self.stale_after_s = stale_after_s
        self.me = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"

    @classmethod
    def of_user(cls, state_dir: Path, interval_s: float) -> WatchLock:
        """The user's one-watcher lock in their state directory, for a watcher polling
        every interval_s: stale after three missed cycles and a minute."""
        return cls(state_dir / "watch.lock", stale_after_s=3 * interval_s + 60)

    def acquire(self) -> None:
        """Take the lock, taking over a stale one; raise WatcherRunning if it is held."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        for _ in range(3):  # the lock may be released between two looks: link again
            if self._link_new(self.path):
                return
            seen = self._look(self.path)
            if seen is None:
                continue
            if seen.holder == self.me:
                return
            age = time.time() - seen.mtime
            if age <= self.stale_after_s:
                raise WatcherRunning(
                    f"a watcher is already running ({seen.holder}, heartbeat {age:.0f}s ago); "
                    f"it owns {self.path}"
                )
            self._take_over(seen)
            return
        raise WatcherRunning(f"{self.path} keeps changing hands: another watcher is starting")

    def heartbeat(self) -> None:
        """Show we are alive (call every cycle)."""
        holder = self._holder()
        if holder != self.me:
            raise WatcherRunning(f"lost {self.path} to {holder}: stopping")
        # The mtime is the heartbeat; the content (who holds it) never changes after the
        # link, so a watcher that lost the lock meanwhile can at worst freshen its winner.
        os.utime(self.path)

    def release(self) -> None:
        """Give the lock up if we hold it."""
        if self._holder() != self.me:
            return
        # Unlinking the name could remove a lock that took ours over since the check
        # above (had we been too slow to heartbeat): move ours aside and look first.
        tomb = self._sibling("released", self.me)
        try:
            os.rename(self.path, tomb)
        except FileNotFoundError:
            return
        gone = self._look(tomb)
        if gone is not None and gone.holder != self.me:
            self._put_back(tomb)
        tomb.unlink(missing_ok=True)

    # --- taking over a stale lock ------------------------------------------------------

    def _take_over(self, seen: _Seen) -> None:
        self._claim(seen)
        tomb = self._sibling("stale", self.me)
        try:
            # FileNotFoundError: released by its holder meanwhile, or NFS's lost reply
            # (the retransmitted rename found its source moved: the tomb is there)
            with contextlib.suppress(FileNotFoundError):
                os.rename(self.path, tomb)
            gone = self._look(tomb)
            if gone is not None and (
                gone.holder != seen.holder or time.time() - gone.mtime <= self.stale_after_s
            ):
                self._put_back(tomb)
                raise WatcherRunning(
                    f"the watcher holding {self.path} ({gone.holder}) is alive after all"
                )
            if not self._link_new(self.path):
                raise WatcherRunning(f"another watcher took {self.path} over first")
        finally:
            tomb.unlink(missing_ok=True)
        self._sweep()

    def _claim(self, seen: _Seen) -> None:
        """Be the one watcher taking over the lock `seen`, or raise WatcherRunning."""
        number = 0
        while True:
            claim = self._sibling("takeover", f"{seen.key}.{number}")
            if self._link_new(claim):
                return
            other = self._look(claim)
            if other is not None and time.time() - other.mtime <= self.stale_after_s:
                raise WatcherRunning(
                    f"another watcher ({other.holder}) is taking over the stale {self.path}"
                )
            number += 1  # its claimer died half-way: the next number, never a reuse

    def _put_back(self, tomb: Path) -> None:
        """Return a lock moved aside by mistake to its name (unless a new one is there)."""
        with contextlib.suppress(FileExistsError):
            os.link(tomb, self.path)

    def _sweep(self) -> None:
        """Remove claims, tombstones and temporary files older than `stale_after`."""
        cutoff = time.time() - self.stale_after_s
        for path in self.path.parent.glob(f".{self.path.name}.*"):
            try:
                if path.stat().st_mtime < cutoff:
                    path.unlink()
            except OSError:
                pass

    # --- files -------------------------------------------------------------------------

    def _sibling(self, kind: str, name: str) -> Path:
        safe = re.sub(r"[^A-Za-z0-9.-]", "_", name)
        return self.path.with_name(f".{self.path.name}.{kind}.{safe}")

    def _link_new(self, target: Path) -> bool:
        """Create target holding our id with link(2); False if it exists (not ours)."""
        tmp = self._sibling("tmp", f"{self.me}.{secrets.token_hex(4)}")
        tmp.write_text(json.dumps({"holder": self.me, "at": time.time()}))
        try:
            os.link(tmp, target)
            return True
        except FileExistsError:
            # NFS's lost reply: the server linked, the retransmission saw EEXIST
            return tmp.stat().st_nlink >= 2
        finally:
            tmp.unlink(missing_ok=True)

    def _look(self, path: Path) -> _Seen | None:
        """Holder and heartbeat of the lock file at path, or None if there is none."""
        try:
            with path.open("rb") as fh:
                stat = os.fstat(fh.fileno())
                raw = fh.read()
        except FileNotFoundError:
            return None
        try:
            holder: str | None = str(json.loads(raw)["holder"])
        except (ValueError, KeyError, TypeError):
            holder = None
        return _Seen(holder, stat.st_mtime, stat.st_ino)

    def _holder(self) -> str | None:
        try:
            seen = self._look(self.path)
        except OSError:
            return None
        return seen.holder if seen is not None else None

"""This process as the user's one watcher: the lock taken, kept alive and given back, and
the cycles run under it.

Three drivers run watcher cycles: `jobsmith watch` (agent/watcher/running.py: once from
cron, or forever), an open chat (agent/faces/chat.py) and the MCP server while a client
waits (agent/faces/mcp_wait.py). Each goes through a Watcher, so the per-user lock
(agent/watcher/lock.py) is handled in this one place, the same way for all three:

- the first cycle takes the lock, each later one heartbeats it first (a cycle never runs
  without the lock: one poller per user, across login nodes);
- `watch` must be the user's watcher (`cycle`: WatcherRunning, exit 10, if another holds
  the lock); chat and MCP only poll while no other watcher runs (`cycle_if_free`: None
  then, and they ask again on their next turn, taking the lock once it is free or stale);
- `release` gives the lock back only if this process took it, so a driver calls it from
  its `finally` however it ends (a stop signal, an error) without knowing how far it got.

A Watcher is not thread-safe by itself: each driver runs its cycles and the release
under its own exclusion (watch: apscheduler's one instance, shut down before the release;
chat: its busy lock; MCP: its poller's mutex), so a cycle under way finishes before the
lock is given back.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Protocol

from jobsmith.agent.watcher.cycle import CycleParts, WatchCycle, run_cycle
from jobsmith.agent.watcher.lock import WatcherRunning, WatchLock


class StateDirs(Protocol):
    """Where the user's lock is kept."""

    @property
    def state_dir(self) -> Path: ...


class WatchParts(CycleParts, Protocol):
    """What a Watcher is built from (the composition root, agent/app.py): a cycle's
    parts, and the user's state directory, which holds the lock."""

    @property
    def paths(self) -> StateDirs: ...


class Watcher:
    """The user's watcher lock held by this process, and the cycles run under it."""

    def __init__(self, lock: WatchLock, cycle: Callable[[], WatchCycle]) -> None:
        self._lock = lock
        self._cycle = cycle
        self._holding = False

    @classmethod
    def of(cls, parts: WatchParts, interval_s: float) -> Watcher:
        """The watcher polling every interval_s: the user's lock (stale after three missed
        cycles) and the whole cycle with parts (agent/watcher/cycle.py: run_cycle), with
        its warnings."""
        lock = WatchLock.of_user(parts.paths.state_dir, interval_s)
        return cls(lock, partial(run_cycle, parts, interval_s))

    @property
    def holding(self) -> bool:
        """True while this process holds the lock (as far as it knows: a heartbeat finds
        out whether another watcher took it over)."""
        return self._holding

    def take(self) -> None:
        """Take the lock (a stale one is taken over); WatcherRunning if another watcher
        holds it. Separate from `cycle` for `watch`, which takes it while a stop signal
        is held (agent/watcher/running.py)."""
        self._lock.acquire()
        self._holding = True

    def cycle(self) -> WatchCycle:
        """One cycle under the lock: taken first if not held yet, else heartbeaten;
        WatcherRunning if another watcher holds it or took it over (no cycle runs then)."""
        self._keep()
        return self._cycle()

    def cycle_if_free(self) -> WatchCycle | None:
        """One cycle if this process is, or can become, the user's watcher; None when
        another watcher holds the lock (that one polls for the user meanwhile). A lock
        lost to a takeover is asked for again on the next call, like one never held."""
        try:
            self._keep()
        except WatcherRunning:
            self._holding = False
            return None
        return self._cycle()

    def release(self) -> None:
        """Give the lock back if this process took it (a no-op otherwise: safe in any
        `finally`); one taken over meanwhile is left to its new holder (WatchLock)."""
        if self._holding:
            self._lock.release()
            self._holding = False

    def _keep(self) -> None:
        if self._holding:
            self._lock.heartbeat()
        else:
            self.take()

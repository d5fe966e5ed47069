"""agent/watcher/watcher.py, in-process (no Slurm): the one place the user's watcher lock is
taken, heartbeaten and given back, for `watch` (must be the watcher) and for chat and the
MCP server (poll only while no other watcher runs)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from jobsmith.agent.watcher.cycle import WatchCycle
from jobsmith.agent.watcher.lock import WatcherRunning, WatchLock
from jobsmith.agent.watcher.watcher import Watcher


def _watcher(path: Path, cycles: list[str], name: str) -> Watcher:
    def cycle() -> WatchCycle:
        cycles.append(name)
        return WatchCycle(watched=0, scheduler_ok=True)

    return Watcher(WatchLock(path, stale_after_s=60), cycle)


def test_a_cycle_takes_the_lock_and_release_gives_it_back_once(tmp_path: Path) -> None:
    path, cycles = tmp_path / "watch.lock", list[str]()
    watcher = _watcher(path, cycles, "w")
    watcher.release()  # never taken: nothing to give back
    assert watcher.cycle().scheduler_ok and watcher.holding and path.exists()
    watcher.cycle()  # heartbeats the lock it holds
    watcher.release()
    watcher.release()
    assert not path.exists() and not watcher.holding and cycles == ["w", "w"]


def test_watch_stands_aside_with_watcherrunning_and_a_poller_with_none(tmp_path: Path) -> None:
    path, cycles = tmp_path / "watch.lock", list[str]()
    holder = _watcher(path, cycles, "holder")
    holder.cycle()
    with pytest.raises(WatcherRunning, match="already running"):
        _watcher(path, cycles, "watch").cycle()
    chat = _watcher(path, cycles, "chat")
    assert chat.cycle_if_free() is None and not chat.holding
    chat.release()  # not its lock: left to its holder
    assert path.exists() and cycles == ["holder"]
    holder.release()
    assert chat.cycle_if_free() is not None and chat.holding  # free now: it polls
    chat.release()
    assert cycles == ["holder", "chat"]


def test_a_poller_whose_lock_was_taken_over_asks_again_later(tmp_path: Path) -> None:
    path, cycles = tmp_path / "watch.lock", list[str]()
    chat = _watcher(path, cycles, "chat")
    chat.cycle_if_free()
    old = time.time() - 120  # the chat missed its heartbeats: another watcher takes over
    os.utime(path, (old, old))
    other = _watcher(path, cycles, "other")
    other.cycle()
    assert chat.cycle_if_free() is None and not chat.holding
    other.release()
    assert chat.cycle_if_free() is not None and chat.holding
    chat.release()
    assert not path.exists() and cycles == ["chat", "other", "chat"]

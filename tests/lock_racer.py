"""A watcher process for the lock race test: `python lock_racer.py LOCK STALE_AFTER_S`.

For each line read from stdin it tries WatchLock.acquire() on LOCK at once (the test writes
the line to every racer in a burst, so they start together), prints `won` or `lost`, and
keeps what it won until the next line: a winner that let go early would let a late racer
take the lock legitimately and hide a double win.
"""

from __future__ import annotations

import sys
from pathlib import Path

from jobsmith.agent.watcher.lock import WatcherRunning, WatchLock


def main() -> None:
    path, stale_after_s = Path(sys.argv[1]), float(sys.argv[2])
    print("ready", flush=True)  # imports done: the first burst starts everyone together
    for _ in sys.stdin:
        lock = WatchLock(path, stale_after_s=stale_after_s)
        try:
            lock.acquire()
        except WatcherRunning:
            print("lost", flush=True)
        else:
            print(f"won {lock.me}", flush=True)


if __name__ == "__main__":
    main()

"""Fault injection for the crash-safety tests: inert unless its environment variables are set.

The kill-at-every-boundary test must stop a real jobsmith process at an exact point, with
SIGKILL, as the kernel's OOM killer or a lost login session would:

- JOBSMITH_FAULT_KILL_AFTER_EVENTS=N: die right after this process's N-th session event
  is committed;
- JOBSMITH_FAULT_KILL_IN_SBATCH=N: die while this process's N-th sbatch is still running
  (sbatch, in its own session, lives on and may submit after we are gone).
"""

from __future__ import annotations

import os
import signal
import threading

_counts = {"events": 0, "sbatch": 0}


def after_event_committed() -> None:
    """Called after each committed session event."""
    _counts["events"] += 1
    if _counts["events"] == _wanted("JOBSMITH_FAULT_KILL_AFTER_EVENTS"):
        os.kill(os.getpid(), signal.SIGKILL)


def sbatch_started() -> None:
    """Called once an sbatch child is running; may arm a kill while it runs."""
    _counts["sbatch"] += 1
    if _counts["sbatch"] == _wanted("JOBSMITH_FAULT_KILL_IN_SBATCH"):
        threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGKILL)).start()


def _wanted(name: str) -> int | None:
    value = os.environ.get(name)
    return int(value) if value and value.isdigit() else None

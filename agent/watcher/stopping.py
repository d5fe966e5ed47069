"""How a long-running jobsmith process (watch, chat, mcp) is told to stop: SIGTERM, or
SIGINT (Ctrl-C), however it was started.

Python turns SIGINT into KeyboardInterrupt only when the process did not start with
SIGINT ignored. A process started with `&` from a non-interactive shell (a script, cron,
a CI service) starts with it ignored, and so never hears Ctrl-C's signal: a watcher
started that way ran on for minutes after SIGINT. SIGTERM is what service managers,
`kill` and `timeout` send, and it always arrives. So both are handled here, alike,
with one exception kept on purpose: a SIGINT ignored at start stays ignored (that is
how a shell keeps Ctrl-C at the terminal away from its background jobs).

A stop never cuts a Slurm command or the session write after it in half: while the
process is `held()` (a watcher cycle, a tool running), the signal is remembered and
raised when the held work ends; it is never lost. Outside that, the signal raises Stop
at once in the main thread. Stop is a BaseException, so no `except Exception` (nor
chat's own KeyboardInterrupt handling) swallows it; the commands end with status 0 (a
stop asked for is a normal end) after their `finally` blocks released the watcher lock.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any


class Stop(BaseException):
    """A stop asked for by a signal (signum: which)."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"stopped by {signal.Signals(signum).name}")
        self.signum = signum


class StopSignals:
    """While entered (in the main thread): SIGTERM and SIGINT raise Stop, or are held.

    Entered in another thread it does nothing (Python runs handlers in the main thread
    only). The handlers in place before are put back on exit.
    """

    def __init__(self, hold_while: Callable[[], bool] | None = None) -> None:
        #: besides held(): a condition under which a signal is kept (chat: a tool runs)
        self._hold_while = hold_while
        self.received: int | None = None
        self._held = 0
        self._count_lock = threading.Lock()
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> StopSignals:
        if threading.current_thread() is not threading.main_thread():
            return self
        for signum in (signal.SIGTERM, signal.SIGINT):
            current = signal.getsignal(signum)
            if signum == signal.SIGINT and current == signal.SIG_IGN:
                continue  # started in the background: Ctrl-C is not for this process
            self._previous[signum] = current
            signal.signal(signum, self._on_signal)
        return self

    def __exit__(self, *exc: object) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous.clear()

    @contextmanager
    def held(self) -> Iterator[None]:
        """Work a signal must not cut (any thread): a signal meanwhile is kept, and Stop
        is raised when the last held block ends, in the main thread only."""
        with self._count_lock:
            self._held += 1
        try:
            yield
        finally:
            with self._count_lock:
                self._held -= 1
                idle = self._held == 0
            if idle and threading.current_thread() is threading.main_thread():
                self.check()

    @property
    def requested(self) -> bool:
        """True once a stop signal arrived (held or not)."""
        return self.received is not None

    def check(self) -> None:
        """Raise Stop if a signal arrived while held."""
        if self.received is not None:
            raise Stop(self.received)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self.received = signum
        if self._held == 0 and not (self._hold_while is not None and self._hold_while()):
            raise Stop(signum)

"""The user's active tasks as squeue last counted them, kept for a minute: the
concurrency limit's squeue is asked only where the limit could be reached.

`policy.max_concurrent_jobs` needs the user's queued and running tasks, and only squeue
knows them. But a user far below the limit cannot reach it with one submission: if squeue
counted `n` tasks under a minute ago, jobsmith has submitted `m` tasks since (its ledger)
and this job adds `k`, a submission with `n + m + k` at most half the limit is allowed
without asking again. Nearer the limit, squeue is asked, so a refusal always rests on a
fresh count. What this cannot see is a burst of jobs submitted outside jobsmith within
that minute of more than half the limit; Slurm's own limits (MaxJobs, MaxSubmit) still
hold there, and the next count sees them.

One small JSON file in the user's state directory; missing or damaged, it is ignored.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path

from jobsmith.files import replace_file

#: how long a count is used
TTL = timedelta(seconds=60)
#: the share of the limit below which a kept count (and what jobsmith added) is enough
HEADROOM = 0.5


class QueueCounts:
    """The last count of the user's active tasks, with when it was made (naive local
    time, as the ledger's submission times)."""

    def __init__(
        self, path: Path, *, ttl: timedelta = TTL, now: Callable[[], datetime] = datetime.now
    ) -> None:
        self._path = path
        self._ttl = ttl
        self._now = now

    def recent(self) -> tuple[int, datetime] | None:
        """The count and when it was made, if younger than the TTL."""
        try:
            data = json.loads(self._path.read_bytes())
            active, at = data["active"], datetime.fromisoformat(data["at"])
        except (OSError, ValueError, KeyError, TypeError):
            return None
        if not isinstance(active, int) or active < 0:
            return None
        age = self._now() - at
        if age < timedelta(0) or age >= self._ttl:
            return None
        return active, at

    def keep(self, active: int) -> None:
        """Remember a count squeue just gave."""
        body = json.dumps({"active": active, "at": self._now().isoformat()}).encode()
        with contextlib.suppress(OSError):
            replace_file(self._path, body)

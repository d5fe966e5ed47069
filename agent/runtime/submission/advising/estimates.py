"""Slurm's start estimates (`sbatch --test-only`), kept for a minute per user and job shape.

A user who submits the same kind of job several times in a row asks Slurm the same
question each time: where would this start earliest? The answer barely moves within a
minute (the scheduler's own estimates move by its cycle), so the advice keeps it for
`TTL` in one small JSON file in the user's state directory, keyed by the partition and
the job's shape (every sbatch option but the job's name, paths, mail and comment).

Only Slurm's yes is kept: a refusal or a failure may be passing, and is asked again. The
file is a cache, nothing more: missing, unreadable, corrupt or from another version, it
is ignored (and replaced at the next write); two processes writing it at once lose one
of their answers, never the file (written to a temporary name and renamed).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from jobsmith.adapters.options import JobOptions
from jobsmith.adapters.scheduler import TestOnlyResult
from jobsmith.files import replace_file

#: how long an estimate is reused
TTL = timedelta(seconds=60)
#: the options that do not change where or when Slurm would start a job
_NOT_SHAPE = frozenset(
    {"job_name", "output", "error", "chdir", "comment", "export", "mail_type", "mail_user"}
)
_VERSION = 1


def shape_key(user: str, options: JobOptions) -> str:
    """The key of a job's shape for user: a hash of its scheduling options."""
    shape = options.model_dump(mode="json", exclude=set(_NOT_SHAPE), exclude_none=True)
    text = json.dumps({"user": user, "shape": shape}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


class EstimateCache:
    """Start estimates kept in one file (module docstring)."""

    def __init__(
        self,
        path: Path,
        *,
        ttl: timedelta = TTL,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._path = path
        self._ttl = ttl
        self._now = now
        self._lock = threading.Lock()  # the advice's threads write one at a time

    def get(self, key: str) -> TestOnlyResult | None:
        """The estimate kept under key, if it is younger than the TTL."""
        entry = self._entries().get(key)
        if not isinstance(entry, dict):
            return None
        try:
            at = datetime.fromisoformat(entry["at"])
            age = self._now() - at
            if age < timedelta(0) or age >= self._ttl:
                return None
            return TestOnlyResult.model_validate(entry["result"])
        except (KeyError, TypeError, ValueError):
            return None  # a damaged entry is no estimate

    def put(self, key: str, result: TestOnlyResult) -> None:
        """Keep result under key (only Slurm's yes; the expired entries are dropped)."""
        if not result.ok:
            return
        with self._lock:
            now = self._now()
            kept = {k: v for k, v in self._entries().items() if self._fresh(v, now)}
            kept[key] = {"at": now.isoformat(), "result": result.model_dump(mode="json")}
            body = json.dumps({"version": _VERSION, "estimates": kept}).encode()
            # a cache that cannot be written is no cache: the advice still stands
            with contextlib.suppress(OSError):
                replace_file(self._path, body, durable=False)

    def _entries(self) -> dict[str, object]:
        try:
            data = json.loads(self._path.read_bytes())
        except (OSError, ValueError):
            return {}
        if not isinstance(data, dict) or data.get("version") != _VERSION:
            return {}
        entries = data.get("estimates")
        return entries if isinstance(entries, dict) else {}

    def _fresh(self, entry: object, now: datetime) -> bool:
        try:
            at = datetime.fromisoformat(entry["at"])  # type: ignore[index]
        except (KeyError, TypeError, ValueError):
            return False
        return timedelta(0) <= now - at < self._ttl

"""Whether the site keeps accounting, and how long its controller keeps finished jobs
(and, read from the same answer, the cap on array indices the controller enforces).

Some sites run no slurmdbd (AccountingStorageType=accounting_storage/none); there every
sacct call fails with "Slurm accounting storage is disabled", and the only record of a
job is the controller's, which forgets a finished job MinJobAge seconds after it ended.
The adapter learns this once per process (from that sacct answer, or from
`scontrol show config`) and remembers it per cluster in a small file in jobsmith's state
directory, so later processes skip the failing sacct. The memory is re-checked after
RECHECK_S, so a site that turns accounting on (or off) is noticed within that time; a
sacct that says "disabled" is believed at once whatever the memory says.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from jobsmith.adapters.slurm.remembered import Remembered
from jobsmith.errors import SchedulerError

#: how long a remembered answer is trusted before `scontrol show config` is asked again
RECHECK_S = 3600

#: sacct's words (22.05 and 24.11) where the site keeps no accounting
NO_ACCOUNTING = re.compile(r"accounting storage is disabled", re.IGNORECASE)


class AccountingDisabled(SchedulerError):
    """The cluster keeps no accounting (AccountingStorageType=accounting_storage/none):
    only what the controller still holds can be read."""


class AccountingFacts(BaseModel):
    """What the adapter knows about a cluster's accounting, as remembered on disk."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    accounting: bool = Field(description="false where sacct says accounting is disabled")
    min_job_age_s: int | None = Field(
        None, description="MinJobAge: seconds the controller keeps a finished job; None unknown"
    )
    max_array_size: int | None = Field(
        None,
        description="MaxArraySize: an array's indices must be below it (read with MinJobAge "
        "from the same answer); None unknown",
    )
    checked_at: datetime = Field(description="when this was learned (UTC)")

    def fresh(self, now: datetime) -> bool:
        """True while the answer is young enough to be used without asking Slurm."""
        return now - self.checked_at < timedelta(seconds=RECHECK_S)


class AccountingMemory(Remembered[AccountingFacts]):
    """One cluster's AccountingFacts in a JSON file; unreadable or missing means unknown."""

    def __init__(self, path: Path) -> None:
        super().__init__(path, AccountingFacts)


def facts_from_config(text: str, now: datetime | None = None) -> AccountingFacts:
    """AccountingFacts from `scontrol show config` (lines 'Key = value')."""
    values: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            values[key.strip()] = value.strip()
    storage = values.get("AccountingStorageType", "")
    if not storage:
        raise SchedulerError(
            "cannot read `scontrol show config`: no AccountingStorageType line; "
            "is this a Slurm controller's answer?"
        )
    return AccountingFacts(
        accounting=storage != "accounting_storage/none",
        min_job_age_s=_seconds(values.get("MinJobAge")),
        max_array_size=_count(values.get("MaxArraySize")),
        checked_at=now or datetime.now(UTC),
    )


def _seconds(text: str | None) -> int | None:
    """'30 sec' (both versions print the unit) as 30; anything else is unknown."""
    match = re.fullmatch(r"(\d+)(?:\s*sec)?", (text or "").strip())
    return int(match.group(1)) if match else None


def _count(text: str | None) -> int | None:
    """'10001' as 10001; anything else (a missing line) is unknown."""
    value = (text or "").strip()
    return int(value) if value.isdigit() else None

"""What the Slurm adapter remembers between processes: each a pydantic model in a small
JSON file of jobsmith's state directory, one file per cluster and kind. Whether the site
keeps accounting (parsing/accounting.py: re-checked after an hour) and each user's submit
limits (sacctmgr's QoS and association limits: re-read after SUBMIT_FACTS_TTL_S).

Why the submit limits: reading them is two sacctmgr calls that wait on slurmdbd for
0.2-0.3 s, and every submit and `plan run` checks them before its first sbatch, for a
limit an admin changes a few times a year (issue 26). A limit lowered within the window
is still Slurm's to enforce at sbatch: the check before it is a courtesy that names the
limit, already racing any other session of the user's that submits at the same moment.

A cache and nothing more: missing, unreadable, damaged or from another version, a file is
unknown and Slurm is asked again; a state directory that cannot be written only costs
asking again next time. Written to a temporary name and renamed, so two processes writing
at once lose one answer, never the file.
"""

from __future__ import annotations

import contextlib
from datetime import datetime, timedelta
from pathlib import Path
from typing import Generic, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from jobsmith.adapters.slurm.parsing.qoslimits import SubmitFacts
from jobsmith.files import replace_file

#: seconds a user's remembered submit limits are used before sacctmgr is asked again
SUBMIT_FACTS_TTL_S = 300

M = TypeVar("M", bound=BaseModel)


class Remembered(Generic[M]):
    """One model in a JSON file; unreadable or missing means unknown (module docstring)."""

    def __init__(self, path: Path, model: type[M]) -> None:
        self.path = path
        self._model = model

    def load(self) -> M | None:
        """The remembered value, or None (never written, or damaged: then asked again)."""
        try:
            return self._model.model_validate_json(self.path.read_bytes())
        except (OSError, ValidationError):
            return None

    def save(self, value: M) -> None:
        """Write atomically; a state directory that cannot be written only costs a re-check."""
        with contextlib.suppress(OSError):
            replace_file(self.path, value.model_dump_json().encode(), durable=False)


class SubmitFactsSeen(BaseModel):
    """One user's submit limits and when sacctmgr said them."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    facts: SubmitFacts
    checked_at: datetime = Field(description="when sacctmgr answered (UTC)")


class KnownSubmitFacts(BaseModel):
    """The submit limits remembered for a cluster, by user (over SSH the cluster's user
    may differ from this machine's)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    users: dict[str, SubmitFactsSeen] = Field(default_factory=dict)

    def fresh(self, user: str, now: datetime) -> SubmitFacts | None:
        """user's limits if sacctmgr said them less than SUBMIT_FACTS_TTL_S ago."""
        seen = self.users.get(user)
        if seen is None or not _young(seen.checked_at, now):
            return None
        return seen.facts

    def adding(self, facts: SubmitFacts, now: datetime) -> KnownSubmitFacts:
        """These facts with facts.user's just read; expired users' dropped."""
        kept = {u: s for u, s in self.users.items() if _young(s.checked_at, now)}
        kept[facts.user] = SubmitFactsSeen(facts=facts, checked_at=now)
        return KnownSubmitFacts(users=kept)


def _young(at: datetime, now: datetime) -> bool:
    """at is within the TTL before now (a clock set back makes it old: asked again)."""
    return timedelta(0) <= now - at < timedelta(seconds=SUBMIT_FACTS_TTL_S)

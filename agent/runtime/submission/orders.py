"""Where a submission's bytes come from: what `Executor.submit` takes, its one door.

Every job jobsmith hands to sbatch enters the executor as one of these orders. They
differ only in where the script and options come from and in what the judge still has
to say about them; from there every submission takes one path (executor.py): the judge's
ruling, the intent committed, a refusal or a person asked, sbatch, the ledger, the
result.

- NewJob: a request of a person, a model or a brain, judged now for its origin.
- Checked: a job an earlier check assembled (MCP's two-step submit): its bytes, not a
  new rendering; the budgets are judged again, time has passed.
- Rerun: a job jobsmith ran before, its recorded script with new resources.
- Planned: a plan's job, allowed as part of its whole plan: not asked of a person again.
- Recorded: the bytes an intent or an approval recorded (resume, `jobsmith approve`):
  they must still hash to what was recorded and approved.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from jobsmith.adapters.options import JobOptions
from jobsmith.agent.runtime.submission import steps as st
from jobsmith.agent.runtime.submission.judging.judge import CheckedJob, Origin


@dataclass(frozen=True)
class NewJob:
    """A submit step's request, judged now for who asks (the judge's person-first rules)."""

    step: st.Submit
    origin: Origin = field(default_factory=Origin)


@dataclass(frozen=True)
class Checked:
    """A job assembled by an earlier check, submitted as exactly those bytes."""

    step: st.Submit
    checked: CheckedJob


@dataclass(frozen=True)
class Rerun:
    """A re-run of a job jobsmith submitted: its script with grown resources."""

    step: st.Rerun


@dataclass(frozen=True)
class Planned:
    """A plan's job: its checked script, with the dependencies on its steps' jobs."""

    step: st.Submit
    template: str
    script: str
    options: JobOptions


@dataclass(frozen=True)
class Recorded:
    """The submission an intent recorded, with its original tag.

    approved_sha256 is the hash a person approved (None if no one had to): the script
    must still hash to it, and to the hash recorded beside it.
    """

    step_id: str
    intent: Mapping[str, Any]
    approved_sha256: str | None = None

    @classmethod
    def approved(cls, step_id: str, asked: Mapping[str, Any]) -> Recorded:
        """The script a person approved: what they were shown is what must run."""
        return cls(step_id, asked, approved_sha256=str(asked["script_sha256"]))


Order = NewJob | Checked | Rerun | Planned | Recorded

"""A job whose accounting row names nothing yet (slurmdbd's stand-in row right after it
ended: adapters/slurm/parse.py) is shown under the name jobsmith submitted it with, so
`wait`'s final table and `status` agree (issue 14: wait named such a job "allocation")."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

from jobsmith.adapters.options import JobOptions
from jobsmith.adapters.records import JobRecord
from jobsmith.adapters.scheduler import JobStatus
from jobsmith.adapters.states import JobState
from jobsmith.agent.app import _named
from jobsmith.agent.runtime.ledger import JobLedger, SubmissionRecord

LAB = Path(__file__).parent / "fixtures" / "lab-22.05"


def _status(name: str) -> JobStatus:
    record = JobRecord(job_id="7", job_id_raw="7", name=name, state=JobState.COMPLETED)
    return JobStatus(job_id="7", state=JobState.COMPLETED, record=record)


def test_a_nameless_record_takes_the_submitted_name_and_a_named_one_keeps_its_own(
    tmp_path: Path,
) -> None:
    ledger = JobLedger(tmp_path)
    ledger.record(
        SubmissionRecord(
            job_id="7",
            cluster="lab",
            template="command",
            params={},
            options=JobOptions(job_name="command.js-0123456789ab"),
            script_sha256="0" * 64,
            submitted_at=datetime.now(),
        )
    )
    filled = _named(_status(""), ledger)
    assert filled.record is not None and filled.record.name == "command.js-0123456789ab"
    kept = _named(_status("other.js-aaaaaaaaaaaa"), ledger)
    assert kept.record is not None and kept.record.name == "other.js-aaaaaaaaaaaa"
    assert _named(_status(""), JobLedger(tmp_path / "empty")).record.name == ""  # type: ignore[union-attr]


class _Sacct:
    """A transport whose sacct answers the given captures in turn (the last one after)."""

    def __init__(self, *captures: str) -> None:
        self.captures = list(captures)
        self.calls = 0

    def run(self, argv: Any, *, timeout: float, stdin: Any = None, env: Any = None) -> Any:
        from jobsmith.adapters.transport import CommandResult

        self.calls += 1
        text = self.captures[min(self.calls, len(self.captures)) - 1]
        return CommandResult(tuple(argv), 0, text, "")


def test_a_stand_in_accounting_row_is_asked_for_again_a_moment_later() -> None:
    """slurmdbd's stand-in row for a just-ended job (fixtures/lab-22.05/README.md) has no
    name, limit or memory asked: sacct is asked once more after a second."""
    from jobsmith.adapters.slurm.argv import DELIMITER
    from jobsmith.adapters.slurm.scheduler import SlurmScheduler

    # the captures are sacct -P's ('|'); the adapter asks for its own delimiter
    stand_in = (LAB / "sacct-placeholder-pipe.txt").read_text().replace("|", DELIMITER)
    complete = (LAB / "sacct-fields-pipe.txt").read_text().replace("|", DELIMITER)
    waited: list[float] = []
    twice = _Sacct(stand_in, complete)
    records = SlurmScheduler(twice, sleep=waited.append).accounting(["16329"], datetime.now())
    assert twice.calls == 2 and waited == [1.0]
    assert all(r.name for r in records)
    once = _Sacct(complete)
    assert SlurmScheduler(once, sleep=waited.append).accounting(["18"], datetime.now())
    assert once.calls == 1 and waited == [1.0]

"""A job whose accounting row names nothing yet (slurmdbd's stand-in row right after it
ended: adapters/slurm/parse.py) is shown under the name jobsmith submitted it with, so
`wait`'s final table and `status` agree (issue 14: wait named such a job "allocation")."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from jobsmith.adapters.options import JobOptions
from jobsmith.adapters.records import JobRecord
from jobsmith.adapters.scheduler import JobStatus
from jobsmith.adapters.states import JobState
from jobsmith.agent.app import _named
from jobsmith.agent.runtime.ledger import JobLedger, SubmissionRecord


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

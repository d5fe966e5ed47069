"""An ended array that accounting has not finished writing is held, not decided
(agent/runtime/recovery/unwritten.py): a poll that read 2 of an array's 5 tasks, all
ended, must not record the array's end with 2 tasks for good."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

from jobsmith.adapters.options import JobOptions
from jobsmith.adapters.records import JobRecord
from jobsmith.adapters.slurm.parsing.status import merge_status
from jobsmith.adapters.states import JobState
from jobsmith.agent.runtime.recovery.unwritten import HOLD_S, hold_unwritten_arrays
from jobsmith.agent.runtime.session.events import EventKind
from jobsmith.agent.runtime.session.jobstate import record_job_states
from jobsmith.agent.runtime.session.ledger import JobLedger, SubmissionRecord
from jobsmith.agent.runtime.session.readmodel import SessionFolds
from jobsmith.agent.runtime.session.session_log import SessionLog
from jobsmith.agent.runtime.session.store import FileSessionStore

NOW = datetime(2026, 12, 3, 7, 0, 0)


def _tasks(n: int, ended: datetime = NOW - timedelta(seconds=5)) -> list[JobRecord]:
    return [
        JobRecord(
            job_id=f"7_{i}",
            job_id_raw=str(8 + i),
            array_job_id="7",
            array_task_id=i,
            name="file_array.p0",
            state=JobState.COMPLETED,
            exit_code=0,
            end_time=ended,
        )
        for i in range(n)
    ]


def _world(tmp_path: Path, recorded: JobState | None) -> tuple[FileSessionStore, JobLedger, str]:
    store = FileSessionStore(tmp_path / "sessions")
    session_id = store.create({"title": "t"})
    if recorded is not None:
        SessionLog(store, session_id).append(
            EventKind.JOB_STATE, {"job_id": "7", "state": recorded.value}, None
        )
    ledger = JobLedger(tmp_path / "jobs")
    ledger.record(
        SubmissionRecord(
            job_id="7",
            cluster="lab",
            template="file_array",
            params={},
            options=JobOptions(job_name="file_array.p0", array="0-4", array_throttle=5),
            script_sha256="0" * 64,
            submitted_at=NOW - timedelta(minutes=1),
            session_id=session_id,
        )
    )
    return store, ledger, session_id


def test_an_array_with_tasks_unwritten_keeps_the_state_last_recorded(tmp_path: Path) -> None:
    store, ledger, _ = _world(tmp_path, JobState.RUNNING)
    short = merge_status(["7"], _tasks(2), [])  # accounting alone: 2 of 5 tasks written
    assert short["7"].state is JobState.COMPLETED  # what the merge alone would decide
    held = hold_unwritten_arrays(short, ledger, SessionFolds(store), NOW)["7"]
    assert held.state is JobState.RUNNING and held.task_counts == {"COMPLETED": 2}
    whole = merge_status(["7"], _tasks(5), [])
    assert hold_unwritten_arrays(whole, ledger, SessionFolds(store), NOW) == whole


def test_never_seen_it_is_ending_and_a_record_that_never_comes_holds_it_only_so_long(
    tmp_path: Path,
) -> None:
    store, ledger, _ = _world(tmp_path, None)
    short = merge_status(["7"], _tasks(3), [])
    held = hold_unwritten_arrays(short, ledger, SessionFolds(store), NOW)["7"]
    assert held.state is JobState.COMPLETING and not held.state.is_terminal
    later = NOW + timedelta(seconds=HOLD_S + 10)
    assert hold_unwritten_arrays(short, ledger, SessionFolds(store), later) == short


def test_a_job_it_did_not_submit_or_a_task_asked_alone_is_left_as_answered(
    tmp_path: Path,
) -> None:
    store, _, _ = _world(tmp_path, JobState.RUNNING)
    empty = JobLedger(tmp_path / "other-jobs")
    short = merge_status(["7", "7_1"], _tasks(2), [])
    assert hold_unwritten_arrays(short, empty, SessionFolds(store), NOW) == short
    store, ledger, _ = _world(tmp_path / "b", JobState.RUNNING)
    held = hold_unwritten_arrays(short, ledger, SessionFolds(store), NOW)
    assert held["7_1"].state is JobState.COMPLETED and held["7"].state is JobState.RUNNING


def test_the_session_records_the_end_once_with_every_task(tmp_path: Path) -> None:
    store, ledger, session_id = _world(tmp_path, JobState.RUNNING)
    for written in (2, 4, 5, 5):  # four polls while accounting catches up
        polled = hold_unwritten_arrays(
            merge_status(["7"], _tasks(written), []), ledger, SessionFolds(store), NOW
        )
        record_job_states(store, ledger, polled, None, folds=SessionFolds(store))
    ends = [
        e.data
        for e in store.read(session_id)
        if e.kind is EventKind.JOB_STATE and e.data["state"] == "COMPLETED"
    ]
    assert [d["task_counts"] for d in ends] == [{"COMPLETED": 5}]

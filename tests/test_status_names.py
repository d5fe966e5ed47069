"""slurmdbd's stand-in row for a just-ended job (adapters/slurm/parsing/parse.py marks it) costs
nothing extra (issue 21): one sacct answers, whatever its rows hold, and the agent fills
the row from what it submitted (agent/runtime/recovery/standin.py): the name jobsmith submitted it
under (so `wait`'s final table and `status` agree: issue 14), its memory and time, and
the state the last poll saw. Nothing is decided from a stand-in row (watcher cycle)."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

from scripted_transport import Reply, ScriptedTransport

from jobsmith.adapters.options import JobOptions
from jobsmith.adapters.records import JobRecord, QueueRecord
from jobsmith.adapters.scheduler import JobStatus
from jobsmith.adapters.slurm.commands.argv import DELIMITER
from jobsmith.adapters.slurm.parsing.status import merge_status
from jobsmith.adapters.slurm.scheduler import SlurmScheduler
from jobsmith.adapters.states import JobState
from jobsmith.agent.runtime.recovery.standin import settle_stand_ins
from jobsmith.agent.runtime.session.events import EventKind
from jobsmith.agent.runtime.session.lastpoll import LastPoll, PolledJob
from jobsmith.agent.runtime.session.ledger import JobLedger, SubmissionRecord
from jobsmith.agent.runtime.session.readmodel import SessionFolds
from jobsmith.agent.runtime.session.session_log import SessionLog
from jobsmith.agent.runtime.session.store import FileSessionStore
from jobsmith.agent.watcher.cycle import watch_cycle

LAB = Path(__file__).parent / "fixtures" / "lab-22.05"
NAME = "command.js-0123456789ab"


class _Sacct(ScriptedTransport):
    """A transport whose sacct answers the given captures in turn (the last one after)."""

    def __init__(self, *captures: str) -> None:
        super().__init__()
        self.captures = captures

    def answer(self, argv: tuple[str, ...], **run: Any) -> Reply:
        return self.captures[min(len(self.calls), len(self.captures)) - 1], "", 0


def _capture(name: str) -> str:
    # the captures are sacct -P's ('|'); the adapter asks for its own delimiter
    return (LAB / name).read_text().replace("|", DELIMITER)


def test_a_stand_in_row_costs_one_sacct_and_is_marked() -> None:
    """The capture: job 16329's row PENDING, unnamed, no limit, beside a RUNNING batch step."""
    slept: list[float] = []
    once = _Sacct(_capture("sacct-placeholder-pipe.txt"), _capture("sacct-fields-pipe.txt"))
    records = SlurmScheduler(once, sleep=slept.append).accounting(["16329"], datetime.now())
    assert len(once.calls) == 1 and slept == []
    (record,) = records
    assert record.stand_in and record.name == "" and record.timelimit_s is None
    assert record.state is JobState.PENDING and record.steps[0].state is JobState.RUNNING
    complete = _Sacct(_capture("sacct-fields-pipe.txt"))
    records = SlurmScheduler(complete, sleep=slept.append).accounting(["18"], datetime.now())
    assert records and not any(r.stand_in for r in records) and len(complete.calls) == 1


def _stand_in(job_id: str = "7", state: JobState = JobState.FAILED) -> JobStatus:
    record = JobRecord(job_id=job_id, job_id_raw=job_id, name="", state=state, stand_in=True)
    return JobStatus(job_id=job_id, state=state, record=record)


def _submitted(tmp_path: Path, session_id: str | None, job_id: str = "7") -> JobLedger:
    ledger = JobLedger(tmp_path / "jobs")
    options = JobOptions(job_name=NAME, mem_mb=100, time_limit_s=600, partition="debug")
    ledger.record(
        SubmissionRecord(
            job_id=job_id,
            cluster="lab",
            template="command",
            params={},
            options=options,
            script_sha256="0" * 64,
            submitted_at=datetime.now(),
            session_id=session_id,
        )
    )
    return ledger


def _session_with_state(tmp_path: Path, state: JobState) -> tuple[FileSessionStore, str]:
    store = FileSessionStore(tmp_path / "sessions")
    session_id = store.create({"title": "t"})
    SessionLog(store, session_id).append(
        EventKind.JOB_STATE, {"job_id": "7", "state": state.value}, None
    )
    return store, session_id


def _no_poll() -> LastPoll | None:
    raise AssertionError("the last poll was read though the session knew the state")


def test_a_stand_in_is_filled_from_the_ledger_and_keeps_the_sessions_state(
    tmp_path: Path,
) -> None:
    store, session_id = _session_with_state(tmp_path, JobState.RUNNING)
    ledger = _submitted(tmp_path, session_id)
    settled = settle_stand_ins({"7": _stand_in()}, ledger, SessionFolds(store), _no_poll)
    st = settled["7"]
    assert st.state is JobState.RUNNING and st.stand_in  # not FAILED: not news, yet
    assert st.record is not None and st.record.name == NAME
    assert st.record.req_mem_bytes == 100 * 1024 * 1024 and st.record.timelimit_s == 600
    assert st.record.partition == "debug" and st.record.state is JobState.FAILED


def test_a_stand_in_of_no_session_keeps_the_last_polls_state_or_shows_nothing(
    tmp_path: Path,
) -> None:
    store = FileSessionStore(tmp_path / "sessions")
    ledger = _submitted(tmp_path, None)
    poll = LastPoll(at=datetime.now().astimezone(), jobs=(PolledJob(job_id="7", state="RUNNING"),))
    settled = settle_stand_ins({"7": _stand_in()}, ledger, SessionFolds(store), lambda: poll)
    assert settled["7"].state is JobState.RUNNING
    # never seen before: the row's own state, read with its steps (the capture's PENDING
    # beside a RUNNING batch step is a job that runs: seen in CI right after a start)
    unseen = settle_stand_ins({"7": _stand_in()}, ledger, SessionFolds(store), lambda: None)
    assert unseen["7"].state is JobState.FAILED and unseen["7"].stand_in
    rows = SlurmScheduler(_Sacct(_capture("sacct-placeholder-pipe.txt"))).accounting(
        ["16329"], datetime.now()
    )
    alone = merge_status(["16329"], rows, [])  # the controller forgot it, or was not asked
    started = settle_stand_ins(alone, ledger, SessionFolds(store), lambda: None)
    assert started["16329"].state is JobState.RUNNING and started["16329"].stand_in


def test_where_the_controller_answers_its_state_stands_and_the_ledger_fills_the_rest(
    tmp_path: Path,
) -> None:
    """Seen in CI: a held job's stand-in row beside the controller's PENDING/JobHeldUser;
    the controller's answer is the state (the row is no stand-in then), and memory and time
    still come from the ledger."""
    store, session_id = _session_with_state(tmp_path, JobState.RUNNING)
    ledger = _submitted(tmp_path, session_id, job_id="16329")
    rows = SlurmScheduler(_Sacct(_capture("sacct-placeholder-pipe.txt"))).accounting(
        ["16329"], datetime.now()
    )
    held = QueueRecord(
        job_id="16329",
        job_id_raw="16329",
        name=NAME,
        state=JobState.PENDING,
        reason="JobHeldUser",
        partition="debug",
    )
    merged = merge_status(["16329"], rows, [held])
    assert merged["16329"].state is JobState.PENDING and merged["16329"].in_queue
    assert merged["16329"].stand_in  # still: nothing is decided from it
    settled = settle_stand_ins(merged, ledger, SessionFolds(store), _no_poll)["16329"]
    assert settled.state is JobState.PENDING and settled.reason == "JobHeldUser"
    assert settled.record is not None and settled.record.name == NAME
    assert settled.record.req_mem_bytes == 100 * 1024 * 1024
    assert settled.record.timelimit_s == 600
    # a job jobsmith did not submit keeps the row's gaps, and a real row is left alone
    foreign = settle_stand_ins({"9": _stand_in("9")}, ledger, SessionFolds(store), lambda: None)
    assert foreign["9"].record is not None and foreign["9"].record.name == ""
    real = JobStatus(
        job_id="7",
        state=JobState.FAILED,
        record=JobRecord(job_id="7", job_id_raw="7", name="x", state=JobState.FAILED),
    )
    assert settle_stand_ins({"7": real}, ledger, SessionFolds(store), _no_poll)["7"] == real


def test_a_named_record_keeps_its_own_name(tmp_path: Path) -> None:
    store, session_id = _session_with_state(tmp_path, JobState.RUNNING)
    ledger = _submitted(tmp_path, session_id)
    named = _stand_in().record.model_copy(update={"name": "other.js-aaaaaaaaaaaa"})  # type: ignore[union-attr]
    st = JobStatus(job_id="7", state=JobState.FAILED, record=named)
    settled = settle_stand_ins({"7": st}, ledger, SessionFolds(store), _no_poll)
    assert settled["7"].record.name == "other.js-aaaaaaaaaaaa"  # type: ignore[union-attr]


def test_the_watcher_decides_nothing_from_a_stand_in_and_decides_on_the_real_row(
    tmp_path: Path,
) -> None:
    """A failure the session recorded (say, by `jobsmith status`) and not decided yet:
    a cycle answered by a stand-in row leaves it for the next, which decides."""
    store, session_id = _session_with_state(tmp_path, JobState.FAILED)
    ledger = _submitted(tmp_path, session_id)
    folds = SessionFolds(store)
    answers = [{"7": _stand_in()}]
    real = JobRecord(job_id="7", job_id_raw="7", name=NAME, state=JobState.FAILED)
    answers.append({"7": JobStatus(job_id="7", state=JobState.FAILED, record=real)})
    decided: list[JobStatus] = []
    polls: list[list[str]] = []

    def status(ids: list[str], since: datetime) -> dict[str, JobStatus]:
        polls.append(ids)
        return settle_stand_ins(answers[len(polls) - 1], ledger, folds, lambda: None)

    def decide(change: Any, st: JobStatus) -> dict[str, object]:
        decided.append(st)
        return {"job_id": st.job_id, "action": "report"}

    first = watch_cycle(store, ledger, status, decide, folds=folds)
    assert first.decisions == [] and first.changes == [] and decided == []
    second = watch_cycle(store, ledger, status, decide, folds=folds)
    assert [d["job_id"] for d in second.decisions] == ["7"]
    assert decided[0].record is not None and not decided[0].record.stand_in
    assert polls == [["7"], ["7"]]

"""The read model (agent/runtime/session/readmodel.py): a session's state is a fold over its
events, kept up to date by reading only the events appended since, on disk across
processes, and equal to folding the whole log at once (issue 8, item 2).

No Slurm here: the store is the real FileSessionStore in a temporary directory, wrapped
to count what is read.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs

from jobsmith.adapters.scheduler import JobStatus
from jobsmith.adapters.states import JobState
from jobsmith.agent.runtime.session.events import Event, EventKind
from jobsmith.agent.runtime.session.lastpoll import LastPollFile
from jobsmith.agent.runtime.session.payloads import (
    DecidedPayload,
    JobStatePayload,
    intent_payload,
    payload,
)
from jobsmith.agent.runtime.session.readmodel import FORMAT, SessionFold, SessionFolds, fold_events
from jobsmith.agent.runtime.session.session_log import SessionLog
from jobsmith.agent.runtime.session.store import FileSessionStore, SessionNotFound
from jobsmith.agent.runtime.submission.judging.policy import (
    History,
    history_from_events,
    history_from_folds,
)

FIXTURE = Path(__file__).parent / "fixtures" / "sessions"
FIXTURE_SESSION = "20261130T153454.647Z-ff20b4307244"


@dataclass
class CountingStore:
    """The real store, counting the events each read returned (what a fold costs)."""

    real: FileSessionStore
    reads: list[tuple[str, int, int]] = field(default_factory=list)

    def read(self, session_id: str, from_seq: int = 0, to_seq: int | None = None) -> list[Event]:
        events = self.real.read(session_id, from_seq, to_seq)
        self.reads.append((session_id, from_seq, len(events)))
        return events

    def events_read(self) -> int:
        return sum(n for _, _, n in self.reads)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)


def _job_state(log: SessionLog, job_id: str, state: JobState) -> None:
    log.append(EventKind.JOB_STATE, {"job_id": job_id, "state": state.value}, None)


def test_a_fold_reads_only_what_was_appended_since(tmp_path: Path) -> None:
    store = CountingStore(FileSessionStore(tmp_path / "sessions"))
    session = store.create({"title": "t"})
    log = SessionLog(store.real, session)
    for n in range(50):
        _job_state(log, str(1000 + n), JobState.RUNNING)
    folds = SessionFolds(store)  # type: ignore[arg-type]
    assert folds.of(session).seq == 50
    assert store.events_read() == 51
    _job_state(log, "1003", JobState.FAILED)
    log.append(EventKind.DECISION, {"job_id": "1003", "action": "hold"}, None)
    store.reads.clear()
    fold = folds.of(session)
    assert store.reads == [(session, 51, 2)]  # the two new events, nothing else
    assert fold.job_states["1003"] == "FAILED" and fold.decided == {"1003"}
    store.reads.clear()
    folds.of(session)
    assert store.events_read() == 0


def test_a_fold_kept_on_disk_spares_the_next_process_the_whole_log(tmp_path: Path) -> None:
    store = CountingStore(FileSessionStore(tmp_path / "sessions"))
    session = store.create()
    log = SessionLog(store.real, session)
    for n in range(20):
        _job_state(log, str(n), JobState.PENDING)
    SessionFolds(store, tmp_path / "folds").of(session)  # type: ignore[arg-type]
    _job_state(log, "7", JobState.COMPLETED)
    store.reads.clear()
    later = SessionFolds(store, tmp_path / "folds").of(session)  # type: ignore[arg-type]
    # one read to check the kept fold's last event is in the log, then the new event
    assert store.reads == [(session, 20, 1), (session, 21, 1)]
    assert later.job_states["7"] == "COMPLETED" and later.seq == 21


@pytest.mark.parametrize(
    "damage",
    [
        lambda text, other: "{not json",
        lambda text, other: text.replace(f'"format":{FORMAT}', '"format":99'),
        lambda text, other: other,  # another session's fold under this name
        lambda text, other: text.replace('"seq":3', '"seq":300'),  # ahead of the log
        # what a power loss can leave of a cache written without fsync
        lambda text, other: "",
        lambda text, other: text[: len(text) // 2],
    ],
)
def test_a_damaged_or_foreign_fold_file_is_rebuilt_from_the_log(
    tmp_path: Path, damage: Any
) -> None:
    store = FileSessionStore(tmp_path / "sessions")
    session, other = store.create(), store.create()
    for sid in (session, other):
        log = SessionLog(store, sid)
        _job_state(log, "1", JobState.RUNNING)
        _job_state(log, "1", JobState.COMPLETED)
        log.append(EventKind.NOTE, {"text": "x"}, None)
    SessionFolds(store, tmp_path / "folds").of(session)
    SessionFolds(store, tmp_path / "folds").of(other)
    path = tmp_path / "folds" / f"{session}.json"
    damaged = damage(path.read_text(), (tmp_path / "folds" / f"{other}.json").read_text())
    assert damaged != path.read_text()  # each case really damages the kept fold
    path.write_text(damaged)
    fold = SessionFolds(store, tmp_path / "folds").of(session)
    assert (fold.session_id, fold.seq, fold.job_states) == (session, 3, {"1": "COMPLETED"})


def test_the_fold_cache_is_not_forced_to_disk_but_events_are(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fold file is a cache its reader rebuilds (above), so its write skips fsync, the
    bulk of a submit's file work on a loaded disk (issue 26); an event is the record, and
    stays durable before the step it commits runs."""
    import os

    synced: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd))[1])
    store = FileSessionStore(tmp_path / "sessions")
    session = store.create()
    log = SessionLog(store, session)
    synced.clear()
    _job_state(log, "1", JobState.RUNNING)
    assert synced, "an event append must reach the disk"
    synced.clear()
    SessionFolds(store, tmp_path / "folds").of(session)
    assert (tmp_path / "folds" / f"{session}.json").exists() and synced == []


def test_a_fold_of_a_session_that_does_not_exist_is_an_error(tmp_path: Path) -> None:
    store = FileSessionStore(tmp_path / "sessions")
    with pytest.raises(SessionNotFound):
        SessionFolds(store, tmp_path / "folds").of("20260101T000000.000Z-000000000000")


def test_the_log_this_release_writes_still_folds(tmp_path: Path) -> None:
    shutil.copytree(FIXTURE / FIXTURE_SESSION, tmp_path / "sessions" / FIXTURE_SESSION)
    store = FileSessionStore(tmp_path / "sessions")
    events = store.read(FIXTURE_SESSION)
    assert len(events) == 14
    # every event of a kind with a payload model fits it (none is skipped as damaged)
    typed = {EventKind.JOB_STATE, EventKind.RESULT, EventKind.DECISION, EventKind.INTENT}
    typed.add(EventKind.UNBLOCKED)
    assert all(payload(e) is not None for e in events if e.kind in typed)
    assert {e.kind for e in events} - typed == {EventKind.SESSION_OPENED, EventKind.NOTE}
    assert [intent_payload(e).job_name for e in events if e.kind is EventKind.INTENT] == [
        e.data["job_name"] for e in events if e.kind is EventKind.INTENT
    ]
    fold = SessionFolds(store).of(FIXTURE_SESSION)
    assert fold.job_states == {"1000": "COMPLETED", "1001": "OUT_OF_MEMORY"}
    assert fold.decided == {"1001"}
    assert [s.node_hours for s in fold.spending] == [0.5, 0.5, 0.5]  # two jobs and a re-run
    assert fold.streak_failures == []  # the unblock reset it
    assert fold.last_reset == events[12].at


def test_a_legacy_model_output_decision_still_counts_as_decided() -> None:
    at = datetime(2026, 1, 1, tzinfo=UTC)
    legacy = Event(session_id="s", seq=1, kind=EventKind.MODEL_OUTPUT, at=at, data={"job_id": "9"})
    chat = Event(session_id="s", seq=2, kind=EventKind.MODEL_OUTPUT, at=at, data={"text": "hi"})
    assert isinstance(payload(legacy), DecidedPayload) and payload(chat) is None
    assert fold_events([legacy, chat]).decided == {"9"}


def test_a_payload_that_does_not_fit_its_kind_is_skipped_not_a_crash() -> None:
    at = datetime(2026, 1, 1, tzinfo=UTC)
    bad = Event(session_id="s", seq=0, kind=EventKind.JOB_STATE, at=at, data={"state": ["x"]})
    odd = Event(
        session_id="s",
        seq=1,
        kind=EventKind.JOB_STATE,
        at=at,
        data={"job_id": "1", "state": "WEIRD"},
    )
    assert payload(bad) is None
    state = payload(odd)
    assert isinstance(state, JobStatePayload) and state.job_state is None
    assert fold_events([bad, odd]).job_states == {"1": "WEIRD"}


# --- the budgets: folds give what a scan of every event in time order gave -------------

_T0 = datetime(2026, 6, 1, tzinfo=UTC)
_STATES = [JobState.COMPLETED, JobState.FAILED, JobState.CANCELLED, JobState.OUT_OF_MEMORY]


def _reference(events: list[Event], now: datetime) -> History:
    """The budget history as jobsmith computed it before folds: one scan in time order."""
    hist = History()
    for e in sorted(events, key=lambda e: e.at):
        if e.kind is EventKind.RESULT and e.data.get("submitted"):
            cost: Any = e.data["cost"]
            if e.at >= now - timedelta(hours=1):
                hist.submissions_last_hour += 1
            if e.at >= now - timedelta(days=1):
                hist.node_hours_last_day += cost["node_hours"]
                hist.gpu_hours_last_day += cost["gpu_hours"]
        elif e.kind is EventKind.JOB_STATE:
            state = JobState(str(e.data["state"]))
            if state is JobState.COMPLETED:
                hist.failures_in_a_row = 0
            elif state.counts_toward_streak:
                hist.failures_in_a_row += 1
        elif e.kind is EventKind.UNBLOCKED:
            hist.failures_in_a_row = 0
    return hist


_event = hs.tuples(
    hs.integers(0, 3),  # session
    hs.sampled_from(["state", "submitted", "unblocked"]),
    hs.sampled_from(_STATES),
    hs.integers(0, 3),  # node hours
)


@settings(max_examples=200, deadline=None)
@given(hs.lists(_event, max_size=40), hs.integers(1, 39))
def test_budget_history_from_folds_equals_one_scan_in_time_order(
    spec: list[tuple[int, str, JobState, int]], cut: int
) -> None:
    seqs: dict[str, int] = {}
    events = []
    for n, (sid, kind, state, hours) in enumerate(spec):
        session = f"s{sid}"
        seq = seqs[session] = seqs.get(session, -1) + 1
        at = _T0 + timedelta(minutes=37 * n)  # distinct times: ties have no order to keep
        if kind == "state":
            data: dict[str, Any] = {"job_id": str(n), "state": state.value}
            ek = EventKind.JOB_STATE
        elif kind == "submitted":
            data = {"submitted": True, "cost": {"node_hours": hours, "gpu_hours": hours / 2}}
            ek = EventKind.RESULT
        else:
            data, ek = {"by": "alice"}, EventKind.UNBLOCKED
        events.append(Event(session_id=session, seq=seq, kind=ek, at=at, data=data))
    now = _T0 + timedelta(minutes=37 * len(spec))
    expected = _reference(events, now)
    assert history_from_events(events, now) == expected
    # folding in two steps (a watcher cycle, then the next) ends where one fold does
    folds = []
    for session in {e.session_id for e in events}:
        mine = [e for e in events if e.session_id == session]
        fold = SessionFold(session_id=session)
        fold.fold(mine[: cut % (len(mine) + 1)])
        fold.fold(mine[cut % (len(mine) + 1) :])
        folds.append(fold)
    assert history_from_folds(folds, now) == expected


# --- the last poll --------------------------------------------------------------------


def test_the_last_poll_is_kept_and_read_back_without_slurm(tmp_path: Path) -> None:
    kept = LastPollFile(tmp_path / "state" / "last_poll.json")
    assert kept.read() is None
    at = datetime(2026, 11, 30, 12, tzinfo=UTC)
    statuses = {
        "41": JobStatus(job_id="41", state=JobState.RUNNING),
        "42": JobStatus(job_id="42", state=JobState.PENDING, reason="Priority"),
        "43": JobStatus(job_id="43", state=JobState.COMPLETED),
    }
    kept.record(statuses, at)
    poll = LastPollFile(tmp_path / "state" / "last_poll.json").read()
    assert poll is not None and poll.at == at
    assert [(j.job_id, j.state) for j in poll.active()] == [
        ("41", JobState.RUNNING),
        ("42", JobState.PENDING),
    ]
    assert poll.jobs[1].reason == "Priority"
    (tmp_path / "state" / "last_poll.json").write_text("{broken")
    assert kept.read() is None  # a damaged snapshot is no snapshot, not a crash
    assert list((tmp_path / "state").iterdir()) == [tmp_path / "state" / "last_poll.json"]


def test_pending_approvals_read_only_the_requests_still_waiting(tmp_path: Path) -> None:
    from jobsmith.agent.runtime.submission.approval.approvals import pending_approvals

    store = CountingStore(FileSessionStore(tmp_path / "sessions"))
    busy, quiet = store.create(), store.create()
    log = SessionLog(store.real, busy)
    for n in range(30):
        _job_state(log, str(n), JobState.RUNNING)
    log.append(EventKind.APPROVAL_ASKED, {"step": {"action": "submit"}, "reason": "big"}, "st-a")
    log.append(EventKind.APPROVAL_ASKED, {"step": {"action": "cancel"}, "reason": "r"}, "st-b")
    log.append(EventKind.APPROVAL_GIVEN, {"by": "erin"}, "st-b")
    SessionLog(store.real, quiet).append(EventKind.APPROVAL_ASKED, {"reason": "q"}, "st-c")
    SessionLog(store.real, quiet).append(EventKind.RESULT, {"outcome": "refused"}, "st-c")
    folds = SessionFolds(store, tmp_path / "folds")  # type: ignore[arg-type]
    (waiting,) = pending_approvals(store, folds)  # type: ignore[arg-type]
    assert (waiting.step_id, waiting.action, waiting.reason) == ("st-a", "submit", "big")
    store.reads.clear()
    assert [p.step_id for p in pending_approvals(store, folds)] == ["st-a"]  # type: ignore[arg-type]
    # each fold asks for what is new (nothing), then the one request is read
    assert [r for r in store.reads if r[2]] == [(busy, 31, 1)]

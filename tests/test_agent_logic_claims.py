"""Who holds a step, whose answer counts, and what the refusals say: claims and approvals
as single decisions, in one process (test_claims races real processes for the same rules).

Each test pins one decision point of agent/runtime/session/claims.py or
agent/runtime/submission/approval/approvals.py:
a lease's last moment, a holder that is this process or another one, a process whose name
has a parenthesis in it, the defaults a damaged approval request shows, the words of a
refusal.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from jobsmith.agent.runtime.session.claims import (
    CLOCK_SKEW,
    LOOKUP_ALLOWANCE,
    SBATCH_MAX_LIFE,
    Holder,
    StepClaimed,
    StepSettled,
    _start_time,
    append_once_per_job,
    append_result,
    claimable,
    holder,
    owner,
    process_start,
)
from jobsmith.agent.runtime.session.events import Event, EventKind
from jobsmith.agent.runtime.session.session_log import SessionLog
from jobsmith.agent.runtime.session.store import FileSessionStore, utc_now
from jobsmith.agent.runtime.submission.approval.approvals import (
    AlreadyAnswered,
    answer,
    pending_approvals,
)

HOST = socket.gethostname()
STEP = "st-0123456789"


@pytest.fixture
def store(tmp_path: Path) -> FileSessionStore:
    return FileSessionStore(tmp_path / "sessions")


@pytest.fixture
def session(store: FileSessionStore) -> str:
    return store.create()


def log(store: FileSessionStore, session: str) -> SessionLog:
    return SessionLog(store, session)


def dead_pid() -> int:
    """A pid no process has now (a child that has exited and been reaped)."""
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def at(seconds_ago: float) -> datetime:
    return utc_now() - timedelta(seconds=seconds_ago)


# --- holders and leases ------------------------------------------------------------------


def elsewhere(until: datetime) -> Holder:
    return Holder("other-node", 4, None, until - SBATCH_MAX_LIFE, until, EventKind.CLAIMED)


def test_a_holder_on_another_host_is_alive_until_its_lease_and_the_clock_skew_end() -> None:
    until = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
    last = until + CLOCK_SKEW
    assert elsewhere(until).alive(last - timedelta(microseconds=1))
    assert not elsewhere(until).alive(last)
    assert elsewhere(until).alive(until + CLOCK_SKEW / 2)


def test_an_intent_writer_on_this_host_is_alive_while_its_process_is() -> None:
    parent = os.getppid()  # alive, started before anything this test writes
    started = _start_time(parent)
    assert started is not None
    since = datetime.fromtimestamp(started, UTC)
    writer = Holder(HOST, parent, None, utc_now(), utc_now(), EventKind.INTENT)
    assert writer.alive(utc_now())
    # a clock a second off still counts it as the writer (btime is whole seconds)
    slack = Holder(HOST, parent, None, since - timedelta(seconds=1), since, EventKind.INTENT)
    assert slack.alive(utc_now())
    # a process that started after the intent was written cannot have written it
    recycled = Holder(HOST, parent, None, since - timedelta(seconds=3), since, EventKind.INTENT)
    assert not recycled.alive(utc_now())
    gone = Holder(HOST, dead_pid(), None, utc_now(), utc_now(), EventKind.INTENT)
    assert not gone.alive(utc_now())


def test_a_claim_s_holder_is_alive_while_the_very_process_that_claimed_runs() -> None:
    parent = os.getppid()
    same = Holder(HOST, parent, process_start(parent), at(1), at(0), EventKind.CLAIMED)
    assert same.alive(utc_now())
    other = Holder(HOST, parent, "another-boot:1", at(1), at(0), EventKind.CLAIMED)
    assert not other.alive(utc_now())


def test_process_start_names_the_boot_and_the_start_tick_of_a_live_process() -> None:
    boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    mine = process_start(os.getpid())
    assert mine is not None
    boot_part, _, ticks = mine.rpartition(":")
    assert boot_part == boot and ticks.isdigit() and int(ticks) > 0
    assert process_start(dead_pid()) is None


@pytest.fixture
def oddly_named(tmp_path: Path) -> Iterator[int]:
    """A live process whose command name holds ') ', as any user may name a program."""
    program = tmp_path / "a) b"
    program.symlink_to("/bin/sleep")
    child = subprocess.Popen([str(program), "30"])
    try:
        time.sleep(0.05)
        yield child.pid
    finally:
        child.kill()
        child.wait()


def test_a_command_name_with_a_parenthesis_does_not_shift_the_fields(oddly_named: int) -> None:
    stat = Path(f"/proc/{oddly_named}/stat").read_text()
    assert "(a) b)" in stat
    mine, theirs = process_start(os.getpid()), process_start(oddly_named)
    assert mine is not None and theirs is not None
    # it started after this process: its start tick is later, not some other field
    assert int(theirs.rpartition(":")[2]) >= int(mine.rpartition(":")[2])
    started = _start_time(oddly_named)
    assert started is not None and abs(started - time.time()) < 60


def test_owner_is_this_process_with_a_lease_in_utc(monkeypatch: pytest.MonkeyPatch) -> None:
    # a login node on local time: the lease is still written in UTC
    monkeypatch.setenv("TZ", "Pacific/Auckland")
    time.tzset()
    try:
        now = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
        assert owner(now, timedelta(minutes=7)) == {
            "host": HOST,
            "pid": os.getpid(),
            "started": process_start(os.getpid()),
            "until": "2026-06-01T12:07:00+00:00",
        }
    finally:
        monkeypatch.undo()  # TZ as it was, then the C library told so
        time.tzset()


def event(seq: int, kind: EventKind, step: str = STEP, **data: Any) -> Event:
    return Event(
        session_id="s",
        seq=seq,
        kind=kind,
        at=utc_now(),
        step_id=step,
        writer=f"{HOST}:7",
        data=data,
    )


def test_holder_follows_the_step_s_events() -> None:
    assert holder([], STEP) is None
    intent = event(1, EventKind.INTENT)
    asked = event(2, EventKind.APPROVAL_ASKED)
    mine = owner(utc_now(), timedelta(minutes=5))
    given = event(3, EventKind.APPROVAL_GIVEN, owner=mine)
    other_step = event(4, EventKind.CLAIMED, step="st-other", owner=mine)
    first = holder([intent], STEP)
    assert first is not None and (first.host, first.pid, first.kind) == (HOST, 7, intent.kind)
    assert first.started is None and first.until == intent.at + SBATCH_MAX_LIFE
    assert holder([intent, asked], STEP) is None  # a person has it now
    approver = holder([intent, asked, given, other_step], STEP)
    assert approver is not None and approver.is_me() and approver.kind is EventKind.APPROVAL_GIVEN
    refused = event(4, EventKind.APPROVAL_REFUSED)
    assert holder([intent, asked, given, refused], STEP) is None


def test_an_intent_whose_writer_has_no_pid_holds_nothing() -> None:
    intent = Event(
        session_id="s",
        seq=1,
        kind=EventKind.INTENT,
        at=utc_now(),
        step_id=STEP,
        writer=f"{HOST}:",  # damaged: no pid to look at
    )
    found = holder([intent], STEP)
    assert found is not None and found.pid == -1 and not found.alive(utc_now())


def test_a_recorded_owner_without_a_start_is_checked_against_its_claim_time() -> None:
    parent = os.getppid()
    until = (utc_now() + timedelta(minutes=5)).isoformat()
    who = {"host": HOST, "pid": parent, "started": None, "until": until}
    found = holder([event(1, EventKind.CLAIMED, owner=who)], STEP)
    assert found is not None and found.started is None and found.alive(utc_now())


# --- one result, one claim -----------------------------------------------------------------


def test_a_second_result_is_refused_naming_the_first_and_any_job_it_made(
    store: FileSessionStore, session: str
) -> None:
    first = append_result(log(store, session), STEP, {"outcome": "done"})
    with pytest.raises(StepSettled) as err:
        append_result(log(store, session), STEP, {"outcome": "failed"})
    assert err.value.step_id == STEP and err.value.event == first
    assert str(err.value) == (
        f"step {STEP} already has a result (event {first.seq}, by {first.writer}, outcome "
        "done); a second one is not recorded"
    )
    with pytest.raises(StepSettled) as ours:
        append_result(
            log(store, session), STEP, {"outcome": "done", "submitted": True, "job_id": "42"}
        )
    assert str(ours.value).endswith(
        "a second one is not recorded (job 42 was submitted all the same; the job ledger has it)"
    )
    with pytest.raises(StepSettled) as unsubmitted:
        append_result(
            log(store, session), STEP, {"outcome": "done", "submitted": False, "job_id": "43"}
        )
    assert str(unsubmitted.value).endswith("a second one is not recorded")


def test_a_claim_on_a_settled_or_held_step_names_it(store: FileSessionStore, session: str) -> None:
    parent = os.getppid()
    held = {
        **owner(utc_now(), timedelta(minutes=5)),
        "pid": parent,
        "started": process_start(parent),
    }
    log(store, session).append(EventKind.CLAIMED, {"owner": held}, STEP)
    with pytest.raises(StepClaimed) as busy:
        log(store, session).append_if(EventKind.CLAIMED, {}, STEP, claimable(STEP, utc_now))
    assert busy.value.step_id == STEP and busy.value.holder.pid == parent
    assert str(busy.value).startswith(f"step {STEP} is being resumed by {HOST}:{parent} (since ")
    append_result(log(store, session), STEP, {"outcome": "done"})
    with pytest.raises(StepSettled, match=f"step {STEP} already has a result"):
        log(store, session).append_if(EventKind.CLAIMED, {}, STEP, claimable(STEP, utc_now))


# --- approvals -----------------------------------------------------------------------------


def test_an_approval_makes_this_process_the_holder_for_its_lookups_and_sbatch(
    store: FileSessionStore, session: str
) -> None:
    log(store, session).append(EventKind.APPROVAL_ASKED, {"step": {"action": "cancel"}}, STEP)
    (item,) = pending_approvals(store)
    before = utc_now()
    given = answer(store, item, True, {"by": "carol"})
    who = given.data["owner"]
    assert isinstance(who, dict) and given.data["by"] == "carol"
    until = datetime.fromisoformat(str(who["until"]))
    lease = LOOKUP_ALLOWANCE + SBATCH_MAX_LIFE
    assert before + lease <= until <= utc_now() + lease
    assert (who["host"], who["pid"]) == (HOST, os.getpid())


def test_a_damaged_approval_request_still_lists_with_plain_defaults(
    store: FileSessionStore, session: str
) -> None:
    log(store, session).append(EventKind.APPROVAL_ASKED, {"step": "garbage", "cost": "x"}, STEP)
    log(store, session).append(EventKind.APPROVAL_ASKED, {"step": {}}, "st-2")
    log(store, session).append(EventKind.APPROVAL_ASKED, {"reason": "r"}, None)
    first, second, third = pending_approvals(store)
    assert (first.action, first.reason, first.cost, first.script) == ("?", "", None, None)
    assert first.script_sha256 is None and first.data == {"step": "garbage", "cost": "x"}
    assert (second.step_id, second.action) == ("st-2", "?")
    assert (third.step_id, third.reason) == ("?", "r")


def test_a_late_answer_is_refused_with_who_was_first(store: FileSessionStore, session: str) -> None:
    log(store, session).append(EventKind.APPROVAL_ASKED, {"step": {"action": "submit"}}, STEP)
    (item,) = pending_approvals(store)
    first = answer(store, item, False, {"by": "erin"})
    with pytest.raises(AlreadyAnswered) as err:
        answer(store, item, True, {"by": "carol"})
    assert err.value.step_id == STEP and err.value.event == first
    assert str(err.value) == (
        f"step {STEP} was already denied by erin on {first.writer} at "
        f"{first.at:%H:%M:%S} UTC; nothing more to do"
    )


def test_a_per_job_event_is_appended_once_per_job_whoever_polls(tmp_path: Path) -> None:
    # two pollers of one session: the accepted-job check records each job's comparison once
    store = FileSessionStore(tmp_path / "sessions")
    session = store.create()
    first, second = SessionLog(store, session), SessionLog(store, session)
    seen = {"job_id": "7", "altered": [], "action": None}
    assert append_once_per_job(first, EventKind.JOB_ACCEPTED, seen) is True
    assert append_once_per_job(second, EventKind.JOB_ACCEPTED, seen) is False
    other = {"job_id": "8", "altered": [], "action": None}
    assert append_once_per_job(second, EventKind.JOB_ACCEPTED, other) is True
    accepted = [e.data["job_id"] for e in store.read(session) if e.kind is EventKind.JOB_ACCEPTED]
    assert accepted == ["7", "8"]

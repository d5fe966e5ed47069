"""The session store: slices, sequence conflicts, real concurrent writers, crashes, retention.

All on local disk: NFS itself is not exercised (the build machines have no NFS client).
The concurrent and crash tests use real OS processes, not threads.
"""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from jobsmith.agent.runtime.session.events import Event, EventData, EventKind, JsonValue
from jobsmith.agent.runtime.session.session_log import RACES, SessionContended, SessionLog
from jobsmith.agent.runtime.session.store import (
    CorruptEvent,
    FileSessionStore,
    SeqConflict,
    SessionNotFound,
    SessionStore,
)
from jobsmith.errors import JobsmithError

LONG_AGO = datetime(2020, 1, 1, tzinfo=UTC)

# One writer process: waits for the start file, then appends COUNT notes, each time
# re-reading last_seq after a SeqConflict, as the agent's own loop does.
WRITER = r"""
import sys, time
from pathlib import Path
from jobsmith.agent.runtime.session.events import EventData, EventKind
from jobsmith.agent.runtime.session.store import FileSessionStore, SeqConflict

root, session, name, count, go = sys.argv[1:6]
store = FileSessionStore(Path(root))
while not Path(go).exists():
    time.sleep(0.0005)
conflicts = 0
for i in range(int(count)):
    while True:
        try:
            store.append(session, store.last_seq(session) + 1, EventKind.NOTE,
                         {"writer": name, "i": i})
            break
        except SeqConflict:
            conflicts += 1
print(conflicts)
"""

# Dies (like SIGKILL would) after the event's temporary file is written and fsync'ed,
# exactly where it would have been linked into place.
CRASHER = r"""
import os, sys
from pathlib import Path
from jobsmith.agent.runtime.session.events import EventData, EventKind
from jobsmith.agent.runtime.session.store import FileSessionStore

store = FileSessionStore(Path(sys.argv[1]))
os.link = lambda *args, **kwargs: os._exit(17)
store.append(sys.argv[2], 1, EventKind.NOTE, {"lost": True})
"""


def fixed_clock(at: datetime) -> Callable[[], datetime]:
    """A clock stuck at one instant, for sessions that must look old."""
    return lambda: at


def visible(directory: Path) -> list[str]:
    """Names in a session directory other than event files (temporary files, say)."""
    return sorted(n for n in os.listdir(directory) if not re.fullmatch(r"\d{10}\.json", n))


@pytest.fixture
def store(tmp_path: Path) -> FileSessionStore:
    return FileSessionStore(tmp_path / "sessions")


def test_is_a_session_store(store: FileSessionStore) -> None:
    typed: SessionStore = store  # mypy checks FileSessionStore against the Protocol
    assert typed is store


def test_create_writes_session_opened_with_meta(store: FileSessionStore) -> None:
    sid = store.create({"title": "align 40 samples", "site": "lab"})
    assert store.last_seq(sid) == 0
    [opened] = store.read(sid)
    assert (opened.seq, opened.kind, opened.session_id) == (0, EventKind.SESSION_OPENED, sid)
    assert opened.data == {"title": "align 40 samples", "site": "lab"}
    assert opened.at.utcoffset() == timedelta(0)
    assert opened.writer.endswith(f":{os.getpid()}")
    assert not [n for n in os.listdir(store.root) if n.startswith(".")]  # staging renamed


def test_session_ids_sort_by_creation(tmp_path: Path) -> None:
    ids = [
        FileSessionStore(tmp_path, clock=fixed_clock(LONG_AGO + timedelta(seconds=s))).create()
        for s in (0, 1, 3600)
    ]
    assert ids == sorted(ids)
    assert len(set(ids)) == 3
    listed = FileSessionStore(tmp_path).list_sessions()
    assert [i.id for i in listed] == ids
    assert FileSessionStore(tmp_path).newest() == ids[-1]  # `jobsmith report`'s default
    assert FileSessionStore(tmp_path / "none").newest() is None


def test_append_and_read_slices(store: FileSessionStore) -> None:
    sid = store.create()
    for seq in range(1, 6):
        event = store.append(sid, seq, EventKind.NOTE, {"n": seq}, step_id=f"s{seq % 2}")
        assert event.seq == seq
    assert [e.seq for e in store.read(sid)] == [0, 1, 2, 3, 4, 5]
    assert [e.data["n"] for e in store.read(sid, 2, 4)] == [2, 3, 4]
    assert [e.seq for e in store.read(sid, 4)] == [4, 5]
    assert [e.seq for e in store.read(sid, 5, 99)] == [5]
    assert store.read(sid, 6) == []
    assert store.read(sid, 3, 2) == []
    assert [e.step_id for e in store.read(sid, 1, 2)] == ["s1", "s0"]
    with pytest.raises(ValueError):
        store.read(sid, -1)


def test_events_round_trip_exactly(store: FileSessionStore) -> None:
    sid = store.create()
    data: EventData = {
        "script_sha256": "ab" * 32,
        "resources": {"cpus": 4, "gpus": None},
        "ok": True,
    }
    written = store.append(sid, 1, EventKind.APPROVAL_ASKED, data, step_id="step-1")
    assert store.read(sid, 1) == [written]


def test_seq_conflict_when_two_writers_claim_the_same_seq(store: FileSessionStore) -> None:
    sid = store.create()
    other = FileSessionStore(store.root)  # a second process, as far as the files can tell
    store.append(sid, 1, EventKind.USER_INPUT, {"text": "first"})
    with pytest.raises(SeqConflict) as err:
        other.append(sid, 1, EventKind.USER_INPUT, {"text": "second"})
    assert (err.value.session_id, err.value.expected_seq) == (sid, 1)
    assert isinstance(err.value, JobsmithError)
    assert sid in str(err.value)
    assert [e.data for e in store.read(sid, 1)] == [{"text": "first"}]
    assert visible(store.root / sid) == []  # the loser's temporary file is gone
    other.append(sid, 2, EventKind.USER_INPUT, {"text": "second"})  # after re-reading
    assert store.last_seq(sid) == 2


def test_append_cannot_leave_a_gap(store: FileSessionStore) -> None:
    sid = store.create()
    with pytest.raises(SeqConflict, match="event 2 does not exist"):
        store.append(sid, 3, EventKind.NOTE)
    store.append(sid, 1, EventKind.NOTE)
    with pytest.raises(SeqConflict, match="appended by another writer"):
        store.append(sid, 1, EventKind.NOTE)
    assert [e.seq for e in store.read(sid)] == [0, 1]
    with pytest.raises(ValueError):
        store.append(sid, 0, EventKind.NOTE)
    with pytest.raises(ValueError):
        store.append(sid, 2, EventKind.SESSION_OPENED)


def test_nfs_lost_link_reply_counts_as_success(
    store: FileSessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server linked but the reply was lost; the retransmission saw EEXIST."""
    sid = store.create()
    real_link = os.link

    def link_then_eexist(src: str | Path, dst: str | Path) -> None:
        real_link(src, dst)
        raise FileExistsError(errno.EEXIST, "File exists", str(dst))

    monkeypatch.setattr(os, "link", link_then_eexist)
    event = store.append(sid, 1, EventKind.NOTE, {"x": 1})
    monkeypatch.undo()
    assert store.read(sid, 1) == [event]
    assert visible(store.root / sid) == []


def test_concurrent_processes_lose_and_duplicate_nothing(tmp_path: Path) -> None:
    writers, count = 4, 150
    store = FileSessionStore(tmp_path / "sessions")
    sid = store.create({"title": "race"})
    go = tmp_path / "go"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(store.root), sid, f"w{n}", str(count), str(go)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(writers)
    ]
    time.sleep(0.5)  # let every interpreter start, so they all race from the same moment
    go.touch()
    conflicts = 0
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        conflicts += int(out)

    events = store.read(sid)
    assert [e.seq for e in events] == list(range(writers * count + 1))  # contiguous
    notes = [(str(e.data["writer"]), e.data["i"]) for e in events[1:]]
    assert len(set(notes)) == len(notes)  # no duplicate
    for n in range(writers):  # every writer's events, each once and in its own order
        assert [i for w, i in notes if w == f"w{n}"] == list(range(count))
    assert len({e.writer for e in events[1:]}) == writers
    assert visible(store.root / sid) == []
    assert conflicts > 0, "the writers never collided: the test proved nothing"
    print(f"{writers} writers, {count} events each, {conflicts} conflicts retried")


def test_crash_before_link_leaves_no_event_and_no_corruption(store: FileSessionStore) -> None:
    sid = store.create()
    crashed = subprocess.run(
        [sys.executable, "-c", CRASHER, str(store.root), sid], capture_output=True, text=True
    )
    assert crashed.returncode == 17, crashed.stderr
    [leftover] = visible(store.root / sid)
    assert json.loads((store.root / sid / leftover).read_text())["data"] == {"lost": True}
    (store.root / sid / ".tmp.torn").write_text('{"session_id": "')  # a torn write too

    assert [e.seq for e in store.read(sid)] == [0]
    assert store.last_seq(sid) == 0
    store.append(sid, 1, EventKind.NOTE, {"after": "crash"})
    assert [e.data for e in store.read(sid, 1)] == [{"after": "crash"}]

    old = time.time() - 2 * 86400
    for name in visible(store.root / sid):
        os.utime(store.root / sid / name, (old, old))
    report = store.prune(timedelta(days=1))
    assert report.removed == []
    # leftover is .tmp.<hostname>.…: it sorts before or after .tmp.torn by host name
    assert sorted(report.debris) == sorted([f"{sid}/.tmp.torn", f"{sid}/{leftover}"])
    assert visible(store.root / sid) == []
    assert store.last_seq(sid) == 1


def test_corrupt_event_file_is_a_typed_error(store: FileSessionStore) -> None:
    sid = store.create()
    (store.root / sid / "0000000001.json").write_text("not json")
    with pytest.raises(CorruptEvent, match=r"0000000001\.json"):
        store.read(sid)


def test_non_json_data_is_refused(store: FileSessionStore) -> None:
    sid = store.create()
    with pytest.raises(ValueError):
        store.append(sid, 1, EventKind.NOTE, {"when": datetime.now(UTC)})  # type: ignore[dict-item]
    assert store.last_seq(sid) == 0


@pytest.mark.parametrize("sid", ["20250101T000000.000Z-0123456789ab", "../../etc", "x"])
def test_missing_session_is_a_typed_error_naming_it(store: FileSessionStore, sid: str) -> None:
    store.create()
    calls: list[Callable[[], object]] = [
        lambda: store.read(sid),
        lambda: store.last_seq(sid),
        lambda: store.info(sid),
        lambda: store.append(sid, 1, EventKind.NOTE),
    ]
    for call in calls:
        with pytest.raises(SessionNotFound) as err:
            call()
        assert sid in str(err.value)
        assert err.value.session_id == sid


def test_info_and_closed(store: FileSessionStore) -> None:
    sid = store.create({"title": "frames 1-240"})
    store.append(sid, 1, EventKind.SESSION_CLOSED)
    info = store.info(sid)
    assert (info.id, info.title, info.last_seq, info.closed) == (sid, "frames 1-240", 1, True)
    assert info.created <= info.last_event_at
    assert info.size_bytes > 0


def test_empty_store(tmp_path: Path) -> None:
    store = FileSessionStore(tmp_path / "never-created")
    assert store.list_sessions() == []
    assert store.size_bytes() == 0
    report = store.prune(timedelta(days=1))
    assert (report.removed, report.debris, report.bytes_freed) == ([], [], 0)


def test_prune_removes_idle_sessions_and_reports_bytes(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    old_store = FileSessionStore(root, clock=fixed_clock(LONG_AGO))
    old = old_store.create({"title": "old"})
    old_store.append(old, 1, EventKind.NOTE, {"pad": "x" * 5000})
    store = FileSessionStore(root)
    fresh = store.create({"title": "fresh"})
    before = store.size_bytes()
    assert before == sum(i.size_bytes for i in store.list_sessions())

    dry = store.prune(timedelta(days=30), dry_run=True)
    assert dry.dry_run and [i.id for i in dry.removed] == [old]
    assert store.size_bytes() == before
    assert store.last_seq(old) == 1

    report = store.prune(timedelta(days=30))
    assert [i.id for i in report.removed] == [old] and not report.dry_run
    assert report.bytes_freed == dry.bytes_freed > 0
    assert store.size_bytes() == before - report.bytes_freed
    with pytest.raises(SessionNotFound, match=old):
        store.read(old)
    assert [i.id for i in store.list_sessions()] == [fresh]
    assert sorted(os.listdir(root)) == [fresh]  # no tombstone left behind


def test_prune_spares_a_session_appended_to_while_pruning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "sessions"
    sid = FileSessionStore(root, clock=fixed_clock(LONG_AGO)).create()
    store = FileSessionStore(root)
    real_rename = os.rename

    def append_first(src: str | Path, dst: str | Path) -> None:
        # Another login node appends between prune's listing and its tombstone rename.
        if ".trash." in str(dst) and store.last_seq(sid) == 0:
            store.append(sid, 1, EventKind.NOTE, {"late": True})
        real_rename(src, dst)

    monkeypatch.setattr(os, "rename", append_first)
    report = store.prune(timedelta(days=1))
    monkeypatch.undo()
    assert report.removed == []
    assert [e.seq for e in store.read(sid)] == [0, 1]
    assert sorted(os.listdir(root)) == [sid]


def test_a_session_is_found_by_the_short_id_status_shows_and_never_guessed(
    tmp_path: Path,
) -> None:
    store = FileSessionStore(tmp_path / "sessions")
    first, second = store.create(), store.create()
    short = first.rpartition("-")[2][:8]
    assert store.resolve(short) == first  # what the at-a-glance status prints
    assert store.resolve(first) == first
    assert store.resolve(first[:25]) == first  # the start of the full id
    assert store.resolve("abc") == "abc"  # too short to be a short id: left as typed
    assert store.resolve("ffffffffff") == "ffffffffff"  # no match: the caller's not-found
    assert store.resolve(second.rpartition("-")[2][:8]) == second
    # a second session whose random part starts alike: the short id is ambiguous, never
    # a guess, and a longer piece of it decides
    twin = first[:-4] + ("0000" if not first.endswith("0000") else "1111")
    shutil.copytree(tmp_path / "sessions" / first, tmp_path / "sessions" / twin)
    with pytest.raises(JobsmithError, match=f"session '{short}' is ambiguous: "):
        store.resolve(short)
    assert store.resolve(twin.rpartition("-")[2]) == twin
    (tmp_path / "sessions" / "not-a-session").mkdir()
    assert store.resolve("not-a-se") == "not-a-se"  # only session directories count


class _AlwaysBeaten(FileSessionStore):
    """A store where another writer (a second real store on the same files) appends the
    event this one was about to claim, every time: the race lost as often as it can be."""

    def append(
        self,
        session_id: str,
        expected_seq: int,
        kind: EventKind,
        data: Mapping[str, JsonValue] | None = None,
        step_id: str | None = None,
    ) -> Event:
        FileSessionStore(self.root).append(session_id, expected_seq, EventKind.NOTE, {})
        return super().append(session_id, expected_seq, kind, data, step_id=step_id)


@pytest.mark.parametrize("conditional", [False, True])
def test_an_append_beaten_every_time_gives_up_naming_the_session(
    tmp_path: Path, conditional: bool
) -> None:
    store = _AlwaysBeaten(tmp_path / "sessions")
    sid = store.create()
    log = SessionLog(store, sid)
    with pytest.raises(SessionContended) as err:
        if conditional:
            log.append_if(EventKind.USER_INPUT, {"text": "mine"}, None, lambda events: None)
        else:
            log.append(EventKind.USER_INPUT, {"text": "mine"}, None)
    assert err.value.session_id == sid and isinstance(err.value, JobsmithError)
    assert str(err.value).startswith(f"session {sid}: other writers appended first {RACES} times")
    kinds = [e.kind for e in store.read(sid)]
    assert EventKind.USER_INPUT not in kinds  # nothing of its own appended
    assert kinds.count(EventKind.NOTE) == RACES  # the winners' events are all there


def test_sessions_active_since_skips_unchanged_directories_unread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The budgets ask every submit for the sessions active in the last week: a session
    directory untouched since well before that is stat'ed, never read; one touched
    since is read and kept, whatever its creation time (the caller filters on its newest
    event), and no session with an event in the window is ever left out."""
    import jobsmith.agent.runtime.session.store as store_module

    store = FileSessionStore(tmp_path)
    now = datetime.now(UTC)
    old, recent, revived = (store.create() for _ in range(3))
    week_ago = now - timedelta(days=7)
    for sid in (old, revived):  # as if untouched for 8 days
        past = (now - timedelta(days=8)).timestamp()
        os.utime(tmp_path / sid, (past, past))
    store.append(revived, 1, EventKind.NOTE, {"text": "still going"})  # its mtime is now
    read: list[str] = []
    summarise = store_module._summarise
    monkeypatch.setattr(
        store_module, "_summarise", lambda d, sid: read.append(sid) or summarise(d, sid)
    )
    active = [i.id for i in store.list_sessions(active_since=week_ago)]
    assert active == [recent, revived] and read == [recent, revived]
    everything = [i.id for i in store.list_sessions()]
    assert everything == [old, recent, revived]
    # within the margin for a file server's clock: still read
    near = (week_ago - timedelta(minutes=30)).timestamp()
    os.utime(tmp_path / old, (near, near))
    assert old in [i.id for i in store.list_sessions(active_since=week_ago)]

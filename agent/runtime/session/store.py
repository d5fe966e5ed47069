"""The session store: one append-only, gap-free event log per session.

`SessionStore` is the small interface the agent uses; `FileSessionStore` is the default,
embedded implementation, a directory tree under the user's state directory. A shared
store (PostgreSQL, for a team) fits the same interface: `append` becomes an INSERT whose
primary key (session_id, seq) turns a lost race into `SeqConflict`.

Appends are optimistic. The caller says which sequence number the new event will get
(`expected_seq`, one more than the last event it read); if another writer claimed that
number first, `append` raises `SeqConflict` and appends nothing, and the caller re-reads
the session and decides again. An append is also refused when event `expected_seq - 1`
does not exist, so a session never has a gap: seq n+1 can only be claimed by a writer
that has seen seq n.

Why files, and why this recipe
------------------------------
Login nodes share `$HOME` over NFS (or a parallel filesystem), and one user may run
jobsmith on two login nodes at once, so the store must be correct there:

- SQLite is out: its WAL mode needs shared memory between processes on one host ("WAL
  does not work over a network filesystem", https://sqlite.org/wal.html), and its other
  modes rely on POSIX advisory locks, which depend on the NFS lock manager and are
  unreliable on many sites. This store takes no locks at all.
- Each event is one file whose name is its sequence number (`0000000042.json`), so
  claiming a sequence number is creating a name, once. `rename(2)` cannot claim: it
  silently replaces an existing target. `open(O_CREAT|O_EXCL)` is exclusive on NFS only
  from NFSv3 on. The portable way, given by the Linux open(2) manual (NOTES on O_EXCL,
  https://man7.org/linux/man-pages/man2/open.2.html), is `link(2)`: create a uniquely
  named file (hostname, pid, random token), then link it to the shared name. link is a
  single operation on the NFS server and fails with EEXIST if the name exists.
- NFS's lost reply: the server performs the link but its reply is lost, the client
  retransmits, and the retransmission fails with EEXIST although our link succeeded.
  The same manual gives the remedy: on EEXIST, stat the unique file; a link count of 2
  means the link is ours. We also accept "the final name is the same inode as ours".
- An event becomes visible only complete: the temporary file is written and fsync'ed
  before it is linked, and the directory is fsync'ed after. Readers only look at names
  of the form `NNNNNNNNNN.json`; temporary files (`.tmp.*`) are invisible, so a writer
  that crashes before the link leaves no event and no corruption, only a stray temporary
  file that `prune` removes later.
- A session is created in a staging directory (`.new.<id>`) holding event 0 and then
  renamed into place (rename onto a fresh name is atomic), so a reader never sees a
  session without its `session_opened` event. Session ids are `<UTC time>-<48 random
  bits>`: sortable by creation time and unique across hosts without coordination.
- NFS clients cache directory listings and lookups (nfs(5), "Data and metadata
  coherence"). Correctness never depends on those caches: only link(2) on the server
  decides who gets a sequence number. A stale cache can only make a writer's view of the
  last sequence number too small, which costs a `SeqConflict` and a retry. `last_seq`
  lists the directory and then probes forward by name to shorten that window.
- Retention: `prune` renames an idle session to a tombstone name first (writers address
  sessions by name, so nothing can be appended after the rename), checks again that its
  newest event is still older than the cutoff (an append may have landed between the
  listing and the rename; then the rename is undone), and only then deletes it.

Tested on local disk only. NFS itself was NOT exercised: the build machines' kernel has
no NFS client. The concurrent test runs several OS processes appending to one session on
a local filesystem; the NFS-specific reasoning above (link atomicity, the lost-reply
check, stale caches) is from the sources cited, not from a test.

One file per event costs an inode per event; sites with inode quotas on `$HOME` should
prune (`size_bytes` and `SessionInfo.size_bytes` report allocated bytes, as quotas and
du count them).
"""

from __future__ import annotations

import errno
import os
import re
import secrets
import shutil
import socket
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Protocol

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, JsonValue, ValidationError

from jobsmith.agent.runtime.session.events import Event, EventKind, SessionInfo
from jobsmith.errors import InputError, JobsmithError

_EVENT_RE = re.compile(r"^(\d{10})\.json$")
_SESSION_ID_RE = re.compile(r"^\d{8}T\d{6}\.\d{3}Z-[0-9a-f]{12}$")
#: the fewest characters taken as a short session id (status shows 8)
_SHORT_ID_MIN = 6
_TMP_PREFIX = ".tmp."
_STAGING_PREFIX = ".new."
_TOMBSTONE_PREFIX = ".trash."
#: Leftovers younger than this may belong to a create, append or prune still under way.
_DEBRIS_GRACE = timedelta(hours=1)
#: how far a file server's clock (a session directory's mtime) may be behind this host's
_MTIME_SLACK = timedelta(hours=1)


class StoreError(JobsmithError):
    """The session store could not do what was asked."""


class SessionNotFound(StoreError):
    """No session has this id (never created, pruned, or not a session id at all)."""

    exit_code = 6  # like an unknown job: the user named something that is not there

    def __init__(self, session_id: str, detail: str = "") -> None:
        self.session_id = session_id
        why = f" ({detail})" if detail else ""
        super().__init__(f"no session {session_id!r} in the session store{why}")


class SeqConflict(StoreError):
    """Another writer appended first: `expected_seq` is not the session's next number.

    Nothing was appended. Re-read the session from the last event you saw, decide again,
    and append with the new `last_seq + 1`.
    """

    retryable = True

    def __init__(self, session_id: str, expected_seq: int, detail: str) -> None:
        self.session_id = session_id
        self.expected_seq = expected_seq
        super().__init__(
            f"session {session_id}: cannot append as event {expected_seq}: {detail};"
            " re-read the session and retry"
        )


class CorruptEvent(StoreError):
    """An event file exists but is not the event its name says (edited or damaged)."""

    def __init__(self, path: Path, detail: str) -> None:
        self.path = path
        super().__init__(f"unreadable session event {path}: {detail}")


class PruneReport(BaseModel):
    """What `prune` removed (or, with dry_run, would remove)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    dry_run: bool = Field(description="true if nothing was actually removed")
    cutoff: AwareDatetime = Field(description="sessions idle since before this were pruned")
    removed: list[SessionInfo] = Field(description="the sessions removed, as they were")
    debris: list[str] = Field(
        description="leftovers removed: temp files of crashed writers, half-made or"
        " half-deleted session directories (paths relative to the store root)"
    )
    bytes_freed: int = Field(ge=0, description="allocated bytes released")


class SessionStore(Protocol):
    """Append-only session logs; the agent's only way to record or recall a session."""

    def create(self, meta: Mapping[str, JsonValue] | None = None) -> str:
        """Open a new session (event 0, session_opened, carries meta); returns its id."""
        ...

    def append(
        self,
        session_id: str,
        expected_seq: int,
        kind: EventKind,
        data: Mapping[str, JsonValue] | None = None,
        step_id: str | None = None,
    ) -> Event:
        """Append an event as number expected_seq; raise SeqConflict if that is not next."""
        ...

    def read(self, session_id: str, from_seq: int = 0, to_seq: int | None = None) -> list[Event]:
        """Events from_seq..to_seq, both inclusive (None: to the newest), in seq order."""
        ...

    def last_seq(self, session_id: str) -> int:
        """Sequence number of the session's newest event (0 right after create)."""
        ...

    def info(self, session_id: str) -> SessionInfo:
        """Summary of one session."""
        ...

    def newest(self) -> str | None:
        """The id of the session created last (None: there is none)."""
        ...

    def list_sessions(self, active_since: datetime | None = None) -> list[SessionInfo]:
        """Every session, oldest first; with active_since, those with an event at or
        after it (and possibly a few just before it: filter on last_event_at)."""
        ...

    def resolve(self, text: str) -> str:
        """The session id that text names: the id itself, or a unique start of it or of
        its random part (the 8 characters `status` shows); text unchanged if none does."""
        ...

    def prune(self, older_than: timedelta, *, dry_run: bool = False) -> PruneReport:
        """Remove whole sessions whose newest event is older than now - older_than."""
        ...

    def size_bytes(self) -> int:
        """Disk space the whole store uses (allocated bytes)."""
        ...


def utc_now() -> datetime:
    """The current time, timezone-aware, in UTC."""
    return datetime.now(UTC)


def new_session_id(now: datetime) -> str:
    """A session id: creation time (ms, UTC) then 48 random bits; sorts by creation."""
    now = now.astimezone(UTC)
    return f"{now:%Y%m%dT%H%M%S}.{now.microsecond // 1000:03d}Z-{secrets.token_hex(6)}"


class FileSessionStore:
    """The default store: one directory per session, one file per event, under root.

    Safe for several processes on several hosts sharing root over NFS (see the module
    docstring); takes no locks. root is created on first use.
    """

    def __init__(self, root: Path, *, clock: Callable[[], datetime] = utc_now) -> None:
        self.root = root
        self._clock = clock  # injectable so tests can make sessions that look old

    def create(self, meta: Mapping[str, JsonValue] | None = None) -> str:
        """Open a new session (event 0, session_opened, carries meta); returns its id."""
        self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        now = self._clock()
        session_id = new_session_id(now)
        staging = self.root / f"{_STAGING_PREFIX}{session_id}"
        # exist_ok: on NFS a retransmitted mkdir whose first reply was lost sees EEXIST.
        staging.mkdir(mode=0o700, exist_ok=True)
        opened = Event(
            session_id=session_id,
            seq=0,
            kind=EventKind.SESSION_OPENED,
            at=now,
            writer=_writer(),
            data=dict(meta or {}),
        )
        _claim_or_raise(staging, opened)
        _publish(staging, self.root / session_id)
        _fsync_dir(self.root)
        return session_id

    def append(
        self,
        session_id: str,
        expected_seq: int,
        kind: EventKind,
        data: Mapping[str, JsonValue] | None = None,
        step_id: str | None = None,
    ) -> Event:
        """Append an event as number expected_seq; raise SeqConflict if that is not next."""
        if expected_seq < 1:
            raise ValueError("event 0 is the session_opened event that create() writes")
        if kind is EventKind.SESSION_OPENED:
            raise ValueError("session_opened is written by create() only")
        directory = self._dir(session_id)
        if not (directory / _event_name(expected_seq - 1)).exists():
            self._require(session_id)
            raise SeqConflict(session_id, expected_seq, f"event {expected_seq - 1} does not exist")
        event = Event(
            session_id=session_id,
            seq=expected_seq,
            kind=kind,
            at=self._clock(),
            step_id=step_id,
            writer=_writer(),
            data=dict(data or {}),
        )
        _claim_or_raise(directory, event)
        return event

    def read(self, session_id: str, from_seq: int = 0, to_seq: int | None = None) -> list[Event]:
        """Events from_seq..to_seq, both inclusive (None: to the newest), in seq order."""
        if from_seq < 0:
            raise ValueError(f"from_seq must be >= 0, not {from_seq}")
        directory = self._require(session_id)
        events: list[Event] = []
        seq = from_seq
        # Open by name until the first missing number: no gaps exist, and an open is
        # revalidated on NFS where a cached directory listing might not be.
        while to_seq is None or seq <= to_seq:
            event = _load(directory, session_id, seq)
            if event is None:
                break
            events.append(event)
            seq += 1
        return events

    def last_seq(self, session_id: str) -> int:
        """Sequence number of the session's newest event (0 right after create)."""
        try:
            return _scan_last(self._dir(session_id))
        except (FileNotFoundError, NotADirectoryError):
            raise SessionNotFound(session_id) from None

    def info(self, session_id: str) -> SessionInfo:
        """Summary of one session."""
        return _summarise(self._require(session_id), session_id)

    def newest(self) -> str | None:
        """The id of the session created last (None: there is none); reads only names."""
        names = [n for n in _listdir(self.root) if _SESSION_ID_RE.match(n)]
        return max(names) if names else None

    def resolve(self, text: str) -> str:
        """The session id that text names (see SessionStore.resolve).

        A person types what `status` shows (the first characters of the id's random
        part) or pastes the start of a full id. Only directory names are read; two
        sessions that both match are an InputError listing them, never a guess.
        """
        if len(text) < _SHORT_ID_MIN or _SESSION_ID_RE.match(text):
            return text
        names = [n for n in _listdir(self.root) if _SESSION_ID_RE.match(n)]
        hits = sorted(
            n for n in names if n.startswith(text) or n.rpartition("-")[2].startswith(text)
        )
        if len(hits) > 1:
            shown = ", ".join(hits[:5]) + (", …" if len(hits) > 5 else "")
            raise InputError(f"session {text!r} is ambiguous: {shown}; give more of its id")
        return hits[0] if hits else text

    def list_sessions(self, active_since: datetime | None = None) -> list[SessionInfo]:
        """Every session, oldest first (ids sort by creation time).

        With active_since (the budgets' window: every submit asks), a session whose
        directory has not changed since well before it is not read at all: each event is
        a new file in it, so its mtime is when its newest event was linked in. Only the
        directory is stat'ed, and the margin (_MTIME_SLACK) covers a file server whose
        clock differs from this host's; what passes is summarised as before, so the
        caller still filters on last_event_at. A user's thousands of one-step sessions
        then cost a stat each, not a read of their first and last events. (Event times
        are the store's clock, mtimes the real one: active_since is moved by their
        difference, which is nothing unless a test gave the store a clock of its own.)"""
        floor = None
        if active_since is not None:
            offset = self._clock() - datetime.now(UTC)
            floor = (active_since - offset - _MTIME_SLACK).timestamp()
        infos = []
        for name in sorted(_listdir(self.root)):
            if not _SESSION_ID_RE.match(name):
                continue
            if floor is not None and _mtime(self.root / name) < floor:
                continue
            try:
                infos.append(_summarise(self.root / name, name))
            except (SessionNotFound, FileNotFoundError):
                continue  # pruned by another process while we listed
        return infos

    def prune(self, older_than: timedelta, *, dry_run: bool = False) -> PruneReport:
        """Remove whole sessions whose newest event is older than now - older_than.

        Also removes leftovers of crashed processes older than both the cutoff and an
        hour. With dry_run, reports the same without removing anything.
        """
        cutoff = self._clock() - older_than
        removed: list[SessionInfo] = []
        freed = 0
        for info in self.list_sessions():
            if info.last_event_at >= cutoff:
                continue
            size = info.size_bytes if dry_run else self._remove_session(info.id, cutoff)
            if size is not None:
                removed.append(info)
                freed += size
        debris = _debris(self.root, self._clock() - max(older_than, _DEBRIS_GRACE))
        for path, size in debris:
            if not dry_run:
                _remove_path(path)
            freed += size
        names = [str(path.relative_to(self.root)) for path, _ in debris]
        return PruneReport(
            dry_run=dry_run, cutoff=cutoff, removed=removed, debris=names, bytes_freed=freed
        )

    def size_bytes(self) -> int:
        """Disk space the whole store uses (allocated bytes, as quotas count them)."""
        return sum(_usage(self.root / name) for name in _listdir(self.root))

    def _dir(self, session_id: str) -> Path:
        # Ids reach here from the command line: only well-formed ids may become paths.
        if not _SESSION_ID_RE.match(session_id):
            raise SessionNotFound(session_id, "not a session id")
        return self.root / session_id

    def _require(self, session_id: str) -> Path:
        directory = self._dir(session_id)
        if not directory.is_dir():
            raise SessionNotFound(session_id)
        return directory

    def _remove_session(self, session_id: str, cutoff: datetime) -> int | None:
        """Delete an idle session via a tombstone; its bytes, or None if it stays."""
        live = self.root / session_id
        stamp = int(self._clock().timestamp())
        tomb = self.root / f"{_TOMBSTONE_PREFIX}{session_id}.{stamp}.{secrets.token_hex(4)}"
        try:
            os.rename(live, tomb)
        except FileNotFoundError:
            return None  # another prune got there first
        # No append can land after the rename; one may have landed just before it.
        newest = _load(tomb, session_id, _scan_last(tomb))
        if newest is not None and newest.at >= cutoff:
            os.rename(tomb, live)
            return None
        size = _usage(tomb)
        _fsync_dir(self.root)
        shutil.rmtree(tomb)
        return size


def _event_name(seq: int) -> str:
    return f"{seq:010d}.json"


def _writer() -> str:
    # Computed per call, not at import: a forked child has another pid.
    return f"{socket.gethostname()}:{os.getpid()}"


def _claim_or_raise(directory: Path, event: Event) -> None:
    """Write event durably and claim its sequence number, or raise SeqConflict."""
    host = re.sub(r"[^A-Za-z0-9-]", "_", socket.gethostname())
    tmp = directory / f"{_TMP_PREFIX}{host}.{os.getpid()}.{secrets.token_hex(8)}"
    final = directory / _event_name(event.seq)
    try:
        _write_durably(tmp, event.model_dump_json().encode("utf-8"))
        try:
            claimed = _claim(tmp, final)
        finally:
            tmp.unlink(missing_ok=True)
    except (FileNotFoundError, NotADirectoryError):
        raise SessionNotFound(event.session_id, "removed while appending") from None
    if not claimed:
        raise SeqConflict(
            event.session_id, event.seq, f"event {event.seq} was appended by another writer"
        )
    _fsync_dir(directory)


def _write_durably(path: Path, payload: bytes) -> None:
    """Create path (which must not exist), write payload and fsync it."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(payload)
        fh.flush()
        # Before the link: a name must never point at data the server has not stored.
        os.fsync(fh.fileno())


def _claim(tmp: Path, final: Path) -> bool:
    """Link tmp to final; True if final is now ours, False if another writer had it."""
    try:
        os.link(tmp, final)
        return True
    except FileExistsError:
        # NFS lost reply: the server linked, the retransmitted request saw EEXIST.
        ours = tmp.stat()
        if ours.st_nlink >= 2:
            return True
        try:
            return os.path.samestat(ours, final.stat())
        except FileNotFoundError:
            return False


def _publish(staging: Path, live: Path) -> None:
    """Rename a finished staging directory to its session name."""
    try:
        os.rename(staging, live)
    except FileNotFoundError:
        # NFS lost reply: the retransmitted rename finds its source gone, already moved.
        if not (live / _event_name(0)).exists():
            raise


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    except OSError as exc:
        # Some network filesystems refuse fsync on a directory; their metadata
        # operations are synchronous on the server anyway.
        if exc.errno != errno.EINVAL:
            raise
    finally:
        os.close(fd)


def _load(directory: Path, session_id: str, seq: int) -> Event | None:
    """Event seq of a session directory, or None if it does not exist."""
    path = directory / _event_name(seq)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    try:
        event = Event.model_validate_json(raw)
    except ValidationError as exc:
        raise CorruptEvent(path, f"{exc.error_count()} validation error(s)") from exc
    if event.seq != seq or event.session_id != session_id:
        raise CorruptEvent(path, f"it holds event {event.seq} of session {event.session_id}")
    return event


def _scan_last(directory: Path) -> int:
    """Newest sequence number in a session directory (-1 if none)."""
    names = os.listdir(directory)
    seq = max((int(m[1]) for n in names if (m := _EVENT_RE.match(n))), default=-1)
    # An NFS listing may be a cached, older one; files are found by name even then.
    while (directory / _event_name(seq + 1)).exists():
        seq += 1
    return seq


def _summarise(directory: Path, session_id: str) -> SessionInfo:
    last = _scan_last(directory)
    first = _load(directory, session_id, 0)
    newest = _load(directory, session_id, last) if last >= 0 else None
    if first is None or newest is None:
        raise SessionNotFound(session_id, "its directory has no events")
    title = first.data.get("title")
    return SessionInfo(
        id=session_id,
        created=first.at,
        last_seq=last,
        last_event_at=newest.at,
        closed=newest.kind is EventKind.SESSION_CLOSED,
        size_bytes=_usage(directory),
        title=title if isinstance(title, str) else None,
        meta=first.data,
    )


def _listdir(path: Path) -> list[str]:
    try:
        return os.listdir(path)
    except FileNotFoundError:
        return []


def _usage(path: Path) -> int:
    """Allocated bytes of path and everything under it (0 if it vanished)."""
    try:
        st = path.lstat()
    except FileNotFoundError:
        return 0
    total = st.st_blocks * 512
    if path.is_dir() and not path.is_symlink():
        total += sum(_usage(path / name) for name in _listdir(path))
    return total


def _debris(root: Path, older_than: datetime) -> list[tuple[Path, int]]:
    """Leftovers of crashed processes last touched before older_than, with their sizes."""
    limit = older_than.timestamp()
    found = []
    for name in _listdir(root):
        path = root / name
        if name.startswith(_TOMBSTONE_PREFIX):
            # A tombstone's mtime is its session's; the name says when it was made.
            stamp = name.rsplit(".", 2)[-2]
            if stamp.isdigit() and int(stamp) < limit:
                found.append(path)
        elif name.startswith(_STAGING_PREFIX):
            if _mtime(path) < limit:
                found.append(path)
        elif _SESSION_ID_RE.match(name):
            tmps = (path / n for n in _listdir(path) if n.startswith(_TMP_PREFIX))
            found.extend(t for t in tmps if _mtime(t) < limit)
    return [(path, _usage(path)) for path in found]


def _mtime(path: Path) -> float:
    try:
        return path.lstat().st_mtime
    except FileNotFoundError:
        return float("inf")  # gone already: never debris


def _remove_path(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)

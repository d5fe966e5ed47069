"""`staging.fetch_outputs_to`'s copies (agent/watcher/fetching.py): claimed in the
session log once per attempt, a failure that may pass tried again by the next poll (at
most ATTEMPTS in all), then the line naming `get`; a failure retrying cannot help named
at once. The copy itself (get_files) is scripted here; over SSH for real:
tests/test_staging_laptop.py."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from jobsmith.adapters.ssh.staging import CopyFailed
from jobsmith.agent.runtime.documents import StagingResult
from jobsmith.agent.runtime.session.events import EventKind
from jobsmith.agent.runtime.session.ledger import JobLedger
from jobsmith.agent.runtime.session.session_log import SessionLog
from jobsmith.agent.runtime.session.store import FileSessionStore
from jobsmith.agent.watcher import fetching
from jobsmith.agent.watcher.fetching import ATTEMPTS, fetch_outputs, retries
from jobsmith.errors import JobsmithError, PolicyError


@dataclass
class Parts:
    ledger: JobLedger
    store: FileSessionStore
    scheduler_access: Any = field(default_factory=lambda: SimpleNamespace(kind="ssh"))


@dataclass
class Copies:
    """get_files as scripted: each call takes the next outcome (an error raised, or a
    result), and is counted."""

    outcomes: list[JobsmithError | OSError | None]
    calls: list[tuple[str, Path]] = field(default_factory=list)

    def __call__(self, parts: Any, items: list[str], to: Path, follow: Any) -> StagingResult:
        self.calls.append((items[0], to))
        outcome = self.outcomes.pop(0)
        if outcome is not None:
            raise outcome
        return StagingResult(action="get", where="alice@login1:22", files=[], not_got=[])


@pytest.fixture
def parts(tmp_path: Path) -> Parts:
    return Parts(JobLedger(tmp_path / "jobs"), FileSessionStore(tmp_path / "sessions"))


@pytest.fixture
def script(monkeypatch: pytest.MonkeyPatch) -> Iterator[Copies]:
    from jobsmith.agent.runtime import staging

    copies = Copies([])
    monkeypatch.setattr(staging, "get_files", copies)
    yield copies


def notes(parts: Parts, session: str, key: str) -> list[dict[str, Any]]:
    events = SessionLog(parts.store, session).events()
    return [e.data[key] for e in events if e.kind is EventKind.NOTE and key in e.data]


def cut() -> CopyFailed:
    return CopyFailed("get: copying over SFTP failed (the connection lost)")


def test_a_copy_cut_off_is_tried_again_by_the_next_polls_each_attempt_claimed(
    parts: Parts, script: Copies, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    session = parts.store.create()
    to = tmp_path / "fetched"
    script.outcomes = [cut(), cut(), None]
    assert fetch_outputs(parts, {session: "101"}, to) == []
    err = capsys.readouterr().err
    assert err == (
        f"jobsmith: the outputs of session {session} were not copied back (get: copying over "
        f"SFTP failed (the connection lost)); the next poll tries again (attempt 2 of 3)\n"
    )
    assert [e.session_id for e in retries(parts.ledger).entries()] == [session]
    assert fetch_outputs(parts, {}, to) == []  # a poll that saw no end: the retry
    assert "(attempt 3 of 3)" in capsys.readouterr().err
    assert fetch_outputs(parts, {}, to) == [session]
    assert capsys.readouterr().err == (
        f"jobsmith: session {session} ended: 0 declared output(s) copied to "
        f"{to / session} (attempt 3)\n"
    )
    assert fetch_outputs(parts, {}, to) == [] and fetch_outputs(parts, {session: "101"}, to) == []
    assert script.calls == [(session, to / session)] * 3
    claims = notes(parts, session, fetching.CLAIM)
    assert [(c["job_id"], c["attempt"]) for c in claims] == [("101", 1), ("101", 2), ("101", 3)]
    failed = notes(parts, session, fetching.FAILED)
    assert [(f["attempt"], f["again"]) for f in failed] == [(1, True), (2, True)]
    assert len(notes(parts, session, "fetched_outputs")) == 1
    assert retries(parts.ledger).entries() == []


def test_after_the_last_attempt_the_line_names_the_get_command(
    parts: Parts, script: Copies, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    session = parts.store.create()
    to = tmp_path / "fetched"
    script.outcomes = [cut(), OSError(28, "No space left on device"), cut()]
    fetch_outputs(parts, {session: "101"}, to)
    for _ in range(ATTEMPTS + 1):  # two retries, then nothing more
        assert fetch_outputs(parts, {}, to) == []
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == ATTEMPTS and len(script.calls) == ATTEMPTS
    assert "No space left on device" in lines[1] and "(attempt 3 of 3)" in lines[1]
    assert lines[-1] == (
        f"jobsmith: the outputs of session {session} were not copied back (get: copying over "
        f"SFTP failed (the connection lost)) after 3 attempts; "
        f"`jobsmith get {session} --to {to / session}` copies them"
    )
    assert retries(parts.ledger).entries() == []
    assert [f["again"] for f in notes(parts, session, fetching.FAILED)] == [True, True, False]


def test_a_failure_retrying_cannot_help_names_the_get_command_at_once(
    parts: Parts, script: Copies, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    session = parts.store.create()
    to = tmp_path / "fetched"
    script.outcomes = [PolicyError("get: path '/s/x' (resolves to '/etc') is outside")]
    fetch_outputs(parts, {session: "101"}, to)
    assert capsys.readouterr().err.endswith(
        f"`jobsmith get {session} --to {to / session}` copies them\n"
    )
    assert retries(parts.ledger).entries() == []
    fetch_outputs(parts, {}, to)
    assert len(script.calls) == 1


def test_an_attempt_is_claimed_once_and_only_after_the_one_before_failed(
    parts: Parts, script: Copies, tmp_path: Path
) -> None:
    """Two polls listing the same entry: one claims the attempt. An entry for an attempt
    whose predecessor has not failed (a copy still running elsewhere) is not due; nor is
    one for a last job the workload has gone on from (a rerun ended since: copied for
    its new last job, once)."""
    session = parts.store.create()
    to = tmp_path / "fetched"
    log = SessionLog(parts.store, session)
    running = {"job_id": "101", "to": str(to / session), "attempt": 1}
    assert fetching._claim(log, running)
    retries(parts.ledger).add(session, "101/1")  # as if it had failed: it has not
    fetch_outputs(parts, {}, to)
    assert script.calls == [] and retries(parts.ledger).entries() == []

    log.append(EventKind.NOTE, {fetching.FAILED: {"job_id": "101", "attempt": 1}}, None)
    second = {**running, "attempt": 2}
    assert fetching._claim(log, second) and not fetching._claim(log, second)

    log.append(EventKind.NOTE, {fetching.FAILED: {"job_id": "101", "attempt": 2}}, None)
    retries(parts.ledger).add(session, "101/2")
    script.outcomes = [None]
    assert fetch_outputs(parts, {session: "205"}, to) == [session]  # the rerun's end
    assert script.calls == [(session, to / session)]
    claims = notes(parts, session, fetching.CLAIM)
    assert [(c["job_id"], c["attempt"]) for c in claims][-1] == ("205", 1)
    assert retries(parts.ledger).entries() == []


def test_a_claim_an_older_jobsmith_wrote_counts_as_the_first_attempt(
    parts: Parts, script: Copies, tmp_path: Path
) -> None:
    session = parts.store.create()
    log = SessionLog(parts.store, session)
    log.append(EventKind.NOTE, {fetching.CLAIM: {"job_id": "101", "to": "/x"}}, None)
    assert fetch_outputs(parts, {session: "101"}, tmp_path) == []
    log.append(EventKind.NOTE, {fetching.FAILED: {"job_id": "101", "attempt": 1}}, None)
    retries(parts.ledger).add(session, "101/1")
    script.outcomes = [None]
    assert fetch_outputs(parts, {}, tmp_path) == [session]


def test_a_local_site_copies_nothing_and_lists_nothing(
    parts: Parts, script: Copies, tmp_path: Path
) -> None:
    parts.scheduler_access = SimpleNamespace(kind="local")
    session = parts.store.create()
    retries(parts.ledger).add(session, "101/1")
    assert fetch_outputs(parts, {session: "101"}, tmp_path) == [] and script.calls == []

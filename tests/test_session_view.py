"""A bounded view of a session is cut from its old end (issue 23, part 5): a conversation
resumed from its log (`ask --session`, `chat --session`, a wake) is shown the newest events
that fit, and a step still waiting for a person always; the view is never cut again by
the tool-data bound (which kept the oldest 8,000 characters and lost the hold and the
interruption that came last). Through the real SDK and the loopback server, no Slurm."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from lab_cli import js
from messages_server import MessagesServer, content_text, message, text

from jobsmith.agent.brains.ask_tools import SESSION_VIEW_CHARS, as_data
from jobsmith.agent.runtime.documents import MAX_COMPACT_SESSION_CHARS, SessionDocument
from jobsmith.agent.runtime.session.events import EventKind
from jobsmith.agent.runtime.session.session_log import SessionLog
from jobsmith.agent.runtime.session.store import FileSessionStore


def _long_session(store: FileSessionStore) -> str:
    """An ask session: a held submit early on, then 120 long turns, then the newest note."""
    session = store.create({"title": "ask: long", "origin": "ask"})
    log = SessionLog(store, session)
    log.append(EventKind.USER_INPUT, {"text": "run the big one", "origin": "ask"}, None)
    log.append(EventKind.APPROVAL_ASKED, {"reason": "over the threshold"}, "st-held-early")
    for i in range(120):
        log.append(EventKind.USER_INPUT, {"text": f"turn {i} " + "x" * 400, "origin": "ask"}, None)
    log.append(EventKind.NOTE, {"text": "NEWEST: the person interrupted"}, None)
    return session


def test_the_compact_view_keeps_the_newest_events_and_the_waiting_step(tmp_path: Path) -> None:
    store = FileSessionStore(tmp_path)
    session = _long_session(store)
    view = SessionDocument(events=tuple(store.read(session))).compact()
    kinds = [(e["kind"], e["step_id"]) for e in view["events"]]
    assert "NEWEST" in view["events"][-1]["data"]
    assert ("approval_asked", "st-held-early") in kinds
    assert view["omitted"] > 0 and view["omitted"] + len(view["events"]) == 124
    assert len(json.dumps(view, separators=(",", ":"))) <= MAX_COMPACT_SESSION_CHARS + 600
    shown = as_data(view, SESSION_VIEW_CHARS)
    assert '"cut"' not in shown and "NEWEST" in shown  # not cut again on the way out


def test_an_ask_resumed_from_a_long_session_is_shown_its_newest_events(
    server: MessagesServer, offline: Callable[[str], None], jobsmith_home: Path
) -> None:
    session = _long_session(FileSessionStore(jobsmith_home / "state" / "sessions"))
    server.script(message(text("Picking up where we were.")))
    out = js("ask", "go on", "--session", session)
    assert out.exit_code == 0, out.output
    first = content_text(server.requests[0].body["messages"][0])
    assert "NEWEST: the person interrupted" in first
    assert "st-held-early" in first
    assert '{"cut":' not in first

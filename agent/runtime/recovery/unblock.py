"""Lifting a failure-streak stop: after a streak of failed jobs a session submits nothing
more until a person says they looked (the session folds, agent/runtime/session/readmodel.py,
restart the streak there, and the policy reads them: agent/runtime/submission/judging/policy.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Mapping

    from jobsmith.agent.runtime.session.events import Event
    from jobsmith.agent.runtime.session.store import SessionStore


def unblock(store: SessionStore, environ: Mapping[str, str], session_id: str, note: str) -> Event:
    """A person (USER in environ) lifts the session's stop, recorded as an event with note."""
    from jobsmith.agent.runtime.session.events import EventKind
    from jobsmith.agent.runtime.session.session_log import SessionLog

    store.info(session_id)  # a clear error for an unknown session
    data = {"by": environ.get("USER", "?"), "note": note}
    return SessionLog(store, session_id).append(EventKind.UNBLOCKED, data, None)

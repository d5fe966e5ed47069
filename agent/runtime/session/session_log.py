"""Appending to one session from one process: next sequence number, retry on a lost race.

`append` puts an event after whatever is last. `append_if` is a compare-and-append: its
precondition is checked against every event before the one it appends, because the
store only lets a writer claim seq n+1 after seq n exists, and the check reads up to n
(agent/runtime/session/claims.py builds claims and the one-result rule on it).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from jobsmith import faults
from jobsmith.agent.runtime.session.events import Event, EventKind
from jobsmith.agent.runtime.session.store import SeqConflict, SessionStore, StoreError

#: lost races in a row after which an append gives up (each costs one store read)
RACES = 50


class SessionContended(StoreError):
    """Other writers won every race for a session's next event: nothing was appended."""

    def __init__(self, session_id: str) -> None:
        super().__init__(
            f"session {session_id}: other writers appended first {RACES} times in a row; "
            "nothing was appended (run the command again)"
        )
        self.session_id = session_id


class SessionLog:
    """One session's log as the executor writes it."""

    def __init__(self, store: SessionStore, session_id: str) -> None:
        self.store = store
        self.session_id = session_id
        self._intents: set[str] = set()
        # the next seq this process expects; a stale guess only costs a SeqConflict and a
        # re-read, while asking the store each time lists the session's directory
        self._next: int | None = None

    def intent(self, step_id: str, data: Mapping[str, Any]) -> None:
        """Commit a step's intent, once per step, before the step does anything."""
        if step_id not in self._intents:
            self.append(EventKind.INTENT, data, step_id)
            self._intents.add(step_id)

    def append(self, kind: EventKind, data: Mapping[str, Any], step_id: str | None) -> Event:
        """Append after whatever is last; another writer's event in between is not an error.

        Events of one step are ordered by this process; events of two processes that share
        a session interleave, each appended whole, none lost or duplicated.
        """
        payload = json.loads(json.dumps(data, default=str))
        for _ in range(RACES):
            if self._next is None:
                self._next = self.store.last_seq(self.session_id) + 1
            seq = self._next
            try:
                event = self.store.append(self.session_id, seq, kind, payload, step_id=step_id)
            except SeqConflict:
                self._next = None
                continue
            self._next = seq + 1
            faults.after_event_committed()
            return event
        raise SessionContended(self.session_id)

    def append_if(
        self,
        kind: EventKind,
        data: Mapping[str, Any],
        step_id: str | None,
        check: Callable[[list[Event]], None],
    ) -> Event:
        """Append only if check, run over every event before this one, does not raise.

        After a lost race the events the winner appended are read and checked too: two
        writers whose checks exclude each other cannot both append.
        """
        payload = json.loads(json.dumps(data, default=str))
        events = self.events()
        for _ in range(RACES):
            check(events)
            seq = events[-1].seq + 1
            try:
                event = self.store.append(self.session_id, seq, kind, payload, step_id=step_id)
            except SeqConflict:
                events += self.store.read(self.session_id, seq)
                continue
            self._next = seq + 1
            faults.after_event_committed()
            return event
        raise SessionContended(self.session_id)

    def events(self) -> list[Event]:
        """Every event of the session, in order."""
        return self.store.read(self.session_id)

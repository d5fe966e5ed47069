"""A session's declared outputs copied back to this machine when its work ends, once,
where the user's or site's file asks for it (`staging.fetch_outputs_to`, issue 29).

Over SSH a job's results are the cluster's; someone following jobs from a laptop wants
them on the laptop without typing `jobsmith get SESSION` for each. So the poll that sees
a session's work end (agent/watcher/workload.py: the same judgement as the webhook's
`workload_ended`), a watcher's cycle, or the `status` or `wait` that saw it first, copies
the outputs the session's jobs declared (agent/runtime/staging.py, as `get SESSION`) into
FETCH_TO/SESSION/. It is claimed in the session log first (a note naming the session's
last job), so two watchers never copy at once nor twice; a workload that goes on later (a
`rerun`) ends again and is copied again. Best effort, as the webhook: a copy that fails is
a note saying what to run, never the cycle's or the command's end.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jobsmith.agent.runtime.session.claims import AlreadyRecorded
from jobsmith.agent.runtime.session.events import Event, EventKind
from jobsmith.agent.runtime.session.session_log import SessionLog
from jobsmith.errors import JobsmithError

if TYPE_CHECKING:
    from jobsmith.agent.runtime.staging import StagingParts

#: the note's key that claims a session's copy, for its last job
CLAIM = "fetching_outputs"


def fetch_outputs(parts: StagingParts, ended: Mapping[str, str], to: Path) -> list[str]:
    """The declared outputs of each ended session (session id -> its last job) copied
    into to/SESSION/, once per last job; the sessions copied. A site whose Slurm runs
    here has nothing to copy: none."""
    from jobsmith.adapters.ssh.staging import NothingToStage
    from jobsmith.agent.runtime.staging import get_files
    from jobsmith.agent.views.output import note

    fetched: list[str] = []
    if parts.scheduler_access.kind == "local":
        return fetched
    for session_id, last_job in ended.items():
        log = SessionLog(parts.store, session_id)
        if not _claim(log, {"job_id": last_job, "to": str(to / session_id)}):
            continue  # another poll copies it, or has
        try:
            got = get_files(parts, [session_id], to / session_id, _quiet)
        except NothingToStage:
            return fetched
        except JobsmithError as exc:
            note(
                f"jobsmith: the outputs of session {session_id} were not copied back ({exc}); "
                f"`jobsmith get {session_id} --to {to / session_id}` copies them"
            )
            continue
        log.append(EventKind.NOTE, {"fetched_outputs": got.model_dump()}, None)
        note(
            f"jobsmith: session {session_id} ended: {len(got.files)} declared output(s) "
            f"copied to {to / session_id}" + (f", {len(got.not_got)} not" if got.not_got else "")
        )
        fetched.append(session_id)
    return fetched


def _claim(log: SessionLog, data: Mapping[str, Any]) -> bool:
    """A note claiming the copy for data's job, unless the session has one (False)."""
    job_id = data["job_id"]

    def none_yet(events: list[Event]) -> None:
        for e in events:
            claim = e.data.get(CLAIM) if e.kind is EventKind.NOTE else None
            if isinstance(claim, dict) and claim.get("job_id") == job_id:
                raise AlreadyRecorded(f"job {job_id}: its outputs are copied already")

    try:
        log.append_if(EventKind.NOTE, {CLAIM: dict(data)}, None, none_yet)
    except AlreadyRecorded:
        return False
    return True


def _quiet(name: str) -> Any:
    """No progress lines: the watcher runs unattended (its notes say what was copied)."""
    return lambda done, total: None

"""A session's declared outputs copied back to this machine when its work ends, once,
where the user's or site's file asks for it (`staging.fetch_outputs_to`, issue 29).

Over SSH a job's results are the cluster's; someone following jobs from a laptop wants
them on the laptop without typing `jobsmith get SESSION` for each. So the poll that sees
a session's work end (agent/watcher/workload.py: the same judgement as the webhook's
`workload_ended`), a watcher's cycle, or the `status` or `wait` that saw it first, copies
the outputs the session's jobs declared (agent/runtime/staging.py, as `get SESSION`) into
FETCH_TO/SESSION/. It is claimed in the session log first (a note naming the session's
last job and the attempt), so two watchers never copy at once nor twice; a workload that
goes on later (a `rerun`) ends again and is copied again. Best effort, as the webhook: a
copy that fails is a line on stderr, never the cycle's or the command's end.

A copy that fails for a reason that may pass (the connection lost, a copy cut off:
exit 5, `retryable`; or this machine's disk) is tried again by the next poll, up to
ATTEMPTS in all, each attempt claimed as the first was. The failure is a note in the
session (`fetching_failed`, with its attempt), and the session is entered in a small
index beside the ledger's records, one file per failed attempt (the feeding index's
kind: agent/runtime/workflows/feeding/index.py), which every poll lists (one directory
read) before deciding anything: so the next poll finds the session without its jobs
having changed. The session stays the truth: attempt N+1 is claimed only if the
session's latest claim is attempt N for the same last job and attempt N's failure is
noted (so a copy still running elsewhere is never doubled, and a workload that went on
since is copied for its new last job instead); whoever lists an entry removes it,
claimed or not. After the last attempt, or a failure retrying cannot help (a path out of
the roots, a tool missing there), the line names the `get` command that copies them.
A poll that dies mid-copy leaves a claim without a result: not retried (nobody can tell
it from a copy still running), as before.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jobsmith.agent.runtime.session.claims import AlreadyRecorded
from jobsmith.agent.runtime.session.events import Event, EventKind
from jobsmith.agent.runtime.session.session_log import SessionLog
from jobsmith.agent.runtime.workflows.feeding.index import FeedingIndex
from jobsmith.errors import JobsmithError

if TYPE_CHECKING:
    from jobsmith.agent.runtime.session.ledger import JobLedger
    from jobsmith.agent.runtime.staging import StagingParts

#: the note's key that claims a session's copy, for its last job and an attempt
CLAIM = "fetching_outputs"
#: the note's key that records an attempt's failure
FAILED = "fetching_failed"
#: attempts at copying one ended session's outputs back: the first, then one a poll
ATTEMPTS = 3
#: the index of sessions whose copy is to be tried again, beside the ledger's records
RETRIES = "fetch-retries"


def retries(ledger: JobLedger) -> FeedingIndex:
    """The sessions whose copy failed and is to be tried again: each entry's step is
    `LAST_JOB/ATTEMPT` (the attempt that failed)."""
    return FeedingIndex(ledger.directory / RETRIES)


def fetch_outputs(parts: StagingParts, ended: Mapping[str, str], to: Path) -> list[str]:
    """The declared outputs of each ended session (session id -> its last job) copied
    into to/SESSION/, once per last job, and those of each session a failed attempt
    left in the retry index tried again; the sessions copied. A site whose Slurm runs
    here has nothing to copy: none."""
    fetched: list[str] = []
    if parts.scheduler_access.kind == "local":
        return fetched
    index = retries(parts.ledger)
    # the sessions that ended first: a workload that went on since a failed attempt is
    # copied for its new last job, and the old job's attempt is then not due
    due: list[tuple[str, str, int, str | None]] = [(s, job, 1, None) for s, job in ended.items()]
    for entry in index.entries():
        job, _, failed = entry.step_id.rpartition("/")
        attempt = int(failed) + 1 if job and failed.isdigit() else 0
        due.append((entry.session_id, job, attempt, entry.step_id))
    for session_id, last_job, attempt, listed in due:
        log = SessionLog(parts.store, session_id)
        claim = {"job_id": last_job, "to": str(to / session_id), "attempt": attempt}
        claimed = attempt > 0 and _claim(log, claim)
        if listed is not None:
            index.remove(session_id, listed)  # claimed or not due: its work is done
        if claimed and _fetch(parts, log, claim, to / session_id):
            fetched.append(session_id)
    return fetched


def _fetch(parts: StagingParts, log: SessionLog, claim: Mapping[str, Any], to: Path) -> bool:
    """One claimed attempt: copied and noted (True), or its failure noted, the session
    entered for the next poll while attempts remain, and a line saying which."""
    from jobsmith.adapters.ssh.staging import NothingToStage
    from jobsmith.agent.runtime.staging import get_files
    from jobsmith.agent.views.output import note

    session_id, attempt = log.session_id, int(claim["attempt"])
    try:
        got = get_files(parts, [session_id], to, _quiet)
    except NothingToStage:
        return False
    except (JobsmithError, OSError) as exc:
        again = attempt < ATTEMPTS and bool(getattr(exc, "retryable", isinstance(exc, OSError)))
        failure = {"job_id": claim["job_id"], "attempt": attempt, "error": str(exc)}
        log.append(EventKind.NOTE, {FAILED: {**failure, "again": again}}, None)
        said = f"jobsmith: the outputs of session {session_id} were not copied back ({exc})"
        if again:
            retries(parts.ledger).add(session_id, f"{claim['job_id']}/{attempt}")
            note(f"{said}; the next poll tries again (attempt {attempt + 1} of {ATTEMPTS})")
        else:
            tried = f" after {attempt} attempts" if attempt > 1 else ""
            note(f"{said}{tried}; `jobsmith get {session_id} --to {to}` copies them")
        return False
    log.append(EventKind.NOTE, {"fetched_outputs": got.model_dump()}, None)
    note(
        f"jobsmith: session {session_id} ended: {len(got.files)} declared output(s) "
        f"copied to {to}"
        + (f", {len(got.not_got)} not" if got.not_got else "")
        + (f" (attempt {attempt})" if attempt > 1 else "")
    )
    return True


def _claim(log: SessionLog, data: Mapping[str, Any]) -> bool:
    """A note claiming data's attempt at the copy for data's job (False: not ours). The
    first attempt: unless the session has a claim for that job already. A later one:
    only if the session's latest claim is the attempt before, for the same job, and that
    attempt's failure is noted."""
    job_id, attempt = data["job_id"], int(data["attempt"])

    def ours(events: list[Event]) -> None:
        claims = [(c.get("job_id"), int(c.get("attempt", 1))) for c in _notes(events, CLAIM)]
        if attempt == 1:
            if any(job == job_id for job, _ in claims):
                raise AlreadyRecorded(f"job {job_id}: its outputs are copied already")
            return
        failed = {(f.get("job_id"), f.get("attempt")) for f in _notes(events, FAILED)}
        before = (job_id, attempt - 1)
        if not claims or claims[-1] != before or before not in failed:
            raise AlreadyRecorded(f"job {job_id}: attempt {attempt} is not due")

    try:
        log.append_if(EventKind.NOTE, {CLAIM: dict(data)}, None, ours)
    except AlreadyRecorded:
        return False
    return True


def _notes(events: list[Event], key: str) -> list[dict[str, Any]]:
    """The data under key of the session's notes that have it, in order."""
    found = (e.data.get(key) for e in events if e.kind is EventKind.NOTE)
    return [d for d in found if isinstance(d, dict)]


def _quiet(name: str) -> Any:
    """No progress lines: the watcher runs unattended (its notes say what was copied)."""
    return lambda done, total: None

"""Claims: one actor per in-flight step, and at most one result per step.

A step that is in flight (its intent is logged, its result is not) may be acted on by
several processes: the process that logged the intent, any number of `sessions resume`,
a person's `approve` or `deny`, on this login node or another. If two of them act, Slurm
gets the job twice. So whoever acts on a step first holds it, and the store decides who
holds it, the same way it decides who gets a sequence number.

How a step is held
------------------
- The store's appends are compare-and-swap on the sequence number: event n+1 can only be
  appended by a writer that has read event n (agent/runtime/session/store.py).
  `SessionLog.append_if`
  builds a conditional append on that: read the log, check a precondition over all of
  it, append at last_seq + 1; when another writer took that number, read what it wrote
  and check again. Two writers whose preconditions exclude each other cannot both
  succeed, because the second to append has read the first's event.
- The holder of a step is the writer of the step's latest intent, approval_given or
  claimed event: the original process holds its step from its intent on, an approver
  from its approval on, a resume from its claim on. approval_asked hands the step to a
  person (nobody holds it until approve or deny); a result ends it for good.
- A new actor appends `claimed` only if the step has no result and its holder is not
  alive (`claimable`); `approve` and `deny` answer only a step not answered yet; a
  result is appended only if the step has none (`no_result`). So at most one actor
  holds a step at a time, and a step has at most one result, whatever the interleaving.

When a holder is alive
----------------------
- On this host: its process exists and is the same process. claimed and approval_given
  events record the holder's process start (boot id and start tick), so a recycled pid
  is not mistaken for it. An intent records only its host and its writer's pid; a
  process that started after the intent was written cannot have written it, which tells
  a recycled pid apart as well (conservatively: a clock step can only make a dead writer look
  alive, which makes resume wait, never act twice).
- On another host we cannot look, so a holder is trusted alive until its lease runs
  out, plus CLOCK_SKEW for the two nodes' clocks. A claim's lease covers everything its
  holder may still do: waiting for an orphaned sbatch (resume's --wait), the Slurm
  look-ups (LOOKUP_ALLOWANCE), and an sbatch it starts, which outlives its parent by at
  most SBATCH_MAX_LIFE; a resume that overruns its lease before sbatch does not submit.
  An intent's lease is SBATCH_MAX_LIFE, as resume has always waited for one.

Not covered: a holder on another host that is still alive after its lease (a process
stopped for minutes, say) can act after a takeover. Linux only (/proc).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from jobsmith.agent.runtime.session import payloads
from jobsmith.agent.runtime.session.events import Event, EventKind
from jobsmith.agent.runtime.session.session_log import SessionLog
from jobsmith.errors import JobsmithError

#: an sbatch outlives its parent by at most this (its own retries included)
SBATCH_MAX_LIFE = timedelta(minutes=5)
#: what two login nodes' clocks may disagree by
CLOCK_SKEW = timedelta(minutes=1)
#: a holder's Slurm look-ups and policy checks before its sbatch starts
LOOKUP_ALLOWANCE = timedelta(minutes=2)
#: a process start read from /proc and an event time may differ by this (btime rounding)
_START_SLACK_S = 2.0

#: a precondition over a session's events: returns if the append may go ahead, else raises
Check = Callable[[list[Event]], None]

_HOLDING = frozenset({EventKind.INTENT, EventKind.APPROVAL_GIVEN, EventKind.CLAIMED})
_HANDING_OVER = frozenset({EventKind.APPROVAL_ASKED, EventKind.APPROVAL_REFUSED})
_DOING = {
    EventKind.INTENT: "being run by its own process,",
    EventKind.APPROVAL_GIVEN: "approved, being run by",
    EventKind.CLAIMED: "being resumed by",
}


class StepClaimed(JobsmithError):
    """Another live process holds the step; it acts, this one must not."""

    def __init__(self, step_id: str, holder: Holder) -> None:
        self.step_id = step_id
        self.holder = holder
        super().__init__(
            f"step {step_id} is {holder.doing} {holder} (since {holder.since:%H:%M:%S} UTC)"
        )


class StepSettled(JobsmithError):
    """The step was already decided (a result, or a person's answer): nothing to do."""

    def __init__(self, step_id: str, message: str, event: Event) -> None:
        self.step_id = step_id
        self.event = event
        super().__init__(message)


@dataclass(frozen=True)
class Holder:
    """The process holding a step, as the log records it."""

    host: str
    pid: int
    started: str | None  # process start token; None for an intent's writer
    since: datetime  # when it took the step
    until: datetime  # end of its lease, for a process on another host
    kind: EventKind  # the event that made it the holder

    def __str__(self) -> str:
        return f"{self.host}:{self.pid}"

    @property
    def doing(self) -> str:
        """What it does with the step, for messages: "being resumed by", …"""
        return _DOING[self.kind]

    def alive(self, now: datetime) -> bool:
        """Whether it may still act (see the module docstring)."""
        if self.host != socket.gethostname():
            return now < self.until + CLOCK_SKEW
        if self.started is not None:
            return process_start(self.pid) == self.started
        started_at = _start_time(self.pid)
        return started_at is not None and started_at <= self.since.timestamp() + _START_SLACK_S

    def is_me(self) -> bool:
        """Whether this process is the holder."""
        return (
            self.host == socket.gethostname()
            and self.pid == os.getpid()
            and self.started in (None, process_start(os.getpid()))
        )


def owner(now: datetime, lease: timedelta) -> dict[str, str | int | None]:
    """This process as a holder, for a claimed or approval_given event's data."""
    return {
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "started": process_start(os.getpid()),
        "until": (now + lease).astimezone(UTC).isoformat(),
    }


def holder(events: list[Event], step_id: str) -> Holder | None:
    """Who holds the step now, alive or not; None if a person has it or nobody does."""
    current = None
    for e in events:
        if e.step_id != step_id:
            continue
        if e.kind in _HOLDING:
            current = _holder_of(e)
        elif e.kind in _HANDING_OVER:
            current = None
    return current


def result_of(events: list[Event], step_id: str) -> Event | None:
    """The step's result event, if it has one."""
    return next((e for e in events if e.kind is EventKind.RESULT and e.step_id == step_id), None)


def append_result(log: SessionLog, step_id: str, data: Mapping[str, Any]) -> Event:
    """Append the step's result, only if it has none yet (else StepSettled)."""
    job_id = data.get("job_id") if data.get("submitted") else None
    return log.append_if(EventKind.RESULT, data, step_id, no_result(step_id, job_id))


class AlreadyRecorded(JobsmithError):
    """The session already has the once-per-job event another writer was appending."""


def append_once_per_job(log: SessionLog, kind: EventKind, data: Mapping[str, Any]) -> bool:
    """Append a `kind` event for data's job unless the session has one already (another
    poller's, appended first); False then. Two writers cannot both append it."""
    job_id = data["job_id"]

    def none_yet(events: list[Event]) -> None:
        if any(e.kind is kind and e.data.get("job_id") == job_id for e in events):
            raise AlreadyRecorded(f"job {job_id}: the session already has its {kind}")

    try:
        log.append_if(kind, data, None, none_yet)
    except AlreadyRecorded:
        return False
    return True


def no_result(step_id: str, job_id: object = None) -> Check:
    """Precondition of a result: the step has none yet (job_id: what this one submitted)."""
    ours = f" (job {job_id} was submitted all the same; the job ledger has it)" if job_id else ""

    def check(events: list[Event]) -> None:
        done = result_of(events, step_id)
        if done is not None:
            raise StepSettled(
                step_id,
                f"step {step_id} already has a result (event {done.seq}, by {done.writer},"
                f" outcome {payloads.result_payload(done).outcome}); a second one is not recorded"
                f"{ours}",
                done,
            )

    return check


def claimable(step_id: str, now: Callable[[], datetime]) -> Check:
    """Precondition of a claim: no result, and no live holder other than this process."""
    settled = no_result(step_id)

    def check(events: list[Event]) -> None:
        settled(events)
        current = holder(events, step_id)
        if current is not None and not current.is_me() and current.alive(now()):
            raise StepClaimed(step_id, current)

    return check


def process_start(pid: int) -> str | None:
    """An id of process pid that a later process with the same pid will not have."""
    ticks = _start_ticks(pid)
    if ticks is None:
        return None
    return f"{_boot_id()}:{ticks}"


def _holder_of(event: Event) -> Holder:
    recorded = event.data.get("owner")
    if isinstance(recorded, dict):
        started = recorded.get("started")
        return Holder(
            host=str(recorded.get("host")),
            pid=int(str(recorded.get("pid"))),
            started=str(started) if started is not None else None,
            since=event.at,
            until=datetime.fromisoformat(str(recorded.get("until"))),
            kind=event.kind,
        )
    # an intent: its writer, which runs the step straight after writing it, on the host
    # the intent names (where its sbatch would run)
    host, _, pid = event.writer.rpartition(":")
    return Holder(
        host=str(event.data.get("host") or host),
        pid=int(pid) if pid.isdigit() else -1,
        started=None,
        since=event.at,
        until=event.at + SBATCH_MAX_LIFE,
        kind=event.kind,
    )


def _start_ticks(pid: int) -> int | None:
    """Process start, in clock ticks since boot (proc(5), /proc/pid/stat field 22);
    None if there is no such process or it has exited."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # the command name (field 2) may hold spaces and parentheses: count from its end
    fields = stat.rpartition(")")[2].split()
    if fields[0] in ("Z", "X"):
        return None  # exited, not yet reaped: it can act no more
    return int(fields[19])


def _start_time(pid: int) -> float | None:
    """Process start as a Unix time (to within a second: btime is whole seconds)."""
    ticks = _start_ticks(pid)
    if ticks is None:
        return None
    for line in Path("/proc/stat").read_text().splitlines():
        if line.startswith("btime "):
            return int(line.split()[1]) + ticks / os.sysconf("SC_CLK_TCK")
    return None


def _boot_id() -> str:
    return Path("/proc/sys/kernel/random/boot_id").read_text().strip()

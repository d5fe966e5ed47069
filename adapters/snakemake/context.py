"""What the parser keeps between calls, as the seam's `context` (a tuple of strings).

A rule job's description ("rule align:", its jobid, wildcards, resources) is printed
before the line that says it was submitted, and its end only names the jobid; a chunk of
new lines can stop anywhere in between. The state is therefore: the jobs still in
flight or failed (so a retry counts its attempt), the block being read, an exception
header waiting for its explanation, and whether the run's end was already reported.
Each item is one JSON array, so any rule name or wildcard value round-trips.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from jobsmith.adapters.workflow import TaskStatus

#: a workflow with this many jobs failed at once is past what a context should carry
MAX_JOBS = 5000


@dataclass
class Job:
    """One rule job as far as the console told it."""

    rule: str
    name: str
    status: TaskStatus = TaskStatus.SUBMITTED
    native_id: str | None = None
    attempt: int = 1
    mem_mb: float | None = None
    cpus: int | None = None
    log: str | None = None


@dataclass
class Block:
    """An open "rule …:" / "localrule …:" / "Error in rule …:" block."""

    kind: str  # "rule", "local" or "error"
    rule: str
    jobid: str | None = None
    message: str | None = None
    native_id: str | None = None


@dataclass
class State:
    """Everything `parse` needs from earlier lines."""

    jobs: dict[str, Job] = field(default_factory=dict)
    block: Block | None = None
    pending_exception: str | None = None
    ended: bool = False


def encode(state: State) -> tuple[str, ...]:
    """The state as the seam's context."""
    items: list[list[Any]] = [
        [
            "job",
            *(key, j.rule, j.name, j.status.value, j.native_id, j.attempt),
            *(j.mem_mb, j.cpus, j.log),
        ]
        for key, j in list(state.jobs.items())[-MAX_JOBS:]
    ]
    if state.block:
        b = state.block
        items.append(["block", b.kind, b.rule, b.jobid, b.message, b.native_id])
    if state.pending_exception:
        items.append(["exception", state.pending_exception])
    if state.ended:
        items.append(["ended"])
    return tuple(json.dumps(i, separators=(",", ":")) for i in items)


def decode(context: tuple[str, ...]) -> State:
    """The state back; items that are not ours (or are damaged) are dropped."""
    state = State()
    for text in context:
        try:
            _apply(state, json.loads(text))
        except (ValueError, TypeError, IndexError, RecursionError):
            continue
    return state


def _apply(state: State, item: Any) -> None:
    if not isinstance(item, list) or not item:
        return
    tag = item[0]
    if tag == "job":
        _, key, rule, name, status, native, attempt, mem, cpus, log = item
        state.jobs[_s(key)] = Job(
            _s(rule),
            _s(name),
            TaskStatus(status),
            _opt_s(native),
            max(1, int(attempt)),
            None if mem is None else float(mem),
            None if cpus is None else int(cpus),
            _opt_s(log),
        )
    elif tag == "block":
        _, kind, rule, jobid, message, native = item
        state.block = Block(_s(kind), _s(rule), _opt_s(jobid), _opt_s(message), _opt_s(native))
    elif tag == "exception":
        state.pending_exception = _s(item[1])
    elif tag == "ended":
        state.ended = True


def _s(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(value)
    return value


def _opt_s(value: Any) -> str | None:
    return None if value is None else _s(value)

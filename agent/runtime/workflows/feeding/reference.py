"""A fed workload named by its step id, where a job id is taken (`cancel`, `wait`, a
chat's cancel): parsed once where it enters, as job ids are (adapters/jobid.py), and
found in its session.

A workload none of whose parts fitted yet has no Slurm job at all, so the only name a
person has for it is the step id `submit` and `status` print (`st-d45587b1db`). An
argument is either one of Slurm's job id forms or that form, never guessed from
anything else: a typo is one line naming it and both forms (exit 2), and a step id
that names no workload of the user's sessions is the same kind of error.

Finding it: the feeding index first (a workload with parts still to submit, the one
case with no job to go by), then the sessions, newest first, until one records a
workload of that step. A workload whose parts are all submitted, or one cancelled, has
left the index; reading sessions costs only when such an id is given.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass
from functools import partial
from typing import Annotated

from pydantic import AfterValidator

from jobsmith.adapters.jobid import (
    JOB_OR_TASK,
    BadJobId,
    JobIdKind,
    JobRef,
    parse_job_id,
    parse_listed,
)
from jobsmith.agent.runtime.session.ledger import JobLedger
from jobsmith.agent.runtime.session.store import SessionNotFound, SessionStore
from jobsmith.agent.runtime.workflows.feeding.index import FeedingIndex
from jobsmith.agent.runtime.workflows.feeding.record import Workload, workloads
from jobsmith.errors import InputError

#: a step id as new_step_id makes it (agent/runtime/submission/steps.py)
_STEP_FORM = re.compile(r"^st-[0-9a-f]{10}$")
_EXAMPLE = "a workload's step id such as st-d45587b1db (as submit and status print it)"


class UnknownWorkload(InputError):
    """A step id that names no fed workload in the user's sessions."""


@dataclass(frozen=True, order=True)
class WorkloadRef:
    """One parsed workload id; `str()` is its step id."""

    step_id: str

    def __str__(self) -> str:
        return self.step_id


def parse_workload_id(text: str) -> WorkloadRef:
    """A step id in its one form, or BadJobId naming it and the form."""
    stripped = text.strip() if isinstance(text, str) else ""
    if not _STEP_FORM.match(stripped):
        raise BadJobId(f"workload {text!r}: expected {_EXAMPLE}")
    return WorkloadRef(stripped)


def parse_targets(
    values: Iterable[str], allow: Collection[JobIdKind] = JOB_OR_TASK
) -> list[JobRef | WorkloadRef]:
    """Every id in values, in order, without repeats: Slurm's forms (those allowed; a
    value may be a comma-separated list, as for job ids) or a workload's step id; anything
    else is BadJobId naming it and every form taken."""
    return parse_listed(values, partial(_target, allow=allow))


def _target(text: str, allow: Collection[JobIdKind]) -> JobRef | WorkloadRef:
    if _STEP_FORM.match(text.strip()):
        return WorkloadRef(text.strip())
    try:
        return parse_job_id(text, allow)
    except BadJobId as err:
        raise BadJobId(f"{err}, or {_EXAMPLE}") from None


def find_workload(store: SessionStore, ledger: JobLedger, ref: WorkloadRef) -> Workload:
    """The workload ref names, as its session records it (module docstring: where it is
    looked for), or UnknownWorkload."""
    for session_id in _sessions(store, ledger, ref):
        try:
            events = store.read(session_id)
        except SessionNotFound:  # pruned meanwhile
            continue
        for w in workloads(session_id, events):
            if w.step_id == ref.step_id:
                return w
    raise UnknownWorkload(
        f"workload {ref}: none of your sessions has a workload of that step; give a job "
        f"id such as 1234, an array task such as 1234_5, or {_EXAMPLE}"
    )


def _sessions(store: SessionStore, ledger: JobLedger, ref: WorkloadRef) -> Iterator[str]:
    """The sessions that may hold it, most likely first, each once."""
    listed = [e.session_id for e in FeedingIndex.beside(ledger).entries() if e.step_id == str(ref)]
    yield from listed
    for info in reversed(store.list_sessions()):  # read only if the index has it not
        if info.id not in listed:
            yield info.id


def _validated(text: str) -> str:
    try:
        return str(parse_workload_id(text))
    except BadJobId as err:
        raise ValueError(str(err)) from None  # pydantic reports ValueErrors per field


#: For step models: a workload's step id, as parsed here.
WorkloadIdText = Annotated[str, AfterValidator(_validated)]

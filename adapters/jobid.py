"""Slurm job ids as typed values, parsed once where they enter jobsmith.

A job id reaches Slurm's tools as an argv element: `scancel ID`, `scontrol hold ID`,
`sacct -j ID`. A string a person typed there can be read by Slurm as an option
(`--name=x` cancels every job of that name, `--user=alice` every job of the user), so no
user string is passed on: the CLI and the step models parse what they are given into a
`JobRef` (a job, one array task, or a range of tasks) and only its canonical text, digits
with `_` and a bracketed index list, ever becomes an argument.

Forms (Slurm's own): `1234`, `1234_5`, `1234_[1-3,7]`. Several ids may be given in one
argument separated by commas, as `squeue -j 1,2` takes them. Leading zeros and
surrounding spaces are normalised away; anything else is refused with the forms named.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from enum import StrEnum
from functools import partial
from typing import Annotated, TypeVar

from pydantic import AfterValidator

from jobsmith.errors import InputError

#: Slurm keeps job ids below 2**32 and array indices below MaxArraySize (at most 4000001)
_MAX_JOB_ID = 2**32 - 1
_MAX_TASK = 4_000_000
_FORM = re.compile(
    r"^(?P<job>[0-9]{1,10})(?:_(?:(?P<task>[0-9]{1,7})|\[(?P<range>[0-9,\-:]+)\]))?$"
)
_RANGE_PART = re.compile(r"^(?P<a>[0-9]{1,7})(?:-(?P<b>[0-9]{1,7})(?::(?P<step>[0-9]{1,7}))?)?$")

_Ref = TypeVar("_Ref")


class JobIdKind(StrEnum):
    """What a job id names."""

    JOB = "job"  # a plain job, or a whole array
    TASK = "task"  # one array task
    RANGE = "range"  # several tasks of one array


ANY_KIND: frozenset[JobIdKind] = frozenset(JobIdKind)
JOB_OR_TASK: frozenset[JobIdKind] = frozenset({JobIdKind.JOB, JobIdKind.TASK})
JOB_ONLY: frozenset[JobIdKind] = frozenset({JobIdKind.JOB})

_EXAMPLES = {
    JobIdKind.JOB: "a job id such as 1234",
    JobIdKind.TASK: "an array task such as 1234_5",
    JobIdKind.RANGE: "a task range such as 1234_[1-3,7]",
}


class BadJobId(InputError):
    """A job id that is not one of Slurm's forms (or not a form this command takes)."""


@dataclass(frozen=True, order=True)
class JobRef:
    """One parsed job id; `str()` is its canonical form, the only one passed to Slurm."""

    job: int
    task: int | None = None
    tasks: str | None = None  # normalised index list of a RANGE, e.g. "1-3,7"

    @property
    def kind(self) -> JobIdKind:
        """Job, task or range."""
        if self.task is not None:
            return JobIdKind.TASK
        return JobIdKind.RANGE if self.tasks is not None else JobIdKind.JOB

    @property
    def array_id(self) -> str:
        """The job (or array) id alone."""
        return str(self.job)

    def names(self, job_id_raw: str, array_job_id: str | None, task: int | None) -> bool:
        """Whether this id names the job or array task with these ids (as squeue gives
        them): a job id names the job and every task of its array, a task id that task,
        a range each task among its indices."""
        if self.kind is JobIdKind.JOB:
            return str(self.job) in (job_id_raw, array_job_id)
        if array_job_id != str(self.job) or task is None:
            return False
        if self.task is not None:
            return task == self.task
        return any(_in_part(task, part) for part in (self.tasks or "").split(","))

    def __str__(self) -> str:
        if self.task is not None:
            return f"{self.job}_{self.task}"
        if self.tasks is not None:
            return f"{self.job}_[{self.tasks}]"
        return str(self.job)


def parse_job_id(text: str, allow: Collection[JobIdKind] = JOB_OR_TASK) -> JobRef:
    """One id in one of the forms allowed, or BadJobId naming it and the valid forms."""
    match = _FORM.match(text.strip()) if isinstance(text, str) else None
    ref = _ref(match) if match else None
    if ref is None:
        raise BadJobId(f"job id {_shown(text)}: expected {_forms(allow)}")
    if ref.kind not in allow:
        raise BadJobId(
            f"job id {text.strip()!r} is {_EXAMPLES[ref.kind].split(' such')[0]}; "
            f"here give {_forms(allow)}"
        )
    return ref


def parse_job_ids(
    values: Iterable[str], allow: Collection[JobIdKind] = JOB_OR_TASK
) -> list[JobRef]:
    """Every id in values (each may be a comma-separated list), in order, without repeats."""
    return parse_listed(values, partial(parse_job_id, allow=allow))


def parse_listed(values: Iterable[str], parse: Callable[[str], _Ref]) -> list[_Ref]:
    """Every id in values, each value split as split_ids does and each id parsed by
    parse, in order, without repeats. One loop for every kind of id a command takes as
    it takes job ids: parse_job_ids, and a job id or a fed workload's step id
    (agent/runtime/workflows/feeding/reference.py)."""
    refs: list[_Ref] = []
    for value in values:
        for part in split_ids(value):
            ref = parse(part)
            if ref not in refs:
                refs.append(ref)
    return refs


def split_ids(value: str) -> list[str]:
    """Split on commas outside brackets: '1,2_[3,4]' is two ids."""
    parts: list[str] = []
    current: list[str] = []
    depth = 0
    for char in value:
        depth += {"[": 1, "]": -1}.get(char, 0)
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return parts


def _ref(match: re.Match[str]) -> JobRef | None:
    job = int(match["job"])
    if not 0 < job <= _MAX_JOB_ID:
        return None
    if match["task"] is not None:
        task = int(match["task"])
        return JobRef(job, task=task) if task <= _MAX_TASK else None
    if match["range"] is not None:
        tasks = _range(match["range"])
        return JobRef(job, tasks=tasks) if tasks else None
    return JobRef(job)


def _range(spec: str) -> str | None:
    """A normalised index list ('1-3,7', '0-9:2'), or None if it is not one."""
    out = []
    for part in spec.split(","):
        m = _RANGE_PART.match(part)
        if m is None:
            return None
        a = int(m["a"])
        b = int(m["b"]) if m["b"] is not None else None
        step = int(m["step"]) if m["step"] is not None else None
        if max(a, b or 0) > _MAX_TASK or (b is not None and b < a) or step == 0:
            return None
        text = str(a) if b is None else f"{a}-{b}"
        out.append(text if step is None else f"{text}:{step}")
    return ",".join(out)


def _in_part(index: int, part: str) -> bool:
    """Whether index is among one part of a range's index list ('7', '1-3', '0-20:5')."""
    span, _, step = part.partition(":")
    first, _, last = span.partition("-")
    if not last:
        return index == int(first)
    start = int(first)
    return start <= index <= int(last) and (index - start) % int(step or 1) == 0


def _forms(allow: Collection[JobIdKind]) -> str:
    return ", or ".join(_EXAMPLES[k] for k in JobIdKind if k in allow)


def _shown(text: object) -> str:
    shown = repr(text)
    return shown if len(shown) <= 60 else shown[:57] + "...'"


def _validated(allow: Collection[JobIdKind]) -> AfterValidator:
    def check(text: str) -> str:
        try:
            return str(parse_job_id(text, allow))
        except BadJobId as err:
            raise ValueError(str(err)) from None  # pydantic reports ValueErrors per field

    return AfterValidator(check)


#: For step and option models: a job or task id, stored in canonical form.
JobIdText = Annotated[str, _validated(JOB_OR_TASK)]
#: As JobIdText, also accepting task ranges (cancel, hold, release).
JobIdOrRangeText = Annotated[str, _validated(ANY_KIND)]
#: A job or array id only (rerun, adopt).
WholeJobIdText = Annotated[str, _validated(JOB_ONLY)]

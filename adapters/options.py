"""What jobsmith asks of the scheduler for one job, as typed values (`JobOptions`).

The scheduler-neutral request: the agent builds, checks against policy and records it;
the adapter renders it (for Slurm, as `#SBATCH` directives: adapters/slurm/commands/options.py),
so the script alone says what will be submitted and a hash of it binds an approval to
both the commands and the resources. Values are validated here, field by field: a value
can never carry a newline, a space or a second option.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

from jobsmith.adapters.jobid import JobIdText, parse_job_ids
from jobsmith.errors import InputError

# Characters a scheduler reads literally in a directive value; anything else (spaces,
# quotes, '#', newlines, '=' inside a value) is refused rather than quoted, because
# sbatch's directive parser is not a shell and its quoting rules differ between versions.
_SAFE = r"[A-Za-z0-9_.,:/@%+\-\[\]]+"
SafeToken = Annotated[str, StringConstraints(pattern=rf"^{_SAFE}$", max_length=1024)]
#: --constraint's features joined by Slurm's operators (&, |, *count, [..], (..)): still no
#: space, quote, '#' or '=', so the value stays one directive word
ConstraintText = Annotated[
    str, StringConstraints(pattern=r"^[A-Za-z0-9_.,:@%+\-\[\]&|*()]+$", max_length=1024)
]
#: an sbatch option jobsmith does not model, passed as written (`jobsmith sbatch`, where the
#: site allows it): '--name' or '--name=value', the value one directive word
PassedOption = Annotated[
    str, StringConstraints(pattern=rf"^--[a-z][a-z-]*(={_SAFE})?$", max_length=1100)
]
#: an --array index spec without its %throttle: '0-999', '1,3,7', '0-20:5'
ARRAY_SPEC = r"^[0-9]+(-[0-9]+(:[0-9]+)?)?(,[0-9]+(-[0-9]+(:[0-9]+)?)?)*$"
ArraySpec = Annotated[str, StringConstraints(pattern=ARRAY_SPEC, max_length=1024)]

TAG_PATTERN = re.compile(r"\.js-(?P<tag>[0-9a-f]{12})$")


class DependencyKind(StrEnum):
    """Dependency types jobsmith uses (Slurm's names, which other schedulers share)."""

    AFTEROK = "afterok"
    AFTERANY = "afterany"
    AFTERNOTOK = "afternotok"
    AFTER = "after"


class Dependency(BaseModel):
    """Start only after the given jobs reach the condition `kind`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: DependencyKind = Field(description="afterok, afterany, afternotok or after")
    job_ids: tuple[JobIdText, ...] = Field(min_length=1, description="Slurm job ids to wait for")


#: what each of sbatch's other dependency forms would need, said when one is refused
_UNMODELLED = {
    "singleton": "jobsmith gives every submission a unique name (its tag), so a singleton "
    "would wait for nothing",
    "aftercorr": "jobsmith does not model per-task array dependencies",
    "afterburstbuffer": "jobsmith does not model burst buffers",
    "expand": "jobsmith does not model growing a running job",
}


def parse_dependency(spec: str) -> tuple[Dependency, ...]:
    """sbatch's --dependency text ('afterok:1:2,afterany:3'), every part of which must
    hold, as Dependency values; InputError naming the part jobsmith cannot carry.

    Refused by name, not passed on: the any-of form ('?'), singleton, aftercorr and the
    '+minutes' delay of after, because the policy, the watcher and a plan reason about
    dependencies as "all of these jobs reached that state", which those are not.
    """
    valid = ", ".join(k.value for k in DependencyKind)
    if "?" in spec:
        raise InputError(
            f"--dependency {spec!r}: the any-of form ('?') is not supported; jobsmith's "
            "dependencies must all hold: join them with ','"
        )
    out: list[Dependency] = []
    for part in spec.split(","):
        kind, _, ids = part.strip().partition(":")
        if kind in _UNMODELLED:
            raise InputError(
                f"--dependency {part!r}: {kind} is not supported ({_UNMODELLED[kind]}); "
                f"supported: {valid}"
            )
        if kind not in DependencyKind.__members__.values():
            raise InputError(
                f"--dependency {part!r}: unknown type {kind!r}; supported: {valid}, "
                "written TYPE:JOBID[:JOBID...]"
            )
        if "+" in ids:
            raise InputError(
                f"--dependency {part!r}: a '+minutes' delay is not supported; "
                f"give {kind}:JOBID[:JOBID...]"
            )
        if not ids.strip(":"):
            raise InputError(f"--dependency {part!r}: no job id; give {kind}:JOBID[:JOBID...]")
        refs = parse_job_ids(ids.split(":"))
        out.append(Dependency(kind=DependencyKind(kind), job_ids=tuple(str(r) for r in refs)))
    return tuple(out)


class JobOptions(BaseModel):
    """Everything jobsmith sets on a submission, as typed values."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    job_name: SafeToken = Field(description="-J; carries the submission tag as '.js-<tag>'")
    partition: SafeToken | None = Field(None, description="-p partition")
    account: SafeToken | None = Field(None, description="-A account to charge")
    qos: SafeToken | None = Field(None, description="--qos")
    time_limit_s: int | None = Field(None, gt=0, description="-t wall-time limit, seconds")
    nodes: int | None = Field(None, gt=0, description="-N number of nodes")
    ntasks: int | None = Field(None, gt=0, description="-n number of tasks")
    cpus_per_task: int | None = Field(None, gt=0, description="-c CPUs per task")
    mem_mb: int | None = Field(None, gt=0, description="--mem per node, MiB")
    gpus: int | None = Field(None, ge=0, description="GPUs per node, via --gres=gpu[:type]:N")
    gpu_type: SafeToken | None = Field(None, description="GPU type for --gres, e.g. a100")
    array: ArraySpec | None = Field(
        None, description="--array index spec without throttle, e.g. '0-999' or '1,3,7'"
    )
    array_throttle: int | None = Field(None, gt=0, description="max array tasks running at once")
    dependencies: tuple[Dependency, ...] = Field((), description="--dependency, all must hold")
    output: SafeToken | None = Field(None, description="-o stdout path (may use %j %A %a)")
    error: SafeToken | None = Field(None, description="-e stderr path (may use %j %A %a)")
    chdir: SafeToken | None = Field(None, description="-D working directory of the job")
    comment: SafeToken | None = Field(
        None, description="--comment (not kept by sacct at most sites)"
    )
    export: SafeToken | None = Field(
        None, description="--export: which of the submitter's variables the job gets"
    )
    mail_type: SafeToken | None = Field(None, description="--mail-type, e.g. END,FAIL")
    mail_user: SafeToken | None = Field(None, description="--mail-user address")
    constraint: ConstraintText | None = Field(None, description="--constraint node features")
    exclude: SafeToken | None = Field(None, description="--exclude nodes, e.g. 'n[01-03],n7'")
    passed: tuple[PassedOption, ...] = Field(
        (),
        description="sbatch options jobsmith does not model, passed as written: those the "
        "site allows in a user's own script (jobsmith sbatch)",
    )
    # a checkpointable job's (issue 27); last, so older documents keep their order
    signal: Annotated[str, StringConstraints(pattern=r"^(B:)?[A-Z0-9]+@[0-9]+$")] | None = Field(
        None, description="--signal: which signal, to whom, how long before the time limit"
    )
    requeue: bool = Field(False, description="--requeue: the job may be requeued")
    ntasks_per_node: int | None = Field(
        None,
        gt=0,
        description="--ntasks-per-node tasks on each node (with -n, the most on any node)",
    )

    @model_validator(mode="after")
    def _throttle_needs_array(self) -> JobOptions:
        if self.array_throttle is not None and self.array is None:
            raise ValueError("array_throttle is set but array is not: a throttle needs an array")
        return self

    def tag(self) -> str | None:
        """The submission tag carried in the job name, if any."""
        match = TAG_PATTERN.search(self.job_name)
        return match.group("tag") if match else None

    def task_count(self) -> int:
        """How many tasks the job runs, as Slurm counts them: -n where given (then
        --ntasks-per-node is only the most on any node), else nodes x --ntasks-per-node,
        else one per node (sbatch -N 3 alone allocates 3 tasks, a CPU on each node), else 1."""
        if self.ntasks is not None:
            return self.ntasks
        return (self.nodes or 1) * (self.ntasks_per_node or 1)

    def array_size(self) -> int:
        """How many array tasks the spec names (1 for a plain job); Slurm counts each."""
        return array_task_count(self.array) if self.array else 1


def array_task_count(spec: str) -> int:
    """Number of indices in an --array spec like '0-9,20,30-40:5'."""
    total = 0
    for part in spec.split(","):
        if "-" not in part:
            total += 1
            continue
        span, _, step = part.partition(":")
        first, last = (int(x) for x in span.split("-"))
        total += len(range(first, last + 1, int(step) if step else 1))
    return total


#: the largest index any Slurm accepts (MaxArraySize is at most 4000001; sites set less)
MAX_ARRAY_INDEX = 4_000_000


def array_last_index(spec: str) -> int:
    """The largest index an --array spec names ('0-9:4,3' -> 8), without listing them."""
    last = 0
    for part in spec.split(","):
        span, _, step = part.partition(":")
        first, _, end = span.partition("-")
        if end:
            start, stop = int(first), int(end)
            last = max(last, start + (stop - start) // int(step or 1) * int(step or 1))
        else:
            last = max(last, int(first))
    return last


def array_head(spec: str, n: int) -> tuple[str, str]:
    """The first n tasks of an --array spec and the rest, as two specs, in the spec's
    order, without listing a single index ('0-9:2,20', 2 -> '0-2:2', '4-8:2,20'): a
    canary of an array of any size costs a few ranges. Either spec may be empty."""
    head: list[str] = []
    rest: list[str] = []
    for part in spec.split(","):
        span, _, step_text = part.partition(":")
        first_text, _, last_text = span.partition("-")
        first, step = int(first_text), int(step_text or 1)
        count = (int(last_text or first) - first) // step + 1
        taken = min(max(n, 0), count)
        n -= taken
        if taken:
            head.append(_range(first, taken, step))
        if taken < count:
            rest.append(_range(first + taken * step, count - taken, step))
    return ",".join(head), ",".join(rest)


def _range(first: int, count: int, step: int) -> str:
    """count indices from first, step apart, as one part of an --array spec."""
    if count == 1:
        return str(first)
    last = first + (count - 1) * step
    return f"{first}-{last}" + (f":{step}" if step != 1 else "")

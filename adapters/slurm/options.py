"""Typed sbatch options and their rendering as `#SBATCH` directives (pure).

Every resource jobsmith asks for goes into the script as a directive, so the rendered
script alone says exactly what will be submitted (and a hash of it binds an approval to
both the commands and the resources). Values are validated here, field by field: a
directive value can never carry a newline, a space or a second option.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

from jobsmith.adapters.slurm.jobid import JobIdText
from jobsmith.units import format_time_limit

# Characters sbatch reads literally in a directive value; anything else (spaces, quotes,
# '#', newlines, '=' inside a value) is refused rather than quoted, because sbatch's
# directive parser is not a shell and its quoting rules differ between versions.
_SAFE = r"[A-Za-z0-9_.,:/@%+\-\[\]]+"
SafeToken = Annotated[str, StringConstraints(pattern=rf"^{_SAFE}$", max_length=1024)]

TAG_PATTERN = re.compile(r"\.js-(?P<tag>[0-9a-f]{12})$")


class DependencyKind(StrEnum):
    """Slurm dependency types jobsmith uses."""

    AFTEROK = "afterok"
    AFTERANY = "afterany"
    AFTERNOTOK = "afternotok"
    AFTER = "after"


class Dependency(BaseModel):
    """Start only after the given jobs reach the condition `kind`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: DependencyKind = Field(description="afterok, afterany, afternotok or after")
    job_ids: tuple[JobIdText, ...] = Field(min_length=1, description="Slurm job ids to wait for")


class SbatchOptions(BaseModel):
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
    array: (
        Annotated[
            str,
            StringConstraints(
                pattern=r"^[0-9]+(-[0-9]+(:[0-9]+)?)?(,[0-9]+(-[0-9]+(:[0-9]+)?)?)*$"
            ),
        ]
        | None
    ) = Field(None, description="--array index spec without throttle, e.g. '0-999' or '1,3,7'")
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

    @model_validator(mode="after")
    def _throttle_needs_array(self) -> SbatchOptions:
        if self.array_throttle is not None and self.array is None:
            raise ValueError("array_throttle is set but array is not: a throttle needs an array")
        return self

    def tag(self) -> str | None:
        """The submission tag carried in the job name, if any."""
        match = TAG_PATTERN.search(self.job_name)
        return match.group("tag") if match else None

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


def render_directives(opts: SbatchOptions) -> list[str]:
    """The `#SBATCH` lines for opts, in a fixed order (stable output to diff and hash)."""
    lines = [f"--job-name={opts.job_name}"]
    simple: list[tuple[str, object]] = [
        ("partition", opts.partition),
        ("account", opts.account),
        ("qos", opts.qos),
        ("nodes", opts.nodes),
        ("ntasks", opts.ntasks),
        ("cpus-per-task", opts.cpus_per_task),
    ]
    lines += [f"--{key}={value}" for key, value in simple if value is not None]
    if opts.mem_mb is not None:
        lines.append(f"--mem={opts.mem_mb}M")
    if opts.time_limit_s is not None:
        lines.append(f"--time={format_time_limit(opts.time_limit_s)}")
    if opts.gpus:
        kind = f"gpu:{opts.gpu_type}" if opts.gpu_type else "gpu"
        lines.append(f"--gres={kind}:{opts.gpus}")
    if opts.array:
        throttle = f"%{opts.array_throttle}" if opts.array_throttle else ""
        lines.append(f"--array={opts.array}{throttle}")
    if opts.dependencies:
        lines.append("--dependency=" + ",".join(_dependency(d) for d in opts.dependencies))
    tail: list[tuple[str, object]] = [
        ("output", opts.output),
        ("error", opts.error),
        ("chdir", opts.chdir),
        ("comment", opts.comment),
        ("export", opts.export),
        ("mail-type", opts.mail_type),
        ("mail-user", opts.mail_user),
    ]
    lines += [f"--{key}={value}" for key, value in tail if value is not None]
    return [f"#SBATCH {line}" for line in lines]


def _dependency(dep: Dependency) -> str:
    return f"{dep.kind.value}:" + ":".join(dep.job_ids)

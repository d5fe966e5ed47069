"""JobOptions rendered as `#SBATCH` directives (pure): Slurm's option names live here.

Every resource jobsmith asks for goes into the script as a directive, so the rendered
script alone says exactly what will be submitted; the values were validated field by
field in JobOptions, so no directive can carry a second option.
"""

from __future__ import annotations

from collections.abc import Sequence

from jobsmith.adapters.options import Dependency, JobOptions
from jobsmith.units import format_time_limit


def render_directives(opts: JobOptions) -> list[str]:
    """The `#SBATCH` lines for opts, in a fixed order (stable output to diff and hash)."""
    lines = [f"--job-name={opts.job_name}"]
    simple: list[tuple[str, object]] = [
        ("partition", opts.partition),
        ("account", opts.account),
        ("qos", opts.qos),
        ("nodes", opts.nodes),
        ("ntasks", opts.ntasks),
        ("ntasks-per-node", opts.ntasks_per_node),
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
        lines.append("--dependency=" + dependency_spec(opts.dependencies))
    picks: list[tuple[str, object]] = [("constraint", opts.constraint), ("exclude", opts.exclude)]
    lines += [f"--{key}={value}" for key, value in picks if value is not None]
    if opts.signal is not None:
        lines.append(f"--signal={opts.signal}")
    if opts.requeue:
        lines.append("--requeue")
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
    lines += opts.passed
    return [f"#SBATCH {line}" for line in lines]


def dependency_spec(dependencies: Sequence[Dependency]) -> str:
    """Slurm's spelling of dependencies (all must hold): 'afterok:1:2,afterany:3'."""
    return ",".join(f"{d.kind.value}:" + ":".join(d.job_ids) for d in dependencies)

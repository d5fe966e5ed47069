"""The workflow-engine seam: Nextflow and Snakemake behind one small protocol.

jobsmith does not replace a genomics team's workflow engine; it launches the engine's
main process as a Slurm head job under the site's policy, and follows what the engine
submits by reading the engine's own records. Everything an engine does here is a pure
function, so it is tested without the engine:

- `launch` turns the site (already resolved into `EngineSite`: partition, account, QoS,
  limits from the policy) and the person's `LaunchRequest` into a `HeadJob`: the
  configuration files the head job writes before it starts the engine, and the argv it
  runs. The files travel inside the batch script (so the approval's sha256 covers them and
  nothing is written on the login node before the person approves).
- `records` names the files the engine writes as it goes (Nextflow's trace and log,
  Snakemake's console log), per launch attempt, so a resumed run never re-reads the
  previous attempt's records from a shifted offset.
- `parse` reads the complete lines appended to one record since the last cycle, with
  whatever the reader kept from earlier lines (`context`: a trace file's header), and
  returns typed tasks and messages. The agent does the reading (through the transport,
  from a byte offset) and keeps the offsets in the session; the engine never does I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from typing import Protocol

from pydantic import BaseModel, ConfigDict, Field


class _Model(BaseModel):
    # built when first used: only pipelines use them (issue 26: a submit imports them)
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)


class EngineKind(StrEnum):
    """The workflow engines jobsmith can launch."""

    NEXTFLOW = "nextflow"
    SNAKEMAKE = "snakemake"


class TaskStatus(StrEnum):
    """One engine task (Nextflow process run, Snakemake rule job) as jobsmith reports it.

    Engines' own words are mapped to it in their adapter, in one place each.
    """

    SUBMITTED = "SUBMITTED"  # handed to Slurm, not known to run yet
    RUNNING = "RUNNING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"  # this attempt failed; the engine may retry it (see `attempt`)
    CACHED = "CACHED"  # reused from an earlier run (-resume); it ran no job this time
    ABORTED = "ABORTED"  # killed because the run stopped (another task failed, a cancel)


class PartitionLimits(_Model):
    """One partition's maxima, for the engine's per-task resource caps."""

    name: str
    max_cpus: int | None = Field(None, description="most CPUs on one node")
    max_mem_mb: int | None = Field(None, description="most memory on one node, MiB")
    max_time_s: int | None = Field(None, description="longest time limit, seconds")


class EngineSite(_Model):
    """What an engine's configuration takes from the site config and its policy.

    Built by the agent from the site config (agent/runtime/workflows/pipelines.py); the engine
    sees neither the site file nor the policy, only these resolved values.
    """

    partition: str = Field(description="where the engine submits its tasks")
    head_partition: str = Field(description="where the head job runs")
    account: str | None = None
    qos: str | None = None
    partitions: tuple[PartitionLimits, ...] = Field(
        (), description="every partition the site allows, with its maxima"
    )
    max_concurrent_tasks: int = Field(
        ge=1, description="most of the engine's tasks queued or running at once (queueSize, --jobs)"
    )
    submissions_per_hour: int | None = Field(
        None, ge=1, description="the policy's submission budget per hour, if it has one"
    )
    default_cpus: int = Field(1, ge=1)
    default_mem_mb: int = Field(2048, ge=1)
    default_time_s: int = Field(3600, ge=1)
    max_retries: int = Field(
        2, ge=0, description="re-runs of a task killed for memory or time (memory doubles)"
    )


class LaunchRequest(_Model):
    """What the person asked to run."""

    engine: EngineKind
    pipeline: str = Field(
        description="Nextflow: a pipeline name, URL or path; Snakemake: the Snakefile's path"
    )
    launch_dir: str = Field(description="absolute: where the engine runs and keeps its state")
    work_dir: str | None = Field(None, description="Nextflow's work directory (-work-dir)")
    revision: str | None = Field(None, description="Nextflow: -r")
    profile: str | None = Field(None, description="Nextflow: -profile")
    params_file: str | None = Field(
        None, description="Nextflow: -params-file; Snakemake: --configfile"
    )
    targets: tuple[str, ...] = Field((), description="Snakemake: the targets to build")
    extra_args: tuple[str, ...] = Field((), description="passed to the engine as given")


class HeadJob(_Model):
    """What the head job does: write `files` under the launch directory, then run `argv`."""

    files: dict[str, str] = Field(
        description="relative path under the launch directory -> text written before the run"
    )
    argv: tuple[str, ...] = Field(description="the engine's command line, run in the launch dir")
    prepare: tuple[str, ...] = Field(
        (),
        description="the engine's command line to run first, if any (Snakemake's --unlock on "
        "a resume: the lock a killed head job left; jobsmith resumes only after it ended)",
    )
    console_log: str | None = Field(
        None,
        description="relative path the head job copies the engine's console output to "
        "(for engines whose records are their console, Snakemake)",
    )
    environment: dict[str, str] = Field(
        default_factory=dict, description="exported before the run (NXF_ANSI_LOG=false)"
    )


class RecordFile(_Model):
    """A file the engine writes as it runs, which the watcher follows."""

    path: str = Field(description="relative to the launch directory")
    kind: str = Field(description="engine-defined: 'trace', 'log', 'console'")


class EngineTask(_Model):
    """One attempt of one engine task, as its records tell it."""

    key: str = Field(description="the engine's id of this attempt (Nextflow task_id, …)")
    process: str = Field(description="the process or rule")
    name: str = Field(description="the task's display name, e.g. 'ALIGN (sample1)'")
    status: TaskStatus
    native_id: str | None = Field(None, description="the Slurm job id the engine submitted")
    attempt: int = Field(1, ge=1)
    exit_code: int | None = None
    cpus: int | None = None
    mem_mb: float | None = Field(None, description="memory requested, MiB")
    peak_rss_mb: float | None = Field(None, description="peak resident memory, MiB")
    realtime_s: float | None = Field(None, description="wall time of the task, seconds")
    cpu_percent: float | None = None
    workdir: str | None = Field(None, description="the task's work directory")
    log: str | None = Field(
        None,
        description="the file the task's output goes to, where the engine keeps it "
        "(Snakemake's slurm_logs/…/JOBID.log, Nextflow's WORKDIR/.command.log): jobsmith "
        "reads a task's log there, since Slurm forgets a job's paths and accounting has none",
    )


class MessageKind(StrEnum):
    """What an engine's log says that a person or the brain acts on."""

    SUBMIT_ERROR = "SUBMIT_ERROR"  # the engine could not submit a task (sbatch refused)
    TASK_FAILED = "TASK_FAILED"  # a task ended in error (with its exit status)
    RETRY = "RETRY"  # the engine re-submits a failed task
    ABORTED = "ABORTED"  # the run stopped on an error
    PROGRESS = "PROGRESS"  # how far the run is ("3 of 6 steps done")
    COMPLETED = "COMPLETED"  # the run ended well
    FAILED = "FAILED"  # the run ended in failure
    WARNING = "WARNING"


class EngineMessage(_Model):
    """One thing the engine's log said, with where."""

    kind: MessageKind
    text: str = Field(description="the engine's words, one line, bounded")
    process: str | None = None
    exit_code: int | None = None
    native_id: str | None = None


class Parsed(_Model):
    """What new lines of one record said."""

    tasks: tuple[EngineTask, ...] = ()
    messages: tuple[EngineMessage, ...] = ()
    context: tuple[str, ...] = Field((), description="kept for the next call (a header)")


class WorkflowEngine(Protocol):
    """A workflow engine jobsmith launches as a head job and follows (module docstring)."""

    @property
    def kind(self) -> EngineKind:
        """Which engine this is."""
        ...

    def launch(self, site: EngineSite, request: LaunchRequest, *, attempt: int) -> HeadJob:
        """The head job's files and command; attempt > 1 resumes the earlier attempts' run."""
        ...

    def records(self, request: LaunchRequest, *, attempt: int) -> tuple[RecordFile, ...]:
        """The files this attempt writes as it runs."""
        ...

    def parse(self, record: RecordFile, lines: Sequence[str], context: tuple[str, ...]) -> Parsed:
        """Complete lines appended to `record` since the last call; never raises on bad lines."""
        ...

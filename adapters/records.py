"""Typed records of what Slurm reports about jobs: the parsers' output, the adapter's answers."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from jobsmith.adapters.hostlist import expand_hostlist
from jobsmith.adapters.states import JobState


class _Record(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class StepRecord(_Record):
    """One step of a job as sacct reports it (`NNN.batch`, `NNN.extern`, `NNN.0`)."""

    step: str = Field(description="step name after the job id: 'batch', 'extern', '0', …")
    state: JobState = Field(description="the step's state")
    cancelled_by: str | None = Field(None, description="uid from 'CANCELLED by UID', if any")
    cancelled_by_user: str | None = Field(
        None,
        description="user name that cancelled it: sacct --json gives the name "
        "(kill_request_user) where sacct -P gives only the uid",
    )
    exit_code: int | None = Field(None, description="exit status of the step's process")
    signal: int | None = Field(None, description="signal that ended it, 0 or None if none")
    max_rss_bytes: int | None = Field(None, description="peak resident memory (sampled)")
    elapsed_s: int | None = Field(None, description="wall time in seconds")


class JobRecord(_Record):
    """One job, or one array task, as accounting describes it (steps folded in)."""

    job_id: str = Field(description="Slurm's display id: '331', '333_2', or '333_[4-9]'")
    job_id_raw: str = Field(description="the numeric id Slurm gave this job or task")
    array_job_id: str | None = Field(None, description="the array's id, for array tasks")
    array_task_id: int | None = Field(None, description="task index, for a started task")
    array_task_range: str | None = Field(
        None, description="for a not-yet-split pending array record: the range, e.g. '4-9%2'"
    )
    name: str = Field(description="job name (-J); jobsmith keeps its submission tag here")
    state: JobState = Field(description="the job's state")
    cancelled_by: str | None = Field(None, description="uid from 'CANCELLED by UID', if any")
    cancelled_by_user: str | None = Field(
        None,
        description="user name that cancelled it: sacct --json gives the name "
        "(kill_request_user) where sacct -P gives only the uid",
    )
    exit_code: int | None = Field(None, description="exit status of the batch script")
    signal: int | None = Field(None, description="signal that ended the job, if any")
    derived_exit_code: int | None = Field(None, description="highest exit status of all steps")
    reason: str | None = Field(None, description="pending reason, None if Slurm says 'None'")
    elapsed_s: int | None = Field(None, description="wall time used, seconds")
    timelimit_s: int | None = Field(None, description="time limit, seconds; None if unlimited")
    max_rss_bytes: int | None = Field(None, description="peak RSS over all steps, bytes")
    req_mem_bytes: int | None = Field(None, description="memory requested for the job, bytes")
    alloc_cpus: int | None = Field(None, description="CPUs allocated")
    total_cpu_s: float | None = Field(None, description="CPU time used (TotalCPU), seconds")
    node_list: str | None = Field(None, description="nodes, None until it runs")
    partition: str | None = Field(None, description="partition")
    account: str | None = Field(None, description="account charged")
    qos: str | None = Field(None, description="QoS the job runs under")
    user: str | None = Field(None, description="owner's user name")
    work_dir: str | None = Field(None, description="working directory")
    comment: str | None = Field(None, description="--comment, if accounting stored it")
    alloc_tres: str | None = Field(None, description="AllocTRES, e.g. 'cpu=1,mem=500M,gres/gpu=1'")
    req_tres: str | None = Field(
        None,
        description="ReqTRES, what the job asked for as Slurm recorded it, e.g. "
        "'billing=1,cpu=1,gres/gpu=1,mem=500M,node=1' (GPUs show only where the site "
        "accounts gres/gpu: AccountingStorageTRES)",
    )
    submit_time: datetime | None = Field(None, description="when Slurm accepted it")
    start_time: datetime | None = Field(None, description="when it started, None if not yet")
    end_time: datetime | None = Field(None, description="when it ended, None if not yet")
    steps: tuple[StepRecord, ...] = Field((), description="its steps, in sacct's order")
    requeues: tuple[JobState, ...] = Field(
        (),
        description="how each earlier run of this job ended, oldest first, where Slurm "
        "requeued it (sacct -D's rows): PREEMPTED, REQUEUED (scontrol requeue), NODE_FAIL; "
        "the record itself is its latest run",
    )
    stand_in: bool = Field(
        False,
        description="slurmdbd's stand-in row for a job it has not completed yet (right after "
        "a job starts or ends): its name, limits and memory asked are unknown (jobsmith "
        "fills them from what it submitted), and its state may lag the job's (PENDING beside "
        "a RUNNING batch step) unless the controller answered; nothing is decided from it",
    )

    @property
    def nodes(self) -> tuple[str, ...]:
        """The nodes it ran on, one name each (node_list expanded; () if none or unreadable)."""
        try:
            return expand_hostlist(self.node_list)
        except ValueError:
            return ()


class QueueRecord(_Record):
    """One job or array task as the controller (squeue) describes it, while it holds it."""

    job_id: str = Field(description="Slurm's display id: '331', '333_2', or '333_[4-9]'")
    job_id_raw: str = Field(description="the numeric id of this job or task")
    array_job_id: str | None = Field(None, description="the array's id, for array tasks")
    array_task_id: int | None = Field(None, description="task index, for a split task")
    array_task_range: str | None = Field(None, description="pending range, e.g. '4-9%2'")
    name: str = Field(description="job name")
    user: str | None = Field(None, description="owner's user name")
    state: JobState = Field(description="the job's state")
    exit_code: int | None = Field(
        None,
        description="exit status of the batch script once the job has ended (a job killed "
        "by a signal reads 0); None while it is pending or running",
    )
    signal: int | None = Field(
        None,
        description="signal that ended the batch script, 0 if none; None until the job "
        "has ended. A job cancelled while running shows 15 here, where sacct's job row "
        "says 0:0 and its batch step 0:15",
    )
    reason: str | None = Field(None, description="why it waits ('Priority', …); None if none")
    dependency: str | None = Field(
        None, description="dependencies left, e.g. 'afterok:336(failed)' for one never satisfied"
    )
    partition: str | None = Field(None, description="partition")
    estimated_start: datetime | None = Field(None, description="expected start, if known")
    comment: str | None = Field(None, description="--comment (the controller keeps it)")
    stdout_path: str | None = Field(None, description="stdout file as Slurm will write it")
    stderr_path: str | None = Field(None, description="stderr file as Slurm will write it")

"""The Scheduler seam: what the rest of jobsmith may ask of a batch scheduler.

The agent and the CLI depend on this Protocol only; the Slurm CLI implementation lives in
adapters/slurm/scheduler.py (a pyslurm one could follow where a site's Slurm matches).
It holds what any batch scheduler offers; what only some do (script directives, Slurm's
controller and accounting daemon, an orphaned submit command, a held job's script) is a
capability the adapter names in capabilities() (adapters/capabilities.py).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Protocol

from pydantic import BaseModel, ConfigDict, Field

from jobsmith.adapters.capabilities import Capabilities
from jobsmith.adapters.options import Dependency, JobOptions, array_task_count
from jobsmith.adapters.records import JobRecord, QueueRecord
from jobsmith.adapters.states import JobState
from jobsmith.site_config.facts import ClusterFacts


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class SubmitResult(_Model):
    """A submission Slurm accepted."""

    job_id: str = Field(description="Slurm's job id (an array's id for arrays)")
    job_name: str = Field(description="job name, which carries the submission tag")
    tag: str | None = Field(description="jobsmith's submission tag")
    warnings: tuple[str, ...] = Field((), description="what sbatch printed on stderr")
    recovered: bool = Field(
        False, description="true if sbatch's answer was lost and the job was found by its tag"
    )
    attempts: int = Field(1, description="sbatch invocations it took")


class TestOnlyResult(_Model):
    """What `sbatch --test-only` said about a script, without submitting it."""

    __test__ = False  # not a pytest test class, despite the name

    ok: bool = Field(description="true if Slurm would accept the job")
    estimated_start: datetime | None = Field(None, description="Slurm's start estimate")
    partition: str | None = Field(None, description="partition it would run in")
    estimate_reliable: bool = Field(
        True, description="false where Slurm's estimate is known to be nonsense (GRES on 22.05)"
    )
    message: str = Field(description="Slurm's own words")


class JobStatus(_Model):
    """One job (or whole array) as jobsmith reports it: accounting plus the queue."""

    job_id: str = Field(description="the id asked about")
    state: JobState = Field(description="overall state; for arrays, summarised over tasks")
    record: JobRecord | None = Field(None, description="the job's own record, if Slurm has one")
    tasks: tuple[JobRecord, ...] = Field((), description="array tasks, one record each")
    reason: str | None = Field(None, description="why it waits, from the controller")
    estimated_start: datetime | None = Field(None, description="controller's start estimate")
    in_queue: bool = Field(
        False,
        description="the controller (squeue) answered for it in this poll: its state is fresh",
    )
    accounted: bool = Field(
        False,
        description="accounting (sacct) answered for it in this poll: its records list every "
        "task the array has had, where the controller forgets ended ones",
    )
    dependency: str | None = Field(
        None,
        description="the dependencies the controller still waits for, as it prints them "
        "('afterok:5(unfulfilled)'); None when it waits for none or did not answer "
        "(in_queue). Satisfied ones are dropped from it",
    )

    @property
    def task_counts(self) -> dict[str, int]:
        """Array tasks per state (a pending remainder record counts its whole range)."""
        counts: Counter[str] = Counter()
        for task in self.tasks:
            counts[task.state.value] += task_range_size(task)
        return dict(counts)

    @property
    def stand_in(self) -> bool:
        """True when accounting answered with a stand-in row for it or one of its tasks
        (JobRecord.stand_in): its state is not news and nothing is decided from it."""
        own = self.record is not None and self.record.stand_in
        return own or any(task.stand_in for task in self.tasks)


class EnvironmentDefault(_Model):
    """One of the user's environment variables that sets a default on every submission."""

    variable: str = Field(description="the variable, e.g. SBATCH_PARTITION")
    field: str = Field(
        description="what it sets: partition, account, qos, time_limit (a duration) or mem"
    )
    value: str = Field(description="its value, as set")


class EnvironmentInputs(_Model):
    """What the user's environment would do to a submission behind the script's back."""

    defaults: tuple[EnvironmentDefault, ...] = Field(
        (), description="defaults jobsmith folds into the request (an explicit value wins)"
    )
    refused: tuple[str, ...] = Field(
        (), description="variables jobsmith cannot check: a submission is refused while set"
    )


class SubmitLimit(_Model):
    """A limit on how many of a user's jobs may be queued or running at once, which a
    submission falls under (Slurm: a QoS's MaxSubmitPU or MaxSubmitPA, an association's
    MaxSubmitJobs); the scheduler refuses a submission that would pass it."""

    rule: str = Field(description="the scheduler's name for it, e.g. MaxSubmitPU")
    holder: str = Field(description="what sets it, e.g. 'QoS tiny (per user)'")
    limit: int = Field(description="most jobs queued or running at once (array tasks count one)")
    queued: int = Field(
        description="the caller's own jobs and array tasks counting against it now (a "
        "per-account limit also counts other users' jobs: this is then a lower bound)"
    )


class SubmitLimits(_Model):
    """The submit limits a job would be under, each with how full it is."""

    qos: str | None = Field(None, description="the QoS the job gets: its own, else the default")
    account: str | None = Field(None, description="the account: its own, else the default")
    limits: tuple[SubmitLimit, ...] = Field((), description="empty: no such limit is set")
    max_array_size: int | None = Field(
        None,
        description="the scheduler's cap on array indices (Slurm's MaxArraySize: the highest "
        "index must be below it, whatever the count); None where it is not known",
    )


class Scheduler(Protocol):
    """A batch scheduler reached through a transport: what any of them offers in some
    form (PBS and LSF too: a held job's output paths, a log file's naming pattern, the
    environment their submit command reads). The rest is in capabilities()."""

    def version(self) -> str:
        """The scheduler's version string, e.g. '22.05.8'."""
        ...

    def submit(self, script: str, options: JobOptions) -> SubmitResult:
        """Submit a rendered script whose directives match options; never twice."""
        ...

    def test_only(self, script: str) -> TestOnlyResult:
        """Pre-flight check of a script without submitting it."""
        ...

    def status(
        self, job_ids: Sequence[str], since: datetime, *, terms: bool = True
    ) -> dict[str, JobStatus]:
        """States of many jobs at the cost of one accounting and at most one queue query.

        terms=False leaves out what Slurm granted beyond the limits (the records' qos,
        alloc_tres and req_tres stay None), which accounting looks up at a cost of its
        own: for a poll that follows states and prints no more."""
        ...

    def usage(self, job_ids: Sequence[str], since: datetime) -> dict[str, JobStatus]:
        """What the jobs used and how they ended (state, elapsed time, memory, CPU time),
        for the advice's history: one narrow accounting query, no queue query; a job
        accounting does not show is missing or NOT_VISIBLE, and without accounting the
        answer is empty."""
        ...

    def find_by_name(self, job_name: str, since: datetime) -> list[str]:
        """Job ids carrying job_name, from the controller and accounting."""
        ...

    def active_tasks(self) -> int:
        """How many of the caller's jobs and array tasks are queued or running."""
        ...

    def cancel(self, job_ids: Sequence[str]) -> None:
        """Cancel jobs."""
        ...

    def hold(self, job_ids: Sequence[str]) -> list[str]:
        """Hold jobs; returns the ones among them that had already started, which a hold
        does not stop (it only keeps a job from starting again if it is requeued)."""
        ...

    def release(self, job_ids: Sequence[str]) -> None:
        """Release held jobs."""
        ...

    def set_dependencies(self, job_id: str, dependencies: Sequence[Dependency]) -> None:
        """Replace a pending job's dependencies (a plan's job whose upstream was re-run)."""
        ...

    def exclude_nodes(self, job_id: str, nodes: str) -> None:
        """Set a pending job's excluded nodes to nodes, a node list (replacing what it
        excluded: pass the old list in it); a requeued job then starts elsewhere."""
        ...

    def runs(self, job_ids: Sequence[str], since: datetime) -> list[JobRecord]:
        """Every run of the jobs (and array tasks), earlier ones of requeued jobs included,
        each a record without steps: one accounting query (empty without accounting)."""
        ...

    def cluster_facts(self, user: str) -> ClusterFacts:
        """Partitions and their limits, the nodes behind them, the user's associations."""
        ...

    def submit_limits(self, user: str, options: JobOptions) -> SubmitLimits:
        """The limits on queued jobs a job with options would be under (its QoS, else the
        default; its account, else the user's default), each with how many of the caller's
        jobs count against it now; no limit: none, and the queue is not asked. Also the
        cap on array indices, which refuses an array whole as a full queue does."""
        ...

    def has_accounting(self) -> bool:
        """False where the site keeps no accounting: jobs are then known only while the
        controller holds them (MinJobAge after their end: ControllerFacts), without MaxRSS
        or steps, and a job it no longer shows reads FINAL_UNKNOWN. Not a capability:
        crash recovery trusts "not found" only with accounting, and neither guess is a
        safe default."""
        ...

    def output_paths(self, job_id: str) -> tuple[str | None, str | None]:
        """(stdout, stderr) paths of a job while the controller still holds it."""
        ...

    def log_path(self, options: JobOptions, job_id: str, stream: str, since: datetime) -> str:
        """The file a job (or one array task) jobsmith submitted with options writes its
        stream ('stdout' or 'stderr') to, from the patterns it was submitted with."""
        ...

    def submission_environment(self, environ: Mapping[str, str]) -> EnvironmentInputs:
        """What environ would add to a submission outside the script (pure). Every submit
        command reads some (Slurm's SBATCH_*, LSF's LSB_DEFAULT*): an adapter must say, as
        a silent "nothing" would let them past the site's policy."""
        ...

    def capabilities(self) -> Capabilities:
        """What this scheduler offers beyond the protocol, each None where it has not
        (pure: no I/O; asked for by the callers that need one)."""
        ...


def task_range_size(record: JobRecord | QueueRecord) -> int:
    """How many tasks a record stands for: 1, or the size of a pending range like '4-9%2'."""
    if not record.array_task_range:
        return 1
    return array_task_count(record.array_task_range.split("%")[0])

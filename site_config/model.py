"""The site configuration as a typed model: one cluster, its partitions, accounts and policy.

Field names follow two sources on purpose. `defaults` uses JobOptions' own names
(`cpus_per_task`, `mem_mb`, `time_limit_s`) so the defaults can be handed to a submission
unchanged; partition limits use the names of the Slurm partition keys they mirror
(`max_time` is MaxTime, `max_mem_per_node` is MaxMemPerNode), which is what an admin
copies them from. Units are fixed whatever the spelling: durations are stored in seconds,
memory in MiB (fieldtypes.py says what a file may write and how paths are expanded).

Every model forbids unknown keys, so a typo is an error instead of a silently ignored
limit.

Cross-field checks raise PydanticCustomError with a `fields` entry in their context:
the sub-fields at fault, relative to the model that raised. The loader uses it to name
the file that set the offending value when several files were merged.

jobsmith's limits are guardrails for what the agent may ask for (and when a person must
approve); Slurm still enforces the site's real limits.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum
from typing import Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from jobsmith.site_config.fieldtypes import (
    Dir,
    Duration,
    EnvEntry,
    EnvPattern,
    Memory,
    Name,
    SbatchOptionName,
    SetupLine,
)
from jobsmith.units import format_duration, format_memory


class _Section(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


def _fault(message: str, *fields: tuple[str, ...]) -> PydanticCustomError:
    """A cross-field error naming the sub-fields (key paths) that hold the bad values."""
    return PydanticCustomError("site_config", message, {"fields": fields})


class Compared(StrEnum):
    """What the first poll compares between a job as checked and as Slurm recorded it
    (agent/runtime/submission/accepted.py); a site names in `scheduler.adjusts` the ones its
    own plugins change on purpose."""

    PARTITION = "partition"
    ACCOUNT = "account"
    TIME = "time"
    MEM = "mem"
    QOS = "qos"
    GRES = "gres"
    ARRAY = "array"
    DEPENDENCY = "dependency"


class SchedulerAccess(_Section):
    """How jobsmith reaches the scheduler's client commands (sbatch, squeue, …)."""

    kind: Literal["local", "ssh", "openssh"] = Field(
        "local",
        description="'local': run Slurm commands on this host (a login node); "
        "'ssh': run them on `host` over SSH (paramiko, key or agent login); "
        "'openssh': through the system's ssh, over a ControlMaster connection you open "
        "once (`control_path`), for logins that ask for a second factor",
    )
    host: str | None = Field(None, description="ssh: the login node to connect to")
    port: int = Field(22, ge=1, le=65535, description="ssh: TCP port")
    user: str | None = Field(
        None, description="ssh: remote user name; default: the local user's name"
    )
    key_file: Dir | None = Field(
        None,
        description="ssh: private key file, ~ expanded; default: ssh-agent, then ~/.ssh/id_*",
    )
    known_hosts: Dir | None = Field(
        None,
        description="ssh: known_hosts file the login node's key must be in, ~ expanded; "
        "default: ~/.ssh/known_hosts. An unknown or changed key is refused",
    )
    control_path: Dir | None = Field(
        None,
        description="openssh: the ControlMaster socket to reuse, ~ expanded; default: "
        "~/.ssh/jobsmith-HOST.sock",
    )
    slurm_conf: Dir | None = Field(
        None,
        description="the slurm.conf the Slurm commands read (set as SLURM_CONF for them; "
        "with ssh, a path on the login node); default: the system's. The caller's own "
        "SLURM_CONF is never used: a copy of the site's file with a cli_filter plugin "
        "would rewrite a checked job",
    )
    adjusts: list[Compared] = Field(
        default_factory=list,
        description="what the site's own job_submit or cli_filter plugins change on "
        "purpose: not compared when the first poll checks what Slurm accepted against "
        "what was checked (a job changed otherwise is held, or cancelled if it runs); "
        "gres: the GPUs (count and type), array: its indices and throttle, dependency: "
        "what it waits for",
    )
    command_timeout_s: float = Field(
        30.0,
        gt=0,
        description="seconds a Slurm command may take before the scheduler is treated as "
        "unavailable; generous because slurmctld retries its own RPCs when busy",
    )

    @model_validator(mode="after")
    def _ssh_fields_need_ssh(self) -> SchedulerAccess:
        if self.kind != "local" and not self.host:
            message = f"kind '{self.kind}' needs host: the login node to connect to"
            raise _fault(message, ("host",))
        if self.kind == "openssh" and self.key_file is not None:
            message = "key_file applies to kind 'ssh'; with 'openssh' the master's login chose it"
            raise _fault(message, ("key_file",))
        if self.kind == "ssh" and self.control_path is not None:
            raise _fault("control_path applies only to kind 'openssh'", ("control_path",))
        remote_only = ("host", "user", "key_file", "known_hosts", "control_path")
        ssh_only = [f for f in remote_only if getattr(self, f) is not None]
        if self.kind == "local" and ssh_only:
            verb = "applies" if len(ssh_only) == 1 else "apply"
            message = f"{' and '.join(ssh_only)} {verb} only to a remote kind, not 'local'"
            raise _fault(message, *((f,) for f in ssh_only))
        return self


class Partition(_Section):
    """What jobsmith may ask for in one Slurm partition (None: no limit of jobsmith's own)."""

    max_time: Duration | None = Field(None, description="longest time limit (MaxTime), seconds")
    max_nodes: int | None = Field(None, gt=0, description="most nodes for one job (MaxNodes)")
    max_cpus_per_node: int | None = Field(
        None, gt=0, description="most CPUs on each node (MaxCPUsPerNode)"
    )
    max_mem_per_node: Memory | None = Field(
        None, description="most memory on each node (MaxMemPerNode), MiB"
    )
    max_gpus_per_node: int = Field(0, ge=0, description="most GPUs on each node; 0: no GPUs")
    gpu_type: Name | None = Field(
        None, description="GPU type for --gres=gpu:TYPE:N; None: ask for any GPU"
    )
    default: bool = Field(False, description="used when a request names no partition")
    offered: bool = Field(
        True,
        description="the earliest-start advice may offer it to a job asked elsewhere; false "
        "for a partition a job goes to only when asked (a preemptible or a high-priority one)",
    )

    @model_validator(mode="after")
    def _gpu_type_needs_gpus(self) -> Partition:
        if self.gpu_type is not None and self.max_gpus_per_node == 0:
            raise _fault("gpu_type is set but max_gpus_per_node is 0", ("gpu_type",))
        return self


class Choice(_Section):
    """A set of names jobsmith may use (accounts or QoS), and the one used when none is asked."""

    allowed: list[Name] = Field(
        default_factory=list,
        description="names a request may use; empty: jobsmith never sets one and Slurm's "
        "default for the user applies",
    )
    default: Name | None = Field(None, description="used when a request names none")

    @model_validator(mode="after")
    def _default_is_allowed(self) -> Choice:
        if self.default is not None and self.default not in self.allowed:
            allowed = ", ".join(self.allowed) or "(none)"
            message = f"default {self.default!r} is not one of allowed: {allowed}"
            raise _fault(message, ("default",))
        return self


class Defaults(_Section):
    """Resources of a request that does not say (JobOptions' field names and units)."""

    cpus_per_task: int = Field(1, gt=0, description="CPUs per task (sbatch -c)")
    mem_mb: Memory = Field(2048, description="memory per node, MiB (sbatch --mem)")
    time_limit_s: Duration = Field(3600, description="wall-time limit, seconds (sbatch -t)")


class Paths(_Section):
    """Where jobs keep scratch data, where they may read and write, where templates live."""

    scratch: Dir = Field(description="per-user scratch directory for job working files")
    allowed_roots: list[Dir] = Field(
        min_length=1,
        description="directories (and everything below) that jobs may read and write",
    )
    template_dirs: list[Dir] = Field(
        default_factory=list,
        description="extra job-template directories, searched in order before the built-ins",
    )

    @model_validator(mode="after")
    def _scratch_is_allowed(self) -> Paths:
        if not any(self.scratch.is_relative_to(root) for root in self.allowed_roots):
            message = f"scratch {self.scratch} is not under any of allowed_roots"
            raise _fault(message, ("scratch",))
        return self


RiskyAction = Literal["cancel_foreign", "hold_foreign", "release_foreign"]


class ApprovalThresholds(_Section):
    """Sizes above which a person must approve a submission (None: never on this measure)."""

    core_hours: float | None = Field(
        100.0, ge=0, description="CPUs x time limit of one submission, over all its array tasks"
    )
    gpu_hours: float | None = Field(
        8.0, ge=0, description="GPUs x time limit of one submission, over all its array tasks"
    )
    nodes: int | None = Field(4, ge=0, description="nodes of one job")
    risky_actions: list[RiskyAction] = Field(
        default_factory=list,
        description="actions that always need a person: *_foreign = on a job no session of "
        "this user submitted",
    )


class Budgets(_Section):
    """Spending limits over time: a runaway loop is the real risk of an agent."""

    node_hours_per_day: float | None = Field(
        None, ge=0, description="nodes x time limit submitted in the last 24 h"
    )
    gpu_hours_per_day: float | None = Field(
        None, ge=0, description="GPUs x time limit submitted in the last 24 h"
    )
    submissions_per_hour: int | None = Field(
        60, ge=0, description="sbatch calls in the last hour (an array is one)"
    )
    max_failures_in_a_row: int | None = Field(
        5, ge=1, description="stop submitting after this many failed jobs in a row"
    )
    model_tokens_per_session: int | None = Field(
        None,
        ge=0,
        description="model tokens one session may spend: input + output + cache-creation "
        "tokens of its calls; cache reads are recorded but not counted (the cached prefix, "
        "billed at a tenth of input). Checked before each call, so one call may pass it",
    )
    model_tokens_per_day: int | None = Field(
        None,
        ge=0,
        description="model tokens spent in the last 24 h over all sessions, counted as "
        "model_tokens_per_session counts them",
    )
    pipeline_at_limit: Literal["hold", "cancel"] = Field(
        "hold",
        description="what happens to a running pipeline (Nextflow, Snakemake) whose tasks "
        "reach a budget above: hold its pending tasks for a person (`jobsmith release`), "
        "or cancel its head job, so the engine submits no more (`pipeline resume` later)",
    )


class Canary(_Section):
    """Arrays above a size run a few tasks first; the rest waits for them (Slurm's own
    afterok), and is cancelled if they fail (agent/runtime/workflows/planrun.py)."""

    above_tasks: int = Field(ge=2, description="arrays of more tasks than this get a canary")
    tasks: int = Field(2, ge=1, le=10, description="how many tasks the canary runs")

    @model_validator(mode="after")
    def _fewer_than_the_array(self) -> Canary:
        if self.tasks >= self.above_tasks:
            message = "canary.tasks must be below canary.above_tasks"
            raise _fault(message, ("tasks",), ("above_tasks",))
        return self


class Advice(_Section):
    """What jobsmith offers at submission (agent/runtime/submission/advising/advice.py): a request
    right-sized
    from the user's own history, and the partition where Slurm would start it earliest.
    'propose' shows the offer beside the job; 'apply' takes it (and says so); 'off' asks
    Slurm nothing more."""

    right_size: Literal["off", "propose", "apply"] = Field(
        "propose",
        description="a smaller memory, time or CPU request where similar runs used far less",
    )
    earliest_start: Literal["off", "propose", "apply"] = Field(
        "propose",
        description="ask sbatch --test-only in each partition the job fits, offer the earliest",
    )
    history_jobs: int = Field(
        20, ge=1, le=200, description="the template's most recent jobs to learn from"
    )
    min_runs: int = Field(
        3, ge=1, description="completed runs (array tasks count one each) needed to propose"
    )


class Blocklist(_Section):
    """A node on which the user's tasks failed for the node's own reasons is left out of
    the user's next jobs for a while (agent/runtime/blocklist/): `--exclude` on reruns and
    new submissions, `ExcNodeList` on jobs Slurm requeued after the node failed. A failure
    is the node's when Slurm says so (NODE_FAIL, BOOT_FAIL), or when tasks of one job fail
    on that node with the same non-zero exit while tasks of the same job complete on
    others. As Flamenco's worker blocklist, per user, never for the whole site."""

    failures: int = Field(
        2,
        ge=1,
        le=1000,
        description="the user's tasks that failed for the node's reasons on one node, "
        "within the window, that put it on the blocklist (2: with 2 CPUs a node, two "
        "tasks failing together is already one node's doing)",
    )
    window: Duration = Field(
        3600, description="how far back failures count (a bare number is minutes)"
    )
    expires_after: Duration = Field(
        86400,
        description="how long a node stays on the blocklist after its last counted failure "
        "(`jobsmith nodes clear` takes it off sooner)",
    )


class Policy(_Section):
    """Limits jobsmith holds the agent to."""

    max_concurrent_jobs: int | None = Field(
        1000, gt=0, description="most of the user's jobs queued or running at once"
    )
    max_requeues: int | None = Field(
        10,
        ge=0,
        description="most times a checkpointable job may requeue itself (--max-requeues); "
        "null: no limit",
    )
    canary: Canary | None = Field(
        None, description="run a few tasks of a large array first (unset: never)"
    )
    approval: ApprovalThresholds = Field(
        default_factory=ApprovalThresholds,
        description="when a person must approve before submitting",
    )
    budgets: Budgets = Field(default_factory=Budgets, description="limits over time")
    advice: Advice = Field(
        default_factory=Advice, description="offers at submission: right-size, earliest start"
    )
    blocklist: Blocklist | None = Field(
        default_factory=Blocklist,
        description="leave nodes where the user's work failed for the node's reasons out of "
        "the user's next jobs (null: off, failures count against no node)",
    )
    secret_env: list[EnvPattern] = Field(
        default_factory=list,
        description="names (shell patterns) never passed to jobs, even when "
        "jobs.environment.allow names them; kept from the old denylist: jobs now get only "
        "what the allowlist passes (adapters/environment_rule.py)",
    )


class JobEnvironment(_Section):
    """What of the submitting environment reaches a job, beyond jobsmith's allowlist
    (adapters/environment_rule.py: PATH, HOME, locale, modules, conda, proxies)."""

    allow: list[EnvEntry] = Field(
        default_factory=list,
        description="more variable names or shell patterns (MYAPP_*) passed to jobs; a "
        "pattern never passes a credential-looking name (name it exactly)",
    )


class Checkpointing(_Section):
    """What a checkpointable job (`--checkpoint CMD`) gets when it does not say: how long
    before its time limit it is warned, and how many times it may requeue itself
    (agent/runtime/submission/request/checkpoint.py)."""

    signal_lead_s: int = Field(
        60,
        gt=0,
        le=65535,
        description="seconds before the time limit that Slurm sends USR1 (--signal-lead; "
        "Slurm may send it up to a minute earlier)",
    )
    max_requeues: int = Field(
        3, ge=0, description="times the job requeues itself at most (--max-requeues)"
    )


class Jobs(_Section):
    """What jobs are given when they start."""

    environment: JobEnvironment = Field(
        default_factory=JobEnvironment, description="the environment a job starts with"
    )
    checkpoint: Checkpointing = Field(
        default_factory=Checkpointing,
        description="defaults of a checkpointable job (--checkpoint)",
    )
    sbatch_options: list[SbatchOptionName] = Field(
        default_factory=list,
        description="more of sbatch's options (long names, without --: exclusive, "
        "reservation) a user's own script may pass to sbatch as written (jobsmith sbatch), "
        "beyond those jobsmith models or passes itself (docs/batch-scripts.md); the policy "
        "does not judge what they ask for",
    )


class Notify(_Section):
    """How the user hears about jobs that end while no one is looking."""

    webhook_url: str | None = Field(
        None,
        pattern=r"^https?://",
        description="POSTed a JSON object when a workload (or, with webhook_for: job, a "
        "job) ends (docs/following-jobs.md)",
    )
    webhook_for: Literal["workload", "job"] = Field(
        "workload",
        description="workload: one message when every job of a session has ended, re-runs "
        "included (workload_ended, with its figures); job: one per job (job_ended)",
    )
    mail_user: str | None = Field(
        None, description="address for Slurm's own mail (--mail-user); needs site mail"
    )
    mail_type: str = Field(
        "END,FAIL", pattern=r"^[A-Z_,0-9]+$", description="Slurm's --mail-type events"
    )


class Staging(_Section):
    """Files copied between this machine and a cluster reached over SSH (docs/ssh.md)."""

    fetch_outputs_to: Dir | None = Field(
        None,
        description="a directory on this machine: when every job of a session has ended, "
        "the watcher (or the status or wait that saw it end) copies the outputs its jobs "
        "declared into SESSION/ below it, once (as `jobsmith get SESSION`: files, and the "
        "files below a declared directory); a copy cut off is tried again by the next "
        "polls, 3 attempts in all; null: only when asked (get, wait --get)",
    )


#: the model asked unless the configuration names another
DEFAULT_MODEL = "claude-sonnet-5-5"


class ModelSettings(_Section):
    """Which model to ask and how patiently; never the key (a site file must not hold it)."""

    model: str = Field(DEFAULT_MODEL, min_length=1, description="the model's name")
    base_url: str | None = Field(
        None,
        description="a Messages-API endpoint (a self-hosted one, say); default: the "
        "environment's ANTHROPIC_BASE_URL, else Anthropic's",
    )
    max_tokens: int = Field(1024, ge=1, le=64_000, description="cap on the answer's tokens")
    timeout_s: float = Field(60.0, gt=0, le=600, description="one HTTP attempt, seconds")
    max_retries: int = Field(2, ge=0, le=10, description="retries on 429, 529, 5xx and drops")
    max_retry_wait_s: float = Field(
        60.0,
        gt=0,
        le=600,
        description="a retry-after longer than this ends the call instead of waiting",
    )
    chat_context_tokens: int = Field(
        60_000,
        ge=2_000,
        le=1_000_000,
        description="a chat whose last call sent more input tokens than this starts its "
        "next turn from the session's log, compacted, instead of the whole conversation",
    )
    tainted_actions: Literal["person", "policy"] = Field(
        "person",
        description="once a conversation (ask, chat, a wake) has read text that jobs, files "
        "or logs wrote, what it submits: person (default) waits for your approval whatever "
        "the thresholds; policy lets the policy alone judge it (agent/brains/taint.py)",
    )


class SiteConfig(_Section):
    """Everything jobsmith knows about one site: the root of site.yaml."""

    cluster: Name = Field(description="Slurm cluster name (ClusterName in slurm.conf)")
    scheduler: SchedulerAccess = Field(
        default_factory=SchedulerAccess, description="how to reach the scheduler"
    )
    partitions: dict[Name, Partition] = Field(
        min_length=1, description="partitions jobsmith may use, by name"
    )
    accounts: Choice = Field(default_factory=Choice, description="accounts to charge (-A)")
    qos: Choice = Field(default_factory=Choice, description="quality of service (--qos)")
    defaults: Defaults = Field(
        default_factory=Defaults, description="resources of a request that does not say"
    )
    env_setup: list[SetupLine] = Field(
        default_factory=list,
        description="shell lines emitted before every job body, e.g. 'module load gcc/12'",
    )
    paths: Paths = Field(description="scratch, allowed roots and template search path")
    policy: Policy = Field(default_factory=Policy, description="guardrails and approvals")
    jobs: Jobs = Field(default_factory=Jobs, description="what jobs are given when they start")
    notify: Notify = Field(default_factory=Notify, description="webhook and Slurm mail")
    staging: Staging = Field(
        default_factory=Staging, description="results copied back from a cluster over SSH"
    )
    brain: str = Field(
        "rules",
        min_length=1,
        max_length=200,
        description="who decides about failed jobs: 'rules', 'claude' (a model, through "
        "the `model` settings), or a factory as module:attribute",
    )
    model: ModelSettings = Field(
        default_factory=ModelSettings,
        description="the model the `claude` brain asks (never its key: that comes from the "
        "environment or the user's key file)",
    )

    @field_validator("partitions")
    @classmethod
    def _one_default_partition(cls, partitions: dict[str, Partition]) -> dict[str, Partition]:
        marked = tuple(name for name, part in partitions.items() if part.default)
        if len(marked) > 1:
            message = f"only one partition may be the default, not {' and '.join(marked)}"
            raise _fault(message, *((name, "default") for name in marked))
        return partitions

    @model_validator(mode="after")
    def _defaults_fit_default_partition(self) -> SiteConfig:
        found = self.default_partition()
        if found is None:
            return self
        name, part = found
        d = self.defaults
        checks: list[tuple[str, int, int | None, str, Callable[[int], str]]] = [
            ("time_limit_s", d.time_limit_s, part.max_time, "max_time", format_duration),
            ("mem_mb", d.mem_mb, part.max_mem_per_node, "max_mem_per_node", format_memory),
            ("cpus_per_task", d.cpus_per_task, part.max_cpus_per_node, "max_cpus_per_node", str),
        ]
        for field, value, limit, limit_name, show in checks:
            if limit is not None and value > limit:
                message = (
                    f"{show(value)} is above {show(limit)}, the {limit_name} of the "
                    f"default partition {name!r}"
                )
                raise _fault(message, ("defaults", field))
        return self

    def default_partition(self) -> tuple[str, Partition] | None:
        """The partition marked default, as (name, limits); None if none is marked."""
        return next(((n, p) for n, p in self.partitions.items() if p.default), None)

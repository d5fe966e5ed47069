"""Typed payloads of the events the read model folds: one model per kind, read in one place.

`Event.data` is stored as JSON; what a kind's payload holds is said here, once, instead
of by string keys wherever a log is read. `payload(event)` gives the typed payload of the
kinds below (None for the others, and for an event whose payload does not fit its kind:
a damaged or hand-edited log is skipped where it is folded, never a crash).

Reading is lenient on purpose: extra keys are ignored (`extra="ignore"`), because logs
outlive releases. A log written by an older jobsmith carries what it carried then (a
rule decision as `model_output` with a job_id), one written by a newer one may carry
more; both still fold (tests/fixtures/sessions/ keeps a log of the current release).
"""

from __future__ import annotations

from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    ValidationError,
    ValidatorFunctionWrapHandler,
    field_validator,
)

from jobsmith.adapters.states import JobState
from jobsmith.adapters.workflow import (
    EngineMessage,
    EngineSite,
    EngineTask,
    LaunchRequest,
    RecordFile,
)
from jobsmith.agent.runtime.session.events import Event, EventKind


class _Payload(BaseModel):
    # built when an event of its kind is first read (a submit reads two kinds; issue 26)
    model_config = ConfigDict(frozen=True, extra="ignore", defer_build=True)


class JobStatePayload(_Payload):
    """`job_state`: a job of the session changed state (agent/runtime/session/jobstate.py)."""

    job_id: str = Field(description="Slurm's job id")
    state: str = Field(description="the new state (a JobState value)")
    task_counts: dict[str, int] = Field(default_factory=dict, description="array tasks")
    reason: str | None = Field(None, description="why it waits, from the controller")
    exit_code: int | None = Field(None, description="the batch script's exit status")
    signal: int | None = Field(None, description="the signal that ended it")

    @property
    def job_state(self) -> JobState | None:
        """The state as the Enum; None for a spelling this release does not know."""
        return JobState.known(self.state)


class UsagePayload(_Payload):
    """A decision's `usage`: what its model call cost (agent/brains/protocol.TokenUsage)."""

    model: str = Field("", description="the model that answered")
    input_tokens: int = Field(0, ge=0, description="uncached input tokens")
    output_tokens: int = Field(0, ge=0, description="tokens the model wrote")
    cache_read_input_tokens: int = Field(0, ge=0, description="input read from the cache")
    cache_creation_input_tokens: int = Field(0, ge=0, description="input written to the cache")

    @property
    def charged(self) -> int:
        """The tokens the budgets count: input, output and cache writes. Cache reads are
        left out: they are the stable prefix re-read at a tenth of the input price, and
        counting them would charge a well-cached session as if it had no cache."""
        return self.input_tokens + self.output_tokens + self.cache_creation_input_tokens


def _usage_or_nothing(
    cls: type[_Payload], value: object, handler: ValidatorFunctionWrapHandler
) -> UsagePayload | None:
    """A usage, or None where it is damaged: a damaged usage costs nothing, but its event
    still counts (as a damaged cost does in ResultPayload): a decided job must not look
    undecided and be decided again, a model turn is still read."""
    try:
        used: UsagePayload | None = handler(value)
    except ValidationError:
        return None
    return used


class DecidedPayload(_Payload):
    """`decision` (and, in logs from before decisions were typed, a `model_output` that
    names a job): someone decided about a failed job."""

    job_id: str = Field(description="the failed job decided about")
    # absent from the rule brain's and people's decisions, and from logs older than it
    usage: UsagePayload | None = Field(None, description="what a model call cost, if one ran")

    damaged_usage_spent_nothing = field_validator("usage", mode="wrap")(_usage_or_nothing)


class ModelOutputPayload(_Payload):
    """`model_output` of a conversation turn (agent/brains/conversation.py): what the
    model said and called, and what the call cost (folded into the token totals)."""

    usage: UsagePayload | None = Field(None, description="what the model call cost")

    damaged_usage_spent_nothing = field_validator("usage", mode="wrap")(_usage_or_nothing)


class ResultPayload(_Payload):
    """`result`: a step's outcome; a submission's carries `submitted` and its cost."""

    outcome: str | None = Field(None, description="done, refused, failed, …")
    submitted: bool = Field(False, description="true if Slurm accepted a job")
    job_id: str | None = Field(None, description="the job a submission created")
    cost: JsonValue = Field(None, description="what the submission was charged (a Cost)")
    error: str | None = Field(None, description="why the step failed, if it did")

    def spent(self, key: str) -> float:
        """The cost's node_hours or gpu_hours; 0 where the cost is missing or damaged (a
        damaged cost spends nothing, but the submission still counts)."""
        value = self.cost.get(key) if isinstance(self.cost, dict) else None
        is_number = isinstance(value, int | float) and not isinstance(value, bool)
        return float(value) if is_number else 0.0  # type: ignore[arg-type]


class IntentPayload(_Payload):
    """`intent`: a step about to run; a submission's names the job and holds its script."""

    step: dict[str, JsonValue] | None = Field(None, description="the step, as the brain gave it")
    job_name: str | None = Field(None, description="a submission's job name (with its tag)")
    script: str | None = Field(None, description="a submission's exact script")
    script_sha256: str | None = Field(None, description="its hash, which approvals bind to")
    rerun_of: str | None = Field(None, description="the job a re-run re-runs")
    host: str | None = Field(None, description="the host whose process runs the step")
    submit_host: str | None = Field(
        None, description="where its sbatch runs: host, or ssh:user@login:port (a submission's)"
    )


class OpenedPayload(_Payload):
    """`session_opened`: the session's metadata; a conversation's names its origin."""

    title: str | None = Field(None, description="what the session is about")
    origin: str | None = Field(None, description="ask, chat, or absent for a command's")


class WakePayload(_Payload):
    """`brain_woken` and `brain_waiting` (agent/brains/waking.py): the ended jobs a
    conversation's brain was (or is to be) told about."""

    job_ids: list[str] = Field(description="the jobs that ended")


class WakeFailedPayload(_Payload):
    """`brain_failed` (agent/brains/waking.py): a wake's model turn failed. Its jobs are
    unwoken again, and a later waker tries after a backoff, a bounded number of times;
    `retry_at` None says that was the last try (the log says so, not a side file)."""

    job_ids: list[str] = Field(description="the jobs the wake was for")
    reason: str = Field("", description="why it failed, one line")
    attempt: int = Field(1, ge=1, description="which try this was (1: the first)")
    retry_at: AwareDatetime | None = Field(
        None, description="when a waker may try again (None: given up)"
    )


class PlanJobPayload(_Payload):
    """`plan_job` (agent/runtime/workflows/planrun.py): a plan step's job was re-run (or submitted
    again after Slurm cancelled it for a dependency that failed), so the step's job is now
    the new one, and the jobs waiting for it were pointed at it."""

    step: str = Field(description="the plan step")
    job_id: str = Field(description="the step's job now (the re-run)")
    replaces: str = Field(description="the job it replaces")
    redirected: list[str] = Field(
        default_factory=list, description="jobs now waiting for job_id instead"
    )


class PipelinePayload(_Payload):
    """`pipeline` (agent/runtime/workflows/pipelines.py): a workflow engine's head job launched, or
    launched again to resume (attempt > 1); its submission is the step `step_id`."""

    request: LaunchRequest = Field(description="what the person asked to run")
    site: EngineSite = Field(description="the site's limits the engine was configured with")
    attempt: int = Field(ge=1, description="1, then one more per resume")
    step_id: str = Field(description="the head job's submit step")


class PipelineProgressPayload(_Payload):
    """`pipeline_progress` (agent/runtime/workflows/pipelines.py): what one of the engine's records
    said since the last read, and how far it has been read."""

    attempt: int = Field(ge=1, description="the launch attempt whose record this is")
    record: RecordFile = Field(description="the record read")
    offset: int = Field(ge=0, description="bytes of the record read so far, in all")
    context: tuple[str, ...] = Field((), description="what the engine keeps between reads")
    tasks: tuple[EngineTask, ...] = Field((), description="tasks whose state the lines gave")
    messages: tuple[EngineMessage, ...] = Field((), description="what the lines said")
    final: bool = Field(False, description="read after the head job ended: the last read")


class PipelineBudgetPayload(_Payload):
    """`pipeline_budget` (agent/runtime/workflows/pipelinerun.py): a running pipeline's spending
    came near a budget (`near`: said once) or reached it (`reached`: the policy's action,
    `pipeline_at_limit`, taken on the jobs named)."""

    attempt: int = Field(ge=1, description="the launch attempt that was running")
    budget: str = Field(description="the budget's name in the site config")
    level: str = Field(description="near or reached")
    used: float = Field(description="what was spent")
    limit: float = Field(description="the budget")
    action: str | None = Field(None, description="hold or cancel, at the limit")
    job_ids: list[str] = Field(default_factory=list, description="jobs held or cancelled")


class AcceptedPayload(_Payload):
    """`job_accepted`: the first poll that read a job compared what Slurm recorded with
    what was checked (agent/runtime/submission/accepted.py)."""

    job_id: str = Field(description="Slurm's job id")
    altered: list[str] = Field(
        default_factory=list, description="what Slurm changed, in words (none: as checked)"
    )
    action: str | None = Field(None, description="what jobsmith did about it: hold, cancel")


class UnblockedPayload(_Payload):
    """`unblocked`: a person lifted a failure-streak stop."""

    by: str | None = Field(None, description="who lifted it")


Payload = (
    JobStatePayload
    | AcceptedPayload
    | DecidedPayload
    | ModelOutputPayload
    | ResultPayload
    | IntentPayload
    | UnblockedPayload
    | OpenedPayload
    | WakePayload
    | WakeFailedPayload
    | PlanJobPayload
    | PipelinePayload
    | PipelineProgressPayload
    | PipelineBudgetPayload
)

_MODELS: dict[EventKind, type[Payload]] = {
    EventKind.JOB_STATE: JobStatePayload,
    EventKind.JOB_ACCEPTED: AcceptedPayload,
    EventKind.DECISION: DecidedPayload,
    EventKind.RESULT: ResultPayload,
    EventKind.INTENT: IntentPayload,
    EventKind.UNBLOCKED: UnblockedPayload,
    EventKind.SESSION_OPENED: OpenedPayload,
    EventKind.BRAIN_WOKEN: WakePayload,
    EventKind.BRAIN_WAITING: WakePayload,
    EventKind.BRAIN_FAILED: WakeFailedPayload,
    EventKind.PLAN_JOB: PlanJobPayload,
    EventKind.PIPELINE: PipelinePayload,
    EventKind.PIPELINE_PROGRESS: PipelineProgressPayload,
    EventKind.PIPELINE_BUDGET: PipelineBudgetPayload,
}


def result_payload(event: Event) -> ResultPayload:
    """A result event's payload (an empty one if it does not fit: nothing submitted)."""
    data = payload(event)
    return data if isinstance(data, ResultPayload) else ResultPayload()


def intent_payload(event: Event) -> IntentPayload:
    """An intent event's payload (an empty one if it does not fit)."""
    data = payload(event)
    return data if isinstance(data, IntentPayload) else IntentPayload()


def payload(event: Event) -> Payload | None:
    """event's typed payload, for the kinds above; None for other kinds or a misfit."""
    model = _MODELS.get(event.kind)
    if model is None and event.kind is EventKind.MODEL_OUTPUT:
        # before decisions were typed, the rule brain's were model_output with a job_id;
        # one with a usage is a conversation's turn (agent/brains/conversation.py); any
        # other has nothing to fold
        if event.data.get("job_id") is not None:
            model = DecidedPayload
        elif "usage" in event.data:
            model = ModelOutputPayload
    if model is None:
        return None
    try:
        return model.model_validate(event.data)
    except ValidationError:
        return None

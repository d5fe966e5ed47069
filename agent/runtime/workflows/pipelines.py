"""Pipelines: a workflow engine (Nextflow, Snakemake) launched as a Slurm head job.

A pipeline is a session whose steps are ordinary submissions of the `pipeline_head`
template, so policy, approvals, the ledger, crash recovery (`sessions resume`), status,
logs and diagnosis treat the head job like any other job. What is particular is said in
two events (payloads.PipelinePayload, PipelineProgressPayload):

- `pipeline`, appended before the head job's submit step, records the request, the
  site's limits the engine was configured with, and the attempt (1, then one more per
  `pipeline resume`, which launches the engine again with its own resume flags in the same
  launch directory);
- `pipeline_progress`, appended by whoever follows the run (the watcher, `pipeline
  status`), records what the engine's own records said since the last read and the byte
  offset reached, so each read starts where the last stopped and no file is read twice.

The site's policy reaches the engine as its configuration (adapters/workflow.EngineSite):
the engine's queue size is the concurrency limit less the head job itself, so a pipeline
that asks for more is launched with the limit (and says so), never refused or let past it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from jobsmith.adapters.states import JobState
from jobsmith.adapters.transport import CommandResult
from jobsmith.adapters.workflow import (
    EngineKind,
    EngineMessage,
    EngineSite,
    EngineTask,
    LaunchRequest,
    PartitionLimits,
    RecordFile,
    TaskStatus,
    WorkflowEngine,
)
from jobsmith.agent.runtime.session.events import Event, EventKind
from jobsmith.agent.runtime.session.payloads import (
    JobStatePayload,
    PipelineBudgetPayload,
    PipelinePayload,
    PipelineProgressPayload,
    payload,
    result_payload,
)
from jobsmith.agent.runtime.submission.request.jobs import (
    JobRequest,
    default_partition,
    inside_roots,
)
from jobsmith.errors import InputError, NotFound, PolicyError, SchedulerError
from jobsmith.files import MAX_INPUT_BYTES, Usable, name_problem, usable_problem
from jobsmith.job_templates.paths import PathLookup, PathPolicy
from jobsmith.site_config import SiteConfig

#: the template every head job is a submission of
HEAD_TEMPLATE = "pipeline_head"
#: the engine's queue where the site sets no concurrency limit (Nextflow's own default)
DEFAULT_MAX_TASKS = 100
#: re-runs of a task killed for memory or time, as the rule brain allows a job
MAX_RETRIES = 2
#: the most of a record read in one go; the rest waits for the next read
MAX_READ_BYTES = 1 << 20


@dataclass(frozen=True)
class Sizing:
    """The engine's queue size and why it is what it is."""

    max_tasks: int
    note: str | None


def size_queue(site: SiteConfig, asked: int | None) -> Sizing:
    """The most tasks the engine may have queued or running: what was asked (or the
    default), capped by the site's concurrency limit less one for the head job."""
    limit = site.policy.max_concurrent_jobs
    wanted = asked if asked is not None else DEFAULT_MAX_TASKS
    if limit is None:
        return Sizing(wanted, None)
    if limit < 2:
        raise PolicyError(
            f"policy.max_concurrent_jobs is {limit}: a pipeline needs 2 at least (its head "
            "job and one task at a time)"
        )
    cap = limit - 1
    if wanted <= cap:
        return Sizing(wanted, None)
    said = f"--max-tasks {asked}" if asked is not None else f"the default {wanted}"
    note = (
        f"the engine may run at most {cap} tasks at once, not {wanted} ({said}): the site's "
        f"policy.max_concurrent_jobs is {limit}, and the head job is one of them"
    )
    return Sizing(cap, note)


def engine_site(
    site: SiteConfig, *, partition: str | None, max_tasks: int, head_partition: str | None
) -> EngineSite:
    """The site's config and policy resolved into what an engine's configuration takes."""
    chosen = partition or default_partition(site)
    if chosen is None:
        known = ", ".join(site.partitions) or "none in the site config"
        raise InputError(f"name the partition for the pipeline's tasks (--partition): {known}")
    for name in (chosen, head_partition):
        if name is not None and site.partitions and name not in site.partitions:
            known = ", ".join(site.partitions)
            raise InputError(f"partition {name!r} is not in the site config; valid: {known}")
    return EngineSite(
        partition=chosen,
        head_partition=head_partition or chosen,
        account=site.accounts.default,
        qos=site.qos.default,
        partitions=tuple(
            PartitionLimits(
                name=name,
                max_cpus=p.max_cpus_per_node,
                max_mem_mb=p.max_mem_per_node,
                max_time_s=p.max_time,
            )
            for name, p in site.partitions.items()
        ),
        max_concurrent_tasks=max_tasks,
        submissions_per_hour=site.policy.budgets.submissions_per_hour,
        default_cpus=site.defaults.cpus_per_task,
        default_mem_mb=site.defaults.mem_mb,
        default_time_s=site.defaults.time_limit_s,
        max_retries=MAX_RETRIES,
    )


def input_checks(request: LaunchRequest) -> list[tuple[str, Usable, str]]:
    """What each path the request names must be where the head job runs, with the words
    that name it to a person: (what, must be, path). The launch and work directories are
    written (or created) by the head job; the params file, the Snakefile and a Nextflow
    pipeline given as a path are read by the engine."""
    checks = [("--launch-dir", Usable.DIR, request.launch_dir)]
    if request.work_dir is not None:
        checks.append(("--work-dir", Usable.DIR, request.work_dir))
    if request.engine is EngineKind.SNAKEMAKE:
        checks.append(("the Snakefile", Usable.FILE, request.pipeline))
    else:  # a path to a main.nf or a pipeline directory, else a name Nextflow fetches
        checks.append(("the pipeline", Usable.IF_THERE, request.pipeline))
    if request.params_file is not None:
        checks.append(("--params-file", Usable.FILE, request.params_file))
    return checks


#: what to do, by what the path must be
_FIX = {
    Usable.FILE: f"name a readable, non-empty regular file of at most {MAX_INPUT_BYTES} bytes",
    Usable.DIR: "name a directory you can write, or one that can be created in one",
    Usable.IF_THERE: "name a pipeline directory you can read, a main.nf, or a pipeline's name",
}


def _unusable(what: str, kind: Usable, path: str, why: str) -> InputError:
    return InputError(f"pipeline: {what} {path!r} {why}: {_FIX[kind]}")


def check_paths(
    request: LaunchRequest,
    site: SiteConfig,
    cwd: Path | None = None,
    files: PathLookup | None = None,
) -> None:
    """Every path the request names is a name the file system takes (a 300-character
    one was a traceback), and every local path lies inside the site's allowed roots (the
    launch directory is checked by the template, as every output path is), resolved
    where the head job runs (files: this host's by default; over SSH the login node's,
    all asked at once). What each path is (a file to read, a directory to write) is asked
    there too: input_checks, through the transport."""
    for what, kind, path in input_checks(request):
        why = name_problem(path)
        if why is not None:
            raise _unusable(what, kind, path, why)
    named = [Path(p) for p in (request.work_dir, request.params_file, request.pipeline) if p]
    policy = PathPolicy(list(site.paths.allowed_roots), cwd or Path.cwd(), files)
    policy.expect(named)
    paths = [request.work_dir, request.params_file]
    pipeline_there = policy.fact(Path(request.pipeline)).found != "missing"
    if request.engine is EngineKind.SNAKEMAKE or pipeline_there:
        paths.append(request.pipeline)  # a Snakefile, or a Nextflow pipeline on disk
    for path in (p for p in paths if p is not None):
        inside_roots(Path(path), site, "pipeline path", policy)


def inputs_refused(
    checks: Sequence[tuple[str, Usable, str]], result: CommandResult
) -> InputError | None:
    """None when usable_check_argv found every path of checks usable; else the error
    naming the first that is not, what is wrong and what to do."""
    try:
        problem = usable_problem(result.returncode, result.stdout)
    except ValueError as exc:
        said = result.stderr.strip().replace("\n", " ")[:200] or str(exc)
        raise SchedulerError(
            f"pipeline: cannot check its paths on the submitting host: {said}"
        ) from None
    if problem is None:
        return None
    index, why = problem
    what, kind, path = checks[index]
    return _unusable(what, kind, path, why)


class EngineNotFound(InputError):
    """The engine is not on the PATH its head job will have: the job would fail with 127."""


#: `command -v` answers at once; anything longer is the transport's (an SSH login) problem
ENGINE_CHECK_TIMEOUT_S = 60


def engine_check_argv(engine: EngineKind, env_setup: Sequence[str]) -> list[str]:
    """The command that prints where the head job will find engine (else the PATH it
    searched, and status 127): the site's env_setup lines first, as the job's script runs
    them before its body (`module load`, a PATH export), their output dropped, then
    `command -v`, in bash as the script is. Run through the transport, so with the
    environment a submission gets (adapters/environment_rule.py passes PATH), on the host
    that submits: this one, or the login node over SSH. No probe job."""
    setup = "\n".join(env_setup)
    look = 'command -v "$1" || { printf \'%s\\n\' "$PATH"; exit 127; }\n'
    script = (f"{{\n{setup}\n}} >/dev/null 2>&1 </dev/null\n" if env_setup else "") + look
    return ["bash", "-c", script, "bash", engine.value]


def engine_missing(engine: EngineKind, result: CommandResult) -> EngineNotFound | None:
    """None when engine_check_argv found the engine; else the error naming the engine, the
    PATH searched and how to fix it."""
    lines = result.stdout.splitlines()
    if result.returncode == 0 and lines and lines[0].strip():
        return None
    searched = lines[-1].strip() if result.returncode == 127 and lines else "unknown"
    return EngineNotFound(
        f"pipeline: {engine.value} is not on the PATH its head job will have on the "
        f"submitting host (PATH={searched}, after the site's env_setup): install it there, "
        f"or load its module in the site file's env_setup (env_setup: ['module load "
        f"{engine.value}'])"
    )


def head_job(
    engine: WorkflowEngine,
    site: EngineSite,
    request: LaunchRequest,
    attempt: int,
    resources: JobRequest,
) -> JobRequest:
    """The head job's submission: the `pipeline_head` template with the engine's files
    and command; resources (partition aside: the site's head partition) from `resources`."""
    try:
        head = engine.launch(site, request, attempt=attempt)
    except ValueError as err:  # an engine refuses what it cannot write safely
        raise InputError(f"{engine.kind}: {err}") from None
    name = engine.kind.value
    prepare_ok = not head.prepare or head.prepare[0] == name
    if len(head.files) != 1 or not head.argv or head.argv[0] != name or not prepare_ok:
        # the template writes one configuration and runs the engine by its name
        raise InputError(f"{engine.kind}: the engine's head job is not one config and its command")
    ((config_file, config_text),) = head.files.items()
    params: dict[str, object] = {
        "engine": engine.kind.value,
        "launch_dir": request.launch_dir,
        "config_file": config_file,
        "config_text": config_text,
        "engine_args": list(head.argv[1:]),
        "environment": [f"{k}={v}" for k, v in sorted(head.environment.items())],
        "prepare_args": list(head.prepare[1:]),
    }
    if head.console_log is not None:
        params["console_log"] = head.console_log
    return resources.model_copy(
        update={"template": HEAD_TEMPLATE, "params": params, "partition": site.head_partition}
    )


#: a budget this far spent is "near": said once, before the policy's action at the limit
NEAR_BUDGET = 0.8


def budget_level(used: float, limit: float) -> str | None:
    """`reached`, `near` or None, for a budget's use."""
    if used >= limit:
        return "reached"
    if used >= NEAR_BUDGET * limit:
        return "near"
    return None


# --- following a run ---------------------------------------------------------------------


_UNFINISHED = (TaskStatus.SUBMITTED, TaskStatus.RUNNING)


@dataclass
class Attempt:
    """One launch of the engine in a pipeline session."""

    number: int
    step_id: str
    job_id: str | None = None
    #: the head job's state as the session last recorded it (a job_state event)
    state: JobState | None = None

    @property
    def ended(self) -> bool:
        """The head job ended (as last recorded)."""
        return self.state is not None and self.state.is_terminal


@dataclass
class PipelineRun:
    """A pipeline session folded: its request, attempts, how far each record was read,
    and the latest word on every task (by the engine's key)."""

    session_id: str
    request: LaunchRequest
    site: EngineSite
    attempts: list[Attempt] = field(default_factory=list)
    offsets: dict[str, int] = field(default_factory=dict)
    contexts: dict[str, tuple[str, ...]] = field(default_factory=dict)
    finished: set[int] = field(default_factory=set)  # attempts whose final read is done
    tasks: dict[str, EngineTask] = field(default_factory=dict)
    #: every Slurm job the engine submitted, by its id: earlier attempts of a task too
    jobs: dict[str, EngineTask] = field(default_factory=dict)
    messages: list[EngineMessage] = field(default_factory=list)
    #: (attempt, budget, level) already said, so a warning is given once
    budget_said: set[tuple[int, str, str]] = field(default_factory=set)

    @property
    def current(self) -> Attempt:
        """The newest attempt."""
        return self.attempts[-1]

    def counts(self) -> dict[str, int]:
        """Tasks per status (the latest attempt of each task)."""
        out: dict[str, int] = {}
        for task in self.tasks.values():
            out[task.status.value] = out.get(task.status.value, 0) + 1
        return out

    def failed(self) -> list[EngineTask]:
        """Tasks whose latest word is a failure."""
        return [t for t in self.tasks.values() if t.status is TaskStatus.FAILED]

    def unfinished(self) -> list[EngineTask]:
        """Tasks whose latest word is that they were submitted or run (not how they ended)."""
        return [t for t in self.tasks.values() if t.status in _UNFINISHED]


def record_key(attempt: int, record: RecordFile) -> str:
    """The key of one attempt's record in a run's offsets."""
    return f"{attempt}:{record.path}"


def pipeline_of(events: Sequence[Event]) -> PipelineRun:
    """The pipeline of a session; NotFound if it launched none."""
    run: PipelineRun | None = None
    for event in events:
        data = payload(event)
        if isinstance(data, PipelinePayload):
            if run is None:
                run = PipelineRun(event.session_id, data.request, data.site)
            run.attempts.append(Attempt(data.attempt, data.step_id))
        elif run is not None and isinstance(data, PipelineProgressPayload):
            fold_progress(run, data)
        elif run is not None and isinstance(data, PipelineBudgetPayload):
            run.budget_said.add((data.attempt, data.budget, data.level))
        elif run is not None and isinstance(data, JobStatePayload):
            for attempt in run.attempts:
                if attempt.job_id == data.job_id:
                    attempt.state = data.job_state
        elif run is not None and event.kind is EventKind.RESULT:
            result = result_payload(event)
            for attempt in run.attempts:
                if attempt.step_id == event.step_id and result.job_id:
                    attempt.job_id = result.job_id
    if run is None:
        session = events[0].session_id if events else "?"
        raise NotFound(f"session {session} launched no pipeline (`jobsmith pipeline run`)")
    return run


def fold_progress(run: PipelineRun, data: PipelineProgressPayload) -> None:
    """One pipeline_progress payload folded into run (as pipeline_of folds it)."""
    key = record_key(data.attempt, data.record)
    run.offsets[key] = data.offset
    run.contexts[key] = data.context
    if data.final:
        run.finished.add(data.attempt)
    for task in data.tasks:
        run.tasks[f"{task.process}\0{task.name}"] = task
        if task.native_id:
            run.jobs[task.native_id] = task
    run.messages.extend(data.messages)
    del run.messages[:-50]  # the newest are what a person and a brain act on


def progress(
    engine: WorkflowEngine,
    run: PipelineRun,
    record: RecordFile,
    chunk: str,
    *,
    final: bool,
) -> PipelineProgressPayload:
    """What `chunk` (the record from the last offset on) says: its complete lines parsed,
    the offset moved past them (a line still being written waits for the next read,
    unless this is the final read after the head job ended).

    The transport hands text, decoded with U+FFFD for what is not UTF-8, so the offset
    counts the bytes of that text: exact for the engines' records, which are ASCII, and
    a few bytes ahead after an undecodable byte (the next read then starts that far on).
    """
    attempt = run.current.number
    key = record_key(attempt, record)
    whole = chunk if final else chunk[: chunk.rfind("\n") + 1]
    lines = whole.splitlines()
    parsed = engine.parse(record, lines, run.contexts.get(key, ()))
    return PipelineProgressPayload(
        attempt=attempt,
        record=record,
        offset=run.offsets.get(key, 0) + len(whole.encode()),
        context=parsed.context,
        tasks=parsed.tasks,
        messages=parsed.messages,
        final=final,
    )


def read_command(path: str, offset: int) -> list[str]:
    """The command that prints a record from offset on (at most MAX_READ_BYTES), the same
    locally and over SSH; exit 3 if the file is not there yet."""
    script = '[ -r "$2" ] || exit 3; tail -c +"$1" -- "$2" | head -c "$3"'
    return ["sh", "-c", script, "sh", str(offset + 1), path, str(MAX_READ_BYTES)]

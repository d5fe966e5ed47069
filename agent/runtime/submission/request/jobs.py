"""Assembling a job: template + parameters + site config + overrides -> a checked script.

The order of precedence for resources is: site defaults, then the template's defaults,
then what the user asked for on the command line. Resources a template takes from its
own parameters (torch_train's gpus) can only be changed through those parameters, so the
script and the request cannot disagree. Nothing is written or submitted here.

The user's SBATCH_* variables are defaults of a request (fold_sbatch_env): the scheduler
says which are set and what they mean (`Scheduler.submission_environment`). A module
file that exports `SBATCH_ACCOUNT=proj2` means "charge proj2 unless I say otherwise";
jobsmith honours that by making it the request's account where the user gave none, so
policy checks it and the script's directives (and so its hash) carry it. What jobsmith
cannot model is refused by name before anything is rendered.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic_core import PydanticCustomError

from jobsmith.adapters.jobid import parse_job_ids
from jobsmith.adapters.options import (
    ARRAY_SPEC,
    MAX_ARRAY_INDEX,
    TAG_PATTERN,
    ArraySpec,
    ConstraintText,
    Dependency,
    JobOptions,
    PassedOption,
    SafeToken,
    array_last_index,
    array_task_count,
    parse_dependency,
)
from jobsmith.adapters.scheduler import EnvironmentDefault, EnvironmentInputs
from jobsmith.agent.runtime.submission import hashing
from jobsmith.agent.runtime.submission.judging.policy import check_limits
from jobsmith.agent.runtime.submission.request.checkpoint import (
    Checkpoint,
)
from jobsmith.agent.runtime.submission.request.checkpoint import plan as plan_checkpoint
from jobsmith.agent.runtime.submission.request.checkpoint import wrap as wrap_checkpoint
from jobsmith.errors import InputError, PolicyError, TemplateError
from jobsmith.job_templates import RenderedBody, Template, render_body
from jobsmith.job_templates.paths import PathLookup, PathPolicy, inside
from jobsmith.site_config import SiteConfig
from jobsmith.site_config.yamlfile import DocumentKind, read_yaml
from jobsmith.text import holds_undecodable
from jobsmith.units import parse_duration, parse_memory
from jobsmith.workload_caps import MAX_ARRAY_TASKS, MAX_PARAMS_ENTRIES, OverCap, check_count

#: a shebang: '#!' and an interpreter's path, one line
_SHEBANG = re.compile(r"#![^\n\r]*\S[^\n\r]*")
#: a line of a script's header that a scheduler reads as a directive (sbatch reads #PBS
#: and #BSUB lines too, unless told not to)
_HEADER_DIRECTIVE = re.compile(r"^\s*#(SBATCH|PBS|BSUB)(\s|$)")


class ScriptJob(BaseModel):
    """What a user's own script adds to a request: its lines, its arguments, and the
    options a template's job would have from jobsmith (where its output goes)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(description="the script's file name, as given")
    shebang: str = Field(description="the script's first line")
    rest: str = Field(description="the script's other lines, its directives taken out")
    args: tuple[str, ...] = Field((), description="arguments to the script ($1, $2, ...)")
    output: str | None = Field(None, description="-o as the script or command line gave it")
    error: str | None = Field(None, description="-e as given")
    chdir: str | None = Field(None, description="-D as given")
    mail_type: SafeToken | None = Field(None, description="--mail-type as given")
    mail_user: SafeToken | None = Field(None, description="--mail-user as given")
    passed: tuple[PassedOption, ...] = Field((), description="options passed as written")

    @model_validator(mode="after")
    def _no_directive_but_jobsmiths(self) -> ScriptJob:
        """However it was made (read from a file, or sent by a model or an MCP client as
        JSON), nothing in it may reach sbatch as a directive but jobsmith's own lines: a
        `#SBATCH` (or `#PBS`, `#BSUB`) line before the first command of `rest` would be
        read after them, and override what was judged."""
        if not _SHEBANG.fullmatch(self.shebang):
            raise ValueError(f"script {self.name!r}: the first line must be #! and a path")
        texts = (self.name, self.shebang, self.rest, *self.args)
        if any("\0" in text or holds_undecodable(text) for text in texts):
            raise ValueError(f"script {self.name!r} holds a NUL byte or bytes that are not UTF-8")
        for number, line in enumerate(self.rest.split("\n"), 2):
            if line.strip() and not line.lstrip().startswith("#"):
                break
            if _HEADER_DIRECTIVE.match(line):
                raise ValueError(
                    f"script {self.name!r}: line {number} is a directive ({line.split()[0]}) "
                    "in the script's header; jobsmith writes the directives itself"
                )
        return self


class JobFields(BaseModel):
    """What a job is asked with: a template, its parameters, and resource overrides (a
    JobRequest adds the jobs it waits for; a plan's step, the steps: plans.py). The
    resources are positive where given: zero memory or CPUs is no request."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    template: str = Field(description="template name")
    params: dict[str, object] = Field(default_factory=dict, description="template parameters")
    partition: str | None = Field(None, description="partition override")
    account: str | None = Field(None, description="account override")
    qos: str | None = Field(None, description="QoS override")
    time_limit_s: int | None = Field(None, gt=0, description="wall time override, seconds")
    mem_mb: int | None = Field(None, gt=0, description="memory per node override, MiB")
    cpus_per_task: int | None = Field(None, gt=0, description="CPUs per task override")
    gpus: int | None = Field(None, ge=0, description="GPUs per node override")
    nodes: int | None = Field(None, gt=0, description="nodes override")
    array_throttle: int | None = Field(None, gt=0, description="max array tasks at once")
    log_dir: Path | None = Field(None, description="where stdout/stderr go")
    # added with sbatch's option names (issue 25); last, so older documents keep their order
    ntasks: int | None = Field(None, gt=0, description="tasks override")
    gpus_per_job: int | None = Field(
        None, ge=0, description="GPUs for the whole job, the same count on each of its nodes"
    )
    job_name: SafeToken | None = Field(
        None, description="the job's name before jobsmith's tag (default: the template's)"
    )
    array: ArraySpec | None = Field(
        None, description="array indices to run (default: the template's; must be among them)"
    )
    constraint: ConstraintText | None = Field(None, description="node features required")
    exclude: SafeToken | None = Field(None, description="nodes not to use")
    script: ScriptJob | None = Field(
        None, description="a user's own batch script (then template is 'sbatch:NAME')"
    )
    checkpoint: Checkpoint | None = Field(
        None,
        description="make the job checkpointable: warned before its time limit or at "
        "preemption, it runs this command and requeues itself (--checkpoint)",
    )
    ntasks_per_node: int | None = Field(
        None, gt=0, description="tasks on each node (with ntasks, the most on any node)"
    )

    @model_validator(mode="after")
    def _one_gpu_count(self) -> JobFields:
        if self.gpus is not None and self.gpus_per_job is not None:
            raise ValueError("GPUs are asked both per job and per node: give one of the two")
        if self.job_name is not None and TAG_PATTERN.search(self.job_name):
            raise ValueError(f"job name {self.job_name!r} ends as jobsmith's tag does (.js-…)")
        return self


class JobRequest(JobFields):
    """What the user asked for: a template, its parameters, resource overrides, and the
    jobs it waits for; or, instead of a template, a user's own batch script (`jobsmith
    sbatch`: agent/runtime/submission/request/user_scripts.py)."""

    dependencies: tuple[Dependency, ...] = Field((), description="jobs to wait for")

    @classmethod
    def from_cli(cls, **kw: Any) -> JobRequest:
        """Build from the CLI's options (strings as typed), with clear errors."""
        params: dict[str, object] = _params_file(kw.get("params_file"))
        params.update(_param_pairs(kw.get("params") or ()))
        deps = [dep for spec in kw.get("dependency") or () for dep in parse_dependency(spec)]
        deps += [
            Dependency(kind=kind, job_ids=tuple(str(r) for r in parse_job_ids(ids)))
            for kind, ids in (
                ("afterok", kw.get("after_ok")),
                ("afterany", kw.get("after_any")),
                ("afternotok", kw.get("after_not_ok")),
            )
            if ids
        ]
        array, throttle = split_array(kw.get("array"), kw.get("throttle"))
        try:
            return cls(
                template=kw["template"],
                params=params,
                partition=kw.get("partition"),
                account=kw.get("account"),
                qos=kw.get("qos"),
                time_limit_s=parse_unit(parse_duration, "--time", kw.get("time_limit")),
                mem_mb=parse_unit(parse_memory, "--mem", kw.get("mem")),
                cpus_per_task=kw.get("cpus_per_task"),
                gpus=kw.get("gpus_per_node"),
                nodes=kw.get("nodes"),
                array_throttle=throttle,
                dependencies=tuple(deps),
                log_dir=kw.get("log_dir"),
                ntasks=kw.get("ntasks"),
                ntasks_per_node=kw.get("ntasks_per_node"),
                gpus_per_job=kw.get("gpus"),
                job_name=kw.get("job_name"),
                array=array,
                constraint=kw.get("constraint"),
                exclude=kw.get("exclude"),
                checkpoint=checkpoint_from_cli(kw),
            )
        except ValidationError as exc:
            raise InputError(first_error(exc)) from None


@dataclass(frozen=True)
class AssembledJob:
    """A job ready to submit: the checked options, the full script and what made it."""

    template: str
    rendered: RenderedBody
    options: JobOptions
    script: str

    @property
    def script_sha256(self) -> str:
        """Hash of the exact script (directives included): what an approval binds to."""
        return hashing.script_sha256(self.script)

    @property
    def log_dir(self) -> Path | None:
        """Directory Slurm writes the logs to (created just before submission)."""
        return Path(self.options.output).parent if self.options.output else None


#: How a scheduler writes options into a script (ScriptDirectives.script_header): pure.
Header = Callable[[JobOptions], list[str]]


def assemble(
    template: Template,
    request: JobRequest,
    site: SiteConfig,
    *,
    cwd: Path,
    header: Header,
    files: PathLookup | None = None,
) -> AssembledJob:
    """Validate, render and check a job against the site's limits (pure but for the
    questions to files: where the job runs, this host's by default, every path of the job
    asked at once)."""
    roots = list(site.paths.allowed_roots)
    paths = PathPolicy(roots, cwd, files)
    paths.expect([log_dir_asked(request, site), cwd])
    rendered = render_body(template, request.params, allowed_roots=roots, paths=paths)
    _refuse_param_resources(template, request)
    options = _options(template.name, rendered, request, site, paths)
    check_limits(options, site)
    options, body = checkpointed(options, rendered.body, request.checkpoint, site)
    script = compose_script(header(options), site.env_setup, body)
    return AssembledJob(template=template.name, rendered=rendered, options=options, script=script)


def checkpointed(
    options: JobOptions, body: str, asked: Checkpoint | None, site: SiteConfig
) -> tuple[JobOptions, str]:
    """options and body as they are, or, for a checkpointable job, with --signal and
    --requeue set and the body wrapped in the trap (checkpoint.py)."""
    if asked is None:
        return options, body
    decided = plan_checkpoint(asked, site, options.time_limit_s)
    fields = {"signal": decided.signal_option(), "requeue": True}
    return options.model_copy(update=fields), wrap_checkpoint(body, decided)


def checkpoint_from_cli(kw: Mapping[str, Any]) -> Checkpoint | None:
    """--checkpoint CMD [--signal-lead SECONDS] [--max-requeues N] as a Checkpoint; the
    last two alone are an error (they mean nothing without the command)."""
    command = kw.get("checkpoint")
    lead, bound = kw.get("signal_lead"), kw.get("max_requeues")
    if command is None:
        if lead is not None or bound is not None:
            given = "--signal-lead" if lead is not None else "--max-requeues"
            raise InputError(f"{given} needs --checkpoint CMD (the command run at the warning)")
        return None
    return Checkpoint(
        command=command,
        signal_lead_s=lead,
        max_requeues=bound,
    )


def compose_script(header: Sequence[str], env_setup: Sequence[str], body: str) -> str:
    """The batch script: shebang, the options' header, the site's environment lines, the body."""
    parts = ["#!/bin/bash", *header, ""]
    if env_setup:
        parts += ["# site environment (site config: env_setup)", *env_setup, ""]
    return "\n".join(parts) + body.rstrip("\n") + "\n"


def log_dir_asked(req: JobRequest, site: SiteConfig) -> Path:
    """The log directory as asked: --log-dir, else the scratch's `jobsmith-logs`."""
    return req.log_dir or site.paths.scratch / "jobsmith-logs"


def _options(
    name: str, rendered: RenderedBody, req: JobRequest, site: SiteConfig, paths: PathPolicy
) -> JobOptions:
    cwd = paths.base_dir
    overrides = {
        k: v
        for k, v in {
            "time_limit_s": req.time_limit_s,
            "mem_mb": req.mem_mb,
            "cpus_per_task": req.cpus_per_task,
            "gpus": req.gpus,
            "nodes": req.nodes,
            "ntasks": req.ntasks,
            "ntasks_per_node": req.ntasks_per_node,
        }.items()
        if v is not None
    }
    partition = req.partition or default_partition(site)
    defaults = fit_partition(
        {**site.defaults.model_dump(), **rendered.sbatch_fields()}, site, partition
    )
    array = _array(name, rendered, req)
    log_dir = inside_roots(log_dir_asked(req, site), site, "log dir", paths)
    stem = f"{name}_%A_%a" if array else f"{name}_%j"
    fields: dict[str, object] = {
        **defaults,
        **overrides,
        "job_name": f"{req.job_name or name}.js-{secrets.token_hex(6)}",
        "partition": partition,
        "account": req.account or site.accounts.default,
        "qos": req.qos or site.qos.default,
        "array": array,
        "array_throttle": req.array_throttle,
        "dependencies": req.dependencies,
        "output": f"{log_dir}/{stem}.out",
        "error": f"{log_dir}/{stem}.err",
        "chdir": str(cwd if _workdir_there(paths) else site.paths.scratch),
        "mail_user": site.notify.mail_user,
        "mail_type": site.notify.mail_type if site.notify.mail_user else None,
        "constraint": req.constraint,
        "exclude": req.exclude,
    }
    if req.gpus_per_job is not None:
        fields["gpus"] = gpus_per_node(req.gpus_per_job, fields.get("nodes"))
    for what, key in (("log dir", "output"), ("working directory", "chdir")):
        directive_safe(what, str(fields[key]))
    try:
        return JobOptions.model_validate(fields)
    except ValidationError as exc:
        raise TemplateError(f"template {name!r}: {first_error(exc)}") from None


def _array(name: str, rendered: RenderedBody, req: JobRequest) -> str | None:
    """The array to submit: the template's, or the indices -a/--array names.

    An array template's task i handles its item i, so -a may pick among its indices (to
    run some again) but not name others, which would have no item; a plain template
    becomes an array of identical tasks, as `sbatch --array` makes of a plain script.
    """
    own = rendered.array
    if req.array is None or own is None:
        return req.array or (own.spec if own else None)
    last = array_last_index(req.array)
    if last >= own.count:  # an array template's tasks are 0 to count - 1 (arrays.py)
        raise InputError(
            f"--array {req.array}: template {name!r} has tasks {own.spec} ({own.rule}); "
            f"it goes up to task {last}, which would have no item"
        )
    return req.array


def gpus_per_node(per_job: int, nodes: object) -> int:
    """-G/--gpus counts GPUs for the whole job, as sbatch's does; jobsmith asks Slurm for
    the same count on each node (--gres), which its limits and GPU-hours are written in,
    so a count the nodes cannot share evenly is refused rather than guessed."""
    count = nodes if isinstance(nodes, int) else 1
    if per_job % count:
        raise InputError(
            f"--gpus {per_job} over {count} nodes: jobsmith asks for the same number on "
            f"each node; give a multiple of {count}, or --gpus-per-node"
        )
    return per_job // count


#: what an #SBATCH path value may hold (adapters/options.py refuses the rest)
_DIRECTIVE_PATH = re.compile(r"[A-Za-z0-9_.,:/@%+\-\[\]]")


def directive_safe(what: str, path: str) -> None:
    """A path that must go into an #SBATCH line, refused in a sentence if it cannot.

    sbatch's directive parser is not a shell and its quoting differs between versions, so
    a path with a space or a quote is refused rather than quoted.
    """
    bad = sorted({c for c in path if not _DIRECTIVE_PATH.match(c)})
    if bad:
        shown = " ".join(repr(c) for c in bad)
        raise InputError(
            f"{what} {path!r} has characters an #SBATCH line cannot carry safely ({shown}); "
            "use a directory whose path has only letters, digits and . _ - / + @ %"
            + (" (or --log-dir DIR)" if what == "log dir" else " (cd to one)")
        )


def fit_partition(
    defaults: dict[str, int | str], site: SiteConfig, partition: str | None
) -> dict[str, int | str]:
    """Defaults (not the user's explicit requests) shrink to the partition's ceilings.

    A template written for a big cluster asks for 4 CPUs or 2 hours by default; on a
    partition that allows less, the default means "as much as allowed", whereas an
    explicit request over a limit is refused by check_limits.
    """
    part = site.partitions.get(partition or "")
    if part is None:
        return defaults
    limits = {
        "time_limit_s": part.max_time,
        "cpus_per_task": part.max_cpus_per_node,
        "mem_mb": part.max_mem_per_node,
        "nodes": part.max_nodes,
    }
    fitted = dict(defaults)
    for key, limit in limits.items():
        value = fitted.get(key)
        if isinstance(value, int) and limit is not None and value > limit:
            fitted[key] = limit
    return fitted


def _refuse_param_resources(template: Template, req: JobRequest) -> None:
    for field, param in template.spec.resources.references().items():
        asked = getattr(req, field, None)
        if field == "gpus" and req.gpus_per_job is not None:
            asked = req.gpus_per_job
        if asked is not None:
            raise TemplateError(
                f"template {template.name!r} takes {field} from its parameter {param!r}: "
                f"use -P {param}=VALUE instead of the resource option"
            )


def default_partition(site: SiteConfig) -> str | None:
    """The partition the site marks default (None: it marks none)."""
    return next((n for n, p in site.partitions.items() if p.default), None)


def _workdir_there(paths: PathPolicy) -> bool:
    """Whether the job may start in the submitter's directory: inside the roots and a
    directory where the job runs (over SSH the laptop's directory may not be there)."""
    fact = paths.fact(paths.base_dir)
    return fact.real is not None and fact.found == "dir" and inside(fact.real, paths.roots)


def inside_roots(path: Path, site: SiteConfig, what: str, paths: PathPolicy | None = None) -> Path:
    """path, resolved, if it lies inside the allowed roots; PolicyError naming what.
    paths: the job's path policy, which resolves it where the job runs (default: on this
    host, relative to the current directory)."""
    paths = paths or PathPolicy(list(site.paths.allowed_roots), Path.cwd())
    real = paths.fact(path).real
    if real is None or not inside(real, paths.roots):
        roots = ", ".join(str(r) for r in site.paths.allowed_roots)
        there = paths.lookup.where
        shown = f"{path} (resolves to {real})" if there and real not in (None, path) else path
        raise PolicyError(f"{what} {shown}{there} is outside the allowed roots ({roots})")
    return real


def _param_pairs(pairs: Sequence[str]) -> dict[str, object]:
    out: dict[str, object] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise TemplateError(f"-P {pair!r}: expected KEY=VALUE")
        out[key.strip()] = value
    return out


def split_array(text: str | None, throttle: int | None) -> tuple[str | None, int | None]:
    """-a/--array as sbatch reads it, 'SPEC[%N]', split into the indices and the throttle
    (which --throttle may also give, alone or as the same number)."""
    if text is None:
        return None, throttle
    spec, sep, limit = text.partition("%")
    if (
        not re.match(ARRAY_SPEC, spec)
        or not all(_forward(part) for part in spec.split(","))
        or (sep and not re.fullmatch(r"[1-9][0-9]{0,9}", limit))
    ):
        raise InputError(
            f"--array {text!r}: expected indices such as 0-9, 1,3,7 or 0-20:5, "
            "optionally with %N to run at most N at once (0-9%2)"
        )
    if array_last_index(spec) > MAX_ARRAY_INDEX:
        raise InputError(
            f"--array {text!r}: index {array_last_index(spec)} is above Slurm's largest "
            f"possible ({MAX_ARRAY_INDEX}, MaxArraySize - 1)"
        )
    try:  # counted from the ranges: nothing lists the indices before this
        check_count(array_task_count(spec), MAX_ARRAY_TASKS, "tasks", "split the array")
    except OverCap as exc:
        raise InputError(f"--array {text!r}: {exc}") from None
    if sep and throttle is not None and throttle != int(limit):
        raise InputError(f"--array {text!r} and --throttle {throttle}: give the limit once")
    return spec, int(limit) if sep else throttle


def _forward(part: str) -> bool:
    """An --array part that names at least one index: 'A-B' with A <= B, a step above 0."""
    span, _, step = part.partition(":")
    first, _, last = span.partition("-")
    return (not last or int(first) <= int(last)) and (not step or int(step) > 0)


#: a --params-file: YAML (or JSON, which YAML 1.2 reads) mapping parameter names to values
PARAMS_FILE = DocumentKind("params file", "parameter: value", TemplateError)


def _params_file(path: Path | None) -> dict[str, object]:
    if path is None:
        return {}
    data = read_yaml(path, PARAMS_FILE).data
    try:  # before each entry is checked against the template
        check_count(len(data), MAX_PARAMS_ENTRIES, "entries", "a template takes tens")
    except OverCap as exc:
        raise TemplateError(f"--params-file {path}: {exc}") from None
    return dict(data)


def parse_unit(parse: Any, option: str, value: str | None) -> int | None:
    """value read by a strict jobsmith.units parser; InputError naming option if it fails."""
    if value is None:
        return None
    try:
        result: int = parse(value)
    except (PydanticCustomError, ValueError) as exc:
        raise InputError(f"{option} {value!r}: {exc}") from None
    return result


def first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err["loc"])
    return f"{where}: {err['msg']}" if where else str(err["msg"])


# --- the user's SBATCH_* defaults ------------------------------------------------------


class EnvironmentRefused(InputError):
    """An sbatch input variable jobsmith cannot check is set in the environment."""


def fold_sbatch_env(request: JobRequest, inputs: EnvironmentInputs) -> tuple[JobRequest, str]:
    """The request with the environment's defaults folded in, and where they came from.

    The second value is empty when nothing came from the environment, else a phrase such
    as "from your environment: SBATCH_PARTITION=high" for error messages.
    """
    refused = inputs.refused
    for default in inputs.defaults:
        if holds_undecodable(default.value):
            raise InputError(
                f"{default.variable} in your environment holds bytes that are not UTF-8 text"
            )
    if refused:
        names = ", ".join(refused)
        raise EnvironmentRefused(
            f"{names} set in your environment: sbatch would apply "
            f"{'it' if len(refused) == 1 else 'them'} over the checked script, and jobsmith "
            f"cannot check {'it' if len(refused) == 1 else 'them'} against the site's policy; "
            f"unset {'it' if len(refused) == 1 else 'them'} for jobsmith "
            f"(env -u {refused[0]} jobsmith …) or pass the matching option instead"
        )
    changes: dict[str, object] = {}
    used = []
    for default in inputs.defaults:
        field, converted = _convert(default)
        if getattr(request, field) is None:  # an explicit option wins, as it does in sbatch
            changes[field] = converted
            used.append(f"{default.variable}={default.value}")
    if not changes:
        return request, ""
    return request.model_copy(update=changes), "from your environment: " + ", ".join(used)


def _convert(default: EnvironmentDefault) -> tuple[str, object]:
    """(JobRequest field, typed value) for one folded variable; InputError naming it."""
    where = f"{default.variable} in your environment:"
    if default.field == "time_limit":
        return "time_limit_s", parse_unit(parse_duration, where, default.value)
    if default.field == "mem":
        return "mem_mb", parse_unit(parse_memory, where, default.value)
    return default.field, default.value

"""A user's own batch script as a jobsmith job: `jobsmith sbatch SCRIPT [ARGS]`.

A login-node user has batch scripts already. This takes one as sbatch would (the
`#SBATCH` lines, then sbatch's options on the command line, which win) into the typed
request a template gives, so the policy, approvals, budgets, the tag, the ledger, the
watcher, diagnosis and `rerun` treat it as any other job. The body runs as written.

What jobsmith writes for sbatch is the script with its directives replaced by jobsmith's
own (the checked request, as for a template), in this order: the script's shebang, the
directives, the script's arguments (`set --`, for a shell script), then every other line
of the script, byte for byte. So the hash an approval binds to covers all of it.

Decisions, each said in docs/batch-scripts.md:

- **The tag stays in the job name** (`NAME.js-TAG`): it is how a resumed session finds
  its job in squeue and sacct. `%x` in the script's `-o`/`-e` is written out as the name
  the user gave (or the script's file name, sbatch's default), so log files land where
  they did under sbatch; `$SLURM_JOB_NAME` inside the job carries the tag.
- Without `-o`, output goes where sbatch puts it: `slurm-%j.out` (`slurm-%A_%a.out` for
  an array) in the job's working directory, written out so `jobsmith logs` finds it.
- What the script leaves out (memory, time, CPUs) the site file's defaults give, so the
  policy judges a number, as for a template.
- Options jobsmith models become the request's fields; a few that change nothing the
  policy judges are passed as written (PASSED); the site may pass more
  (`jobs.sbatch_options`); the rest are refused by name, before anything is submitted.
- `#PBS` and `#BSUB` lines in the header are refused where the script is read
  (adapters/slurm/commands/sbatch_script.py): sbatch reads some of them too, and jobsmith judges
  only `#SBATCH` lines.
"""

from __future__ import annotations

import re
import secrets
import shlex
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from pydantic import ValidationError

from jobsmith.adapters.capabilities import OwnScripts, ScriptOption, ScriptParts
from jobsmith.adapters.options import JobOptions, parse_dependency
from jobsmith.agent.runtime.submission.judging.policy import check_limits
from jobsmith.agent.runtime.submission.request.jobs import (
    AssembledJob,
    Header,
    JobRequest,
    ScriptJob,
    checkpoint_from_cli,
    checkpointed,
    default_partition,
    directive_safe,
    first_error,
    fit_partition,
    gpus_per_node,
    inside_roots,
    split_array,
)
from jobsmith.errors import InputError, PolicyError
from jobsmith.files import read_bounded
from jobsmith.job_templates import RenderedBody, Resources
from jobsmith.job_templates.paths import PathLookup, PathPolicy
from jobsmith.site_config import SiteConfig
from jobsmith.text import slurm_word
from jobsmith.units import parse_duration, parse_memory

#: a user script's request carries this before its file name in the `template` field, so
#: the ledger's history (and the right-sizing advice) groups runs of one script
SCRIPT_PREFIX = "sbatch:"

#: sbatch option -> the request field it fills (strings, read as the CLI's)
_MODELLED = {
    "partition": "partition",
    "account": "account",
    "qos": "qos",
    "time": "time_limit_s",
    "mem": "mem_mb",
    "cpus-per-task": "cpus_per_task",
    "gpus": "gpus_per_job",
    "gpus-per-node": "gpus",
    "nodes": "nodes",
    "ntasks": "ntasks",
    "ntasks-per-node": "ntasks_per_node",
    "job-name": "job_name",
    "array": "array",
    "dependency": "dependencies",
    "constraint": "constraint",
    "exclude": "exclude",
    "gres": "gpus",
    "output": "output",
    "error": "error",
    "chdir": "chdir",
    "mail-type": "mail_type",
    "mail-user": "mail_user",
}
_COUNTS = {"cpus-per-task", "gpus", "gpus-per-node", "nodes", "ntasks", "ntasks-per-node"}

#: options passed to sbatch as written: they change when or how a job runs, not what it
#: costs, what it may read, or where it runs
PASSED = frozenset(
    {
        "acctg-freq", "begin", "cpu-freq", "deadline", "distribution", "gpu-bind", "hint",
        "hold", "kill-on-invalid-dep", "mem-bind", "nice", "no-kill", "no-requeue",
        "open-mode", "profile", "propagate", "requeue", "signal", "time-min", "wckey",
    }
)  # fmt: skip

#: options refused whatever the site allows, and why
_NEVER = {
    "export": "jobsmith builds the job's environment itself (docs/safety.md); name more "
    "variables in the site file's jobs.environment.allow",
    "export-file": "jobsmith builds the job's environment itself (docs/safety.md)",
    "get-user-env": "it would load your login environment into the job past jobsmith's "
    "environment rule (docs/safety.md)",
    "mem-per-cpu": "jobsmith asks for memory per node; give --mem (CPUs per node x memory "
    "per CPU, e.g. --mem=4G for -c 4 at 1G)",
    "wrap": "give jobsmith a script, or use `jobsmith submit command -P command=...`",
    "uid": "jobsmith submits as you",
    "gid": "jobsmith submits as you",
    "clusters": "jobsmith submits to the cluster its site file names",
    "parsable": "jobsmith reads sbatch's answer itself",
    "wait": "follow the job with `jobsmith wait JOBID`",
    "test-only": "use `jobsmith sbatch --test-only SCRIPT`",
    "batch": "jobsmith does not model --batch",
    "help": "not a job option",
    "usage": "not a job option",
    "version": "not a job option",
    "verbose": "not a job option",
    "quiet": "not a job option",
    "ignore-pbs": "jobsmith refuses #PBS lines instead (docs/batch-scripts.md)",
    "input": "jobsmith does not model --input",
}

#: interpreters whose arguments `set --` gives (the script's own, after the directives)
_SHELLS = frozenset({"sh", "bash", "dash", "ksh", "zsh", "mksh"})


def is_script(template: str) -> bool:
    """True for the template field of a user script's request (SCRIPT_PREFIX)."""
    return template.startswith(SCRIPT_PREFIX)


def script_request(
    script: ScriptParts,
    name: str,
    command_line: Sequence[ScriptOption],
    args: Sequence[str],
    site_allows: Iterable[str],
) -> JobRequest:
    """The request script asks for, the command line's options winning (sbatch's rule);
    InputError naming the option and where it was (line N, the command line)."""
    allowed = PASSED | set(site_allows)
    fields: dict[str, Any] = {}
    passed: dict[str, str] = {}
    for option in (*script.options, *command_line):
        key = _MODELLED.get(option.name)
        if key is not None:
            fields[key] = _value(option)
        elif option.name in _NEVER:
            raise InputError(
                f"{name}: {option.where}: --{option.name} is refused ({_NEVER[option.name]})"
            )
        elif option.name in allowed:
            passed[option.name] = option.spelled()
        else:
            raise InputError(
                f"{name}: {option.where}: --{option.name} is not one jobsmith judges; the "
                "site file may pass it to sbatch as written (jobs.sbatch_options), or "
                "leave it out (docs/batch-scripts.md lists what is passed)"
            )
    array, throttle = split_array(fields.pop("array", None), None)
    own = {k: fields.pop(k, None) for k in ("output", "error", "chdir", "mail_type", "mail_user")}
    if args and _interpreter(script.shebang) not in _SHELLS:
        raise InputError(
            f"{name}: arguments are given to a shell script only (its shebang is "
            f"{script.shebang!r}); put them in the script"
        )
    try:
        job = ScriptJob(
            name=name,
            shebang=script.shebang,
            rest=script.rest,
            args=tuple(args),
            passed=tuple(passed.values()),
            **{k: v for k, v in own.items() if v is not None},
        )
        return JobRequest(
            template=SCRIPT_PREFIX + name,
            array=array,
            array_throttle=throttle,
            script=job,
            **fields,
        )
    except ValidationError as exc:
        raise InputError(f"{name}: {first_error(exc)}") from None


#: jobsmith's options of `jobsmith sbatch` that take a value, found among sbatch's
CHECKPOINT_OPTIONS = ("--checkpoint", "--signal-lead", "--max-requeues")
#: sbatch's options that --checkpoint sets itself
_CHECKPOINT_SETS = frozenset({"signal", "requeue", "no-requeue"})


def with_checkpoint(
    request: JobRequest, script: ScriptParts, name: str, given: Mapping[str, str | None]
) -> JobRequest:
    """request made checkpointable by `--checkpoint CMD [--signal-lead S] [--max-requeues
    N]` (checkpoint.py); InputError for a script that is not a shell script, one that sets
    --signal or --requeue itself, or a value that is not a count."""
    counts = {}
    for key in ("signal_lead", "max_requeues"):
        value = given.get(key)
        if value is not None and not re.fullmatch(r"[0-9]{1,6}", value):
            raise InputError(f"--{key.replace('_', '-')} {value!r}: expected a whole number")
        counts[key] = None if value is None else int(value)
    try:
        checkpoint = checkpoint_from_cli({"checkpoint": given.get("checkpoint"), **counts})
    except ValidationError as exc:
        raise InputError(f"--checkpoint: {first_error(exc)}") from None
    if checkpoint is None:
        return request
    if _interpreter(script.shebang) not in _SHELLS:
        raise InputError(
            f"--checkpoint: {name} starts with {script.shebang!r}; jobsmith runs a shell "
            "script's lines under its trap: call your program from a bash script, or write "
            "the trap yourself (docs/batch-scripts.md)"
        )
    passed = request.script.passed if request.script else ()
    clash = sorted({o.removeprefix("--").partition("=")[0] for o in passed} & _CHECKPOINT_SETS)
    if clash:
        raise InputError(
            f"{name}: --{clash[0]} and --checkpoint: --checkpoint sets --signal and "
            "--requeue itself; leave the script's out"
        )
    return request.model_copy(update={"checkpoint": checkpoint})


def _value(option: ScriptOption) -> Any:
    """option's value read as the request field wants it; InputError naming it."""
    where, value = f"{option.where}: --{option.name}", option.value or ""
    if option.name == "time":
        return _read(parse_duration, where, value)
    if option.name == "mem":
        return _read(parse_memory, where, value)
    if option.name == "dependency":
        try:
            return parse_dependency(value)
        except InputError as exc:
            raise InputError(f"{option.where}: {exc}") from None
    if option.name == "gres":
        return _gpus_of_gres(where, value)
    if option.name in _COUNTS:
        if not re.fullmatch(r"[0-9]{1,6}", value):
            shown = " (jobsmith asks for an exact count)" if "-" in value else ""
            raise InputError(f"{where}={value!r}: expected a whole number{shown}")
        return int(value)
    if not value.strip():
        raise InputError(f"{where} is empty: give a value, or leave the option out")
    return value


def _read(parse: Any, where: str, value: str) -> int:
    try:
        result: int = parse(value)
    except ValueError as exc:
        raise InputError(f"{where}={value!r}: {exc}") from None
    return result


def _gpus_of_gres(where: str, value: str) -> int:
    """--gres=gpu:N (GPUs per node); other generic resources are refused by name."""
    match = re.fullmatch(r"gpu:([0-9]{1,4})", value)
    if match is None:
        raise InputError(
            f"{where}={value!r}: jobsmith models GPUs as gpu:N (the site file's gpu_type "
            "names their type); other generic resources are not supported"
        )
    return int(match.group(1))


def _interpreter(shebang: str) -> str:
    """The interpreter's name: bash for '#!/bin/bash -l' and '#!/usr/bin/env bash'."""
    words = shebang[2:].split()
    if not words:
        return ""
    first = PurePosixPath(words[0]).name
    return PurePosixPath(words[1]).name if first == "env" and len(words) > 1 else first


# --- assembling ---------------------------------------------------------------------------


def assemble_script(
    request: JobRequest,
    site: SiteConfig,
    *,
    cwd: Path,
    header: Header,
    files: PathLookup | None = None,
) -> AssembledJob:
    """The user's script with jobsmith's directives, checked against the site's limits and
    roots (pure but for the questions to files: where the job runs, this host's by
    default); the counterpart of jobs.assemble for a template."""
    job = request.script
    if job is None:
        raise ValueError("assemble_script needs a request with a script")
    paths = PathPolicy(list(site.paths.allowed_roots), cwd, files)
    chdir = inside_roots(
        _absolute(Path(job.chdir) if job.chdir else cwd, cwd),
        site,
        "working directory" + (" (-D)" if job.chdir else " (cd into one, or give -D)"),
        paths,
    )
    name = request.job_name or slurm_word(job.name, limit=60, keep="_-.")
    array = request.array
    stem = "slurm-%A_%a.out" if array else "slurm-%j.out"
    fields: dict[str, object] = {
        **_fitted_defaults(request, site),
        "job_name": f"{name}.js-{secrets.token_hex(6)}",
        "partition": request.partition or default_partition(site),
        "account": request.account or site.accounts.default,
        "qos": request.qos or site.qos.default,
        "array": array,
        "array_throttle": request.array_throttle,
        "dependencies": request.dependencies,
        "output": _log_path(job.output or stem, name, chdir, paths, site, "output (-o)"),
        "error": (
            _log_path(job.error, name, chdir, paths, site, "error (-e)") if job.error else None
        ),
        "chdir": str(chdir),
        "mail_user": job.mail_user or site.notify.mail_user,
        "mail_type": job.mail_type or (site.notify.mail_type if site.notify.mail_user else None),
        "constraint": request.constraint,
        "exclude": request.exclude,
        "passed": job.passed,
    }
    if request.gpus_per_job is not None:
        fields["gpus"] = gpus_per_node(request.gpus_per_job, fields.get("nodes"))
    directive_safe("working directory", str(chdir))
    _check_passed(job.name, job.passed, site)
    try:
        options = JobOptions.model_validate(fields)
    except ValidationError as exc:
        raise InputError(f"{job.name}: {first_error(exc)}") from None
    check_limits(options, site)
    options, rest = checkpointed(options, job.rest, request.checkpoint, site)
    script = compose(job.model_copy(update={"rest": rest}), header(options))
    body = RenderedBody(
        template=request.template,
        params={},
        body=job.rest,
        resources=Resources(),
        array=None,
        input_paths=(),
        output_paths=(),
    )
    return AssembledJob(template=request.template, rendered=body, options=options, script=script)


def _check_passed(name: str, passed: Sequence[str], site: SiteConfig) -> None:
    """Every option passed as written is one jobsmith passes or the site allows, however
    the request was made (a model's or an MCP client's JSON too): PolicyError naming it."""
    allowed = PASSED | set(site.jobs.sbatch_options)
    for option in passed:
        option_name = option.removeprefix("--").partition("=")[0]
        if option_name not in allowed:
            raise PolicyError(
                f"{name}: --{option_name} is not passed to sbatch at this site "
                "(jobs.sbatch_options names the options it allows)"
            )


def compose(job: ScriptJob, directives: Sequence[str]) -> str:
    """The script sbatch gets: shebang, directives, arguments, the rest as written."""
    lines = [job.shebang, *directives]
    if job.args:
        lines += [
            "# jobsmith: the script's arguments (jobsmith sbatch SCRIPT ARGS)",
            "set -- " + " ".join(shlex.quote(arg) for arg in job.args),
        ]
    return "\n".join(lines) + "\n" + job.rest


def _fitted_defaults(request: JobRequest, site: SiteConfig) -> Mapping[str, object]:
    """The site's defaults shrunk to the partition's ceilings, then what was asked."""
    partition = request.partition or default_partition(site)
    fields: dict[str, object] = dict(fit_partition(site.defaults.model_dump(), site, partition))
    for key in (
        "time_limit_s",
        "mem_mb",
        "cpus_per_task",
        "gpus",
        "nodes",
        "ntasks",
        "ntasks_per_node",
    ):
        value = getattr(request, key)
        if value is not None:
            fields[key] = value
    return fields


def _absolute(path: Path, cwd: Path) -> Path:
    return path if path.is_absolute() else cwd / path


def _log_path(
    given: str, name: str, chdir: Path, paths: PathPolicy, site: SiteConfig, what: str
) -> str:
    """-o/-e as sbatch would write it, relative to the working directory, with `%x` written
    out as the name the user gave (jobsmith's tag would be in it otherwise), its directory
    inside the allowed roots and free of patterns (jobsmith creates it before the job)."""
    text = re.sub(r"%(%|x)", lambda m: "%%" if m.group(1) == "%" else name, given)
    path = _absolute(Path(text), chdir)
    if "%" in str(path.parent):
        raise InputError(
            f"{what} {given!r}: only the file name may hold % patterns (jobsmith creates "
            "the directory before the job starts)"
        )
    parent = inside_roots(path.parent, site, f"{what} directory", paths)
    written = str(parent / path.name)
    directive_safe(what, written)
    return written


# --- the command line ---------------------------------------------------------------------


@dataclass(frozen=True)
class ScriptRead:
    """What `jobsmith sbatch`'s words asked: the request, jobsmith's own flags found among
    sbatch's options, and what to tell the user about the script."""

    request: JobRequest
    flags: frozenset[str]
    notes: tuple[str, ...]


def read_request(
    reader: OwnScripts,
    words: Sequence[str],
    site_allows: Iterable[str],
    cwd: Path,
    own: Collection[str] = (),
) -> ScriptRead:
    """`jobsmith sbatch`'s words (`[OPTIONS] SCRIPT [ARGS]`, as sbatch's) as a request:
    the script read (a regular UTF-8 file of at most 4 MiB), its directives, then the
    command line's options, which win; InputError naming the file, line or option. own:
    jobsmith's flags (--json) among sbatch's options, given back as written."""
    every, given, args = reader.split_command_line(list(words), own, CHECKPOINT_OPTIONS)
    flags = {f"--{o.name}" for o in every if o.where == "own" and o.value is None}
    valued = {o.name.replace("-", "_"): o.value for o in every if o.where == "own" and o.value}
    options = [o for o in every if o.where != "own"]
    path = _absolute(Path(given), cwd)
    try:
        data = read_bounded(path)
    except OSError as exc:
        raise InputError(f"batch script {given}: cannot read it ({exc.strerror})") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise InputError(
            f"batch script {given}: line {line} holds bytes that are not UTF-8; "
            "save it as UTF-8 (iconv -f latin1 -t utf-8)"
        ) from None
    script = reader.parse_script(text, path.name)
    request = script_request(script, path.name, options, args, site_allows)
    if valued:
        request = with_checkpoint(request, script, path.name, valued)
    notes = tuple(
        f"{given}: line {number}: an #SBATCH line after the first command is ignored, "
        "as sbatch ignores it"
        for number in script.ignored
    )
    return ScriptRead(request, frozenset(flags), notes)

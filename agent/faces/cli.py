"""The `jobsmith` command line: thin click wiring over the application's actions.

Only click is imported at start-up; everything heavy (pydantic, jinja2, yaml, rich) is
imported inside the command that needs it, so `jobsmith --help` is fast on a busy login
node. Expected errors (JobsmithError) become one line on stderr (or a JSON object with
--json) and a non-zero exit; nothing else is caught, so bugs still show a traceback.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import math
import os
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from jobsmith.text import holds_undecodable

if TYPE_CHECKING:
    from jobsmith.adapters.scheduler import JobStatus
    from jobsmith.agent.app import App
    from jobsmith.agent.runtime.documents import StagedFile
    from jobsmith.agent.runtime.staging import LocalStaging
    from jobsmith.agent.runtime.workflows.feeding.awaited import AwaitedWorkloads
    from jobsmith.agent.runtime.workflows.feeding.record import Reader, Workload
    from jobsmith.agent.runtime.workflows.plans import Plan

F = TypeVar("F", bound=Callable[..., Any])


def _examples(*lines: str) -> str:
    """A command's epilog: one or two example command lines, kept as written (click's
    \\b), the end of its --help (tests/test_cli_teaches.py runs click's parser on each)."""
    return "Examples:\n\n\b\n" + "\n".join(f"  {line}" for line in lines)


def _app(ctx: click.Context) -> App:
    from jobsmith.agent.app import App

    obj = ctx.find_root().obj
    if not isinstance(obj, App):
        raise RuntimeError("jobsmith: the application was not set up")  # a bug, not user error
    return obj


def _session(ctx: click.Context, text: str) -> str:
    """The session id a person typed: the whole id, or the short one `status` shows."""
    return _app(ctx).store.resolve(text)


def _session_or_newest(ctx: click.Context, text: str | None) -> str:
    """The session a person typed, or without one the newest (report, frames)."""
    from jobsmith.errors import InputError

    chosen = _session(ctx, text) if text else _app(ctx).store.newest()
    if chosen is None:
        raise InputError("no session yet: submit a job first (jobsmith sessions list)")
    return chosen


def _open_page(path: Path) -> None:
    """A written page opened in a web browser, or a note where there is none."""
    import webbrowser

    from jobsmith.agent.views.output import note

    if not webbrowser.open(path.as_uri()):
        note(f"jobsmith: no web browser found here; open {path} yourself")


def _complete_template(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[str]:
    """Shell completion of a template's name: the user's and the site's templates and the
    shipped ones (only the shipped ones if the site file cannot be read)."""
    from jobsmith.agent.app import build_app
    from jobsmith.errors import JobsmithError
    from jobsmith.job_templates.loader import TemplateLibrary, shipped_library

    site = ctx.find_root().params.get("site_file")
    try:
        names = build_app(site_file=site).library.names()
    except (JobsmithError, OSError):
        names = TemplateLibrary([shipped_library()]).names()
    return sorted(n for n in names if n.startswith(incomplete))


def json_command(fn: F) -> F:
    """Add --json and translate JobsmithError into one clear line and an exit status."""

    @click.option("--json", "as_json", is_flag=True, help="Print a JSON document instead of text.")
    @functools.wraps(fn)
    def wrapper(*args: Any, as_json: bool, **kwargs: Any) -> Any:
        from jobsmith.errors import JobsmithError

        try:
            result = fn(*args, as_json=as_json, **kwargs)
            if not as_json:
                _tell_news()
            return result
        except JobsmithError as err:
            if as_json:
                from jobsmith.agent.views.output import print_json

                print_json(err.to_json())
            click.echo(f"jobsmith: error: {err}", err=True)
            sys.exit(err.exit_code)

    return wrapper  # type: ignore[return-value]


def _ids(values: tuple[str, ...] | list[str], kinds: str = "job_or_task") -> list[str]:
    """Job ids as typed: parsed into Slurm's forms (BadJobId, exit 2, for anything else).

    Only the canonical text of a parsed id goes on, so no typed string can reach a Slurm
    command where it might be read as an option (see adapters/jobid.py).
    """
    from jobsmith.adapters import jobid

    allow = {"any": jobid.ANY_KIND, "job": jobid.JOB_ONLY, "job_or_task": jobid.JOB_OR_TASK}
    return [str(ref) for ref in jobid.parse_job_ids(values, allow[kinds])]


def _targets(
    values: tuple[str, ...] | list[str], kinds: str = "job_or_task"
) -> tuple[list[str], list[str]]:
    """Job ids and fed workloads' step ids as typed, parsed in one place
    (agent/runtime/workflows/feeding/reference.py): the job ids in Slurm's canonical
    forms, and the step ids (BadJobId, exit 2, naming both forms for anything else)."""
    from jobsmith.adapters import jobid
    from jobsmith.agent.runtime.workflows.feeding.reference import WorkloadRef, parse_targets

    allow = {"any": jobid.ANY_KIND, "job_or_task": jobid.JOB_OR_TASK}
    refs = parse_targets(values, allow[kinds])
    named = [str(r) for r in refs if isinstance(r, WorkloadRef)]
    return [str(r) for r in refs if not isinstance(r, WorkloadRef)], named


def _one_id(value: str, kinds: str = "job_or_task") -> str:
    """Exactly one job id (a comma list is refused where a command takes one)."""
    from jobsmith.adapters.jobid import BadJobId

    ids = _ids([value], kinds)
    if len(ids) != 1:
        raise BadJobId(f"job id {value!r}: give one job id here, not a list")
    return ids[0]


def _tell_news() -> None:
    """One line on stderr about what ended or waits since the user last looked."""
    from jobsmith.agent.app import App

    app = click.get_current_context().find_root().obj
    if isinstance(app, App):

        def still_pending(asked: set[str]) -> set[str]:
            from jobsmith.agent.runtime.submission.approval.approvals import pending_approvals

            return {p.step_id for p in pending_approvals(app.store, app.folds)} & asked

        line = app.news.take(still_pending)
        if line:
            click.echo(f"jobsmith: {line}", err=True)


class _Cli(click.Group):
    """The root group: click's own usage errors as one line too, like every other error."""

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, False, **extra)
        undecodable = _undecodable(sys.argv[1:] if args is None else args)
        if undecodable is not None:
            click.echo(f"jobsmith: error: {undecodable}", err=True)
            sys.exit(2)
        try:
            result = super().main(args, prog_name, complete_var, False, **extra)
        except click.exceptions.NoArgsIsHelpError as err:
            err.show()  # `jobsmith sessions` alone: the help is what was wanted
            sys.exit(err.exit_code)
        except click.UsageError as err:
            where = err.ctx.command_path if err.ctx else "jobsmith"
            click.echo(f"jobsmith: error: {err.format_message()} (see: {where} --help)", err=True)
            sys.exit(err.exit_code)
        except click.ClickException as err:
            click.echo(f"jobsmith: error: {err.format_message()}", err=True)
            sys.exit(err.exit_code)
        except click.exceptions.Abort:
            click.echo("jobsmith: aborted", err=True)
            sys.exit(130)
        sys.exit(result if isinstance(result, int) else 0)


def _undecodable(args: Sequence[str]) -> str | None:
    """Why an argument is not text, if one is not: Python hands argv bytes that are not
    UTF-8 over as lone surrogates, which no script, JSON document or log can carry."""
    for n, arg in enumerate(args, 1):
        if holds_undecodable(arg):
            shown = arg.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
            return (
                f"argument {n} ({shown!r}) holds bytes that are not UTF-8 text; "
                "jobsmith writes every value into a script and a JSON log, so give it as UTF-8"
            )
    return None


_ROOT_EPILOG = (
    "\b\nExit statuses (docs/exit-status.md):\n"
    "  0 ok; 1 a job did not complete; 2 bad input; 3 refused by policy;\n"
    "  4 Slurm refused; 5 Slurm did not answer (retry);\n"
    "  6 unknown job, session or step; 7 wait timed out;\n"
    "  8 waiting for a person's approval; 9 undecided; 10 another watcher runs\n\n"
    "\b\nDocs, in jobsmith's source (https://github.com/jobsmith/jobsmith):\n"
    "  README.md, docs/cli.md (every command and option), docs/exit-status.md,\n"
    "  docs/site-file.md, docs/policy.md, docs/following-jobs.md\n\n"
    + _examples("jobsmith templates list", "jobsmith submit command -P command=hostname")
)


@click.group(
    cls=_Cli, context_settings={"help_option_names": ["-h", "--help"]}, epilog=_ROOT_EPILOG
)
@click.option(
    "--site",
    "site_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Site config file to use instead of /etc/jobsmith/site.yaml (or $JOBSMITH_SITE).",
)
@click.version_option(package_name="jobsmith")
@click.pass_context
def cli(ctx: click.Context, site_file: Path | None) -> None:
    """jobsmith: assemble, submit and follow Slurm jobs from templates."""
    from jobsmith.agent.app import App, build_app

    if ctx.invoked_subcommand not in _ONE_SHOT:
        gc.enable()  # main() turned it off for start-up; a no-op where it was on

    # An embedding program (or a test) may hand in the object graph it built itself,
    # e.g. with another transport; otherwise the entry point builds it here.
    if not isinstance(ctx.obj, App):
        ctx.obj = build_app(site_file=site_file)


# --- templates -----------------------------------------------------------------------


@cli.group(epilog=_examples("jobsmith templates list", "jobsmith templates show command"))
def templates() -> None:
    """List and inspect job templates."""


@templates.command(
    "list", epilog=_examples("jobsmith templates list", "jobsmith templates list --json")
)
@json_command
@click.pass_context
def templates_list(ctx: click.Context, as_json: bool) -> None:
    """List the templates available to you (yours override shipped ones)."""
    from jobsmith.agent.views import render as views

    views.show_templates(_app(ctx).library.list(), as_json)


@templates.command(
    "show",
    epilog=_examples(
        "jobsmith templates show command", "jobsmith templates show file_array --json"
    ),
)
@click.argument("name", shell_complete=_complete_template)
@json_command
@click.pass_context
def templates_show(ctx: click.Context, name: str, as_json: bool) -> None:
    """Show a template's parameters, resource defaults and body."""
    from jobsmith.agent.views import render as views

    views.show_template(_app(ctx).library.get(name), as_json)


# --- render / submit -----------------------------------------------------------------


#: counts Slurm keeps in 32 bits; bounded here so a typo is one clear line, not a traceback
_MAX_COUNT = 2**31 - 1

#: a number as people type it: ASCII digits only (Python's int() and float() also read
#: other scripts' digits, so '--crf ٤' was 4), at most 30 characters
_ASCII_INT = re.compile(r"[+-]?[0-9]{1,30}", re.ASCII)
_ASCII_FLOAT = re.compile(r"[+-]?([0-9]{1,30}(\.[0-9]{0,30})?|\.[0-9]{1,30})", re.ASCII)


class _IntRange(click.IntRange):
    """click's IntRange, reading ASCII digits only."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and not _ASCII_INT.fullmatch(value.strip()):
            self.fail(f"{value!r} is not a whole number (ASCII digits)", param, ctx)
        return super().convert(value, param, ctx)


class _FloatRange(click.FloatRange):
    """click's FloatRange, reading ASCII digits only, and never nan or inf (nan compares
    false with both bounds, so FloatRange let it through: an interval of nan seconds)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and not _ASCII_FLOAT.fullmatch(value.strip()):
            self.fail(f"{value!r} is not a number (ASCII digits, e.g. 2.5)", param, ctx)
        result = super().convert(value, param, ctx)
        if not math.isfinite(result):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return result


_COUNT = _IntRange(1, _MAX_COUNT)


class _Seconds(_FloatRange):
    """A number of seconds in a range (finite: see _FloatRange)."""

    name = "seconds"


#: seconds: at most a year of waiting
_SECONDS = _Seconds(0, 366 * 86400)


class _JobsFile(click.Path):
    """A file the cluster's job reads (transcode's SOURCE, render-frames' BLEND_FILE): on a
    local site a file here, checked as click.Path(exists=True) checks it; on a site reached
    over SSH a file on the cluster, which the plan resolves and checks there, never
    looking at the laptop's files (docs/ssh.md)."""

    def __init__(self) -> None:
        super().__init__(path_type=Path, dir_okay=False, exists=True)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if ctx is not None and not _files_here(ctx.obj):
            return Path(value)
        if isinstance(value, str) and value.startswith("@local:"):  # staged: LocalStaging
            return Path(value)
        return super().convert(value, param, ctx)


def _files_here(app: object) -> bool:
    """Whether the job's files are this host's (a local site, or none known yet)."""
    from jobsmith.adapters.files_there import LocalFiles
    from jobsmith.agent.app import App
    from jobsmith.errors import JobsmithError

    try:
        return not isinstance(app, App) or isinstance(app.job_files, LocalFiles)
    except JobsmithError:  # no site file: the command says so itself, as it did
        return True


def _absolute(path: Path) -> Path:
    """path made absolute without looking at this host's files (os.path.abspath)."""
    return Path(os.path.abspath(path))


class TemplateChoice(click.Choice[str]):
    """The choices of a shipped template's parameter, read from its spec when first
    needed (a value to check, or --help): a command that fills a template offers what
    the template accepts, so the two cannot drift (transcode's --preset once lacked
    veryslow), and nothing is read at import."""

    def __init__(self, template: str, param: str) -> None:
        self._template, self._param = template, param
        self._loaded: tuple[str, ...] | None = None
        super().__init__(())

    @property
    def choices(self) -> tuple[str, ...]:
        """The parameter's choices in the shipped template."""
        if self._loaded is None:
            from jobsmith.job_templates.loader import TemplateLibrary, shipped_library

            spec = TemplateLibrary([shipped_library()]).get(self._template).spec
            self._loaded = tuple(str(c) for c in spec.params[self._param].choices or ())
        return self._loaded

    @choices.setter
    def choices(self, value: object) -> None:
        """click.Choice's own constructor assigns the list; the template's spec decides."""


def _given(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    """An option given as '' is refused, not taken for its default (`--partition ''` fell
    back to the site's default partition, `--log-dir ''` meant the current directory)."""
    if isinstance(value, str | Path) and not str(value).strip():
        raise click.BadParameter("is empty: give a value, or leave the option out")
    return value


class _GivenPath(click.Path):
    """click's Path, refusing '' (which it reads as the current directory)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and not value.strip():
            self.fail("is empty: give a directory, or leave the option out", param, ctx)
        return super().convert(value, param, ctx)


class _Aliased(click.Option):
    """An option whose older names keep working but are left out of --help: jobsmith's
    own names from before it took sbatch's (issue 25), so old scripts still run."""

    def __init__(self, *args: Any, old_names: Sequence[str] = (), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.old_names = frozenset(old_names)

    def get_help_record(self, ctx: click.Context) -> tuple[str, str] | None:
        shown, self.opts = self.opts, [o for o in self.opts if o not in self.old_names]
        try:
            return super().get_help_record(ctx)
        finally:
            self.opts = shown


def _partition(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    """-p is sbatch's partition; until issue 25 it was jobsmith's template parameter, so
    a KEY=VALUE after it (no partition holds '=') is that old habit, said in one line."""
    if isinstance(value, str) and "=" in value:
        raise click.BadParameter(
            f"{value!r} is a template parameter: -p now names the partition, as in sbatch; "
            f"give parameters with -P (-P {value})"
        )
    return _given(ctx, param, value)


def _refuse_mem_per_cpu(ctx: click.Context, param: click.Parameter, value: Any) -> None:
    """--mem-per-cpu is refused by name: the site's limits and the right-sizing are per
    node, and one memory figure per request keeps them simple to check and to explain."""
    if value is not None:
        raise click.BadParameter(
            "is not supported: jobsmith asks for memory per node; give --mem "
            "(per node: CPUs per node x memory per CPU, e.g. --mem 4G for -c 4 at 1G)"
        )


def job_options(fn: F) -> F:
    """The options shared by `render` and `submit`: sbatch's names, with the older
    jobsmith names (--cpus, --after-ok, ...) kept working but hidden
    (docs/sbatch-options.md has the table)."""
    options = [
        click.argument("template", shell_complete=_complete_template),
        click.option(
            "-P",
            "--param",
            "params",
            multiple=True,
            metavar="KEY=VALUE",
            help="Template parameter (repeatable); VALUE @local:PATH stages PATH here to the "
            "cluster first (over SSH).",
        ),
        click.option(
            "--params-file",
            type=click.Path(exists=True, dir_okay=False, path_type=Path),
            help="YAML or JSON mapping of parameters (-P wins).",
        ),
        click.option(
            "-p", "--partition", callback=_partition, help="Partition (default: the site's)."
        ),
        click.option(
            "-A", "--account", callback=_given, help="Account to charge (default: the site's)."
        ),
        click.option("-q", "--qos", callback=_given, help="QoS (default: the site's)."),
        click.option(
            "-t",
            "--time",
            "time_limit",
            callback=_given,
            help="Wall time, Slurm syntax: 30, 1:00:00, 1-00:00:00.",
        ),
        click.option("--mem", callback=_given, help="Memory per node: 500M, 4G."),
        click.option(
            "--mem-per-cpu", callback=_refuse_mem_per_cpu, expose_value=False, hidden=True
        ),
        click.option(
            "-c",
            "--cpus-per-task",
            "--cpus",
            "cpus_per_task",
            cls=_Aliased,
            old_names=["--cpus"],
            type=_COUNT,
            help="CPUs per task.",
        ),
        click.option(
            "-G",
            "--gpus",
            type=_IntRange(0, _MAX_COUNT),
            help="GPUs for the whole job (the same count on each node).",
        ),
        click.option("--gpus-per-node", type=_IntRange(0, _MAX_COUNT), help="GPUs per node."),
        click.option("-N", "--nodes", type=_COUNT, help="Nodes."),
        click.option("-n", "--ntasks", type=_COUNT, help="Tasks."),
        click.option(
            "--ntasks-per-node",
            type=_COUNT,
            help="Tasks on each node (tasks = nodes x this; with -n, the most on any node).",
        ),
        click.option(
            "-J",
            "--job-name",
            callback=_given,
            help="Job name (default: the template's); jobsmith adds its tag: NAME.js-TAG.",
        ),
        click.option(
            "-a",
            "--array",
            callback=_given,
            metavar="INDICES[%N]",
            help="Array tasks, e.g. 0-9%2 (for an array template, some of its own tasks).",
        ),
        click.option("--throttle", type=_COUNT, help="Max array tasks running at once (as %N)."),
        click.option(
            "-d",
            "--dependency",
            multiple=True,
            callback=_given_each,
            metavar="TYPE:JOBID[:JOBID...]",
            help="Start after other jobs, sbatch's syntax: afterok:12:13,afterany:14.",
        ),
        click.option("--after-ok", multiple=True, hidden=True),
        click.option("--after-any", multiple=True, hidden=True),
        click.option("--after-not-ok", multiple=True, hidden=True),
        click.option("--constraint", callback=_given, help="Node features, e.g. 'intel&ib'."),
        click.option("-x", "--exclude", callback=_given, help="Nodes not to use, e.g. 'n[01-03]'."),
        click.option(
            "--log-dir",
            type=_GivenPath(file_okay=False, path_type=Path),
            help="Where Slurm writes stdout/stderr (default: the site's log dir).",
        ),
        *checkpoint_options(),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def checkpoint_options() -> list[Any]:
    """--checkpoint and its two settings, shared by `submit`, `render` and `sbatch`."""
    return [
        click.option(
            "--checkpoint",
            callback=_given,
            metavar="CMD",
            help="Make the job checkpointable: before its time limit or at preemption it "
            "runs CMD (your code, one line), then requeues itself (--signal, --requeue).",
        ),
        click.option(
            "--signal-lead",
            type=_IntRange(1, 65535),
            metavar="SECONDS",
            help="With --checkpoint: warn this long before the time limit (default: the "
            "site's jobs.checkpoint.signal_lead_s).",
        ),
        click.option(
            "--max-requeues",
            type=_IntRange(0, _MAX_COUNT),
            metavar="N",
            help="With --checkpoint: requeue at most this many times (default: the site's "
            "jobs.checkpoint.max_requeues; at most its policy.max_requeues).",
        ),
    ]


def _each(decorators: Sequence[Callable[[F], F]]) -> Callable[[F], F]:
    """One decorator applying decorators in their order, the first outermost."""

    def apply(fn: F) -> F:
        for decorate in reversed(decorators):
            fn = decorate(fn)
        return fn

    return apply


def _given_each(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    """_given for a repeatable option: each value must be non-empty."""
    for one in value or ():
        _given(ctx, param, one)
    return value


def _request(kwargs: dict[str, Any]) -> Any:
    from jobsmith.agent.runtime.submission.request.jobs import JobRequest

    return JobRequest.from_cli(**kwargs)


def _local_staging(app: App, as_json: bool) -> LocalStaging:
    """The `@local:` files of this command (agent/runtime/staging.py): staged to the
    cluster before the job is checked, a line on stderr per file, noted in the session
    the command submits into."""
    from jobsmith.agent.runtime.staging import LocalStaging
    from jobsmith.agent.views import render as views
    from jobsmith.agent.views.output import note

    def told(f: StagedFile) -> None:
        note(f"jobsmith: staged {f.source} -> {f.target} ({f.transferred} bytes sent, {f.via})")

    return LocalStaging(app, views.copy_progress("stage", quiet=as_json), told)


def _staged(staging: LocalStaging, request: Any) -> Any:
    """request with its `@local:` parameters staged, the cluster's paths in their place."""
    params = staging.params(request.template, request.params)
    return request if params == request.params else request.model_copy(update={"params": params})


@cli.command(
    epilog=_examples(
        "jobsmith render command -P command='python3 --version'",
        "jobsmith render file_array -P files=a.txt,b.txt -P program=gzip -c 2 --no-slurm",
    )
)
@job_options
@click.option(
    "--no-slurm",
    is_flag=True,
    help="Run no Slurm command (the queue's limits go unchecked); with no site file, "
    "jobsmith's built-in defaults.",
)
@json_command
@click.pass_context
def render(ctx: click.Context, /, as_json: bool, no_slurm: bool, **kwargs: Any) -> None:
    """Print the sbatch script a template renders to (submits nothing)."""
    from jobsmith.agent.views.output import note

    app = _app(ctx)
    if no_slurm:
        app = app.without_slurm(kwargs["partition"])
        if not app.site.files:
            placeholder = "" if kwargs["partition"] else "; the partition is a placeholder: give -p"
            note(
                "jobsmith: note: no site file: rendered with jobsmith's built-in defaults "
                f"(no partition limits, your home and this directory allowed{placeholder}); "
                "`jobsmith site init` writes a site file"
            )
        note(
            "jobsmith: note: --no-slurm: Slurm was not asked, so the queue's limits "
            "(max_concurrent_jobs, MaxSubmit) were not checked; submit checks them"
        )
    staging = _local_staging(app, as_json)
    request = _request(kwargs) if no_slurm else _staged(staging, _request(kwargs))
    _show_checked(app, request, as_json, test_only=False)


@cli.command(
    epilog=_examples(
        "jobsmith submit command -t 10 --mem 500M -P command='echo hello'",
        "jobsmith submit command -a 0-3%2 -P command='echo task $SLURM_ARRAY_TASK_ID' --dry-run",
    )
)
@job_options
@click.option("--dry-run", is_flag=True, help="Render and check policy; submit nothing.")
@click.option("--test-only", is_flag=True, help="Ask Slurm (sbatch --test-only); submit nothing.")
@click.option(
    "--right-size",
    is_flag=True,
    help="Take the smaller request proposed from your completed runs of the template.",
)
@click.option(
    "--earliest", is_flag=True, help="Take the partition where Slurm would start it earliest."
)
@click.option(
    "--no-advice", is_flag=True, help="Skip the history and per-partition start estimates."
)
@json_command
@click.pass_context
def submit(
    ctx: click.Context,
    /,
    as_json: bool,
    dry_run: bool,
    test_only: bool,
    right_size: bool,
    earliest: bool,
    no_advice: bool,
    **kwargs: Any,
) -> None:
    """Render a template and submit it to Slurm (prints Slurm's job id).

    Before submitting, jobsmith offers a right-sized request (from your completed runs
    of the same template) and the partition where Slurm would start the job earliest;
    --right-size and --earliest take them, the site's policy may take them itself."""
    app = _app(ctx)
    staging = _local_staging(app, as_json)
    _submit_or_check(
        app,
        _staged(staging, _request(kwargs)),
        as_json,
        staging=staging,
        advise=not no_advice,
        right_size=right_size,
        earliest=earliest,
        dry_run=dry_run,
        test_only=test_only,
    )


#: jobsmith's own flags of `jobsmith sbatch`, found among sbatch's options too
_SBATCH_FLAGS = ("--dry-run", "--test-only", "--no-advice", "--right-size", "--earliest", "--json")


@cli.command(
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
    epilog=_examples(
        "jobsmith sbatch align.sh",
        "jobsmith sbatch -p long --mem=8G align.sh sample1",
    ),
)
@click.option("--dry-run", is_flag=True, help="Check the script and policy; submit nothing.")
@click.option("--test-only", is_flag=True, help="Ask Slurm (sbatch --test-only); submit nothing.")
@click.option("--no-advice", is_flag=True, help="Skip the history and start estimates.")
@click.option("--right-size", is_flag=True, help="Take the smaller request from past runs.")
@click.option("--earliest", is_flag=True, help="Take the partition that starts it earliest.")
@_each(checkpoint_options())
@click.argument("words", nargs=-1, type=click.UNPROCESSED, metavar="[SBATCH OPTIONS] SCRIPT [ARGS]")
@json_command
@click.pass_context
def sbatch(
    ctx: click.Context,
    /,
    words: tuple[str, ...],
    as_json: bool,
    dry_run: bool,
    test_only: bool,
    no_advice: bool,
    right_size: bool,
    earliest: bool,
    **checkpoint: Any,
) -> None:
    """Submit your own batch script, as sbatch does, under jobsmith's policy.

    The script's #SBATCH lines and sbatch's options before SCRIPT (which win) are read
    as sbatch reads them; the script runs as written. The job gets jobsmith's tag,
    ledger, watcher, diagnosis and `rerun`. docs/batch-scripts.md says what is passed,
    what is refused, and where the tag goes."""
    from jobsmith.agent.runtime.submission.request.user_scripts import read_request
    from jobsmith.agent.views.output import note
    from jobsmith.errors import InputError

    app = _app(ctx)
    reader = app.scheduler.capabilities().own_scripts
    if reader is None:
        raise InputError("this site's scheduler cannot read batch scripts: use `jobsmith submit`")
    allowed = app.site.config.jobs.sbatch_options
    given = [  # before SCRIPT, where sbatch's options are read too
        word
        for name, value in checkpoint.items()
        if value is not None
        for word in (f"--{name.replace('_', '-')}", str(value))
    ]
    read = read_request(reader, (*given, *words), allowed, Path.cwd(), own=_SBATCH_FLAGS)
    request, flags = read.request, read.flags
    for line in read.notes:
        note(f"jobsmith: {line}")
    _submit_or_check(
        app,
        request,
        as_json or "--json" in flags,
        advise=not (no_advice or "--no-advice" in flags),
        right_size=right_size or "--right-size" in flags,
        earliest=earliest or "--earliest" in flags,
        dry_run=dry_run or "--dry-run" in flags,
        test_only=test_only or "--test-only" in flags,
    )


def _submit_or_check(
    app: App,
    request: Any,
    as_json: bool,
    *,
    advise: bool,
    right_size: bool,
    earliest: bool,
    dry_run: bool,
    test_only: bool,
    staging: LocalStaging | None = None,
) -> None:
    """The one ending of `submit` and `sbatch`: take the advice (unless --no-advice) and
    apply what the person or the site's policy takes, then either show the check
    (--dry-run, --test-only) or submit, as the person who was shown that advice (and
    note in its session what staging put on the cluster for it)."""
    from jobsmith.agent.runtime.submission import onestep
    from jobsmith.agent.views import render as views

    advice = None
    if advise:
        advice = _advice(app, request, right_size, earliest)
        request = advice.apply_to(
            request,
            right_size="right_size" in advice.applied,
            earliest="earliest" in advice.applied,
        )
    if dry_run or test_only:
        _show_checked(app, request, as_json, test_only=test_only, advice=advice)
        return
    session_id, result = onestep.submit(app, request, advised=True)
    if staging is not None:
        staging.record(session_id)
    views.show_submitted(session_id, result, as_json, advice)


def _advice(app: App, request: Any, right_size: bool, earliest: bool) -> Any:
    """The advice for request, marked with what the user's flags or the policy take."""
    settings = app.site.config.policy.advice
    advice = app.executor.judge.advise(request)
    return advice.taken(
        right_size=right_size or settings.right_size == "apply",
        earliest=earliest or settings.earliest_start == "apply",
    )


def _show_checked(
    app: App, request: Any, as_json: bool, *, test_only: bool, advice: Any = None
) -> None:
    """render, --dry-run and --test-only: the submit path's policy, stopping before sbatch.

    The exit status is what `submit` would give: 3 refused by policy (nothing printed but
    the refusal), 8 held for a person's approval (the script is still shown), 4 if Slurm
    itself would refuse (--test-only). An array over the site's submit limits or
    MaxArraySize that `submit` would feed in parts is shown as that workload (judged
    whole as submit judges it, and its parts: "fed in 2 parts of at most 5 tasks").
    """
    from jobsmith.agent.runtime.submission.judging.judge import Origin
    from jobsmith.agent.runtime.submission.judging.policy import OVER_SITE_LIMITS
    from jobsmith.agent.views import render as views
    from jobsmith.agent.views.output import note

    # judged on the very policy path `submit` takes, as the person shown the advice
    checked = app.executor.judge.job(request, Origin(advised=True))
    feeding = None
    if not test_only and checked.decision.rule in OVER_SITE_LIMITS:
        from jobsmith.agent.runtime.workflows.feeding.feeder import dry_run

        fed = dry_run(app.executor, checked)
        if fed is not None:  # not refused: fed in parts (agent/runtime/workflows/feeding)
            feeding = (checked.decision, fed[1])
            checked = fed[0]
    checked.raise_if_refused()
    if test_only:
        verdict = app.scheduler.test_only(checked.job.script)
        views.show_test_only(checked, verdict, as_json, advice)
    else:
        views.show_rendered(checked, as_json, advice, feeding)
    if checked.decision.verdict == "approve":
        note(
            f"jobsmith: submit would wait for a person's approval ({checked.decision.message});"
            " nothing was submitted or recorded"
        )
        sys.exit(8)


def _renamed(name: str) -> Callable[[click.Context, click.Parameter, Any], Any]:
    """A hidden option's callback: its old spelling still works, with a note of the new
    one (`--all` means one thing, status's "every job of every session"; issue 25)."""

    def note_it(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
        if value:
            old = param.opts[0]
            click.echo(f"jobsmith: note: {old} is now {name} here ({old} is deprecated)", err=True)
        return value

    return note_it


@cli.command(
    epilog=_examples(
        "jobsmith rerun 12345 --mem 8G", "jobsmith rerun 12345 -t 2:00:00 --every-task"
    )
)
@click.argument("job_id")
@click.option(
    "--failed/--every-task",
    "failed_only",
    default=True,
    show_default=True,
    help="For arrays: only the failed tasks, or every task.",
)
@click.option("--all", "every_task", is_flag=True, hidden=True, callback=_renamed("--every-task"))
@click.option("--mem", help="New memory per node: 500M, 4G.")
@click.option("-t", "--time", "time_limit", help="New wall time, Slurm syntax.")
@json_command
@click.pass_context
def rerun(
    ctx: click.Context,
    job_id: str,
    failed_only: bool,
    every_task: bool,
    mem: str | None,
    time_limit: str | None,
    as_json: bool,
) -> None:
    """Submit a job jobsmith ran before again: same script, new resources (prints the id)."""
    from jobsmith.agent.brains.deciding import rerun_by_hand
    from jobsmith.agent.runtime.submission.request.jobs import JobRequest
    from jobsmith.agent.views import render as views

    failed_only = failed_only and not every_task
    req = JobRequest.from_cli(template="-", mem=mem, time_limit=time_limit)
    views.show_submitted(
        *rerun_by_hand(
            _app(ctx),
            _one_id(job_id, "job"),
            failed_only=failed_only,
            mem_mb=req.mem_mb,
            time_limit_s=req.time_limit_s,
        ),
        as_json,
    )


# --- following jobs ------------------------------------------------------------------


@cli.command(epilog=_examples("jobsmith status", "jobsmith status 12345 st-d45587b1db --since 30d"))
@click.argument("job_ids", nargs=-1, metavar="[JOB_ID|WORKLOAD_STEP_ID]...")
@click.option(
    "--since",
    default="7d",
    show_default=True,
    help="How far back accounting is searched: 7d, 12h, 90m.",
)
@click.option(
    "--all",
    "every",
    is_flag=True,
    help="Every session's jobs in full, not one line per session (--json always has all).",
)
@json_command
@click.pass_context
def status(
    ctx: click.Context, job_ids: tuple[str, ...], since: str, every: bool, as_json: bool
) -> None:
    """State of jobs, one sacct call for all. Without job ids: one line per session of
    the last --since, what runs or waits and what failed first, at most 40 lines. A fed
    workload's step id shows that workload's line, cancelled or not."""
    from jobsmith.agent.runtime.workflows.feeding.overview import documents
    from jobsmith.agent.runtime.workflows.progressread import read_progress
    from jobsmith.agent.views import render as views
    from jobsmith.agent.watcher.polling import poll_jobs

    app = _app(ctx)
    # each session's log read once: the workloads' parts are found in it before the poll,
    # and the workload lines counted from it after (the poll's own answers, passed as
    # statuses, stand for what it records of the parts it polled)
    read = functools.cache(app.store.read)
    ids, step_ids = _targets(job_ids)
    found, parts = _named_workloads(app, step_ids, read)
    parts += [p for p in _unended_parts(app, ids, read) if p not in parts]
    # the text prints no QoS or TRES (what Slurm granted: a third of sacct's time); the
    # --json documents hold whole records
    to_poll = ids + parts
    polled = poll_jobs(app, to_poll, since, terms=as_json) if to_poll or not step_ids else {}
    # the parts were polled for the workload lines only
    statuses = {j: s for j, s in polled.items() if j in ids} if step_ids or parts else polled
    progress = read_progress(app, statuses)
    if not (job_ids or every or as_json):
        from jobsmith.agent.runtime.glancefacts import glance_facts

        facts = glance_facts(app.store, app.folds, app.ledger, statuses, since, progress)
        views.show_glance(statuses, facts)
        _tell_blocklist(app)
        return
    sessions = {j: r.session_id for j in statuses if (r := app.ledger.get(j)) and r.session_id}
    headlines: dict[str, str] = {}
    if not as_json:  # the glance's and the text's pipeline machinery: not for --json
        from jobsmith.agent.runtime.workflows.pipelinerun import pipeline_lines

        headlines = pipeline_lines(app.store, set(sessions.values()), statuses)
    asked = set(sessions.values()) | {w.session_id for w in found}
    fed = _workloads(app, asked, polled, every_feeding=not job_ids, read=read)
    lines = {s: "\n  ".join(w.headline() for w in ws) for s, ws in fed.items()}
    headlines = {**lines, **headlines}
    shown = documents(fed)
    views.show_status(statuses, as_json, sessions, headlines, progress, shown)
    if not as_json:
        _tell_blocklist(app)


def _unended_parts(app: App, job_ids: list[str], read: Reader) -> list[str]:
    """The unended parts of the fed workloads the asked jobs' sessions hold, not asked
    (agent/runtime/workflows/feeding/progress.py, unended_parts)."""
    from jobsmith.agent.runtime.session.store import SessionNotFound
    from jobsmith.agent.runtime.workflows.feeding.progress import unended_parts

    sessions = {r.session_id for j in job_ids if (r := app.ledger.get(j)) and r.session_id}
    parts: set[str] = set()
    for s in sessions:
        with contextlib.suppress(SessionNotFound):  # a pruned session: nothing to add
            parts.update(unended_parts(s, read(s), app.folds.of(s).job_states))
    return sorted(parts - set(job_ids))


def _named_workloads(
    app: App, step_ids: list[str], read: Reader
) -> tuple[list[Workload], list[str]]:
    """`status`'s fed workloads named by their step ids, and their parts' jobs to poll
    (agent/runtime/workflows/feeding/overview.py); nothing read if none is named."""
    if not step_ids:
        return [], []
    from jobsmith.agent.runtime.workflows.feeding.overview import named

    return named(app.store, app.ledger, step_ids, read)


def _feeder(app: App) -> Callable[[Mapping[str, JobStatus]], list[str]]:
    """`wait`'s feeding: the next parts of the waited jobs' fed workloads, once room is
    made (agent/runtime/workflows/feeding/feeder.py); the jobs submitted."""

    def feed(statuses: Mapping[str, JobStatus]) -> list[str]:
        from jobsmith.agent.runtime.workflows.feeding.feeder import feed_sessions
        from jobsmith.agent.runtime.workflows.feeding.record import workloads

        sessions = {r.session_id for j in statuses if (r := app.ledger.get(j)) and r.session_id}
        fed = [s for s in sessions if workloads(s, app.store.read(s))]
        if not fed:  # no workload: no executor (nor site file) needed
            return []
        return [j for ids in feed_sessions(app.executor, fed).values() for j in ids]

    return feed


def _awaited(app: App, step_ids: list[str]) -> AwaitedWorkloads:
    """`wait`'s fed workloads named by their step ids (UnknownWorkload, exit 2, for one
    that names none), fed as it polls (agent/runtime/workflows/feeding/awaited.py)."""
    from jobsmith.agent.runtime.workflows.feeding.awaited import AwaitedWorkloads
    from jobsmith.agent.runtime.workflows.feeding.feeder import feed_sessions
    from jobsmith.agent.runtime.workflows.feeding.reference import parse_workload_id

    refs = [parse_workload_id(s) for s in step_ids]
    return AwaitedWorkloads.of(
        app.store, app.ledger, refs, lambda sessions: feed_sessions(app.executor, sessions)
    )


def _workloads(
    app: App,
    sessions: set[str],
    statuses: Mapping[str, JobStatus],
    *,
    every_feeding: bool,
    read: Reader | None = None,
) -> dict[str, list[Any]]:
    """The fed workloads of the jobs' sessions, each as far as it is, by session
    (agent/runtime/workflows/feeding/overview.py; read: the caller's reads, else the
    store's)."""
    from jobsmith.agent.runtime.workflows.feeding.overview import fed_workloads

    return fed_workloads(
        app.store, app.ledger, sessions, statuses, every_feeding=every_feeding, read=read
    )


def _tell_blocklist(app: App) -> None:
    """status's last line, when nodes are left out of the user's jobs (agent/views/nodes.py)."""
    from jobsmith.agent.views.nodes import blocklist_line
    from jobsmith.errors import JobsmithError

    try:
        line = blocklist_line(app.blocklist.entries())
    except (OSError, JobsmithError):  # no site file (status needs none), or no reading it
        return
    if line:
        click.echo(line)


@cli.command(
    epilog=_examples("jobsmith wait 12345 12346", "jobsmith wait st-d45587b1db --timeout 600")
)
@click.argument("job_ids", nargs=-1, required=True, metavar="JOB_ID|WORKLOAD_STEP_ID...")
@click.option("--since", default="7d", show_default=True, help="Accounting window, as for status.")
@click.option(
    "--timeout",
    "timeout_s",
    type=_SECONDS,
    default=3600,
    show_default=True,
    help="Give up after this many seconds (exit 7).",
)
@click.option(
    "--get",
    "get_to",
    type=click.Path(path_type=Path, file_okay=False),
    metavar="DIR",
    help="When they have ended, copy the outputs their sessions declared into DIR "
    "(as `get SESSION`; a site reached over SSH).",
)
@json_command
@click.pass_context
def wait(
    ctx: click.Context,
    job_ids: tuple[str, ...],
    since: str,
    timeout_s: float,
    get_to: Path | None,
    as_json: bool,
) -> None:
    """Wait until jobs end, showing progress; exit 1 if any did not complete, 9 if one
    ended unseen (no accounting: its final state is unknown). A fed workload's step id
    (as submit and status print it) waits for the whole workload, fed meanwhile; one
    cancelled ends as a cancelled job does. --get DIR then copies the outputs their
    sessions declared into DIR, as `get SESSION` does (over SSH), whether or not every
    job completed (what is not there is listed as not got)."""
    from jobsmith.adapters.states import JobState
    from jobsmith.agent.runtime.staging import get_outputs_of, stager
    from jobsmith.agent.runtime.workflows.progressread import read_progress
    from jobsmith.agent.views import render as views
    from jobsmith.agent.watcher.waiting import wait_for_jobs

    app = _app(ctx)
    ids, named = _targets(job_ids)

    def said(statuses: Mapping[str, JobStatus]) -> dict[str, str]:
        return {j: p.line() for j, p in read_progress(app, statuses).items()}

    whole = _awaited(app, named) if named else None
    if get_to is not None:
        stager(app)  # a site with nothing to stage says so now, not after the wait
    final = wait_for_jobs(app, ids, since, timeout_s, said, _feeder(app), whole, terms=as_json)
    got = None
    if get_to is not None:
        jobs = [j for j in final if j in ids or app.ledger.get(j) is not None]
        got = get_outputs_of(app, jobs, get_to, views.copy_progress("get", quiet=as_json))
    views.show_waited(final, read_progress(app, final), got, as_json)
    if any(st.state.is_failure for st in final.values()):
        sys.exit(1)
    if any(st.state is JobState.FINAL_UNKNOWN for st in final.values()):
        sys.exit(9)


@cli.command(epilog=_examples("jobsmith adopt 12345"))
@click.argument("job_id")
@json_command
@click.pass_context
def adopt(ctx: click.Context, job_id: str, as_json: bool) -> None:
    """Follow a job you submitted by hand: watched, diagnosed and re-runnable like ours."""
    from jobsmith.agent.runtime.recovery.adopt import adopt as adopt_job
    from jobsmith.agent.views.output import print_json

    app = _app(ctx)
    job_id = _one_id(job_id, "job_or_task")
    session_id, record = adopt_job(
        app.store, app.ledger, app.scheduler, app.site.config.cluster, job_id
    )
    if as_json:
        print_json({"session_id": session_id, "job_id": record.job_id})
    else:
        click.echo(f"adopted job {record.job_id} into session {session_id}")


@cli.command(epilog=_examples("jobsmith diagnose 12345", "jobsmith diagnose 12345_7 --json"))
@click.argument("job_id")
@json_command
@click.pass_context
def diagnose(ctx: click.Context, job_id: str, as_json: bool) -> None:
    """Why a job (or each failed array task) ended as it did, and what to do next."""
    from jobsmith.agent.diagnosis.job import diagnose_job, site_if_any
    from jobsmith.agent.runtime.documents import DiagnosisDocument
    from jobsmith.agent.runtime.logs import stderr_tail
    from jobsmith.agent.views.output import print_json

    app = _app(ctx)
    job_id = _one_id(job_id)
    site = site_if_any(app)
    found = diagnose_job(app.scheduler, site, functools.partial(stderr_tail, app), job_id)
    if as_json:
        print_json(DiagnosisDocument(diagnoses=tuple(found)).full())
        return
    for d in found:
        eff = d.efficiency
        click.echo(f"{d.job_id}: {d.verdict.value}")
        for line in d.evidence:
            click.echo(f"  evidence: {line}")
        for line in d.notes:
            click.echo(f"  note: {line}")
        if eff.cpu_efficiency is not None or eff.mem_efficiency is not None:
            cpu = f"{eff.cpu_efficiency:.0%}" if eff.cpu_efficiency is not None else "?"
            mem = f"{eff.mem_efficiency:.0%}" if eff.mem_efficiency is not None else "?"
            click.echo(f"  efficiency: CPU {cpu}, memory {mem} of what was requested")
        click.echo(f"  remedy: {d.remedy}")


@cli.command(epilog=_examples("jobsmith logs 12345", "jobsmith logs 12345_3 --stderr --tail 200"))
@click.argument("job_id")
@click.option(
    "--tail",
    "tail_lines",
    type=_IntRange(0, 1_000_000),
    default=50,
    show_default=True,
    help="Lines from the end (0 for all).",
)
@click.option("--stderr", "which", flag_value="stderr", help="Show stderr instead of stdout.")
@click.option("--stdout", "which", flag_value="stdout", default=True, hidden=True)
@json_command
@click.pass_context
def logs(ctx: click.Context, job_id: str, tail_lines: int, which: str, as_json: bool) -> None:
    """Show the end of a job's (or array task's) stdout or stderr."""
    from jobsmith.agent.runtime.logs import read_log
    from jobsmith.agent.views import render as views

    views.show_logs(read_log(_app(ctx), _one_id(job_id), which, tail_lines), as_json)


_bwlimit_option = click.option(
    "--bwlimit",
    metavar="KIB",
    type=_IntRange(0, 10_000_000),
    default=0,
    help="At most this many KiB a second (0: no limit).",
)


@cli.command(
    epilog=_examples("jobsmith put clip.mp4", "jobsmith put a.fq b.fq --to /scratch/alice/run1")
)
@click.argument("files", nargs=-1, required=True, type=click.Path(path_type=Path, dir_okay=False))
@click.option(
    "--to",
    "to",
    metavar="DIR",
    type=click.Path(path_type=Path),
    help="Directory on the cluster (default: your scratch; a relative one is below it).",
)
@_bwlimit_option
@json_command
@click.pass_context
def put(
    ctx: click.Context, files: tuple[Path, ...], to: Path | None, bwlimit: int, as_json: bool
) -> None:
    """Copy files from here to the cluster over the site's SSH connection (resumable)."""
    from jobsmith.agent.runtime.staging import put_files
    from jobsmith.agent.views import render as views

    follow = views.copy_progress("put", quiet=as_json)
    views.show_staged(put_files(_app(ctx), files, to, follow, bwlimit), as_json)


@cli.command(
    epilog=_examples("jobsmith get /scratch/alice/out.mkv", "jobsmith get 3f2a9c --to results")
)
@click.argument("items", nargs=-1, required=True, metavar="SESSION|PATH...")
@click.option(
    "--to",
    "to",
    metavar="DIR",
    type=click.Path(path_type=Path, file_okay=False),
    help="Directory here (default: the current one).",
)
@_bwlimit_option
@json_command
@click.pass_context
def get(
    ctx: click.Context, items: tuple[str, ...], to: Path | None, bwlimit: int, as_json: bool
) -> None:
    """Copy files from the cluster to here over the site's SSH connection (resumable): the
    paths given, or a session's declared outputs (the files its jobs write, and the files
    below the directories they write, into DIR/NAME/; at most 1000 a directory)."""
    from jobsmith.agent.runtime.staging import get_files
    from jobsmith.agent.views import render as views

    follow = views.copy_progress("get", quiet=as_json)
    views.show_staged(get_files(_app(ctx), items, to, follow, bwlimit), as_json)


@cli.command(
    epilog=_examples("jobsmith report --open", "jobsmith report 3f2a9c -o ~/reports/run1.html")
)
@click.argument("session_id", required=False)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the page here (default: report-SESSION_ID.html in the current directory).",
)
@click.option("--open", "open_page", is_flag=True, help="Open the page in a web browser.")
@json_command
@click.pass_context
def report(
    ctx: click.Context,
    session_id: str | None,
    output: Path | None,
    open_page: bool,
    as_json: bool,
) -> None:
    """Write one self-contained HTML page about a session (default: the newest): its
    jobs' timeline, memory and CPU used against requested, failures with their diagnosis,
    re-runs, and core- and GPU-hours; print a summary and the page's path."""
    from jobsmith.agent.views.report import run_report
    from jobsmith.agent.views.report_html import write_report
    from jobsmith.agent.views.report_text import show_report
    from jobsmith.agent.watcher.polling import session_poll

    app = _app(ctx)
    run = run_report(app, _session_or_newest(ctx, session_id), session_poll(app))
    path = write_report(run, output or Path(f"report-{run.session_id}.html"))
    summary = run.summary(str(path))
    fed = _workloads(app, {run.session_id}, {}, every_feeding=False)  # as last recorded
    lines = {w.step_id: w.line() for ws in fed.values() for w in ws}
    show_report(summary.model_copy(update={"workloads": lines}) if lines else summary, as_json)
    if open_page:
        _open_page(path)


@cli.command(
    epilog=_examples("jobsmith frames --open", "jobsmith frames 3f2a9c -o ~/reports/shot42.html")
)
@click.argument("session_id", required=False)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the page here (default: frames-SESSION_ID.html in the current directory).",
)
@click.option("--open", "open_page", is_flag=True, help="Open the page in a web browser.")
@json_command
@click.pass_context
def frames(
    ctx: click.Context,
    session_id: str | None,
    output: Path | None,
    open_page: bool,
    as_json: bool,
) -> None:
    """Write the contact sheet of a session's render or transcode (default: the newest
    session) as one self-contained HTML page: the thumbnails its plan's last step made on
    the cluster, as the run report shows them; print the page's path."""
    from jobsmith.agent.views.contact_html import ContactPage, render_contact_page, write_page
    from jobsmith.agent.views.report import contact_sheets
    from jobsmith.agent.views.report_text import show_contact_page
    from jobsmith.agent.watcher.polling import session_poll

    app = _app(ctx)
    info, sheets = contact_sheets(app, _session_or_newest(ctx, session_id), session_poll(app))
    page = render_contact_page(info.id, info.title, sheets)
    path = write_page(page, output or Path(f"frames-{info.id}.html"), "frames")
    show_contact_page(ContactPage.of(info.id, info.title, str(path), sheets), as_json)
    if open_page:
        _open_page(path)


def _control(action: str) -> Callable[..., None]:
    shown = "JOB_ID|WORKLOAD_STEP_ID..." if action == "cancel" else None

    @click.argument("job_ids", nargs=-1, required=True, metavar=shown)
    @json_command
    @click.pass_context
    def command(ctx: click.Context, job_ids: tuple[str, ...], as_json: bool) -> None:
        from jobsmith.agent.runtime.submission import onestep
        from jobsmith.agent.views import render as views

        app = _app(ctx)
        if action == "cancel":  # a fed workload by its step id, too
            ids, named = _targets(job_ids, "any")
            views.show_control(onestep.control(app, action, ids, named), as_json)
            return
        views.show_control(onestep.control(app, action, _ids(job_ids, "any")), as_json)

    command.__doc__ = {
        "cancel": "Cancel jobs (an array id cancels every task), or a fed workload as a "
        "whole by its step id (as submit and status print it), whether or not any of its "
        "parts was submitted yet.",
        "hold": "Hold pending jobs so they do not start.\n\nA job already running runs on "
        "(the hold only keeps it from starting again if it is requeued): hold names it.",
        "release": "Release held jobs.",
    }[action]
    return command


for _action in ("cancel", "hold", "release"):
    _example = _examples(f"jobsmith {_action} 12345", f"jobsmith {_action} 12345_4 12346")
    if _action == "cancel":
        _example = _examples("jobsmith cancel 12345", "jobsmith cancel 12345_4 st-d45587b1db")
    cli.command(_action, epilog=_example)(_control(_action))


@cli.command(epilog=_examples("jobsmith watch --install", "jobsmith watch --uninstall"))
@click.option("--once", is_flag=True, help="One cycle, then exit (for cron or scrontab).")
@click.option(
    "--interval",
    "interval_s",
    type=_Seconds(1, 366 * 86400),
    default=300,
    show_default=True,
    help="Seconds between polls (one sacct for all jobs each time); a running watcher "
    "polls sooner when a job is due to end, but not more often than every 10 s.",
)
@click.option(
    "--install",
    is_flag=True,
    help="Run `watch --once` from your crontab (on this machine, also for an SSH site).",
)
@click.option(
    "--uninstall",
    is_flag=True,
    help="Remove the line --install wrote (only jobsmith's) from scrontab and crontab.",
)
@click.option(
    "--crontab",
    is_flag=True,
    help="With --install or --uninstall: your crontab, not Slurm's scrontab.",
)
@click.option(
    "--remote",
    is_flag=True,
    help="With --install and an SSH site: the login node's crontab, run by its jobsmith.",
)
@json_command
@click.pass_context
def watch(
    ctx: click.Context,
    once: bool,
    interval_s: float,
    install: bool,
    uninstall: bool,
    crontab: bool,
    remote: bool,
    as_json: bool,
) -> None:
    """Follow every session's jobs: record state changes, re-run what the rules can fix.

    --install runs `watch --once` every --interval from Slurm's scrontab where the site
    allows it, else your crontab, says which, and logs to watch.log in your state
    directory; --uninstall removes it."""
    from jobsmith.agent.watcher import running as watching
    from jobsmith.errors import InputError

    app = _app(ctx)
    if install and uninstall:
        raise InputError("give --install or --uninstall, not both")
    for flag, given in (("--remote", remote), ("--crontab", crontab)):
        if given and not (install or uninstall):
            raise InputError(f"{flag} goes with --install or --uninstall: watch --install {flag}")
    if install:
        watching.install_cron(app, interval_s, as_json, remote=remote, crontab=crontab)
    elif uninstall:
        watching.uninstall_cron(app, as_json, remote=remote, crontab=crontab)
    elif once:
        watching.run_once(app, interval_s, as_json)
    else:
        from jobsmith.agent.watcher.stopping import Stop, StopSignals
        from jobsmith.agent.watcher.watcher import Watcher

        # a second signal while the last cycle finished: the lock is free, a normal end
        with StopSignals() as stop, contextlib.suppress(Stop):
            watching.run_forever(Watcher.of(app, interval_s), interval_s, as_json, stop)


# --- approvals and sessions -----------------------------------------------------------


@cli.command(epilog=_examples("jobsmith pending", "jobsmith pending --json"))
@json_command
@click.pass_context
def pending(ctx: click.Context, as_json: bool) -> None:
    """Steps waiting for a person, with their script and cost."""
    from jobsmith.agent.runtime.submission.approval.approvals import pending_approvals
    from jobsmith.agent.views import render as views

    app = _app(ctx)
    views.show_pending(pending_approvals(app.store, app.folds), as_json)


@cli.command(epilog=_examples("jobsmith approve 3f2a9c-s1"))
@click.argument("step_id")
@json_command
@click.pass_context
def approve(ctx: click.Context, step_id: str, as_json: bool) -> None:
    """Approve a held step: it runs exactly as shown by `jobsmith pending`."""
    from jobsmith.agent.runtime.submission.approval import answers
    from jobsmith.agent.views import render as views

    views.show_step_result(answers.approve(_app(ctx), step_id), as_json)


@cli.command(epilog=_examples("jobsmith deny 3f2a9c-s1 --reason 'too many GPUs'"))
@click.argument("step_id")
@click.option("--reason", default="", help="Why (kept in the session log).")
@json_command
@click.pass_context
def deny(ctx: click.Context, step_id: str, reason: str, as_json: bool) -> None:
    """Refuse a held step; nothing runs."""
    from jobsmith.agent.runtime.submission.approval import answers
    from jobsmith.agent.views.output import print_json

    item = answers.deny(_app(ctx), step_id, reason)
    if as_json:
        print_json({"step_id": item.step_id, "session_id": item.session_id, "denied": True})
    else:
        click.echo(f"denied {item.step_id} (session {item.session_id})")


@cli.command(
    epilog=_examples(
        "jobsmith ask 'why did job 12345 fail?'",
        "jobsmith ask 'run python train.py on a GPU' --session 3f2a9c",
    )
)
@click.argument("text")
@click.option("--session", "session_id", help="Continue this session instead of opening one.")
@json_command
@click.pass_context
def ask(ctx: click.Context, text: str, session_id: str | None, as_json: bool) -> None:
    """Ask in words: a model answers with jobsmith's tools (templates, render, status,
    logs, diagnose, submit), under the site's policy. Needs an API key."""
    from jobsmith.agent.views.output import note, print_json

    result = _app(ctx).conversation.ask(text, session_id and _session(ctx, session_id))
    if as_json:
        print_json(result.model_dump(mode="json"))
        return
    click.echo(result.answer)
    if result.job_ids():
        click.echo(f"submitted: {' '.join(result.job_ids())}")
    note(f"jobsmith: session {result.session_id} (jobsmith sessions show {result.session_id})")


@cli.command(epilog=_examples("jobsmith chat", "jobsmith chat --session 3f2a9c"))
@click.option("--session", "session_id", help="Continue this session (its log is the memory).")
@click.option(
    "--interval",
    "interval_s",
    type=_FloatRange(min=5, max=3600),
    default=30.0,
    show_default=True,
    help="Seconds between polls while no watcher runs for you.",
)
@json_command
@click.pass_context
def chat(ctx: click.Context, session_id: str | None, interval_s: float, as_json: bool) -> None:
    """Talk to the model at this terminal: it uses jobsmith's tools under the site's
    policy; held submissions are shown whole for you to approve. Needs an API key.
    With --json, what the chat cost is printed at the end as a JSON document."""
    from jobsmith.agent.faces.chat import Chat
    from jobsmith.agent.faces.terminal import terminal_for
    from jobsmith.agent.views.output import print_json

    app = _app(ctx)
    term = terminal_for(app.paths.state_dir / "chat_history")
    session_id = session_id and _session(ctx, session_id)
    session = Chat(app, term, session_id=session_id, interval_s=interval_s)
    session.start()
    session.loop()  # ends on /exit, Ctrl-D, Ctrl-C twice, or SIGTERM
    if as_json:
        print_json(session.summary())
    else:
        term.write(session.cost_line() + "\n")


@cli.command(epilog=_examples("jobsmith mcp", "jobsmith mcp --http --port 8765"))
@click.option("--http", is_flag=True, help="Serve streamable HTTP on 127.0.0.1 instead of stdio.")
@click.option(
    "--port", type=_IntRange(1, 65535), default=8765, show_default=True, help="HTTP port."
)
@click.option(
    "--token-file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="HTTP bearer token, in a file only you can read (default: mcp_token in your "
    "jobsmith config directory).",
)
@click.option("--session", "session_id", help="Record into this session instead of a new one.")
@click.option(
    "--interval",
    "interval_s",
    type=_FloatRange(min=1, max=3600),
    default=15.0,
    show_default=True,
    help="Seconds between polls while wait_for_jobs waits and no watcher runs for you.",
)
@click.option(
    "--token-ttl",
    "token_ttl_s",
    type=_FloatRange(min=1, max=86400),
    default=600.0,
    show_default=True,
    help="Seconds a check_job token may be used to submit.",
)
@click.pass_context
def mcp(
    ctx: click.Context,
    http: bool,
    port: int,
    token_file: Path | None,
    session_id: str | None,
    interval_s: float,
    token_ttl_s: float,
) -> None:
    """Serve jobsmith's tools to an MCP client (Claude Code, …): check and submit jobs
    with a one-time token, wait for them, read logs and diagnoses, under the site's
    policy. stdio by default; needs the `mcp` extra."""
    from jobsmith.agent.watcher.stopping import Stop, StopSignals
    from jobsmith.errors import JobsmithError

    app = _app(ctx)
    try:
        # from the start: a SIGTERM while the SDK loads (a second or more on a busy login
        # node) ends the server as cleanly as one while it serves
        with StopSignals():
            from jobsmith.extras import needs_extra

            with needs_extra("mcp", "`jobsmith mcp`"):
                from jobsmith.agent.faces import mcp_server
            session_id = session_id and app.store.resolve(session_id)
            options = mcp_server.ServeOptions(session_id, interval_s, token_ttl_s)
            if session_id is not None:
                app.store.info(session_id)  # a clear error now, not at the first call
            if http:
                tokens = token_file or app.paths.config_dir / "mcp_token"
                mcp_server.serve_http(app, options, port=port, token_file=tokens)
            else:
                mcp_server.serve_stdio(app, options)
    except Stop:
        pass  # SIGTERM or SIGINT: a normal end, the watcher lock given back
    except BaseExceptionGroup as group:
        # a signal that lands while one of the SDK's tasks runs (its stdout writer, say)
        # reaches us wrapped in the task group's exception group: still a normal end
        if group.split(Stop)[1] is not None:
            raise
    except JobsmithError as err:
        click.echo(f"jobsmith: error: {err}", err=True)
        sys.exit(err.exit_code)


@cli.group(epilog=_examples("jobsmith plan check plan.yaml", "jobsmith plan run plan.yaml"))
def plan() -> None:
    """Several jobs and their dependencies, run as Slurm's own dependencies."""


@plan.command("check", epilog=_examples("jobsmith plan check plan.yaml"))
@click.argument("file", type=click.Path(path_type=Path, dir_okay=False))
@json_command
@click.pass_context
def plan_check(ctx: click.Context, file: Path, as_json: bool) -> None:
    """Validate a plan file and print every job's script (submits nothing; exit 3 if the
    policy would refuse it, 8 if it would wait for a person)."""
    from jobsmith.agent.views import render as views

    app = _app(ctx)
    plan = _plan_file(_app(ctx), file)
    views.show_plan_check(app.executor.judge.plan(plan), as_json)


@plan.command("run", epilog=_examples("jobsmith plan run plan.yaml"))
@click.argument("file", type=click.Path(path_type=Path, dir_okay=False))
@json_command
@click.pass_context
def plan_run(ctx: click.Context, file: Path, as_json: bool) -> None:
    """Submit every job of a plan at once, each waiting for its steps' jobs (prints one
    'JOBID<TAB>STEP' line per job)."""
    from jobsmith.agent.runtime.submission.onestep import run_plan
    from jobsmith.agent.views import render as views

    plan = _plan_file(_app(ctx), file)
    views.show_plan_run(*run_plan(_app(ctx), plan, f"plan {plan.name}"), as_json)


def _plan_file(app: App, file: Path) -> Plan:
    """The plan in file, with a note on stderr for each older field name it uses; a
    step's own batch script (`script:`) read as `jobsmith sbatch` reads one."""
    from jobsmith.agent.runtime.workflows.plans import ScriptSource, read_plan_file
    from jobsmith.agent.views.output import note

    reader = app.scheduler.capabilities().own_scripts
    allows = tuple(app.site.config.jobs.sbatch_options)
    plan, notes = read_plan_file(file, ScriptSource(reader, allows) if reader else None)
    for line in notes:
        note(f"jobsmith: note: {line}")
    return plan


@plan.command(
    "status", epilog=_examples("jobsmith plan status", "jobsmith plan status 3f2a9c --json")
)
@click.argument("session_id", required=False)
@json_command
@click.pass_context
def plan_status(ctx: click.Context, session_id: str | None, as_json: bool) -> None:
    """A plan's steps as a tree with each job's state (default: the newest plan)."""
    from jobsmith.agent.runtime.workflows.planrun import plan_status as plan_document
    from jobsmith.agent.views import render as views
    from jobsmith.agent.watcher.polling import session_poll

    app = _app(ctx)
    sid = session_id and _session(ctx, session_id)
    views.show_plan_status(plan_document(app.store, sid, session_poll(app)), as_json)


@cli.group(
    epilog=_examples(
        "jobsmith pipeline run nextflow nf-core/rnaseq --profile singularity",
        "jobsmith pipeline status --list",
    )
)
def pipeline() -> None:
    """Nextflow and Snakemake pipelines, run as head jobs under the site's policy."""


@pipeline.command(
    "run",
    context_settings={"ignore_unknown_options": True},
    epilog=_examples(
        "jobsmith pipeline run snakemake workflow/Snakefile --launch-dir runs/c1",
        "jobsmith pipeline run nextflow nf-core/rnaseq --revision 3.14.0 -- --outdir results",
    ),
)
@click.argument("engine", type=click.Choice(["nextflow", "snakemake"]))
@click.argument("pipeline_name", metavar="PIPELINE")
@click.argument("extra_args", nargs=-1, type=click.UNPROCESSED, metavar="[-- ENGINE_ARGS]...")
@click.option(
    "--launch-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Where the engine runs and keeps its state (default: here); resume needs it.",
)
@click.option(
    "--work-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Nextflow's work directory (default: LAUNCH_DIR/work).",
)
@click.option("--profile", help="Nextflow: configuration profiles (-profile).")
@click.option("--revision", help="Nextflow: the pipeline's revision (-r).")
@click.option(
    "--params-file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Nextflow: -params-file; Snakemake: --configfile.",
)
@click.option("--target", "targets", multiple=True, help="Snakemake: a target (repeatable).")
@click.option("--partition", help="Partition for the pipeline's tasks (default: the site's).")
@click.option("--head-partition", help="Partition for the head job (default: --partition).")
@click.option(
    "--max-tasks",
    type=_COUNT,
    help="Most tasks queued or running at once (capped by the site's concurrency limit).",
)
@click.option("--time", "time_limit", help="The head job's wall time (default: 24 hours).")
@click.option("--mem", help="The head job's memory (default: 2000M).")
@json_command
@click.pass_context
def pipeline_run(
    ctx: click.Context,
    /,
    engine: str,
    pipeline_name: str,
    extra_args: tuple[str, ...],
    as_json: bool,
    **kwargs: Any,
) -> None:
    """Launch a pipeline: its engine runs as a Slurm head job configured from the site
    config, and submits the pipeline's tasks itself (prints the head job's id)."""
    from jobsmith.adapters.workflow import EngineKind, LaunchRequest
    from jobsmith.agent.runtime.submission.request.jobs import JobRequest
    from jobsmith.agent.views import render as views

    launch_dir = (kwargs["launch_dir"] or Path.cwd()).absolute()
    kind = EngineKind(engine)
    work_dir = kwargs["work_dir"] or (launch_dir / "work" if kind is EngineKind.NEXTFLOW else None)
    named = kind is EngineKind.SNAKEMAKE and pipeline_name.strip()  # "" is no Snakefile
    snakefile = Path(pipeline_name).absolute() if named else None
    params_file = kwargs["params_file"]
    request = LaunchRequest(
        engine=kind,
        pipeline=str(snakefile or pipeline_name),
        launch_dir=str(launch_dir),
        work_dir=str(Path(work_dir).absolute()) if work_dir else None,
        revision=kwargs["revision"],
        profile=kwargs["profile"],
        params_file=str(params_file.absolute()) if params_file else None,
        targets=tuple(kwargs["targets"]),
        extra_args=tuple(a for a in extra_args if a != "--"),
    )
    resources = JobRequest.from_cli(
        template="pipeline_head", time_limit=kwargs["time_limit"], mem=kwargs["mem"]
    )
    launched = _app(ctx).pipelines.run(
        request,
        resources,
        partition=kwargs["partition"],
        head_partition=kwargs["head_partition"],
        max_tasks=kwargs["max_tasks"],
    )
    views.show_pipeline_launched(launched, as_json)


@pipeline.command(
    "status", epilog=_examples("jobsmith pipeline status", "jobsmith pipeline status --list")
)
@click.argument("session_id", required=False)
@click.option("--list", "every", is_flag=True, help="Every pipeline, one line each.")
@click.option("--all", "listed", is_flag=True, hidden=True, callback=_renamed("--list"))
@json_command
@click.pass_context
def pipeline_status(
    ctx: click.Context, session_id: str | None, every: bool, listed: bool, as_json: bool
) -> None:
    """A pipeline's head job and tasks, read from the engine's own records (default: the
    newest pipeline); --list: every pipeline, one line each."""
    from jobsmith.agent.runtime.workflows import pipelinerun
    from jobsmith.agent.views import render as views
    from jobsmith.agent.watcher.polling import session_poll

    app = _app(ctx)
    if every or listed:
        pipelines = app.pipelines
        docs = pipelinerun.pipeline_statuses(pipelines, pipelines.sessions(), session_poll(app))
        views.show_pipeline_lines(docs, as_json)
    else:
        sid = session_id and _session(ctx, session_id)
        doc = pipelinerun.pipeline_status(app.pipelines, sid, session_poll(app))
        views.show_pipeline_status(doc, as_json)


@pipeline.command("resume", epilog=_examples("jobsmith pipeline resume 3f2a9c"))
@click.argument("session_id")
@json_command
@click.pass_context
def pipeline_resume(ctx: click.Context, session_id: str, as_json: bool) -> None:
    """Launch a pipeline's engine again where it ran, with its resume flags (Nextflow
    -resume, Snakemake --rerun-incomplete): what finished is not run again."""
    from jobsmith.agent.views import render as views

    views.show_pipeline_launched(_app(ctx).pipelines.resume(_session(ctx, session_id)), as_json)


def plan_command(build: Callable[..., tuple[Plan, str]]) -> Callable[..., None]:
    """A command that builds one plan from its arguments, then hands it on as every such
    command does: --save-plan writes it as a plan file, --dry-run only judges and shows
    it, else it runs. `build(app, staging, **arguments)` returns the plan and its title
    (staging: the command's `@local:` files, _local_staging); this adds
    --save-plan, --dry-run and --json (in that order, after the command's own options)."""

    @click.option(
        "--save-plan",
        type=click.Path(path_type=Path, dir_okay=False),
        help="Also write the plan as a plan file (for `plan check` / `plan run`).",
    )
    @click.option(
        "--dry-run", is_flag=True, help="Show the plan's scripts and cost; submit nothing."
    )
    @json_command
    @click.pass_context
    @functools.wraps(build)
    def command(
        ctx: click.Context, /, save_plan: Path | None, dry_run: bool, as_json: bool, **kwargs: Any
    ) -> None:
        app = _app(ctx)
        staging = _local_staging(app, as_json)
        plan, title = build(app, staging, **kwargs)
        _check_or_run(app, plan, title, staging, dry_run=dry_run, as_json=as_json, save=save_plan)

    return command


def _check_or_run(
    app: App,
    plan: Plan,
    title: str,
    staging: LocalStaging | None = None,
    *,
    dry_run: bool,
    as_json: bool,
    save: Path | None = None,
) -> None:
    """A plan a command built: written as a plan file (--save-plan), then only judged and
    shown (--dry-run), or submitted (and what staging put on the cluster for it noted in
    its session)."""
    from jobsmith.agent.runtime.submission.onestep import run_plan
    from jobsmith.agent.runtime.workflows.plans import plan_text
    from jobsmith.agent.views import render as views
    from jobsmith.agent.views.output import note
    from jobsmith.errors import InputError
    from jobsmith.files import write_output

    if save is not None:
        try:
            write_output(save, plan_text(plan, f"jobsmith {title}").encode())
        except OSError as exc:
            raise InputError(f"--save-plan {save}: cannot write it ({exc.strerror})") from None
        note(f"jobsmith: plan written to {save}")
    if dry_run:
        views.show_plan_check(app.executor.judge.plan(plan), as_json)
    else:
        session_id, result = run_plan(app, plan, title)
        if staging is not None:
            staging.record(session_id)
        views.show_plan_run(session_id, result, as_json)


@cli.command(
    epilog=_examples(
        "jobsmith transcode clip.mp4 clip.mkv --preset fast",
        "jobsmith transcode clip.mp4 clip.mkv --crf 20 --dry-run",
    )
)
@click.argument("source", type=_JobsFile())
@click.argument("output", type=click.Path(path_type=Path, dir_okay=False))
@click.option(
    "--chunk-seconds",
    type=_FloatRange(min=1, max=86400),
    default=60.0,
    show_default=True,
    help="About how long one segment is (each starts on a key frame).",
)
@click.option(
    "--video-codec", type=TemplateChoice("ffmpeg_segments", "video_codec"), default="libx264"
)
@click.option(
    "--preset",
    type=TemplateChoice("ffmpeg_segments", "preset"),
    default="medium",
    show_default=True,
)
@click.option("--crf", type=_IntRange(0, 51), default=23, show_default=True)
@click.option("--audio-kbps", type=_IntRange(8, 1024), default=128, show_default=True)
@click.option(
    "--work-dir",
    type=click.Path(path_type=Path, file_okay=False),
    help="Where the segments and the sound go (default: .OUTPUT.jobsmith beside OUTPUT).",
)
@plan_command
def transcode(
    app: App,
    staging: LocalStaging,
    source: Path,
    output: Path,
    chunk_seconds: float,
    video_codec: str,
    preset: str,
    crf: int,
    audio_kbps: int,
    work_dir: Path | None,
) -> tuple[Plan, str]:
    """Encode SOURCE into OUTPUT on the cluster: the picture in segments cut on key frames
    (one array), the sound whole, then joined and checked against SOURCE, as one plan
    (prints one 'JOBID<TAB>STEP' line per job; `jobsmith plan status` follows it).
    SOURCE @local:PATH stages PATH here to the cluster first (over SSH)."""
    from jobsmith.agent.runtime.workflows import transcode as transcoding

    encoding = transcoding.Encoding(
        video_codec=video_codec, preset=preset, crf=crf, audio_kbps=audio_kbps
    )
    there = None
    source = staging.file(source, "SOURCE")
    if not _files_here(app):
        there = transcoding.There(app.job_files, app.transport)
    plan = transcoding.plan_for(source, output, chunk_seconds, encoding, work_dir, there=there)
    return plan, f"transcode {source.name}"


@cli.command(
    name="render-frames",
    epilog=_examples(
        "jobsmith render-frames scene.blend renders/ --frames 1-250",
        "jobsmith render-frames scene.blend renders/ --frames 1-250 --missing-only",
    ),
)
@click.argument("blend_file", type=_JobsFile())
@click.argument("output_dir", type=click.Path(path_type=Path, file_okay=False))
@click.option("--frames", "frames_text", required=True, help="FIRST-LAST, e.g. 1-250.")
@click.option("--frames-per-task", type=_IntRange(1, 100000), default=10, show_default=True)
@click.option(
    "--engine",
    type=TemplateChoice("blender_frames", "engine"),
    default="scene",
    show_default=True,
)
@click.option(
    "--format",
    "image_format",
    type=TemplateChoice("blender_frames", "image_format"),
    default="PNG",
    show_default=True,
)
@click.option("--video", type=click.Path(path_type=Path, dir_okay=False), help="Encode the frames.")
@click.option("--fps", type=_IntRange(1, 240), default=24, show_default=True)
@click.option("--missing-only", is_flag=True, help="Re-render only missing or broken frames.")
@plan_command
def render_frames(
    app: App,
    staging: LocalStaging,
    blend_file: Path,
    output_dir: Path,
    frames_text: str,
    frames_per_task: int,
    engine: str,
    image_format: str,
    video: Path | None,
    fps: int,
    missing_only: bool,
) -> tuple[Plan, str]:
    """Render a frame range of BLEND_FILE into OUTPUT_DIR with Blender on the cluster, in
    blocks (one array), then check every frame (and encode --video), as one plan.
    BLEND_FILE @local:PATH stages PATH here to the cluster first (over SSH)."""
    import secrets

    from jobsmith.agent.runtime.workflows.frames import RenderRequest, There, parse_frames, plan_for

    start, end = parse_frames(frames_text)
    blend_file = staging.file(blend_file, "BLEND_FILE")
    # over SSH these are the cluster's paths: resolved there, by the plan's templates
    here = _files_here(app)
    full = Path.resolve if here else _absolute
    request = RenderRequest(
        blend_file=full(blend_file),
        output_dir=full(output_dir),
        frame_start=start,
        frame_end=end,
        frames_per_task=frames_per_task,
        engine=engine,
        image_format=image_format,
        video=full(video) if video else None,
        fps=fps,
        resume_token=secrets.token_hex(8),
    )
    there = None if here else There(app.job_files.where, app.transport)  # its frames, its ffmpeg
    plan = plan_for(request, missing_only=missing_only, there=there)
    return plan, f"render {blend_file.name}"


@cli.group(
    invoke_without_command=True,
    epilog=_examples("jobsmith nodes --json", "jobsmith nodes clear n2"),
)
@json_command
@click.pass_context
def nodes(ctx: click.Context, as_json: bool) -> None:
    """The nodes left out of your jobs (your blocklist): where your tasks failed for the
    node's own reasons (NODE_FAIL, or the same exit on one node only) as often as the
    site's policy.blocklist says, with why and until when. New submissions and re-runs
    add them to --exclude; jobs Slurm requeued after a node failure get them too."""
    if ctx.invoked_subcommand is not None:
        return
    from jobsmith.agent.runtime.blocklist.store import BlocklistDocument
    from jobsmith.agent.views.nodes import show_blocklist

    app = _app(ctx)
    show_blocklist(BlocklistDocument.of(app.site.config.cluster, app.blocklist), as_json)


@nodes.command("clear", epilog=_examples("jobsmith nodes clear n2", "jobsmith nodes clear"))
@click.argument("node", required=False)
@json_command
@click.pass_context
def nodes_clear(ctx: click.Context, node: str | None, as_json: bool) -> None:
    """Take NODE off your blocklist now (without NODE: every node); its failures so far
    no longer count."""
    from jobsmith.agent.runtime.blocklist.store import BlocklistDocument
    from jobsmith.agent.views.nodes import show_blocklist

    app = _app(ctx)
    cleared = app.blocklist.clear(node)
    show_blocklist(BlocklistDocument.of(app.site.config.cluster, app.blocklist, cleared), as_json)


@cli.group(
    epilog=_examples("jobsmith sessions list", "jobsmith sessions prune --older-than 30d --dry-run")
)
def sessions() -> None:
    """Inspect, export and prune session logs."""


@sessions.command(
    "list", epilog=_examples("jobsmith sessions list", "jobsmith sessions list --json")
)
@json_command
@click.pass_context
def sessions_list(ctx: click.Context, as_json: bool) -> None:
    """Every session, oldest first."""
    from jobsmith.agent.views import render as views

    app = _app(ctx)
    views.show_sessions(app.store.list_sessions(), app.store.size_bytes(), as_json)


@sessions.command("show", epilog=_examples("jobsmith sessions show 3f2a9c"))
@click.argument("session_id")
@json_command
@click.pass_context
def sessions_show(ctx: click.Context, session_id: str, as_json: bool) -> None:
    """A session's events, one a line."""
    from jobsmith.agent.views import render as views

    app = _app(ctx)
    sid = _session(ctx, session_id)
    views.show_events(app.store.read(sid), as_json, app.folds.of(sid).tokens)


@sessions.command("export", epilog=_examples("jobsmith sessions export 3f2a9c > session.jsonl"))
@click.argument("session_id")
@click.pass_context
def sessions_export(ctx: click.Context, session_id: str) -> None:
    """A session as JSONL, one event a line (for audit or replay)."""
    from jobsmith.errors import JobsmithError

    try:
        events = _app(ctx).store.read(_session(ctx, session_id))
    except JobsmithError as err:
        click.echo(f"jobsmith: error: {err}", err=True)
        sys.exit(err.exit_code)
    for event in events:
        click.echo(event.model_dump_json())


@sessions.command(
    "prune",
    epilog=_examples(
        "jobsmith sessions prune --dry-run", "jobsmith sessions prune --older-than 12h"
    ),
)
@click.option("--older-than", default="30d", show_default=True, help="Idle for: 30d, 12h.")
@click.option("--dry-run", is_flag=True, help="Report what would go; remove nothing.")
@json_command
@click.pass_context
def sessions_prune(ctx: click.Context, older_than: str, dry_run: bool, as_json: bool) -> None:
    """Remove sessions idle for longer than --older-than; report the space freed."""
    from jobsmith.agent.runtime.window import parse_window
    from jobsmith.agent.views import render as views

    report = _app(ctx).store.prune(parse_window(older_than, "--older-than"), dry_run=dry_run)
    views.show_prune(report, as_json)


@sessions.command("resume", epilog=_examples("jobsmith sessions resume 3f2a9c"))
@click.argument("session_id")
@click.option(
    "--wait",
    "orphan_wait_s",
    type=_SECONDS,
    default=120,
    show_default=True,
    help="Seconds to wait for an sbatch the dead process left running.",
)
@json_command
@click.pass_context
def sessions_resume(
    ctx: click.Context, session_id: str, orphan_wait_s: float, as_json: bool
) -> None:
    """Reconcile a session cut short by a crash: find its jobs in Slurm, never resubmit one."""
    from jobsmith.agent.runtime.recovery.resume import resume
    from jobsmith.agent.views.output import print_json

    session_id = _session(ctx, session_id)
    report = resume(_app(ctx), session_id, orphan_wait_s)
    if as_json:
        print_json(report)
    else:
        click.echo(
            f"session {session_id}: {len(report.found)} found in Slurm, "
            f"{len(report.resubmitted)} never reached Slurm and were submitted, "
            f"{len(report.rerun)} re-run, {len(report.undecided)} undecided"
        )
        for step_id, why in report.undecided.items():
            click.echo(f"  {step_id}: {why}")
        if report.relaunched:
            click.echo(f"  the pipeline's engine resumes in head job {report.relaunched}")
    if report.undecided:
        sys.exit(9)


@sessions.command(
    "replay",
    epilog=_examples(
        "jobsmith sessions replay 3f2a9c", "jobsmith --site other.yaml sessions replay 3f2a9c"
    ),
)
@click.argument("session_id")
@json_command
@click.pass_context
def sessions_replay(ctx: click.Context, session_id: str, as_json: bool) -> None:
    """Re-run a session's steps against a dry-run executor (nothing reaches Slurm).

    Uses the current site config: pass --site to see what another policy would allow.
    """
    from jobsmith.agent.runtime.recovery.replay import replay_session
    from jobsmith.agent.views.output import print_json

    app = _app(ctx)
    session_id = _session(ctx, session_id)
    steps = replay_session(app.store.read(session_id), app.executor)
    if as_json:
        print_json({"session_id": session_id, "steps": steps})
        return
    for s in steps:
        click.echo(f"{s.step_id} {s.action}: then {s.then or '-'}, now {s.now}  {s.detail}")


@sessions.command(
    "unblock", epilog=_examples("jobsmith sessions unblock 3f2a9c --note 'fixed the input path'")
)
@click.argument("session_id")
@click.option("--note", default="", help="What was looked at (kept in the log).")
@json_command
@click.pass_context
def sessions_unblock(ctx: click.Context, session_id: str, note: str, as_json: bool) -> None:
    """Lift the stop after a streak of failed jobs (recorded as an event)."""
    from jobsmith.agent.runtime.recovery.unblock import unblock
    from jobsmith.agent.views.output import print_json

    app = _app(ctx)
    session_id = _session(ctx, session_id)
    event = unblock(app.store, app.environ, session_id, note)
    if as_json:
        print_json(event)
    else:
        click.echo(f"unblocked: submissions may go on (session {session_id}, event {event.seq})")


# --- site ----------------------------------------------------------------------------


@cli.group(epilog=_examples("jobsmith site init", "jobsmith site check"))
def site() -> None:
    """Inspect and create the site configuration."""


@site.command(
    "check",
    epilog=_examples("jobsmith site check", "jobsmith --site /etc/jobsmith/site.yaml site check"),
)
@json_command
@click.pass_context
def site_check(ctx: click.Context, as_json: bool) -> None:
    """Compare the site config with the live cluster; exit 1 on any error."""
    from jobsmith.agent.runtime.sitefile import login_of
    from jobsmith.agent.runtime.sitefile import site_check as check_live
    from jobsmith.agent.views import render as views

    app = _app(ctx)
    report = check_live(app.site, app.scheduler, login_of(app))
    views.show_site_check(report, as_json)
    if not as_json and report.via != "local":
        click.echo(f"Slurm asked over {report.via}")
    if any(m.severity == "error" for m in report.mismatches):
        sys.exit(1)


@site.command("show", epilog=_examples("jobsmith site show", "jobsmith site show --explain"))
@click.option(
    "--explain",
    is_flag=True,
    help="Name the site file and line that set each value (or jobsmith's default).",
)
@json_command
@click.pass_context
def site_show(ctx: click.Context, explain: bool, as_json: bool) -> None:
    """Print the site configuration in effect, merged from every site file."""
    from jobsmith.agent.runtime.sitefile import site_show as show
    from jobsmith.agent.views import render as views

    views.show_site(show(_app(ctx).site, explain=explain), as_json)


@site.command("init", epilog=_examples("jobsmith site init", "jobsmith site init -o - > site.yaml"))
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the config here (default: your site file, ~/.config/jobsmith/site.yaml; "
    "- prints it).",
)
@click.option("--force", is_flag=True, help="Overwrite an existing file.")
@json_command
@click.pass_context
def site_init(ctx: click.Context, output: Path | None, force: bool, as_json: bool) -> None:
    """Write a starting site config discovered from the live cluster (over SSH when the
    site file's `scheduler` block says so; the file is written here, with that block)."""
    from jobsmith.agent.runtime.sitefile import login_of
    from jobsmith.agent.runtime.sitefile import site_init as init_live
    from jobsmith.agent.views import render as views

    app = _app(ctx)
    target = output or app.paths.config_dir / "site.yaml"
    centre = app.paths.system_site_file
    result = init_live(
        app.scheduler,
        login_of(app),
        app.scheduler_access,
        target,
        force=force,
        to_stdout=str(output) == "-",
        centre=centre if centre.is_file() else None,
        environ=app.environ,
    )
    views.show_site_init(result, as_json)
    if not as_json and result.path is not None and result.via != "local":
        click.echo(f"Slurm asked over {result.via}")


#: the commands that do one thing and end (a submission, a status): their process runs
#: without the cyclic garbage collector (see main; status parses a 1,000-task array's
#: rows in about half the time without its passes)
_ONE_SHOT = frozenset({"submit", "sbatch", "render", "status"})


def main() -> None:
    """Console entry point.

    Start-up runs without the cyclic garbage collector: its passes over the objects the
    imports make (pydantic's validators, click's commands), none of them garbage, cost a
    submission about a tenth of a second (issue 26). The root command turns it back on
    unless the command is one of _ONE_SHOT, whose process leaves little cyclic garbage
    before it ends (reference counting frees the rest as always). A program that embeds
    the CLI (cli.main, CliRunner) is not touched.
    """
    gc.disable()
    cli(prog_name="jobsmith")

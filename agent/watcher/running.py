"""Running the watcher: once (cron), forever (apscheduler), or installed in a crontab
(this machine's, or with a remote site and --remote the login node's)."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from pydantic import BaseModel, ConfigDict, Field

from jobsmith.agent.views.output import note, print_json
from jobsmith.agent.watcher.cycle import WatchCycle, next_interval, watch_warnings
from jobsmith.agent.watcher.pacing import watch_pause_s
from jobsmith.agent.watcher.stopping import Stop, StopSignals
from jobsmith.agent.watcher.watcher import StateDirs, Watcher, WatchParts
from jobsmith.errors import ConfigError, InputError

if TYPE_CHECKING:
    from jobsmith.adapters.scheduler import Scheduler
    from jobsmith.adapters.transport import CommandResult, Transport
    from jobsmith.site_config.model import SchedulerAccess

#: how far the interval grows while Slurm does not answer
MAX_BACKOFF_S = 3600.0
_CRON_MARK = "# jobsmith watch"
#: the installed watcher's output, in the state directory
LOG_NAME = "watch.log"
#: the log is cut to its newer half when it grows past this
MAX_LOG_BYTES = 1 << 20


class CronParts(Protocol):
    """What installing the watcher in a table uses (the composition root, agent/parts.py):
    the state directory (the log), the site file the line names, how Slurm is reached
    (the login node's table and jobsmith, with --remote) and the scheduler (warnings)."""

    @property
    def paths(self) -> StateDirs: ...
    @property
    def site_file(self) -> Path | None: ...
    @property
    def transport(self) -> Transport: ...
    @property
    def scheduler_access(self) -> SchedulerAccess: ...
    @property
    def scheduler_via(self) -> str: ...
    @property
    def scheduler(self) -> Scheduler: ...


def run_once(parts: WatchParts, interval_s: float, as_json: bool) -> WatchCycle:
    """One cycle under the user's lock; WatcherRunning if another watcher holds it."""
    trim_log(parts.paths.state_dir / LOG_NAME)
    watcher = Watcher.of(parts, interval_s)
    try:
        cycle = watcher.cycle()  # WatcherRunning (exit 10): cron's next run will try again
    finally:
        watcher.release()
    _show(cycle, as_json, [])
    return cycle


def run_forever(watcher: Watcher, interval_s: float, as_json: bool, stop: StopSignals) -> None:
    """Run watcher's cycles every interval with apscheduler, backing off while Slurm does
    not answer, until a stop signal (agent/watcher/stopping.py): a cycle under way
    finishes first, then the lock is released. While Slurm answers, the next cycle comes
    sooner than the interval when a job is expected to end sooner
    (agent/watcher/pacing.py: watch_pause_s), never below WATCH_FLOOR_S."""
    from apscheduler.schedulers.blocking import BlockingScheduler

    scheduler = BlockingScheduler()
    # interval: the pause the backoff keeps (the base while Slurm answers); scheduled:
    # the one in force, shorter while a job is expected to end soon (agent/watcher/pacing.py)
    state = {"interval": interval_s, "scheduled": interval_s}
    shown: list[str] = []  # warnings already printed: text output repeats none

    def cycle_once() -> None:
        with stop.held():
            if stop.requested:
                return
            cycle = watcher.cycle()  # heartbeats the lock first
            _show(cycle, as_json, shown)
            shown[:] = cycle.warnings
            new = next_interval(cycle, state["interval"], interval_s, MAX_BACKOFF_S)
            if new != state["interval"]:
                state["interval"] = new
                note(f"jobsmith watch: next poll in {new:.0f}s")
            pause = watch_pause_s(cycle.outlook, new) if cycle.scheduler_ok else new
            if pause != state["scheduled"]:
                state["scheduled"] = pause
                scheduler.reschedule_job("poll", trigger="interval", seconds=pause)

    def tick() -> None:  # in apscheduler's worker thread: the main thread waits
        cycle_once()
        if stop.requested:  # kept while the cycle ran: wake the main thread to stop
            scheduler.shutdown(wait=False)

    scheduler.add_job(
        tick, "interval", seconds=interval_s, id="poll", max_instances=1, coalesce=True
    )
    try:
        # held: a signal between taking the lock and the first cycle's end is kept, and
        # raises Stop only once the watcher knows it holds the lock, which the finally
        # below gives back (a SIGINT right after the lock was taken had left it behind:
        # seen in CI)
        with stop.held():
            watcher.take()  # WatcherRunning (exit 10) if another watcher holds it
            cycle_once()  # in this thread
        scheduler.start()
    except (Stop, KeyboardInterrupt):
        pass
    finally:
        try:
            if scheduler.running:  # a cycle that had just begun in the worker finishes
                scheduler.shutdown(wait=True)
        finally:
            watcher.release()  # only if taken


class Crontab(BaseModel):
    """What `jobsmith watch --install` did: the line, the table and where, and why there."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    installed: str = Field(description="the crontab line written")
    with_: str = Field(alias="with", description="the table: scrontab or crontab")
    where: str = Field(description="'local' (this machine) or 'remote' (the login node)")
    why: str = Field(description="why there, in one line")
    log: str | None = Field(
        description="where each run's output goes (the state directory's watch.log); "
        "None on the login node, whose own jobsmith keeps none"
    )
    warnings: list[str] = Field(description="what may keep the installed watcher from working")


class Uninstalled(BaseModel):
    """What `jobsmith watch --uninstall` did: the jobsmith lines removed, from which tables."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    removed: list[str] = Field(description="the lines removed (empty: there were none)")
    from_: list[str] = Field(alias="from", description="each removed line's table, in order")
    where: str = Field(description="'local' (this machine) or 'remote' (the login node)")


def install_cron(
    parts: CronParts,
    interval_s: float,
    as_json: bool,
    *,
    remote: bool = False,
    crontab: bool = False,
) -> None:
    """Run `jobsmith watch --once` from a table (idempotent: a previous jobsmith line is
    replaced): on this machine, or with `remote` on the login node a remote site names.

    Locally, Slurm's scrontab where the site allows it, else the user's crontab (only the
    crontab with `crontab`); with a remote site only the crontab: the sessions are kept on
    this machine, so the watcher must run here and poll over SSH (scrontab would run it on
    the cluster). Remotely the login node's own jobsmith watches the sessions kept there,
    not this machine's. Locally each run's output is appended to the state directory's
    watch.log (kept under MAX_LOG_BYTES by the runs themselves).
    """
    minutes = max(1, round(interval_s / 60))
    _remote_needs_ssh(parts, remote, "--install")
    host, argv, tools, why = _remote_plan(parts) if remote else _local_plan(parts)
    if crontab:
        tools = ("crontab",)
    log = None if remote else parts.paths.state_dir / LOG_NAME
    if log is not None:
        log.parent.mkdir(parents=True, exist_ok=True)  # cron's >> fails without it
    output = ">/dev/null" if log is None else f">>{shlex.quote(str(log))}"
    line = f"*/{minutes} * * * * {shlex.join(argv)} {output} 2>&1 {_CRON_MARK}"
    tool = _install_line(host, tools, line)
    done = Crontab.model_validate(
        {
            "installed": line,
            "with": tool,
            "where": "remote" if remote else "local",
            "why": why,
            "log": None if log is None else str(log),
            "warnings": watch_warnings(parts.scheduler, minutes * 60.0),
        }
    )
    _show_installed(done, as_json)


def uninstall_cron(
    parts: CronParts, as_json: bool, *, remote: bool = False, crontab: bool = False
) -> Uninstalled:
    """Remove what install_cron added: the lines holding the jobsmith mark, from every
    table it may have used (scrontab and crontab; only the crontab with `crontab`), on
    this machine or with `remote` on the login node. Every other line stays as it was,
    and a table with no jobsmith line is not written at all."""
    _remote_needs_ssh(parts, remote, "--uninstall")
    host: _Host = (
        _RemoteHost(parts.transport, parts.scheduler_access.command_timeout_s)
        if remote
        else _LocalHost()
    )
    removed: list[str] = []
    tables: list[str] = []
    for tool in ("crontab",) if crontab else ("scrontab", "crontab"):
        current = host.current_table(tool)
        if current is None:
            continue
        ours = [x for x in current.splitlines() if _CRON_MARK in x]
        if ours:
            kept = [x for x in current.splitlines() if _CRON_MARK not in x]
            host.write_table(tool, "".join(f"{x}\n" for x in kept))
            removed += ours
            tables += [tool] * len(ours)
    done = Uninstalled.model_validate(
        {"removed": removed, "from": tables, "where": "remote" if remote else "local"}
    )
    _show_uninstalled(done, as_json)
    return done


def _remote_needs_ssh(parts: CronParts, remote: bool, action: str) -> None:
    if remote and parts.scheduler_access.kind == "local":
        raise InputError(
            f"watch {action} --remote needs a site whose scheduler.kind is ssh "
            "or openssh; this one runs Slurm here: drop --remote"
        )


def trim_log(path: Path, limit: int = MAX_LOG_BYTES) -> None:
    """Cut the installed watcher's log to its newer half (from a line's start) once it
    is over limit; the run appending to it (cron's >>, O_APPEND) goes on at its end."""
    try:
        if path.stat().st_size <= limit:
            return
        with path.open("r+b") as fh:
            fh.seek(-(limit // 2), os.SEEK_END)
            tail = fh.read()
            tail = tail[tail.find(b"\n") + 1 :]
            fh.seek(0)
            fh.write(tail)
            fh.truncate()
    except OSError:
        return  # no log (not installed, or another place): nothing to keep small


def _remote_plan(parts: CronParts) -> tuple[_Host, list[str], tuple[str, ...], str]:
    """The login node's table, running the login node's own jobsmith with its own site."""
    remote = _RemoteHost(parts.transport, parts.scheduler_access.command_timeout_s)
    argv = [remote.jobsmith(parts.scheduler_via), "watch", "--once"]
    why = (
        f"on the login node ({parts.scheduler_via}), by its own jobsmith: it watches "
        "the sessions kept there, not this machine's"
    )
    return remote, argv, ("scrontab", "crontab"), why


def _local_plan(parts: CronParts) -> tuple[_Host, list[str], tuple[str, ...], str]:
    """This machine's table, running this jobsmith with this site file."""
    site = ["--site", str(Path(parts.site_file).resolve())] if parts.site_file else []
    argv = [str(jobsmith_program()), *site, "watch", "--once"]
    if parts.scheduler_access.kind == "local":
        return _LocalHost(), argv, ("scrontab", "crontab"), "Slurm runs on this host"
    why = (
        f"the sessions are kept on this machine, so its jobsmith polls Slurm over "
        f"{parts.scheduler_via} (--remote installs on the login node instead)"
    )
    return _LocalHost(), argv, ("crontab",), why


def _install_line(host: _Host, tools: tuple[str, ...], line: str) -> str:
    """Put line in the first usable table of tools on host; the tool used."""
    for tool in tools:
        current = host.current_table(tool)
        if current is None:
            continue
        kept = [x for x in current.splitlines() if _CRON_MARK not in x]
        host.write_table(tool, "\n".join([*kept, line]) + "\n")
        return tool
    raise ConfigError(
        f"neither {' nor '.join(tools)} is usable on {host.name}: run `jobsmith watch` in tmux"
    )


def _show_installed(done: Crontab, as_json: bool) -> None:
    if as_json:
        print_json(done.model_dump(by_alias=True))
        return
    place = "this machine" if done.where == "local" else "the login node"
    print(f"installed with {done.with_} on {place}: {done.installed}")
    print(f"why {place}: {done.why}")
    if done.log is not None:
        print(f"each run's output goes to {done.log}")
    remove = "jobsmith watch --uninstall" + (" --remote" if done.where == "remote" else "")
    print(f"to stop it: {remove}")
    for warning in done.warnings:
        note(f"jobsmith watch: warning: {warning}")


def _show_uninstalled(done: Uninstalled, as_json: bool) -> None:
    place = "this machine" if done.where == "local" else "the login node"
    if as_json:
        print_json(done.model_dump(by_alias=True))
    elif done.removed:
        for line, tool in zip(done.removed, done.from_, strict=True):
            print(f"removed from {tool} on {place}: {line}")
    else:
        print(f"no jobsmith watch line in scrontab or crontab on {place}: nothing removed")


def jobsmith_program() -> Path:
    """The `jobsmith` program of the installation that is running, for cron to start.

    cron runs a line with a bare PATH, so the line names the program absolutely. The
    program running now is not always sys.argv[0] (`python -m jobsmith`, or a test runner
    calling the CLI in-process), so: argv[0] when it is a `jobsmith` program, else the
    console script installed beside this Python, else the first on PATH.
    """
    started_as = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    candidates = [
        started_as if started_as is not None and started_as.name == "jobsmith" else None,
        Path(sys.executable).parent / "jobsmith" if sys.executable else None,
        Path(found) if (found := shutil.which("jobsmith")) else None,
    ]
    for candidate in candidates:
        if candidate is not None and candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate.absolute()
    raise ConfigError(
        f"cannot find the jobsmith program for the crontab line: none beside {sys.executable} "
        "and none on PATH; install jobsmith with pip (it creates the `jobsmith` command) "
        "or run `jobsmith watch` in tmux"
    )


class _Host(Protocol):
    """Where a table is read and written: this machine, or the login node."""

    name: str

    def current_table(self, tool: str) -> str | None:
        """The user's table, '' if none yet, None if tool is missing or disabled."""
        ...

    def write_table(self, tool: str, text: str) -> None:
        """Replace the user's table with text."""
        ...


class _LocalHost:
    """This machine's tables, through its own programs."""

    name = "this host"

    def current_table(self, tool: str) -> str | None:
        path = shutil.which(tool)
        if path is None:
            return None
        res = subprocess.run([path, "-l"], capture_output=True, text=True)
        return _table(res.returncode, res.stdout, res.stderr)

    def write_table(self, tool: str, text: str) -> None:
        with tempfile.NamedTemporaryFile("w", suffix=".cron", delete=False) as fh:
            fh.write(text)
        try:
            subprocess.run([tool, fh.name], check=True, capture_output=True, text=True)
        finally:
            Path(fh.name).unlink(missing_ok=True)


class _RemoteHost:
    """The login node's tables and jobsmith, through the site's transport."""

    name = "the login node"

    def __init__(self, transport: Transport, timeout_s: float) -> None:
        self._transport = transport
        self._timeout_s = timeout_s

    def jobsmith(self, via: str) -> str:
        """The remote jobsmith program, absolute (cron's PATH is bare), as found on the
        remote login PATH."""
        path = self._which("jobsmith")
        if path is None:
            raise ConfigError(
                f"no jobsmith on the login node's PATH ({via}): install it there (pip "
                "install jobsmith), or drop --remote to run the watcher on this machine"
            )
        return path

    def current_table(self, tool: str) -> str | None:
        if self._which(tool) is None:
            return None
        res = self._run([tool, "-l"])
        return _table(res.returncode, res.stdout, res.stderr)

    def write_table(self, tool: str, text: str) -> None:
        # the table goes in a remote temporary file: scrontab reads no stdin
        script = 'f=$(mktemp) && cat >"$f" && "$1" "$f"; s=$?; rm -f "$f"; exit $s'
        res = self._run(["sh", "-c", script, "sh", tool], stdin=text)
        if res.returncode != 0:
            said = " ".join(res.stderr.split())[:300]
            raise ConfigError(f"{tool} on the login node refused the table: {said}")

    def _which(self, program: str) -> str | None:
        res = self._run(["sh", "-c", 'command -v "$1"', "sh", program])
        found = res.stdout.strip()
        return found if res.returncode == 0 and found.startswith("/") else None

    def _run(self, argv: list[str], stdin: str | None = None) -> CommandResult:
        return self._transport.run(argv, timeout=self._timeout_s, stdin=stdin)


def _table(returncode: int, stdout: str, stderr: str) -> str | None:
    """What `TOOL -l` said: the table, '' for none yet, None when the tool is unusable."""
    if returncode == 0:
        return stdout
    return "" if "no crontab" in stderr.lower() else None


def _show(cycle: WatchCycle, as_json: bool, shown: list[str]) -> None:
    """One cycle on stdout (JSON) or stderr (text; warnings in shown are not repeated)."""
    if as_json:
        print_json(cycle)
        return
    for warning in cycle.warnings:
        if warning not in shown:
            note(f"jobsmith watch: warning: {warning}")
    if not cycle.scheduler_ok:
        note(f"jobsmith watch: Slurm did not answer ({cycle.error}); states kept as they were")
    for change in cycle.changes:
        note(f"job {change.job_id}: {change.previous or 'new'} -> {change.state.value}")
    for decision in cycle.decisions:
        job = decision.get("job_id")
        note(f"job {job}: {decision.get('action')}: {decision.get('reason')}")
        notes = decision.get("notes")
        for line in notes if isinstance(notes, list) else []:
            note(f"job {job}: note: {line}")

"""Running the watcher: once (cron), forever (apscheduler), or installed in the crontab."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from jobsmith.agent.views.output import note, print_json
from jobsmith.agent.watcher.cycle import WatchCycle, next_interval
from jobsmith.errors import ConfigError

if TYPE_CHECKING:
    from jobsmith.agent.app import App

#: how far the interval grows while Slurm does not answer
MAX_BACKOFF_S = 3600.0
_CRON_MARK = "# jobsmith watch"


def run_once(app: App, interval_s: float, as_json: bool) -> WatchCycle:
    """One cycle under the user's lock; WatcherRunning if another watcher holds it."""
    lock = app.watch_lock(interval_s)
    lock.acquire()  # WatcherRunning (exit 10): cron's next run will try again
    try:
        cycle = app.watch_cycle(interval_s)
    finally:
        lock.release()
    _show(cycle, as_json, [])
    return cycle


def run_forever(app: App, interval_s: float, as_json: bool) -> None:
    """Poll every interval with apscheduler, backing off while Slurm does not answer."""
    from apscheduler.schedulers.blocking import BlockingScheduler

    lock = app.watch_lock(interval_s)
    lock.acquire()
    scheduler = BlockingScheduler()
    state = {"interval": interval_s}
    shown: list[str] = []  # warnings already printed: text output repeats none

    def tick() -> None:
        lock.heartbeat()
        cycle = app.watch_cycle(interval_s)
        _show(cycle, as_json, shown)
        shown[:] = cycle.warnings
        new = next_interval(cycle, state["interval"], interval_s, MAX_BACKOFF_S)
        if new != state["interval"]:
            state["interval"] = new
            note(f"jobsmith watch: next poll in {new:.0f}s")
            scheduler.reschedule_job("poll", trigger="interval", seconds=new)

    scheduler.add_job(
        tick, "interval", seconds=interval_s, id="poll", max_instances=1, coalesce=True
    )
    tick()
    try:
        scheduler.start()
    except (KeyboardInterrupt, SystemExit):
        pass
    finally:
        lock.release()


def install_cron(app: App, interval_s: float, as_json: bool) -> None:
    """Run `jobsmith watch --once` from Slurm's scrontab where the site allows it, else from
    the user's crontab (idempotent: a previous jobsmith line is replaced)."""
    minutes = max(1, round(interval_s / 60))
    argv = [
        str(jobsmith_program()),
        *(["--site", str(Path(app.site_file).resolve())] if app.site_file else []),
        "watch",
        "--once",
    ]
    line = f"*/{minutes} * * * * {shlex.join(argv)} >/dev/null 2>&1 {_CRON_MARK}"
    warnings = app.watch_warnings(minutes * 60.0)
    for tool in ("scrontab", "crontab"):
        current = _current_table(tool)
        if current is None:
            continue
        kept = [x for x in current.splitlines() if _CRON_MARK not in x]
        _write_table(tool, "\n".join([*kept, line]) + "\n")
        if as_json:
            print_json({"installed": line, "with": tool, "warnings": warnings})
        else:
            print(f"installed with {tool}: {line}")
            for warning in warnings:
                note(f"jobsmith watch: warning: {warning}")
        return
    raise ConfigError(
        "neither scrontab nor crontab is usable on this host: run `jobsmith watch` in tmux"
    )


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


def _current_table(tool: str) -> str | None:
    """The user's current table, '' if none yet, None if the tool is missing or disabled."""
    path = shutil.which(tool)
    if path is None:
        return None
    res = subprocess.run([path, "-l"], capture_output=True, text=True)
    if res.returncode == 0:
        return res.stdout
    return "" if "no crontab" in res.stderr.lower() else None


def _write_table(tool: str, text: str) -> None:
    with tempfile.NamedTemporaryFile("w", suffix=".cron", delete=False) as fh:
        fh.write(text)
    try:
        subprocess.run([tool, fh.name], check=True, capture_output=True, text=True)
    finally:
        Path(fh.name).unlink(missing_ok=True)


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

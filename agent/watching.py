"""Running the watcher: once (cron), forever (apscheduler), or installed in the crontab."""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
from typing import TYPE_CHECKING

from jobsmith.agent.output import note, print_json
from jobsmith.agent.watch import WatchCycle, next_interval
from jobsmith.agent.watchlock import WatcherRunning
from jobsmith.errors import JobsmithError

if TYPE_CHECKING:
    from jobsmith.agent.app import App

#: how far the interval grows while Slurm does not answer
MAX_BACKOFF_S = 3600.0
_CRON_MARK = "# jobsmith watch"


def run_once(app: App, interval_s: float, as_json: bool) -> WatchCycle | None:
    """One cycle under the user's lock; a no-op if another watcher holds it."""
    lock = app.watch_lock(interval_s)
    try:
        lock.acquire()
    except WatcherRunning as err:
        note(f"jobsmith watch: {err}; nothing to do")
        return None
    try:
        cycle = app.watch_cycle()
    finally:
        lock.release()
    _show(cycle, as_json)
    return cycle


def run_forever(app: App, interval_s: float, as_json: bool) -> None:
    """Poll every interval with apscheduler, backing off while Slurm does not answer."""
    from apscheduler.schedulers.blocking import BlockingScheduler

    lock = app.watch_lock(interval_s)
    lock.acquire()
    scheduler = BlockingScheduler()
    state = {"interval": interval_s}

    def tick() -> None:
        lock.heartbeat()
        cycle = app.watch_cycle()
        _show(cycle, as_json)
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
    """Add `jobsmith watch --once` to the user's crontab (idempotent)."""
    crontab = shutil.which("crontab")
    if crontab is None:
        raise JobsmithError("no crontab command on this host: run `jobsmith watch` in tmux/screen")
    minutes = max(1, round(interval_s / 60))
    argv = [
        sys.argv[0],
        *(["--site", str(app.site_file)] if app.site_file else []),
        "watch",
        "--once",
    ]
    line = f"*/{minutes} * * * * {shlex.join(argv)} >/dev/null 2>&1 {_CRON_MARK}"
    current = subprocess.run([crontab, "-l"], capture_output=True, text=True).stdout
    kept = [x for x in current.splitlines() if _CRON_MARK not in x]
    subprocess.run([crontab, "-"], input="\n".join([*kept, line]) + "\n", text=True, check=True)
    if as_json:
        print_json({"installed": line})
    else:
        print(f"installed in your crontab: {line}")


def _show(cycle: WatchCycle, as_json: bool) -> None:
    if as_json:
        print_json(cycle)
        return
    if not cycle.scheduler_ok:
        note(f"jobsmith watch: Slurm did not answer ({cycle.error}); states kept as they were")
    for change in cycle.changes:
        note(f"job {change.job_id}: {change.previous or 'new'} -> {change.state.value}")
    for decision in cycle.decisions:
        note(f"job {decision.get('job_id')}: {decision.get('action')}: {decision.get('reason')}")

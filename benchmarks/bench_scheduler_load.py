"""What jobsmith costs the scheduler, counted by the scheduler itself.

Claims checked (the project's issue), on a real Slurm, in one run:

1. A 1,000-task array is ONE sbatch call: one REQUEST_SUBMIT_BATCH_JOB RPC in `sdiag`
   (and, for contrast, 1,000 separate jobs are 1,000 of them).
2. The status of 1,000 jobs is ONE sacct call: one DBD_GET_JOBS_COND RPC in
   `sacctmgr show stats`, plus at most one squeue (one job-info RPC in `sdiag`), next to
   naive per-job polling of the same jobs (`sacct -j ID` per job, `squeue -j ID` per job).

Everything goes through jobsmith's own adapter (SlurmScheduler over a Transport). Jobs are
submitted and polled as the lab's unprivileged user (default `alice`), the way real users
do; only the two statistics commands run as root (`sacctmgr show stats` is admin-only).

The jobs are tiny (`true`, 50 MB, partition debug, output to /dev/null) and carry an
extra `#SBATCH --nice` line, so other sessions sharing the lab node go ahead of the 1,000
tasks; the separate jobs also carry `#SBATCH --hold` and never run (JobOptions has no
field for either, so they are appended after the adapter's rendered directives).

The statistics parsing, the snapshots and the run-as-user transport live in slurm_stats.py
beside this file (shared with bench_watch_load.py).

Counters are never reset: each measurement is the difference between two snapshots of
`sdiag` and `sacctmgr show stats` (other sessions may be reading them). Taking a snapshot
costs a few RPCs itself (REQUEST_STATS_INFO, DBD_GET_STATS, ...); that overhead is measured
on empty windows at start and subtracted ("net" counts). The counters are cluster-wide, so
anything another user does during a window is counted too: the single-call windows are
repeated and every repetition is printed.

Run as root on the lab cluster (scripts/slurm-lab up):

    sudo .venv/bin/python benchmarks/bench_scheduler_load.py
    sudo .venv/bin/python benchmarks/bench_scheduler_load.py --tasks 50 --separate 20  # quick
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from slurm_stats import (
    JOB_INFO_RPCS,
    RunAsTransport,
    calibrate,
    job_info_rpcs,
    log,
    served_around,
    wait_for_accounting,
)

from jobsmith.adapters.options import JobOptions
from jobsmith.adapters.scheduler import JobStatus, task_range_size
from jobsmith.adapters.slurm.commands import argv
from jobsmith.adapters.slurm.commands.options import render_directives
from jobsmith.adapters.slurm.parsing.parse import SACCT_FIELDS, SQUEUE_FORMAT, parse_sacct_parsable
from jobsmith.adapters.slurm.scheduler import SlurmScheduler
from jobsmith.adapters.slurm.transport import LocalTransport

#: Added to the jobs' --nice: other sessions sharing the lab node go ahead of our 1,000 tasks.
NICE = 1000

# --- running commands ---------------------------------------------------------------------


# --- one measured window ------------------------------------------------------------------


@dataclass
class Window:
    """What one variant cost: RPCs on both daemons, commands run, wall time."""

    name: str
    jobs: int
    ctld: dict[str, int]
    dbd: dict[str, int]
    ctld_users: dict[str, int]
    dbd_users: dict[str, int]
    commands: dict[str, int]
    wall_s: float
    in_commands_s: float
    note: str = ""

    @property
    def job_info_rpcs(self) -> int:
        """RPCs that read job records from slurmctld (any squeue variant)."""
        return job_info_rpcs(self.ctld)


@dataclass
class Meter:
    """Takes snapshots around a callable and keeps the net differences."""

    root: LocalTransport
    user: RunAsTransport
    ctld_overhead: dict[str, int] = field(default_factory=dict)
    dbd_overhead: dict[str, int] = field(default_factory=dict)
    windows: list[Window] = field(default_factory=list)

    def calibrate(self, rounds: int = 3) -> None:
        """Measure empty windows: the floor of their deltas is what a snapshot costs."""
        self.ctld_overhead, self.dbd_overhead = calibrate(self.root, rounds)

    def measure(self, name: str, jobs: int, action: Callable[[], str | None]) -> Window:
        """Run action between two snapshots; its return value becomes the window's note."""
        self.user.reset_tally()
        with served_around(self.root, self.ctld_overhead, self.dbd_overhead) as served:
            started = time.perf_counter()
            note = action() or ""
            wall = time.perf_counter() - started
        window = Window(
            name=name,
            jobs=jobs,
            ctld=served.ctld,
            dbd=served.dbd,
            ctld_users=served.ctld_users,
            dbd_users=served.dbd_users,
            commands=dict(self.user.calls),
            wall_s=wall,
            in_commands_s=self.user.seconds,
            note=note,
        )
        self.windows.append(window)
        log(f"{name}: {_brief(window)}")
        return window


# --- the benchmark ------------------------------------------------------------------------


def _brief(w: Window) -> str:
    return (
        f"commands {w.commands}, submit RPCs {w.ctld.get('REQUEST_SUBMIT_BATCH_JOB', 0)}, "
        f"job-info RPCs {w.job_info_rpcs}, DBD_GET_JOBS_COND {w.dbd.get('DBD_GET_JOBS_COND', 0)}, "
        f"{w.wall_s:.2f} s"
    )


def make_script(opts: JobOptions, body: str, extra: Iterable[str] = ()) -> str:
    """A batch script: the adapter's #SBATCH lines, extra directives, then the body."""
    lines = ["#!/bin/bash", *render_directives(opts), *(f"#SBATCH {x}" for x in extra), body]
    return "\n".join(lines) + "\n"


def job_options(name: str, workdir: str, **kwargs: Any) -> JobOptions:
    """Small, short, output-free jobs in partition debug, tagged as jobsmith tags them."""
    return JobOptions(
        job_name=f"{name}.js-{secrets.token_hex(6)}",
        partition="debug",
        mem_mb=50,
        time_limit_s=60,
        output="/dev/null",
        error="/dev/null",
        chdir=workdir,
        **kwargs,
    )


def task_total(status: JobStatus) -> tuple[int, int]:
    """(tasks accounted for, tasks in a terminal state) of an array's status."""
    seen = sum(task_range_size(t) for t in status.tasks)
    done = sum(task_range_size(t) for t in status.tasks if t.state.is_terminal)
    return seen, done


def wait_for_array(
    sched: SlurmScheduler, array_id: str, tasks: int, since: datetime, timeout_s: float
) -> int:
    """Poll status() until every task has ended and accounting holds all of them.

    Returns the number of status() calls it took; progress goes to stderr.
    """
    deadline = time.monotonic() + timeout_s
    polls = 0
    started = time.monotonic()
    while True:
        polls += 1
        st = sched.status([array_id], since)[array_id]
        _seen, done = task_total(st)
        log(
            f"array {array_id}: {done}/{tasks} tasks ended {st.task_counts} "
            f"({time.monotonic() - started:.0f} s)"
        )
        if done >= tasks and st.state.is_terminal:
            records = sched.accounting([array_id], since)
            in_acct = [r for r in records if r.array_task_id is not None and r.state.is_terminal]
            if len(in_acct) >= tasks:
                return polls
            log(f"accounting has {len(in_acct)}/{tasks} ended task records; waiting for it")
        if time.monotonic() > deadline:
            raise SystemExit(f"array {array_id} not finished after {timeout_s:.0f} s")
        time.sleep(5 if done < tasks else 2)


def naive_sacct(user: RunAsTransport, ids: Sequence[str], since: datetime) -> Callable[[], str]:
    """One `sacct -j ID` per job, the adapter's own query narrowed to that one id."""

    def run() -> str:
        empty = 0
        for job_id in ids:
            res = user.run(
                argv.sacct_jobs([job_id], since, SACCT_FIELDS), timeout=60, env=argv.SLURM_ENV
            )
            if res.returncode != 0 or not parse_sacct_parsable(res.stdout, argv.DELIMITER):
                empty += 1
        return f"{len(ids) - empty}/{len(ids)} answered with a record"

    return run


def naive_squeue(user: RunAsTransport, ids: Sequence[str]) -> Callable[[], str]:
    """One `squeue -j ID` per job, with the adapter's output format."""

    def run() -> str:
        found = 0
        for job_id in ids:
            res = user.run(
                ["squeue", "-j", job_id, "--noheader", "-t", "all", f"--Format={SQUEUE_FORMAT}"],
                timeout=60,
                env=argv.SLURM_ENV,
            )
            found += res.returncode == 0 and bool(res.stdout.strip())
        return f"{found}/{len(ids)} still in slurmctld (the rest: 'Invalid job id')"

    return run


def one_status(
    sched: SlurmScheduler, ids: Sequence[str], since: datetime, expect_tasks: int | None
) -> Callable[[], str]:
    """One SlurmScheduler.status() call for all ids; the note says what it returned."""

    def run() -> str:
        st = sched.status(ids, since)
        if expect_tasks is not None:
            seen, done = task_total(st[ids[0]])
            return f"{seen} task records, {done} ended, state {st[ids[0]].state.value}"
        states: dict[str, int] = {}
        for s in st.values():
            states[s.state.value] = states.get(s.state.value, 0) + 1
        return f"{len(st)} jobs: {states}"

    return run


@dataclass
class Environment:
    """Where the numbers came from."""

    date: str
    host: str
    nproc: int
    slurm: str
    kernel: str
    user: str


def describe(sched: SlurmScheduler, user: str) -> Environment:
    """Date, host, CPU count, Slurm version, kernel."""
    return Environment(
        date=datetime.now().astimezone().isoformat(timespec="seconds"),
        host=os.uname().nodename,
        nproc=os.cpu_count() or 0,
        slurm=sched.version(),
        kernel=os.uname().release,
        user=user,
    )


def run(args: argparse.Namespace) -> tuple[Environment, Meter, dict[str, Any]]:
    """All variants, in order; cancels whatever it submitted, even on failure."""
    root = LocalTransport()
    user = RunAsTransport(args.user)
    sched = SlurmScheduler(user, timeout_s=120)
    meter = Meter(root, user)
    env = describe(sched, args.user)
    log(f"Slurm {env.slurm} on {env.host} ({env.nproc} CPUs), jobs as {args.user}")
    meter.calibrate()
    log(
        f"measuring overhead per window: sdiag {meter.ctld_overhead}, slurmdbd {meter.dbd_overhead}"
    )
    since = datetime.now() - timedelta(minutes=5)
    extra: dict[str, Any] = {}
    submitted: list[str] = []
    try:
        # 1. a whole array in one sbatch
        array_opts = job_options("bench-array", args.workdir, array=f"0-{args.tasks - 1}")
        array_script = make_script(array_opts, "true", [f"--nice={NICE}"])
        array_id = ""

        def submit_array() -> str:
            nonlocal array_id
            array_id = sched.submit(array_script, array_opts).job_id
            submitted.append(array_id)
            return f"array job {array_id}"

        meter.measure(f"submit {args.tasks}-task array (1 sbatch)", args.tasks, submit_array)
        t0 = time.monotonic()
        user.reset_tally()
        polls = wait_for_array(sched, array_id, args.tasks, since, args.wait_timeout)
        extra["array_wait"] = {
            "seconds": round(time.monotonic() - t0, 1),
            "status_calls": polls,
            "commands": dict(user.calls),
        }
        task_ids = [f"{array_id}_{i}" for i in range(args.tasks)]

        # 2. status of all tasks: one call against per-task polling
        for rep in range(1, args.repeat + 1):
            meter.measure(
                f"status() of {args.tasks}-task array, 1 call [{rep}]",
                args.tasks,
                one_status(sched, [array_id], since, args.tasks),
            )
        meter.measure(
            f"naive: sacct -j ID per task x{args.tasks}",
            args.tasks,
            naive_sacct(user, task_ids, since),
        )
        meter.measure(
            f"naive: squeue -j ID per task x{args.tasks}", args.tasks, naive_squeue(user, task_ids)
        )

        # 3. separate jobs, held so they stay pending in slurmctld and in accounting
        if args.separate:
            held: list[str] = []

            def submit_held() -> str:
                for i in range(args.separate):
                    o = job_options("bench-held", args.workdir)
                    held.append(
                        sched.submit(make_script(o, "true", ["--hold", f"--nice={NICE}"]), o).job_id
                    )
                    submitted.append(held[-1])
                    if (i + 1) % 100 == 0:
                        log(f"submitted {i + 1}/{args.separate} held jobs")
                return f"jobs {held[0]}..{held[-1]}"

            meter.measure(
                f"submit {args.separate} separate jobs (sbatch each)", args.separate, submit_held
            )
            wait_for_accounting(sched, root, held, since)
            for rep in range(1, args.repeat + 1):
                meter.measure(
                    f"status() of {args.separate} separate jobs, 1 call [{rep}]",
                    args.separate,
                    one_status(sched, held, since, None),
                )
            meter.measure(
                f"naive: sacct -j ID per job x{args.separate}",
                args.separate,
                naive_sacct(user, held, since),
            )
            meter.measure(
                f"naive: squeue -j ID per job x{args.separate}",
                args.separate,
                naive_squeue(user, held),
            )

            def cancel_held() -> str:
                sched.cancel(held)
                return f"scancel with {len(held)} ids"

            meter.measure(
                f"cancel {args.separate} held jobs (1 scancel)", args.separate, cancel_held
            )
            submitted = [j for j in submitted if j not in set(held)]
    finally:
        clean_up(root, user, set(submitted))
    return env, meter, extra


def still_queued(root: LocalTransport, user: str, ids: set[str]) -> set[str]:
    """Which of ids (job or array ids) slurmctld still holds pending, running or completing."""
    res = root.run(["squeue", "-h", "-u", user, "-t", "PD,R,CG", "-o", "%F"], timeout=60)
    return ids & set(res.stdout.split())


def clean_up(root: LocalTransport, user: RunAsTransport, ids: set[str]) -> None:
    """Cancel (as the user) whatever of ids is still queued, and wait until it is gone."""
    deadline = time.monotonic() + 120
    left = still_queued(root, user.user, ids)
    if left:
        log(f"cancelling {len(left)} job ids left over")
        user.run(argv.scancel(sorted(left)), timeout=120)
    while left and time.monotonic() < deadline:
        time.sleep(2)
        left = still_queued(root, user.user, ids)
    if left:
        log(f"still in the queue after 120 s: {sorted(left)[:10]}")


# --- report -------------------------------------------------------------------------------


def report(env: Environment, meter: Meter, extra: Mapping[str, Any]) -> str:
    """The table printed at the end (and pasted into benchmarks/README.md)."""
    out = [
        f"date {env.date}  host {env.host}  nproc {env.nproc}  Slurm {env.slurm}  "
        f"kernel {env.kernel}  jobs run as {env.user}",
        f"measuring overhead subtracted per window: sdiag {meter.ctld_overhead}; "
        f"sacctmgr show stats {meter.dbd_overhead}",
        "",
        f"{'variant':<48} {'cmds':>5} {'SUBMIT':>6} {'JOBINFO':>7} {'ctld':>5} "
        f"{'JOBS_COND':>9} {'dbd':>5} {'wall s':>7}",
    ]
    for w in meter.windows:
        out.append(
            f"{w.name:<48} {sum(w.commands.values()):>5} "
            f"{w.ctld.get('REQUEST_SUBMIT_BATCH_JOB', 0):>6} {w.job_info_rpcs:>7} "
            f"{sum(w.ctld.values()):>5} {w.dbd.get('DBD_GET_JOBS_COND', 0):>9} "
            f"{sum(w.dbd.values()):>5} {w.wall_s:>7.2f}"
        )
    out += [
        "",
        "cmds: Slurm commands this benchmark ran as the user in the window. Net RPC counts:",
        "SUBMIT = REQUEST_SUBMIT_BATCH_JOB, JOBINFO = REQUEST_JOB_INFO + REQUEST_JOB_INFO_SINGLE",
        "+ REQUEST_JOB_USER_INFO, ctld = all slurmctld RPCs (sdiag); JOBS_COND =",
        "DBD_GET_JOBS_COND, dbd = all slurmdbd RPCs (sacctmgr show stats). The counters are",
        "cluster-wide: RPCs beyond what the commands explain come from other users' traffic.",
        "",
        "Every window in full (net RPCs by type; commands run as the user):",
    ]
    for w in meter.windows:
        out += [
            f"- {w.name}: {w.note}",
            f"    commands {w.commands}, {w.in_commands_s:.2f} s of {w.wall_s:.2f} s in them",
            f"    slurmctld {w.ctld}",
            f"    slurmdbd  {w.dbd}",
            f"    by user: slurmctld {w.ctld_users}, slurmdbd {w.dbd_users}",
        ]
    if "array_wait" in extra:
        wait = extra["array_wait"]
        out += [
            "",
            f"waiting for the array: {wait['seconds']} s, {wait['status_calls']} "
            f"status() calls, commands {wait['commands']}",
        ]
    out += ["", *ratios(meter.windows)]
    return "\n".join(out)


def ratios(windows: Sequence[Window]) -> list[str]:
    """The claims, as numbers from this run: submissions, then status against naive polling.

    For the one-call status() the best of its repeats is used (the least disturbed by other
    users); naive windows ran once.
    """
    by_name = {w.name: w for w in windows}
    lines = ["Claims, measured in this run:"]
    submits = [w for w in windows if w.name.startswith("submit ")]
    for w in submits:
        lines.append(
            f"  {w.name}: {w.commands.get('sbatch', 0)} sbatch -> "
            f"{w.ctld.get('REQUEST_SUBMIT_BATCH_JOB', 0)} REQUEST_SUBMIT_BATCH_JOB"
        )
    for unit, label in (("task", "array"), ("job", "separate jobs")):
        single = [w for w in windows if w.name.startswith("status()") and label in w.name]
        if not single:
            continue
        best = min(single, key=lambda w: (sum(w.ctld.values()) + sum(w.dbd.values()), w.wall_s))
        n = best.jobs
        lines.append(
            f"  status of {n} ({label}), one status() call: {_cmds(best)} -> "
            f"{best.dbd.get('DBD_GET_JOBS_COND', 0)} DBD_GET_JOBS_COND, "
            f"{best.job_info_rpcs} job-info RPC(s) ({_job_info(best)}), "
            f"{sum(best.ctld.values())} slurmctld + {sum(best.dbd.values())} slurmdbd RPCs "
            f"in all, {best.wall_s:.2f} s"
        )
        for tool in ("sacct", "squeue"):
            naive = by_name.get(f"naive: {tool} -j ID per {unit} x{n}")
            if naive is None:
                continue
            lines.append(
                f"    naive {tool} -j per {unit}: {_cmds(naive)} -> "
                f"{naive.dbd.get('DBD_GET_JOBS_COND', 0)} DBD_GET_JOBS_COND, "
                f"{naive.job_info_rpcs} job-info RPCs ({_job_info(naive)}), "
                f"{sum(naive.ctld.values())} slurmctld + {sum(naive.dbd.values())} slurmdbd "
                f"RPCs, {naive.wall_s:.1f} s (x{_ratio(naive.wall_s, best.wall_s)} the wall "
                "time of the one call)"
            )
    return lines


def _cmds(w: Window) -> str:
    return " + ".join(f"{n} {prog}" for prog, n in sorted(w.commands.items())) or "no commands"


def _job_info(w: Window) -> str:
    parts = [f"{k} {w.ctld[k]}" for k in JOB_INFO_RPCS if w.ctld.get(k)]
    return ", ".join(parts) or "none"


def _ratio(a: float, b: float) -> str:
    if b <= 0:
        return "inf"
    return f"{a / b:.0f}" if a / b >= 10 else f"{a / b:.1f}"


def main(argv_: Sequence[str] | None = None) -> int:
    """Command line entry point; prints the report to stdout."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=1000, help="array size (default 1000)")
    parser.add_argument(
        "--separate",
        type=int,
        default=1000,
        help="separate held jobs to submit and poll (0 skips; default 1000)",
    )
    parser.add_argument(
        "--repeat", type=int, default=3, help="repetitions of each one-call window (default 3)"
    )
    parser.add_argument("--user", default="alice", help="unprivileged user to run jobs as")
    parser.add_argument(
        "--workdir",
        default="/scratch/alice",
        help="working directory of the jobs (the user must own it)",
    )
    parser.add_argument(
        "--wait-timeout",
        type=float,
        default=3600,
        help="seconds to wait for the array to finish (default 3600)",
    )
    parser.add_argument("--json", type=Path, help="also write every window as JSON here")
    args = parser.parse_args(argv_)
    if os.geteuid() != 0:
        parser.error("run as root: `sacctmgr show stats` is admin-only (jobs run as --user)")
    if subprocess.run(["id", args.user], capture_output=True).returncode != 0:
        parser.error(f"no such user {args.user}")
    env, meter, extra = run(args)
    text = report(env, meter, extra)
    print(text)
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "environment": asdict(env),
                    "windows": [asdict(w) for w in meter.windows],
                    "overhead": {"slurmctld": meter.ctld_overhead, "slurmdbd": meter.dbd_overhead},
                    **extra,
                },
                indent=2,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
